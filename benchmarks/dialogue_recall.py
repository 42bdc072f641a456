"""Evidence recall on the dialogue data set: memstream through its client, on the embedded
broker and one worker, beside a raw-turn LanceDB search.

Issue 13's benchmark. The conversations of ``dialogues.py`` go in as a Python user would
write them: for each session, one ``MemoryClient.add`` per turn (the user's turns as role
``user``, the other speaker's as ``assistant``, each with the speaker's ``name``, the turn's
time as ``occurred_at`` and the turn id as the message's event id), the session closed by
the add of its last turn. Once the worker has consolidated and projected everything, every
question is asked three ways:

* **raw turns, LanceDB hybrid (baseline)**: every turn of both speakers in a plain LanceDB
  table, searched with its native full-text index and vectors fused by reciprocal rank,
  with the same embedder: what a user could write in 30 lines with the same libraries;
* **MemoryProjection.search**: memstream's hybrid search on the worker's table, opened by
  this process as any other reader would;
* **MemoryClient.search**: the client's search, ``limit=20`` (the Retriever's ranking).

Scores, per search and category: evidence recall@k, the share of a question's evidence turns
among the turns the first k hits cite (``source_event_ids``; a baseline hit is a turn);
session recall@5 (``s@5``), the share of the sessions holding a question's evidence among the
sessions of the turns the first 5 hits cite;
``ans@10``, how often the answer's words (case ignored) are in the text of the first 10 hits
(a memory's content, and its ``context`` should a hit ever carry one; a turn's text); for
corrections, how often a stale turn is cited above the new one in the first 10 hits; for
facts with a distractor, how often the distractor is cited above the evidence; and each
search's latency. ``--offline`` builds the projection without a broker instead (offline
extractor, decisions, projection in this process, as ``quality.py`` does) and gives a client
that projection to search, as of now.

``--split held-out`` generates the dialogues from seeds kept apart from the default (dev)
ones: tune on dev, report held-out. ``--split foreign`` generates them, from the held-out
seed, with ``dialogues_foreign.py``: names, values and phrasings written apart from the
templates the offline extractor was tuned on. ``--steps`` also searches through clients
with the recall steps off, with the defaults, and with each step that is off by default
switched on over them (``docs/search.md``), beside the raw-turn baseline. The dialogues are
our own: a fixture of specific behaviour, never where a recall goal is met
(``realtalk_recall.py`` measures on real chats).

Each client search publishes an access event, which the worker projects (use counts, and
promotion after ``promote_after_retrievals``), so a question's use can rank a later one;
``--point-in-time`` searches as of now instead, which publishes none.

Run from the repository root::

    python benchmarks/dialogue_recall.py
    python benchmarks/dialogue_recall.py --dialogues 10 --sessions 20 --turns 30 --seed 13
    python benchmarks/dialogue_recall.py --offline
    python benchmarks/dialogue_recall.py --offline --steps --split held-out
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import lancedb
import pyarrow as pa
from aiokafka import TopicPartition
from chatter import backlog
from dialogues import CATEGORIES, Dialogue, Question
from dialogues import generate as generate_dialogues
from dialogues_foreign import generate as generate_foreign
from lancedb.index import FTS
from lancedb.rerankers import RRFReranker
from quality import Conversation, build_extracted
from runner import exit_on_sigterm, log, release

from memstream.models.codec import InvalidEvent, decode_event
from memstream.models.events.consolidation import TranscriptMessage
from memstream.models.events.memory import MemoryAdded, MemoryChange
from memstream.models.settings import Settings
from memstream.projections.embedder import Embedder, MiniLMOnnxEmbedder, embedder_from_settings
from memstream.projections.memories import (
    MemoryHit,
    MemoryIndex,
    MemoryProjection,
    MemoryStore,
    PartitionedMemories,
    SearchFilters,
    SourcePosition,
)
from memstream.projections.resident import ResidentMemories
from memstream.projections.retrieval import Retriever
from memstream.streams.client import MemoryClient
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.tansu import true_end_offsets
from memstream.streams.kafka.topics import Topics
from memstream.streams.worker.process import WorkerProcess

DEPTHS = (5, 10, 20)
#: Depth of the answer-in-text rate, the stale and the distractor counts.
TOP = 10
LIMIT = max(DEPTHS)
#: Bytes the resident search may hold: every user of the benchmark.
RESIDENT_BUDGET = 1 << 30
BASELINE = "raw turns, LanceDB hybrid (baseline)"
#: Depth of session recall: the sessions of the first SESSION_DEPTH hits.
SESSION_DEPTH = 5
#: Added to ``--seed`` for the held-out split: dialogues no setting was tuned on.
HELD_OUT_SEED = 7919
#: ``--steps``: every recall step off, the defaults, then each step that is off by default
#: switched on over the defaults, and the rerank off (realtalk_recall.py measures them one by
#: one on real chats).
STEPS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("steps: none", {"recall_entity_expansion": False, "recall_session_cap": 0,
                     "recall_rerank": "none", "recall_own_names": False,
                     "recall_new_turns_first": False, "recall_newer_on_near_ties": False,
                     "recall_stale_below_current": False}),
    ("steps: defaults", {}),
    ("steps: defaults + own names", {"recall_own_names": True}),
    ("steps: defaults + entity expansion", {"recall_entity_expansion": True}),
    ("steps: defaults + session cap 2", {"recall_session_cap": 2}),
    ("steps: defaults - rerank", {"recall_rerank": "none"}),
)


@dataclass(frozen=True)
class Hit:
    """One search result: the turns it cites, and the text it returns."""

    cited: tuple[str, ...]
    text: str


#: (dialogue, question) -> hits, best first.
Search = Callable[[Dialogue, str], list[Hit]]


@dataclass
class Tally:
    """One search's figures."""

    #: Per category, per question: recall at each depth, the answer-in-text hit (0/1), then
    #: session recall at SESSION_DEPTH.
    rows: dict[str, list[list[float]]] = field(default_factory=lambda: defaultdict(list))
    latencies_s: list[float] = field(default_factory=list)
    stale_above: int = 0
    corrections: int = 0
    distractor_above: int = 0
    with_distractor: int = 0


# --- the baseline ----------------------------------------------------------------------


def turn_table(
    directory: Path, rows: Sequence[Mapping[str, Any]], embedder: Embedder
) -> lancedb.table.Table:
    """``rows`` (``user_id``, ``turn_id``, ``text``, and any other columns) in one LanceDB
    table, with a vector of each text and a full-text index on it."""
    vectors = embedder.embed([row["text"] for row in rows])
    flat = pa.array(vectors.reshape(-1), pa.float32())
    table = pa.Table.from_pylist(list(rows)).append_column(
        "vector", pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])
    )
    turns = lancedb.connect(directory).create_table("turns", table)
    turns.create_index("text", config=FTS(with_position=False))
    return turns


def hybrid_turns(
    turns: lancedb.table.Table, embedder: Embedder, user_id: str, question: str, *,
    limit: int = LIMIT, where: str | None = None,
) -> list[dict[str, Any]]:
    """The user's rows of ``turns`` best matching ``question``, FTS + vectors fused by RRF
    (each row with its ``_relevance_score``), best first; ``where`` narrows the rows too."""
    condition = f"user_id = '{user_id}'"  # ids are the benchmark's own
    if where is not None:
        condition += f" AND ({where})"
    return (
        turns.search(query_type="hybrid")
        .vector(embedder.embed([question])[0])
        .text(question)
        .where(condition, prefilter=True)
        .rerank(RRFReranker())
        .limit(limit)
        .to_list()
    )


def raw_turn_baseline(directory: Path, dialogues: Sequence[Dialogue], embedder: Embedder) -> Search:
    """Every turn of both speakers in one LanceDB table: FTS + vectors, RRF; a user filter."""
    rows = [
        {"user_id": dialogue.user_id, "turn_id": turn.turn_id, "text": turn.text}
        for dialogue in dialogues for turn in dialogue.turns
    ]
    turns = turn_table(directory, rows, embedder)

    def search(dialogue: Dialogue, question: str) -> list[Hit]:
        found = hybrid_turns(turns, embedder, dialogue.user_id, question)
        return [Hit((hit["turn_id"],), hit["text"]) for hit in found]

    return search


# --- memstream hits ----------------------------------------------------------------------


def hit_text(content: str, hit: Mapping[str, Any] | object) -> str:
    """A memory hit's returned text: its content and, should hits ever carry one, its
    ``context``."""
    context = hit.get("context", "") if isinstance(hit, Mapping) else getattr(hit, "context", "")
    return f"{content}\n{context}" if context else content


def memory_hits(hits: Sequence[MemoryHit], turn_of: Mapping[str, str]) -> list[Hit]:
    """Projection hits as cited turns: event ids mapped to turn ids (others dropped)."""
    return [
        Hit(tuple(turn_of[e] for e in hit.source_event_ids if e in turn_of), hit_text(hit.content, hit))
        for hit in hits
    ]


def projection_search(projection: MemoryIndex, turn_of: Mapping[str, str]) -> Search:
    """``MemoryProjection.search``, the first ``LIMIT`` hits."""
    return lambda dialogue, question: memory_hits(
        projection.search(dialogue.user_id, question, limit=LIMIT), turn_of
    )


#: Scales of the default prior weights (importance, recency, use) tried by ``--sweep``.
PRIOR_SCALES = (0.0, 3.0, 10.0)
#: Every type but summaries: the ``--sweep`` search that measures what summaries add.
NO_SUMMARIES = ("preference", "fact", "episode", "correction", "entity")


def sweep_searches(
    projection: MemoryStore, dialogues: Sequence[Dialogue], turn_of: Mapping[str, str]
) -> dict[str, Search]:
    """The Retriever's ranking with the priors scaled, and without summaries, as of the last
    turn (no access events): what justifies the default weights, and what summaries add."""
    now = max(turn.at for dialogue in dialogues for turn in dialogue.turns)
    base = Settings()

    def ranked(settings: Settings, filters: SearchFilters | None = None) -> Search:
        retriever = Retriever(projection, settings, clock=lambda: now)
        return lambda dialogue, question: memory_hits(
            [item.memory for item in
             retriever.search(dialogue.user_id, question, limit=LIMIT, filters=filters)],
            turn_of,
        )

    searches = {}
    for scale in PRIOR_SCALES:
        scaled = Settings(
            weight_importance=base.weight_importance * scale,
            weight_recency=base.weight_recency * scale,
            weight_use=base.weight_use * scale,
        )
        searches[f"Retriever, priors x{scale:g}"] = ranked(scaled)
    searches["Retriever, no summaries"] = ranked(base, SearchFilters(memory_types=NO_SUMMARIES))
    return searches


def without_context(
    workdir: Path, built: MemoryStore, dialogues: Sequence[Dialogue], embedder: Embedder
) -> MemoryProjection:
    """A copy of ``built``'s active memories without their contexts (episodes indexed by
    their own words only): what the context adds."""
    copy = MemoryProjection(workdir / "no-context", embedder)
    events = []
    for dialogue in dialogues:
        for record in built.list_memories(dialogue.user_id):
            events.append((
                MemoryAdded(
                    event_id=record.event_id, user_id=dialogue.user_id,
                    session_id=record.session_id, occurred_at=record.created_at,
                    extractor=record.extractor or "offline/2", memory_id=record.memory_id,
                    memory_type=record.memory_type,  # type: ignore[arg-type]
                    content=record.content, importance=record.importance,
                    extraction_event_id=record.event_id,
                    source_event_ids=record.source_event_ids,
                ),
                SourcePosition("memstream.memories", 0, len(events)),
            ))
    copy.apply(events)
    copy.refresh_indexes()
    return copy


# --- through the client, on the broker -------------------------------------------------


def add_dialogues(client: MemoryClient, dialogues: Sequence[Dialogue]) -> dict[str, str]:
    """Add every session turn by turn, closing each with its last turn; return the map from
    the published message event ids to turn ids."""
    turn_of: dict[str, str] = {}
    for number, dialogue in enumerate(dialogues, start=1):
        for session in dialogue.sessions:
            session_id: str | None = None
            for index, turn in enumerate(session):
                added = client.add(
                    [{
                        "role": "user" if turn.speaker == dialogue.user else "assistant",
                        "content": turn.text,
                        "name": turn.speaker,
                    }],
                    user_id=dialogue.user_id,
                    session_id=session_id,
                    # The client has no call that only closes a session: the last turn's add
                    # publishes the close (an explicit one) after the message.
                    close=index == len(session) - 1,
                    event_ids=[turn.turn_id],
                    occurred_at=turn.at,
                )
                session_id = added["session_id"]
                if turn.turn_id not in added["event_ids"]:
                    raise RuntimeError(f"the client did not keep event id {turn.turn_id}")
                turn_of[turn.turn_id] = turn.turn_id
        log(f"  added dialogue {number}/{len(dialogues)} ({dialogue.user_id})")
    return turn_of


def memory_event_ends(settings: Settings) -> dict[int, int]:
    """Per partition of the memories topic, 1 + the offset of its last memory event (an
    added memory or a change): where the projection must be for everything to be in it.
    Extraction records make no row, so the topic's end itself would never be reached; nor
    do events published again (a decision re-delivered after a worker died: same event id),
    which the projection takes once, at their first offset."""
    topics = Topics.from_settings(settings)
    ends: dict[int, int] = {}
    seen: set[str] = set()
    for record in asyncio.run(read_topic(settings, topics.memories, timeout_s=120)):
        try:
            event = decode_event(record.value, max_bytes=settings.max_record_bytes)
        except InvalidEvent:
            continue
        if isinstance(event, MemoryAdded | MemoryChange) and event.event_id not in seen:
            seen.add(event.event_id)
            ends[record.partition] = record.offset + 1
    return ends


_Published = TypeVar("_Published")


def publish_and_follow(
    settings: Settings, embedder: Embedder, worker: WorkerProcess, phases: dict[str, float],
    timeout_s: float, publish: Callable[[], _Published], turns: int,
) -> tuple[_Published, PartitionedMemories]:
    """``publish()`` the ``turns`` (timed as ``phases["add"]``), then the worker's table, read
    by this process as another reader would, once it holds everything published (the wait
    is ``phases["project"]``)."""
    mark = time.perf_counter()
    published = publish()
    phases["add"] = time.perf_counter() - mark
    log(f"added {turns} turns in {phases['add']:.0f} s; waiting for the worker")
    mark = time.perf_counter()
    projection = PartitionedMemories.from_settings(settings, embedder)
    wait_until_projected(settings, projection, worker, timeout_s)
    phases["project"] = time.perf_counter() - mark
    log(f"projected: {projection.count()} memory rows, {phases['project']:.0f} s after the "
        "last add")
    return published, projection


def wait_until_projected(
    settings: Settings, projection: MemoryStore, worker: WorkerProcess, timeout_s: float
) -> None:
    """Poll until the workers' group has committed every chat event and consolidation
    request (nothing is left to extract) and the projection holds every memory event of the
    memories topic, and the topic did not grow meanwhile."""
    topics = Topics.from_settings(settings)
    tps = [TopicPartition(topics.memories, p) for p in range(settings.partitions)]
    deadline = time.monotonic() + timeout_s
    next_report = time.monotonic() + 15
    seen: dict[TopicPartition, int] | None = None
    needed: dict[int, int] = {}
    while time.monotonic() < deadline:
        if worker.exited():
            raise RuntimeError("the worker exited while the benchmark waited for it")
        left = asyncio.run(backlog(settings))
        if left == 0:
            ends = asyncio.run(true_end_offsets(settings.broker, tps))
            if ends != seen:  # read the topic again only when it grew
                seen, needed = ends, memory_event_ends(settings)
            positions = projection.positions()
            behind = sum(
                max(0, end - positions.get((topics.memories, p), 0)) for p, end in needed.items()
            )
            if behind == 0 and asyncio.run(true_end_offsets(settings.broker, tps)) == seen:
                return
        if time.monotonic() > next_report:
            next_report = time.monotonic() + 15
            log(f"  waiting: {left} chat/consolidation records not committed, "
                f"{projection.count()} memory rows")
        time.sleep(0.25)
    raise TimeoutError(f"not projected within {timeout_s:.0f} s")


def client_search(client: MemoryClient, turn_of: Mapping[str, str], *, point_in_time: bool) -> Search:
    """``MemoryClient.search(question, user_id=..., limit=LIMIT)``; with ``point_in_time``
    as of now, which publishes no access event (so earlier questions' use ranks nothing)."""

    def search(dialogue: Dialogue, question: str) -> list[Hit]:
        as_of = datetime.now(UTC) if point_in_time else None
        hits = client.search(question, user_id=dialogue.user_id, limit=LIMIT, as_of=as_of)
        return [
            Hit(
                tuple(turn_of[e] for e in hit["source_event_ids"] if e in turn_of),
                hit_text(hit["memory"], dict(hit)),
            )
            for hit in hits
        ]

    return search


def step_searches(
    stack: ExitStack, settings: Settings, projection: MemoryIndex, turn_of: Mapping[str, str]
) -> dict[str, Search]:
    """``MemoryClient.search`` (as of now) with each setting of :data:`STEPS` over
    ``settings``: a client per step, on ``projection``."""
    searches: dict[str, Search] = {}
    for label, overrides in STEPS:
        client = stack.enter_context(
            MemoryClient(settings.model_copy(update=overrides), projection=projection)
        )
        searches[f"MemoryClient.search, {label}"] = client_search(client, turn_of, point_in_time=True)
    return searches


# --- without a broker ------------------------------------------------------------------


def conversations(dialogues: Sequence[Dialogue]) -> list[Conversation]:
    """The dialogues as the pipeline sees them: the user's turns are ``user`` messages, the
    other speaker's ``assistant`` messages with the speaker's name."""
    return [
        Conversation(
            user_id=dialogue.user_id,
            sessions=[
                [
                    TranscriptMessage(
                        event_id=turn.turn_id,
                        role="user" if turn.speaker == dialogue.user else "assistant",
                        name=turn.speaker,
                        content=turn.text,
                        occurred_at=turn.at,
                    )
                    for turn in session
                ]
                for session in dialogue.sessions
            ],
        )
        for dialogue in dialogues
    ]


def offline_tallies(
    workdir: Path, dialogues: Sequence[Dialogue], phases: dict[str, float], *, sweep: bool,
    steps: bool = False,
) -> dict[str, Tally]:
    """memstream built in this process without a broker, as ``quality.py`` does, searched
    with the projection and with a client reading it (as of now, so it publishes nothing)."""
    mark = time.perf_counter()
    embedder = MiniLMOnnxEmbedder()
    projection = MemoryProjection(workdir / "memstream", embedder)
    build_extracted(conversations(dialogues), projection, embedder)
    turn_of = {turn.turn_id: turn.turn_id for dialogue in dialogues for turn in dialogue.turns}
    searches = {BASELINE: raw_turn_baseline(workdir / "raw", dialogues, embedder)}
    phases["build"] = time.perf_counter() - mark
    settings = Settings(data_dir=workdir / "data")
    resident = ResidentMemories(projection, budget_bytes=RESIDENT_BUDGET)
    with (
        MemoryClient(settings, projection=projection) as client,
        MemoryClient(settings, projection=resident) as held,
        ExitStack() as stack,
    ):
        searches["MemoryProjection.search"] = projection_search(projection, turn_of)
        searches["MemoryClient.search"] = client_search(client, turn_of, point_in_time=True)
        searches["ResidentMemories.search"] = projection_search(resident, turn_of)
        searches["MemoryClient.search, resident"] = client_search(held, turn_of, point_in_time=True)
        if steps:
            searches.update(step_searches(stack, settings, resident, turn_of))
        if sweep:
            searches.update(sweep_searches(projection, dialogues, turn_of))
            plain = without_context(workdir, projection, dialogues, embedder)
            searches["MemoryProjection.search, no context"] = projection_search(plain, turn_of)
        mark = time.perf_counter()
        tallies = run_searches(searches, dialogues)
        phases["search"] = time.perf_counter() - mark
    return tallies


def online_tallies(
    workdir: Path, dialogues: Sequence[Dialogue], phases: dict[str, float], *,
    point_in_time: bool, timeout_s: float, sweep: bool, steps: bool = False,
) -> dict[str, Tally]:
    """memstream through the client, the embedded broker and one worker."""
    turns = sum(len(d.turns) for d in dialogues)
    with (
        broker_and_worker(workdir) as (settings, worker),
        MemoryClient(settings) as client,
        ExitStack() as stack,
    ):
        embedder = embedder_from_settings(settings)  # the one the client uses too
        turn_of, projection = publish_and_follow(
            settings, embedder, worker, phases, timeout_s,
            lambda: add_dialogues(client, dialogues), turns,
        )
        mark = time.perf_counter()
        searches = {
            BASELINE: raw_turn_baseline(workdir / "raw", dialogues, embedder),
            "MemoryProjection.search": projection_search(projection, turn_of),
            "MemoryClient.search": client_search(client, turn_of, point_in_time=point_in_time),
        }
        if steps:
            searches.update(step_searches(stack, settings, projection, turn_of))
        if sweep:
            searches.update(sweep_searches(projection, dialogues, turn_of))
        phases["baseline"] = time.perf_counter() - mark
        mark = time.perf_counter()
        tallies = run_searches(searches, dialogues)
        phases["search"] = time.perf_counter() - mark
    return tallies


# --- scoring ---------------------------------------------------------------------------


def recall(hits: Sequence[Hit], evidence: Sequence[str], depth: int) -> float:
    seen = {turn for hit in hits[:depth] for turn in hit.cited}
    return sum(turn in seen for turn in evidence) / len(evidence)


def session_of(turn_id: str) -> str:
    """The session of a turn, from its id (``<dialogue>/<session>/<turn>``)."""
    return turn_id.rsplit("/", 1)[0]


def session_recall(hits: Sequence[Hit], evidence: Sequence[str], depth: int) -> float:
    """The share of the evidence's sessions among the sessions the first ``depth`` hits cite."""
    wanted = {session_of(turn) for turn in evidence}
    seen = {session_of(turn) for hit in hits[:depth] for turn in hit.cited}
    return len(wanted & seen) / len(wanted)


def first_rank(hits: Sequence[Hit], turns: Sequence[str], depth: int) -> int | None:
    """0-based rank of the first of the top ``depth`` hits citing any of ``turns``."""
    wanted = set(turns)
    return next((rank for rank, hit in enumerate(hits[:depth]) if wanted & set(hit.cited)), None)


def above(hits: Sequence[Hit], wrong: Sequence[str], right: Sequence[str]) -> bool:
    """Whether a hit citing ``wrong`` comes before every hit citing ``right`` in the top
    ``TOP`` (a hit citing both is not above)."""
    first_wrong, first_right = first_rank(hits, wrong, TOP), first_rank(hits, right, TOP)
    return first_wrong is not None and (first_right is None or first_wrong < first_right)


def score(tally: Tally, question: Question, hits: Sequence[Hit]) -> None:
    returned = "\n".join(hit.text for hit in hits[:TOP]).lower()
    answered = float(question.answer.lower() in returned)
    tally.rows[question.category].append(
        [*(recall(hits, question.evidence, depth) for depth in DEPTHS), answered,
         session_recall(hits, question.evidence, SESSION_DEPTH)]
    )
    if question.stale:
        tally.corrections += 1
        tally.stale_above += above(hits, question.stale, question.evidence)
    if question.distractors:
        tally.with_distractor += 1
        tally.distractor_above += above(hits, question.distractors, question.evidence)


def run_searches(searches: Mapping[str, Search], dialogues: Sequence[Dialogue]) -> dict[str, Tally]:
    """Ask every question of every dialogue with every search, timing each call."""
    tallies = {name: Tally() for name in searches}
    for dialogue in dialogues:
        for question in dialogue.questions:
            for name, search in searches.items():
                started = time.perf_counter()
                hits = search(dialogue, question.question)
                tallies[name].latencies_s.append(time.perf_counter() - started)
                score(tallies[name], question, hits)
    return tallies


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(share * len(ordered)) - 1)]


def print_table(tallies: Mapping[str, Tally], header: str) -> None:
    """The recall table, the ratio lines, stale and distractor counts, latencies."""
    categories = [*CATEGORIES, "all"]

    def rows_of(tally: Tally, category: str) -> list[list[float]]:
        if category == "all":
            return [row for c in CATEGORIES for row in tally.rows[c]]
        return tally.rows[category]

    def means(tally: Tally, category: str) -> list[float]:
        rows = rows_of(tally, category)
        return [statistics.fmean(r[i] for r in rows) if rows else 0.0 for i in range(len(DEPTHS) + 2)]

    def pct(part: int, whole: int) -> str:
        return f"{part}/{whole} ({100 * part / whole:.1f} %)" if whole else "-"

    print(header)
    width = max(len(name) for name in tallies)
    print(f"{'search':{width}}  {'category':13} {'n':>4} "
          + " ".join(f"{'@' + str(d):>6}" for d in DEPTHS) + f" {'ans@' + str(TOP):>7}"
          + f" {'s@' + str(SESSION_DEPTH):>6}")
    for name, tally in tallies.items():
        for category in categories:
            figures = means(tally, category)
            print(f"{name:{width}}  {category:13} {len(rows_of(tally, category)):>4} "
                  + " ".join(f"{m:6.3f}" for m in figures[:-2]) + f" {figures[-2]:7.3f}"
                  + f" {figures[-1]:6.3f}")
        print()
    baseline = tallies[BASELINE]
    print(f"recall@{TOP}, memstream / baseline:")
    print(f"  {'':{width}}  " + " ".join(f"{c:>13}" for c in categories))
    at = DEPTHS.index(TOP)
    for name, tally in tallies.items():
        if name == BASELINE:
            continue
        ratios = []
        for category in categories:
            base = means(baseline, category)[at]
            ratios.append(f"{means(tally, category)[at] / base:13.2f}" if base else f"{'-':>13}")
        print(f"  {name:{width}}  " + " ".join(ratios))
    print(f"\nstale turn cited above the new one in the top {TOP} (corrections; lower is better):")
    for name, tally in tallies.items():
        print(f"  {name:{width}}  {pct(tally.stale_above, tally.corrections)}")
    print(f"\ndistractor (another person's fact of the same kind) cited above the evidence in the "
          f"top {TOP} (lower is better):")
    for name, tally in tallies.items():
        print(f"  {name:{width}}  {pct(tally.distractor_above, tally.with_distractor)}")
    print("\nsearch latency, ms:")
    for name, tally in tallies.items():
        values = tally.latencies_s
        print(f"  {name:{width}}  p50 {1000 * statistics.median(values):7.1f}   "
              f"p95 {1000 * percentile(values, 0.95):7.1f}")


@contextmanager
def broker_and_worker(workdir: Path) -> Iterator[tuple[Settings, WorkerProcess]]:
    """The embedded broker and one worker, with settings that point at them."""
    with EmbeddedBroker(free_port(), log_dir=workdir) as broker:
        settings = Settings(broker=broker.address, data_dir=workdir / "data", web_port=free_port())
        log(f"broker on {broker.address}; starting a worker (log: {workdir / 'worker.log'})")
        with WorkerProcess(settings, log_path=workdir / "worker.log") as worker:
            yield settings, worker


def main(argv: list[str] | None = None) -> int:
    """Generate the dialogues, put them into memstream and the baseline, print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dialogues", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=30, help="turns per session (about)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--offline", action="store_true",
                        help="build memstream in this process, without broker and worker")
    parser.add_argument("--point-in-time", action="store_true",
                        help="client searches as of now: no access events, so no question's "
                             "use ranks a later one")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds to wait for the worker to project everything")
    parser.add_argument("--keep", action="store_true", help="keep the logs and data")
    parser.add_argument("--sweep", action="store_true",
                        help="also rank with the priors x0, x3, x10 and without summaries "
                             "(and, with --offline, search a copy without contexts)")
    parser.add_argument("--split", choices=("dev", "held-out", "foreign"), default="dev",
                        help="dev: the seed given; held-out: dialogues from seeds kept apart "
                             f"(--seed + {HELD_OUT_SEED}), never tuned on; foreign: the "
                             "held-out seeds, dialogues_foreign.py's own words and phrasings")
    parser.add_argument("--steps", action="store_true",
                        help="also search with the recall steps off, the defaults, and each "
                             "step that is off by default switched on over them")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    started = time.perf_counter()
    seed = args.seed + (HELD_OUT_SEED if args.split != "dev" else 0)
    generate = generate_foreign if args.split == "foreign" else generate_dialogues
    dialogues = generate(args.dialogues, args.sessions, args.turns, seed)
    turns = sum(len(d.turns) for d in dialogues)
    asked = sum(len(d.questions) for d in dialogues)
    workdir = Path(tempfile.mkdtemp(prefix="memstream-dialogues-"))
    phases: dict[str, float] = {}
    try:
        if args.offline:
            tallies = offline_tallies(workdir, dialogues, phases, sweep=args.sweep,
                                      steps=args.steps)
            how = ("offline: extractor, decisions and projection in this process, no broker; "
                   "client searches as of now")
        else:
            tallies = online_tallies(
                workdir, dialogues, phases, point_in_time=args.point_in_time,
                timeout_s=args.timeout, sweep=args.sweep, steps=args.steps,
            )
            how = ("MemoryClient.add turn by turn, the embedded broker and one worker"
                   + ("; client searches as of now" if args.point_in_time else ""))
    finally:
        release(None, workdir, keep=args.keep)
    per_category = ", ".join(
        f"{c} {sum(q.category == c for d in dialogues for q in d.questions)}" for c in CATEGORIES
    )
    print_table(tallies, (
        f"{args.dialogues} dialogues x {args.sessions} sessions, {turns} turns, {asked} questions "
        f"({per_category}), seed {seed} ({args.split})\n{how}\n"
    ))
    wall = time.perf_counter() - started
    print(f"\nwall {wall:.0f} s (" + ", ".join(f"{k} {v:.0f} s" for k, v in phases.items()) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
