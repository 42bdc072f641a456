"""Memory decisions: what a candidate memory does to the user's existing ones.

A candidate is compared with its nearest existing memories (similarity from the embedder)
and becomes one of:

- **duplicate**: it says what an existing memory says (same normalised text, or similarity
  at or above :data:`DUPLICATE_SIMILARITY` with the same type). It reinforces that memory and
  adds no row.
- **supersede**: it is a newer value of the same fact or preference: the same *slot*
  ("User's budget is …", "User lives in …") with a different value, and similar enough to be
  about the same thing. The new memory is added and the old one leaves the current view; it
  stays in history.
- **add**: anything else.

Episodes (the user's own turns) and summaries are records of what was said: they are never
superseded and only exact repeats count as duplicates.

Examples
--------
>>> old = ExistingMemory("m1", "fact", "User's budget is about 1500 euros", 0.82)
>>> decide(MemoryCandidate(memory_type="fact", content="User's budget is now 2000 euros",
...                        importance=0.6), [old]).kind
'supersede'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memstream.models.events import MemoryCandidate

#: At or above this cosine similarity, a memory of the same type is a duplicate.
DUPLICATE_SIMILARITY = 0.92
#: A same-slot memory is superseded only when at least this similar (about the same thing).
SUPERSEDE_SIMILARITY = 0.5
#: Types that state something about the user that can change.
MUTABLE_TYPES = frozenset({"fact", "preference"})

# A slot names one attribute with one current value. "User's budget is …" and "User lives in …"
# do; a bare "User is …" does not ("User is vegetarian" and "User is a nurse" are both true),
# so it never supersedes: a wrong supersession loses a fact, a missed one only leaves two.
_SLOT = re.compile(
    r"^(user's [\w' -]{1,40}? (?:is|are|was|has|have)|user (?:lives in|lives|works at|"
    r"works for|works as|is from|comes from|moved to|studies at|studies|drives|owns))\b",
    re.IGNORECASE,
)
_SAME_SLOT = {"user moved to": "user lives in", "user lives": "user lives in"}
_NOISE = re.compile(r"[^\w]+")


@dataclass(frozen=True)
class ExistingMemory:
    """A memory already in the user's current view, with its similarity to the candidate."""

    memory_id: str
    memory_type: str
    content: str
    similarity: float


@dataclass(frozen=True)
class Decision:
    """What to do with a candidate: add it, reinforce ``target``, or supersede ``target``."""

    kind: Literal["add", "duplicate", "supersede"]
    target: str | None = None
    similarity: float = 0.0
    reason: str = ""


def normalised(text: str) -> str:
    """Text compared for exact repeats: case, punctuation and spacing ignored."""
    return _NOISE.sub(" ", text.casefold()).strip()


def slot(text: str) -> str | None:
    """The slot a fact or preference fills ("user's budget is"), or None.

    Examples
    --------
    >>> slot("User lives in Berlin and works remotely")
    'user lives in'
    """
    match = _SLOT.match(text.strip())
    if match is None:
        return None
    found = normalised(match.group(1))
    # "moved to" states the new value of where the user lives.
    return _SAME_SLOT.get(found, found)


def decide(candidate: MemoryCandidate, neighbours: Sequence[ExistingMemory]) -> Decision:
    """Decide what ``candidate`` does, given its nearest existing memories (any order)."""
    text = normalised(candidate.content)
    same_type = [n for n in neighbours if n.memory_type == candidate.memory_type]
    for neighbour in sorted(same_type, key=lambda n: -n.similarity):
        if normalised(neighbour.content) == text:
            return Decision("duplicate", neighbour.memory_id, neighbour.similarity, "same text")
    if candidate.memory_type not in MUTABLE_TYPES:
        return Decision("add")
    best = max(same_type, key=lambda n: n.similarity, default=None)
    if best is not None and best.similarity >= DUPLICATE_SIMILARITY:
        return Decision("duplicate", best.memory_id, best.similarity, "near-identical")
    candidate_slot = slot(candidate.content)
    if candidate_slot is not None:
        rivals = [
            n
            for n in neighbours
            if n.memory_type in MUTABLE_TYPES
            and n.similarity >= SUPERSEDE_SIMILARITY
            and slot(n.content) == candidate_slot
        ]
        if rivals:
            rival = max(rivals, key=lambda n: n.similarity)
            return Decision(
                "supersede", rival.memory_id, rival.similarity, f"new value for {candidate_slot!r}"
            )
    return Decision("add")
