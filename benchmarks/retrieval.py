"""Retrieval latency: ``MemoryProjection.search`` and ``Retriever.retrieve`` at 10k-1M memories.

Each size is a fresh LanceDB table with 10,000 memories per user (10k memories = 1 user,
100k = 10 users, 1M = 100 users), so every query is prefiltered to 1 % or more of the table;
``--per-user 100`` gives the read model's case instead (1M = 10,000 users of 100 memories).

The table is built in bulk (``memory_tables.py``: a pool of real texts embedded once,
perturbed vectors, the projection's schema, the worker's full-text and scalar indexes; no ANN
index: the vector leg of a search compares the user's rows exactly).

Queries are questions from templates, embedded at query time (the embedder's time is part of
every figure, as in production), for a random user. Beside the projection's search and the
client's, the same queries go to a LanceDB hybrid query written directly ("raw": the query
embedded, ``query_type="hybrid"``, RRF) and to the client's search over
:class:`ResidentMemories` (every user loaded before timing, no query cache). The goals: p95
at most 20 ms at 1M memories on 2 cores (the table), and 12 ms at 1M memories over 10k users
with the users resident (issue 28).

The resident model's memory is measured twice, as the process's resident set (VmRSS):
every user touched once under a budget of a fraction of the data (``--budget-share``,
users evicted least recently used), then every user held at once. Each line states the
process's RSS, its growth over the RSS before any user was loaded, and what the read model
counts (``held_bytes``, which the budget bounds).

Run from the repository root::

    python benchmarks/retrieval.py                         # 10k, 100k, 1M (about 15-30 min)
    python benchmarks/retrieval.py --sizes 10000,100000    # a quicker look
    python benchmarks/retrieval.py --queries 500 --keep    # more queries, keep the tables
    python benchmarks/retrieval.py --scalar-indexes        # also with user_key/status/type
                                                           # scalar indexes
    python benchmarks/retrieval.py --per-user 100 --sizes 100000,1000000   # issue 28

The tables live in a temporary directory (``--dir`` to choose its parent) removed at the
end unless ``--keep``; disk use is printed before and after each size.
"""

from __future__ import annotations

import argparse
import gc
import os
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
from lancedb.rerankers import RRFReranker
from memory_tables import (
    MEMORIES_PER_USER,
    NOW,
    Pool,
    asks,
    build_pool,
    bulk_rows,
    user_id,
    write_table,
)

from memstream.models.settings import Settings
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import MemoryProjection
from memstream.projections.memories.schema import user_key
from memstream.projections.resident import ResidentMemories, ResidentUser
from memstream.projections.retrieval import Retriever

GOAL_P95_MS = 20.0
#: Issue 28: the client's search over resident users, 1M memories over 10k users.
RESIDENT_GOAL_P95_MS = 12.0
#: The settings of the "steps off" column: the resident search without the cross-session
#: recall steps the defaults take (own names, entity expansion, a session cap of 2; docs/search.md).
STEPS_OFF: dict[str, object] = {
    "recall_entity_expansion": False, "recall_session_cap": 0, "recall_own_names": False
}
#: The budget of the eviction run, as a share of what every user held at once takes.
BUDGET_SHARE = 0.25


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


def rss_bytes() -> int:
    """This process's resident set (VmRSS), in bytes."""
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


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
    #: That search without the cross-session recall steps (:data:`STEPS_OFF`).
    steps_off_ms: list[float]
    #: A LanceDB hybrid query written directly (embed, hybrid, RRF), the same limit.
    raw_ms: list[float]
    memory: ResidentMemory


@dataclass
class ResidentMemory:
    """The resident model's memory at one size: RSS in bytes, before and after."""

    memories: int
    users: int
    load_s: float
    rss_before: int
    budget: int
    held_budget: int
    rss_budget: int
    evictions: int
    held_all: int
    rss_all: int


class RawLanceDB:
    """What a user could write with LanceDB and the same embedder: one hybrid query (vector
    and full text, fused by RRF), prefiltered to the user's active rows."""

    def __init__(self, db_dir: Path, embedder: MiniLMOnnxEmbedder) -> None:
        self.table = lancedb.connect(db_dir).open_table("memories")
        self.embedder = embedder
        self.reranker = RRFReranker()

    def search(self, user: str, query: str, limit: int) -> list[dict[str, object]]:
        """The ``limit`` best of the user's active memories for ``query``."""
        hits: list[dict[str, object]] = (
            self.table.search(query_type="hybrid")
            .vector(self.embedder.embed([query])[0])
            .text(query)
            .where(f"user_key = '{user_key(user)}' AND status = 'active'", prefilter=True)
            .select(["memory_id", "memory_type", "content", "importance", "created_at"])
            .rerank(self.reranker)
            .limit(limit)
            .to_list()
        )
        return hits


def measure_size(
    size: int,
    pool: Pool,
    base: Path,
    queries: int,
    seed: int,
    embedder: MiniLMOnnxEmbedder,
    *,
    per_user: int = MEMORIES_PER_USER,
    scalar_indexes: bool = False,
    budget_share: float = BUDGET_SHARE,
) -> list[Row]:
    """Build a table of ``size`` memories, index it, and time searches and retrievals.

    With ``scalar_indexes``, the same queries are timed again after adding the scalar
    indexes the projection does not build today (BTREE on ``user_key``, BITMAP on
    ``status`` and ``memory_type``): what every prefiltered query scans otherwise.
    """
    users = max(1, size // per_user)
    db_dir = base / f"size-{size}"
    np_rng = np.random.default_rng(seed + size)
    print(f"[{size:,}] building {users:,} user(s) under {db_dir.name}; df: {disk_free(base)}",
          flush=True)

    write_s = write_table(
        db_dir, pool, embedder.model_id, users, np_rng, per_user=per_user,
        progress=lambda line: print(f"[{size:,}]   {line}", flush=True),
    )
    gc.collect()

    projection = MemoryProjection(db_dir, embedder)
    assert projection.count() == users * per_user
    started = time.perf_counter()
    projection.refresh_indexes()
    index_s = time.perf_counter() - started
    print(f"[{size:,}]   indexes built in {index_s:.1f} s", flush=True)

    questions = asks(users, queries, seed)
    resident, memory = load_resident(projection, size, users, budget_share)
    samples = time_queries(projection, resident, RawLanceDB(db_dir, embedder), embedder,
                           questions)
    disk_mb = directory_size(db_dir) / 1e6
    print(f"[{size:,}]   table {disk_mb:,.0f} MB on disk; df: {disk_free(base)}", flush=True)
    rows = [Row(size, users, "", write_s, index_s, disk_mb, **samples, memory=memory)]
    if scalar_indexes:
        table = lancedb.connect(db_dir).open_table("memories")
        started = time.perf_counter()
        table.create_index("user_key", config=BTree())
        table.create_index("status", config=Bitmap())
        table.create_index("memory_type", config=Bitmap())
        scalar_s = time.perf_counter() - started
        print(f"[{size:,}]   scalar indexes built in {scalar_s:.1f} s", flush=True)
        projection = MemoryProjection(db_dir, embedder)
        resident.projection = projection
        samples = time_queries(projection, resident, RawLanceDB(db_dir, embedder), embedder,
                               questions)
        rows.append(Row(size, users, "+scalar", write_s, index_s + scalar_s, disk_mb,
                        **samples, memory=memory))
    return rows


def load_resident(
    projection: MemoryProjection, size: int, users: int, budget_share: float
) -> tuple[ResidentMemories, ResidentMemory]:
    """Every user touched once under a budget of ``budget_share`` of the data (eviction),
    then every user loaded and held; the process's RSS after each. No query cache: every
    search embeds its query, as the others do."""
    ids = [user_id(i) for i in range(users)]
    gc.collect()
    rss_before = rss_bytes()
    # What every user takes, from the first users' own count, scaled: the budget's base.
    sample = ResidentMemories(projection, budget_bytes=1 << 50, query_cache=0)
    for uid in ids[: min(users, 100)]:
        sample.search(uid, "hello", limit=1)
    budget = int(sample.held_bytes / min(users, 100) * users * budget_share)
    del sample
    bounded = ResidentMemories(projection, budget_bytes=budget, query_cache=0)
    started = time.perf_counter()
    for done, uid in enumerate(ids, start=1):
        bounded.search(uid, "hello", limit=1)
        if done % 2_000 == 0:
            print(f"[{size:,}]   {done:,} users touched in {time.perf_counter() - started:.0f} s",
                  flush=True)
    gc.collect()
    rss_budget = rss_bytes()
    held_budget, evictions = bounded.held_bytes, bounded.evictions
    print(f"[{size:,}]   budget {budget / 1e6:,.0f} MB: {users:,} users touched, "
          f"{evictions:,} evicted, {held_budget / 1e6:,.0f} MB held, RSS "
          f"{rss_budget / 1e6:,.0f} MB (+{(rss_budget - rss_before) / 1e6:,.0f})", flush=True)
    del bounded
    gc.collect()
    resident = ResidentMemories(projection, budget_bytes=1 << 50, query_cache=0)
    started = time.perf_counter()
    for done, uid in enumerate(ids, start=1):
        resident.search(uid, "hello", limit=1)
        if done % 2_000 == 0:
            print(f"[{size:,}]   {done:,} users loaded in {time.perf_counter() - started:.0f} s",
                  flush=True)
    load_s = time.perf_counter() - started
    gc.collect()
    rss_all = rss_bytes()
    print(f"[{size:,}]   all {resident.loads:,} users loaded in {load_s:.1f} s, "
          f"{resident.held_bytes / 1e6:,.0f} MB held, RSS {rss_all / 1e6:,.0f} MB "
          f"(+{(rss_all - rss_before) / 1e6:,.0f})", flush=True)
    memory = ResidentMemory(size, users, load_s, rss_before, budget, held_budget, rss_budget,
                            evictions, resident.held_bytes, rss_all)
    return resident, memory


def rss_per_memory(pool: Pool, size: int, per_user: int, model_id: str) -> None:
    """Load ``size`` memories into :class:`ResidentUser` objects straight from Arrow rows
    (no table, nothing else allocated meanwhile) and print the RSS they added per memory
    beside what they count (``nbytes``, which the budget adds up)."""
    rng = np.random.default_rng(1)
    step = max(1, 10_000 // per_user)  # users per Arrow batch: 10,000 rows at a time
    for table in bulk_rows(pool, model_id, 0, step * per_user, rng, per_user=per_user):
        table.to_pylist()  # once before measuring: the allocators hold what a batch needs
    del table
    gc.collect()
    before = rss_bytes()
    held = []
    for first in range(0, size // per_user, step):
        for table in bulk_rows(pool, model_id, first, step * per_user, rng, per_user=per_user):
            vectors = np.asarray(
                table.column("vector").combine_chunks().flatten(), dtype=np.float32
            ).reshape(table.num_rows, -1)
            records = table.drop_columns(["vector"]).to_pylist()
            for start in range(0, table.num_rows, per_user):
                user = ResidentUser(vectors.shape[1])
                for row, vector in zip(
                    records[start : start + per_user], vectors[start : start + per_user],
                    strict=True,
                ):
                    user.put(row, vector)
                held.append(user)
            del table, vectors, records
    gc.collect()
    grown = rss_bytes() - before
    counted = sum(user.nbytes for user in held)
    print(f"{size:,} memories, {per_user:,} per user: RSS +{grown / 1e6:,.0f} MB = "
          f"{grown / size:,.0f} bytes per memory; nbytes {counted / size:,.0f} per memory "
          f"({counted / grown:.2f}x the RSS)")


#: The client's search asks for this many memories (a typical ``limit``).
SEARCH_LIMIT = 10


def time_queries(
    projection: MemoryProjection,
    resident: ResidentMemories,
    raw: RawLanceDB,
    embedder: MiniLMOnnxEmbedder,
    asks: list[tuple[str, str]],
) -> dict[str, list[float]]:
    """Milliseconds of ``search``, ``retrieve``, the query embedding, the client's search
    (``Retriever.search``), the client's search over ``resident`` (users loaded) and the raw
    LanceDB query for each ask, by the names of :class:`Row`'s fields."""
    queries = len(asks)
    retriever = Retriever(projection, Settings(), clock=lambda: NOW)
    limit = SEARCH_LIMIT
    resident_retriever = Retriever(resident, Settings(), clock=lambda: NOW)
    steps_off_retriever = Retriever(resident, Settings(**STEPS_OFF), clock=lambda: NOW)
    for user, question in asks[:10]:  # warm the caches and the index files
        projection.search(user, question, limit=limit)
        retriever.retrieve(user, question)
        retriever.search(user, question, limit=limit)
        raw.search(user, question, limit)
    found = [len(projection.search(u, q, limit=limit)) for u, q in asks[:20]]
    assert min(found) > 0, "a search found nothing: the table is not what it should be"

    questions = iter(asks * 3)
    embed_ms = timed(lambda: embedder.embed([next(questions)[1]]), queries)
    # The calls of each ask run back to back, in an order that turns with each ask, so no
    # call gains or loses from when it runs (caches, a background compaction, GC).
    calls = {
        "search_ms": lambda u, q: projection.search(u, q, limit=limit),
        "retrieve_ms": lambda u, q: retriever.retrieve(u, q),
        "client_ms": lambda u, q: retriever.search(u, q, limit=limit),
        "resident_ms": lambda u, q: resident_retriever.search(u, q, limit=limit),
        "steps_off_ms": lambda u, q: steps_off_retriever.search(u, q, limit=limit),
        "raw_ms": lambda u, q: raw.search(u, q, limit),
    }
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for index, (user, question) in enumerate(asks):
        turn = index % len(names)
        for name in names[turn:] + names[:turn]:
            started = time.perf_counter()
            calls[name](user, question)
            samples[name].append((time.perf_counter() - started) * 1000)
    return {**samples, "embed_ms": embed_ms}


def print_table(rows: list[Row], pool_size: int, queries: int, per_user: int) -> None:
    """The result tables and the notes under them."""
    header = (
        f"{'memories':>10} {'':<8} {'users':>6} {'build s':>8} {'(index s)':>9} {'disk MB':>8} "
        f"{'raw p50':>8} {'p95 ms':>7} {'search p50':>10} {'p95 ms':>7} {'client p50':>10} "
        f"{'p95 ms':>7} {'retrieve p50':>12} {'p95 ms':>7} {'resident p50':>12} {'p95 ms':>7}"
        f" {'steps off p50':>13} {'p95 ms':>7}"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r.size:>10,} {r.variant:<8} {r.users:>6,} {r.write_s + r.index_s:>8.1f} "
            f"{r.index_s:>9.1f} {r.disk_mb:>8,.0f} "
            + " ".join(
                f"{percentile(ms, 50):>{width}.1f} {percentile(ms, 95):>7.1f}"
                for ms, width in (
                    (r.raw_ms, 8), (r.search_ms, 10), (r.client_ms, 10), (r.retrieve_ms, 12),
                    (r.resident_ms, 12), (r.steps_off_ms, 13),
                )
            )
        )
    print()
    header = (
        f"{'memories':>10} {'users':>6} {'load s':>7} {'RSS before MB':>13} "
        f"{'all held MB':>11} {'RSS MB':>7} {'(+MB)':>6} {'B/memory RSS':>12} {'held':>6} "
        f"{'budget MB':>9} {'held MB':>7} {'RSS MB':>7} {'(+MB)':>6} {'evicted':>7}"
    )
    print(header)
    print("-" * len(header))
    for m in {r.size: r.memory for r in rows}.values():
        grown = m.rss_all - m.rss_before
        print(
            f"{m.memories:>10,} {m.users:>6,} {m.load_s:>7.1f} {m.rss_before / 1e6:>13,.0f} "
            f"{m.held_all / 1e6:>11,.0f} {m.rss_all / 1e6:>7,.0f} {grown / 1e6:>6,.0f} "
            f"{grown / m.memories:>12,.0f} {m.held_all / m.memories:>6,.0f} "
            f"{m.budget / 1e6:>9,.0f} {m.held_budget / 1e6:>7,.0f} {m.rss_budget / 1e6:>7,.0f} "
            f"{(m.rss_budget - m.rss_before) / 1e6:>6,.0f} {m.evictions:>7,}"
        )
    print()
    embed = [ms for r in rows for ms in r.embed_ms]
    print(f"- {queries} queries per size, random user and question; {per_user:,} memories per "
          f"user; {pool_size:,} distinct texts embedded once, vectors reused with noise "
          "(cosine ~0.9 to their text).")
    print(f"- Every figure includes embedding the query: alone it takes p50 "
          f"{statistics.median(embed):.1f} ms, p95 {percentile(embed, 95):.1f} ms (1 thread).")
    print("- raw = a LanceDB hybrid query written directly (embed, query_type='hybrid', RRF, "
          f"prefiltered on user_key and status); search = MemoryProjection.search(limit="
          f"{SEARCH_LIMIT}: vector and full-text legs, each memory scored by cosine and BM25);"
          " client = Retriever.search, what MemoryClient.search answers with (that search,"
          " ranked); retrieve = Retriever.retrieve (a prompt context: quotas, budget, access"
          " event); resident = Retriever.search over ResidentMemories (every user in memory,"
          " loaded before timing, no query cache); client, retrieve and resident with the"
          " default settings (cross-session recall steps on); steps off = resident with"
          f" {STEPS_OFF}.")
    print("- build = bulk write (pyarrow, 100k-row adds) + refresh_indexes() (FTS, scalar indexes,"
          " optimize; no ANN index).")
    print("- Memory: RSS before = the process before any user is loaded (table open, embedder,"
          " pool); all held = ResidentMemories.held_bytes with every user loaded, RSS and its"
          " growth then, per memory beside held_bytes per memory; budget = the eviction run"
          " (every user touched once, least recently used let go), run first.")
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
            p95 = percentile(r.resident_ms, 95)
            verdict = "met" if p95 <= RESIDENT_GOAL_P95_MS else "NOT met"
            print(f"- Goal (issue 28): resident search p95 <= {RESIDENT_GOAL_P95_MS:.0f} ms at 1M"
                  f" memories over 10k users. {r.size:,} over {r.users:,} users "
                  f"{r.variant or 'as built'}: p95 {p95:.1f} ms ({verdict}"
                  f"{'' if r.size >= 1_000_000 else '; 1M not measured'}).")


def main(argv: list[str] | None = None) -> int:
    """Parse options, run every size, print the table, delete the data."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000",
                        help="comma-separated table sizes (multiples of --per-user)")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per size")
    parser.add_argument("--pool", type=int, default=3000, help="distinct texts embedded")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--per-user", type=int, default=MEMORIES_PER_USER,
                        help="memories per user (100: 1M memories over 10,000 users)")
    parser.add_argument("--budget-share", type=float, default=BUDGET_SHARE,
                        help="the eviction run's budget, as a share of every user held")
    parser.add_argument("--rss-only", action="store_true",
                        help="only load each size into resident users from Arrow rows (no "
                             "table) and print the RSS per memory beside nbytes")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temporary data")
    parser.add_argument("--keep", action="store_true", help="keep the tables")
    parser.add_argument("--scalar-indexes", action="store_true",
                        help="also time each size with scalar indexes on user_key, status and "
                             "memory_type (which the projection does not build today)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if any(s <= 0 or s % args.per_user for s in sizes):
        parser.error(f"sizes must be positive multiples of {args.per_user:,}")

    base = Path(tempfile.mkdtemp(prefix="memstream-retrieval-bench-", dir=args.dir))
    print(f"data in {base.name} (temporary); df before: {disk_free(base)}", flush=True)
    rows: list[Row] = []
    try:
        started = time.perf_counter()
        pool = build_pool(args.pool, args.seed)
        print(f"pool: {len(pool.texts):,} texts embedded in {time.perf_counter() - started:.1f} s",
              flush=True)
        embedder = MiniLMOnnxEmbedder(threads=1)  # what a worker gives the query path
        if args.rss_only:
            for size in sizes:
                rss_per_memory(pool, size, args.per_user, embedder.model_id)
            return 0
        for size in sizes:
            try:
                rows += measure_size(
                    size, pool, base, args.queries, args.seed, embedder,
                    per_user=args.per_user, scalar_indexes=args.scalar_indexes,
                    budget_share=args.budget_share,
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
            print_table(rows, args.pool, args.queries, args.per_user)
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
            print(f"temporary data deleted; df after: {disk_free(Path(tempfile.gettempdir()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
