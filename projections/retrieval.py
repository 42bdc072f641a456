"""Retrieval: the long-term memory context of one conversation turn.

:class:`Retriever` turns the current message (and the last few turns) into one hybrid search
of the user's memories, ranks the candidates by a composite score, fills a quota per memory
type, and renders the winners as prompt text cut to a token budget. The scoring, the quotas
and the text are :mod:`memstream.projections.prompt_context`'s; their names are importable
from here too.

What it does differently from the seed's retriever, on purpose:

* **One search per call, no deeper than needed.** All types come from a single hybrid
  search of the projection; :meth:`Retriever.search` asks it for exactly the ``limit``
  memories it returns, :meth:`Retriever.retrieve` for :data:`CANDIDATES_PER_SLOT` per slot of
  its quotas. Filters run inside LanceDB before ranking, never on fetched rows.
* **Relevance decides, priors break near-ties.** The rank score is ``(w_rel * relevance +
  w_imp * importance + w_rec * recency + w_use * use) / (w_rel + w_imp + w_rec + w_use)``,
  on 0..1, with the weights of :class:`~memstream.models.settings.Settings` (1.0, 0.02,
  0.015, 0.005 by default). Relevance is the projection's own score of the memory (cosine similarity
  and BM25, :func:`memstream.projections.memories.fuse`), the same whatever else was
  found; so the priors can move a memory past another only when their relevance differs by
  less than 0.04, unless the settings weigh them more. Recency is ``0.5 ** (age_days /
  half_life)`` of the memory's **event time** (``created_at``), so being retrieved never
  makes a memory "recent"; use is ``log1p(access_count) / log1p(decay_use_saturation)``,
  capped at 1. On the dialogue benchmark (``benchmarks/dialogue_recall.py --sweep``) larger
  priors only lost recall (recall@10 0.889 / 0.887 / 0.879 / 0.871 with the priors x0 / x1 /
  x3 / x10), so they stay tie-breakers: among memories equally relevant, the more important,
  newer and used one first.
* **Read-only.** Nothing is written on the read path. The retrieval's
  :class:`~memstream.models.events.memory.MemoriesRetrieved` event is returned for the caller to
  publish on the accesses topic; the projector counts it later (``apply_accesses``).
* **Any memory type, a real budget.** A type without a quota gets no slot (no ``KeyError``);
  a type without a known header gets a generic one. The budget is checked on the final text
  with the same token counter the caller uses.

Examples
--------
>>> retriever = Retriever(projection, Settings())  # doctest: +SKIP
>>> found = retriever.retrieve("alice", "Where does my sister live?")  # doctest: +SKIP
>>> print(found.context)  # doctest: +SKIP
## Facts
- User's sister Maria lives in Lisbon (2026-03-01)
>>> publish(accesses_topic, found.access_event)  # doctest: +SKIP
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from datetime import UTC, datetime

from memstream.models.events.memory import MemoriesRetrieved, RetrievedMemory
from memstream.models.ranking import RankWeights
from memstream.models.session import TokenCounter, estimate_tokens
from memstream.models.settings import Settings
from memstream.projections.cross_session import (
    below_their_leads,
    diversify_sessions,
    expand_by_entities,
    lexical_rerank,
    new_turns_first,
)
from memstream.projections.memories import (
    MEMORY_TYPES,
    MemoryHit,
    MemoryIndex,
    MemoryRecord,
    SearchFilters,
)
from memstream.projections.own_names import as_user, capitalised, own_names
from memstream.projections.prompt_context import (
    STALE_WEIGHT,
    RankedMemory,
    Retrieval,
    fill_quotas,
    mark_possibly_outdated,
    newest_on_near_ties,
    one_line,
    rank,
    render_context,
    render_profile,
    valid_unicode,
)

#: The share of a context's token budget a user's profile may take at a session's start: the
#: rest is the turn's own memories'.
PROFILE_SHARE = 0.5
#: Recent turns (newest first) that join the query after the current message.
QUERY_RECENT_TURNS = 2
#: Characters kept of the current message and of each recent turn. The message comes first
#: and gets the most room: the embedder truncates at 256 tokens and mean-pools, so what is
#: first and longest weighs most.
QUERY_MESSAGE_CHARS = 1_000
QUERY_TURN_CHARS = 200
#: Candidates asked of the one search per slot of a context's quotas, and their cap: enough
#: that a type ranked low by relevance still meets its quota, few enough to keep it fast.
CANDIDATES_PER_SLOT = 2
MAX_CANDIDATES = 200
#: The types nearly every memory has: a search for all of them needs no type clause.
BULK_TYPES = frozenset({"preference", "fact", "summary", "episode", "correction"})
#: What a search without ``memory_types`` returns: every type but ``pattern`` (learned
#: patterns say how the user behaves, not what they said: they are read with
#: ``patterns()``, or a search naming the type, and never crowd a search's places).
SEARCHED_TYPES = tuple(sorted(MEMORY_TYPES - {"pattern"}))
#: ``session_id`` of the access event when the caller names no session.
NO_SESSION = "-"
#: Most ``superseded_by`` links followed from a stale hit to what holds now.
MAX_CHAIN = 8
#: Facts asked of the lookup of the user's own names in a question.
OWN_NAME_CANDIDATES = 20
#: What that lookup searches: the user's current facts.
NAME_FACTS = SearchFilters(memory_types=("fact",))


def default_quotas(settings: Settings) -> dict[str, int]:
    """The per-type slots of a context, from ``settings`` (the seed's 3 / 5 / 2, plus more).

    Examples
    --------
    >>> default_quotas(Settings())
    {'preference': 3, 'fact': 5, 'summary': 2, 'episode': 3, 'correction': 2}
    """
    return {
        "preference": settings.quota_preference,
        "fact": settings.quota_fact,
        "summary": settings.quota_summary,
        "episode": settings.quota_episode,
        "correction": settings.quota_correction,
    }


def build_query(
    message: str,
    recent_turns: Sequence[str] = (),
    *,
    turns: int = QUERY_RECENT_TURNS,
    message_chars: int = QUERY_MESSAGE_CHARS,
    turn_chars: int = QUERY_TURN_CHARS,
) -> str:
    """The search text: the current message, then the last ``turns`` turns, newest first.

    Every part is whitespace-collapsed and clipped, so the query stays short whatever the
    conversation holds; lone surrogates become ``?``.

    Examples
    --------
    >>> build_query("And her name?", ["Hi", "I want to visit my sister"])
    'And her name?\\nI want to visit my sister\\nHi'
    """
    if isinstance(recent_turns, str):
        raise TypeError("recent_turns must be a sequence of turns, not a string")
    parts = [one_line(message)[:message_chars]]
    if turns > 0:
        parts += [one_line(turn)[:turn_chars] for turn in reversed(recent_turns[-turns:])]
    return valid_unicode("\n".join(part for part in parts if part))


class Retriever:
    """Assembles the long-term memory context for a turn of conversation.

    Parameters
    ----------
    projection
        The memory index searched (read-only here): the LanceDB projection, or any
        :class:`~memstream.projections.memories.index.MemoryIndex`.
    settings
        Quotas (``quota_*``), rank weights (``weight_*``), recency half-life and the default
        token budget (``memory_context_tokens``).
    count_tokens
        The token counter the budget is measured with; use the caller's own tokenizer for
        an exact fit.
    clock
        "Now" for recency and the access event's time; must return an aware datetime.

    Examples
    --------
    >>> retriever = Retriever(projection, Settings(), clock=lambda: now)  # doctest: +SKIP
    >>> found = retriever.retrieve("alice", "any pets?", quotas={"fact": 2})  # doctest: +SKIP
    >>> [item.memory.memory_id for item in found.in_context]  # doctest: +SKIP
    ['m-cat']
    """

    def __init__(
        self,
        projection: MemoryIndex,
        settings: Settings,
        *,
        count_tokens: TokenCounter = estimate_tokens,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.projection = projection
        self.settings = settings
        self.weights = RankWeights.from_settings(settings)
        self.count_tokens = count_tokens
        self.clock = clock

    def retrieve(
        self,
        user_id: str,
        message: str,
        *,
        recent_turns: Sequence[str] = (),
        filters: SearchFilters | None = None,
        token_budget: int | None = None,
        quotas: Mapping[str, int] | None = None,
        session_id: str | None = None,
        profile: Sequence[tuple[str, str]] = (),
    ) -> Retrieval:
        """The memory context for ``message`` from ``user_id``'s memories.

        Parameters
        ----------
        user_id
            Whose memories; any string (it only ever reaches a filter as a digest).
        message
            The current message; it leads the query.
        recent_turns
            The conversation so far, oldest first; the last few join the query.
        filters
            Narrowing (types, minimum importance, session, event-time range).
            ``include_inactive`` is ignored: superseded, deleted, expired and forgotten
            memories never enter a context. Types outside the quotas, and unknown types, match
            nothing.
        token_budget
            Most tokens of ``context``; defaults to ``settings.memory_context_tokens``.
        quotas
            Slots per memory type, laid over the settings' defaults (preference 3, fact 5,
            summary 2, episode 3, correction 2); 0 removes a type. Any other type, e.g.
            ``entity``, gets slots only when named here.
        session_id
            The session the retrieval serves, recorded in the access event; defaults to
            ``filters.session_id``, then to ``"-"`` (no session).
        profile
            What holds about the user, as (memory id, line) pairs in the profile's order
            (a session's start: :mod:`memstream.streams.service.profiles`): its lines come
            first in ``context``, in order while they fit half the budget, and a memory
            whose claim is one of them is not repeated (it counts as in the context).

        Returns
        -------
        Retrieval
            The ranked items, the context text, its size and the access event to publish.

        Raises
        ------
        ValueError
            A negative budget or quota, or a clock without a timezone.
        """
        budget = self.settings.memory_context_tokens if token_budget is None else token_budget
        if budget < 0:
            raise ValueError("token_budget must be >= 0")
        slots = self._quotas(quotas)
        now = self.clock()
        if now.tzinfo is None:
            raise ValueError("the clock must return an aware datetime")
        query = build_query(message, recent_turns)
        search = self._search_filters(filters, slots)
        if search is None or not query:
            return Retrieval(query, (), "", self.count_tokens(""), None)
        search_filters, allowed = search

        # Slots of types no row can have (unknown names) ask for no candidates.
        wanted = sum(slots[t] for t in allowed)
        limit = min(MAX_CANDIDATES, wanted * CANDIDATES_PER_SLOT)
        ranked = self._candidates(user_id, query, limit, search_filters, now)
        chosen = fill_quotas(ranked, {t: n for t, n in slots.items() if t in allowed})
        placed, context = self._fit(chosen, budget, profile)
        items = tuple(replace(item, in_context=item.memory.memory_id in placed) for item in chosen)
        in_context = [item for item in items if item.in_context]
        if session_id is None and filters is not None:
            session_id = filters.session_id
        event = self.access_event(user_id, query, in_context, session_id=session_id)
        return Retrieval(query, items, context, self.count_tokens(context), event)

    def search(
        self,
        user_id: str,
        query: str,
        *,
        limit: int = 5,
        filters: SearchFilters | None = None,
    ) -> list[RankedMemory]:
        """The user's ``limit`` most relevant active memories, ranked, every type competing.

        What ``MemoryClient.search``, the CLI and the demo answer with. With the
        cross-session steps off (``recall_*`` settings) the projection is asked for exactly
        ``limit`` memories, so the answer holds the same memories as
        ``MemoryProjection.search(user_id, query, limit=limit)`` with the same filters, in the
        order of their rank scores: the priors reorder what the search found, and never
        trade a memory it found for one it did not. Entity expansion adds what the hits'
        names lead to, and a session cap asks for twice ``limit`` candidates, so those
        may trade a found memory for another (:mod:`memstream.projections.cross_session`);
        with ``recall_own_names`` the user's own names in ``query`` are read as theirs
        first (:mod:`memstream.projections.own_names`), so the projection is asked another
        question.

        Raises
        ------
        ValueError
            ``limit`` outside 1 to :data:`MAX_CANDIDATES`, or a clock without a timezone.
        """
        if not 1 <= limit <= MAX_CANDIDATES:
            raise ValueError(f"limit must be between 1 and {MAX_CANDIDATES}")
        now = self.clock()
        if now.tzinfo is None:
            raise ValueError("the clock must return an aware datetime")
        text = valid_unicode(one_line(query)[:QUERY_MESSAGE_CHARS])
        if not text:
            return []
        narrowed = replace(filters or SearchFilters(), include_inactive=False)
        if narrowed.memory_types is None:
            narrowed = replace(narrowed, memory_types=SEARCHED_TYPES)
        widened = self.settings.recall_session_cap > 0 or self.settings.recall_new_turns_first
        fetch = min(MAX_CANDIDATES, 2 * limit) if widened else limit
        return self._candidates(user_id, text, fetch, narrowed, now)[:limit]

    def _candidates(
        self, user_id: str, query: str, limit: int, filters: SearchFilters, now: datetime
    ) -> list[RankedMemory]:
        """The ranked candidates of one search of ``limit`` memories, through the
        cross-session steps the settings switch on (expansion, rerank, session cap): the
        one path of :meth:`search` and :meth:`retrieve`."""
        if self.settings.recall_own_names:
            query = self._as_user(user_id, query)
        hits = self.projection.search(user_id, query, limit=limit, filters=filters)
        led_by: dict[str, str] = {}
        if self.settings.recall_entity_expansion and hits:
            expansion = expand_by_entities(self._search_by_names, user_id, query, hits, filters)
            hits, led_by = expansion.hits, expansion.led_by
        ranked = rank(hits, self.weights, now)
        if self.settings.recall_rerank == "lexical":
            ranked = lexical_rerank(query, ranked)
        # Last: neither a newer near tie nor a stale hit's move lifts a hop over its lead.
        ranked = below_their_leads(self.current_first(user_id, ranked, now, filters), led_by)
        ranked = diversify_sessions(ranked, self.settings.recall_session_cap, led_by)
        if self.settings.recall_new_turns_first:
            ranked = new_turns_first(ranked)
        if self.settings.recall_newer_on_near_ties:
            ranked = mark_possibly_outdated(ranked)
        return ranked

    def _as_user(self, user_id: str, query: str) -> str:
        """``query`` with the user's own names in it read as ``User``: one search of their
        current facts by the query's capitalised words, when it has any
        (:mod:`memstream.projections.own_names`)."""
        words = capitalised(query)
        if not words:
            return query
        facts = self._search_by_names(user_id, " ".join(words), OWN_NAME_CANDIDATES, NAME_FACTS)
        return as_user(query, own_names(facts))

    def _search_by_names(
        self, user_id: str, names: str, limit: int, filters: SearchFilters
    ) -> list[MemoryHit]:
        """The user's memories found by ``names``: by their words alone where the index can
        (resident memories, the table: no query embedding), else by its own search."""
        by_words = getattr(self.projection, "search_by_words", None)
        if by_words is not None:
            return list(by_words(user_id, names, limit=limit, filters=filters))
        return self.projection.search(user_id, names, limit=limit, filters=filters)

    def current_first(
        self,
        user_id: str,
        ranked: Sequence[RankedMemory],
        now: datetime,
        filters: SearchFilters,
    ) -> list[RankedMemory]:
        """``ranked`` with what no longer held at ``now`` marked and ranked below what holds.

        A hit is stale when it was superseded by ``now`` or states a claim that ended by
        then (:meth:`MemoryRecord.stale_at`); its score counts for :data:`STALE_WEIGHT`.
        The memory that holds now in its place (``superseded_by``, followed until a
        memory still holding at ``now``) is placed right above it: moved up when it was
        found below it (taking the stale hit's score, so scores stay best first), read from
        the projection when it was not found (with the stale hit's scores).
        A link whose end was not yet recorded at ``now`` marks nothing (a point-in-time
        read sees what memstream knew then). Nothing is marked or moved when
        ``recall_stale_below_current`` is off.
        """
        if not self.settings.recall_stale_below_current:
            stale: list[MemoryRecord] = []
        else:
            stale = [item.memory for item in ranked if item.memory.stale_at(now)]
        found = {item.memory.memory_id: item.memory for item in ranked}
        holders = self._holders(user_id, stale, now, filters, found) if stale else {}
        marked: list[RankedMemory] = []
        heads: dict[str, MemoryRecord] = {}
        for item in ranked:
            memory = item.memory
            if memory.memory_id not in holders:
                marked.append(item)
                continue
            head = holders[memory.memory_id]
            if head is None and memory.superseded_by is not None:
                marked.append(item)  # what replaced it was not known at ``now``
                continue
            marked.append(replace(item, stale=True, rank_score=item.rank_score * STALE_WEIGHT))
            if head is not None:
                heads[memory.memory_id] = head
        order = sorted(marked, key=lambda item: -item.rank_score)
        if self.settings.recall_newer_on_near_ties:
            order = newest_on_near_ties(order)
        for stale_id, head in heads.items():
            at = next(i for i, item in enumerate(order) if item.memory.memory_id == stale_id)
            head_at = next(
                (i for i, item in enumerate(order) if item.memory.memory_id == head.memory_id),
                None,
            )
            if head_at is not None and head_at < at:
                order[head_at] = replace(order[head_at], replaces=stale_id)
                continue
            stale_item = order[at]
            if head_at is not None:
                # Below its stale hit: it takes the stale hit's score, and its place above.
                item = order.pop(head_at)
                moved = replace(
                    item, rank_score=max(item.rank_score, stale_item.rank_score), replaces=stale_id
                )
            else:
                moved = replace(
                    stale_item,
                    memory=MemoryHit(
                        **{f: getattr(head, f) for f in _RECORD_FIELDS},
                        score=stale_item.memory.score,
                        similarity=stale_item.memory.similarity,
                        words=stale_item.memory.words,
                    ),
                    stale=False,
                    replaces=stale_id,
                )
            order.insert(at, moved)
        if len(order) > len(ranked):
            # What was placed above a stale hit takes the place of the lowest stale hits.
            for index in range(len(order) - 1, -1, -1):
                if len(order) == len(ranked):
                    break
                if order[index].stale:
                    del order[index]
        return order

    def _holders(
        self,
        user_id: str,
        stale: Sequence[MemoryRecord],
        now: datetime,
        filters: SearchFilters,
        known: Mapping[str, MemoryRecord],
    ) -> dict[str, MemoryRecord | None]:
        """For each stale memory, what holds at ``now`` in its place: ``superseded_by``,
        followed through later supersessions (one read of the projection per step of the
        chains, for all of them); None when a chain ends in nothing that holds then
        (retracted and expired claims included), leaves the allowed types, or is not the
        user's. Links to memories in ``known`` (the search's own hits) are not read again."""
        found: dict[str, MemoryRecord | None] = {}
        following = {m.memory_id: m.superseded_by for m in stale}
        seen = {m.memory_id: {m.memory_id} for m in stale}
        for _ in range(MAX_CHAIN):
            wanted = sorted(
                {link for link in following.values() if link is not None and link not in known}
            )
            records = {**known, **(self.projection.get_many(user_id, wanted) if wanted else {})}
            for stale_id, link in list(following.items()):
                record = records.get(link) if link is not None else None
                ends = (
                    link is None
                    or link in seen[stale_id]
                    or record is None
                    or record.created_at > now
                    or record.status == "deleted"
                    or (filters.memory_types is not None
                        and record.memory_type not in filters.memory_types)
                )
                if ends or record is None:
                    found[stale_id] = None
                    del following[stale_id]
                elif not record.stale_at(now) and (record.ended_at is None or record.ended_at > now):
                    found[stale_id] = record
                    del following[stale_id]
                else:
                    seen[stale_id].add(record.memory_id)
                    following[stale_id] = record.superseded_by
            if not following:
                break
        return found | dict.fromkeys(following)

    def access_event(
        self,
        user_id: str,
        query: str,
        items: Sequence[RankedMemory],
        *,
        session_id: str | None = None,
    ) -> MemoriesRetrieved | None:
        """The access event naming ``items`` (for the accesses topic); None if there are none."""
        if not items:
            return None
        return MemoriesRetrieved(
            event_id=str(uuid.uuid4()),
            user_id=user_id,
            session_id=session_id or NO_SESSION,
            occurred_at=self.clock(),
            query=valid_unicode(query[:QUERY_MESSAGE_CHARS]),
            memories=tuple(
                RetrievedMemory(memory_id=item.memory.memory_id, score=round(item.rank_score, 6))
                for item in items
            ),
        )

    def _quotas(self, quotas: Mapping[str, int] | None) -> dict[str, int]:
        slots = {**default_quotas(self.settings), **(quotas or {})}
        negative = sorted(t for t, n in slots.items() if n < 0)
        if negative:
            raise ValueError(f"quotas must be >= 0 (got a negative one for {negative})")
        return {t: n for t, n in slots.items() if n > 0}

    @staticmethod
    def _search_filters(
        filters: SearchFilters | None, slots: Mapping[str, int]
    ) -> tuple[SearchFilters, frozenset[str]] | None:
        """The filters of the one search and the types it may return; None if none is left.

        The type clause is left out when it would only exclude rare types (``entity``):
        until the projection indexes ``memory_type`` the clause costs a scan of the column
        per query (measured +40 ms at 1M rows), while a few candidates of a slotless type
        cost nothing but their place. Any narrower choice of types is filtered in LanceDB,
        so candidates of slotless types cannot crowd out the others.
        """
        filters = filters or SearchFilters()
        if isinstance(filters.memory_types, str):
            raise TypeError("memory_types must be a sequence of memory types, not a string")
        allowed = frozenset(slots) & MEMORY_TYPES
        if filters.memory_types is not None:
            allowed &= frozenset(filters.memory_types)
        if not allowed:
            return None
        types = None if filters.memory_types is None and allowed >= BULK_TYPES else allowed
        narrowed = replace(
            filters,
            memory_types=None if types is None else tuple(sorted(types)),
            include_inactive=False,
        )
        return narrowed, allowed

    def _fit(
        self,
        chosen: Sequence[RankedMemory],
        budget: int,
        profile: Sequence[tuple[str, str]] = (),
    ) -> tuple[set[str], str]:
        """Admit the profile's lines in order while they fit :data:`PROFILE_SHARE` of
        ``budget``, then
        memories best first while the rendered text fits ``budget``.

        The whole text is re-rendered and counted for each admission, so the budget holds for
        any token counter (headers and separators included), not for an estimate of parts. A
        line or memory that does not fit is skipped and smaller ones after it still get their
        turn. The profile's share leaves the turn's own memories room.
        """
        lines: list[str] = []
        shown: set[str] = set()
        for memory_id, line in profile:
            if self.count_tokens(render_profile([*lines, line])) <= int(budget * PROFILE_SHARE):
                lines.append(line)
                shown.add(memory_id)
        head = render_profile(lines)
        admitted: list[RankedMemory] = []
        text = head
        for item in chosen:
            if item.memory.memory_id in shown:
                continue  # its claim is a line of the profile already
            trial = "\n\n".join(part for part in (head, render_context([*admitted, item])) if part)
            if self.count_tokens(trial) <= budget:
                admitted.append(item)
                text = trial
        placed = {item.memory.memory_id for item in admitted}
        placed |= {item.memory.memory_id for item in chosen if item.memory.memory_id in shown}
        return placed, text


#: The fields of a record, carried over when a record becomes a hit.
_RECORD_FIELDS = tuple(f.name for f in fields(MemoryRecord))
