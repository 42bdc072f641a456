"""The chat lines the traffic benchmarks (chaos, soak) make up, and the worker group's backlog
they both wait on.

Imported as ``chatter`` (the scripts run as ``python benchmarks/NAME.py``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition

from memstream.models.settings import Settings
from memstream.streams.kafka.tansu import true_end_offsets
from memstream.streams.kafka.topics import Topics

CITIES = ["Lisbon", "Porto", "Berlin", "Oslo", "Vienna", "Lyon", "Turin", "Munich"]
COMPANIES = ["Siemens", "Acme", "Globex", "Initech", "Hooli", "Umbrella"]
FOODS = ["ramen", "paella", "falafel", "tacos", "pierogi"]
TRAVEL = ["trains", "bikes", "trams", "ferries"]
ASSISTANT_LINES = ["Noted.", "Sure, let me check.", "Here are three options.", "Done.", "Good choice."]


def chat_line(rng: random.Random, role: str, user_lines: Sequence[str]) -> str:
    """A line of ``role``: one of ``user_lines`` (facts that repeat and change) filled in, or
    an assistant's reply."""
    line = rng.choice(user_lines if role == "user" else ASSISTANT_LINES)
    return line.format(
        city=rng.choice(CITIES), company=rng.choice(COMPANIES), travel=rng.choice(TRAVEL),
        food=rng.choice(FOODS), budget=rng.choice([1500, 2000, 2500, 3000]),
    )


async def group_position(settings: Settings) -> tuple[int, int]:
    """(records in, records committed by the workers' consumer group) over the chat and
    consolidation topics."""
    topics = Topics.from_settings(settings)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker,
        group_id=f"{settings.topic_prefix}.{settings.app_id}",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        tps = [
            TopicPartition(t, p)
            for t in (topics.chat, topics.consolidation)
            for p in range(settings.partitions)
        ]
        ends = await true_end_offsets(settings.broker, tps)
        committed = {tp: min(await consumer.committed(tp) or 0, ends[tp]) for tp in tps}
        return sum(ends.values()), sum(committed.values())
    finally:
        await consumer.stop()


async def backlog(settings: Settings) -> int:
    """Chat and consolidation records the workers' consumer group has not committed."""
    records, committed = await group_position(settings)
    return records - committed
