"""A user's own events read back from the log: only records keyed by and carrying the user's
id, opened with the user's key, nothing from before the user's latest erasure.

What a memory's history and the chat turns it came from are read from
(:meth:`~memstream.streams.service.memories.MemoryService.history` and ``sources``).
"""

from __future__ import annotations

from memstream.models.codec import InvalidEvent, decode_event
from memstream.models.crypto import SealError
from memstream.models.erasure import ErasureLedger
from memstream.models.events.envelope import Event
from memstream.models.settings import Settings
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.keys.sealing import open_event
from memstream.streams.keys.store import KeyStore

__all__ = ["user_events"]


async def user_events(
    settings: Settings, keys: KeyStore, topic: str, user_id: str
) -> list[tuple[int, int, Event]]:
    """The user's events on ``topic`` (its partition of it), opened, in log order:
    ``(partition, offset, event)``.

    Only records keyed by the user whose event carries the user's id count. Every event
    of the user before the user's latest ``user_erased`` (by offset on its partition, by
    broker time elsewhere; see :mod:`memstream.models.erasure`) is left out, sealed or
    not; records that do not decode or open (dead-lettered by the workers) too.
    """
    try:
        key = user_id.encode()
    except UnicodeEncodeError:
        return []  # no event can carry such a user id: nothing was ever published for it
    records = [
        r
        for r in await read_topic(settings, topic, key=key)
        if r.key == key and r.value is not None
    ]
    # Unsealed events (reinforcements, supersessions, deletions, events of producers
    # that do not seal) still open after the key is destroyed: the erasure itself must
    # end them.
    erasures = ErasureLedger([topic], max_bytes=settings.max_event_bytes)
    for record in records:
        erasures.note(
            record.topic, record.partition, record.offset, _broker_ms(record.timestamp),
            record.key, record.value,
        )
    found: list[tuple[int, int, Event]] = []
    for record in records:
        if erasures.covers(
            (user_id,), record.topic, record.partition, record.offset,
            _broker_ms(record.timestamp),
        ):
            continue
        try:
            event = decode_event(record.value, max_bytes=settings.max_event_bytes)
        except InvalidEvent:
            continue  # dead-lettered by the workers; part of nothing
        if event.user_id != user_id:
            continue
        try:
            opened = open_event(event, keys)
        except SealError:
            continue  # altered in the log: dead-lettered by the workers
        if opened is None:
            continue  # the user was erased: nothing of it can be read
        found.append((record.partition, record.offset, opened))
    return found


def _broker_ms(timestamp: int | None) -> int | None:
    """A record's broker timestamp, None when it has none (Kafka's -1)."""
    return timestamp if timestamp is not None and timestamp >= 0 else None
