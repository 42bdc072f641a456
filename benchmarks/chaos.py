"""Chaos benchmark: SIGKILL the worker again and again while chat events stream in, and count
what the crashes cost against a run of the same events that never crashed.

    python benchmarks/chaos.py                          # 20 kills over 20,000 chat events
    python benchmarks/chaos.py --kills 10 --events 10000
    python benchmarks/chaos.py --control                # also a second uncrashed run
    python benchmarks/chaos.py --json

It starts its own embedded broker (Tansu) on a free port and works in a fresh temporary
directory (``--keep`` keeps it, with the worker logs). Then:

1. **uncrashed run**: one worker, the whole workload published at once, waited for until
   every chat event and consolidation request is committed and the memory view is steady;
2. **crashed run**: the same events under another topic prefix and data directory,
   published at a steady rate while the worker is killed with SIGKILL ``--kills`` times, each
   time after a random uptime, and restarted at once; then waited for in the same way;
3. **comparison**: memories by content (lost, duplicated), by id (mismatched view), session
   states (recovered, against the fold of the crashed run's own chat topic and against the
   uncrashed run's), the live memory table against one rebuilt from the crashed run's log, and
   the dead letters.

The workload is several users' sessions, one after the other per user and interleaved across
users, with facts that repeat (reinforcements) and change (supersessions), a small window
(``--max-messages``, so sessions consolidate mid-session too) and explicit closes; some users'
last session stays open. Idle closes are wall-clock decisions that would differ between the
two runs, so the idle timeout is longer than any run.

With ``--control`` a second uncrashed run is compared with the first the same way: what it
finds is what two runs differ by without any crash (nondeterminism, not crash damage).

Every ``MEMSTREAM_*`` variable is honoured, except the broker address, topic prefix, data
directory, web port, window size and idle timeout, which the benchmark sets itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from chatter import backlog, chat_line, group_position
from runner import log, release, run_to_end

from memstream.models.codec import decode_event, encode_event
from memstream.models.events.chat import MessageAdded, SessionClosed, SessionStarted
from memstream.models.events.envelope import Event
from memstream.models.events.memory import (
    ExtractionFailure,
    ExtractionRecorded,
    MemoryAdded,
    MemoryReinforced,
)
from memstream.models.fingerprint import fingerprint
from memstream.models.session import SessionState, SessionValue
from memstream.models.settings import Settings
from memstream.projections.embedder import Embedder, embedder_from_settings
from memstream.projections.memories import VIEW_COLUMNS, PartitionedMemories
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics, ensure_topics
from memstream.streams.operations.rebuild_sessions import (
    fold_chat_topic,
    live_sessions,
    sessions_fingerprint,
)
from memstream.streams.operations.replay import verify_memories
from memstream.streams.worker.process import WorkerProcess

#: Columns of the memory view that legitimately differ between two runs of the same events:
#: ``learned_at`` is the broker timestamp of the memory's event, i.e. when this run's log got
#: it (processing time). Every other column derives from the events (event times, derived
#: ids, counts), so it must be equal.
PROCESSING_TIME_COLUMNS = frozenset({"learned_at"})
COMPARED_COLUMNS = tuple(c for c in VIEW_COLUMNS if c not in PROCESSING_TIME_COLUMNS)
#: Far longer than any run: every close is an explicit event, the same in both runs.
IDLE_TIMEOUT_S = 86_400.0
#: Assumed seconds from a kill until the restarted worker answers; only sets the default rate.
RESTART_ESTIMATE_S = 4.0

USER_LINES = [
    "I live in {city}.",
    "Actually, I moved to {city}.",
    "I work at {company}.",
    "I prefer {travel} over buses.",
    "My budget is about {budget} euros.",
    "My favourite food is {food}.",
    "Can you find a quiet hotel near the station in {city}?",
    "Thanks, that helps a lot.",
    "What is the weather like in {city} next week?",
]


# --- workload --------------------------------------------------------------------------


def chaos_workload(target_events: int, users: int, seed: int) -> list[Event]:
    """About ``target_events`` chat events: sessions of 6-16 messages, one after the
    other per user, users interleaved in a seeded order (a user's events stay in order).

    Every session is closed explicitly except, for half the users, their last one.
    """
    rng = random.Random(seed)
    streams: list[list[Event]] = [[] for _ in range(users)]
    sessions = [0] * users
    total = 0
    while total < target_events:
        u = rng.randrange(users)
        user, number = f"user{u:04d}", sessions[u]
        sessions[u] += 1
        session = f"s{number}"
        start = datetime(2026, 11, 2, 9, tzinfo=UTC) + timedelta(days=number, minutes=u)
        common: dict[str, Any] = {"user_id": user, "session_id": session}
        events = streams[u]
        events.append(SessionStarted(event_id=f"{user}/{session}/start", occurred_at=start, **common))
        turns = rng.randint(6, 16)
        for i in range(turns):
            role = "user" if i % 2 == 0 else "assistant"
            text = chat_line(rng, role, USER_LINES)
            events.append(MessageAdded(
                event_id=f"{user}/{session}/m{i}", occurred_at=start + timedelta(minutes=i + 1),
                role=role, content=text, **common,
            ))
        events.append(SessionClosed(
            event_id=f"{user}/{session}/close", occurred_at=start + timedelta(minutes=turns + 2),
            **common,
        ))
        total += turns + 2
    for u in range(0, users, 2):  # half the users keep their last session open
        if streams[u]:
            streams[u].pop()
    merged: list[Event] = []
    cursors = [0] * users
    live = [u for u in range(users) if streams[u]]
    while live:
        index = rng.randrange(len(live))
        u = live[index]
        merged.append(streams[u][cursors[u]])
        cursors[u] += 1
        if cursors[u] == len(streams[u]):
            live[index] = live[-1]
            live.pop()
    return merged


async def publish_at_rate(settings: Settings, events: Sequence[Event], rate: float | None) -> None:
    """Publish ``events`` in order, keyed by user id, at ``rate`` events/s (None: at once)."""
    await ensure_topics(settings)
    topic = Topics.from_settings(settings).chat
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all", linger_ms=5)
    await producer.start()
    try:
        tick_s = 0.1
        chunk = len(events) if rate is None else max(1, round(rate * tick_s))
        started = time.monotonic()
        for number, begin in enumerate(range(0, len(events), chunk)):
            futures = [
                await producer.send(topic, key=e.user_id.encode(), value=encode_event(e))
                for e in events[begin : begin + chunk]
            ]
            for future in futures:
                await future
            if rate is not None:
                # Paced against the start, so a slow send is caught up, not accumulated.
                await asyncio.sleep(max(0.0, started + (number + 1) * tick_s - time.monotonic()))
    finally:
        await producer.stop()


# --- waiting and reading ---------------------------------------------------------------


def wait_until_done(
    settings: Settings, embedder: Embedder, timeout_s: float, worker: WorkerProcess | None = None
) -> list[dict[str, Any]]:
    """Poll until every chat event and consolidation request is committed and the memory view
    has not changed for three polls in a row (a second apart); return the view."""
    projection = PartitionedMemories.from_settings(settings, embedder)
    deadline = time.monotonic() + timeout_s
    previous = None
    steady = 0
    last_report = time.monotonic()
    while time.monotonic() < deadline:
        rows = projection.view_rows(VIEW_COLUMNS)
        current = fingerprint("memories", rows, VIEW_COLUMNS)
        steady = steady + 1 if current == previous else 0
        previous = current
        if steady >= 3:
            left = asyncio.run(backlog(settings))
            if left == 0:
                return rows
        if time.monotonic() - last_report > 15:
            last_report = time.monotonic()
            log(f"  waiting: {len(rows):,} memories, backlog {asyncio.run(backlog(settings)):,}")
        if worker is not None and worker.exited():
            raise RuntimeError("the worker exited while the benchmark waited for it")
        time.sleep(1.0)
    raise TimeoutError(f"{settings.topic_prefix}: not done within {timeout_s:.0f} s")


def topic_events(settings: Settings, topic: str) -> list[tuple[int, int, Event]]:
    """(partition, offset, event) of every record of ``topic``."""
    return [
        (r.partition, r.offset, decode_event(r.value))
        for r in asyncio.run(read_topic(settings, topic, timeout_s=300))
    ]


# --- comparing -------------------------------------------------------------------------


@dataclass
class Comparison:
    """How one run's memories and sessions differ from a reference run's."""

    expected: int
    found: int
    lost: int
    duplicated: int
    mismatched: int
    ids_only_here: int
    ids_only_there: int
    mismatched_columns: dict[str, int]
    sessions_mismatched: int
    examples: list[str]


def content_counts(rows: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """Memories as a multiset of (user, type, content): what a user could see twice."""
    return Counter((r["user_id"], r["memory_type"], r["content"]) for r in rows)


def open_states(values: dict[str, SessionValue]) -> dict[str, dict[str, Any]]:
    return {k: v.model_dump(mode="json") for k, v in values.items() if isinstance(v, SessionState)}


def compare(
    found: list[dict[str, Any]],
    expected: list[dict[str, Any]],
    sessions: dict[str, dict[str, Any]],
    expected_sessions: dict[str, dict[str, Any]],
) -> Comparison:
    """Lost / duplicated by content, mismatched by id (the compared columns), sessions by key."""
    have, want = content_counts(found), content_counts(expected)
    by_id = {r["memory_id"]: r for r in expected}
    columns: Counter[str] = Counter()
    mismatched = 0
    examples: list[str] = []
    for row in found:
        other = by_id.get(row["memory_id"])
        if other is None:
            continue
        changed = [c for c in COMPARED_COLUMNS if row[c] != other[c]]
        if changed:
            mismatched += 1
            columns.update(changed)
            if len(examples) < 8:
                shown = {c: (row[c], other[c]) for c in changed}
                examples.append(f"{row['user_id']} {row['content'][:50]!r}: {shown}")
    found_ids = {r["memory_id"] for r in found}
    keys = set(sessions) | set(expected_sessions)
    return Comparison(
        expected=len(expected),
        found=len(found),
        lost=sum((want - have).values()),
        duplicated=sum((have - want).values()),
        mismatched=mismatched,
        ids_only_here=len(found_ids - set(by_id)),
        ids_only_there=len(set(by_id) - found_ids),
        mismatched_columns=dict(columns.most_common()),
        sessions_mismatched=sum(sessions.get(k) != expected_sessions.get(k) for k in keys),
        examples=examples,
    )


@dataclass
class LogAudit:
    """What a run's own topics say it did twice, or never (read from its log)."""

    consolidation_records: int
    consolidation_ids: int
    memory_records: int
    memory_ids: int
    #: Runs of an extraction beyond its first (its recorded event published again).
    extractions_repeated: int
    #: Reinforcement records beyond the first of their event id (a decision published again
    #: after a kill; the projector counts each event id once).
    reinforcements_republished: int
    #: Reinforcements of a memory by the extraction that added it: a re-run that found its
    #: own earlier output. Two equal candidates of one span do it legitimately too, so
    #: compare with the uncrashed run's figure.
    self_reinforcements: int
    #: Consolidation requests with no recorded extraction (nor a failed one): never extracted.
    requests_never_extracted: int
    #: Chat messages in no consolidation request and in no open session's window.
    messages_never_consolidated: int


def audit(settings: Settings) -> LogAudit:
    """Read the run's chat, consolidation and memories topics and its sessions changelog."""
    topics = Topics.from_settings(settings)
    requests = [e for _, _, e in topic_events(settings, topics.consolidation)]
    memories = [e for _, _, e in topic_events(settings, topics.memories)]
    ids = Counter(e.event_id for e in memories)
    added_by = {e.memory_id: e.extraction_event_id for e in memories if isinstance(e, MemoryAdded)}
    reinforced = {e.event_id: e for e in memories if isinstance(e, MemoryReinforced)}
    extracted = {
        e.consolidation_event_id
        for e in memories
        if isinstance(e, ExtractionRecorded | ExtractionFailure)
    }
    held = {m.event_id for request in requests for m in request.messages}  # type: ignore[attr-defined]
    for value in asyncio.run(live_sessions(settings)).values():
        if isinstance(value, SessionState):
            held |= {m.event_id for m in value.messages}
    sent = [e.event_id for _, _, e in topic_events(settings, topics.chat) if isinstance(e, MessageAdded)]
    return LogAudit(
        consolidation_records=len(requests),
        consolidation_ids=len({e.event_id for e in requests}),
        memory_records=len(memories),
        memory_ids=len(ids),
        extractions_repeated=sum(
            ids[event_id] - 1
            for event_id in {e.event_id for e in memories if isinstance(e, ExtractionRecorded)}
        ),
        reinforcements_republished=sum(ids[event_id] - 1 for event_id in reinforced),
        self_reinforcements=sum(
            1 for e in reinforced.values() if added_by.get(e.memory_id) == e.extraction_event_id
        ),
        requests_never_extracted=len({e.event_id for e in requests} - extracted),
        messages_never_consolidated=sum(1 for event_id in sent if event_id not in held),
    )


# --- the run ---------------------------------------------------------------------------


@dataclass
class Result:
    """Every figure of one run; the table shows the headline ones."""

    events: int
    users: int
    kills: int
    memories_expected: int = 0
    memories_found: int = 0
    lost: int = 0
    duplicated: int = 0
    mismatched: int = 0
    sessions_mismatched: int = 0
    dead_lettered: int = 0
    worker_restarts: int = 0
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


def render_table(result: Result) -> str:
    """The headline figures as an aligned plain-text table, then the notes."""
    columns = [
        ("events", f"{result.events:,}"),
        ("kills", f"{result.kills}"),
        ("memories expected", f"{result.memories_expected:,}"),
        ("found", f"{result.memories_found:,}"),
        ("lost", f"{result.lost:,}"),
        ("duplicated", f"{result.duplicated:,}"),
        ("mismatched", f"{result.mismatched:,}"),
        ("sessions mismatched", f"{result.sessions_mismatched:,}"),
        ("dead-lettered", f"{result.dead_lettered:,}"),
        ("restarts", f"{result.worker_restarts}"),
        ("wall s", f"{result.wall_s:,.0f}"),
    ]
    widths = [max(len(name), len(value)) for name, value in columns]
    header = "  ".join(name.rjust(width) for (name, _), width in zip(columns, widths, strict=True))
    rule = "  ".join("-" * width for width in widths)
    values = "  ".join(value.rjust(width) for (_, value), width in zip(columns, widths, strict=True))
    return "\n".join([header, rule, values, "", *(f"- {note}" for note in result.notes)])


class Bench:
    """One benchmark run: owns the broker, the workers and the temporary directory."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(tempfile.mkdtemp(prefix="memstream-chaos-"))
        self.broker: EmbeddedBroker | None = None
        self.workers: list[WorkerProcess] = []
        #: Settings of each finished uncrashed run, by name.
        self.runs: dict[str, Settings] = {}

    def close(self) -> None:
        """Stop everything this run started (safe at any point, and twice)."""
        for worker in self.workers:
            worker.stop()
        self.workers.clear()
        release(self.broker, self.workdir, keep=self.args.keep)
        self.broker = None

    def settings(self, name: str) -> Settings:
        assert self.broker is not None
        return Settings(
            broker=self.broker.address,
            topic_prefix=f"chaos-{name}-{uuid.uuid4().hex[:6]}",
            data_dir=self.workdir / name,
            web_port=free_port(),
            max_messages=self.args.max_messages,
            idle_timeout_s=IDLE_TIMEOUT_S,
        )

    @staticmethod
    def progress(settings: Settings, embedder: Embedder) -> tuple[int, int]:
        """(records committed, memory rows): they change only while a worker makes progress."""
        projection = PartitionedMemories.from_settings(settings, embedder)
        return asyncio.run(group_position(settings))[1], projection.count()

    def uncrashed(self, name: str, events: list[Event], embedder: Embedder) -> list[dict[str, Any]]:
        """One worker, never killed, the workload published at once; the memory view."""
        settings = self.settings(name)
        worker = WorkerProcess(settings, log_path=self.workdir / f"{name}.log")
        self.workers.append(worker)
        worker.start()
        started = time.monotonic()
        asyncio.run(publish_at_rate(settings, events, None))
        rows = wait_until_done(settings, embedder, self.args.timeout, worker)
        worker.stop()
        self.workers.remove(worker)
        log(f"  {name}: {len(rows):,} memories in {time.monotonic() - started:.0f} s")
        self.runs[name] = settings
        return rows

    def run(self) -> Result:
        """Uncrashed run, crashed run, comparison."""
        args = self.args
        wall = time.monotonic()
        self.broker = EmbeddedBroker(free_port(), log_dir=self.workdir).start()
        users = args.users or max(8, args.events // 250)
        events = chaos_workload(args.events, users, args.seed)
        result = Result(events=len(events), users=users, kills=args.kills)
        embedder = embedder_from_settings(Settings())
        log(f"broker {self.broker.address}; {len(events):,} events of {users} users")

        log("uncrashed run")
        expected = self.uncrashed("reference", events, embedder)
        control = self.uncrashed("control", events, embedder) if args.control else None

        log(f"crashed run: {args.kills} kills")
        crashed = self.settings("crashed")
        mean_uptime = (args.min_uptime + args.max_uptime) / 2
        rate = args.rate or len(events) / (args.kills * (mean_uptime + RESTART_ESTIMATE_S) or 1)
        publisher = threading.Thread(
            target=lambda: asyncio.run(publish_at_rate(crashed, events, rate)), daemon=True
        )
        worker = WorkerProcess(crashed, log_path=self.workdir / "crashed.log")
        self.workers.append(worker)
        rng = random.Random(args.seed + 1)
        started = time.monotonic()
        worker.start()
        publisher.start()
        unexpected_exits = 0
        # A kill that lands before the restarted worker has joined the group (the dead member
        # holds its partitions until its session times out) interrupts nothing: count the
        # kills that hit a worker which had moved the consolidation backlog or the memories.
        busy_kills = 0
        progress = self.progress(crashed, embedder)
        for kill in range(args.kills):
            time.sleep(rng.uniform(args.min_uptime, args.max_uptime))
            if worker.exited():
                unexpected_exits += 1  # it died by itself: counted, then restarted like a kill
            worker.kill()
            now = self.progress(crashed, embedder)
            busy_kills += now != progress
            worker.start()
            progress = self.progress(crashed, embedder)
            result.worker_restarts += 1
            if (kill + 1) % 5 == 0:
                log(f"  {kill + 1} kills, publisher {'running' if publisher.is_alive() else 'done'}")
        publisher.join()
        published_s = time.monotonic() - started
        found = wait_until_done(crashed, embedder, args.timeout, worker)
        crashed_s = time.monotonic() - started
        worker.stop()
        self.workers.remove(worker)

        log("comparing")
        reference = self.runs["reference"]
        recovered = asyncio.run(live_sessions(crashed))
        folded = asyncio.run(fold_chat_topic(crashed))
        uncrashed_sessions = asyncio.run(live_sessions(reference))
        against_reference = compare(found, expected, open_states(recovered), open_states(uncrashed_sessions))
        against_fold = sum(
            open_states(recovered).get(k) != open_states(folded).get(k)
            for k in set(open_states(recovered)) | set(open_states(folded))
        )
        live, rebuilt = asyncio.run(verify_memories(crashed))
        letters = asyncio.run(read_topic(crashed, Topics.from_settings(crashed).deadletters))
        again, baseline = audit(crashed), audit(reference)

        result.memories_expected = against_reference.expected
        result.memories_found = against_reference.found
        result.lost = against_reference.lost
        result.duplicated = against_reference.duplicated
        result.mismatched = against_reference.mismatched
        result.sessions_mismatched = max(against_reference.sessions_mismatched, against_fold)
        result.dead_lettered = len(letters)
        result.wall_s = time.monotonic() - wall
        notes = result.notes
        notes.append(
            f"workload: {len(events):,} chat events of {users} users (seed {args.seed}), window "
            f"{args.max_messages} messages, {sum(isinstance(e, SessionClosed) for e in events):,} "
            f"explicit closes, {len(open_states(uncrashed_sessions)):,} sessions open at the end"
        )
        notes.append(
            f"crashed run: published at {rate:,.0f} events/s over {published_s:.0f} s, kills after "
            f"{args.min_uptime:g}-{args.max_uptime:g} s of uptime ({busy_kills} of them hit a worker "
            f"that had made progress since its start), done {crashed_s:.0f} s after the first "
            f"start; worker exits not caused by a kill: {unexpected_exits}"
        )
        notes.append(
            f"memory ids: {against_reference.ids_only_here:,} only after crashes, "
            f"{against_reference.ids_only_there:,} only in the uncrashed run; lost and duplicated "
            "count (user, type, content) copies, mismatched counts memories of the same id whose "
            f"view differs (columns: {against_reference.mismatched_columns or 'none'})"
        )
        notes.append(
            f"sessions: recovered vs fold of the crashed chat topic: {against_fold} differ; "
            f"recovered vs uncrashed: {against_reference.sessions_mismatched} differ; fingerprints "
            f"{sessions_fingerprint(recovered)} / {sessions_fingerprint(folded)} / "
            f"{sessions_fingerprint(uncrashed_sessions)}"
        )
        notes.append(
            f"crashed run's live memory table vs one rebuilt from its log: "
            f"{'identical' if live == rebuilt else 'DIFFERENT'} ({live.rows:,} / {rebuilt.rows:,} rows)"
        )
        notes.append(
            f"never done (crashed / uncrashed run): chat messages never consolidated (nor in an "
            f"open session) {again.messages_never_consolidated:,} / "
            f"{baseline.messages_never_consolidated:,}; consolidation requests never extracted "
            f"{again.requests_never_extracted:,} / {baseline.requests_never_extracted:,}"
        )
        notes.append(
            f"done twice after kills: consolidation {again.consolidation_records:,} records / "
            f"{again.consolidation_ids:,} ids; memories topic {again.memory_records:,} records / "
            f"{again.memory_ids:,} ids; {again.extractions_repeated:,} extraction records "
            f"published again (decided again); "
            f"{again.reinforcements_republished:,} reinforcement records repeating an event id "
            f"(counted once); {again.self_reinforcements:,} reinforcements of a memory by "
            f"the extraction that added it ({baseline.self_reinforcements:,} in the uncrashed "
            "run: two equal candidates of one span)"
        )
        if control is not None:
            twin = compare(control, expected, {}, {})
            notes.append(
                f"control (two uncrashed runs): lost {twin.lost}, duplicated "
                f"{twin.duplicated}, mismatched {twin.mismatched}"
            )
        notes.extend(f"example mismatch: {example}" for example in against_reference.examples[:5])
        result.details = {
            "against_reference": asdict(against_reference),
            "audit_crashed": asdict(again),
            "audit_uncrashed": asdict(baseline),
            "memories_live_equals_rebuilt": live == rebuilt,
            "rate": rate,
        }
        return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        description="SIGKILL the worker under a stream of chat events; count lost, duplicated "
        "and mismatched memories and session states against an uncrashed run."
    )
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs (default 20)")
    parser.add_argument("--events", type=int, default=20_000, help="chat events (default 20000)")
    parser.add_argument("--seed", type=int, default=7, help="workload and kill seed (default 7)")
    parser.add_argument("--users", type=int, help="users (default events / 250, at least 8)")
    parser.add_argument("--max-messages", type=int, default=6,
                        help="session window, small so sessions consolidate mid-way (default 6)")
    parser.add_argument("--rate", type=float,
                        help="chat events/s of the crashed run (default: spread over the kills)")
    parser.add_argument("--min-uptime", type=float, default=2.0,
                        help="least seconds between a restart answering and the next kill")
    parser.add_argument("--max-uptime", type=float, default=20.0,
                        help="most seconds between a restart answering and the next kill")
    parser.add_argument("--control", action="store_true",
                        help="also compare a second uncrashed run with the first")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="seconds a run may take to finish after publishing (default 3600)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, data)")
    args = parser.parse_args(argv)
    if args.kills < 1 or args.events < 100 or not 0 < args.min_uptime <= args.max_uptime:
        parser.error("need --kills >= 1, --events >= 100 and 0 < --min-uptime <= --max-uptime")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table (or JSON)."""
    args = parse_args(argv)
    result = run_to_end(Bench(args))
    if result is None:
        return 130
    print(json.dumps(asdict(result), indent=2, default=str) if args.json else render_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
