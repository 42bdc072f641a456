"""Publishing chat events: from JSONL, stdin, or the quick one-message form."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, cast

from aiokafka import AIOKafkaProducer

from memstream.models.codec import EventLimits, InvalidEvent, decode_event, encode_event
from memstream.models.events import (
    Event,
    MessageAdded,
    Role,
    SessionClosed,
    SessionStarted,
    derived_id,
)
from memstream.models.settings import Settings
from memstream.models.topics import CHAT_TYPES
from memstream.streams.runtime.keys import BatchKeys, KeyStore, keystore_from_settings, seal_event
from memstream.streams.runtime.logid import claim_log
from memstream.streams.runtime.topics import Topics, ensure_topics


@dataclass(frozen=True)
class LineError:
    """A JSONL line that is not a publishable event."""

    line: int
    reason: str


def check_publishable(events: Sequence[Event], limits: EventLimits) -> None:
    """Refuse, before anything is sent, events a worker would dead-letter: a time outside
    the window (with this machine's clock), content over the limit.

    Raises
    ------
    ValueError
        Naming the first event at fault and why.
    """
    now = datetime.now(UTC)
    for event in events:
        try:
            limits.check(event, now=now)
        except InvalidEvent as exc:
            raise ValueError(f"event {event.event_id}: {exc}") from None


def check_encoded_size(event: Event, value: bytes, limits: EventLimits) -> None:
    """Refuse an event whose bytes (sealed, as sent) are over ``limits.max_event_bytes``."""
    if len(value) > limits.max_event_bytes:
        raise ValueError(
            f"event {event.event_id} is {len(value)} bytes, over the limit of "
            f"{limits.max_event_bytes}"
        )


def read_events(
    lines: Iterable[str], max_bytes: int, limits: EventLimits | None = None
) -> tuple[list[Event], list[LineError]]:
    """Parse JSONL: the valid chat events, and the bad lines with their 1-based numbers.

    A bad line never stops the others: it is reported and the valid lines still publish.
    With ``limits``, an event a worker would refuse (a time outside the window, content
    over the limit) is a bad line too.
    """
    events: list[Event] = []
    errors: list[LineError] = []
    for number, line in enumerate(lines, start=1):
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
    sent if any event is one a worker would refuse (:func:`check_publishable`, and the
    sealed size).

    Raises
    ------
    ValueError
        An event's time is outside the window, or its content or size over the limits.
    memstream.streams.runtime.logid.LogLost
        The broker lost the log the data directory was built from: nothing is sent.
    """
    limits = EventLimits.from_settings(settings)
    check_publishable(events, limits)
    keys = keys if keys is not None else keystore_from_settings(settings)
    sealed = await asyncio.to_thread(_sealed, events, keys)
    encoded = [(event, encode_event(event)) for event in sealed]
    for event, value in encoded:
        check_encoded_size(event, value, limits)
    await ensure_topics(settings)
    await claim_log(settings)  # refused (LogLost) when the broker lost the log
    topic = Topics.from_settings(settings).chat
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, key=event.user_id.encode(), value=value)
            for event, value in encoded
        ]
        for future in futures:
            await future
    finally:
        await producer.stop()
    return len(futures)


def _sealed(events: Sequence[Event], keys: KeyStore) -> list[Event]:
    """The events with their content sealed with their users' current keys."""
    keys = BatchKeys(keys)  # one look-up per user, not per event
    sealed = []
    for event in events:
        found = seal_event(event, keys)  # no key id: the user's key, created if none
        assert found is not None
        sealed.append(found)
    return sealed
