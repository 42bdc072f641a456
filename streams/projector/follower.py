"""Following the memories and accesses topics for a process's resident memories.

The process that answers searches (the service, the local client, MCP, the worker's web app)
holds its active users in memory (:class:`~memstream.projections.resident.ResidentMemories`)
while another process, the projector, writes the LanceDB table. :class:`ResidentFollower`
keeps them current the way the projector keeps the table: it reads both topics from where
the table stood when it began, opens each event with its user's key, and folds it in
(:meth:`ResidentMemories.follow`). It writes nothing and sends no dead letters: an event it
cannot decode is the projector's to dead-letter, and is skipped here.

Until it has read to the end of the log once, and whenever it loses the broker, searches
read the table (:meth:`ResidentMemories.set_live`); on a failure it starts again from the
table's positions, after a pause.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from memstream.models.codec import EventLimits, InvalidEvent, worker_now
from memstream.models.events.chat import UserErased
from memstream.models.events.memory import MemoriesRetrieved, MemoryAdded, MemoryChange
from memstream.models.settings import Settings
from memstream.models.topics import ACCESS_TYPES, MEMORIES_TOPIC_TYPES, Topics
from memstream.projections.memories import SourcePosition
from memstream.projections.resident import ResidentMemories
from memstream.streams.agents.decoding import decode_opened
from memstream.streams.kafka.logreader import topic_partitions
from memstream.streams.keys.store import BatchKeys, KeyStore
from memstream.streams.projector.loop import _broker_time
from memstream.streams.projector.stopping import stop_task

__all__ = ["ResidentFollower"]

log = logging.getLogger(__name__)

#: Records read at most per fetch, and how long a fetch waits for them.
FETCH_RECORDS = 2_000
FETCH_WAIT_MS = 100
#: Pause after a failure before starting again.
RETRY_S = 1.0


class ResidentFollower:
    """Feeds ``resident`` with the memories and accesses topics, in a task of the running
    loop (:meth:`start`, :meth:`close`).

    Parameters
    ----------
    settings
        The broker, topics and event limits.
    keys
        The users' content keys, to open sealed events (the workers' store).
    resident
        The resident memories to keep current.
    """

    def __init__(self, settings: Settings, keys: KeyStore, resident: ResidentMemories) -> None:
        self.settings = settings
        self.keys = keys
        self.resident = resident
        self.topics = Topics.from_settings(settings)
        self.memory_limits = EventLimits.from_settings(settings, derived=True)
        self.access_limits = EventLimits.from_settings(settings)
        self.skipped = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start following in the running loop (once)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="resident-follower")

    async def close(self) -> None:
        if self._task is not None:
            task, self._task = self._task, None
            await stop_task(task)
        self.resident.set_live(False)

    async def _run(self) -> None:
        while True:
            try:
                await self._follow()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - whatever failed, start again from the table
                self.resident.set_live(False)
                # Not a warning: searches still answer (from the table), and losing the broker
                # is reported once, by the publisher, in one line.
                log.debug("resident memories: following the log failed (%s); reading the table", exc)
                await asyncio.sleep(RETRY_S)

    async def _follow(self) -> None:
        table = self.resident.projection
        since = await asyncio.to_thread(table.positions)
        since_accesses = await asyncio.to_thread(table.access_positions)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.broker,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            await consumer.start()
            tps = [
                *await topic_partitions(consumer, self.topics.memories),
                *await topic_partitions(consumer, self.topics.accesses),
            ]
            if not tps:
                raise RuntimeError("the memories topic does not exist yet")
            consumer.assign(tps)
            # Where the table stood: anything earlier is in the rows a user is loaded from
            # (each row keeps the offsets it took, so reading some again is harmless).
            start = {
                tp: since.get((tp.topic, tp.partition), 0)
                if tp.topic == self.topics.memories
                else since_accesses.get(tp.partition, 0)
                for tp in tps
            }
            for tp, offset in start.items():
                consumer.seek(tp, offset)
            self.resident.start_following(
                {(tp.topic, tp.partition): offset for tp, offset in start.items()}
            )
            read_to = {(tp.topic, tp.partition): offset for tp, offset in start.items()}
            while True:
                fetched = await consumer.getmany(timeout_ms=FETCH_WAIT_MS, max_records=FETCH_RECORDS)
                await self._fold(fetched, read_to)
                if not self.resident.live and self._caught_up(consumer, tps, read_to):
                    self.resident.set_live(True)
                    log.info("resident memories: following the log, searches served from memory")
        finally:
            await consumer.stop()

    async def _fold(
        self, fetched: dict[TopicPartition, list[ConsumerRecord]], read_to: dict[tuple[str, int], int]
    ) -> None:
        keys = BatchKeys(self.keys)
        memories: list[tuple[MemoryAdded | MemoryChange, SourcePosition]] = []
        accesses: list[tuple[MemoriesRetrieved, SourcePosition]] = []
        for tp, records in fetched.items():
            for record in records:
                event = self._opened(record, keys)
                if isinstance(event, UserErased):
                    # In log order: what came before is folded, then the user goes.
                    self.resident.follow(memories, accesses, read_to)
                    memories, accesses = [], []
                    self.resident.forget_user(event.user_id)
                    keys = BatchKeys(self.keys)
                elif isinstance(event, MemoryAdded | MemoryChange):
                    position = SourcePosition(
                        record.topic, record.partition, record.offset,
                        timestamp=_broker_time(record),
                    )
                    memories.append((event, position))
                elif isinstance(event, MemoriesRetrieved):
                    accesses.append(
                        (event, SourcePosition(record.topic, record.partition, record.offset))
                    )
            if records:
                read_to[(tp.topic, tp.partition)] = records[-1].offset + 1
        self.resident.follow(memories, accesses, read_to)

    def _opened(self, record: ConsumerRecord, keys: BatchKeys) -> Any:
        is_memory = record.topic == self.topics.memories
        try:
            opened = decode_opened(
                record.value,
                record.key,
                MEMORIES_TOPIC_TYPES if is_memory else ACCESS_TYPES,
                self.memory_limits if is_memory else self.access_limits,
                keys,
                now=worker_now(record),
            )
        except InvalidEvent:
            self.skipped += 1  # the projector dead-letters it
            return None
        return None if opened is None else opened.event

    @staticmethod
    def _caught_up(
        consumer: AIOKafkaConsumer, tps: list[TopicPartition], read_to: dict[tuple[str, int], int]
    ) -> bool:
        """Whether every partition was read to the high watermark of its last fetch."""
        for tp in tps:
            end = consumer.highwater(tp)
            if end is None or read_to[(tp.topic, tp.partition)] < end:
                return False
        return True
