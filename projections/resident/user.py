"""One user's memories held in memory: their rows as the table holds them, their vectors in
one matrix, their words in a BM25 index, and the columns filters read as arrays.

A search here is the LanceDB search of :meth:`MemoryReader.search` done in memory: the
``limit`` nearest memories by cosine and the ``limit`` best by BM25 among the rows the
filters let through, each scored by its own relevance (:data:`VECTOR_SHARE` of similarity,
the rest BM25 saturated by :data:`BM25_SATURATION`), the best ``limit`` returned. Ties fall
by memory id, so a user rebuilt from the log answers in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memstream.models.events.memory import MemoriesRetrieved, MemoryChange
from memstream.projections.memories.fold import fold_accesses, fold_changes
from memstream.projections.memories.hybrid import BM25_SATURATION, VECTOR_SHARE
from memstream.projections.memories.records import (
    MemoryHit,
    MemoryRecord,
    SearchFilters,
    SourcePosition,
    _record_fields,
)
from memstream.projections.memories.schema import (
    _RECORD_COLUMNS,
    MEMORY_TYPES,
    session_filter_key,
)
from memstream.projections.resident.words import WordIndex

Row = dict[str, Any]
#: An absent end time, as microseconds: later than any.
_NEVER = np.iinfo(np.int64).max
#: What a row costs besides its vector and text (the dict, its values, the columns).
ROW_OVERHEAD_BYTES = 2_500


def _micros(moment: datetime | None) -> int:
    if moment is None:
        return int(_NEVER)
    return int(moment.astimezone(UTC).timestamp() * 1_000_000)


class ResidentUser:
    """The memories of one user, every status, in the order they were added (by slot)."""

    def __init__(self, dimensions: int) -> None:
        self.rows: list[Row] = []
        self.slot_of: dict[str, int] = {}
        self._vectors = np.zeros((16, dimensions), dtype=np.float32)
        self._norms = np.zeros(16, dtype=np.float32)
        self.words = WordIndex()
        self._status = np.empty(16, dtype=object)
        self._type = np.empty(16, dtype=object)
        self._session = np.empty(16, dtype=object)
        self._importance = np.zeros(16, dtype=np.float64)
        self._created = np.zeros(16, dtype=np.int64)
        self._ended = np.zeros(16, dtype=np.int64)
        self.nbytes = 0

    @property
    def size(self) -> int:
        return len(self.rows)

    @property
    def dimensions(self) -> int:
        return int(self._vectors.shape[1])

    def put(self, row: Row, vector: np.ndarray) -> bool:
        """Hold a new memory; False (nothing changes) if its id is held already."""
        if row["memory_id"] in self.slot_of:
            return False
        slot = len(self.rows)
        if slot == len(self._norms):
            self._grow()
        self.rows.append(row)
        self.slot_of[row["memory_id"]] = slot
        self._vectors[slot] = vector
        self._norms[slot] = float(np.linalg.norm(vector))
        self.words.add(slot, row["search_text"])
        self._set_columns(slot)
        self.nbytes += (
            vector.nbytes + len(row["search_text"]) + len(row["content"]) + len(row["context"] or "")
            + ROW_OVERHEAD_BYTES
        )
        return True

    def fold_changes(self, changes: Sequence[tuple[MemoryChange, SourcePosition]]) -> None:
        """Fold ``changes`` (this user's, in log order) into the rows they name, as the
        table does (:func:`~memstream.projections.memories.fold.fold_changes`: re-delivered
        ones are skipped), and refresh what filters read."""
        rows = {memory_id: self.rows[slot] for memory_id, slot in self.slot_of.items()}
        for memory_id in fold_changes(rows, changes):
            self._set_columns(self.slot_of[memory_id])

    def fold_accesses(self, batch: Sequence[tuple[MemoriesRetrieved, SourcePosition]]) -> None:
        """Count ``batch``'s retrievals of this user's memories, once each (as the table)."""
        rows = {memory_id: self.rows[slot] for memory_id, slot in self.slot_of.items()}
        fold_accesses(rows, batch)

    def search(
        self, query: str, vector: np.ndarray, limit: int, filters: SearchFilters
    ) -> list[MemoryHit]:
        """The ``limit`` memories most relevant to ``query`` (embedded as ``vector``) that
        ``filters`` let through, best first."""
        count = len(self.rows)
        allowed = self._allowed(filters)
        if allowed is None or count == 0:
            return []
        slots = np.flatnonzero(allowed)
        if slots.size == 0:
            return []
        query_norm = float(np.linalg.norm(vector))
        cosines = self._vectors[slots] @ vector / np.maximum(self._norms[slots] * query_norm, 1e-12)
        similarity = np.clip(cosines, 0.0, 1.0)
        bm25 = self.words.scores(query, count)[slots]
        ids = np.asarray([self.rows[s]["memory_id"] for s in slots], dtype=object)
        by_id = np.argsort(ids, kind="stable")
        # Each leg's best `limit`, ties by memory id, as the two legs of the table's search.
        nearest = by_id[np.argsort(-similarity[by_id], kind="stable")][:limit]
        matching = by_id[np.argsort(-bm25[by_id], kind="stable")]
        matching = matching[bm25[matching] > 0][:limit]
        found = np.union1d(nearest, matching)
        words = np.where(
            np.isin(found, matching), bm25[found] / (bm25[found] + BM25_SATURATION), 0.0
        )
        scores = VECTOR_SHARE * similarity[found] + (1 - VECTOR_SHARE) * words
        order = sorted(range(found.size), key=lambda i: (-scores[i], ids[found[i]]))[:limit]
        return [
            MemoryHit(
                **self.record_fields(int(slots[found[i]])),
                score=float(scores[i]),
                similarity=float(similarity[found[i]]),
                words=float(words[i]),
            )
            for i in order
        ]

    def get_many(self, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The held memories among ``memory_ids``, by id."""
        return {
            memory_id: MemoryRecord(**self.record_fields(self.slot_of[memory_id]))
            for memory_id in memory_ids
            if memory_id in self.slot_of
        }

    def record_fields(self, slot: int) -> dict[str, Any]:
        row = self.rows[slot]
        return _record_fields({column: row[column] for column in _RECORD_COLUMNS})

    def _allowed(self, filters: SearchFilters) -> np.ndarray | None:
        """Which slots ``filters`` let through: the conditions of the table's SQL filter
        (:func:`memstream.projections.memories.filters._user_filter`); None if nothing can
        match."""
        count = len(self.rows)
        status = self._status[:count]
        created = self._created[:count]
        if filters.as_of is not None:
            at = _micros(filters.as_of)
            allowed = created <= at
            if not filters.include_inactive:
                allowed &= (status != "deleted") & (self._ended[:count] > at)
        elif not filters.include_inactive:
            allowed = status == "active"
        else:
            allowed = np.ones(count, dtype=bool)
        if filters.memory_types is not None:
            unknown = [t for t in filters.memory_types if t not in MEMORY_TYPES]
            if unknown:
                raise ValueError(
                    f"unknown memory types {unknown!r}; known: {sorted(MEMORY_TYPES)}"
                )
            if not filters.memory_types:
                return None
            allowed &= np.isin(self._type[:count], list(filters.memory_types))
        if filters.min_importance is not None:
            allowed &= self._importance[:count] >= float(filters.min_importance)
        if filters.session_id is not None:
            allowed &= self._session[:count] == session_filter_key(filters.session_id)
        if filters.since is not None:
            allowed &= created >= _micros(filters.since)
        if filters.until is not None:
            allowed &= created < _micros(filters.until)
        return np.asarray(allowed, dtype=bool)

    def _set_columns(self, slot: int) -> None:
        row = self.rows[slot]
        self._status[slot] = row["status"]
        self._type[slot] = row["memory_type"]
        self._session[slot] = row["session_key"]
        self._importance[slot] = row["importance"]
        self._created[slot] = _micros(row["created_at"])
        self._ended[slot] = _micros(row["ended_at"])

    def _grow(self) -> None:
        capacity = len(self._norms) * 2
        self._vectors = np.resize(self._vectors, (capacity, self._vectors.shape[1]))
        for name in ("_norms", "_status", "_type", "_session", "_importance", "_created", "_ended"):
            old = getattr(self, name)
            new = np.empty(capacity, dtype=old.dtype) if old.dtype == object else np.zeros(
                capacity, dtype=old.dtype
            )
            new[: len(old)] = old
            setattr(self, name, new)
