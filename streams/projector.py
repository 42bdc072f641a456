"""The memory projector: the single writer that projects the memories topic into LanceDB.

It is a plain consumer with no consumer group: it reads every partition and resumes from the
source offsets stored in the LanceDB rows themselves (the projection's tracking record), so
a crash between a write and a commit cannot lose or double anything, and every data
directory holds a complete projection. An advisory lock on the data directory keeps it to
one writer per table when several workers share a machine.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import time
from pathlib import Path
from typing import IO

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from memstream.models.codec import InvalidEvent
from memstream.models.events import (
    MemoryAdded,
    MemoryChange,
    MemoryDeleted,
    MemoryReinforced,
    MemorySuperseded,
)
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import MemoryProjection, SourcePosition
from memstream.streams.agents import MEMORY_TYPES, decode_checked
from memstream.streams.deadletters import DeadLetter
from memstream.streams.tansu import true_end_offsets
from memstream.streams.topics import Topics

log = logging.getLogger(__name__)

#: How long the projection may lag behind the full-text index before it is refreshed.
INDEX_REFRESH_IDLE_S = 0.3
INDEX_REFRESH_BUSY_S = 5.0


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


async def _assigned_partitions(consumer: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
    while True:
        partitions = consumer.partitions_for_topic(topic)
        if partitions:
            return [TopicPartition(topic, p) for p in sorted(partitions)]
        await consumer._client.force_metadata_update()
        await asyncio.sleep(0.5)


async def run_memory_projector(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Project memory events into LanceDB until cancelled (or ``stop`` is set)."""
    stop = stop or asyncio.Event()
    lock = WriterLock(settings.lancedb_dir / ".projector.lock")
    while not lock.try_acquire():
        log.info("projector: another process writes %s; waiting", settings.lancedb_dir)
        await asyncio.sleep(5)
    topic = Topics.from_settings(settings).memories
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    try:
        embedder = await asyncio.to_thread(embedder_from_settings, settings)
        projection = MemoryProjection(settings.lancedb_dir, embedder)
        await consumer.start()
        await producer.start()
        partitions = await _assigned_partitions(consumer, topic)
        consumer.assign(partitions)
        await _seek_to_positions(settings, consumer, projection, partitions)
        await _project(settings, consumer, producer, projection, stop)
    finally:
        await consumer.stop()
        await producer.stop()
        lock.release()


async def _seek_to_positions(
    settings: Settings,
    consumer: AIOKafkaConsumer,
    projection: MemoryProjection,
    partitions: list[TopicPartition],
) -> None:
    positions = await asyncio.to_thread(projection.positions)
    ends = await true_end_offsets(settings.broker, partitions)
    for tp in partitions:
        position = positions.get((tp.topic, tp.partition), 0)
        if position > ends[tp]:
            # The log is shorter than what the projection has seen: the broker lost its
            # storage (the embedded broker keeps the log in memory only). Say so plainly.
            log.error(
                "projector: %s[%d] ends at offset %d but the projection already holds offset "
                "%d: the broker lost its log. Memories already projected stay; the partition "
                "is read again from its start.",
                tp.topic, tp.partition, ends[tp], position - 1,
            )
            position = 0
        consumer.seek(tp, position)


async def _project(
    settings: Settings,
    consumer: AIOKafkaConsumer,
    producer: AIOKafkaProducer,
    projection: MemoryProjection,
    stop: asyncio.Event,
) -> None:
    dirty = False
    last_refresh = time.monotonic()
    while not stop.is_set():
        fetched = await consumer.getmany(
            timeout_ms=int(settings.projection_batch_wait_s * 1000),
            max_records=settings.projection_batch_size,
        )
        batch: list[tuple[MemoryAdded | MemoryChange, SourcePosition]] = []
        for records in fetched.values():
            for record in records:
                try:
                    event = decode_checked(
                        record.value, record.key, MEMORY_TYPES, settings.max_event_bytes
                    )
                except InvalidEvent as exc:
                    letter = DeadLetter.of(
                        agent="projector",
                        reason=f"invalid event: {exc}",
                        topic=record.topic,
                        partition=record.partition,
                        offset=record.offset,
                        key=record.key,
                        value=record.value,
                    )
                    log.warning("projector: dead-lettered offset %d: %s", record.offset, exc)
                    await producer.send_and_wait(
                        Topics.from_settings(settings).deadletters,
                        key=record.key,
                        value=letter.model_dump_json().encode(),
                    )
                    continue
                if isinstance(event, MemoryAdded | MemoryReinforced | MemorySuperseded | MemoryDeleted):
                    position = SourcePosition(record.topic, record.partition, record.offset)
                    batch.append((event, position))
        if batch:
            await asyncio.to_thread(projection.apply, batch)
            dirty = True
        idle = not fetched
        since = time.monotonic() - last_refresh
        if dirty and (
            (idle and since >= INDEX_REFRESH_IDLE_S) or since >= INDEX_REFRESH_BUSY_S
        ):
            # Index maintenance stays off the ingest and read paths: it runs here, batched.
            await asyncio.to_thread(projection.refresh_indexes)
            dirty = False
            last_refresh = time.monotonic()
