"""The consolidation event (topic ``consolidation``): a span of a session's transcript, cut by
the session agent, ready to be turned into memories."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import AwareDatetime, Field

from memstream.models.events.envelope import Event, Frozen, Identifier, Role, Text


class TranscriptMessage(Frozen):
    """One message handed to consolidation, with the event it came from."""

    event_id: Identifier
    role: Role
    content: Text
    name: Identifier | None = None
    occurred_at: AwareDatetime


class ToolUse(Frozen):
    """A tool the agent called in the session (its name), with the event that called it."""

    event_id: Identifier
    name: Identifier


class ConsolidationRequested(Event):
    """A span of a session's transcript is ready to be turned into memories."""

    #: A tool's name can be the user's own (see ``ToolCalled``): content too.
    content_fields: ClassVar[tuple[str, ...]] = ("messages", "tools")
    type: Literal["consolidation_requested"] = "consolidation_requested"
    reason: Literal["session_closed", "evicted"]
    chunk: int = Field(0, ge=0)
    #: Extraction attempts already failed for this span (a retry carries the next number).
    attempt: int = Field(0, ge=0)
    messages: tuple[TranscriptMessage, ...]
    session_started_at: AwareDatetime | None = None
    #: The tools the session called so far (the session state's last ones, each name once):
    #: what the pattern learner counts (see :mod:`memstream.models.patterns`).
    tools: tuple[ToolUse, ...] = ()
