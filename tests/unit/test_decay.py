"""The decay score, the decay policy's eligibility rules and the MemoryForgotten event.

Every expected score is worked out by hand in the comment beside it, with the default weights
(importance 0.2, recency 0.15, use 0.05: they sum to 0.4), a 30-day half-life and a use
saturation of 10 accesses unless the test says otherwise.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeEmbedder

from memstream.models.codec import EventLimits, decode_event, encode_event
from memstream.models.events.catalog import json_schemas
from memstream.models.events.envelope import derived_id
from memstream.models.events.memory import (
    MemoryAdded,
    MemoryForgotten,
    MemorySuperseded,
    MemoryType,
)
from memstream.models.forgetting import decay_candidates, forgotten_event, keep_types
from memstream.models.lifecycle import apply_change
from memstream.models.ranking import decay_score
from memstream.models.settings import Settings
from memstream.models.topics import MEMORIES_TOPIC_TYPES
from memstream.projections.memories import (
    MemoryProjection,
    MemoryRecord,
    SearchFilters,
    SourcePosition,
)
from memstream.streams.agents.decoding import decode_checked
from memstream.streams.client import history_entry
from memstream.streams.operations.forgetting import plan_forgetting

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
DEFAULTS = Settings()


def days_ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


# --- the score ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("importance", "age_days", "accesses", "expected"),
    [
        # recency 0.5 ** (60 / 30) = 0.25: (0.2 * 0.3 + 0.15 * 0.25 + 0) / 0.4
        (0.3, 60, 0, 0.24375),
        # brand new, recency 1: (0.2 * 0.8 + 0.15 * 1 + 0) / 0.4 = 0.31 / 0.4
        (0.8, 0, 0, 0.775),
        # recency 0.5; 10 accesses saturate use at 1: (0.1 + 0.075 + 0.05) / 0.4
        (0.5, 30, 10, 0.5625),
        # use is capped at 1: 100 accesses score as 10 do
        (0.5, 30, 100, 0.5625),
        # recency 0.5 ** 4 = 0.0625: (0.2 * 0.1 + 0.15 * 0.0625) / 0.4 = 0.029375 / 0.4
        (0.1, 120, 0, 0.0734375),
        # a year: recency 2 ** -12 = 0.000244140625: (0.01 + 0.0000366211) / 0.4
        (0.05, 360, 0, 0.02509155),
        # nothing left: importance 0, recency 2 ** -20 (~1e-6), never used
        (0.0, 600, 0, 0.15 * 2**-20 / 0.4),
    ],
)
def test_decay_score_by_hand(
    importance: float, age_days: float, accesses: int, expected: float
) -> None:
    score = decay_score(importance, days_ago(age_days), accesses, NOW, DEFAULTS)
    assert score == pytest.approx(expected, abs=1e-8)


def test_use_is_log_scaled_against_the_saturation() -> None:
    # log1p(3) / log1p(15) = ln 4 / ln 16 = 0.5; created in the future: age floored at 0,
    # recency 1. (0 + 0.15 * 1 + 0.05 * 0.5) / 0.4 = 0.175 / 0.4
    settings = Settings(decay_use_saturation=15)
    assert decay_score(0.0, NOW + timedelta(days=3), 3, NOW, settings) == pytest.approx(0.4375)
    # 3 accesses against the default 10: ln 4 / ln 11 = 1.386294 / 2.397895 = 0.578129;
    # 120 days, importance 0.1: (0.02 + 0.009375 + 0.05 * 0.578129) / 0.4 = 0.0582815 / 0.4
    assert decay_score(0.1, days_ago(120), 3, NOW, DEFAULTS) == pytest.approx(0.1457037, abs=1e-6)


def test_the_weights_and_half_life_come_from_the_settings() -> None:
    # half-life 10 days, 20 days old: recency 0.25. (0.2 * 1 + 0.15 * 0.25) / 0.4 = 0.2375 / 0.4
    settings = Settings(recency_half_life_days=10)
    assert decay_score(1.0, days_ago(20), 0, NOW, settings) == pytest.approx(0.59375)
    # importance alone
    only_importance = Settings(weight_importance=1, weight_recency=0, weight_use=0)
    assert decay_score(0.7, days_ago(500), 0, NOW, only_importance) == pytest.approx(0.7)
    # relevance plays no part: only the three other weights are normalised
    assert decay_score(0.3, days_ago(60), 0, NOW, Settings(weight_relevance=5)) == pytest.approx(
        0.24375
    )


def test_no_weight_scores_zero() -> None:
    settings = Settings(weight_importance=0, weight_recency=0, weight_use=0)
    assert decay_score(1.0, NOW, 50, NOW, settings) == 0.0


# --- who is forgotten -----------------------------------------------------------------


def record(
    memory_id: str,
    *,
    importance: float = 0.1,
    age_days: float = 120,
    accesses: int = 0,
    memory_type: str = "fact",
    status: str = "active",
) -> MemoryRecord:
    return MemoryRecord(
        memory_id=memory_id,
        memory_type=memory_type,
        content=f"content of {memory_id}",
        importance=importance,
        created_at=days_ago(age_days),
        session_id="s1",
        event_id=f"add-{memory_id}",
        source_event_ids=(),
        source_topic="t.memories",
        source_partition=0,
        source_offset=0,
        status=status,
        access_count=accesses,
    )


def forgotten_ids(memories: list[MemoryRecord], settings: Settings = DEFAULTS) -> list[str]:
    return [c.memory_id for c in decay_candidates([("ann", m) for m in memories], settings, NOW)]


def test_an_old_unused_unimportant_memory_is_forgotten_with_its_score_and_age() -> None:
    [candidate] = decay_candidates([("ann", record("m-old"))], DEFAULTS, NOW)
    assert candidate.user_id == "ann" and candidate.memory_id == "m-old"
    assert candidate.score == pytest.approx(0.0734375)  # 120 days, importance 0.1 (above)
    assert candidate.age_days == pytest.approx(120)


def test_a_score_at_or_above_the_threshold_is_kept() -> None:
    # 3 accesses lift the 0.0734 memory to 0.1457 (worked out above): over 0.1
    assert forgotten_ids([record("m-used", accesses=3)]) == []
    # exactly at the threshold is kept: importance alone, 0.1 == 0.1
    only_importance = Settings(weight_importance=1, weight_recency=0, weight_use=0)
    assert forgotten_ids([record("m-edge", importance=0.1)], only_importance) == []
    assert forgotten_ids([record("m-below", importance=0.09)], only_importance) == ["m-below"]


def test_a_memory_younger_than_the_minimum_age_is_kept_whatever_its_score() -> None:
    # Threshold 0.5: at 29 and 30 days, importance 0, the score is ~0.19 (recency ~0.5 * 0.15
    # / 0.4), well below. Only age decides, and 30 days (the minimum) is old enough.
    settings = Settings(forget_threshold=0.5, forget_min_age_days=30)
    memories = [
        record("m-29", importance=0, age_days=29),
        record("m-30", importance=0, age_days=30),
    ]
    assert forgotten_ids(memories, settings) == ["m-30"]


def test_kept_types_are_never_forgotten() -> None:
    corrections = [record("m-correction", memory_type="correction")]
    assert forgotten_ids(corrections) == []  # "correction" is kept by default
    assert forgotten_ids(corrections, Settings(forget_keep_types="")) == ["m-correction"]
    both = Settings(forget_keep_types="correction,preference")
    memories = [*corrections, record("m-pref", memory_type="preference"), record("m-fact")]
    assert forgotten_ids(memories, both) == ["m-fact"]


def test_a_memory_already_forgotten_or_otherwise_inactive_is_skipped() -> None:
    memories = [
        record("m-forgotten", status="forgotten"),
        record("m-superseded", status="superseded"),
        record("m-deleted", status="deleted"),
        record("m-expired", status="expired"),
        record("m-active"),
    ]
    assert forgotten_ids(memories) == ["m-active"]


def test_candidates_are_ordered_by_score_then_memory_id() -> None:
    memories = [
        record("m-b", age_days=120),  # 0.0734375
        record("m-c", importance=0.05, age_days=360),  # 0.0250916
        record("m-a", age_days=120),  # 0.0734375, ties with m-b
    ]
    assert forgotten_ids(memories) == ["m-c", "m-a", "m-b"]


def test_an_unknown_kept_type_is_an_error_not_a_silent_forget() -> None:
    with pytest.raises(ValueError, match="corection"):
        keep_types(Settings(forget_keep_types="corection"))
    assert keep_types(Settings(forget_keep_types="")) == frozenset()


def test_a_naive_decision_time_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone"):
        decay_candidates([], DEFAULTS, NOW.replace(tzinfo=None))


# --- the event ------------------------------------------------------------------------


def test_the_event_records_the_decision_with_a_derived_id() -> None:
    [candidate] = decay_candidates([("ann", record("m-old"))], DEFAULTS, NOW)
    event = forgotten_event(candidate, DEFAULTS, NOW)
    assert event.event_id == derived_id("m-old", "forget", "decay")
    assert (event.user_id, event.session_id, event.memory_id) == ("ann", "s1", "m-old")
    assert (event.policy, event.threshold, event.occurred_at) == ("decay", 0.1, NOW)
    assert event.score == pytest.approx(0.0734375)
    assert "0.0734" in event.reason and "120 days" in event.reason
    # deciding again later repeats the id: the projection applies it once
    later = forgotten_event(candidate, DEFAULTS, NOW + timedelta(hours=1))
    assert later.event_id == event.event_id


def test_the_event_round_trips_and_belongs_on_the_memories_topic() -> None:
    [candidate] = decay_candidates([("ann", record("m-old"))], DEFAULTS, NOW)
    event = forgotten_event(candidate, DEFAULTS, NOW)
    raw = encode_event(event)
    assert decode_event(raw) == event
    assert decode_checked(raw, b"ann", MEMORIES_TOPIC_TYPES, EventLimits(max_event_bytes=10_000)) == event
    payload = json.loads(raw)
    with pytest.raises(ValueError, match="policy"):
        decode_event({**payload, "policy": "whim"})
    with pytest.raises(ValueError, match="score"):
        decode_event({**payload, "score": 1.5})
    schema = json_schemas()["memory_forgotten"]
    assert schema["additionalProperties"] is False
    assert {"memory_id", "policy", "score", "threshold", "reason"} <= set(schema["required"])


def test_history_shows_the_forgetting_with_its_score() -> None:
    [candidate] = decay_candidates([("ann", record("m-old"))], DEFAULTS, NOW)
    event = forgotten_event(candidate, DEFAULTS, NOW)
    entry = history_entry(event, "m-old", 2, 17)
    assert entry is not None and entry["type"] == "memory_forgotten"
    assert entry["details"]["policy"] == "decay" and entry["details"]["threshold"] == 0.1
    assert history_entry(event, "m-other", 2, 17) is None


def row(status: str = "active", ended_at: datetime | None = None) -> dict[str, Any]:
    return {"status": status, "ended_at": ended_at, "tier": "long_term"}


def forget_event(memory_id: str, at: datetime) -> MemoryForgotten:
    return MemoryForgotten(
        event_id=derived_id(memory_id, "forget", "decay"),
        user_id="ann",
        session_id="s1",
        occurred_at=at,
        memory_id=memory_id,
        policy="decay",
        score=0.05,
        threshold=0.1,
        reason="test",
    )


def test_a_forget_ends_an_active_memory_once() -> None:
    active = row()
    apply_change(active, forget_event("m1", NOW))
    assert active == {"status": "forgotten", "ended_at": NOW, "tier": "long_term"}
    apply_change(active, forget_event("m1", NOW + timedelta(days=1)))  # a repeat
    assert active["ended_at"] == NOW
    superseded = row("superseded", days_ago(3))
    apply_change(superseded, forget_event("m1", NOW))
    assert superseded == row("superseded", days_ago(3))


# --- the projection's read and the as-of view, on a local LanceDB ----------------------


def added(memory_id: str, user_id: str, memory_type: MemoryType, age_days: float) -> MemoryAdded:
    return MemoryAdded(
        event_id=f"add-{memory_id}",
        user_id=user_id,
        session_id="s1",
        occurred_at=days_ago(age_days),
        memory_id=memory_id,
        memory_type=memory_type,
        content=f"an old note about {memory_id}",
        importance=0.05,
        extraction_event_id="x1",
        extractor="test/1",
    )


def test_plan_reads_active_old_enough_memories_of_one_user_or_all(tmp_path: Path) -> None:
    projection = MemoryProjection(tmp_path, FakeEmbedder())
    events = [
        added("ann-old", "ann", "fact", 200),
        added("ann-young", "ann", "fact", 10),
        added("ann-correction", "ann", "correction", 200),
        added("ann-gone", "ann", "fact", 200),
        added("bob-old", "bob", "summary", 300),
    ]
    projection.apply([(e, SourcePosition("t.memories", 0, i)) for i, e in enumerate(events)])
    gone = MemorySuperseded(
        event_id="sup-1", user_id="ann", session_id="s1", occurred_at=days_ago(100),
        memory_id="ann-gone", superseded_by="ann-old", reason="test", similarity=0.9,
    )
    projection.apply([(gone, SourcePosition("t.memories", 0, 10))])

    def planned(user_id: str | None) -> list[tuple[str, str]]:
        candidates = plan_forgetting(DEFAULTS, projection, NOW, user_id=user_id)
        return [(c.user_id, c.memory_id) for c in candidates]

    # bob-old: (0.2 * 0.05 + 0.15 * 2 ** -10) / 0.4 = 0.02537, below ann-old's
    # (0.01 + 0.15 * 2 ** (-200 / 30)) / 0.4 = 0.02869; ann-young, ann-correction and the
    # superseded ann-gone are not read.
    assert planned(None) == [("bob", "bob-old"), ("ann", "ann-old")]
    assert planned("ann") == [("ann", "ann-old")]
    assert planned("x' OR '1'='1") == []
    assert planned("") == []

    projection.apply([(forget_event("ann-old", NOW), SourcePosition("t.memories", 0, 11))])
    assert planned("ann") == []
    forgotten = projection.get("ann", "ann-old")
    assert forgotten is not None and (forgotten.status, forgotten.ended_at) == ("forgotten", NOW)
    assert "ann-old" not in {m.memory_id for m in projection.list_memories("ann")}
    before = SearchFilters(as_of=NOW - timedelta(seconds=1))
    after = SearchFilters(as_of=NOW + timedelta(seconds=1))
    assert "ann-old" in {h.memory_id for h in projection.search("ann", "old note", filters=before)}
    found = projection.search("ann", "old note", filters=after)
    assert "ann-old" not in {h.memory_id for h in found}
