"""The memory operations every interface offers: add, search, get, list, history, delete,
erase.

Writes are events on the topics (chat events, ``MemoryDeleted``, ``UserErased``) sent through
the container's :class:`~memstream.streams.kafka.publisher.EventPublisher`; nothing here
writes LanceDB, so every change stays in the log and replays. Reads come from the memory
projection (``search``, ``get``, ``list``) or the memories topic itself (``history``).

Every call names one user and only ever returns that user's data: the projection filters on
a digest of the id computed in code, and ``history`` keeps only events keyed by and
belonging to that user.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from memstream.models.events.envelope import Event, derived_id, utc_instant
from memstream.models.events.memory import MemoriesRetrieved, MemoryDeleted
from memstream.projections.entity_graph import (
    ENTITY_LIMIT,
    GRAPH_LIMIT,
    MAX_ENTITY_LIMIT,
    MAX_GRAPH_LIMIT,
    check_limit,
    entity_graph,
)
from memstream.projections.entity_graph import entity as read_entity
from memstream.projections.memories import MemoryIndex, MemoryRecord, SearchFilters
from memstream.projections.retrieval import MAX_CANDIDATES, RankedMemory, Retriever
from memstream.streams.operations.erasure import ErasureReceipt
from memstream.streams.service.accesses import AccessSender
from memstream.streams.service.chat_events import Message, chat_events_for_add
from memstream.streams.service.checks import check_as_of, check_id, check_query
from memstream.streams.service.container import Container
from memstream.streams.service.patterns import learned_patterns
from memstream.streams.service.profiles import profile as read_profile
from memstream.streams.service.profiles import profile_lines
from memstream.streams.service.projects import ProjectsDict, check_project, project_context
from memstream.streams.service.projects import history as project_history
from memstream.streams.service.results import (
    AddResult,
    ContextResult,
    EntityDict,
    GraphDict,
    HistoryEntry,
    MadeMemoryDict,
    MemoryDict,
    MemoryHitDict,
    PatternsDict,
    ProfileDict,
    SourceEventDict,
    TimelineDict,
    history_entry,
    memory_dict,
    normalise_messages,
    ranked_dict,
    retrieval_dict,
    source_event,
)
from memstream.streams.service.timelines import timeline
from memstream.streams.service.user_log import user_events
from memstream.streams.service.waiting import ConsolidationWatch

__all__ = [
    "DEFAULT_WAIT_S",
    "MAX_WAIT_S",
    "MemoryService",
    "check_id",
    "check_query",
]

log = logging.getLogger(__name__)

#: How long ``add(wait=True)`` follows a session by default, and at most.
DEFAULT_WAIT_S = 30.0
MAX_WAIT_S = 300.0


class MemoryService:
    """The memory operations over one :class:`Container`; use it on one event loop and
    close it to flush the access events still being published. LanceDB reads run in worker
    threads so they never block the loop."""

    def __init__(self, container: Container) -> None:
        self.container = container
        self.settings = container.settings
        self.topics = container.topics
        #: Retrievals' access events, published in the background.
        self.accesses = AccessSender(self.settings, self._send_accesses)

    async def close(self) -> None:
        """Wait (bounded) for background access events."""
        await self.accesses.close()

    # --- writes -----------------------------------------------------------------------

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
        """Publish a conversation as chat events; the worker turns it into memories.

        Publishes ``session_started`` when no ``session_id`` is given (one is generated), one
        ``message_added`` per message and, unless ``close=False``, a ``session_closed`` so
        the worker consolidates the session now. Event ids are uuid4s, or deterministic when
        ``event_ids`` (one per message) are given, so a retried call repeats the same events.
        Returns after the broker acknowledged every event; memories appear once the worker
        has consolidated and projected them.

        With ``wait`` (which needs ``close``) it then follows the session through the log
        (:mod:`memstream.streams.service.waiting`) for up to ``timeout_s`` seconds and
        answers with what it made: ``status``, the memories added and reinforced as the
        projection holds them (searchable when ``status`` is ``searchable``), the ids of
        those superseded, and why an extraction failed.

        Raises
        ------
        ValueError
            Malformed messages or ids, an event over ``settings.max_event_bytes`` (checked
            before anything is published), ``wait`` without ``close``, or a timeout outside
            0 to ``MAX_WAIT_S``.
        TypeError
            Content that is not text.
        """
        check_id("user_id", user_id)
        if wait and not close:
            raise ValueError("wait=True needs close=True: an open session makes no memories yet")
        if not 0 < timeout_s <= MAX_WAIT_S:
            raise ValueError(f"timeout_s must be more than 0 and at most {MAX_WAIT_S:.0f}")
        session_id, events = chat_events_for_add(
            normalise_messages(messages),
            user_id=user_id,
            session_id=session_id,
            agent_id=agent_id,
            close=close,
            event_ids=event_ids,
            occurred_at=occurred_at,
        )
        published: AddResult = {
            "session_id": session_id, "event_ids": [event.event_id for event in events]
        }
        if not wait:
            await self._send(self.topics.chat, events)
            return published
        projection = await self._projection()
        async with ConsolidationWatch(
            self.settings, self.container.key_store, projection, user_id
        ) as watch:
            await self._send(self.topics.chat, events)
            outcome = await watch.wait(session_id, timeout_s)
        made: list[MadeMemoryDict] = []
        for decision, ids in (("added", outcome.added), ("reinforced", outcome.reinforced)):
            for memory_id in dict.fromkeys(ids):
                record = await asyncio.to_thread(projection.get, user_id, memory_id)
                if record is not None:
                    made.append({**memory_dict(record), "decision": decision})
        return {
            **published,
            "status": outcome.status,
            "memories": made,
            "superseded": outcome.superseded,
            "failures": outcome.failures,
        }

    async def delete(self, memory_id: str, *, user_id: str, reason: str = "requested") -> str:
        """Publish a ``MemoryDeleted`` for one of the user's memories; return its event id.

        The delete id is deterministic (user, memory), so a retry repeats the same event.
        The memory leaves search and ``get_all`` once the projector has applied it.

        Raises
        ------
        KeyError
            The memory is unknown, or belongs to another user (the two are not told apart).
            Ownership is checked in the projection, so a memory still on its way there
            (published, not yet projected) is unknown too. Also when the user has no key:
            the user was erased (the projection drops the memory as it applies that).
        """
        record = await self._get_record(memory_id, user_id=user_id)
        if record is None:
            raise KeyError(memory_id)
        # Sealed with the user's key, never a new one: a user without a key was erased.
        sent = await self._send(
            self.topics.memories, [self._deletion(record, user_id, reason)], create_keys=False
        )
        if not sent:
            raise KeyError(memory_id)
        return sent[0].event_id

    async def delete_all(self, *, user_id: str, reason: str = "requested") -> list[str]:
        """Publish a ``MemoryDeleted`` for each active memory of the user; return the ids
        (none for a user without a key: erased)."""
        projection = await self._projection()
        records = await asyncio.to_thread(projection.list_memories, check_id("user_id", user_id))
        deletions = [self._deletion(record, user_id, reason) for record in records]
        sent = await self._send(self.topics.memories, deletions, create_keys=False)
        return [event.event_id for event in sent]

    def _deletion(self, record: MemoryRecord, user_id: str, reason: str) -> MemoryDeleted:
        return MemoryDeleted(
            event_id=derived_id("client-delete", user_id, record.memory_id),
            user_id=user_id,
            session_id=record.session_id,
            occurred_at=datetime.now(UTC),
            memory_id=record.memory_id,
            reason=reason,
        )

    # --- reads ------------------------------------------------------------------------

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
        """The user's active memories most relevant to ``query``, best first, as plain dicts.

        Ranked by :meth:`~memstream.projections.retrieval.Retriever.search`: the same memories
        as the projection's hybrid search of ``limit``, ordered by the rank score (relevance,
        with importance, recency and use breaking near-ties), every type competing for the
        places. ``score`` is that rank score on 0..1; ``relevance``, ``similarity`` and
        ``words`` are its parts (see :class:`MemoryHitDict`). An episode's ``context`` is the
        conversation it came from. The retrieval's access event, naming the memories
        returned, goes to the accesses topic in the background and never delays the answer.

        ``as_of`` answers from what memstream believed at that time: memories recorded by
        then (event time) and not superseded or expired by then, ranked with recency as of
        then. Deleted memories stay out. A point-in-time search is not counted as use (it
        publishes no access event). ``explain`` adds every part of each score (``explain``).

        Raises
        ------
        ValueError
            ``query`` empty or only whitespace, ``limit`` outside 1 to 200, or an unknown
            memory type in ``filters``.
        """
        items = await self.ranked(
            query, user_id=user_id, limit=limit, filters=filters, as_of=as_of, count_as_use=True
        )
        return [ranked_dict(item, explain=explain) for item in items]

    async def context(
        self,
        message: str,
        *,
        user_id: str,
        recent_turns: Sequence[str] = (),
        session_id: str | None = None,
        token_budget: int | None = None,
        quotas: Mapping[str, int] | None = None,
        filters: SearchFilters | None = None,
        explain: bool = False,
        project: str | None = None,
    ) -> ContextResult:
        """The long-term memory context of one turn, for an agent's prompt (the seed's
        "3 preferences, 5 facts, 2 summaries", plus episodes and corrections).

        The query is ``message`` with the last of ``recent_turns`` (oldest first); each
        memory type fills its quota (``quotas`` over the settings' ``quota_*``) from the
        ranked candidates, and the text is cut to ``token_budget`` tokens
        (``memory_context_tokens`` by default). The memories placed in the text are counted as
        used: their access event goes out in the background, naming ``session_id``.

        At a session's start (no ``recent_turns`` that say something) the text opens with the
        user's profile (:meth:`profile`, at ``filters.as_of`` if given): what holds about them,
        one line per claim, within half the budget. When the turn is about one of the user's
        projects (``project``, a known project the message or recent turns name, or the
        project of the session's task memories), the project's history follows
        (:meth:`projects`), within 30% of the budget.

        Raises
        ------
        ValueError
            A negative budget or quota; ``message`` empty or only whitespace with no
            ``recent_turns`` that say something; ``project`` blank or over 200 characters.
        """
        check_id("user_id", user_id)
        if isinstance(recent_turns, str):
            raise TypeError("recent_turns must be a list of turns, not a string")
        if not any(isinstance(turn, str) and turn.strip() for turn in recent_turns):
            # The query is the message with the last turn: one of them must say something.
            check_query("message", message)
        check_project(project)
        projection = await self._projection()
        starting = not any(isinstance(turn, str) and turn.strip() for turn in recent_turns)
        lines: list[tuple[str, str]] = []
        as_of = filters.as_of if filters is not None else None
        if starting:
            found = await asyncio.to_thread(read_profile, projection, user_id, None, as_of)
            lines = profile_lines(found)
        retriever = Retriever(projection, self.settings)
        budget = self.settings.memory_context_tokens if token_budget is None else token_budget
        section = "" if budget < 0 else await asyncio.to_thread(
            project_context, projection, user_id, project,
            [message, *recent_turns], as_of, budget, retriever.count_tokens,
            session_id if session_id is not None else filters.session_id if filters else None,
        )
        retrieval = await asyncio.to_thread(
            retriever.retrieve,
            user_id,
            message,
            recent_turns=recent_turns,
            filters=filters,
            token_budget=budget - retriever.count_tokens(f"{section}\n\n") if section else budget,
            quotas=quotas,
            session_id=session_id,
            profile=lines,
        )
        if retrieval.access_event is not None:
            self.accesses.publish(retrieval.access_event)
        result = retrieval_dict(retrieval, explain=explain)
        joined = "\n\n".join(part for part in (result["context"], section) if part)
        if section and retriever.count_tokens(joined) <= budget:
            result["context"], result["tokens"] = joined, retriever.count_tokens(joined)
        return result

    async def ranked(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 5,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
        table: str | None = None,
        count_as_use: bool = False,
    ) -> list[RankedMemory]:
        """What :meth:`search` finds, with every part of each score. ``table`` reads another
        memory table of the data directory (a re-extraction's) instead of the live one.

        Not counted as use by default (for inspecting a ranking); with ``count_as_use`` the
        retrieval's access event goes out in the background, as :meth:`search`'s does (the
        ``memstream search`` command), except for a point-in-time search (``as_of``) or one
        of another table, which never count.

        Raises
        ------
        ValueError
            As :meth:`search`.
        LookupError
            ``table`` is not a memory table of the data directory.
        """
        retriever, items = await self._rank(query, user_id, limit, filters, as_of, table)
        if count_as_use and as_of is None and table is None:
            event = retriever.access_event(user_id, query, items)
            if event is not None:
                self.accesses.publish(event)
        return items

    async def _rank(
        self,
        query: str,
        user_id: str,
        limit: int,
        filters: SearchFilters | None,
        as_of: datetime | None,
        table: str | None,
    ) -> tuple[Retriever, list[RankedMemory]]:
        check_query("query", query)
        if as_of is not None:
            try:
                utc_instant(as_of)
            except ValueError as exc:
                raise ValueError(f"as_of {exc}") from None
        if not 1 <= limit <= MAX_CANDIDATES:
            raise ValueError(f"limit must be between 1 and {MAX_CANDIDATES}")
        check_id("user_id", user_id)
        if table is None:
            projection = await self._projection()
        else:
            projection = await asyncio.to_thread(self.container.memory_table, table)
        if as_of is None:
            retriever = Retriever(projection, self.settings)
        else:
            filters = replace(filters or SearchFilters(), as_of=as_of)
            retriever = Retriever(projection, self.settings, clock=lambda: as_of)
        items = await asyncio.to_thread(
            retriever.search, user_id, query, limit=limit, filters=filters
        )
        return retriever, items

    async def get(self, memory_id: str, *, user_id: str) -> MemoryDict | None:
        """One of the user's memories (active or not); None if unknown or another user's."""
        record = await self._get_record(memory_id, user_id=user_id)
        return memory_dict(record) if record is not None else None

    async def get_all(self, *, user_id: str, include_inactive: bool = False) -> list[MemoryDict]:
        """The user's memories, newest first: active ones, or every status when asked."""
        projection = await self._projection()
        records = await asyncio.to_thread(
            projection.list_memories,
            check_id("user_id", user_id),
            include_inactive=include_inactive,
        )
        return [memory_dict(record) for record in records]

    async def timeline(
        self, about: str, *, user_id: str, subject: str | None = None
    ) -> TimelineDict:
        """One attribute of the user over time: each value it held, oldest first, with its
        interval in event time and the turns that stated it ("my budget over time").

        ``about`` names the attribute in the caller's words ("budget", "where do I live");
        ``subject`` picks whose (a speaker's name, "User's sister"), else the user's own.
        An attribute nothing matches gives an empty timeline (``attribute`` None).

        Raises
        ------
        ValueError
            ``about`` is empty or longer than 1,000 characters.
        """
        check_id("user_id", user_id)
        if not isinstance(about, str) or not about.strip():
            raise ValueError("about must name what to follow, e.g. 'budget' or 'where I live'")
        if len(about) > 1_000:
            raise ValueError("about is longer than 1,000 characters; name the attribute only")
        if subject is not None:
            check_id("subject", subject)
        projection = await self._projection()
        return await asyncio.to_thread(timeline, projection, user_id, about, subject)

    async def profile(
        self, *, user_id: str, subject: str | None = None, as_of: datetime | None = None
    ) -> ProfileDict:
        """What holds about the user: their current claims (facts, preferences, corrections)
        by subject (``User`` first, then the others by name), then by kind and attribute,
        each with its value, since when it holds and the turns that stated it.

        ``subject`` keeps one subject's (a speaker's name, "User's sister"); ``as_of`` reads
        what held at that moment (the rule of :meth:`search`'s ``as_of``). A user without
        claims has an empty profile.

        Raises
        ------
        ValueError
            ``subject`` empty or over 200 characters; ``as_of`` without a time zone or
            outside the years 1 to 9999 in UTC.
        """
        check_id("user_id", user_id)
        if subject is not None:
            check_id("subject", subject)
            if not subject.strip() or len(subject) > 200:
                raise ValueError("subject must name whose profile, e.g. 'User' or 'Maya'")
        check_as_of(as_of)
        projection = await self._projection()
        return await asyncio.to_thread(read_profile, projection, user_id, subject, as_of)

    async def patterns(self, *, user_id: str, as_of: datetime | None = None) -> PatternsDict:
        """The user's learned patterns (what they usually ask about, the tools they use, the
        corrections they repeat, when they are active), each with its evidence and decay
        score; at ``as_of``, those that held then. Searches leave patterns out.

        Raises
        ------
        ValueError
            ``as_of`` without a time zone or outside the years 1 to 9999 in UTC.
        """
        check_id("user_id", user_id)
        check_as_of(as_of)
        projection = await self._projection()
        return await asyncio.to_thread(
            learned_patterns, projection, user_id, self.settings, as_of
        )

    async def projects(
        self, *, user_id: str, project: str | None = None, as_of: datetime | None = None
    ) -> ProjectsDict:
        """The user's project history: per project (most recently worked on first), its
        tasks in the order they happened with their sessions, what was decided there and
        what is still open, now or at ``as_of`` (see :mod:`~memstream.streams.service.projects`).
        ``project`` keeps one project's (case aside); an unknown one gives no projects.

        Raises
        ------
        ValueError
            ``project`` blank or over 200 characters; ``as_of`` as :meth:`profile` refuses it.
        """
        check_id("user_id", user_id)
        check_project(project)
        check_as_of(as_of)
        projection = await self._projection()
        return await asyncio.to_thread(project_history, projection, user_id, project, as_of)

    async def entity(
        self, name: str, *, user_id: str, as_of: datetime | None = None,
        limit: int = ENTITY_LIMIT,
    ) -> EntityDict:
        """One entity of the user's graph (a person, place, organisation, pet, project or
        thing their memories name) found by any of its names: its node with aliases, kind
        and sources, its neighbours, its facts (the claims about it) and its edges, at most
        ``limit`` of each, with their totals, now or at ``as_of`` (see
        :mod:`~memstream.projections.entity_graph`). ``entity`` is None when no entity has
        that name.

        Raises
        ------
        ValueError
            ``name`` empty or over 200 characters; ``limit`` not from 1 to 1000; ``as_of``
            as :meth:`profile` refuses it.
        """
        check_id("user_id", user_id)
        check_id("name", name)
        if not name.strip() or len(name) > 200:
            raise ValueError("name must name an entity, e.g. 'Ana' or 'User's sister'")
        check_limit(limit, MAX_ENTITY_LIMIT)
        check_as_of(as_of)
        projection = await self._projection()
        return await asyncio.to_thread(read_entity, projection, user_id, name, as_of, limit)

    async def graph(
        self, *, user_id: str, as_of: datetime | None = None, limit: int = GRAPH_LIMIT
    ) -> GraphDict:
        """The user's entity graph, now or at ``as_of``: at most ``limit`` of the entities
        their memories name (``User`` and the most mentioned; listed ``User`` first, then by
        name) with aliases, kind and sources, and the relations among those (claims, with
        their validity, and co-mentions), each with its memories, turns and sessions;
        ``total_nodes``, ``total_edges`` and ``truncated`` say what was left out.

        Raises
        ------
        ValueError
            ``limit`` not from 1 to 2000; ``as_of`` as :meth:`profile` refuses it.
        """
        check_id("user_id", user_id)
        check_limit(limit, MAX_GRAPH_LIMIT)
        check_as_of(as_of)
        projection = await self._projection()
        return await asyncio.to_thread(entity_graph, projection, user_id, as_of, limit)

    async def history(self, memory_id: str, *, user_id: str) -> list[HistoryEntry]:
        """The life of one of the user's memories from the memories topic, in log order.

        Its add, reinforcements, supersession (either side), promotion, expiry, forgetting
        and deletion, each with event type, event time and source events. Only events keyed
        by the user and carrying the user's id count, so another user's memory id yields an
        empty list. Sealed events are opened with the user's key; once the user is erased
        they are left out: every event of the user before the user's latest ``user_erased``
        event (by offset on its partition, by broker time elsewhere; see
        :mod:`memstream.models.erasure`), sealed or not, so the history of an erased user is
        empty while a returning user's new memories have theirs. Reads the user's partition
        of the topic: cost grows with the log.
        """
        check_id("memory_id", memory_id)
        entries: list[HistoryEntry] = []
        for partition, offset, event in await self._user_events(self.topics.memories, user_id):
            entry = history_entry(event, memory_id, partition, offset)
            if entry is not None:
                entries.append(entry)
        return entries

    async def sources(self, event_ids: Sequence[str], *, user_id: str) -> list[SourceEventDict]:
        """The user's chat events among ``event_ids`` (a memory's ``source_event_ids``), in
        log order: the words a memory came from, with who said them and when.

        Read from the user's partition of the chat topic, under the same rules as
        :meth:`history` (only the user's own events, opened with the user's key, nothing from
        before an erasure). An id of another user's event, or of one no longer in the log,
        is simply not in the answer.
        """
        wanted = {check_id("event_id", event_id) for event_id in event_ids}
        if not wanted:
            return []
        return [
            source_event(event, partition, offset)
            for partition, offset, event in await self._user_events(self.topics.chat, user_id)
            if event.event_id in wanted
        ]

    async def erase(
        self, user_id: str, *, reason: str = "requested", wait_s: float = 60.0
    ) -> ErasureReceipt:
        """Erase the user from every store and return the receipt (see
        :func:`memstream.streams.operations.erasure.erase`)."""
        from memstream.streams.operations.erasure import erase

        return await erase(self.settings, check_id("user_id", user_id), reason=reason, wait_s=wait_s)

    async def _get_record(self, memory_id: str, *, user_id: str) -> MemoryRecord | None:
        projection = await self._projection()
        return await asyncio.to_thread(
            projection.get, check_id("user_id", user_id), check_id("memory_id", memory_id)
        )

    async def _projection(self) -> MemoryIndex:
        projection = await asyncio.to_thread(self.container.memory_projection)
        self.container.follow_log()
        return projection

    async def _send(
        self, topic: str, events: Sequence[Event], *, create_keys: bool = True
    ) -> list[Event]:
        """The events as sent (sealed), every one acknowledged; see
        :meth:`~memstream.streams.kafka.publisher.EventPublisher.publish`."""
        sent = await self.container.event_publisher().publish(
            topic, events, create_keys=create_keys
        )
        return [s.event for s in sent if s.event is not None]

    async def _user_events(self, topic: str, user_id: str) -> list[tuple[int, int, Event]]:
        """The user's events on ``topic``, opened, in log order (see
        :func:`~memstream.streams.service.user_log.user_events`)."""
        check_id("user_id", user_id)
        return await user_events(self.settings, self.container.key_store, topic, user_id)

    async def _send_accesses(self, batch: list[MemoriesRetrieved]) -> None:
        await self._send(self.topics.accesses, batch)
