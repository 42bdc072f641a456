"""``memstream projects``: one user's project history, through the service: per project,
the tasks in the order they happened with their sessions, what was decided and what is
open."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from memstream.streams.cli.answers import print_answer

if TYPE_CHECKING:
    from memstream.streams.service.container import Container
    from memstream.streams.service.projects import ProjectDict, ProjectsDict, TaskStateDict


def task_line(state: TaskStateDict) -> str:
    """One state of a task on one line: its day, task, status, progress and session.

    Examples
    --------
    >>> task_line({"task": "Migrate billing", "status": "open", "progress": "schema copied",
    ...     "percent": 40.0, "at": "2026-05-04T09:00:00+00:00", "session_id": "s1",
    ...     "memory_id": "m-1", "current": True})
    '2026-05-04 Migrate billing (open): schema copied (40%) · session s1'
    """
    percent = "" if state["percent"] is None else f"{state['percent']:g}%"
    progress = state["progress"]
    if progress and percent:
        progress = f"{progress} ({percent})"
    progress = progress or percent
    said = f": {progress}" if progress else ""
    return f"{state['at'][:10]} {state['task']} ({state['status']}){said} · session {state['session_id']}"


def project_lines(found: ProjectDict) -> list[str]:
    """One project's lines: its name and sessions, its tasks, what was decided, what is open."""
    count = len(found["sessions"])
    head = (
        f"{found['project']} · {found['first_at'][:10]} to {found['last_at'][:10]}"
        f" · {count} session{'' if count == 1 else 's'}"
    )
    lines = [head, f"  tasks ({len(found['tasks'])}):"]
    lines += [f"    {task_line(state)}" for state in found["tasks"]]
    if found["decided"]:
        lines.append(f"  decided ({len(found['decided'])}):")
        lines += [f"    {d['at'][:10]} {' '.join(d['statement'].split())} · {d['memory_id']}"
                  for d in found["decided"]]
    lines.append(f"  open ({len(found['open'])}):")
    lines += [f"    {task_line(state)}" for state in found["open"]]
    return lines


def projects_lines(found: ProjectsDict) -> list[str]:
    """``memstream projects``'s lines: every project's, most recently worked on first."""
    when = f"as of {found['as_of']}" if found["as_of"] else "now"
    if not found["projects"]:
        named = f" named {found['project']!r}" if found["project"] is not None else ""
        return [f"no project{named} {when}: no task was set in a project yet"]
    lines = [f"projects {when} ({len(found['projects'])}):"]
    for project in found["projects"]:
        lines += project_lines(project)
    return lines


def cmd_projects(args: argparse.Namespace, container: Container) -> int:
    """Show a user's project history now (or as of a past time): per project, the tasks in
    the order they happened, what was decided and what is open."""
    return print_answer(
        container,
        lambda client: client.projects(user_id=args.user, project=args.project, as_of=args.as_of),
        projects_lines,
        args.json,
    )


def add_projects_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    timestamp: Callable[[str], datetime],
) -> argparse.ArgumentParser:
    """Add ``memstream projects --user U [--project P] [--as-of T] [--json]`` to
    ``commands``; ``timestamp`` parses ``--as-of`` as the other commands do."""
    projects = commands.add_parser("projects", help=cmd_projects.__doc__)
    projects.add_argument("--user", required=True)
    projects.add_argument("--project", help="one project's history (its name, case aside)")
    projects.add_argument(
        "--as-of", type=timestamp, help="what held at this time (ISO 8601; UTC if no zone)"
    )
    projects.add_argument("--json", action="store_true")
    projects.set_defaults(run=cmd_projects)
    return projects
