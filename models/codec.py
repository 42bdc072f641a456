"""Turning bytes from a topic into validated events and back."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, get_args, get_origin

import pydantic_core
from pydantic import (
    AwareDatetime,
    BaseModel,
    FutureDatetime,
    NaiveDatetime,
    PastDatetime,
    TypeAdapter,
    ValidationError,
)

from memstream.models.events.catalog import AnyEvent
from memstream.models.events.envelope import Event
from memstream.models.settings import Settings
from memstream.models.upcasting import UPCASTERS, UpcastError, Upcasters

_ANY_EVENT: TypeAdapter[Event] = TypeAdapter(AnyEvent)


class InvalidEvent(ValueError):
    """Raised for bytes that are not a valid memstream event; the message says why.

    The message never quotes the record: it is stored in clear in dead letters, and the
    record may hold a user's words. It names fields and limits only. ``detail`` may say
    more (names the record chose, such as an unknown field's): it is kept sealed.
    """

    def __init__(self, reason: str, detail: str | None = None) -> None:
        super().__init__(reason)
        self.detail = detail


def decode_event(
    raw: bytes | str | dict[str, Any],
    *,
    max_bytes: int = 1_000_000,
    upcasters: Upcasters = UPCASTERS,
) -> Event:
    """Parse, upcast and validate one event.

    Bounded before anything is parsed: the size is checked first, and the JSON parser
    (pydantic-core's, in Rust) limits nesting depth and number length itself, so a record
    nested 10,000 levels deep or holding a 5,000-digit number is refused with a reason, not
    a ``RecursionError`` or an integer-conversion ``ValueError``. Whatever else goes wrong
    while decoding comes out as :class:`InvalidEvent`.

    Raises
    ------
    InvalidEvent
        With a short reason: too large, not JSON, not an object, or schema errors.
    """
    try:
        return _decode(raw, max_bytes, upcasters)
    except InvalidEvent:
        raise
    except ValidationError as exc:
        raise InvalidEvent(_summarise(exc), _summarise(exc, plain=False)) from None
    except Exception as exc:  # noqa: BLE001 - a decoder must refuse, never crash its caller
        raise InvalidEvent(
            f"cannot be decoded ({type(exc).__name__})", f"{type(exc).__name__}: {exc}"
        ) from None


def _decode(raw: bytes | str | dict[str, Any], max_bytes: int, upcasters: Upcasters) -> Event:
    if isinstance(raw, dict):
        payload: Any = raw
    else:
        size = len(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw)
        if size > max_bytes:
            raise InvalidEvent(f"event is {size} bytes, over the limit of {max_bytes}")
        try:
            # Fast path: a current-version event validates straight from bytes (in Rust).
            # Old versions fail here (schema_version is pinned) and take the upcasting path.
            return _ANY_EVENT.validate_json(raw)
        except ValidationError:
            pass
        try:
            # Not json.loads: it recurses in C without a depth bound and converts numbers of
            # any length. pydantic-core's parser stops at a fixed depth and number size.
            payload = pydantic_core.from_json(raw)
        except ValueError as exc:
            raise InvalidEvent(f"not JSON: {_parser_reason(exc)}") from None
    if not isinstance(payload, dict):
        raise InvalidEvent(f"an event is a JSON object, not {type(payload).__name__}")
    try:
        payload = upcasters.upcast(payload)
    except UpcastError as exc:
        raise InvalidEvent(str(exc)) from None
    except ValidationError:
        raise
    except Exception as exc:  # noqa: BLE001 - an upcaster given a hostile payload
        raise InvalidEvent(
            f"cannot be upcast ({type(exc).__name__})", f"{type(exc).__name__}: {exc}"
        ) from None
    return _ANY_EVENT.validate_python(payload)


def _parser_reason(exc: ValueError) -> str:
    """The parser's reason without the input: its messages name a position, never content
    (``expected value at line 1 column 7``); anything longer is cut."""
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


#: The earliest event time accepted by default: no memstream event is older.
EARLIEST_EVENT_TIME = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class EventLimits:
    """What an event must keep to be taken in, beyond its schema: a size, a length of user
    content, and event times inside a sane window.

    The window runs from ``earliest`` to ``now + max_skew``. A producer checks with its own
    clock; a worker uses the time the log received the record (its broker timestamp, or
    the wall clock if that is later or missing), so a replay of the same record decides the
    same as the live worker did. Times outside it (year 1, year 9999) are refused: they
    cannot be turned into UTC or moved by a day without overflowing.

    Examples
    --------
    >>> limits = EventLimits()
    >>> limits.time_problem(datetime(1, 1, 1, tzinfo=UTC), now=datetime(2026, 1, 1, tzinfo=UTC))
    'is before 2000-01-01T00:00:00+00:00'
    """

    max_event_bytes: int = 1_000_000
    max_content_chars: int | None = None
    earliest: datetime = EARLIEST_EVENT_TIME
    max_skew: timedelta = timedelta(days=1)

    @classmethod
    def from_settings(cls, settings: Settings, *, derived: bool = False) -> EventLimits:
        """The limits ``settings`` configure for events from clients (the chat and accesses
        topics), or with ``derived`` for what the worker derives from them (consolidation
        spans and memory events: a span holds many messages, so it is bounded by the record
        size, ``max_record_bytes``, and has no content limit of its own)."""
        return cls(
            max_event_bytes=settings.max_record_bytes if derived else settings.max_event_bytes,
            max_content_chars=None if derived else settings.max_content_chars,
            earliest=settings.event_time_earliest,
            max_skew=timedelta(seconds=settings.event_time_skew_s),
        )

    def time_problem(self, moment: datetime, *, now: datetime, ahead: bool = False) -> str | None:
        """Why ``moment`` is outside the window at ``now``; None when it is inside. An end
        stated ahead (``ahead``) may be later than ``now``."""
        try:
            if moment < self.earliest:
                return f"is before {self.earliest.isoformat()}"
            latest = now + self.max_skew
            if moment > latest and not ahead:
                return f"is after {latest.isoformat(timespec='seconds')} (now plus the allowed skew)"
            moment.astimezone(UTC)
        except (OverflowError, ValueError):
            return "cannot be represented in UTC"
        return None

    def check(self, event: Event, *, now: datetime | None = None) -> None:
        """Raise :class:`InvalidEvent` if ``event`` breaks a limit: its times (at ``now``,
        the wall clock by default) or the length of its user content."""
        self.check_times(event, now=now)
        self.check_content(event)

    def check_times(self, event: Event, *, now: datetime | None = None) -> None:
        """Raise :class:`InvalidEvent` if any time ``event`` carries is outside the window
        at ``now``: ``occurred_at`` and the times of the models inside it (a transcript's
        messages, a session's start)."""
        now = now or datetime.now(UTC)
        for name, moment in _event_times(event):
            ahead = name.rsplit(".", 1)[-1] in ENDS
            problem = self.time_problem(moment, now=now, ahead=ahead)
            if problem is not None:
                raise InvalidEvent(f"{event.type}.{name} {problem}")

    def check_content(self, event: Event) -> None:
        """Raise :class:`InvalidEvent` if ``event``'s user content is longer than
        ``max_content_chars`` (check it opened: sealed fields hold placeholders)."""
        if self.max_content_chars is None:
            return
        size = content_chars(event)
        if size > self.max_content_chars:
            raise InvalidEvent(
                f"{event.type} content is {size} characters, over the limit of "
                f"{self.max_content_chars}"
            )


#: Times that end something ahead of when they were said ("until Friday"): checked for
#: the earliest time and for being representable, never against the clock.
ENDS = frozenset({"valid_until"})


def _event_times(event: Event) -> list[tuple[str, datetime]]:
    """Every datetime in ``event``: its fields, and the fields of models in tuples (only the
    fields whose type can hold one: see :func:`_time_fields`)."""
    direct, nested = _time_fields(type(event))
    found: list[tuple[str, datetime]] = []
    for name in direct:
        value = getattr(event, name)
        if isinstance(value, datetime):
            found.append((name, value))
    for name, inner_names in nested:
        value = getattr(event, name)
        if isinstance(value, BaseModel):
            for inner in inner_names:
                moment = getattr(value, inner, None)
                if isinstance(moment, datetime):
                    found.append((f"{name}.{inner}", moment))
            continue
        for index, item in enumerate(value or ()):
            for inner in inner_names:
                moment = getattr(item, inner, None)
                if isinstance(moment, datetime):
                    found.append((f"{name}.{index}.{inner}", moment))
    return found


#: What a field holding a datetime is annotated with: the class, or pydantic's wrappers of it.
_DATETIME_TYPES = frozenset({datetime, AwareDatetime, NaiveDatetime, PastDatetime, FutureDatetime})


@functools.cache
def _time_fields(model: type[BaseModel]) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]:
    """The fields of ``model`` that can hold a datetime, and its tuple fields of models with
    such fields (with theirs): worked out once per event type, not per event."""
    direct: list[str] = []
    nested: list[tuple[str, tuple[str, ...]]] = []
    for name, field in model.model_fields.items():
        kinds = _types_in(field.annotation)
        if kinds & _DATETIME_TYPES:
            direct.append(name)
        for kind in kinds:
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                inner = _time_fields(kind)[0]
                if inner:
                    nested.append((name, inner))
    return tuple(direct), tuple(nested)


def _types_in(annotation: Any) -> set[Any]:
    """The classes an annotation names, through ``Annotated``, unions, tuples and lists."""
    found: set[Any] = set()
    pending = [annotation]
    while pending:
        item = pending.pop()
        args = get_args(item)
        if args:
            pending.extend(args)
            origin = get_origin(item)
            if isinstance(origin, type):
                found.add(origin)
        elif isinstance(item, type):
            found.add(item)
    return found


def content_chars(event: Event) -> int:
    """Characters of user content an event carries (its ``content_fields``; structured
    values count as their JSON)."""
    total = 0
    for name in event.content_fields:
        value = getattr(event, name, None)
        if isinstance(value, str):
            total += len(value)
        elif value is not None:
            total += len(json.dumps(_plain(value), ensure_ascii=False, default=str))
    return total


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def log_time(record: Any) -> datetime | None:
    """When the log received ``record`` (a Kafka record: aiokafka's, whose ``timestamp`` is
    in milliseconds, or Faust's, in seconds); None without a usable timestamp."""
    stamp = getattr(record, "timestamp", None)
    if not isinstance(stamp, int | float) or stamp < 0:
        return None
    seconds = stamp if isinstance(stamp, float) else stamp / 1000
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def worker_now(record: Any) -> datetime:
    """The "now" a worker checks a record's event times against: when the log received it,
    so a replay decides the same; the wall clock when that is missing or later (a producer
    that set a timestamp in the future gains nothing by it)."""
    wall = datetime.now(UTC)
    received = log_time(record)
    return wall if received is None else min(received, wall)


def encode_event(event: Event) -> bytes:
    """The JSON bytes of ``event`` as published on a topic."""
    return event.model_dump_json(exclude_none=True).encode()


def _summarise(exc: ValidationError, *, plain: bool = True) -> str:
    """A one-line reason from a pydantic error, naming the fields at fault.

    ``plain`` (the reason kept in clear): only schema words go into it, pydantic's messages
    (never the input value) and the parts of an error's location that are field names, type
    tags or positions; a location part that came from the record (an unknown field's name,
    a key of a tool call's arguments) is shown as ``…``. Otherwise locations are whole.
    """
    parts = []
    for error in exc.errors(include_url=False, include_input=False)[:5]:
        located = (_location_part(part) if plain else str(part) for part in error["loc"])
        where = ".".join(located) or "event"
        parts.append(f"{where}: {error['msg'][:200]}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _location_part(part: str | int) -> str:
    if isinstance(part, int) or part in _SCHEMA_WORDS:
        return str(part)
    return "…"


def _schema_words() -> frozenset[str]:
    """Every field name and type tag of the event schema (and of the models inside it)."""
    words: set[str] = set()
    pending: list[Any] = [_ANY_EVENT.json_schema()]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            words.update(k for k in node.get("properties", {}) if isinstance(k, str))
            for key in ("const", "title"):
                if isinstance(node.get(key), str):
                    words.add(node[key])
            if isinstance(node.get("enum"), list):
                words.update(v for v in node["enum"] if isinstance(v, str))
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    # Names pydantic itself puts in locations (union members, JSON value kinds).
    return frozenset(words | {"str", "int", "float", "bool", "list", "dict", "function-after"})


_SCHEMA_WORDS = _schema_words()
