"""How the agents publish: events sealed with the key of what they derive from, sent to one
topic, and acknowledged by the broker before the agent moves on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from memstream.models.codec import encode_event
from memstream.models.events import Event
from memstream.streams.runtime.keys import BatchKeys, KeyStore, seal_event

__all__ = ["Publish", "seal_all", "send_all", "topic_publisher"]

log = logging.getLogger(__name__)

#: Publish events to one topic, each sealed with the key id beside it (None: its user's
#: current key); returns once the broker acknowledged every one.
Publish = Callable[[Sequence[Event], Sequence[str | None]], Awaitable[None]]


def seal_all(
    events: Sequence[Event], key_ids: Sequence[str | None], keys: KeyStore
) -> list[Event]:
    """The events sealed with the key of what they derive from (None: the user's current
    key); those whose key is destroyed meanwhile (an erasure) are dropped."""
    kept: list[Event] = []
    looked_up = BatchKeys(keys)  # looked up once per call: fresh after any erasure
    for event, key_id in zip(events, key_ids, strict=True):
        sealed_event = seal_event(event, looked_up, key_id=key_id)
        if sealed_event is None:
            log.info("%s %s dropped: its user was erased", event.type, event.event_id)
            continue
        kept.append(sealed_event)
    return kept


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
        ready = await asyncio.to_thread(seal_all, events, key_ids, keys)
        await send_all(topic, ready)

    return publish
