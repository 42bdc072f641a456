"""The SQL filters of reads: one user's rows, narrowed by :class:`SearchFilters`.

LanceDB filters are SQL strings, so nothing a client sends ever becomes part of one: keys
are digests computed here, memory types members of a closed set, numbers and timestamps
formatted here; query text only ever goes to the embedder and the full-text index.
"""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.projections.memories.records import SearchFilters
from memstream.projections.memories.schema import (
    _HEX64,
    MEMORY_TYPES,
    session_filter_key,
    user_key,
)


def _user_filter(user_id: str, filters: SearchFilters) -> str | None:
    """The SQL filter for one user's rows; None if it can match nothing.

    Only code-made text enters it: 64-hex-digit keys, members of a closed set, numbers and
    timestamps formatted here.
    """
    if not isinstance(user_id, str):
        raise TypeError("user_id must be a string")
    key = user_key(user_id)
    assert _HEX64.fullmatch(key)
    clauses = [f"user_key = '{key}'"]
    if filters.as_of is not None:
        # What was believed then: recorded by then, not ended by then. A deleted memory
        # stays out of every read, past ones too (deletion is a user's request).
        stamp = _sql_time(filters.as_of)
        clauses.append(f"created_at <= timestamp '{stamp}'")
        if not filters.include_inactive:
            clauses.append(
                f"status != 'deleted' AND (ended_at IS NULL OR ended_at > timestamp '{stamp}')"
            )
    elif not filters.include_inactive:
        clauses.append("status = 'active'")
    memory_types = filters.memory_types
    if memory_types is not None:
        if isinstance(memory_types, str):
            raise TypeError("memory_types must be a sequence of memory types, not a string")
        unknown = [t for t in memory_types if t not in MEMORY_TYPES]
        if unknown:
            raise ValueError(f"unknown memory types {unknown!r}; known: {sorted(MEMORY_TYPES)}")
        if not memory_types:
            return None
        # Rebuilt from the closed set, never from the caller's strings.
        chosen = sorted(t for t in MEMORY_TYPES if t in memory_types)
        clauses.append("memory_type IN (" + ", ".join(f"'{t}'" for t in chosen) + ")")
    if filters.min_importance is not None:
        clauses.append(f"importance >= {float(filters.min_importance)!r}")
    if filters.session_id is not None:
        clauses.append(f"session_key = '{session_filter_key(filters.session_id)}'")
    for bound, operator in ((filters.since, ">="), (filters.until, "<")):
        if bound is not None:
            clauses.append(f"created_at {operator} timestamp '{_sql_time(bound)}'")
    return " AND ".join(clauses)


def _sql_time(moment: datetime) -> str:
    """A timestamp literal's text, formatted here from a datetime (never from a string)."""
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise ValueError("time filters need a timezone-aware datetime")
    # isoformat, not strftime: strftime's %Y does not pad years before 1000 to four digits,
    # which the SQL parser refuses.
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")

