"""Beliefs that stay true: does the current value of a changed fact rank above the stale ones?

The data set is ``belief_scenarios.py``: one user per scenario, a fact that changes over 3
to 6 sessions days apart (update, chain, revert, retraction, expiry) or a second value that
coexists with the first (control), in two splits with disjoint templates and values,
``dev`` and ``heldout``. It was written without looking at how memstream extracts facts.
Each scenario's question ("where do I live these days?") is asked three ways, with the
same embedder (MiniLM, ``--threads``):

* **memstream**: every session closed and consolidated in this process (offline extractor,
  decisions, projection: ``quality.build_extracted``, no broker), then
  ``MemoryClient(settings, projection=projection).search(question, limit=10)``; access
  events go nowhere (no broker), so no question's use ranks a later one;
* **raw turns (LanceDB hybrid, RRF)**: every turn of both speakers in a plain LanceDB table,
  native full-text index and vectors fused by reciprocal rank (``dialogue_recall``'s
  baseline), the first 10;
* **raw turns + newest on near-ties**: the same hits, then a hit moves above the one before
  it while it is the newer turn and its fused score is within :data:`NEAR_TIE` of that one's.

A hit is classified by its text alone (a memory's ``memory``, a turn's text): *current* if
it matches a current value's pattern, *stale* if it matches a stale one's and no current
one, neutral otherwise; in a retraction, a sentence naming the old value with words that
take it back ("no longer", "left", "not ... any more") states the retraction, so it is
current however it is worded. Figures, per split and search:

* **current first**: the first current hit ranks above every stale hit in the 10 (no
  current hit fails). Controls: every current value is found in the 10, and no hit naming
  one is marked stale;
* **stale marked** (memstream): of the stale hits returned, the share memstream marks: the
  hit's ``stale`` is true, or it has a ``superseded_by``, or its ``valid_until`` is at or
  before the search's moment (a missing field is unmarked);
* **false supersession** (memstream): of the controls, the share where a hit naming a
  control value is marked, or a memory naming one is not active (``get_all`` with the
  inactive ones: superseded, expired...);
* **as_of old first**: scenarios with a past moment are asked again as of it (the baselines
  see only the turns said by then): the first hit naming any of the scenario's values
  names the value current then;
* latency p50 / p95 of every search call (now and as of).

Current first is broken down by kind and by change type for ``dev``; ``heldout`` is shown
in aggregate and by change type only, never by kind, so that nobody tunes on it.

``--extractor both`` builds memstream a second time with the LLM extractor (``--local-llm``
serves Qwen2.5 1.5B through ``local_llm.py``; ``--llm-url`` any OpenAI-compatible server;
``--llm-replay`` the replies a run kept with ``--llm-replies``) and adds it as its own row,
with the model's wall time, CPU seconds per turn, tokens and rejected replies under the
tables. A small model on CPU costs minutes per scenario: use ``--per-split``.

Run from the repository root (the full run, 2 x 180 scenarios, takes about 8 minutes)::

    python benchmarks/beliefs.py
    python benchmarks/beliefs.py --per-split 40 --split dev --show-failures 5
    python benchmarks/beliefs.py --json
    python benchmarks/beliefs.py --split heldout --per-split 5 --extractor both --local-llm
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from belief_scenarios import CHANGES, KINDS, SPLITS, Scenario, generate
from dialogue_recall import hybrid_turns, turn_table
from quality import Conversation, Extractions, build_extracted
from runner import exit_on_sigterm, log, release

from memstream.models.beliefs import KnownClaim
from memstream.models.events.consolidation import ConsolidationRequested
from memstream.models.events.envelope import Event
from memstream.models.extraction import Extraction, Extractor
from memstream.models.extraction.parsed_memories import WithParsedMemories
from memstream.models.llm_reply import TRANSCRIPT_ROLES, ReplyInvalid, parse_reply
from memstream.models.settings import Settings
from memstream.projections.embedder import Embedder, MiniLMOnnxEmbedder
from memstream.projections.memories import MemoryProjection
from memstream.streams.client import MemoryClient
from memstream.streams.kafka.publisher import RawRecord, Sent
from memstream.streams.llm.extractor import LLMExtractor

TOP = 10
#: Fused (RRF) scores within this share of the hit above are a near-tie, and the newer turn
#: goes first. Set from the RRF arithmetic before any run, never tuned on a split: with
#: LanceDB's k = 60, one place lower in one of the two lists costs under 1 % of a top score,
#: so 5 % spans a few places; a turn found by one list only scores about half as much as
#: one found by both, so it never ties with one.
NEAR_TIE = 0.05
MEMSTREAM = "memstream (MemoryClient.search)"
#: The same search over memories an LLM extractor made (``--extractor llm`` or ``both``).
MEMSTREAM_LLM = "memstream, LLM extractor"
MEMSTREAMS = (MEMSTREAM, MEMSTREAM_LLM)
RAW = "raw turns (LanceDB hybrid, RRF)"
NEWEST = "raw turns + newest on near-ties"
SEARCHES = (MEMSTREAM, MEMSTREAM_LLM, RAW, NEWEST)
#: Users per ``build_extracted`` call. Each call ends by folding its rows into the indexes
#: and compacting the table, as the worker's projector does every few seconds; one call for
#: all 360 users leaves a thousand unindexed fragments, and takes about an hour.
BUILD_CHUNK = 20
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Found:
    """One hit: its text, what it is (a memory type, or ``turn``), and whether the search
    marks it as no longer true."""

    text: str
    kind: str
    marked: bool = False
    #: Marked possibly outdated by a newer statement (``possibly_outdated_by``).
    possibly: bool = False


#: (scenario, as_of) -> hits, best first; ``as_of`` None is now.
Search = Callable[[Scenario, datetime | None], list[Found]]


class DiscardingPublisher:
    """Takes the client's access events and sends them nowhere: the build has no broker,
    and the projection is not updated by use in this benchmark anyway."""

    async def publish(
        self, topic: str, events: Sequence[Event], *, key_id: str | None = None,
        create_keys: bool = True, timestamp_ms: int | None = None,
    ) -> list[Sent]:
        """Nothing sent, nothing acknowledged."""
        return []

    async def send_raw(self, topic: str, records: Sequence[RawRecord]) -> list[Sent]:
        """Nothing sent, nothing acknowledged."""
        return []

    async def close(self) -> None:
        """Nothing to flush."""


# --- the builds ------------------------------------------------------------------------


def build_memstream(
    scenarios: Sequence[Scenario],
    projection: MemoryProjection,
    embedder: MiniLMOnnxEmbedder,
    extractor: Extractor | None = None,
) -> Extractions:
    """Every scenario's sessions through the pipeline (``quality.build_extracted``:
    extraction, offline unless ``extractor`` is given, decisions, projection),
    ``BUILD_CHUNK`` users at a time. Users share nothing but the table, so the chunks only
    set when the indexes catch up."""
    conversations = [Conversation(user_id=s.user_id, sessions=s.messages()) for s in scenarios]
    extractions = Extractions()
    for start in range(0, len(conversations), BUILD_CHUNK):
        extractions.extend(build_extracted(
            conversations[start:start + BUILD_CHUNK], projection, embedder, extractor
        ))
        log(f"  built {min(start + BUILD_CHUNK, len(conversations))}/{len(conversations)} "
            f"users: {projection.count()} memory rows")
    return extractions


# --- the LLM extractor -------------------------------------------------------------------


@dataclass
class Reply:
    """One reply the model sent: the session it answered, when, and how it parses now."""

    session_id: str
    first_event_id: str
    attempt: int
    finish_reason: str | None
    text: str
    seconds: float


class TranscribedExtractor:
    """An :class:`LLMExtractor` whose every reply is kept (and written to ``sink``, one JSON
    line each), with the session it answered: what ``--llm-replies`` saves."""

    def __init__(self, extractor: LLMExtractor, sink: TextIO | None) -> None:
        self.extractor = extractor
        self.name, self.version = extractor.name, extractor.version
        self.reads_claims = extractor.reads_claims
        self.sink = sink
        self.replies: list[Reply] = []
        self.session_id = self.first_event_id = ""
        self.attempt = 0
        self.asked_at = 0.0
        extractor.on_reply = self.keep

    def extract(
        self, request: ConsolidationRequested, known_claims: Sequence[KnownClaim] = ()
    ) -> Extraction:
        """The extractor's extraction of ``request``, its replies kept on the way."""
        self.session_id, self.attempt = request.session_id, 0
        self.first_event_id = next(
            (m.event_id for m in request.messages if m.role in TRANSCRIPT_ROLES), ""
        )
        self.asked_at = time.perf_counter()
        log(f"  llm: {request.session_id} ({len(request.messages)} turns, "
            f"{len(known_claims)} current claims)")
        return self.extractor.extract(request, known_claims)

    def keep(self, text: str, finish_reason: str | None) -> None:
        """``on_reply``: one reply, kept and written out."""
        self.attempt += 1
        now = time.perf_counter()
        reply = Reply(self.session_id, self.first_event_id, self.attempt, finish_reason, text,
                      now - self.asked_at)
        self.asked_at = now
        self.replies.append(reply)
        if self.sink is not None:
            self.sink.write(json.dumps(reply.__dict__, ensure_ascii=False) + "\n")
            self.sink.flush()


@dataclass(frozen=True)
class Endpoint:
    """Where the LLM extractor sends its requests, and how to read the server's CPU time."""

    base_url: str
    model: str
    cpu_seconds: Callable[[], float | None]


@contextmanager
def llm_endpoint(args: argparse.Namespace) -> Iterator[Endpoint]:
    """``--llm-url``'s server, the replies of an earlier run (``--llm-replay``), or the
    local model started for the run (``--local-llm``)."""
    if args.llm_url:
        yield Endpoint(args.llm_url, args.llm_model, lambda: None)
        return
    from local_llm import ModelUnavailable, local_llm, replayed_llm

    if args.llm_replay:
        with replayed_llm(args.llm_replay) as replayed:
            yield Endpoint(replayed.base_url, replayed.model, replayed.cpu_seconds)
        return

    try:
        with local_llm(threads=args.llm_threads, log_file=args.llm_server_log) as served:
            yield Endpoint(served.base_url, served.model, served.cpu_seconds)
    except ModelUnavailable as exc:
        raise SystemExit(f"beliefs: {exc}") from None


def llm_figures(
    extractor: TranscribedExtractor,
    extractions: Extractions,
    scenarios: Sequence[Scenario],
    wall_s: float,
    cpu_s: float | None,
) -> dict[str, Any]:
    """What the LLM extraction cost and how its replies went, as plain values: every
    reply is parsed again by today's parser (so a rerun of old replies shows a fix)."""
    turns = sum(len(s.turns) for s in scenarios)
    sessions = sum(len(s.messages()) for s in scenarios)
    usages = [u for u in (*(r.usage for r in extractions.recorded),
                          *(f.usage for _, f in extractions.failed)) if u is not None]
    problems: dict[str, int] = defaultdict(int)
    for reply in extractor.replies:
        try:
            parse_reply(reply.text, finish_reason=reply.finish_reason)
        except ReplyInvalid as exc:
            problems[str(exc)[:160]] += 1
    candidates = [c for r in extractions.recorded for c in r.candidates
                  if c.memory_type in ("preference", "fact")]
    return {
        "model": extractor.extractor.model,
        "response_format": extractor.extractor.response_format_mode,
        "sessions": sessions,
        "turns": turns,
        "recorded": len(extractions.recorded),
        "failed": len(extractions.failed),
        "failure_reasons": [f.reason[:300] for _, f in extractions.failed],
        "replies": len(extractor.replies),
        "replies_rejected": sum(problems.values()),
        "rejections": dict(sorted(problems.items(), key=lambda item: -item[1])),
        "cut_off": sum(r.finish_reason == "length" for r in extractor.replies),
        "prompt_tokens": sum(u.prompt_tokens for u in usages),
        "completion_tokens": sum(u.completion_tokens for u in usages),
        "facts_and_preferences": len(candidates),
        "with_claim": sum(c.claim is not None for c in candidates),
        "with_operation": sum(c.claim is not None and c.claim.operation is not None
                              for c in candidates),
        "wall_s": wall_s,
        "wall_s_per_session": wall_s / sessions if sessions else None,
        "server_cpu_s": cpu_s,
        "cpu_s_per_turn": cpu_s / turns if cpu_s is not None and turns else None,
    }


def print_llm(figures: Mapping[str, Any]) -> None:
    """The LLM extraction's cost and replies, under the tables."""
    f = figures
    print(f"\nLLM extractor ({f['model']}, response_format {f['response_format']}): "
          f"{f['sessions']} sessions, {f['turns']} turns")
    cpu = ("-" if f["server_cpu_s"] is None
           else f"{f['server_cpu_s']:.0f} s ({f['cpu_s_per_turn']:.2f} s per turn)")
    print(f"  wall {f['wall_s']:.0f} s ({f['wall_s_per_session']:.1f} s per session), "
          f"server CPU {cpu}")
    print(f"  tokens: {f['prompt_tokens']} prompt, {f['completion_tokens']} completion")
    print(f"  sessions recorded {f['recorded']}, failed (dead letter) {f['failed']}; replies "
          f"{f['replies']}, rejected {f['replies_rejected']}, cut off {f['cut_off']}")
    print(f"  preferences and facts {f['facts_and_preferences']}: with a claim "
          f"{f['with_claim']}, with an operation {f['with_operation']}")
    for problem, count in f["rejections"].items():
        print(f"    {count} x {problem}")
    for reason in f["failure_reasons"][:5]:
        print(f"    failed: {reason}")


# --- the searches ----------------------------------------------------------------------


def marked_stale(hit: Mapping[str, Any], moment: datetime) -> bool:
    """Whether a memstream hit says it is no longer true at ``moment``: ``stale``, a
    ``superseded_by``, or a ``valid_until`` at or before ``moment`` (fields a hit may not
    carry yet: missing means unmarked)."""
    if hit.get("stale") or hit.get("superseded_by"):
        return True
    valid_until = hit.get("valid_until")
    if not valid_until:
        return False
    until = (valid_until if isinstance(valid_until, datetime)
             else datetime.fromisoformat(str(valid_until)))
    return (until if until.tzinfo else until.replace(tzinfo=UTC)) <= moment


def memstream_search(client: MemoryClient) -> Search:
    """``MemoryClient.search``, the first ``TOP`` hits, as of now or of ``as_of``."""

    def search(scenario: Scenario, as_of: datetime | None) -> list[Found]:
        hits = client.search(scenario.question, user_id=scenario.user_id, limit=TOP, as_of=as_of)
        moment = as_of or datetime.now(UTC)
        return [Found(hit["memory"], hit["type"], marked_stale(dict(hit), moment),
                      bool(hit.get("possibly_outdated_by")))
                for hit in hits]

    return search


def microseconds(moment: datetime) -> int:
    """``moment`` as integer microseconds since the epoch (how the turn table stores time)."""
    return (moment - EPOCH) // timedelta(microseconds=1)


def newest_on_near_ties(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``rows`` (best first), each moved above the one before it while it is the newer turn
    and its fused score is at least ``1 - NEAR_TIE`` of that one's."""
    ordered = list(rows)
    for start in range(1, len(ordered)):
        at = start
        while at > 0:
            above, row = ordered[at - 1], ordered[at]
            near_tie = row["_relevance_score"] >= (1 - NEAR_TIE) * above["_relevance_score"]
            if not (row["at_us"] > above["at_us"] and near_tie):
                break
            ordered[at - 1], ordered[at] = row, above
            at -= 1
    return ordered


def raw_turn_searches(
    directory: Path, scenarios: Sequence[Scenario], embedder: Embedder
) -> dict[str, Search]:
    """The two baselines over one LanceDB table of every turn (both speakers); as of a
    moment they see only the turns said by then."""
    rows = [
        {"user_id": s.user_id, "turn_id": t.event_id, "text": t.text,
         "at_us": microseconds(t.occurred_at)}
        for s in scenarios for t in s.turns
    ]
    turns = turn_table(directory, rows, embedder)

    def hits(scenario: Scenario, as_of: datetime | None) -> list[dict[str, Any]]:
        said_by = None if as_of is None else f"at_us <= {microseconds(as_of)}"
        return hybrid_turns(turns, embedder, scenario.user_id, scenario.question, limit=TOP,
                            where=said_by)

    def raw(scenario: Scenario, as_of: datetime | None) -> list[Found]:
        return [Found(row["text"], "turn") for row in hits(scenario, as_of)]

    def newest(scenario: Scenario, as_of: datetime | None) -> list[Found]:
        return [Found(row["text"], "turn") for row in newest_on_near_ties(hits(scenario, as_of))]

    return {RAW: raw, NEWEST: newest}


# --- scoring ---------------------------------------------------------------------------


#: Words that take a value back in the sentence that names it: a retraction's statement
#: however it is worded ("User no longer works at Zalando", "I left Zalando").
_TAKEN_BACK = re.compile(
    r"\b(?:no\s+longer|not|n't|never|any\s?more|stopped|quit|left|leaving|gave\s+up|giving\s+up|"
    r"used\s+to|died|passed\s+away|sold|called\s+off|cancell?ed|off|closed|shut|without|"
    r"no|ended|over|former|ex)\b",
    re.IGNORECASE,
)


def classify(text: str, scenario: Scenario) -> str:
    """``current``, ``stale`` or ``neutral``: what a hit's text states, by the patterns. In a
    retraction, a sentence that names the old value with words taking it back states the
    retraction (it is current), whoever worded it."""
    if any(value.matches(text) for value in scenario.current):
        return "current"
    stale = [value for value in scenario.stale if value.matches(text)]
    if not stale:
        return "neutral"
    if scenario.change == "retraction" and any(
        value.matches(sentence) and _TAKEN_BACK.search(sentence)
        for value in stale
        for sentence in re.split(r"(?<=[.!?])\s+|\n", text)
    ):
        return "current"
    return "stale"


def current_first(scenario: Scenario, hits: Sequence[Found]) -> bool:
    """Whether the current value wins in the first ``TOP`` hits (see the module docstring;
    a control wins when every value is found and none is marked)."""
    top = hits[:TOP]
    if scenario.change == "control":
        found = all(any(value.matches(hit.text) for hit in top) for value in scenario.current)
        marked = any(hit.marked and classify(hit.text, scenario) == "current" for hit in top)
        return found and not marked
    kinds = [classify(hit.text, scenario) for hit in top]
    if "current" not in kinds:
        return False
    return "stale" not in kinds or kinds.index("current") < kinds.index("stale")


def old_first(scenario: Scenario, hits: Sequence[Found]) -> bool:
    """Whether, as of the scenario's past moment, the first hit naming any of its values
    names the value current then."""
    assert scenario.as_of_current is not None
    for hit in hits[:TOP]:
        if any(value.matches(hit.text) for value in scenario.values):
            return scenario.as_of_current.matches(hit.text)
    return False


@dataclass
class Tally:
    """One search's figures on one split."""

    asked: int = 0
    first: int = 0
    stale_hits: int = 0
    stale_marked: int = 0
    #: Of the stale hits left unmarked, those marked possibly outdated.
    stale_possibly: int = 0
    controls: int = 0
    false_supersessions: int = 0
    #: Controls with a current value's hit marked possibly outdated.
    controls_possibly: int = 0
    as_of_asked: int = 0
    as_of_first: int = 0
    latencies_s: list[float] = field(default_factory=list)
    #: Per kind and per change type: [asked, current first].
    by_kind: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    by_change: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    #: Scenario ids that failed current first, with the first hits (for --show-failures).
    failures: list[tuple[Scenario, list[Found]]] = field(default_factory=list)


def falsely_superseded(client: MemoryClient, scenario: Scenario, hits: Sequence[Found]) -> bool:
    """A control value marked in the hits, or a memory naming one no longer active."""
    if any(hit.marked and classify(hit.text, scenario) == "current" for hit in hits[:TOP]):
        return True
    return any(
        (memory["status"] != "active" or memory.get("superseded_by"))
        and any(value.matches(memory["memory"]) for value in scenario.current)
        for memory in client.get_all(user_id=scenario.user_id, include_inactive=True)
    )


def run_searches(
    searches: Mapping[str, Search],
    scenarios: Sequence[Scenario],
    clients: Mapping[str, MemoryClient],
) -> dict[str, Tally]:
    """Ask every scenario's question with every search (now, and as of its past moment),
    timing each call; ``clients`` are the memstream searches' own, for false supersession."""
    tallies = {name: Tally() for name in searches}
    for number, scenario in enumerate(scenarios, start=1):
        for name, search in searches.items():
            tally = tallies[name]
            started = time.perf_counter()
            hits = search(scenario, None)
            tally.latencies_s.append(time.perf_counter() - started)
            won = current_first(scenario, hits)
            tally.asked += 1
            tally.first += won
            for bucket in (tally.by_kind[scenario.kind], tally.by_change[scenario.change]):
                bucket[0] += 1
                bucket[1] += won
            if not won:
                tally.failures.append((scenario, hits))
            stale = [hit for hit in hits[:TOP] if classify(hit.text, scenario) == "stale"]
            tally.stale_hits += len(stale)
            tally.stale_marked += sum(hit.marked for hit in stale)
            tally.stale_possibly += sum(hit.possibly and not hit.marked for hit in stale)
            if scenario.change == "control" and name in clients:
                tally.controls += 1
                tally.false_supersessions += falsely_superseded(clients[name], scenario, hits)
                tally.controls_possibly += any(
                    hit.possibly and classify(hit.text, scenario) == "current"
                    for hit in hits[:TOP]
                )
            if scenario.as_of is not None:
                started = time.perf_counter()
                past = search(scenario, scenario.as_of)
                tally.latencies_s.append(time.perf_counter() - started)
                tally.as_of_asked += 1
                tally.as_of_first += old_first(scenario, past)
        if number % 60 == 0:
            log(f"  asked {number}/{len(scenarios)}")
    return tallies


# --- the report ------------------------------------------------------------------------


def percentile(values: Sequence[float], share: float) -> float:
    """The value below which ``share`` of ``values`` fall (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, round(share * len(ordered)) - 1)]


def share(part: int, whole: int) -> float | None:
    """``part / whole``, None when there is nothing to share."""
    return part / whole if whole else None


def figures(tally: Tally, name: str) -> dict[str, Any]:
    """One search's figures as plain values (shares on 0..1; None where not measured)."""
    memstream = name in MEMSTREAMS
    return {
        "n": tally.asked,
        "current_first": share(tally.first, tally.asked),
        "current_first_count": tally.first,
        "stale_hits": tally.stale_hits,
        "stale_marked": share(tally.stale_marked, tally.stale_hits) if memstream else None,
        "stale_marked_count": tally.stale_marked if memstream else None,
        "controls": tally.controls if memstream else None,
        "false_supersession": (share(tally.false_supersessions, tally.controls)
                               if memstream else None),
        "false_supersession_count": tally.false_supersessions if memstream else None,
        "stale_possibly_outdated_count": tally.stale_possibly if memstream else None,
        "controls_possibly_outdated_count": tally.controls_possibly if memstream else None,
        "as_of_n": tally.as_of_asked,
        "as_of_old_first": share(tally.as_of_first, tally.as_of_asked),
        "as_of_old_first_count": tally.as_of_first,
        "p50_ms": 1000 * statistics.median(tally.latencies_s),
        "p95_ms": 1000 * percentile(tally.latencies_s, 0.95),
    }


def breakdown(tallies: Mapping[str, Tally], attribute: str) -> dict[str, dict[str, Any]]:
    """Current first per value of ``attribute`` (``by_kind`` or ``by_change``), per search."""
    keys = KINDS if attribute == "by_kind" else CHANGES
    rows: dict[str, dict[str, Any]] = {}
    for key in keys:
        counts = {name: getattr(tally, attribute).get(key) for name, tally in tallies.items()}
        if not any(counts.values()):
            continue
        asked = next(c[0] for c in counts.values() if c)
        rows[key] = {"n": asked, **{name: share(c[1], c[0]) if c else None
                                    for name, c in counts.items()}}
    return rows


def cell(part: int | None, whole: int | None, width: int) -> str:
    """``part/whole pct %`` right-aligned in ``width``; "-" where not measured."""
    if part is None or not whole:
        return f"{'-':>{width}}"
    return f"{f'{part}/{whole} {100 * part / whole:5.1f} %':>{width}}"


def print_split(split: str, scenarios: Sequence[Scenario], tallies: Mapping[str, Tally]) -> None:
    """The split's table, then its breakdowns (by kind for dev only)."""
    controls = sum(s.change == "control" for s in scenarios)
    with_as_of = sum(s.as_of is not None for s in scenarios)
    print(f"\n{split}: {len(scenarios)} scenarios ({controls} controls, {with_as_of} with "
          f"as_of, {sum(s.speakers is not None for s in scenarios)} two-person)")
    width = max(len(name) for name in tallies)
    header = (f"{'search':{width}}  {'current first':>15} {'stale marked':>15} "
              f"{'false supersession':>18} {'as_of old first':>15} {'p50 ms':>7} "
              f"{'p95 ms':>7} {'n':>4}")
    print(header)
    print("-" * len(header))
    for name, tally in tallies.items():
        memstream = name in MEMSTREAMS
        f = figures(tally, name)
        print(f"{name:{width}}  {cell(tally.first, tally.asked, 15)} "
              f"{cell(tally.stale_marked if memstream else None, tally.stale_hits, 15)} "
              f"{cell(tally.false_supersessions if memstream else None, tally.controls, 18)} "
              f"{cell(tally.as_of_first, tally.as_of_asked, 15)} {f['p50_ms']:7.1f} "
              f"{f['p95_ms']:7.1f} {tally.asked:>4}")
    for name in (MEMSTREAM, MEMSTREAM_LLM):
        if name in tallies:
            mine = tallies[name]
            print(f"{name}: possibly outdated {mine.stale_possibly} of the "
                  f"{mine.stale_hits - mine.stale_marked} stale hits left unmarked; "
                  f"{mine.controls_possibly}/{mine.controls} controls with a current value "
                  "marked")
    short = {MEMSTREAM: "memstream", MEMSTREAM_LLM: "memstream llm", RAW: "raw hybrid",
             NEWEST: "newest on ties"}
    attributes = ("by_kind", "by_change") if split == "dev" else ("by_change",)
    for attribute in attributes:
        label = "kind" if attribute == "by_kind" else "change"
        print(f"\ncurrent first by {label} ({split}):")
        print(f"  {label:13} {'n':>4} " + " ".join(f"{short[n]:>15}" for n in tallies))
        for key, row in breakdown(tallies, attribute).items():
            print(f"  {key:13} {row['n']:>4} " + " ".join(
                f"{100 * row[n]:13.1f} %" if row[n] is not None else f"{'-':>15}"
                for n in tallies
            ))


def print_failures(tally: Tally, count: int) -> None:
    """The first ``count`` dev scenarios memstream got wrong, with its first 5 hits."""
    if count <= 0:
        return
    print(f"\nmemstream's first {min(count, len(tally.failures))} dev failures (current "
          "first), first 5 hits (C current, S stale, . neutral; * marked):")
    for scenario, hits in tally.failures[:count]:
        print(f"\n  {scenario.scenario_id} {scenario.kind}/{scenario.topic} {scenario.change} "
              f"{scenario.person} {scenario.style}: {scenario.question!r}")
        print(f"    current {[v.label for v in scenario.current]}, stale "
              f"{[v.label for v in scenario.stale]}")
        for hit in hits[:5]:
            mark = {"current": "C", "stale": "S", "neutral": "."}[classify(hit.text, scenario)]
            print(f"    {mark}{'*' if hit.marked else ' '} {hit.kind:11} {hit.text[:110]!r}")
        if not hits:
            print("    (no hits)")


def print_notes(seed: int, per_split: int, phases: Mapping[str, float]) -> None:
    """What the figures mean, and where the time went."""
    print(f"\n- seed {seed}, {per_split} scenarios per split; {TOP} hits per search; memstream "
          "built in this process (extractor, decisions, projection; the offline extractor "
          "unless the row says LLM), searched through MemoryClient; the baselines search every "
          "turn of both speakers.")
    print("- current first: the first current hit is above every stale hit (controls: every "
          "value found and none marked); stale marked: of the stale hits, the share memstream "
          "marks (stale, superseded_by, or valid_until passed); false supersession: controls "
          "with a value marked or no longer active; as_of old first: as of a moment between "
          "the first value and its change, the first hit naming a value names the one current "
          "then (the baselines see the turns said by then).")
    print(f"- newest on near-ties: a hit moves above the one before it while it is newer and its "
          f"fused (RRF) score is within {100 * NEAR_TIE:g} % of that one's; set a priori, not "
          "tuned.")
    print("- " + ", ".join(f"{k} {v:.0f} s" for k, v in phases.items()))


# --- main ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Generate the scenarios, build memstream and the baselines, ask, print the tables."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--per-split", type=int, default=180, help="scenarios per split")
    parser.add_argument("--split", choices=("dev", "heldout", "both"), default="both")
    parser.add_argument("--threads", type=int, default=2, help="embedder threads")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--show-failures", type=int, default=0, metavar="N",
                        help="print N dev scenarios memstream got wrong, with its first hits")
    llm = parser.add_argument_group("the LLM extractor")
    llm.add_argument("--extractor", choices=("offline", "llm", "both"), default="offline",
                     help="what builds memstream's memories; both: two memstream rows")
    llm.add_argument("--local-llm", action="store_true",
                     help="serve the local model for the run (benchmarks/local_llm.py)")
    llm.add_argument("--llm-url", help="an OpenAI-compatible base URL, e.g. http://host/v1")
    llm.add_argument("--llm-model", default="qwen2.5-1.5b-instruct")
    llm.add_argument("--llm-timeout", type=float, default=600.0, help="seconds per call")
    llm.add_argument("--llm-threads", type=int, default=2, help="the local model's threads")
    llm.add_argument("--llm-replies", type=Path, metavar="FILE",
                     help="write every reply (JSON lines: session, attempt, text)")
    llm.add_argument("--llm-replay", type=Path, metavar="FILE",
                     help="answer with the replies an earlier run wrote (--llm-replies)")
    llm.add_argument("--llm-response-format", choices=("json_schema", "json_object", "text"),
                     default="json_schema", help="the response format asked for first")
    llm.add_argument("--llm-server-log", type=Path, metavar="FILE",
                     help="the local model server's log")
    args = parser.parse_args(argv)
    if args.per_split < 1:
        parser.error("--per-split must be at least 1")
    if args.extractor != "offline" and not (args.llm_url or args.local_llm or args.llm_replay):
        parser.error("--extractor llm or both needs --llm-url, --local-llm or --llm-replay")
    exit_on_sigterm()
    started = time.perf_counter()
    splits = SPLITS if args.split == "both" else (args.split,)
    scenarios = [s for s in generate(args.seed, args.per_split) if s.split in splits]
    log(f"{len(scenarios)} scenarios, {sum(len(s.turns) for s in scenarios)} turns")
    workdir = Path(tempfile.mkdtemp(prefix="memstream-beliefs-"))
    phases: dict[str, float] = {}
    results: dict[str, dict[str, Tally]] = {}
    llm_report: dict[str, Any] | None = None
    try:
        embedder = MiniLMOnnxEmbedder(threads=args.threads)
        projections: dict[str, MemoryProjection] = {}
        if args.extractor in ("offline", "both"):
            mark = time.perf_counter()
            projections[MEMSTREAM] = MemoryProjection(workdir / "memstream", embedder)
            build_memstream(scenarios, projections[MEMSTREAM], embedder)
            phases["memstream build"] = time.perf_counter() - mark
            log(f"memstream: {projections[MEMSTREAM].count()} memory rows in "
                f"{phases['memstream build']:.0f} s")
        if args.extractor in ("llm", "both"):
            with llm_endpoint(args) as endpoint, ExitStack() as stack:
                sink = (stack.enter_context(args.llm_replies.open("w"))
                        if args.llm_replies else None)
                extractor = TranscribedExtractor(
                    LLMExtractor(base_url=endpoint.base_url, api_key="", model=endpoint.model,
                                 timeout_s=args.llm_timeout,
                                 response_format=args.llm_response_format),
                    sink,
                )
                stack.callback(extractor.extractor.close)
                mark = time.perf_counter()
                cpu_before = endpoint.cpu_seconds()
                projections[MEMSTREAM_LLM] = MemoryProjection(workdir / "memstream-llm", embedder)
                # As the worker runs it: with the claims the parse reads where the model
                # gives none.
                extractions = build_memstream(
                    scenarios, projections[MEMSTREAM_LLM], embedder, WithParsedMemories(extractor)
                )
                phases["memstream build, LLM extractor"] = time.perf_counter() - mark
                cpu_after = endpoint.cpu_seconds()
                cpu = (None if cpu_before is None or cpu_after is None
                       else cpu_after - cpu_before)
                llm_report = llm_figures(extractor, extractions, scenarios,
                                         phases["memstream build, LLM extractor"], cpu)
        mark = time.perf_counter()
        baselines = raw_turn_searches(workdir / "turns", scenarios, embedder)
        phases["baseline build"] = time.perf_counter() - mark
        settings = Settings(data_dir=workdir / "data")
        with ExitStack() as stack:
            clients = {
                name: stack.enter_context(MemoryClient(
                    settings, projection=projection, publisher=DiscardingPublisher()
                ))
                for name, projection in projections.items()
            }
            searches = {**{name: memstream_search(c) for name, c in clients.items()},
                        **baselines}
            mark = time.perf_counter()
            for split in splits:
                log(f"asking the {split} questions")
                results[split] = run_searches(
                    searches, [s for s in scenarios if s.split == split], clients
                )
            phases["searches"] = time.perf_counter() - mark
    finally:
        release(None, workdir, keep=args.keep)
    phases["wall"] = time.perf_counter() - started
    if args.json:
        report = {
            "seed": args.seed, "per_split": args.per_split, "near_tie": NEAR_TIE,
            "phases_s": phases,
            "splits": {
                split: {
                    "searches": {name: figures(t, name) for name, t in tallies.items()},
                    **({"by_kind": breakdown(tallies, "by_kind")} if split == "dev" else {}),
                    "by_change": breakdown(tallies, "by_change"),
                }
                for split, tallies in results.items()
            },
            **({"llm": llm_report} if llm_report is not None else {}),
        }
        print(json.dumps(report, indent=2))
        return 0
    for split, tallies in results.items():
        print_split(split, [s for s in scenarios if s.split == split], tallies)
    if "dev" in results:
        first = MEMSTREAM if MEMSTREAM in results["dev"] else MEMSTREAM_LLM
        print_failures(results["dev"][first], args.show_failures)
    if llm_report is not None:
        print_llm(llm_report)
    print_notes(args.seed, args.per_split, phases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
