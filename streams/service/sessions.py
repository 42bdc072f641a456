"""A session's working-memory context: the short-term state the worker that owns the
session holds (its message window, task, tool calls, entities, scratchpad), rendered as a
prompt within a token budget.

Sessions live in the worker's Faust table, partitioned by user: the request goes to the
worker's web port, which answers for the users it owns and routes the others to their owner.
Ending a session is an event (``session_closed``) on the chat topic, like every write.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.error import HTTPError
from urllib.parse import urlencode

from memstream.models.events.chat import SessionClosed
from memstream.models.events.envelope import derived_id
from memstream.streams.worker.process import fetch_json

if TYPE_CHECKING:
    from memstream.streams.service.container import Container

__all__ = ["NoSession", "SessionService", "WorkerRefused", "WorkerUnreachable"]


class NoSession(LookupError):
    """The user has no open session of that id."""


class WorkerRefused(PermissionError):
    """The worker wants its web token (``MEMSTREAM_WEB_TOKEN``), or another one."""


class WorkerUnreachable(ConnectionError):
    """No worker answers on the web port of the settings."""


class SessionService:
    """Working-memory reads, answered by the worker that owns the user's sessions, and
    session closes, published as events."""

    def __init__(self, container: Container, *, timeout_s: float = 10.0) -> None:
        self.container = container
        self.settings = container.settings
        self.timeout_s = timeout_s

    async def close(
        self, *, user_id: str, session_id: str, event_id: str | None = None
    ) -> str:
        """End a session now: publish its ``session_closed`` (reason ``explicit``); the
        worker consolidates what the session still holds. Returns the event id: ``event_id``
        when given (a retried call repeats the same event), else a new one. Closing a session
        that is not open is harmless (the worker reports and ignores it).

        Raises
        ------
        ValueError
            An id no event can carry.
        """
        if not isinstance(user_id, str) or not isinstance(session_id, str):
            raise TypeError("user_id and session_id must be strings")
        event = SessionClosed(
            event_id=event_id or derived_id("client-close", user_id, session_id, str(uuid.uuid4())),
            user_id=user_id,
            session_id=session_id,
            occurred_at=datetime.now(UTC),
            reason="explicit",
        )
        publisher = self.container.event_publisher()
        await publisher.publish(self.container.topics.chat, [event])
        return event.event_id

    async def context(
        self, *, user_id: str, session_id: str, budget: int | None = None
    ) -> dict[str, Any]:
        """The session's context: ``{"prompt": str, ...}`` as the worker renders it.

        Raises
        ------
        NoSession
            No open session ``session_id`` for ``user_id``.
        WorkerRefused
            The worker wants a token the settings do not carry.
        WorkerUnreachable
            No worker answers.
        """
        query = {"user": user_id, "session": session_id}
        if budget is not None:
            query["budget"] = str(budget)
        path = f"/session/?{urlencode(query)}"
        try:
            reply = await asyncio.to_thread(fetch_json, self.settings, path, self.timeout_s)
        except HTTPError as exc:
            with exc:
                if exc.code == 404:
                    raise NoSession(f"no open session {session_id!r} for user {user_id!r}") from None
                if exc.code == 401:
                    raise WorkerRefused("the worker wants its token: set MEMSTREAM_WEB_TOKEN") from None
                raise WorkerUnreachable(f"the worker refused the request ({exc})") from None
        except OSError as exc:
            raise WorkerUnreachable(
                f"no worker answers on port {self.settings.web_port} ({exc})"
            ) from None
        return dict(reply)
