"""The MemoryIndex port's contract, run against every implementation: the LanceDB projection
(a real table in tmp_path, the real default embedder) and the in-memory index unit tests may
use in its place (so it cannot drift from the real one).

Only what both must do is asserted: idempotence by source offset, the lifecycle fold, one
user per read, and the semantics of get, list, history (inactive memories) and deletion.
How relevance is computed is each implementation's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakes import InMemoryMemoryIndex

from memstream.models.events.envelope import ContentEncryption
from memstream.models.events.memory import (
    Claim,
    MemoryAdded,
    MemoryDeleted,
    MemoryOutdated,
    MemoryReinforced,
    MemorySuperseded,
)
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import (
    EncryptedContentError,
    MemoryIndex,
    MemoryProjection,
    PartitionedMemories,
    SearchFilters,
    SourcePosition,
)

TOPIC = "memstream.memories"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def memory(
    memory_id: str,
    content: str,
    *,
    user_id: str = "alice",
    memory_type: str = "fact",
    minutes: int = 0,
    importance: float = 0.5,
    session_id: str = "s1",
) -> MemoryAdded:
    return MemoryAdded(
        event_id=f"evt-{memory_id}-{content[:8]}",
        user_id=user_id,
        session_id=session_id,
        occurred_at=T0 + timedelta(minutes=minutes),
        memory_id=memory_id,
        memory_type=memory_type,
        content=content,
        importance=importance,
        extraction_event_id=f"ext-{memory_id}",
        extractor="test/1",
        source_event_ids=(f"msg-{memory_id}",),
    )


def change(kind: str, memory_id: str, *, user_id: str = "alice", days: int = 1,
           event_id: str | None = None, **fields: Any) -> Any:
    common = {
        "event_id": event_id or f"{kind}-{memory_id}-{days}",
        "user_id": user_id,
        "session_id": "s2",
        "occurred_at": T0 + timedelta(days=days),
        "memory_id": memory_id,
    }
    if kind == "reinforced":
        return MemoryReinforced(extraction_event_id="ext-2", similarity=0.97, **common)
    if kind == "superseded":
        return MemorySuperseded(reason="new value", similarity=0.8, **common, **fields)
    return MemoryDeleted(**common)


def at(offset: int, partition: int = 0) -> SourcePosition:
    return SourcePosition(TOPIC, partition, offset)


def batch(*events: Any, first_offset: int = 0) -> list[tuple[Any, SourcePosition]]:
    return [(event, at(first_offset + i)) for i, event in enumerate(events)]


ALICE = (
    memory("a-porto", "Alice lives in Porto", minutes=0),
    memory("a-tea", "Alice likes green tea", memory_type="preference", minutes=1,
           importance=0.9),
    memory("a-acme", "Alice works at Acme as an engineer", minutes=2, session_id="s9"),
)
BOB = (memory("b-porto", "Bob lives in Porto too", user_id="bob", minutes=3),)


class MemoryIndexContract:
    """What every :class:`~memstream.projections.memories.index.MemoryIndex` must do."""

    @pytest.fixture
    def index(self, tmp_path: Path) -> Iterator[MemoryIndex]:
        raise NotImplementedError

    # --- writes: idempotent by source offset ---------------------------------------------

    def test_an_empty_index_has_no_positions_and_nothing_to_read(self, index: MemoryIndex) -> None:
        assert index.positions() == {}
        assert index.search("alice", "Porto") == []
        assert index.get("alice", "a-porto") is None
        assert index.list_memories("alice", include_inactive=True) == []
        assert index.apply([]) == 0

    def test_applying_the_same_events_again_writes_nothing(self, index: MemoryIndex) -> None:
        assert index.apply(batch(*ALICE)) == 3
        assert index.positions() == {(TOPIC, 0): 3}
        before = index.list_memories("alice", include_inactive=True)
        assert index.apply(batch(*ALICE)) == 0
        assert index.list_memories("alice", include_inactive=True) == before
        assert index.positions() == {(TOPIC, 0): 3}

    def test_positions_are_kept_per_topic_and_partition(self, index: MemoryIndex) -> None:
        index.apply([(ALICE[0], at(7, partition=0)), (BOB[0], at(4, partition=2))])
        assert index.positions() == {(TOPIC, 0): 8, (TOPIC, 2): 5}

    def test_a_users_positions_count_that_users_rows_and_changes_only(
        self, index: MemoryIndex
    ) -> None:
        index.apply([(ALICE[0], at(3)), (BOB[0], at(9)), (ALICE[1], at(4, partition=1))])
        assert index.positions("alice") == {(TOPIC, 0): 4, (TOPIC, 1): 5}
        assert index.positions("bob") == {(TOPIC, 0): 10}
        assert index.positions("carol") == {}
        index.apply([(change("reinforced", "a-porto"), at(12))])
        assert index.positions("alice") == {(TOPIC, 0): 13, (TOPIC, 1): 5}
        assert index.positions("bob") == {(TOPIC, 0): 10}

    def test_the_first_add_of_a_memory_wins(self, index: MemoryIndex) -> None:
        again = memory("a-porto", "Alice lives in Lisbon", minutes=9)
        assert index.apply(batch(ALICE[0], again)) == 1
        assert index.apply([(again, at(5))]) == 0  # re-published later in the log
        record = index.get("alice", "a-porto")
        assert record is not None and record.content == "Alice lives in Porto"
        assert (record.source_topic, record.source_partition, record.source_offset) == (TOPIC, 0, 0)

    def test_a_memory_is_recorded_as_added(self, index: MemoryIndex) -> None:
        index.apply(batch(ALICE[1]))
        record = index.get("alice", "a-tea")
        assert record is not None
        assert (record.memory_type, record.importance, record.status, record.tier) == (
            "preference", 0.9, "active", "long_term"
        )
        assert record.created_at == T0 + timedelta(minutes=1)
        assert record.event_id == ALICE[1].event_id
        assert record.source_event_ids == ("msg-a-tea",)
        assert record.reinforcement_count == 0 and record.ended_at is None

    def test_changes_are_folded_in_order_and_once(self, index: MemoryIndex) -> None:
        index.apply(batch(*ALICE))
        changes = batch(
            change("superseded", "a-porto", superseded_by="a-acme"),
            change("reinforced", "a-tea"),
            first_offset=3,
        )
        assert index.apply(changes) == 2
        assert index.positions() == {(TOPIC, 0): 5}
        assert index.apply(changes) == 0  # re-delivered
        old = index.get("alice", "a-porto")
        assert old is not None
        assert (old.status, old.superseded_by) == ("superseded", "a-acme")
        assert old.ended_at == T0 + timedelta(days=1)
        tea = index.get("alice", "a-tea")
        assert tea is not None and tea.reinforcement_count == 1

    def test_a_reinforcement_published_again_later_counts_once(self, index: MemoryIndex) -> None:
        index.apply(batch(ALICE[1]))
        reinforced = change("reinforced", "a-tea")
        assert index.apply([(reinforced, at(1))]) == 1
        assert index.apply([(reinforced, at(2))]) == 0  # the same decision, after a crash
        assert index.apply([(change("reinforced", "a-tea", days=2), at(3))]) == 1
        tea = index.get("alice", "a-tea")
        assert tea is not None and tea.reinforcement_count == 2

    def test_an_add_and_its_change_in_one_batch(self, index: MemoryIndex) -> None:
        assert index.apply(batch(ALICE[0], change("deleted", "a-porto"))) == 1
        record = index.get("alice", "a-porto")
        assert record is not None and record.status == "deleted"

    def test_a_change_applies_only_to_its_own_users_memory(self, index: MemoryIndex) -> None:
        index.apply(batch(ALICE[0]))
        assert index.apply([(change("deleted", "a-porto", user_id="bob"), at(1))]) == 0
        assert index.apply([(change("deleted", "nobody's", user_id="bob"), at(2))]) == 0
        record = index.get("alice", "a-porto")
        assert record is not None and record.status == "active"

    def test_encrypted_content_is_refused_before_anything_is_written(
        self, index: MemoryIndex
    ) -> None:
        sealed = memory("a-secret", "base64-ciphertext").model_copy(
            update={
                "encryption": ContentEncryption(
                    scheme="aes-256-gcm", key_id="k1", fields=("content",)
                )
            }
        )
        with pytest.raises(EncryptedContentError):
            index.apply(batch(ALICE[0], sealed))
        assert index.list_memories("alice", include_inactive=True) == []

    # --- reads: one user at a time ----------------------------------------------------------

    def test_every_read_is_one_users(self, index: MemoryIndex) -> None:
        index.apply(batch(*ALICE, *BOB))
        assert {h.memory_id for h in index.search("alice", "lives in Porto")} == {
            "a-porto", "a-tea", "a-acme"
        }
        assert [h.memory_id for h in index.search("bob", "lives in Porto")] == ["b-porto"]
        assert index.search("carol", "lives in Porto") == []
        assert index.search("alice' OR '1'='1", "Porto") == []
        assert index.get("bob", "a-porto") is None
        assert [r.memory_id for r in index.list_memories("bob")] == ["b-porto"]
        with pytest.raises(TypeError):
            index.list_memories(None)  # type: ignore[arg-type]

    def test_search_puts_the_matching_memory_first_within_the_limit(
        self, index: MemoryIndex
    ) -> None:
        index.apply(batch(*ALICE))
        hits = index.search("alice", "Where does Alice live? Porto")
        assert hits[0].memory_id == "a-porto"
        assert all(0.0 <= h.score <= 1.0 for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert [h.memory_id for h in index.search("alice", "Porto", limit=1)] == [
            hits[0].memory_id
        ]
        assert index.search("alice", "   ") == []

    def test_search_refuses_what_it_cannot_filter_by(self, index: MemoryIndex) -> None:
        index.apply(batch(*ALICE))
        for limit in (0, 1_001):
            with pytest.raises(ValueError):
                index.search("alice", "Porto", limit=limit)
        with pytest.raises(TypeError):
            index.search("alice", "Porto", memory_types="fact")
        with pytest.raises(ValueError):
            index.search("alice", "Porto", memory_types=["fact", "gossip"])
        with pytest.raises(ValueError):
            index.search("alice", "Porto", filters=SearchFilters(since=datetime(2026, 1, 1)))
        assert index.search("alice", "Porto", memory_types=[]) == []

    def test_search_filters_narrow_the_users_memories(self, index: MemoryIndex) -> None:
        index.apply(batch(*ALICE))

        def found(**narrowing: Any) -> set[str]:
            hits = index.search("alice", "Alice", filters=SearchFilters(**narrowing))
            return {h.memory_id for h in hits}

        assert {h.memory_id for h in index.search("alice", "Alice", memory_types=["preference"])} \
            == {"a-tea"}
        assert found(memory_types=("fact",)) == {"a-porto", "a-acme"}
        assert found(min_importance=0.8) == {"a-tea"}
        assert found(session_id="s9") == {"a-acme"}
        assert found(since=T0 + timedelta(minutes=1)) == {"a-tea", "a-acme"}
        assert found(until=T0 + timedelta(minutes=1)) == {"a-porto"}

    def test_list_is_newest_first(self, index: MemoryIndex) -> None:
        index.apply(batch(*ALICE, memory("a-also", "Alice has a cat", minutes=2)))
        assert [r.memory_id for r in index.list_memories("alice")] == [
            "a-acme", "a-also", "a-tea", "a-porto"
        ]

    # --- history and deletion ---------------------------------------------------------------

    def test_a_deleted_memory_leaves_every_current_read_but_get(self, index: MemoryIndex) -> None:
        index.apply(batch(*ALICE))
        assert index.apply([(change("deleted", "a-tea"), at(3))]) == 1
        assert "a-tea" not in {h.memory_id for h in index.search("alice", "green tea")}
        assert "a-tea" not in {r.memory_id for r in index.list_memories("alice")}
        everything = {r.memory_id: r for r in index.list_memories("alice", include_inactive=True)}
        assert everything["a-tea"].status == "deleted"
        record = index.get("alice", "a-tea")
        assert record is not None and record.status == "deleted"
        assert record.ended_at == T0 + timedelta(days=1)
        with_inactive = index.search("alice", "green tea", filters=SearchFilters(
            include_inactive=True
        ))
        assert "a-tea" in {h.memory_id for h in with_inactive}
        # Deletion is the user's request: not even a view of the past shows it.
        past = SearchFilters(as_of=T0 + timedelta(hours=1))
        assert "a-tea" not in {h.memory_id for h in index.search("alice", "tea", filters=past)}

    def test_a_superseded_memory_stays_in_history_and_the_past(self, index: MemoryIndex) -> None:
        index.apply(batch(*ALICE))
        index.apply([
            (memory("a-lisbon", "Alice moved to Lisbon", minutes=60 * 24 * 2), at(3)),
            (change("superseded", "a-porto", superseded_by="a-lisbon", days=2), at(4)),
        ])
        now = {r.memory_id for r in index.list_memories("alice")}
        assert "a-porto" not in now and "a-lisbon" in now
        history = {r.memory_id: r for r in index.list_memories("alice", include_inactive=True)}
        assert (history["a-porto"].status, history["a-porto"].superseded_by) == (
            "superseded", "a-lisbon"
        )

        def believed(moment: datetime) -> set[str]:
            hits = index.search("alice", "where Alice lives", filters=SearchFilters(as_of=moment))
            return {h.memory_id for h in hits}

        assert believed(T0 + timedelta(days=1)) == {"a-porto", "a-tea", "a-acme"}
        assert believed(T0 + timedelta(days=3)) == {"a-lisbon", "a-tea", "a-acme"}
        assert believed(T0 - timedelta(days=1)) == set()

    def test_a_claim_ended_marks_what_states_it_and_its_history_keeps_both(
        self, index: MemoryIndex
    ) -> None:
        lisbon = claim_memory("a-home-1", "Alice lives in Lisbon", "Lisbon", days=0,
                              stated_in=("a-said-1",))
        said = memory("a-said-1", "I live in Lisbon", memory_type="episode")
        porto = claim_memory("a-home-2", "Alice lives in Porto", "Porto", days=10)
        moved = T0 + timedelta(days=10)
        index.apply(batch(said, lisbon))
        index.apply([
            (porto, at(2)),
            (change("superseded", "a-home-1", superseded_by="a-home-2", days=10,
                    valid_until=moved), at(3)),
            (MemoryOutdated(event_id="out-1", user_id="alice", session_id="s2",
                            occurred_at=moved, memory_id="a-said-1",
                            claim_memory_id="a-home-1", superseded_by="a-home-2",
                            valid_until=moved), at(4)),
        ])
        episode = index.get("alice", "a-said-1")
        assert episode is not None and episode.status == "active"
        assert (episode.superseded_by, episode.valid_until) == ("a-home-2", moved)
        assert episode.stale_at(moved) and not episode.stale_at(moved - timedelta(seconds=1))
        old = index.get("alice", "a-home-1")
        assert old is not None and old.claim is not None and old.valid_until == moved
        assert old.stated_in == ("a-said-1",) and old.claim.value == "Lisbon"
        assert [r.memory_id for r in index.claim_history("alice")] == ["a-home-1", "a-home-2"]
        assert index.claim_history("bob") == []
        assert set(index.get_many("alice", ["a-said-1", "a-home-2", "nope"])) == {
            "a-said-1", "a-home-2"
        }
        assert index.get_many("bob", ["a-said-1"]) == {}

    def test_a_users_task_history_is_their_task_memories_but_the_deleted_ones(
        self, index: MemoryIndex
    ) -> None:
        index.apply(batch(
            *ALICE, *BOB,
            memory("a-task-2", "Project atlas: Migrate billing (open)", memory_type="task"),
            memory("a-task-1", "Project atlas: Migrate billing (started)", memory_type="task"),
            memory("a-task-3", "Project atlas: Write the RFC (started)", memory_type="task"),
            memory("b-task", "Project zeus: Paint (started)", memory_type="task", user_id="bob"),
        ))
        index.apply([(change("deleted", "a-task-3"), at(20))])
        assert [r.memory_id for r in index.task_history("alice")] == ["a-task-1", "a-task-2"]
        assert [r.memory_type for r in index.task_history("alice")] == ["task", "task"]
        assert [r.memory_id for r in index.task_history("bob")] == ["b-task"]
        assert index.task_history("carol") == []


def claim_memory(
    memory_id: str, content: str, value: str, *, days: int, stated_in: tuple[str, ...] = ()
) -> MemoryAdded:
    at_ = T0 + timedelta(days=days)
    added = memory(memory_id, content, minutes=days * 24 * 60 + 1)
    return added.model_copy(update={
        "claim": Claim(subject="Alice", attribute="home", value=value, valid_from=at_),
        "stated_in": stated_in,
    })


@pytest.fixture(scope="module")
def minilm() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(threads=1)


class TestMemoryProjection(MemoryIndexContract):
    @pytest.fixture
    def index(self, tmp_path: Path, minilm: MiniLMOnnxEmbedder) -> Iterator[MemoryIndex]:
        yield MemoryProjection(tmp_path / "lancedb", minilm)


class TestInMemoryMemoryIndex(MemoryIndexContract):
    @pytest.fixture
    def index(self, tmp_path: Path) -> Iterator[MemoryIndex]:
        yield InMemoryMemoryIndex()


class TestPartitionedMemoriesOfOnePartition(MemoryIndexContract):
    """The partitioned projection, held to the same contract (its events here come from
    partitions no user hashes to, so one partition: every table routing is then exact)."""

    @pytest.fixture
    def index(self, tmp_path: Path, minilm: MiniLMOnnxEmbedder) -> Iterator[MemoryIndex]:
        yield PartitionedMemories(tmp_path / "lancedb", minilm, partitions=1)

    # One partition: the events of these two come from partitions 1 and 2 in the contract.

    def test_positions_are_kept_per_topic_and_partition(self, index: MemoryIndex) -> None:
        index.apply([(ALICE[0], at(7)), (BOB[0], SourcePosition("other.memories", 0, 4))])
        assert index.positions() == {(TOPIC, 0): 8, ("other.memories", 0): 5}

    def test_a_users_positions_count_that_users_rows_and_changes_only(
        self, index: MemoryIndex
    ) -> None:
        index.apply([(ALICE[0], at(3)), (BOB[0], at(9)), (ALICE[1], at(4))])
        assert index.positions("alice") == {(TOPIC, 0): 5}
        assert index.positions("bob") == {(TOPIC, 0): 10}
        assert index.positions("carol") == {}
        index.apply([(change("reinforced", "a-porto"), at(12))])
        assert index.positions("alice") == {(TOPIC, 0): 13}
        assert index.positions("bob") == {(TOPIC, 0): 10}
