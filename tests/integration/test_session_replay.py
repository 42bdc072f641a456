"""The sessions projection rebuilt from the chat topic equals what the worker holds."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
from aiokafka import AIOKafkaProducer
from chat import conversation
from harness import wait_for

from memstream.models.codec import encode_event
from memstream.models.events.chat import (
    EntityMentioned,
    MessageAdded,
    ScratchpadUpdated,
    TaskProgress,
    TaskSet,
    ToolCalled,
)
from memstream.models.events.envelope import Event
from memstream.models.session import (
    ClosedSession,
    SessionState,
    SessionValue,
    WindowLimits,
    apply,
    session_key,
)
from memstream.models.settings import Settings
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics
from memstream.streams.operations.rebuild_sessions import (
    SNAPSHOT_FILE,
    fold_chat_topic,
    live_sessions,
    rebuild_sessions,
    sessions_fingerprint,
    write_sessions_snapshot,
)
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess

#: Two days ago: closed-session markers (kept ``closed_retention_s`` after their event-time
#: close) are then old enough for the worker's timer to drop them, as it does in production.
START = datetime.now(UTC).replace(microsecond=0) - timedelta(days=2)


def turns(n: int, tag: str) -> list[tuple[str, str]]:
    return [
        ("user" if i % 2 == 0 else "assistant", f"{tag} message {i} about Lisbon") for i in range(n)
    ]


def working_events(user: str, session: str, at: datetime) -> list[Event]:
    """A task with progress, a tool call, an entity and a scratchpad note."""
    common: dict[str, Any] = {"user_id": user, "session_id": session, "agent_id": "planner"}
    return [
        TaskSet(
            event_id=f"{user}/{session}/task", occurred_at=at, task="plan the Lisbon trip", **common
        ),
        ToolCalled(
            event_id=f"{user}/{session}/tool",
            occurred_at=at + timedelta(seconds=1),
            name="search_flights",
            arguments={"to": "LIS", "passengers": 2, "flexible": True},
            result={"found": 3, "cheapest_eur": 129.5},
            **common,
        ),
        TaskProgress(
            event_id=f"{user}/{session}/progress",
            occurred_at=at + timedelta(seconds=2),
            progress="flights found",
            percent=40.5,
            **common,
        ),
        EntityMentioned(
            event_id=f"{user}/{session}/entity",
            occurred_at=at + timedelta(seconds=3),
            name="Tagus River",
            **common,
        ),
        ScratchpadUpdated(
            event_id=f"{user}/{session}/pad",
            occurred_at=at + timedelta(seconds=4),
            content="budget 2000",
            **common,
        ),
    ]


def workload() -> tuple[list[Event], MessageAdded]:
    """Several users and sessions (evicting windows, a closed session, a session reopened by
    a late message, a re-sent event, a second close) and the last message, sent on its own."""
    trip = conversation("ann", "trip", turns(14, "trip"), start=START, close=False)
    trip[8:8] = working_events("ann", "trip", START + timedelta(minutes=7, seconds=30))
    done = conversation("ann", "done", turns(4, "done"), start=START)
    work = conversation("bob", "work", turns(9, "work"), start=START, close=False)
    short = conversation("cy", "a", turns(3, "a"), start=START, close=False)
    other = conversation("cy", "b", turns(2, "b"), start=START + timedelta(hours=1), close=False)
    late = conversation("dee", "late", turns(3, "late"), start=START)
    late += conversation(
        "dee", "late", [("user", "one more thing about Porto")], start=START, close=False, first=9
    )[1:]
    second_close = done[-1].model_copy(update={"event_id": "ann/done/close-again"})
    resent = work[-1]  # a client retry: same event id at a later offset
    events = trip + done + work + short + other + late + [second_close, resent]
    last = MessageAdded(
        event_id="bob/work/last",
        user_id="bob",
        session_id="work",
        role="user",
        occurred_at=START + timedelta(minutes=30),
        content="and book the hotel in Alfama",
    )
    return events, last


async def publish_invalid(settings: Settings) -> None:
    """Three events the worker dead-letters: not JSON, under another user's key, too large."""
    wrong_key = conversation(
        "bob", "work", [("user", "sent under ann's key")], start=START, first=50
    )[1]
    too_large = conversation(
        "cy", "a", [("user", "x " * settings.max_event_bytes)], start=START, first=50
    )[1]
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    await producer.start()
    try:
        chat = Topics.from_settings(settings).chat
        for key, value in (
            (b"ann", b"not json"),
            (b"ann", encode_event(wrong_key)),
            (b"cy", encode_event(too_large)),
        ):
            await producer.send_and_wait(chat, key=key, value=value)
    finally:
        await producer.stop()


def differences(live: dict[str, SessionValue], folded: dict[str, SessionValue]) -> list[str]:
    """Keys whose open state differs, to explain a fingerprint mismatch."""

    def open_states(values: dict[str, SessionValue]) -> dict[str, Any]:
        return {
            k: v.model_dump(mode="json") for k, v in values.items() if isinstance(v, SessionState)
        }

    a, b = open_states(live), open_states(folded)
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def test_replayed_sessions_equal_the_live_table_and_the_snapshot_holds_them(
    settings_factory, tmp_path: Path
) -> None:
    settings = settings_factory(
        web_port=free_port(),
        roles="sessions",
        max_messages=6,
        max_event_bytes=2048,
        closed_retention_s=1,
        session_scan_interval_s=0.5,
    )
    events, last = workload()
    asyncio.run(publish_events(settings, events))
    asyncio.run(publish_invalid(settings))
    # Sent last, on its own: later than everything else on the broker's clock.
    asyncio.run(publish_events(settings, [last]))

    calls: list[tuple[int, int]] = []
    folded = asyncio.run(
        fold_chat_topic(settings, progress=lambda done, total: calls.append((done, total)))
    )
    expected = sessions_fingerprint(folded)
    open_keys = {k for k, v in folded.items() if isinstance(v, SessionState)}
    assert open_keys == {
        session_key(*pair)
        for pair in (("ann", "trip"), ("bob", "work"), ("cy", "a"), ("cy", "b"), ("dee", "late"))
    }
    assert isinstance(folded[session_key("ann", "done")], ClosedSession)
    chat = asyncio.run(read_topic(settings, Topics.from_settings(settings).chat))
    assert calls[-1] == (len(chat), len(chat))
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)

    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        live: dict[str, SessionValue] = {}

        def live_equals_fold() -> bool:
            live.clear()
            live.update(asyncio.run(live_sessions(settings)))
            return sessions_fingerprint(live) == expected

        try:
            wait_for(live_equals_fold, "the worker's table to equal the fold of the chat topic")
        except AssertionError:
            raise AssertionError(f"sessions differ: {differences(live, folded)}") from None
        # The timer drops the closed session's marker (a tombstone in the changelog).
        wait_for(
            lambda: session_key("ann", "done") not in asyncio.run(live_sessions(settings)),
            "the closed-session marker to be dropped",
        )
    # Read from the changelog alone: no worker runs now.
    assert sessions_fingerprint(asyncio.run(live_sessions(settings))) == expected
    letters = asyncio.run(read_topic(settings, Topics.from_settings(settings).deadletters))
    assert len(letters) == 3  # the worker rejected exactly what the fold skipped

    # The check can fail: one event less, or other window bounds, is another view.
    last_stamp = datetime.fromtimestamp(chat_record_of(chat, "bob/work/last").timestamp / 1000, UTC)
    before_last = asyncio.run(
        fold_chat_topic(settings, until=last_stamp - timedelta(milliseconds=1))
    )
    shorter = sessions_fingerprint(before_last)
    assert shorter.rows == expected.rows and shorter != expected
    bob_before, bob_after = (
        before_last[session_key("bob", "work")],
        folded[session_key("bob", "work")],
    )
    assert isinstance(bob_before, SessionState) and isinstance(bob_after, SessionState)
    assert bob_before.turn_count == bob_after.turn_count - 1
    assert (
        sessions_fingerprint(asyncio.run(fold_chat_topic(settings, until=last_stamp))) == expected
    )
    wider = asyncio.run(fold_chat_topic(settings.model_copy(update={"max_messages": 50})))
    assert sessions_fingerprint(wider) != expected

    # The snapshot: one row per open session, and its fingerprint is the live one.
    target = tmp_path / "sessions-shadow"
    assert asyncio.run(rebuild_sessions(settings, target)) == sessions_fingerprint(live)
    rows = duckdb.sql(
        "select user_id, session_id, agent_id, turn_count, message_count, window_messages, window_tokens,"
        " evicted_chunks, task, task_progress, progress_percent, entities, tool_calls, last_offset,"
        " partition, state_json"
        f" from read_parquet('{target / SNAPSHOT_FILE}') order by user_id, session_id"
    ).fetchall()
    states = sorted(
        (v for v in folded.values() if isinstance(v, SessionState)),
        key=lambda s: (s.user_id, s.session_id),
    )
    assert [(r[0], r[1], r[3], r[4], r[5], r[6], r[13], r[14]) for r in rows] == [
        (
            s.user_id,
            s.session_id,
            s.turn_count,
            s.message_count,
            len(s.messages),
            s.window_tokens,
            s.last_offset,
            s.partition,
        )
        for s in states
    ]
    assert [SessionState.model_validate_json(r[15]) for r in rows] == states
    trip = next(r for r in rows if r[:2] == ("ann", "trip"))
    assert trip[2] == "planner" and trip[7] > 0  # its window evicted
    assert trip[8:11] == ("plan the Lisbon trip", "flights found", 40.5)
    assert "Tagus River" in trip[11] and trip[12] == 1
    assert list(target.iterdir()) == [target / SNAPSHOT_FILE]


def chat_record_of(records: list[Any], event_id: str) -> Any:
    return next(r for r in records if f'"event_id":"{event_id}"'.encode() in r.value)


def test_no_topic_yet_means_no_sessions(settings_factory, tmp_path: Path) -> None:
    settings = settings_factory()
    assert asyncio.run(live_sessions(settings)) == {}
    assert asyncio.run(fold_chat_topic(settings)) == {}
    assert asyncio.run(rebuild_sessions(settings, tmp_path / "empty")) == sessions_fingerprint({})
    assert duckdb.sql(
        f"select count(*) from read_parquet('{tmp_path / 'empty' / SNAPSHOT_FILE}')"
    ).fetchall() == [(0,)]


def test_snapshot_replaces_the_previous_file_whole(tmp_path: Path) -> None:
    limits = WindowLimits(max_messages=4)
    values: dict[str, SessionValue] = {}
    for offset, event in enumerate(
        conversation("ann", "s", turns(7, "s"), start=START, close=False)
    ):
        key = session_key(event.user_id, event.session_id)
        transition = apply(values.get(key), event, offset, limits)
        assert transition.state is not None
        values[key] = transition.state
    assert write_sessions_snapshot(values, tmp_path) == 1
    assert write_sessions_snapshot({}, tmp_path) == 0
    path = tmp_path / SNAPSHOT_FILE
    assert duckdb.sql(f"select count(*) from read_parquet('{path}')").fetchall() == [(0,)]
    assert write_sessions_snapshot(values, tmp_path) == 1
    (state,) = values.values()
    assert isinstance(state, SessionState)
    (row,) = duckdb.sql(
        f"select turn_count, window_messages, started_at, last_event_at from read_parquet('{path}')"
    ).fetchall()
    assert row == (4, len(state.messages), state.started_at, state.last_event_at)
    assert sorted(p.name for p in tmp_path.iterdir()) == [SNAPSHOT_FILE]
