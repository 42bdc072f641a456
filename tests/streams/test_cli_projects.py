"""``memstream projects``: a user's project history, one line a task state, or JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fakes import memory_added, service_on_fakes, unit_settings

from memstream.models.events.consolidation import TaskChange
from memstream.models.events.memory import MemoryAdded
from memstream.models.extraction.tasks import task_candidate
from memstream.streams.cli.command import build_parser
from memstream.streams.service.container import Container


def task(memory_id: str, session: str, day: int, progress: str | None) -> MemoryAdded:
    at = datetime(2026, 5, day, 9, 0, tzinfo=UTC)
    candidate = task_candidate(TaskChange(
        event_id=f"t-{memory_id}", task="Migrate billing", project="atlas", progress=progress,
        occurred_at=at,
    ))
    added = memory_added(memory_id, "ann", candidate.content, memory_type="task",
                         context=candidate.context, occurred_at=at)
    return added.model_copy(update={"session_id": session})


@pytest.fixture
def container(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Container:
    seeded = [task("t1", "s1", 4, None), task("t2", "s2", 6, "data copied")]
    service, _publisher, _index = service_on_fakes(unit_settings(tmp_path), seeded, monkeypatch)
    return service.container


def run(container: Container, *argv: str) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args, container))


def test_a_projects_tasks_print_in_order_with_what_is_open(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(container, "projects", "--user", "ann") == 0
    assert capsys.readouterr().out.splitlines() == [
        "projects now (1):",
        "atlas · 2026-05-04 to 2026-05-06 · 2 sessions",
        "  tasks (2):",
        "    2026-05-04 Migrate billing (started) · session s1",
        "    2026-05-06 Migrate billing (open): data copied · session s2",
        "  open (1):",
        "    2026-05-06 Migrate billing (open): data copied · session s2",
    ]
    assert run(container, "projects", "--user", "ann", "--project", "Atlas", "--as-of",
               "2026-05-05") == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "    2026-05-04 Migrate billing (started) · session s1"
    )
    assert run(container, "projects", "--user", "ann", "--json") == 0
    found = json.loads(capsys.readouterr().out)
    assert [t["memory_id"] for t in found["projects"][0]["open"]] == ["t2"]


def test_no_project_says_so_and_bad_input_is_one_line(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(container, "projects", "--user", "bo") == 0
    assert capsys.readouterr().out == "no project now: no task was set in a project yet\n"
    assert run(container, "projects", "--user", "ann", "--project", "zeus") == 0
    assert capsys.readouterr().out == (
        "no project named 'zeus' now: no task was set in a project yet\n"
    )
    assert run(container, "projects", "--user", "ann", "--project", "  ") == 2
    said = capsys.readouterr()
    assert said.out == "" and said.err == (
        "error: project must name a project in 1 to 200 characters, e.g. 'atlas'\n"
    )
