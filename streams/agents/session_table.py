"""The session agent's state: a Faust table of compact bytes, folded in batches.

Each batch of chat events is decoded, grouped by session and folded with
:func:`memstream.models.session.apply`; then every consolidation request it produced is
published and acknowledged, and only then is each touched session written once (table and
changelog). Events are acknowledged after that, so a crash at any point re-delivers events
whose effects are either absent or recognised by the state's last offset.

Open sessions hold the window's messages, so their stored bytes (the table, and the
changelog topic behind it) are sealed with the user's key (:func:`seal_session_value`);
once the key is destroyed they read as no session. A ``user_erased`` event drops every
session of its user (tombstones for all the user's keys).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, cast

from memstream.models.codec import EventLimits, worker_now
from memstream.models.crypto import SealError, open_bytes, seal_bytes, sealed_key_id
from memstream.models.events.chat import ChatEvent, SessionClosed, UserErased
from memstream.models.events.consolidation import ConsolidationRequested
from memstream.models.events.envelope import derived_id
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
from memstream.models.topics import CHAT_TYPES
from memstream.streams.agents.decoding import decode_opened
from memstream.streams.keys.store import BatchKeys, KeyStore, key_belongs_to

log = logging.getLogger(__name__)


def window_limits(settings: Settings) -> WindowLimits:
    """The short-term memory bounds configured in ``settings``."""
    return WindowLimits(
        max_messages=settings.max_messages,
        max_tokens=settings.max_tokens,
        max_chars=settings.max_window_chars,
        max_tool_calls=settings.max_tool_calls,
        max_entities=settings.max_entities,
    )


def seal_session_value(
    key: str, value: SessionValue, keys: KeyStore | None, key_id: str | None = None
) -> bytes | None:
    """The stored bytes of a session value: an open session sealed with its user's key
    (``key_id``'s, or the user's current one), bound to the table key; a closed-session
    marker (no content) as plain JSON. None when ``key_id``'s key is destroyed: the user
    was erased meanwhile and the value must not be kept.
    """
    raw = dump_session(value)
    if keys is None or not isinstance(value, SessionState):
        return raw
    if key_id is not None:
        _check_owner(key, key_id)
        secret = keys.key_by_id(key_id)
        if secret is None:
            return None
    else:
        found = keys.key_for(value.user_id, create=True)
        assert found is not None
        key_id, secret = found
    return seal_bytes(raw, secret, key_id, key.encode("utf-8", "surrogatepass"))


def open_session_value(
    key: str, raw: bytes, keys: KeyStore | None
) -> tuple[SessionValue | None, str | None]:
    """A stored session value and the id of the key it was sealed with (None if it was not
    sealed); the value is None when that key is destroyed (an erased user).

    Raises
    ------
    SealError
        A sealed value with no key store to open it, one sealed with a key of another user
        than the table key's, or one altered since it was written.
    """
    key_id = sealed_key_id(raw)
    if key_id is None:
        return load_session(raw), None
    if keys is None:
        raise SealError(f"session {key!r} is sealed and no key store was given")
    _check_owner(key, key_id)
    secret = keys.key_by_id(key_id)
    if secret is None:
        return None, key_id
    return load_session(open_bytes(raw, secret, key.encode("utf-8", "surrogatepass"))), key_id


def _check_owner(key: str, key_id: str) -> None:
    """Refuse a key of another user than the one the table key names."""
    if not key_belongs_to(key_id, _table_user(key)):
        raise SealError(f"session value names key {key_id}, which is not a key of its user")


def _table_user(key: str) -> str:
    """The user id of a table key (:func:`~memstream.models.session.session_key`): user ids
    hold no control characters, so the first unit separator ends it."""
    return key.partition("\x1f")[0]


class SessionStore:
    """The sessions table (key → compact bytes) with a bounded cache of parsed values.

    Values are written with an explicit changelog partition (the partition of the events
    that changed them), so a batch holding several partitions writes each session to the
    right changelog partition. With ``keys``, open sessions are stored sealed with their
    user's key (see :func:`seal_session_value`) and a session whose key is destroyed reads
    as None.

    A parsed value is used only while the table still holds the very bytes it was parsed
    from. Faust's table recovery writes the table directly: a read during a recovery (the
    ``/sessions/`` page, the idle scan) sees a half-recovered value, and a cache that kept it
    would have the agent fold the next events onto an old state.
    """

    def __init__(self, table: Any, cache_size: int, keys: KeyStore | None = None) -> None:
        self.table = table
        self.cache_size = cache_size
        self.keys = keys
        #: Parsed values, with the stored bytes they were parsed from and the id of the key
        #: those bytes are sealed with.
        self._cache: OrderedDict[str, tuple[bytes, SessionValue, str | None]] = OrderedDict()

    def _cached(self, key: str) -> tuple[SessionValue, str | None] | None:
        """The parsed value and key id of ``key``, if the table still holds its bytes."""
        cached = self._cache.get(key)
        if cached is None:
            return None
        raw, value, key_id = cached
        if self.table.data.get(key) is not raw:
            self._cache.pop(key, None)  # written meanwhile, e.g. by a table recovery
            return None
        return value, key_id

    def get(self, key: str) -> SessionValue | None:
        """The session's current value, or None (none, or its user's key is destroyed)."""
        cached = self._cached(key)
        if cached is not None:
            known, sealed_with = cached
            if (
                sealed_with is not None
                and self.keys is not None
                and self.keys.key_by_id(sealed_with) is None
            ):
                # Erased while cached: what the cache holds must not outlive the key.
                self._cache.pop(key, None)
                return None
            self._cache.move_to_end(key)
            return known
        raw = self.table.data.get(key)
        if raw is None:
            return None
        try:
            value, key_id = open_session_value(key, raw, self.keys)
        except Exception:  # altered, or not a value this version wrote
            # The table's changelog is a topic too: bytes another producer wrote there, or a
            # value that no longer opens, must not stop the agent. The log still holds the
            # session's events; a replay (`memstream replay --projection sessions`) rebuilds it.
            log.exception("sessions: the stored value of %r cannot be read; starting afresh", key)
            return None
        if value is None:
            return None
        self._remember(key, raw, value, key_id)
        return value

    def key_id(self, key: str) -> str | None:
        """The id of the key the session's stored value is sealed with (None: not sealed,
        or sealed with a key of another user, which must never seal what follows)."""
        cached = self._cached(key)
        if cached is not None:
            return cached[1]
        raw = self.table.data.get(key)
        if raw is None:
            return None
        try:
            found = sealed_key_id(raw)
        except SealError:
            return None
        if found is None or not key_belongs_to(found, _table_user(key)):
            return None
        return found

    async def write(
        self, key: str, value: SessionValue | None, partition: int, key_id: str | None = None
    ) -> None:
        """Store ``value`` (None deletes) locally and queue it for the changelog.

        An open session is sealed with ``key_id``'s key (the key of the events it holds),
        else with the key it was stored under, else with its user's current key; if that
        key is destroyed the session is deleted instead (its user was erased).

        The record goes straight to the Kafka producer's batch, not through Faust's
        one-message-at-a-time send buffer (which throttled ingest to a third of the no-op
        rate). It is not awaited: Faust flushes the producer before it commits any offset,
        so no event is committed before the state it produced is in the changelog.
        """
        raw = None
        if value is not None:
            if isinstance(value, SessionState) and self.keys is not None:
                key_id = key_id or self.key_id(key)
            raw = seal_session_value(key, value, self.keys, key_id)
        if raw is None:
            self.table.data.pop(key, None)
            self._cache.pop(key, None)
        else:
            assert value is not None
            self.table.data[key] = raw
            self._remember(key, raw, value, sealed_key_id(raw))
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

    def _remember(self, key: str, raw: bytes, value: SessionValue, key_id: str | None) -> None:
        if self.cache_size <= 0:
            return
        self._cache[key] = (raw, value, key_id)
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)


@dataclass
class BatchResult:
    """What folding one batch produced.

    ``writes`` maps table keys to their new value (None: delete it) and changelog partition;
    ``key_ids`` the table keys whose events in the batch were sealed to the id of that key
    (what the session and its consolidations are sealed with); ``erased`` counts events
    skipped because their key is destroyed (an erased user's: not dead-lettered).
    """

    consolidations: list[ConsolidationRequested] = field(default_factory=list)
    writes: dict[str, tuple[SessionValue | None, int]] = field(default_factory=dict)
    #: Records that cannot be folded, with what went wrong (for the dead letter).
    dead: list[tuple[Any, Exception]] = field(default_factory=list)
    skipped: int = 0
    erased: int = 0
    key_ids: dict[str, str] = field(default_factory=dict)


class SessionLookup(Protocol):
    """What the fold reads of a session store: the live :class:`SessionStore`, or a
    replay's dict of folded values."""

    def get(self, key: str) -> SessionValue | None:
        """The session's current value, or None."""
        ...

    def session_keys(self) -> list[str]:
        """Every session key held."""
        ...


def fold_batch(
    store: SessionLookup,
    messages: Sequence[Any],
    window: WindowLimits,
    limits: EventLimits,
    keys: KeyStore | None = None,
) -> BatchResult:
    """Fold a batch of chat-topic messages into session values, without writing anything.

    Each record is decoded and checked against ``limits`` (its times against when the log
    received it, so a replay decides the same) and folded on its own: one that fails, for
    any reason, goes to ``dead`` with its exception and the others are folded as if it were
    not there. Sealed events are opened with ``keys``; those whose key is destroyed are
    skipped and counted in ``erased``. A ``user_erased`` event deletes every session of its
    user (markers of closed sessions too), so a replay that meets it keeps nothing of the user.
    """
    result = BatchResult()
    pending: dict[str, SessionValue | None] = {}
    batch_keys = BatchKeys(keys) if keys is not None else None
    for message in messages:
        try:
            opened = decode_opened(
                message.value,
                message.key,
                CHAT_TYPES,
                limits,
                batch_keys,
                now=worker_now(message),
            )
        except Exception as exc:  # noqa: BLE001 - InvalidEvent, or anything a hostile record causes
            result.dead.append((message, exc))
            continue
        if opened is None:
            result.erased += 1
            continue
        if isinstance(opened.event, UserErased):
            prefix = session_key(opened.event.user_id, "")
            doomed = {k for k in (*store.session_keys(), *pending) if k.startswith(prefix)}
            for key in doomed:
                pending[key] = None
                result.writes[key] = (None, message.partition)
                result.key_ids.pop(key, None)
            log.info("sessions: user erased: %d session(s) dropped", len(doomed))
            if keys is not None:
                batch_keys = BatchKeys(keys)  # keys read before it must not open what follows
            continue
        event = cast(ChatEvent, opened.event)
        key = session_key(event.user_id, event.session_id)
        try:
            current = pending[key] if key in pending else store.get(key)
            transition = apply(current, event, message.offset, window, message.partition)
        except Exception as exc:  # noqa: BLE001 - the fold of one record must not stop the batch
            log.warning(
                "sessions: %s[%s]@%s cannot be folded: %s",
                message.topic, message.partition, message.offset, type(exc).__name__,
            )
            result.dead.append((message, exc))
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
        if opened.key_id is not None:
            result.key_ids[key] = opened.key_id
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
