"""The projector's loop: one consumer and one writer over the memories and accesses topics.

:class:`ProjectorLoop` fetches both topics from the positions it is given, applies memory
events in batches and retrievals once their memories are in (access events of a partition
are held until the same partition of the memories topic is read to its end), refreshes the
indexes on a cadence (:func:`index_refresh_due`), and says when it has caught up
(:class:`ProjectorProgress`). The live projector
(:func:`memstream.streams.projector.memories.run_memory_projector`) and a replay
(:mod:`memstream.streams.operations.replay`) both run it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from memstream.models.codec import EventLimits, worker_now
from memstream.models.events.chat import UserErased
from memstream.models.events.memory import MemoriesRetrieved, MemoryAdded, MemoryChange
from memstream.models.settings import Settings
from memstream.models.topics import ACCESS_TYPES, MEMORIES_TOPIC_TYPES
from memstream.projections.memories import MemoryStore, SourcePosition
from memstream.streams.agents.boundary import (
    Backoff,
    BrokerProbe,
    FunctionProbe,
    RecordBoundary,
    StateReport,
)
from memstream.streams.agents.decoding import decode_opened
from memstream.streams.kafka.deadletters import DeadLetterSink
from memstream.streams.kafka.publisher import EventPublisher, RawRecord
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.store import BatchKeys, KeyStore, keystore_from_settings
from memstream.streams.observability.metrics import CONSUMER_LAG, PROJECTOR_ROWS, LagRow

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


async def _discard(key: bytes | None, value: bytes) -> None:
    """Where a replay's dead letters go: nowhere (the live projector sent them)."""


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


class ProjectorLoop:
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
