"""Chat events (topic ``chat``): what a client says happened in a session, from its start to
its close, and the erasure of a user (published to the memories topic too).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StringConstraints

from memstream.models.events.envelope import Code, Event, Identifier, JsonData, Role, Text


class SessionStarted(Event):
    """A session began."""

    #: Keys and values come from the client and may say anything about the user.
    content_fields: ClassVar[tuple[str, ...]] = ("metadata",)
    type: Literal["session_started"] = "session_started"
    metadata: dict[str, str] = Field(default_factory=dict)


class MessageAdded(Event):
    """A chat message was added to a session."""

    #: ``name`` is a speaker's name (a person), content like the words.
    content_fields: ClassVar[tuple[str, ...]] = ("content", "name")
    type: Literal["message_added"] = "message_added"
    role: Role
    content: Text
    name: Identifier | None = None


class ToolCalled(Event):
    """The agent called a tool."""

    #: A tool's name can be the user's own (a plugin named after them, a contact).
    content_fields: ClassVar[tuple[str, ...]] = ("arguments", "result", "name")
    type: Literal["tool_called"] = "tool_called"
    name: Identifier
    arguments: dict[str, JsonData] = Field(default_factory=dict)
    result: JsonData = None


#: A project's name, as a client names it ("atlas", "Billing migration"): bounded, one line.
ProjectName = Annotated[
    str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")
]


class TaskSet(Event):
    """The session's current task was set, optionally within a named ``project``.

    ``project`` is optional: events written before it existed decode without it (a new
    optional field needs no upcaster), and a task without a project has no history per
    project. The project's name is the user's words, sealed with the task.
    """

    content_fields: ClassVar[tuple[str, ...]] = ("task", "project")
    type: Literal["task_set"] = "task_set"
    task: Text
    project: ProjectName | None = None


class TaskProgress(Event):
    """Progress on the current task."""

    content_fields: ClassVar[tuple[str, ...]] = ("progress",)
    type: Literal["task_progress"] = "task_progress"
    progress: Text
    percent: float | None = Field(None, ge=0, le=100)


class ScratchpadUpdated(Event):
    """The agent's scratchpad was replaced with new content."""

    content_fields: ClassVar[tuple[str, ...]] = ("content",)
    type: Literal["scratchpad_updated"] = "scratchpad_updated"
    content: Text


class EntityMentioned(Event):
    """An entity (person, place, project, ...) was mentioned."""

    #: A name the user mentioned is the user's content (a person, a place), and so is its
    #: kind, which is free text from the client ("my ex", "therapist").
    content_fields: ClassVar[tuple[str, ...]] = ("name", "kind")
    type: Literal["entity_mentioned"] = "entity_mentioned"
    name: Annotated[str, StringConstraints(min_length=1, max_length=512)]
    kind: Identifier | None = None


class SessionClosed(Event):
    """A session ended: explicitly, or from a timer (idle, max age).

    A timer's close names the last event it saw (``last_event_id``): if the session has
    had another event by the time the close is processed, the close is stale and ignored.
    """

    type: Literal["session_closed"] = "session_closed"
    reason: Literal["explicit", "idle", "max_age"] = "explicit"
    last_event_id: Identifier | None = None


class UserErased(Event):
    """A user is erased (``memstream erase``): every projection drops the user's data, and
    the user's key is destroyed, so the encrypted copies in the log can never be read again.
    Its ``reason`` is a short code (:data:`Code`), the one text field left unsealed.

    Published to the chat topic (session state) and the memories topic (memory projection),
    keyed by the user; ``session_id`` is ``"-"``. A replay that meets it drops what it has
    folded of the user so far, so nothing erased comes back.
    """

    type: Literal["user_erased"] = "user_erased"
    #: Version 2 restricts ``reason`` to a short code; older free-text reasons are upcast
    #: to ``"redacted"`` (see :mod:`memstream.models.upcasting`).
    schema_version: Literal[2] = 2  # type: ignore[assignment]
    erasure_id: Identifier
    #: Not sealed: the event must be read after the user's key is destroyed (consumers
    #: apply it then), so it may only hold a code, never the user's or an operator's words.
    reason: Code = "requested"


ChatEvent = Annotated[
    SessionStarted
    | MessageAdded
    | ToolCalled
    | TaskSet
    | TaskProgress
    | ScratchpadUpdated
    | EntityMentioned
    | SessionClosed
    | UserErased,
    Field(discriminator="type"),
]
