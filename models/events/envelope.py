"""The envelope every event shares (Event), the field types events are built from, and the
rule that seals every field that can hold free text.

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
    JsonValue,
    StringConstraints,
)

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


def derived_id(*parts: str) -> str:
    """A deterministic id for an event derived from others, so reprocessing repeats it.

    Examples
    --------
    >>> derived_id("evt-1", "consolidate") == derived_id("evt-1", "consolidate")
    True
    """
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return digest[:32]
