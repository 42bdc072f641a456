"""A replay's bulk build (the whole log folded in memory, one ``create_table`` per partition)
gives exactly the projection the incremental writer gives (a merge per batch), on random
logs: adds, re-published and re-delivered events, reinforcements, supersessions, deletions,
promotions, expiries, forgetting, retrievals and erasures, memory ids shared across users
and partitions, changes before their memory's add, wherever batches are cut."""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fakes import FakeEmbedder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstream.models.events import memory as ev
from memstream.models.topics import user_partition
from memstream.models.vectors import pack_vector
from memstream.projections.memories import (
    PartitionedMemories,
    SourcePosition,
    memory_schema,
)
from memstream.projections.memories.fold import new_row, rows_table
from memstream.streams.operations.replay import memories_fingerprint

MEMORIES = "memstream.memories"
ACCESSES = "memstream.accesses"
PARTITIONS = 2
USERS = ("ann", "bob", "cy", "dee")
T0 = datetime(2026, 11, 2, 9, tzinfo=UTC)
EMBEDDER = FakeEmbedder(16)
COLUMNS = memory_schema(EMBEDDER.dimensions, EMBEDDER.model_id).names
CONTENTS = ("likes green tea", "lives in Lisbon", "works at a bakery", "has a dog named Rex")


@dataclass(frozen=True)
class Memories:
    """A batch of the memories topic, in log order."""

    items: tuple[tuple[ev.MemoryAdded | ev.MemoryChange, SourcePosition], ...]


@dataclass(frozen=True)
class Accesses:
    """A batch of the accesses topic, in log order."""

    items: tuple[tuple[ev.MemoriesRetrieved, SourcePosition], ...]


@dataclass(frozen=True)
class Erasure:
    user_id: str


Step = Memories | Accesses | Erasure

# One drawn step of the log: what happens, to whom, to which memory (ids shared by users).
user_index = st.integers(0, len(USERS) - 1)
memory_index = st.integers(0, 7)
step_draws = st.one_of(
    st.tuples(st.just("add"), user_index, memory_index, st.sampled_from(("carried", "none", "other"))),
    st.tuples(
        st.sampled_from(("reinforce", "supersede", "delete", "promote", "expire", "forget")),
        user_index,
        memory_index,
    ),
    st.tuples(st.just("republish"), st.integers(0, 10_000)),
    st.tuples(st.just("redeliver"), st.integers(0, 10_000)),
    st.tuples(st.just("retrieve"), user_index, st.lists(memory_index, min_size=1, max_size=3)),
    st.tuples(st.just("erase"), user_index),
)


def build_log(draws: list[tuple[Any, ...]]) -> list[tuple[str, Any]]:
    """The log the draws make: (topic kind, item) in order, offsets counted per partition."""
    next_offset: dict[tuple[str, int], int] = {}
    log: list[tuple[str, Any]] = []
    published: list[tuple[ev.MemoryAdded | ev.MemoryChange, SourcePosition]] = []

    def position(topic: str, user: str) -> SourcePosition:
        key = (topic, user_partition(user, PARTITIONS))
        offset = next_offset.get(key, 0)
        next_offset[key] = offset + 1
        return SourcePosition(topic, key[1], offset, timestamp=T0 + timedelta(seconds=offset))

    for number, draw in enumerate(draws):
        at = T0 + timedelta(minutes=number)
        kind = draw[0]
        if kind in ("republish", "redeliver"):
            if not published:
                continue
            event, old = published[draw[1] % len(published)]
            # Re-published (a worker that crashed after sending): the same event again,
            # later in the log. Re-delivered: the same record, the same offset, again.
            where = position(MEMORIES, event.user_id) if kind == "republish" else old
            log.append(("memories", (event, where)))
            continue
        if kind == "erase":
            log.append(("erase", USERS[draw[1]]))
            continue
        user = USERS[draw[1]]
        common: dict[str, Any] = {"user_id": user, "session_id": f"s-{number % 3}", "occurred_at": at}
        if kind == "retrieve":
            retrieved = tuple(ev.RetrievedMemory(memory_id=f"m-{m}", score=0.5) for m in draw[2])
            event = ev.MemoriesRetrieved(event_id=f"r-{number}", query="what?", memories=retrieved, **common)
            log.append(("accesses", (event, position(ACCESSES, user))))
            continue
        memory_id = f"m-{draw[2]}"
        change: ev.MemoryAdded | ev.MemoryChange
        if kind == "add":
            content = f"{CONTENTS[number % len(CONTENTS)]} ({number})"
            carried: dict[str, Any] = {}
            if draw[3] != "none":
                vector = EMBEDDER.embed([content])[0]
                model = EMBEDDER.model_id if draw[3] == "carried" else "another-model"
                carried = {"vector": pack_vector(vector.tolist()), "embedding_model": model}
            change = ev.MemoryAdded(
                event_id=f"a-{number}", memory_id=memory_id, memory_type="fact", content=content,
                importance=0.5, tier="short_term" if number % 2 else "long_term",
                extraction_event_id=f"x-{number}", extractor="test/1", **common, **carried,
            )
        elif kind == "reinforce":
            change = ev.MemoryReinforced(event_id=f"re-{number}", memory_id=memory_id,
                                      extraction_event_id="x", similarity=0.9, **common)
        elif kind == "supersede":
            change = ev.MemorySuperseded(event_id=f"su-{number}", memory_id=memory_id,
                                      superseded_by=f"m-{number}", reason="newer", similarity=0.8,
                                      **common)
        elif kind == "delete":
            change = ev.MemoryDeleted(event_id=f"de-{number}", memory_id=memory_id, **common)
        elif kind == "promote":
            change = ev.MemoryPromoted(event_id=f"pr-{number}", memory_id=memory_id, reason="used",
                                    **common)
        elif kind == "expire":
            change = ev.MemoryExpired(event_id=f"ex-{number}", memory_id=memory_id, **common)
        else:
            change = ev.MemoryForgotten(event_id=f"fo-{number}", memory_id=memory_id, policy="decay",
                                     score=0.1, threshold=0.2, reason="faded", **common)
        item = (change, position(MEMORIES, user))
        published.append(item)
        log.append(("memories", item))
    return log


def batches(log: list[tuple[str, Any]], cuts: list[int]) -> list[Step]:
    """The log as the projector hands it over: runs of one topic, cut after ``cuts``
    items (drawn sizes, used in turn), erasures in their place."""
    steps: list[Step] = []
    run: list[Any] = []
    kind: str | None = None
    sizes = itertools.cycle(cuts)

    def close() -> None:
        if run:
            steps.append(Memories(tuple(run)) if kind == "memories" else Accesses(tuple(run)))
            run.clear()

    size = next(sizes)
    for what, item in log:
        if what != kind or len(run) >= size:
            close()
            kind = what
            size = next(sizes)
        if what == "erase":
            steps.append(Erasure(item))
            kind = None
        else:
            run.append(item)
    close()
    return steps


def drive(projection: PartitionedMemories, steps: list[Step]) -> None:
    for step in steps:
        if isinstance(step, Memories):
            projection.apply(list(step.items))
        elif isinstance(step, Accesses):
            projection.apply_accesses(list(step.items))
        else:
            projection.erase_user(step.user_id)


def every_row(projection: PartitionedMemories) -> list[dict[str, Any]]:
    return sorted(projection.view_rows(COLUMNS), key=lambda r: (r["source_partition"], r["memory_id"]))


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    draws=st.lists(step_draws, min_size=1, max_size=60),
    incremental_cuts=st.lists(st.integers(1, 12), min_size=1, max_size=5),
    bulk_cuts=st.lists(st.integers(1, 60), min_size=1, max_size=3),
    bulk_max_rows=st.sampled_from((3, 50_000)),
)
def test_a_bulk_build_equals_the_incremental_projection_of_any_log(
    draws: list[tuple[Any, ...]],
    incremental_cuts: list[int],
    bulk_cuts: list[int],
    bulk_max_rows: int,
) -> None:
    log = build_log(draws)
    with tempfile.TemporaryDirectory() as scratch:
        db = Path(scratch)
        incremental = PartitionedMemories(db, EMBEDDER, partitions=PARTITIONS, base="merged")
        drive(incremental, batches(log, incremental_cuts))
        bulk = PartitionedMemories(db, EMBEDDER, partitions=PARTITIONS, base="bulk")
        bulk.stage()
        for partition in range(PARTITIONS):
            # Small: the build writes its table part way and goes on through merges.
            bulk.table(partition).bulk_max_rows = bulk_max_rows
        drive(bulk, batches(log, bulk_cuts))
        bulk.write_staged()

        assert memories_fingerprint(bulk) == memories_fingerprint(incremental)
        # Every column, the vectors and the tracking offsets included (a replay resumes
        # and the live projector carries on from them).
        assert every_row(bulk) == every_row(incremental)
        assert bulk.positions() == incremental.positions()
        assert bulk.access_positions() == incremental.access_positions()
        for user in USERS:
            assert bulk.list_memories(user, include_inactive=True) == incremental.list_memories(
                user, include_inactive=True
            )
        assert bulk.vectors_embedded == incremental.vectors_embedded


def test_a_table_that_exists_is_never_built_in_bulk(tmp_path: Path) -> None:
    projection = PartitionedMemories(tmp_path, EMBEDDER, partitions=PARTITIONS)
    drive(projection, batches(build_log([("add", 0, 1, "carried")]), [1]))
    with pytest.raises(ValueError, match="exists"):
        projection.stage()


def test_a_bulk_build_writes_nothing_until_it_is_written(tmp_path: Path) -> None:
    projection = PartitionedMemories(tmp_path, EMBEDDER, partitions=PARTITIONS)
    projection.stage()
    log = build_log([("add", u, u, "carried") for u in range(len(USERS))])
    drive(projection, batches(log, [2]))
    assert not projection.exists()  # an interrupted build leaves no table to resume from
    assert projection.write_staged() == len(USERS)
    assert projection.count() == len(USERS)
    assert {m.content for u in USERS for m in projection.list_memories(u)} == {
        event.content for _, (event, _) in log
    }


def test_rows_become_the_arrow_table_arrow_itself_builds_from_them() -> None:
    # Both writers build their tables with rows_table: the equality above cannot see a
    # column it got wrong, so it is checked against pyarrow's own row-wise conversion.
    schema = memory_schema(EMBEDDER.dimensions, EMBEDDER.model_id)
    common: dict[str, Any] = {"user_id": "ann", "session_id": "s", "occurred_at": T0}
    plain = ev.MemoryAdded(event_id="a-1", memory_id="m-1", memory_type="fact",
                           content="likes green tea", importance=0.5, extraction_event_id="x", extractor="t/1",
                           entities=("tea",), **common)
    claimed = plain.model_copy(update={
        "event_id": "a-2", "memory_id": "m-2", "content": "lives in Lisbon", "context": "said so",
        "claim": ev.Claim(subject="User", attribute="home", value="Lisbon", valid_from=T0,
                          valid_until=T0 + timedelta(days=3)),
    })
    rows = [new_row(event, SourcePosition(MEMORIES, 0, offset, timestamp=T0), EMBEDDER.model_id)
            for offset, event in enumerate((plain, claimed))]
    rows[1] |= {"status": "superseded", "superseded_by": "m-3", "reinforced_by": ["re-1"],
                "last_accessed_at": T0, "access_count": 2}
    vectors = EMBEDDER.embed([row["search_text"] for row in rows])
    built = rows_table(rows, vectors, schema)
    expected = pa.Table.from_pylist(
        [row | {"vector": vector.tolist()} for row, vector in zip(rows, vectors, strict=True)],
        schema=schema,
    )
    assert built.equals(expected)
    assert rows_table([], vectors[:0], schema).equals(schema.empty_table())
