"""Search latency of the memory projection on an object store against a local directory.

The same 1,000 memories of one user (real texts and vectors from ``memory_tables.py``'s pool,
carried in the events, so nothing is embedded twice) are projected through
``PartitionedMemories.apply`` into a local directory and into ``s3://`` on moto's S3 server,
run here in a child process (``tests/s3.py``); the indexes are refreshed as the projector
does. Then each store answers the same questions (``PartitionedMemories.search``, the query
embedded each time, as in production) from a reader of its own, opened as the service opens
it (``memstream serve``: ``memory_store_read_lag_s``, 2 s or 0); p50, p95 and the store's
requests per search are printed.

moto is a Python server on this machine: it adds no network, but far more work per request
than a real store's front end. The figure says what the object-store path costs in requests,
not what AWS S3 would answer in.

Run from the repository root::

    python benchmarks/store_search.py                    # 1,000 memories, 300 searches
    python benchmarks/store_search.py --memories 5000 --queries 500
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from memory_tables import NOW, asks, build_pool, user_id

from memstream.models.events.memory import MemoryAdded
from memstream.models.vectors import pack_vector
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import PartitionedMemories, ProjectionStore, SourcePosition

# The moto launcher the tests use.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from s3 import s3_server

PARTITIONS = 4
WRITE_BATCH = 256  # the projector's batch (projection_batch_size)


def events(
    memories: int, seed: int, model_id: str
) -> list[tuple[MemoryAdded, SourcePosition]]:
    """``memories`` memories of one user, each with its vector (of ``model_id``), at
    consecutive offsets."""
    pool = build_pool(memories, seed)
    user = user_id(0)
    found = []
    for i in range(len(pool.texts)):
        event = MemoryAdded(
            event_id=f"e{i}", user_id=user, session_id=f"s{i // 20}", memory_id=f"m{i:06d}",
            occurred_at=NOW, extractor="bench/1", memory_type=pool.types[i].as_py(),
            content=pool.texts[i].as_py(), importance=float(pool.importance[i]),
            extraction_event_id=f"x{i}", vector=pack_vector(pool.vectors[i].tolist()),
            embedding_model=model_id,
        )
        found.append((event, SourcePosition("memstream.memories", 0, i)))
    return found


def measure(
    store: ProjectionStore,
    batch: list[tuple[MemoryAdded, SourcePosition]],
    questions: list[tuple[str, str]],
    embedder: MiniLMOnnxEmbedder,
    requests: Callable[[], int] | None = None,
) -> dict[str, float]:
    """Project ``batch`` into ``store``, then time each question from a separate reader
    (and count the store's requests they made, with ``requests``: the count so far)."""
    writer = PartitionedMemories(store, embedder, partitions=PARTITIONS)
    started = time.perf_counter()
    for start in range(0, len(batch), WRITE_BATCH):
        writer.apply(batch[start : start + WRITE_BATCH])
    writer.refresh_indexes()
    written_s = time.perf_counter() - started
    # The service's reader (Container.memory_projection): on an object store it looks up a
    # table's newest version at most every memory_store_read_lag_s.
    reader = PartitionedMemories(
        store, embedder, partitions=PARTITIONS, owned=frozenset(), **store.reader_options()
    )
    for user, question in questions[:10]:  # warm: open the table, load the indexes
        reader.search(user, question)
    samples = []
    before = requests() if requests else 0
    for user, question in questions:
        started = time.perf_counter()
        hits = reader.search(user, question)
        samples.append((time.perf_counter() - started) * 1000)
        assert hits, "a search found nothing"
    made = (requests() - before) / len(questions) if requests else float("nan")
    return {
        "requests": made,
        "write_s": written_s,
        "p50_ms": float(np.percentile(samples, 50)),
        "p95_ms": float(np.percentile(samples, 95)),
    }


def main() -> None:
    """Run the comparison and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    embedder = MiniLMOnnxEmbedder(threads=1)
    batch = events(args.memories, args.seed, embedder.model_id)
    questions = asks(1, args.queries, args.seed)
    with tempfile.TemporaryDirectory() as tmp, s3_server(Path(tmp) / "moto.log") as s3:
        log = Path(tmp) / "moto.log"

        def moto_requests() -> int:
            return sum(1 for line in log.open(errors="replace") if "HTTP/1.1" in line)

        stores = {
            "local directory": ProjectionStore.of(Path(tmp) / "lancedb"),
            "s3:// on moto, read lag 2 s (the default)": s3.store(
                f"s3://{s3.bucket()}/m", pointer_check_s=2.0
            ),
            "s3:// on moto, read lag 0 (always current)": s3.store(
                f"s3://{s3.bucket()}/m", pointer_check_s=0.0
            ),
        }
        print(f"{len(batch):,} memories of one user, {len(questions)} searches (limit 10)\n")
        print(f"{'store':<42} {'write+index s':>13} {'p50 ms':>8} {'p95 ms':>8} "
              f"{'requests/search':>15}")
        for name, store in stores.items():
            figures = measure(
                store, batch, questions, embedder, None if store.is_local else moto_requests
            )
            print(f"{name:<42} {figures['write_s']:>13.2f} {figures['p50_ms']:>8.1f} "
                  f"{figures['p95_ms']:>8.1f} {figures['requests']:>15.1f}", flush=True)


if __name__ == "__main__":
    main()
