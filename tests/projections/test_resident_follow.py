"""Resident memories kept current by following the log while another process (the
projector) writes the table: what the follower folds is searchable at once, a user loaded
from a table that lags the log still gets what the follower saw, an erasure lets the user go,
and until the follower has caught up (or once it lost the broker) searches read the table."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_memory_index_contract import ALICE, at, batch, change, memory

from memstream.models.events.memory import MemoriesRetrieved, MemoryAdded, RetrievedMemory
from memstream.models.topics import user_partition
from memstream.models.vectors import pack_vector
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import (
    MemoryProjection,
    PartitionedMemories,
    ProjectionStore,
    SourcePosition,
)
from memstream.projections.resident import ResidentMemories

BIG = 1 << 30
TOPIC = "memstream.memories"


@pytest.fixture(scope="module")
def embedder() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder()


def carried(event: MemoryAdded, embedder: MiniLMOnnxEmbedder) -> MemoryAdded:
    """``event`` with its vector, as the decisions agent publishes it."""
    vector = embedder.embed([event.content])[0]
    return event.model_copy(
        update={"vector": pack_vector(list(map(float, vector))), "embedding_model": embedder.model_id}
    )


@pytest.fixture
def projector(tmp_path: Path, embedder: MiniLMOnnxEmbedder) -> MemoryProjection:
    """The table the projector of another process writes."""
    table = MemoryProjection(tmp_path / "memories", embedder)
    table.apply(batch(*(carried(e, embedder) for e in ALICE)))
    return table


@pytest.fixture
def resident(projector: MemoryProjection) -> ResidentMemories:
    """The service's resident memories over the same table, following from its positions."""
    held = ResidentMemories(projector, budget_bytes=BIG)
    held.start_following(projector.positions())
    held.set_live(True)
    return held


def ids(hits: list) -> list[str]:
    return [hit.memory_id for hit in hits]


def test_a_followed_memory_is_searchable_before_the_table_has_it(
    projector: MemoryProjection, resident: ResidentMemories, embedder: MiniLMOnnxEmbedder
) -> None:
    assert ids(resident.search("alice", "where does Alice live", limit=1)) == ["a-porto"]
    moved = carried(memory("a-lisbon", "Alice moved to Lisbon", minutes=5), embedder)
    followed = batch(moved, change("superseded", "a-porto", superseded_by="a-lisbon"), first_offset=3)
    resident.follow(followed, [], {(TOPIC, 0): 5})
    hits = resident.search("alice", "where does Alice live", limit=3)
    assert ids(hits)[0] == "a-lisbon"
    assert "a-porto" not in ids(hits)  # superseded: not active any more
    assert projector.get("alice", "a-lisbon") is None  # the table has not applied it yet
    projector.apply(followed)  # once it has, a fresh load answers the same
    again = ResidentMemories(projector, budget_bytes=BIG)
    assert ids(again.search("alice", "where does Alice live", limit=3)) == ids(hits)


def test_a_user_loaded_from_a_table_that_lags_gets_what_the_follower_saw(
    projector: MemoryProjection, resident: ResidentMemories, embedder: MiniLMOnnxEmbedder
) -> None:
    moved = carried(memory("a-lisbon", "Alice moved to Lisbon", minutes=5), embedder)
    resident.follow(batch(moved, first_offset=3), [], {(TOPIC, 0): 4})  # nobody resident yet
    assert not resident.holds("alice")
    assert ids(resident.search("alice", "Lisbon", limit=1)) == ["a-lisbon"]
    # and the table's own later copy of the same event changes nothing
    projector.apply(batch(moved, first_offset=3))
    assert ids(resident.search("alice", "Lisbon", limit=1)) == ["a-lisbon"]


def test_retrievals_followed_are_counted_once(
    resident: ResidentMemories, projector: MemoryProjection
) -> None:
    resident.search("alice", "tea", limit=1)
    retrieval = MemoriesRetrieved(
        event_id="r1", user_id="alice", session_id="s1", occurred_at=ALICE[0].occurred_at,
        query="tea", memories=(RetrievedMemory(memory_id="a-tea", score=0.9),),
    )
    position = [(retrieval, SourcePosition("memstream.accesses", 0, 7))]
    resident.follow([], position, {})
    resident.follow([], position, {})  # delivered twice
    assert resident.get("alice", "a-tea").access_count == 1


def test_an_erased_user_is_let_go(resident: ResidentMemories) -> None:
    assert resident.search("alice", "tea", limit=1)
    resident.forget_user("alice")
    assert not resident.holds("alice")


def test_positions_of_a_resident_user_wait_for_the_follower(
    projector: MemoryProjection, resident: ResidentMemories
) -> None:
    resident.search("alice", "tea", limit=1)
    table = projector.positions("alice")
    assert resident.positions("alice") == table
    resident.start_following({(TOPIC, 0): 1})  # the follower is behind the table
    assert resident.positions("alice") == {(TOPIC, 0): 1}
    assert resident.positions("bob") == projector.positions("bob")  # not resident: the table's


def test_until_the_follower_is_live_searches_read_the_table(
    projector: MemoryProjection, resident: ResidentMemories, embedder: MiniLMOnnxEmbedder
) -> None:
    resident.search("alice", "tea", limit=1)
    resident.set_live(False)
    assert not resident.holds("alice")
    moved = carried(memory("a-lisbon", "Alice moved to Lisbon", minutes=5), embedder)
    resident.follow(batch(moved, first_offset=3), [], {(TOPIC, 0): 4})
    # served by the table, which has not applied it: nothing of it yet, and nothing held
    assert "a-lisbon" not in ids(resident.search("alice", "Lisbon", limit=3))
    assert not resident.holds("alice")


def test_a_followed_memory_without_a_vector_sends_the_user_to_the_table(
    projector: MemoryProjection, resident: ResidentMemories
) -> None:
    resident.search("alice", "tea", limit=1)
    bare = memory("a-cat", "Alice has a cat named Miso", minutes=6)  # a raw producer's
    resident.follow(batch(bare, first_offset=3), [], {(TOPIC, 0): 4})
    assert not resident.holds("alice")
    assert "a-cat" not in ids(resident.search("alice", "cat", limit=3))  # the table lags
    assert not resident.holds("alice")  # and it stays on the table until it has it
    projector.apply(batch(bare, first_offset=3))
    assert ids(resident.search("alice", "cat Miso", limit=1)) == ["a-cat"]
    assert resident.holds("alice")


def test_a_replays_swap_sends_every_user_to_the_new_table(
    tmp_path: Path, embedder: MiniLMOnnxEmbedder
) -> None:
    store = ProjectionStore.of(tmp_path / "lancedb")
    live = PartitionedMemories(store, embedder, partitions=2)
    part = user_partition("alice", 2)
    live.apply([(carried(e, embedder), at(i, part)) for i, e in enumerate(ALICE)])
    reader = PartitionedMemories(store, embedder, partitions=2, owned=frozenset())
    resident = ResidentMemories(reader, budget_bytes=BIG)
    assert ids(resident.search("alice", "where does Alice live", limit=1)) == ["a-porto"]
    # A re-extraction built another projection of the same log and swapped it in.
    shadow = PartitionedMemories(store, embedder, partitions=2, base="memories-shadow")
    moved = carried(memory("a-lisbon", "Alice lives in Lisbon", minutes=5), embedder)
    shadow.apply([(moved, at(0, part))])
    store.swap_in("memories", "memories-shadow")
    assert ids(resident.search("alice", "where does Alice live", limit=3)) == ["a-lisbon"]
