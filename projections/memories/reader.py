"""Reading the memories table: the positions a consumer resumes from, hybrid search, the
exact neighbours a decision compares with, one user's memories by id or all of them, and the
scans of the tier keeper and of forgetting. Every user-facing read is scoped to one user by
:func:`~memstream.projections.memories.filters._user_filter`."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from memstream.models.decisions import normalised
from memstream.projections.memories.connection import TableConnection
from memstream.projections.memories.filters import _sql_time, _user_filter
from memstream.projections.memories.hybrid import (
    _LEG_POOL,
    _search_words,
    fuse,
    search_filters,
    words_only,
)
from memstream.projections.memories.records import (
    MemoryHit,
    MemoryRecord,
    SearchFilters,
    _record_fields,
)
from memstream.projections.memories.schema import (
    _RECORD_COLUMNS,
    MEMORY_TYPES,
    memory_key,
    user_key,
)

#: Memories of one user read whole for the neighbours of an extraction's candidates; a user
#: with more is searched candidate by candidate with LanceDB's vector search.
NEIGHBOUR_SCAN_ROWS = 20_000


class MemoryReader(TableConnection):
    """The reading part of :class:`~memstream.projections.memories.table.MemoryProjection`."""

    def positions(self, user_id: str | None = None) -> dict[tuple[str, int], int]:
        """The next offset to read per (topic, partition): max projected offset + 1; with
        ``user_id``, of that user's rows only (one indexed lookup, not a scan of the table):
        one past the last of the user's events the projection applied, on the user's
        partition.

        Examples
        --------
        >>> projection.positions()  # doctest: +SKIP
        {('memstream.memories', 0): 42, ('memstream.memories', 3): 7}
        """
        table = self._open()
        if table is None:
            return {}
        query = table.search()
        if user_id is not None:
            query = query.where(_user_filter(user_id, SearchFilters(include_inactive=True)))
        rows = (
            query.select(["source_topic", "source_partition", "source_offset", "changed_offset"])
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
        filters = search_filters(limit, memory_types, filters)
        where = _user_filter(user_id, filters)
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

    def search_by_words(
        self, user_id: str, query: str, *, limit: int, filters: SearchFilters
    ) -> list[MemoryHit]:
        """The user's memories best matching ``query``'s words (BM25 alone, no query
        embedding): how the cross-session recall looks up the names a search's hits
        mention (as :meth:`ResidentMemories.search_by_words`). Nothing until the full-text
        index exists."""
        filters = search_filters(limit, None, filters)
        where = _user_filter(user_id, filters)
        table = self._open()
        if table is None or where is None or not query.strip() or not self._has_fts(table):
            return []
        return words_only(_search_words(table, query, where, limit), limit)

    def neighbours(
        self,
        user_id: str,
        vector: np.ndarray,
        *,
        limit: int = 5,
        before: datetime | None = None,
    ) -> list[tuple[MemoryRecord, np.ndarray]]:
        """The user's memories nearest to ``vector`` (exact cosine, never the approximate
        index), with their vectors, nearest first (ties by memory id).

        Without ``before``: the active ones. With it: the view just before that event time,
        memories recorded before it and not ended before it, whatever was written since (a
        decision made again after a crash sees what the first one saw).
        """
        return self.neighbours_of_each(user_id, vector[np.newaxis, :], limit=limit, before=before)[0]

    def neighbours_of_each(
        self,
        user_id: str,
        vectors: np.ndarray,
        *,
        limit: int = 5,
        before: datetime | None = None,
    ) -> list[list[tuple[MemoryRecord, np.ndarray]]]:
        """:meth:`neighbours` of each row of ``vectors`` (unit vectors), from one read of the
        user's view: the decisions of one extraction cost one query, not one per candidate
        (each LanceDB query costs milliseconds before it reads a row). A user with more than
        ``NEIGHBOUR_SCAN_ROWS`` memories is searched vector by vector instead."""
        where = _view_filter(user_id, before)
        table = self._open()
        if table is None or where is None or len(vectors) == 0:
            return [[] for _ in range(len(vectors))]
        rows = (
            table.search()
            .where(where)
            .select([*_RECORD_COLUMNS, "vector"])
            .limit(NEIGHBOUR_SCAN_ROWS + 1)
            .to_arrow()
        )
        if rows.num_rows > NEIGHBOUR_SCAN_ROWS:
            return [self._nearest_indexed(table, where, vector, limit) for vector in vectors]
        if rows.num_rows == 0:
            return [[] for _ in range(len(vectors))]
        matrix = np.asarray(rows.column("vector").to_pylist(), dtype=np.float32)
        ids = np.asarray(rows.column("memory_id").to_pylist(), dtype=object)
        similarity = matrix @ np.asarray(vectors, dtype=np.float32).T
        records = rows.select(_RECORD_COLUMNS).to_pylist()
        # Nearest first, ties broken by id (the same order whatever order rows come in): rows
        # in id order, then a stable sort by similarity.
        by_id = np.argsort(ids, kind="stable")
        found = []
        for column in range(similarity.shape[1]):
            order = by_id[np.argsort(-similarity[by_id, column], kind="stable")][:limit]
            found.append([(MemoryRecord(**_record_fields(records[i])), matrix[i]) for i in order])
        return found

    def same_text_of_each(
        self, user_id: str, texts: Sequence[str], *, before: datetime | None = None
    ) -> list[list[MemoryRecord]]:
        """For each of ``texts``, the user's memories whose content is that text (compared
        :func:`~memstream.models.decisions.normalised`: case, punctuation and spacing
        ignored), in the view of :meth:`neighbours` (``before``), by memory id. One read of
        the user's view; past ``NEIGHBOUR_SCAN_ROWS`` memories, the best 50 of a words
        search for each text, checked exactly."""
        wanted = [normalised(text) for text in texts]  # "" (no text) matches nothing
        looked_for = set(wanted) - {""}
        where = _view_filter(user_id, before)
        table = self._open() if looked_for else None  # nothing to look for: no read
        if table is None or where is None:
            return [[] for _ in texts]
        rows = table.search().where(where).select(_RECORD_COLUMNS).limit(NEIGHBOUR_SCAN_ROWS + 1)
        records = rows.to_arrow().to_pylist()
        if len(records) > NEIGHBOUR_SCAN_ROWS:
            records = []
            if self._has_fts(table):
                for text in sorted(looked_for):
                    records += _search_words(table, text, where, 50).select(_RECORD_COLUMNS).to_pylist()
        by_text: dict[str, dict[str, MemoryRecord]] = {}
        for record in records:
            text = normalised(record["content"])
            if text in looked_for:  # a record is made of the matching rows only
                by_text.setdefault(text, {})[record["memory_id"]] = MemoryRecord(
                    **_record_fields(record)
                )
        return [
            [found[m] for m in sorted(found)] if (found := by_text.get(text)) else []
            for text in wanted
        ]

    def claims_of(self, user_id: str, *, before: datetime | None = None) -> list[MemoryRecord]:
        """The user's memories that assert a claim, in the view of :meth:`neighbours`
        (``before``), by memory id: what a new claim is compared with."""
        where = _view_filter(user_id, before)
        table = self._open()
        if table is None or where is None:
            return []
        rows = (
            table.search()
            .where(f"{where} AND claim_attribute IS NOT NULL")
            .select(_RECORD_COLUMNS)
            .limit(None)
            .to_arrow()
            .to_pylist()
        )
        return sorted(
            (MemoryRecord(**_record_fields(row)) for row in rows), key=lambda r: r.memory_id
        )

    def claim_history(self, user_id: str) -> list[MemoryRecord]:
        """Every memory of the user that asserts a claim, whatever its status but deleted
        (superseded ones are a timeline's past), by when the claim began, then memory id."""
        records = self._kept_rows(user_id, "claim_attribute IS NOT NULL")
        return sorted(records, key=lambda r: (r.valid_from or r.created_at, r.memory_id))

    def task_history(self, user_id: str) -> list[MemoryRecord]:
        """Every task memory of the user, whatever its status but deleted, by memory id: a
        project's history, read without the user's other memories."""
        return sorted(self._kept_rows(user_id, "memory_type = 'task'"), key=lambda r: r.memory_id)

    def _kept_rows(self, user_id: str, clause: str) -> list[MemoryRecord]:
        """The user's rows of every status but deleted that match ``clause`` (code-made SQL,
        never a caller's text)."""
        where = _user_filter(user_id, SearchFilters(include_inactive=True))
        table = self._open()
        if table is None or where is None:
            return []
        rows = (
            table.search()
            .where(f"{where} AND {clause} AND status != 'deleted'")
            .select(_RECORD_COLUMNS)
            .limit(None)
            .to_arrow()
            .to_pylist()
        )
        return [MemoryRecord(**_record_fields(row)) for row in rows]

    def user_rows(self, user_id: str) -> pa.Table:
        """Every row of the user (every status, every column, the vector too): what
        :class:`~memstream.projections.resident.ResidentMemories` loads on a first touch."""
        table = self._open()
        where = _user_filter(user_id, SearchFilters(include_inactive=True))
        if table is None or where is None:
            return pa.table({})
        return table.search().where(where).limit(None).to_arrow()

    def get_many(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The user's memories among ``memory_ids`` (active or not), by id: one lookup."""
        table = self._open()
        if table is None or not memory_ids:
            return {}
        rows = self._rows_by_key(
            table, [memory_key(m) for m in dict.fromkeys(memory_ids)], _RECORD_COLUMNS + ["user_key"]
        )
        mine = user_key(user_id)
        return {
            memory_id: MemoryRecord(**_record_fields(row))
            for memory_id, row in rows.items()
            if row.pop("user_key") == mine
        }

    def _nearest_indexed(
        self, table: Any, where: str, vector: np.ndarray, limit: int
    ) -> list[tuple[MemoryRecord, np.ndarray]]:
        """The ``limit`` rows nearest to ``vector`` by LanceDB's exact vector search."""
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

    def count(self, user_id: str | None = None) -> int:
        """Rows of one user, or of the whole table: every status (active, superseded,
        deleted, expired, forgotten), as :meth:`erase_user` removes them all."""
        table = self._open()
        if table is None:
            return 0
        if user_id is None:
            return int(table.count_rows())
        return int(table.count_rows(_user_filter(user_id, SearchFilters(include_inactive=True))))

    def short_term_due(
        self, now: datetime, ttl: timedelta, limit: int = 10_000
    ) -> list[tuple[str, MemoryRecord]]:
        """Active short-term memories (episodes excepted: they are the raw record and stay)
        learned more than ``ttl`` before ``now``, with their user ids: due to expire."""
        horizon = _sql_time(now - ttl)
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

        What a forgetting policy scores (:mod:`memstream.streams.operations.forgetting`).
        ``user_id`` reaches the filter as its digest only, so an id no user has matches nothing.

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


def _view_filter(user_id: str, before: datetime | None) -> str | None:
    """The filter of a user's view: the active memories, or (``before``) those recorded
    before that event time and not ended before it."""
    if before is None:
        return _user_filter(user_id, SearchFilters())
    return _user_filter(user_id, SearchFilters(as_of=before - timedelta(microseconds=1)))
