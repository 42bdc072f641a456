"""Memory decisions: whether a candidate memory repeats one the user has.

A candidate is compared with its nearest existing memories (similarity from the embedder)
and becomes one of:

- **duplicate**: it says what an existing memory says (same normalised text, or, for a
  fact or preference, similarity at or above :data:`DUPLICATE_SIMILARITY` with the same
  type). It reinforces that memory and adds no row.
- **add**: anything else.

Whether a new fact or preference *changes* one the user holds is not decided here, from
the words of two memories, but from what they assert: their claims
(:mod:`memstream.models.beliefs`). Episodes (the user's own turns) and summaries are
records of what was said: only exact repeats count as duplicates.

Examples
--------
>>> old = ExistingMemory("m1", "fact", "User's budget is about 1500 euros", 0.95)
>>> decide(MemoryCandidate(memory_type="fact", content="User's budget is about 1500 euros.",
...                        importance=0.6), [old]).kind
'duplicate'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memstream.models.events.memory import MemoryCandidate

#: At or above this cosine similarity, a memory of the same type is a duplicate.
DUPLICATE_SIMILARITY = 0.92
#: Types whose near-identical repeats are duplicates (episodes and summaries only repeat
#: word for word).
MUTABLE_TYPES = frozenset({"fact", "preference"})

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
    """What to do with a candidate: add it, or reinforce ``target``."""

    kind: Literal["add", "duplicate"]
    target: str | None = None
    similarity: float = 0.0
    reason: str = ""


def normalised(text: str) -> str:
    """Text compared for exact repeats: case, punctuation and spacing ignored."""
    return _NOISE.sub(" ", text.casefold()).strip()


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
    return Decision("add")
