"""Where a projector starts: the partitions of its topics, and the position its tables hold
for each, with the partitions whose log ends before that position."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from memstream.models.settings import Settings
from memstream.projections.memories import MemoryStore
from memstream.streams.kafka.tansu import true_end_offsets
from memstream.streams.kafka.topics import Topics


async def assigned_partitions(
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


async def start_positions(
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
