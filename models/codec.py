"""Turning bytes from a topic into validated events and back."""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter, ValidationError

from memstream.models.events import AnyEvent, Event
from memstream.models.upcasting import UPCASTERS, Upcasters

_ANY_EVENT: TypeAdapter[Event] = TypeAdapter(AnyEvent)


class InvalidEvent(ValueError):
    """Raised for bytes that are not a valid memstream event; the message says why."""


def decode_event(
    raw: bytes | str | dict[str, Any],
    *,
    max_bytes: int = 1_000_000,
    upcasters: Upcasters = UPCASTERS,
) -> Event:
    """Parse, upcast and validate one event.

    Raises
    ------
    InvalidEvent
        With a short reason: too large, not JSON, not an object, or schema errors.
    """
    if isinstance(raw, dict):
        payload: Any = raw
    else:
        size = len(raw.encode() if isinstance(raw, str) else raw)
        if size > max_bytes:
            raise InvalidEvent(f"event is {size} bytes, over the limit of {max_bytes}")
        try:
            # Fast path: a current-version event validates straight from bytes (in Rust).
            # Old versions fail here (schema_version is pinned) and take the upcasting path.
            return _ANY_EVENT.validate_json(raw)
        except ValidationError:
            pass
        try:
            payload = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidEvent(f"not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise InvalidEvent(f"an event is a JSON object, not {type(payload).__name__}")
    try:
        payload = upcasters.upcast(payload)
        return _ANY_EVENT.validate_python(payload)
    except ValidationError as exc:
        raise InvalidEvent(_summarise(exc)) from None
    except (TypeError, ValueError) as exc:
        raise InvalidEvent(str(exc)) from None


def encode_event(event: Event) -> bytes:
    """The JSON bytes of ``event`` as published on a topic."""
    return event.model_dump_json(exclude_none=True).encode()


def _summarise(exc: ValidationError) -> str:
    """A one-line reason from a pydantic error, naming the fields at fault."""
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(part) for part in error["loc"]) or "event"
        parts.append(f"{where}: {error['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
