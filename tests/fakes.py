"""Fakes of memstream's ports, for unit tests only."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from memstream.models.codec import EventLimits, decode_event
from memstream.models.events import Event
from memstream.streams.runtime.keys import KeyStore
from memstream.streams.runtime.publisher import RawRecord, Sent, prepare

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
    """An :class:`~memstream.streams.runtime.publisher.EventPublisher` that keeps what it
    was sent: ``sent`` holds ``(topic, key, value)`` in order, each topic numbered from 0 on
    one partition. Seals, encodes and checks exactly as the real one does (it sends what
    :func:`~memstream.streams.runtime.publisher.prepare` returns); held to the same contract
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
