"""The session agent: chat folded into one state per open session, transcripts handed to
consolidation, and idle or over-age sessions closed by a timer.

The agent runs the pure fold of :mod:`memstream.streams.agents.session_table`; what it adds
is the order of its side effects, which keeps the fold idempotent under at-least-once
delivery: consolidation requests are acknowledged before the session states that follow
them are written, and dead letters go last.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from memstream.models.codec import EventLimits
from memstream.models.session import SessionValue, session_key
from memstream.models.settings import Settings
from memstream.streams.agents.boundary import RecordBoundary
from memstream.streams.agents.ordering import InOrder
from memstream.streams.agents.publishing import Publish
from memstream.streams.agents.session_table import (
    IdleTracker,
    SessionStore,
    fold_batch,
    utc_now,
    window_limits,
)
from memstream.streams.kafka.logid import LogWatch
from memstream.streams.keys.store import KeyStore

__all__ = ["SessionAgent"]

log = logging.getLogger(__name__)


class SessionAgent:
    """Keeps one state per open session in the sessions table and closes idle sessions.

    Parameters
    ----------
    settings
        The batch size and wait, the window's and events' limits, the closed markers'
        retention.
    store
        The sessions table.
    idle
        The sessions' processing-time activity, for the close timer.
    keys
        The key store: chat is opened, and what derives from it sealed, with its user's key.
    request_consolidation
        Publishes to the consolidation topic.
    publish_chat
        Publishes to the chat topic (the timer's closes go there, like a client's).
    boundary
        The record boundary of the agent (dead letters, retries while the broker is down).
    order
        Keeps each partition's records in offset order.
    watch
        Stops processing once the broker lost the log.

    Examples
    --------
    >>> agent = SessionAgent(settings, store, idle, keys=keys, ...)  # doctest: +SKIP
    >>> app.agent(chat, name="sessions")(agent.fold_chat)  # doctest: +SKIP
    """

    def __init__(
        self,
        settings: Settings,
        store: SessionStore,
        idle: IdleTracker,
        *,
        keys: KeyStore,
        request_consolidation: Publish,
        publish_chat: Publish,
        boundary: RecordBoundary,
        order: InOrder,
        watch: LogWatch,
    ) -> None:
        self.settings = settings
        self.store = store
        self.idle = idle
        self.keys = keys
        self.request_consolidation = request_consolidation
        self.publish_chat = publish_chat
        self.boundary = boundary
        self.order = order
        self.watch = watch
        self.window = window_limits(settings)
        self.limits = EventLimits.from_settings(settings)
        self._chat_log_intact = watch.verifier("sessions")

    async def fold_chat(self, stream: Any) -> None:
        """Keep one state per open session; hand transcripts to consolidation.

        Events come in batches; each touched session is written once per batch, after the
        consolidation requests of the batch are acknowledged (so none can be lost). A batch
        that fails for a reason of its data is folded again one record at a time, so only
        the records at fault are dead-lettered (:class:`RecordBoundary`).
        """
        async for events in stream.take_events(
            self.settings.session_batch_size, within=self.settings.session_batch_wait_s
        ):
            if not await self._chat_log_intact():
                await self.watch.wait_intact()  # blocks: the log was lost; nothing more is folded
            async with self.order.working():
                messages = [e.message for e in events if await self.order.accept(e.message)]
                await self.boundary.run_batch(messages, self.fold_and_hand_over)

    async def fold_and_hand_over(self, messages: Sequence[Any]) -> None:
        """Fold chat records into the sessions table and publish the consolidation requests
        they make. Idempotent: a record applied already is recognised by its offset."""
        store = self.store
        batch = fold_batch(store, messages, self.window, self.limits, self.keys)
        if batch.erased:
            log.info("sessions: %d event(s) of erased users skipped", batch.erased)
        # A span is sealed with the key of the session it comes from.
        session_keys = [
            batch.key_ids.get(key) or store.key_id(key)
            for key in (session_key(c.user_id, c.session_id) for c in batch.consolidations)
        ]
        await self.request_consolidation(batch.consolidations, session_keys)
        # Changelog writes are queued, not awaited (see SessionStore.write).
        written: list[tuple[str, SessionValue | None, int, str | None]] = [
            (key, value, partition, batch.key_ids.get(key))
            for key, (value, partition) in batch.writes.items()
        ]
        for key, value, partition, key_id in written:
            await store.write(key, value, partition, key_id)
            if value is not None:
                self.idle.touch(key, value)
        # Last: if anything above fails, the batch is folded again record by record, and a
        # record dead-lettered here already would be dead-lettered twice.
        for message, fault in batch.dead:
            await self.boundary.dead_letter(message, fault)

    async def close_idle_sessions(self) -> None:
        """Publish closes for idle and over-age sessions; drop old closed-session markers.

        A scan that fails (the broker is down) is logged and the next one tries again: a
        close is requested once per last event, and only once it went out."""
        if not self.watch.intact():
            return
        try:
            now = utc_now()
            closes = self.idle.closes_due(self.store, now)
            for close in closes:
                log.info("sessions: closing %s/%s (%s)", close.user_id, close.session_id, close.reason)
            await self.publish_chat(closes, [None] * len(closes))
            for key, partition in self.idle.expired_markers(self.store, self.settings.closed_retention_s):
                await self.store.write(key, None, partition)
        except Exception:  # a timer that raises would stop the worker
            self.idle.requested.clear()  # ask again at the next scan
            log.exception("sessions: the idle scan failed; the next one tries again")

    async def forget_parsed_sessions(self, sender: Any, *args: Any, **kwargs: Any) -> None:
        """Receiver of partition assignments and revocations: parsed values may be stale
        once partitions moved or were recovered; the table is not."""
        self.store.forget_cache()
