"""The session agent's state: a Faust table of compact bytes, folded in batches.

Each batch of chat events is decoded, grouped by session and folded with
:func:`memstream.models.session.apply`; then every consolidation request it produced is
published and acknowledged, and only then is each touched session written once (table and
changelog). Events are acknowledged after that, so a crash at any point re-delivers events
whose effects are either absent or recognised by the state's last offset.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast

from memstream.models.codec import InvalidEvent
from memstream.models.events import ChatEvent, ConsolidationRequested, SessionClosed, derived_id
from memstream.models.session import (
    ClosedSession,
    SessionState,
    SessionValue,
    WindowLimits,
    apply,
    dump_session,
    load_session,
    session_key,
)
from memstream.models.settings import Settings
from memstream.streams.agents import CHAT_TYPES, decode_checked

log = logging.getLogger(__name__)


def window_limits(settings: Settings) -> WindowLimits:
    """The short-term memory bounds configured in ``settings``."""
    return WindowLimits(
        max_messages=settings.max_messages,
        max_tokens=settings.max_tokens,
        max_tool_calls=settings.max_tool_calls,
        max_entities=settings.max_entities,
    )


class SessionStore:
    """The sessions table (key → compact JSON bytes) with a bounded cache of parsed values.

    Values are written with an explicit changelog partition (the partition of the events
    that changed them), so a batch holding several partitions writes each session to the
    right changelog partition.
    """

    def __init__(self, table: Any, cache_size: int) -> None:
        self.table = table
        self.cache_size = cache_size
        self._cache: OrderedDict[str, SessionValue] = OrderedDict()

    def get(self, key: str) -> SessionValue | None:
        """The session's current value, or None."""
        value = self._cache.get(key)
        if value is not None:
            self._cache.move_to_end(key)
            return value
        raw = self.table.data.get(key)
        if raw is None:
            return None
        value = load_session(raw)
        self._remember(key, value)
        return value

    async def write(self, key: str, value: SessionValue | None, partition: int) -> None:
        """Store ``value`` (None deletes) locally and queue it for the changelog.

        The record goes straight to the Kafka producer's batch, not through Faust's
        one-message-at-a-time send buffer (which throttled ingest to a third of the no-op
        rate). It is not awaited: Faust flushes the producer before it commits any offset,
        so no event is committed before the state it produced is in the changelog.
        """
        raw = None
        if value is None:
            self.table.data.pop(key, None)
            self._cache.pop(key, None)
        else:
            raw = dump_session(value)
            self.table.data[key] = raw
            self._remember(key, value)
        changelog = self.table.changelog_topic
        key_bytes = changelog.prepare_key(key, None)[0]
        await self.table.app.producer.send(
            changelog.get_topic_name(), key_bytes, raw, partition, None, None
        )

    def items(self) -> Iterator[tuple[str, bytes]]:
        """Every (key, raw value) this worker holds (its assigned partitions only)."""
        yield from list(self.table.data.items())

    def session_keys(self) -> list[str]:
        """Every session key this worker holds (its assigned partitions only)."""
        return list(self.table.data.keys())

    def forget_cache(self) -> None:
        """Drop parsed values, e.g. when partitions move to another worker."""
        self._cache.clear()

    def _remember(self, key: str, value: SessionValue) -> None:
        if self.cache_size <= 0:
            return
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)


@dataclass
class BatchResult:
    """What folding one batch produced."""

    consolidations: list[ConsolidationRequested] = field(default_factory=list)
    writes: dict[str, tuple[SessionValue, int]] = field(default_factory=dict)
    dead: list[tuple[Any, str]] = field(default_factory=list)
    skipped: int = 0


def fold_batch(
    store: SessionStore,
    messages: Sequence[Any],
    limits: WindowLimits,
    max_event_bytes: int,
    max_content_chars: int | None = None,
) -> BatchResult:
    """Fold a batch of chat-topic messages into session values, without writing anything."""
    result = BatchResult()
    pending: dict[str, SessionValue | None] = {}
    for message in messages:
        try:
            event = cast(
                ChatEvent, decode_checked(
                    message.value, message.key, CHAT_TYPES, max_event_bytes, max_content_chars
                )
            )
        except InvalidEvent as exc:
            result.dead.append((message, f"invalid event: {exc}"))
            continue
        key = session_key(event.user_id, event.session_id)
        current = pending[key] if key in pending else store.get(key)
        try:
            transition = apply(current, event, message.offset, limits, message.partition)
        except Exception as exc:
            log.exception("sessions: failed on %s@%s", message.partition, message.offset)
            result.dead.append((message, f"{type(exc).__name__}: {exc}"))
            continue
        if transition.note:
            log.warning("sessions: %s/%s: %s", event.user_id, event.session_id, transition.note)
        if transition.skipped:
            result.skipped += 1
            log.info("sessions: %s: %s", event.event_id, transition.skipped)
            continue
        result.consolidations.extend(transition.consolidations)
        pending[key] = transition.state
        if transition.state is not None:
            result.writes[key] = (transition.state, message.partition)
    return result


@dataclass
class IdleTracker:
    """Processing-time activity of the sessions this worker holds, for the close timer.

    Idle time is measured in processing time (time since this worker last saw an event for
    the session), so a backfill of old events is never closed while it streams in. It is
    kept in memory only; after a restart every session counts as active from the first scan,
    which can delay an idle close by up to one timeout but never closes early. Age is the
    session's event-time span (first to last event), which the state itself records.
    """

    idle_timeout_s: float
    max_age_s: float
    clock: Callable[[], float] = time.monotonic
    seen: dict[str, float] = field(default_factory=dict)
    span_s: dict[str, float] = field(default_factory=dict)
    requested: dict[str, str | None] = field(default_factory=dict)

    def touch(self, key: str, value: SessionValue) -> None:
        """A session had an event now."""
        self.seen[key] = self.clock()
        self.requested.pop(key, None)
        if isinstance(value, SessionState):
            self.span_s[key] = (value.last_event_at - value.started_at).total_seconds()
        else:
            self.span_s.pop(key, None)

    def closes_due(self, store: SessionStore, now: datetime) -> list[SessionClosed]:
        """Close events for sessions idle or over age, each requested once per last event."""
        closes: list[SessionClosed] = []
        current = self.clock()
        keys = set(store.session_keys())
        for key in keys:
            if key not in self.seen:
                # Recovered from the changelog: start its idle clock now (never close early).
                value = store.get(key)
                if value is None:
                    continue
                self.touch(key, value)
            idle = current - self.seen[key] >= self.idle_timeout_s
            over_age = self.span_s.get(key, 0.0) >= self.max_age_s
            if not (idle or over_age):
                continue
            value = store.get(key)
            if not isinstance(value, SessionState) or self.requested.get(key) == value.last_event_id:
                continue
            self.requested[key] = value.last_event_id
            reason: Literal["idle", "max_age"] = "idle" if idle else "max_age"
            closes.append(
                SessionClosed(
                    event_id=derived_id(key, reason, value.last_event_id or ""),
                    user_id=value.user_id,
                    agent_id=value.agent_id,
                    session_id=value.session_id,
                    # The close happens now: recorded as an event, replay never re-decides it.
                    occurred_at=now,
                    reason=reason,
                    last_event_id=value.last_event_id,
                )
            )
        for key in set(self.seen) - keys:
            self.seen.pop(key, None)
            self.span_s.pop(key, None)
            self.requested.pop(key, None)
        return closes

    def expired_markers(self, store: SessionStore, retention_s: float) -> list[tuple[str, int]]:
        """(key, partition) of closed-session markers written more than ``retention_s`` ago.

        Processing time, not the close's event time: a backfill of old sessions must keep
        its markers while re-deliveries of the events before the close can still arrive,
        or a re-delivered event would open the session again (the fold of the log would
        skip it). After a restart a marker's clock starts at the first scan.
        """
        current = self.clock()
        expired = []
        for key, raw in store.items():
            # dump_session writes the status first: skip open sessions without parsing them.
            if not raw.startswith(b'{"status":"closed"'):
                continue
            written = self.seen.setdefault(key, current)
            if current - written < retention_s:
                continue
            value = store.get(key)
            if isinstance(value, ClosedSession):
                expired.append((key, value.partition))
        return expired


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)
