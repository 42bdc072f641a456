"""The synchronous client: :class:`MemoryClient`, an
:class:`~memstream.streams.client.base.AsyncMemoryClient` (in this process, or over HTTP with
``url``) run on an event loop thread of its own."""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from memstream.streams.client.base import AsyncMemoryClient
from memstream.streams.client.loop import LoopThread
from memstream.streams.client.shapes import (
    DEFAULT_WAIT_S,
    ENTITY_LIMIT,
    GRAPH_LIMIT,
    ReportRows,
    SessionContextDict,
)

if TYPE_CHECKING:
    from memstream.models.settings import Settings
    from memstream.projections.memories import SearchFilters
    from memstream.streams.operations.erasure import ErasureReceipt
    from memstream.streams.service.chat_events import Message
    from memstream.streams.service.projects import ProjectsDict
    from memstream.streams.service.results import (
        AddResult,
        ContextResult,
        EntityDict,
        GraphDict,
        HistoryEntry,
        MemoryDict,
        MemoryHitDict,
        PatternsDict,
        ProfileDict,
        TimelineDict,
    )

__all__ = ["MemoryClient"]

T = TypeVar("T")


class MemoryClient:
    """The client's verbs as plain calls (see
    :class:`~memstream.streams.client.base.AsyncMemoryClient` for each).

    ``MemoryClient(url=..., api_key=...)`` talks HTTP to ``memstream serve``;
    ``MemoryClient()`` runs the service in this process. The async client runs on a loop in
    a daemon thread the client owns, so calls work the same from plain scripts and from code
    already inside a running loop (a notebook, a web handler): each call is handed to that
    loop and waited for. Close the client (``with`` does) to flush and stop the thread.

    Examples
    --------
    >>> with MemoryClient(url="http://127.0.0.1:8080", api_key=key) as memory:  # doctest: +SKIP
    ...     made = memory.add("I prefer window seats.", user_id="ann", wait=True)
    ...     memory.search("seat preference", user_id="ann")
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        **parts: Any,
    ) -> None:
        self._client = AsyncMemoryClient(settings, url=url, api_key=api_key, **parts)
        self.settings = self._client.settings
        self._loop = LoopThread("memstream-client")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Flush, release the client, stop the loop thread; idempotent."""
        if self._loop.stopped:
            return
        try:
            self._loop.run(self._client.close())
        finally:
            self._loop.stop()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coroutine)

    def add(
        self,
        messages: str | Sequence[Message] | Sequence[dict[str, Any]],
        *,
        user_id: str,
        session_id: str | None = None,
        agent_id: str | None = None,
        close: bool = True,
        event_ids: Sequence[str] | None = None,
        occurred_at: datetime | None = None,
        wait: bool = False,
        timeout_s: float = DEFAULT_WAIT_S,
    ) -> AddResult:
        """Publish a conversation as chat events (see :meth:`AsyncMemoryClient.add`)."""
        return self._run(
            self._client.add(
                messages,
                user_id=user_id,
                session_id=session_id,
                agent_id=agent_id,
                close=close,
                event_ids=event_ids,
                occurred_at=occurred_at,
                wait=wait,
                timeout_s=timeout_s,
            )
        )

    def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 5,
        filters: SearchFilters | Mapping[str, Any] | None = None,
        as_of: datetime | None = None,
        explain: bool = False,
    ) -> list[MemoryHitDict]:
        """The user's most relevant memories (see :meth:`AsyncMemoryClient.search`)."""
        return self._run(
            self._client.search(
                query, user_id=user_id, limit=limit, filters=filters, as_of=as_of, explain=explain
            )
        )

    def context(
        self,
        message: str,
        *,
        user_id: str,
        recent_turns: Sequence[str] = (),
        session_id: str | None = None,
        token_budget: int | None = None,
        project: str | None = None,
    ) -> ContextResult:
        """The long-term memory context of one turn (see :meth:`AsyncMemoryClient.context`)."""
        return self._run(
            self._client.context(
                message, user_id=user_id, recent_turns=recent_turns, session_id=session_id,
                token_budget=token_budget, project=project,
            )
        )

    def get(self, memory_id: str, *, user_id: str) -> MemoryDict | None:
        """One of the user's memories; None if unknown or another user's."""
        return self._run(self._client.get(memory_id, user_id=user_id))

    def get_all(self, *, user_id: str, include_inactive: bool = False) -> list[MemoryDict]:
        """The user's memories, newest first (see :meth:`AsyncMemoryClient.get_all`)."""
        return self._run(self._client.get_all(user_id=user_id, include_inactive=include_inactive))

    def timeline(self, about: str, *, user_id: str, subject: str | None = None) -> TimelineDict:
        """One attribute of the user over time, oldest value first (see
        :meth:`AsyncMemoryClient.timeline`)."""
        return self._run(self._client.timeline(about, user_id=user_id, subject=subject))

    def profile(
        self, *, user_id: str, subject: str | None = None, as_of: datetime | None = None
    ) -> ProfileDict:
        """What holds about the user, by subject and kind (see
        :meth:`AsyncMemoryClient.profile`)."""
        return self._run(self._client.profile(user_id=user_id, subject=subject, as_of=as_of))

    def entity(
        self, name: str, *, user_id: str, as_of: datetime | None = None,
        limit: int = ENTITY_LIMIT,
    ) -> EntityDict:
        """One entity of the user's graph, at most ``limit`` of its neighbours, facts and
        edges each (see :meth:`AsyncMemoryClient.entity`)."""
        return self._run(self._client.entity(name, user_id=user_id, as_of=as_of, limit=limit))

    def projects(
        self, *, user_id: str, project: str | None = None, as_of: datetime | None = None
    ) -> ProjectsDict:
        """The user's project history: tasks, decisions and open items per project (see
        :meth:`AsyncMemoryClient.projects`)."""
        return self._run(self._client.projects(user_id=user_id, project=project, as_of=as_of))

    def graph(
        self, *, user_id: str, as_of: datetime | None = None, limit: int = GRAPH_LIMIT
    ) -> GraphDict:
        """The user's entity graph, at most ``limit`` entities of it (see
        :meth:`AsyncMemoryClient.graph`)."""
        return self._run(self._client.graph(user_id=user_id, as_of=as_of, limit=limit))

    def patterns(self, *, user_id: str, as_of: datetime | None = None) -> PatternsDict:
        """The user's learned patterns with their evidence (see
        :meth:`AsyncMemoryClient.patterns`)."""
        return self._run(self._client.patterns(user_id=user_id, as_of=as_of))

    def history(self, memory_id: str, *, user_id: str) -> list[HistoryEntry]:
        """The life of one of the user's memories, in log order (see the async client)."""
        return self._run(self._client.history(memory_id, user_id=user_id))

    def delete(self, memory_id: str, *, user_id: str, reason: str = "requested") -> str:
        """Publish a ``MemoryDeleted``; ``KeyError`` if the memory is not the user's."""
        return self._run(self._client.delete(memory_id, user_id=user_id, reason=reason))

    def delete_all(self, *, user_id: str, reason: str = "requested") -> list[str]:
        """Publish a ``MemoryDeleted`` per active memory of the user; return the event ids."""
        return self._run(self._client.delete_all(user_id=user_id, reason=reason))

    def erase(self, *, user_id: str, reason: str = "requested") -> ErasureReceipt:
        """Erase the user from every store; the receipt says what was removed."""
        return self._run(self._client.erase(user_id=user_id, reason=reason))

    def session_context(
        self, session_id: str, *, user_id: str, budget: int | None = None
    ) -> SessionContextDict:
        """An open session's working memory (see :meth:`AsyncMemoryClient.session_context`)."""
        return self._run(self._client.session_context(session_id, user_id=user_id, budget=budget))

    def close_session(self, session_id: str, *, user_id: str) -> str:
        """End a session now, so the worker consolidates it; returns the close's event id."""
        return self._run(self._client.close_session(session_id, user_id=user_id))

    def report(
        self,
        name: str,
        *,
        user_id: str,
        since: datetime | None = None,
        now: datetime | None = None,
        days: int = 7,
        limit: int = 10,
    ) -> ReportRows:
        """A named analytics report over the user's memories (see the async client)."""
        return self._run(
            self._client.report(
                name, user_id=user_id, since=since, now=now, days=days, limit=limit
            )
        )
