"""A user's project history (``service.memories.projects``), on a real LanceDB table: the
tasks of a project across sessions in the order they happened, what was decided there and
what is open, one user's only, the same after a replay, and in ``context()`` when the turn
is about the project.

Lee set the task "Migrate billing" in project atlas on 4 May (session s1) and copied the
schema; on 6 May (session s2) the data was copied and the cutover is open; a summary of s2
says the team decided to keep Postgres. Lee's other project, garden, has a task that is
done. Kim has a project atlas too, of her own.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fakes import memory_added
from projected import projected, service_over

from memstream.models.events.consolidation import TaskChange
from memstream.models.events.memory import MemoryAdded
from memstream.models.extraction.tasks import task_candidate
from memstream.models.session import estimate_tokens
from memstream.projections.memories import SearchFilters
from memstream.streams.service.app import Service
from memstream.streams.service.projects import history

DAY1 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
DAY3 = datetime(2026, 5, 6, 9, 0, tzinfo=UTC)


def task_added(
    memory_id: str, user: str, session: str, at: datetime, task: str, project: str,
    progress: str | None = None, percent: float | None = None,
) -> MemoryAdded:
    """The task memory the extraction makes of one task change, as the agent adds it."""
    candidate = task_candidate(TaskChange(
        event_id=f"t-{memory_id}", task=task, project=project, progress=progress,
        percent=percent, occurred_at=at,
    ))
    added = memory_added(memory_id, user, candidate.content, memory_type="task",
                         context=candidate.context, occurred_at=at + timedelta(hours=1))
    return added.model_copy(update={"session_id": session, "entities": candidate.entities})


def in_session(added: MemoryAdded, session: str) -> MemoryAdded:
    return added.model_copy(update={"session_id": session})


def the_log() -> list[MemoryAdded]:
    return [
        task_added("a1", "lee", "s1", DAY1, "Migrate billing", "atlas"),
        task_added("a2", "lee", "s1", DAY1 + timedelta(minutes=30), "Migrate billing", "atlas",
                   "schema copied", 40),
        task_added("g1", "lee", "s0", DAY1 - timedelta(days=2), "Plant tomatoes", "garden",
                   "planted, done"),
        task_added("a3", "lee", "s2", DAY3, "Migrate billing", "Atlas",
                   "data copied, cutover open", 80),
        in_session(memory_added("sum-s2", "lee", "User: for atlas we decided to keep Postgres",
                                memory_type="summary", occurred_at=DAY3), "s2"),
        in_session(memory_added("other-s2", "lee", "User likes tea", occurred_at=DAY3), "s2"),
        in_session(memory_added("said-s1", "lee", "We agreed to copy the schema first",
                                memory_type="episode", occurred_at=DAY1), "s1"),
        in_session(memory_added("chat-s1", "lee", "The atlas schema has 40 tables",
                                memory_type="episode", occurred_at=DAY1), "s1"),
        task_added("k1", "kim", "s9", DAY3, "Write the atlas RFC", "atlas"),
    ]


@pytest.fixture
def service(tmp_path: Path) -> Service:
    return service_over(tmp_path, the_log())


async def test_a_projects_tasks_across_sessions_what_was_decided_and_what_is_open(
    service: Service,
) -> None:
    found = await service.memories.projects(user_id="lee")
    assert [p["project"] for p in found["projects"]] == ["atlas", "garden"]  # latest first
    atlas = found["projects"][0]
    assert atlas["sessions"] == ["s1", "s2"]
    assert [(t["session_id"], t["status"], t["progress"], t["current"]) for t in atlas["tasks"]] == [
        ("s1", "started", "", False),
        ("s1", "open", "schema copied", False),
        ("s2", "open", "data copied, cutover open", True),
    ]
    [open_item] = atlas["open"]
    assert (open_item["task"], open_item["percent"], open_item["memory_id"]) == (
        "Migrate billing", 80.0, "a3")
    assert [d["statement"] for d in atlas["decided"]] == [
        "We agreed to copy the schema first",  # a turn naming a decision, not every turn
        "User: for atlas we decided to keep Postgres",
    ]
    assert (atlas["first_at"], atlas["last_at"]) == (DAY1.isoformat(), DAY3.isoformat())
    garden = found["projects"][1]
    assert garden["open"] == [] and garden["tasks"][0]["status"] == "done"


async def test_one_project_one_user_and_the_past(service: Service) -> None:
    only = await service.memories.projects(user_id="lee", project="  ATLAS ")
    assert [p["project"] for p in only["projects"]] == ["atlas"]
    kim = await service.memories.projects(user_id="kim")
    assert [t["task"] for p in kim["projects"] for t in p["tasks"]] == ["Write the atlas RFC"]
    assert (await service.memories.projects(user_id="nobody"))["projects"] == []
    hostile = await service.memories.projects(user_id="lee", project="x' OR '1'='1")
    assert hostile["projects"] == []
    before = await service.memories.projects(user_id="lee", project="atlas", as_of=DAY3)
    assert [t["current"] for t in before["projects"][0]["tasks"]] == [False, True]
    assert before["projects"][0]["open"][0]["progress"] == "schema copied"
    for project in ("", "  ", "x" * 201):
        with pytest.raises(ValueError, match="project"):
            await service.memories.projects(user_id="lee", project=project)
    with pytest.raises(ValueError, match="as_of"):
        await service.memories.projects(user_id="lee", as_of=datetime(2026, 5, 1))


def test_a_replayed_projection_has_the_same_history(tmp_path: Path) -> None:
    live = projected(tmp_path / "live", the_log(), batch=1)
    replayed = projected(tmp_path / "replayed", the_log(), batch=len(the_log()))
    for user in ("lee", "kim"):
        for moment in (None, DAY1, DAY3, DAY3 + timedelta(days=1)):
            assert history(replayed, user, as_of=moment) == history(live, user, as_of=moment)
    assert history(replayed, "lee")["projects"][0]["open"][0]["memory_id"] == "a3"


async def test_context_holds_the_projects_history_when_the_turn_is_about_it(
    service: Service,
) -> None:
    asked = await service.memories.context("What next?", user_id="lee", project="atlas")
    assert "## Project atlas\n- Open: Migrate billing: data copied, cutover open (80%)" in (
        asked["context"])
    assert asked["tokens"] == estimate_tokens(asked["context"])
    # Named in the turn: the project is found by its name, as words.
    named = await service.memories.context(
        "How far is the billing work?", user_id="lee", recent_turns=["Back on Atlas today"])
    assert "## Project atlas" in named["context"]
    # Neither named nor asked, in a session whose task memories are atlas's: atlas.
    in_s2 = await service.memories.context("What next?", user_id="lee", session_id="s2")
    assert "## Project atlas" in in_s2["context"]
    in_s0 = await service.memories.context("What next?", user_id="lee", session_id="s0")
    assert "## Project garden" in in_s0["context"]
    # Not named, not asked: no project; "atlassian" is not "atlas".
    for message in ("Book me a flight", "Is atlassian down?"):
        plain = await service.memories.context(message, user_id="lee")
        assert "## Project" not in plain["context"]
    # Kim's context never shows Lee's history of the same project name.
    kims = await service.memories.context("atlas", user_id="kim")
    assert "Migrate billing" not in kims["context"] and "Write the atlas RFC" in kims["context"]
    # Within the budget, the history in at most 30% of it; at a past moment, that moment's.
    for budget in (0, 20, 50, 100, 400):
        found = await service.memories.context(
            "What next?", user_id="lee", project="atlas", token_budget=budget)
        assert found["tokens"] <= budget
        section = found["context"].partition("## Project")[2]
        assert estimate_tokens("## Project" + section) <= int(budget * 0.3) or not section
    then = await service.memories.context(
        "What next?", user_id="lee", project="atlas", filters=SearchFilters(as_of=DAY3))
    assert "Open: Migrate billing: schema copied (40%)" in then["context"]
