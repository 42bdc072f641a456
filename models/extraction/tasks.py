"""Task memories: a span's task changes (a task set in a project, progress on it) as the
user's ``task`` memories, the history of each project across sessions.

Every extractor adds them the same way (the offline one and the LLM one): they are read
from the request's ``task_changes``, never from a model's reply, so the same request always
gives the same task memories. A change without a project gives none (there is no project to
keep its history under).

A task memory's ``content`` says the project, the task and its state in one line; its
``context`` holds the same as ``key: value`` lines (:data:`TASK_FIELDS`), which
:func:`read_task` reads back, so the history per project needs no parsing of prose.

Examples
--------
>>> from datetime import datetime, timezone
>>> from memstream.models.events.consolidation import TaskChange
>>> at = datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc)
>>> change = TaskChange(event_id="t-2", task="Migrate billing", project="atlas",
...                     progress="schema copied", percent=40, occurred_at=at)
>>> memory = task_candidate(change)
>>> memory.memory_type, memory.importance, memory.content
('task', 0.85, 'Project atlas: Migrate billing (open): schema copied (40%)')
>>> read_task(memory.context)["status"]
'open'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC
from typing import Literal

from memstream.models.conversation import truncate
from memstream.models.events.consolidation import ConsolidationRequested, TaskChange
from memstream.models.events.memory import MemoryCandidate
from memstream.models.extraction.port import MAX_CONTENT_CHARS
from memstream.models.extraction.text import _dedup_key

#: What a task memory scores: with corrections and standing instructions, so a project's
#: history outlives the episodes around it under decay.
TASK_IMPORTANCE = 0.85
#: The ``key: value`` lines of a task memory's context, in this order.
TASK_FIELDS = ("project", "task", "status", "progress", "percent", "at")
#: Longest task or progress text kept in a line of the context.
MAX_FIELD_CHARS = 500

TaskStatus = Literal["started", "open", "done"]

#: Progress that says the task is finished ("done", "shipped", "completed the cutover").
_DONE = re.compile(
    r"\b(done|finished|complete|completed|shipped|merged|released|closed|resolved)\b",
    re.IGNORECASE,
)
#: ... unless it says the opposite ("not done yet", "almost finished").
_NOT_DONE = re.compile(r"\b(not|almost|nearly|never|isn't|aren't|wasn't|until)\b", re.IGNORECASE)


def task_status(change: TaskChange) -> TaskStatus:
    """``started`` for a task just set, ``done`` when the progress says it finished (100%,
    or words like "done", "shipped" without a "not" or "almost"), else ``open``.

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> at = datetime(2026, 5, 4, tzinfo=timezone.utc)
    >>> [task_status(TaskChange(event_id="t", task="x", progress=p, occurred_at=at))
    ...  for p in (None, "cutover done", "not done yet", "tests written")]
    ['started', 'done', 'open', 'open']
    """
    if change.progress is None and change.percent is None:
        return "started"
    if change.percent is not None and change.percent >= 100:
        return "done"
    text = change.progress or ""
    if _DONE.search(text) and not _NOT_DONE.search(text):
        return "done"
    return "open"


def task_candidate(change: TaskChange) -> MemoryCandidate:
    """The task memory of one change (which names a project)."""
    project = _line(change.project or "")
    task = _line(change.task)
    status = task_status(change)
    progress = _line(change.progress or "")
    percent = "" if change.percent is None else f"{change.percent:g}"
    state = f"{progress} ({percent}%)" if progress and percent else progress or (
        f"{percent}%" if percent else ""
    )
    content = f"Project {project}: {task} ({status})" + (f": {state}" if state else "")
    fields = {
        "project": project,
        "task": task,
        "status": status,
        "progress": progress,
        "percent": percent,
        "at": change.occurred_at.astimezone(UTC).isoformat(),
    }
    return MemoryCandidate(
        memory_type="task",
        content=truncate(content, MAX_CONTENT_CHARS),
        importance=TASK_IMPORTANCE,
        source_event_ids=(change.event_id,),
        entities=(project,),
        context="\n".join(f"{key}: {fields[key]}" for key in TASK_FIELDS),
    )


def task_candidates(request: ConsolidationRequested) -> tuple[MemoryCandidate, ...]:
    """The task memories of ``request``'s task changes that name a project, in the order of
    the changes; a change saying again what the one before said (same text) adds none."""
    return _unique(task_candidate(c) for c in request.task_changes if c.project)


def with_task_candidates(
    candidates: tuple[MemoryCandidate, ...], request: ConsolidationRequested
) -> tuple[MemoryCandidate, ...]:
    """``candidates`` followed by ``request``'s task memories (what every extractor returns)."""
    return (*candidates, *task_candidates(request))


def read_task(context: str) -> dict[str, str]:
    """The fields of a task memory's context (:data:`TASK_FIELDS`), empty ones included;
    other lines are ignored."""
    found = dict.fromkeys(TASK_FIELDS, "")
    for line in context.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key in found:
            found[key] = value
    return found


def _line(text: str) -> str:
    """``text`` on one line, clipped: it becomes a ``key: value`` line of the context."""
    return truncate(" ".join(text.split()), MAX_FIELD_CHARS)


def _unique(candidates: Iterable[MemoryCandidate]) -> tuple[MemoryCandidate, ...]:
    seen: set[str] = set()
    kept = []
    for candidate in candidates:
        key = _dedup_key(candidate.content)
        if key not in seen:
            seen.add(key)
            kept.append(candidate)
    return tuple(kept)
