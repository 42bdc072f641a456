"""Tiers in the projection: access counts, promotion and expiry, and the tier keeper's
decisions, on a real LanceDB table (fake embedder: no model needed, no broker)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeEmbedder, InMemoryPublisher

from memstream.models.events.envelope import Event, derived_id
from memstream.models.events.memory import (
    MemoriesRetrieved,
    MemoryAdded,
    MemoryExpired,
    MemoryPromoted,
    MemoryType,
    RetrievedMemory,
    Tier,
)
from memstream.models.settings import Settings
from memstream.projections.memories import MemoryProjection, SearchFilters, SourcePosition
from memstream.streams.keys.sealing import open_event
from memstream.streams.keys.store import FileKeyStore
from memstream.streams.projector.tiers import TierKeeper

MEMORIES = "memstream.memories"
ACCESSES = "memstream.accesses"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TTL = timedelta(hours=1)


@pytest.fixture
def projection(tmp_path: Path) -> MemoryProjection:
    return MemoryProjection(tmp_path / "lancedb", FakeEmbedder())


@pytest.fixture
def keys(tmp_path: Path) -> FileKeyStore:
    """The users' keys: alice and bob have one, as every user whose memories came from
    memstream's own (sealed) events does."""
    store = FileKeyStore(tmp_path / "keys")
    for user in ("alice", "bob"):
        store.key_for(user, create=True)
    return store


def memory(
    memory_id: str,
    content: str,
    *,
    user_id: str = "alice",
    memory_type: MemoryType = "fact",
    tier: Tier = "short_term",
) -> MemoryAdded:
    return MemoryAdded(
        event_id=f"evt-{memory_id}",
        user_id=user_id,
        session_id="s1",
        occurred_at=T0 - timedelta(days=300),  # event time: long ago (a backfill, say)
        memory_id=memory_id,
        memory_type=memory_type,
        content=content,
        importance=0.5,
        tier=tier,
        extraction_event_id=f"ext-{memory_id}",
        extractor="test/1",
    )


def learned(offset: int, at: datetime = T0) -> SourcePosition:
    """A memories-topic position whose broker timestamp (processing time) is ``at``."""
    return SourcePosition(MEMORIES, 0, offset, timestamp=at)


def retrieval(
    offset: int, *memory_ids: str, user_id: str = "alice"
) -> tuple[MemoriesRetrieved, SourcePosition]:
    event = MemoriesRetrieved(
        event_id=f"r-{offset}",
        user_id=user_id,
        session_id="s1",
        occurred_at=T0 + timedelta(minutes=offset),
        query="anything",
        memories=tuple(RetrievedMemory(memory_id=m, score=0.5) for m in memory_ids),
    )
    return event, SourcePosition(ACCESSES, 0, offset)


def change(
    event_type: type[MemoryPromoted | MemoryExpired], memory_id: str, user_id: str = "alice"
) -> Any:
    return event_type(
        event_id=f"{event_type.__name__}-{memory_id}",
        user_id=user_id,
        session_id="s1",
        occurred_at=T0,
        memory_id=memory_id,
        reason="test",
    )


def seed(projection: MemoryProjection) -> None:
    projection.apply(
        [
            (memory("m-tea", "Alice drinks green tea"), learned(0)),
            (memory("m-trip", "Alice flew to Oslo", memory_type="episode"), learned(1)),
            (memory("m-cat", "Alice has a cat", tier="long_term"), learned(2)),
            (memory("b-jazz", "Bob likes jazz", user_id="bob"), learned(3)),
        ]
    )


def get(projection: MemoryProjection, memory_id: str, user_id: str = "alice") -> Any:
    record = projection.get(user_id, memory_id)
    assert record is not None
    return record


# --- access counts --------------------------------------------------------------------


def test_a_retrieval_counts_once_even_when_re_delivered(projection: MemoryProjection) -> None:
    seed(projection)
    assert projection.apply_accesses([retrieval(0, "m-tea", "m-cat")]) == 2
    assert projection.apply_accesses([retrieval(0, "m-tea", "m-cat")]) == 0  # re-delivered
    # One memory named twice in one retrieval is one use; a batch holding a repeat too.
    assert projection.apply_accesses([retrieval(1, "m-tea", "m-tea"), retrieval(1, "m-tea")]) == 1
    tea = get(projection, "m-tea")
    assert tea.access_count == 2 and tea.last_accessed_at == T0 + timedelta(minutes=1)
    assert get(projection, "m-cat").access_count == 1
    assert projection.access_positions() == {0: 2}


def test_a_retrieval_touches_only_the_retrieving_users_rows(projection: MemoryProjection) -> None:
    seed(projection)
    assert projection.apply_accesses([retrieval(0, "b-jazz", "no-such-memory")]) == 0
    assert get(projection, "b-jazz", user_id="bob").access_count == 0
    assert projection.apply_accesses([retrieval(1, "b-jazz", user_id="bob")]) == 1
    assert get(projection, "b-jazz", user_id="bob").access_count == 1


def test_the_broker_timestamp_is_kept_as_learned_at(projection: MemoryProjection) -> None:
    seed(projection)
    tea = get(projection, "m-tea")
    assert tea.learned_at == T0 and tea.created_at == T0 - timedelta(days=300)


# --- promotion and expiry -------------------------------------------------------------


def test_promotion_and_expiry_flip_tier_and_status_once(projection: MemoryProjection) -> None:
    seed(projection)
    batch = [
        (change(MemoryPromoted, "m-tea"), learned(10)),
        (change(MemoryExpired, "m-trip"), learned(11)),
    ]
    assert projection.apply(batch) == 2
    assert projection.apply(batch) == 0  # re-delivered
    assert get(projection, "m-tea").tier == "long_term"
    assert get(projection, "m-tea").status == "active"
    assert get(projection, "m-trip").status == "expired"


def test_expired_memories_leave_search_but_history_shows_them(projection: MemoryProjection) -> None:
    seed(projection)
    projection.apply([(change(MemoryExpired, "m-tea"), learned(10))])
    assert "m-tea" not in {h.memory_id for h in projection.search("alice", "green tea")}
    assert "m-tea" not in {m.memory_id for m in projection.list_memories("alice")}
    history = projection.search("alice", "green tea", filters=SearchFilters(include_inactive=True))
    assert "m-tea" in {h.memory_id for h in history}
    listed = projection.list_memories("alice", include_inactive=True)
    assert {m.memory_id: m.status for m in listed}["m-tea"] == "expired"


def test_only_short_term_non_episodes_learned_before_the_ttl_are_due(
    projection: MemoryProjection,
) -> None:
    seed(projection)
    projection.apply([(memory("m-new", "Alice bought boots"), learned(4, at=T0 + TTL))])
    due = projection.short_term_due(T0 + TTL + timedelta(seconds=1), TTL)
    # Not the episode (the raw record stays), not long-term, not the one learned recently,
    # even though every event time is 300 days old.
    assert sorted((user, record.memory_id) for user, record in due) == [
        ("alice", "m-tea"),
        ("bob", "b-jazz"),
    ]
    assert projection.short_term_due(T0 + TTL - timedelta(seconds=1), TTL) == []


def test_an_episode_is_never_due_however_old(projection: MemoryProjection) -> None:
    seed(projection)
    due = projection.short_term_due(T0 + timedelta(days=10_000), TTL)
    assert "m-trip" not in {record.memory_id for _, record in due}


# --- the tier keeper's decisions ------------------------------------------------------


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def tier_changes(events: list[Event]) -> list[MemoryPromoted | MemoryExpired]:
    assert all(isinstance(e, MemoryPromoted | MemoryExpired) for e in events)
    return [e for e in events if isinstance(e, MemoryPromoted | MemoryExpired)]


def keeper_for(
    projection: MemoryProjection, clock: Clock, keys: FileKeyStore
) -> tuple[TierKeeper, InMemoryPublisher]:
    settings = Settings.model_validate(
        {"short_term_ttl_s": TTL.total_seconds(), "promote_after_retrievals": 3}
    )
    recorder = InMemoryPublisher(keys)
    return TierKeeper(settings, projection, recorder, clock=clock), recorder


async def test_the_keeper_promotes_after_three_retrievals(
    projection: MemoryProjection, keys: FileKeyStore
) -> None:
    seed(projection)
    clock = Clock(T0 + timedelta(minutes=1))
    keeper, recorder = keeper_for(projection, clock, keys)
    projection.apply_accesses([retrieval(0, "m-tea", "m-trip"), retrieval(1, "m-tea", "m-trip")])
    assert await keeper.scan() == []
    projection.apply_accesses([retrieval(2, "m-tea", "m-trip")])
    events = tier_changes(await keeper.scan())
    assert {(e.type, e.memory_id) for e in events} == {
        ("memory_promoted", "m-tea"),
        ("memory_promoted", "m-trip"),  # an episode can be promoted too
    }
    promoted = next(e for e in events if isinstance(e, MemoryPromoted) and e.memory_id == "m-tea")
    assert promoted.event_id == derived_id("m-tea", "promote")
    # Published sealed with alice's key: the reason opens with it.
    assert promoted.encryption is not None and promoted.reason == ""
    opened = open_event(promoted, keys)
    assert opened is not None and opened.reason == "retrieved 3 times" and opened.user_id == "alice"
    assert {topic for topic, _ in recorder.records()} == {"memstream.memories"}
    # In flight: not published again before the projection shows the change...
    assert await keeper.scan() == []
    projection.apply([(e, learned(20 + i)) for i, e in enumerate(events)])
    assert get(projection, "m-tea").tier == "long_term"
    # ...and not after it either: the memory is long-term now.
    assert await keeper.scan() == [] and keeper.in_flight == {}


async def test_the_keeper_expires_non_episodes_after_the_ttl(
    projection: MemoryProjection, keys: FileKeyStore
) -> None:
    seed(projection)
    clock = Clock(T0 + TTL - timedelta(seconds=1))
    keeper, _ = keeper_for(projection, clock, keys)
    assert await keeper.scan() == []
    clock.now = T0 + TTL + timedelta(seconds=1)
    events = tier_changes(await keeper.scan())
    assert sorted((e.user_id, e.memory_id) for e in events) == [
        ("alice", "m-tea"),
        ("bob", "b-jazz"),
    ]
    assert all(isinstance(e, MemoryExpired) for e in events)
    assert {e.event_id for e in events} == {
        derived_id("m-tea", "expire"),
        derived_id("b-jazz", "expire"),
    }
    assert await keeper.scan() == []  # in flight
    # Past the retry delay with the projection still unchanged: the same events again.
    clock.now += timedelta(seconds=keeper.retry_after_s + 1)
    assert {e.event_id for e in await keeper.scan()} == {e.event_id for e in events}
    projection.apply([(e, learned(30 + i)) for i, e in enumerate(events)])
    assert get(projection, "m-tea").status == "expired"
    assert get(projection, "m-trip").status == "active"  # the episode stays
    assert await keeper.scan() == []


async def test_a_memory_used_enough_is_promoted_not_expired(
    projection: MemoryProjection, keys: FileKeyStore
) -> None:
    seed(projection)
    projection.apply_accesses([retrieval(i, "m-tea") for i in range(3)])
    keeper, _ = keeper_for(projection, Clock(T0 + 2 * TTL), keys)
    events = tier_changes(await keeper.scan())
    assert [(e.type, e.memory_id) for e in events if e.user_id == "alice"] == [
        ("memory_promoted", "m-tea")
    ]


async def test_the_keeper_seals_before_publishing_and_drops_an_erased_users_events(
    projection: MemoryProjection, keys: FileKeyStore
) -> None:
    seed(projection)
    clock = Clock(T0 + TTL + timedelta(seconds=1))
    keeper, recorder = keeper_for(projection, clock, keys)
    keys.destroy("alice")  # erased; the projector has not dropped her rows yet
    events = await keeper.scan()
    # Only bob's expiry reaches ``publish``, sealed with his key; alice's is dropped, and
    # no key is created for her.
    assert [(e.user_id, e.memory_id) for _, e in recorder.records()] == [("bob", "b-jazz")]
    ((_, sent),) = recorder.records()
    assert isinstance(sent, MemoryExpired) and sent.encryption is not None
    assert sent.encryption.key_id == keys.key_for("bob", create=False)[0]  # type: ignore[index]
    assert "ttl" not in sent.model_dump_json()
    assert events == [sent]
    opened = open_event(sent, keys)
    assert opened is not None and opened.reason.startswith("ttl: short-term for ")
    assert keys.key_for("alice", create=False) is None
    # Not decided again every scan while the erasure is applied.
    assert "m-tea" in keeper.in_flight and await keeper.scan() == []


def test_a_clock_before_the_year_1000_finds_nothing_due_instead_of_failing(
    projection: MemoryProjection,
) -> None:
    seed(projection)
    early = datetime(999, 12, 31, tzinfo=UTC)
    assert projection.short_term_due(early + TTL, TTL) == []
