"""What ``memstream demo`` prints: scores with as many decimals as tell them apart."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memstream.streams.cli.demo import score_digits

#: Scores as the demo ranks them: 0 to 1, apart by at least 0.0001 when they differ.
scores = st.lists(
    st.floats(min_value=0, max_value=1).map(lambda score: round(score, 4)), min_size=1, max_size=5
)


@given(scores)
def test_scores_that_differ_never_print_the_same(ranked: list[float]) -> None:
    digits = score_digits(ranked)
    assert 2 <= digits <= 4
    assert len({f"{score:.{digits}f}" for score in ranked}) == len(set(ranked))
    if digits > 2:  # and no more decimals than that takes
        assert len({f"{score:.{digits - 1}f}" for score in ranked}) < len(set(ranked))
