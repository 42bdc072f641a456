"""Records off a topic checked and opened: the right type for the topic, keyed by the
event's user, within the limits, and its content readable with the user's key."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from memstream.models.codec import EventLimits, InvalidEvent, decode_event
from memstream.models.crypto import SealError
from memstream.models.events.envelope import Event
from memstream.streams.keys.sealing import open_event
from memstream.streams.keys.store import KeyStore


def decode_checked(
    raw: bytes | None,
    key: bytes | None,
    allowed: Sequence[str],
    limits: EventLimits,
    *,
    now: datetime | None = None,
) -> Event:
    """Decode an event and check it belongs on this topic, under this key, and within
    ``limits`` at ``now`` (see :func:`memstream.models.codec.worker_now`).

    Raises
    ------
    InvalidEvent
        If the bytes are not a valid event, the type is wrong for the topic, a time is
        outside the window, or the message key is missing or not the event's user id (keys
        decide partitions: an unkeyed or wrongly keyed event lands on another partition than
        the user's other events, and their order, which the session fold and memory
        decisions rely on, is lost).
    """
    if raw is None:
        raise InvalidEvent("empty message (tombstone) on an event topic")
    event = decode_event(raw, max_bytes=limits.max_event_bytes)
    if event.type not in allowed:
        raise InvalidEvent(f"event type {event.type!r} does not belong on this topic")
    if key is None:
        raise InvalidEvent("message has no key: memstream topics are keyed by user_id")
    if key != event.user_id.encode("utf-8", "surrogatepass"):
        raise InvalidEvent("message key is not the event's user_id")
    # The content limit applies to the opened content (decode_opened): not checked here.
    limits.check_times(event, now=now)
    return event


class Opened(NamedTuple):
    """An event off a topic with its content readable, and the id of the key it was sealed
    with (None: it was not sealed). Events derived from it are sealed with the same key."""

    event: Event
    key_id: str | None


def decode_opened(
    raw: bytes | None,
    key: bytes | None,
    allowed: Sequence[str],
    limits: EventLimits,
    keys: KeyStore | None,
    *,
    now: datetime | None = None,
    accept_legacy: bool | None = None,
) -> Opened | None:
    """:func:`decode_checked`, then the content opened with the user's key: None when that
    key is destroyed (the user was erased: the event is skipped, it is not an error).

    An event with no ``encryption`` (older events, raw producers) is used as it is; with
    ``keys`` None nothing is opened. The content limit is checked on the opened content.
    ``accept_legacy`` decides whether events sealed by the legacy scheme open (None: as
    the key store says, see :func:`~memstream.streams.keys.sealing.open_event`).

    Raises
    ------
    InvalidEvent
        As :func:`decode_checked`, and for sealed content that does not open with its key
        (altered in the log), names a key of another user, or is a legacy seal refused; and
        for content over ``limits.max_content_chars``.
    """
    event = decode_checked(raw, key, allowed, limits, now=now)
    key_id = event.encryption.key_id if event.encryption is not None else None
    if keys is not None:
        try:
            opened = open_event(event, keys, accept_legacy=accept_legacy)
        except SealError as exc:
            raise InvalidEvent(str(exc)) from None
        if opened is None:
            return None
        event = opened
    limits.check_content(event)
    return Opened(event, key_id)
