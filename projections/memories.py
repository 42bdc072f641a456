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
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS, HnswSq
from lancedb.rerankers import RRFReranker

from memstream.models.events import MemoryAdded, MemoryType
from memstream.projections.embedder import Embedder

log = logging.getLogger(__name__)

#: The memory types a filter may name; anything else is refused before a query is built.
MEMORY_TYPES: frozenset[str] = frozenset(get_args(MemoryType))
#: Reciprocal-rank-fusion constant (the usual 60, as RRFReranker's default).
RRF_K = 60
MAX_SEARCH_LIMIT = 1_000

_HEX64 = re.compile(r"[0-9a-f]{64}")
_TABLE_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")
_SCHEMA_MODEL_KEY = b"memstream.embedding_model"


class ProjectionWriteError(RuntimeError):
    """A write did not touch the rows it should have (LanceDB reported other counts)."""


class EmbeddingModelMismatch(RuntimeError):
    """The table holds vectors of another model: rebuild it from the topic."""


class EncryptedContentError(ValueError):
    """An event's content is ciphertext; it must be decrypted before it is projected."""


def user_key(user_id: str) -> str:
    """The filter key of a user: sha256 hex of the id, the only form a filter ever holds.

    Examples
    --------
    >>> len(user_key("x' OR '1'='1"))
    64
    """
    # surrogatepass: a lone surrogate (legal in a decoded JSON string) still maps to one key.
    return hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class SourcePosition:
    """Where an event sits in the log."""

    topic: str
    partition: int
    offset: int


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


@dataclass(frozen=True, kw_only=True)
class MemoryHit(MemoryRecord):
    """A memory found by :meth:`MemoryProjection.search`; ``score`` is the fused relevance."""

    score: float


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
            required("importance", pa.float64()),
            required("tier", pa.string()),
            required("created_at", pa.timestamp("us", tz="UTC")),
            required("entities", pa.list_(pa.string())),
            required("source_event_ids", pa.list_(pa.string())),
            required("extraction_event_id", pa.string()),
            required("event_id", pa.string()),
            required("source_topic", pa.string()),
            required("source_partition", pa.int32()),
            required("source_offset", pa.int64()),
            required("embedding_model", pa.string()),
            required("vector", pa.list_(pa.float32(), dimensions)),
        ],
        metadata={_SCHEMA_MODEL_KEY: embedding_model.encode()},
    )


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
        Name of the table inside ``db_dir``.
    vector_index_min_rows
        Build an ANN index once the table holds this many rows; below it a flat scan of
        the user's rows is exact and fast.
    keep_versions_for
        Table versions younger than this survive cleanup, so a reader in another process
        that holds one is not cut off.
    read_consistency_interval
        How stale reads may be relative to writes of other processes (0 = always current).

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
        table_name: str = "memories",
        *,
        vector_index_min_rows: int = 5_000,
        keep_versions_for: timedelta = timedelta(minutes=10),
        read_consistency_interval: timedelta | None = timedelta(0),
    ) -> None:
        if not _TABLE_NAME.fullmatch(table_name):
            raise ValueError(f"invalid table name {table_name!r}")
        self.db_dir = Path(db_dir)
        self.embedder = embedder
        self.table_name = table_name
        self.vector_index_min_rows = vector_index_min_rows
        self.keep_versions_for = keep_versions_for
        self._db = lancedb.connect(self.db_dir, read_consistency_interval=read_consistency_interval)
        self._table: Any = None  # lancedb.table.LanceTable, opened lazily
        self._fts_ready = False
        self._vector_index_ready = False
        self._refreshed_version: int | None = None
        self._lock = threading.Lock()

    # --- writing --------------------------------------------------------------------

    def apply(self, batch: Sequence[tuple[MemoryAdded, SourcePosition]]) -> int:
        """Upsert the memories of ``batch`` in one write; return the number of rows written.

        Events with the same ``memory_id`` collapse to the last one. Applying the same
        events again leaves the table as it was (same rows, same values). Indexes are not
        touched: see :meth:`refresh_indexes`.

        Raises
        ------
        ProjectionWriteError
            LanceDB reported fewer (or more) inserted + updated rows than were written.
        EncryptedContentError
            An event's content is encrypted; nothing of the batch is written.
        """
        latest: dict[str, tuple[MemoryAdded, SourcePosition]] = {}
        for event, position in batch:
            if event.encryption is not None and "content" in event.encryption.fields:
                raise EncryptedContentError(
                    f"memory {event.memory_id} (event {event.event_id}) has encrypted content"
                )
            latest[event.memory_id] = (event, position)
        if not latest:
            return 0
        items = list(latest.values())
        vectors = self.embedder.embed([event.content for event, _ in items])
        if vectors.shape[0] != len(items) or not np.isfinite(vectors).all():
            raise ValueError(f"embedder returned {vectors.shape} / non-finite vectors")
        schema = memory_schema(vectors.shape[1], self.embedder.model_id)
        data = self._rows(items, vectors, schema)
        table = self._writable_table(schema)
        inserted, updated = self._merge_with_retry(table, data)
        if inserted + updated != len(items):
            # lancedb has had silent merge_insert failures (lancedb#3177, #3515); a short
            # write must stop the consumer before it moves past these offsets.
            raise ProjectionWriteError(
                f"merge_insert wrote {inserted} new + {updated} updated rows for "
                f"{len(items)} memories"
            )
        return len(items)

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
            columns["importance"].append(event.importance)
            columns["tier"].append(event.tier)
            columns["created_at"].append(event.occurred_at.astimezone(UTC))
            columns["entities"].append(list(event.entities))
            columns["source_event_ids"].append(list(event.source_event_ids))
            columns["extraction_event_id"].append(event.extraction_event_id)
            columns["event_id"].append(event.event_id)
            columns["source_topic"].append(position.topic)
            columns["source_partition"].append(position.partition)
            columns["source_offset"].append(position.offset)
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
        dims = table.schema.field("vector").type.list_size
        if dims != schema.field("vector").type.list_size:
            raise EmbeddingModelMismatch(
                f"table {self.table_name!r} holds {dims}-dimensional vectors, the embedder "
                f"gives {schema.field('vector').type.list_size}: rebuild it from the topic"
            )
        return table

    # --- opening --------------------------------------------------------------------

    def _open(self) -> Any:
        """The table, or None before the first write."""
        if self._table is not None:
            return self._table
        with self._lock:
            if self._table is None:
                if not self._table_exists():
                    return None
                table = self._db.open_table(self.table_name)
                model = (table.schema.metadata or {}).get(_SCHEMA_MODEL_KEY, b"").decode()
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

        Creates the full-text index on ``content`` if missing, builds a vector index once
        the table reaches ``vector_index_min_rows``, then runs ``optimize()``: compaction of
        small files, new rows folded into the indexes, and removal of versions older than
        ``keep_versions_for``. Costs 20-30 ms on a small table, 100-250 ms at 20,000 rows;
        returns at once if nothing was written since the last call.
        """
        table = self._open()
        if table is None or table.version == self._refreshed_version:
            # Nothing written since the last refresh: optimize() would still cost 100-250 ms
            # on a 20k-row table (measured) and commit versions of its own.
            return
        if not self._has_fts(table):
            # Positions off: no phrase queries, a smaller index that is faster to update.
            table.create_index("content", config=FTS(with_position=False), replace=False)
            self._fts_ready = True
        if not self._has_vector_index(table) and table.count_rows() >= self.vector_index_min_rows:
            # HNSW over scalar-quantised vectors: on a per-user prefiltered query it kept
            # recall 1.0 where IVF_PQ lost 20 % (5,000 rows, 100 users).
            table.create_index("vector", config=HnswSq(distance_type="cosine"))
            self._vector_index_ready = True
        table.optimize(cleanup_older_than=self.keep_versions_for)
        self._refreshed_version = table.version

    def _has_fts(self, table: Any) -> bool:
        if not self._fts_ready:
            self._fts_ready = any(
                index.index_type == "FTS" and list(index.columns) == ["content"]
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
            .select(["source_topic", "source_partition", "source_offset"])
            .limit(None)
            .to_arrow()
        )
        if rows.num_rows == 0:
            return {}
        grouped = rows.group_by(["source_topic", "source_partition"]).aggregate(
            [("source_offset", "max")]
        )
        return {
            (row["source_topic"], int(row["source_partition"])): int(row["source_offset_max"]) + 1
            for row in grouped.to_pylist()
        }

    def search(
        self,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        memory_types: Sequence[str] | None = None,
    ) -> list[MemoryHit]:
        """The user's memories most relevant to ``query``, best first.

        Vector and full-text results are fused with reciprocal-rank fusion; the filter is
        applied before ranking, so other users' rows never take a place in the limit. Until
        the full-text index exists, ranking is by vector alone (scored the same way).

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

        Raises
        ------
        ValueError
            ``limit`` out of range, or an unknown memory type.
        """
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_SEARCH_LIMIT}")
        where = _user_filter(user_id, memory_types)
        table = self._open()
        if table is None or where is None or not query.strip():
            return []
        vector = self.embedder.embed([query])[0]
        if self._has_fts(table):
            # No select(): the hybrid legs reject score columns in a projection, and the
            # vectors of `limit` rows are cheap to drop afterwards.
            rows = (
                table.search(query_type="hybrid")
                .vector(vector)
                .text(query)
                .distance_type("cosine")
                .where(where, prefilter=True)
                .limit(limit)
                .rerank(RRFReranker(K=RRF_K))
                .to_arrow()
            )
            scores = rows.column("_relevance_score").to_pylist()
        else:
            rows = (
                table.search(vector)
                .distance_type("cosine")
                .where(where, prefilter=True)
                .select([*_RECORD_COLUMNS, "_distance"])
                .limit(limit)
                .to_arrow()
            )
            # The score RRF gives a hit found by one ranking only, so scores keep one scale.
            scores = [1.0 / (RRF_K + rank) for rank in range(1, rows.num_rows + 1)]
        return [
            MemoryHit(**_record_fields(row), score=float(score))
            for row, score in zip(rows.select(_RECORD_COLUMNS).to_pylist(), scores, strict=True)
        ]

    def list_memories(self, user_id: str) -> list[MemoryRecord]:
        """All of the user's memories, newest first."""
        where = _user_filter(user_id, None)
        table = self._open()
        if table is None or where is None:
            return []
        rows = table.search().where(where).select(_RECORD_COLUMNS).limit(None).to_arrow()
        rows = rows.sort_by([("created_at", "descending"), ("memory_id", "ascending")])
        return [MemoryRecord(**_record_fields(row)) for row in rows.to_pylist()]

    def count(self, user_id: str | None = None) -> int:
        """Rows of one user, or of the whole table."""
        table = self._open()
        if table is None:
            return 0
        if user_id is None:
            return int(table.count_rows())
        return int(table.count_rows(_user_filter(user_id, None)))


def _user_filter(user_id: str, memory_types: Sequence[str] | None) -> str | None:
    """The SQL filter for one user's rows; None if it can match nothing.

    Only code-made text enters it: a 64-hex-digit key and members of a closed set.
    """
    if not isinstance(user_id, str):
        raise TypeError("user_id must be a string")
    key = user_key(user_id)
    assert _HEX64.fullmatch(key)
    clauses = [f"user_key = '{key}'"]
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
    return " AND ".join(clauses)


def _record_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "created_at": row["created_at"].astimezone(UTC),
        "source_event_ids": tuple(row["source_event_ids"]),
    }
