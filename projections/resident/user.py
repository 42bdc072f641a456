"""One user's memories held in memory: their rows as the table holds them, their vectors in
one matrix, their words in a BM25 index, and the columns filters read as arrays.

A search here is the LanceDB search of :meth:`MemoryReader.search` done in memory: the
``limit`` nearest memories by cosine and the ``limit`` best by BM25 among the rows the
filters let through, each scored by its own relevance (:data:`VECTOR_SHARE` of similarity,
the rest BM25 saturated by :data:`BM25_SATURATION`), the best ``limit`` returned. Ties fall
by memory id, so a user rebuilt from the log answers in the same order.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
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
#: The columns a held row keeps: what records show, what filters and the folds read and
#: write (:func:`~memstream.projections.memories.fold.fold_changes`, ``fold_accesses``).
#: Under 43 keys, so the dict's table stays at 64 slots (832 bytes, not 1,584).
KEPT_COLUMNS = (
    *_RECORD_COLUMNS,
    *(
        c for c in (
            "user_key", "session_key", "changed_offset", "reinforced_by", "last_reinforced_at",
            "access_offset",
        ) if c not in _RECORD_COLUMNS
    ),
)
#: Values many rows share (a user's key, sessions, types, statuses...): held once each.
_SHARED_COLUMNS = frozenset({
    "user_key", "session_key", "session_id", "memory_type", "status", "tier", "source_topic",
    "extractor", "claim_subject", "claim_attribute", "claim_polarity", "claim_cardinality",
})
#: What a held row costs besides its vector, its strings' characters and its words, measured
#: (``benchmarks/retrieval.py`` prints it beside the process's resident memory): the dict,
#: its numbers, times and tuples, the string objects' headers, the filter columns.
ROW_OVERHEAD_BYTES = 1_700
#: Bytes of each word a text is indexed by (two posting entries and their share of lists).
WORD_BYTES = 40


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
        # Status, type and session as small integers (their codes in ``_codes``): filters
        # compare integers, not strings.
        self._codes: dict[str, int] = {}
        self._status = np.zeros(16, dtype=np.int32)
        self._type = np.zeros(16, dtype=np.int32)
        self._session = np.zeros(16, dtype=np.int32)
        self._importance = np.zeros(16, dtype=np.float64)
        self._created = np.zeros(16, dtype=np.int64)
        self._ended = np.zeros(16, dtype=np.int64)
        self._row_bytes = 0
        #: Each slot's rank by memory id, valid for the first ``_ranked`` slots.
        self._rank = np.zeros(0, dtype=np.int64)
        self._ranked = 0

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
        held = _compact(row)
        self.rows.append(held)
        self.slot_of[held["memory_id"]] = slot
        self._vectors[slot] = vector
        self._norms[slot] = float(np.linalg.norm(vector))
        words = self.words.add(slot, row["search_text"])
        self._set_columns(slot)
        self._row_bytes += (
            ROW_OVERHEAD_BYTES + WORD_BYTES * words + len(held["memory_id"])
            + len(held["content"]) + len(held["context"] or "") + len(held["event_id"])
            + sum(len(s) + 50 for s in held["source_event_ids"])
            + sum(len(s) + 50 for s in held["entities"])
        )
        return True

    @property
    def nbytes(self) -> int:
        """Bytes this user holds, as measured: its rows (:data:`ROW_OVERHEAD_BYTES` each
        besides their strings and words) and its arrays, grown capacity included."""
        arrays = (
            self._vectors, self._norms, self._status, self._type, self._session,
            self._importance, self._created, self._ended, self._rank,
        )
        return self._row_bytes + sum(a.nbytes for a in arrays) + self.words.cached_bytes

    def fold_changes(self, changes: Sequence[tuple[MemoryChange, SourcePosition]]) -> None:
        """Fold ``changes`` (this user's, in log order) into the rows they name, as the
        table does (:func:`~memstream.projections.memories.fold.fold_changes`: re-delivered
        ones are skipped), and refresh what filters read."""
        for memory_id in fold_changes(_RowsById(self), changes):
            self._set_columns(self.slot_of[memory_id])

    def fold_accesses(self, batch: Sequence[tuple[MemoriesRetrieved, SourcePosition]]) -> None:
        """Count ``batch``'s retrievals of this user's memories, once each (as the table)."""
        fold_accesses(_RowsById(self), batch)

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
        ranks = self._id_ranks()[slots]
        query_norm = float(np.linalg.norm(vector))
        # Every row's dot product (a view of the matrix, no copy), then the allowed ones.
        cosines = (self._vectors[:count] @ vector)[slots] / np.maximum(
            self._norms[slots] * query_norm, 1e-12
        )
        similarity = np.clip(cosines, 0.0, 1.0)
        bm25 = np.zeros(slots.size, dtype=np.float64)
        matched, matched_scores = self.words.matches(query)
        within = np.searchsorted(slots, matched)
        kept = within < slots.size
        kept[kept] = slots[within[kept]] == matched[kept]
        bm25[within[kept]] = matched_scores[kept]
        # Each leg's best `limit`, ties by memory id, as the two legs of the table's search.
        nearest = _best(similarity, ranks, limit)
        candidates = within[kept]
        matching = candidates[_best(bm25[candidates], ranks[candidates], limit)]
        found = np.union1d(nearest, matching)
        words = np.where(
            np.isin(found, matching), bm25[found] / (bm25[found] + BM25_SATURATION), 0.0
        )
        scores = VECTOR_SHARE * similarity[found] + (1 - VECTOR_SHARE) * words
        order = np.lexsort((ranks[found], -scores))[:limit]
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

    def records(self, filters: SearchFilters) -> list[MemoryRecord]:
        """The held memories ``filters`` let through (as the table's SQL does), newest
        first, then by memory id (as the table's ``list_memories`` orders them)."""
        allowed = self._allowed(filters)
        if allowed is None:
            return []
        records = [MemoryRecord(**self.record_fields(int(slot))) for slot in np.flatnonzero(allowed)]
        records.sort(key=lambda record: record.memory_id)
        records.sort(key=lambda record: record.created_at, reverse=True)  # stable: ids stay
        return records

    def records_of_type(self, memory_type: str) -> list[MemoryRecord]:
        """The held memories of ``memory_type``, every status but deleted, by memory id (as
        the table's ``task_history`` reads them)."""
        count = len(self.rows)
        wanted = (self._type[:count] == self._known(memory_type)) & (
            self._status[:count] != self._known("deleted")
        )
        records = [MemoryRecord(**self.record_fields(int(slot))) for slot in np.flatnonzero(wanted)]
        return sorted(records, key=lambda record: record.memory_id)

    def record_fields(self, slot: int) -> dict[str, Any]:
        row = self.rows[slot]
        return _record_fields({column: row[column] for column in _RECORD_COLUMNS})

    def _allowed(self, filters: SearchFilters) -> np.ndarray | None:
        """Which slots ``filters`` let through: the conditions of the table's SQL filter
        (:func:`memstream.projections.memories.filters._user_filter`); None if nothing can
        match."""
        count = len(self.rows)
        status = self._status[:count]
        active, deleted = self._known("active"), self._known("deleted")
        created = self._created[:count]
        if filters.as_of is not None:
            at = _micros(filters.as_of)
            allowed = created <= at
            if not filters.include_inactive:
                allowed &= (status != deleted) & (self._ended[:count] > at)
        elif not filters.include_inactive:
            allowed = status == active
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
            allowed &= np.isin(self._type[:count], [self._known(t) for t in filters.memory_types])
        if filters.min_importance is not None:
            allowed &= self._importance[:count] >= float(filters.min_importance)
        if filters.session_id is not None:
            allowed &= self._session[:count] == self._known(session_filter_key(filters.session_id))
        if filters.since is not None:
            allowed &= created >= _micros(filters.since)
        if filters.until is not None:
            allowed &= created < _micros(filters.until)
        return np.asarray(allowed, dtype=bool)

    def _id_ranks(self) -> np.ndarray:
        """Each slot's place among the held memory ids in sorted order: ties fall by it.
        Ranked again (one sort) on the first search after memories were added."""
        count = len(self.rows)
        if self._ranked != count:
            ids = np.asarray([row["memory_id"] for row in self.rows], dtype=object)
            self._rank = np.empty(count, dtype=np.int64)
            self._rank[np.argsort(ids, kind="stable")] = np.arange(count)
            self._ranked = count
        return self._rank

    def _code(self, value: str) -> int:
        """The code of ``value`` in this user's filter columns (a new one if first seen)."""
        code = self._codes.get(value)
        if code is None:
            code = self._codes[value] = len(self._codes)
        return code

    def _known(self, value: str) -> int:
        """The code of ``value``; -1 (no row's) when no row held it."""
        return self._codes.get(value, -1)

    def _set_columns(self, slot: int) -> None:
        row = self.rows[slot]
        self._status[slot] = self._code(row["status"])
        self._type[slot] = self._code(row["memory_type"])
        self._session[slot] = self._code(row["session_key"])
        self._importance[slot] = row["importance"]
        self._created[slot] = _micros(row["created_at"])
        self._ended[slot] = _micros(row["ended_at"])

    def _grow(self) -> None:
        # By a quarter: spare capacity at most a fifth of what is held (np.resize would keep
        # a larger array under a view of it).
        capacity = len(self._norms) * 5 // 4
        vectors = np.zeros((capacity, self._vectors.shape[1]), dtype=np.float32)
        vectors[: len(self._vectors)] = self._vectors
        self._vectors = vectors
        for name in ("_norms", "_status", "_type", "_session", "_importance", "_created", "_ended"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)


def _best(values: np.ndarray, ranks: np.ndarray, limit: int) -> np.ndarray:
    """Positions of the ``limit`` highest ``values``, highest first, ties by lower rank:
    the order a full sort would give, after selecting every value tied with the last kept."""
    if values.size > limit:
        cut = np.partition(values, values.size - limit)[values.size - limit]
        chosen = np.flatnonzero(values >= cut)
    else:
        chosen = np.arange(values.size)
    return chosen[np.lexsort((ranks[chosen], -values[chosen]))][:limit]


def _compact(row: Row) -> Row:
    """The kept columns of ``row``: shared values interned, lists as tuples (the folds
    replace them whole, never append)."""
    held: Row = {}
    for column in KEPT_COLUMNS:
        value = row.get(column)
        if isinstance(value, list):
            value = tuple(sys.intern(v) if column in _SHARED_COLUMNS else v for v in value)
        elif type(value) is str and column in _SHARED_COLUMNS:
            value = sys.intern(value)
        held[column] = value
    return held


class _RowsById(Mapping[str, Row]):
    """A user's rows by memory id, read through ``slot_of`` (no copy of the index)."""

    def __init__(self, user: ResidentUser) -> None:
        self._user = user

    def __getitem__(self, memory_id: str) -> Row:
        return self._user.rows[self._user.slot_of[memory_id]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._user.slot_of)

    def __len__(self) -> int:
        return len(self._user.slot_of)
