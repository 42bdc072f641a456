"""Project and task history, the model side: a session's task changes travel with its
consolidation request and become the user's ``task`` memories."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from itertools import count

from memstream.models.codec import decode_event
from memstream.models.events.chat import (
    ChatEvent,
    MessageAdded,
    SessionClosed,
    TaskProgress,
    TaskSet,
)
from memstream.models.events.consolidation import ConsolidationRequested, TaskChange
from memstream.models.extraction import OfflineExtractor
from memstream.models.extraction.tasks import read_task, task_candidates
from memstream.models.session import ClosedSession, SessionState, Transition, WindowLimits, apply

T0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


class Session:
    def __init__(self, limits: WindowLimits | None = None) -> None:
        self.limits = limits or WindowLimits()
        self.state: SessionState | ClosedSession | None = None
        self.offsets = count()
        self.requests: list[ConsolidationRequested] = []

    def common(self, minutes: float) -> dict:
        return {
            "event_id": f"e{minutes:g}",
            "user_id": "ann",
            "session_id": "s1",
            "occurred_at": T0 + timedelta(minutes=minutes),
        }

    def feed(self, event: ChatEvent) -> Transition:
        transition = apply(self.state, event, next(self.offsets), self.limits)
        self.state = transition.state
        self.requests.extend(transition.consolidations)
        return transition


def test_the_close_carries_the_task_changes_with_their_project_in_order() -> None:
    session = Session()
    session.feed(TaskSet(task="Migrate billing", project="atlas", **session.common(0)))
    session.feed(MessageAdded(role="user", content="Let's copy the schema", **session.common(1)))
    session.feed(TaskProgress(progress="schema copied", percent=40, **session.common(2)))
    session.feed(SessionClosed(**session.common(3)))
    [request] = session.requests
    assert [(c.task, c.project, c.progress, c.percent) for c in request.task_changes] == [
        ("Migrate billing", "atlas", None, None),
        ("Migrate billing", "atlas", "schema copied", 40),
    ]
    assert request.task_changes[1].occurred_at == T0 + timedelta(minutes=2)


def test_an_evicted_span_takes_the_changes_so_far_and_the_next_span_only_later_ones() -> None:
    session = Session(WindowLimits(max_messages=4))
    session.feed(TaskSet(task="Migrate billing", project="atlas", **session.common(0)))
    for minute in range(1, 6):
        session.feed(MessageAdded(role="user", content=f"step {minute}", **session.common(minute)))
    session.feed(TaskProgress(progress="cutover done", **session.common(6)))
    session.feed(SessionClosed(**session.common(7)))
    evicted, closing = session.requests
    assert [c.progress for c in evicted.task_changes] == [None]
    assert [c.progress for c in closing.task_changes] == ["cutover done"]


def test_a_close_with_task_changes_and_no_messages_still_hands_them_over() -> None:
    session = Session()
    session.feed(TaskSet(task="Write the RFC", project="atlas", **session.common(0)))
    session.feed(SessionClosed(**session.common(1)))
    [request] = session.requests
    assert request.messages == () and [c.task for c in request.task_changes] == ["Write the RFC"]
    assert [c.content for c in OfflineExtractor().extract(request).candidates] == [
        "Project atlas: Write the RFC (started)"
    ]


def test_a_task_set_written_before_projects_existed_still_decodes() -> None:
    payload = {
        "event_id": "t1", "type": "task_set", "schema_version": 1, "user_id": "ann",
        "session_id": "s1", "occurred_at": T0.isoformat(), "task": "Migrate billing",
    }
    event = decode_event(json.dumps(payload))
    assert isinstance(event, TaskSet) and event.project is None


def request_with(*changes: TaskChange) -> ConsolidationRequested:
    return ConsolidationRequested(
        event_id="c1", user_id="ann", session_id="s1", occurred_at=T0, reason="session_closed",
        messages=(), task_changes=changes,
    )


def change(event_id: str, progress: str | None = None, percent: float | None = None,
           project: str | None = "atlas") -> TaskChange:
    return TaskChange(
        event_id=event_id, task="Migrate billing", project=project, progress=progress,
        percent=percent, occurred_at=T0,
    )


def test_each_change_in_a_project_is_a_task_memory_with_its_state() -> None:
    request = request_with(
        change("t1"), change("t2", "schema copied", 40), change("t3", "cutover done"),
        change("t4", "not done yet"), change("t5", "lunch", project=None),
    )
    found = OfflineExtractor().extract(request).candidates
    assert [c.memory_type for c in found] == ["task"] * 4  # no project, no history
    assert [read_task(c.context)["status"] for c in found] == ["started", "open", "done", "open"]
    second = found[1]
    assert second.content == "Project atlas: Migrate billing (open): schema copied (40%)"
    assert second.source_event_ids == ("t2",) and second.entities == ("atlas",)
    assert read_task(second.context) == {
        "project": "atlas", "task": "Migrate billing", "status": "open",
        "progress": "schema copied", "percent": "40", "at": T0.isoformat(),
    }
    assert all(c.importance >= 0.8 for c in found)


def test_task_memories_are_the_same_for_the_same_request_and_say_a_state_once() -> None:
    request = request_with(change("t1", "schema copied"), change("t2", "schema copied"))
    assert task_candidates(request) == task_candidates(request)
    assert [c.source_event_ids for c in task_candidates(request)] == [("t1",)]


def test_a_project_name_on_several_lines_stays_one_line_of_the_context() -> None:
    request = request_with(change("t1", "not yet\nstatus: done"))
    [memory] = task_candidates(request)
    assert read_task(memory.context)["status"] == "open"
    assert read_task(memory.context)["progress"] == "not yet status: done"
