"""Event schema: frozen pydantic v2 events sharing one envelope.

Every event carries a client-assigned ``event_id`` (the idempotency key), its ``type``,
``schema_version``, the ``user_id`` it belongs to, an optional ``agent_id``, the
``session_id`` and ``occurred_at`` (event time, timezone-aware). Unknown fields are
rejected. ``encryption`` is reserved for per-user encryption of content fields: when set,
the fields it names hold ciphertext, and erasing a user destroys the key.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, StringConstraints

#: Identifiers come from clients: bounded, printable, never parsed as syntax anywhere.
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")]
Text = Annotated[str, StringConstraints(max_length=1_000_000)]
Role = Literal["user", "assistant", "system", "tool"]


class Frozen(BaseModel):
    """Base of every value object: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


#: ``aes-256-gcm``: the first scheme, its associated data is the event id alone (still read,
#: see ``accept_legacy_seals``); ``aes-256-gcm-v2``: bound to the user, session, type, event,
#: key id and sealed field names (:mod:`memstream.models.crypto`).
SealScheme = Literal["aes-256-gcm", "aes-256-gcm-v2"]


class ContentEncryption(Frozen):
    """How the content fields of an event are encrypted (per-user key, crypto-shredding).

    The fields it names hold placeholders; their values are in ``ciphertext`` (base64 of
    the 12-byte nonce and the AES-GCM output over their JSON, bound to the event's user,
    session, type and id, the key id and these field names). Once the user's key is
    destroyed, nothing can read them.
    """

    scheme: SealScheme
    key_id: Identifier
    fields: tuple[str, ...]
    ciphertext: Annotated[str, StringConstraints(max_length=4_000_000)] = ""


class Event(Frozen):
    """The envelope every memstream event shares."""

    #: Fields holding user content; the only ones encryption may cover.
    content_fields: ClassVar[tuple[str, ...]] = ()

    event_id: Identifier
    type: str
    #: Each event type pins the version it validates; older payloads are upcast first.
    schema_version: Literal[1] = 1
    user_id: Identifier
    agent_id: Identifier | None = None
    session_id: Identifier
    occurred_at: AwareDatetime
    encryption: ContentEncryption | None = None


# --- chat events (topic: chat) ---------------------------------------------------------


class SessionStarted(Event):
    """A session began."""

    type: Literal["session_started"] = "session_started"
    metadata: dict[str, str] = Field(default_factory=dict)


class MessageAdded(Event):
    """A chat message was added to a session."""

    content_fields: ClassVar[tuple[str, ...]] = ("content",)
    type: Literal["message_added"] = "message_added"
    role: Role
    content: Text
    name: Identifier | None = None


class ToolCalled(Event):
    """The agent called a tool."""

    content_fields: ClassVar[tuple[str, ...]] = ("arguments", "result")
    type: Literal["tool_called"] = "tool_called"
    name: Identifier
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    result: JsonValue = None


class TaskSet(Event):
    """The session's current task was set."""

    content_fields: ClassVar[tuple[str, ...]] = ("task",)
    type: Literal["task_set"] = "task_set"
    task: Text


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

    #: A name the user mentioned is the user's content (a person, a place).
    content_fields: ClassVar[tuple[str, ...]] = ("name",)
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

    Published to the chat topic (session state) and the memories topic (memory projection),
    keyed by the user; ``session_id`` is ``"-"``. A replay that meets it drops what it has
    folded of the user so far, so nothing erased comes back.
    """

    type: Literal["user_erased"] = "user_erased"
    erasure_id: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)] = "requested"


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


# --- consolidation events (topic: consolidation) ---------------------------------------


class TranscriptMessage(Frozen):
    """One message handed to consolidation, with the event it came from."""

    event_id: Identifier
    role: Role
    content: Text
    name: Identifier | None = None
    occurred_at: AwareDatetime


class ConsolidationRequested(Event):
    """A span of a session's transcript is ready to be turned into memories."""

    content_fields: ClassVar[tuple[str, ...]] = ("messages",)
    type: Literal["consolidation_requested"] = "consolidation_requested"
    reason: Literal["session_closed", "evicted"]
    chunk: int = Field(0, ge=0)
    #: Extraction attempts already failed for this span (a retry carries the next number).
    attempt: int = Field(0, ge=0)
    messages: tuple[TranscriptMessage, ...]
    session_started_at: AwareDatetime | None = None


# --- memory events (topic: memories) ---------------------------------------------------

MemoryType = Literal["preference", "fact", "summary", "episode", "correction", "entity"]
Tier = Literal["short_term", "long_term"]


class TokenUsage(Frozen):
    """Tokens an LLM call used."""

    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)


class MemoryCandidate(Frozen):
    """One memory an extractor proposes."""

    memory_type: MemoryType
    content: Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
    importance: float = Field(ge=0, le=1)
    source_event_ids: tuple[Identifier, ...] = ()
    entities: tuple[str, ...] = ()


class ExtractionRecorded(Event):
    """What an extractor made of a consolidation request, recorded so replay never re-runs it."""

    content_fields: ClassVar[tuple[str, ...]] = ("raw_response", "candidates")
    type: Literal["extraction_recorded"] = "extraction_recorded"
    consolidation_event_id: Identifier
    extractor: Identifier
    extractor_version: Identifier
    model: Identifier | None = None
    prompt_version: Identifier | None = None
    raw_response: Text = ""
    usage: TokenUsage | None = None
    latency_ms: float = Field(0, ge=0)
    candidates: tuple[MemoryCandidate, ...] = ()


class ExtractionFailure(Event):
    """An extractor gave up on a consolidation request; the raw reply is kept, never dropped."""

    content_fields: ClassVar[tuple[str, ...]] = ("raw_response",)
    type: Literal["extraction_failed"] = "extraction_failed"
    consolidation_event_id: Identifier
    extractor: Identifier
    extractor_version: Identifier
    model: Identifier | None = None
    prompt_version: Identifier | None = None
    reason: Annotated[str, StringConstraints(max_length=5_000)]
    raw_response: Text = ""
    attempts: int = Field(0, ge=0)
    usage: TokenUsage | None = None
    latency_ms: float = Field(0, ge=0)
    retry_scheduled: bool = False


class MemoryAdded(Event):
    """A new memory entered the user's long-term store.

    Version 2 records which extractor proposed the memory (``extractor``, name/version), so
    memories of two extractors can be told apart; version 1 events are upcast with
    ``"unrecorded"`` (see :mod:`memstream.models.upcasting`).
    """

    #: The entities are names taken from the user's words: content too.
    content_fields: ClassVar[tuple[str, ...]] = ("content", "entities")
    type: Literal["memory_added"] = "memory_added"
    schema_version: Literal[2] = 2  # type: ignore[assignment]
    extractor: Identifier
    memory_id: Identifier
    memory_type: MemoryType
    content: Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
    importance: float = Field(ge=0, le=1)
    tier: Tier = "long_term"
    extraction_event_id: Identifier
    source_event_ids: tuple[Identifier, ...] = ()
    entities: tuple[str, ...] = ()


class MemoryReinforced(Event):
    """A candidate repeated a memory the user already has: it reinforces it, no new row."""

    type: Literal["memory_reinforced"] = "memory_reinforced"
    memory_id: Identifier
    extraction_event_id: Identifier
    source_event_ids: tuple[Identifier, ...] = ()
    similarity: float = Field(ge=-1, le=1)


class MemorySuperseded(Event):
    """A newer memory replaces an older one: the old one leaves the current view, not history."""

    type: Literal["memory_superseded"] = "memory_superseded"
    memory_id: Identifier
    superseded_by: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)]
    similarity: float = Field(ge=-1, le=1)


class MemoryDeleted(Event):
    """A memory was deleted on request: out of every view; its history stays in the log."""

    type: Literal["memory_deleted"] = "memory_deleted"
    memory_id: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)] = "requested"


class MemoryPromoted(Event):
    """A short-term memory moved to the long-term tier (retrieved often enough)."""

    type: Literal["memory_promoted"] = "memory_promoted"
    memory_id: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)]


class MemoryExpired(Event):
    """A short-term memory's time ran out: it leaves the ranked view; episodes stay findable."""

    type: Literal["memory_expired"] = "memory_expired"
    memory_id: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)] = "ttl"


class MemoryForgotten(Event):
    """A forgetting policy let a memory go: it leaves search and the current view like an
    expired one, and stays in history (and in point-in-time reads before ``occurred_at``).

    The decision is recorded, not derived: ``score`` and ``threshold`` are what the policy
    saw at ``occurred_at``, so a replay applies the event and never scores again.
    """

    type: Literal["memory_forgotten"] = "memory_forgotten"
    memory_id: Identifier
    policy: Literal["decay"]
    score: float = Field(ge=0, le=1)
    threshold: float = Field(ge=0, le=1)
    reason: Annotated[str, StringConstraints(max_length=500)]


class RetrievedMemory(Frozen):
    """One memory a retrieval returned, with its rank score."""

    memory_id: Identifier
    score: float


class MemoriesRetrieved(Event):
    """A retrieval happened (topic: accesses): it updates use counts off the read path."""

    content_fields: ClassVar[tuple[str, ...]] = ("query",)
    type: Literal["memories_retrieved"] = "memories_retrieved"
    query: Annotated[str, StringConstraints(max_length=20_000)]
    memories: tuple[RetrievedMemory, ...]


MemoryChange = (
    MemoryReinforced
    | MemorySuperseded
    | MemoryDeleted
    | MemoryPromoted
    | MemoryExpired
    | MemoryForgotten
)

MemoryEvent = Annotated[
    ExtractionRecorded
    | ExtractionFailure
    | MemoryAdded
    | MemoryReinforced
    | MemorySuperseded
    | MemoryDeleted
    | MemoryPromoted
    | MemoryExpired
    | MemoryForgotten
    | UserErased,
    Field(discriminator="type"),
]

AnyEvent = Annotated[
    SessionStarted
    | MessageAdded
    | ToolCalled
    | TaskSet
    | TaskProgress
    | ScratchpadUpdated
    | EntityMentioned
    | SessionClosed
    | ConsolidationRequested
    | ExtractionRecorded
    | ExtractionFailure
    | MemoryAdded
    | MemoryReinforced
    | MemorySuperseded
    | MemoryDeleted
    | MemoryPromoted
    | MemoryExpired
    | MemoryForgotten
    | MemoriesRetrieved
    | UserErased,
    Field(discriminator="type"),
]


def derived_id(*parts: str) -> str:
    """A deterministic id for an event derived from others, so reprocessing repeats it.

    Examples
    --------
    >>> derived_id("evt-1", "consolidate") == derived_id("evt-1", "consolidate")
    True
    """
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return digest[:32]


def json_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of every event type, keyed by its ``type`` value."""
    models: tuple[type[Event], ...] = (
        SessionStarted,
        MessageAdded,
        ToolCalled,
        TaskSet,
        TaskProgress,
        ScratchpadUpdated,
        EntityMentioned,
        SessionClosed,
        ConsolidationRequested,
        ExtractionRecorded,
        ExtractionFailure,
        MemoryAdded,
        MemoryReinforced,
        MemorySuperseded,
        MemoryDeleted,
        MemoryPromoted,
        MemoryExpired,
        MemoryForgotten,
        MemoriesRetrieved,
        UserErased,
    )
    return {
        model.model_fields["type"].default: model.model_json_schema(mode="validation")
        for model in models
    }
