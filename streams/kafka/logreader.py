"""Reading a whole topic as it stands now (dead letters, checks, replay tooling)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from memstream.models.settings import Settings
from memstream.models.topics import murmur2
from memstream.streams.kafka.tansu import true_end_offsets


async def topic_partitions(consumer: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
    """The partitions of ``topic`` in order, asking the broker again if the consumer's
    metadata has none yet; empty for a topic that does not exist."""
    partitions = consumer.partitions_for_topic(topic) or set()
    if not partitions:
        await consumer._client.force_metadata_update()
        partitions = consumer.partitions_for_topic(topic) or set()
    return [TopicPartition(topic, p) for p in sorted(partitions)]


def key_partition(key: bytes, partitions: Sequence[int]) -> int:
    """The partition Kafka's default partitioner (murmur2, as every memstream producer and
    the Java clients use) puts records keyed ``key`` on, out of ``partitions``."""
    listed = sorted(partitions)
    return listed[(murmur2(key) & 0x7FFFFFFF) % len(listed)]


async def key_topic_partition(
    consumer: AIOKafkaConsumer, topic: str, key: bytes
) -> TopicPartition | None:
    """The partition of ``topic`` that records keyed ``key`` land on; None if no topic."""
    partitions = [tp.partition for tp in await topic_partitions(consumer, topic)]
    if not partitions:
        return None
    return TopicPartition(topic, key_partition(key, partitions))


async def read_topic(
    settings: Settings, topic: str, timeout_s: float = 30.0, *, key: bytes | None = None
) -> list[ConsumerRecord]:
    """Every record of ``topic`` up to its current end, ordered by partition then offset;
    with ``key``, of the one partition records with that key land on (every record of one
    user, for a topic keyed by user id), so the read costs that partition only.

    The end comes from a Fetch high watermark (exact on Tansu too), so the read stops once
    it has everything that was in the log when it began.
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        await consumer.start()  # stopped below even when it fails: no leak
        if key is None:
            tps = await topic_partitions(consumer, topic)
        else:
            one = await key_topic_partition(consumer, topic, key)
            tps = [one] if one is not None else []
        if not tps:
            return []
        ends = await true_end_offsets(settings.broker, tps)
        todo = {tp for tp in tps if ends[tp] > 0}
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        records: dict[TopicPartition, list[ConsumerRecord]] = {tp: [] for tp in tps}
        deadline = asyncio.get_running_loop().time() + timeout_s
        while todo:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"could not read {topic} to its end in {timeout_s:.0f} s")
            fetched = await consumer.getmany(*todo, timeout_ms=500)
            for tp, batch in fetched.items():
                records[tp].extend(r for r in batch if r.offset < ends[tp])
                if batch and batch[-1].offset >= ends[tp] - 1:
                    todo.discard(tp)
        return [record for tp in tps for record in records[tp]]
    finally:
        await consumer.stop()
