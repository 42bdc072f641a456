"""The tier keeper: promotes short-term memories that are used, expires those that are not.

Memories below ``long_term_importance`` start in the short-term tier. The keeper scans the
memory projection on a schedule and publishes, to the memories topic:

* :class:`MemoryPromoted` for every active short-term memory retrieved at least
  ``promote_after_retrievals`` times (retrievals are counted from the accesses topic);
* :class:`MemoryExpired` for every active short-term memory learned more than
  ``short_term_ttl_s`` ago. Episodes never expire: they are the raw record of what was said.

**The TTL runs on processing time**: from ``learned_at``, the broker timestamp of the event
that added the memory, i.e. when memstream learned it, not when it was said. Event time would
expire a backfill of last year's conversations the moment it arrives; processing time gives
every memory its full TTL to be used. The timestamp is stored in the log with the event, so a
replay of the topic finds the same value.

**Promotions and expiries are events**, not something the projection derives: a replay reads
them from the log and never recomputes them (with another clock, or before the retrievals that
justified them are counted). Their ids derive from the memory id, so publishing one again
repeats the same event; the projection applies it once. The keeper runs beside the projector
(:func:`memstream.streams.projector.memories.run_memory_projector`), only while the projection has
caught up with the log, and does not publish again for a memory whose event it has already
published until the projection shows the change (or ``retry_after_s`` passes).

**Sealed before they go out.** Their reasons are free text, so each event is sealed here,
before ``publish`` sees it, with its user's current key (never a new one: the memory's
user has a key unless erased). A user with no key is erased or being erased: the event is
dropped and logged, never published unsealed, and the erasure takes the memory away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from memstream.models.events.envelope import Event, derived_id
from memstream.models.events.memory import MemoryExpired, MemoryPromoted
from memstream.models.settings import Settings
from memstream.projections.memories import MemoryStore
from memstream.streams.kafka.publisher import EventPublisher
from memstream.streams.kafka.topics import Topics

log = logging.getLogger(__name__)

#: The longest pause between two scans; shorter when the TTL is short (see scan_interval).
TIER_SCAN_INTERVAL_S = 10.0
#: Memories handled per scan and kind; the rest wait for the next scan.
SCAN_LIMIT = 10_000


def scan_interval(settings: Settings) -> float:
    """Seconds between scans: at most 10 s, and at least two scans per short-term TTL."""
    return max(0.2, min(TIER_SCAN_INTERVAL_S, settings.short_term_ttl_s / 2))


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


@dataclass
class TierKeeper:
    """Decides promotions and expiries from the projection and publishes them as events.

    Examples
    --------
    >>> keeper = TierKeeper(settings, projection, publisher)  # doctest: +SKIP
    >>> [event.type for event in await keeper.scan()]  # doctest: +SKIP
    ['memory_promoted', 'memory_expired']
    """

    settings: Settings
    projection: MemoryStore
    #: Seals the events with their users' keys (never new ones) and sends them.
    publisher: EventPublisher
    #: Where the events go; the memories topic by default.
    topic: str | None = None
    clock: Callable[[], datetime] = utc_now
    #: Publish again for a memory the projection still shows unchanged after this long.
    retry_after_s: float = 300.0
    #: Memories whose event is published but not yet projected, with when it went out.
    in_flight: dict[str, datetime] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.topic is None:
            self.topic = Topics.from_settings(self.settings).memories

    async def scan(self) -> list[Event]:
        """Publish the promotions and expiries due now, sealed; return the events published
        (sealed as they went out)."""
        now = self.clock()
        ttl = timedelta(seconds=self.settings.short_term_ttl_s)
        promote = await asyncio.to_thread(
            self.projection.promotion_due, self.settings.promote_after_retrievals, SCAN_LIMIT
        )
        expire = await asyncio.to_thread(self.projection.short_term_due, now, ttl, SCAN_LIMIT)
        # A memory the projection no longer lists has taken its change: forget it.
        listed = {record.memory_id for _, record in promote + expire}
        self.in_flight = {m: t for m, t in self.in_flight.items() if m in listed}
        events: list[Event] = []
        promoted: set[str] = set()
        for user_id, record in promote:
            promoted.add(record.memory_id)  # used often enough: never expired in this scan
            if self._waiting(record.memory_id, now):
                continue
            events.append(
                MemoryPromoted(
                    event_id=derived_id(record.memory_id, "promote"),
                    user_id=user_id,
                    session_id=record.session_id,
                    occurred_at=now,
                    memory_id=record.memory_id,
                    reason=f"retrieved {record.access_count} times",
                )
            )
        for user_id, record in expire:
            if record.memory_id in promoted or self._waiting(record.memory_id, now):
                continue
            events.append(
                MemoryExpired(
                    event_id=derived_id(record.memory_id, "expire"),
                    user_id=user_id,
                    session_id=record.session_id,
                    occurred_at=now,
                    memory_id=record.memory_id,
                    reason=f"ttl: short-term for {self.settings.short_term_ttl_s:g} s",
                )
            )
        if not events:
            return []
        assert self.topic is not None
        # A user without a key was erased (or is being erased): the event is dropped.
        sent = await self.publisher.publish(self.topic, events, create_keys=False)
        sealed = [s.event for s in sent if s.event is not None]
        if sealed:
            log.info("tiers: published %d promotion(s) / expiry(ies)", len(sealed))
        # Dropped ones too: their users' erasure takes the memories out of the projection,
        # and until it does they must not be decided (and logged) again every scan.
        for event in events:
            assert isinstance(event, MemoryPromoted | MemoryExpired)
            self.in_flight[event.memory_id] = now
        return sealed

    def _waiting(self, memory_id: str, now: datetime) -> bool:
        sent = self.in_flight.get(memory_id)
        return sent is not None and (now - sent).total_seconds() < self.retry_after_s


async def run_tier_keeper(
    settings: Settings,
    projection: MemoryStore,
    publisher: EventPublisher,
    *,
    topic: str | None = None,
    clock: Callable[[], datetime] = utc_now,
    interval_s: float = TIER_SCAN_INTERVAL_S,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Scan every ``interval_s`` until cancelled (or ``stop`` is set).

    Parameters
    ----------
    settings
        ``promote_after_retrievals``, ``short_term_ttl_s`` and the topic prefix.
    projection
        The memory projection the projector of this process writes.
    publisher
        Seals and sends the events (see :class:`TierKeeper`).
    topic
        The memories topic (its name by default).
    clock
        Processing time, compared with the memories' ``learned_at``.
    ready
        Set while the projection is caught up with the log; each scan waits for it.
    stop
        Set to end the loop after the current scan.
    """
    keeper = TierKeeper(settings, projection, publisher, topic=topic, clock=clock)
    stop = stop or asyncio.Event()
    while not stop.is_set():
        if ready is not None:
            await ready.wait()
        try:
            await keeper.scan()
        except Exception:
            # A failed scan (broker or table briefly unavailable) is retried next time: the
            # decisions are recomputed from the projection, nothing is lost.
            log.exception("tiers: scan failed; retrying in %.1f s", interval_s)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
