"""Short-term memory: the state of one open session, folded from its chat events.

:func:`apply` is pure: ``apply(state, event, offset, limits) -> Transition``. The caller (the
session agent) stores the new state and publishes the consolidation requests the transition
carries. State values are small and bounded (the transcript itself lives in the topic).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import AwareDatetime, Field, JsonValue, PrivateAttr, TypeAdapter

from memstream.models.events.chat import (
    ChatEvent,
    EntityMentioned,
    MessageAdded,
    ScratchpadUpdated,
    SessionClosed,
    SessionStarted,
    TaskProgress,
    TaskSet,
    ToolCalled,
)
from memstream.models.events.consolidation import (
    MAX_TASK_CHANGES,
    ConsolidationRequested,
    TaskChange,
    ToolUse,
    TranscriptMessage,
)
from memstream.models.events.envelope import Frozen, Identifier, Role, derived_id
from memstream.models.vocabulary import MONTHS, WEEKDAYS

TokenCounter = Callable[[str], int]

_TOKENISH = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_NAME_RUN = re.compile(r"(?<![\w'])([A-ZÀ-ÖØ-Þ][\w'’-]*(?:[ \t]+[A-ZÀ-ÖØ-Þ][\w'’-]*)*)")
_NOT_NAMES = frozenset(
    ["I", "I'm", "I've", "I'd", "I'll", "The", "A", "An", "My", "Our", "We", "You", "Your", "It", "It's", "This", "That", "These", "Those", "He", "She", "They", "Hi", "Hello", "Hey", "Thanks", "Thank", "Yes", "No", "Ok", "OK", "Okay", "Please", "What", "How", "Why", "When", "Where", "Who", "Which", "And", "But", "So", "Also", "Actually", "Maybe", "Sure", "Great", "Good", "Nice", "Well", "Then", "If", "Or", "Not", "Let", "Let's", "Can", "Could", "Would", "Should", "Will", "Do", "Does", "Is", "Are", "Was", "Were"]
) | {word.capitalize() for word in (*WEEKDAYS, *MONTHS)}


def estimate_tokens(text: str) -> int:
    """Default token counter: words and punctuation marks, which tracks BPE counts for
    English prose far better than ``len(text) / 4`` and needs no model download.

    Examples
    --------
    >>> estimate_tokens("Hello, world!")
    4
    """
    return len(_TOKENISH.findall(text))


def mentioned_names(text: str) -> list[str]:
    """The light offline entity detector of short-term memory: capitalised runs of words.

    It runs on every message, so it is a single regular expression (about 10 µs a message);
    a one-word name at the start of a sentence is skipped, as are common capitalised words.
    The extractor has the thorough detector for long-term memory.

    Examples
    --------
    >>> mentioned_names("Hi! My sister Clara and I fly from Lisbon to New York in May.")
    ['Clara', 'Lisbon', 'New York']
    """
    found: list[str] = []
    for match in _NAME_RUN.finditer(text):
        words = match.group(1).split()
        before = text[: match.start()].rstrip()
        sentence_start = not before or before[-1] in ".!?:;\n"
        while words and words[0] in _NOT_NAMES:
            words.pop(0)
            sentence_start = False
        words = [w for w in words if w not in _NOT_NAMES] if len(words) > 1 else words
        if not words or (sentence_start and len(words) == 1):
            continue
        name = " ".join(words).rstrip("'’")
        if name and name not in found:
            found.append(name)
    return found


@dataclass(frozen=True)
class WindowLimits:
    """Bounds of the short-term state."""

    max_messages: int = 50
    max_tokens: int = 100_000
    #: Characters of message content the window holds: tokens alone do not bound its size
    #: (one "word" of 100,000 letters is one token), and the state must fit one changelog
    #: record, its spans one consolidation request.
    max_chars: int = 200_000
    max_tool_calls: int = 20
    max_entities: int = 100
    #: Ids of recently applied events kept to drop client retries of the same event.
    recent_ids: int = 16
    count_tokens: TokenCounter = field(default=estimate_tokens)


class WindowMessage(Frozen):
    """A message inside the session window, with its token count cached."""

    event_id: Identifier
    role: Role
    content: str
    name: str | None = None
    occurred_at: AwareDatetime
    tokens: int = Field(ge=0)
    _json: bytes | None = PrivateAttr(default=None)

    def json_bytes(self) -> bytes:
        """This message as JSON, serialised once: a message never changes while the window
        that holds it is written again and again."""
        # Straight to pydantic's private-attribute dict: plain attribute access to a private
        # attribute goes through __getattr__ and costs microseconds per message.
        private = self.__pydantic_private__
        cached: bytes | None = private.get("_json") if private else None
        if cached is None:
            cached = self.model_dump_json().encode()
            self._json = cached
        return cached

    def __eq__(self, other: object) -> bool:
        # Fields only: the serialisation cache is not part of a message's value.
        return isinstance(other, WindowMessage) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(self.event_id)


class ToolCallRecord(Frozen):
    """A recent tool call, its result cut to a summary."""

    event_id: Identifier
    name: str
    arguments: dict[str, JsonValue]
    result_summary: str
    occurred_at: AwareDatetime


class SessionState(Frozen):
    """Everything the short-term memory holds for one open session."""

    status: Literal["open"] = "open"
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
    #: The project the current task was set in, and the task's changes not yet handed to
    #: consolidation (at most :data:`MAX_TASK_CHANGES`, the latest).
    project: str | None = None
    task_changes: tuple[TaskChange, ...] = ()
    tool_calls: tuple[ToolCallRecord, ...] = ()
    entities: tuple[str, ...] = ()
    scratchpad: str = ""
    evicted_chunks: int = 0
    #: Log position of the last chat event applied: re-delivered events at or below it are
    #: skipped (a session's events all live on one partition of the chat topic).
    partition: int = 0
    last_offset: int = -1
    last_event_id: str | None = None
    recent_event_ids: tuple[str, ...] = ()

    @property
    def duration_seconds(self) -> float:
        """Event-time length of the session (total seconds, correct across days)."""
        return (self.last_event_at - self.started_at).total_seconds()


class ClosedSession(Frozen):
    """What is kept of a session after its close: enough to recognise a second close, a
    re-delivered event, or a late one."""

    status: Literal["closed"] = "closed"
    user_id: Identifier
    session_id: Identifier
    reason: str
    closed_at: AwareDatetime
    close_event_id: Identifier
    partition: int = 0
    last_offset: int


#: A sessions-table value: an open session, or the marker a close leaves behind.
SessionValue: TypeAlias = SessionState | ClosedSession
_SESSION_VALUE: TypeAdapter[SessionValue] = TypeAdapter(
    Annotated[SessionValue, Field(discriminator="status")]
)


def load_session(raw: bytes) -> SessionValue:
    """A session table value from its stored bytes."""
    if raw[:1] != b"{":
        raw = zlib.decompress(raw)
    return _SESSION_VALUE.validate_json(raw)


def dump_session(value: SessionValue) -> bytes:
    """The stored bytes of a session table value.

    Open sessions are zlib-compressed (level 1): the window's JSON shrinks about 5x, which
    is what the table holds in memory and what every changelog write carries. Closed-session
    markers are small and stay plain JSON, status first, so a scan can spot them unparsed.
    """
    if isinstance(value, ClosedSession):
        return value.model_dump_json().encode()
    head = value.model_dump_json(exclude={"messages"}).encode()
    messages = b",".join(message.json_bytes() for message in value.messages)
    return zlib.compress(head[:-1] + b',"messages":[' + messages + b"]}", 1)


@dataclass(frozen=True)
class Transition:
    """What applying one event did: the new value, what to publish, and what to report.

    ``skipped`` says why the event changed nothing; ``note`` reports something unusual that
    was handled (a second close, a late event reopening a closed session).
    """

    state: SessionState | ClosedSession | None
    consolidations: tuple[ConsolidationRequested, ...] = ()
    skipped: str | None = None
    note: str | None = None


def session_key(user_id: str, session_id: str) -> str:
    """The table key of a session: sessions are scoped to their user."""
    return f"{user_id}\x1f{session_id}"


def apply(
    previous: SessionState | ClosedSession | None,
    event: ChatEvent,
    offset: int,
    limits: WindowLimits,
    partition: int = 0,
) -> Transition:
    """Fold one chat event into a session's table value.

    ``offset`` is the event's position in its partition: an event at or below the last
    applied offset, or whose id was applied recently, is a re-delivery and changes nothing.
    A close yields a :class:`ClosedSession` and the consolidation of the rest of the window;
    a second close is reported and ignored; a late event after a close reopens the session
    (reported), so no message is ever dropped.
    """
    note = None
    if isinstance(previous, ClosedSession):
        if offset <= previous.last_offset:
            return Transition(previous, skipped="re-delivered (offset already applied)")
        if isinstance(event, SessionClosed):
            reason = f"session already closed ({previous.reason})"
            return Transition(previous, skipped=reason, note=f"second close ignored: {reason}")
        note = f"event after the session was closed ({previous.reason}): session reopened"
        previous = None
    state = previous
    if state is not None:
        if offset <= state.last_offset:
            return Transition(state, skipped="re-delivered (offset already applied)")
        if event.event_id in state.recent_event_ids:
            return Transition(state, skipped="duplicate event id")
        if (
            isinstance(event, SessionClosed)
            and event.last_event_id is not None
            and event.last_event_id != state.last_event_id
        ):
            return Transition(state, skipped=f"stale {event.reason} close: the session moved on")
    if state is None:
        if isinstance(event, SessionClosed):
            reason = "close for a session that is not open"
            return Transition(None, skipped=reason, note=reason)
        state = SessionState(
            user_id=event.user_id,
            agent_id=event.agent_id,
            session_id=event.session_id,
            started_at=event.occurred_at,
            last_event_at=event.occurred_at,
        )
    position = {
        "partition": partition,
        "last_offset": offset,
        "last_event_id": event.event_id,
        "recent_event_ids": (*state.recent_event_ids, event.event_id)[-limits.recent_ids :],
        "last_event_at": max(state.last_event_at, event.occurred_at),
        "agent_id": state.agent_id or event.agent_id,
    }
    if isinstance(event, MessageAdded):
        transition = _add_message(state, event, limits, position)
        return Transition(transition.state, transition.consolidations, note=note)
    # One copy per event: model_copy is most of the cost of a fold step.
    state = state.model_copy(update={**position, **_apply_other(state, event, limits)})
    if isinstance(event, SessionClosed):
        closed = ClosedSession(
            user_id=state.user_id,
            session_id=state.session_id,
            reason=event.reason,
            closed_at=event.occurred_at,
            close_event_id=event.event_id,
            partition=partition,
            last_offset=offset,
        )
        return Transition(closed, consolidations=_closing(state), note=note)
    return Transition(state, note=note)


def _apply_other(state: SessionState, event: ChatEvent, limits: WindowLimits) -> dict[str, Any]:
    """The fields a non-message event changes."""
    if isinstance(event, SessionClosed):
        return {}
    if isinstance(event, SessionStarted):
        return {"started_at": min(state.started_at, event.occurred_at)}
    if isinstance(event, TaskSet):
        change = TaskChange(
            event_id=event.event_id, task=event.task, project=event.project,
            occurred_at=event.occurred_at,
        )
        return {
            "task": event.task, "task_progress": None, "progress_percent": None,
            "project": event.project, "task_changes": _changes(state, change),
        }
    if isinstance(event, TaskProgress):
        update: dict[str, Any] = {"task_progress": event.progress, "progress_percent": event.percent}
        if state.task is not None:  # progress on no task set in this session names nothing
            update["task_changes"] = _changes(state, TaskChange(
                event_id=event.event_id, task=state.task, project=state.project,
                progress=event.progress, percent=event.percent, occurred_at=event.occurred_at,
            ))
        return update
    if isinstance(event, ScratchpadUpdated):
        return {"scratchpad": event.content}
    if isinstance(event, EntityMentioned):
        return {"entities": _remember_entities(state.entities, [event.name], limits)}
    if isinstance(event, ToolCalled):
        record = ToolCallRecord(
            event_id=event.event_id,
            name=event.name,
            arguments=_bounded_arguments(event.arguments),
            result_summary=_summary(event.result),
            occurred_at=event.occurred_at,
        )
        return {"tool_calls": (*state.tool_calls, record)[-limits.max_tool_calls :]}
    raise TypeError(f"not a chat event: {type(event).__name__}")


def _changes(state: SessionState, change: TaskChange) -> tuple[TaskChange, ...]:
    """The session's pending task changes with ``change``, the latest :data:`MAX_TASK_CHANGES`."""
    return (*state.task_changes, change)[-MAX_TASK_CHANGES:]


def _remember_entities(
    entities: tuple[str, ...], names: list[str], limits: WindowLimits
) -> tuple[str, ...]:
    """Add newly mentioned names, most recent last, keeping at most ``max_entities``.

    A name already held (ignoring case) keeps its place: it runs for every message, so the
    common case (nothing new) must cost one set build, not a scan per name.
    """
    if not names:
        return entities
    held = {entity.casefold() for entity in entities}
    new = [name for name in dict.fromkeys(names) if name.casefold() not in held]
    if not new:
        return entities
    return (*entities, *new)[-limits.max_entities :]


#: JSON characters of a tool call's arguments kept in the state; longer ones are summarised.
MAX_ARGUMENT_CHARS = 2000


def _bounded_arguments(arguments: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """A tool call's arguments as the state keeps them: whole when short, else a summary
    (the state holds the last tool calls, and must stay small; the log has them whole)."""
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    if len(text) <= MAX_ARGUMENT_CHARS:
        return arguments
    return {"summary": text[: MAX_ARGUMENT_CHARS - 1] + "…"}


def _summary(result: JsonValue, limit: int = 200) -> str:
    text = result if isinstance(result, str) else ("" if result is None else repr(result))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _add_message(
    state: SessionState, event: MessageAdded, limits: WindowLimits, position: dict[str, Any]
) -> Transition:
    # Built from an already validated event: skip validating it a second time.
    message = WindowMessage.model_construct(
        event_id=event.event_id,
        role=event.role,
        content=event.content,
        name=event.name,
        occurred_at=event.occurred_at,
        tokens=limits.count_tokens(event.content),
    )
    messages = (*state.messages, message)
    tokens = state.window_tokens + message.tokens
    entities = _remember_entities(state.entities, mentioned_names(event.content), limits)
    state = state.model_copy(
        update={
            **position,
            "entities": entities,
            "messages": messages,
            "window_tokens": tokens,
            "message_count": state.message_count + 1,
            "turn_count": state.turn_count + (event.role == "user"),
        }
    )
    if (
        len(messages) <= limits.max_messages
        and tokens <= limits.max_tokens
        and _chars(messages) <= limits.max_chars
    ):
        return Transition(state)
    return _evict(state, limits)


def _chars(messages: tuple[WindowMessage, ...] | list[WindowMessage]) -> int:
    # len() of a str is O(1): summing it over a bounded window is not the seed's quadratic
    # recount of every token.
    return sum(len(m.content) for m in messages)


def _evict(state: SessionState, limits: WindowLimits) -> Transition:
    """Trim the window oldest-first to a low-water mark, handing the span to consolidation.

    Trimming to three quarters of each bound (not just under it) makes eviction happen in
    chunks, so a long session consolidates in bounded pieces instead of one per message.
    """
    target_messages = max(2, (limits.max_messages * 3) // 4)
    target_tokens = (limits.max_tokens * 3) // 4
    target_chars = (limits.max_chars * 3) // 4
    messages = list(state.messages)
    tokens = state.window_tokens
    chars = _chars(messages)
    evicted: list[WindowMessage] = []
    while len(messages) > 2 and (
        len(messages) > target_messages or tokens > target_tokens or chars > target_chars
    ):
        gone = messages.pop(0)
        tokens -= gone.tokens
        chars -= len(gone.content)
        evicted.append(gone)
    if not evicted:
        return Transition(state)
    request = _consolidation(state, tuple(evicted), "evicted", state.evicted_chunks)
    state = state.model_copy(
        update={
            "messages": tuple(messages),
            "window_tokens": tokens,
            "evicted_chunks": state.evicted_chunks + 1,
            "task_changes": (),
        }
    )
    return Transition(state, consolidations=(request,))


def _closing(state: SessionState) -> tuple[ConsolidationRequested, ...]:
    if not state.messages and not state.task_changes:
        return ()
    return (_consolidation(state, state.messages, "session_closed", state.evicted_chunks),)


def _consolidation(
    state: SessionState,
    messages: tuple[WindowMessage, ...],
    reason: Literal["session_closed", "evicted"],
    chunk: int,
) -> ConsolidationRequested:
    # A span of task changes alone (a close after them, no message left) is named by them.
    span = [m.event_id for m in messages] or [c.event_id for c in state.task_changes]
    return ConsolidationRequested(
        # Derived from the span it covers, so a re-delivered close repeats the same id.
        event_id=derived_id(state.user_id, state.session_id, "consolidate", span[0], span[-1]),
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
        tools=_tools_used(state),
        task_changes=state.task_changes,
    )


def _tools_used(state: SessionState) -> tuple[ToolUse, ...]:
    """The tools the session called (of the calls the state keeps), each name once, by its
    first call: what the pattern learner counts."""
    first: dict[str, ToolUse] = {}
    for call in state.tool_calls:
        if call.name not in first:
            first[call.name] = ToolUse(event_id=call.event_id, name=call.name)
    return tuple(first.values())


class WorkingContext(Frozen):
    """What an agent's prompt should hold for one session right now."""

    user_id: Identifier
    session_id: Identifier
    agent_id: Identifier | None = None
    messages: tuple[WindowMessage, ...]
    tokens: int
    omitted_messages: int
    task: str | None
    task_progress: str | None
    progress_percent: float | None
    scratchpad: str
    entities: tuple[str, ...]
    tool_calls: tuple[ToolCallRecord, ...]
    turn_count: int
    started_at: AwareDatetime
    duration_seconds: float

    def render(self) -> str:
        """The context as prompt text: task, scratchpad, entities, tools, then the messages."""
        lines = [f"Session {self.session_id} · {self.turn_count} user turns"]
        if self.task:
            progress = f" ({self.progress_percent:g}%)" if self.progress_percent is not None else ""
            lines.append(f"Task: {self.task}")
            if self.task_progress:
                lines.append(f"Progress{progress}: {self.task_progress}")
        if self.scratchpad:
            lines.append(f"Scratchpad: {self.scratchpad}")
        if self.entities:
            lines.append(f"Entities: {', '.join(self.entities)}")
        for call in self.tool_calls:
            lines.append(f"Tool {call.name}({_summary(call.arguments, 80)}) -> {call.result_summary}")
        if self.omitted_messages:
            lines.append(f"[{self.omitted_messages} earlier message(s) left out for the budget]")
        lines += [f"{m.role}: {m.content}" for m in self.messages]
        return "\n".join(lines)


def working_context(
    state: SessionState, token_budget: int, max_tool_calls: int = 5
) -> WorkingContext:
    """The working-memory context of a session: the newest messages that fit ``token_budget``
    (in order), with task, progress, scratchpad, entities and the latest tool calls.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> m = [WindowMessage(event_id=str(i), role="user", content="x", occurred_at=t, tokens=40)
    ...      for i in range(3)]
    >>> s = SessionState(user_id="u", session_id="s", started_at=t, last_event_at=t,
    ...                  messages=tuple(m), window_tokens=120)
    >>> [m.event_id for m in working_context(s, token_budget=100).messages]
    ['1', '2']
    """
    kept: list[WindowMessage] = []
    tokens = 0
    for message in reversed(state.messages):
        if tokens + message.tokens > token_budget:
            break
        kept.append(message)
        tokens += message.tokens
    kept.reverse()
    return WorkingContext(
        user_id=state.user_id,
        session_id=state.session_id,
        agent_id=state.agent_id,
        messages=tuple(kept),
        tokens=tokens,
        omitted_messages=len(state.messages) - len(kept),
        task=state.task,
        task_progress=state.task_progress,
        progress_percent=state.progress_percent,
        scratchpad=state.scratchpad,
        entities=state.entities,
        tool_calls=state.tool_calls[-max_tool_calls:] if max_tool_calls else (),
        turn_count=state.turn_count,
        started_at=state.started_at,
        duration_seconds=state.duration_seconds,
    )
