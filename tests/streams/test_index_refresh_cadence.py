"""When the projector refreshes the memory indexes: at the first idle moment, then on a
cadence of time and rows written, never for nothing."""

from __future__ import annotations

from memstream.models.settings import Settings
from memstream.streams.projector.loop import INDEX_REFRESH_MIN_GAP_S, index_refresh_due

SETTINGS = Settings(index_refresh_interval_s=30.0, index_refresh_rows=1_000)


def due(
    pending_rows: int, since_refresh_s: float, *, idle: bool = True, refreshed_before: bool = True
) -> bool:
    return index_refresh_due(
        SETTINGS,
        pending_rows=pending_rows,
        since_refresh_s=since_refresh_s,
        idle=idle,
        refreshed_before=refreshed_before,
    )


def test_nothing_written_is_never_due() -> None:
    assert not due(0, 3_600.0)
    assert not due(0, 3_600.0, refreshed_before=False)


def test_the_first_refresh_of_a_spell_comes_at_the_first_idle_moment() -> None:
    assert due(3, 0.5, idle=True, refreshed_before=False)
    assert not due(3, 0.5, idle=False, refreshed_before=False)


def test_later_idle_moments_do_not_refresh_a_few_rows() -> None:
    # The old cadence refreshed here: under steady traffic every few hundred milliseconds.
    assert not due(40, 0.5, idle=True)
    assert not due(999, 29.0, idle=True)


def test_the_interval_refreshes_whatever_was_written() -> None:
    assert due(1, 30.0)
    assert due(1, 30.0, idle=False)


def test_many_rows_refresh_before_the_interval_but_not_back_to_back() -> None:
    assert due(1_000, INDEX_REFRESH_MIN_GAP_S, idle=False)
    assert not due(50_000, INDEX_REFRESH_MIN_GAP_S / 2, idle=False)
