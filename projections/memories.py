"""The memory projection: ``MemoryAdded`` events as rows of one LanceDB table.

The topic is the truth; this table is a read model rebuilt from it at will. Every row carries
the topic, partition and offset of the event that wrote it (the projection's tracking
record), written in the same ``merge_insert`` as the row itself, so a consumer resumes from
:meth:`MemoryProjection.positions` and a re-delivered event rewrites a row with the same
values.

Isolation by construction: LanceDB filters are SQL strings, so nothing a client sends ever
becomes part of one. Rows are filtered on ``user_key``, the sha256 hex digest of the user id
computed here; memory types are checked against the closed set of :data:`MemoryType` values;
query text only ever goes to the embedder and the full-text index, never into a filter.

Full-text freshness (measured with lancedb 0.40): rows written after the FTS index was built,
and rows rewritten since, are found by full-text search before the index is optimised (the
unindexed part of the table is scanned flat; a rewritten row no longer matches its old text).
So :meth:`MemoryProjection.apply` leaves indexes alone; :meth:`MemoryProjection.refresh_indexes`,
called on a schedule, folds new rows into them, because the flat scan grows with the number of
unindexed rows.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lancedb.index import FTS, Bitmap, BTree, HnswSq

from memstream.models.events import (
    MemoriesRetrieved,
    MemoryAdded,
    MemoryChange,
    MemoryReinforced,
    MemoryType,
)
from memstream.models.lifecycle import apply_change
from memstream.projections.allocator import release_freed_memory
from memstream.projections.embedder import Embedder
from memstream.projections.shadow import live_name

log = logging.getLogger(__name__)

#: The memory types a filter may name; anything else is refused before a query is built.
MEMORY_TYPES: frozenset[str] = frozenset(get_args(MemoryType))
#: Relevance is ``VECTOR_SHARE * similarity + (1 - VECTOR_SHARE) * words``: the cosine
#: similarity of the query and the memory's indexed text (clipped to 0..1), and its BM25 score
#: saturated as ``bm25 / (bm25 + BM25_SATURATION)``. Both are the memory's own scores, so a
#: memory's relevance does not depend on which others were found with it, nor on how many
#: were asked for. On the first dialogue data set (274 questions) shares from 0.3 to 0.7
#: scored recall@10 between 0.655 and 0.672 against RRF's 0.673, equal within its noise;
#: 0.5 weighs meaning and words alike.
VECTOR_SHARE = 0.5
BM25_SATURATION = 10.0
MAX_SEARCH_LIMIT = 1_000
#: Keys per ``memory_key IN (...)`` lookup.
KEY_LOOKUP_CHUNK = 5_000

_HEX64 = re.compile(r"[0-9a-f]{64}")
_TABLE_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")
_SCHEMA_MODEL_KEY = b"memstream.embedding_model"
_SCHEMA_VERSION_KEY = b"memstream.schema_version"
#: Runs the full-text leg of searches beside the vector leg.
_LEG_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memstream-search")
#: Bumped when the table's columns change; an older table must be rebuilt from the topic.
SCHEMA_VERSION = "6"
#: The live memories table, until a replay swaps another in (see memstream.projections.shadow).
DEFAULT_TABLE = "memories"
#: The columns that make up the projection's view, fingerprinted by ``memstream verify``:
#: everything a reader can see except the vector (derived from content by the embedder) and
#: the source offsets (a restored log may number its records differently).
VIEW_COLUMNS = (
    "memory_id",
    "user_id",
    "agent_id",
    "session_id",
    "memory_type",
    "content",
    "context",
    "importance",
    "tier",
    "created_at",
    "entities",
    "source_event_ids",
    "extraction_event_id",
    "extractor",
    "event_id",
    "status",
    "superseded_by",
    "ended_at",
    "reinforcement_count",
    "last_reinforced_at",
    "learned_at",
    "access_count",
    "last_accessed_at",
    "embedding_model",
)


_SCALAR_INDEXES = (
    ("memory_key", BTree()),
    ("user_key", BTree()),
    ("status", Bitmap()),
    ("memory_type", Bitmap()),
)

#: Byte bounds of LanceDB's caches, shared by every projection of a process. LanceDB's own
#: defaults are 6 GiB (index) and 1 GiB (metadata) per connection, and their keys name index
#: UUIDs and table versions: each write and each optimize() makes new ones, so under steady
#: writes the dead entries (and the files they hold open, deleted ones too) only go when the
#: bound is reached; a soak worker grew by ~140 MB/min with them. These bounds hold the live
#: entries of a table of tens of thousands of memories; pass larger ones for a far larger table.
INDEX_CACHE_BYTES = 64 * 2**20
METADATA_CACHE_BYTES = 16 * 2**20
_cache_sessions: dict[tuple[int, int], lancedb.Session] = {}
_cache_sessions_lock = threading.Lock()


def cache_session(
    index_cache_bytes: int = INDEX_CACHE_BYTES, metadata_cache_bytes: int = METADATA_CACHE_BYTES
) -> lancedb.Session:
    """The process's LanceDB cache session with these bounds (one per pair of sizes).

    Shared, so the projector, the decider and a client in one process hold one copy of the
    current index and metadata entries rather than one each.

    Examples
    --------
    >>> cache_session() is cache_session()
    True
    """
    key = (int(index_cache_bytes), int(metadata_cache_bytes))
    with _cache_sessions_lock:
        session = _cache_sessions.get(key)
        if session is None:
            session = lancedb.Session(
                index_cache_size_bytes=key[0], metadata_cache_size_bytes=key[1]
            )
            _cache_sessions[key] = session
        return session


class ProjectionWriteError(RuntimeError):
    """A write did not touch the rows it should have (LanceDB reported other counts)."""


class EmbeddingModelMismatch(RuntimeError):
    """The table holds vectors of another model: rebuild it from the topic."""


class ProjectionOutdated(RuntimeError):
    """The table was written by an older memstream: rebuild it from the topic."""


class EncryptedContentError(ValueError):
    """An event's content is ciphertext; it must be decrypted before it is projected."""


def _digest(text: str) -> str:
    # surrogatepass: a lone surrogate (legal in a decoded JSON string) still maps to one key.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def memory_key(memory_id: str) -> str:
    """The filter key of a memory id (sha256 hex): ids come from clients too."""
    return _digest(memory_id)


def session_filter_key(session_id: str) -> str:
    """The filter key of a session id (sha256 hex)."""
    return _digest(session_id)


def user_key(user_id: str) -> str:
    """The filter key of a user: sha256 hex of the id, the only form a filter ever holds.

    Examples
    --------
    >>> len(user_key("x' OR '1'='1"))
    64
    """
    return _digest(user_id)


@dataclass(frozen=True)
class SourcePosition:
    """Where an event sits in the log."""

    topic: str
    partition: int
    offset: int
    #: The broker timestamp of the record, when known.
    timestamp: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class SearchFilters:
    """Optional narrowing of a search; every field is turned into SQL by code, never pasted.

    ``session_id`` is matched through its digest; times are event times (``created_at``).
    ``include_inactive`` also returns superseded, deleted, expired and forgotten memories
    (for history views).
    """

    memory_types: tuple[str, ...] | None = None
    min_importance: float | None = None
    session_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    include_inactive: bool = False
    #: Answer from what memstream believed at this time: memories recorded by then (event
    #: time) and not yet superseded, expired or forgotten by then. Deleted memories stay out.
    as_of: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class MemoryRecord:
    """One memory as the projection holds it (the vector left out)."""

    memory_id: str
    memory_type: str
    content: str
    importance: float
    created_at: datetime
    session_id: str
    event_id: str
    source_event_ids: tuple[str, ...]
    source_topic: str
    source_partition: int
    source_offset: int
    tier: str = "long_term"
    status: str = "active"
    superseded_by: str | None = None
    reinforcement_count: int = 0
    entities: tuple[str, ...] = ()
    access_count: int = 0
    last_accessed_at: datetime | None = None
    learned_at: datetime | None = None
    #: Event time the memory left the current view (superseded, deleted, expired, forgotten).
    ended_at: datetime | None = None
    #: Which extractor (name/version) proposed it; "unrecorded" for events before v2.
    extractor: str | None = None
    #: The conversation around it (day, neighbouring turns, speakers); "" when none.
    context: str = ""


@dataclass(frozen=True, kw_only=True)
class MemoryHit(MemoryRecord):
    """A memory found by :meth:`MemoryProjection.search`.

    ``score`` is its relevance on 0..1 (see :data:`VECTOR_SHARE`): ``similarity`` (cosine of
    the query and the memory's text, 0..1) and ``words`` (its BM25 score for the query,
    saturated to 0..1; 0 when the memory was not among the best matches by words) weighed
    together.
    """

    score: float
    similarity: float = 0.0
    words: float = 0.0


_RECORD_COLUMNS = [
    "memory_id",
    "memory_type",
    "content",
    "importance",
    "created_at",
    "session_id",
    "event_id",
    "source_event_ids",
    "source_topic",
    "source_partition",
    "source_offset",
    "tier",
    "status",
    "superseded_by",
    "reinforcement_count",
    "entities",
    "access_count",
    "last_accessed_at",
    "learned_at",
    "ended_at",
    "extractor",
    "context",
]


def memory_schema(dimensions: int, embedding_model: str) -> pa.Schema:
    """The table's Arrow schema for vectors of ``dimensions`` from ``embedding_model``."""

    def required(name: str, type_: pa.DataType) -> pa.Field:
        return pa.field(name, type_, nullable=False)

    return pa.schema(
        [
            required("memory_id", pa.string()),
            required("user_id", pa.string()),
            required("user_key", pa.string()),
            pa.field("agent_id", pa.string(), nullable=True),
            required("session_id", pa.string()),
            required("memory_type", pa.string()),
            required("content", pa.string()),
            # The conversation around the memory, returned with it.
            required("context", pa.string()),
            # What is embedded and indexed for full text: the context when there is one (it
            # holds the content), the content otherwise.
            required("search_text", pa.string()),
            required("importance", pa.float64()),
            required("tier", pa.string()),
            required("created_at", pa.timestamp("us", tz="UTC")),
            required("entities", pa.list_(pa.string())),
            required("source_event_ids", pa.list_(pa.string())),
            required("extraction_event_id", pa.string()),
            pa.field("extractor", pa.string(), nullable=True),
            required("event_id", pa.string()),
            required("source_topic", pa.string()),
            required("source_partition", pa.int32()),
            required("source_offset", pa.int64()),
            required("session_key", pa.string()),
            required("memory_key", pa.string()),
            # The current view: active, or superseded / deleted / expired / forgotten (kept for
            # history).
            required("status", pa.string()),
            pa.field("superseded_by", pa.string(), nullable=True),
            # Event time of the change that took it out of the current view (point-in-time
            # reads: it was believed from created_at until ended_at).
            pa.field("ended_at", pa.timestamp("us", tz="UTC"), nullable=True),
            required("reinforcement_count", pa.int64()),
            pa.field("last_reinforced_at", pa.timestamp("us", tz="UTC"), nullable=True),
            # Event ids of the reinforcements counted: a decision re-published after a crash
            # (same id, later offset) counts once.
            required("reinforced_by", pa.list_(pa.string())),
            # Offset (same topic and partition) of the last change event applied to the row:
            # a re-delivered change at or below it is skipped.
            required("changed_offset", pa.int64()),
            # When memstream learned the memory: the broker timestamp of its event (in the log,
            # so a replay finds the same); short-term TTLs run from it.
            pa.field("learned_at", pa.timestamp("us", tz="UTC"), nullable=True),
            # Use: retrievals counted from the accesses topic, off the read path.
            required("access_count", pa.int64()),
            pa.field("last_accessed_at", pa.timestamp("us", tz="UTC"), nullable=True),
            required("access_offset", pa.int64()),
            required("embedding_model", pa.string()),
            required("vector", pa.list_(pa.float32(), dimensions)),
        ],
        metadata={
            _SCHEMA_MODEL_KEY: embedding_model.encode(),
            _SCHEMA_VERSION_KEY: SCHEMA_VERSION.encode(),
        },
    )


def search_text(event: MemoryAdded) -> str:
    """What a memory is found by: its context when it has one (which shows the content in
    its conversation), else its content; both when the context leaves the content out."""
    if not event.context or event.content in event.context:
        return event.context or event.content
    return f"{event.content}\n{event.context}"


def _is_commit_conflict(exc: Exception) -> bool:
    # lancedb surfaces Lance's CommitConflict / RetryableCommitConflict as plain
    # RuntimeError/OSError with the variant in the message; there is no exception class.
    text = str(exc).lower()
    return "commit conflict" in text or "write contention" in text


class MemoryProjection:
    """The LanceDB table of memories, and the only writer of it.

    Parameters
    ----------
    db_dir
        The LanceDB database directory.
    embedder
        Embeds contents at write time and queries at search time.
    table_name
        Name of the table inside ``db_dir``; None (the default) follows the live table,
        which a replay may swap (:mod:`memstream.projections.shadow`): the projection looks at
        the pointer before each read and write and reopens when it moved.
    vector_index_min_rows
        None (the default): no ANN index on ``vector``, and one found is dropped. Every
        search is scoped to one user, and the user's rows (found through the ``user_key``
        index) are compared exactly: recall 1.0, and no index to maintain. An HNSW index
        built at 5,000 rows gained a delta segment with every refresh that added rows, and
        searches slowed with each one (a soak at 15 chat events/s: p50 40 -> 71 ms within
        2.5 minutes, 30 segments for 6,600 rows); rebuilding it took 80 s at 100k rows. A
        number: build the index once the table holds that many rows, and search through
        it (for users with very many memories; the decider's neighbours stay exact).
    keep_versions_for
        Table versions younger than this survive cleanup, so a reader in another process
        that is in the middle of a query on one is not cut off. Readers here check out the
        latest version on every read (``read_consistency_interval`` 0), and that check lists
        every version kept: at 1,200 versions it doubled a hybrid search (12 -> 23 ms).
    read_consistency_interval
        How stale reads may be relative to writes of other processes (0 = always current).
    index_cache_bytes, metadata_cache_bytes
        Bounds of the LanceDB caches, shared with every projection of the process that has
        the same bounds (:func:`cache_session`).

    Examples
    --------
    >>> projection = MemoryProjection(tmp_path, embedder)  # doctest: +SKIP
    >>> projection.apply([(event, SourcePosition("memstream.memories", 0, 41))])  # doctest: +SKIP
    1
    >>> projection.positions()  # doctest: +SKIP
    {('memstream.memories', 0): 42}
    """

    #: Attempts of one merge when concurrent commits conflict, and the first backoff.
    write_attempts = 4
    write_backoff_s = 0.05

    def __init__(
        self,
        db_dir: Path,
        embedder: Embedder,
        table_name: str | None = None,
        *,
        vector_index_min_rows: int | None = None,
        keep_versions_for: timedelta = timedelta(minutes=1),
        read_consistency_interval: timedelta | None = timedelta(0),
        index_cache_bytes: int = INDEX_CACHE_BYTES,
        metadata_cache_bytes: int = METADATA_CACHE_BYTES,
    ) -> None:
        self.db_dir = Path(db_dir)
        self.follows_live_table = table_name is None
        table_name = live_name(self.db_dir, "memories", DEFAULT_TABLE) if table_name is None else table_name
        if not _TABLE_NAME.fullmatch(table_name):
            raise ValueError(f"invalid table name {table_name!r}")
        self.embedder = embedder
        self.table_name = table_name
        self._pointer_stamp: tuple[int, int] | None = None
        self.vector_index_min_rows = vector_index_min_rows
        self.keep_versions_for = keep_versions_for
        self._read_consistency_interval = read_consistency_interval
        self._cache_bytes = (index_cache_bytes, metadata_cache_bytes)
        self._cache_session = cache_session(index_cache_bytes, metadata_cache_bytes)
        self._db = lancedb.connect(
            self.db_dir,
            read_consistency_interval=read_consistency_interval,
            session=self._cache_session,
        )
        self._table: Any = None  # lancedb.table.LanceTable, opened lazily
        self._fts_ready = False
        self._vector_index_ready = False
        self._scalar_indexes_ready = False
        self._refreshed_version: int | None = None
        self._lock = threading.Lock()
        #: Ids of every row, kept while this writer created the table (None otherwise).
        self._ids_written: set[str] | None = None
        #: A projection (the live one, during a replay) whose vectors are reused for the same
        #: memory and content instead of embedding again: the slow part of a rebuild.
        self.vector_donor: MemoryProjection | None = None

    # --- writing --------------------------------------------------------------------

    def apply(
        self, batch: Sequence[tuple[MemoryAdded | MemoryChange, SourcePosition]]
    ) -> int:
        """Project a batch of memory events in one write; return the number of rows written.

        New memories become rows; the first event of a ``memory_id`` wins, in a batch as
        across batches (a worker that crashed after publishing a memory publishes it again,
        later in the log, and where batches cut must not matter). The changes (reinforced,
        superseded, deleted, ...) are folded in order into the rows they name, new or not.
        Everything goes to LanceDB in one upsert, one commit: the projector resumes after the
        highest offset a row records, so a batch half written would lose the changes of its
        other half. Applying the same events again leaves the table as it was: a row records
        the offset of the last change it took. Indexes are not touched: see
        :meth:`refresh_indexes`.

        Raises
        ------
        ProjectionWriteError
            LanceDB reported fewer (or more) inserted + updated rows than were written.
        EncryptedContentError
            An event's content is encrypted; nothing of the batch is written.
        """
        added = [(e, p) for e, p in batch if isinstance(e, MemoryAdded)]
        changes = [(e, p) for e, p in batch if not isinstance(e, MemoryAdded)]
        new = self._new_rows(added)
        changed = self._changed_rows(changes, new)
        if new is None and not changed:
            return 0
        if new is None:
            table = self._open()
            assert table is not None  # rows were changed, so there is a table
            schema = table.schema
            data = pa.Table.from_pylist(list(changed.values()), schema=schema)
        else:
            schema = new.schema
            changed_ids = pa.array(list(changed), pa.string())
            untouched = new.filter(pc.invert(pc.is_in(new["memory_id"], changed_ids)))
            data = pa.concat_tables(
                [untouched, pa.Table.from_pylist(list(changed.values()), schema=schema)]
            )
            table = self._writable_table(schema)
        self._write_checked(table, data, data.num_rows)
        if self._ids_written is not None and new is not None:
            self._ids_written.update(new["memory_id"].to_pylist())
        return data.num_rows

    def _new_rows(self, batch: Sequence[tuple[MemoryAdded, SourcePosition]]) -> pa.Table | None:
        """Rows (not written) for the batch's memories the table does not hold yet."""
        first: dict[str, tuple[MemoryAdded, SourcePosition]] = {}
        for event, position in batch:
            if event.encryption is not None and "content" in event.encryption.fields:
                raise EncryptedContentError(
                    f"memory {event.memory_id} (event {event.event_id}) has encrypted content"
                )
            first.setdefault(event.memory_id, (event, position))
        if not first:
            return None
        table = self._open()
        if table is not None:
            # A re-delivered add must not undo changes applied since (a supersession, say).
            if self._ids_written is not None:
                current: Any = self._ids_written  # every row of the table was written here
            else:
                current = self._rows_by_key(table, [memory_key(m) for m in first], ["memory_id"])
            first = {m: item for m, item in first.items() if m not in current}
            if not first:
                return None
        items = list(first.values())
        vectors = self._vectors([event for event, _ in items])
        if vectors.shape[0] != len(items) or not np.isfinite(vectors).all():
            raise ValueError(f"embedder returned {vectors.shape} / non-finite vectors")
        return self._rows(items, vectors, memory_schema(vectors.shape[1], self.embedder.model_id))

    def _vectors(self, events: Sequence[MemoryAdded]) -> np.ndarray:
        """The vectors of the events' contents: taken from ``vector_donor`` where it holds
        the same memory with the same content from the same model, embedded otherwise."""
        vectors: list[np.ndarray | None] = [None] * len(events)
        donor = self.vector_donor
        donor_table = donor._open() if donor is not None else None
        if donor is not None and donor_table is not None:
            found = donor._rows_by_key(
                donor_table,
                [memory_key(e.memory_id) for e in events],
                ["memory_id", "search_text", "embedding_model", "vector"],
            )
            for index, event in enumerate(events):
                row = found.get(event.memory_id)
                if (
                    row is not None
                    and row["search_text"] == search_text(event)
                    and row["embedding_model"] == self.embedder.model_id
                ):
                    vectors[index] = np.asarray(row["vector"], dtype=np.float32)
        missing = [i for i, vector in enumerate(vectors) if vector is None]
        if missing:
            embedded = self.embedder.embed([search_text(events[i]) for i in missing])
            if embedded.shape[0] != len(missing):
                raise ValueError(f"embedder returned {embedded.shape} for {len(missing)} texts")
            for i, vector in zip(missing, embedded, strict=True):
                vectors[i] = vector
        return np.stack([v for v in vectors if v is not None]).astype(np.float32, copy=False)

    def _changed_rows(
        self,
        changes: Sequence[tuple[MemoryChange, SourcePosition]],
        new: pa.Table | None,
    ) -> dict[str, dict[str, Any]]:
        """The rows ``changes`` change (rows of ``new`` or of the table), changed, by id."""
        if not changes:
            return {}
        named = sorted({e.memory_id for e, _ in changes})
        rows: dict[str, dict[str, Any]] = {}
        if new is not None:
            mine = new.filter(pc.is_in(new["memory_id"], pa.array(named, pa.string())))
            rows = {row["memory_id"]: row for row in mine.to_pylist()}
        table = self._open()
        if table is None and new is None:
            log.warning("memories: %d change(s) before any memory exists; skipped", len(changes))
            return {}
        if table is not None:
            rest = [memory_key(m) for m in named if m not in rows]
            rows.update(self._rows_by_key(table, rest) if rest else {})
        touched: set[str] = set()
        for event, position in changes:
            row = rows.get(event.memory_id)
            if row is None:
                log.warning("memories: %s names unknown memory %s", event.type, event.memory_id)
                continue
            if row["user_key"] != user_key(event.user_id):
                # Isolation: a change only ever applies to the memory of the same user.
                log.warning("memories: %s for another user's memory refused", event.type)
                continue
            if position.offset <= row["changed_offset"]:
                continue  # re-delivered
            if isinstance(event, MemoryReinforced) and event.event_id in row["reinforced_by"]:
                continue  # the same decision published again (after a crash), later in the log
            apply_change(row, event)
            row["changed_offset"] = position.offset
            touched.add(event.memory_id)
        return {m: rows[m] for m in sorted(touched)}

    def apply_accesses(self, batch: Sequence[tuple[MemoriesRetrieved, SourcePosition]]) -> int:
        """Count retrievals (events of the accesses topic); return the rows updated.

        Each row records the offset of the last access event it counted, so a re-delivered
        event counts once. Only the retrieving user's own memories are touched.
        """
        wanted = sorted({memory_key(m.memory_id) for e, _ in batch for m in e.memories})
        table = self._open()
        if table is None or not wanted:
            return 0
        rows = self._rows_by_key(table, wanted)
        touched: set[str] = set()
        for event, position in batch:
            for memory in event.memories:
                row = rows.get(memory.memory_id)
                if row is None or row["user_key"] != user_key(event.user_id):
                    continue
                if position.offset <= row["access_offset"]:
                    continue  # re-delivered (or the same memory twice in one retrieval)
                row["access_count"] += 1
                row["last_accessed_at"] = event.occurred_at.astimezone(UTC)
                row["access_offset"] = position.offset
                touched.add(memory.memory_id)
        if not touched:
            return 0
        data = pa.Table.from_pylist([rows[m] for m in sorted(touched)], schema=table.schema)
        self._write_checked(table, data, len(touched))
        return len(touched)

    def access_positions(self) -> dict[int, int]:
        """Next offset of the accesses topic to read, per partition (a user's memories and
        accesses share the partition number: both topics are keyed by user id)."""
        table = self._open()
        if table is None:
            return {}
        rows = table.search().select(["source_partition", "access_offset"]).limit(None).to_arrow()
        if rows.num_rows == 0:
            return {}
        grouped = rows.group_by(["source_partition"]).aggregate([("access_offset", "max")])
        return {
            int(row["source_partition"]): int(row["access_offset_max"]) + 1
            for row in grouped.to_pylist()
            if row["access_offset_max"] >= 0
        }

    def short_term_due(
        self, now: datetime, ttl: timedelta, limit: int = 10_000
    ) -> list[tuple[str, MemoryRecord]]:
        """Active short-term memories (episodes excepted: they are the raw record and stay)
        learned more than ``ttl`` before ``now``, with their user ids: due to expire."""
        horizon = (now - ttl).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
        return self._short_term(
            f"memory_type != 'episode' AND learned_at < timestamp '{horizon}'", limit
        )

    def promotion_due(self, min_accesses: int, limit: int = 10_000) -> list[tuple[str, MemoryRecord]]:
        """Active short-term memories retrieved at least ``min_accesses`` times, with user ids."""
        return self._short_term(f"access_count >= {int(min_accesses)}", limit)

    def active_memories_created_before(
        self,
        created_before: datetime,
        *,
        exclude_types: Collection[str] = (),
        user_id: str | None = None,
    ) -> list[tuple[str, MemoryRecord]]:
        """Active memories created (event time) at or before ``created_before``, of any
        type but ``exclude_types``, with their user ids: every user's, or only ``user_id``'s.

        What a forgetting policy scores (:mod:`memstream.streams.tools.forgetting`). ``user_id``
        reaches the filter as its digest only, so an id no user has matches nothing.

        Raises
        ------
        ValueError
            An unknown memory type in ``exclude_types``, or a naive ``created_before``.
        """
        if isinstance(exclude_types, str):
            raise TypeError("exclude_types must be a collection of memory types, not a string")
        unknown = sorted(set(exclude_types) - MEMORY_TYPES)
        if unknown:
            raise ValueError(f"unknown memory types {unknown!r}; known: {sorted(MEMORY_TYPES)}")
        table = self._open()
        if table is None:
            return []
        if user_id is None:
            clauses = ["status = 'active'"]
        else:
            where = _user_filter(user_id, SearchFilters())
            assert where is not None
            clauses = [where]
        clauses.append(f"created_at <= timestamp '{_sql_time(created_before)}'")
        excluded = sorted(t for t in MEMORY_TYPES if t in exclude_types)
        if excluded:
            # Rebuilt from the closed set, never from the caller's strings.
            clauses.append("memory_type NOT IN (" + ", ".join(f"'{t}'" for t in excluded) + ")")
        query = (
            table.search()
            .where(" AND ".join(clauses))
            .select([*_RECORD_COLUMNS, "user_id"])
            .limit(None)
        )
        found = []
        for row in query.to_arrow().to_pylist():
            owner = row.pop("user_id")
            found.append((owner, MemoryRecord(**_record_fields(row))))
        return found

    def _short_term(self, condition: str, limit: int) -> list[tuple[str, MemoryRecord]]:
        table = self._open()
        if table is None:
            return []
        where = f"status = 'active' AND tier = 'short_term' AND {condition}"
        query = table.search().where(where).select([*_RECORD_COLUMNS, "user_id"]).limit(limit)
        due = []
        for row in query.to_arrow().to_pylist():
            user_id = row.pop("user_id")
            due.append((user_id, MemoryRecord(**_record_fields(row))))
        return due

    def _rows_by_key(
        self, table: Any, keys: Sequence[str], columns: Sequence[str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """Rows (all columns, or ``columns``) whose ``memory_key`` is one of ``keys``."""
        found: dict[str, dict[str, Any]] = {}
        # Few large IN lists: each query scans what the indexes do not cover, so fewer
        # queries cost less (a replay looks up 5,000 keys per batch).
        for start in range(0, len(keys), KEY_LOOKUP_CHUNK):
            chunk = keys[start : start + KEY_LOOKUP_CHUNK]
            assert all(_HEX64.fullmatch(k) for k in chunk)
            where = "memory_key IN (" + ", ".join(f"'{k}'" for k in chunk) + ")"
            query = table.search().where(where).limit(None)
            if columns is not None:
                query = query.select(list(columns))
            for row in query.to_arrow().to_pylist():
                found[row["memory_id"]] = row
        return found

    def _write_checked(self, table: Any, data: pa.Table, expected: int) -> None:
        inserted, updated = self._merge_with_retry(table, data)
        if inserted + updated != expected:
            # lancedb has had silent merge_insert failures (lancedb#3177, #3515); a short
            # write must stop the consumer before it moves past these offsets.
            raise ProjectionWriteError(
                f"merge_insert wrote {inserted} new + {updated} updated rows for "
                f"{expected} memories"
            )

    def _rows(
        self,
        items: list[tuple[MemoryAdded, SourcePosition]],
        vectors: np.ndarray,
        schema: pa.Schema,
    ) -> pa.Table:
        columns: dict[str, list[Any]] = {name: [] for name in schema.names if name != "vector"}
        for event, position in items:
            columns["memory_id"].append(event.memory_id)
            columns["user_id"].append(event.user_id)
            columns["user_key"].append(user_key(event.user_id))
            columns["agent_id"].append(event.agent_id)
            columns["session_id"].append(event.session_id)
            columns["memory_type"].append(event.memory_type)
            columns["content"].append(event.content)
            columns["context"].append(event.context)
            columns["search_text"].append(search_text(event))
            columns["importance"].append(event.importance)
            columns["tier"].append(event.tier)
            columns["created_at"].append(event.occurred_at.astimezone(UTC))
            columns["entities"].append(list(event.entities))
            columns["source_event_ids"].append(list(event.source_event_ids))
            columns["extraction_event_id"].append(event.extraction_event_id)
            columns["extractor"].append(event.extractor)
            columns["event_id"].append(event.event_id)
            columns["source_topic"].append(position.topic)
            columns["source_partition"].append(position.partition)
            columns["source_offset"].append(position.offset)
            columns["session_key"].append(session_filter_key(event.session_id))
            columns["memory_key"].append(memory_key(event.memory_id))
            columns["status"].append("active")
            columns["superseded_by"].append(None)
            columns["ended_at"].append(None)
            columns["reinforcement_count"].append(0)
            columns["last_reinforced_at"].append(None)
            columns["reinforced_by"].append([])
            columns["changed_offset"].append(-1)
            columns["learned_at"].append(position.timestamp)
            columns["access_count"].append(0)
            columns["last_accessed_at"].append(None)
            columns["access_offset"].append(-1)
            columns["embedding_model"].append(self.embedder.model_id)
        arrays = [pa.array(columns[f.name], type=f.type) for f in schema if f.name != "vector"]
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel(), pa.float32())
        arrays.append(pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]))
        return pa.Table.from_arrays(arrays, schema=schema)

    def _merge_with_retry(self, table: Any, data: pa.Table) -> tuple[int, int]:
        # merge_insert retries conflicts internally for up to 30 s; this outer loop covers
        # the conflicts it gives up on (lancedb#1597), e.g. against a concurrent optimize().
        for attempt in range(1, self.write_attempts + 1):
            try:
                return self._merge(table, data)
            except Exception as exc:
                if attempt == self.write_attempts or not _is_commit_conflict(exc):
                    raise
                delay = self.write_backoff_s * 2 ** (attempt - 1)
                log.warning("memories: commit conflict (attempt %d), retrying: %s", attempt, exc)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _merge(self, table: Any, data: pa.Table) -> tuple[int, int]:
        """One upsert; returns (inserted, updated) as LanceDB reports them."""
        result = (
            table.merge_insert("memory_id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(data)
        )
        return int(result.num_inserted_rows), int(result.num_updated_rows)

    def _writable_table(self, schema: pa.Schema) -> Any:
        table = self._open()
        if table is None:
            with self._lock:
                if self._table is None:
                    # exist_ok: a table created since the check is opened instead; its schema
                    # is then checked like any other.
                    self._db.create_table(self.table_name, schema=schema, exist_ok=True)
            table = self._open()
            assert table is not None
            if table.count_rows() == 0:
                # A table this writer starts (a replay's shadow): the ids it writes are all
                # the ids it holds, so re-delivery checks need no lookups.
                self._ids_written = set()
        dims = table.schema.field("vector").type.list_size
        if dims != schema.field("vector").type.list_size:
            raise EmbeddingModelMismatch(
                f"table {self.table_name!r} holds {dims}-dimensional vectors, the embedder "
                f"gives {schema.field('vector').type.list_size}: rebuild it from the topic"
            )
        return table

    def erase_user(self, user_id: str) -> int:
        """Remove every row of the user and every copy of them in the table's files; return
        the rows removed (0 when there are none: erasing twice changes nothing).

        A Lance delete only marks rows deleted: the data files, and every older version of
        the table, still hold them. So the user's rows are deleted, the other rows that share
        a data file with them are written again unchanged (an update moves them to new
        files, which leaves the old files with no live row), and ``optimize`` runs with no
        version kept (``cleanup_older_than=0``, ``delete_unverified=True``) twice: the first
        pass compacts and folds the change into the indexes, the second deletes the files of
        the index versions the first replaced. Afterwards no file of the table holds the
        user's content, vectors or index entries.

        Readers in other processes that still hold an older version lose it (they reopen on
        the next read): an erasure outranks them. Only this projection's table is touched.
        """
        table = self._open()
        if table is None:
            return 0
        key = user_key(user_id)
        assert _HEX64.fullmatch(key)
        placement = (
            table.search().select(["memory_id", "user_key", "_rowaddr"]).limit(None).to_arrow()
        ).to_pylist()
        mine = [row for row in placement if row["user_key"] == key]
        if not mine:
            return 0
        files = {row["_rowaddr"] >> 32 for row in mine}
        neighbours = sorted(
            memory_key(row["memory_id"])
            for row in placement
            if row["user_key"] != key and row["_rowaddr"] >> 32 in files
        )
        table.delete(f"user_key = '{key}'")
        for start in range(0, len(neighbours), KEY_LOOKUP_CHUNK):
            rows = self._rows_by_key(table, neighbours[start : start + KEY_LOOKUP_CHUNK])
            data = pa.Table.from_pylist(list(rows.values()), schema=table.schema)
            self._write_checked(table, data, len(rows))
        with warnings.catch_warnings():
            # The warning is about readers of older versions: cutting them off is the point.
            warnings.filterwarnings("ignore", message=".*cleanup_older_than.*")
            for _ in range(2):
                table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
        self._refreshed_version = table.version
        if self._ids_written is not None:
            self._ids_written.difference_update(row["memory_id"] for row in mine)
        log.info("memories: erased %d row(s) of one user from %r", len(mine), self.table_name)
        return len(mine)

    # --- opening --------------------------------------------------------------------

    def follow_live_table(self) -> bool:
        """Switch to the live table if a replay swapped another in; True if it switched.

        Costs one ``stat`` unless the pointer changed; a projection opened on a named table
        never switches.
        """
        if not self.follows_live_table:
            return False
        pointer = self.db_dir / "memories.CURRENT"
        try:
            info = pointer.stat()
            stamp: tuple[int, int] | None = (info.st_mtime_ns, info.st_ino)
        except FileNotFoundError:
            stamp = None
        if stamp == self._pointer_stamp:
            return False
        self._pointer_stamp = stamp
        name = live_name(self.db_dir, "memories", DEFAULT_TABLE)
        if name == self.table_name:
            return False
        with self._lock:
            log.info("memories: the live table is now %r (was %r)", name, self.table_name)
            self.table_name = name
            self._table = None
            self._ids_written = None
            self._fts_ready = False
            self._vector_index_ready = False
            self._scalar_indexes_ready = False
            self._refreshed_version = None
        return True

    def _open(self) -> Any:
        """The table, or None before the first write."""
        self.follow_live_table()
        if self._table is not None:
            return self._table
        with self._lock:
            if self._table is None:
                if not self._table_exists():
                    return None
                try:
                    table = self._db.open_table(self.table_name)
                except ValueError as exc:
                    # Another process is creating it: listed already, not openable yet.
                    if "was not found" in str(exc):
                        return None
                    raise
                model = (table.schema.metadata or {}).get(_SCHEMA_MODEL_KEY, b"").decode()
                version = (table.schema.metadata or {}).get(_SCHEMA_VERSION_KEY, b"1").decode()
                if version != SCHEMA_VERSION:
                    raise ProjectionOutdated(
                        f"table {self.table_name!r} has schema version {version}, this "
                        f"memstream writes {SCHEMA_VERSION}: delete it and let the projector "
                        "rebuild it from the memories topic"
                    )
                if model != self.embedder.model_id:
                    raise EmbeddingModelMismatch(
                        f"table {self.table_name!r} holds vectors of {model!r}, the embedder "
                        f"is {self.embedder.model_id!r}: rebuild it from the topic"
                    )
                self._table = table
        return self._table

    def _table_exists(self) -> bool:
        page_token: str | None = None
        while True:  # list_tables() is paginated
            page = self._db.list_tables(page_token=page_token)
            if self.table_name in page.tables:
                return True
            page_token = page.page_token
            if not page_token:
                return False

    # --- index maintenance ----------------------------------------------------------

    def refresh_indexes(self) -> None:
        """Keep the indexes current and the files compact; call it on a schedule.

        Creates the full-text index on ``search_text`` if missing, builds a vector index once
        the table reaches ``vector_index_min_rows`` (by default none, and one found is
        dropped), then runs ``optimize()``: compaction of small files, new rows folded into
        the indexes, and removal of versions older than ``keep_versions_for``. Costs 20-30 ms
        on a small table, 100-250 ms at 20,000 rows; returns at once if nothing was written
        since the last call. Every call that does work commits new versions and index
        files, so call it every few seconds, not after every write (:func:`memstream.streams.projector.memories.index_refresh_due`).
        """
        table = self._open()
        if table is None or table.version == self._refreshed_version:
            # Nothing written since the last refresh: optimize() would still cost 100-250 ms
            # on a 20k-row table (measured) and commit versions of its own.
            return
        if not self._has_fts(table):
            # Positions off: no phrase queries, a smaller index that is faster to update.
            table.create_index("search_text", config=FTS(with_position=False), replace=False)
            self._fts_ready = True
        if self.vector_index_min_rows is None:
            if self._has_vector_index(table):
                # A table of an older memstream: the index would only cost refreshes.
                for index in table.list_indices():
                    if list(index.columns) == ["vector"]:
                        table.drop_index(index.name)
                self._vector_index_ready = False
        elif not self._has_vector_index(table) and table.count_rows() >= self.vector_index_min_rows:
            # HNSW over scalar-quantised vectors: on a per-user prefiltered query it kept
            # recall 1.0 where IVF_PQ lost 20 % (5,000 rows, 100 users).
            table.create_index("vector", config=HnswSq(distance_type="cosine"))
            self._vector_index_ready = True
        self._ensure_scalar_indexes(table)
        table.optimize(cleanup_older_than=self.keep_versions_for)
        self._refreshed_version = table.version
        log.debug(
            "memories: indexes refreshed at version %d; LanceDB caches hold %d bytes",
            self._refreshed_version,
            self._cache_session.size_bytes,
        )
        del table  # the last handle here on the old cache session
        self._drop_cache()
        # optimize() allocates and frees tens of MB in LanceDB's threads; without a trim
        # glibc keeps the freed pages of those threads' arenas (measured: ~60 MB).
        release_freed_memory()

    def _drop_cache(self) -> None:
        """Reconnect with a cache session of this projection's own, empty.

        optimize() caches the index parts it reads to merge them (lance#2905 reports it for
        PQ partitions; here the files were full-text index parts), and the next optimize()
        replaces those parts: dead entries, which held the deleted files open (134 of them
        after a 300 s soak) until the byte bound evicted them. So the writer starts each
        refresh interval with an empty cache; what it reloads are the current indexes only.
        Readers keep the shared session (:func:`cache_session`).
        """
        index_bytes, metadata_bytes = self._cache_bytes
        with self._lock:
            self._cache_session = lancedb.Session(
                index_cache_size_bytes=index_bytes, metadata_cache_size_bytes=metadata_bytes
            )
            self._db = lancedb.connect(
                self.db_dir,
                read_consistency_interval=self._read_consistency_interval,
                session=self._cache_session,
            )
            self._table = None  # reopened on the next read or write, on the new session

    def _ensure_scalar_indexes(self, table: Any) -> None:
        """B-tree indexes on the keys every filter and lookup names, bitmaps on the small
        enums: at 1M rows they halved retrieval p95 (86 -> 47 ms) and turn the lookups of
        writes (``memory_key IN (...)``) from scans into probes. optimize() keeps them
        current."""
        if self._scalar_indexes_ready:
            return
        present = {tuple(index.columns) for index in table.list_indices()}
        for column, config in _SCALAR_INDEXES:
            if (column,) not in present:
                table.create_index(column, config=config)
        self._scalar_indexes_ready = True

    def _has_fts(self, table: Any) -> bool:
        if not self._fts_ready:
            self._fts_ready = any(
                index.index_type == "FTS" and list(index.columns) == ["search_text"]
                for index in table.list_indices()
            )
        return self._fts_ready

    def _has_vector_index(self, table: Any) -> bool:
        if not self._vector_index_ready:
            self._vector_index_ready = any(
                list(index.columns) == ["vector"] for index in table.list_indices()
            )
        return self._vector_index_ready

    # --- reading --------------------------------------------------------------------

    def positions(self) -> dict[tuple[str, int], int]:
        """The next offset to read per (topic, partition): max projected offset + 1.

        Examples
        --------
        >>> projection.positions()  # doctest: +SKIP
        {('memstream.memories', 0): 42, ('memstream.memories', 3): 7}
        """
        table = self._open()
        if table is None:
            return {}
        rows = (
            table.search()
            .select(["source_topic", "source_partition", "source_offset", "changed_offset"])
            .limit(None)
            .to_arrow()
        )
        if rows.num_rows == 0:
            return {}
        grouped = rows.group_by(["source_topic", "source_partition"]).aggregate(
            [("source_offset", "max"), ("changed_offset", "max")]
        )
        # A memory's changes come from the same topic and partition as its add (one user's
        # events share a partition), so the later of the two is this partition's position.
        return {
            (row["source_topic"], int(row["source_partition"])): max(
                int(row["source_offset_max"]), int(row["changed_offset_max"])
            )
            + 1
            for row in grouped.to_pylist()
        }

    def search(
        self,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        memory_types: Sequence[str] | None = None,
        filters: SearchFilters | None = None,
    ) -> list[MemoryHit]:
        """The user's memories most relevant to ``query``, best first.

        The ``limit`` nearest memories by meaning (cosine) and the ``limit`` best by words
        (BM25, LanceDB's full-text index) are each scored by their own relevance
        (:func:`fuse`) and the best ``limit`` returned. The user filter is applied inside
        both legs, so other users' rows never take a place in the limit. Until the
        full-text index exists, the words part of every score is 0 (the same scale).

        Parameters
        ----------
        user_id
            Whose memories; any string, it never reaches a filter as such.
        query
            Free text; a blank query finds nothing.
        limit
            At most this many hits (1 to 1,000).
        memory_types
            Only these types (values of ``MemoryType``); None means all.
        filters
            More narrowing (importance, session, time range, inactive memories).

        Raises
        ------
        ValueError
            ``limit`` out of range, or an unknown memory type.
        """
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_SEARCH_LIMIT}")
        if memory_types is not None:
            if isinstance(memory_types, str):
                raise TypeError("memory_types must be a sequence of memory types, not a string")
            filters = replace(filters or SearchFilters(), memory_types=tuple(memory_types))
        where = _user_filter(user_id, filters or SearchFilters())
        table = self._open()
        if table is None or where is None or not query.strip():
            return []
        # The words leg needs no vector: it runs while the query is embedded and the
        # vector leg searched (LanceDB releases the GIL), so a search costs the slower leg.
        by_words = (
            _LEG_POOL.submit(_search_words, table, query, where, limit)
            if self._has_fts(table)
            else None
        )
        vector = self.embedder.embed([query])[0]
        by_meaning = (
            table.search(vector)
            .distance_type("cosine")
            .where(where, prefilter=True)
            .select([*_RECORD_COLUMNS, "_distance"])
            .limit(limit)
            .to_arrow()
        )
        return fuse(vector, by_meaning, by_words.result() if by_words else None, limit)

    def neighbours(
        self,
        user_id: str,
        vector: np.ndarray,
        *,
        limit: int = 5,
        before: datetime | None = None,
    ) -> list[tuple[MemoryRecord, np.ndarray]]:
        """The user's memories nearest to ``vector`` (exact cosine, never the approximate
        index), with their vectors, nearest first.

        Without ``before``: the active ones. With it: the view just before that event time,
        memories recorded before it and not ended before it, whatever was written since (a
        decision made again after a crash sees what the first one saw).
        """
        if before is None:
            filters = SearchFilters()
        else:
            filters = SearchFilters(as_of=before - timedelta(microseconds=1))
        where = _user_filter(user_id, filters)
        table = self._open()
        if table is None or where is None:
            return []
        rows = (
            table.search(vector)
            .distance_type("cosine")
            .where(where, prefilter=True)
            .bypass_vector_index()
            .select([*_RECORD_COLUMNS, "vector", "_distance"])
            .limit(limit)
            .to_arrow()
        )
        vectors = rows.column("vector").to_pylist()
        return [
            (MemoryRecord(**_record_fields(row)), np.asarray(found, dtype=np.float32))
            for row, found in zip(rows.select(_RECORD_COLUMNS).to_pylist(), vectors, strict=True)
        ]

    def get(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        """One of the user's memories by id, active or not; None if it is not theirs."""
        table = self._open()
        if table is None:
            return None
        row = self._rows_by_key(table, [memory_key(memory_id)], _RECORD_COLUMNS + ["user_key"])
        found = row.get(memory_id)
        if found is None or found.pop("user_key") != user_key(user_id):
            return None
        return MemoryRecord(**_record_fields(found))

    def list_memories(self, user_id: str, *, include_inactive: bool = False) -> list[MemoryRecord]:
        """The user's memories (active ones unless asked otherwise), newest first."""
        where = _user_filter(user_id, SearchFilters(include_inactive=include_inactive))
        table = self._open()
        if table is None or where is None:
            return []
        rows = table.search().where(where).select(_RECORD_COLUMNS).limit(None).to_arrow()
        rows = rows.sort_by([("created_at", "descending"), ("memory_id", "ascending")])
        return [MemoryRecord(**_record_fields(row)) for row in rows.to_pylist()]

    def view_rows(self, columns: Sequence[str]) -> list[dict[str, Any]]:
        """Every row of the table (every user, every status), ``columns`` only: for
        fingerprints and exports, never for a user-facing read."""
        table = self._open()
        if table is None:
            return []
        return list(table.search().select(list(columns)).limit(None).to_arrow().to_pylist())

    def exists(self) -> bool:
        """Whether the table has been created (by a first write)."""
        return self._open() is not None

    def probe(self, *, writable: bool = False) -> None:
        """Raise unless the store answers now: the table (if any) reports its version, and
        with ``writable`` a small file can be written and synced in the database directory
        (a full disk fails here). Tells a failing store from a record it cannot take."""
        table = self._open()
        if table is not None:
            table.version  # noqa: B018 - reads the latest manifest
        if writable:
            self.db_dir.mkdir(parents=True, exist_ok=True)
            probe = self.db_dir / f".probe-{os.getpid()}-{threading.get_ident()}"
            with probe.open("wb") as handle:
                handle.write(b"memstream store probe")
                handle.flush()
                os.fsync(handle.fileno())
            probe.unlink()

    def drop(self) -> None:
        """Delete the table and its files (a scratch or superseded shadow table)."""
        with self._lock:
            if self._table_exists():
                self._db.drop_table(self.table_name)
            self._table = None
            self._ids_written = None

    def count(self, user_id: str | None = None) -> int:
        """Rows of one user, or of the whole table: every status (active, superseded,
        deleted, expired, forgotten), as :meth:`erase_user` removes them all."""
        table = self._open()
        if table is None:
            return 0
        if user_id is None:
            return int(table.count_rows())
        return int(table.count_rows(_user_filter(user_id, SearchFilters(include_inactive=True))))


def fuse(
    query_vector: np.ndarray, by_meaning: pa.Table, by_words: pa.Table | None, limit: int
) -> list[MemoryHit]:
    """The hits of both legs of a search, each scored by its own relevance, best first.

    ``by_meaning`` holds the record columns and ``_distance`` (cosine distance), ``by_words``
    the record columns, ``vector`` and ``_score`` (BM25). ``similarity`` is ``1 -
    _distance``, or computed from the row's vector for a memory found by words alone, so
    every hit has its real similarity; ``words`` is 0 for a memory the full-text leg did not
    return. Equal scores keep the vector leg's order, then the full-text leg's.
    """
    found: dict[str, list[Any]] = {}  # memory id -> [leg, row, similarity, words]
    distances = by_meaning.column("_distance").to_numpy(zero_copy_only=False)
    for row, (memory_id, distance) in enumerate(
        zip(by_meaning.column("memory_id").to_pylist(), distances.tolist(), strict=True)
    ):
        found[memory_id] = [0, row, min(max(1.0 - distance, 0.0), 1.0), 0.0]
    if by_words is not None and by_words.num_rows:
        bm25 = np.maximum(by_words.column("_score").to_numpy(zero_copy_only=False), 0.0)
        saturated = (bm25 / (bm25 + BM25_SATURATION)).tolist()
        for row, memory_id in enumerate(by_words.column("memory_id").to_pylist()):
            entry = found.get(memory_id)
            if entry is None:
                found[memory_id] = [1, row, None, saturated[row]]
            else:
                entry[3] = saturated[row]
        alone = [entry for entry in found.values() if entry[2] is None]
        if alone:
            vectors = by_words.column("vector").take([entry[1] for entry in alone])
            matrix = np.asarray(vectors.to_pylist(), dtype=np.float32)
            norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query_vector))
            cosines = matrix @ query_vector / np.maximum(norms, 1e-12)
            for entry, cosine in zip(alone, cosines.tolist(), strict=True):
                entry[2] = min(max(cosine, 0.0), 1.0)
    scored = [
        (VECTOR_SHARE * entry[2] + (1 - VECTOR_SHARE) * entry[3], order, entry)
        for order, entry in enumerate(found.values())
    ]
    scored.sort(key=lambda item: (-item[0], item[1]))
    kept = scored[:limit]
    # One take and one conversion per leg, of the kept rows only.
    records: dict[tuple[int, int], dict[str, Any]] = {}
    for leg, source in enumerate((by_meaning, by_words)):
        rows = [entry[1] for _, _, entry in kept if entry[0] == leg]
        if rows and source is not None:
            taken = source.select(_RECORD_COLUMNS).take(rows).to_pylist()
            records.update({(leg, row): record for row, record in zip(rows, taken, strict=True)})
    return [
        MemoryHit(
            **_record_fields(records[(leg, row)]), score=score, similarity=similarity, words=words
        )
        for score, _, (leg, row, similarity, words) in kept
    ]


def _search_words(table: Any, query: str, where: str, limit: int) -> pa.Table:
    """The full-text leg: the ``limit`` rows ``where`` selects that match ``query`` best."""
    return (
        table.search(query, query_type="fts", fts_columns="search_text")
        .where(where, prefilter=True)
        .select([*_RECORD_COLUMNS, "vector", "_score"])
        .limit(limit)
        .to_arrow()
    )


def _user_filter(user_id: str, filters: SearchFilters) -> str | None:
    """The SQL filter for one user's rows; None if it can match nothing.

    Only code-made text enters it: 64-hex-digit keys, members of a closed set, numbers and
    timestamps formatted here.
    """
    if not isinstance(user_id, str):
        raise TypeError("user_id must be a string")
    key = user_key(user_id)
    assert _HEX64.fullmatch(key)
    clauses = [f"user_key = '{key}'"]
    if filters.as_of is not None:
        # What was believed then: recorded by then, not ended by then. A deleted memory
        # stays out of every read, past ones too (deletion is a user's request).
        stamp = _sql_time(filters.as_of)
        clauses.append(f"created_at <= timestamp '{stamp}'")
        if not filters.include_inactive:
            clauses.append(
                f"status != 'deleted' AND (ended_at IS NULL OR ended_at > timestamp '{stamp}')"
            )
    elif not filters.include_inactive:
        clauses.append("status = 'active'")
    memory_types = filters.memory_types
    if memory_types is not None:
        if isinstance(memory_types, str):
            raise TypeError("memory_types must be a sequence of memory types, not a string")
        unknown = [t for t in memory_types if t not in MEMORY_TYPES]
        if unknown:
            raise ValueError(f"unknown memory types {unknown!r}; known: {sorted(MEMORY_TYPES)}")
        if not memory_types:
            return None
        # Rebuilt from the closed set, never from the caller's strings.
        chosen = sorted(t for t in MEMORY_TYPES if t in memory_types)
        clauses.append("memory_type IN (" + ", ".join(f"'{t}'" for t in chosen) + ")")
    if filters.min_importance is not None:
        clauses.append(f"importance >= {float(filters.min_importance)!r}")
    if filters.session_id is not None:
        clauses.append(f"session_key = '{session_filter_key(filters.session_id)}'")
    for bound, operator in ((filters.since, ">="), (filters.until, "<")):
        if bound is not None:
            clauses.append(f"created_at {operator} timestamp '{_sql_time(bound)}'")
    return " AND ".join(clauses)


def _sql_time(moment: datetime) -> str:
    """A timestamp literal's text, formatted here from a datetime (never from a string)."""
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise ValueError("time filters need a timezone-aware datetime")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")


def _record_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "created_at": row["created_at"].astimezone(UTC),
        "ended_at": row["ended_at"].astimezone(UTC) if row.get("ended_at") else None,
        "source_event_ids": tuple(row["source_event_ids"]),
        "entities": tuple(row["entities"]),
    }
