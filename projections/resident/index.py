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
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from memstream.models.events.memory import MemoriesRetrieved, MemoryAdded, MemoryChange
from memstream.models.vectors import unpack_vector
from memstream.projections.memories.fold import new_row, split_adds
from memstream.projections.memories.hybrid import search_filters
from memstream.projections.memories.records import (
    MemoryHit,
    MemoryRecord,
    SearchFilters,
    SourcePosition,
)
from memstream.projections.resident.user import ResidentUser

#: Query vectors kept, by text.
QUERY_CACHE_SIZE = 4_096
#: Events kept after they are folded (see ``recent``): more than the projector lags by.
RECENT_EVENTS = 100_000


#: The BLAS libraries numpy loaded (OpenBLAS, MKL), found once. A resident search's
#: matrix-vector product runs on one of their threads: on the 2-core machine OpenBLAS's
#: two threads took 5.4 ms of CPU a product over 10,000 memories against 0.55 ms on one,
#: and the server's CPU a search went from 14.6 to 6.4 ms. Other numpy work of the
#: process keeps its threads (the limit holds for the product only).
_BLAS = ThreadpoolController()


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
    recent
        Events kept after they are folded, for users loaded from a table that lags them.
    """

    def __init__(
        self,
        projection: Any,
        *,
        budget_bytes: int,
        query_cache: int = QUERY_CACHE_SIZE,
        recent: int = RECENT_EVENTS,
    ) -> None:
        self.projection = projection
        self.budget_bytes = budget_bytes
        self.query_cache = query_cache
        self._users: OrderedDict[str, ResidentUser] = OrderedDict()
        #: Users too large for the budget: read from the table until they shrink (never).
        self._cold: set[str] = set()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.RLock()
        #: Recent events folded here (user, is a memory event, event, position): folded
        #: again into a user loaded from a table that may not have applied them yet.
        self._recent: deque[tuple[str, bool, Any, SourcePosition]] = deque(maxlen=recent)
        #: Whether another process writes the table and a follower feeds :meth:`follow`,
        #: and whether it is caught up; the follower's next offset per partition.
        self.following = False
        self.live = False
        self._followed: dict[tuple[str, int], int] = {}
        #: Counts users let go, so a load that raced one is not kept.
        self._resets = 0
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
        filters = search_filters(limit, memory_types, filters)
        return self._search(user_id, query, limit, filters, by_words=False)

    def search_by_words(
        self, user_id: str, query: str, *, limit: int, filters: SearchFilters
    ) -> list[MemoryHit]:
        """The user's memories best matching ``query``'s words (BM25 alone, no embedding):
        how the cross-session recall looks up the names a search's hits mention, at the
        cost of one pass over the user's words. A user not held is searched in the table
        (hybrid, as :meth:`search`)."""
        return self._search(user_id, query, limit, filters, by_words=True)

    def _search(
        self, user_id: str, query: str, limit: int, filters: SearchFilters, *, by_words: bool
    ) -> list[MemoryHit]:
        """One search of a held user (the table's for one not held): by meaning and words,
        or ``by_words`` alone (a zero vector scores every row's meaning 0)."""
        if not isinstance(user_id, str):
            raise TypeError("user_id must be a string")
        if not query.strip():
            return []
        user = self._resident(user_id)
        if user is None:
            return list(self.projection.search(user_id, query, limit=limit, filters=filters))
        if by_words:
            vector = np.zeros(user.dimensions, dtype=np.float32)
        else:
            vector = self.query_vector(query)
        # One user's product is small: on more BLAS threads it costs ten times the CPU, spent
        # spinning (see _BLAS). Searches hold the lock, so none restores another's limit.
        with self._lock, _BLAS.limit(limits=1, user_api="blas"):
            hits = user.search(query, vector, limit, filters)
        return [hit for hit in hits if hit.words > 0] if by_words else hits

    def get(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        return self.get_many(user_id, [memory_id]).get(memory_id)

    def get_many(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        user = self._resident(user_id)
        if user is None:
            return dict(self.projection.get_many(user_id, memory_ids))
        with self._lock:
            return user.get_many(memory_ids)

    def list_memories(self, user_id: str, *, include_inactive: bool = False) -> list[MemoryRecord]:
        """The user's memories (active ones unless asked otherwise), newest first, then by
        memory id, as the table's: held, a profile, a graph or a project's history is read
        without the table."""
        user = self._resident(user_id)
        if user is None:
            return list(self.projection.list_memories(user_id, include_inactive=include_inactive))
        with self._lock:
            return user.records(SearchFilters(include_inactive=include_inactive))

    def task_history(self, user_id: str) -> list[MemoryRecord]:
        """The user's task memories, every status but deleted, by memory id: held, the
        project a context is about is found without reading the table."""
        user = self._resident(user_id)
        if user is None:
            return list(self.projection.task_history(user_id))
        with self._lock:
            return user.records_of_type("task")

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

    def positions(self, user_id: str | None = None) -> dict[tuple[str, int], int]:
        """The table's positions (see :meth:`MemoryReader.positions`); for a user held here
        while following the log, no further than what the follower has read, so a wait on
        it (``add(wait=True)``) ends when these searches see the change too."""
        table = dict(self.projection.positions(user_id))
        if user_id is None or not self.following:
            return table
        with self._lock:
            if user_id not in self._users:
                return table
            return {key: min(at, self._followed.get(key, at)) for key, at in table.items()}

    # Writes ------------------------------------------------------------------------------

    def apply(self, batch: Sequence[tuple[MemoryAdded | MemoryChange, SourcePosition]]) -> int:
        """Write ``batch`` to the projection, then fold it into the resident users."""
        written = int(self.projection.apply(batch))
        with self._lock:
            self._fold_memories(batch)
        return written

    def apply_accesses(self, batch: Sequence[tuple[MemoriesRetrieved, SourcePosition]]) -> int:
        """Count ``batch``'s retrievals in the projection and in the resident users."""
        counted = int(self.projection.apply_accesses(batch))
        with self._lock:
            self._fold_accesses(batch)
        return counted

    def erase_user(self, user_id: str) -> int:
        self.forget_user(user_id)
        return int(self.projection.erase_user(user_id))

    # Following the log -------------------------------------------------------------------

    def start_following(self, since: dict[tuple[str, int], int]) -> None:
        """From now on the resident users are kept current by :meth:`follow` (another
        process writes the table), from the log positions ``since`` on; until
        :meth:`set_live` says the follower is caught up, searches read the table."""
        with self._lock:
            self.following = True
            self._followed = dict(since)

    def set_live(self, live: bool) -> None:
        """Whether the follower is caught up with the log (False: it lost the broker, or is
        reading a backlog): resident users answer only while it is."""
        with self._lock:
            self.live = live
            if not live:
                # What happened meanwhile may never reach this process: start again.
                self._users.clear()
                self._resets += 1

    def follow(
        self,
        memories: Sequence[tuple[MemoryAdded | MemoryChange, SourcePosition]],
        accesses: Sequence[tuple[MemoriesRetrieved, SourcePosition]],
        read_to: dict[tuple[str, int], int],
    ) -> None:
        """Fold events another process projects (opened, in log order per partition) into
        the resident users, and keep them a while for users loaded from a table that has
        not applied them yet; ``read_to`` is the follower's next offset per partition."""
        with self._lock:
            for event, position in memories:
                self._recent.append((event.user_id, True, event, position))
            for access, position in accesses:
                self._recent.append((access.user_id, False, access, position))
            self._fold_memories(memories)
            self._fold_accesses(accesses)
            self._followed.update(read_to)

    def forget_user(self, user_id: str) -> None:
        """Let the user go (erased): nothing of theirs stays in memory."""
        with self._lock:
            self._drop(user_id)
            self._cold.discard(user_id)
            self._recent = deque(
                (item for item in self._recent if item[0] != user_id), maxlen=self._recent.maxlen
            )

    def _fold_memories(
        self, batch: Sequence[tuple[MemoryAdded | MemoryChange, SourcePosition]]
    ) -> None:
        added, changes = split_adds(batch)
        model = self.projection.embedder.model_id
        for event, position in added:
            user = self._users.get(event.user_id)
            if user is None:
                continue
            if event.memory_id in user.slot_of:
                continue  # the first add wins, as in the table
            vector = _carried(event, model, user)
            if vector is None or _sealed(event):
                self._drop(event.user_id)  # read again from the table when next searched
                continue
            user.put(new_row(event, position, model), vector)
        for user_id in {event.user_id for event, _ in changes}:
            user = self._users.get(user_id)
            if user is not None:
                user.fold_changes([(e, p) for e, p in changes if e.user_id == user_id])
        self._enforce_budget()

    def _fold_accesses(self, batch: Sequence[tuple[MemoriesRetrieved, SourcePosition]]) -> None:
        for user_id in {event.user_id for event, _ in batch}:
            user = self._users.get(user_id)
            if user is not None:
                user.fold_accesses([(e, p) for e, p in batch if e.user_id == user_id])

    # Residency ---------------------------------------------------------------------------

    def _resident(self, user_id: str) -> ResidentUser | None:
        """The user in memory, loaded now if needed; None for a user over the budget, or
        while a follower is not caught up."""
        if self._swapped(user_id):
            with self._lock:
                # A replay swapped in another live table: what is held came from the old one.
                self._users.clear()
                self._cold.clear()
                self._resets += 1
        with self._lock:
            if self.following and not self.live:
                return None
            user = self._users.get(user_id)
            if user is not None:
                self._users.move_to_end(user_id)
                return user
            if user_id in self._cold:
                return None
            seen = self._resets
        # The table is read without the lock: other users' searches go on meanwhile.
        user = self._load(user_id)
        with self._lock:
            if user is None or seen != self._resets:
                return None
            held = self._users.get(user_id)
            if held is not None:  # loaded meanwhile by another search
                return held
            # What the follower or this process applied while the table was read, or
            # before the table had it, folds in again (every fold skips what it has).
            recent = [item for item in self._recent if item[0] == user_id]
            self._users[user_id] = user
            self._fold_memories([(e, p) for _, is_memory, e, p in recent if is_memory])
            self._fold_accesses([(e, p) for _, is_memory, e, p in recent if not is_memory])
            return self._users.get(user_id)

    def _swapped(self, user_id: str) -> bool:
        """Whether the table the user is read from is another one now (a replay's swap)."""
        follow = getattr(self.projection, "follow_live_table", None)
        if follow is None:
            return False
        return bool(follow(user_id) if hasattr(self.projection, "of_user") else follow())

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
                    with self._lock:
                        self._cold.add(user_id)
                    return None
        with self._lock:
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
        self._resets += 1


def _sealed(event: MemoryAdded) -> bool:
    return event.encryption is not None and "content" in event.encryption.fields


def _carried(event: MemoryAdded, model: str, user: ResidentUser) -> np.ndarray | None:
    """The vector ``event`` carries when the table's model made it and it fits the user."""
    if event.vector is None or event.embedding_model != model:
        return None
    try:
        vector = np.frombuffer(unpack_vector(event.vector), dtype=np.float32)
    except ValueError:
        return None
    return vector if vector.shape[0] == user.dimensions else None
