"""The memory projector: the single writer that projects the memories and accesses topics
into LanceDB, and runs the tier keeper beside it.

The projection has one table per partition of the topics
(:class:`~memstream.projections.memories.PartitionedMemories`). The projector is a plain
consumer with no consumer group of its own: it reads the partitions of both topics its worker
owns (the worker's Faust assignment: :mod:`memstream.streams.projector.ownership`), and
resumes each from the source offsets stored in that partition's rows (the projection's
tracking records: :meth:`MemoryProjection.positions` for memory events,
:meth:`MemoryProjection.access_positions` for retrievals), so a crash between a write and a
commit cannot lose or double anything, and a partition that moves to another worker is taken
up where its table stands. An advisory lock per partition table keeps it to one writer when
several workers share a data directory. Every write goes through the one loop below, so
memory changes and access counts never race on a row.

A retrieval names memories the retriever found in a projection, so they are earlier in the
memories log than the retrieval is in the accesses log. A replay reads both topics at once and
the cheap access events would outrun the embedded memories; so access events of a partition
are held until the same partition of the memories topic is read to its end (both topics are
keyed by user id, so a user's memories and retrievals share the partition number). A replay
therefore counts exactly the retrievals the live projection counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from memstream.models.codec import EventLimits, worker_now
from memstream.models.events import (
    MemoriesRetrieved,
    MemoryAdded,
    MemoryChange,
    UserErased,
)
from memstream.models.settings import Settings
from memstream.models.topics import ACCESS_TYPES, MEMORIES_TOPIC_TYPES
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import (
    DEFAULT_TABLE,
    MemoryProjection,
    MemoryStore,
    PartitionedMemories,
    ProjectionStore,
    SourcePosition,
)
from memstream.streams.agents.boundary import (
    Backoff,
    BrokerProbe,
    FunctionProbe,
    RecordBoundary,
    StateReport,
)
from memstream.streams.agents.decoding import decode_opened
from memstream.streams.kafka.deadletters import DeadLetterSink
from memstream.streams.kafka.publisher import EventPublisher, KafkaPublisher, RawRecord
from memstream.streams.kafka.tansu import true_end_offsets
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.store import BatchKeys, KeyStore, keystore_from_settings
from memstream.streams.observability.metrics import (
    CONSUMER_LAG,
    PROJECTOR_PARTITIONS,
    PROJECTOR_ROWS,
    LagRow,
    MeteredEmbedder,
)
from memstream.streams.projector.ownership import Ownership, partition_lock
from memstream.streams.projector.tiers import run_tier_keeper, scan_interval

log = logging.getLogger(__name__)

#: The first index refresh of a spell waits for this much idle time (it builds the full-text
#: index of a new table); later ones follow ``Settings.index_refresh_interval_s``, or
#: ``Settings.index_refresh_rows`` but no sooner than INDEX_REFRESH_MIN_GAP_S after the last.
INDEX_REFRESH_IDLE_S = 0.3
INDEX_REFRESH_MIN_GAP_S = 5.0
#: Released accesses written at once, whatever ``access_flush_interval_s`` says.
MAX_RELEASED_ACCESSES = 20_000

AccessItem = tuple[MemoriesRetrieved, SourcePosition]
MemoryItem = tuple[MemoryAdded | MemoryChange, SourcePosition]


class ProjectorProgress:
    """When the projector of this process last held everything in the log applied, for the
    extraction agent of the same process to wait on (see :meth:`caught_up_after`)."""

    def __init__(self) -> None:
        #: ``time.monotonic()`` of the last time it was caught up (None: not yet).
        self.caught_up_at: float | None = None

    def mark(self) -> None:
        self.caught_up_at = time.monotonic()

    async def caught_up_after(self, moment: float, timeout_s: float, poll_s: float = 0.05) -> bool:
        """Wait until the projector is caught up at some time after ``moment`` (monotonic):
        then every event in the log by ``moment`` is applied. False if ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        while self.caught_up_at is None or self.caught_up_at <= moment:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(poll_s)
        return True


class WriterLock:
    """An advisory, process-wide lock file: held by the one projector of a data directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; never blocks."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._file = handle
        return True

    def release(self) -> None:
        """Give the lock back."""
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


async def _assigned_partitions(
    consumer: AIOKafkaConsumer, topic: str, *, timeout_s: float | None = None
) -> list[TopicPartition]:
    """The partitions of ``topic``, waiting for it to exist (for ever, or ``timeout_s``)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        partitions = consumer.partitions_for_topic(topic)
        if partitions:
            return [TopicPartition(topic, p) for p in sorted(partitions)]
        if deadline is not None and time.monotonic() > deadline:
            raise TopicMissing(
                f"topic {topic!r} does not exist on the broker: check MEMSTREAM_BROKER and "
                "MEMSTREAM_TOPIC_PREFIX (an embedded broker that restarted has lost its topics)"
            )
        await consumer._client.force_metadata_update()
        await asyncio.sleep(0.5)


class TopicMissing(RuntimeError):
    """A topic a replay needs is not on the broker."""


async def run_memory_projector(
    settings: Settings,
    stop: asyncio.Event | None = None,
    *,
    tiers: bool = True,
    progress: ProjectorProgress | None = None,
    log_intact: Callable[[], Awaitable[bool]] | None = None,
    report: StateReport | None = None,
    keys: KeyStore | None = None,
    ownership: Ownership | None = None,
) -> None:
    """Project memory and access events into LanceDB until cancelled (or ``stop`` is set).

    It writes the live projection, one table per partition
    (:class:`~memstream.projections.memories.PartitionedMemories`), and of those only the
    partitions ``ownership`` says this worker owns (every one without it), holding each
    partition's lock file while it writes it. When a replay swaps a rebuilt projection in,
    or a rebalance changes the owned partitions, it finishes its batch and starts again on
    the new ones, each from the positions its table holds.

    With ``tiers`` (the default) the tier keeper (:mod:`memstream.streams.projector.tiers`) runs in
    the same process, on the partitions this writes, and publishes its promotions and
    expiries with the projector's producer. It scans only while the projection is caught up
    with the log, so a replay or a restart never acts on a half-built projection.
    ``progress`` is marked whenever it is caught up; ``report`` is told when it retries a
    broker or store failure, and when it works again. ``log_intact`` is asked after every
    fetch (:meth:`memstream.streams.kafka.logid.LogWatch.verifier`): once the broker lost the log,
    nothing fetched is applied and the projector stops.
    """
    stop = stop or asyncio.Event()
    ownership = ownership or Ownership(settings.partitions)
    embedder = MeteredEmbedder(
        await asyncio.to_thread(embedder_from_settings, settings), "projection"
    )
    while not stop.is_set():
        owned = await ownership.known()
        locks = await _lock_partitions(settings, owned, ownership, stop)
        if locks is None:
            continue  # the owned partitions changed while waiting for a lock
        _show_partitions(owned)
        try:
            table = live_table(settings)
            projection = PartitionedMemories.from_settings(settings, embedder, table, owned=owned)
            projection.vector_donor = _unpartitioned(settings, embedder, table, projection)
            halt = asyncio.Event()
            watcher = asyncio.create_task(
                _watch_spell(settings, table, owned, ownership, stop, halt)
            )
            try:
                await _project_table(
                    settings,
                    projection,
                    halt,
                    tiers=tiers,
                    progress=progress,
                    log_intact=log_intact,
                    report=report,
                    keys=keys,
                )
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
        finally:
            _show_partitions(frozenset())
            for lock in locks:
                lock.release()


def _show_partitions(owned: frozenset[int]) -> None:
    """Say on /metrics which partitions' tables this worker writes now."""
    PROJECTOR_PARTITIONS.clear()
    for partition in owned:
        PROJECTOR_PARTITIONS.labels(partition=str(partition)).set(1)


async def _lock_partitions(
    settings: Settings, owned: frozenset[int], ownership: Ownership, stop: asyncio.Event
) -> list[WriterLock] | None:
    """The lock of every owned partition's table, waiting for another process (the previous
    owner finishing its batch) to let go; None if the ownership changed meanwhile. None to
    take on an object store: there the consumer group's assignment is the one writer of a
    partition, and a previous owner's last commit is ordered by LanceDB's conditional PUT
    of the table's manifest (docs/long-term-memory.md, "Memories on an object store")."""
    locks: list[WriterLock] = []
    if not ProjectionStore.from_settings(settings).locks_apply:
        return locks
    for partition in sorted(owned):
        lock = WriterLock(partition_lock(settings, partition))
        while not lock.try_acquire():
            if ownership.owned != owned or stop.is_set():
                for held in locks:
                    held.release()
                return None
            log.info("projector: another process writes partition %d; waiting", partition)
            await asyncio.sleep(1)
        locks.append(lock)
    return locks


def _unpartitioned(
    settings: Settings, embedder: Any, table: str, projection: PartitionedMemories
) -> MemoryProjection | None:
    """The table of every partition a data directory held before the projection was
    partitioned, when its partitions' tables are still to be built: they take its vectors
    (rebuilt from the log, nothing embedded again). None otherwise."""
    if projection.exists():
        return None
    old = MemoryProjection(ProjectionStore.from_settings(settings), embedder, table)
    return old if old.exists() else None


def live_table(settings: Settings) -> str:
    """The name of the live memories table in ``settings``' store."""
    return ProjectionStore.from_settings(settings).live_name("memories", DEFAULT_TABLE)


async def _watch_spell(
    settings: Settings,
    table: str,
    owned: frozenset[int],
    ownership: Ownership,
    stop: asyncio.Event,
    halt: asyncio.Event,
) -> None:
    """Set ``halt`` once ``stop`` is set, a replay swapped another projection in, or the
    owned partitions changed."""
    store = ProjectionStore.from_settings(settings)
    pointer_due = 0.0
    while not stop.is_set():
        # The pointer of an object store is a GET: off the event loop, and no more often
        # than its readers look.
        if time.monotonic() >= pointer_due:
            pointer_due = time.monotonic() + store.pointer_check_s
            live = await asyncio.to_thread(store.live_name, "memories", DEFAULT_TABLE)
            if live != table:
                log.info("projector: a replay swapped in table %r", live)
                break
        if ownership.owned != owned:
            log.info(
                "projector: now owns partitions %s (was %s)",
                sorted(ownership.owned or ()), sorted(owned),
            )
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.5)
    halt.set()


async def _project_table(
    settings: Settings,
    projection: PartitionedMemories,
    stop: asyncio.Event,
    *,
    tiers: bool,
    progress: ProjectorProgress | None = None,
    log_intact: Callable[[], Awaitable[bool]] | None = None,
    report: StateReport | None = None,
    keys: KeyStore | None = None,
) -> None:
    """One spell of projecting into ``projection``'s table, until ``stop`` is set."""
    keys = keys if keys is not None else keystore_from_settings(settings)
    topics = Topics.from_settings(settings)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        # Tansu holds a fetch this long even when memory events arrive meanwhile.
        fetch_max_wait_ms=settings.fetch_max_wait_ms,
    )
    # Tier changes and dead letters; the worker claimed the log, and neither is a user's.
    producer = KafkaPublisher(settings, keys, check=False, claim=False)
    keeper: asyncio.Task[None] | None = None
    try:
        await consumer.start()
        partitions = await _assigned_partitions(consumer, topics.memories)
        partitions += await _assigned_partitions(consumer, topics.accesses)
        partitions = [tp for tp in partitions if tp.partition in projection.owned]
        starts, shortfalls = await _positions(settings, projection, partitions)
        for shortfall in shortfalls:
            log.error("projector: %s", shortfall.explain())
        lost = {s.partition for s in shortfalls}
        # A partition whose log is shorter than the projection is not read at all: reading
        # it again from 0 would mix two logs, and offsets the projection already holds
        # would be taken as seen. Restore the log (`memstream restore`) and restart.
        starts = {tp: offset for tp, offset in starts.items() if tp.partition not in lost}
        consumer.assign(list(starts))
        for tp, offset in starts.items():
            consumer.seek(tp, offset)
        caught_up = asyncio.Event()
        if tiers:
            keeper = asyncio.create_task(
                run_tier_keeper(
                    settings,
                    projection,
                    producer,
                    interval_s=scan_interval(settings),
                    ready=caught_up,
                    stop=stop,
                ),
                name="tier-keeper",
            )
        projector = _Projector(
            settings,
            consumer,
            producer,
            projection,
            starts,
            caught_up,
            progress=progress,
            log_intact=log_intact,
            report=report,
            keys=keys,
        )
        await projector.run(stop)
    finally:
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        await consumer.stop()
        await producer.close()


async def _discard(key: bytes | None, value: bytes) -> None:
    """Where a replay's dead letters go: nowhere (the live projector sent them)."""


@dataclass(frozen=True)
class ProjectionPastLog:
    """A partition whose log ends before offsets a projection already holds."""

    topic: str
    partition: int
    log_end: int
    projected_to: int

    def explain(self) -> str:
        """The plain-words report of it, with what to do."""
        return (
            f"{self.topic}[{self.partition}] ends at offset {self.log_end}, but the memory "
            f"projection already holds events up to offset {self.projected_to - 1}: the broker "
            "lost its log (the embedded broker keeps it in memory only, so a restart empties "
            "it). This partition is not projected until the log is back: stop the worker, run "
            "`memstream restore` from the archive, then start it again (or rebuild with "
            "`memstream replay --projection memories`)."
        )


async def _positions(
    settings: Settings, projection: MemoryStore, partitions: list[TopicPartition]
) -> tuple[dict[TopicPartition, int], list[ProjectionPastLog]]:
    """Where the projection left each partition, and the partitions whose log is shorter."""
    positions = await asyncio.to_thread(projection.positions)
    access_positions = await asyncio.to_thread(projection.access_positions)
    ends = await true_end_offsets(settings.broker, partitions)
    accesses = Topics.from_settings(settings).accesses
    starts: dict[TopicPartition, int] = {}
    shortfalls: list[ProjectionPastLog] = []
    for tp in partitions:
        if tp.topic == accesses:
            position = access_positions.get(tp.partition, 0)
        else:
            position = positions.get((tp.topic, tp.partition), 0)
        if position > ends[tp]:
            shortfalls.append(ProjectionPastLog(tp.topic, tp.partition, ends[tp], position))
        starts[tp] = position
    return starts, shortfalls


def index_refresh_due(
    settings: Settings,
    *,
    pending_rows: int,
    since_refresh_s: float,
    idle: bool,
    refreshed_before: bool,
) -> bool:
    """Whether to refresh the indexes now.

    ``pending_rows`` rows were written ``since_refresh_s`` seconds after the last refresh
    (or the start of the spell). The first refresh comes at the first idle moment, so a new
    table gets its full-text index at once; then one every ``index_refresh_interval_s``, or
    after ``index_refresh_rows`` rows. Each refresh commits versions and index files of its
    own, so refreshing at every idle moment made thousands of them (see
    :class:`~memstream.projections.memories.MemoryProjection`).

    Examples
    --------
    >>> s = Settings(index_refresh_interval_s=30, index_refresh_rows=5000)
    >>> index_refresh_due(s, pending_rows=40, since_refresh_s=1, idle=True, refreshed_before=True)
    False
    >>> index_refresh_due(s, pending_rows=40, since_refresh_s=31, idle=False, refreshed_before=True)
    True
    """
    if pending_rows <= 0:
        return False
    if not refreshed_before and idle and since_refresh_s >= INDEX_REFRESH_IDLE_S:
        return True
    if since_refresh_s >= settings.index_refresh_interval_s:
        return True
    return pending_rows >= settings.index_refresh_rows and since_refresh_s >= INDEX_REFRESH_MIN_GAP_S


def _broker_time(record: ConsumerRecord) -> datetime | None:
    """The record's timestamp (when the log got it, unless the producer set one)."""
    if record.timestamp is None or record.timestamp < 0:
        return None
    return datetime.fromtimestamp(record.timestamp / 1000, UTC)


class _Projector:
    """The projector's loop: one consumer, one writer, both topics."""

    def __init__(
        self,
        settings: Settings,
        consumer: AIOKafkaConsumer,
        producer: EventPublisher | None,
        projection: MemoryStore,
        starts: Mapping[TopicPartition, int],
        caught_up: asyncio.Event,
        *,
        until: datetime | None = None,
        finish_at: Mapping[TopicPartition, int] | None = None,
        on_batch: Callable[[int], None] | None = None,
        progress: ProjectorProgress | None = None,
        log_intact: Callable[[], Awaitable[bool]] | None = None,
        report: StateReport | None = None,
        keys: KeyStore | None = None,
    ) -> None:
        """``producer`` None (a replay): invalid records are counted, not dead-lettered again.
        ``until``: records the log got later than this are read past, not applied.
        ``finish_at``: return once every partition is read to these offsets.
        ``on_batch``: called with the number of records of each fetch (progress)."""
        self.settings = settings
        self.until = until
        self.finish_at = dict(finish_at) if finish_at is not None else None
        self.on_batch = on_batch
        self.progress = progress
        self.log_intact = log_intact
        #: Records skipped because their user's key is destroyed (erased users' events).
        self.erased = 0
        self.keys = keys if keys is not None else keystore_from_settings(settings)
        #: Memory events derive from spans (bounded by the record size); retrievals come
        #: from clients (bounded like chat events).
        self.memory_limits = EventLimits.from_settings(settings, derived=True)
        self.access_limits = EventLimits.from_settings(settings)
        if producer is not None:
            letters = DeadLetterSink(self._send_letter, self.keys)
        else:
            # A replay: the live projector dead-lettered these records already.
            letters = DeadLetterSink(_discard, self.keys, quiet=True)
        store = FunctionProbe("lancedb", lambda: self.projection.probe(writable=True))
        #: Every record passes it: what cannot be decoded or projected is dead-lettered,
        #: a broker or store failure is waited out.
        self.boundary = RecordBoundary(
            "projector", letters, [BrokerProbe(settings.broker), store], report=report
        )
        #: The key look-ups of the fetch being handled (see BatchKeys).
        self._fetch_keys = BatchKeys(self.keys)
        self.topics = Topics.from_settings(settings)
        self.consumer = consumer
        self.producer = producer
        self.projection = projection
        self.caught_up = caught_up
        #: Next offset to read per partition (what has been fetched and handled or held).
        self.read_to = dict(starts)
        #: Access events held per partition until that memories partition is read to its end.
        self.held: dict[int, list[AccessItem]] = {}
        #: Accesses whose memories are projected, waiting for the next access write (see
        #: ``access_flush_interval_s``), and when the first of them came.
        self.released: list[AccessItem] = []
        self._released_at = 0.0
        self._paused: set[TopicPartition] = set()
        #: The records of the batch being applied, to dead-letter a poison one.
        self._records: dict[tuple[str, int, int], ConsumerRecord] = {}

    @property
    def invalid(self) -> int:
        """Records that could not be decoded or projected (dead-lettered when live)."""
        return self.boundary.dead_lettered

    async def _send_letter(self, key: bytes | None, value: bytes) -> None:
        assert self.producer is not None
        await self.producer.send_raw(self.topics.deadletters, [RawRecord(key, value)])

    async def run(self, stop: asyncio.Event) -> None:
        """Fetch, project and refresh indexes until ``stop`` is set. A live projector (one
        with a producer) reports its lag (``memstream_consumer_lag{consumer="projector"}``)
        meanwhile."""
        if self.producer is None:
            await self._run(stop)
            return
        CONSUMER_LAG.track("projector", self.lag_rows)
        try:
            await self._run(stop)
        finally:
            CONSUMER_LAG.forget("projector", self.lag_rows)

    def lag_rows(self) -> list[LagRow]:
        """Each partition read: the high watermark of its latest fetch, and the next offset
        to read (records held or not yet applied count as read: they are at most a batch)."""
        rows: list[LagRow] = []
        for tp, position in self.read_to.items():
            try:
                end = self.consumer.highwater(tp)
            except Exception:  # noqa: BLE001 - not assigned (yet): left out
                end = None
            rows.append((tp.topic, tp.partition, end, position))
        return rows

    async def _run(self, stop: asyncio.Event) -> None:
        pending_rows = 0  # rows written since the last index refresh
        refreshed = False
        last_refresh = time.monotonic()
        while not stop.is_set() and not self._finished():
            fetched = await self.consumer.getmany(
                timeout_ms=int(self.settings.projection_batch_wait_s * 1000),
                max_records=self.settings.projection_batch_size,
            )
            if fetched and self.log_intact is not None and not await self.log_intact():
                # The broker lost the log: nothing of a new log may enter this projection.
                self.caught_up.clear()
                log.error("projector: the broker lost its log; projecting stopped until a restore")
                await stop.wait()
                return
            memory_batch: list[MemoryItem] = []
            self._fetch_keys = BatchKeys(self.keys)
            for tp, records in fetched.items():
                limit = self.finish_at.get(tp) if self.finish_at is not None else None
                for record in records:
                    if limit is not None and record.offset >= limit:
                        break
                    if self.until is not None and (_broker_time(record) or self.until) > self.until:
                        continue
                    await self._take(record, memory_batch)
                if records:
                    self.read_to[tp] = records[-1].offset + 1
                    if limit is not None and self.read_to[tp] >= limit:
                        self.consumer.pause(tp)
            if self.on_batch is not None:
                self.on_batch(sum(len(records) for records in fetched.values()))
            if memory_batch:
                pending_rows += await self._apply_memories(memory_batch)
            pending_rows += await self._apply_released_accesses()
            self._update_caught_up()
            if index_refresh_due(
                self.settings,
                pending_rows=pending_rows,
                since_refresh_s=time.monotonic() - last_refresh,
                idle=not fetched,
                refreshed_before=refreshed,
            ):
                # Index maintenance stays off the ingest and read paths: it runs here, batched.
                await asyncio.to_thread(self.projection.refresh_indexes)
                pending_rows = 0
                refreshed = True
                last_refresh = time.monotonic()

    async def _apply_memories(self, batch: list[MemoryItem]) -> int:
        """Apply a batch and return the rows written. If an event in it cannot be projected
        (its data is at fault: ciphertext, values the table refuses, anything that fails
        while the store answers), the batch is applied one event at a time and the events at
        fault are dead-lettered, so a poison event never stops the others; a store or broker
        failure is retried until they are back (:class:`RecordBoundary`)."""
        return await self._apply_guarded(batch, self.projection.apply, "memories")

    def _record_of(self, position: SourcePosition) -> ConsumerRecord:
        return self._records[(position.topic, position.partition, position.offset)]

    def _finished(self) -> bool:
        """Whether a bounded run (a replay) has read and applied everything it should."""
        if any(items for items in self.held.values()) or self.released:
            return False
        return self._read_everything()

    def _read_everything(self) -> bool:
        """Whether a bounded run has read every partition to its end."""
        if self.finish_at is None:
            return False
        return all(self.read_to.get(tp, 0) >= end for tp, end in self.finish_at.items())

    async def _take(self, record: ConsumerRecord, memory_batch: list[MemoryItem]) -> None:
        """Decode one record into the memory batch or the held accesses; dead-letter it if
        it is not a valid event of its topic (for any reason: the boundary)."""
        is_memory = record.topic == self.topics.memories
        allowed = MEMORIES_TOPIC_TYPES if is_memory else ACCESS_TYPES
        limits = self.memory_limits if is_memory else self.access_limits

        async def decode() -> Any:
            return decode_opened(
                record.value,
                record.key,
                allowed,
                limits,
                self._fetch_keys,
                now=worker_now(record),
            )

        # Counted processed once applied (memory and access events, in _apply_guarded), or
        # here when nothing more is done with it.
        decoded, opened = await self.boundary.run(record, decode, count=False)
        if not decoded:
            return
        if opened is None:
            self.erased += 1  # an erased user's: not an error, nothing to project
            self.boundary.processed([record])
            return
        event = opened.event
        if not isinstance(event, MemoryAdded | MemoryChange | MemoriesRetrieved):
            self.boundary.processed([record])
        if isinstance(event, UserErased):
            # In log order: what came before is applied, then the user's rows go.
            if memory_batch:
                await self._apply_memories(memory_batch)
                memory_batch.clear()
            erased = await self._until_done(
                "erasure", lambda: self.projection.erase_user(event.user_id)
            )
            # Keys read before the erasure must not open what follows it.
            self._fetch_keys = BatchKeys(self.keys)
            log.info("projector: user erased (%s): %d memory row(s) removed", event.erasure_id, erased)
        elif isinstance(event, MemoryAdded | MemoryChange):
            # The broker timestamp is processing time recorded in the log: the projection
            # keeps it as learned_at, the start of a short-term memory's TTL.
            position = SourcePosition(
                record.topic, record.partition, record.offset, timestamp=_broker_time(record)
            )
            memory_batch.append((event, position))
            self._records[(record.topic, record.partition, record.offset)] = record
        elif isinstance(event, MemoriesRetrieved):
            position = SourcePosition(record.topic, record.partition, record.offset)
            self.held.setdefault(record.partition, []).append((event, position))
            self._records[(record.topic, record.partition, record.offset)] = record

    async def _until_done(self, what: str, work: Callable[[], int]) -> int:
        """Run ``work`` in a thread until it succeeds, backing off between attempts: an
        erasure is never skipped and never dead-lettered (the user's rows must go)."""
        backoff = Backoff()
        while True:
            try:
                return await asyncio.to_thread(work)
            except Exception:  # retried; the projector waits meanwhile
                log.exception("projector: the %s failed; trying again", what)
                await backoff.wait()

    def _read_to_end(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is read up to the high watermark of the latest fetch (a partition
        this projector does not read has nothing to wait for)."""
        if tp not in self.read_to:
            return True
        if self.finish_at is not None and self.read_to[tp] >= self.finish_at.get(tp, 0):
            return True
        highwater = self.consumer.highwater(tp)
        return highwater is not None and self.read_to[tp] >= highwater

    async def _apply_released_accesses(self) -> int:
        """Release the held accesses whose memories partition is read to its end, write the
        released ones when due (``access_flush_interval_s`` after the first of them, or at
        once when a bounded run has read everything) and return the rows updated;
        pause the accesses partitions that still hold events, so what is held stays bounded."""
        for partition, items in self.held.items():
            if items and self._read_to_end(TopicPartition(self.topics.memories, partition)):
                if not self.released:
                    self._released_at = time.monotonic()
                self.released += items
                items.clear()
        updated = 0
        due = (
            self._read_everything()
            or len(self.released) >= MAX_RELEASED_ACCESSES
            or time.monotonic() - self._released_at >= self.settings.access_flush_interval_s
        )
        if self.released and due:
            released, self.released = self.released, []
            updated = await self._apply_accesses(released)
        holding = {
            TopicPartition(self.topics.accesses, p) for p, items in self.held.items() if items
        }
        if holding != self._paused:
            if holding - self._paused:
                self.consumer.pause(*(holding - self._paused))
            if self._paused - holding:
                self.consumer.resume(*(self._paused - holding))
            self._paused = holding
        return updated

    async def _apply_accesses(self, released: list[AccessItem]) -> int:
        """Write access counts; a retrieval that cannot be applied is dead-lettered, the
        others are written (the same boundary as memory events)."""
        return await self._apply_guarded(released, self.projection.apply_accesses, "accesses")

    async def _apply_guarded(
        self, batch: Sequence[tuple[Any, SourcePosition]], write: Callable[[Any], int], kind: str
    ) -> int:
        """``write`` the batch in a thread through the boundary (one record at a time if the
        batch fails for a reason of its data); return the rows written (counted in
        ``memstream_projector_rows_written_total{kind}``). The records of the batch are
        forgotten afterwards."""
        items = {id(self._record_of(position)): (event, position) for event, position in batch}
        records = [self._record_of(position) for _, position in batch]
        written = 0

        async def apply(chosen: Sequence[ConsumerRecord]) -> None:
            nonlocal written
            written += await asyncio.to_thread(write, [items[id(record)] for record in chosen])

        await self.boundary.run_batch(records, apply)
        for _, position in batch:
            self._records.pop((position.topic, position.partition, position.offset), None)
        PROJECTOR_ROWS.labels(kind).inc(written)
        return written

    def _update_caught_up(self) -> None:
        """Set ``caught_up`` while everything fetched is applied and nothing is behind."""
        if not self._paused and all(self._read_to_end(tp) for tp in self.read_to):
            self.caught_up.set()
            if self.progress is not None:
                self.progress.mark()
        else:
            self.caught_up.clear()
