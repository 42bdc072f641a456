"""The one way the operations and services write events: seal, encode, send, await acks.

:class:`EventPublisher` is the port; :class:`KafkaPublisher` is its adapter on one
long-lived ``AIOKafkaProducer`` (a fake for unit tests lives in ``tests/fakes.py``; both are
held to ``tests/integration/test_publisher_contract.py``). Every event is sent keyed by its
user id, so one user's events stay on one partition, in order, after what they follow.

Sealing (:mod:`memstream.streams.keys.store`) happens here, never by the caller:

- by default with the user's current key, created on the user's first event (chat, queries);
- ``create_keys=False`` for events about memories a user already has (deletions, promotions,
  forgetting): a user without a key was erased, so the event is dropped and logged;
- ``key_id=...`` for events derived from sealed ones (re-extraction): that key or nothing.

With ``check`` on (the default for what users send) nothing of a call is sent if any event
is one a worker would refuse: a time outside the window, content or encoded size over the
limits. The Faust agents write through Faust's own producer (``streams/agents/app.py``) and
the log mark is written by :mod:`memstream.streams.kafka.logid` before any publisher may
write; everything else goes through here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from memstream.models.codec import EventLimits, InvalidEvent, encode_event
from memstream.models.events.envelope import Event
from memstream.models.settings import Settings
from memstream.streams.keys.sealing import seal_events
from memstream.streams.keys.store import KeyStore

__all__ = [
    "EventPublisher",
    "KafkaPublisher",
    "RawRecord",
    "Sent",
    "check_encoded_size",
    "check_publishable",
    "prepare",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sent:
    """Where the log put one record (its broker timestamp if the broker gave one)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    #: The event as it went out (sealed); None for a raw record.
    event: Event | None = None


@dataclass(frozen=True)
class RawRecord:
    """Bytes sent as they are: a dead letter's original record going back to its topic."""

    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()


class EventPublisher(Protocol):
    """Writes events to the topics. Implementations: :class:`KafkaPublisher`, and the
    in-memory fake of the unit tests."""

    async def publish(
        self,
        topic: str,
        events: Sequence[Event],
        *,
        key_id: str | None = None,
        create_keys: bool = True,
        timestamp_ms: int | None = None,
    ) -> list[Sent]:
        """Seal, encode and send ``events`` keyed by user id; return once every one is
        acknowledged, in the order given. Events that may not be sealed (see the module
        docstring) are left out of the result and never sent."""
        ...

    async def send_raw(self, topic: str, records: Sequence[RawRecord]) -> list[Sent]:
        """Send records as they are (no sealing, no checks); return once acknowledged."""
        ...

    async def close(self) -> None:
        """Flush and release the connection; a closed publisher can be started again."""
        ...


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


def prepare(
    events: Sequence[Event],
    keys: KeyStore,
    limits: EventLimits | None,
    *,
    key_id: str | None = None,
    create_keys: bool = True,
) -> list[tuple[Event, bytes]]:
    """The events sealed and encoded as they will be sent, those that may not be sealed
    left out (logged); with ``limits``, checked first (:func:`check_publishable`) and after
    (:func:`check_encoded_size`), so a bad call raises before anything is sent. Every
    publisher sends what this returns."""
    if limits is not None:
        check_publishable(events, limits)
    sealed: list[Event] = seal_events(
        events, keys, key_ids=[key_id] * len(events), create=create_keys, source="publish"
    )
    prepared = []
    for event in sealed:
        value = encode_event(event)
        if limits is not None:
            check_encoded_size(event, value, limits)
        prepared.append((event, value))
    return prepared


def _needs_keys(events: Sequence[Event]) -> bool:
    return any(type(event).content_fields and event.encryption is None for event in events)


class KafkaPublisher:
    """:class:`EventPublisher` on one ``AIOKafkaProducer`` (``acks="all"``), started on first
    use: the topics are ensured and the data directory's log claimed then, and with
    ``watch_log`` the broker's log mark is checked before every write (a broker that lost
    its log would acknowledge the write, and a recovery would replace it).

    Parameters
    ----------
    settings
        Broker address, topics and limits.
    keys
        The users' keys; the workers must share them.
    check
        Refuse what a worker would (see :func:`prepare`); off for events memstream makes
        itself from events it already accepted.
    claim
        Ensure the topics and claim the log on start (off inside the worker, which did,
        and for tools that work on a log they only read).
    watch_log
        Check the broker's log mark before every write (a long-lived client).
    """

    def __init__(
        self,
        settings: Settings,
        keys: KeyStore,
        *,
        check: bool = True,
        claim: bool = True,
        watch_log: bool = False,
        linger_ms: int = 5,
    ) -> None:
        self.settings = settings
        self.keys = keys
        self.limits = EventLimits.from_settings(settings) if check else None
        self.claim = claim
        self.watch_log = watch_log
        self.linger_ms = linger_ms
        self._producer: Any = None
        self._marks: Any = None
        self._lock: asyncio.Lock | None = None

    async def publish(
        self,
        topic: str,
        events: Sequence[Event],
        *,
        key_id: str | None = None,
        create_keys: bool = True,
        timestamp_ms: int | None = None,
    ) -> list[Sent]:
        if _needs_keys(events):
            prepared = await asyncio.to_thread(
                prepare, events, self.keys, self.limits, key_id=key_id, create_keys=create_keys
            )
        else:
            prepared = prepare(events, self.keys, self.limits)
        if not prepared:
            return []
        records = [(event.user_id.encode(), value, (), event) for event, value in prepared]
        return await self._send(topic, records, timestamp_ms)

    async def send_raw(self, topic: str, records: Sequence[RawRecord]) -> list[Sent]:
        if not records:
            return []
        return await self._send(
            topic, [(r.key, r.value, r.headers, None) for r in records], None
        )

    async def close(self) -> None:
        producer, marks = self._producer, self._marks
        self._producer = self._marks = None
        if producer is not None:
            await producer.stop()
        if marks is not None:
            await marks.close()

    async def _send(
        self,
        topic: str,
        records: Sequence[tuple[bytes | None, bytes, Sequence[tuple[str, bytes]], Event | None]],
        timestamp_ms: int | None,
    ) -> list[Sent]:
        producer = await self._started()
        if self._marks is not None:
            await self._marks.check()
        futures = [
            await producer.send(
                topic, key=key, value=value, headers=list(headers) or None,
                timestamp_ms=timestamp_ms,
            )
            for key, value, headers, _ in records
        ]
        sent = []
        for future, (_, _, _, event) in zip(futures, records, strict=True):
            metadata = await future
            sent.append(
                Sent(metadata.topic, metadata.partition, metadata.offset, metadata.timestamp, event)
            )
        return sent

    async def _started(self) -> Any:
        from aiokafka import AIOKafkaProducer

        from memstream.streams.kafka.logid import MarkReader, claim_log
        from memstream.streams.kafka.topics import ensure_topics

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._producer is None:
                if self.claim:
                    await ensure_topics(self.settings)
                    await claim_log(self.settings)  # refused (LogLost): the broker lost it
                if self.watch_log:
                    self._marks = MarkReader(self.settings)
                producer = AIOKafkaProducer(
                    bootstrap_servers=self.settings.broker, acks="all", linger_ms=self.linger_ms
                )
                await producer.start()
                self._producer = producer
        return self._producer
