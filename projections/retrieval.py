"""Retrieval: the long-term memory context of one conversation turn.

:class:`Retriever` turns the current message (and the last few turns) into one hybrid search
of the user's memories, ranks the candidates by a composite score, fills a quota per memory
type, and renders the winners as prompt text cut to a token budget.

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
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime

from memstream.models.events.memory import MemoriesRetrieved, RetrievedMemory
from memstream.models.ranking import (
    RankWeights,
    rank_score,
    recency_weight,
    use_weight,
)
from memstream.models.session import TokenCounter, estimate_tokens
from memstream.models.settings import Settings
from memstream.projections.memories import (
    MEMORY_TYPES,
    MemoryHit,
    MemoryIndex,
    MemoryRecord,
    SearchFilters,
)

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
#: ``session_id`` of the access event when the caller names no session.
NO_SESSION = "-"
#: What a stale hit's rank score counts for: below a current memory of near relevance.
STALE_WEIGHT = 0.8
#: Most ``superseded_by`` links followed from a stale hit to what holds now.
MAX_CHAIN = 8
#: Two hits whose scores differ by less than this share are a near tie: the newer first.
NEAR_TIE = 0.05
#: So are two hits found this few places apart whose scores are within
#: :data:`NEAR_TIE_PLACES_MARGIN` (relative): a newer hit never climbs over a much better one.
NEAR_TIE_PLACES = 3
NEAR_TIE_PLACES_MARGIN = 0.25

#: Section headers of the context; a type missing here gets a header made from its name.
SECTION_HEADERS: Mapping[str, str] = {
    "correction": "Corrections",
    "preference": "Preferences",
    "fact": "Facts",
    "summary": "Earlier conversations",
    "episode": "What the user said",
    "entity": "People, places and things",
}



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


@dataclass(frozen=True)
class RankedMemory:
    """A memory as ranked for a context: the search hit, its score and why.

    Each component is on 0..1; ``rank_score`` is their weighted mean under ``weights``, so
    it is on 0..1 too.
    ``in_context`` says whether the memory made it into the context text (a memory can win
    its type's slot and still be left out by the token budget).
    """

    memory: MemoryHit
    rank_score: float
    relevance: float
    importance: float
    recency: float
    use: float
    weights: RankWeights
    in_context: bool = False
    #: What the memory states no longer held at the retrieval's moment: it ranks with
    #: :data:`STALE_WEIGHT` of its score, below what replaced it.
    stale: bool = False
    #: It replaced a stale hit of the same retrieval (named here), found by following
    #: ``superseded_by`` from it: it ranks above that hit, moved there if it was below.
    replaces: str | None = None

    def explain(self) -> str:
        """One line: the score as the sum of its weighted components.

        Examples
        --------
        >>> ranked.explain()  # doctest: +SKIP
        '0.627 = (1.00 x relevance 0.62 [meaning 0.71, words 0.53] + 0.02 x importance 0.85 + 0.01 x recency 0.50 + 0.01 x use 0.00) / 1.04'
        """
        w = self.weights
        text = (
            f"{self.rank_score:.3f} = ({w.relevance:.2f} x relevance {self.relevance:.2f} "
            f"[meaning {self.memory.similarity:.2f}, words {self.memory.words:.2f}] + "
            f"{w.importance:.2f} x importance {self.importance:.2f} + "
            f"{w.recency:.2f} x recency {self.recency:.2f} + "
            f"{w.use:.2f} x use {self.use:.2f}) / {w.total:.2f}"
        )
        if self.stale:
            text += f"; stale: ranked at x{STALE_WEIGHT}"
        if self.replaces is not None:
            text += f"; above {self.replaces}, which it replaced"
        return text


@dataclass(frozen=True)
class Retrieval:
    """What one retrieval found and what goes into the prompt.

    Attributes
    ----------
    query
        The text searched for (the current message, then recent turns).
    items
        The memories that won a slot of their type, best first; ``in_context`` marks those
        the token budget let into ``context``.
    context
        Prompt text: one section per type (short header, then one line per memory), the
        section of the best-ranked memory first; empty when nothing fits or nothing matched.
    tokens
        ``context``'s size by the retriever's token counter; never above the budget.
    access_event
        The access event naming exactly the memories in ``context`` with their rank
        scores, for the caller to publish on the accesses topic; None if ``context`` is
        empty.
    """

    query: str
    items: tuple[RankedMemory, ...]
    context: str
    tokens: int
    access_event: MemoriesRetrieved | None

    @property
    def in_context(self) -> tuple[RankedMemory, ...]:
        """The items placed in ``context``, best first."""
        return tuple(item for item in self.items if item.in_context)

    def explain(self) -> str:
        """A "why ranked" view: one line per item, best first, with what made its score."""
        lines = []
        for position, item in enumerate(self.items, start=1):
            mark = "*" if item.in_context else " "
            lines.append(
                f"{position:>2} {mark} [{item.memory.memory_type}] {item.explain()}  "
                f"{_one_line(item.memory.content)[:80]}"
            )
        return "\n".join(lines)


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
    parts = [_one_line(message)[:message_chars]]
    if turns > 0:
        parts += [_one_line(turn)[:turn_chars] for turn in reversed(recent_turns[-turns:])]
    return _valid_unicode("\n".join(part for part in parts if part))


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
        hits = self.projection.search(user_id, query, limit=limit, filters=search_filters)
        ranked = self.current_first(user_id, rank(hits, self.weights, now), now, search_filters)
        chosen = fill_quotas(ranked, {t: n for t, n in slots.items() if t in allowed})
        placed, context = self._fit(chosen, budget)
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

        What ``MemoryClient.search``, the CLI and the demo answer with. The projection is
        asked for exactly ``limit`` memories, so the answer holds the same memories as
        ``MemoryProjection.search(user_id, query, limit=limit)`` with the same filters, in the
        order of their rank scores: the priors reorder what the search found, and never
        trade a memory it found for one it did not.

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
        text = _valid_unicode(_one_line(query)[:QUERY_MESSAGE_CHARS])
        if not text:
            return []
        narrowed = replace(filters or SearchFilters(), include_inactive=False)
        hits = self.projection.search(user_id, text, limit=limit, filters=narrowed)
        return self.current_first(user_id, rank(hits, self.weights, now), now, narrowed)[:limit]

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
        read sees what memstream knew then).
        """
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
        order = newest_on_near_ties(sorted(marked, key=lambda item: -item.rank_score))
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
            query=_valid_unicode(query[:QUERY_MESSAGE_CHARS]),
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

    def _fit(self, chosen: Sequence[RankedMemory], budget: int) -> tuple[set[str], str]:
        """Admit memories best first while the rendered text fits ``budget``.

        The whole text is re-rendered and counted for each admission, so the budget holds for
        any token counter (headers and separators included), not for an estimate of parts. A
        memory that does not fit is skipped and smaller ones after it still get their turn.
        """
        admitted: list[RankedMemory] = []
        text = ""
        for item in chosen:
            trial = render_context([*admitted, item])
            if self.count_tokens(trial) <= budget:
                admitted.append(item)
                text = trial
        return {item.memory.memory_id for item in admitted}, text


def newest_on_near_ties(
    ranked: Sequence[RankedMemory], margin: float = NEAR_TIE
) -> list[RankedMemory]:
    """``ranked`` (best first) with each memory moved above the ones before it that are
    older and score within ``margin`` (relative) of it, taking their score: of two
    statements a question finds almost equally, the newer is the likelier to hold now (a
    value said again differently, "my rent went up to 950"). Scores stay best first."""
    order: list[RankedMemory] = []
    found_at = {id(item): place for place, item in enumerate(ranked)}
    for place, item in enumerate(ranked):
        at = len(order)
        while at > 0:
            above = order[at - 1]
            near = (
                item.rank_score >= above.rank_score * (1 - margin)
                or place - found_at.get(id(above), place) <= NEAR_TIE_PLACES
                and item.rank_score >= above.rank_score * (1 - NEAR_TIE_PLACES_MARGIN)
            )
            if item.stale or _said_at(item) <= _said_at(above) or not near:
                break  # what no longer holds never climbs
            at -= 1
        if at < len(order):
            item = replace(item, rank_score=order[at].rank_score)
        order.insert(at, item)
    return order


def _said_at(item: RankedMemory) -> datetime:
    """When a memory was said: its claim's start, else its event time."""
    return item.memory.valid_from or item.memory.created_at


#: The fields of a record, carried over when a record becomes a hit.
_RECORD_FIELDS = tuple(f.name for f in fields(MemoryRecord))


def rank(hits: Sequence[MemoryHit], weights: RankWeights, now: datetime) -> list[RankedMemory]:
    """Score ``hits`` by the composite rank score, best first.

    Every component is the memory's own (relevance is the search's score of it, use is
    measured against ``weights.use_saturation``), so a memory scores the same whatever it is
    ranked with. Ties keep the search order.
    """
    ranked = []
    for hit in hits:
        relevance = min(max(hit.score, 0.0), 1.0)
        importance = min(max(hit.importance, 0.0), 1.0)
        recency = recency_weight(hit.created_at, now, weights.half_life_days)
        use = use_weight(hit.access_count, weights.use_saturation)
        ranked.append(
            RankedMemory(
                memory=hit,
                rank_score=rank_score(relevance, importance, recency, use, weights),
                relevance=relevance,
                importance=importance,
                recency=recency,
                use=use,
                weights=weights,
            )
        )
    # sorted() is stable: equal scores keep the search's order.
    return sorted(ranked, key=lambda item: -item.rank_score)


def fill_quotas(ranked: Sequence[RankedMemory], quotas: Mapping[str, int]) -> list[RankedMemory]:
    """The best ``quotas[type]`` memories of each type, in rank order; other types get none."""
    taken: dict[str, int] = {}
    chosen = []
    for item in ranked:
        memory_type = item.memory.memory_type
        if taken.get(memory_type, 0) < quotas.get(memory_type, 0):
            taken[memory_type] = taken.get(memory_type, 0) + 1
            chosen.append(item)
    return chosen


def render_context(items: Sequence[RankedMemory]) -> str:
    """Prompt text for ``items`` (best first): a section per type, best section first.

    Each memory is one line with its event date, so the model can tell old from new; a
    memory with a context (an episode) shows it instead, on one line: the day, then who said
    what. What no longer holds says until when, and what replaced it since when, so the
    model reads "until <date>: X" and "since <date>: Y".

    Examples
    --------
    >>> print(render_context(found.in_context))  # doctest: +SKIP
    ## Facts
    - since 2026-04-02: User lives in Porto (2026-04-02)
    - User works at Siemens (2026-01-05)
    <BLANKLINE>
    ## What the user said
    - until 2026-04-02: 2026-03-01 (Sunday) | User: I live in Lisbon.
    """
    sections: dict[str, list[str]] = {}
    for item in items:
        memory = item.memory
        if memory.context:
            # The conversation it came from, on one line: "day | Tom: ... | Maya: ...".
            text = " | ".join(_one_line(part) for part in memory.context.splitlines())
        else:
            text = f"{_one_line(memory.content)} ({memory.created_at.astimezone(UTC):%Y-%m-%d})"
        until = memory.valid_until or memory.ended_at
        if item.stale and until is not None:
            text = f"until {until.astimezone(UTC):%Y-%m-%d}: {text}"
        elif item.replaces is not None and memory.valid_from is not None:
            text = f"since {memory.valid_from.astimezone(UTC):%Y-%m-%d}: {text}"
        sections.setdefault(memory.memory_type, []).append(f"- {text}")
    return "\n\n".join(
        "\n".join([f"## {section_header(memory_type)}", *lines])
        for memory_type, lines in sections.items()
    )


def section_header(memory_type: str) -> str:
    """The header of a type's section; unknown types get one made from their name.

    Examples
    --------
    >>> section_header("fact"), section_header("learned_pattern")
    ('Facts', 'Learned pattern')
    """
    return SECTION_HEADERS.get(memory_type) or memory_type.replace("_", " ").capitalize()


def _one_line(text: str) -> str:
    # One memory per line: a newline inside a memory could otherwise open a fake section.
    return " ".join(text.split())


def _valid_unicode(text: str) -> str:
    # A JSON-decoded message may hold a lone surrogate ("\ud800"); the tokenizer refuses
    # such strings, so they become "?" rather than failing the whole retrieval.
    return text.encode("utf-8", "replace").decode("utf-8")
