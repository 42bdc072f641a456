"""Soak benchmark: one worker under steady chat traffic and steady searches for a bounded
time; does its memory grow, and do search latencies drift?

    python benchmarks/soak.py                                 # 300 s, 15 events/s, 5 searches/s
    python benchmarks/soak.py --duration 120 --interval 20
    python benchmarks/soak.py --json

It starts its own embedded broker (Tansu) and one worker (``WorkerProcess``, every role) in a
fresh temporary directory (``--keep`` keeps it, with the worker log). Three threads then run
side by side until ``--duration`` has passed:

- a **publisher** sends chat events at ``--rate`` per second: ``--concurrent`` sessions are
  open at once, each of 6-30 messages (so the window of ``--max-messages`` evicts some), and
  a session that ends is closed explicitly and replaced by a new one of a random user;
- a **searcher** calls ``MemoryClient.search`` at ``--search-rate`` per second for random
  users (each search also publishes an access event, as a real client does);
- a **prober** publishes a tiny session of its own user every ``--probe-every`` seconds,
  closes it, and polls the projection until the memory of that session is there: the
  close -> searchable lag.

Every ``--interval`` seconds it prints a row: elapsed time, chat events published, memories
in the projection, the chat and consolidation records the worker has not committed yet (its
backlog: it grows when the worker cannot keep up), search p50 / p95 / p99 in that interval,
the median probe lag in that interval, the worker's RSS and the broker's RSS (``VmRSS`` from
``/proc``). At the end: RSS growth per minute after ``--warmup`` (least-squares slope of
samples taken every 2 s), the search percentiles of the first interval against the last, and
what the LanceDB table holds on disk (versions, index directories, data and deletion files)
with the worker's open files (and how many of them are deleted files).

A worker's RSS grows with the data it serves, so growth alone does not tell a leak.
``--compare-fresh S`` then stops the soaked worker, starts a fresh one on the same topics and
table and keeps the traffic going for S seconds: the soaked worker's RSS (median of its last
interval) minus the fresh one's (median of the second half) is what the long run added beyond
the data: leaks, and caches that a short run does not fill.

Every ``MEMSTREAM_*`` variable is honoured, except the broker address, topic prefix, data
directory and web port, which the benchmark sets itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from chatter import backlog, chat_line
from runner import log, release, run_to_end

from memstream.models.codec import encode_event
from memstream.models.events.chat import MessageAdded, SessionClosed, SessionStarted
from memstream.models.events.envelope import Event
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import MemoryStore, PartitionedMemories
from memstream.streams.client import MemoryClient
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.kafka.topics import Topics, ensure_topics
from memstream.streams.worker.process import WorkerProcess

USER_LINES = [
    "I live in {city}.",
    "Actually, I moved to {city}.",
    "I work at {company}.",
    "I prefer {travel} over buses.",
    "My budget is about {budget} euros.",
    "My favourite food is {food}.",
    "Can you find a quiet hotel near the station in {city}?",
    "What is the weather like in {city} next week?",
    "Please book a table for two on Friday evening.",
]
QUERIES = [
    "where do I live", "where do I work", "what food do I like", "how do I like to travel",
    "what is my budget", "hotel near the station", "weather next week", "table on Friday",
]
#: The prober's own user: its memories never mix with the traffic's.
PROBE_USER = "soak-probe"


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0-1) by the nearest-rank method; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def rss_mb(pid: int | None) -> float | None:
    """``VmRSS`` of ``pid`` in MB, from ``/proc/<pid>/status``; None if it is gone."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def open_files(pid: int | None) -> tuple[int, int] | None:
    """(open file descriptors, those whose file is deleted) of ``pid``; None if it is gone."""
    if pid is None:
        return None
    total = deleted = 0
    try:
        names = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return None
    for fd in names:
        try:
            target = fd.readlink()
        except OSError:
            continue  # closed while we looked
        total += 1
        deleted += str(target).endswith(" (deleted)")
    return total, deleted


def table_files(table_dir: Path) -> dict[str, int]:
    """What a Lance table directory holds: versions (manifests), index directories, data
    files and deletion files."""

    def entries(name: str) -> int:
        try:
            return sum(1 for _ in (table_dir / name).iterdir())
        except OSError:
            return 0

    return {
        "versions": entries("_versions"),
        "index_dirs": entries("_indices"),
        "data_files": entries("data"),
        "deletion_files": entries("_deletions"),
    }


def slope_per_minute(samples: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, MB) samples, in MB per minute."""
    if len(samples) < 3:
        return None
    xs, ys = [s for s, _ in samples], [v for _, v in samples]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    if var == 0:
        return None
    return 60 * sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var


# --- traffic ---------------------------------------------------------------------------


class Conversations:
    """An endless stream of chat events: ``concurrent`` sessions open at once, each of 6-30
    messages then an explicit close, replaced by a new session of a random user."""

    def __init__(self, users: int, concurrent: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.users = users
        self.sessions = 0
        self.closed = 0
        #: Per open session: (user, session, messages left, next message number).
        self.open: list[list[Any]] = [self._new() for _ in range(concurrent)]
        self.pending: list[Event] = []

    def _new(self) -> list[Any]:
        self.sessions += 1
        user = f"user{self.rng.randrange(self.users):04d}"
        return [user, f"soak-{self.sessions}", self.rng.randint(6, 30), 0, True]

    def next_event(self) -> Event:
        """The next event of a random open session."""
        index = self.rng.randrange(len(self.open))
        user, session, left, number, fresh = self.open[index]
        common: dict[str, Any] = {"user_id": user, "session_id": session,
                                  "occurred_at": datetime.now(UTC)}
        if fresh:
            self.open[index][4] = False
            return SessionStarted(event_id=f"{session}/start", **common)
        if left == 0:
            self.open[index] = self._new()
            self.closed += 1
            return SessionClosed(event_id=f"{session}/close", **common)
        self.open[index][2:4] = [left - 1, number + 1]
        role = "user" if number % 2 == 0 else "assistant"
        text = chat_line(self.rng, role, USER_LINES)
        return MessageAdded(event_id=f"{session}/m{number}", role=role, content=text, **common)


@dataclass
class Shared:
    """What the threads record, under one lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    published: int = 0
    #: (monotonic time, latency ms) of every search, and of every probe (lag s).
    searches: list[tuple[float, float]] = field(default_factory=list)
    search_errors: int = 0
    probes: list[tuple[float, float]] = field(default_factory=list)
    probes_missed: int = 0


async def publish_steadily(
    settings: Settings, rate: float, traffic: Conversations, shared: Shared, stop: threading.Event
) -> None:
    """Publish ``rate`` chat events a second until ``stop`` is set, in 0.1 s ticks."""
    await ensure_topics(settings)
    topic = Topics.from_settings(settings).chat
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all", linger_ms=5)
    await producer.start()
    try:
        tick_s, owed = 0.1, 0.0
        started = time.monotonic()
        ticks = 0
        while not stop.is_set():
            owed += rate * tick_s
            count, owed = int(owed), owed - int(owed)
            events = [traffic.next_event() for _ in range(count)]
            futures = [
                await producer.send(topic, key=e.user_id.encode(), value=encode_event(e))
                for e in events
            ]
            for future in futures:
                await future
            with shared.lock:
                shared.published += len(events)
            ticks += 1
            await asyncio.sleep(max(0.0, started + ticks * tick_s - time.monotonic()))
    finally:
        await producer.stop()


def search_steadily(
    settings: Settings, rate: float, users: int, shared: Shared, stop: threading.Event, seed: int
) -> None:
    """Call ``MemoryClient.search`` ``rate`` times a second for random users."""
    rng = random.Random(seed)
    with MemoryClient(settings) as client:
        started, calls = time.monotonic(), 0
        while not stop.is_set():
            user = f"user{rng.randrange(users):04d}"
            began = time.perf_counter()
            try:
                client.search(rng.choice(QUERIES), user_id=user, limit=5)
                latency_ms = (time.perf_counter() - began) * 1000
                with shared.lock:
                    shared.searches.append((time.monotonic(), latency_ms))
            except Exception as exc:  # noqa: BLE001 - a failed search is counted; the soak goes on
                with shared.lock:
                    shared.search_errors += 1
                log(f"search failed: {type(exc).__name__}: {exc}")
            calls += 1
            stop.wait(max(0.0, started + calls / rate - time.monotonic()))


def probe_steadily(settings: Settings, every_s: float, shared: Shared, stop: threading.Event) -> None:
    """Every ``every_s``: a two-message session of the probe user, closed; the time from the
    close's acknowledgement until the projection holds a memory of that session."""
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    number = 0
    while not stop.wait(every_s):
        number += 1
        session = f"probe-{number}"
        now = datetime.now(UTC)
        common: dict[str, Any] = {"user_id": PROBE_USER, "session_id": session}
        opening = [
            SessionStarted(event_id=f"{session}/start", occurred_at=now, **common),
            MessageAdded(event_id=f"{session}/m0", occurred_at=now, role="user",
                         content=f"I work at Probe{number} Labs.", **common),
        ]
        close = SessionClosed(event_id=f"{session}/close",
                              occurred_at=now + timedelta(seconds=1), **common)
        asyncio.run(_send(settings, opening))
        asyncio.run(_send(settings, [close]))
        closed_at = time.monotonic()
        deadline = closed_at + 60
        while time.monotonic() < deadline and not stop.is_set():
            if any(m.session_id == session for m in projection.list_memories(PROBE_USER)):
                with shared.lock:
                    shared.probes.append((time.monotonic(), time.monotonic() - closed_at))
                break
            time.sleep(0.05)
        else:
            if not stop.is_set():  # a probe cut short by the end of the soak is no miss
                with shared.lock:
                    shared.probes_missed += 1


async def _send(settings: Settings, events: list[Event]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    await producer.start()
    try:
        topic = Topics.from_settings(settings).chat
        for event in events:
            await producer.send_and_wait(topic, key=event.user_id.encode(), value=encode_event(event))
    finally:
        await producer.stop()


# --- the run ---------------------------------------------------------------------------


@dataclass
class Row:
    """One interval's figures."""

    elapsed_s: float
    events: int
    memories: int
    #: Chat and consolidation records not yet committed: grows when the worker falls behind.
    backlog: int
    searches: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    lag_s: float | None
    worker_rss_mb: float | None
    broker_rss_mb: float | None


@dataclass
class Result:
    """Every figure of one run."""

    duration_s: float
    rate: float
    search_rate: float
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The table's files at the end (see table_files), and the worker's open files.
    table: dict[str, int] = field(default_factory=dict)
    worker_open_files: int | None = None
    worker_deleted_open_files: int | None = None
    #: ``--compare-fresh``: the rows of the fresh worker, and the median RSS over the last
    #: interval of the soaked worker and over the second half of the fresh worker's run.
    fresh_rows: list[Row] = field(default_factory=list)
    soaked_rss_mb: float | None = None
    fresh_rss_mb: float | None = None


def _f(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def render_row(row: Row) -> str:
    """One table line."""
    return (
        f"{row.elapsed_s:>7.0f}  {row.events:>9,}  {row.memories:>8,}  {row.backlog:>7,}  "
        f"{row.searches:>8,}  "
        f"{_f(row.p50_ms):>7}  {_f(row.p95_ms):>7}  {_f(row.p99_ms):>7}  {_f(row.lag_s, 2):>7}  "
        f"{_f(row.worker_rss_mb, 0):>9}  {_f(row.broker_rss_mb, 0):>9}"
    )


HEADER = (
    f"{'elapsed':>7}  {'events':>9}  {'memories':>8}  {'backlog':>7}  {'searches':>8}  {'p50 ms':>7}  "
    f"{'p95 ms':>7}  {'p99 ms':>7}  {'lag s':>7}  {'worker MB':>9}  {'broker MB':>9}"
)


class Bench:
    """One soak run: owns the broker, the worker, the threads and the temp directory."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(tempfile.mkdtemp(prefix="memstream-soak-"))
        self.broker: EmbeddedBroker | None = None
        self.worker: WorkerProcess | None = None
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        #: When the soak proper ended (before any ``--compare-fresh`` run).
        self.soak_end = float("inf")

    def close(self) -> None:
        """Stop everything this run started (safe at any point, and twice)."""
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=90)
        self.threads.clear()
        if self.worker is not None:
            self.worker.stop()
            self.worker = None
        release(self.broker, self.workdir, keep=self.args.keep)
        self.broker = None

    def run(self) -> Result:
        """Start everything, print a row per interval, summarise."""
        args = self.args
        self.broker = EmbeddedBroker(free_port(), log_dir=self.workdir).start()
        settings = Settings(
            broker=self.broker.address,
            topic_prefix=f"soak-{uuid.uuid4().hex[:6]}",
            data_dir=self.workdir / "data",
            web_port=free_port(),
            max_messages=args.max_messages,
        )
        self.worker = WorkerProcess(settings, log_path=self.workdir / "worker.log").start()
        # WorkerProcess has no public pid; its child process is the worker itself.
        worker_pid = self.worker.pid
        log(f"broker {self.broker.address} (pid {self.broker.pid}), worker pid {worker_pid}")
        shared = Shared()
        traffic = Conversations(args.users, args.concurrent, args.seed)
        self.threads = [
            threading.Thread(
                target=lambda: asyncio.run(
                    publish_steadily(settings, args.rate, traffic, shared, self.stop)
                ),
                name="publisher",
            ),
            threading.Thread(
                target=search_steadily,
                args=(settings, args.search_rate, args.users, shared, self.stop, args.seed + 1),
                name="searcher",
            ),
            threading.Thread(
                target=probe_steadily, args=(settings, args.probe_every, shared, self.stop),
                name="prober",
            ),
        ]
        projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
        result = Result(duration_s=args.duration, rate=args.rate, search_rate=args.search_rate)
        started = time.monotonic()
        for thread in self.threads:
            thread.start()
        print(HEADER, flush=True)
        print("-" * len(HEADER), flush=True)
        worker_rss: list[tuple[float, float]] = []
        broker_rss: list[tuple[float, float]] = []
        watch = (settings, shared, projection, worker_rss, broker_rss)
        self.watch(result.rows, args.duration, started, *watch)
        # While the worker still runs: its open files, and the live tables' files (one table
        # per partition, summed).
        result.table = {}
        for partition in range(settings.partitions):
            name = projection.table(partition).table_name
            for kind, count in table_files(settings.lancedb_dir / f"{name}.lance").items():
                result.table[kind] = result.table.get(kind, 0) + count
        files = open_files(worker_pid)
        if files is not None:
            result.worker_open_files, result.worker_deleted_open_files = files
        self.soak_end = time.monotonic()
        if args.compare_fresh > 0:
            last = [v for at, v in worker_rss if at >= result.rows[-1].elapsed_s - args.interval]
            result.soaked_rss_mb = statistics.median(last) if last else None
            # A fresh worker on the same topics and table, under the same traffic: what the
            # soaked worker holds beyond it is what its hours added (data, caches, leaks).
            self.worker.stop()
            self.worker = WorkerProcess(settings, log_path=self.workdir / "worker.log").start()
            print(f"--- a fresh worker (pid {self.worker.pid}) on the same data, same traffic", flush=True)
            fresh_rss: list[tuple[float, float]] = []
            fresh_started = time.monotonic()
            self.watch(result.fresh_rows, args.compare_fresh, fresh_started, settings, shared,
                       projection, fresh_rss, [])
            second_half = [v for at, v in fresh_rss if at >= args.compare_fresh / 2]
            result.fresh_rss_mb = statistics.median(second_half) if second_half else None
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=90)
        self.summarise(result, shared, worker_rss, broker_rss, traffic)
        return result

    def watch(
        self,
        rows: list[Row],
        duration_s: float,
        started: float,
        settings: Settings,
        shared: Shared,
        projection: MemoryStore,
        worker_rss: list[tuple[float, float]],
        broker_rss: list[tuple[float, float]],
    ) -> None:
        """Sample RSS every 2 s and print a row per interval for ``duration_s``."""
        assert self.worker is not None and self.broker is not None
        interval = self.args.interval
        count = max(1, round(duration_s / interval))
        interval_start = started
        while len(rows) < count:
            now = time.monotonic()
            for pid, samples in ((self.worker.pid, worker_rss), (self.broker.pid, broker_rss)):
                value = rss_mb(pid)
                if value is not None:
                    samples.append((now - started, value))
            if self.worker.exited():
                raise RuntimeError("the worker exited during the soak")
            if not self.broker.running:
                raise RuntimeError(f"the broker exited during the soak: {self.broker.output_tail()}")
            if now >= started + (len(rows) + 1) * interval:
                rows.append(self.row(now - started, settings, shared, interval_start, now,
                                     projection, worker_rss, broker_rss))
                print(render_row(rows[-1]), flush=True)
                interval_start = now
            next_row = started + (len(rows) + 1) * interval
            time.sleep(min(2.0, max(0.05, next_row - time.monotonic())))

    @staticmethod
    def row(
        elapsed_s: float,
        settings: Settings,
        shared: Shared,
        since: float,
        until: float,
        projection: MemoryStore,
        worker_rss: list[tuple[float, float]],
        broker_rss: list[tuple[float, float]],
    ) -> Row:
        """The figures of the interval [since, until)."""
        with shared.lock:
            window = [ms for at, ms in shared.searches if since <= at < until]
            lags = [lag for at, lag in shared.probes if since <= at < until]
            published = shared.published
        return Row(
            elapsed_s=elapsed_s,
            events=published,
            memories=projection.count(),
            backlog=asyncio.run(backlog(settings)),
            searches=len(window),
            p50_ms=percentile(window, 0.50),
            p95_ms=percentile(window, 0.95),
            p99_ms=percentile(window, 0.99),
            lag_s=statistics.median(lags) if lags else None,
            worker_rss_mb=worker_rss[-1][1] if worker_rss else None,
            broker_rss_mb=broker_rss[-1][1] if broker_rss else None,
        )

    def summarise(
        self,
        result: Result,
        shared: Shared,
        worker_rss: list[tuple[float, float]],
        broker_rss: list[tuple[float, float]],
        traffic: Conversations,
    ) -> None:
        """Growth per minute after warm-up, and first-vs-last interval latencies."""
        args = self.args
        notes = result.notes
        warm = args.warmup
        for name, samples in (("worker", worker_rss), ("broker", broker_rss)):
            after = [(s, v) for s, v in samples if s >= warm]
            slope = slope_per_minute(after)
            if after:
                notes.append(
                    f"{name} RSS after {warm:g} s warm-up: {after[0][1]:,.0f} -> {after[-1][1]:,.0f} MB, "
                    f"least-squares growth {_f(slope)} MB/min over {len(after)} samples"
                )
        if len(result.rows) >= 2:
            first, last = result.rows[0], result.rows[-1]
            parts = []
            for label in ("p50_ms", "p95_ms", "p99_ms"):
                a, b = getattr(first, label), getattr(last, label)
                ratio = f" ({b / a:.2f}x)" if a and b else ""
                parts.append(f"{label[:3]} {_f(a)} -> {_f(b)} ms{ratio}")
            notes.append("search latency, first interval -> last: " + ", ".join(parts))
        if result.table:
            t = result.table
            notes.append(
                f"LanceDB table at the end: {t['versions']:,} versions, "
                f"{t['index_dirs']:,} index directories, {t['data_files']:,} data files, "
                f"{t['deletion_files']:,} deletion files; worker: "
                f"{_f(result.worker_open_files, 0)} open files, "
                f"{_f(result.worker_deleted_open_files, 0)} of them deleted"
            )
        if result.soaked_rss_mb is not None and result.fresh_rss_mb is not None:
            notes.append(
                f"soaked worker {result.soaked_rss_mb:,.0f} MB (median of its last interval); a fresh "
                f"worker on the same data and traffic {result.fresh_rss_mb:,.0f} MB (median of the "
                f"second half of {args.compare_fresh:g} s): the soaked one holds "
                f"{result.soaked_rss_mb - result.fresh_rss_mb:+,.0f} MB more"
            )
        all_lags = [lag for at, lag in shared.probes if at <= self.soak_end]  # not the fresh worker's
        notes.append(
            f"close -> searchable (probe sessions, one every {args.probe_every:g} s): "
            f"{len(all_lags)} measured, median {_f(statistics.median(all_lags) if all_lags else None, 2)} s, "
            f"max {_f(max(all_lags) if all_lags else None, 2)} s, {shared.probes_missed} not seen within 60 s"
        )
        notes.append(
            f"traffic: {shared.published:,} chat events at {args.rate:g}/s target, "
            f"{traffic.sessions:,} sessions started, {traffic.closed:,} closed, "
            f"{args.concurrent} open at a time, {args.users} users; "
            f"{len(shared.searches):,} searches at {args.search_rate:g}/s target, "
            f"{shared.search_errors} failed"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        description="Steady chat traffic and searches against one worker for a bounded time; "
        "RSS growth and search latency drift."
    )
    parser.add_argument("--duration", type=float, default=300.0, help="seconds (default 300)")
    parser.add_argument("--interval", type=float, default=30.0, help="seconds per row (default 30)")
    parser.add_argument("--warmup", type=float, default=60.0,
                        help="seconds left out of the RSS growth (default 60)")
    # About what one worker sustains on a 2-core machine with the offline extractor and the
    # searches beside it; above that the backlog and the close -> searchable lag grow.
    parser.add_argument("--rate", type=float, default=15.0, help="chat events/s (default 15)")
    parser.add_argument("--search-rate", type=float, default=5.0, help="searches/s (default 5)")
    parser.add_argument("--probe-every", type=float, default=5.0,
                        help="seconds between close -> searchable probes (default 5)")
    parser.add_argument("--users", type=int, default=200, help="users (default 200)")
    parser.add_argument("--concurrent", type=int, default=50, help="sessions open at once (default 50)")
    parser.add_argument("--max-messages", type=int, default=12,
                        help="session window; longer sessions consolidate mid-way (default 12)")
    parser.add_argument("--seed", type=int, default=7, help="traffic seed (default 7)")
    parser.add_argument("--compare-fresh", type=float, default=0.0, metavar="S",
                        help="then replace the worker by a fresh one on the same data and keep the "
                        "traffic going for S seconds: what the soaked worker holds beyond it "
                        "(default 0: no comparison)")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, data)")
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.interval <= 0 or args.rate <= 0 or args.search_rate <= 0:
        parser.error("--duration, --interval, --rate and --search-rate must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the soak; rows are printed as they come, then the summary."""
    args = parse_args(argv)
    result = run_to_end(Bench(args))
    if result is None:
        return 130
    print()
    for note in result.notes:
        print(f"- {note}")
    if args.json:
        print(json.dumps(asdict(result), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
