"""Resident memories: a :class:`~memstream.projections.memories.index.MemoryIndex` that
answers each active user's searches from memory, over the LanceDB projection it wraps.

A user is loaded from the table on first touch (one read of the user's rows, vectors
included), kept current by the memory and access events this process applies, and evicted
least recently used when the process holds more than its budget. A user larger than the
budget, or one whose memory events this process cannot fold (a vector it does not carry), is
read from the table. Query vectors are cached by text. Everything else the projection
offers passes through to it.

The table's search and this one score alike (:mod:`memstream.projections.resident.user`),
with one difference on purpose: BM25 counts one user's memories here, every user's in the
table, so a user's answers do not depend on how much others wrote.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from memstream.models.events.memory import MemoriesRetrieved, MemoryAdded, MemoryChange
from memstream.models.vectors import unpack_vector
from memstream.projections.memories.fold import first_adds, new_row, split_adds
from memstream.projections.memories.hybrid import MAX_SEARCH_LIMIT
from memstream.projections.memories.records import (
    MemoryHit,
    MemoryRecord,
    SearchFilters,
    SourcePosition,
)
from memstream.projections.resident.user import ResidentUser

#: Query vectors kept, by text.
QUERY_CACHE_SIZE = 4_096


class ResidentMemories:
    """The memories of recently searched users in memory, over ``projection``.

    Parameters
    ----------
    projection
        The LanceDB memory projection (``MemoryProjection``): the durable store, read on a
        user's first touch and for users over the budget; every write goes to it first.
    budget_bytes
        Most bytes the resident users may hold (vectors, texts, rows); the least recently
        searched are let go beyond it.
    query_cache
        Query vectors kept, by text (0: every query is embedded).
    """

    def __init__(
        self, projection: Any, *, budget_bytes: int, query_cache: int = QUERY_CACHE_SIZE
    ) -> None:
        self.projection = projection
        self.budget_bytes = budget_bytes
        self.query_cache = query_cache
        self._users: OrderedDict[str, ResidentUser] = OrderedDict()
        #: Users too large for the budget: read from the table until they shrink (never).
        self._cold: set[str] = set()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.RLock()
        self.loads = 0
        self.evictions = 0

    def __getattr__(self, name: str) -> Any:
        # Everything but search, reads by id and writes is the projection's own.
        return getattr(self.projection, name)

    @property
    def held_bytes(self) -> int:
        with self._lock:
            return sum(user.nbytes for user in self._users.values())

    def holds(self, user_id: str) -> bool:
        with self._lock:
            return user_id in self._users

    # Reads -------------------------------------------------------------------------------

    def search(
        self,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        memory_types: Sequence[str] | None = None,
        filters: SearchFilters | None = None,
    ) -> list[MemoryHit]:
        """The user's memories most relevant to ``query``, best first (as the table's)."""
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_SEARCH_LIMIT}")
        if memory_types is not None:
            if isinstance(memory_types, str):
                raise TypeError("memory_types must be a sequence of memory types, not a string")
            filters = replace(filters or SearchFilters(), memory_types=tuple(memory_types))
        if not isinstance(user_id, str):
            raise TypeError("user_id must be a string")
        if not query.strip():
            return []
        user = self._resident(user_id)
        if user is None:
            return list(self.projection.search(user_id, query, limit=limit, filters=filters))
        vector = self.query_vector(query)
        with self._lock:
            return user.search(query, vector, limit, filters or SearchFilters())

    def get(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        return self.get_many(user_id, [memory_id]).get(memory_id)

    def get_many(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        user = self._resident(user_id)
        if user is None:
            return dict(self.projection.get_many(user_id, memory_ids))
        with self._lock:
            return user.get_many(memory_ids)

    def query_vector(self, query: str) -> np.ndarray:
        """``query`` embedded, from the cache when it was asked before."""
        with self._lock:
            cached = self._queries.get(query)
            if cached is not None:
                self._queries.move_to_end(query)
                return cached
        vector = np.asarray(self.projection.embedder.embed([query])[0], dtype=np.float32)
        with self._lock:
            self._queries[query] = vector
            while len(self._queries) > self.query_cache:
                self._queries.popitem(last=False)
        return vector

    # Writes ------------------------------------------------------------------------------

    def apply(self, batch: Sequence[tuple[MemoryAdded | MemoryChange, SourcePosition]]) -> int:
        """Write ``batch`` to the projection, then fold it into the resident users."""
        written = int(self.projection.apply(batch))
        added, changes = split_adds(batch)
        with self._lock:
            model = self.projection.embedder.model_id
            for event, position in first_adds(added).values():
                user = self._users.get(event.user_id)
                if user is None:
                    continue
                vector = _carried(event, model, user)
                if vector is None:
                    self._drop(event.user_id)  # read again from the table when next searched
                    continue
                user.put(new_row(event, position, model), vector)
            for user_id, user in list(self._users.items()):
                mine = [(e, p) for e, p in changes if e.user_id == user_id]
                if mine:
                    user.fold_changes(mine)
            self._enforce_budget()
        return written

    def apply_accesses(self, batch: Sequence[tuple[MemoriesRetrieved, SourcePosition]]) -> int:
        """Count ``batch``'s retrievals in the projection and in the resident users."""
        counted = int(self.projection.apply_accesses(batch))
        with self._lock:
            for user_id, user in self._users.items():
                mine = [(e, p) for e, p in batch if e.user_id == user_id]
                if mine:
                    user.fold_accesses(mine)
        return counted

    def erase_user(self, user_id: str) -> int:
        with self._lock:
            self._drop(user_id)
            self._cold.discard(user_id)
        return int(self.projection.erase_user(user_id))

    # Residency ---------------------------------------------------------------------------

    def _resident(self, user_id: str) -> ResidentUser | None:
        """The user in memory, loaded now if needed; None for a user over the budget."""
        with self._lock:
            user = self._users.get(user_id)
            if user is not None:
                self._users.move_to_end(user_id)
                return user
            if user_id in self._cold:
                return None
            user = self._load(user_id)
            if user is None:
                return None
            self._users[user_id] = user
            self._enforce_budget()
            return self._users.get(user_id)

    def _load(self, user_id: str) -> ResidentUser | None:
        rows = self.projection.user_rows(user_id)
        dimensions = int(self.projection.embedder.dimensions)
        user = ResidentUser(dimensions)
        if rows.num_rows:
            vectors = np.asarray(
                rows.column("vector").combine_chunks().flatten(), dtype=np.float32
            ).reshape(rows.num_rows, -1)
            if vectors.shape[1] != dimensions:
                user = ResidentUser(vectors.shape[1])
            records = rows.drop_columns(["vector"]).to_pylist()
            # Slots in add order (log position), so a reload builds the same user.
            order = sorted(
                range(len(records)),
                key=lambda i: (
                    records[i]["source_topic"], records[i]["source_partition"],
                    records[i]["source_offset"], records[i]["memory_id"],
                ),
            )
            for i in order:
                user.put(records[i], vectors[i])
                if user.nbytes > self.budget_bytes:
                    self._cold.add(user_id)
                    return None
        self.loads += 1
        return user

    def _enforce_budget(self) -> None:
        total = sum(user.nbytes for user in self._users.values())
        while total > self.budget_bytes and self._users:
            _, user = self._users.popitem(last=False)
            total -= user.nbytes
            self.evictions += 1

    def _drop(self, user_id: str) -> None:
        self._users.pop(user_id, None)


def _carried(event: MemoryAdded, model: str, user: ResidentUser) -> np.ndarray | None:
    """The vector ``event`` carries when the table's model made it and it fits the user."""
    if event.vector is None or event.embedding_model != model:
        return None
    try:
        vector = np.frombuffer(unpack_vector(event.vector), dtype=np.float32)
    except ValueError:
        return None
    return vector if vector.shape[0] == user.dimensions else None
