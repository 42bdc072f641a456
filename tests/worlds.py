"""A service on the fakes for the tests of its interfaces (the HTTP API, the clients): an
in-memory index holding some memories, an in-memory publisher as the log, and the log reader
of the service answering from that publisher, so history and sources read what was sent."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakes import InMemoryMemoryIndex, InMemoryPublisher

from memstream.models.codec import EventLimits
from memstream.models.events import MemoryAdded
from memstream.models.settings import Settings
from memstream.projections.memories import SourcePosition
from memstream.streams.runtime.broker import free_port
from memstream.streams.runtime.keys import FileKeyStore
from memstream.streams.service.app import Service
from memstream.streams.service.container import Container

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def fact_added(
    memory_id: str, user: str, content: str, offset: int
) -> tuple[MemoryAdded, SourcePosition]:
    """A fact of ``user`` as the worker adds it, and where it sits on the memories topic."""
    event = MemoryAdded(
        event_id=f"add-{memory_id}",
        user_id=user,
        session_id="s1",
        occurred_at=T0,
        memory_id=memory_id,
        memory_type="fact",
        content=content,
        importance=0.7,
        extraction_event_id="x1",
        extractor="test/1",
        source_event_ids=(f"m-{memory_id}",),
    )
    return event, SourcePosition("t.memories", 0, offset)


def service_world(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    memories: Sequence[tuple[str, str, str]],
) -> tuple[Service, InMemoryPublisher]:
    """A service over the fakes holding ``memories`` (``(user, memory id, content)`` facts,
    each also on the memories topic, sealed with its user's key as a worker writes it)."""
    # No worker and no broker answer on these ports (the integration tier runs workers on
    # the default web port in parallel with the unit tiers).
    settings = Settings(
        data_dir=tmp_path, topic_prefix="t", web_port=free_port(), broker=f"127.0.0.1:{free_port()}"
    )
    keys = FileKeyStore(settings.keys_dir)
    publisher = InMemoryPublisher(keys, EventLimits.from_settings(settings))
    index = InMemoryMemoryIndex()
    for offset, (user, memory_id, content) in enumerate(memories):
        event, position = fact_added(memory_id, user, content, offset)
        index.apply([(event, position)])
        asyncio.run(publisher.publish("t.memories", [event]))

    async def read_topic(
        settings: Settings, topic: str, timeout_s: float = 30.0, *, key: bytes | None = None
    ) -> list[Any]:
        # One partition: with ``key``, the partition holds other users' records too.
        sent = [(k, value) for t, k, value in publisher.sent if t == topic]
        return [
            SimpleNamespace(topic=topic, partition=0, offset=n, timestamp=1, key=k, value=value)
            for n, (k, value) in enumerate(sent)
        ]

    monkeypatch.setattr("memstream.streams.service.memories.read_topic", read_topic)
    service = Service(Container(settings, keys=keys, projection=index, publisher=publisher))
    return service, publisher
