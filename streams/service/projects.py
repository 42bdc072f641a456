"""Project and task history: per project, what the user was doing when, what was decided and
what is still open, across sessions, read from the user's ``task`` memories.

A session's task changes (a task set in a project, progress on it) reach consolidation with
its span and become ``task`` memories (:mod:`memstream.models.extraction.tasks`), so a
project's history is a pure function of the memory projection and a replay rebuilds it
identically. Within a project, a task's states come in the order they happened (event time,
then memory id); the last state of each task is its current one (``current``), the earlier
ones its history, and a task whose current state is not ``done`` is open. What was decided
is read from the memories of the sessions the project's tasks were worked on in: the
corrections, facts, preferences and summaries there that name the project or say that
something was decided, and the user's turns (episodes) there that say something was decided
("we decided", "agreed", "we'll use").

Projects come most recently worked on first, then by name; a project is named as its first
task memory spells it and matched case aside. A memory is in the history now when it is
active, at ``as_of`` when it was recorded by then and not ended by then (the rule of the
profile, :func:`~memstream.streams.service.profiles.holds`).

A context names a project when the caller gives it (``project=``), when the turn's message or
recent turns name one of the user's known projects as words (case aside: a word match against
the project names the user's task memories hold), or when the turn's session already has a
task memory in a project (its task, once a span of the session was consolidated: evicted from
the window, or a session id used again). No model on the read path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

# pydantic (the HTTP API's answers) takes typing_extensions' TypedDict before Python 3.12.
from typing_extensions import TypedDict

from memstream.models.extraction.tasks import read_task

if TYPE_CHECKING:
    # The answers' types are imported by the client package, which must not load LanceDB.
    from memstream.projections.memories import MemoryIndex, MemoryRecord

__all__ = [
    "PROJECT_SHARE",
    "ProjectDict",
    "ProjectsDict",
    "check_project",
    "history",
    "named_project",
    "project_context",
    "project_section",
]

#: The share of a context's token budget a project's history may take.
PROJECT_SHARE = 0.3
#: Most decisions listed per project (the latest).
MAX_DECIDED = 10
#: Memory types a project's decisions are read from: these when they name the project or
#: say a decision, and the user's own turns (episodes) when they say a decision.
DECISION_TYPES = frozenset({"correction", "fact", "preference", "summary"})
#: Words that say something was decided, whatever the project's name.
_DECIDED = re.compile(
    r"\b(decided|decide|decision|agreed|chose|chosen|settled on|went with|we'll use|will use)\b",
    re.IGNORECASE,
)


class TaskStateDict(TypedDict):
    """One state of a task: when, in which session, what it said, and whether it is the
    task's current state."""

    task: str
    status: str
    progress: str
    percent: float | None
    at: str
    session_id: str
    memory_id: str
    current: bool


class DecisionDict(TypedDict):
    """A memory of a project's sessions that says what was decided."""

    statement: str
    type: str
    at: str
    session_id: str
    memory_id: str


class ProjectDict(TypedDict):
    """One project's history."""

    project: str
    first_at: str
    last_at: str
    sessions: list[str]
    tasks: list[TaskStateDict]
    decided: list[DecisionDict]
    open: list[TaskStateDict]


class ProjectsDict(TypedDict):
    """A user's project history: every project's, or the one asked for."""

    project: str | None
    as_of: str | None
    projects: list[ProjectDict]


def history(
    projection: MemoryIndex,
    user_id: str,
    project: str | None = None,
    as_of: datetime | None = None,
) -> ProjectsDict:
    """The project history of ``user_id`` (see the module's docstring): every project's,
    or only ``project``'s (case aside); an unknown project has an empty list."""
    return _history(projection, user_id, _tasks(projection, user_id, as_of), project, as_of)


def _tasks(projection: MemoryIndex, user_id: str, as_of: datetime | None) -> list[MemoryRecord]:
    """The user's task memories in the view of ``as_of`` (now: the active ones): one read
    of the task rows alone, which every context makes."""
    from memstream.streams.service.profiles import holds

    return [r for r in projection.task_history(user_id) if holds(r, as_of)]


def _history(
    projection: MemoryIndex,
    user_id: str,
    records: Sequence[MemoryRecord],
    project: str | None,
    as_of: datetime | None,
) -> ProjectsDict:
    """The history of the task memories ``records``; the user's other memories (what was
    decided) are read only when a project has tasks."""
    from memstream.streams.service.profiles import holds

    tasks: dict[str, list[tuple[dict[str, str], MemoryRecord]]] = {}
    for record in records:
        fields = read_task(record.context)
        if fields["project"] and (project is None or _key(fields["project"]) == _key(project)):
            tasks.setdefault(_key(fields["project"]), []).append((fields, record))
    others = [
        r for r in projection.list_memories(user_id, include_inactive=True) if holds(r, as_of)
    ] if tasks else []
    found = [_project(states, others) for states in tasks.values()]
    found.sort(key=lambda p: (-_moment(p["last_at"]), _key(p["project"]), p["project"]))
    return {
        "project": project,
        "as_of": as_of.astimezone(UTC).isoformat() if as_of is not None else None,
        "projects": found,
    }


def named_project(
    projection: MemoryIndex, user_id: str, texts: Iterable[str], as_of: datetime | None = None
) -> str | None:
    """The user's known project the ``texts`` name as words, case aside: the one named last
    in the texts' order (the newest turn comes last), ties to the longest name; None when
    none is named or the user has no project."""
    return _named(_tasks(projection, user_id, as_of), texts)


def _named(records: Sequence[MemoryRecord], texts: Iterable[str]) -> str | None:
    names = sorted(
        {_key(read_task(r.context)["project"]): read_task(r.context)["project"]
         for r in records if r.memory_type == "task"}.items()
    )
    names = [(key, name) for key, name in names if key]
    if not names:
        return None
    best: tuple[int, int, str] | None = None
    for position, text in enumerate(texts):
        folded = text.casefold()
        for key, name in names:
            if re.search(rf"(?<!\w){re.escape(key)}(?!\w)", folded):
                candidate = (position, len(key), name)
                best = candidate if best is None or candidate > best else best
    return None if best is None else best[2]


def project_section(
    found: ProjectDict, budget: int, count_tokens: Callable[[str], int]
) -> str:
    """A project's history as a section of prompt text within ``budget`` tokens: its open
    items first, then its tasks newest first, then what was decided, each line admitted
    while the section fits; empty when not even its header fits.

    Examples
    --------
    >>> state = {"task": "Migrate billing", "status": "open", "progress": "schema copied",
    ...          "percent": 40.0, "at": "2026-05-04T09:00:00+00:00", "session_id": "s1",
    ...          "memory_id": "m1", "current": True}
    >>> found = {"project": "atlas", "first_at": state["at"], "last_at": state["at"],
    ...          "sessions": ["s1"], "tasks": [state], "decided": [], "open": [state]}
    >>> print(project_section(found, 100, lambda text: len(text.split())))
    ## Project atlas
    - Open: Migrate billing: schema copied (40%) (since 2026-05-04, session s1)
    - 2026-05-04 Migrate billing (open): schema copied (40%) (session s1)
    """
    header = f"## Project {one_line(found['project'])}"
    candidates = [f"Open: {_state(s)} (since {s['at'][:10]}, session {s['session_id']})"
                  for s in found["open"]]
    candidates += [f"{s['at'][:10]} {s['task']} ({s['status']})"
                   + (f": {_progress(s)}" if _progress(s) else "") + f" (session {s['session_id']})"
                   for s in reversed(found["tasks"])]
    candidates += [f"Decided {d['at'][:10]}: {d['statement']}" for d in reversed(found["decided"])]
    if count_tokens(header) > budget:
        return ""
    lines = [header]
    for line in candidates:
        trial = [*lines, f"- {one_line(line)}"]
        if count_tokens("\n".join(trial)) <= budget:
            lines = trial
    return "\n".join(lines)


def _project(
    states: list[tuple[dict[str, str], MemoryRecord]], records: Sequence[MemoryRecord]
) -> ProjectDict:
    """One project's history from its task memories (any order) and the user's memories."""
    states.sort(key=lambda pair: (_moment(pair[0]["at"]), pair[1].memory_id))
    latest: dict[str, int] = {}
    for index, (fields, _record) in enumerate(states):
        latest[_key(fields["task"])] = index
    tasks = [
        _task_state(fields, record, latest[_key(fields["task"])] == index)
        for index, (fields, record) in enumerate(states)
    ]
    name = states[0][0]["project"]
    sessions = list(dict.fromkeys(state["session_id"] for state in tasks))
    return {
        "project": name,
        "first_at": tasks[0]["at"],
        "last_at": tasks[-1]["at"],
        "sessions": sessions,
        "tasks": tasks,
        "decided": _decided(name, set(sessions), records),
        "open": [state for state in tasks if state["current"] and state["status"] != "done"],
    }


def _task_state(fields: dict[str, str], record: MemoryRecord, current: bool) -> TaskStateDict:
    return {
        "task": fields["task"],
        "status": fields["status"],
        "progress": fields["progress"],
        "percent": float(fields["percent"]) if fields["percent"] else None,
        "at": fields["at"],
        "session_id": record.session_id,
        "memory_id": record.memory_id,
        "current": current,
    }


def _decided(name: str, sessions: set[str], records: Sequence[MemoryRecord]) -> list[DecisionDict]:
    """The memories of ``sessions`` that name the project or say something was decided (an
    episode: that say it), oldest first, the latest :data:`MAX_DECIDED`."""
    named = re.compile(rf"(?<!\w){re.escape(_key(name))}(?!\w)")
    found = [
        r for r in records
        if r.session_id in sessions and (
            (r.memory_type in DECISION_TYPES and named.search(r.content.casefold()))
            or (r.memory_type in DECISION_TYPES | {"episode"} and _DECIDED.search(r.content))
        )
    ]
    found.sort(key=lambda r: (r.created_at, r.memory_id))
    return [
        {
            "statement": r.content,
            "type": r.memory_type,
            "at": r.created_at.astimezone(UTC).isoformat(),
            "session_id": r.session_id,
            "memory_id": r.memory_id,
        }
        for r in found[-MAX_DECIDED:]
    ]


def _state(state: TaskStateDict) -> str:
    progress = _progress(state)
    return f"{state['task']}: {progress}" if progress else f"{state['task']} ({state['status']})"


def _progress(state: TaskStateDict) -> str:
    percent = "" if state["percent"] is None else f"{state['percent']:g}%"
    if state["progress"] and percent:
        return f"{state['progress']} ({percent})"
    return state["progress"] or percent


def one_line(text: str) -> str:
    """``text`` with every run of whitespace one space (as the context's other lines)."""
    return " ".join(text.split())


def _key(name: str) -> str:
    return " ".join(name.casefold().split())


def _moment(moment: str) -> float:
    """An ISO time of a task memory as seconds since the epoch (what the order compares)."""
    return datetime.fromisoformat(moment).timestamp()


def project_context(
    projection: MemoryIndex,
    user_id: str,
    project: str | None,
    texts: Sequence[str],
    as_of: datetime | None,
    budget: int,
    count_tokens: Callable[[str], int],
    session_id: str | None = None,
) -> str:
    """The section of a turn's context about the project the turn is about: ``project``
    when given, else the known project ``texts`` (the message and recent turns) name
    (:func:`named_project`), else the project of session ``session_id``'s latest task memory
    (its task, once a span of the session was consolidated); within :data:`PROJECT_SHARE` of
    ``budget``. Empty when the turn is about no known project."""
    records = _tasks(projection, user_id, as_of)  # one read for the name and the history
    name = project if project is not None else _named(records, texts)
    if name is None and session_id is not None:
        name = _session_project(records, session_id)
    if name is None:
        return ""
    found = _history(projection, user_id, records, name, as_of)["projects"]
    if not found:
        return ""
    return project_section(found[0], int(budget * PROJECT_SHARE), count_tokens)


def _session_project(records: Sequence[MemoryRecord], session_id: str) -> str | None:
    """The project of the latest task memory of ``session_id`` (event time, then id)."""
    mine = [(read_task(r.context), r) for r in records if r.session_id == session_id]
    mine = [(fields, r) for fields, r in mine if fields["project"]]
    if not mine:
        return None
    fields, _ = max(mine, key=lambda pair: (_moment(pair[0]["at"]), pair[1].memory_id))
    return fields["project"]


def check_project(project: str | None) -> str | None:
    """``project`` if it can name a project: text, not blank, at most 200 characters.

    Raises
    ------
    ValueError
        Blank or longer than 200 characters (one line, for every interface).
    """
    if project is None:
        return None
    if not isinstance(project, str):
        raise TypeError("project must be a string")
    if not project.strip() or len(project) > 200:
        raise ValueError("project must name a project in 1 to 200 characters, e.g. 'atlas'")
    return project
