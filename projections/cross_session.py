"""Cross-session recall: the steps a search takes when a question's evidence sits in several
sessions.

A hybrid search finds the memories that share words and meaning with the question. A question
whose evidence is spread ("Where does the person Maya met at the choir work?": the choir and
a name in one session, the name and the job in another) finds the first half and misses the
second, which shares nothing with the question but the name it does not repeat. Three steps,
each a setting (``recall_*``, :class:`~memstream.models.settings.Settings`), each measured on
``benchmarks/dialogue_recall.py --steps`` (figures in ``docs/search.md``):

* **Entity expansion** (:func:`expand_by_entities`): the names the best hits mention (their
  ``entities``, the extractor's names of people, places, pets, organisations) that the
  question does not name lead to one more search of the same user's memories by those names;
  a memory found that mentions one of them joins the candidates, scored :data:`HOP_WEIGHT`
  of the hit that led to it, divided by the number of other sessions the name is found in
  (a name said in every session, the other speaker's, says little of the question); the
  names its own hits mention lead one hop further. A name that most of the candidates mention (a hub:
  the user, the other speaker) leads nowhere.
  Every lookup is a search of the one user's memories by their words alone (BM25, no query
  embedding; the index's own search where it has none): the names are search text, never
  query syntax, and another user's memories cannot be reached.
* **Session diversification** (:func:`diversify_sessions`): at most ``cap`` hits of one
  session before every other session's next hit, so one session's many near-duplicates do
  not take the places of another session's evidence.
* **New turns first** (:func:`new_turns_first`): a hit whose every cited turn a hit above it
  cites already (the episode of the next turn, whose context shows the same exchange; the
  fact read from a turn whose episode ranks above) waits below the hits that bring turns not
  shown yet, so a search's places go to more of the conversation.
* **Rerank** (:func:`lexical_rerank`): the share of the question's content words a memory
  holds, added to its relevance. No cross-encoder installs from the package registry with its
  weights inside the package (those on it download their model at run time), so none is used.

Everything is deterministic: ties break on the search's order, then on memory id.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from memstream.projections.memories import MemoryHit, SearchFilters
from memstream.projections.prompt_context import LEXICAL_WEIGHT, RankedMemory
from memstream.projections.resident.words import tokens

__all__ = [
    "HOP_WEIGHT",
    "Expansion",
    "below_their_leads",
    "diversify_sessions",
    "expand_by_entities",
    "lexical_rerank",
    "name_tokens",
    "new_turns_first",
]

#: The score of a memory an expansion found, as a share of the hit that led to it, per hop.
HOP_WEIGHT = 0.9
#: Hits whose names seed the first hop (the best ones).
SEED_HITS = 3
#: Most names one hop searches for.
NAMES_PER_HOP = 5
#: Hops: the question's hits to their names' memories, and one more.
HOPS = 2
#: Memories asked of each hop's search.
HOP_CANDIDATES = 20
#: A name mentioned by more than this share of the candidates is a hub and leads nowhere.
HUB_SHARE = 0.5
#: A memory an expansion found ranks at most this share of the one that led to it.
BELOW_LEAD = 0.999
#: The types a session cap counts and holds back: a conversation's words, which one session
#: repeats in many memories; a statement (fact, preference, correction...) never waits.
CAPPED_TYPES = frozenset({"episode", "summary"})
#: A session's memory over the cap waits only for other sessions' memories scoring at least
#: this share of its own.
DIVERSITY_MARGIN = 0.7

#: (user id, query, limit, filters) -> hits: the projection's search of one user.
Search = Callable[[str, str, int, SearchFilters], list[MemoryHit]]


def name_tokens(name: str) -> tuple[str, ...]:
    """A name's index terms (case, accents, punctuation and stems aside), as the search's
    words index has them: how a name is matched in a question and in a memory.

    Examples
    --------
    >>> name_tokens("Ana's"), name_tokens("the City Library")
    (('ana',), ('citi', 'librari'))
    """
    return tuple(tokens(name))


@dataclass(frozen=True)
class Expansion:
    """What :func:`expand_by_entities` found: the hits, and for each memory a hop found or
    raised, the memory that led to it."""

    hits: list[MemoryHit]
    #: memory id -> the memory id of the hit whose name led to it.
    led_by: dict[str, str]


def expand_by_entities(
    search: Search,
    user_id: str,
    question: str,
    hits: Sequence[MemoryHit],
    filters: SearchFilters,
) -> Expansion:
    """``hits`` and, after them, the user's memories that mention the names the hits lead
    to (see the module's docstring), each at most once: a memory found by a hop scores
    :data:`HOP_WEIGHT` of the hit that led to it (its score for the names it was found by
    says nothing of the question) over the number of sessions besides the leader's the hop
    found the name in, a hit found directly keeps its own score when higher.
    :func:`below_their_leads` then keeps each such memory below the one that led to it.

    Parameters
    ----------
    search
        The projection's search of one user's memories, with ``filters`` applied.
    user_id
        Whose memories; every search is of this user's only.
    question
        The search text; names it holds lead nowhere (its own search found them).
    hits
        The question's hits, best first.
    filters
        The question's filters, applied to every hop too.
    """
    asked = set(tokens(question))
    found = {hit.memory_id: hit for hit in hits}
    led_by: dict[str, str] = {}
    order = [hit.memory_id for hit in hits]
    hubs = _hubs(hits)
    used: set[tuple[str, ...]] = set()
    frontier = list(hits[:SEED_HITS])
    for _ in range(HOPS):
        leads = _leads(frontier, asked, hubs, used)
        if not leads:
            break
        used.update(leads)
        query = " ".join(" ".join(lead) for lead in leads)
        frontier = []
        found_by_names = search(user_id, query, HOP_CANDIDATES, filters)
        # How many other sessions each name is found in: one said everywhere says little.
        spread = {
            name: max(1, len(
                {hit.session_id for hit in found_by_names if _mentions(hit, name)}
                - {lead.session_id}
            ))
            for name, lead in leads.items()
        }
        for hit in found_by_names:
            leaders = [(leads[name], spread[name]) for name in leads if _mentions(hit, name)]
            if not leaders:
                continue
            # Its score as an answer to the question, not to the names it was found by: the
            # leader's, the rarer the name the more of it.
            leader, sessions = max(leaders, key=lambda lead: lead[0].score / lead[1])
            score = leader.score * HOP_WEIGHT / sessions
            known = found.get(hit.memory_id)
            if known is not None and known.score >= score:
                continue
            if known is None:
                order.append(hit.memory_id)
            found[hit.memory_id] = replace(hit, score=score)
            led_by[hit.memory_id] = leader.memory_id
            frontier.append(found[hit.memory_id])
    return Expansion([found[memory_id] for memory_id in order], led_by)


def below_their_leads(ranked: Sequence[RankedMemory], led_by: Mapping[str, str]) -> list[RankedMemory]:
    """``ranked`` with every memory an expansion found or raised ranked below the memory
    that led to it: its rank score at most :data:`BELOW_LEAD` of its leader's (after the
    leader's own cap: a chain keeps its order). With their priors a memory found through a
    name could otherwise pass the hit that named it, and a plain question's direct answer
    would lose its place to what it led to. Ties keep the given order.
    """
    if not led_by:
        return list(ranked)
    scores = {item.memory.memory_id: item.rank_score for item in ranked}
    capped: dict[str, float] = {}

    def cap(memory_id: str) -> float:
        if memory_id not in capped:
            capped[memory_id] = scores[memory_id]  # a cycle (never made) ends here
            leader = led_by.get(memory_id)
            if leader is not None and leader in scores:
                capped[memory_id] = min(scores[memory_id], cap(leader) * BELOW_LEAD)
        return capped[memory_id]

    rescored = [replace(item, rank_score=cap(item.memory.memory_id)) for item in ranked]
    # sorted() is stable: equal scores keep the given order.
    return sorted(rescored, key=lambda item: -item.rank_score)


def diversify_sessions(
    ranked: Sequence[RankedMemory], cap: int, led_by: Mapping[str, str] | None = None
) -> list[RankedMemory]:
    """``ranked`` with at most ``cap`` memories of one session before every other session's
    next one, unless that one is far worse: a session's further memories wait until each
    other session had its turn, but never behind a memory scoring under
    :data:`DIVERSITY_MARGIN` of theirs (``cap`` 0 keeps the order). Memories without a
    session are never held back; a memory an expansion found (``led_by``: its id -> the id
    of the memory that led to it) waits while the memory that led to it waits, so it never
    passes it.

    Examples
    --------
    Sessions a, a, a, b with cap 2 become a, a, b, a when b scores near the third a; they
    stay a, a, a, b when b scores under 0.7 of it.
    """
    if cap <= 0:
        return list(ranked)
    led_by = led_by or {}
    placed: list[RankedMemory] = []
    waiting: list[RankedMemory] = []
    held: set[str] = set()
    per_session: dict[str, int] = {}
    for item in ranked:
        while waiting and item.rank_score < waiting[0].rank_score * DIVERSITY_MARGIN:
            released = waiting.pop(0)
            held.discard(released.memory.memory_id)
            placed.append(released)
        memory_id = item.memory.memory_id
        # A statement is never held back, nor counted.
        capped = item.memory.memory_type in CAPPED_TYPES
        session = item.memory.session_id if capped else None
        if (session and per_session.get(session, 0) >= cap) or led_by.get(memory_id) in held:
            waiting.append(item)
            held.add(memory_id)
            continue
        if session:
            per_session[session] = per_session.get(session, 0) + 1
        placed.append(item)
    return placed + waiting


def new_turns_first(ranked: Sequence[RankedMemory]) -> list[RankedMemory]:
    """``ranked`` with each memory whose cited turns (``source_event_ids``) are all cited by
    the memories placed above it moved below every memory that brings a turn not cited yet,
    in their order, its rank score at most the last moved-up one's (scores stay best
    first): what it would show is shown already. A memory citing no turn never waits, nor
    does one placed above a stale memory it replaced (the fact of a new value stays right
    above the old one's turn). On REALTALK's real chats it raised recall@10 by 0.010 /
    0.011 (``docs/search.md``).

    Examples
    --------
    Episodes of turns 2 and 3 (each citing the turns around it: 1-3, 2-4), a fact of turn 2,
    then an episode of turn 9 become 1-3, 2-4, 9, then the fact.
    """
    placed: list[RankedMemory] = []
    waiting: list[RankedMemory] = []
    shown: set[str] = set()
    for item in ranked:
        cited = set(item.memory.source_event_ids)
        if cited and cited <= shown and item.replaces is None:
            waiting.append(item)
            continue
        shown |= cited
        placed.append(item)
    if not placed:
        return waiting
    lowest = placed[-1].rank_score
    return placed + [replace(item, rank_score=min(item.rank_score, lowest)) for item in waiting]


def lexical_rerank(question: str, ranked: Sequence[RankedMemory]) -> list[RankedMemory]:
    """``ranked`` rescored and reordered: each rank score becomes ``(score + w * share) /
    (1 + w)``, ``share`` the part of the question's content words (stems, stop words aside)
    the memory's text holds, ``w`` :data:`LEXICAL_WEIGHT`; ties keep the given order."""
    wanted = set(tokens(question))
    if not wanted:
        return list(ranked)
    rescored = []
    for item in ranked:
        share = len(set(tokens(item.memory.content)) & wanted) / len(wanted)
        score = (item.rank_score + LEXICAL_WEIGHT * share) / (1 + LEXICAL_WEIGHT)
        rescored.append(replace(item, rank_score=score, word_share=share))
    # sorted() is stable: equal scores keep the given order.
    return sorted(rescored, key=lambda item: -item.rank_score)


def _mentions(hit: MemoryHit, name: tuple[str, ...]) -> bool:
    """Whether ``hit`` names ``name``: among its entities, or in its text (the extractor
    leaves out a name that opens a sentence)."""
    if any(name_tokens(entity) == name for entity in hit.entities):
        return True
    words = tokens(hit.content)
    return any(tuple(words[i : i + len(name)]) == name for i in range(len(words)))


def _hubs(hits: Sequence[MemoryHit]) -> set[tuple[str, ...]]:
    """Names more than :data:`HUB_SHARE` of ``hits`` mention (at least three)."""
    counts: dict[tuple[str, ...], int] = {}
    for hit in hits:
        for name in {name_tokens(entity) for entity in hit.entities}:
            counts[name] = counts.get(name, 0) + 1
    return {name for name, n in counts.items() if n >= 3 and n > HUB_SHARE * len(hits)}


def _leads(
    frontier: Sequence[MemoryHit],
    asked: set[str],
    hubs: set[tuple[str, ...]],
    used: set[tuple[str, ...]],
) -> dict[tuple[str, ...], MemoryHit]:
    """The names the ``frontier`` hits mention that lead further, each with the best hit
    mentioning it, in the hits' order: at most :data:`NAMES_PER_HOP`, none the question
    names, no hub, none searched before."""
    leads: dict[tuple[str, ...], MemoryHit] = {}
    for hit in frontier:
        for entity in hit.entities:
            name = name_tokens(entity)
            if not name or name in leads or name in hubs or name in used:
                continue
            if set(name) <= asked:
                continue
            leads[name] = hit
            if len(leads) == NAMES_PER_HOP:
                return leads
    return leads
