"""Fakes of memstream's ports, for unit tests only."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from memstream.models.codec import EventLimits, decode_event
from memstream.models.events.envelope import Event
from memstream.models.events.memory import MemoryAdded, MemoryChange, MemoryReinforced
from memstream.models.lifecycle import apply_change
from memstream.models.settings import Settings
from memstream.projections.embedder import embed_groups
from memstream.projections.memories import (
    MEMORY_TYPES,
    VECTOR_SHARE,
    EncryptedContentError,
    MemoryHit,
    MemoryRecord,
    SearchFilters,
    SourcePosition,
    embedded_texts,
)
from memstream.projections.memories.fold import new_row
from memstream.projections.memories.hybrid import search_filters
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.publisher import RawRecord, Sent, prepare
from memstream.streams.keys.store import FileKeyStore, KeyStore
from memstream.streams.service.app import Service
from memstream.streams.service.container import Container

_WORD = re.compile(r"\w+")


class FakeEmbedder:
    """A deterministic bag-of-words embedder: each word hashed into one of ``dimensions``.

    Texts that share words get close vectors; no model, no I/O. A text without words maps to
    a fixed unit vector, so every output has unit length like a real embedder's.
    """

    def __init__(self, dimensions: int = 64) -> None:
        self.dimensions = dimensions
        self.model_id = f"fake-bag-of-words-{dimensions}"
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: float32, shape ``(len(texts), dimensions)``, unit length."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dimensions
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:
                out[row, 0] = 1.0
            else:
                out[row] /= norm
        return out


class InMemoryPublisher:
    """An :class:`~memstream.streams.kafka.publisher.EventPublisher` that keeps what it
    was sent: ``sent`` holds ``(topic, key, value)`` in order, each topic numbered from 0 on
    one partition. Seals, encodes and checks exactly as the real one does (it sends what
    :func:`~memstream.streams.kafka.publisher.prepare` returns); held to the same contract
    (``tests/integration/test_publisher_contract.py``)."""

    def __init__(self, keys: KeyStore, limits: EventLimits | None = None) -> None:
        self.keys = keys
        self.limits = limits
        self.sent: list[tuple[str, bytes | None, bytes]] = []
        self.closed = False

    def events(self, topic: str | None = None) -> list[Event]:
        """The events sent (to ``topic``), decoded as the log holds them (sealed)."""
        return [event for t, event in self.records() if topic in (None, t)]

    def records(self) -> list[tuple[str, Event]]:
        """``(topic, event)`` of everything sent, decoded as the log holds it (sealed)."""
        return [(topic, decode_event(value)) for topic, _, value in self.sent]

    async def publish(
        self,
        topic: str,
        events: Sequence[Event],
        *,
        key_id: str | None = None,
        create_keys: bool = True,
        timestamp_ms: int | None = None,
    ) -> list[Sent]:
        prepared = prepare(
            events, self.keys, self.limits, key_id=key_id, create_keys=create_keys
        )
        return [
            self._append(topic, event.user_id.encode(), value, timestamp_ms, event)
            for event, value in prepared
        ]

    async def send_raw(self, topic: str, records: Sequence[RawRecord]) -> list[Sent]:
        return [self._append(topic, r.key, r.value, None, None) for r in records]

    async def close(self) -> None:
        self.closed = True

    def _append(
        self, topic: str, key: bytes | None, value: bytes, stamp: int | None, event: Event | None
    ) -> Sent:
        offset = sum(1 for t, _, _ in self.sent if t == topic)
        self.sent.append((topic, key, value))
        return Sent(topic, 0, offset, stamp, event)


_RECORD_FIELDS = tuple(field.name for field in dataclasses.fields(MemoryRecord))


class InMemoryMemoryIndex:
    """Memories in a dict: the fake of the ``MemoryIndex`` port, for unit tests.

    It keeps what the LanceDB projection keeps (``tests/projections/test_memory_index_contract.py``
    runs the same tests on both): the first add of a memory id wins, changes are folded by
    :func:`memstream.models.lifecycle.apply_change` unless re-delivered (at or below the
    offset the memory last took, or a reinforcement already counted), a change names only
    its own user's memory, and every read is one user's. Search scores every memory the
    filters let through by the cosine of :class:`FakeEmbedder` vectors and the share of the
    query's words the memory holds, weighed like the projection's relevance.
    """

    def __init__(self, embedder: FakeEmbedder | None = None) -> None:
        self.embedder = embedder or FakeEmbedder()
        self._rows: dict[str, dict[str, Any]] = {}

    def apply(self, batch: Sequence[tuple[MemoryAdded | MemoryChange, SourcePosition]]) -> int:
        """Project a batch of memory events; return the number of memories written."""
        first: dict[str, tuple[MemoryAdded, SourcePosition]] = {}
        for event, position in batch:
            if not isinstance(event, MemoryAdded):
                continue
            if event.encryption is not None and "content" in event.encryption.fields:
                raise EncryptedContentError(f"memory {event.memory_id} has encrypted content")
            first.setdefault(event.memory_id, (event, position))
        new = {
            memory_id: self._row(event, position)
            for memory_id, (event, position) in first.items()
            if memory_id not in self._rows
        }
        changed: dict[str, dict[str, Any]] = {}
        for event, position in batch:
            if isinstance(event, MemoryAdded):
                continue
            row = changed.get(event.memory_id) or new.get(event.memory_id)
            if row is None and event.memory_id in self._rows:
                row = dict(self._rows[event.memory_id])
            if row is None or row["user_id"] != event.user_id:
                continue
            if position.offset <= row["changed_offset"]:
                continue
            if isinstance(event, MemoryReinforced) and event.event_id in row["reinforced_by"]:
                continue
            apply_change(row, event)
            row["changed_offset"] = position.offset
            changed[event.memory_id] = row
        written = {**new, **changed}
        self._rows.update(written)
        return len(written)

    def positions(self, user_id: str | None = None) -> dict[tuple[str, int], int]:
        """The next offset to read per (topic, partition): the highest projected + 1; with
        ``user_id``, of that user's rows only."""
        found: dict[tuple[str, int], int] = {}
        for row in self._rows.values():
            if user_id is not None and row["user_id"] != user_id:
                continue
            key = (row["source_topic"], row["source_partition"])
            last = max(row["source_offset"], row["changed_offset"])
            found[key] = max(found.get(key, 0), last + 1)
        return found

    def search(
        self,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        memory_types: Sequence[str] | None = None,
        filters: SearchFilters | None = None,
    ) -> list[MemoryHit]:
        """The user's memories most relevant to ``query``, best first, at most ``limit``."""
        rows = self._visible(user_id, search_filters(limit, memory_types, filters))
        if not rows or not query.strip():
            return []
        vector = self.embedder.embed([query])[0]
        words = set(_WORD.findall(query.lower()))
        scored = []
        for row in rows:
            similarity = min(max(float(vector @ row["vector"]), 0.0), 1.0)
            shared = len(words & set(_WORD.findall(row["search_text"].lower())))
            share = shared / len(words) if words else 0.0
            score = VECTOR_SHARE * similarity + (1 - VECTOR_SHARE) * share
            scored.append((score, similarity, share, row))
        scored.sort(key=lambda item: -item[0])
        return [
            MemoryHit(**_record(row), score=score, similarity=similarity, words=share)
            for score, similarity, share, row in scored[:limit]
        ]

    def get(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        """One of the user's memories by id, active or not; None if it is not theirs."""
        row = self._rows.get(memory_id)
        if row is None or row["user_id"] != user_id:
            return None
        return MemoryRecord(**_record(row))

    def get_many(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The user's memories among ``memory_ids``, by id."""
        found = (self.get(user_id, memory_id) for memory_id in dict.fromkeys(memory_ids))
        return {record.memory_id: record for record in found if record is not None}

    def list_memories(self, user_id: str, *, include_inactive: bool = False) -> list[MemoryRecord]:
        """The user's memories (active ones unless asked otherwise), newest first."""
        rows = self._visible(user_id, SearchFilters(include_inactive=include_inactive))
        rows.sort(key=lambda row: row["memory_id"])
        rows.sort(key=lambda row: row["created_at"], reverse=True)
        return [MemoryRecord(**_record(row)) for row in rows]

    def claim_history(self, user_id: str) -> list[MemoryRecord]:
        """The user's claims of every status but deleted, by when they began, then id."""
        rows = [
            row for row in self._visible(user_id, SearchFilters(include_inactive=True))
            if row["claim_attribute"] is not None and row["status"] != "deleted"
        ]
        rows.sort(key=lambda row: (row["valid_from"] or row["created_at"], row["memory_id"]))
        return [MemoryRecord(**_record(row)) for row in rows]

    def task_history(self, user_id: str) -> list[MemoryRecord]:
        """The user's task memories of every status but deleted, by memory id."""
        rows = [
            row for row in self._visible(user_id, SearchFilters(include_inactive=True))
            if row["memory_type"] == "task" and row["status"] != "deleted"
        ]
        rows.sort(key=lambda row: row["memory_id"])
        return [MemoryRecord(**_record(row)) for row in rows]

    def _row(self, event: MemoryAdded, position: SourcePosition) -> dict[str, Any]:
        # The projection's own row of a new memory (fold.new_row), with its vector.
        return {
            **new_row(event, position, self.embedder.model_id),
            "source_event_ids": tuple(event.source_event_ids),
            "entities": tuple(event.entities),
            "stated_in": tuple(event.stated_in),
            "vector": embed_groups(self.embedder.embed, [embedded_texts(event)])[0],
        }

    def _visible(self, user_id: str, filters: SearchFilters) -> list[dict[str, Any]]:
        """The user's rows ``filters`` let through (the projection's SQL filter, in Python)."""
        if not isinstance(user_id, str):
            raise TypeError("user_id must be a string")
        for moment in (filters.as_of, filters.since, filters.until):
            if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
                raise ValueError("time filters need a timezone-aware datetime")
        types = filters.memory_types
        if types is not None:
            if isinstance(types, str):
                raise TypeError("memory_types must be a sequence of memory types, not a string")
            unknown = [t for t in types if t not in MEMORY_TYPES]
            if unknown:
                raise ValueError(f"unknown memory types {unknown!r}; known: {sorted(MEMORY_TYPES)}")

        def visible(row: dict[str, Any]) -> bool:
            if row["user_id"] != user_id:
                return False
            if filters.as_of is not None:
                if row["created_at"] > filters.as_of:
                    return False
                if not filters.include_inactive and (
                    row["status"] == "deleted"
                    or (row["ended_at"] is not None and row["ended_at"] <= filters.as_of)
                ):
                    return False
            elif not filters.include_inactive and row["status"] != "active":
                return False
            if types is not None and row["memory_type"] not in types:
                return False
            if filters.min_importance is not None and row["importance"] < filters.min_importance:
                return False
            if filters.session_id is not None and row["session_id"] != filters.session_id:
                return False
            if filters.since is not None and row["created_at"] < filters.since:
                return False
            return filters.until is None or row["created_at"] < filters.until

        return [row for row in self._rows.values() if visible(row)]


def _record(row: dict[str, Any]) -> dict[str, Any]:
    # Lists (a fold reassigns them) read back as the record's tuples.
    return {
        name: tuple(row[name]) if isinstance(row[name], list) else row[name]
        for name in _RECORD_FIELDS
    }


#: When the seeded memories of :func:`memory_added` were said.
SEEDED_AT = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def memory_added(
    memory_id: str,
    user_id: str,
    content: str,
    *,
    memory_type: str = "fact",
    context: str = "",
    occurred_at: datetime = SEEDED_AT,
) -> MemoryAdded:
    """A ``memory_added`` as the extraction agent publishes it, to seed a projection (and
    the memories topic) in a unit test."""
    return MemoryAdded(
        event_id=f"add-{memory_id}",
        user_id=user_id,
        session_id="s1",
        occurred_at=occurred_at,
        memory_id=memory_id,
        memory_type=memory_type,  # type: ignore[arg-type]
        content=content,
        context=context,
        importance=0.7,
        extraction_event_id="x1",
        extractor="test/1",
        source_event_ids=(f"m-{memory_id}",),
    )


def topic_reader(publisher: InMemoryPublisher) -> Callable[..., Awaitable[list[Any]]]:
    """A stand-in for :func:`memstream.streams.kafka.logreader.read_topic` over what
    ``publisher`` was sent (one partition, in order), so ``history`` reads without a broker."""

    async def read_topic(
        settings: Any, topic: str, timeout_s: float = 30.0, *, key: bytes | None = None
    ) -> list[Any]:
        # One partition: with ``key``, the partition holds other users' records too.
        sent = [(k, value) for t, k, value in publisher.sent if t == topic]
        return [
            SimpleNamespace(topic=topic, partition=0, offset=n, timestamp=1, key=k, value=value)
            for n, (k, value) in enumerate(sent)
        ]

    return read_topic


def unit_settings(tmp_path: Path) -> Settings:
    """Settings of a unit test: its own data directory, and a broker and a worker web port
    where nothing answers (the integration tier runs workers on the default port meanwhile)."""
    return Settings(
        data_dir=tmp_path, topic_prefix="t", web_port=free_port(), broker=f"127.0.0.1:{free_port()}"
    )


def service_on_fakes(
    settings: Settings, memories: Sequence[MemoryAdded], monkeypatch: pytest.MonkeyPatch
) -> tuple[Service, InMemoryPublisher, InMemoryMemoryIndex]:
    """A :class:`Service` over the fakes (the users' keys in the settings' key directory),
    as after a worker applied ``memories``: the projection holds them, and the memories topic
    holds them sealed, which ``history`` reads through :func:`topic_reader`."""
    keys = FileKeyStore(settings.keys_dir)
    publisher = InMemoryPublisher(keys, EventLimits.from_settings(settings))
    index = InMemoryMemoryIndex()
    service = Service(Container(settings, keys=keys, projection=index, publisher=publisher))
    topic = service.container.topics.memories
    for offset, event in enumerate(memories):
        index.apply([(event, SourcePosition(topic, 0, offset))])
        asyncio.run(publisher.publish(topic, [event]))
    monkeypatch.setattr("memstream.streams.service.user_log.read_topic", topic_reader(publisher))
    return service, publisher, index
