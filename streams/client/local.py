"""The in-process client: mem0-like verbs over :class:`~memstream.streams.service.app.Service`.

Writes are events, reads come from projections (see
:mod:`memstream.streams.service.memories` for what each verb does).

``add`` and ``delete`` publish events on the topics (chat events, ``MemoryDeleted``) and return
once the broker has acknowledged them; the worker consolidates and its projector writes
LanceDB. Nothing here writes LanceDB, so every change stays in the log and replays.
Reads (``search``, ``get``, ``get_all``) come from the LanceDB projection and see a change
once the worker has projected it, usually within a second or two; ``history`` reads the
memories topic itself.

Every call names one user (``user_id`` is a required keyword) and only ever returns that
user's data: the projection filters on a digest of the id computed in code, and ``history``
keeps only events keyed by and belonging to that user.

What the client publishes is sealed with the user's key (chat content, retrieval queries,
deletion reasons; :mod:`memstream.streams.runtime.keys`), created on the user's first write; a
deletion is sealed with the key the user has, never a new one (a user without a key was
erased, and has no memories left to delete). **The client and the
workers must share the key store** (``MEMSTREAM_DATA_DIR/keys`` on one machine, a shared
directory, or a KMS behind :class:`~memstream.streams.runtime.keys.KeyStore`, passed as ``keys``):
a worker that cannot find a user's key skips the user's events as erased.

Examples
--------
>>> with MemoryClient() as memory:  # doctest: +SKIP
...     memory.add("I live in Oslo and I prefer tea.", user_id="ann")
...     memory.search("where do I live", user_id="ann")
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar

from memstream.models.settings import Settings
from memstream.projections.memories import MemoryIndex, SearchFilters
from memstream.streams.runtime.keys import KeyStore
from memstream.streams.runtime.publisher import EventPublisher
from memstream.streams.service.app import Service
from memstream.streams.service.container import Container
from memstream.streams.service.results import (
    AddResult,
    ContextResult,
    HistoryEntry,
    MemoryDict,
    MemoryHitDict,
)
from memstream.streams.tools.erasure import ErasureReceipt
from memstream.streams.tools.publish import Message

__all__ = ["AsyncMemoryClient", "MemoryClient"]

T = TypeVar("T")


def _settings_from_env() -> Settings:
    """Settings from the ``MEMSTREAM_*`` environment (defaults elsewhere)."""
    # Passed as a dict: the fields all have defaults, which mypy cannot see without a plugin.
    overrides: dict[str, Any] = {}
    return Settings(**overrides)


class AsyncMemoryClient:
    """mem0-like memory operations for asyncio code; writes are events on the topics.

    One producer, started on the first write, serves every call; use the client on one event
    loop and close it (``async with`` does) to flush and stop it.

    Parameters
    ----------
    settings
        Broker, topics and data directory; read from ``MEMSTREAM_*`` variables when None.
    projection
        The memory index to read (any :class:`~memstream.projections.memories.MemoryIndex`);
        by default the LanceDB projection in ``settings.lancedb_dir``, opened (with its
        embedder) on the first read.
    keys
        The per-user content keys; by default ``settings.keys_dir``. It must be the key
        store the workers use (see the module docstring).
    publisher
        Where writes go; the broker of ``settings`` by default.
    service
        A service to share with other adapters (then the other parameters are its own).

    Examples
    --------
    >>> async with AsyncMemoryClient() as memory:  # doctest: +SKIP
    ...     await memory.add([{"role": "user", "content": "I live in Oslo"}], user_id="ann")
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        projection: MemoryIndex | None = None,
        keys: KeyStore | None = None,
        publisher: EventPublisher | None = None,
        service: Service | None = None,
    ) -> None:
        if service is None:
            container = Container(
                settings or _settings_from_env(), keys=keys, projection=projection,
                publisher=publisher,
            )
            service = Service(container)
        self.service = service
        self.settings = service.settings
        self.keys = service.container.key_store

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Wait (bounded) for background access events, then stop the producer."""
        await self.service.close()

    async def add(
        self,
        messages: str | Sequence[Message] | Sequence[dict[str, Any]],
        *,
        user_id: str,
        session_id: str | None = None,
        agent_id: str | None = None,
        close: bool = True,
        event_ids: Sequence[str] | None = None,
        occurred_at: datetime | None = None,
    ) -> AddResult:
        """Publish a conversation as chat events (:meth:`MemoryService.add
        <memstream.streams.service.memories.MemoryService.add>`)."""
        return await self.service.memories.add(
            messages, user_id=user_id, session_id=session_id, agent_id=agent_id, close=close,
            event_ids=event_ids, occurred_at=occurred_at,
        )

    async def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 5,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
        explain: bool = False,
    ) -> list[MemoryHitDict]:
        """The user's most relevant memories, now or ``as_of`` a past time, with every part
        of each score when ``explain``
        (:meth:`MemoryService.search <memstream.streams.service.memories.MemoryService.search>`)."""
        return await self.service.memories.search(
            query, user_id=user_id, limit=limit, filters=filters, as_of=as_of, explain=explain
        )

    async def context(
        self,
        message: str,
        *,
        user_id: str,
        recent_turns: Sequence[str] = (),
        session_id: str | None = None,
        token_budget: int | None = None,
    ) -> ContextResult:
        """The long-term memory context of one turn, for an agent's prompt
        (:meth:`MemoryService.context <memstream.streams.service.memories.MemoryService.context>`)."""
        return await self.service.memories.context(
            message, user_id=user_id, recent_turns=recent_turns, session_id=session_id,
            token_budget=token_budget,
        )

    async def session_context(
        self, session_id: str, *, user_id: str, budget: int | None = None
    ) -> dict[str, Any]:
        """An open session's working memory (window, task, tool calls, entities, scratchpad)
        and its prompt within ``budget`` tokens, from the worker that owns it
        (:meth:`SessionService.context <memstream.streams.service.sessions.SessionService.context>`)."""
        return await self.service.sessions.context(
            user_id=user_id, session_id=session_id, budget=budget
        )

    async def close_session(self, session_id: str, *, user_id: str) -> str:
        """End a session now, so the worker consolidates it; returns the close's event id."""
        return await self.service.sessions.close(user_id=user_id, session_id=session_id)

    async def get(self, memory_id: str, *, user_id: str) -> MemoryDict | None:
        """One of the user's memories (active or not); None if unknown or another user's."""
        return await self.service.memories.get(memory_id, user_id=user_id)

    async def get_all(self, *, user_id: str, include_inactive: bool = False) -> list[MemoryDict]:
        """The user's memories, newest first: active ones, or every status when asked."""
        return await self.service.memories.get_all(
            user_id=user_id, include_inactive=include_inactive
        )

    async def history(self, memory_id: str, *, user_id: str) -> list[HistoryEntry]:
        """The life of one of the user's memories from the memories topic, in log order."""
        return await self.service.memories.history(memory_id, user_id=user_id)

    async def delete(self, memory_id: str, *, user_id: str, reason: str = "requested") -> str:
        """Publish a ``MemoryDeleted``; ``KeyError`` if the memory is not the user's."""
        return await self.service.memories.delete(memory_id, user_id=user_id, reason=reason)

    async def delete_all(self, *, user_id: str, reason: str = "requested") -> list[str]:
        """Publish a ``MemoryDeleted`` per active memory of the user; return the event ids."""
        return await self.service.memories.delete_all(user_id=user_id, reason=reason)

    async def erase(self, *, user_id: str, reason: str = "requested") -> ErasureReceipt:
        """Erase the user from every store; the receipt says what was removed."""
        return await self.service.memories.erase(user_id, reason=reason)


# --- the sync client -------------------------------------------------------------------


class MemoryClient:
    """The synchronous client: :class:`AsyncMemoryClient` on its own event loop thread.

    The loop runs in a daemon thread the client owns, so calls work the same from plain
    scripts and from code already inside a running loop (a notebook, a web handler): each
    call is handed to that loop and waited for. One producer serves every call. Close the
    client (``with`` does) to flush background access events and stop the thread.

    Examples
    --------
    >>> with MemoryClient() as memory:  # doctest: +SKIP
    ...     result = memory.add("I prefer window seats.", user_id="ann")
    ...     memory.get_all(user_id="ann")
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        projection: MemoryIndex | None = None,
        keys: KeyStore | None = None,
        publisher: EventPublisher | None = None,
        service: Service | None = None,
    ) -> None:
        self._client = AsyncMemoryClient(
            settings, projection=projection, keys=keys, publisher=publisher, service=service
        )
        self.settings = self._client.settings
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="memstream-client", daemon=True
        )
        self._thread.start()
        self._closed = False

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
        """Flush, stop the producer and the loop thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._client.close(), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coroutine.close()
            raise RuntimeError("the client is closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

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
            )
        )

    def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 5,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
        explain: bool = False,
    ) -> list[MemoryHitDict]:
        """The user's most relevant memories, now or ``as_of`` a past time (see
        :meth:`AsyncMemoryClient.search`)."""
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
    ) -> ContextResult:
        """The long-term memory context of one turn (see :meth:`AsyncMemoryClient.context`)."""
        return self._run(
            self._client.context(
                message, user_id=user_id, recent_turns=recent_turns, session_id=session_id,
                token_budget=token_budget,
            )
        )

    def session_context(
        self, session_id: str, *, user_id: str, budget: int | None = None
    ) -> dict[str, Any]:
        """An open session's working memory (see :meth:`AsyncMemoryClient.session_context`)."""
        return self._run(self._client.session_context(session_id, user_id=user_id, budget=budget))

    def close_session(self, session_id: str, *, user_id: str) -> str:
        """End a session now, so the worker consolidates it; returns the close's event id."""
        return self._run(self._client.close_session(session_id, user_id=user_id))

    def get(self, memory_id: str, *, user_id: str) -> MemoryDict | None:
        """One of the user's memories; None if unknown or another user's."""
        return self._run(self._client.get(memory_id, user_id=user_id))

    def get_all(self, *, user_id: str, include_inactive: bool = False) -> list[MemoryDict]:
        """The user's memories, newest first (see :meth:`AsyncMemoryClient.get_all`)."""
        return self._run(self._client.get_all(user_id=user_id, include_inactive=include_inactive))

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
