"""Replay throughput: rebuilding the memory projection from the log against a raw bulk load.

The script starts its own embedded broker (or uses ``--broker``), publishes a memories log
(``--memories`` additions over ``--users`` users, with reinforcements, supersessions and
deletions for a tenth of them, and retrievals on the accesses topic), builds the live
projection once from it, then measures in the same run:

1. **replay**: ``rebuild_memories`` into a fresh table, as ``memstream replay`` does (read
   both topics, decode, fold changes in memory, one ``create_table`` per partition, build
   the indexes), every memory's vector taken from its event as the decider recorded it
   (schema version 3): nothing is embedded; and the same log through merges, batch by
   batch (the path of a resumed replay, and of the live projector), whose result the bulk
   one must equal (fingerprints compared);
2. **replay, cold**: the live build of the same log's events without their vectors (schema
   version 2, or a model change), so every memory is embedded;
3. **raw bulk load**: the rebuilt table's rows (vectors included) written to a new table
   with one ``create_table`` call plus the same indexes: the floor LanceDB sets; and the
   same rows as one table per partition (what partitioning itself costs).

Figures are memories per second (rows of the projection / wall time), and the CPU seconds of
the process (all threads; the broker runs apart). The goal from the issue: replay ≥ 0.5×
the raw bulk load.

Run from the repository root::

    python benchmarks/replay.py                    # 20,000 memories, about 2 min
    python benchmarks/replay.py --memories 100000  # longer
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import lancedb
import pyarrow as pa
from aiokafka import AIOKafkaProducer

from memstream.models.codec import encode_event
from memstream.models.events.envelope import Event
from memstream.models.events.memory import (
    MemoriesRetrieved,
    MemoryAdded,
    MemoryDeleted,
    MemoryReinforced,
    MemorySuperseded,
    RetrievedMemory,
)
from memstream.models.settings import Settings
from memstream.models.vectors import pack_vector
from memstream.projections.embedder import Embedder, embedder_from_settings
from memstream.projections.memories import MemoryProjection, PartitionedMemories
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.kafka.topics import Topics, ensure_topics
from memstream.streams.operations.replay import memories_fingerprint, rebuild_memories

sys.path.insert(0, str(Path(__file__).parent))
from memory_tables import TEMPLATES

GOAL = 0.5
START = datetime(2026, 1, 1, tzinfo=UTC)


def workload(
    memories: int, users: int, seed: int, embedder: Embedder | None = None
) -> tuple[list[Event], list[Event]]:
    """Memory events and retrieval events of a deterministic workload; with ``embedder``,
    each memory carries a vector as the decider records it (that of its text without the
    note number: the texts' vectors are embedded once per distinct text, for speed)."""
    rng = random.Random(seed)
    vectors: dict[str, str] = {}
    events: list[Event] = []
    accesses: list[Event] = []
    by_user: dict[str, list[str]] = {}
    for i in range(memories):
        user = f"user-{i % users}"
        memory_type, importance, template = rng.choice(TEMPLATES)
        at = START + timedelta(minutes=i)
        memory_id = f"m-{i}"
        common = {"user_id": user, "session_id": f"s-{i // 20}", "occurred_at": at}
        text = template(rng)
        carried: dict[str, str] = {}
        if embedder is not None:
            if text not in vectors:
                vectors[text] = pack_vector(embedder.embed([text])[0].tolist())
            carried = {"vector": vectors[text], "embedding_model": embedder.model_id}
        events.append(
            MemoryAdded(
                event_id=f"add-{i}", memory_id=memory_id, memory_type=memory_type,  # type: ignore[arg-type]
                content=f"{text} (note {i})", importance=importance,
                tier="long_term" if importance >= 0.8 else "short_term",
                extraction_event_id=f"x-{i // 5}", extractor="bench/1", **common, **carried,
            )
        )
        mine = by_user.setdefault(user, [])
        roll = rng.random()
        if mine and roll < 0.04:
            events.append(MemoryReinforced(event_id=f"re-{i}", memory_id=rng.choice(mine),
                                           extraction_event_id=f"x-{i // 5}", similarity=0.95,
                                           **common))
        elif mine and roll < 0.08:
            old = mine.pop(rng.randrange(len(mine)))
            events.append(MemorySuperseded(event_id=f"su-{i}", memory_id=old,
                                           superseded_by=memory_id, reason="bench", similarity=0.8,
                                           **common))
        elif mine and roll < 0.10:
            events.append(MemoryDeleted(event_id=f"de-{i}", memory_id=mine.pop(), **common))
        mine.append(memory_id)
        if mine and rng.random() < 0.25:
            accesses.append(
                MemoriesRetrieved(
                    event_id=f"ac-{i}", query="what do I like?",
                    memories=tuple(RetrievedMemory(memory_id=m, score=0.5)
                                   for m in rng.sample(mine, min(3, len(mine)))),
                    **{**common, "occurred_at": at + timedelta(seconds=30)},
                )
            )
    return events, accesses


async def publish(settings: Settings, topic: str, events: list[Event]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, key=e.user_id.encode(), value=encode_event(e))
                   for e in events]
        for future in futures:
            await future
    finally:
        await producer.stop()


def timed_rebuild(
    settings: Settings, table: str, *, bulk: bool = True
) -> tuple[Timing, PartitionedMemories]:
    started, cpu = time.perf_counter(), time.process_time()
    projection, _, _ = asyncio.run(rebuild_memories(settings, table, bulk=bulk))
    return Timing(time.perf_counter() - started, time.process_time() - cpu), projection


class Timing(NamedTuple):
    """Wall seconds, and CPU seconds of this process (every thread, LanceDB's included): on
    a machine other jobs share, the wall time stretches and the CPU time much less."""

    wall_s: float
    cpu_s: float


def raw_bulk_load(projection: PartitionedMemories, db_dir: Path, *, partitioned: bool = False) -> Timing:
    """Write the projection's rows (every partition's) with one create_table and build the
    same indexes; with ``partitioned``, one table per partition as the projection has them
    (each written and indexed in a thread of its own, as a replay does)."""
    tables = [projection.table(p) for p in range(projection.partitions)]
    parts = [t._open().to_arrow() for t in tables if t.exists()]
    groups = {f"raw-p{i}": rows for i, rows in enumerate(parts)} if partitioned else {
        "raw": pa.concat_tables(parts)
    }
    db = lancedb.connect(db_dir)

    def load(name: str, rows: pa.Table) -> None:
        db.create_table(name, rows)
        raw = MemoryProjection(db_dir, projection.embedder, name)
        raw._refreshed_version = None
        raw.refresh_indexes()

    started, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(len(groups)) as pool:
        list(pool.map(load, groups, groups.values()))
    return Timing(time.perf_counter() - started, time.process_time() - cpu)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--broker", help="use this broker instead of an embedded one")
    parser.add_argument("--no-cold", action="store_true", help="skip the replay that embeds all")
    args = parser.parse_args(argv)
    embedder = embedder_from_settings(Settings())
    events, accesses = workload(args.memories, args.users, args.seed, embedder)
    with tempfile.TemporaryDirectory(prefix="memstream-replay-") as scratch:
        base = Path(scratch)
        broker = None if args.broker else EmbeddedBroker(free_port(), log_dir=base / "broker").start()
        try:
            def log_of(name: str, memory_events: list[Event]) -> Settings:
                settings = Settings(
                    broker=args.broker or broker.address,  # type: ignore[union-attr]
                    data_dir=base / name,
                    topic_prefix=f"bench{name}{int(time.time())}",
                )
                asyncio.run(ensure_topics(settings))
                topics = Topics.from_settings(settings)
                asyncio.run(publish(settings, topics.memories, memory_events))
                asyncio.run(publish(settings, topics.accesses, accesses))
                return settings

            settings = log_of("carried", events)
            print(f"published {len(events):,} memory events (vectors in them) and "
                  f"{len(accesses):,} retrievals", file=sys.stderr)
            # The live projection as the projector builds it: merges, batch by batch.
            merges, live = timed_rebuild(settings, "memories", bulk=False)
            rows = live.count()
            replay, rebuilt = timed_rebuild(settings, "replay")
            assert rebuilt.vectors_embedded == 0, rebuilt.vectors_embedded
            assert memories_fingerprint(rebuilt) == memories_fingerprint(live)
            cold = None
            if not args.no_cold:
                bare = [e.model_copy(update={"vector": None, "embedding_model": None})
                        if isinstance(e, MemoryAdded) else e for e in events]
                cold, embedded = timed_rebuild(log_of("bare", bare), "memories")
                assert embedded.vectors_embedded == rows, (embedded.vectors_embedded, rows)
            raw = raw_bulk_load(rebuilt, base / "raw")
            raw_parts = raw_bulk_load(rebuilt, base / "raw-parts", partitioned=True)
        finally:
            if broker is not None:
                broker.stop()
    del embedder

    def line(what: str, timing: Timing) -> str:
        return (f"| {what} | {timing.wall_s:.2f} | {rows / timing.wall_s:,.0f} | "
                f"{raw.wall_s / timing.wall_s:.2f}× | {timing.cpu_s:.2f} | "
                f"{raw.cpu_s / timing.cpu_s:.2f}× |")

    print()
    print(f"| {rows:,} memories ({len(events) + len(accesses):,} events) | seconds | memories/s "
          "| vs raw | CPU s | vs raw, CPU |")
    print("|---|---|---|---|---|---|")
    print(line("raw LanceDB bulk load (create_table + indexes)", raw))
    print(line(f"raw, one table per partition ({rebuilt.partitions}, a thread each)", raw_parts))
    print(line("replay, bulk (vectors from the events)", replay))
    print(line("replay through merges (a resumed replay's path)", merges))
    if cold is not None:
        print(line("replay, events without vectors (every memory embedded)", cold))
    ratio = raw.wall_s / replay.wall_s
    print(f"\ngoal: replay ≥ {GOAL}× the raw bulk load; {'met' if ratio >= GOAL else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
