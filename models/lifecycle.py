"""The life of a memory: how each change event moves its current view.

A memory is added active; a reinforcement counts; a supersession or a deletion ends it; a
promotion moves a short-term memory to long-term; an expiry ends an active short-term one;
forgetting ends an active one; an outdating notes that a claim an active memory states (an
episode, a summary) ended, when (``valid_until``) and by what (``superseded_by``): once one
claim it states has ended it no longer holds as a whole, and stays in the view, marked.
Nothing is overwritten in history: the events stay in the log and a row records only the current view and when it ended (``ended_at``), so
point-in-time reads can tell what was believed when. The LanceDB projection
(:mod:`memstream.projections.memories`) applies this fold to its rows.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memstream.models.events.memory import (
    MemoryChange,
    MemoryDeleted,
    MemoryExpired,
    MemoryForgotten,
    MemoryOutdated,
    MemoryPromoted,
    MemoryReinforced,
    MemorySuperseded,
)


def apply_change(row: dict[str, Any], event: MemoryChange) -> None:
    """Fold one change event into a memory's row, in place (the row is about to be
    rewritten).

    ``row`` holds the columns the fold reads and writes: ``status``, ``tier``,
    ``superseded_by``, ``ended_at``, ``valid_until``, ``stated_in``, ``ended_claims``,
    ``reinforcement_count``, ``reinforced_by`` and ``last_reinforced_at``. A re-delivered
    reinforcement (its event id in ``reinforced_by``) is the caller's to skip.

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> row = {"status": "active", "tier": "short_term", "ended_at": None}
    >>> at = datetime(2026, 3, 1, tzinfo=timezone.utc)
    >>> apply_change(row, MemoryPromoted(event_id="p", user_id="u", session_id="s",
    ...                                  occurred_at=at, memory_id="m", reason="retrieved"))
    >>> row["tier"]
    'long_term'
    """
    if isinstance(event, MemoryReinforced):
        row["reinforced_by"] = [*row["reinforced_by"], event.event_id]
        row["reinforcement_count"] += 1
        row["last_reinforced_at"] = event.occurred_at.astimezone(UTC)
        stated = row.get("stated_in") or []
        row["stated_in"] = [*stated, *(m for m in event.stated_in if m not in stated)]
    elif isinstance(event, MemorySuperseded):
        row["status"] = "superseded"
        row["superseded_by"] = event.superseded_by
        row["ended_at"] = row["ended_at"] or event.occurred_at.astimezone(UTC)
        if event.valid_until is not None:
            row["valid_until"] = _earlier(row.get("valid_until"), event.valid_until)
    elif isinstance(event, MemoryOutdated):
        # The memory holds until the first of the claims it states ends (those that still
        # hold are memories of their own): the earliest end wins, whatever order the ends
        # arrive in, with what replaced that claim.
        ended = row.get("ended_claims") or []
        if event.claim_memory_id not in ended:
            row["ended_claims"] = [*ended, event.claim_memory_id]
        until = event.valid_until.astimezone(UTC)
        if row.get("valid_until") is None or until < row["valid_until"]:
            row["valid_until"] = until
            if row["status"] == "active":
                row["superseded_by"] = event.superseded_by
    elif isinstance(event, MemoryDeleted):
        row["status"] = "deleted"
        row["ended_at"] = row["ended_at"] or event.occurred_at.astimezone(UTC)
    elif isinstance(event, MemoryPromoted):
        row["tier"] = "long_term"
    elif (
        isinstance(event, MemoryExpired)
        and row["status"] == "active"
        and row["tier"] == "short_term"
    ):
        row["status"] = "expired"
        row["ended_at"] = event.occurred_at.astimezone(UTC)
    elif isinstance(event, MemoryForgotten) and row["status"] == "active":
        # Only an active memory is forgotten: a repeat, or a forget that crossed a
        # supersession or deletion in the log, leaves the row as it is.
        row["status"] = "forgotten"
        row["ended_at"] = event.occurred_at.astimezone(UTC)


def _earlier(current: datetime | None, other: datetime) -> datetime:
    other = other.astimezone(UTC)
    return other if current is None or other < current else current
