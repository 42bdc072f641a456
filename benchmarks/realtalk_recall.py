"""Evidence recall on REALTALK, real chats between people: memstream through its client
beside a plain LanceDB hybrid search of the same turns, in the same run.

Issue 39's benchmark. REALTALK (Lee et al., 2025, arXiv 2502.13270; ``realtalk.py``) holds
ten real 21-day chats between pairs of people, 8,944 turns in 219 sessions, and 706
questions whose evidence turns name turns of their chat. Every chat goes in as a user's app
would publish it: one ``MemoryClient.add`` per turn, one memstream session per REALTALK
session (closed by the add of its last turn), each turn's real time as ``occurred_at`` and its
``dia_id`` as the message's event id; the first speaker's turns as role ``user``, the
other's as ``assistant``. Each chat is published twice, to two users:

* **named**: each message carries its speaker as ``name``, the text as it was typed;
* **unnamed**: no ``name``; the text is ``"Speaker: text"``, as an app that knows no names
  field would write it.

Once the worker has consolidated and projected everything, every question is asked of that
chat's memory with ``MemoryClient.search(question, limit=20)`` as of now (no access event, so
one question's use never ranks the next), and of the **plain search** built in this run: every
turn, as ``"Speaker: text"``, in one LanceDB table with a full-text index and the same
embedder's vectors, searched hybrid and fused by reciprocal rank (LanceDB's
``RRFReranker``), filtered to the chat. A hit's turns are read from it: the ``dia_id``\\ s in a
memory's ``source_event_ids`` (an episode names its turn and the turns its context shows, a
summary the turns it quotes), the row's own ``dia_id`` for the plain search.

Scores, per search and category (multi-hop, time, inference; REALTALK's categories 1-3):
evidence recall@5/10/20 (the share of a question's evidence turns among the turns the first
k hits cite), session recall@5/10 (the share of the sessions holding its evidence among the
sessions of those turns), and each search's latency. ``--steps`` also searches with every
recall step of a search switched on alone over the steps off (``STEPS``), the defaults with
each switched off (or on, for a step off by default), and both without an episode's
neighbouring turns: a copy of the memories whose episodes are found by their own words and
cite their own turn alone. ``--offline`` builds memstream in this process instead (offline
extractor, decisions, projection; no broker): about 15 minutes for both variants, and
``--projection`` keeps what it built for the next run.

Run from the repository root::

    python benchmarks/realtalk_recall.py                  # through the broker and a worker
    python benchmarks/realtalk_recall.py --offline --steps
    python benchmarks/realtalk_recall.py --data /path/to/realtalk --chats Chat_1_Emi_Elise
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dialogue_recall import (
    broker_and_worker,
    hybrid_turns,
    percentile,
    publish_and_follow,
    turn_table,
)
from quality import Conversation, build_extracted
from realtalk import CATEGORIES, Chat, Turn, add_data_arguments, load
from runner import exit_on_sigterm, log, release

from memstream.models.events.consolidation import TranscriptMessage
from memstream.models.events.memory import MemoryAdded
from memstream.models.settings import Settings
from memstream.projections.embedder import Embedder, MiniLMOnnxEmbedder, embedder_from_settings
from memstream.projections.memories import (
    MemoryIndex,
    MemoryProjection,
    SourcePosition,
)
from memstream.projections.resident import ResidentMemories
from memstream.streams.client import MemoryClient

DEPTHS = (5, 10, 20)
SESSION_DEPTHS = (5, 10)
LIMIT = max(DEPTHS)
#: The depth the goals are stated at.
TOP = 10
PLAIN = "plain search: raw turns, LanceDB hybrid, RRF"
MEMSTREAM = "memstream: MemoryClient.search"
VARIANTS = ("named", "unnamed")
#: Bytes the resident search may hold: every user of the benchmark.
RESIDENT_BUDGET = 1 << 30
#: The recall steps of a search, each as the settings that switch it on, or ``summaries``
#: (summaries searched), which a search's own filter switches.
STEPS: dict[str, dict[str, Any]] = {
    "new turns first": {"recall_new_turns_first": True},
    "newer on near ties": {"recall_newer_on_near_ties": True},
    "stale below current": {"recall_stale_below_current": True},
    "own names": {"recall_own_names": True},
    "entity expansion": {"recall_entity_expansion": True},
    "session cap 2": {"recall_session_cap": 2},
    "lexical rerank": {"recall_rerank": "lexical"},
    "summaries": {"summaries": True},
}
#: Every step switched off.
STEPS_OFF: dict[str, Any] = {
    "recall_new_turns_first": False,
    "recall_newer_on_near_ties": False,
    "recall_stale_below_current": False,
    "recall_own_names": False,
    "recall_entity_expansion": False,
    "recall_session_cap": 0,
    "recall_rerank": "none",
    "summaries": False,
}
#: Every step as memstream's defaults have it.
DEFAULTS: dict[str, Any] = {
    **{key: getattr(Settings(), key) for key in STEPS_OFF if key.startswith("recall_")},
    "summaries": True,
}
#: What a search without summaries asks for: every other type it returns.
NOT_SUMMARIES = ("preference", "fact", "episode", "correction", "entity", "task")


@dataclass(frozen=True)
class Hit:
    """One search result: the turns (``dia_id``) it cites, and its text."""

    cited: tuple[str, ...]
    text: str


#: (chat, variant, question) -> hits, best first.
Search = Callable[[Chat, str, str], list[Hit]]


@dataclass
class Tally:
    """One search's figures on one variant."""

    #: Per category, per question: recall at each of DEPTHS, then session recall at each of
    #: SESSION_DEPTHS.
    rows: dict[str, list[list[float]]] = field(default_factory=lambda: defaultdict(list))
    latencies_s: list[float] = field(default_factory=list)

    def means(self, category: str) -> list[float]:
        """The mean of each figure over the category's questions ("all": every question)."""
        rows = (
            [row for rows in self.rows.values() for row in rows]
            if category == "all" else self.rows.get(category, [])
        )
        width = len(DEPTHS) + len(SESSION_DEPTHS)
        return [statistics.fmean(r[i] for r in rows) if rows else 0.0 for i in range(width)]

    def recall_at(self, category: str, depth: int = TOP) -> float:
        return self.means(category)[DEPTHS.index(depth)]


# --- publishing ------------------------------------------------------------------------


def user_id(chat: Chat, variant: str) -> str:
    """The memstream user one chat is published to in one variant."""
    return f"{chat.name.lower().replace('_', '-')}-{variant}"


def message(chat: Chat, turn: Turn, variant: str) -> dict[str, str]:
    """A turn as a chat message: the first speaker is the user, the other the assistant;
    named with its speaker, or the speaker written before the text."""
    role = "user" if turn.speaker == chat.speakers[0] else "assistant"
    if variant == "named":
        return {"role": role, "content": turn.text, "name": turn.speaker}
    return {"role": role, "content": f"{turn.speaker}: {turn.text}"}


def add_chats(client: MemoryClient, chats: Sequence[Chat], variants: Sequence[str]) -> int:
    """Add every session turn by turn, closing each with its last turn; return the turns."""
    added = 0
    for chat in chats:
        for variant in variants:
            for session in chat.sessions:
                session_id: str | None = None
                for index, turn in enumerate(session):
                    made = client.add(
                        [message(chat, turn, variant)],
                        user_id=user_id(chat, variant),
                        session_id=session_id,
                        close=index == len(session) - 1,
                        event_ids=[turn.dia_id],
                        occurred_at=turn.at,
                    )
                    session_id = made["session_id"]
                    added += 1
            log(f"  added {chat.name} ({variant})")
    return added


def transcripts(chats: Sequence[Chat], variants: Sequence[str]) -> list[Conversation]:
    """The chats as the pipeline sees them, one conversation per chat and variant."""
    conversations = []
    for chat in chats:
        for variant in variants:
            sessions = []
            for session in chat.sessions:
                messages = []
                for turn in session:
                    published = message(chat, turn, variant)
                    messages.append(TranscriptMessage(
                        event_id=turn.dia_id, role=published["role"],  # type: ignore[arg-type]
                        name=published.get("name"), content=published["content"],
                        occurred_at=turn.at,
                    ))
                sessions.append(messages)
            conversations.append(Conversation(user_id=user_id(chat, variant), sessions=sessions))
    return conversations


# --- the searches ----------------------------------------------------------------------


def plain_search(directory: Path, chats: Sequence[Chat], embedder: Embedder) -> Search:
    """Every turn as ``"Speaker: text"`` in one LanceDB table: FTS + vectors, RRF, filtered
    to the chat; the same for both variants."""
    rows = [
        {"user_id": chat.name, "turn_id": turn.dia_id, "text": f"{turn.speaker}: {turn.text}"}
        for chat in chats for turn in chat.turns
    ]
    turns = turn_table(directory, rows, embedder)

    def search(chat: Chat, variant: str, question: str) -> list[Hit]:
        found = hybrid_turns(turns, embedder, chat.name, question, limit=LIMIT)
        return [Hit((hit["turn_id"],), hit["text"]) for hit in found]

    return search


def client_search(client: MemoryClient, *, summaries: bool = True) -> Search:
    """``MemoryClient.search(question, limit=20)`` as of now (publishes no access event);
    a hit cites the turns its ``source_event_ids`` name; without ``summaries`` none is
    searched."""
    filters = None if summaries else {"memory_types": list(NOT_SUMMARIES)}

    def search(chat: Chat, variant: str, question: str) -> list[Hit]:
        hits = client.search(
            question, user_id=user_id(chat, variant), limit=LIMIT, as_of=datetime.now(UTC),
            filters=filters,
        )
        return [Hit(tuple(hit["source_event_ids"]), hit["memory"]) for hit in hits]

    return search


def without_neighbours(
    directory: Path, built: MemoryIndex, chats: Sequence[Chat], variants: Sequence[str],
    embedder: Embedder,
) -> MemoryProjection:
    """A copy of ``built``'s active memories whose episodes have no context: each found by its
    own words alone (its vector theirs) and citing its own turn alone, as a store of the
    turns themselves would."""
    copy = MemoryProjection(directory, embedder)
    events = []
    for chat in chats:
        for variant in variants:
            for record in built.list_memories(user_id(chat, variant)):
                events.append((
                    MemoryAdded(
                        event_id=record.event_id, user_id=user_id(chat, variant),
                        session_id=record.session_id, occurred_at=record.created_at,
                        extractor=record.extractor or "offline", memory_id=record.memory_id,
                        memory_type=record.memory_type,  # type: ignore[arg-type]
                        content=record.content, importance=record.importance,
                        extraction_event_id=record.event_id,
                        source_event_ids=(
                            record.source_event_ids[:1] if record.memory_type == "episode"
                            else record.source_event_ids
                        ),
                        entities=record.entities,
                    ),
                    SourcePosition("memstream.memories", 0, len(events)),
                ))
    copy.apply(events)
    copy.refresh_indexes()
    return copy


def step_searches(
    stack: ExitStack, settings: Settings, projection: MemoryIndex, turns_alone: MemoryIndex
) -> dict[str, Search]:
    """Clients with every recall step off, each step alone on top, and the defaults with each
    step off or on; and the steps-off search of ``turns_alone``, ``projection`` without an
    episode's neighbouring turns (:func:`without_neighbours`)."""
    searches: dict[str, Search] = {}

    def client(label: str, steps: Mapping[str, Any], index: MemoryIndex = projection) -> None:
        overrides = {key: value for key, value in steps.items() if key.startswith("recall_")}
        made = MemoryClient(settings.model_copy(update=overrides), projection=index)
        searches[label] = client_search(stack.enter_context(made), summaries=steps["summaries"])

    client("steps off", STEPS_OFF)
    client("steps off, no neighbouring turns", STEPS_OFF, turns_alone)
    for name, step in STEPS.items():
        client(f"steps off + {name}", {**STEPS_OFF, **step})
    client("defaults", DEFAULTS)
    client("defaults, no neighbouring turns", DEFAULTS, turns_alone)
    for name, step in STEPS.items():
        if all(DEFAULTS[key] == value for key, value in step.items()):
            client(f"defaults - {name}", {**DEFAULTS, **{key: STEPS_OFF[key] for key in step}})
        else:
            client(f"defaults + {name}", {**DEFAULTS, **step})
    return searches


# --- scoring ---------------------------------------------------------------------------


def recall(hits: Sequence[Hit], evidence: Sequence[str], depth: int) -> float:
    seen = {turn for hit in hits[:depth] for turn in hit.cited}
    return sum(turn in seen for turn in evidence) / len(evidence)


def session_recall(
    hits: Sequence[Hit], evidence: Sequence[str], depth: int, session_of: Mapping[str, int]
) -> float:
    """The share of the evidence's sessions among the sessions of the turns the first
    ``depth`` hits cite."""
    wanted = {session_of[turn] for turn in evidence}
    seen = {session_of[turn] for hit in hits[:depth] for turn in hit.cited if turn in session_of}
    return len(wanted & seen) / len(wanted)


def run_searches(
    searches: Mapping[str, Search], chats: Sequence[Chat], variants: Sequence[str]
) -> dict[str, dict[str, Tally]]:
    """Ask every question of every chat with every search in every variant, timing each
    call: search name -> variant -> tally (the plain search has one tally, under each
    variant: its turns are the same)."""
    tallies = {name: {variant: Tally() for variant in variants} for name in searches}
    for chat in chats:
        session_of = chat.session_of()
        for question in chat.questions:
            for name, search in searches.items():
                for variant in variants:
                    if name == PLAIN and variant != variants[0]:
                        continue
                    started = time.perf_counter()
                    hits = search(chat, variant, question.question)
                    tally = tallies[name][variant]
                    tally.latencies_s.append(time.perf_counter() - started)
                    tally.rows[question.category].append([
                        *(recall(hits, question.evidence, d) for d in DEPTHS),
                        *(session_recall(hits, question.evidence, d, session_of)
                          for d in SESSION_DEPTHS),
                    ])
    for variant in variants[1:]:
        if PLAIN in tallies:
            tallies[PLAIN][variant] = tallies[PLAIN][variants[0]]
    return tallies


# --- the table -------------------------------------------------------------------------


def print_tables(tallies: Mapping[str, Mapping[str, Tally]], variants: Sequence[str]) -> None:
    """Per variant: recall@10 per category and overall, recall@5/20, session recall,
    latency; then each search's recall@10 against the plain search's."""
    categories = [*CATEGORIES.values()]
    width = max(len(name) for name in tallies)
    for variant in variants:
        print(f"\n== {variant} ==")
        print(f"{'search':{width}}  " + " ".join(f"{c + '@10':>14}" for c in categories)
              + f" {'all@5':>7} {'all@10':>7} {'all@20':>7} {'s@5':>6} {'s@10':>6}"
              + f" {'p50 ms':>7} {'p95 ms':>7}")
        for name, by_variant in tallies.items():
            tally = by_variant[variant]
            overall = tally.means("all")
            latencies = tally.latencies_s
            print(f"{name:{width}}  "
                  + " ".join(f"{tally.recall_at(c):14.3f}" for c in categories)
                  + " " + " ".join(f"{m:7.3f}" for m in overall[: len(DEPTHS)])
                  + " " + " ".join(f"{m:6.3f}" for m in overall[len(DEPTHS):])
                  + f" {1000 * statistics.median(latencies):7.1f}"
                  + f" {1000 * percentile(latencies, 0.95):7.1f}")
        if PLAIN in tallies:
            plain = tallies[PLAIN][variant]
            print(f"\nrecall@{TOP} minus the plain search's ({variant}):")
            print(f"{'':{width}}  " + " ".join(f"{c:>14}" for c in [*categories, "all"]))
            for name, by_variant in tallies.items():
                if name == PLAIN:
                    continue
                tally = by_variant[variant]
                print(f"{name:{width}}  " + " ".join(
                    f"{tally.recall_at(c) - plain.recall_at(c):+14.3f}"
                    for c in [*categories, "all"]
                ))


def as_json(tallies: Mapping[str, Mapping[str, Tally]]) -> dict[str, Any]:
    """The figures as plain data: search -> variant -> category -> figure -> value."""
    out: dict[str, Any] = {}
    for name, by_variant in tallies.items():
        out[name] = {}
        for variant, tally in by_variant.items():
            figures = {}
            for category in [*CATEGORIES.values(), "all"]:
                means = tally.means(category)
                figures[category] = {
                    **{f"recall@{d}": round(m, 4) for d, m in zip(DEPTHS, means, strict=False)},
                    **{f"session@{d}": round(m, 4)
                       for d, m in zip(SESSION_DEPTHS, means[len(DEPTHS):], strict=True)},
                }
            figures["latency_ms"] = {
                "p50": round(1000 * statistics.median(tally.latencies_s), 2),
                "p95": round(1000 * percentile(tally.latencies_s, 0.95), 2),
            }
            out[name][variant] = figures
    return out


# --- the two ways of building memstream -------------------------------------------------


def offline_tallies(
    workdir: Path, chats: Sequence[Chat], variants: Sequence[str], phases: dict[str, float], *,
    steps: bool, built: Path | None = None,
) -> dict[str, dict[str, Tally]]:
    """memstream built in this process without a broker (offline extractor, decisions,
    projection), searched through clients on its resident memories as of now. ``built``: a
    folder to build the projection in, or to take it from when it holds one already."""
    mark = time.perf_counter()
    embedder = MiniLMOnnxEmbedder()
    projection = MemoryProjection(built or workdir / "memstream", embedder)
    if projection.count() == 0:
        log(f"building memstream from {len(chats)} chats x {len(variants)} variants in this "
            "process (about 15 minutes for all of them)")
        build_extracted(transcripts(chats, variants), projection, embedder)
    else:
        log(f"searching the projection already built in {built} ({projection.count()} rows)")
    phases["build"] = time.perf_counter() - mark
    mark = time.perf_counter()
    searches = {PLAIN: plain_search(workdir / "plain", chats, embedder)}
    phases["plain"] = time.perf_counter() - mark
    settings = Settings(data_dir=workdir / "data")
    resident = ResidentMemories(projection, budget_bytes=RESIDENT_BUDGET)
    with ExitStack() as stack:
        client = stack.enter_context(MemoryClient(settings, projection=resident))
        searches[MEMSTREAM] = client_search(client)
        if steps:
            turns_alone = without_neighbours(
                workdir / "without-neighbours", projection, chats, variants, embedder
            )
            held = ResidentMemories(turns_alone, budget_bytes=RESIDENT_BUDGET)
            searches.update(step_searches(stack, settings, resident, held))
        mark = time.perf_counter()
        tallies = run_searches(searches, chats, variants)
        phases["search"] = time.perf_counter() - mark
    return tallies


def online_tallies(
    workdir: Path, chats: Sequence[Chat], variants: Sequence[str], phases: dict[str, float], *,
    steps: bool, timeout_s: float,
) -> dict[str, dict[str, Tally]]:
    """memstream through the client, the embedded broker and one worker."""
    with (
        broker_and_worker(workdir) as (settings, worker),
        MemoryClient(settings) as client,
        ExitStack() as stack,
    ):
        embedder = embedder_from_settings(settings)
        turns = len(variants) * sum(len(chat.turns) for chat in chats)
        _, projection = publish_and_follow(
            settings, embedder, worker, phases, timeout_s,
            lambda: add_chats(client, chats, variants), turns,
        )
        mark = time.perf_counter()
        searches = {
            PLAIN: plain_search(workdir / "plain", chats, embedder),
            MEMSTREAM: client_search(client),
        }
        phases["plain"] = time.perf_counter() - mark
        if steps:
            # Held in this process as the client's own search holds them: the steps are
            # measured on the path that serves (a user over the resident budget is read
            # from the table, whose words are scored over every user's).
            turns_alone = without_neighbours(
                workdir / "without-neighbours", projection, chats, variants, embedder
            )
            searches.update(step_searches(
                stack, settings, ResidentMemories(projection, budget_bytes=RESIDENT_BUDGET),
                ResidentMemories(turns_alone, budget_bytes=RESIDENT_BUDGET),
            ))
        mark = time.perf_counter()
        tallies = run_searches(searches, chats, variants)
        phases["search"] = time.perf_counter() - mark
    return tallies


def main(argv: list[str] | None = None) -> int:
    """Load REALTALK, put it into memstream and the plain search, print the tables."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_data_arguments(parser)
    parser.add_argument("--variants", nargs="*", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--offline", action="store_true",
                        help="build memstream in this process, without broker and worker")
    parser.add_argument("--steps", action="store_true",
                        help="also search with each recall step alone and each default off")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds to wait for the worker to project everything")
    parser.add_argument("--projection", type=Path,
                        help="with --offline: build memstream in this folder, or search what "
                             "an earlier run built there (the same chats and variants)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the logs and data")
    args = parser.parse_args(argv)
    try:
        chats = load(args.data, chats=args.chats)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    exit_on_sigterm()
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="memstream-realtalk-"))
    phases: dict[str, float] = {}
    try:
        if args.offline:
            tallies = offline_tallies(workdir, chats, args.variants, phases, steps=args.steps,
                                      built=args.projection)
            how = "offline: extractor, decisions and projection in this process, no broker"
        else:
            tallies = online_tallies(workdir, chats, args.variants, phases, steps=args.steps,
                                     timeout_s=args.timeout)
            how = "MemoryClient.add turn by turn, the embedded broker and one worker"
    finally:
        release(None, workdir, keep=args.keep)
    questions = [q for chat in chats for q in chat.questions]
    per_category = ", ".join(
        f"{c} {sum(q.category == c for q in questions)}" for c in CATEGORIES.values()
    )
    print(f"REALTALK (Lee et al., 2025, arXiv 2502.13270): {len(chats)} chats, "
          f"{sum(len(c.turns) for c in chats)} turns in {sum(len(c.sessions) for c in chats)} "
          f"sessions, {len(questions)} questions ({per_category})\n{how}; searches as of now, "
          f"{LIMIT} hits")
    print_tables(tallies, args.variants)
    if args.json is not None:
        args.json.write_text(json.dumps(as_json(tallies), indent=2) + "\n", encoding="utf-8")
    wall = time.perf_counter() - started
    print(f"\nwall {wall:.0f} s (" + ", ".join(f"{k} {v:.0f} s" for k, v in phases.items()) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
