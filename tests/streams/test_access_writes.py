"""The projector writes retrievals' access counts in batches: one write per
``access_flush_interval_s`` under steady searches, not one per fetch (every write is a table
version and a deletion file); nothing read is dropped on the way."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from memstream.models.codec import encode_event
from memstream.models.events.memory import MemoriesRetrieved, RetrievedMemory
from memstream.models.settings import Settings
from memstream.streams.kafka.topics import Topics
from memstream.streams.projector import loop as projector_loop
from memstream.streams.projector.loop import ProjectorLoop


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class FetchScript:
    """A consumer whose every ``getmany`` returns the next scripted fetch, then nothing for
    10 s before it sets ``stop``, and moves the clock by ``step_s``; the memories partition is
    always read to its end."""

    def __init__(self, fetches: list[dict[TopicPartition, list[ConsumerRecord]]],
                 clock: Clock, step_s: float, stop: asyncio.Event) -> None:
        self.fetches = fetches
        self.clock = clock
        self.step_s = step_s
        self.stop = stop
        self.quiet_until = 0.0

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Any]]:
        self.clock.now += self.step_s
        if self.fetches:
            self.quiet_until = self.clock.now + 10.0
            return self.fetches.pop(0)
        if self.clock.now >= self.quiet_until:
            self.stop.set()
        return {}

    def highwater(self, tp: TopicPartition) -> int:
        return 0

    def pause(self, *tps: TopicPartition) -> None:
        pass

    def resume(self, *tps: TopicPartition) -> None:
        pass


class CountingProjection:
    """Records each access write; there are no memory events in these scripts."""

    def __init__(self) -> None:
        self.access_writes: list[list[str]] = []

    def apply_accesses(self, batch: Sequence[tuple[MemoriesRetrieved, Any]]) -> int:
        self.access_writes.append([event.event_id for event, _ in batch])
        return len(batch)

    def refresh_indexes(self) -> None:
        pass


def access_fetches(settings: Settings, count: int) -> list[dict[TopicPartition, list[ConsumerRecord]]]:
    """``count`` fetches of one retrieval each, on accesses partition 0."""
    tp = TopicPartition(Topics.from_settings(settings).accesses, 0)
    fetches = []
    for offset in range(count):
        event = MemoriesRetrieved(
            event_id=f"ann/retrieval/{offset}",
            user_id="ann",
            session_id="trip",
            occurred_at=datetime(2026, 11, 3, 9, tzinfo=UTC),
            query="what does she like?",
            memories=(RetrievedMemory(memory_id="m1", score=0.5),),
        )
        record = ConsumerRecord(
            topic=tp.topic, partition=0, offset=offset, timestamp=-1, timestamp_type=0,
            key=b"ann", value=encode_event(event), checksum=None, serialized_key_size=3,
            serialized_value_size=0, headers=(),
        )
        fetches.append({tp: [record]})
    return fetches


def run_projector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, interval_s: float, fetches: int,
    step_s: float, bounded: bool = False,
) -> list[list[str]]:
    """Run the projector over ``fetches`` one-access fetches, ``step_s`` apart; the access
    writes it made."""
    settings = Settings(data_dir=tmp_path, access_flush_interval_s=interval_s)
    clock = Clock()
    monkeypatch.setattr(projector_loop.time, "monotonic", clock)
    projection = CountingProjection()

    async def scenario() -> None:
        stop = asyncio.Event()
        script = access_fetches(settings, fetches)
        consumer = FetchScript(script, clock, step_s, stop)
        tp = TopicPartition(Topics.from_settings(settings).accesses, 0)
        projector = ProjectorLoop(
            settings, consumer, None, projection, {tp: 0}, asyncio.Event(),
            finish_at={tp: fetches} if bounded else None,
        )
        await projector.run(stop)

    asyncio.run(scenario())
    return projection.access_writes


def test_steady_searches_are_written_once_per_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 20 retrievals 0.2 s apart (5 searches/s) over 4 s, then quiet.
    writes = run_projector(tmp_path, monkeypatch, interval_s=2.0, fetches=20, step_s=0.2)
    assert len(writes) == 2
    assert [e for w in writes for e in w] == [f"ann/retrieval/{i}" for i in range(20)]


def test_an_interval_of_zero_writes_after_every_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = run_projector(tmp_path, monkeypatch, interval_s=0.0, fetches=5, step_s=0.2)
    assert writes == [[f"ann/retrieval/{i}"] for i in range(5)]


def test_a_bounded_run_writes_what_it_read_before_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A replay reads fast: the interval never passes, the end of the log flushes.
    writes = run_projector(
        tmp_path, monkeypatch, interval_s=3_600.0, fetches=7, step_s=0.01, bounded=True
    )
    assert writes == [[f"ann/retrieval/{i}" for i in range(7)]]
