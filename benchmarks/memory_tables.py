"""Memory tables in bulk for the latency benchmarks: realistic texts, clustered vectors, the
projection's own schema, the indexes the worker builds.

Building a table through the real write path would mean embedding every memory with MiniLM:
hours at 1M on two cores. :func:`write_table` builds one in bulk instead:

1. realistic short memory texts are generated from templates (facts, preferences,
   episodes, summaries, corrections; names, places, employers, foods...);
2. a pool of distinct texts is embedded once with the real embedder (:func:`build_pool`);
3. each row takes a pool text and that text's vector plus Gaussian noise, re-normalised
   (cosine about 0.9 to the original), so vectors cluster the way text embeddings do and no
   two rows are identical;
4. rows are written with pyarrow in the projection's own schema (``memory_schema``) in large
   ``add`` batches, :data:`MEMORIES_PER_USER` per user; ``MemoryProjection.refresh_indexes()``
   then builds the full-text and scalar indexes exactly as the worker would.

:func:`asks` makes the questions the benchmarks time, for random users. Imported as
``memory_tables`` by ``retrieval.py`` and ``service.py`` (they run as scripts).
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa

from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import CLAIM_COLUMNS, memory_schema

#: Memories of each user: 10k memories = 1 user, 100k = 10 users, 1M = 100 users, so every
#: query is prefiltered to 1 % or more of the table.
MEMORIES_PER_USER = 10_000
WRITE_BATCH = 100_000
#: Per-dimension noise added to a pool vector: for 384 dimensions, cosine to the original
#: is about 1 / sqrt(1 + 384 * 0.025 ** 2) = 0.9.
NOISE = 0.025
NOW = datetime(2026, 6, 1, tzinfo=UTC)
#: Memories span two years of event time.
SPAN = timedelta(days=730)

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
    #: The names each text holds (people, cities, companies), as the extractor gives them:
    #: what the cross-session recall's entity expansion follows.
    entities: pa.Array


def names_in(text: str) -> list[str]:
    """The names of NAMES, CITIES and COMPANIES that ``text`` holds, in that order."""
    return [name for name in (*NAMES, *CITIES, *COMPANIES) if name in text]


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
        entities=pa.array([names_in(t) for t in texts], pa.list_(pa.string())),
    )


def _sha256_all(values: list[str]) -> pa.Array:
    return pa.array([hashlib.sha256(v.encode()).hexdigest() for v in values], pa.string())


def user_id(index: int, prefix: str = "") -> str:
    """The id of the ``index``-th user of a table: ``user-0003``, or ``{prefix}user-0003``."""
    return f"{prefix}user-{index:04d}"


def bulk_rows(
    pool: Pool,
    model_id: str,
    first_user: int,
    rows: int,
    np_rng: np.random.Generator,
    *,
    user_prefix: str = "",
    per_user: int = MEMORIES_PER_USER,
) -> Iterator[pa.Table]:
    """Rows of ``rows // per_user`` users, in tables of at most WRITE_BATCH rows; user ids
    start with ``user_prefix`` (a tenant, for the HTTP API)."""
    schema = memory_schema(pool.vectors.shape[1], model_id)
    users = rows // per_user
    for start in range(0, rows, WRITE_BATCH):
        n = min(WRITE_BATCH, rows - start)
        row_ids = np.arange(start, start + n)
        user_index = first_user + row_ids // per_user
        assert user_index.max() < first_user + users
        picks = np_rng.integers(0, len(pool.texts), n)
        user_ids = [user_id(int(u), user_prefix) for u in user_index]
        memory_ids = [f"{u}-m{i}" for u, i in zip(user_ids, row_ids, strict=True)]
        session_ids = [f"{u}-s{i // 25}" for u, i in zip(user_ids, row_ids, strict=True)]
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
            "entities": pool.entities.take(pa.array(picks)),
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
            **{
                name: pa.nulls(n, schema.field(name).type)
                if not pa.types.is_list(schema.field(name).type)
                else pa.array([[] for _ in range(n)], pa.list_(pa.string()))
                for name in CLAIM_COLUMNS
            },
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(vectors.astype(np.float32).ravel()), pool.vectors.shape[1]
            ),
        }
        yield pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def write_table(
    db_dir: Path,
    pool: Pool,
    model_id: str,
    users: int,
    np_rng: np.random.Generator,
    *,
    user_prefix: str = "",
    per_user: int = MEMORIES_PER_USER,
    progress: Callable[[str], None] = print,
    name: str = "memories",
) -> float:
    """Write the table ``name`` of ``users`` users of ``per_user`` memories each (no
    indexes) into ``db_dir``; return the seconds it took. Build the indexes with
    ``MemoryProjection.refresh_indexes()``."""
    started = time.perf_counter()
    db = lancedb.connect(db_dir)
    table = db.create_table(name, schema=memory_schema(pool.vectors.shape[1], model_id))
    written = 0
    for batch in bulk_rows(
        pool, model_id, 0, users * per_user, np_rng, user_prefix=user_prefix, per_user=per_user
    ):
        table.add(batch)
        written += batch.num_rows
        progress(f"{written:,} rows written")
    return time.perf_counter() - started


def asks(users: int, queries: int, seed: int, *, user_prefix: str = "") -> list[tuple[str, str]]:
    """``queries`` (user id, question) pairs, each for a random one of ``users`` users."""
    rng = random.Random(seed)
    return [
        (user_id(rng.randrange(users), user_prefix), rng.choice(QUESTIONS)(rng))
        for _ in range(queries)
    ]
