"""How far the workers' group is through the log: what a backfill, a scale-out run or a test
waits for before it reads the projections."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition

from memstream.models.settings import Settings
from memstream.streams.archive.layout import worker_group_id
from memstream.streams.kafka.tansu import true_end_offsets


def group_client(settings: Settings) -> AIOKafkaConsumer:
    """A consumer of the workers' group that never joins it (it subscribes to nothing): it
    reads and commits the group's offsets from outside. Start and stop it."""
    return AIOKafkaConsumer(
        bootstrap_servers=settings.broker,
        group_id=worker_group_id(settings),
        enable_auto_commit=False,
    )


async def committed_offsets(
    settings: Settings, positions: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """What a new consumer of the workers' group sees as committed (OffsetFetch), for the
    (topic, partition) positions that have an offset."""
    consumer = group_client(settings)
    try:
        await consumer.start()  # stopped below even when it fails: no leak
        found = {}
        for topic, partition in positions:
            offset = await consumer.committed(TopicPartition(topic, partition))
            if offset is not None:
                found[(topic, partition)] = offset
        return found
    finally:
        await consumer.stop()


def group_caught_up(settings: Settings, topics: Iterable[str]) -> bool:
    """Whether the workers' group has committed every record now in ``topics``: each record
    there is processed, and what processing it sent (dead letters, the next topic's
    records) is in the log. A worker that died after processing and before committing is
    not caught up: its successor processes those records again."""
    tps = [TopicPartition(t, p) for t in topics for p in range(settings.partitions)]
    try:
        ends = asyncio.run(true_end_offsets(settings.broker, tps))
    except Exception:  # noqa: BLE001 - a topic may not exist yet
        return False
    committed = asyncio.run(committed_offsets(settings, [(tp.topic, tp.partition) for tp in tps]))
    return all(committed.get((tp.topic, tp.partition), 0) >= end for tp, end in ends.items())
