"""Learned patterns as a verb: a user's ``pattern`` memories with their evidence and decay.

Pattern memories are learned in the worker (:mod:`memstream.streams.agents.patterns`) and
read here from the memory projection, so the answer is a pure function of the projection
(and the moment its decay is scored at): a replay rebuilds it identically. Plain searches
leave patterns out (:data:`memstream.projections.retrieval.SEARCHED_TYPES`); this verb is
how they are read.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from memstream.models.ranking import decay_score
from memstream.models.settings import Settings
from memstream.projections.memories import MemoryIndex, MemoryRecord
from memstream.streams.service.profiles import holds
from memstream.streams.service.results import PatternDict, PatternsDict

__all__ = ["learned_patterns"]

#: The kinds in the order the answer lists them.
KIND_ORDER = ("tool", "correction", "request", "hours", "weekday")


def learned_patterns(
    projection: MemoryIndex,
    user_id: str,
    settings: Settings,
    as_of: datetime | None = None,
    now: datetime | None = None,
) -> PatternsDict:
    """The patterns of ``user_id`` that hold now (active) or at ``as_of`` (recorded by then,
    not superseded by then), each with its evidence and its decay score at ``as_of`` (else
    ``now``, else the clock), ordered by kind, sessions (most first), then key."""
    moment = as_of or now or datetime.now(UTC)
    records = projection.list_memories(user_id, include_inactive=as_of is not None)
    found = [
        _pattern(r, moment, settings)
        for r in records
        if r.memory_type == "pattern" and holds(r, as_of)
    ]
    found.sort(key=lambda p: (_kind_rank(p["kind"]), -p["session_count"], p["pattern"],
                              p["memory_id"]))
    return {
        "as_of": as_of.astimezone(UTC).isoformat() if as_of is not None else None,
        "patterns": found,
    }


def _kind_rank(kind: str) -> int:
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def _pattern(record: MemoryRecord, moment: datetime, settings: Settings) -> PatternDict:
    try:
        evidence = json.loads(record.context)
    except ValueError:  # written by the learner: never, but the answer must not fail
        evidence = {}
    if not isinstance(evidence, dict):
        evidence = {}
    sessions = [str(s) for s in evidence.get("sessions", [])]
    return {
        "memory_id": record.memory_id,
        "pattern": str(evidence.get("pattern", "")),
        "kind": str(evidence.get("kind", "")),
        "content": record.content,
        "session_count": int(evidence.get("session_count", len(sessions))),
        "sessions_seen": int(evidence.get("sessions_seen", len(sessions))),
        "sessions": sessions,
        "event_ids": list(record.source_event_ids),
        "importance": record.importance,
        "decay": round(decay_score(record.importance, record.created_at,
                                   record.access_count, moment, settings), 6),
        "learned_at": record.created_at.astimezone(UTC).isoformat(),
    }
