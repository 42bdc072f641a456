"""Whose rows and which times the views hold (:class:`Scope`), and the reports' knobs
(:class:`ReportOptions`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from memstream.models.events.envelope import utc_instant


@dataclass(frozen=True)
class Scope:
    """Whose rows and which times the views hold.

    Attributes
    ----------
    user_id
        Only this user's rows in every view (None: every user's). Never SQL text.
    since
        Only rows whose event time is at or after this (see each view's ``since`` column).
    now
        The time age-based figures (decay, junk) are computed at; None: the current time.
    """

    user_id: str | None = None
    since: datetime | None = None
    now: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("since", "now"):
            moment = getattr(self, name)
            if moment is not None:
                try:
                    utc_instant(_aware(moment))
                except ValueError as exc:
                    raise ValueError(f"{name} {exc}") from None

    def resolved_now(self) -> datetime:
        """``now``, or the current time (UTC)."""
        return _aware(self.now) if self.now is not None else datetime.now(UTC)


@dataclass(frozen=True)
class ReportOptions:
    """Knobs some reports take: ``days`` (junk window), ``limit`` (rows per ranking)."""

    days: int = 7
    limit: int = 10

    def __post_init__(self) -> None:
        if self.days < 0 or self.limit < 1:
            raise ValueError("days must be >= 0 and limit >= 1")


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
