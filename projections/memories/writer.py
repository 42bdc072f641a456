"""Writing the memories table: memory events folded into rows (new memories, and the
lifecycle changes of :func:`memstream.models.lifecycle.apply_change`), retrievals counted,
a user erased. Every write is one batched ``merge_insert`` that records the source offsets
of its events (the projection's tracking record), is retried on commit conflicts and checks
the row counts LanceDB reports."""

from __future__ import annotations

import base64
import binascii
import logging
import time
import warnings
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memstream.models.events.memory import MemoriesRetrieved, MemoryAdded, MemoryChange
from memstream.projections.embedder import embed_groups
from memstream.projections.memories.connection import KEY_LOOKUP_CHUNK, TableConnection
from memstream.projections.memories.errors import (
    EmbeddingModelMismatch,
    ProjectionWriteError,
)
from memstream.projections.memories.fold import (
    Row,
    first_adds,
    fold_accesses,
    fold_changes,
    new_row,
    rows_table,
    split_adds,
)
from memstream.projections.memories.records import SourcePosition
from memstream.projections.memories.schema import (
    _HEX64,
    embedded_texts,
    memory_key,
    memory_schema,
    search_text,
    user_key,
)

log = logging.getLogger(__name__)


def _is_commit_conflict(exc: Exception) -> bool:
    # lancedb surfaces Lance's CommitConflict / RetryableCommitConflict as plain
    # RuntimeError/OSError with the variant in the message; there is no exception class.
    text = str(exc).lower()
    return "commit conflict" in text or "write contention" in text


class MemoryWriter(TableConnection):
    """The writing part of :class:`~memstream.projections.memories.table.MemoryProjection`:
    the only writer of its table."""

    #: Attempts of one merge when concurrent commits conflict, and the first backoff.
    write_attempts = 4
    write_backoff_s = 0.05
    #: Rows a bulk build (:meth:`stage`) holds before it writes the table: past that, the
    #: table is written and the rest goes through merges, so memory stays bounded.
    bulk_max_rows = 50_000
    #: The rows of a bulk build, by memory id, and their vectors (None: not staging).
    _staged: dict[str, Row] | None = None
    _staged_vectors: dict[str, np.ndarray]

    # --- bulk build (a fresh replay) ----------------------------------------------------

    def stage(self) -> None:
        """Build the table in bulk: from now on :meth:`apply`, :meth:`apply_accesses` and
        :meth:`erase_user` fold into rows held in memory, by the same rules
        (:mod:`~memstream.projections.memories.fold`), and :meth:`write_staged` writes them
        with one ``create_table``. A replay into a new table takes this path: one write
        instead of a merge per batch (each of which looks rows up and commits a version).

        Raises
        ------
        ValueError
            The table exists already (a resumed replay goes through merges).
        """
        if self._open() is not None:
            raise ValueError(f"table {self.table_name!r} exists: only a new table is built in bulk")
        self._staged = {}
        self._staged_vectors = {}

    @property
    def staging(self) -> bool:
        """Whether writes are held in memory for :meth:`write_staged`."""
        return self._staged is not None

    def write_staged(self) -> int:
        """Write the rows held since :meth:`stage` with one ``create_table`` (none: no
        table, as merges would leave it), stop staging, and return the rows written.

        Raises
        ------
        ProjectionWriteError
            The table holds another number of rows than were written.
        """
        staged = self._staged
        if not staged:
            self._staged, self._staged_vectors = None, {}
            return 0
        vectors = np.stack([self._staged_vectors[m] for m in staged])
        schema = memory_schema(vectors.shape[1], self.embedder.model_id)
        data = rows_table(list(staged.values()), vectors, schema)
        with self._lock:
            # mode "create": a table made meanwhile is an error, never overwritten.
            table = self._db.create_table(self.table_name, data, schema=schema)
        # Held until written: a failed create_table leaves them for another attempt.
        self._staged, self._staged_vectors = None, {}
        if table.count_rows() != data.num_rows:
            raise ProjectionWriteError(
                f"create_table holds {table.count_rows()} rows for {data.num_rows} memories"
            )
        self._ids_written = set(staged)
        log.debug("memories: %r built in bulk, %d rows", self.table_name, data.num_rows)
        return data.num_rows

    def _apply_staged(
        self, batch: Sequence[tuple[MemoryAdded | MemoryChange, SourcePosition]]
    ) -> int:
        """:meth:`apply` of a bulk build: the batch folded into the held rows, all of it or
        nothing (the fold runs on copies, kept once it is through)."""
        assert self._staged is not None
        added, changes = split_adds(batch)
        first = {m: item for m, item in first_adds(added).items() if m not in self._staged}
        rows: dict[str, Row] = {}
        vectors: dict[str, np.ndarray] = {}
        if first:
            items = list(first.values())
            model = self.embedder.model_id
            embedded = self._vectors([event for event, _ in items])
            for (event, position), vector in zip(items, embedded, strict=True):
                rows[event.memory_id] = new_row(event, position, model)
                vectors[event.memory_id] = vector
        for change, _ in changes:
            if change.memory_id not in rows and change.memory_id in self._staged:
                rows[change.memory_id] = _copied(self._staged[change.memory_id])
        touched = fold_changes(rows, changes)
        written = first.keys() | touched
        for memory_id in written:
            self._staged[memory_id] = rows[memory_id]
        self._staged_vectors.update(vectors)
        if len(self._staged) >= self.bulk_max_rows:
            self.write_staged()
        return len(written)

    def _apply_staged_accesses(
        self, batch: Sequence[tuple[MemoriesRetrieved, SourcePosition]]
    ) -> int:
        """:meth:`apply_accesses` of a bulk build."""
        assert self._staged is not None
        named = {m.memory_id for e, _ in batch for m in e.memories}
        # A counted retrieval sets three scalar columns: a shallow copy keeps the held row
        # as it was (a row's copy with its lists was a third of folding retrievals).
        rows = {m: dict(self._staged[m]) for m in named if m in self._staged}
        touched = fold_accesses(rows, batch)
        for memory_id in touched:
            self._staged[memory_id] = rows[memory_id]
        return len(touched)

    # --- merges ---------------------------------------------------------------------------

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
        if self._staged is not None:
            return self._apply_staged(batch)
        added, changes = split_adds(batch)
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
        first = first_adds(batch)
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
        """The vectors of the events' memories: the one each event carries when this table's
        embedder made it (the decider embedded it once: nothing is embedded here); for an
        event without one (before schema version 3), from ``vector_donor`` where it holds the
        same memory with the same texts from the same model; embedded otherwise (the mean of
        its :func:`embedded_texts`). A carried vector that does not fit (malformed, or not the
        table's size) is embedded again. ``vectors_embedded`` counts what was embedded here."""
        vectors = self._carried(events)
        donor = self.vector_donor
        wanted = [i for i, vector in enumerate(vectors) if vector is None]
        donor_table = donor._open() if donor is not None and wanted else None
        if donor is not None and donor_table is not None:
            found = donor._rows_by_key(
                donor_table,
                [memory_key(events[i].memory_id) for i in wanted],
                ["memory_id", "search_text", "context", "embedding_model", "vector"],
            )
            for index in wanted:
                event = events[index]
                row = found.get(event.memory_id)
                if (
                    row is not None
                    and row["search_text"] == search_text(event)
                    and row["context"] == event.context
                    and row["embedding_model"] == self.embedder.model_id
                ):
                    vectors[index] = np.asarray(row["vector"], dtype=np.float32)
        missing = [i for i, vector in enumerate(vectors) if vector is None]
        if missing:
            embedded = embed_groups(
                self.embedder.embed, [embedded_texts(events[i]) for i in missing]
            )
            for i, vector in zip(missing, embedded, strict=True):
                vectors[i] = vector
            self.vectors_embedded += len(missing)
        return np.stack([v for v in vectors if v is not None]).astype(np.float32, copy=False)

    def _carried(self, events: Sequence[MemoryAdded]) -> list[np.ndarray | None]:
        """The vector each event carries, if this table's embedder made it, it unpacks
        (:func:`~memstream.models.vectors.unpack_vector`'s rules) and it has the table's
        size; None otherwise.

        Unpacked for the whole batch at once: one buffer, one finiteness check. Per event,
        the check summed 384 Python floats, a third of folding a replay's new memories.
        """
        model = self.embedder.model_id
        packed: list[bytes | None] = []
        for event in events:
            raw = None
            if event.vector is not None and event.embedding_model == model:
                try:
                    raw = base64.b64decode(event.vector, validate=True)
                except (binascii.Error, ValueError):
                    raw = b""
                if not raw or len(raw) % 4:
                    log.warning("memories: memory %s carries a malformed vector", event.memory_id)
                    raw = None
            packed.append(raw)
        vectors: list[np.ndarray | None] = [None] * len(events)
        if not any(packed):
            return vectors
        size = self._vector_size()
        fitting = [i for i, raw in enumerate(packed) if raw is not None and len(raw) == 4 * size]
        if not fitting:
            return vectors
        matrix = np.frombuffer(b"".join(packed[i] for i in fitting), dtype="<f4")  # type: ignore[misc]
        matrix = matrix.reshape(len(fitting), size).astype(np.float32, copy=False)
        finite = np.isfinite(matrix).all(axis=1)
        for row, index in enumerate(fitting):
            if finite[row]:
                vectors[index] = matrix[row]
            else:
                log.warning(
                    "memories: memory %s carries a malformed vector", events[index].memory_id
                )
        return vectors

    def _vector_size(self) -> int:
        """The length of the table's vectors (the embedder's, before the table exists)."""
        table = self._open()
        if table is None:
            return int(self.embedder.dimensions)
        size: int = table.schema.field("vector").type.list_size
        return size

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
        touched = fold_changes(rows, changes)
        return {m: rows[m] for m in sorted(touched)}

    def apply_accesses(self, batch: Sequence[tuple[MemoriesRetrieved, SourcePosition]]) -> int:
        """Count retrievals (events of the accesses topic); return the rows updated.

        Each row records the offset of the last access event it counted, so a re-delivered
        event counts once. Only the retrieving user's own memories are touched.
        """
        if self._staged is not None:
            return self._apply_staged_accesses(batch)
        wanted = sorted({memory_key(m.memory_id) for e, _ in batch for m in e.memories})
        table = self._open()
        if table is None or not wanted:
            return 0
        rows = self._rows_by_key(table, wanted)
        touched = fold_accesses(rows, batch)
        if not touched:
            return 0
        data = pa.Table.from_pylist([rows[m] for m in sorted(touched)], schema=table.schema)
        self._write_checked(table, data, len(touched))
        return len(touched)

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
        model = self.embedder.model_id
        return rows_table([new_row(e, p, model) for e, p in items], vectors, schema)

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
        During a bulk build (:meth:`stage`) the user's held rows are dropped: nothing of
        them was written.
        """
        if self._staged is not None:
            key = user_key(user_id)
            doomed = [m for m, row in self._staged.items() if row["user_key"] == key]
            for memory_id in doomed:
                del self._staged[memory_id]
                del self._staged_vectors[memory_id]
            return len(doomed)
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


def _copied(row: Row) -> Row:
    """A row to fold into without touching the held one (lists are the only mutable values:
    a fold reassigns them, never appends in place, but a copy costs little)."""
    return {k: list(v) if isinstance(v, list) else v for k, v in row.items()}
