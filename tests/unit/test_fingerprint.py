"""Fingerprints of a view: order-independent, blind to storage, sensitive to every field."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from memstream.models.events.chat import (
    ChatEvent,
    EntityMentioned,
    MessageAdded,
    SessionClosed,
    TaskProgress,
    TaskSet,
    ToolCalled,
)
from memstream.models.fingerprint import fingerprint, row_digest
from memstream.models.session import (
    SessionState,
    SessionValue,
    WindowLimits,
    apply,
    dump_session,
    load_session,
    session_key,
)
from memstream.models.settings import Settings
from memstream.streams.operations.rebuild_sessions import (
    sessions_changelog_topic,
    sessions_fingerprint,
)

LISBON = timezone(timedelta(hours=1))
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=LISBON)


def session_events(user: str, session: str, messages: int) -> list[ChatEvent]:
    common = {"user_id": user, "session_id": session, "agent_id": "planner"}

    def at(minutes: float) -> datetime:
        return T0 + timedelta(minutes=minutes)

    events: list[ChatEvent] = [
        MessageAdded(
            event_id=f"{user}/{session}/m{i}",
            occurred_at=at(i),
            role="user" if i % 2 == 0 else "assistant",
            content=f"message {i}: we fly to Lisbon with Clara",
            **common,
        )
        for i in range(messages)
    ]
    events[2:2] = [
        TaskSet(
            event_id=f"{user}/{session}/task", occurred_at=at(1.5), task="plan the trip", **common
        ),
        TaskProgress(
            event_id=f"{user}/{session}/p",
            occurred_at=at(1.6),
            progress="half",
            percent=33.3,
            **common,
        ),
        ToolCalled(
            event_id=f"{user}/{session}/t",
            occurred_at=at(1.7),
            name="search",
            arguments={"z": 1, "a": [1.5, "x"], "nested": {"k": None}},
            result={"ok": True},
            **common,
        ),
        EntityMentioned(
            event_id=f"{user}/{session}/e", occurred_at=at(1.8), name="Tagus", **common
        ),
    ]
    return events


SMALL_WINDOW = WindowLimits(max_messages=4)


def fold(events: list[ChatEvent], limits: WindowLimits = SMALL_WINDOW) -> dict[str, SessionValue]:
    values: dict[str, SessionValue] = {}
    for offset, event in enumerate(events):
        key = session_key(event.user_id, event.session_id)
        transition = apply(values.get(key), event, offset, limits, partition=offset % 3)
        if not transition.skipped and transition.state is not None:
            values[key] = transition.state
    return values


def workload() -> dict[str, SessionValue]:
    events = [e for u in ("ann", "bob", "cy") for s in ("a", "b") for e in session_events(u, s, 7)]
    events.append(
        SessionClosed(
            event_id="cy/b/close", user_id="cy", session_id="b", occurred_at=T0 + timedelta(hours=1)
        )
    )
    return fold(events)


def test_the_fingerprint_ignores_the_order_sessions_are_held_in() -> None:
    values = workload()
    items = list(values.items())
    random.Random(7).shuffle(items)
    assert sessions_fingerprint(dict(items)) == sessions_fingerprint(values)
    assert sessions_fingerprint(values).projection == "sessions"
    assert sessions_fingerprint(values).rows == 5  # cy/b is closed


def test_the_changelog_round_trip_keeps_the_fingerprint() -> None:
    values = workload()
    stored = {key: load_session(dump_session(value)) for key, value in values.items()}
    assert sessions_fingerprint(stored) == sessions_fingerprint(values)


def test_closed_session_markers_are_not_part_of_the_view() -> None:
    values = workload()
    without_markers = {k: v for k, v in values.items() if isinstance(v, SessionState)}
    assert len(without_markers) < len(values)
    assert sessions_fingerprint(without_markers) == sessions_fingerprint(values)


def test_any_difference_in_an_open_session_changes_the_fingerprint() -> None:
    values = workload()
    reference = sessions_fingerprint(values)
    key = session_key("ann", "a")
    state = values[key]
    assert isinstance(state, SessionState)
    changed = [
        state.model_copy(update={"turn_count": state.turn_count + 1}),
        state.model_copy(update={"last_offset": state.last_offset + 1}),
        state.model_copy(update={"partition": state.partition + 1}),
        state.model_copy(update={"progress_percent": 33.4}),
        state.model_copy(update={"messages": state.messages[1:]}),
        state.model_copy(update={"entities": tuple(reversed(state.entities))}),
    ]
    for other in changed:
        assert sessions_fingerprint({**values, key: other}) != reference
    # The same state under another key is another view.
    moved = {k: v for k, v in values.items() if k != key} | {session_key("ann", "z"): state}
    assert sessions_fingerprint(moved) != reference


def test_other_window_bounds_give_another_fingerprint() -> None:
    events = session_events("ann", "a", 9)
    assert sessions_fingerprint(fold(events)) != sessions_fingerprint(
        fold(events, WindowLimits(max_messages=50))
    )


def test_row_fingerprints_ignore_row_order_and_time_zone_and_float_noise() -> None:
    rows = [{"id": i, "at": T0 + timedelta(minutes=i), "score": i / 3} for i in range(10)]
    fields = ["id", "at", "score"]
    shuffled = rows[:]
    random.Random(1).shuffle(shuffled)
    assert fingerprint("m", shuffled, fields) == fingerprint("m", rows, fields)
    same_instant = {"id": 0, "at": T0.astimezone(UTC), "score": 0.1 + 0.2}
    assert row_digest(same_instant, fields) == row_digest({"id": 0, "at": T0, "score": 0.3}, fields)
    assert fingerprint("m", rows[1:], fields) != fingerprint("m", rows, fields)


def test_the_changelog_topic_follows_faust_naming() -> None:
    settings = Settings(topic_prefix="memstream", app_id="worker")
    assert sessions_changelog_topic(settings) == "memstream.worker-sessions-changelog"
