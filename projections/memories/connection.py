"""The connection to one LanceDB memories table: opening it lazily, checking that its
schema version and embedding model are the ones this memstream writes, following the live
table a replay may swap in, and the lookups by memory key every part of the projection
makes. :class:`~memstream.projections.memories.table.MemoryProjection` builds on it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from memstream.projections.embedder import Embedder
from memstream.projections.memories.cache import (
    INDEX_CACHE_BYTES,
    METADATA_CACHE_BYTES,
    cache_session,
)
from memstream.projections.memories.errors import EmbeddingModelMismatch, ProjectionOutdated
from memstream.projections.memories.schema import (
    _HEX64,
    _SCHEMA_MODEL_KEY,
    _SCHEMA_VERSION_KEY,
    _TABLE_NAME,
    DEFAULT_TABLE,
    SCHEMA_VERSION,
)
from memstream.projections.memories.store import ProjectionStore

log = logging.getLogger(__name__)

#: Keys per ``memory_key IN (...)`` lookup.
KEY_LOOKUP_CHUNK = 5_000


def partition_table(base: str, partition: int | None) -> str:
    """The table of one topic partition's memories in a projection named ``base``
    (``memories-p3``); ``base`` itself for a table of every partition.

    Examples
    --------
    >>> partition_table("memories", 3), partition_table("memories", None)
    ('memories-p3', 'memories')
    """
    return base if partition is None else f"{base}-p{partition}"


class TableConnection:
    """The table a projection reads and writes, opened on first use (None before the first
    write); the parameters are :class:`~memstream.projections.memories.table.MemoryProjection`'s."""

    def __init__(
        self,
        db_dir: Path | ProjectionStore,
        embedder: Embedder,
        table_name: str | None = None,
        *,
        partition: int | None = None,
        vector_index_min_rows: int | None = None,
        keep_versions_for: timedelta = timedelta(minutes=1),
        read_consistency_interval: timedelta | None = timedelta(0),
        index_cache_bytes: int = INDEX_CACHE_BYTES,
        metadata_cache_bytes: int = METADATA_CACHE_BYTES,
    ) -> None:
        #: Where the table lives (a directory, or an object store).
        self.store = ProjectionStore.of(db_dir)
        self.follows_live_table = table_name is None
        #: The topic partition whose memories the table holds (None: every partition's).
        self.partition = partition
        base = (
            self.store.live_name("memories", DEFAULT_TABLE) if table_name is None else table_name
        )
        table_name = partition_table(base, partition)
        if not _TABLE_NAME.fullmatch(table_name):
            raise ValueError(f"invalid table name {table_name!r}")
        self.embedder = embedder
        self.table_name = table_name
        self._pointer_stamp: Hashable | None = None
        self._pointer_due = 0.0  # monotonic time of the next look at an object-store pointer
        self.vector_index_min_rows = vector_index_min_rows
        self.keep_versions_for = keep_versions_for
        self._read_consistency_interval = read_consistency_interval
        self._cache_bytes = (index_cache_bytes, metadata_cache_bytes)
        self._cache_session = cache_session(index_cache_bytes, metadata_cache_bytes)
        self._db = self.store.connect(
            read_consistency_interval=read_consistency_interval, session=self._cache_session
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
        self.vector_donor: TableConnection | None = None
        #: Memories whose vectors this connection embedded (events without a vector of
        #: this table's model: older events, or a model change).
        self.vectors_embedded = 0

    @property
    def db_dir(self) -> Path:
        """The LanceDB directory of a table on a local store (see :attr:`store`)."""
        return self.store.directory

    # --- opening --------------------------------------------------------------------

    def follow_live_table(self) -> bool:
        """Switch to the live table if a replay swapped another in; True if it switched.

        Costs one ``stat`` unless the pointer changed; on an object store one GET, at most
        once per ``pointer_check_s`` of the store. A projection opened on a named table
        never switches.
        """
        if not self.follows_live_table:
            return False
        if self.store.pointer_check_s:
            now = time.monotonic()
            if now < self._pointer_due:
                return False
            self._pointer_due = now + self.store.pointer_check_s
        stamp = self.store.pointer_stamp("memories")
        if stamp == self._pointer_stamp:
            return False
        self._pointer_stamp = stamp
        name = partition_table(self.store.live_name("memories", DEFAULT_TABLE), self.partition)
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

    def exists(self) -> bool:
        """Whether the table has been created (by a first write)."""
        return self._open() is not None

    def probe(self, *, writable: bool = False) -> None:
        """Raise unless the store answers now: the table (if any) reports its version, and
        with ``writable`` a small file can be written and synced in the store (a full disk
        fails here; see :meth:`ProjectionStore.probe_writable`). Tells a failing store from
        a record it cannot take."""
        table = self._open()
        if table is not None:
            table.version  # noqa: B018 - reads the latest manifest
        if writable:
            self.store.probe_writable()

    def drop(self) -> None:
        """Delete the table and its files (a scratch or superseded shadow table)."""
        with self._lock:
            if self._table_exists():
                self._db.drop_table(self.table_name)
            self._table = None
            self._ids_written = None
