"""The values the memory projection takes and gives: where an event sits in the log, the
narrowing of a search, a memory as read, and a memory found by a search."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memstream.models.events.envelope import utc_instant
from memstream.models.events.memory import Claim


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

    def __post_init__(self) -> None:
        # Checked here, where every interface's filters pass: a time with no UTC equivalent
        # would otherwise fail deep in the SQL formatting as an OverflowError.
        for name in ("since", "until", "as_of"):
            moment = getattr(self, name)
            if moment is not None:
                try:
                    utc_instant(moment)
                except ValueError as exc:
                    raise ValueError(f"{name} {exc}") from None


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
    #: What a fact or preference asserts (None for other memories): see ``Claim``.
    claim_subject: str | None = None
    claim_attribute: str | None = None
    claim_value: str | None = None
    claim_polarity: bool | None = None
    claim_cardinality: str | None = None
    #: A claim's validity in event time. A memory that states a claim which ended (an
    #: episode, a summary) has ``valid_until`` only, with ``superseded_by`` naming what
    #: replaced the claim (None when it ran out on its own) while it stays active.
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    #: The end a claim stated itself ("in Berlin this week"), whatever ended it since.
    stated_until: datetime | None = None
    #: A claim's: the memories that state it too.
    stated_in: tuple[str, ...] = ()
    #: An episode's or summary's: the claims it states, and those of them that ended.
    states: tuple[str, ...] = ()
    ended_claims: tuple[str, ...] = ()

    @property
    def claim(self) -> Claim | None:
        """What the memory asserts, as its row holds it; None for a memory without a claim."""
        if self.claim_attribute is None or self.claim_subject is None or self.valid_from is None:
            return None
        return Claim(
            subject=self.claim_subject,
            attribute=self.claim_attribute,
            value=self.claim_value or "",
            polarity=self.claim_polarity is not False,
            cardinality="many" if self.claim_cardinality == "many" else "one",
            valid_from=self.valid_from,
            valid_until=self.stated_until,
        )

    def stale_at(self, moment: datetime) -> bool:
        """Whether what the memory states no longer held at ``moment``: it was superseded
        by then, or it states a claim that had ended by then.

        Examples
        --------
        >>> from datetime import timedelta
        >>> at = datetime(2026, 3, 1, tzinfo=UTC)
        >>> record = MemoryRecord(memory_id="m", memory_type="episode", content="x",
        ...     importance=0.4, created_at=at, session_id="s", event_id="e",
        ...     source_event_ids=(), source_topic="t", source_partition=0, source_offset=0,
        ...     valid_until=at + timedelta(days=7))
        >>> record.stale_at(at), record.stale_at(at + timedelta(days=7))
        (False, True)
        """
        if self.status == "superseded" and (self.ended_at is None or self.ended_at <= moment):
            return True
        return self.valid_until is not None and self.valid_until <= moment


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
        "valid_from": row["valid_from"].astimezone(UTC) if row.get("valid_from") else None,
        "valid_until": row["valid_until"].astimezone(UTC) if row.get("valid_until") else None,
        "stated_until": row["stated_until"].astimezone(UTC) if row.get("stated_until") else None,
        "source_event_ids": tuple(row["source_event_ids"]),
        "entities": tuple(row["entities"]),
        "stated_in": tuple(row.get("stated_in") or ()),
        "states": tuple(row.get("states") or ()),
        "ended_claims": tuple(row.get("ended_claims") or ()),
    }
