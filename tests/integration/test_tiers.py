"""Tiers on the real broker and LanceDB: retrievals promote, the TTL expires, replay agrees."""

from __future__ import annotations

import asyncio
import functools
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from chat import conversation
from harness import wait_for, wait_for_async
from sealed import topic_events as sealed_topic_events

import memstream.streams.projector.memories as projector_module
from memstream.models.codec import encode_event
from memstream.models.events.envelope import Event, derived_id
from memstream.models.events.memory import (
    MemoriesRetrieved,
    MemoryAdded,
    MemoryExpired,
    MemoryPromoted,
    RetrievedMemory,
)
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import (
    MemoryRecord,
    MemoryStore,
    PartitionedMemories,
)
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.deadletters import DeadLetter
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics, ensure_topics
from memstream.streams.keys.store import keystore_from_settings
from memstream.streams.projector.memories import run_memory_projector
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess

TRIP = [
    ("user", "I'm planning a trip to Lisbon in March."),
    ("assistant", "Lovely. What do you enjoy?"),
    ("user", "I love seafood and I prefer walking tours over bus tours."),
    ("assistant", "Alfama is very walkable."),
    ("user", "My budget is about 1500 euros."),
]
SettingsFactory = Callable[..., Settings]


def retrieval(number: int, user_id: str, *memory_ids: str) -> MemoriesRetrieved:
    return MemoriesRetrieved(
        event_id=f"{user_id}/retrieval/{number}",
        user_id=user_id,
        session_id="later",
        occurred_at=datetime(2026, 11, 3, 9, number, tzinfo=UTC),
        query="what does she like?",
        memories=tuple(RetrievedMemory(memory_id=m, score=0.5) for m in memory_ids),
    )


async def publish_raw(settings: Settings, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(topic, key=key, value=value)
    finally:
        await producer.stop()


async def publish_to(
    settings: Settings, topic: str, events: list[MemoryAdded] | list[MemoriesRetrieved]
) -> None:
    await publish_raw(settings, topic, [(e.user_id.encode(), encode_event(e)) for e in events])


def topic_events(settings: Settings) -> list[Event]:
    return sealed_topic_events(settings, Topics.from_settings(settings).memories)


def state(records: list[MemoryRecord]) -> dict[str, tuple[str, str, int]]:
    return {r.memory_id: (r.tier, r.status, r.access_count) for r in records}


async def replay(settings: Settings, done: Callable[[MemoryStore], bool]) -> None:
    """Rebuild a projection from the log with the projector alone, until ``done``."""
    stop = asyncio.Event()
    projector = asyncio.create_task(run_memory_projector(settings, stop, tiers=False))
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))

    async def caught_up() -> bool:
        assert not projector.done(), projector
        return await asyncio.to_thread(done, projection)

    try:
        await wait_for_async(caught_up, "the replay to catch up", 90)
    finally:
        stop.set()
        await asyncio.wait_for(projector, 30)


def test_a_memory_retrieved_three_times_is_promoted(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    settings = settings_factory(web_port=free_port())
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        asyncio.run(publish_events(settings, conversation("ann", "trip", TRIP)))
        short = wait_for(
            lambda: [
                m for m in projection.list_memories("ann")
                if m.tier == "short_term" and m.memory_type == "fact"
            ],
            "a short-term fact",
        )
        target = short[0].memory_id
        other = next(m for m in projection.list_memories("ann") if m.memory_id != target)
        accesses = [
            (b"ann", encode_event(retrieval(0, "ann", target, other.memory_id))),
            (b"ann", b"{not json"),  # dead-lettered, the rest still counts
            (b"ann", encode_event(retrieval(1, "ann", target))),
            (b"ann", encode_event(retrieval(2, "ann", target))),
        ]
        asyncio.run(publish_raw(settings, Topics.from_settings(settings).accesses, accesses))

        def promoted_target() -> MemoryRecord | None:
            record = projection.get("ann", target)
            return record if record is not None and record.tier == "long_term" else None

        promoted = wait_for(promoted_target, "the promotion")
        assert promoted.access_count == 3 and promoted.status == "active"
        assert promoted.learned_at is not None
        assert abs(promoted.learned_at - datetime.now(UTC)) < timedelta(minutes=5)
        # The worker keeps running: nothing is published twice. A promotion of bob's,
        # retrieved after ann's promotion was projected, proves a later scan of the keeper.
        asyncio.run(publish_events(settings, conversation("bob", "trip", TRIP)))
        marker = wait_for(
            lambda: [m for m in projection.list_memories("bob") if m.tier == "short_term"],
            "bob's short-term memories",
        )[0].memory_id
        asyncio.run(publish_to(
            settings, Topics.from_settings(settings).accesses, [retrieval(i, "bob", marker) for i in range(3)]
        ))
        wait_for(
            lambda: (projection.get("bob", marker) or short[0]).tier == "long_term",
            "the marker's promotion",
        )
        before = state(projection.list_memories("ann", include_inactive=True))
    events = topic_events(settings)
    promotions = [e for e in events if isinstance(e, MemoryPromoted) and e.user_id == "ann"]
    assert [e.memory_id for e in events if isinstance(e, MemoryPromoted) and e.user_id != "ann"] == [marker]
    assert [(e.memory_id, e.event_id) for e in promotions] == [
        (target, derived_id(target, "promote"))
    ]
    assert promotions[0].reason == "retrieved 3 times" and promotions[0].user_id == "ann"
    assert not [e for e in events if isinstance(e, MemoryExpired)]  # the default TTL is a day
    retrieved_once = projection.get("ann", other.memory_id)
    assert retrieved_once is not None and retrieved_once.access_count == 1
    letters = asyncio.run(read_topic(settings, Topics.from_settings(settings).deadletters))
    dead = [DeadLetter.model_validate_json(r.value) for r in letters]
    keys = keystore_from_settings(settings)
    assert [(d.agent, d.source_topic, d.original_value(keys)) for d in dead] == [
        ("projector", Topics.from_settings(settings).accesses, b"{not json")
    ]
    assert dead[0].sealed  # ann has a key: the bytes are sealed with it

    # The log alone gives the same projection: tiers, statuses and access counts. The
    # rebuild reads sealed events, so it needs the key store.
    rebuilt = settings_factory(data_dir=tmp_path / "replay")
    shutil.copytree(settings.keys_dir, rebuilt.keys_dir)
    asyncio.run(
        replay(
            rebuilt,
            lambda p: state(p.list_memories("ann", include_inactive=True)) == before,
        )
    )


def test_the_ttl_expires_short_term_memories_but_never_episodes(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    settings = settings_factory(web_port=free_port(), short_term_ttl_s=1.0)
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        asyncio.run(publish_events(settings, conversation("ann", "trip", TRIP)))

        def expired() -> list[MemoryRecord]:
            listed = projection.list_memories("ann", include_inactive=True)
            return [m for m in listed if m.status == "expired"]

        wait_for(expired, "an expiry")
        # Several TTLs and scans more, episodes must still be there: bob's session, sent
        # now, is the marker; once his memories expire the keeper has scanned past that.
        asyncio.run(publish_events(settings, conversation("bob", "trip", TRIP)))
        wait_for(
            lambda: [m for m in projection.list_memories("bob", include_inactive=True) if m.status == "expired"],
            "the marker session's expiry",
        )
        memories = projection.list_memories("ann", include_inactive=True)
    episodes = [m for m in memories if m.memory_type == "episode"]
    assert episodes and all(m.status == "active" and m.tier == "short_term" for m in episodes)
    short = [m for m in memories if m.tier == "short_term" and m.memory_type != "episode"]
    assert short and all(m.status == "expired" for m in short)
    long_term = [m for m in memories if m.tier == "long_term"]
    assert long_term and all(m.status == "active" for m in long_term)
    expiries = [e for e in topic_events(settings) if isinstance(e, MemoryExpired) and e.user_id == "ann"]
    assert sorted(e.memory_id for e in expiries) == sorted(m.memory_id for m in short)
    assert all(e.event_id == derived_id(e.memory_id, "expire") for e in expiries)
    # Expired memories leave the current view; the episodes answer instead.
    assert {m.memory_id for m in projection.list_memories("ann")} == {
        m.memory_id for m in episodes + long_term
    }


def test_a_replay_holds_retrievals_until_their_memories_are_projected(
    settings_factory: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ~2.4 MB of memories on one partition, fetched 100 kB at a time (the real consumer, with
    # smaller fetches than its default 1 MB a partition): the short accesses log arrives long
    # before the memory its retrievals name, as in any replay of a long log.
    small_fetches = functools.partial(
        AIOKafkaConsumer, max_partition_fetch_bytes=100_000, fetch_max_bytes=100_000
    )
    monkeypatch.setattr(projector_module, "AIOKafkaConsumer", small_fetches)
    settings = settings_factory(projection_batch_size=16, partitions=1)
    filler = " ".join(["walking tours and seafood in Lisbon"] * 500)
    added = [
        MemoryAdded(
            event_id=f"ann/add/{i}",
            user_id="ann",
            session_id="trip",
            occurred_at=datetime(2026, 11, 2, 9, 0, tzinfo=UTC),
            memory_id=f"ann/memory/{i}",
            memory_type="fact",
            content=f"{i} {filler}",
            importance=0.5,
            tier="short_term",
            extraction_event_id=f"ann/extraction/{i}",
            extractor="test/1",
        )
        for i in range(130)
    ]
    last = added[-1].memory_id
    accesses = [retrieval(i, "ann", added[0].memory_id, last) for i in range(3)]
    asyncio.run(ensure_topics(settings))
    asyncio.run(publish_to(settings, Topics.from_settings(settings).memories, added))
    asyncio.run(publish_to(settings, Topics.from_settings(settings).accesses, accesses))

    def everything_applied(projection: MemoryStore) -> bool:
        return projection.count("ann") == len(added) and projection.access_positions() == {0: 3}

    asyncio.run(replay(settings, everything_applied))
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    counts = {m.memory_id: m.access_count for m in projection.list_memories("ann")}
    assert counts[added[0].memory_id] == counts[last] == 3
