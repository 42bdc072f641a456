"""The session store and close timer, with an in-memory stand-in for the Faust table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from chat import conversation

from memstream.models.codec import EventLimits, encode_event
from memstream.models.events.chat import SessionClosed
from memstream.models.session import ClosedSession, SessionState, WindowLimits, session_key
from memstream.streams.agents.session_table import IdleTracker, SessionStore, fold_batch

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


class FakeTable:
    """The parts of a Faust table the store uses: local data and a changelog producer."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.sent: list[tuple[str, bytes | None, int]] = []
        self.changelog_topic = SimpleNamespace(
            prepare_key=lambda key, _: (key.encode(), None), get_topic_name=lambda: "changelog"
        )

        async def send(topic: str, key: bytes, value: bytes | None, partition: int, *_: Any) -> None:
            self.sent.append((key.decode(), value, partition))

        self.app = SimpleNamespace(producer=SimpleNamespace(send=send))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def records(events: list[Any], partition: int = 2) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(value=encode_event(e), key=e.user_id.encode(), offset=i, partition=partition, topic="chat")
        for i, e in enumerate(events)
    ]


async def fold_and_write(store: SessionStore, events: list[Any]) -> Any:
    batch = fold_batch(store, records(events), WindowLimits(), EventLimits())
    for key, (value, partition) in batch.writes.items():
        await store.write(key, value, partition)
    return batch


async def test_each_session_is_written_once_per_batch_to_its_events_partition() -> None:
    table = FakeTable()
    store = SessionStore(table, cache_size=10)
    events = conversation("ann", "a", [("user", f"m{i}") for i in range(5)], close=False)
    events += conversation("bob", "b", [("user", f"m{i}") for i in range(3)], close=False)
    await fold_and_write(store, events)
    assert sorted(key for key, _, _ in table.sent) == sorted([session_key("ann", "a"), session_key("bob", "b")])
    assert {partition for _, _, partition in table.sent} == {2}
    state = SessionStore(table, cache_size=0).get(session_key("ann", "a"))  # read back from bytes
    assert isinstance(state, SessionState) and state.message_count == 5


async def test_malformed_records_become_dead_letters_and_the_rest_is_folded() -> None:
    store = SessionStore(FakeTable(), cache_size=10)
    good = records(conversation("ann", "a", [("user", "hello")], close=False))
    bad = SimpleNamespace(value=b"{oops", key=b"ann", offset=99, partition=2, topic="chat")
    batch = fold_batch(store, [good[0], bad, good[1]], WindowLimits(), EventLimits())
    assert [type(fault).__name__ for _, fault in batch.dead] == ["InvalidEvent"]
    assert batch.writes[session_key("ann", "a")][0].message_count == 1  # type: ignore[union-attr]


async def test_idle_sessions_get_one_close_naming_their_last_event() -> None:
    table = FakeTable()
    store = SessionStore(table, cache_size=10)
    clock = Clock()
    tracker = IdleTracker(idle_timeout_s=60, max_age_s=10_000, clock=clock)
    events = conversation("ann", "a", [("user", "hi")], close=False)
    batch = await fold_and_write(store, events)
    for key, (value, _) in batch.writes.items():
        tracker.touch(key, value)
    assert tracker.closes_due(store, NOW) == []
    clock.now += 61
    (close,) = tracker.closes_due(store, NOW)
    assert isinstance(close, SessionClosed)
    assert (close.reason, close.last_event_id, close.occurred_at) == ("idle", events[-1].event_id, NOW)
    assert tracker.closes_due(store, NOW) == []  # requested once, not on every scan


async def test_sessions_recovered_after_a_restart_are_not_closed_early() -> None:
    table = FakeTable()
    await fold_and_write(SessionStore(table, 10), conversation("ann", "a", [("user", "hi")], close=False))
    clock = Clock()
    tracker = IdleTracker(idle_timeout_s=60, max_age_s=10_000, clock=clock)  # a fresh worker
    assert tracker.closes_due(SessionStore(table, 10), NOW) == []
    clock.now += 61
    assert len(tracker.closes_due(SessionStore(table, 10), NOW)) == 1


async def test_sessions_spanning_more_than_the_max_age_are_closed() -> None:
    store = SessionStore(FakeTable(), 10)
    start = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    events = conversation("ann", "a", [("user", "x")] * 3, close=False, start=start)
    events.append(events[-1].model_copy(update={"event_id": "late", "occurred_at": start + timedelta(hours=30)}))
    batch = await fold_and_write(store, events)
    tracker = IdleTracker(idle_timeout_s=3600, max_age_s=24 * 3600, clock=Clock())
    for key, (value, _) in batch.writes.items():
        tracker.touch(key, value)
    (close,) = tracker.closes_due(store, NOW)
    assert close.reason == "max_age"


async def test_closed_markers_expire_after_the_retention_in_processing_time() -> None:
    table = FakeTable()
    store = SessionStore(table, 10)
    # A backfill: the close happened (event time) long ago, the marker was written just now.
    await fold_and_write(store, conversation("ann", "a", [("user", "x")]))
    key = session_key("ann", "a")
    assert isinstance(store.get(key), ClosedSession)
    clock = Clock()
    tracker = IdleTracker(idle_timeout_s=60, max_age_s=10_000, clock=clock)
    tracker.touch(key, store.get(key))  # type: ignore[arg-type]
    clock.now += 3600
    assert tracker.expired_markers(store, retention_s=86_400) == []
    clock.now += 2 * 86_400
    assert tracker.expired_markers(store, retention_s=86_400) == [(key, 2)]


async def test_a_recovered_marker_is_kept_a_full_retention_after_the_restart() -> None:
    store = SessionStore(FakeTable(), 10)
    await fold_and_write(store, conversation("ann", "a", [("user", "x")]))
    clock = Clock()
    tracker = IdleTracker(idle_timeout_s=60, max_age_s=10_000, clock=clock)  # nothing touched
    assert tracker.expired_markers(store, retention_s=100) == []
    clock.now += 99
    assert tracker.expired_markers(store, retention_s=100) == []
    clock.now += 2
    assert tracker.expired_markers(store, retention_s=100) == [(session_key("ann", "a"), 2)]


async def test_a_value_read_during_a_table_recovery_is_not_kept_past_it() -> None:
    """Faust's recovery writes the table directly. A read in the middle of it (the sessions
    page, the idle scan) sees an older value; the agent must then fold onto the recovered
    one, not onto that older value kept in the cache."""
    events = conversation("ann", "a", [("user", f"m{i}") for i in range(6)], close=False)
    key = session_key("ann", "a")
    written = FakeTable()
    await fold_and_write(SessionStore(written, 10), events[:3])
    older = written.data[key]
    await fold_and_write(SessionStore(written, 10), events)
    table = FakeTable()
    store = SessionStore(table, cache_size=10)
    table.data[key] = older  # recovery has applied part of the changelog ...
    seen = store.get(key)
    assert isinstance(seen, SessionState) and seen.message_count == 2
    table.data[key] = bytes(written.data[key])  # ... and then the rest
    state = store.get(key)
    assert isinstance(state, SessionState) and state.message_count == 6
