"""Retrievals counted as use: their access events queued and published in the background,
a burst at a time, never delaying an answer; losses counted, and logged once per burst."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from memstream.models.events.memory import MemoriesRetrieved
from memstream.models.settings import Settings

__all__ = ["ACCESS_FLUSH_TIMEOUT_S", "AccessSender"]

log = logging.getLogger(__name__)

#: How long ``close()`` waits for access events still being published in the background.
ACCESS_FLUSH_TIMEOUT_S = 10.0


class AccessSender:
    """Publishes access events in the background with ``send``; use it on one event loop and
    close it to wait (bounded) for what is still being sent."""

    def __init__(
        self, settings: Settings, send: Callable[[list[MemoriesRetrieved]], Awaitable[None]]
    ) -> None:
        self.settings = settings
        self._send = send
        self._background: set[asyncio.Task[None]] = set()
        #: Access events waiting for the background sender (see publish).
        self._accesses: list[MemoriesRetrieved] = []
        self._access_sender: asyncio.Task[None] | None = None
        #: Access events lost so far, and those lost since the last that went out (a burst
        #: of failures is logged once, when it begins).
        self.lost = 0
        self._lost_in_burst = 0

    async def close(self) -> None:
        """Wait (bounded) for background access events."""
        if self._background:
            _, pending = await asyncio.wait(set(self._background), timeout=ACCESS_FLUSH_TIMEOUT_S)
            for task in pending:
                task.cancel()

    def publish(self, event: MemoriesRetrieved) -> None:
        """Queue a retrieval's access event; one background task sends what is queued, all
        of it in one publish (one log-mark check, one produce batch), so under load a burst of
        searches costs the broker one round trip instead of one each."""
        self._accesses.append(event)
        if self._access_sender is None or self._access_sender.done():
            task = asyncio.get_running_loop().create_task(self._send_accesses())
            self._access_sender = task
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _send_accesses(self) -> None:
        while self._accesses:
            batch, self._accesses = self._accesses, []
            try:
                await self._send(batch)
            except Exception as exc:
                # Access counts only steer promotion and decay; losing some must not fail a
                # read, nor fill the log with a traceback per search while the broker is away
                # (the traceback is for debugging only).
                log.debug("memories: %d access event(s) not published", len(batch), exc_info=True)
                self._lost_access_events(len(batch), exc)
            else:
                if self._lost_in_burst:
                    log.info(
                        "memories: access events are published again; %d were lost",
                        self._lost_in_burst,
                    )
                    self._lost_in_burst = 0

    def _lost_access_events(self, count: int, exc: Exception) -> None:
        """Count access events that did not go out; say so once per burst of failures, in
        one line: what was lost, why, what to do."""
        from memstream.streams.kafka.broker import broker_problem

        first = self._lost_in_burst == 0
        self.lost += count
        self._lost_in_burst += count
        if first:
            why = broker_problem(exc, self.settings.broker) or f"{type(exc).__name__}: {exc}"
            log.warning(
                "memories: %d access event(s) not published, so those retrievals do not count "
                "as use (promotion, decay); searches still answer. Why: %s. Later losses are "
                "not logged until access events go out again",
                count,
                why.rstrip("."),
            )
