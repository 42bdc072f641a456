"""How an episode's row moves as the claims it states end: it stops holding as a whole at
the first end, pointing at what replaced that claim, whatever order the ends arrive in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from memstream.models.events.memory import MemoryOutdated
from memstream.models.lifecycle import apply_change

SAID = datetime(2026, 3, 1, tzinfo=UTC)


def outdated(claim: str, days: int) -> MemoryOutdated:
    return MemoryOutdated(
        event_id=f"out-{claim}", user_id="ann", session_id="s2", occurred_at=SAID,
        memory_id="said", claim_memory_id=claim, superseded_by=f"{claim}-now",
        valid_until=SAID + timedelta(days=days),
    )


def episode() -> dict[str, Any]:
    return {"status": "active", "tier": "long_term", "ended_at": None, "valid_until": None,
            "superseded_by": None, "ended_claims": []}


@given(st.permutations([("home", 3), ("employer", 9), ("budget", 5)]))
def test_the_first_claim_to_end_ends_the_episode_whatever_order_the_ends_arrive_in(
    ends: list[tuple[str, int]],
) -> None:
    row = episode()
    for claim, days in ends:
        apply_change(row, outdated(claim, days))
        apply_change(row, outdated(claim, days))  # delivered twice
    assert row["valid_until"] == SAID + timedelta(days=3)
    assert row["superseded_by"] == "home-now"
    assert sorted(row["ended_claims"]) == ["budget", "employer", "home"]
    assert row["status"] == "active"  # outdated, not superseded: it stays in the view


def test_an_episode_that_states_one_ended_claim_is_outdated_from_that_end() -> None:
    row = episode()
    apply_change(row, outdated("home", 3))
    assert row["valid_until"] == SAID + timedelta(days=3)
    assert row["ended_claims"] == ["home"]
