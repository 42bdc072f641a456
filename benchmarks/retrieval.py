"""Retrieval latency: ``MemoryProjection.search`` and ``Retriever.retrieve`` at 10k-1M memories.

Each size is a fresh LanceDB table with 10,000 memories per user (10k memories = 1 user,
100k = 10 users, 1M = 100 users), so every query is prefiltered to 1 % or more of the table.

The table is built in bulk (``memory_tables.py``: a pool of real texts embedded once,
perturbed vectors, the projection's schema, the worker's full-text and scalar indexes; no ANN
index: the vector leg of a search compares the user's rows exactly).

Queries are questions from templates, embedded at query time (the embedder's time is part of
both figures, as in production), for a random user. The goal from the issue: p95 at most
20 ms at 1M memories on 2 cores.

Run from the repository root::

    python benchmarks/retrieval.py                         # 10k, 100k, 1M (about 15-30 min)
    python benchmarks/retrieval.py --sizes 10000,100000    # a quicker look
    python benchmarks/retrieval.py --queries 500 --keep    # more queries, keep the tables
    python benchmarks/retrieval.py --scalar-indexes        # also with user_key/status/type
                                                           # scalar indexes

The tables live in a temporary directory (``--dir`` to choose its parent) removed at the
end unless ``--keep``; disk use is printed before and after each size.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import lancedb
import numpy as np
from lancedb.index import Bitmap, BTree
from memory_tables import MEMORIES_PER_USER, NOW, Pool, asks, build_pool, write_table

from memstream.models.settings import Settings
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import MemoryProjection
from memstream.projections.resident import ResidentMemories
from memstream.projections.retrieval import Retriever

GOAL_P95_MS = 20.0


# --- measuring ---------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linear interpolation."""
    return float(np.percentile(np.asarray(values), q))


def timed(call: Callable[[], object], times: int) -> list[float]:
    """Milliseconds of each of ``times`` calls."""
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def disk_free(path: Path) -> str:
    """``df -h`` of the file system holding ``path``: the line of figures."""
    out = subprocess.run(["df", "-h", str(path)], capture_output=True, text=True, check=False)
    return out.stdout.strip().splitlines()[-1] if out.stdout else "?"


def directory_size(path: Path) -> int:
    """Bytes under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


@dataclass
class Row:
    """One line of the result table."""

    size: int
    users: int
    variant: str
    write_s: float
    index_s: float
    disk_mb: float
    search_ms: list[float]
    retrieve_ms: list[float]
    embed_ms: list[float]
    #: Retriever.search(limit=SEARCH_LIMIT): what MemoryClient.search answers with.
    client_ms: list[float]
    #: The same Retriever.search over ResidentMemories (each user loaded before timing).
    resident_ms: list[float]


def measure_size(
    size: int,
    pool: Pool,
    base: Path,
    queries: int,
    seed: int,
    embedder: MiniLMOnnxEmbedder,
    *,
    scalar_indexes: bool = False,
    resident_budget: int = 2 << 30,
) -> list[Row]:
    """Build a table of ``size`` memories, index it, and time searches and retrievals.

    With ``scalar_indexes``, the same queries are timed again after adding the scalar
    indexes the projection does not build today (BTREE on ``user_key``, BITMAP on
    ``status`` and ``memory_type``): what every prefiltered query scans otherwise.
    """
    users = max(1, size // MEMORIES_PER_USER)
    db_dir = base / f"size-{size}"
    np_rng = np.random.default_rng(seed + size)
    print(f"[{size:,}] building {users} user(s) under {db_dir.name}; df: {disk_free(base)}",
          flush=True)

    write_s = write_table(
        db_dir, pool, embedder.model_id, users, np_rng,
        progress=lambda line: print(f"[{size:,}]   {line}", flush=True),
    )
    gc.collect()

    projection = MemoryProjection(db_dir, embedder)
    assert projection.count() == users * MEMORIES_PER_USER
    started = time.perf_counter()
    projection.refresh_indexes()
    index_s = time.perf_counter() - started
    print(f"[{size:,}]   indexes built in {index_s:.1f} s", flush=True)

    questions = asks(users, queries, seed)
    search_ms, retrieve_ms, embed_ms, client_ms, resident_ms = time_queries(
        projection, embedder, questions, resident_budget
    )
    disk_mb = directory_size(db_dir) / 1e6
    print(f"[{size:,}]   table {disk_mb:,.0f} MB on disk; df: {disk_free(base)}", flush=True)
    rows = [
        Row(size, users, "", write_s, index_s, disk_mb, search_ms, retrieve_ms, embed_ms,
            client_ms, resident_ms)
    ]
    if scalar_indexes:
        table = lancedb.connect(db_dir).open_table("memories")
        started = time.perf_counter()
        table.create_index("user_key", config=BTree())
        table.create_index("status", config=Bitmap())
        table.create_index("memory_type", config=Bitmap())
        scalar_s = time.perf_counter() - started
        print(f"[{size:,}]   scalar indexes built in {scalar_s:.1f} s", flush=True)
        projection = MemoryProjection(db_dir, embedder)
        search_ms, retrieve_ms, embed_ms, client_ms, resident_ms = time_queries(
            projection, embedder, questions, resident_budget
        )
        rows.append(
            Row(size, users, "+scalar", write_s, index_s + scalar_s, disk_mb, search_ms,
                retrieve_ms, embed_ms, client_ms, resident_ms)
        )
    return rows


#: The client's search asks for this many memories (a typical ``limit``).
SEARCH_LIMIT = 10


def time_queries(
    projection: MemoryProjection,
    embedder: MiniLMOnnxEmbedder,
    asks: list[tuple[str, str]],
    resident_budget: int,
) -> tuple[list[float], list[float], list[float], list[float], list[float]]:
    """Milliseconds of ``search``, ``retrieve``, the query embedding, the client's search
    (``Retriever.search``) and the client's search over resident memories for each ask."""
    queries = len(asks)
    retriever = Retriever(projection, Settings(), clock=lambda: NOW)
    limit = SEARCH_LIMIT
    # No query cache: every call embeds its query, as the others do.
    resident = ResidentMemories(projection, budget_bytes=resident_budget, query_cache=0)
    resident_retriever = Retriever(resident, Settings(), clock=lambda: NOW)
    started = time.perf_counter()
    for user_id in sorted({u for u, _ in asks}):  # each user's first touch, timed apart
        resident.search(user_id, "hello", limit=1)
    load_s = time.perf_counter() - started
    print(f"  resident: {resident.loads} users loaded in {load_s:.1f} s, "
          f"{resident.held_bytes / 1e6:,.0f} MB held", flush=True)
    for user_id, question in asks[:10]:  # warm the caches and the index files
        projection.search(user_id, question, limit=limit)
        retriever.retrieve(user_id, question)
        retriever.search(user_id, question, limit=limit)
    found = [len(projection.search(u, q, limit=limit)) for u, q in asks[:20]]
    assert min(found) > 0, "a search found nothing: the table is not what it should be"

    questions = iter(asks * 3)
    embed_ms = timed(lambda: embedder.embed([next(questions)[1]]), queries)
    # The three calls of each ask run back to back, in an order that turns with each ask, so
    # no call gains or loses from when it runs (caches, a background compaction, GC).
    calls = {
        "search": lambda u, q: projection.search(u, q, limit=limit),
        "retrieve": lambda u, q: retriever.retrieve(u, q),
        "client": lambda u, q: retriever.search(u, q, limit=limit),
        "resident": lambda u, q: resident_retriever.search(u, q, limit=limit),
    }
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for index, (user_id, question) in enumerate(asks):
        turn = index % len(names)
        for name in names[turn:] + names[:turn]:
            started = time.perf_counter()
            calls[name](user_id, question)
            samples[name].append((time.perf_counter() - started) * 1000)
    return (
        samples["search"], samples["retrieve"], embed_ms, samples["client"], samples["resident"]
    )


def print_table(rows: list[Row], pool_size: int, queries: int) -> None:
    """The result table and the notes under it."""
    header = (
        f"{'memories':>10} {'':<8} {'users':>6} {'build s':>8} {'(index s)':>9} {'disk MB':>8} "
        f"{'search p50':>10} {'p95 ms':>7} {'client p50':>10} {'p95 ms':>7} "
        f"{'retrieve p50':>12} {'p95 ms':>7} {'resident p50':>12} {'p95 ms':>7}"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r.size:>10,} {r.variant:<8} {r.users:>6} {r.write_s + r.index_s:>8.1f} {r.index_s:>9.1f} "
            f"{r.disk_mb:>8,.0f} {percentile(r.search_ms, 50):>10.1f} "
            f"{percentile(r.search_ms, 95):>7.1f} {percentile(r.client_ms, 50):>10.1f} "
            f"{percentile(r.client_ms, 95):>7.1f} {percentile(r.retrieve_ms, 50):>12.1f} "
            f"{percentile(r.retrieve_ms, 95):>7.1f} {percentile(r.resident_ms, 50):>12.1f} "
            f"{percentile(r.resident_ms, 95):>7.1f}"
        )
    print()
    embed = [ms for r in rows for ms in r.embed_ms]
    print(f"- {queries} queries per size, random user and question; {pool_size:,} distinct "
          "texts embedded once, vectors reused with noise (cosine ~0.9 to their text).")
    print(f"- Both figures include embedding the query: alone it takes p50 "
          f"{statistics.median(embed):.1f} ms, p95 {percentile(embed, 95):.1f} ms (1 thread).")
    print(f"- search = MemoryProjection.search(limit={SEARCH_LIMIT}: vector and full-text legs,"
          " each memory scored by cosine and BM25); client = Retriever.search, what"
          " MemoryClient.search answers with (that search, ranked); retrieve ="
          " Retriever.retrieve (a prompt context: quotas, budget, access event); resident ="
          " Retriever.search over ResidentMemories (users in memory, loaded before timing).")
    print("- build = bulk write (pyarrow, 100k-row adds) + refresh_indexes() (FTS, scalar indexes,"
          " optimize; no ANN index).")
    if any(r.variant for r in rows):
        print("- +scalar: the same table and queries after adding BTREE(user_key), "
              "BITMAP(status), BITMAP(memory_type); build s then includes them.")
    largest = max(r.size for r in rows)
    for r in rows:
        if r.size == largest:
            p95 = percentile(r.client_ms, 95)
            verdict = "met" if p95 <= GOAL_P95_MS else "NOT met"
            print(f"- Goal: client search p95 <= {GOAL_P95_MS:.0f} ms at 1M memories on 2 cores. "
                  f"{r.size:,} {r.variant or 'as built'}: p95 {p95:.1f} ms ({verdict}"
                  f"{'' if r.size >= 1_000_000 else '; 1M not measured'}).")


def main(argv: list[str] | None = None) -> int:
    """Parse options, run every size, print the table, delete the data."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000",
                        help="comma-separated table sizes (multiples of 10,000)")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per size")
    parser.add_argument("--pool", type=int, default=3000, help="distinct texts embedded")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temporary data")
    parser.add_argument("--keep", action="store_true", help="keep the tables")
    parser.add_argument("--scalar-indexes", action="store_true",
                        help="also time each size with scalar indexes on user_key, status and "
                             "memory_type (which the projection does not build today)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if any(s <= 0 or s % MEMORIES_PER_USER for s in sizes):
        parser.error(f"sizes must be positive multiples of {MEMORIES_PER_USER:,}")

    base = Path(tempfile.mkdtemp(prefix="memstream-retrieval-bench-", dir=args.dir))
    print(f"data in {base.name} (temporary); df before: {disk_free(base)}", flush=True)
    rows: list[Row] = []
    try:
        started = time.perf_counter()
        pool = build_pool(args.pool, args.seed)
        print(f"pool: {len(pool.texts):,} texts embedded in {time.perf_counter() - started:.1f} s",
              flush=True)
        embedder = MiniLMOnnxEmbedder(threads=1)  # what a worker gives the query path
        for size in sizes:
            try:
                rows += measure_size(
                    size, pool, base, args.queries, args.seed, embedder,
                    scalar_indexes=args.scalar_indexes,
                )
            except MemoryError:
                print(f"[{size:,}] out of memory; the sizes measured so far follow", flush=True)
                break
            if not args.keep:
                shutil.rmtree(base / f"size-{size}", ignore_errors=True)
    except KeyboardInterrupt:
        print("interrupted; the sizes measured so far follow", flush=True)
    finally:
        if rows:
            print_table(rows, args.pool, args.queries)
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
            print(f"temporary data deleted; df after: {disk_free(Path(tempfile.gettempdir()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
