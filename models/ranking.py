"""Ranking and decay: how much a memory is worth to a query, and without one.

Pure functions of a memory's scores and times, shared by retrieval
(:mod:`memstream.projections.retrieval`, which ranks search hits) and the forgetting policy
(:mod:`memstream.streams.operations.forgetting`, which forgets what decayed).

* :class:`RankWeights` holds the weights of relevance, importance, recency and use, and the
  recency half-life, from :class:`~memstream.models.settings.Settings`.
* :func:`rank_score` is their weighted mean, on 0..1.
* :func:`recency_weight` is ``0.5 ** (age_days / half_life_days)`` of an event time.
* :func:`use_weight` is ``log1p(accesses) / log1p(saturation)``, capped at 1.
* :func:`decay_score` is the rank score without relevance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from memstream.models.settings import Settings

SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class RankWeights:
    """Weights of the composite rank score, and the recency half-life in days."""

    relevance: float
    importance: float
    recency: float
    use: float
    half_life_days: float
    #: Accesses at which use reaches 1 (``decay_use_saturation``, the settings' default).
    use_saturation: float = Settings.model_fields["decay_use_saturation"].default

    @property
    def total(self) -> float:
        """The sum of the four weights (the rank score's divisor)."""
        return self.relevance + self.importance + self.recency + self.use

    @classmethod
    def from_settings(cls, settings: Settings) -> RankWeights:
        """The weights ``settings`` hold (``weight_*``, ``recency_half_life_days``)."""
        return cls(
            relevance=settings.weight_relevance,
            importance=settings.weight_importance,
            recency=settings.weight_recency,
            use=settings.weight_use,
            half_life_days=settings.recency_half_life_days,
            use_saturation=settings.decay_use_saturation,
        )


def rank_score(
    relevance: float, importance: float, recency: float, use: float, weights: RankWeights
) -> float:
    """``(w_rel * relevance + w_imp * importance + w_rec * recency + w_use * use) / sum(w)``,
    on 0..1 when every component is; 0.0 when the weights sum to 0.

    Examples
    --------
    >>> weights = RankWeights(1.0, 0.02, 0.015, 0.005, 30.0)
    >>> round(rank_score(0.5, 1.0, 1.0, 1.0, weights), 6)
    0.519231
    """
    weighted = (
        weights.relevance * relevance
        + weights.importance * importance
        + weights.recency * recency
        + weights.use * use
    )
    total = weights.total
    return weighted / total if total > 0 else 0.0


def use_weight(access_count: int, saturation: float) -> float:
    """``log1p(access_count) / log1p(saturation)``, capped at 1: how used a memory is.

    Examples
    --------
    >>> use_weight(0, 20.0), use_weight(20, 20.0), use_weight(1000, 20.0)
    (0.0, 1.0, 1.0)
    """
    return min(math.log1p(max(access_count, 0)) / math.log1p(max(saturation, 1.0)), 1.0)


def recency_weight(created_at: datetime, now: datetime, half_life_days: float) -> float:
    """``0.5 ** (age_days / half_life_days)`` of an event time; 1.0 for future times.

    Examples
    --------
    >>> from datetime import UTC, timedelta
    >>> now = datetime(2026, 3, 31, tzinfo=UTC)
    >>> recency_weight(now - timedelta(days=30), now, 30.0)
    0.5
    """
    age_days = max((now - created_at).total_seconds(), 0.0) / SECONDS_PER_DAY
    return float(0.5 ** (age_days / half_life_days))


def decay_score(
    importance: float, created_at: datetime, access_count: int, now: datetime, settings: Settings
) -> float:
    """How much a memory still deserves its place, on 0..1: the rank score without relevance.

    ``(w_imp * importance + w_rec * recency + w_use * use) / (w_imp + w_rec + w_use)`` with
    the ``weight_*`` of ``settings``; recency is :func:`recency_weight` of the event time
    (half-life ``recency_half_life_days``) and use is ``log1p(access_count) /
    log1p(decay_use_saturation)``, capped at 1. Unlike :func:`rank`, use is measured against a
    fixed saturation, not the other candidates, so a memory's score does not depend on which
    memories are scored with it. 0.0 when the three weights sum to 0. The decay policy of
    ``memstream forget`` forgets memories scoring below ``forget_threshold``.

    Examples
    --------
    Importance 0.3, 60 days old with a 30-day half-life (recency 0.25), never retrieved,
    default weights 0.02 / 0.015 / 0.005: ``(0.02 * 0.3 + 0.015 * 0.25 + 0) / 0.04 =
    0.24375``.

    >>> from datetime import UTC, timedelta
    >>> now = datetime(2026, 3, 31, tzinfo=UTC)
    >>> round(decay_score(0.3, now - timedelta(days=60), 0, now, Settings()), 6)
    0.24375
    """
    w_imp, w_rec, w_use = settings.weight_importance, settings.weight_recency, settings.weight_use
    total = w_imp + w_rec + w_use
    if total <= 0:
        return 0.0
    recency = recency_weight(created_at, now, settings.recency_half_life_days)
    use = use_weight(access_count, settings.decay_use_saturation)
    return (w_imp * importance + w_rec * recency + w_use * use) / total
