"""Upcasters: old payloads are rewritten to the current schema before validation.

An upcaster takes the raw dict of an event of one ``(type, schema_version)`` and returns
the dict of the next version. :meth:`Upcasters.upcast` applies them in sequence until no
upcaster matches, so a v1 payload read by a v3 schema passes through v1→v2→v3
(eventsourcing's ``upcast_vX_vY``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from memstream.models.events.envelope import CODE_PATTERN

Payload = dict[str, Any]
Upcaster = Callable[[Payload], Payload]


class UpcastError(ValueError):
    """An upcaster broke the rules of the registry (its message names the event type and
    versions only)."""


class Upcasters:
    """A registry of upcasters keyed by ``(event type, schema_version)``."""

    def __init__(self) -> None:
        self._by_version: dict[tuple[str, int], Upcaster] = {}

    def register(self, event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
        """Register a function upcasting ``event_type`` from ``from_version`` to the next."""

        def decorate(upcaster: Upcaster) -> Upcaster:
            key = (event_type, from_version)
            if key in self._by_version:
                raise ValueError(f"an upcaster for {key} is registered already")
            self._by_version[key] = upcaster
            return upcaster

        return decorate

    def upcast(self, payload: Payload) -> Payload:
        """Apply upcasters until the payload is at its newest known version."""
        event_type = payload.get("type")
        version = payload.get("schema_version", 1)
        while isinstance(event_type, str) and isinstance(version, int):
            upcaster = self._by_version.get((event_type, version))
            if upcaster is None:
                break
            payload = upcaster(dict(payload))
            new_version = payload.get("schema_version")
            if not isinstance(new_version, int) or new_version <= version:
                raise UpcastError(f"upcaster for {event_type} v{version} did not raise the version")
            version = new_version
        return payload


#: The upcasters of the current schema.
UPCASTERS = Upcasters()

#: What a v1 ``memory_added`` event says about its extractor: nothing was recorded.
UNRECORDED_EXTRACTOR = "unrecorded"


@UPCASTERS.register("memory_added", 1)
def upcast_memory_added_v1_v2(payload: Payload) -> Payload:
    """v2 names the extractor that proposed the memory; v1 events did not record it."""
    payload.setdefault("extractor", UNRECORDED_EXTRACTOR)
    payload["schema_version"] = 2
    return payload


@UPCASTERS.register("memory_added", 2)
def upcast_memory_added_v2_v3(payload: Payload) -> Payload:
    """v3 may carry the memory's vector; v2 events carry none (the projection embeds them)."""
    payload["schema_version"] = 3
    return payload


@UPCASTERS.register("memory_added", 3)
def upcast_memory_added_v3_v4(payload: Payload) -> Payload:
    """v4 may carry the memory's claim and the memories stating it; v3 events carry neither
    (their memories assert no claim, and nothing supersedes them by claim)."""
    payload["schema_version"] = 4
    return payload


@UPCASTERS.register("memory_reinforced", 1)
def upcast_memory_reinforced_v1_v2(payload: Payload) -> Payload:
    """v2 may name the memories stating the reinforced claim again; v1 names none."""
    payload["schema_version"] = 2
    return payload


@UPCASTERS.register("memory_superseded", 1)
def upcast_memory_superseded_v1_v2(payload: Payload) -> Payload:
    """v2 says how and by whom a memory was superseded, and when its claim stopped being
    true; every v1 supersession was a new value decided by rules, ending when it was
    recorded (no ``valid_until``)."""
    payload.setdefault("change", "updated")
    payload.setdefault("decided_by", "rules")
    payload["schema_version"] = 2
    return payload


#: What a v1 ``user_erased`` reason that is not a short code becomes: its words are not kept.
REDACTED_REASON = "redacted"
_CODE = re.compile(CODE_PATTERN)


@UPCASTERS.register("user_erased", 1)
def upcast_user_erased_v1_v2(payload: Payload) -> Payload:
    """v2 restricts the reason to a short code (it is never sealed: consumers read it after
    the user's key is destroyed). A v1 free-text reason becomes ``"redacted"``, whatever it
    held, so an erasure event always decodes; one that is a code already is kept."""
    if "reason" in payload:
        reason = payload["reason"]
        if not (isinstance(reason, str) and _CODE.fullmatch(reason)):
            payload["reason"] = REDACTED_REASON
    payload["schema_version"] = 2
    return payload
