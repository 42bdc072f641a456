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
   with one ``create_table`` call plus the same indexes: the floor LanceDB sets.

Figures are memories per second (rows of the projection / wall time). The goal from the
issue: replay ≥ 0.5× the raw bulk load.

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
from datetime import UTC, datetime, timedelta
from pathlib import Path

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
) -> tuple[float, PartitionedMemories]:
    started = time.perf_counter()
    projection, _, _ = asyncio.run(rebuild_memories(settings, table, bulk=bulk))
    return time.perf_counter() - started, projection


def raw_bulk_load(projection: PartitionedMemories, db_dir: Path) -> float:
    """Write the projection's rows (every partition's) with one create_table and build the
    same indexes."""
    tables = [projection.table(p) for p in range(projection.partitions)]
    rows = pa.concat_tables([t._open().to_arrow() for t in tables if t.exists()])
    db = lancedb.connect(db_dir)
    started = time.perf_counter()
    db.create_table("raw", rows)
    raw = MemoryProjection(db_dir, projection.embedder, "raw")
    raw._refreshed_version = None
    raw.refresh_indexes()
    return time.perf_counter() - started


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
            merges_s, live = timed_rebuild(settings, "memories", bulk=False)
            rows = live.count()
            replay_s, rebuilt = timed_rebuild(settings, "replay")
            assert rebuilt.vectors_embedded == 0, rebuilt.vectors_embedded
            assert memories_fingerprint(rebuilt) == memories_fingerprint(live)
            cold_s = None
            if not args.no_cold:
                bare = [e.model_copy(update={"vector": None, "embedding_model": None})
                        if isinstance(e, MemoryAdded) else e for e in events]
                cold_s, cold = timed_rebuild(log_of("bare", bare), "memories")
                assert cold.vectors_embedded == rows, (cold.vectors_embedded, rows)
            raw_s = raw_bulk_load(rebuilt, base / "raw")
        finally:
            if broker is not None:
                broker.stop()
    del embedder
    print()
    print(f"| {rows:,} memories ({len(events) + len(accesses):,} events) | seconds | memories/s | vs raw |")
    print("|---|---|---|---|")
    print(f"| raw LanceDB bulk load (create_table + indexes) | {raw_s:.2f} | {rows / raw_s:,.0f} | 1.00× |")
    print(f"| replay, bulk (vectors from the events) | {replay_s:.2f} | {rows / replay_s:,.0f} | "
          f"{raw_s / replay_s:.2f}× |")
    print(f"| replay through merges (a resumed replay's path) | {merges_s:.2f} | "
          f"{rows / merges_s:,.0f} | {raw_s / merges_s:.2f}× |")
    if cold_s is not None:
        print(f"| replay, events without vectors (every memory embedded) | {cold_s:.2f} | "
              f"{rows / cold_s:,.0f} | "
              f"{raw_s / cold_s:.2f}× |")
    print(f"\ngoal: replay ≥ {GOAL}× the raw bulk load; "
          f"{'met' if raw_s / replay_s >= GOAL else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
