"""The client's verbs, once: :class:`AsyncMemoryClient`, what every client of memstream offers,
over HTTP or in this process.

``AsyncMemoryClient(url=..., api_key=...)`` calls ``memstream serve`` through
:class:`~memstream.streams.client.remote.RemoteMemory` (the application needs neither LanceDB
nor users' keys); ``AsyncMemoryClient()`` or ``AsyncMemoryClient(settings)`` runs the service
in the application's own process, beside the workers' data directory, through
:class:`~memstream.streams.client.local.LocalMemory`. Both take the same verbs with the same arguments and answer with the same plain dicts
(:mod:`memstream.streams.service.results`), and raise the same errors: ``ValueError`` /
``TypeError`` for bad input, ``KeyError`` for deleting a memory that is not the user's,
:class:`~memstream.streams.service.sessions.NoSession` and
:class:`~memstream.streams.service.sessions.WorkerUnreachable` for sessions, and over HTTP
:class:`~memstream.streams.client.shapes.AccessRefused` for a key that may not do what it
asked and :class:`~memstream.streams.client.shapes.ServiceUnreachable` when the service does
not answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

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
    from memstream.streams.client.local import LocalMemory
    from memstream.streams.client.remote import RemoteMemory
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

__all__ = ["AsyncMemoryClient"]


class AsyncMemoryClient:
    """mem0-like memory operations for asyncio code: add, search, context, get, get_all,
    timeline, profile, entity, graph, history, delete, delete_all, erase, session_context,
    close_session, report.

    Every call names one user (``user_id`` is a required keyword) and only ever returns that
    user's data. Writes are events on the topics (the workers consolidate and project them);
    reads come from the projections. Close the client (``async with`` does).

    Parameters
    ----------
    settings
        For a client in this process: broker, topics and data directory; read from the
        ``MEMSTREAM_*`` variables when None.
    url
        The base URL of ``memstream serve`` (``http://host:8080``): the client talks HTTP to
        it and needs nothing else locally.
    api_key
        The API key for ``url`` (``memstream api-key add``).
    **parts
        For a client in this process: ``projection``, ``keys``, ``publisher`` or a whole
        ``service`` (see :class:`~memstream.streams.client.local.LocalMemory`); over HTTP:
        ``timeout_s``, ``retries`` and ``transport`` (see
        :class:`~memstream.streams.client.remote.RemoteMemory`).

    Examples
    --------
    >>> async with AsyncMemoryClient(url="http://127.0.0.1:8080", api_key=key) as memory:  # doctest: +SKIP
    ...     await memory.add("I live in Oslo", user_id="ann", wait=True)
    ...     await memory.search("where do I live", user_id="ann")
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        **parts: Any,
    ) -> None:
        self.backend: LocalMemory | RemoteMemory
        if url is not None:
            from memstream.streams.client.remote import RemoteMemory

            if settings is not None:
                raise TypeError("a client over HTTP takes no settings: the service has them")
            self.backend = RemoteMemory(url, api_key, **parts)
        else:
            if api_key is not None:
                raise TypeError("api_key is for a client over HTTP: give the service's url too")
            from memstream.streams.client.local import LocalMemory

            self.backend = LocalMemory(settings, **parts)

    def __repr__(self) -> str:
        return f"AsyncMemoryClient({self.backend!r})"

    @property
    def settings(self) -> Settings | None:
        """The settings of a client in this process (None over HTTP: the service has them)."""
        return getattr(self.backend, "settings", None)

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
        """Release what the client holds (connections; a local client's producer, once its
        background access events are out)."""
        await self.backend.close()

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
        """Publish a conversation as chat events: a ``session_started`` when no
        ``session_id`` is given, one ``message_added`` per message and, unless
        ``close=False``, a ``session_closed`` so the worker consolidates it now. With
        ``event_ids`` (one per message) a retried call repeats the same events. With
        ``wait`` (needs ``close``), answer once the session's memories are searchable (or
        after ``timeout_s``) with what it made (see
        :class:`~memstream.streams.service.results.AddResult`)."""
        return await self.backend.add(
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
        """The user's memories most relevant to ``query``, best first (``score`` 0..1), now
        or ``as_of`` a past time; ``explain`` adds every part of each score. ``filters``:
        the projection's ``SearchFilters``, or a dict of its fields (:data:`~memstream.streams.client.shapes.FILTER_FIELDS`)."""
        return await self.backend.search(
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
        project: str | None = None,
    ) -> ContextResult:
        """The long-term memory context of one turn, for an agent's prompt: per-type quotas
        of the best memories for ``message`` and the last ``recent_turns``, as text within
        ``token_budget`` tokens; the memories placed count as used. When the turn is about
        one of the user's projects (``project``, or one the turns name), its history follows."""
        return await self.backend.context(
            message, user_id=user_id, recent_turns=recent_turns, session_id=session_id,
            token_budget=token_budget, project=project,
        )

    async def get(self, memory_id: str, *, user_id: str) -> MemoryDict | None:
        """One of the user's memories (any status); None if unknown or another user's."""
        return await self.backend.get(memory_id, user_id=user_id)

    async def get_all(self, *, user_id: str, include_inactive: bool = False) -> list[MemoryDict]:
        """The user's memories, newest first: active ones, or every status when asked."""
        return await self.backend.get_all(user_id=user_id, include_inactive=include_inactive)

    async def timeline(
        self, about: str, *, user_id: str, subject: str | None = None
    ) -> TimelineDict:
        """One attribute of the user over time ("my budget over time"): each value it held,
        oldest first, with when it held (event time), its status, what replaced it and the
        turns that stated it. ``about`` names the attribute in plain words; ``subject`` picks
        whose (a speaker's name), else the user's own. Nothing matching gives no entries
        (``attribute`` None); ``ValueError`` for an empty ``about``."""
        return await self.backend.timeline(about, user_id=user_id, subject=subject)

    async def profile(
        self, *, user_id: str, subject: str | None = None, as_of: datetime | None = None
    ) -> ProfileDict:
        """What holds about the user, compact: their current claims (facts, preferences,
        corrections) by subject (``User`` first, then the others by name), then by kind and
        attribute, each with its value, since when, its memory and the turns that stated it.
        ``subject`` keeps one subject's; ``as_of`` reads what held at a past moment."""
        return await self.backend.profile(user_id=user_id, subject=subject, as_of=as_of)

    async def projects(
        self, *, user_id: str, project: str | None = None, as_of: datetime | None = None
    ) -> ProjectsDict:
        """The user's project history: per project (most recently worked on first), its
        tasks in the order they happened with their sessions, what was decided there and
        what is open, now or at ``as_of``; ``project`` keeps one project's (case aside)."""
        return await self.backend.projects(user_id=user_id, project=project, as_of=as_of)

    async def entity(
        self, name: str, *, user_id: str, as_of: datetime | None = None,
        limit: int = ENTITY_LIMIT,
    ) -> EntityDict:
        """One entity of the user's graph found by any of its names ("Ana", "User's
        sister"): its node (aliases, kind, the memories, turns and sessions naming it), its
        neighbours, its facts and its edges (at most ``limit``, 1 to 1000, of each; the
        ``total_*`` say how many there are), now or at ``as_of``; ``entity`` None when no
        entity has that name."""
        return await self.backend.entity(name, user_id=user_id, as_of=as_of, limit=limit)

    async def graph(
        self, *, user_id: str, as_of: datetime | None = None, limit: int = GRAPH_LIMIT
    ) -> GraphDict:
        """The user's entity graph, now or at ``as_of``: at most ``limit`` (1 to 2000) of
        the entities their memories name (``User`` and the most mentioned) and the relations
        among them (claims with their validity, co-mentions), each with its memories, turns
        and sessions; ``total_nodes``, ``total_edges`` and ``truncated`` say what was cut."""
        return await self.backend.graph(user_id=user_id, as_of=as_of, limit=limit)

    async def patterns(self, *, user_id: str, as_of: datetime | None = None) -> PatternsDict:
        """The user's learned patterns (what they usually ask about, their tools, repeated
        corrections, when they are active), each with its evidence (sessions, events) and
        decay score; ``as_of`` reads those that held at a past moment. Searches leave
        patterns out."""
        return await self.backend.patterns(user_id=user_id, as_of=as_of)

    async def history(self, memory_id: str, *, user_id: str) -> list[HistoryEntry]:
        """The life of one of the user's memories from the log, in log order."""
        return await self.backend.history(memory_id, user_id=user_id)

    async def delete(self, memory_id: str, *, user_id: str, reason: str = "requested") -> str:
        """Publish a ``memory_deleted`` for one of the user's memories; returns its event id.
        ``KeyError`` if the memory is unknown or another user's."""
        return await self.backend.delete(memory_id, user_id=user_id, reason=reason)

    async def delete_all(self, *, user_id: str, reason: str = "requested") -> list[str]:
        """Publish a ``memory_deleted`` per active memory of the user; returns the ids."""
        return await self.backend.delete_all(user_id=user_id, reason=reason)

    async def erase(self, *, user_id: str, reason: str = "requested") -> ErasureReceipt:
        """Erase the user from every store (crypto-shredding); the receipt says what each
        store held and whether all of it is gone (``complete``)."""
        return await self.backend.erase(user_id=user_id, reason=reason)

    async def session_context(
        self, session_id: str, *, user_id: str, budget: int | None = None
    ) -> SessionContextDict:
        """An open session's working memory and its prompt within ``budget`` tokens, from
        the worker that holds it. ``NoSession`` if the session is not open (or the worker
        has not seen its events yet); ``WorkerUnreachable`` if no worker answers."""
        return await self.backend.session_context(session_id, user_id=user_id, budget=budget)

    async def close_session(self, session_id: str, *, user_id: str) -> str:
        """End a session now, so the worker consolidates it; returns the close's event id."""
        return await self.backend.close_session(session_id, user_id=user_id)

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
        """A named analytics report (``growth``, ``access``, ``decay``...) over the user's
        memories and log."""
        return await self.backend.report(
            name, user_id=user_id, since=since, now=now, days=days, limit=limit
        )
