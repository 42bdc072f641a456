"""Chat events in: made from an add's messages, JSONL lines or the quick one-message form,
and published to the chat topic."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, cast

from memstream.models.codec import EventLimits, InvalidEvent, decode_event
from memstream.models.events.chat import MessageAdded, SessionClosed, SessionStarted
from memstream.models.events.envelope import Event, Role, derived_id
from memstream.models.settings import Settings
from memstream.models.topics import CHAT_TYPES
from memstream.streams.kafka.publisher import KafkaPublisher
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.store import KeyStore, keystore_from_settings


@dataclass(frozen=True)
class LineError:
    """A JSONL line that is not a publishable event."""

    line: int
    reason: str


def read_events(
    lines: Iterable[str | bytes], max_bytes: int, limits: EventLimits | None = None
) -> tuple[list[Event], list[LineError]]:
    """Parse JSONL: the valid chat events, and the bad lines with their 1-based numbers.

    A bad line never stops the others: it is reported and the valid lines still publish.
    With ``limits``, an event a worker would refuse (a time outside the window, content
    over the limit) is a bad line too. Lines given as bytes (a file read as it is) must be
    UTF-8; a line that is not is a bad line.
    """
    events: list[Event] = []
    errors: list[LineError] = []
    for number, raw in enumerate(lines, start=1):
        try:
            line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError as exc:
            errors.append(LineError(number, f"{_not_utf8(exc)}: save the file as UTF-8"))
            continue
        if not line.strip():
            continue
        try:
            event = decode_event(line, max_bytes=max_bytes)
            if limits is not None:
                limits.check(event)
        except InvalidEvent as exc:
            errors.append(LineError(number, str(exc)))
            continue
        if event.type not in CHAT_TYPES:
            errors.append(LineError(number, f"{event.type!r} is not a chat event"))
            continue
        events.append(event)
    return events, errors


def _not_utf8(exc: UnicodeDecodeError) -> str:
    """What a line that is not UTF-8 holds: "not UTF-8 text (byte 0xff at byte 3)"."""
    return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at byte {exc.start + 1})"


class Message(TypedDict, total=False):
    """A chat message as mem0 (and OpenAI) take it; other keys are ignored."""

    role: str
    content: str
    name: str


def chat_events_for_add(
    messages: Sequence[Message],
    *,
    user_id: str,
    session_id: str | None = None,
    agent_id: str | None = None,
    close: bool = True,
    event_ids: Sequence[str] | None = None,
    occurred_at: datetime | None = None,
) -> tuple[str, list[Event]]:
    """The session id and the chat events one ``add`` publishes.

    With ``event_ids`` (one per message) every id is deterministic, the generated session id
    and the start and close ids included, so publishing the same call again repeats the same
    events. Messages get increasing event times one microsecond apart from ``occurred_at``
    (default: now).
    """
    if event_ids is not None:
        event_ids = list(event_ids)
        if len(event_ids) != len(messages):
            raise ValueError(f"{len(event_ids)} event ids for {len(messages)} messages")
        if len(set(event_ids)) != len(event_ids):
            raise ValueError("event ids must be unique")
    start = occurred_at or datetime.now(UTC)
    if start.tzinfo is None:
        raise ValueError("occurred_at needs a timezone")
    new_session = session_id is None
    if session_id is None:
        session_id = (
            f"session-{derived_id('client-session', user_id, *event_ids)}"
            if event_ids is not None
            else f"session-{uuid.uuid4()}"
        )
    envelope: dict[str, Any] = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}

    def new_id(*parts: str) -> str:
        return derived_id("client", user_id, session_id, *parts) if event_ids else str(uuid.uuid4())

    events: list[Event] = []
    if new_session:
        events.append(SessionStarted(event_id=new_id("start"), occurred_at=start, **envelope))
    for number, message in enumerate(messages):
        events.append(
            MessageAdded(
                event_id=event_ids[number] if event_ids is not None else str(uuid.uuid4()),
                occurred_at=start + timedelta(microseconds=number),
                role=cast(Role, message["role"]),
                content=message["content"],
                name=message.get("name"),
                **envelope,
            )
        )
    if close:
        last = events[-1].event_id if events else ""
        events.append(
            SessionClosed(
                event_id=new_id("close", last),
                occurred_at=start + timedelta(microseconds=len(messages)),
                reason="explicit",
                **envelope,
            )
        )
    return session_id, events


def quick_events(
    *,
    user_id: str,
    session_id: str,
    role: Role,
    text: str | None,
    agent_id: str | None = None,
    close: bool = False,
    now: datetime | None = None,
) -> list[Event]:
    """The events of the quick form: one message, and a close when asked."""
    messages: list[Message] = [] if text is None else [{"role": role, "content": text}]
    _, events = chat_events_for_add(
        messages, user_id=user_id, session_id=session_id, agent_id=agent_id, close=close,
        occurred_at=now,
    )
    return events


async def publish_events(
    settings: Settings, events: Sequence[Event], *, keys: KeyStore | None = None
) -> int:
    """Publish chat events keyed by user id (one user's events stay in order); wait for acks.

    Content is sealed with each user's key from ``keys`` (default: ``settings.keys_dir``,
    which must be the workers' key store), created on the user's first event. Nothing is
    sent if any event is one a worker would refuse (:func:`~memstream.streams.kafka.publisher.check_publishable`, and the
    sealed size).

    Raises
    ------
    ValueError
        An event's time is outside the window, or its content or size over the limits.
    memstream.streams.kafka.logid.LogLost
        The broker lost the log the data directory was built from: nothing is sent.
    """
    publisher = KafkaPublisher(
        settings, keys if keys is not None else keystore_from_settings(settings)
    )
    try:
        sent = await publisher.publish(Topics.from_settings(settings).chat, events)
    finally:
        await publisher.close()
    return len(sent)
