"""Retrieval latency: ``MemoryProjection.search`` and ``Retriever.retrieve`` at 10k-1M memories.

Each size is a fresh LanceDB table with 10,000 memories per user (10k memories = 1 user,
100k = 10 users, 1M = 100 users), so every query is prefiltered to 1 % or more of the table.

Building a table through the real write path would mean embedding every memory with MiniLM:
hours at 1M on two cores. The table is built in bulk instead:

1. realistic short memory texts are generated from templates (facts, preferences,
   episodes, summaries, corrections; names, places, employers, foods...);
2. a pool of ``--pool`` distinct texts is embedded once with the real embedder;
3. each row takes a pool text and that text's vector plus Gaussian noise, re-normalised
   (cosine about 0.9 to the original), so vectors cluster the way text embeddings do and no
   two rows are identical;
4. rows are written with pyarrow in the projection's own schema (``memory_schema``) in large
   ``add`` batches, then ``MemoryProjection.refresh_indexes()`` builds the full-text and
   scalar indexes exactly as the worker would (no ANN index: the vector leg of a search
   compares the user's rows exactly).

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
import hashlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import Bitmap, BTree

from memstream.models.settings import Settings
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import MemoryProjection, memory_schema
from memstream.projections.retrieval import Retriever

MEMORIES_PER_USER = 10_000
WRITE_BATCH = 100_000
#: Per-dimension noise added to a pool vector: for 384 dimensions, cosine to the original
#: is about 1 / sqrt(1 + 384 * 0.025 ** 2) = 0.9.
NOISE = 0.025
NOW = datetime(2026, 6, 1, tzinfo=UTC)
#: Memories span two years of event time.
SPAN = timedelta(days=730)
GOAL_P95_MS = 20.0

# --- texts -------------------------------------------------------------------------------------

NAMES = ["Clara", "Maria", "Jonas", "Aiko", "Omar", "Lena", "Pablo", "Nina", "Tomás", "Priya",
         "Felix", "Sofia", "Mateo", "Hana", "Ivan", "Chloe", "Yusuf", "Elif", "Noah", "Mia"]
RELATIONS = ["sister", "brother", "mother", "father", "daughter", "son", "partner", "best friend",
             "manager", "neighbour", "cousin", "grandmother"]
CITIES = ["Munich", "Berlin", "Lisbon", "Porto", "Vienna", "Oslo", "Kyoto", "Toronto", "Madrid",
          "Prague", "Dublin", "Seoul", "Lyon", "Krakow", "Zurich", "Austin", "Nairobi", "Lima"]
COMPANIES = ["Siemens", "Bosch", "Acme", "SAP", "Spotify", "Zalando", "Airbus", "Philips",
             "Novartis", "Shopify", "Canva", "Atlassian"]
JOBS = ["data engineer", "nurse", "teacher", "product manager", "architect", "chef",
        "physiotherapist", "accountant", "designer", "researcher"]
FOODS = ["ramen", "sushi", "dark chocolate", "spicy curry", "sourdough bread", "olives",
         "mushroom risotto", "falafel", "oat milk", "green tea", "peanuts", "shellfish"]
HOBBIES = ["bouldering", "playing the cello", "trail running", "knitting", "chess", "birdwatching",
           "sailing", "pottery", "photography", "salsa dancing", "gardening", "cycling"]
THINGS = ["window seats", "night trains", "aisle seats", "quiet hotels", "early flights",
          "paper books", "dark mode", "short answers", "metric units", "vegetarian options"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

TEMPLATES: list[tuple[str, float, Callable[[random.Random], str]]] = [
    ("fact", 0.75, lambda r: f"User's {r.choice(RELATIONS)} is called {r.choice(NAMES)}"),
    ("fact", 0.85, lambda r: f"User works at {r.choice(COMPANIES)} as a {r.choice(JOBS)}"),
    ("fact", 0.85, lambda r: f"User lives in {r.choice(CITIES)}"),
    ("fact", 0.85, lambda r: f"User is allergic to {r.choice(FOODS)}"),
    ("fact", 0.7, lambda r: f"User's {r.choice(RELATIONS)} lives in {r.choice(CITIES)}"),
    ("fact", 0.6, lambda r: f"User has been {r.choice(HOBBIES)} for {r.randint(2, 20)} years"),
    ("preference", 0.8, lambda r: f"User prefers {r.choice(THINGS)}"),
    ("preference", 0.75, lambda r: f"User's favourite food is {r.choice(FOODS)}"),
    ("preference", 0.7, lambda r: f"User enjoys {r.choice(HOBBIES)} on weekends"),
    ("episode", 0.4, lambda r: f"Last {r.choice(DAYS)} I went {r.choice(HOBBIES)} with my "
                               f"{r.choice(RELATIONS)} near {r.choice(CITIES)}"),
    ("episode", 0.45, lambda r: f"Can you find me a restaurant in {r.choice(CITIES)} that serves "
                                f"{r.choice(FOODS)}?"),
    ("episode", 0.4, lambda r: f"I'm flying to {r.choice(CITIES)} on {r.choice(DAYS)} and need "
                               f"{r.choice(THINGS)}"),
    ("summary", 0.55, lambda r: f"User: asked about a trip to {r.choice(CITIES)}. Assistant: "
                                f"suggested {r.choice(THINGS)} and places serving "
                                f"{r.choice(FOODS)}."),
    ("correction", 0.85, lambda r: f"Correction: User lives in {r.choice(CITIES)}, not "
                                   f"{r.choice(CITIES)}"),
]

QUESTIONS: list[Callable[[random.Random], str]] = [
    lambda r: f"What is my {r.choice(RELATIONS)}'s name?",
    lambda r: "Where do I work?",
    lambda r: "Which city do I live in now?",
    lambda r: "What food am I allergic to?",
    lambda r: f"Can you recommend something to do in {r.choice(CITIES)}?",
    lambda r: "Book me a seat on the next flight, you know what I like",
    lambda r: f"Where does my {r.choice(RELATIONS)} live?",
    lambda r: f"Any restaurants with {r.choice(FOODS)} nearby?",
    lambda r: "What hobbies do I have?",
    lambda r: "What did we talk about last time?",
]


@dataclass(frozen=True)
class Pool:
    """Distinct memory texts with their types, importances and real vectors."""

    texts: pa.Array
    types: pa.Array
    importance: np.ndarray
    vectors: np.ndarray


def build_pool(size: int, seed: int) -> Pool:
    """Generate ``size`` distinct texts from the templates and embed them once."""
    rng = random.Random(seed)
    seen: dict[str, tuple[str, float]] = {}
    attempts = 0
    while len(seen) < size and attempts < size * 50:
        attempts += 1
        memory_type, importance, template = rng.choice(TEMPLATES)
        seen.setdefault(template(rng), (memory_type, importance))
    texts = list(seen)
    # Two threads: the pool is embedded once, before anything is timed.
    embedder = MiniLMOnnxEmbedder(threads=2, batch_size=64)
    vectors = embedder.embed(texts)
    return Pool(
        texts=pa.array(texts, pa.string()),
        types=pa.array([seen[t][0] for t in texts], pa.string()),
        importance=np.array([seen[t][1] for t in texts], dtype=np.float64),
        vectors=vectors,
    )


def _sha256_all(values: list[str]) -> pa.Array:
    return pa.array([hashlib.sha256(v.encode()).hexdigest() for v in values], pa.string())


def bulk_rows(
    pool: Pool, model_id: str, first_user: int, rows: int, np_rng: np.random.Generator
) -> Iterator[pa.Table]:
    """Rows of ``rows // MEMORIES_PER_USER`` users, in tables of at most WRITE_BATCH rows."""
    schema = memory_schema(pool.vectors.shape[1], model_id)
    users = rows // MEMORIES_PER_USER
    for start in range(0, rows, WRITE_BATCH):
        n = min(WRITE_BATCH, rows - start)
        row_ids = np.arange(start, start + n)
        user_index = first_user + row_ids // MEMORIES_PER_USER
        assert user_index.max() < first_user + users
        picks = np_rng.integers(0, len(pool.texts), n)
        user_ids = [f"user-{u:04d}" for u in user_index]
        memory_ids = [f"user-{u:04d}-m{i}" for u, i in zip(user_index, row_ids, strict=True)]
        session_ids = [f"user-{u:04d}-s{i // 25}" for u, i in zip(user_index, row_ids, strict=True)]
        # Event times spread uniformly over SPAN up to NOW.
        offsets_us = np_rng.uniform(0, SPAN.total_seconds() * 1e6, n).astype("timedelta64[us]")
        created_us = np.datetime64((NOW - SPAN).replace(tzinfo=None), "us") + offsets_us
        vectors = pool.vectors[picks] + np_rng.normal(0, NOISE, (n, pool.vectors.shape[1]))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        # A few memories superseded, as the decider leaves them; they must be filtered out.
        superseded = np_rng.random(n) < 0.03
        access_count = np_rng.geometric(0.5, n) - 1
        columns = {
            "memory_id": pa.array(memory_ids, pa.string()),
            "user_id": pa.array(user_ids, pa.string()),
            "user_key": _sha256_all(user_ids),
            "agent_id": pa.nulls(n, pa.string()),
            "session_id": pa.array(session_ids, pa.string()),
            "memory_type": pool.types.take(pa.array(picks)),
            "content": pool.texts.take(pa.array(picks)),
            "context": pa.array([""] * n, pa.string()),
            "search_text": pool.texts.take(pa.array(picks)),
            "importance": pa.array(pool.importance[picks]),
            "tier": pa.array(np.where(pool.importance[picks] >= 0.8, "long_term", "short_term")),
            "created_at": pa.array(created_us, pa.timestamp("us", tz="UTC")),
            "entities": pa.array([[] for _ in range(n)], pa.list_(pa.string())),
            "source_event_ids": pa.array([[] for _ in range(n)], pa.list_(pa.string())),
            "extraction_event_id": pa.array(["bench"] * n, pa.string()),
            "extractor": pa.nulls(n, pa.string()),
            "event_id": pa.array([f"evt-{m}" for m in memory_ids], pa.string()),
            "source_topic": pa.array(["memstream.memories"] * n, pa.string()),
            "source_partition": pa.array(user_index % 4, pa.int32()),
            "source_offset": pa.array(row_ids, pa.int64()),
            "session_key": _sha256_all(session_ids),
            "memory_key": _sha256_all(memory_ids),
            "status": pa.array(np.where(superseded, "superseded", "active")),
            "superseded_by": pa.nulls(n, pa.string()),
            "ended_at": pa.array(
                np.where(superseded, created_us, np.datetime64("NaT")), pa.timestamp("us", tz="UTC")
            ),
            "reinforcement_count": pa.array(np.zeros(n, dtype=np.int64)),
            "last_reinforced_at": pa.nulls(n, pa.timestamp("us", tz="UTC")),
            "reinforced_by": pa.array([[] for _ in range(n)], pa.list_(pa.string())),
            "changed_offset": pa.array(np.full(n, -1, dtype=np.int64)),
            "learned_at": pa.array(created_us, pa.timestamp("us", tz="UTC")),
            "access_count": pa.array(access_count.astype(np.int64)),
            "last_accessed_at": pa.nulls(n, pa.timestamp("us", tz="UTC")),
            "access_offset": pa.array(np.full(n, -1, dtype=np.int64)),
            "embedding_model": pa.array([model_id] * n, pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(vectors.astype(np.float32).ravel()), pool.vectors.shape[1]
            ),
        }
        yield pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


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


def measure_size(
    size: int,
    pool: Pool,
    base: Path,
    queries: int,
    seed: int,
    embedder: MiniLMOnnxEmbedder,
    *,
    scalar_indexes: bool = False,
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

    started = time.perf_counter()
    db = lancedb.connect(db_dir)
    schema = memory_schema(pool.vectors.shape[1], embedder.model_id)
    table = db.create_table("memories", schema=schema)
    written = 0
    for batch in bulk_rows(pool, embedder.model_id, 0, users * MEMORIES_PER_USER, np_rng):
        table.add(batch)
        written += batch.num_rows
        print(f"[{size:,}]   {written:,} rows written", flush=True)
    write_s = time.perf_counter() - started
    del table, db
    gc.collect()

    projection = MemoryProjection(db_dir, embedder)
    assert projection.count() == written
    started = time.perf_counter()
    projection.refresh_indexes()
    index_s = time.perf_counter() - started
    print(f"[{size:,}]   indexes built in {index_s:.1f} s", flush=True)

    rng = random.Random(seed)
    asks = [
        (f"user-{rng.randrange(users):04d}", rng.choice(QUESTIONS)(rng)) for _ in range(queries)
    ]
    search_ms, retrieve_ms, embed_ms, client_ms = time_queries(projection, embedder, asks)
    disk_mb = directory_size(db_dir) / 1e6
    print(f"[{size:,}]   table {disk_mb:,.0f} MB on disk; df: {disk_free(base)}", flush=True)
    rows = [
        Row(size, users, "", write_s, index_s, disk_mb, search_ms, retrieve_ms, embed_ms,
            client_ms)
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
        search_ms, retrieve_ms, embed_ms, client_ms = time_queries(projection, embedder, asks)
        rows.append(
            Row(size, users, "+scalar", write_s, index_s + scalar_s, disk_mb, search_ms,
                retrieve_ms, embed_ms, client_ms)
        )
    return rows


#: The client's search asks for this many memories (a typical ``limit``).
SEARCH_LIMIT = 10


def time_queries(
    projection: MemoryProjection, embedder: MiniLMOnnxEmbedder, asks: list[tuple[str, str]]
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Milliseconds of ``search``, ``retrieve``, the query embedding and the client's search
    (``Retriever.search``) for each ask."""
    queries = len(asks)
    retriever = Retriever(projection, Settings(), clock=lambda: NOW)
    limit = SEARCH_LIMIT
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
    }
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for index, (user_id, question) in enumerate(asks):
        for name in names[index % 3 :] + names[: index % 3]:
            started = time.perf_counter()
            calls[name](user_id, question)
            samples[name].append((time.perf_counter() - started) * 1000)
    search_ms, retrieve_ms, client_ms = samples["search"], samples["retrieve"], samples["client"]
    return search_ms, retrieve_ms, embed_ms, client_ms


def print_table(rows: list[Row], pool_size: int, queries: int) -> None:
    """The result table and the notes under it."""
    header = (
        f"{'memories':>10} {'':<8} {'users':>6} {'build s':>8} {'(index s)':>9} {'disk MB':>8} "
        f"{'search p50':>10} {'p95 ms':>7} {'client p50':>10} {'p95 ms':>7} "
        f"{'retrieve p50':>12} {'p95 ms':>7}"
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
            f"{percentile(r.retrieve_ms, 95):>7.1f}"
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
          " Retriever.retrieve (a prompt context: quotas, budget, access event).")
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
