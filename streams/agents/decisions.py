"""Memory decisions: an extraction's candidates compared with the user's memories and
recorded as :class:`MemoryAdded`, :class:`MemorySuperseded` or :class:`MemoryReinforced`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from memstream.models.decisions import Decision, ExistingMemory, decide, normalised
from memstream.models.events import (
    Event,
    ExtractionRecorded,
    MemoryAdded,
    MemoryCandidate,
    MemoryReinforced,
    MemorySuperseded,
    derived_id,
)
from memstream.models.vectors import pack_vector
from memstream.projections.embedder import Embedder
from memstream.projections.memories import MemoryRecord, MemoryStore, search_text

#: Default importance at or above which a memory goes straight to long-term (seed 2).
LONG_TERM_IMPORTANCE = 0.8


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
    #: Memories held in ``_recent`` over all users.
    _recent_total: int = 0

    def decide(self, recorded: ExtractionRecorded) -> list[Event]:
        """The memory events for ``recorded``'s candidates, in order."""
        candidates = recorded.candidates
        if not candidates:
            return []
        user, moment = recorded.user_id, recorded.occurred_at
        # A candidate without a context (a fact, a preference) whose very words a memory of
        # its type holds reinforces it, found by its text and never embedded: most of them,
        # in a long history, were said before. An episode is its words in their context:
        # the same line in another conversation is another episode, decided by its vector.
        same = self.projection.same_text_of_each(
            user, [c.content if not c.context else "" for c in candidates], before=moment
        )
        # One embedding for each other candidate, of what its row will be found by: the
        # decision compares it with the stored rows' vectors (embeddings of the same kind of
        # text), and an added memory carries it in its event, so nothing embeds it again.
        texts = [search_text(c) for c in candidates]
        unknown = [
            i for i, c in enumerate(candidates)
            if self._same_words(user, c, moment, same[i], [], set()) is None
        ]
        vectors: dict[int, np.ndarray] = {}
        stored: dict[int, list[tuple[MemoryRecord, np.ndarray]]] = {}
        if unknown:
            self._embed(user, moment, unknown, texts, vectors, stored)
        # What this extraction adds and supersedes, seen by its later candidates.
        added: list[tuple[ExistingMemory, np.ndarray]] = []
        superseded: set[str] = set()
        events: list[Event] = []
        for index, candidate in enumerate(candidates):
            target = self._same_words(user, candidate, moment, same[index], added, superseded)
            if target is not None:
                decision = Decision("duplicate", target, 1.0, "same text")
                events += self._events(recorded, index, candidate, None, decision)
                continue
            if index not in vectors:  # its memory of the same words was superseded just now
                self._embed(user, moment, [index], texts, vectors, stored)
            vector = vectors[index]
            nearby = self._nearby(user, vector, moment, stored[index], added, superseded)
            new = self._events(recorded, index, candidate, vector, decide(candidate, nearby))
            events += new
            for event in new:
                if isinstance(event, MemoryAdded):
                    added.append(
                        (ExistingMemory(event.memory_id, event.memory_type, event.content, 0.0), vector)
                    )
                elif isinstance(event, MemorySuperseded):
                    superseded.add(event.memory_id)
        self._remember(user, [(known, vector, moment) for known, vector in added])
        self._gone.update(dict.fromkeys(superseded, moment))
        while len(self._gone) > self.gone_kept:  # the oldest first: the projection has them
            del self._gone[next(iter(self._gone))]
        return events

    def _embed(
        self,
        user_id: str,
        moment: datetime,
        indexes: list[int],
        texts: list[str],
        vectors: dict[int, np.ndarray],
        stored: dict[int, list[tuple[MemoryRecord, np.ndarray]]],
    ) -> None:
        """Embed the candidates at ``indexes`` (one call) and read their nearest stored
        memories (one read of the user's view): into ``vectors`` and ``stored``."""
        embedded = self.embedder.embed([texts[i] for i in indexes])
        nearest = self.projection.neighbours_of_each(
            user_id, embedded, limit=2 * self.neighbours, before=moment
        )
        for i, vector, found in zip(indexes, embedded, nearest, strict=True):
            vectors[i], stored[i] = vector, found

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
        memory_id = derived_id(recorded.event_id, "memory-id", str(index))
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
                **common,
            )
        ]
        if decision.kind == "supersede" and decision.target is not None:
            events.append(
                MemorySuperseded(
                    event_id=derived_id(recorded.event_id, "supersede", str(index)),
                    memory_id=decision.target,
                    superseded_by=memory_id,
                    reason=decision.reason,
                    similarity=round(max(-1.0, min(1.0, decision.similarity)), 6),
                    **common,
                )
            )
        return events
