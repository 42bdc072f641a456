"""Backfill: a seeded history of many users and sessions published at once, followed through
the worker's stages until every memory it makes is searchable. Issue 16's benchmark.

    python benchmarks/backfill.py                  # 10 users, 270 sessions, ~6,000 turns
    python benchmarks/backfill.py --quick          # 3 users, 30 sessions, ~600 turns
    python benchmarks/backfill.py --profile profile.txt   # and py-spy the worker meanwhile

The history is ``dialogues.py``'s (the recall benchmark's data set: two named people per user,
planted facts among chit-chat, sessions days apart), ``--users`` dialogues of ``--sessions``
sessions in all and about ``--turns`` turns in all. It starts the embedded broker and one
worker (``dialogue_recall.broker_and_worker``) and waits until the worker is ready, then
publishes the whole history as fast as ``MemoryClient.add`` allows
(``dialogue_recall.add_dialogues``: one add per turn with the turn's time and id, each
session closed by its last turn's add; ``--publishers`` users at a time, one client), and
follows the pipeline on the worker's ``/metrics`` page, read every ``--poll`` seconds, until
everything is searchable:

* **session fold**: the session agent processed every chat record of the topic;
* **extraction and decisions**: the extraction agent processed every consolidation request
  (extracted, decided, the memory events published);
* **projection**: the projector processed every record of the memories topic (every memory
  event applied to LanceDB);
* **all searchable**: then a search of the last-published user finds the memory citing its
  latest turn (the table read by this process, as another reader would).

Each stage's row gives when it ended after the first publish, the turns and memories per
second up to then, and the worker's CPU seconds since the first publish; a timeline under
the notes shows each stage's progress and the cores the worker used, at tenths of the run. Memories are the ``memory_added``
events of the memories topic, counted at the end by reading it (sealed, but the type is in
the envelope). The worker's embedder calls are metered (``memstream_embedded_texts_total``,
``memstream_embedding_seconds``, by stage: decisions and projection), and so is extraction.

The bound: after the pipeline, this process embeds the memories' search texts (read from the
table) with the same embedder (``embedder_from_settings``) in batches of
``projection_batch_size``, the projector's largest call. The end-to-end figure is the time
from the first publish to all searchable over the time the embedder alone took for those
texts. Goal (issue 28; 2 cores, one worker): at most 1.3. Beside it: the same texts
in the decider's mean call of the run, the memories' contents one extraction per call (as
the decider embeds its candidates), and the decider's neighbour query
(``MemoryProjection.neighbours``) on the final table, each timed alone.

``--profile FILE`` runs ``py-spy record`` on the worker from the first publish to the end
(100 samples/s, every thread, idle samples included; raw collapsed stacks, or a flame graph
if FILE ends in ``.svg``) and, for raw output, prints where each thread's time went. py-spy
is not a dependency of memstream: install it into the environment to use this.

Every ``MEMSTREAM_*`` variable is honoured, except the broker address, data directory and
web port, which the benchmark sets itself.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
from aiokafka import TopicPartition
from dialogue_recall import add_dialogues, broker_and_worker
from dialogues import Dialogue
from dialogues import generate as generate_dialogues
from prometheus_client.parser import text_string_to_metric_families
from runner import exit_on_sigterm, log, release

from memstream.models.codec import InvalidEvent, decode_event
from memstream.models.settings import Settings
from memstream.projections.embedder import Embedder, embedder_from_settings, embedder_threads
from memstream.projections.memories import PartitionedMemories
from memstream.streams.client import MemoryClient
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.tansu import true_end_offsets
from memstream.streams.kafka.topics import Topics
from memstream.streams.worker.process import WorkerProcess, worker_ready, worker_url

STAGES = ("session fold", "extraction and decisions", "projection", "all searchable")
#: Issue 28: all searchable within this many times the embedder alone on the memories' texts.
GOAL = 1.3


# --- the worker's /metrics ----------------------------------------------------------------


@dataclass(frozen=True)
class Scrape:
    """One reading of the worker's /metrics page: ``at`` seconds after the first publish."""

    at: float
    #: (name, sorted label pairs) -> value
    samples: Mapping[tuple[str, tuple[tuple[str, str], ...]], float]

    def total(self, name: str, **labels: str) -> float:
        """The sum of the ``name`` samples whose labels include ``labels``."""
        wanted = set(labels.items())
        return sum(
            value for (sample, pairs), value in self.samples.items()
            if sample == name and wanted <= set(pairs)
        )


def scrape(settings: Settings, at: float) -> Scrape:
    """The worker's /metrics page, with its web token if one is set."""
    request = urllib.request.Request(worker_url(settings, "/metrics"))
    if settings.web_token is not None:
        request.add_header("Authorization", f"Bearer {settings.web_token.get_secret_value()}")
    with urllib.request.urlopen(request, timeout=10) as reply:
        text = reply.read().decode()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return Scrape(at, samples)


def topic_records(settings: Settings, topic: str) -> int:
    """Records in every partition of ``topic`` (its true end offsets)."""
    tps = [TopicPartition(topic, p) for p in range(settings.partitions)]
    return sum(asyncio.run(true_end_offsets(settings.broker, tps)).values())


def processed(reading: Scrape, agent: str, topic: str) -> float:
    """Records ``agent`` is done with on ``topic``: processed or dead-lettered."""
    done = reading.total("memstream_events_processed_total", agent=agent, topic=topic)
    return done + reading.total("memstream_dead_letters_total", agent=agent)


# --- following the pipeline -------------------------------------------------------------


@dataclass
class Run:
    """What one backfill measured."""

    turns: int
    sessions: int
    users: int
    publish_s: float = 0.0
    #: stage -> seconds after the first publish
    ended: dict[str, float] = field(default_factory=dict)
    #: stage -> the scrape that showed it ended
    readings: dict[str, Scrape] = field(default_factory=dict)
    chat_records: int = 0
    consolidation_requests: int = 0
    memory_records: int = 0
    #: event type -> count, on the memories topic
    memory_events: Counter[str] = field(default_factory=Counter)
    #: event type -> bytes of its records (key and value), on the memories topic
    memory_bytes: Counter[str] = field(default_factory=Counter)
    #: bytes of the chat topic's records; of the LanceDB directory; rows of the projection
    chat_bytes: int = 0
    lancedb_bytes: int = 0
    #: bytes of the LanceDB directory once compacted and only the latest version kept
    compacted_bytes: int = 0
    rows: int = 0
    #: what was timed after the pipeline -> (texts or queries, seconds); the first is the bound
    bound: dict[str, tuple[int, float]] = field(default_factory=dict)
    loads: list[tuple[float, float, float]] = field(default_factory=list)
    #: every reading of /metrics, in order
    scrapes: list[Scrape] = field(default_factory=list)
    worker_cpu_s: float = 0.0
    broker_cpu_s: float | None = None

    def due(self, stage: str) -> bool:
        """Whether ``stage`` has not ended and the stage before it has."""
        index = STAGES.index(stage)
        return stage not in self.ended and (index == 0 or STAGES[index - 1] in self.ended)

    def end(self, stage: str, reading: Scrape) -> None:
        """Record that ``stage`` had ended by ``reading``."""
        self.ended[stage], self.readings[stage] = reading.at, reading
        log(f"  {stage}: ended {reading.at:.1f} s after the first publish")


def searchable(projection: PartitionedMemories, dialogue: Dialogue) -> bool:
    """Whether a search of ``dialogue``'s user by the content of the memory citing the
    user's latest turn finds that memory (False while no memory cites any of its turns)."""
    order = {turn.turn_id: index for index, turn in enumerate(dialogue.turns)}
    cited = [
        (max(order[e] for e in record.source_event_ids if e in order), record)
        for record in projection.list_memories(dialogue.user_id)
        if any(e in order for e in record.source_event_ids)
    ]
    if not cited:
        return False
    _, latest = max(cited, key=lambda item: item[0])
    hits = projection.search(dialogue.user_id, latest.content, limit=10)
    return any(hit.memory_id == latest.memory_id for hit in hits)


def follow(
    settings: Settings,
    run: Run,
    worker: WorkerProcess,
    started: float,
    dialogues: Sequence[Dialogue],
    *,
    poll_s: float,
    timeout_s: float,
) -> None:
    """Read /metrics every ``poll_s`` until every stage ended; record when each did."""
    topics = Topics.from_settings(settings)
    run.chat_records = topic_records(settings, topics.chat)
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    deadline = time.monotonic() + timeout_s
    next_report = time.monotonic() + 30
    while len(run.ended) < len(STAGES):
        if worker.exited():
            raise RuntimeError("the worker exited while the benchmark followed it")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not all searchable within {timeout_s:.0f} s: {run.ended}")
        reading = scrape(settings, time.perf_counter() - started)
        run.scrapes.append(reading)
        # Several stages may end by one reading: each is checked once the one before ended.
        if run.due("session fold") and (
            processed(reading, "sessions", topics.chat) >= run.chat_records
        ):
            run.end("session fold", reading)
            # Every request of the folded records is acknowledged before they count.
            run.consolidation_requests = topic_records(settings, topics.consolidation)
        if run.due("extraction and decisions") and (
            processed(reading, "extraction", topics.consolidation) >= run.consolidation_requests
        ):
            run.end("extraction and decisions", reading)
            run.memory_records = topic_records(settings, topics.memories)
        if run.due("projection") and (
            processed(reading, "projector", topics.memories) >= run.memory_records
        ):
            grown = topic_records(settings, topics.memories)  # the tier keeper may add
            if grown == run.memory_records:
                run.end("projection", reading)
            run.memory_records = grown
        if run.due("all searchable") and searchable(projection, dialogues[-1]):
            run.end("all searchable", reading)
        if time.monotonic() > next_report:
            next_report = time.monotonic() + 30
            log("  at {:.0f} s: chat {:.0f}/{}, consolidation {:.0f}/{}, memories topic "
                "{:.0f}/{}".format(
                    reading.at,
                    processed(reading, "sessions", topics.chat), run.chat_records,
                    processed(reading, "extraction", topics.consolidation),
                    run.consolidation_requests or "?",
                    processed(reading, "projector", topics.memories), run.memory_records or "?",
                ))
        time.sleep(poll_s)


def memory_event_counts(settings: Settings) -> tuple[Counter[str], Counter[str]]:
    """Events of the memories topic by type (the type is readable in a sealed envelope), and
    their record values' bytes by type."""
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    topic = Topics.from_settings(settings).memories
    for record in asyncio.run(read_topic(settings, topic, timeout_s=120)):
        try:
            kind = decode_event(record.value, max_bytes=settings.max_record_bytes).type
        except InvalidEvent:
            kind = "invalid"
        counts[kind] += 1
        sizes[kind] += len(record.value) + len(record.key or b"")
    return counts, sizes


def topic_bytes(settings: Settings, topic: str) -> int:
    """Bytes of every record's key and value in ``topic``."""
    records = asyncio.run(read_topic(settings, topic, timeout_s=120))
    return sum(len(r.value) + len(r.key or b"") for r in records)


def directory_bytes(path: Path) -> int:
    """Bytes of every file under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def compacted_bytes(path: Path) -> int:
    """Bytes of the LanceDB directory ``path`` after compacting every table and dropping
    every version but the latest (what a long-running store holds per row; the projector
    keeps recent versions for readers and compacts on its schedule)."""
    db = lancedb.connect(path)
    with warnings.catch_warnings():  # no other process works on these tables any more
        warnings.simplefilter("ignore", UserWarning)
        for name in db.list_tables(limit=1000).tables:
            db.open_table(name).optimize(cleanup_older_than=timedelta(0))
    return directory_bytes(path)


def embedder_bound(
    settings: Settings, embedder: Embedder, decider_call: int
) -> dict[str, tuple[int, float]]:
    """This process's embedder on the worker's texts: the memories' search texts in batches
    of ``projection_batch_size`` (the bound), and of ``decider_call`` (the decider's mean
    call in the run), and their contents one extraction at a time (as the decider;
    reinforced candidates are not rows, so it embeds a few more); then the decider's
    neighbour query (``MemoryProjection.neighbours``, exact, as of a memory's time) on the
    final table for up to 500 memories."""
    projection = PartitionedMemories.from_settings(settings, embedder)
    rows = projection.view_rows(
        ["user_id", "search_text", "content", "extraction_event_id", "created_at", "vector"]
    )
    rows.sort(key=lambda row: (row["created_at"], row["extraction_event_id"]))
    texts = [row["search_text"] for row in rows]
    per_extraction: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        per_extraction[row["extraction_event_id"]].append(row["content"])
    embedder.embed(["warm up"])

    def timed_batches(batch: int) -> tuple[int, float]:
        mark = time.perf_counter()
        for start in range(0, len(texts), batch):
            embedder.embed(texts[start : start + batch])
        return len(texts), time.perf_counter() - mark

    found: dict[str, tuple[int, float]] = {}
    batch = settings.projection_batch_size
    found[f"search texts, {batch} per call (projection_batch_size)"] = timed_batches(batch)
    found[f"search texts, {decider_call} per call (the decider's mean call)"] = (
        timed_batches(decider_call)
    )
    mark = time.perf_counter()
    for contents in per_extraction.values():
        embedder.embed(contents)
    found["contents, one extraction per call (decider)"] = (
        len(rows), time.perf_counter() - mark
    )
    sample = rows[:: max(1, len(rows) // 500)][:500]
    mark = time.perf_counter()
    for row in sample:
        projection.neighbours(
            row["user_id"], np.asarray(row["vector"], dtype=np.float32), limit=10,
            before=row["created_at"],
        )
    found["neighbour queries (decider), final table"] = (len(sample), time.perf_counter() - mark)
    return found


# --- processes: CPU and the profiler ------------------------------------------------------


def wait_until_ready(settings: Settings, worker: WorkerProcess, timeout_s: float = 180) -> None:
    """Wait for the worker's /ready/ (its agents assigned and running, the projector caught
    up): what is timed is the pipeline, not the worker's start."""
    deadline = time.monotonic() + timeout_s
    while not worker_ready(settings):
        if worker.exited() or time.monotonic() > deadline:
            raise RuntimeError("the worker did not get ready")
        time.sleep(0.2)


def publish(client: MemoryClient, dialogues: Sequence[Dialogue], publishers: int) -> None:
    """Add every dialogue turn by turn (``dialogue_recall.add_dialogues``), ``publishers``
    users at a time, each user's adds in order from one thread (one client, one producer)."""
    with ThreadPoolExecutor(max_workers=publishers, thread_name_prefix="publisher") as pool:
        for done in [pool.submit(add_dialogues, client, [d]) for d in dialogues]:
            done.result()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a running process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The direct children of ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent == pid:
                found.append(int(entry.name))
    return found


def start_profiler(pid: int, output: Path) -> subprocess.Popen[bytes]:
    """``py-spy record`` on ``pid`` until interrupted: every thread, idle samples too."""
    binary = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(binary).exists():
        raise SystemExit("--profile needs py-spy (pip install py-spy into this environment)")
    fmt = "flamegraph" if output.suffix == ".svg" else "raw"
    return subprocess.Popen(
        [binary, "record", "--pid", str(pid), "--rate", "100", "--threads", "--idle",
         "--nonblocking", "--format", fmt, "--output", str(output)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )


def stop_profiler(profiler: subprocess.Popen[bytes]) -> None:
    """Stop py-spy and let it write its file."""
    profiler.send_signal(signal.SIGINT)
    try:
        _, errors = profiler.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        profiler.kill()
        errors = b""
    if profiler.returncode not in (0, -signal.SIGINT):
        log(f"py-spy ended with {profiler.returncode}: {errors.decode()[-500:]}")


#: What a sample of a thread was doing: the first rule whose every name is a frame of the
#: stack (a function as py-spy names it, class included, or a class); the LanceDB calls of the
#: worker threads wait for LanceDB's own threads (Rust, not sampled), so their wall time
#: shows as that wait.
PROFILE_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("decisions: embedding the candidates", ("MemoryDecider.decide", "MeteredEmbedder.embed")),
    ("decisions: LanceDB neighbour queries", ("MemoryDecider.decide", "MemoryReader.neighbours")),
    ("decisions: other", ("MemoryDecider.decide",)),
    ("decisions: embedding a batch's candidates", ("MemoryDecider.prefetch", "MeteredEmbedder.embed")),
    ("decisions: planning a batch's embeddings", ("MemoryDecider.prefetch",)),
    ("extraction (offline extractor)", ("record_extraction",)),
    ("projection: embedding the search texts", ("MemoryWriter.apply", "MeteredEmbedder.embed")),
    ("projection: LanceDB merge_insert", ("MemoryWriter.apply", "MemoryWriter._merge")),
    ("projection: LanceDB row look-ups", ("MemoryWriter.apply", "TableConnection._rows_by_key")),
    ("projection: other", ("MemoryWriter.apply",)),
    ("projection: index refresh (optimize, indexes)", ("IndexMaintenance.refresh_indexes",)),
    ("projection: other", ("ProjectorLoop._run",)),
    ("tier keeper", ("run_tier_keeper",)),
    ("archive sink", ("run_archive_sink",)),
    ("archive sink", ("_write_batch",)),
    ("session fold", ("fold_batch",)),
    ("session agent: other", ("SessionAgent.fold_chat",)),
    ("extraction agent: publishing, waits", ("ExtractionAgent.extract",)),
    ("embedder start-up", ("MiniLMOnnxEmbedder.__init__",)),
    ("/metrics page", ("exposition",)),
    ("Kafka client (aiokafka)", ("AIOKafkaClient",)),
    ("Kafka client (aiokafka)", ("Fetcher",)),
    ("Kafka client (aiokafka)", ("AIOKafkaProducer",)),
)
#: Innermost frames of a thread with nothing to do.
IDLE_FRAMES = ("EpollSelector.select", "_worker (concurrent/futures/thread.py")


def classify(frames: Sequence[str]) -> str:
    """The rule of a sample's stack (outermost frame first), ``idle``, or ``other``."""
    names = {frame.split(" (")[0] for frame in frames}
    classes = {name.split(".")[0] for name in names}
    for rule, needles in PROFILE_RULES:
        if all(needle in names or needle in classes for needle in needles):
            return rule
    if frames and frames[-1].startswith(IDLE_FRAMES):
        return "idle"
    return "other"


def thread_group(head: str) -> str:
    """The group of a py-spy thread label (``thread (tid): name``)."""
    name = head.rpartition(": ")[2] if ": " in head else ""
    if name == "MainThread":
        return "event loop (main thread)"
    if name.startswith("asyncio_"):
        return "asyncio.to_thread pool"
    return "other threads"


def profile_summary(lines: Iterable[str]) -> dict[str, Counter[str]]:
    """py-spy's raw output (``thread;frame;...;frame count``, outermost first): samples by
    thread group and rule."""
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        head, *frames = stack.split(";")
        groups[thread_group(head)][classify(frames)] += int(count)
    return groups


# --- the table ----------------------------------------------------------------------------


def print_report(run: Run, settings: Settings, args: argparse.Namespace) -> None:
    """The stage table, the bound and the notes."""
    memories = run.memory_events["memory_added"]
    end = run.ended["all searchable"]
    print(f"{run.users} users, {run.sessions} sessions, {run.turns} turns "
          f"(seed {args.seed}); {memories} memories made\n")
    print(f"{'stage':<28} {'ended s':>8} {'turns/s':>8} {'memories/s':>11} {'worker CPU s':>13}")
    print(f"{'publish (MemoryClient.add)':<28} {run.publish_s:8.1f} "
          f"{run.turns / run.publish_s:8.0f} {'':>11} {'':>13}")
    cpu_before = run.scrapes[0].total("process_cpu_seconds_total")
    for stage in STAGES:
        at = run.ended[stage]
        cpu = run.readings[stage].total("process_cpu_seconds_total") - cpu_before
        print(f"{stage:<28} {at:8.1f} {run.turns / at:8.1f} {memories / at:11.1f} {cpu:13.1f}")
    texts, seconds = next(iter(run.bound.values()))
    bound_rate = texts / seconds
    print(f"{'embedder alone (the bound)':<28} {seconds:8.1f} {'':>8} {bound_rate:11.1f}")
    ratio = end / seconds
    verdict = "met" if ratio <= GOAL else "not met"
    print(f"\n{'':<52} {'s':>7} {'goal':>10}")
    print(f"{f'the embedder alone, the {texts} memories search texts':<52} {seconds:7.1f}")
    print(f"{'first publish to all searchable':<52} {end:7.1f}")
    print(f"{'ratio':<52} {ratio:6.2f}x {f'<= {GOAL}x':>10} {verdict}")
    print(f"\nend to end: {run.turns / end:.1f} turns/s, {memories / end:.1f} memories/s; "
          f"the embedder alone {bound_rate:.0f} texts/s")

    last, first = run.readings["all searchable"], run.scrapes[0]

    def since_start(name: str, **labels: str) -> float:
        return last.total(name, **labels) - first.total(name, **labels)

    print("\nthe worker's own timers, first publish to all searchable:")
    for stage in ("decisions", "projection"):
        n = since_start("memstream_embedded_texts_total", stage=stage)
        calls = since_start("memstream_embedding_seconds_count", stage=stage)
        busy = since_start("memstream_embedding_seconds_sum", stage=stage)
        rate = f"{n / busy:.0f} texts/s" if busy else "-"
        print(f"  embedding, {stage:<10} {busy:7.1f} s  {n:6.0f} texts in {calls:5.0f} calls "
              f"({rate}; {100 * busy / end:.0f} % of the wall time)")
    extracted = since_start("memstream_extraction_seconds_count")
    extract_s = since_start("memstream_extraction_seconds_sum")
    print(f"  extraction            {extract_s:7.1f} s  {extracted:6.0f} spans")
    rows = since_start("memstream_projector_rows_written_total", kind="memories")
    print(f"  projector rows written {rows:.0f}")
    print("\nin this process on the worker's texts and table, after the pipeline:")
    for name, (n, s) in run.bound.items():
        unit = "queries" if name.startswith("neighbour") else "texts"
        print(f"  {name:<56} {n:6d} {unit:<7} {s:6.1f} s  {n / s:6.1f} {unit}/s "
              f"({1000 * s / n:5.1f} ms each)")

    events = ", ".join(f"{kind} {count}" for kind, count in run.memory_events.most_common())
    print(f"\nmemories topic: {run.memory_records} records ({events}); "
          f"{run.consolidation_requests} consolidation requests from {run.chat_records} chat "
          "records")
    added = run.memory_events["memory_added"]
    print(f"storage: chat topic {run.chat_bytes / max(run.chat_records, 1):,.0f} bytes per record; "
          f"memories topic {run.memory_bytes['memory_added'] / max(added, 1):,.0f} bytes per "
          f"memory_added event (vector and content sealed), "
          f"{sum(run.memory_bytes.values()) / max(added, 1):,.0f} bytes of the topic per memory; "
          f"LanceDB {run.lancedb_bytes / max(run.rows, 1):,.0f} bytes per row "
          f"({run.rows} rows, {run.lancedb_bytes / 1e6:.1f} MB, indexes and versions included), "
          f"{run.compacted_bytes / max(run.rows, 1):,.0f} compacted, the latest version only")
    used = f"worker {run.worker_cpu_s:.0f} s"
    if run.broker_cpu_s is not None:
        used += f", broker {run.broker_cpu_s:.0f} s"
    print(f"CPU from the first publish to the end: {used} (2 cores x {end:.0f} s = "
          f"{2 * end:.0f} s)")
    print("load average (1, 5, 15 min): start " + " / ".join(f"{v:.2f}" for v in run.loads[0])
          + ", end " + " / ".join(f"{v:.2f}" for v in run.loads[-1]))
    print(f"settings: extractor {settings.extractor}, embedder {settings.embedder} "
          f"({embedder_threads(settings)} threads), {settings.partitions} partitions, "
          f"extraction batch {settings.extraction_batch_size} / "
          f"{settings.extraction_batch_wait_s} s, "
          f"max_messages {settings.max_messages}, session batch {settings.session_batch_size} / "
          f"{settings.session_batch_wait_s} s, projection batch "
          f"{settings.projection_batch_size} / {settings.projection_batch_wait_s} s, index "
          f"refresh every {settings.index_refresh_interval_s} s or "
          f"{settings.index_refresh_rows} rows")


def print_timeline(run: Run, settings: Settings, steps: int = 10) -> None:
    """Records each stage had processed, and the worker's CPU (and the cores it used since
    the row before), at tenths of the wall time."""
    topics = Topics.from_settings(settings)
    end = run.ended["all searchable"]
    print(f"\n{'s':>6} {'chat':>7} {'spans':>6} {'memories topic':>15} {'rows':>6} "
          f"{'embedded':>9} {'worker CPU s':>13}")
    cpu_before = run.scrapes[0].total("process_cpu_seconds_total")
    marks = iter(end * (i + 1) / steps for i in range(steps))
    mark = next(marks)
    previous = run.scrapes[0]
    for reading in run.scrapes:
        if reading.at + 1e-9 < mark:
            continue
        cpu = reading.total("process_cpu_seconds_total") - cpu_before
        busy = ""
        if reading.at > previous.at:
            share = (cpu + cpu_before - previous.total("process_cpu_seconds_total")) / (
                reading.at - previous.at
            )
            busy = f" ({share:.2f} cores)"
        print(f"{reading.at:6.1f} {processed(reading, 'sessions', topics.chat):7.0f} "
              f"{processed(reading, 'extraction', topics.consolidation):6.0f} "
              f"{processed(reading, 'projector', topics.memories):15.0f} "
              f"{reading.total('memstream_projector_rows_written_total', kind='memories'):6.0f} "
              f"{reading.total('memstream_embedded_texts_total'):9.0f} {cpu:7.1f}{busy}")
        previous = reading
        while mark <= reading.at:
            mark = next(marks, float("inf"))


def print_profile(path: Path, wall_s: float) -> None:
    """Where the worker's threads spent the profiled time (100 samples a second each)."""
    groups = profile_summary(path.read_text().splitlines())
    print(f"\nworker profile (py-spy, every thread 100 times a second, idle included; "
          f"{wall_s:.0f} s wall):")
    for group, rules in sorted(groups.items()):
        total = sum(rules.values())
        print(f"  {group}: {total / 100:.0f} thread-s")
        for rule, count in rules.most_common():
            if count >= 0.005 * total:
                print(f"    {rule:<46} {count / 100:7.1f} s {100 * count / total:5.1f} %")


def main(argv: list[str] | None = None) -> int:
    """Publish the history, follow the worker, measure the bound, print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=270, help="sessions in all")
    parser.add_argument("--turns", type=int, default=6000, help="turns in all (about)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--quick", action="store_true", help="3 users, 30 sessions, 600 turns")
    parser.add_argument("--publishers", type=int, default=10,
                        help="users published at once (each user's turns in order)")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between /metrics reads")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--profile", type=Path, help="py-spy the worker into this file")
    parser.add_argument("--keep", action="store_true", help="keep the logs and data")
    args = parser.parse_args(argv)
    if args.quick:
        args.users, args.sessions, args.turns = 3, 30, 600
    exit_on_sigterm()
    per_user = max(2, round(args.sessions / args.users))
    dialogues = generate_dialogues(args.users, per_user, round(args.turns / (per_user * args.users)),
                                   args.seed)
    run = Run(
        turns=sum(len(d.turns) for d in dialogues),
        sessions=sum(len(d.sessions) for d in dialogues),
        users=len(dialogues),
        loads=[os.getloadavg()],
    )
    workdir = Path(tempfile.mkdtemp(prefix="memstream-backfill-"))
    profiler = None
    try:
        with broker_and_worker(workdir) as (settings, worker), MemoryClient(settings) as client:
            assert worker.pid is not None
            wait_until_ready(settings, worker)
            run.scrapes.append(scrape(settings, 0.0))  # the start: counts and CPU before
            broker_pids = [p for p in children(os.getpid()) if p != worker.pid]
            cpu_before = cpu_seconds(worker.pid) or 0.0
            broker_before = [cpu_seconds(p) or 0.0 for p in broker_pids]
            if args.profile is not None:
                profiler = start_profiler(worker.pid, args.profile)
            log(f"publishing {run.turns} turns of {run.users} users in {run.sessions} sessions")
            started = time.perf_counter()
            publish(client, dialogues, args.publishers)
            run.publish_s = time.perf_counter() - started
            log(f"published in {run.publish_s:.1f} s; following the worker")
            follow(settings, run, worker, started, dialogues, poll_s=args.poll,
                   timeout_s=args.timeout)
            run.worker_cpu_s = (cpu_seconds(worker.pid) or 0.0) - cpu_before
            if broker_pids:
                run.broker_cpu_s = sum(
                    (cpu_seconds(p) or 0.0) - before for p, before in zip(broker_pids, broker_before)
                )
            if profiler is not None:
                stop_profiler(profiler)
                profiler = None
            run.loads.append(os.getloadavg())
            run.memory_events, run.memory_bytes = memory_event_counts(settings)
            run.chat_bytes = topic_bytes(settings, Topics.from_settings(settings).chat)
            run.lancedb_bytes = directory_bytes(settings.lancedb_dir)
            run.compacted_bytes = compacted_bytes(settings.lancedb_dir)
            run.rows = PartitionedMemories.from_settings(
                settings, embedder_from_settings(settings)
            ).count()
            log("measuring the embedder alone on the same texts")
            last = run.readings["all searchable"]
            calls = last.total("memstream_embedding_seconds_count", stage="decisions")
            texts = last.total("memstream_embedded_texts_total", stage="decisions")
            run.bound = embedder_bound(
                settings, embedder_from_settings(settings), max(1, round(texts / max(calls, 1)))
            )
    finally:
        if profiler is not None:
            stop_profiler(profiler)
        release(None, workdir, keep=args.keep)
    print_report(run, settings, args)
    print_timeline(run, settings)
    if args.profile is not None and args.profile.suffix != ".svg" and args.profile.exists():
        print_profile(args.profile, run.ended["all searchable"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
