"""The prompt context of a retrieval: search hits ranked by a composite score, the best of
each memory type up to its quota, and the text that goes into the prompt.

:class:`~memstream.projections.retrieval.Retriever` searches and decides what holds now;
this module scores (:func:`rank`), orders near ties (:func:`newest_on_near_ties`), fills the
quotas (:func:`fill_quotas`) and renders (:func:`render_context`). Pure functions of their
arguments: nothing here reads a table or a clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from memstream.models.conversation import SPEAKER_PREFIX
from memstream.models.events.memory import MemoriesRetrieved
from memstream.models.ranking import RankWeights, rank_score, recency_weight, use_weight
from memstream.projections.memories import MemoryHit
from memstream.projections.resident.words import tokens

#: What a stale hit's rank score counts for: below a current memory of near relevance.
STALE_WEIGHT = 0.8
#: Weight of the lexical rerank's word share against a memory's rank score
#: (:func:`memstream.projections.cross_session.lexical_rerank`).
LEXICAL_WEIGHT = 0.1
#: Two hits whose scores differ by less than this share are a near tie: the newer first.
NEAR_TIE = 0.05
#: So are two hits found this few places apart whose scores are within
#: :data:`NEAR_TIE_PLACES_MARGIN` (relative): a newer hit never climbs over a much better one.
NEAR_TIE_PLACES = 3
NEAR_TIE_PLACES_MARGIN = 0.25
#: Two memories are about the same thing when they state a claim of the same attribute, or
#: when this share of the shorter one's words (stems, stop words aside) is in the other.
SAME_THING_WORDS = 0.2

#: Section headers of the context; a type missing here gets a header made from its name.
SECTION_HEADERS: Mapping[str, str] = {
    "correction": "Corrections",
    "preference": "Preferences",
    "fact": "Facts",
    "summary": "Earlier conversations",
    "episode": "What was said",
    "entity": "People, places and things",
}


#: The header of a context's first section at a session's start: what holds about the user.
PROFILE_HEADER = "Profile"


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
    #: A newer statement of the same speaker about the same thing ranks above it (named
    #: here): what it says may no longer hold, though nothing superseded it.
    possibly_outdated_by: str | None = None
    #: The share of the question's content words the memory holds, when the lexical rerank
    #: counted it into ``rank_score`` at :data:`LEXICAL_WEIGHT`.
    word_share: float | None = None

    def explain(self) -> str:
        """One line: the score as the sum of its weighted components.

        Examples
        --------
        >>> ranked.explain()  # doctest: +SKIP
        '0.627 = (1.00 x relevance 0.62 [meaning 0.71, words 0.53] + 0.02 x importance 0.85 + 0.01 x recency 0.50 + 0.01 x use 0.00) / 1.04'
        """
        w = self.weights
        weighted = (
            f"({w.relevance:.2f} x relevance {self.relevance:.2f} "
            f"[meaning {self.memory.similarity:.2f}, words {self.memory.words:.2f}] + "
            f"{w.importance:.2f} x importance {self.importance:.2f} + "
            f"{w.recency:.2f} x recency {self.recency:.2f} + "
            f"{w.use:.2f} x use {self.use:.2f}) / {w.total:.2f}"
        )
        if self.word_share is not None:
            weighted = (
                f"({weighted} + {LEXICAL_WEIGHT:.2f} x the question's words "
                f"{self.word_share:.2f}) / {1 + LEXICAL_WEIGHT:.2f}"
            )
        text = f"{self.rank_score:.3f} = {weighted}"
        if self.stale:
            text += f"; stale: ranked at x{STALE_WEIGHT}"
        if self.replaces is not None:
            text += f"; above {self.replaces}, which it replaced"
        if self.possibly_outdated_by is not None:
            text += f"; possibly outdated by the newer {self.possibly_outdated_by}"
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
                f"{one_line(item.memory.content)[:80]}"
            )
        return "\n".join(lines)


def newest_on_near_ties(
    ranked: Sequence[RankedMemory], margin: float = NEAR_TIE
) -> list[RankedMemory]:
    """``ranked`` (best first) with each memory moved above the ones before it that are
    older, about the same thing (:func:`about_the_same_thing`) and score within ``margin``
    (relative) of it, taking their score: of two statements a question finds almost
    equally, the newer is the likelier to hold now (a value said again differently, "my
    rent went up to 950"). Scores stay best first. Between memories about different things
    nothing moves: on REALTALK's real chats moving every newer near tie up lowered
    recall@10 by 0.005, this none (``docs/search.md``)."""
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
            if (
                item.stale  # what no longer holds never climbs
                or _said_at(item) <= _said_at(above)
                or not near
                or not about_the_same_thing(item.memory, above.memory)
            ):
                break
            at -= 1
        if at < len(order):
            item = replace(item, rank_score=order[at].rank_score)
        order.insert(at, item)
    return order


def mark_possibly_outdated(ranked: Sequence[RankedMemory]) -> list[RankedMemory]:
    """``ranked`` with each memory that a newer one ranked above it may have outdated marked
    (``possibly_outdated_by``): both said by the same speaker (:func:`speaker`), about the
    same thing (:func:`about_the_same_thing`), found by the question about as well (search
    scores within :data:`NEAR_TIE_PLACES_MARGIN`, relative) and different. Only what no
    claim reads ages this way, without being superseded: a memory that states a claim was
    judged by the decisions (a cat and a dog both hold), and a stale one is marked already.

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> from memstream.models.ranking import RankWeights
    >>> def item(text: str, day: int) -> RankedMemory:
    ...     at = datetime(2026, 3, day, tzinfo=timezone.utc)
    ...     hit = MemoryHit(memory_id=f"d{day}", memory_type="episode", content=text,
    ...                     importance=0.5, created_at=at, session_id="s", event_id="e",
    ...                     source_event_ids=(), source_topic="t", source_partition=0,
    ...                     source_offset=0, score=0.5)
    ...     return RankedMemory(memory=hit, rank_score=0.5, relevance=0.5, importance=0.5,
    ...                         recency=0.5, use=0.0, weights=RankWeights(1, 0, 0, 0, 30))
    >>> marked = mark_possibly_outdated([item("Kate: my team has five people now", 9),
    ...                                  item("Kate: my team has three people", 2),
    ...                                  item("Elise: my team has two people", 1)])
    >>> [m.possibly_outdated_by for m in marked]
    [None, 'd9', None]
    """
    marked: list[RankedMemory] = []
    for place, item in enumerate(ranked):
        newer = next(
            (
                above.memory.memory_id
                for above in ranked[:place]
                if _outdates(above, item)
            ),
            None,
        )
        marked.append(replace(item, possibly_outdated_by=newer) if newer else item)
    return marked


def _outdates(newer: RankedMemory, older: RankedMemory) -> bool:
    """Whether ``newer`` (ranked above ``older``) may have outdated it."""
    first, second = newer.memory, older.memory
    if older.stale or _said_at(newer) <= _said_at(older):
        return False
    if second.claim_attribute is not None or second.states:
        return False  # what it states was judged by the claim decisions
    if speaker(first) != speaker(second) or _said(first).strip() == _said(second).strip():
        return False
    low, high = sorted((first.score, second.score))
    if low < high * (1 - NEAR_TIE_PLACES_MARGIN):
        return False
    return about_the_same_thing(first, second)


def _said(memory: MemoryHit) -> str:
    """A memory's text without the speaker it starts with."""
    named = SPEAKER_PREFIX.match(memory.content)
    return memory.content[named.end():] if named else memory.content


def speaker(memory: MemoryHit) -> str:
    """Who said what ``memory`` states, casefolded: its claim's subject, else the name its
    text starts with ("Kate: ..."); "" for the user's own unnamed words.

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> at = datetime(2026, 3, 1, tzinfo=timezone.utc)
    >>> hit = MemoryHit(memory_id="m", memory_type="episode", content="Tom Ray: I left.",
    ...                 importance=0.5, created_at=at, session_id="s", event_id="e",
    ...                 source_event_ids=(), source_topic="t", source_partition=0,
    ...                 source_offset=0, score=0.5)
    >>> speaker(hit)
    'tom ray'
    """
    if memory.claim_subject is not None:
        return memory.claim_subject.casefold()
    named = SPEAKER_PREFIX.match(memory.content)
    return named.group(1).casefold() if named else ""


def about_the_same_thing(first: MemoryHit, second: MemoryHit) -> bool:
    """Whether two memories are about the same thing: claims of the same attribute, or at
    least :data:`SAME_THING_WORDS` of the shorter one's words in the other (the speaker
    a text starts with, "Kate: ...", left out).

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> def hit(text: str) -> MemoryHit:
    ...     at = datetime(2026, 3, 1, tzinfo=timezone.utc)
    ...     return MemoryHit(memory_id=text, memory_type="episode", content=text,
    ...                      importance=0.5, created_at=at, session_id="s", event_id="e",
    ...                      source_event_ids=(), source_topic="t", source_partition=0,
    ...                      source_offset=0, score=0.5)
    >>> about_the_same_thing(hit("My rent is 800 a month"), hit("Rent went up to 950"))
    True
    >>> about_the_same_thing(hit("My rent is 800 a month"), hit("We adopted a puppy"))
    False
    """
    if first.claim_attribute is not None and first.claim_attribute == second.claim_attribute:
        return True
    words, other = set(tokens(_said(first))), set(tokens(_said(second)))
    if not words or not other:
        return False
    return len(words & other) >= SAME_THING_WORDS * min(len(words), len(other))


def _said_at(item: RankedMemory) -> datetime:
    """When a memory was said: its claim's start, else its event time."""
    return item.memory.valid_from or item.memory.created_at


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
    ## What was said
    - until 2026-04-02: 2026-03-01 (Sunday) | User: I live in Lisbon.
    """
    sections: dict[str, list[str]] = {}
    for item in items:
        memory = item.memory
        if memory.context:
            # The conversation it came from, on one line: "day | Tom: ... | Maya: ...".
            text = " | ".join(one_line(part) for part in memory.context.splitlines())
        else:
            text = f"{one_line(memory.content)} ({memory.created_at.astimezone(UTC):%Y-%m-%d})"
        until = memory.valid_until or memory.ended_at
        if item.stale and until is not None:
            text = f"until {until.astimezone(UTC):%Y-%m-%d}: {text}"
        elif item.replaces is not None and memory.valid_from is not None:
            text = f"since {memory.valid_from.astimezone(UTC):%Y-%m-%d}: {text}"
        elif item.possibly_outdated_by is not None:
            text = f"possibly outdated (said differently later): {text}"
        sections.setdefault(memory.memory_type, []).append(f"- {text}")
    return "\n\n".join(
        "\n".join([f"## {section_header(memory_type)}", *lines])
        for memory_type, lines in sections.items()
    )


def render_profile(lines: Sequence[str]) -> str:
    """Prompt text for a user's profile lines (what holds about them): one section, first in
    a context; empty when there are none.

    Examples
    --------
    >>> print(render_profile(["User's home: Porto (since 2026-04-02)"]))
    ## Profile
    - User's home: Porto (since 2026-04-02)
    """
    if not lines:
        return ""
    return "\n".join([f"## {PROFILE_HEADER}", *(f"- {one_line(line)}" for line in lines)])


def section_header(memory_type: str) -> str:
    """The header of a type's section; unknown types get one made from their name.

    Examples
    --------
    >>> section_header("fact"), section_header("learned_pattern")
    ('Facts', 'Learned pattern')
    """
    return SECTION_HEADERS.get(memory_type) or memory_type.replace("_", " ").capitalize()


def one_line(text: str) -> str:
    """``text`` with every run of whitespace one space: one memory per line (a newline inside
    a memory could otherwise open a fake section)."""
    return " ".join(text.split())


def valid_unicode(text: str) -> str:
    """``text`` with each lone surrogate as ``?``: a JSON-decoded message may hold one
    ("\\ud800"), which the tokenizer refuses, and it must not fail the whole retrieval."""
    return text.encode("utf-8", "replace").decode("utf-8")
