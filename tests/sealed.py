"""Reading sealed events back in tests: decoded, and opened with the key store."""

from __future__ import annotations

import asyncio

from memstream.models.codec import decode_event
from memstream.models.events.envelope import Event
from memstream.models.settings import Settings
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.keys.sealing import open_event
from memstream.streams.keys.store import keystore_from_settings


def opened(settings: Settings, raw: bytes) -> Event:
    """The event in ``raw`` with its content readable (its key must exist)."""
    event = open_event(decode_event(raw), keystore_from_settings(settings))
    assert event is not None, "the event's key is destroyed"
    return event


def topic_events(settings: Settings, topic: str) -> list[Event]:
    """Every event of ``topic``, opened, in partition then offset order."""
    return [opened(settings, r.value) for r in asyncio.run(read_topic(settings, topic))]
