"""The ranking and lifecycle rules of the domain: their examples, and the rank score's range."""

from __future__ import annotations

import doctest

from hypothesis import given
from hypothesis import strategies as st

import memstream.models.lifecycle as lifecycle_module
import memstream.models.ranking as ranking_module
from memstream.models.ranking import RankWeights, rank_score, use_weight

unit = st.floats(min_value=0.0, max_value=1.0)
weight = st.floats(min_value=0.0, max_value=100.0)


def test_module_docstring_examples_run() -> None:
    for module in (ranking_module, lifecycle_module):
        failures, attempted = doctest.testmod(module)
        assert attempted > 0 and failures == 0, module.__name__


@given(unit, unit, unit, unit, weight, weight, weight, weight)
def test_the_rank_score_stays_on_zero_to_one(
    relevance: float, importance: float, recency: float, use: float,
    w_rel: float, w_imp: float, w_rec: float, w_use: float,
) -> None:
    weights = RankWeights(w_rel, w_imp, w_rec, w_use, 30.0)
    score = rank_score(relevance, importance, recency, use, weights)
    assert 0.0 <= score <= 1.0 + 1e-12


@given(unit, unit, unit, unit, unit, unit)
def test_default_priors_never_overturn_a_relevance_gap_above_0_04(
    high: float, low: float, imp_a: float, imp_b: float, rec_a: float, rec_b: float
) -> None:
    weights = RankWeights(1.0, 0.02, 0.015, 0.005, 30.0)
    if high - low > 0.04:
        best = rank_score(high, imp_a, rec_a, 0.0, weights)
        other = rank_score(low, imp_b, rec_b, 1.0, weights)
        assert best > other


@given(st.integers(min_value=-5, max_value=10**9), st.floats(min_value=0.0, max_value=1e6))
def test_use_is_on_zero_to_one_for_any_count(count: int, saturation: float) -> None:
    assert 0.0 <= use_weight(count, saturation) <= 1.0
