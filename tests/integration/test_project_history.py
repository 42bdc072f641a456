"""A project's history through the real broker and worker: a task set in project atlas in
one session and picked up in another becomes the user's task memories (through the session
agent, consolidation, the offline extractor and the decider), and the history and a turn's
context name both sessions, the latest open item and what was decided."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from harness import wait_for

from memstream.models.events.chat import (
    MessageAdded,
    SessionClosed,
    SessionStarted,
    TaskProgress,
    TaskSet,
)
from memstream.models.events.envelope import Event
from memstream.models.settings import Settings
from memstream.streams.client import MemoryClient
from memstream.streams.service.chat_events import publish_events


def session(user: str, name: str, start: datetime, said: str, progress: str,
            percent: float) -> list[Event]:
    """One session of ``user``: the task set in atlas, a turn, progress, and a close."""
    common = {"user_id": user, "session_id": name}

    def at(minutes: int) -> datetime:
        return start + timedelta(minutes=minutes)

    return [
        SessionStarted(event_id=f"{user}/{name}/start", occurred_at=at(0), **common),
        TaskSet(event_id=f"{user}/{name}/task", task="Migrate billing to Postgres",
                project="atlas", occurred_at=at(1), **common),
        MessageAdded(event_id=f"{user}/{name}/m1", role="user", content=said,
                     occurred_at=at(2), **common),
        MessageAdded(event_id=f"{user}/{name}/m2", role="assistant", content="Noted.",
                     occurred_at=at(3), **common),
        TaskProgress(event_id=f"{user}/{name}/progress", progress=progress, percent=percent,
                     occurred_at=at(4), **common),
        SessionClosed(event_id=f"{user}/{name}/close", occurred_at=at(5), **common),
    ]


def test_a_task_across_two_sessions_is_the_projects_history_and_in_its_context(
    worker_settings: Settings,
) -> None:
    first = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    second = datetime(2026, 5, 6, 9, 0, tzinfo=UTC)
    events = [
        *session("lee", "s1", first, "For atlas we decided to keep Postgres as the database.",
                 "schema copied", 40),
        *session("lee", "s2", second, "The data copy for the billing tables finished today.",
                 "data copied, cutover open", 80),
    ]
    asyncio.run(publish_events(worker_settings, events))
    with MemoryClient(worker_settings) as memory:

        def both_sessions() -> bool:
            found = memory.projects(user_id="lee", project="atlas")["projects"]
            return bool(found) and found[0]["sessions"] == ["s1", "s2"] and len(
                found[0]["tasks"]) == 3

        wait_for(both_sessions, "the task memories of both sessions", timeout_s=90)
        (atlas,) = memory.projects(user_id="lee")["projects"]
        assert [(t["session_id"], t["status"], t["progress"]) for t in atlas["tasks"]] == [
            ("s1", "started", ""),  # set again in s2: the same memory, reinforced
            ("s1", "open", "schema copied"),
            ("s2", "open", "data copied, cutover open"),
        ]
        [open_item] = atlas["open"]
        assert (open_item["task"], open_item["percent"]) == ("Migrate billing to Postgres", 80.0)
        assert [(d["type"], d["session_id"], d["statement"]) for d in atlas["decided"]] == [
            ("episode", "s1", "For atlas we decided to keep Postgres as the database.")
        ]
        assert memory.projects(user_id="someone-else")["projects"] == []

        asked = memory.context("What is left to do?", user_id="lee", project="atlas")
        assert "## Project atlas\n- Open: Migrate billing to Postgres: data copied, cutover open" in (
            asked["context"])
        named = memory.context("Where are we with atlas?", user_id="lee")
        assert "## Project atlas" in named["context"]
        # A later turn of session s2 (its task memories are atlas's), atlas unnamed.
        later = memory.context("What is next?", user_id="lee", session_id="s2")
        assert "## Project atlas" in later["context"]
        assert "## Project" not in memory.context("What is next?", user_id="lee")["context"]
