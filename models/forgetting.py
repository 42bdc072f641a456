"""Forgetting: which memories a policy lets go, and the event that records each decision.

The decay policy forgets a memory that is active, old enough, not of a kept type, and whose
decay score (:func:`memstream.models.ranking.decay_score`) is below the threshold. The
decision is an event (``MemoryForgotten``), published by ``memstream forget``
(:mod:`memstream.streams.operations.forgetting`); nothing is removed in place.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, get_args

from memstream.models.events.envelope import derived_id
from memstream.models.events.memory import MemoryForgotten, MemoryType
from memstream.models.settings import Settings

__all__ = [
    "MEMORY_TYPES",
    "ForgetCandidate",
    "ForgettableMemory",
    "Policy",
    "decay_candidates",
    "forgotten_event",
    "keep_types",
]


Policy = Literal["decay"]
#: Every memory type; a kept type must be one of them.
MEMORY_TYPES: frozenset[str] = frozenset(get_args(MemoryType))
SECONDS_PER_DAY = 86_400.0


class ForgettableMemory(Protocol):
    """What a policy reads of a memory (a projection's record has it)."""

    @property
    def memory_id(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def memory_type(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def importance(self) -> float: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def access_count(self) -> int: ...


@dataclass(frozen=True)
class ForgetCandidate:
    """A memory a policy would forget, with the score and age it was judged on."""

    user_id: str
    memory: ForgettableMemory
    score: float
    #: Days from the memory's event time (``created_at``) to the decision time.
    age_days: float

    @property
    def memory_id(self) -> str:
        """The memory's id."""
        return self.memory.memory_id


def keep_types(settings: Settings) -> frozenset[str]:
    """The memory types no policy forgets (``forget_keep_types``, comma separated).

    Raises
    ------
    ValueError
        A name that is no memory type: a typo would otherwise let that type be forgotten.

    Examples
    --------
    >>> sorted(keep_types(Settings(forget_keep_types="correction,preference")))
    ['correction', 'preference']
    """
    names = frozenset(name for name in settings.forget_keep_types.split(",") if name)
    unknown = sorted(names - MEMORY_TYPES)
    if unknown:
        raise ValueError(
            f"forget_keep_types names unknown memory types {unknown}; known: {sorted(MEMORY_TYPES)}"
        )
    return names


def decay_candidates(
    memories: Iterable[tuple[str, ForgettableMemory]], settings: Settings, now: datetime
) -> list[ForgetCandidate]:
    """The memories of ``(user_id, record)`` pairs the decay policy forgets at ``now``.

    A memory is forgotten when it is active, at least ``forget_min_age_days`` old (event
    time), not of a type in ``forget_keep_types``, and its decay score is below
    ``forget_threshold``. Ordered by score, then memory id, so two runs list the same.
    """
    from memstream.models.ranking import decay_score

    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    kept = keep_types(settings)
    candidates = []
    for user_id, memory in memories:
        age_days = (now - memory.created_at).total_seconds() / SECONDS_PER_DAY
        if (
            memory.status != "active"
            or memory.memory_type in kept
            or age_days < settings.forget_min_age_days
        ):
            continue
        score = decay_score(
            memory.importance, memory.created_at, memory.access_count, now, settings
        )
        if score < settings.forget_threshold:
            candidates.append(ForgetCandidate(user_id, memory, score, age_days))
    return sorted(candidates, key=lambda c: (c.score, c.memory_id))


def forgotten_event(
    candidate: ForgetCandidate, settings: Settings, now: datetime, policy: Policy = "decay"
) -> MemoryForgotten:
    """The event forgetting ``candidate``; its id derives from the memory and the policy."""
    memory = candidate.memory
    return MemoryForgotten(
        event_id=derived_id(memory.memory_id, "forget", policy),
        user_id=candidate.user_id,
        session_id=memory.session_id,
        occurred_at=now,
        memory_id=memory.memory_id,
        policy=policy,
        score=candidate.score,
        threshold=settings.forget_threshold,
        reason=(
            f"decay score {candidate.score:.4f} < {settings.forget_threshold:g} after "
            f"{candidate.age_days:.0f} days, importance {memory.importance:.2f}, "
            f"{memory.access_count} retrieval(s)"
        ),
    )
