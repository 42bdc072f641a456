"""The memory projection on an object store (``s3://``), against moto's S3 server run here and
real LanceDB: the same events give the same projection as in a local directory, another
machine's instance reads every user straight from the store, a replay's swap of the
live-table pointer reaches readers, analytics and erasure read it, and the credentials show
nowhere."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fakes import FakeEmbedder
from hypothesis import given, settings
from hypothesis import strategies as st
from s3 import SECRET_ACCESS_KEY, S3Server, s3_server

from memstream.models.events.memory import (
    MemoriesRetrieved,
    MemoryAdded,
    MemoryChange,
    MemoryDeleted,
    MemoryReinforced,
    MemorySuperseded,
    RetrievedMemory,
)
from memstream.models.settings import Settings
from memstream.models.topics import user_partition
from memstream.projections.analytics import Scope, run_sql
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import (
    PartitionedMemories,
    ProjectionStore,
    SourcePosition,
)
from memstream.streams.operations.erasure import erase_lancedb
from memstream.streams.operations.replay import memories_fingerprint

PARTITIONS = 4
MEMORIES = "memstream.memories"
ACCESSES = "memstream.accesses"
T0 = datetime(2026, 11, 2, 9, tzinfo=UTC)
TOPICS = ["tea", "hiking", "Berlin", "Siemens", "cats", "jazz", "chess", "Oslo", "bread"]


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("moto") / "moto.log") as server:
        yield server


@pytest.fixture
def location(s3: S3Server) -> str:
    return f"s3://{s3.bucket()}/memstream/lancedb"


def history(seed: int, users: int = 8) -> tuple[
    list[tuple[MemoryAdded | MemoryChange, SourcePosition]],
    list[tuple[MemoriesRetrieved, SourcePosition]],
]:
    """A seeded log of several users over every partition: memories, then reinforcements,
    supersessions and deletions of some of them, and retrievals; each event at the next
    offset of its user's partition."""
    rng = random.Random(seed)
    offsets = dict.fromkeys(range(PARTITIONS), 0)

    def at(user: str, topic: str = MEMORIES) -> SourcePosition:
        partition = user_partition(user, PARTITIONS)
        offsets[partition] += 1
        return SourcePosition(topic, partition, offsets[partition])

    names = [f"user-{i}" for i in range(users)]
    assert {user_partition(u, PARTITIONS) for u in names} == set(range(PARTITIONS))
    events: list[tuple[MemoryAdded | MemoryChange, SourcePosition]] = []
    ids: dict[str, list[str]] = {}
    for n in range(60):
        user = rng.choice(names)
        memory_id = f"m{n:03d}"
        ids.setdefault(user, []).append(memory_id)
        events.append((MemoryAdded(
            event_id=f"add-{n}", user_id=user, session_id=f"s{n % 5}", memory_id=memory_id,
            occurred_at=T0 + timedelta(minutes=n), extractor="test/1",
            memory_type=rng.choice(["fact", "preference", "episode"]),
            content=f"{user} talked about {rng.choice(TOPICS)} and {rng.choice(TOPICS)}",
            importance=round(rng.random(), 3), extraction_event_id=f"x{n}",
        ), at(user)))
    for user, mine in ids.items():
        envelope = {"user_id": user, "session_id": "s9", "occurred_at": T0 + timedelta(days=1)}
        events.append((MemoryReinforced(event_id=f"rf-{user}", memory_id=mine[0],
                                        extraction_event_id="x", similarity=0.97, **envelope),
                       at(user)))
        if len(mine) > 2:
            events.append((MemorySuperseded(event_id=f"sp-{user}", memory_id=mine[1],
                                            superseded_by=mine[2], reason="newer",
                                            similarity=0.8, **envelope), at(user)))
            events.append((MemoryDeleted(event_id=f"del-{user}", memory_id=mine[-1],
                                         **envelope), at(user)))
    accesses = [
        (MemoriesRetrieved(
            event_id=f"ret-{user}", user_id=user, session_id="s", occurred_at=T0,
            query="what do I like", memories=tuple(RetrievedMemory(memory_id=m, score=1.0)
                                                   for m in mine[:2]),
        ), at(user, ACCESSES))
        for user, mine in ids.items()
    ]
    return events, accesses


def answers(memories: PartitionedMemories, users: list[str]) -> dict[str, object]:
    """What a user would be told: searches, every memory with its status, and a get."""
    told: dict[str, object] = {}
    for user in users:
        listed = memories.list_memories(user, include_inactive=True)
        told[user] = (
            [(h.memory_id, round(h.score, 5)) for h in memories.search(user, "tea and jazz")],
            [(r.memory_id, r.status, r.reinforcement_count, r.access_count) for r in listed],
            memories.get(user, listed[0].memory_id) if listed else None,
        )
    return told


def test_the_same_events_make_the_same_projection_on_s3_as_in_a_directory(
    s3: S3Server, location: str, tmp_path: Path
) -> None:
    events, accesses = history(seed=7)
    users = sorted({e.user_id for e, _ in events})
    embedder = FakeEmbedder()
    local = PartitionedMemories(tmp_path / "lancedb", embedder, partitions=PARTITIONS)
    shared = PartitionedMemories(s3.store(location), embedder, partitions=PARTITIONS)
    for projection in (local, shared):
        # Two batches: the second changes rows the first wrote.
        assert projection.apply(events[:40]) == 40
        projection.apply(events[40:])
        projection.apply_accesses(accesses)
        projection.refresh_indexes()
    assert memories_fingerprint(shared) == memories_fingerprint(local)
    assert answers(shared, users) == answers(local, users)
    assert shared.positions() == local.positions()
    # Applying the log again changes nothing (the rows record their offsets).
    shared.apply(events)
    assert memories_fingerprint(shared) == memories_fingerprint(local)
    # An erasure reaches the store too.
    assert shared.erase_user(users[0]) == local.erase_user(users[0]) > 0
    assert shared.list_memories(users[0], include_inactive=True) == []
    assert memories_fingerprint(shared) == memories_fingerprint(local)


def test_another_machine_reads_every_user_straight_from_the_store(
    s3: S3Server, location: str
) -> None:
    events, _ = history(seed=11)
    users = sorted({e.user_id for e, _ in events})
    writer = PartitionedMemories(s3.store(location), FakeEmbedder(), partitions=PARTITIONS)
    writer.apply(events[:30])
    # Another process with its own connection and owning no partition: it scans nothing,
    # and answers any user from the user's table in the store.
    reader = PartitionedMemories(
        s3.store(location), FakeEmbedder(), partitions=PARTITIONS, owned=frozenset()
    )
    assert reader.positions() == {} and reader.count() == 0
    assert answers(reader, users) == answers(writer, users)
    # Later writes of the owner reach the reader's next reads.
    writer.apply(events[30:])
    assert answers(reader, users) == answers(writer, users)
    assert {r.memory_id for u in users for r in reader.list_memories(u, include_inactive=True)} \
        == {e.memory_id for e, _ in events if isinstance(e, MemoryAdded)}


def test_a_replay_swapped_in_on_the_store_reaches_the_readers(
    s3: S3Server, location: str
) -> None:
    events, _ = history(seed=3)
    user = events[0][0].user_id
    embedder = FakeEmbedder()
    store = s3.store(location)
    live = PartitionedMemories(store, embedder, partitions=PARTITIONS)
    live.apply(events[:10])
    reader = PartitionedMemories(store, embedder, partitions=PARTITIONS, owned=frozenset())
    lazy = PartitionedMemories(s3.store(location, pointer_check_s=3600), embedder,
                               partitions=PARTITIONS, owned=frozenset())
    before = [r.memory_id for r in reader.list_memories(user)]
    assert before and [r.memory_id for r in lazy.list_memories(user)] == before

    # A replay: the whole log into a shadow projection, its name kept in memories.REPLAY
    # while it is built, then one PUT of the pointer.
    store.write_text("memories.REPLAY", "memories-shadow\n")
    assert ProjectionStore.of(store).read_text("memories.REPLAY") == "memories-shadow\n"
    shadow = PartitionedMemories(store, embedder, partitions=PARTITIONS, base="memories-shadow")
    shadow.apply(events)
    assert store.swap_in("memories", "memories-shadow") is None
    store.delete("memories.REPLAY")
    assert store.read_text("memories.REPLAY") is None
    assert store.live_name("memories", "memories") == "memories-shadow"

    after = [r.memory_id for r in shadow.list_memories(user)]
    assert after != before
    assert [r.memory_id for r in reader.list_memories(user)] == after
    # A reader told to look at the pointer once an hour goes on with the table it knows.
    assert [r.memory_id for r in lazy.list_memories(user)] == before
    # The next swap names the previous target.
    assert store.swap_in("memories", "memories") == "memories-shadow"


def test_settings_name_the_store_and_analytics_and_erasure_read_it(
    s3: S3Server, location: str, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path / "data", partitions=PARTITIONS, **s3.settings(location))
    store = ProjectionStore.from_settings(settings)
    assert not store.is_local and not store.locks_apply and str(store) == location
    assert not store.exists()
    events, accesses = history(seed=5)
    embedder = embedder_from_settings(settings)  # erasure opens the tables with it
    memories = PartitionedMemories.from_settings(settings, embedder)
    memories.probe(writable=True)
    memories.apply(events)
    memories.apply_accesses(accesses)
    # A replay's shadow projection beside the live one: erasure lists the store's tables.
    shadow = PartitionedMemories.from_settings(settings, embedder, "memories-old")
    shadow.apply(events)
    assert store.exists()
    counted = run_sql(settings, "SELECT count(*) AS n, sum(access_count) AS used FROM memories",
                      Scope(now=T0 + timedelta(days=2)))
    assert counted.to_pylist() == [{"n": memories.count(), "used": 2 * len(accesses)}]

    user = events[0][0].user_id
    held = memories.count(user)
    removed = erase_lancedb(settings, user, skip=None)
    assert sum(removed.values()) == 2 * held > 0
    assert memories.count(user) == shadow.count(user) == 0
    assert memories.count() == shadow.count() > 0  # the others' rows stay
    # Nothing was written to the local data directory.
    assert not settings.lancedb_dir.exists()


def test_the_credentials_show_in_no_repr_and_no_log_line(
    s3: S3Server, location: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(data_dir=tmp_path / "data", **s3.settings(location))
    store = ProjectionStore.from_settings(settings)
    events, _ = history(seed=1)
    with caplog.at_level(logging.DEBUG):
        memories = PartitionedMemories(store, FakeEmbedder(), partitions=PARTITIONS)
        memories.apply(events)
        memories.search(events[0][0].user_id, "tea")
    shown = [repr(settings), str(settings), repr(store), str(store), caplog.text]
    assert not [text for text in shown if SECRET_ACCESS_KEY in text]
    # ... and the store itself still has them.
    assert store.options is not None and store.options.lancedb_options()[
        "aws_secret_access_key"] == SECRET_ACCESS_KEY


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), st.text().map(lambda t: "s3://" + t)))
def test_only_an_s3_uri_names_an_object_store(location: str) -> None:
    try:
        accepted = Settings(memory_store=location)
    except ValueError as exc:
        assert "memory_store" in str(exc)
        return
    store = ProjectionStore.from_settings(accepted)
    if location == "":
        assert store.is_local and store.directory == accepted.lancedb_dir
    else:
        bucket = location.removeprefix("s3://").split("/")[0]
        assert not store.is_local and not store.locks_apply
        assert store.object_path("memories.CURRENT").startswith(bucket + "/")
        assert location.isprintable() and " " not in location
