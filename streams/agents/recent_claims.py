"""What a decider remembers of the claims it announced, and which of an extraction's
candidates state a claim: the bookkeeping :mod:`decisions` keeps beside its decisions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memstream.models.beliefs import mentions
from memstream.models.events.memory import Claim, MemoryCandidate

#: Memory types that state a claim of the same extraction when they quote its turn.
STATING_TYPES = frozenset({"episode", "summary", "correction"})


class RecentClaims:
    """The claims a decider announced recently, per user, with when and where they were
    stated: what the projection may not hold yet. Bounded over all users (the users
    longest without a new claim go first)."""

    def __init__(self, kept: int = 20_000) -> None:
        self.kept = kept
        self._by_user: dict[str, dict[str, tuple[Claim, datetime, tuple[str, ...]]]] = {}
        #: Per user: memories this decider announced as stating a claim it did not add (one
        #: an earlier worker added): the projection may not hold those statements yet.
        self._stated: dict[str, dict[str, tuple[str, ...]]] = {}
        self._total = 0
        self._stated_total = 0

    def of(self, user_id: str) -> dict[str, tuple[Claim, datetime, tuple[str, ...]]]:
        """The user's recent claims: memory id -> (claim, event time, stated in)."""
        return self._by_user.get(user_id, {})

    def note(
        self, user_id: str, memory_id: str, claim: Claim, moment: datetime,
        stated_in: tuple[str, ...],
    ) -> None:
        """Remember a claim this decider added."""
        claims = self._by_user.pop(user_id, {})
        self._total += memory_id not in claims
        claims[memory_id] = (claim, moment, stated_in)
        self._by_user[user_id] = claims
        while self._total > self.kept and len(self._by_user) > 1:
            self._total -= len(self._by_user.pop(next(iter(self._by_user))))

    def stated_again(self, user_id: str, memory_id: str, stated_in: tuple[str, ...]) -> None:
        """Remember more memories stating a claim (a reinforcement's): a recent claim's, or
        one this decider did not add (after a restart, the claims of the worker before)."""
        known = self._by_user.get(user_id, {}).get(memory_id)
        if known is not None:
            claim, moment, before = known
            self._by_user[user_id][memory_id] = (
                claim, moment, tuple(dict.fromkeys((*before, *stated_in)))
            )
            return
        stated = self._stated.pop(user_id, {})
        before = stated.get(memory_id, ())
        self._stated_total += memory_id not in stated
        stated[memory_id] = tuple(dict.fromkeys((*before, *stated_in)))
        self._stated[user_id] = stated
        while self._stated_total > self.kept and len(self._stated) > 1:
            self._stated_total -= len(self._stated.pop(next(iter(self._stated))))

    def stated_in(self, user_id: str, memory_id: str) -> tuple[str, ...]:
        """The memories this decider announced as stating a claim it did not add."""
        return self._stated.get(user_id, {}).get(memory_id, ())


def holds(claim: Claim, moment: datetime) -> bool:
    """Whether ``claim`` has not run out on its own by ``moment`` ("this week")."""
    return claim.valid_until is None or claim.valid_until > moment


def candidates_stating(candidates: Sequence[MemoryCandidate], index: int) -> list[int]:
    """The other candidates of an extraction that state candidate ``index``'s claim: the
    episode of its turn, and the summaries and corrections that quote the turn with the
    claim's value."""
    claim = candidates[index].claim
    turn = candidates[index].source_event_ids[:1]
    if claim is None or not turn:
        return []
    found = []
    for other, candidate in enumerate(candidates):
        if other == index or candidate.claim is not None:
            continue
        if candidate.memory_type not in STATING_TYPES:
            continue
        if candidate.memory_type == "episode":
            if candidate.source_event_ids[:1] == turn:
                found.append(other)
        elif turn[0] in candidate.source_event_ids and mentions(candidate.content, claim.value):
            found.append(other)
    return found
