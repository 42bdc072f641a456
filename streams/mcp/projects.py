"""The MCP tool memory_projects and what it answers with: the caller's user's project history
(per project, the tasks in the order they happened, what was decided, what is open), named
by the caller's own user id and cut to fit a model's context window as the other answers
are (:mod:`memstream.streams.mcp.results`).

The tool is made here (:func:`memory_projects_tool`) and registered by
:func:`~memstream.streams.mcp.server.create_mcp_server`, which keeps that module short. This
module does not postpone its annotations: the tool's parameter types are objects of the
closure (the server's ``UserId``), read by the SDK when it builds the tool's schema.
"""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Protocol

from mcp.server.mcpserver import Context
from pydantic import Field

from memstream.models.events.envelope import UtcInstant
from memstream.streams.mcp.results import Limits, _Answer, _Cuts
from memstream.streams.service.memories import MemoryService
from memstream.streams.service.projects import ProjectDict, ProjectsDict, TaskStateDict

__all__ = ["ProjectAnswer", "ProjectsAnswer", "memory_projects_tool", "projects_answer"]

#: The most sessions one project lists.
_SOURCES = 20


class TaskState(_Answer):
    """One state of a task: when (``at``), in which session, its status (started, open,
    done), progress, and whether it is the task's ``current`` state."""

    task: str
    status: str
    progress: str
    percent: float | None
    at: str
    session_id: str
    memory_id: str
    current: bool


class Decided(_Answer):
    """A memory of the project's sessions that says what was decided."""

    statement: str
    type: str
    at: str
    session_id: str
    memory_id: str


class ProjectAnswer(_Answer):
    """One project: when it was worked on, in which sessions, its tasks in time order,
    what was decided and what is open."""

    project: str
    first_at: str
    last_at: str
    sessions: list[str]
    tasks: list[TaskState]
    decided: list[Decided]
    open: list[TaskState]


class ProjectsAnswer(_Answer):
    """The user's projects, most recently worked on first (one when ``asked`` names it)."""

    user_id: str
    asked: str | None
    as_of: str | None
    projects: list[ProjectAnswer]
    note: str | None


class _Caller(Protocol):
    user_id: str
    namespaced: str

    def refusal(self, exc: BaseException) -> Exception: ...


def projects_answer(user_id: str, found: ProjectsDict, limits: Limits) -> ProjectsAnswer:
    """A project history as an answer within ``limits``: the projects that fit, each text
    cut to the memory limit."""
    cuts = _Cuts(what="projects")

    def state(one: TaskStateDict) -> TaskState:
        return TaskState(**{**one, "task": cuts.cut(one["task"], limits.memory_chars),
                            "progress": cuts.cut(one["progress"], limits.memory_chars)})

    def project(one: ProjectDict) -> ProjectAnswer:
        return ProjectAnswer(
            project=cuts.cut(one["project"], limits.memory_chars),
            first_at=one["first_at"],
            last_at=one["last_at"],
            sessions=one["sessions"][:_SOURCES],
            tasks=[state(s) for s in one["tasks"]],
            decided=[
                Decided(**{**d, "statement": cuts.cut(d["statement"], limits.memory_chars)})
                for d in one["decided"]
            ],
            open=[state(s) for s in one["open"]],
        )

    kept = cuts.fit([project(p) for p in found["projects"]], limits.result_chars)
    note = cuts.note(limits)
    if not found["projects"]:
        note = "No task of the user's was set in that project yet." if found["project"] else (
            "No task of the user's was set in a project yet."
        )
    asked = found["project"]
    return ProjectsAnswer(
        user_id=user_id,
        asked=cuts.cut(asked, limits.memory_chars) if asked is not None else None,
        as_of=found["as_of"],
        projects=kept,
        note=note,
    )


def memory_projects_tool(
    memories: MemoryService,
    caller: Callable[[Context, str | None], _Caller],
    limits: Limits,
    user_id_type: Any,
) -> Callable[..., Awaitable[ProjectsAnswer]]:
    """The tool ``memory_projects`` for a server whose tools act through ``caller``;
    ``user_id_type`` is the server's annotated type of a ``user_id`` argument."""

    async def memory_projects(
        ctx: Context,
        project: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=200,
                description="One project's history, by its name ('atlas'); left out: all.",
            ),
        ] = None,
        as_of: Annotated[
            UtcInstant | None,
            Field(description="What held at this time (ISO 8601 with a zone); left out: now."),
        ] = None,
        user_id: user_id_type = None,
    ) -> ProjectsAnswer:
        """The user's projects across conversations, most recently worked on first: each
        task in the order it happened (status started, open or done; progress; session;
        current marks a task's latest state), what was decided in those conversations, and
        what is still open. Call it when the user picks up work on a project."""
        who = caller(ctx, user_id)
        try:
            found = await memories.projects(user_id=who.namespaced, project=project, as_of=as_of)
        except (ValueError, TypeError) as exc:
            raise who.refusal(exc) from None
        return projects_answer(who.user_id, found, limits)

    return memory_projects

