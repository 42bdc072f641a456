"""What a claim's memory says over time, for the reads built on claims (the profile, the
timeline, the entity graph): whether it holds at a moment, and the turns that stated it.

Light on purpose: the HTTP client's result types import the entity graph, which imports this,
and neither may load LanceDB.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memstream.projections.memories import MemoryRecord

__all__ = ["claim_turns", "holds"]


def holds(record: MemoryRecord, as_of: datetime | None) -> bool:
    """Whether ``record``'s claim is in the profile: active now, or (at ``as_of``) recorded
    by then and not ended by then; a deleted memory never is."""
    if record.status == "deleted":
        return False
    if as_of is None:
        return record.status == "active"
    if record.created_at > as_of:
        return False
    return record.ended_at is None or record.ended_at > as_of


def claim_turns(record: MemoryRecord, stating: dict[str, MemoryRecord]) -> list[str]:
    """The turns (event ids) that stated ``record``'s claim: its own turn, then the turns of
    the episodes among ``stating`` that said it again, each once in that order."""
    # An episode cites its turn first; a summary cites many, none of them its own.
    turns = list(record.source_event_ids[:1])
    for memory_id in record.stated_in:
        found = stating.get(memory_id)
        if found is not None and found.memory_type == "episode" and found.source_event_ids:
            turns.append(found.source_event_ids[0])
    return list(dict.fromkeys(turns))
