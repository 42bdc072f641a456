"""Event schema: frozen pydantic v2 events sharing one envelope.

Every event carries a client-assigned ``event_id`` (the idempotency key), its ``type``,
``schema_version``, the ``user_id`` it belongs to, an optional ``agent_id``, the
``session_id`` and ``occurred_at`` (event time, timezone-aware). Unknown fields are
rejected. ``encryption`` is reserved for per-user encryption of content fields: when set,
the fields it names hold ciphertext, and erasing a user destroys the key.

**Every field that can hold free text is sealed, by construction.** Defining an event class
checks its fields (:meth:`Event.__pydantic_init_subclass__`): a field whose type can hold
free text (a string, a dict, a JSON value, a tuple of strings, a model holding any of them)
must be one of the class's ``content_fields`` (sealed with the user's key) or be named in
:data:`PLAIN_TEXT_FIELDS` (the envelope, ids, provenance), else the class does not define.
Fields whose type cannot hold text (numbers, booleans, times, ``Literal`` choices, short
codes of :data:`Code`, models of those) are plain by their type.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import hashlib
import math
import types
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
)

from memstream.models.vectors import MAX_PACKED_CHARS, PACKED_PATTERN

#: Identifiers come from clients: bounded, printable, never parsed as syntax anywhere.
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")]
Text = Annotated[str, StringConstraints(max_length=1_000_000)]
Role = Literal["user", "assistant", "system", "tool"]
#: A short machine code (``requested``, ``gdpr.art17``): what a field may hold that must stay
#: readable without the user's key yet never carry the user's words. Its pattern is what
#: makes a string "not free text" for the content check (see :func:`can_hold_text`).
CODE_PATTERN = r"^[a-z0-9_.-]{1,64}$"
Code = Annotated[str, StringConstraints(pattern=CODE_PATTERN)]
#: Why a time is refused that has a zone but no UTC equivalent (one line, for every interface).
OUTSIDE_UTC = (
    "is outside the years 1 to 9999 in UTC: give a time from 0001-01-01T00:00:00Z to "
    "9999-12-31T23:59:59Z"
)


def utc_instant(moment: dt.datetime) -> dt.datetime:
    """``moment`` unchanged if it is an instant memstream can compare and store: it has a
    time zone and, converted to UTC, lies in the years 1 to 9999. Every store keeps times in
    UTC, so ``0001-01-01T00:00+14:00`` (a day before year 1 in UTC) names no time there.

    Raises
    ------
    ValueError
        No time zone, or no UTC equivalent; the message is one line, for any interface.

    Examples
    --------
    >>> utc_instant(dt.datetime(2026, 5, 1, 9, tzinfo=dt.UTC)).year
    2026
    >>> utc_instant(dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=14))))
    Traceback (most recent call last):
    ...
    ValueError: is outside the years 1 to 9999 in UTC: give a time from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z
    """
    if moment.utcoffset() is None:
        raise ValueError("needs a time zone (like 2026-05-01T09:00:00Z or +02:00)")
    try:
        moment.astimezone(dt.UTC)
    except OverflowError:
        raise ValueError(OUTSIDE_UTC) from None
    return moment


#: A time a caller names (a search's ``as_of``, a filter's bounds): zoned, with a UTC equivalent.
UtcInstant = Annotated[AwareDatetime, AfterValidator(utc_instant)]

#: Fields that stay plain although their type could hold text. Everything here routes,
#: orders, deduplicates or joins events, or names the software that made them; none of it
#: is taken from what the user said. Adding a name here exempts it in every event class.
PLAIN_TEXT_FIELDS: frozenset[str] = frozenset(
    {
        # The envelope: keys, partitions, ordering and idempotency work on sealed events.
        # ``encryption`` holds the key id, the sealed field names and the ciphertext.
        "event_id",
        "type",
        "user_id",
        "agent_id",
        "session_id",
        "encryption",
        # Ids of other events and memories: minted by memstream (derived_id, uuid4) or by
        # the client as opaque idempotency keys; projections and history join on them.
        "memory_id",
        "superseded_by",
        "extraction_event_id",
        "consolidation_event_id",
        "source_event_ids",
        "last_event_id",
        "erasure_id",
        # The memories a claim is stated in, and the claim an outdated memory states: ids of
        # memories, minted by memstream (derived_id).
        "stated_in",
        "states",
        "claim_memory_id",
        # Provenance: which extractor, LLM model and prompt made an extraction or memory.
        # Operator configuration (settings, code), never the user's words; the failure and
        # LLM-cost reports group by them, and memories of two extractors are told apart.
        "extractor",
        "extractor_version",
        "model",
        "prompt_version",
        # The embedder that made a memory's vector: operator configuration too, and the
        # projection checks it against its own model before it takes the vector.
        "embedding_model",
    }
)

#: Nesting a free-form JSON value may have (tool arguments and results).
MAX_JSON_DEPTH = 32


def _plain_json(value: JsonValue) -> JsonValue:
    """Refuse NaN and infinity (JSON cannot carry them back: they would come out as null)
    and nesting deeper than :data:`MAX_JSON_DEPTH`, anywhere inside ``value``."""
    pending: list[tuple[JsonValue, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError("NaN and infinity are not JSON numbers")
        if isinstance(item, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return value


#: A free-form JSON value from a client: finite numbers, bounded nesting.
JsonData = Annotated[JsonValue, AfterValidator(_plain_json)]


class Frozen(BaseModel):
    """Base of every value object: immutable, unknown fields rejected."""

    # No NaN or infinity anywhere: JSON cannot carry them back (pydantic writes null), so
    # an event holding one would change on its way through the log.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


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


#: The envelope: never sealed, whatever a class declares.
ENVELOPE_FIELDS: frozenset[str] = frozenset(
    {"event_id", "type", "schema_version", "user_id", "agent_id", "session_id", "occurred_at",
     "encryption"}
)


class Event(Frozen):
    """The envelope every memstream event shares.

    A subclass whose fields could carry free text outside its ``content_fields`` (and
    :data:`PLAIN_TEXT_FIELDS`) fails to define, with a ``TypeError`` naming the field.
    """

    #: Fields holding user content; the only ones encryption may cover, and every field
    #: that can hold free text must be one (checked when a subclass is defined).
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

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        check_content_fields(cls)


#: Types whose values are never text: numbers, booleans, times, enumerations.
_NOT_TEXT_TYPES: tuple[type, ...] = (
    int,
    float,
    bool,
    decimal.Decimal,
    dt.datetime,
    dt.date,
    dt.time,
    dt.timedelta,
    enum.Enum,
)


def can_hold_text(annotation: Any, metadata: Sequence[Any] = ()) -> bool:
    """Whether a value of ``annotation`` (with pydantic field ``metadata``) can carry free
    text: a string (unless it is a :data:`Code`), a mapping (its keys are text too), a JSON
    value, or a union, collection or model holding one. Unknown types count as text, so a
    new kind of field must be decided on, not let through.

    In a nested model, fields named in :data:`PLAIN_TEXT_FIELDS` are plain as they are in
    an event (a transcript message's ``event_id``, a retrieved memory's ``memory_id``).

    Examples
    --------
    >>> can_hold_text(int), can_hold_text(tuple[str, ...]), can_hold_text(Code)
    (False, True, False)
    """
    return _can_hold_text(annotation, tuple(metadata), frozenset())


def _can_hold_text(annotation: Any, metadata: tuple[Any, ...], seen: frozenset[type]) -> bool:
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *extra = get_args(annotation)
        return _can_hold_text(base, (*metadata, *extra), seen)
    if annotation is str:
        # A code's pattern leaves no room for words: the one string type that is not text.
        return not any(
            isinstance(m, StringConstraints) and m.pattern == CODE_PATTERN for m in metadata
        )
    if annotation is None or annotation is type(None) or origin is Literal:
        return False
    if annotation is AwareDatetime:
        return False
    if origin is Union or origin is types.UnionType:
        return any(_can_hold_text(arg, (), seen) for arg in get_args(annotation))
    if origin is not None and isinstance(origin, type):
        if issubclass(origin, Mapping | tuple | list | set | frozenset):
            args = [arg for arg in get_args(annotation) if arg is not Ellipsis]
            return not args or any(_can_hold_text(arg, (), seen) for arg in args)
        return True
    if isinstance(annotation, type):
        if issubclass(annotation, _NOT_TEXT_TYPES):
            return False
        if issubclass(annotation, BaseModel):
            if annotation in seen:
                return False  # a recursive model: its other fields decide
            inner = seen | {annotation}
            return any(
                _can_hold_text(field.annotation, tuple(field.metadata), inner)
                for name, field in annotation.model_fields.items()
                if name not in PLAIN_TEXT_FIELDS
            )
    # JsonValue, Any, bare containers, forward references, anything else: text, until decided.
    return True


def check_content_fields(cls: type[Event]) -> None:
    """Raise ``TypeError`` unless every field of ``cls`` that can hold free text is one of
    its ``content_fields`` or named in :data:`PLAIN_TEXT_FIELDS`, and every content field is
    a field of ``cls`` outside the envelope.

    Called when an :class:`Event` subclass is defined, so an unsealed text field cannot
    be added by accident.
    """
    declared = cls.content_fields
    unknown = [name for name in declared if name not in cls.model_fields]
    if unknown:
        raise TypeError(f"{cls.__name__}.content_fields names no field {unknown}")
    enveloped = sorted(set(declared) & ENVELOPE_FIELDS)
    if enveloped:
        raise TypeError(
            f"{cls.__name__}.content_fields names envelope fields {enveloped}: they must stay "
            "readable for keys, ordering and idempotency"
        )
    if len(set(declared)) != len(declared):
        raise TypeError(f"{cls.__name__}.content_fields names a field twice")
    for name, field in cls.model_fields.items():
        if name in declared or name in PLAIN_TEXT_FIELDS:
            continue
        if can_hold_text(field.annotation, field.metadata):
            raise TypeError(
                f"{cls.__name__}.{name} can hold free text but is not sealed: add it to "
                f"{cls.__name__}.content_fields (or, if it can never hold the user's words, "
                "make its type a number, Literal or Code, or name it in PLAIN_TEXT_FIELDS "
                "with the reason why)"
            )


# --- chat events (topic: chat) ---------------------------------------------------------


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


#: How many values an attribute holds at once: ``one`` (home, employer, budget: a new value
#: replaces the old) or ``many`` (pets, allergies, likes: a new value is one more).
Cardinality = Literal["one", "many"]
#: What a statement's wording says about earlier values: ``state`` nothing, ``change`` that
#: something changed ("moved to", "now", "switched to", "went up to"), ``also`` that the value
#: is one more ("also", "another", "a second").
ClaimCue = Literal["state", "change", "also"]
#: The LLM extractor's decision against the user's current claims on the same attribute.
ClaimOperation = Literal["add", "update", "retract", "none"]
ClaimText = Annotated[str, StringConstraints(max_length=500)]


class Claim(Frozen):
    """What a fact or preference asserts, with when it holds: the belief behind a memory.

    ``subject`` is who it is about: the speaker (``User``, or their name when several people
    speak) or someone they talk about (``User's sister``). ``attribute`` is a normalised key
    (``home``, ``employer``, ``budget``, ``sister's name``; empty when the statement names only
    the value it replaces, ``replaces``). ``polarity`` False asserts the value no longer holds
    ("not vegetarian any more"). The claim is valid in event time from ``valid_from`` (the
    turn that stated it) until the turn that changed or retracted it, or until
    ``valid_until`` when the statement gave its own end ("in Berlin this week").
    """

    subject: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    attribute: Annotated[str, StringConstraints(max_length=200)]
    value: ClaimText
    polarity: bool = True
    cardinality: Cardinality = "one"
    valid_from: AwareDatetime
    valid_until: AwareDatetime | None = None
    #: An earlier value the statement itself names ("2,000, not 1,500"; "from Postgres").
    replaces: ClaimText | None = None
    cue: ClaimCue = "state"
    #: Set by the LLM extractor only: its decision, and the memory id of the claim it names.
    operation: ClaimOperation | None = None
    target: Identifier | None = None


class MemoryCandidate(Frozen):
    """One memory an extractor proposes."""

    memory_type: MemoryType
    content: Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
    importance: float = Field(ge=0, le=1)
    source_event_ids: tuple[Identifier, ...] = ()
    entities: tuple[str, ...] = ()
    #: The conversation around the memory (day, neighbouring turns, who said what), indexed
    #: and returned with it; every turn it shows is in ``source_event_ids``.
    context: Annotated[str, StringConstraints(max_length=20_000)] = ""
    #: What the memory asserts (a fact or preference), when the extractor could tell.
    claim: Claim | None = None
    #: An end the memory states itself ("I'm at the Lyon branch until Friday"): it holds
    #: until then (event time).
    valid_until: AwareDatetime | None = None


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

    #: The reason quotes the extractor's error, which can quote the reply (user content).
    content_fields: ClassVar[tuple[str, ...]] = ("raw_response", "reason")
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
    ``"unrecorded"`` (see :mod:`memstream.models.upcasting`). Version 3 carries the memory's
    vector (``vector``, packed by :func:`memstream.models.vectors.pack_vector`, and the
    ``embedding_model`` that made it): the decider embeds a memory once, and every projection
    and replay takes that vector instead of embedding again. Earlier events have none (the
    projection embeds them). Version 4 carries the memory's ``claim`` (what a fact or
    preference asserts, with its validity) and ``stated_in``, the memories of the same
    extraction that state it (its turn's episode, the summary quoting it); an episode's or
    summary's carries ``states``, the claims it states; earlier events have none.
    """

    #: The entities are names taken from the user's words: content too; so is the context,
    #: the vector (it reveals its text to whoever holds the model) and the claim.
    content_fields: ClassVar[tuple[str, ...]] = (
        "content", "entities", "context", "vector", "claim"
    )
    type: Literal["memory_added"] = "memory_added"
    schema_version: Literal[4] = 4  # type: ignore[assignment]
    extractor: Identifier
    memory_id: Identifier
    memory_type: MemoryType
    content: Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
    importance: float = Field(ge=0, le=1)
    tier: Tier = "long_term"
    extraction_event_id: Identifier
    source_event_ids: tuple[Identifier, ...] = ()
    entities: tuple[str, ...] = ()
    #: The conversation around the memory, as the extractor gave it (see ``MemoryCandidate``).
    context: Annotated[str, StringConstraints(max_length=20_000)] = ""
    #: The embedding of what the memory is found by (its ``search_text``), float32 in base64.
    vector: (
        Annotated[str, StringConstraints(max_length=MAX_PACKED_CHARS, pattern=PACKED_PATTERN)]
        | None
    ) = None
    #: The embedder that made ``vector`` (its model id, as the projection's table records it).
    embedding_model: Identifier | None = None
    #: What the memory asserts, when it is a fact or preference the extractor could read.
    claim: Claim | None = None
    #: The memories that state the claim too (episodes, summaries), so they can be marked
    #: when it ends.
    stated_in: tuple[Identifier, ...] = ()
    #: An episode's or summary's: the claims of its extraction it states (memory ids). It
    #: no longer holds once every one of them has ended.
    states: tuple[Identifier, ...] = ()
    #: An end the memory states itself (see ``MemoryCandidate``).
    valid_until: AwareDatetime | None = None


#: How a supersession ended its memory: a new value (``updated``), or the value taken back
#: with nothing in its place (``retracted``: "not vegetarian any more", "left Acme").
ChangeKind = Literal["updated", "retracted"]
#: Who decided a change: the rules of :mod:`memstream.models.beliefs`, or the LLM extractor.
DecidedBy = Literal["rules", "llm"]


class MemoryReinforced(Event):
    """A candidate repeated a memory the user already has: it reinforces it, no new row.

    Version 2 adds ``stated_in``: the memories of the reinforcing extraction that state the
    same claim again (its turn's episode), marked with it when the claim ends.
    """

    type: Literal["memory_reinforced"] = "memory_reinforced"
    schema_version: Literal[2] = 2  # type: ignore[assignment]
    memory_id: Identifier
    extraction_event_id: Identifier
    source_event_ids: tuple[Identifier, ...] = ()
    similarity: float = Field(ge=-1, le=1)
    stated_in: tuple[Identifier, ...] = ()


class MemorySuperseded(Event):
    """A newer memory replaces an older one: the old one leaves the current view, not history.

    Version 2 says how (``change``: a new value, or a retraction), who decided it
    (``decided_by``) and when the old claim stopped being true in event time
    (``valid_until``: the turn that changed it; None for version 1 events, whose end is the
    event's own time). When a claim stated earlier arrives after the one that replaced it
    (sessions consolidated out of order), ``memory_id`` is the new memory and
    ``superseded_by`` the earlier-recorded one that is still true.
    """

    #: The decider's reason quotes the memories' text.
    content_fields: ClassVar[tuple[str, ...]] = ("reason",)
    type: Literal["memory_superseded"] = "memory_superseded"
    schema_version: Literal[2] = 2  # type: ignore[assignment]
    memory_id: Identifier
    superseded_by: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)]
    similarity: float = Field(ge=-1, le=1)
    change: ChangeKind = "updated"
    decided_by: DecidedBy = "rules"
    valid_until: AwareDatetime | None = None


class MemoryOutdated(Event):
    """A claim that a memory states (an episode, a summary) ended, or ends, at
    ``valid_until`` (event time). Once every claim the memory states has ended, the memory
    no longer holds: it stays in the current view, marked and ranked below what replaced
    the claim (``superseded_by``; None when the claim ran out on its own: "in Berlin this
    week").
    """

    type: Literal["memory_outdated"] = "memory_outdated"
    memory_id: Identifier
    #: The claim (a memory id) whose end outdates it.
    claim_memory_id: Identifier
    superseded_by: Identifier | None = None
    valid_until: AwareDatetime


class MemoryDeleted(Event):
    """A memory was deleted on request: out of every view; its history stays in the log."""

    #: Given by the client or the user ("I told you I moved").
    content_fields: ClassVar[tuple[str, ...]] = ("reason",)
    type: Literal["memory_deleted"] = "memory_deleted"
    memory_id: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)] = "requested"


class MemoryPromoted(Event):
    """A short-term memory moved to the long-term tier (retrieved often enough)."""

    #: Written by the tier keeper, but free text: sealed like any other.
    content_fields: ClassVar[tuple[str, ...]] = ("reason",)
    type: Literal["memory_promoted"] = "memory_promoted"
    memory_id: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)]


class MemoryExpired(Event):
    """A short-term memory's time ran out: it leaves the ranked view; episodes stay findable."""

    #: Written by the tier keeper, but free text: sealed like any other.
    content_fields: ClassVar[tuple[str, ...]] = ("reason",)
    type: Literal["memory_expired"] = "memory_expired"
    memory_id: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)] = "ttl"


class MemoryForgotten(Event):
    """A forgetting policy let a memory go: it leaves search and the current view like an
    expired one, and stays in history (and in point-in-time reads before ``occurred_at``).

    The decision is recorded, not derived: ``score`` and ``threshold`` are what the policy
    saw at ``occurred_at``, so a replay applies the event and never scores again.
    """

    #: Written by the policy, but free text: sealed like any other.
    content_fields: ClassVar[tuple[str, ...]] = ("reason",)
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
    | MemoryOutdated
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
    | MemoryOutdated
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
    | MemoryOutdated
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
        MemoryOutdated,
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
