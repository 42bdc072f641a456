"""The in-process client: the client's verbs over :class:`~memstream.streams.service.app.Service`
in the application's own process (:class:`LocalMemory`, what ``AsyncMemoryClient()`` calls
without a ``url``).

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
deletion reasons; :mod:`memstream.streams.keys.store`), created on the user's first write; a
deletion is sealed with the key the user has, never a new one (a user without a key was
erased, and has no memories left to delete). **The client and the
workers must share the key store** (``MEMSTREAM_DATA_DIR/keys`` on one machine, a shared
directory, or a KMS behind :class:`~memstream.streams.keys.store.KeyStore`, passed as ``keys``):
a worker that cannot find a user's key skips the user's events as erased.

Examples
--------
>>> async with AsyncMemoryClient() as memory:  # doctest: +SKIP
...     await memory.add("I live in Oslo and I prefer tea.", user_id="ann")
...     await memory.search("where do I live", user_id="ann")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memstream.models.settings import Settings
from memstream.projections.analytics import ReportOptions, Scope, json_rows
from memstream.projections.memories import MemoryIndex, SearchFilters
from memstream.streams.client.shapes import (
    DEFAULT_WAIT_S,
    ENTITY_LIMIT,
    GRAPH_LIMIT,
    ReportRows,
    SessionContextDict,
)
from memstream.streams.kafka.publisher import EventPublisher
from memstream.streams.keys.store import KeyStore
from memstream.streams.operations.erasure import ErasureReceipt
from memstream.streams.service.app import Service
from memstream.streams.service.chat_events import Message
from memstream.streams.service.container import Container
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

__all__ = ["LocalMemory"]


def _settings_from_env() -> Settings:
    """Settings from the ``MEMSTREAM_*`` environment (defaults elsewhere)."""
    # Passed as a dict: the fields all have defaults, which mypy cannot see without a plugin.
    overrides: dict[str, Any] = {}
    return Settings(**overrides)


def search_filters(filters: SearchFilters | Mapping[str, Any] | None) -> SearchFilters | None:
    """``filters`` as the projection's ``SearchFilters`` (a dict of its fields is taken)."""
    if filters is None or isinstance(filters, SearchFilters):
        return filters
    fields = dict(filters)
    if "memory_types" in fields and fields["memory_types"] is not None:
        fields["memory_types"] = tuple(fields["memory_types"])
    try:
        return SearchFilters(**fields)
    except TypeError:
        raise ValueError(f"unknown search filters: {sorted(fields)}") from None


class LocalMemory:
    """The client's verbs over a :class:`Service` in this process (see
    :class:`~memstream.streams.client.base.AsyncMemoryClient` for each verb).

    One producer, started on the first write, serves every call; use the client on one event
    loop and close it (``async with`` does) to flush and stop it.

    Parameters
    ----------
    settings
        Broker, topics and data directory; read from ``MEMSTREAM_*`` variables when None.
    projection
        The memory index to read (any :class:`~memstream.projections.memories.MemoryIndex`);
        by default the LanceDB projection in the store of ``settings``, opened (with its
        embedder) on the first read.
    keys
        The per-user content keys; by default ``settings.keys_dir``. It must be the key
        store the workers use (see the module docstring).
    publisher
        Where writes go; the broker of ``settings`` by default.
    service
        A service to share with other adapters (then the other parameters are its own).
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

    def __repr__(self) -> str:
        return f"LocalMemory(data_dir={str(self.settings.data_dir)!r})"

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
        wait: bool = False,
        timeout_s: float = DEFAULT_WAIT_S,
    ) -> AddResult:
        """See :meth:`MemoryService.add <memstream.streams.service.memories.MemoryService.add>`."""
        return await self.service.memories.add(
            messages, user_id=user_id, session_id=session_id, agent_id=agent_id, close=close,
            event_ids=event_ids, occurred_at=occurred_at, wait=wait, timeout_s=timeout_s,
        )

    async def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 5,
        filters: SearchFilters | Mapping[str, Any] | None = None,
        as_of: datetime | None = None,
        explain: bool = False,
    ) -> list[MemoryHitDict]:
        """See :meth:`MemoryService.search <memstream.streams.service.memories.MemoryService.search>`."""
        return await self.service.memories.search(
            query, user_id=user_id, limit=limit, filters=search_filters(filters), as_of=as_of,
            explain=explain,
        )

    async def context(
        self,
        message: str,
        *,
        user_id: str,
        recent_turns: Sequence[str] = (),
        session_id: str | None = None,
        token_budget: int | None = None,
        project: str | None = None,
    ) -> ContextResult:
        """See :meth:`MemoryService.context <memstream.streams.service.memories.MemoryService.context>`."""
        return await self.service.memories.context(
            message, user_id=user_id, recent_turns=recent_turns, session_id=session_id,
            token_budget=token_budget, project=project,
        )

    async def get(self, memory_id: str, *, user_id: str) -> MemoryDict | None:
        """One of the user's memories (active or not); None if unknown or another user's."""
        return await self.service.memories.get(memory_id, user_id=user_id)

    async def get_all(self, *, user_id: str, include_inactive: bool = False) -> list[MemoryDict]:
        """The user's memories, newest first: active ones, or every status when asked."""
        return await self.service.memories.get_all(
            user_id=user_id, include_inactive=include_inactive
        )

    async def timeline(
        self, about: str, *, user_id: str, subject: str | None = None
    ) -> TimelineDict:
        """See :meth:`MemoryService.timeline <memstream.streams.service.memories.MemoryService.timeline>`."""
        return await self.service.memories.timeline(about, user_id=user_id, subject=subject)

    async def profile(
        self, *, user_id: str, subject: str | None = None, as_of: datetime | None = None
    ) -> ProfileDict:
        """See :meth:`MemoryService.profile <memstream.streams.service.memories.MemoryService.profile>`."""
        return await self.service.memories.profile(user_id=user_id, subject=subject, as_of=as_of)

    async def projects(
        self, *, user_id: str, project: str | None = None, as_of: datetime | None = None
    ) -> ProjectsDict:
        """See :meth:`MemoryService.projects <memstream.streams.service.memories.MemoryService.projects>`."""
        return await self.service.memories.projects(user_id=user_id, project=project, as_of=as_of)

    async def entity(
        self, name: str, *, user_id: str, as_of: datetime | None = None,
        limit: int = ENTITY_LIMIT,
    ) -> EntityDict:
        """See :meth:`MemoryService.entity <memstream.streams.service.memories.MemoryService.entity>`."""
        return await self.service.memories.entity(
            name, user_id=user_id, as_of=as_of, limit=limit
        )

    async def graph(
        self, *, user_id: str, as_of: datetime | None = None, limit: int = GRAPH_LIMIT
    ) -> GraphDict:
        """See :meth:`MemoryService.graph <memstream.streams.service.memories.MemoryService.graph>`."""
        return await self.service.memories.graph(user_id=user_id, as_of=as_of, limit=limit)

    async def patterns(self, *, user_id: str, as_of: datetime | None = None) -> PatternsDict:
        """See :meth:`MemoryService.patterns <memstream.streams.service.memories.MemoryService.patterns>`."""
        return await self.service.memories.patterns(user_id=user_id, as_of=as_of)

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

    async def session_context(
        self, session_id: str, *, user_id: str, budget: int | None = None
    ) -> SessionContextDict:
        """An open session's working memory, from the worker that owns it
        (:meth:`SessionService.context <memstream.streams.service.sessions.SessionService.context>`)."""
        reply = await self.service.sessions.context(
            user_id=user_id, session_id=session_id, budget=budget
        )
        return {
            "session_id": session_id,
            "prompt": str(reply.get("prompt", "")),
            "context": dict(reply.get("context", {})),
            "served_by": reply.get("served_by"),
        }

    async def close_session(self, session_id: str, *, user_id: str) -> str:
        """End a session now, so the worker consolidates it; returns the close's event id."""
        return await self.service.sessions.close(user_id=user_id, session_id=session_id)

    async def report(
        self,
        name: str,
        *,
        user_id: str,
        since: datetime | None = None,
        now: datetime | None = None,
        days: int = 7,
        limit: int = 10,
    ) -> ReportRows:
        """A named report over the user's memories and log (``ValueError`` for an unknown
        one)."""
        scope = Scope(user_id=user_id, since=since, now=now)
        result = await self.service.reports.run(
            name, scope, ReportOptions(days=days, limit=limit)
        )
        return {
            "report": name,
            "columns": result.table.column_names,
            "rows": json_rows(result.table),
        }
