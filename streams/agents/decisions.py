"""Memory decisions: an extraction's candidates compared with the user's memories and
recorded as :class:`MemoryAdded`, :class:`MemorySuperseded` or :class:`MemoryReinforced`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from memstream.models.beliefs import (
    ClaimBook,
    ClaimDecision,
    KnownClaim,
    decide_claim,
)
from memstream.models.decisions import Decision, ExistingMemory, decide, normalised
from memstream.models.events.envelope import Event, derived_id
from memstream.models.events.memory import (
    Claim,
    ExtractionRecorded,
    MemoryAdded,
    MemoryCandidate,
    MemoryOutdated,
    MemoryReinforced,
    MemorySuperseded,
)
from memstream.models.vectors import pack_vector
from memstream.projections.embedder import Embedder, mean_vector
from memstream.projections.memories import MemoryRecord, MemoryStore, embedded_texts
from memstream.streams.agents.recent_claims import RecentClaims, candidates_stating, holds

#: Default importance at or above which a memory goes straight to long-term (seed 2).
LONG_TERM_IMPORTANCE = 0.8
#: Attribute keys whose embeddings the decider keeps (a few KB each).
ATTRIBUTE_VECTORS_KEPT = 10_000
def _memory_id(recorded: ExtractionRecorded, index: int) -> str:
    """The id of the memory candidate ``index`` of ``recorded`` adds."""
    return derived_id(recorded.event_id, "memory-id", str(index))


def _resolved(claim: Claim, decision: ClaimDecision) -> Claim:
    """``claim`` with the attribute its decision resolved (from the value it replaces)."""
    if claim.attribute == decision.attribute:
        return claim
    return claim.model_copy(update={"attribute": decision.attribute})


#: What a decision settles before embedding (see ``MemoryDecider._plan``).
_Plan = tuple[
    dict[int, ClaimDecision], dict[str, tuple[str, ...]], list[list[MemoryRecord]],
    list[tuple[str, ...]], list[int],
]


@dataclass
class MemoryDecider:
    """Turns an extraction's candidates into memory decisions, recorded as events.

    Each candidate is compared with the user's memories nearest to it and becomes
    :class:`MemoryAdded` (plus :class:`MemorySuperseded` for the memory it replaces) or
    :class:`MemoryReinforced`. Event ids derive from the extraction, so a re-delivered request
    repeats the same decisions' ids.

    **The same decision every time.** A request re-delivered after a crash is decided again,
    when the projection already holds that extraction's own memories and those of later ones.
    So a decision sees the user's memories *as they stood at the extraction's event time*:
    recorded before it and not ended before it (:meth:`MemoryProjection.neighbours` with
    ``before``), plus the earlier candidates of the same extraction; nearest by exact cosine
    (never an approximate index), computed here the same way for every source, ties broken by
    id. A candidate without a context whose words (normalised) a memory of its type already
    holds reinforces it without being embedded (``similarity`` 1.0 in its event), the first
    such memory by id.
    The memories this decider announced recently fill in for the projector's lag; after
    a start or a rebalance the worker waits until the projector has caught up with the log
    before deciding (see ``ExtractionAgent.projection_holds_the_log``).
    """

    projection: MemoryStore
    embedder: Embedder
    long_term_importance: float = LONG_TERM_IMPORTANCE
    neighbours: int = 5
    recent_per_user: int = 200
    #: Recent memories kept over all users (with a vector each, about 2 KB): the projector
    #: is never that far behind, and the decider must not grow with the number of users.
    recent_kept: int = 20_000
    gone_kept: int = 50_000
    #: Per user: memories announced by this decider, with their vectors and event times,
    #: oldest first.
    _recent: dict[str, list[tuple[ExistingMemory, np.ndarray, datetime]]] = field(
        default_factory=dict
    )
    #: Memories this decider superseded, with the event time of the supersession (the
    #: projection may still show them as active).
    _gone: dict[str, datetime] = field(default_factory=dict)
    #: Claims this decider superseded: what replaced each, and when it ended (event time).
    _ends: dict[str, tuple[str, datetime]] = field(default_factory=dict)
    #: Memories held in ``_recent`` over all users.
    _recent_total: int = 0
    #: Claims this decider added recently (the projector's lag), with their statements.
    _claims: RecentClaims = field(default_factory=RecentClaims)
    #: Embeddings of attribute keys, for their similarity.
    _attribute_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    #: Texts' vectors kept (about 1.6 KB each with the MiniLM embedder): a text said again
    #: (the same words, the same context) is not embedded again.
    vectors_kept: int = 10_000
    #: The vectors of the texts embedded last (by prefetch or a decision), by text, oldest
    #: first.
    _vectors_of: dict[str, np.ndarray] = field(default_factory=dict)
    #: Per user, the plan (:meth:`_plan`) of the user's first extraction of the last
    #: prefetch, by its event id; and the users decided since that prefetch.
    _plans: dict[str, tuple[str, _Plan]] = field(default_factory=dict)
    _decided_since: set[str] = field(default_factory=set)

    def prefetch(self, extractions: Sequence[ExtractionRecorded]) -> int:
        """Embed in one call what deciding ``extractions`` would embed, as the decider stands
        now: the :func:`embedded_texts` of their candidates that no text or claim decides (each
        distinct text once, none whose vector is kept from before). :meth:`decide` takes these
        vectors instead of embedding the texts again; returns how many texts were embedded.

        A text's vector does not depend on the other texts of a call, so a decision is the
        same whether its vectors were prefetched or not. A user's later extractions here are
        planned when they are decided (after the earlier ones): ahead, only their episodes
        are embedded; the rest of what they embed, if anything, when they are decided.

        Examples
        --------
        >>> decider.prefetch([first, second])  # doctest: +SKIP
        14
        >>> events = decider.decide(first) + decider.decide(second)  # doctest: +SKIP
        """
        wanted: dict[str, None] = {}
        self._plans, self._decided_since = {}, set()
        for recorded in extractions:
            if not recorded.candidates:
                continue
            if recorded.user_id in self._plans:
                # Decided after the user's earlier extraction here, so planned again then:
                # only its episodes (words in a context, never decided by their text) are
                # embedded ahead, and no LanceDB read is made for it twice.
                episodes = [c for c in recorded.candidates if c.context and c.claim is None]
                wanted.update(dict.fromkeys(t for c in episodes for t in embedded_texts(c)))
                continue
            plan = self._plan(recorded)
            # The plan of a user's first extraction here holds when it is decided (nothing
            # of that user decided since): kept, so its LanceDB reads are not made twice.
            self._plans[recorded.user_id] = (recorded.event_id, plan)
            *_, texts, unknown = plan
            wanted.update(dict.fromkeys(text for i in unknown for text in texts[i]))
        missing = [t for t in wanted if t not in self._vectors_of]
        self._vectors_by_text(missing)
        return len(missing)

    def _vectors_by_text(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors of ``texts``: those kept, and the rest embedded in one call (and kept,
        the oldest dropped beyond ``vectors_kept``). A vector is a function of its text
        alone, so a kept one is the vector embedding would give."""
        distinct = list(dict.fromkeys(texts))
        found = {t: self._vectors_of[t] for t in distinct if t in self._vectors_of}
        missing = [t for t in distinct if t not in found]
        if missing:
            fresh = dict(zip(missing, self.embedder.embed(missing), strict=True))
            found.update(fresh)
            self._vectors_of.update(fresh)
            while len(self._vectors_of) > self.vectors_kept:
                del self._vectors_of[next(iter(self._vectors_of))]
        return found

    def _plan(self, recorded: ExtractionRecorded) -> _Plan:
        """What :meth:`decide` settles before embedding (nothing changes meanwhile): the
        claims' decisions and their statements, each candidate's memories of the same words,
        the texts of the candidates' vectors, and the indexes of the candidates to embed."""
        candidates = recorded.candidates
        user, moment = recorded.user_id, recorded.occurred_at
        # Claims first, in order, each against the user's claims as this extraction has
        # left them: they decide by what the candidates assert, never by their vectors.
        beliefs, stated = (
            self._claim_decisions(recorded) if any(c.claim for c in candidates) else ({}, {})
        )
        # A candidate without a context (a fact, a preference) whose very words a memory of
        # its type holds reinforces it, found by its text and never embedded: most of them,
        # in a long history, were said before. An episode is its words in their context:
        # the same line in another conversation is another episode, decided by its vector.
        same = self.projection.same_text_of_each(
            user,
            [c.content if not c.context and i not in beliefs else "" for i, c in enumerate(candidates)],
            before=moment,
        )
        # One embedding for each other candidate, of what its row will be found by: the
        # decision compares it with the stored rows' vectors (embeddings of the same kind of
        # text), and an added memory carries it in its event, so nothing embeds it again.
        texts = [embedded_texts(c) for c in candidates]
        unknown = [
            i for i, c in enumerate(candidates)
            if (beliefs[i].kind == "new" if i in beliefs
                else self._same_words(user, c, moment, same[i], [], set()) is None)
        ]
        return beliefs, stated, same, texts, unknown

    def decide(self, recorded: ExtractionRecorded) -> list[Event]:
        """The memory events for ``recorded``'s candidates, in order."""
        candidates = recorded.candidates
        if not candidates:
            return []
        user, moment = recorded.user_id, recorded.occurred_at
        planned = self._plans.pop(user, None)
        if planned is not None and planned[0] == recorded.event_id and user not in self._decided_since:
            beliefs, stated, same, texts, unknown = planned[1]
        else:
            beliefs, stated, same, texts, unknown = self._plan(recorded)
        if self._plans:  # a later plan of this user's (in this prefetch) no longer holds
            self._decided_since.add(user)
        vectors: dict[int, np.ndarray] = {}
        stored: dict[int, list[tuple[MemoryRecord, np.ndarray]]] = {}
        if unknown:
            self._embed(user, moment, unknown, texts, vectors, stored)
        # What this extraction adds and supersedes, seen by its later candidates.
        added: list[tuple[ExistingMemory, np.ndarray]] = []
        superseded: set[str] = set()
        events: list[Event] = []
        made: dict[int, str] = {}  # candidate index -> the memory it added or reinforced
        for index, candidate in enumerate(candidates):
            if index in beliefs:
                decided = beliefs[index]
                decision = (
                    Decision("duplicate", decided.target, 1.0, "same claim")
                    if decided.kind == "same"
                    else Decision("add")
                )
                vector = vectors.get(index)
            else:
                target = self._same_words(user, candidate, moment, same[index], added, superseded)
                if target is not None:
                    decision, vector = Decision("duplicate", target, 1.0, "same text"), None
                else:
                    if index not in vectors:  # its memory of the same words was superseded now
                        self._embed(user, moment, [index], texts, vectors, stored)
                    vector = vectors[index]
                    nearby = self._nearby(user, vector, moment, stored[index], added, superseded)
                    decision = decide(candidate, nearby)
            new = self._events(recorded, index, candidate, vector, decision, beliefs.get(index))
            events += new
            for event in new:
                if isinstance(event, MemoryAdded):
                    made[index] = event.memory_id
                    assert vector is not None
                    added.append(
                        (ExistingMemory(event.memory_id, event.memory_type, event.content, 0.0), vector)
                    )
                elif isinstance(event, MemoryReinforced):
                    made[index] = event.memory_id
                elif isinstance(event, MemorySuperseded):
                    superseded.add(event.memory_id)
                    self._ends[event.memory_id] = (
                        event.superseded_by, event.valid_until or event.occurred_at
                    )
        if beliefs:
            events = self._with_statements(recorded, events, beliefs, made, stated)
        self._remember(user, [(known, vector, moment) for known, vector in added])
        self._gone.update(dict.fromkeys(superseded, moment))
        while len(self._gone) > self.gone_kept:  # the oldest first: the projection has them
            del self._gone[next(iter(self._gone))]
        while len(self._ends) > self.gone_kept:
            del self._ends[next(iter(self._ends))]
        return events

    def _claim_decisions(
        self, recorded: ExtractionRecorded
    ) -> tuple[dict[int, ClaimDecision], dict[str, tuple[str, ...]]]:
        """What each candidate's claim does, by candidate index, decided in order against
        the user's claims at the extraction's event time (the projection's, and this
        decider's recent ones), which each decision then changes for the next; and the
        memories known to state each of those claims."""
        user, moment = recorded.user_id, recorded.occurred_at
        book, stated = self._book(user, moment)
        decisions: dict[int, ClaimDecision] = {}
        for index, candidate in enumerate(recorded.candidates):
            claim = candidate.claim
            if claim is None:
                continue
            current = [k for k in book.current() if holds(k.claim, claim.valid_from)]
            decision = decide_claim(claim, current, self._attribute_similarity)
            decisions[index] = decision
            if decision.kind != "new":
                continue
            for ending in decision.ends:
                book.end(ending.memory_id)
            if decision.ended_by is None:
                book.add(_memory_id(recorded, index), _resolved(claim, decision))
        return decisions, stated

    def claims_at(self, user_id: str, moment: datetime) -> list[KnownClaim]:
        """The user's claims at ``moment`` (recorded before it, not ended before it, not run
        out by it): what an extraction of that time is decided against."""
        book, _ = self._book(user_id, moment)
        return [k for k in book.current() if holds(k.claim, moment)]

    def _book(
        self, user_id: str, moment: datetime
    ) -> tuple[ClaimBook, dict[str, tuple[str, ...]]]:
        """The user's claims in the view at ``moment`` (the projection's, and this decider's
        recent ones), and the memories known to state each."""
        book = ClaimBook()
        stated: dict[str, tuple[str, ...]] = {}
        for record in self.projection.claims_of(user_id, before=moment):
            claim = record.claim
            if claim is not None and not self._ended_before(record.memory_id, moment):
                book.add(record.memory_id, claim)
                # With the statements announced since that the projector may not hold yet.
                stated[record.memory_id] = tuple(dict.fromkeys(
                    (*record.stated_in, *self._claims.stated_in(user_id, record.memory_id))
                ))
        for memory_id, (claim, created, statements) in self._claims.of(user_id).items():
            if created < moment and not self._ended_before(memory_id, moment):
                book.add(memory_id, claim)
                stated[memory_id] = tuple(dict.fromkeys((*stated.get(memory_id, ()), *statements)))
        return book, stated

    def _with_statements(
        self,
        recorded: ExtractionRecorded,
        events: list[Event],
        beliefs: dict[int, ClaimDecision],
        made: dict[int, str],
        stated: dict[str, tuple[str, ...]],
    ) -> list[Event]:
        """``events`` with each claim's ``stated_in`` filled (the episode of its turn, the
        summary or correction quoting it) and each such memory's ``states``, then a
        :class:`MemoryOutdated` for every memory that states a claim ended here, or one that
        ends on its own."""
        candidates = recorded.candidates
        statements = {
            index: tuple(
                dict.fromkeys(
                    made[other]
                    for other in candidates_stating(candidates, index)
                    if other in made and other not in beliefs
                )
            )
            for index in beliefs
        }
        # A claim said twice in the span is one memory (added, then reinforced): it is
        # stated by what states either (not by the last one's alone), in the log too.
        by_memory: dict[str, tuple[str, ...]] = {}
        for i in beliefs:
            if i in made:
                by_memory[made[i]] = tuple(
                    dict.fromkeys((*by_memory.get(made[i], ()), *statements[i]))
                )
        # And the other way: the claims each episode or summary states.
        states: dict[str, list[str]] = {}
        for claim_id, stating in by_memory.items():
            for memory_id in stating:
                states.setdefault(memory_id, []).append(claim_id)
        filled: list[Event] = []
        for event in events:
            if isinstance(event, MemoryAdded) and event.claim is None:
                if event.memory_id in states:
                    event = event.model_copy(update={"states": tuple(states[event.memory_id])})
            elif isinstance(event, MemoryAdded | MemoryReinforced) and event.memory_id in by_memory:
                event = event.model_copy(update={"stated_in": by_memory[event.memory_id]})
            filled.append(event)
        outdated: list[MemoryOutdated] = []
        for index, decision in beliefs.items():
            claim = candidates[index].claim
            if decision.kind != "new" or claim is None or index not in made:
                continue
            mine = set(statements[index])
            memory_id = made[index]
            for ending in decision.ends:
                old_statements = stated.get(ending.memory_id, ()) + by_memory.get(
                    ending.memory_id, ()
                )
                outdated += self._outdated(
                    recorded, old_statements, ending.memory_id, memory_id, claim.valid_from, mine
                )
            if decision.ended_by is not None:
                rival = self._claim_start(recorded.user_id, decision.ended_by.by)
                outdated += self._outdated(
                    recorded, statements[index], memory_id, decision.ended_by.by,
                    rival or claim.valid_from, set(),
                )
            elif claim.valid_until is not None:
                outdated += self._outdated(
                    recorded, statements[index], memory_id, None, claim.valid_until, set()
                )
            self._claims.note(
                recorded.user_id, memory_id, _resolved(claim, decision), recorded.occurred_at,
                statements[index],
            )
        for index, decision in beliefs.items():
            if decision.kind == "same" and decision.target is not None and statements[index]:
                self._claims.stated_again(recorded.user_id, decision.target, statements[index])
                # Stated again in a session consolidated after the claim's end (log order is
                # not event-time order): the end's decision could not know these statements,
                # so they are marked here. A redelivered end, deciding when the projection
                # holds them, marks them the same (same claim, successor and end).
                end = self._end_of(recorded.user_id, decision.target)
                if end is not None:
                    outdated += self._outdated(
                        recorded, statements[index], decision.target, *end, set()
                    )
        return filled + list(dict.fromkeys(outdated))

    def _outdated(
        self,
        recorded: ExtractionRecorded,
        statements: Sequence[str],
        claim_id: str,
        by: str | None,
        until: datetime,
        keep: set[str],
    ) -> list[MemoryOutdated]:
        return [
            MemoryOutdated(
                event_id=derived_id(recorded.event_id, "outdate", claim_id, memory_id),
                user_id=recorded.user_id,
                agent_id=recorded.agent_id,
                session_id=recorded.session_id,
                occurred_at=recorded.occurred_at,
                memory_id=memory_id,
                claim_memory_id=claim_id,
                superseded_by=by,
                valid_until=until,
            )
            for memory_id in dict.fromkeys(statements)
            if memory_id not in keep
        ]

    def _end_of(self, user_id: str, memory_id: str) -> tuple[str, datetime] | None:
        """What replaced the claim of ``memory_id`` and when it ended, if it was superseded
        (by this decider, or in the projection); None while it holds."""
        end = self._ends.get(memory_id)
        if end is not None:
            return end
        record = self.projection.get(user_id, memory_id)
        if record is None or record.status != "superseded" or record.superseded_by is None:
            return None
        until = record.valid_until or record.ended_at
        return None if until is None else (record.superseded_by, until)

    def _claim_start(self, user_id: str, memory_id: str) -> datetime | None:
        """When the claim of ``memory_id`` began (valid_from), as this decider knows it."""
        known = self._claims.of(user_id).get(memory_id)
        if known is not None:
            return known[0].valid_from
        record = self.projection.get(user_id, memory_id)
        return record.valid_from if record is not None else None

    def _attribute_similarity(self, a: str, b: str) -> float:
        """Cosine of the embeddings of two attribute keys (each embedded once)."""
        missing = [key for key in (a, b) if key not in self._attribute_vectors]
        if missing:
            for key, vector in zip(missing, self.embedder.embed(missing), strict=True):
                self._attribute_vectors[key] = vector
            while len(self._attribute_vectors) > ATTRIBUTE_VECTORS_KEPT:
                del self._attribute_vectors[next(iter(self._attribute_vectors))]
        return float(np.dot(self._attribute_vectors[a], self._attribute_vectors[b]))

    def _embed(
        self,
        user_id: str,
        moment: datetime,
        indexes: list[int],
        texts: list[tuple[str, ...]],
        vectors: dict[int, np.ndarray],
        stored: dict[int, list[tuple[MemoryRecord, np.ndarray]]],
    ) -> None:
        """Embed the candidates at ``indexes`` (one call) and read their nearest stored
        memories (one read of the user's view): into ``vectors`` and ``stored``."""
        embedded = self._vectors([texts[i] for i in indexes])
        nearest = self.projection.neighbours_of_each(
            user_id, embedded, limit=2 * self.neighbours, before=moment
        )
        for i, vector, found in zip(indexes, embedded, nearest, strict=True):
            vectors[i], stored[i] = vector, found

    def _vectors(self, groups: list[tuple[str, ...]]) -> np.ndarray:
        """One vector per group of texts, the mean of its texts' (:meth:`_vectors_by_text`),
        in order: as :func:`~memstream.projections.embedder.embed_groups` makes it."""
        found = self._vectors_by_text([text for group in groups for text in group])
        return np.stack([mean_vector(np.stack([found[t] for t in group])) for group in groups])

    def _same_words(
        self,
        user_id: str,
        candidate: MemoryCandidate,
        moment: datetime,
        stored: list[MemoryRecord],
        added: list[tuple[ExistingMemory, np.ndarray]],
        superseded: set[str],
    ) -> str | None:
        """The memory of the candidate's type and words (normalised) in the view at
        ``moment``, the first by id: among ``stored`` (the projection's, without a context),
        this decider's recent ones and ``added``; None if there is none, or if the candidate
        has a context (an episode: see :meth:`decide`)."""
        if candidate.context:
            return None
        text = normalised(candidate.content)
        kind = candidate.memory_type
        found = {r.memory_id for r in stored if r.memory_type == kind and not r.context}
        found.update(
            known.memory_id
            for known, _, created in self._recent.get(user_id, [])
            if created < moment and known.memory_type == kind and normalised(known.content) == text
        )
        found.update(
            known.memory_id
            for known, _ in added
            if known.memory_type == kind and normalised(known.content) == text
        )
        live = [m for m in found if m not in superseded and not self._ended_before(m, moment)]
        return min(live, default=None)

    def _remember(
        self, user_id: str, added: list[tuple[ExistingMemory, np.ndarray, datetime]]
    ) -> None:
        """Keep the user's newest memories; drop the users longest without one first."""
        if not added:
            return
        # Re-inserted, so ``_recent`` is ordered by when each user last had one.
        recent = self._recent.pop(user_id, [])
        self._recent_total -= len(recent)
        recent = (recent + added)[-self.recent_per_user :]
        self._recent[user_id] = recent
        self._recent_total += len(recent)
        while self._recent_total > self.recent_kept and len(self._recent) > 1:
            self._recent_total -= len(self._recent.pop(next(iter(self._recent))))

    def _ended_before(self, memory_id: str, moment: datetime) -> bool:
        ended = self._gone.get(memory_id)
        return ended is not None and ended < moment

    def _nearby(
        self,
        user_id: str,
        vector: np.ndarray,
        moment: datetime,
        stored: list[tuple[MemoryRecord, np.ndarray]],
        added: list[tuple[ExistingMemory, np.ndarray]],
        superseded: set[str],
    ) -> list[ExistingMemory]:
        """The ``neighbours`` memories nearest to ``vector`` in the view at ``moment``:
        among ``stored`` (the projection's nearest, twice as many as kept: the cut below is
        made on similarities computed here), this decider's recent ones and ``added``."""
        pool: dict[str, tuple[ExistingMemory, np.ndarray]] = {}
        for record, other in stored:
            known = ExistingMemory(record.memory_id, record.memory_type, record.content, 0.0)
            pool[record.memory_id] = (known, other)
        for known, other, created in self._recent.get(user_id, []):
            if created < moment:
                pool.setdefault(known.memory_id, (known, other))
        for known, other in added:
            pool.setdefault(known.memory_id, (known, other))
        scored = [
            replace(known, similarity=float(np.dot(vector, other)))  # unit vectors: cosine
            for memory_id, (known, other) in pool.items()
            if memory_id not in superseded and not self._ended_before(memory_id, moment)
        ]
        scored.sort(key=lambda m: (-m.similarity, m.memory_id))
        return scored[: self.neighbours]

    def _events(
        self,
        recorded: ExtractionRecorded,
        index: int,
        candidate: MemoryCandidate,
        vector: np.ndarray | None,
        decision: Decision,
        belief: ClaimDecision | None = None,
    ) -> list[Event]:
        common: dict[str, Any] = {
            "user_id": recorded.user_id,
            "agent_id": recorded.agent_id,
            "session_id": recorded.session_id,
            "occurred_at": recorded.occurred_at,
        }
        if decision.kind == "duplicate" and decision.target is not None:
            return [
                MemoryReinforced(
                    event_id=derived_id(recorded.event_id, "reinforce", str(index)),
                    memory_id=decision.target,
                    extraction_event_id=recorded.event_id,
                    source_event_ids=candidate.source_event_ids,
                    similarity=round(max(-1.0, min(1.0, decision.similarity)), 6),
                    **common,
                )
            ]
        assert vector is not None, "an added memory carries its vector"
        memory_id = _memory_id(recorded, index)
        claim = candidate.claim
        if claim is not None and belief is not None:
            claim = _resolved(claim, belief)
        events: list[Event] = [
            MemoryAdded(
                event_id=derived_id(recorded.event_id, "memory", str(index)),
                memory_id=memory_id,
                memory_type=candidate.memory_type,
                content=candidate.content,
                importance=candidate.importance,
                tier="long_term"
                if candidate.importance >= self.long_term_importance
                else "short_term",
                extraction_event_id=recorded.event_id,
                extractor=f"{recorded.extractor}/{recorded.extractor_version}",
                source_event_ids=candidate.source_event_ids,
                entities=candidate.entities,
                context=candidate.context,
                vector=pack_vector(vector.tolist()),
                embedding_model=self.embedder.model_id,
                claim=claim,
                valid_until=candidate.valid_until,
                **common,
            )
        ]
        if belief is None or claim is None:
            return events
        for ending in belief.ends:
            events.append(
                MemorySuperseded(
                    event_id=derived_id(recorded.event_id, "supersede", str(index), ending.memory_id),
                    memory_id=ending.memory_id,
                    superseded_by=memory_id,
                    reason=ending.reason,
                    similarity=1.0,
                    change=ending.change,
                    decided_by=belief.decided_by,
                    valid_until=claim.valid_from,
                    **common,
                )
            )
        if belief.ended_by is not None:
            ending = belief.ended_by
            events.append(
                MemorySuperseded(
                    event_id=derived_id(recorded.event_id, "superseded-late", str(index)),
                    memory_id=memory_id,
                    superseded_by=ending.by,
                    reason=ending.reason,
                    similarity=1.0,
                    change=ending.change,
                    decided_by=belief.decided_by,
                    valid_until=self._claim_start(recorded.user_id, ending.by),
                    **common,
                )
            )
        return events
