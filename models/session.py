"""Short-term memory: the state of one open session, folded from its chat events.

:func:`apply` is pure: ``apply(state, event, offset, limits) -> Transition``. The caller (the
session agent) stores the new state and publishes the consolidation requests the transition
carries. State values are small and bounded (the transcript itself lives in the topic).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import AwareDatetime, Field, JsonValue

from memstream.models.events import (
    ChatEvent,
    ConsolidationRequested,
    EntityMentioned,
    Frozen,
    Identifier,
    MessageAdded,
    Role,
    ScratchpadUpdated,
    SessionClosed,
    SessionStarted,
    TaskProgress,
    TaskSet,
    ToolCalled,
    TranscriptMessage,
    derived_id,
)

TokenCounter = Callable[[str], int]

_TOKENISH = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def estimate_tokens(text: str) -> int:
    """Default token counter: words and punctuation marks, which tracks BPE counts for
    English prose far better than ``len(text) / 4`` and needs no model download.

    Examples
    --------
    >>> estimate_tokens("Hello, world!")
    4
    """
    return len(_TOKENISH.findall(text))


@dataclass(frozen=True)
class WindowLimits:
    """Bounds of the short-term state."""

    max_messages: int = 50
    max_tokens: int = 100_000
    max_tool_calls: int = 20
    max_entities: int = 100
    #: Ids of recently applied events kept to drop client retries of the same event.
    recent_ids: int = 64
    count_tokens: TokenCounter = field(default=estimate_tokens)


class WindowMessage(Frozen):
    """A message inside the session window, with its token count cached."""

    event_id: Identifier
    role: Role
    content: str
    name: str | None = None
    occurred_at: AwareDatetime
    tokens: int = Field(ge=0)


class ToolCallRecord(Frozen):
    """A recent tool call, its result cut to a summary."""

    event_id: Identifier
    name: str
    arguments: dict[str, JsonValue]
    result_summary: str
    occurred_at: AwareDatetime


class SessionState(Frozen):
    """Everything the short-term memory holds for one open session."""

    user_id: Identifier
    agent_id: Identifier | None = None
    session_id: Identifier
    started_at: AwareDatetime
    last_event_at: AwareDatetime
    messages: tuple[WindowMessage, ...] = ()
    window_tokens: int = 0
    turn_count: int = 0
    message_count: int = 0
    task: str | None = None
    task_progress: str | None = None
    progress_percent: float | None = None
    tool_calls: tuple[ToolCallRecord, ...] = ()
    entities: tuple[str, ...] = ()
    scratchpad: str = ""
    evicted_chunks: int = 0
    #: Offset of the last chat event applied; re-delivered events at or below it are skipped.
    last_offset: int = -1
    recent_event_ids: tuple[str, ...] = ()

    @property
    def duration_seconds(self) -> float:
        """Event-time length of the session (total seconds, correct across days)."""
        return (self.last_event_at - self.started_at).total_seconds()


@dataclass(frozen=True)
class Transition:
    """What applying one event did: the new state (None once closed) and what to publish."""

    state: SessionState | None
    consolidations: tuple[ConsolidationRequested, ...] = ()
    skipped: str | None = None


def session_key(user_id: str, session_id: str) -> str:
    """The table key of a session: sessions are scoped to their user."""
    return f"{user_id}\x1f{session_id}"


def apply(
    state: SessionState | None, event: ChatEvent, offset: int, limits: WindowLimits
) -> Transition:
    """Fold one chat event into the session state.

    ``offset`` is the event's position in its partition; an event at or below the state's
    ``last_offset``, or with an id applied recently, is a re-delivery and changes nothing.
    """
    if state is not None:
        if offset <= state.last_offset:
            return Transition(state, skipped="re-delivered (offset already applied)")
        if event.event_id in state.recent_event_ids:
            return Transition(state, skipped="duplicate event id")
    if state is None:
        if isinstance(event, SessionClosed):
            return Transition(None, skipped="close for a session that is not open")
        state = SessionState(
            user_id=event.user_id,
            agent_id=event.agent_id,
            session_id=event.session_id,
            started_at=event.occurred_at,
            last_event_at=event.occurred_at,
        )
    recent = (*state.recent_event_ids, event.event_id)[-limits.recent_ids :]
    state = state.model_copy(
        update={
            "last_offset": offset,
            "recent_event_ids": recent,
            "last_event_at": max(state.last_event_at, event.occurred_at),
            "agent_id": state.agent_id or event.agent_id,
        }
    )
    if isinstance(event, SessionClosed):
        return Transition(None, consolidations=_closing(state))
    if isinstance(event, MessageAdded):
        return _add_message(state, event, limits)
    return Transition(_apply_other(state, event, limits))


def _apply_other(state: SessionState, event: ChatEvent, limits: WindowLimits) -> SessionState:
    if isinstance(event, SessionStarted):
        return state.model_copy(update={"started_at": min(state.started_at, event.occurred_at)})
    if isinstance(event, TaskSet):
        return state.model_copy(
            update={"task": event.task, "task_progress": None, "progress_percent": None}
        )
    if isinstance(event, TaskProgress):
        return state.model_copy(
            update={"task_progress": event.progress, "progress_percent": event.percent}
        )
    if isinstance(event, ScratchpadUpdated):
        return state.model_copy(update={"scratchpad": event.content})
    if isinstance(event, EntityMentioned):
        return state.model_copy(
            update={"entities": _remember_entity(state.entities, event.name, limits)}
        )
    if isinstance(event, ToolCalled):
        record = ToolCallRecord(
            event_id=event.event_id,
            name=event.name,
            arguments=event.arguments,
            result_summary=_summary(event.result),
            occurred_at=event.occurred_at,
        )
        calls = (*state.tool_calls, record)[-limits.max_tool_calls :]
        return state.model_copy(update={"tool_calls": calls})
    raise TypeError(f"not a chat event: {type(event).__name__}")


def _remember_entity(entities: tuple[str, ...], name: str, limits: WindowLimits) -> tuple[str, ...]:
    # Most recently mentioned last; a re-mention moves the entity to the end.
    kept = tuple(e for e in entities if e.casefold() != name.casefold())
    return (*kept, name)[-limits.max_entities :]


def _summary(result: JsonValue, limit: int = 200) -> str:
    text = result if isinstance(result, str) else ("" if result is None else repr(result))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _add_message(state: SessionState, event: MessageAdded, limits: WindowLimits) -> Transition:
    message = WindowMessage(
        event_id=event.event_id,
        role=event.role,
        content=event.content,
        name=event.name,
        occurred_at=event.occurred_at,
        tokens=limits.count_tokens(event.content),
    )
    messages = (*state.messages, message)
    tokens = state.window_tokens + message.tokens
    state = state.model_copy(
        update={
            "messages": messages,
            "window_tokens": tokens,
            "message_count": state.message_count + 1,
            "turn_count": state.turn_count + (event.role == "user"),
        }
    )
    if len(messages) <= limits.max_messages and tokens <= limits.max_tokens:
        return Transition(state)
    return _evict(state, limits)


def _evict(state: SessionState, limits: WindowLimits) -> Transition:
    """Trim the window oldest-first to a low-water mark, handing the span to consolidation.

    Trimming to three quarters of each bound (not just under it) makes eviction happen in
    chunks, so a long session consolidates in bounded pieces instead of one per message.
    """
    target_messages = max(2, (limits.max_messages * 3) // 4)
    target_tokens = (limits.max_tokens * 3) // 4
    messages = list(state.messages)
    tokens = state.window_tokens
    evicted: list[WindowMessage] = []
    while len(messages) > 2 and (len(messages) > target_messages or tokens > target_tokens):
        gone = messages.pop(0)
        tokens -= gone.tokens
        evicted.append(gone)
    if not evicted:
        return Transition(state)
    request = _consolidation(state, tuple(evicted), "evicted", state.evicted_chunks)
    state = state.model_copy(
        update={
            "messages": tuple(messages),
            "window_tokens": tokens,
            "evicted_chunks": state.evicted_chunks + 1,
        }
    )
    return Transition(state, consolidations=(request,))


def _closing(state: SessionState) -> tuple[ConsolidationRequested, ...]:
    if not state.messages:
        return ()
    return (_consolidation(state, state.messages, "session_closed", state.evicted_chunks),)


def _consolidation(
    state: SessionState,
    messages: tuple[WindowMessage, ...],
    reason: Literal["session_closed", "evicted"],
    chunk: int,
) -> ConsolidationRequested:
    last = messages[-1]
    return ConsolidationRequested(
        # Derived from the span it covers, so a re-delivered close repeats the same id.
        event_id=derived_id(
            state.user_id, state.session_id, "consolidate", messages[0].event_id, last.event_id
        ),
        user_id=state.user_id,
        agent_id=state.agent_id,
        session_id=state.session_id,
        occurred_at=state.last_event_at,
        reason=reason,
        chunk=chunk,
        messages=tuple(
            TranscriptMessage(
                event_id=m.event_id,
                role=m.role,
                content=m.content,
                name=m.name,
                occurred_at=m.occurred_at,
            )
            for m in messages
        ),
        session_started_at=state.started_at,
    )
