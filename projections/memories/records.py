"""The values the memory projection takes and gives: where an event sits in the log, the
narrowing of a search, a memory as read, and a memory found by a search."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class SourcePosition:
    """Where an event sits in the log."""

    topic: str
    partition: int
    offset: int
    #: The broker timestamp of the record, when known.
    timestamp: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class SearchFilters:
    """Optional narrowing of a search; every field is turned into SQL by code, never pasted.

    ``session_id`` is matched through its digest; times are event times (``created_at``).
    ``include_inactive`` also returns superseded, deleted, expired and forgotten memories
    (for history views).
    """

    memory_types: tuple[str, ...] | None = None
    min_importance: float | None = None
    session_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    include_inactive: bool = False
    #: Answer from what memstream believed at this time: memories recorded by then (event
    #: time) and not yet superseded, expired or forgotten by then. Deleted memories stay out.
    as_of: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class MemoryRecord:
    """One memory as the projection holds it (the vector left out)."""

    memory_id: str
    memory_type: str
    content: str
    importance: float
    created_at: datetime
    session_id: str
    event_id: str
    source_event_ids: tuple[str, ...]
    source_topic: str
    source_partition: int
    source_offset: int
    tier: str = "long_term"
    status: str = "active"
    superseded_by: str | None = None
    reinforcement_count: int = 0
    entities: tuple[str, ...] = ()
    access_count: int = 0
    last_accessed_at: datetime | None = None
    learned_at: datetime | None = None
    #: Event time the memory left the current view (superseded, deleted, expired, forgotten).
    ended_at: datetime | None = None
    #: Which extractor (name/version) proposed it; "unrecorded" for events before v2.
    extractor: str | None = None
    #: The conversation around it (day, neighbouring turns, speakers); "" when none.
    context: str = ""


@dataclass(frozen=True, kw_only=True)
class MemoryHit(MemoryRecord):
    """A memory found by :meth:`MemoryProjection.search`.

    ``score`` is its relevance on 0..1 (see :data:`VECTOR_SHARE`): ``similarity`` (cosine of
    the query and the memory's text, 0..1) and ``words`` (its BM25 score for the query,
    saturated to 0..1; 0 when the memory was not among the best matches by words) weighed
    together.
    """

    score: float
    similarity: float = 0.0
    words: float = 0.0


def _record_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "created_at": row["created_at"].astimezone(UTC),
        "ended_at": row["ended_at"].astimezone(UTC) if row.get("ended_at") else None,
        "source_event_ids": tuple(row["source_event_ids"]),
        "entities": tuple(row["entities"]),
    }
