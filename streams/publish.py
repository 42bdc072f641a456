"""Publishing chat events: from JSONL, stdin, or the quick one-message form."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from aiokafka import AIOKafkaProducer

from memstream.models.codec import InvalidEvent, decode_event, encode_event
from memstream.models.events import Event, MessageAdded, Role, SessionClosed
from memstream.models.settings import Settings
from memstream.streams.agents import CHAT_TYPES
from memstream.streams.topics import Topics, ensure_topics


@dataclass(frozen=True)
class LineError:
    """A JSONL line that is not a publishable event."""

    line: int
    reason: str


def read_events(lines: Iterable[str], max_bytes: int) -> tuple[list[Event], list[LineError]]:
    """Parse JSONL: the valid chat events, and the bad lines with their 1-based numbers.

    A bad line never stops the others: it is reported and the valid lines still publish.
    """
    events: list[Event] = []
    errors: list[LineError] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = decode_event(line, max_bytes=max_bytes)
        except InvalidEvent as exc:
            errors.append(LineError(number, str(exc)))
            continue
        if event.type not in CHAT_TYPES:
            errors.append(LineError(number, f"{event.type!r} is not a chat event"))
            continue
        events.append(event)
    return events, errors


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
    now = now or datetime.now(UTC)
    events: list[Event] = []
    if text is not None:
        events.append(
            MessageAdded(
                event_id=str(uuid.uuid4()),
                user_id=user_id,
                agent_id=agent_id,
                session_id=session_id,
                occurred_at=now,
                role=role,
                content=text,
            )
        )
    if close:
        events.append(
            SessionClosed(
                event_id=str(uuid.uuid4()),
                user_id=user_id,
                agent_id=agent_id,
                session_id=session_id,
                occurred_at=now,
                reason="explicit",
            )
        )
    return events


async def publish_events(settings: Settings, events: Sequence[Event]) -> int:
    """Publish chat events keyed by user id (one user's events stay in order); wait for acks."""
    await ensure_topics(settings)
    topic = Topics.from_settings(settings).chat
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, key=event.user_id.encode(), value=encode_event(event))
            for event in events
        ]
        for future in futures:
            await future
    finally:
        await producer.stop()
    return len(futures)
