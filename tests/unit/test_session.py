"""Short-term memory: folding chat events into session state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

import pytest

from memstream.models.events.chat import (
    ChatEvent,
    EntityMentioned,
    MessageAdded,
    ScratchpadUpdated,
    SessionClosed,
    TaskProgress,
    TaskSet,
    ToolCalled,
)
from memstream.models.session import (
    ClosedSession,
    SessionState,
    Transition,
    WindowLimits,
    apply,
    dump_session,
    load_session,
    mentioned_names,
    working_context,
)

T0 = datetime(2026, 11, 2, 23, 50, tzinfo=UTC)


class SessionDriver:
    """Feeds events with increasing offsets and event times, keeping every transition."""

    def __init__(self, limits: WindowLimits | None = None) -> None:
        self.limits = limits or WindowLimits()
        self.state: SessionState | ClosedSession | None = None
        self.offsets = count()
        self.ids = count()
        self.transitions: list[Transition] = []

    def common(self, minutes: float) -> dict:
        return {
            "event_id": f"e{next(self.ids)}",
            "user_id": "alice",
            "session_id": "s1",
            "occurred_at": T0 + timedelta(minutes=minutes),
        }

    def feed(self, event: ChatEvent, offset: int | None = None) -> Transition:
        transition = apply(self.state, event, next(self.offsets) if offset is None else offset, self.limits)
        self.state = transition.state
        self.transitions.append(transition)
        return transition

    def say(self, role: str, text: str, minutes: float = 0) -> Transition:
        return self.feed(MessageAdded(role=role, content=text, **self.common(minutes)))

    @property
    def consolidated(self) -> list[list[str]]:
        return [[m.content for m in c.messages] for t in self.transitions for c in t.consolidations]


def test_messages_and_turns_are_counted() -> None:
    driver = SessionDriver()
    driver.say("user", "hello there")
    driver.say("assistant", "hi, how can I help?")
    driver.say("user", "book a table")
    assert driver.state is not None
    assert driver.state.turn_count == 2
    assert driver.state.message_count == 3
    assert [m.content for m in driver.state.messages][-1] == "book a table"


def test_window_is_trimmed_oldest_first_and_evicted_messages_go_to_consolidation() -> None:
    driver = SessionDriver(WindowLimits(max_messages=8))
    for i in range(20):
        driver.say("user", f"message {i}", minutes=i)
    state = driver.state
    assert state is not None and len(state.messages) <= 8
    kept = [m.content for m in state.messages]
    evicted = [content for chunk in driver.consolidated for content in chunk]
    # Nothing is lost: every message is either still in the window or was consolidated.
    assert evicted + kept == [f"message {i}" for i in range(20)]
    # Eviction happens in chunks, not one request per message.
    assert len(driver.consolidated) < len(evicted)
    assert state.turn_count == 20  # all user turns, not only those still in the window


def test_token_budget_trims_but_never_below_the_last_two_messages() -> None:
    driver = SessionDriver(WindowLimits(max_tokens=10))
    driver.say("user", " ".join(["word"] * 50))
    driver.say("assistant", " ".join(["word"] * 50))
    driver.say("user", " ".join(["word"] * 50))
    assert driver.state is not None
    assert len(driver.state.messages) == 2
    assert driver.state.window_tokens == sum(m.tokens for m in driver.state.messages)


def test_token_count_is_kept_incrementally_and_matches_the_window() -> None:
    calls: list[str] = []

    def counting(text: str) -> int:
        calls.append(text)
        return len(text.split())

    driver = SessionDriver(WindowLimits(max_messages=5, count_tokens=counting))
    for i in range(30):
        driver.say("user", f"a b c {i}")
    assert len(calls) == 30  # each message is tokenised once, never the whole window again
    assert driver.state is not None
    assert driver.state.window_tokens == sum(m.tokens for m in driver.state.messages)


def test_close_hands_the_rest_of_the_window_to_consolidation_and_ends_the_state() -> None:
    driver = SessionDriver()
    driver.say("user", "I live in Porto")
    driver.say("assistant", "Nice city!")
    transition = driver.feed(SessionClosed(reason="explicit", **driver.common(5)))
    assert isinstance(transition.state, ClosedSession)
    assert transition.state.reason == "explicit"
    (request,) = transition.consolidations
    assert request.reason == "session_closed"
    assert [m.content for m in request.messages] == ["I live in Porto", "Nice city!"]
    assert request.session_started_at == T0


def test_closing_twice_is_reported_not_raised() -> None:
    driver = SessionDriver()
    driver.say("user", "bye")
    driver.feed(SessionClosed(**driver.common(1)))
    closed = driver.state
    again = driver.feed(SessionClosed(**driver.common(2)))
    assert again.state == closed and again.consolidations == ()
    assert again.skipped and "already closed" in again.skipped


def test_a_close_for_a_session_never_opened_is_reported() -> None:
    driver = SessionDriver()
    transition = driver.feed(SessionClosed(**driver.common(0)))
    assert transition.state is None and transition.skipped and "not open" in transition.skipped


def test_a_late_message_after_close_reopens_the_session_and_is_reported() -> None:
    driver = SessionDriver()
    driver.say("user", "first visit")
    driver.feed(SessionClosed(**driver.common(1)))
    late = driver.say("user", "one more thing", minutes=2)
    assert late.note and "reopened" in late.note
    assert isinstance(late.state, SessionState)
    assert [m.content for m in late.state.messages] == ["one more thing"]
    closing = driver.feed(SessionClosed(**driver.common(3)))
    assert [m.content for m in closing.consolidations[0].messages] == ["one more thing"]


def test_a_timer_close_is_ignored_when_the_session_moved_on() -> None:
    driver = SessionDriver()
    driver.say("user", "hello")
    seen = driver.state.last_event_id  # type: ignore[union-attr]
    driver.say("user", "still here")
    stale = driver.feed(SessionClosed(reason="idle", last_event_id=seen, **driver.common(40)))
    assert stale.skipped and "stale idle close" in stale.skipped
    assert isinstance(driver.state, SessionState)
    current = driver.state.last_event_id
    fresh = driver.feed(SessionClosed(reason="idle", last_event_id=current, **driver.common(80)))
    assert isinstance(fresh.state, ClosedSession) and fresh.state.reason == "idle"


def test_redelivery_after_close_is_skipped_silently() -> None:
    driver = SessionDriver()
    message = MessageAdded(role="user", content="x", **driver.common(0))
    driver.feed(message, offset=5)
    driver.feed(SessionClosed(**driver.common(1)), offset=6)
    again = driver.feed(message, offset=5)
    assert again.skipped and "re-delivered" in again.skipped and again.note is None


def test_table_values_round_trip_through_bytes() -> None:
    driver = SessionDriver()
    driver.say("user", "I fly to Lisbon with Clara")
    assert load_session(dump_session(driver.state)) == driver.state  # type: ignore[arg-type]
    driver.feed(SessionClosed(**driver.common(1)))
    assert load_session(dump_session(driver.state)) == driver.state  # type: ignore[arg-type]


def test_names_in_messages_become_mentioned_entities() -> None:
    driver = SessionDriver()
    driver.say("user", "Hi! My sister Clara and I fly from Lisbon to New York in May.")
    driver.say("assistant", "Lisbon to New York is a long flight.")
    assert driver.state.entities == ("Clara", "Lisbon", "New York")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("I work at Acme Robotics in Porto.", ["Acme Robotics", "Porto"]),
        ("Thanks! That helps.", []),
        ("Lisbon is lovely. Porto too.", []),  # one word opening a sentence: not trusted
        ("We met Ana on Monday in March.", ["Ana"]),
    ],
)
def test_light_entity_detector(text: str, names: list[str]) -> None:
    assert mentioned_names(text) == names


def test_working_context_fits_the_budget_and_keeps_the_newest_messages() -> None:
    driver = SessionDriver()
    driver.feed(TaskSet(task="plan Lisbon trip", **driver.common(0)))
    for i in range(10):
        driver.say("user" if i % 2 == 0 else "assistant", f"message number {i} " + "word " * 10)
    state = driver.state
    assert isinstance(state, SessionState)
    per_message = state.messages[-1].tokens
    context = working_context(state, token_budget=per_message * 3 + 1)
    assert [m.content.split()[2] for m in context.messages] == ["7", "8", "9"]
    assert context.tokens <= per_message * 3 + 1
    assert context.omitted_messages == 7
    assert context.task == "plan Lisbon trip"
    text = context.render()
    assert "Task: plan Lisbon trip" in text and "7 earlier message(s) left out" in text
    assert text.index("message number 7") < text.index("message number 9")


def test_redelivered_events_change_nothing() -> None:
    driver = SessionDriver()
    first = MessageAdded(role="user", content="once", **driver.common(0))
    driver.feed(first, offset=10)
    before = driver.state
    assert driver.feed(first, offset=10).skipped  # same offset: re-delivery after a crash
    assert driver.feed(first, offset=11).skipped  # client retry: same event id, new offset
    assert driver.state == before


def test_consolidation_ids_are_deterministic() -> None:
    def run() -> str:
        driver = SessionDriver()
        driver.say("user", "x")
        return driver.feed(SessionClosed(**driver.common(1))).consolidations[0].event_id

    assert run() == run()


def test_task_tools_entities_and_scratchpad_are_kept() -> None:
    driver = SessionDriver(WindowLimits(max_tool_calls=2, max_entities=2))
    driver.feed(TaskSet(task="plan Lisbon trip", **driver.common(0)))
    driver.feed(TaskProgress(progress="flights found", percent=40, **driver.common(1)))
    for i in range(3):
        driver.feed(ToolCalled(name=f"tool{i}", arguments={"i": i}, result="r" * 500, **driver.common(2)))
    for name in ("Lisbon", "Clara", "Porto", "lisbon"):
        driver.feed(EntityMentioned(name=name, **driver.common(3)))
    driver.feed(ScratchpadUpdated(content="budget 2000", **driver.common(4)))
    state = driver.state
    assert state is not None
    assert (state.task, state.task_progress, state.progress_percent) == ("plan Lisbon trip", "flights found", 40)
    assert [c.name for c in state.tool_calls] == ["tool1", "tool2"]
    assert len(state.tool_calls[0].result_summary) <= 200
    assert state.entities == ("Porto", "lisbon")
    assert state.scratchpad == "budget 2000"


def test_duration_is_correct_across_days() -> None:
    driver = SessionDriver()
    driver.say("user", "late night", minutes=0)
    driver.say("user", "next day", minutes=60 * 24 + 30)  # crosses midnight and a whole day
    assert driver.state is not None
    assert driver.state.duration_seconds == pytest.approx((24 * 60 + 30) * 60)
