"""The LanceDB memory projection, on a real table in tmp_path with the real MiniLM embedder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from fakes import FakeEmbedder
from fuzz import zoned_times
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memstream.models.events.envelope import ContentEncryption
from memstream.models.events.memory import (
    MemoryAdded,
    MemoryDeleted,
    MemoryReinforced,
    MemorySuperseded,
)
from memstream.models.vectors import pack_vector
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import (
    EmbeddingModelMismatch,
    EncryptedContentError,
    MemoryHit,
    MemoryProjection,
    MemoryRecord,
    ProjectionWriteError,
    SearchFilters,
    SourcePosition,
    user_key,
)

TOPIC = "memstream.memories"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def minilm() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(threads=1)


@pytest.fixture
def projection(tmp_path: Path, minilm: MiniLMOnnxEmbedder) -> MemoryProjection:
    return MemoryProjection(tmp_path / "lancedb", minilm)


def memory(
    memory_id: str,
    content: str,
    *,
    user_id: str = "alice",
    memory_type: str = "fact",
    minutes: int = 0,
    importance: float = 0.5,
) -> MemoryAdded:
    return MemoryAdded(
        event_id=f"evt-{memory_id}",
        user_id=user_id,
        session_id="s1",
        occurred_at=T0 + timedelta(minutes=minutes),
        memory_id=memory_id,
        memory_type=memory_type,
        content=content,
        importance=importance,
        extraction_event_id=f"ext-{memory_id}",
        extractor="test/1",
        source_event_ids=(f"msg-{memory_id}",),
        entities=("Alice",),
    )


def at(offset: int, partition: int = 0) -> SourcePosition:
    return SourcePosition(TOPIC, partition, offset)


def batch_of(
    *events: MemoryAdded, partition: int = 0, first_offset: int = 0
) -> list[tuple[MemoryAdded, SourcePosition]]:
    return [(e, at(first_offset + i, partition)) for i, e in enumerate(events)]


ALICE_FACTS = (
    memory("m-peanut", "Alice is allergic to peanuts", minutes=1),
    memory("m-sister", "Alice's sister Maria lives in Lisbon", minutes=2),
    memory(
        "m-aisle", "Alice prefers aisle seats on long flights", memory_type="preference", minutes=3
    ),
    memory("m-job", "Alice works as a data engineer at Acme", minutes=4),
    memory("m-cat", "Alice has a grey cat called Pixel", minutes=5),
)


def table_snapshot(db_dir: Path) -> pa.Table:
    """Every column of every row, in memory_id order: what a reader of the table sees."""
    return lancedb.connect(db_dir).open_table("memories").to_arrow().sort_by("memory_id")


# --- writing and searching ----------------------------------------------------------------


@pytest.mark.parametrize("with_fts", [False, True], ids=["vector-only", "hybrid"])
def test_search_finds_the_memory_a_paraphrase_asks_about(
    projection: MemoryProjection, with_fts: bool
) -> None:
    assert projection.apply(batch_of(*ALICE_FACTS)) == 5
    if with_fts:
        projection.refresh_indexes()
    questions = {
        "what food can't she eat?": "m-peanut",
        "where does her sibling live": "m-sister",
        "which seat does she like when flying": "m-aisle",
        "what is her profession": "m-job",
        "does she have any pets": "m-cat",
    }
    for question, expected in questions.items():
        hits = projection.search("alice", question, limit=3)
        assert hits[0].memory_id == expected, (question, [h.memory_id for h in hits])
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_hit_carries_the_memory_and_its_provenance(projection: MemoryProjection) -> None:
    event = memory("m-1", "Alice is allergic to peanuts", importance=0.9, minutes=7)
    projection.apply([(event, at(41, partition=2))])
    projection.refresh_indexes()
    (hit,) = projection.search("alice", "peanut allergy", limit=5)
    assert isinstance(hit, MemoryHit) and hit.score > 0
    assert (hit.memory_id, hit.memory_type, hit.content) == ("m-1", "fact", event.content)
    assert (hit.importance, hit.session_id, hit.event_id) == (0.9, "s1", "evt-m-1")
    assert hit.source_event_ids == ("msg-m-1",)
    assert (hit.source_topic, hit.source_partition, hit.source_offset) == (TOPIC, 2, 41)
    assert hit.created_at == T0 + timedelta(minutes=7) and hit.created_at.tzinfo is not None


def test_rows_store_every_field_and_the_embedding_model(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    cet = timezone(timedelta(hours=1))
    event = memory("m-1", "Alice is allergic to peanuts").model_copy(
        update={"occurred_at": datetime(2026, 3, 1, 13, 0, tzinfo=cet), "agent_id": "agent-7"}
    )
    projection.apply([(event, at(3))])
    (row,) = table_snapshot(tmp_path / "lancedb").to_pylist()
    assert row["created_at"] == T0 and str(row["created_at"].tzinfo) == "UTC"
    assert row["user_id"] == "alice" and row["user_key"] == user_key("alice")
    assert row["agent_id"] == "agent-7" and row["tier"] == "long_term"
    assert row["entities"] == ["Alice"] and row["extraction_event_id"] == "ext-m-1"
    assert row["embedding_model"] == "all-MiniLM-L6-v2-onnx-int8"
    assert len(row["vector"]) == 384


def test_applying_the_same_events_twice_changes_nothing(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    batch = batch_of(*ALICE_FACTS)
    assert projection.apply(batch) == 5
    before = table_snapshot(tmp_path / "lancedb")
    assert projection.apply(batch) == 0  # re-delivered: already projected, left as it is
    after = table_snapshot(tmp_path / "lancedb")
    assert after.equals(before)
    assert projection.count() == projection.count("alice") == 5
    projection.refresh_indexes()  # compaction must not change the rows either
    assert table_snapshot(tmp_path / "lancedb").equals(before)


def test_the_first_event_of_a_memory_wins_within_a_batch_as_across_batches(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    # A worker that crashed after publishing a memory publishes it again, later in the log:
    # where the batches of a live run and of a replay happen to cut must not matter.
    first = memory("m-1", "Alice lives in Porto")
    second = memory("m-1", "Alice lives in Lisbon", minutes=1)
    together = MemoryProjection(tmp_path / "together", minilm)
    assert together.apply([(first, at(0)), (second, at(1))]) == 1
    apart = MemoryProjection(tmp_path / "apart", minilm)
    assert apart.apply([(first, at(0))]) == 1
    assert apart.apply([(second, at(1))]) == 0
    for projection in (together, apart):
        (record,) = projection.list_memories("alice")
        assert (record.content, record.source_offset) == ("Alice lives in Porto", 0)


def test_positions_are_the_next_offset_per_partition(projection: MemoryProjection) -> None:
    assert projection.positions() == {}
    projection.apply(batch_of(*ALICE_FACTS[:3], partition=0, first_offset=10))
    projection.apply(batch_of(*ALICE_FACTS[3:], partition=3, first_offset=0))
    assert projection.positions() == {(TOPIC, 0): 13, (TOPIC, 3): 2}
    # A re-delivered older event leaves the position where it was.
    projection.apply([(ALICE_FACTS[0], at(10, partition=0))])
    assert projection.positions() == {(TOPIC, 0): 13, (TOPIC, 3): 2}


def test_list_memories_is_newest_first_and_count_is_per_user(projection: MemoryProjection) -> None:
    projection.apply(batch_of(*ALICE_FACTS, memory("b-1", "Bob likes jazz", user_id="bob")))
    records = projection.list_memories("alice")
    assert all(isinstance(r, MemoryRecord) and not isinstance(r, MemoryHit) for r in records)
    assert [r.memory_id for r in records] == ["m-cat", "m-job", "m-aisle", "m-sister", "m-peanut"]
    assert (projection.count("alice"), projection.count("bob"), projection.count()) == (5, 1, 6)
    assert projection.count("carol") == 0 and projection.list_memories("carol") == []


def test_an_empty_projection_answers_with_nothing(projection: MemoryProjection) -> None:
    projection.refresh_indexes()
    assert projection.search("alice", "anything") == []
    assert projection.list_memories("alice") == []
    assert projection.count() == 0 and projection.positions() == {}
    assert projection.apply([]) == 0


def test_blank_queries_find_nothing(projection: MemoryProjection) -> None:
    projection.apply(batch_of(*ALICE_FACTS))
    projection.refresh_indexes()
    assert projection.search("alice", "") == []
    assert projection.search("alice", "   \n") == []


# --- isolation --------------------------------------------------------------------------

HOSTILE_USER_IDS = (
    "alice",
    "Alice",
    "ａlice",  # fullwidth a
    "аlice",  # Cyrillic a
    "alice ",
    "x' OR '1'='1",
    "' OR user_key LIKE '%",
    "%",
    "*",
    "_",
    'a"b',
    "a\\b",
    "'; DROP TABLE memories; --",
    "🙂",
    "u" * 256,
)
HOSTILE_QUERIES = (
    "secret code word",
    "' OR '1'='1",
    "%",
    "*",
    '"',
    "user_key != ''",
    "); DROP TABLE memories; --",
    "content:secret OR secret",
    "\\",
)


@pytest.mark.parametrize("with_fts", [False, True], ids=["vector-only", "hybrid"])
def test_each_user_only_ever_sees_their_own_rows(
    projection: MemoryProjection, with_fts: bool
) -> None:
    events = [
        memory(f"m-{i}", f"my secret code word is number {i}", user_id=user, minutes=i)
        for i, user in enumerate(HOSTILE_USER_IDS)
    ]
    projection.apply(batch_of(*events))
    if with_fts:
        projection.refresh_indexes()
    for i, user in enumerate(HOSTILE_USER_IDS):
        own = {f"m-{i}"}
        for query in HOSTILE_QUERIES:
            hits = projection.search(user, query, limit=50)
            assert {h.memory_id for h in hits} == own, (user, query)
        assert {r.memory_id for r in projection.list_memories(user)} == own
        assert projection.count(user) == 1
    for stranger in ("u" * 300, "ALICE", "", "\x00", "alice\n", "x' OR '1'='1' --"):
        assert projection.search(stranger, "secret code word", limit=50) == []
        assert projection.list_memories(stranger) == []
        assert projection.count(stranger) == 0


def test_other_users_rows_never_take_a_place_in_the_limit(projection: MemoryProjection) -> None:
    noise = [memory(f"b-{i}", f"zebra zebra zebra stripes {i}", user_id="bob") for i in range(40)]
    mine = memory("a-1", "Alice saw a zebra at the zoo")
    projection.apply(batch_of(*noise, mine))
    projection.refresh_indexes()
    assert [h.memory_id for h in projection.search("alice", "zebra", limit=3)] == ["a-1"]
    bob_hits = projection.search("bob", "zebra", limit=10)
    assert len(bob_hits) == 10 and all(h.memory_id.startswith("b-") for h in bob_hits)


def test_memory_types_filter_to_a_closed_set(projection: MemoryProjection) -> None:
    projection.apply(batch_of(*ALICE_FACTS))
    projection.refresh_indexes()
    hits = projection.search("alice", "Alice", limit=10, memory_types=["preference"])
    assert [h.memory_id for h in hits] == ["m-aisle"]
    hits = projection.search("alice", "Alice", limit=10, memory_types=("fact", "preference"))
    assert len(hits) == 5
    assert projection.search("alice", "Alice", memory_types=[]) == []
    for bad in (["fact' OR '1'='1"], ["FACT"], ["fact", "%"]):
        with pytest.raises(ValueError, match="unknown memory types"):
            projection.search("alice", "Alice", memory_types=bad)
    with pytest.raises(TypeError):
        projection.search("alice", "Alice", memory_types="fact")


def test_limit_is_checked(projection: MemoryProjection) -> None:
    for bad in (0, -1, 1_001):
        with pytest.raises(ValueError, match="limit"):
            projection.search("alice", "Alice", limit=bad)


# --- indexes ----------------------------------------------------------------------------


def open_table(db_dir: Path) -> Any:
    return lancedb.connect(db_dir, read_consistency_interval=timedelta(0)).open_table("memories")


def fts_ids(db_dir: Path, user_id: str, text: str) -> list[str]:
    """Full-text search alone, through LanceDB's own API, scoped like the projection scopes."""
    rows = (
        open_table(db_dir)
        .search(text, query_type="fts")
        .where(f"user_key = '{user_key(user_id)}'", prefilter=True)
        .select(["memory_id", "_score"])
        .limit(10)
        .to_list()
    )
    return [r["memory_id"] for r in rows]


def test_new_rows_are_full_text_searchable_after_refresh_indexes(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    db_dir = tmp_path / "lancedb"
    projection.apply(batch_of(*ALICE_FACTS))
    projection.refresh_indexes()
    table = open_table(db_dir)
    assert table.index_stats("search_text_idx").num_indexed_rows == 5

    projection.apply([(memory("m-new", "Alice's dentist is Dr Quarrington"), at(5))])
    # lancedb 0.40 scans rows the index has not seen yet, so the row is found even now ...
    assert fts_ids(db_dir, "alice", "Quarrington") == ["m-new"]
    stats = table.index_stats("search_text_idx")
    assert stats is not None and stats.num_unindexed_rows == 1
    # ... and refresh_indexes() folds it into the index.
    projection.refresh_indexes()
    stats = table.index_stats("search_text_idx")
    assert stats is not None and (stats.num_indexed_rows, stats.num_unindexed_rows) == (6, 0)
    assert fts_ids(db_dir, "alice", "Quarrington") == ["m-new"]
    assert projection.search("alice", "Quarrington", limit=1)[0].memory_id == "m-new"


def test_an_add_never_overwrites_an_existing_memory(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    # Changes are new events (superseded, deleted), never a rewrite of the same id.
    projection.apply([(memory("m-1", "Alice lives in Porto"), at(0))])
    projection.refresh_indexes()
    assert projection.apply([(memory("m-1", "Alice lives in Lisbon"), at(1))]) == 0
    projection.refresh_indexes()
    assert fts_ids(tmp_path / "lancedb", "alice", "Porto") == ["m-1"]
    assert fts_ids(tmp_path / "lancedb", "alice", "Lisbon") == []


def test_a_vector_index_is_built_once_the_table_is_large_enough(tmp_path: Path) -> None:
    # The fake embedder keeps this fast; the index logic does not depend on the model.
    projection = MemoryProjection(tmp_path, FakeEmbedder(), vector_index_min_rows=300)
    users = ["alice", "bob", "carol"]
    events = [
        memory(f"m-{i}", f"note {i} about topic {i % 17}", user_id=users[i % 3]) for i in range(299)
    ]
    projection.apply(batch_of(*events))
    projection.refresh_indexes()
    table = open_table(tmp_path)
    scalar = ["memory_key", "memory_type", "status", "user_key"]
    assert sorted(i.columns[0] for i in table.list_indices()) == sorted(["search_text", *scalar])
    projection.apply([(memory("m-299", "note 299 about topic 10", user_id="alice"), at(299))])
    projection.refresh_indexes()
    assert sorted(i.columns[0] for i in table.list_indices()) == sorted(
        ["search_text", "vector", *scalar]
    )
    hits = projection.search("alice", "note 299 about topic 10", limit=5)
    assert hits[0].memory_id == "m-299"
    alices = {f"m-{i}" for i in range(0, 299, 3)} | {"m-299"}
    assert len(hits) == 5 and {h.memory_id for h in hits} <= alices


# --- failure modes ----------------------------------------------------------------------


def test_a_short_write_raises(
    projection: MemoryProjection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The seam: LanceDB's merge_insert itself, made to report one row fewer than it wrote
    # (the silent failure of lancedb#3515).
    real_merge = projection._merge

    def short_merge(table: object, data: pa.Table) -> tuple[int, int]:
        inserted, updated = real_merge(table, data)
        return inserted - 1, updated

    monkeypatch.setattr(projection, "_merge", short_merge)
    with pytest.raises(ProjectionWriteError, match="1 new \\+ 0 updated rows for 2 memories"):
        projection.apply(batch_of(*ALICE_FACTS[:2]))


def test_a_commit_conflict_is_retried(
    projection: MemoryProjection, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_merge = projection._merge
    attempts: list[int] = []

    def conflicting_merge(table: object, data: pa.Table) -> tuple[int, int]:
        attempts.append(1)
        if len(attempts) < 3:
            raise RuntimeError("lance error: Retryable commit conflict for version 7: ...")
        return real_merge(table, data)

    monkeypatch.setattr(projection, "write_backoff_s", 0.001)
    monkeypatch.setattr(projection, "_merge", conflicting_merge)
    assert projection.apply(batch_of(*ALICE_FACTS[:2])) == 2
    assert len(attempts) == 3 and projection.count() == 2


def test_other_write_errors_are_not_retried(
    projection: MemoryProjection, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[int] = []

    def failing_merge(table: object, data: pa.Table) -> tuple[int, int]:
        attempts.append(1)
        raise OSError("disk full")

    monkeypatch.setattr(projection, "_merge", failing_merge)
    with pytest.raises(OSError, match="disk full"):
        projection.apply(batch_of(*ALICE_FACTS[:1]))
    assert len(attempts) == 1


def test_encrypted_content_is_refused_before_anything_is_written(
    projection: MemoryProjection,
) -> None:
    sealed = memory("m-2", "base64-ciphertext").model_copy(
        update={
            "encryption": ContentEncryption(scheme="aes-256-gcm", key_id="k1", fields=("content",))
        }
    )
    with pytest.raises(EncryptedContentError):
        projection.apply([(ALICE_FACTS[0], at(0)), (sealed, at(1))])
    assert projection.count() == 0


def test_a_table_of_another_model_is_refused(tmp_path: Path, minilm: MiniLMOnnxEmbedder) -> None:
    MemoryProjection(tmp_path, FakeEmbedder()).apply(batch_of(*ALICE_FACTS[:1]))
    other = MemoryProjection(tmp_path, minilm)
    with pytest.raises(EmbeddingModelMismatch):
        other.search("alice", "peanuts")
    with pytest.raises(EmbeddingModelMismatch):
        other.apply(batch_of(*ALICE_FACTS[1:2]))


def test_a_second_instance_sees_the_writers_rows(
    projection: MemoryProjection, tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    reader = MemoryProjection(tmp_path / "lancedb", minilm)
    assert reader.search("alice", "peanuts") == []  # opened before the table exists
    projection.apply(batch_of(*ALICE_FACTS))
    projection.refresh_indexes()
    assert reader.search("alice", "peanut allergy", limit=1)[0].memory_id == "m-peanut"
    assert reader.count("alice") == 5


def test_refresh_indexes_does_nothing_when_nothing_was_written(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    projection.apply(batch_of(*ALICE_FACTS))
    projection.refresh_indexes()
    version = open_table(tmp_path / "lancedb").version
    projection.refresh_indexes()
    assert open_table(tmp_path / "lancedb").version == version
    projection.apply([(memory("m-new", "Alice plays the cello"), at(5))])
    projection.refresh_indexes()
    stats = open_table(tmp_path / "lancedb").index_stats("search_text_idx")
    assert stats is not None and stats.num_unindexed_rows == 0


# --- changes: reinforced, superseded, deleted -------------------------------------------


def change(kind: str, memory_id: str, *, user_id: str = "alice", **fields: Any) -> Any:
    common = {
        "event_id": f"{kind}-{memory_id}-{fields.get('superseded_by', '')}",
        "user_id": user_id,
        "session_id": "s2",
        "occurred_at": T0 + timedelta(days=1),
        "memory_id": memory_id,
    }
    if kind == "reinforced":
        return MemoryReinforced(extraction_event_id="ext-2", similarity=0.97, **common)
    if kind == "superseded":
        return MemorySuperseded(reason="new value", similarity=0.8, **common, **fields)
    return MemoryDeleted(**common)


def test_a_superseded_memory_leaves_the_current_view_but_not_history(
    projection: MemoryProjection,
) -> None:
    projection.apply([(memory("m-old", "Alice's budget is 1500 euros"), at(0))])
    projection.apply(
        [
            (memory("m-new", "Alice's budget is now 2000 euros"), at(1)),
            (change("superseded", "m-old", superseded_by="m-new"), at(2)),
        ]
    )
    hits = projection.search("alice", "what is Alice's budget", limit=5)
    assert [h.memory_id for h in hits] == ["m-new"]
    assert [m.memory_id for m in projection.list_memories("alice")] == ["m-new"]
    old = projection.get("alice", "m-old")
    assert old is not None and old.status == "superseded" and old.superseded_by == "m-new"
    everything = projection.list_memories("alice", include_inactive=True)
    assert {m.memory_id for m in everything} == {"m-old", "m-new"}
    assert projection.positions() == {(TOPIC, 0): 3}


def test_reinforcement_counts_once_per_event_even_when_re_delivered(
    projection: MemoryProjection,
) -> None:
    projection.apply([(memory("m-1", "Alice likes tea"), at(0))])
    reinforce = (change("reinforced", "m-1"), at(5))
    assert projection.apply([reinforce]) == 1
    assert projection.apply([reinforce]) == 0  # re-delivered
    record = projection.get("alice", "m-1")
    assert record is not None and record.reinforcement_count == 1
    assert projection.count("alice") == 1  # no new row


def test_a_reinforcement_published_again_later_in_the_log_counts_once(
    projection: MemoryProjection,
) -> None:
    projection.apply([(memory("m-1", "Alice likes tea"), at(0))])
    reinforce = change("reinforced", "m-1")
    assert projection.apply([(reinforce, at(5))]) == 1
    # A worker that crashed after publishing the decision makes it again: same event id,
    # a later offset.
    assert projection.apply([(reinforce, at(9))]) == 0
    other = change("reinforced", "m-1").model_copy(update={"event_id": "another-decision"})
    assert projection.apply([(other, at(12))]) == 1
    record = projection.get("alice", "m-1")
    assert record is not None and record.reinforcement_count == 2


def test_a_batch_of_new_memories_and_changes_is_one_commit(projection: MemoryProjection) -> None:
    # The projector resumes after the highest offset any row records: had the new row of
    # offset 7 been written before the supersession of offset 6, a crash in between would
    # lose the supersession for good.
    projection.apply([(memory("m-old", "Alice lives in Porto"), at(0))])
    table = lancedb.connect(projection.db_dir).open_table("memories")
    before = table.version
    supersede = change("superseded", "m-old", superseded_by="m-new")
    assert projection.apply([(supersede, at(6)), (memory("m-new", "Alice lives in Lisbon"), at(7))]) == 2
    table.checkout_latest()
    assert table.version == before + 1
    old = projection.get("alice", "m-old")
    assert old is not None and old.status == "superseded" and old.superseded_by == "m-new"
    assert projection.positions() == {(TOPIC, 0): 8}


def test_a_change_for_another_users_memory_is_refused(projection: MemoryProjection) -> None:
    projection.apply([(memory("m-1", "Alice likes tea"), at(0))])
    assert projection.apply([(change("deleted", "m-1", user_id="mallory"), at(1))]) == 0
    assert projection.get("alice", "m-1").status == "active"  # type: ignore[union-attr]
    assert projection.get("mallory", "m-1") is None


def test_deleted_memories_are_out_of_search_and_listing(projection: MemoryProjection) -> None:
    projection.apply([(memory("m-1", "Alice likes tea"), at(0)), (memory("m-2", "Alice likes jazz"), at(1))])
    projection.apply([(change("deleted", "m-1"), at(2))])
    assert [m.memory_id for m in projection.list_memories("alice")] == ["m-2"]
    assert all(h.memory_id != "m-1" for h in projection.search("alice", "tea", limit=5))


def test_filters_by_importance_session_and_time(projection: MemoryProjection) -> None:
    projection.apply(
        [
            (memory("m-early", "Alice visited Rome", minutes=0, importance=0.9), at(0)),
            (memory("m-late", "Alice visited Oslo", minutes=120, importance=0.4), at(1)),
        ]
    )
    ids = lambda **kw: {h.memory_id for h in projection.search("alice", "Alice visited", limit=5, filters=SearchFilters(**kw))}
    assert ids(min_importance=0.5) == {"m-early"}
    assert ids(since=T0 + timedelta(minutes=60)) == {"m-late"}
    assert ids(until=T0 + timedelta(minutes=60)) == {"m-early"}
    assert ids(session_id="s1") == {"m-early", "m-late"}
    assert ids(session_id="x' OR '1'='1") == set()


@given(times=st.fixed_dictionaries({}, optional=dict.fromkeys(("since", "until", "as_of"), zoned_times)))
@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_search_takes_any_zoned_time_or_refuses_it_in_one_line(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder, times: dict[str, datetime]
) -> None:
    projection = MemoryProjection(tmp_path / "lancedb", minilm)
    if not projection.exists():
        projection.apply([(memory("m-rome", "Alice visited Rome"), at(0))])
    try:
        filters = SearchFilters(**times)
    except ValueError as refused:
        assert "outside the years 1 to 9999 in UTC" in str(refused)
        assert "\n" not in str(refused) and str(refused).split()[0] in times
        return
    hits = projection.search("alice", "Alice visited", limit=5, filters=filters)
    assert {hit.memory_id for hit in hits} <= {"m-rome"}


def test_by_default_searches_compare_the_users_rows_exactly_and_no_ann_index_is_kept(
    tmp_path: Path,
) -> None:
    users = ["alice", "bob", "carol"]
    events = [
        memory(f"m-{i}", f"note {i} about topic {i % 17}", user_id=users[i % 3]) for i in range(300)
    ]
    # A table of an older memstream, with the HNSW index it used to build at 300 rows here.
    older = MemoryProjection(tmp_path, FakeEmbedder(), vector_index_min_rows=300)
    older.apply(batch_of(*events))
    older.refresh_indexes()
    assert "vector" in {i.columns[0] for i in open_table(tmp_path).list_indices()}
    projection = MemoryProjection(tmp_path, FakeEmbedder())
    for step in range(5):  # rows added between refreshes: each used to add an index delta
        extra = memory(f"x-{step}", f"note about topic {step} again", user_id="alice")
        projection.apply([(extra, at(1_000 + step))])
        projection.refresh_indexes()
    assert "vector" not in {i.columns[0] for i in open_table(tmp_path).list_indices()}
    # The vector leg is exact: the nearest of alice's rows by cosine comes back first.
    embedder = FakeEmbedder()
    query = "note 150 about topic 14"
    rows = open_table(tmp_path).search().where("user_id = 'alice'").limit(None).to_arrow()
    vectors = np.stack(rows.column("vector").to_numpy(zero_copy_only=False))
    best = rows.column("memory_id")[int(np.argmax(vectors @ embedder.embed([query])[0]))].as_py()
    assert projection.search("alice", query, limit=3)[0].memory_id == best


def _files_holding(directory: Path, needle: bytes) -> list[str]:
    return [p.name for p in directory.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_erasing_a_user_leaves_no_row_and_no_file_holding_them(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    projection = MemoryProjection(tmp_path / "lancedb", minilm, vector_index_min_rows=40)
    others = [memory(f"b-{i}", f"Bob note {i} about gardening", user_id="bob") for i in range(60)]
    mine = [memory(f"a-{i}", f"Alice lives at Quillmore Lane {i}") for i in range(2)]
    # Alice's two rows share data files with 60 of Bob's: a plain delete would leave them there.
    projection.apply(batch_of(*others[:30], *mine, *others[30:]))
    projection.apply([(change("reinforced", "a-0"), at(100))])
    projection.refresh_indexes()  # full-text, scalar and vector indexes over her rows too
    assert _files_holding(tmp_path / "lancedb", b"Quillmore")
    assert projection.erase_user("alice") == 2
    assert projection.count("alice") == 0 and projection.list_memories("alice", include_inactive=True) == []
    assert projection.search("alice", "Quillmore Lane", limit=5) == []
    assert _files_holding(tmp_path / "lancedb", b"Quillmore") == []
    assert projection.count("bob") == 60
    assert projection.get("bob", "b-7") is not None
    assert any(h.memory_id.startswith("b-") for h in projection.search("bob", "gardening", limit=3))
    assert projection.erase_user("alice") == 0  # idempotent
    projection.refresh_indexes()
    assert projection.count("bob") == 60


# --- vectors carried by the events -------------------------------------------------------


def test_a_carried_vector_is_stored_as_it_came_and_nothing_is_embedded(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    projection = MemoryProjection(tmp_path / "lancedb", embedder)
    made = embedder.embed(["Alice is allergic to peanuts"])[0]
    embedder.calls.clear()
    carried = memory("m-peanut", "Alice is allergic to peanuts").model_copy(
        update={"vector": pack_vector(made.tolist()), "embedding_model": embedder.model_id}
    )
    assert projection.apply(batch_of(carried)) == 1
    assert embedder.calls == [] and projection.vectors_embedded == 0
    stored = table_snapshot(tmp_path / "lancedb").column("vector").to_pylist()[0]
    assert np.array_equal(np.asarray(stored, dtype=np.float32), made)  # bit for bit
    assert projection.search("alice", "peanuts", limit=1)[0].memory_id == "m-peanut"


def test_what_carries_no_fitting_vector_is_embedded_here(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    projection = MemoryProjection(tmp_path / "lancedb", embedder)
    good = pack_vector(embedder.embed(["Alice is allergic to peanuts"])[0].tolist())
    events = [
        # Before schema version 3: no vector.
        memory("m-old", "Alice has a grey cat called Pixel"),
        # Another model's vector: the table holds this embedder's only.
        memory("m-model", "Alice lives in Lisbon").model_copy(
            update={"vector": good, "embedding_model": "another-model"}
        ),
        # This model's id, but a vector of another size.
        memory("m-size", "Alice works at Acme").model_copy(
            update={"vector": pack_vector([1.0, 0.0]), "embedding_model": embedder.model_id}
        ),
        memory("m-good", "Alice is allergic to peanuts").model_copy(
            update={"vector": good, "embedding_model": embedder.model_id}
        ),
        # The right size, but a value that is not finite.
        memory("m-nan", "Alice plays the cello").model_copy(
            update={
                "vector": pack_vector([float("nan")] * embedder.dimensions),
                "embedding_model": embedder.model_id,
            }
        ),
        # Not a whole number of float32 values.
        memory("m-bytes", "Alice reads Pessoa").model_copy(
            update={"vector": "AAAAAAA=", "embedding_model": embedder.model_id}
        ),
    ]
    embedder.calls.clear()
    assert projection.apply(batch_of(*events)) == 6
    assert projection.vectors_embedded == 5
    assert sorted(text for call in embedder.calls for text in call) == sorted(
        ["Alice has a grey cat called Pixel", "Alice lives in Lisbon", "Alice works at Acme",
         "Alice plays the cello", "Alice reads Pessoa"]
    )
    snapshot = table_snapshot(tmp_path / "lancedb")
    stored = dict(zip(snapshot["memory_id"].to_pylist(), snapshot["vector"].to_pylist(), strict=True))
    made = embedder.embed(["Alice is allergic to peanuts"])[0]
    assert np.array_equal(np.asarray(stored["m-good"], dtype=np.float32), made)  # as it came
    assert all(np.isfinite(vector).all() for vector in stored.values())
    for memory_id, query in [("m-old", "grey cat Pixel"), ("m-size", "works at Acme")]:
        assert projection.search("alice", query, limit=1)[0].memory_id == memory_id


def test_the_neighbours_of_many_vectors_are_each_one_s_nearest(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    projection = MemoryProjection(tmp_path / "lancedb", embedder)
    texts = [f"Alice note {i} about {w}" for i, w in enumerate(
        ["tea", "coffee", "trains", "tea and trains", "Lisbon", "Porto", "cats", "tea"] * 3
    )]
    projection.apply(batch_of(*(memory(f"m-{i:02d}", t, minutes=i) for i, t in enumerate(texts))))
    queries = embedder.embed(["tea", "trains to Porto", "cats", "nothing in common here"])
    together = projection.neighbours_of_each("alice", queries, limit=6)
    table = projection._open()
    where = "user_key IS NOT NULL"
    for query, found in zip(queries, together, strict=True):
        ids = [record.memory_id for record, _ in found]
        sims = [float(np.dot(query, vector)) for _, vector in found]
        assert sims == sorted(sims, reverse=True)
        # As near as LanceDB's exact vector search finds (whose order of ties is its own).
        indexed = projection._nearest_indexed(table, where, query, 6)
        theirs = sorted((float(np.dot(query, vector)) for _, vector in indexed), reverse=True)
        assert sims == pytest.approx(theirs, abs=1e-6) and len(found) == 6
        # Ties (equal texts give equal vectors) in id order.
        for (a, sa), (b, sb) in zip(zip(ids, sims), zip(ids[1:], sims[1:])):
            if sa == sb:
                assert a < b
    assert projection.neighbours_of_each("bob", queries, limit=3) == [[], [], [], []]
