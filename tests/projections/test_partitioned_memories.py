"""The memory projection as one table per topic partition: each user's events go to the
table of the partition they came from (the user's), reads of a user open that table only,
and what a projection scans is the partitions it owns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import lancedb
import pytest
from fakes import FakeEmbedder

from memstream.models.events.memory import MemoryAdded, MemoryDeleted
from memstream.models.topics import user_partition
from memstream.models.vectors import pack_vector
from memstream.projections.memories import (
    MemoryProjection,
    PartitionedMemories,
    SourcePosition,
    partition_table,
)

TOPIC = "memstream.memories"
T0 = datetime(2026, 11, 2, 9, tzinfo=UTC)
PARTITIONS = 4
#: Users on three different partitions (worked out below).
USERS = [f"user-{i}" for i in range(40)]


def spread_users() -> dict[int, str]:
    """One user per partition, the first found."""
    found: dict[int, str] = {}
    for user in USERS:
        found.setdefault(user_partition(user, PARTITIONS), user)
    assert len(found) == PARTITIONS
    return found


def added(user: str, memory_id: str, content: str, minutes: int = 0) -> MemoryAdded:
    return MemoryAdded(
        event_id=f"evt-{memory_id}", user_id=user, session_id="s", memory_id=memory_id,
        occurred_at=T0 + timedelta(minutes=minutes), extractor="test/1", memory_type="fact",
        content=content, importance=0.5, extraction_event_id="x",
    )


def at(user: str, offset: int) -> SourcePosition:
    """Where the producer's partitioner puts the user's event."""
    return SourcePosition(TOPIC, user_partition(user, PARTITIONS), offset)


@pytest.fixture
def memories(tmp_path: Path) -> PartitionedMemories:
    return PartitionedMemories(tmp_path / "lancedb", FakeEmbedder(), partitions=PARTITIONS)


def test_each_partition_has_its_own_table_and_reads_open_the_users(
    memories: PartitionedMemories, tmp_path: Path
) -> None:
    users = spread_users()
    batch = [
        (added(user, f"m-{p}", f"{user} lives in city number {p}"), at(user, 10 + p))
        for p, user in users.items()
    ]
    assert memories.apply(batch) == PARTITIONS
    tables = set(lancedb.connect(tmp_path / "lancedb").list_tables().tables)
    assert tables == {partition_table("memories", p) for p in range(PARTITIONS)}
    for p, user in users.items():
        assert [m.memory_id for m in memories.list_memories(user)] == [f"m-{p}"]
        assert memories.search(user, "lives in city", limit=5)[0].memory_id == f"m-{p}"
        assert memories.get(user, f"m-{(p + 1) % PARTITIONS}") is None  # another's
        assert memories.table(p).count() == 1
    assert memories.positions() == {(TOPIC, p): 11 + p for p in range(PARTITIONS)}
    assert memories.count() == PARTITIONS


def test_a_projection_scans_the_partitions_it_owns_and_writes_where_events_came_from(
    tmp_path: Path,
) -> None:
    users = spread_users()
    embedder = FakeEmbedder()
    mine = PartitionedMemories(tmp_path, embedder, partitions=PARTITIONS, owned={0, 1})
    mine.apply([(added(user, f"m-{p}", "likes tea"), at(user, p)) for p, user in users.items()])
    assert set(mine.positions()) == {(TOPIC, 0), (TOPIC, 1)}
    assert {row["memory_id"] for row in mine.view_rows(["memory_id"])} == {"m-0", "m-1"}
    everyone = PartitionedMemories(tmp_path, embedder, partitions=PARTITIONS)
    assert everyone.count() == PARTITIONS
    # An erasure goes to the user's table, whoever owns it.
    user = users[3]
    mine.apply([(MemoryDeleted(event_id="d", user_id=user, session_id="s", occurred_at=T0,
                               memory_id="m-3"), at(user, 99))])
    assert mine.erase_user(user) == 1 and everyone.count() == PARTITIONS - 1


def test_tables_from_before_partitioning_give_their_vectors(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    user = spread_users()[2]
    old = MemoryProjection(tmp_path, embedder)  # one table of every partition
    old.apply([(added(user, "m-old", "Ann keeps bees in Tromso"), at(user, 0))])
    embedder.calls.clear()
    rebuilt = PartitionedMemories(tmp_path, embedder, partitions=PARTITIONS)
    rebuilt.vector_donor = old
    rebuilt.apply([(added(user, "m-old", "Ann keeps bees in Tromso"), at(user, 0))])
    assert embedder.calls == [] and rebuilt.vectors_embedded == 0
    assert rebuilt.list_memories(user)[0].memory_id == "m-old"


def test_a_carried_vector_skips_the_embedder_in_every_partition(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    memories = PartitionedMemories(tmp_path, embedder, partitions=PARTITIONS)
    batch = []
    for p, user in spread_users().items():
        event = added(user, f"m-{p}", f"note {p}")
        vector = embedder.embed([event.content])[0]
        batch.append((event.model_copy(update={
            "vector": pack_vector(vector.tolist()), "embedding_model": embedder.model_id,
        }), at(user, p)))
    embedder.calls.clear()
    assert memories.apply(batch) == PARTITIONS and embedder.calls == []


def test_a_partition_outside_the_topics_is_refused(memories: PartitionedMemories) -> None:
    with pytest.raises(ValueError):
        memories.table(PARTITIONS)
