"""Ingest benchmark: chat events/s through the session agent against a no-op Faust agent.

Publishes a deterministic chat workload (many users, sessions of 5-200 messages) to the
embedded broker, then consumes the same chat topic twice, one app after the other:

1. a no-op Faust agent (its own consumer group) that only counts events: the ceiling that
   Faust, aiokafka and the broker allow on this machine;
2. the memstream worker (``WorkerProcess``), whose session agent folds every event into the
   sessions table.

Both rates are measured the same way, by consumer progress: the committed offsets of each
app's consumer group are polled until they reach the end of the chat topic, and the rate is
the events committed between the first commit and the last, so start-up, group join and
table recovery are excluded. Faust's commit interval bounds the resolution; it is lowered to
``--commit-interval`` for both apps. At the end the worker's resident memory is read from
``/proc`` while every session of the workload is still open.

Run from the repository root (it is a script, not a test)::

    python benchmarks/ingest.py                      # default workload, 1-3 minutes
    python benchmarks/ingest.py --sessions 300       # a quick check
    python benchmarks/ingest.py --rss-sessions 100000   # RSS with 100k open sessions
    python benchmarks/ingest.py --json               # the same figures as JSON

Every ``MEMSTREAM_*`` variable is honoured (e.g. ``MEMSTREAM_PARTITIONS``), except the broker
address, topic prefix, data directory and web port, which the benchmark chooses itself.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import heapq
import json
import math
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import TopicPartition
from runner import log, release, run_to_end

from memstream.models.codec import encode_event
from memstream.models.events.chat import MessageAdded, SessionClosed, SessionStarted
from memstream.models.events.envelope import Event
from memstream.models.settings import Settings
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.kafka.tansu import faust_settings_for, prepare_for_broker, true_end_offsets
from memstream.streams.kafka.topics import Topics, ensure_topics
from memstream.streams.worker.process import WorkerProcess, fetch_json

#: Sessions of the default workload: about 160k events, 1-3 minutes on a 2-core machine.
DEFAULT_SESSIONS = 3000
#: Message counts per session, normal mode and ``--rss-sessions`` mode.
SESSION_MESSAGES = (5, 200)
RSS_SESSION_MESSAGES = (5, 20)
#: Characters per message, by role.
USER_CHARS = (40, 240)
ASSISTANT_CHARS = (80, 400)
#: Event-time gap between two events of one session, seconds.
MESSAGE_GAP_S = (5.0, 90.0)
#: Default of ``--concurrent``: sessions in progress at once (event time), which sets how
#: finely sessions interleave and so how many distinct sessions one batch of events touches.
CONCURRENT_SESSIONS = 1000
#: App id suffix of the no-op baseline; its consumer group is ``<prefix>.<suffix>``.
NOOP_APP_SUFFIX = "noop-baseline"
#: Goals from the issue.
GOAL_RATIO = 1.0
GOAL_RSS_MB = 1024.0
GOAL_RSS_SESSIONS = 100_000

_EPOCH = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)

_VOCABULARY = (
    "I we you it this that the a an and or but so because if when then also just really "
    "maybe please thanks okay sure right yes no not very quite still already again "
    "want need like prefer think know remember forgot tried try booked book check send "
    "find show tell help plan move change cancel update keep use make take get give look "
    "trip flight hotel train ticket booking seat window aisle passport visa Lisbon Porto "
    "Berlin Tokyo weekend Monday Friday morning evening tomorrow week month year "
    "meeting calendar invite email reminder deadline report invoice budget project team "
    "manager client contract draft review notes summary list task tasks issue bug fix "
    "release deploy server database query python script function test tests error log "
    "recipe dinner lunch coffee vegetarian allergy peanuts gym run running walk walking "
    "tour museum beach garden dog cat sister brother mother father friend colleague "
    "birthday gift budget price cheaper faster better earlier later usual favourite "
    "option options idea ideas question answer detail details time place address phone "
    "with without for from into about over after before during between around near "
    "my your our their his her its some any every each other more most less few many "
    "is are was were be been have has had do does did can could should would will"
)
_WORDS = _VOCABULARY.split()


# --- workload --------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadSpec:
    """What to generate; the same spec and seed always give the same events."""

    sessions: int
    min_messages: int
    max_messages: int
    users: int
    close_fraction: float
    seed: int
    concurrent: int = CONCURRENT_SESSIONS

    @property
    def distribution(self) -> str:
        """The session-length distribution, for the output."""
        return f"log-uniform integer on [{self.min_messages}, {self.max_messages}] messages"


def _log_uniform_int(rng: random.Random, low: int, high: int) -> int:
    """An integer in ``[low, high]`` with a log-uniform density: short sessions dominate."""
    return min(high, int(math.exp(rng.uniform(math.log(low), math.log(high + 1)))))


def _corpus(rng: random.Random, chars: int = 400_000) -> tuple[str, list[int]]:
    """A long text of plausible chat sentences and the offsets where its sentences begin."""
    sentences: list[str] = []
    starts: list[int] = []
    size = 0
    while size < chars:
        words = rng.choices(_WORDS, k=rng.randint(5, 16))
        sentence = " ".join(words)
        sentence = sentence[0].upper() + sentence[1:] + rng.choice(".....?!") + " "
        starts.append(size)
        sentences.append(sentence)
        size += len(sentence)
    return "".join(sentences), starts


class Workload:
    """A deterministic chat workload: session plans drawn up front, events made lazily.

    Each session is a ``session_started`` followed by alternating user/assistant messages
    (and a ``session_closed`` for ``close_fraction`` of them). Sessions start spread over
    event time so that about ``spec.concurrent`` are in progress at once, and
    :meth:`events` yields the events of all sessions merged in event-time order, so one
    partition sees many sessions interleaved, as a real chat service would produce them.
    """

    def __init__(self, spec: WorkloadSpec) -> None:
        self.spec = spec
        rng = random.Random(spec.seed)
        n = spec.sessions
        self.lengths = [
            _log_uniform_int(rng, spec.min_messages, spec.max_messages) for _ in range(n)
        ]
        self.user_of = [rng.randrange(spec.users) for _ in range(n)]
        self.closes = [rng.random() < spec.close_fraction for _ in range(n)]
        mean_duration_s = statistics.fmean(self.lengths) * statistics.fmean(MESSAGE_GAP_S)
        span_s = mean_duration_s * n / spec.concurrent
        self.starts = sorted(rng.uniform(0.0, span_s) for _ in range(n))

    @property
    def total_events(self) -> int:
        """Events :meth:`events` yields: starts, messages and closes."""
        return len(self.lengths) + sum(self.lengths) + sum(self.closes)

    @property
    def open_sessions(self) -> int:
        """Sessions still open once every event is applied."""
        return len(self.lengths) - sum(self.closes)

    def length_summary(self) -> str:
        """Min / median / mean / max messages per session, as drawn."""
        lengths = self.lengths
        return (
            f"min {min(lengths)}, median {statistics.median(lengths):g}, "
            f"mean {statistics.fmean(lengths):.1f}, max {max(lengths)}"
        )

    @staticmethod
    def user_id(index: int) -> str:
        """Id of user number ``index``."""
        return f"user-{index:06d}"

    @staticmethod
    def session_id(index: int) -> str:
        """Id of session number ``index``."""
        return f"s-{index:07d}"

    def events(self) -> Iterator[Event]:
        """Every event of the workload, merged across sessions in event-time order."""
        rng = random.Random(self.spec.seed + 1)
        text, sentence_starts = _corpus(rng)
        emitted = [0] * len(self.lengths)
        heap = [(start, index) for index, start in enumerate(self.starts)]
        heapq.heapify(heap)
        while heap:
            at_s, index = heapq.heappop(heap)
            step = emitted[index]
            emitted[index] = step + 1
            length = self.lengths[index]
            common: dict[str, Any] = {
                "user_id": self.user_id(self.user_of[index]),
                "agent_id": "concierge",
                "session_id": self.session_id(index),
                "occurred_at": _EPOCH + timedelta(seconds=at_s),
            }
            session = common["session_id"]
            if step == 0:
                yield SessionStarted(event_id=f"{session}/start", **common)
            elif step <= length:
                role = "user" if step % 2 == 1 else "assistant"
                low, high = USER_CHARS if role == "user" else ASSISTANT_CHARS
                begin = rng.choice(sentence_starts)
                cut = text.rfind(" ", begin, begin + rng.randint(low, high))
                content = text[begin:cut].rstrip(" .?!") + "."
                yield MessageAdded(
                    event_id=f"{session}/m{step}", role=role, content=content, **common
                )
            else:
                yield SessionClosed(event_id=f"{session}/close", **common)
            if step < length or (step == length and self.closes[index]):
                heapq.heappush(heap, (at_s + rng.uniform(*MESSAGE_GAP_S), index))


# --- measuring -------------------------------------------------------------------------


async def publish_workload(settings: Settings, workload: Workload) -> tuple[int, float]:
    """Produce the workload onto the chat topic, keyed by user id; wait for every ack.

    Returns the number of events and the seconds from the first send to the last ack
    (generating and encoding the events included).
    """
    await ensure_topics(settings)
    topic = Topics.from_settings(settings).chat
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.broker,
        acks=1,
        linger_ms=20,
        max_batch_size=256 * 1024,
        max_request_size=4 * 1024 * 1024,
    )
    await producer.start()
    try:
        started = time.perf_counter()
        in_flight: list[asyncio.Future[Any]] = []
        sent = 0
        last_report = started
        for event in workload.events():
            future = await producer.send(
                topic, key=event.user_id.encode(), value=encode_event(event)
            )
            in_flight.append(future)
            sent += 1
            if len(in_flight) >= 20_000:
                # Bounded in flight: the producer's buffer, not our list, sets the pace.
                await asyncio.gather(*in_flight)
                in_flight.clear()
                if time.perf_counter() - last_report > 5:
                    last_report = time.perf_counter()
                    log(f"  published {sent:,} / {workload.total_events:,}")
        await asyncio.gather(*in_flight)
        return sent, time.perf_counter() - started
    finally:
        await producer.stop()


async def chat_partitions(settings: Settings) -> list[TopicPartition]:
    """The partitions of the chat topic."""
    return await topic_partitions(settings, Topics.from_settings(settings).chat)


async def topic_partitions(settings: Settings, topic: str) -> list[TopicPartition]:
    """The partitions of ``topic``; empty if it does not exist."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.broker)
    await admin.start()
    try:
        if topic not in await admin.list_topics():
            return []
        (description,) = await admin.describe_topics([topic])
        return [TopicPartition(topic, p["partition"]) for p in description["partitions"]]
    finally:
        await admin.close()


async def topic_records(settings: Settings, topic: str) -> int | None:
    """Records ever written to ``topic`` (sum of true end offsets); None if it is missing."""
    partitions = await topic_partitions(settings, topic)
    if not partitions:
        return None
    ends = await true_end_offsets(settings.broker, partitions)
    return sum(ends.values())


async def changelog_topics(settings: Settings, app_id: str) -> list[str]:
    """The changelog topics of the Faust app ``app_id``."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.broker)
    await admin.start()
    try:
        topics = await admin.list_topics()
    finally:
        await admin.close()
    return sorted(t for t in topics if t.startswith(f"{app_id}-") and t.endswith("-changelog"))


@dataclass
class GroupProgress:
    """How a consumer group worked through the chat topic."""

    total: int
    #: Offsets committed when the first commit was seen, and when (monotonic seconds).
    committed_at_first: int = 0
    first_commit_at: float | None = None
    done_at: float | None = None
    committed: int = 0
    finished: bool = False
    failure: str | None = None

    @property
    def events_per_s(self) -> float | None:
        """Events committed between the first commit and the last, per second."""
        if self.first_commit_at is None or self.done_at is None:
            return None
        elapsed = self.done_at - self.first_commit_at
        events = self.committed - self.committed_at_first
        if elapsed <= 0 or events <= 0:
            return None  # everything arrived in the first commit: the workload is too small
        return events / elapsed

    @property
    def measured_events(self) -> int:
        """Events inside the measured window."""
        return self.committed - self.committed_at_first

    @property
    def measured_s(self) -> float:
        """Length of the measured window, seconds."""
        if self.first_commit_at is None or self.done_at is None:
            return 0.0
        return self.done_at - self.first_commit_at


async def follow_group(
    settings: Settings,
    group_id: str,
    ends: dict[TopicPartition, int],
    *,
    timeout_s: float,
    alive: Callable[[], str | None],
    on_poll: Callable[[], None] | None = None,
    poll_s: float = 0.1,
) -> GroupProgress:
    """Poll ``group_id``'s committed offsets on the chat topic until they reach ``ends``.

    ``alive`` returns a reason when the consuming process has died; polling then stops.
    ``on_poll`` runs after every poll (the RSS sampler). Only OffsetFetch requests are sent:
    this consumer never joins the group, so it cannot disturb the app it watches.
    """
    progress = GroupProgress(total=sum(ends.values()))
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker, group_id=group_id, enable_auto_commit=False
    )
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout_s
        last_report = time.monotonic()
        while True:
            committed = 0
            for tp, end in ends.items():
                offset = await consumer.committed(tp)
                committed += min(offset or 0, end)
            now = time.monotonic()
            progress.committed = committed
            if progress.first_commit_at is None and committed > 0:
                progress.first_commit_at = now
                progress.committed_at_first = committed
            if on_poll is not None:
                on_poll()
            if committed >= progress.total:
                progress.done_at = now
                progress.finished = True
                return progress
            if (reason := alive()) is not None:
                progress.failure = reason
                break
            if now > deadline:
                progress.failure = f"not caught up after {timeout_s:.0f} s"
                break
            if now - last_report > 10:
                last_report = now
                log(f"  {group_id}: {committed:,} / {progress.total:,} committed")
            await asyncio.sleep(poll_s)
        # Not finished: report the rate over what was processed.
        progress.done_at = time.monotonic()
        return progress
    finally:
        await consumer.stop()


# --- processes -------------------------------------------------------------------------


def _proc_children(pid: int) -> list[int]:
    """Direct children of ``pid``, from /proc."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name in parentheses may contain spaces: split after its closing ')'.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            children.append(int(entry.name))
    return children


def _proc_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    tree = [pid]
    for child in _proc_children(pid):
        tree.extend(_proc_tree(child))
    return tree


def _status_kb(pid: int, key: str) -> int:
    """A ``kB`` field of ``/proc/<pid>/status`` (0 if the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants, MB."""
    return sum(_status_kb(p, "VmRSS") for p in _proc_tree(pid)) / 1024


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory (VmHWM) of ``pid`` alone, MB."""
    return _status_kb(pid, "VmHWM") / 1024


def _process_state(pid: int) -> str | None:
    """None while ``pid`` runs, else why not."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return f"process {pid} is gone"
    return f"process {pid} exited" if state in ("Z", "X") else None


def find_child(marker: str) -> int | None:
    """Pid of our child process whose command line contains ``marker``."""
    for pid in _proc_children(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            return pid
    return None


def _stop_process(process: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``; idempotent."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _log_tail(path: Path, chars: int = 3000) -> str:
    if not path.exists():
        return "(no log)"
    return path.read_text(errors="replace")[-chars:]


def _log_findings(path: Path) -> dict[str, Any]:
    """Counts of worrying lines in a worker log, and its most frequent warning."""
    counts: dict[str, Any] = {"tracebacks": 0, "errors": 0, "warnings": 0, "dead_lettered": 0}
    warnings: collections.Counter[str] = collections.Counter()
    if not path.exists():
        return counts
    for line in path.read_text(errors="replace").splitlines():
        counts["tracebacks"] += "Traceback" in line
        counts["errors"] += "ERROR" in line or "CRITICAL" in line
        counts["dead_lettered"] += "dead-lettered" in line
        if "WARNING" in line:
            counts["warnings"] += 1
            # Digits out, so "buffer full size 125" and "... size 206" count as one message.
            warnings[re.sub(r"\d+(\.\d+)?", "N", line.split("WARNING]", 1)[-1].strip())] += 1
    if warnings:
        counts["top_warning"], counts["top_warning_count"] = warnings.most_common(1)[0]
    return counts


def fetch_session(settings: Settings, user_id: str, session_id: str) -> dict[str, Any] | None:
    """One open session's state from the worker's web views, or None if it is not open.

    Asks ``/session/`` (one session, cheap) and falls back to ``/sessions/`` (the user's
    open sessions) if the worker has no such view. Both carry the user, and ``fetch_json``
    sends the web token of ``settings`` when it has one.
    """
    query = urllib.parse.urlencode({"user": user_id, "session": session_id})
    try:
        reply = fetch_json(settings, f"/session/?{query}", timeout_s=30.0)
        return dict(reply["state"])
    except urllib.error.HTTPError as exc:
        body = exc.read()
        exc.close()
        if exc.code == 404 and body.startswith(b"{"):
            return None  # the view exists and says the session is not open
    listed = fetch_json(settings, f"/sessions/?{query}", timeout_s=60.0)["sessions"]
    found = [s for s in listed if s.get("session_id") == session_id]
    return dict(found[0]) if found else None


# --- the no-op baseline (runs in a child process) --------------------------------------


def noop_app_id(settings: Settings) -> str:
    """Faust app id (and consumer group) of the no-op baseline."""
    return f"{settings.topic_prefix}.{NOOP_APP_SUFFIX}"


def run_noop_agent(stats_path: Path) -> None:
    """Child-process mode: a Faust app whose agent on the chat topic only counts events.

    Built like the real worker's app (same broker workarounds and consumer settings), with
    its own app id and therefore its own consumer group. Every 0.5 s it writes its count and
    the wall-clock times of its first and last event to ``stats_path`` as JSON.
    """
    import faust  # only this mode needs Faust in this process

    settings = Settings()
    prepare_for_broker(settings)
    datadir = settings.data_dir / "noop"
    datadir.mkdir(parents=True, exist_ok=True)  # faust creates only the last level
    app = faust.App(
        noop_app_id(settings),
        broker=[f"kafka://{address}" for address in settings.broker.split(",")],
        store="memory://",
        datadir=str(datadir),
        web_enabled=False,
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
        **faust_settings_for(settings),
    )
    chat = app.topic(
        Topics.from_settings(settings).chat,
        key_serializer="raw",
        value_serializer="raw",
        partitions=settings.partitions,
    )
    stats: dict[str, Any] = {"events": 0, "first_at": None, "last_at": None}

    @app.agent(chat, name="noop")
    async def count_events(stream: Any) -> None:
        """Consume like the session agent (one event at a time), do nothing else."""
        async for _event in stream.events():
            now = time.time()
            if stats["first_at"] is None:
                stats["first_at"] = now
            stats["last_at"] = now
            stats["events"] += 1

    @app.timer(0.5)
    async def write_stats() -> None:
        partial = stats_path.with_suffix(".tmp")
        partial.write_text(json.dumps(stats))
        partial.replace(stats_path)

    # Logged as the real worker logs (memstream worker: JSON lines, Faust at warning).
    from memstream.streams.observability.logs import configure_logging

    configure_logging(settings)
    worker = faust.Worker(
        app, loglevel=settings.log_level, quiet=True, override_logging=False, redirect_stdouts=False
    )
    worker.spinner = None
    worker.execute_from_commandline()


# --- the run ---------------------------------------------------------------------------


@dataclass
class Result:
    """Every figure of one run; the table shows the headline ones."""

    events: int
    sessions: int
    users: int
    session_lengths: str
    distribution: str
    produce_events_per_s: float | None = None
    noop_events_per_s: float | None = None
    session_events_per_s: float | None = None
    ratio: float | None = None
    worker_rss_mb: float | None = None
    sessions_open: int = 0
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def render_table(result: Result) -> str:
    """The headline figures as an aligned plain-text table, then the notes."""
    columns = [
        ("events", _fmt(result.events)),
        ("sessions", _fmt(result.sessions)),
        ("produce ev/s", _fmt(result.produce_events_per_s)),
        ("no-op agent ev/s", _fmt(result.noop_events_per_s)),
        ("session agent ev/s", _fmt(result.session_events_per_s)),
        ("ratio", _fmt(result.ratio, 2)),
        ("worker RSS MB", _fmt(result.worker_rss_mb)),
        ("sessions open", _fmt(result.sessions_open)),
    ]
    widths = [max(len(name), len(value)) for name, value in columns]
    header = "  ".join(name.rjust(width) for (name, _), width in zip(columns, widths))
    rule = "  ".join("-" * width for width in widths)
    values = "  ".join(value.rjust(width) for (_, value), width in zip(columns, widths))
    lines = [header, rule, values, ""]
    lines.extend(f"- {note}" for note in result.notes)
    return "\n".join(lines)


class Bench:
    """One benchmark run: owns the broker, the child processes and the temp directory."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(tempfile.mkdtemp(prefix="memstream-bench-"))
        self.broker: EmbeddedBroker | None = None
        self.worker: WorkerProcess | None = None
        self.noop: subprocess.Popen[bytes] | None = None
        self.settings: Settings | None = None

    def close(self) -> None:
        """Stop everything this run started (safe to call at any point, and twice)."""
        if self.noop is not None:
            _stop_process(self.noop)
            self.noop = None
        if self.worker is not None:
            self.worker.stop()
            self.worker = None
        release(self.broker, self.workdir, keep=self.args.keep)
        self.broker = None

    def start_broker(self) -> str:
        """The broker address: ``--broker``, or a fresh embedded Tansu on a free port."""
        if self.args.broker:
            return str(self.args.broker)
        self.broker = EmbeddedBroker(log_dir=self.workdir / "logs").start()
        return self.broker.address

    def run(self) -> Result:
        """All three phases; returns the figures."""
        args = self.args
        low, high = RSS_SESSION_MESSAGES if args.rss_sessions else SESSION_MESSAGES
        sessions = args.rss_sessions or args.sessions
        spec = WorkloadSpec(
            sessions=sessions,
            min_messages=low,
            max_messages=high,
            users=args.users or max(1, sessions // 4),
            close_fraction=args.close_fraction,
            seed=args.seed,
            concurrent=args.concurrent,
        )
        workload = Workload(spec)
        address = self.start_broker()
        settings = Settings(
            broker=address,
            topic_prefix=f"bench-{uuid.uuid4().hex[:8]}",
            data_dir=self.workdir / "data",
            web_port=free_port(),
            roles=self.args.roles,
        )
        self.settings = settings
        result = Result(
            events=workload.total_events,
            sessions=spec.sessions,
            users=spec.users,
            session_lengths=workload.length_summary(),
            distribution=spec.distribution,
            sessions_open=workload.open_sessions,
        )
        log(
            f"broker {address}, prefix {settings.topic_prefix}, {settings.partitions} partitions; "
            f"workload {workload.total_events:,} events in {spec.sessions:,} sessions"
        )

        log("phase 1: publishing the workload")
        sent, produce_s = asyncio.run(publish_workload(settings, workload))
        result.produce_events_per_s = sent / produce_s
        partitions = asyncio.run(chat_partitions(settings))
        ends = asyncio.run(true_end_offsets(settings.broker, partitions))
        if sum(ends.values()) != sent:
            result.notes.append(
                f"chat topic holds {sum(ends.values()):,} records but {sent:,} were published"
            )
        log(f"  {sent:,} events in {produce_s:.1f} s")

        if not args.skip_noop:
            log("phase 2: no-op Faust agent")
            self.run_noop(settings, ends, result)
        log("phase 3: memstream worker (session agent)")
        self.run_worker(settings, ends, workload, result)

        if result.noop_events_per_s and result.session_events_per_s:
            result.ratio = result.session_events_per_s / result.noop_events_per_s
        self.add_notes(spec, workload, result)
        return result

    def _child_env(self, settings: Settings) -> dict[str, str]:
        # faust reads BROKER_COMMIT_INTERVAL from the environment (it wins over App kwargs),
        # which is the only way to lower it in the worker without touching its code.
        return {
            **os.environ,
            **settings.to_env(),
            "BROKER_COMMIT_INTERVAL": str(self.args.commit_interval),
        }

    def run_noop(self, settings: Settings, ends: dict[TopicPartition, int], result: Result) -> None:
        """Phase 2: the no-op agent in a child process, measured by its committed offsets."""
        stats_path = self.workdir / "noop-stats.json"
        log_path = self.workdir / "noop.log"
        with log_path.open("ab") as log_file:
            self.noop = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--_noop", str(stats_path)],
                env=self._child_env(settings),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                # Own process group: Ctrl-C reaches only us, and close() stops it in order.
                start_new_session=True,
            )
        noop = self.noop

        def noop_alive() -> str | None:
            code = noop.poll()
            return None if code is None else f"no-op agent exited with code {code}"

        progress = asyncio.run(
            follow_group(
                settings,
                noop_app_id(settings),
                ends,
                timeout_s=self.args.phase_timeout,
                alive=noop_alive,
            )
        )
        time.sleep(1.0)  # one more stats write after the last event
        stats: dict[str, Any] = {}
        if stats_path.exists():
            stats = json.loads(stats_path.read_text())
        _stop_process(noop)
        self.noop = None
        result.noop_events_per_s = progress.events_per_s
        result.details["noop"] = {
            **asdict(progress),
            "measured_events": progress.measured_events,
            "measured_s": round(progress.measured_s, 3),
            "in_process": stats,
        }
        if progress.failure:
            result.notes.append(
                f"no-op agent: {progress.failure}; rate over {progress.committed:,} events"
            )
            log(f"no-op agent log (tail):\n{_log_tail(log_path)}")
        if stats.get("first_at") and stats.get("last_at") and stats["events"] > 1:
            in_process = (stats["events"] - 1) / max(stats["last_at"] - stats["first_at"], 1e-9)
            result.details["noop"]["in_process_events_per_s"] = in_process
            result.notes.append(
                f"cross-check: the no-op agent's own first-to-last-event clock says "
                f"{in_process:,.0f} ev/s over {stats['events']:,} events "
                f"(commit-based: {_fmt(progress.events_per_s)})"
            )
        log(f"  no-op: {_fmt(progress.events_per_s)} ev/s")

    def run_worker(
        self,
        settings: Settings,
        ends: dict[TopicPartition, int],
        workload: Workload,
        result: Result,
    ) -> None:
        """Phase 3: the memstream worker, measured by its committed offsets; RSS at the end."""
        log_path = self.workdir / "worker.log"
        os.environ["BROKER_COMMIT_INTERVAL"] = str(self.args.commit_interval)  # see _child_env
        self.worker = WorkerProcess(settings, log_path=log_path)
        try:
            self.worker.start(timeout_s=120)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"the worker did not start: {exc}") from None
        pid = find_child("memstream.streams.cli")
        if pid is None:
            raise RuntimeError("cannot find the worker's process id")
        rss_peak = 0.0

        def sample_rss() -> None:
            nonlocal rss_peak
            rss_peak = max(rss_peak, tree_rss_mb(pid))

        progress = asyncio.run(
            follow_group(
                settings,
                f"{settings.topic_prefix}.{settings.app_id}",
                ends,
                timeout_s=self.args.phase_timeout,
                alive=lambda: _process_state(pid),
                on_poll=sample_rss,
                poll_s=0.1,
            )
        )
        rss_end = tree_rss_mb(pid)
        hwm = peak_rss_mb(pid)
        result.worker_rss_mb = rss_end if progress.finished else None
        result.session_events_per_s = progress.events_per_s
        spot = self.spot_check(settings, workload)
        app_id = f"{settings.topic_prefix}.{settings.app_id}"
        topics = Topics.from_settings(settings)
        changelogs = asyncio.run(changelog_topics(settings, app_id))
        changelog_records = sum(
            asyncio.run(topic_records(settings, topic)) or 0 for topic in changelogs
        )
        result.details["worker"] = {
            **asdict(progress),
            "measured_events": progress.measured_events,
            "measured_s": round(progress.measured_s, 3),
            "rss_end_mb": round(rss_end, 1),
            "rss_peak_sampled_mb": round(rss_peak, 1),
            "rss_hwm_mb": round(hwm, 1),
            "changelog_topics": changelogs,
            "changelog_records": changelog_records,
            "consolidation_requests": asyncio.run(topic_records(settings, topics.consolidation)),
            "dead_letters": asyncio.run(topic_records(settings, topics.deadletters)),
            "spot_check": spot,
            "log": _log_findings(log_path),
        }
        if self.broker is not None and self.broker.pid is not None:
            result.details["broker_rss_mb"] = round(tree_rss_mb(self.broker.pid), 1)
        if progress.failure:
            result.notes.append(
                f"session agent: {progress.failure}; rate over {progress.committed:,} events"
            )
            log(f"worker log (tail):\n{_log_tail(log_path)}")
        log(f"  session agent: {_fmt(progress.events_per_s)} ev/s, RSS {rss_end:,.0f} MB")
        self.worker.stop()
        self.worker = None

    def spot_check(self, settings: Settings, workload: Workload, count: int = 5) -> str:
        """Compare a few open sessions' ``message_count`` in the worker with the workload."""
        rng = random.Random(self.args.seed + 2)
        open_indexes = [i for i, closed in enumerate(workload.closes) if not closed]
        if not open_indexes:
            return "skipped (no open sessions)"
        chosen = rng.sample(open_indexes, min(count, len(open_indexes)))
        matched = 0
        problems: list[str] = []
        for index in chosen:
            session_id = workload.session_id(index)
            try:
                state = fetch_session(
                    settings, workload.user_id(workload.user_of[index]), session_id
                )
            except (OSError, ValueError, KeyError) as exc:
                return f"unavailable ({type(exc).__name__}: {exc})"
            expected = workload.lengths[index]
            if state is None:
                problems.append(f"{session_id} missing")
            elif state.get("message_count") != expected:
                problems.append(
                    f"{session_id} has message_count {state.get('message_count')}, "
                    f"expected {expected}"
                )
            else:
                matched += 1
        summary = f"{matched}/{len(chosen)} sampled open sessions match"
        return summary + (f" ({'; '.join(problems)})" if problems else "")

    def add_notes(self, spec: WorkloadSpec, workload: Workload, result: Result) -> None:
        """The context a reader needs to trust (or distrust) the figures."""
        args = self.args
        notes = result.notes
        mode = " (--rss-sessions mode: short sessions)" if args.rss_sessions else ""
        notes.insert(
            0,
            f"workload{mode}: {spec.users:,} users, {spec.sessions:,} sessions, session length "
            f"{spec.distribution} (drawn: {workload.length_summary()}); user messages "
            f"{USER_CHARS[0]}-{USER_CHARS[1]} chars, assistant {ASSISTANT_CHARS[0]}-"
            f"{ASSISTANT_CHARS[1]} chars; ~{spec.concurrent:,} sessions in progress at once; "
            f"{spec.close_fraction:.0%} closed; seed {spec.seed}; worker roles "
            f"{self.args.roles}",
        )
        notes.insert(
            1,
            "produce: one aiokafka producer, acks=1, linger 20 ms, 256 KB batches, keyed by "
            "user_id (rate includes generating and encoding)",
        )
        notes.insert(
            2,
            f"agent rates: events committed between the group's first commit and its catch-up "
            f"(start-up, join and recovery excluded), commit interval {args.commit_interval:g} s "
            f"for both apps, so each figure is good to about +-{args.commit_interval:g} s of "
            f"its window",
        )
        for name in ("noop", "worker"):
            detail = result.details.get(name)
            if detail:
                short = detail["measured_s"] < 10 * args.commit_interval
                notes.append(
                    f"{'no-op' if name == 'noop' else 'session'} agent window: "
                    f"{detail['measured_events']:,} events in {detail['measured_s']:.1f} s"
                    + (
                        " (under 10 commit intervals: a rough figure, use more --sessions)"
                        if short
                        else ""
                    )
                )
        worker = result.details.get("worker")
        if worker:
            per_event = worker["changelog_records"] / max(result.events, 1)
            notes.append(
                f"sessions changelog: {worker['changelog_records']:,} records "
                f"({per_event:.2f} per event); consolidation requests: "
                f"{_fmt(worker['consolidation_requests'])}; dead letters: "
                f"{_fmt(worker['dead_letters'])}"
            )
            notes.append(
                f"worker RSS (process tree) at the end {worker['rss_end_mb']:,.0f} MB, highest "
                f"sampled {worker['rss_peak_sampled_mb']:,.0f} MB, kernel peak (VmHWM) "
                f"{worker['rss_hwm_mb']:,.0f} MB"
                + (
                    f"; broker RSS {result.details['broker_rss_mb']:,.0f} MB"
                    if "broker_rss_mb" in result.details
                    else ""
                )
            )
            notes.append(f"spot check: {worker['spot_check']}")
            worker_log = worker["log"]
            notes.append(
                f"worker log: {worker_log['errors']} error lines, {worker_log['tracebacks']} tracebacks, "
                f"{worker_log['warnings']} warnings, {worker_log['dead_lettered']} dead-lettered"
                + (
                    f" (most frequent warning, {worker_log['top_warning_count']}x: "
                    f"{worker_log['top_warning'][:80]!r})"
                    if "top_warning" in worker_log
                    else ""
                )
            )
        ratio_goal = (
            "n/a" if result.ratio is None else ("met" if result.ratio >= GOAL_RATIO else "not met")
        )
        if result.worker_rss_mb is None:
            rss_goal = "n/a"
        elif result.sessions_open < GOAL_RSS_SESSIONS:
            rss_goal = f"n/a at {result.sessions_open:,} open sessions (use --rss-sessions 100000)"
        else:
            rss_goal = "met" if result.worker_rss_mb <= GOAL_RSS_MB else "not met"
        notes.append(
            f"goals: ratio >= {GOAL_RATIO:g}: {ratio_goal}; worker RSS <= {GOAL_RSS_MB:g} MB "
            f"with {GOAL_RSS_SESSIONS:,} open sessions: {rss_goal}"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        description="Chat ingest: events/s through the session agent vs a no-op Faust agent, "
        "and worker RSS with every session open.",
    )
    parser.add_argument(
        "--sessions",
        type=int,
        default=DEFAULT_SESSIONS,
        help=f"sessions in the workload, {SESSION_MESSAGES[0]}-{SESSION_MESSAGES[1]} messages "
        f"each (default {DEFAULT_SESSIONS})",
    )
    parser.add_argument(
        "--rss-sessions",
        type=int,
        metavar="N",
        help=f"instead: N sessions of {RSS_SESSION_MESSAGES[0]}-{RSS_SESSION_MESSAGES[1]} "
        "messages, for the RSS figure with N open sessions (e.g. 100000)",
    )
    parser.add_argument("--users", type=int, help="distinct users (default sessions / 4)")
    parser.add_argument(
        "--close-fraction",
        type=float,
        default=0.0,
        help="fraction of sessions that end with session_closed (default 0: all stay open)",
    )
    parser.add_argument(
        "--concurrent",
        type=int,
        default=CONCURRENT_SESSIONS,
        help="sessions in progress at once, i.e. how finely they interleave on the topic "
        f"(default {CONCURRENT_SESSIONS})",
    )
    parser.add_argument("--seed", type=int, default=7, help="workload seed (default 7)")
    parser.add_argument("--broker", help="use this broker (host:port) instead of starting Tansu")
    parser.add_argument(
        "--commit-interval",
        type=float,
        default=0.5,
        help="Faust broker_commit_interval for both apps, seconds (default 0.5)",
    )
    parser.add_argument(
        "--phase-timeout",
        type=float,
        default=1800.0,
        help="give up on an agent that has not caught up after this many seconds (default 1800)",
    )
    parser.add_argument(
        "--roles",
        default="sessions",
        help="worker roles (default: sessions, the agent under test; "
        "sessions,extraction,projector for the whole worker)",
    )
    parser.add_argument("--skip-noop", action="store_true", help="do not run the no-op baseline")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, data)")
    parser.add_argument("--_noop", metavar="STATS_FILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 0.0 <= args.close_fraction <= 1.0:
        parser.error("--close-fraction must be between 0 and 1")
    if (args.rss_sessions or args.sessions) < 1 or args.concurrent < 1:
        parser.error("--sessions, --rss-sessions and --concurrent must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table (or JSON)."""
    args = parse_args(argv)
    if args._noop:
        run_noop_agent(Path(args._noop))
        return 0
    result = run_to_end(Bench(args))
    if result is None:
        return 130
    if args.json:
        print(json.dumps(asdict(result), indent=2))
    else:
        print(render_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
