"""How the agents publish: events sealed with the key of what they derive from, sent to one
topic, and acknowledged by the broker before the agent moves on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from memstream.models.codec import encode_event
from memstream.models.events.envelope import Event
from memstream.streams.keys.sealing import seal_events
from memstream.streams.keys.store import KeyStore

__all__ = ["Publish", "send_all", "topic_publisher"]

log = logging.getLogger(__name__)

#: Publish events to one topic, each sealed with the key id beside it (None: its user's
#: current key); returns once the broker acknowledged every one.
Publish = Callable[[Sequence[Event], Sequence[str | None]], Awaitable[None]]


async def send_all(topic: Any, events: Sequence[Event]) -> None:
    """Send ``events`` to the Faust ``topic`` keyed by user id, then wait for every ack."""
    # Send them all, then wait for the broker's acks: the state change that follows must
    # never get ahead of what it announced.
    futures = [
        await topic.send(key=event.user_id.encode(), value=encode_event(event))
        for event in events
    ]
    for future in futures:
        await future


def topic_publisher(topic: Any, keys: KeyStore) -> Publish:
    """The :data:`Publish` of one Faust ``topic`` (raw key and value serialisers)."""

    async def publish(events: Sequence[Event], key_ids: Sequence[str | None]) -> None:
        # Sealing reads the key store (files): off the event loop.
        ready: list[Event] = await asyncio.to_thread(
            seal_events, events, keys, key_ids=key_ids, source="agents"
        )
        await send_all(topic, ready)

    return publish
