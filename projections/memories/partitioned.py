"""The memory projection partitioned like the topics: one LanceDB table per partition of the
memories topic (``memories-p0`` … ``memories-p{n-1}``), as :class:`PartitionedMemories`.

Every topic is keyed by user, so one user's memories, changes and retrievals are all on one
partition: each partition's table holds whole users, a worker writes only the tables of the
partitions it owns, and a read of one user opens one table. The tables are named after one
base (``memories``, or a replay's shadow name) that the live pointer names
(:mod:`memstream.projections.shadow`), so a replay still swaps every partition at once.

The object offers what :class:`~memstream.projections.memories.table.MemoryProjection` offers
(it is a :class:`~memstream.projections.memories.index.MemoryIndex`): writes go to the table
of the partition each event came from, a user's reads to the table of the user's partition
(:func:`~memstream.models.topics.user_partition`), and whole-projection reads (positions,
fingerprints, scans) to every table, or to the partitions it is told it owns.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from memstream.models.events.memory import MemoriesRetrieved, MemoryAdded, MemoryChange
from memstream.models.settings import Settings
from memstream.models.topics import user_partition
from memstream.projections.embedder import Embedder
from memstream.projections.memories.records import (
    MemoryHit,
    MemoryRecord,
    SearchFilters,
    SourcePosition,
)
from memstream.projections.memories.store import ProjectionStore
from memstream.projections.memories.table import MemoryProjection

__all__ = ["MemoryStore", "PartitionedMemories"]

T = TypeVar("T")


class PartitionedMemories:
    """The memory projection as one table per topic partition.

    Parameters
    ----------
    db_dir
        Where the tables live: the LanceDB database directory, or a
        :class:`~memstream.projections.memories.store.ProjectionStore` (an object store).
    embedder
        What each table embeds queries (and events without a vector) with.
    partitions
        The partition count of the topics (``Settings.partitions``).
    base
        The projection's name; None follows the live one (a replay may swap it).
    owned
        The partitions whose tables this object scans (positions, tier scans,
        fingerprints): what the projector of this worker owns. None: all of them. Reads of
        one user and writes are routed whatever it says.
    **options
        Passed to every partition's :class:`MemoryProjection`.

    Examples
    --------
    >>> memories = PartitionedMemories(tmp_path, embedder, partitions=4)  # doctest: +SKIP
    >>> memories.apply([(event, SourcePosition("memstream.memories", 2, 41))])  # doctest: +SKIP
    1
    >>> memories.positions()  # doctest: +SKIP
    {('memstream.memories', 2): 42}
    """

    def __init__(
        self,
        db_dir: Path | ProjectionStore,
        embedder: Embedder,
        *,
        partitions: int,
        base: str | None = None,
        owned: Collection[int] | None = None,
        **options: Any,
    ) -> None:
        if partitions < 1:
            raise ValueError("a projection has at least one partition")
        #: Where the tables live (a directory, or an object store).
        self.store = ProjectionStore.of(db_dir)
        self.embedder = embedder
        self.partitions = partitions
        self.base = base
        self.owned = frozenset(range(partitions)) if owned is None else frozenset(owned)
        self._options = options
        self._tables: dict[int, MemoryProjection] = {}
        self._lock = threading.Lock()
        self._donor: PartitionedMemories | MemoryProjection | None = None

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        embedder: Embedder,
        base: str | None = None,
        *,
        owned: Collection[int] | None = None,
        **options: Any,
    ) -> PartitionedMemories:
        """The projection of ``settings``' store (``memory_store``, or the data directory),
        one table per partition of its topics (``settings.partitions``); the live one unless
        ``base`` names another."""
        return cls(
            ProjectionStore.from_settings(settings),
            embedder,
            partitions=settings.partitions,
            base=base,
            owned=owned,
            **options,
        )

    @property
    def db_dir(self) -> Path:
        """The LanceDB directory of a projection on a local store (see :attr:`store`)."""
        return self.store.directory

    # --- the tables -------------------------------------------------------------------

    def table(self, partition: int) -> MemoryProjection:
        """The table of one partition (opened on first use, created by its first write)."""
        if not 0 <= partition < self.partitions:
            raise ValueError(f"partition {partition} is not one of the {self.partitions}")
        with self._lock:
            table = self._tables.get(partition)
            if table is None:
                table = MemoryProjection(
                    self.store, self.embedder, self.base, partition=partition, **self._options
                )
                table.vector_donor = _donor_table(self._donor, partition)
                self._tables[partition] = table
            return table

    def of_user(self, user_id: str) -> MemoryProjection:
        """The table that holds ``user_id``'s memories."""
        if not isinstance(user_id, str):
            raise TypeError("user_id must be a string")
        return self.table(user_partition(user_id, self.partitions))

    def _scanned(self) -> list[MemoryProjection]:
        return [self.table(p) for p in sorted(self.owned)]

    @property
    def vector_donor(self) -> PartitionedMemories | MemoryProjection | None:
        """The projection (the live one, during a replay; a table of every partition, from
        before the projection was partitioned) each table takes the vectors of events
        without one from, instead of embedding them."""
        return self._donor

    @vector_donor.setter
    def vector_donor(self, donor: PartitionedMemories | MemoryProjection | None) -> None:
        self._donor = donor
        with self._lock:
            tables = dict(self._tables)
        for partition, table in tables.items():
            table.vector_donor = _donor_table(donor, partition)

    @property
    def vectors_embedded(self) -> int:
        """Memories the tables embedded (events without a vector of their model)."""
        with self._lock:
            return sum(t.vectors_embedded for t in self._tables.values())

    # --- writes -----------------------------------------------------------------------

    def apply(self, batch: Sequence[tuple[MemoryAdded | MemoryChange, SourcePosition]]) -> int:
        """Project a batch into the tables of the partitions its events came from; return
        the number of memories written."""
        return sum(
            self.table(partition).apply(items) for partition, items in _by_partition(batch)
        )

    def apply_accesses(self, batch: Sequence[tuple[MemoriesRetrieved, SourcePosition]]) -> int:
        """Count retrievals in the tables of the partitions they came from."""
        return sum(
            self.table(partition).apply_accesses(items)
            for partition, items in _by_partition(batch)
        )

    def stage(self) -> None:
        """Build every partition's table in bulk (see :meth:`MemoryProjection.stage`):
        writes are folded in memory until :meth:`write_staged`.

        Raises
        ------
        ValueError
            A partition's table exists already.
        """
        for partition in range(self.partitions):
            self.table(partition).stage()

    def write_staged(self) -> int:
        """Write each partition's held rows with one ``create_table``; return the rows."""
        return sum(self.table(p).write_staged() for p in range(self.partitions))

    def erase_user(self, user_id: str) -> int:
        """Remove every row of ``user_id`` (from the user's partition); return how many."""
        return self.of_user(user_id).erase_user(user_id)

    def refresh_indexes(self) -> None:
        """Fold new rows into the indexes of the scanned tables that exist."""
        for table in self._scanned():
            if table.exists():
                table.refresh_indexes()

    def drop(self) -> None:
        """Delete every partition's table."""
        for partition in range(self.partitions):
            self.table(partition).drop()

    # --- whole-projection reads -------------------------------------------------------

    def positions(self, user_id: str | None = None) -> dict[tuple[str, int], int]:
        """The next offset to read per (topic, partition) of the scanned tables; with
        ``user_id``, of that user's rows only."""
        if user_id is not None:
            return self.of_user(user_id).positions(user_id)
        return _merged(t.positions() for t in self._scanned())

    def access_positions(self) -> dict[int, int]:
        """The next offset to read per partition of the accesses topic."""
        return _merged(t.access_positions() for t in self._scanned())

    def exists(self) -> bool:
        """Whether any scanned table has been created."""
        return any(t.exists() for t in self._scanned())

    def probe(self, *, writable: bool = False) -> None:
        """Raise unless the store answers (see :meth:`MemoryProjection.probe`)."""
        self.table(min(self.owned) if self.owned else 0).probe(writable=writable)
        for table in self._scanned():
            if table.exists():
                table.probe()

    def count(self, user_id: str | None = None) -> int:
        """Rows of ``user_id`` (of its partition), or of every scanned table."""
        if user_id is not None:
            return self.of_user(user_id).count(user_id)
        return sum(t.count() for t in self._scanned())

    def view_rows(self, columns: Sequence[str]) -> list[dict[str, Any]]:
        """Every row of the scanned tables, ``columns`` only (order unspecified)."""
        return [row for t in self._scanned() for row in t.view_rows(columns)]

    def short_term_due(self, *args: Any, **kwargs: Any) -> list[tuple[str, MemoryRecord]]:
        """What :meth:`MemoryProjection.short_term_due` finds, in every scanned table."""
        return _gathered(self._scanned(), lambda t: t.short_term_due(*args, **kwargs))

    def promotion_due(self, *args: Any, **kwargs: Any) -> list[tuple[str, MemoryRecord]]:
        """What :meth:`MemoryProjection.promotion_due` finds, in every scanned table."""
        return _gathered(self._scanned(), lambda t: t.promotion_due(*args, **kwargs))

    def active_memories_created_before(
        self, *args: Any, **kwargs: Any
    ) -> list[tuple[str, MemoryRecord]]:
        """What :meth:`MemoryProjection.active_memories_created_before` finds, everywhere
        scanned."""
        return _gathered(
            self._scanned(), lambda t: t.active_memories_created_before(*args, **kwargs)
        )

    # --- one user's reads -------------------------------------------------------------

    def search(
        self,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        memory_types: Sequence[str] | None = None,
        filters: SearchFilters | None = None,
    ) -> list[MemoryHit]:
        """The user's memories most relevant to ``query`` (see :meth:`MemoryProjection.search`)."""
        return self.of_user(user_id).search(
            user_id, query, limit=limit, memory_types=memory_types, filters=filters
        )

    def search_by_words(
        self, user_id: str, query: str, *, limit: int, filters: SearchFilters
    ) -> list[MemoryHit]:
        """The user's memories best matching ``query``'s words (see
        :meth:`MemoryProjection.search_by_words`)."""
        return self.of_user(user_id).search_by_words(user_id, query, limit=limit, filters=filters)

    def neighbours(
        self,
        user_id: str,
        vector: np.ndarray,
        *,
        limit: int,
        before: datetime | None = None,
    ) -> list[tuple[MemoryRecord, np.ndarray]]:
        """The user's memories nearest to ``vector`` (see :meth:`MemoryProjection.neighbours`)."""
        return self.of_user(user_id).neighbours(user_id, vector, limit=limit, before=before)

    def neighbours_of_each(
        self,
        user_id: str,
        vectors: np.ndarray,
        *,
        limit: int,
        before: datetime | None = None,
    ) -> list[list[tuple[MemoryRecord, np.ndarray]]]:
        """:meth:`neighbours` of each of ``vectors`` (see
        :meth:`MemoryProjection.neighbours_of_each`)."""
        return self.of_user(user_id).neighbours_of_each(
            user_id, vectors, limit=limit, before=before
        )

    def same_text_of_each(
        self, user_id: str, texts: Sequence[str], *, before: datetime | None = None
    ) -> list[list[MemoryRecord]]:
        """The user's memories of each of ``texts`` (see
        :meth:`MemoryProjection.same_text_of_each`)."""
        return self.of_user(user_id).same_text_of_each(user_id, texts, before=before)

    def claims_of(self, user_id: str, *, before: datetime | None = None) -> list[MemoryRecord]:
        """The user's memories asserting a claim (see :meth:`MemoryProjection.claims_of`)."""
        return self.of_user(user_id).claims_of(user_id, before=before)

    def claim_history(self, user_id: str) -> list[MemoryRecord]:
        """The user's claims of every status (see :meth:`MemoryProjection.claim_history`)."""
        return self.of_user(user_id).claim_history(user_id)

    def task_history(self, user_id: str) -> list[MemoryRecord]:
        """The user's task memories (see :meth:`MemoryProjection.task_history`)."""
        return self.of_user(user_id).task_history(user_id)

    def follow_live_table(self, user_id: str) -> bool:
        """Whether the user's partition moved to another live table (a replay swapped one
        in) since this object last looked: see :meth:`TableConnection.follow_live_table`."""
        return self.of_user(user_id).follow_live_table()

    def user_rows(self, user_id: str) -> pa.Table:
        """Every row of the user, vectors too (see :meth:`MemoryProjection.user_rows`)."""
        return self.of_user(user_id).user_rows(user_id)

    def get_many(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The user's memories among ``memory_ids`` (see :meth:`MemoryProjection.get_many`)."""
        return self.of_user(user_id).get_many(user_id, memory_ids)

    def get(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        """One of the user's memories by id, active or not; None if it is not theirs."""
        return self.of_user(user_id).get(user_id, memory_id)

    def list_memories(self, user_id: str, *, include_inactive: bool = False) -> list[MemoryRecord]:
        """The user's memories (active ones unless asked otherwise), newest first."""
        return self.of_user(user_id).list_memories(user_id, include_inactive=include_inactive)


def _donor_table(
    donor: PartitionedMemories | MemoryProjection | None, partition: int
) -> MemoryProjection | None:
    if isinstance(donor, PartitionedMemories):
        return donor.table(partition)
    return donor


def _by_partition(
    batch: Iterable[tuple[T, SourcePosition]],
) -> list[tuple[int, list[tuple[T, SourcePosition]]]]:
    """The batch's items by the partition they came from, each group in batch order."""
    groups: dict[int, list[tuple[T, SourcePosition]]] = defaultdict(list)
    for item in batch:
        groups[item[1].partition].append(item)
    return sorted(groups.items())


def _merged(maps: Iterable[dict[Any, int]]) -> dict[Any, int]:
    """One mapping of every partition table's positions (each key is one table's)."""
    merged: dict[Any, int] = {}
    for positions in maps:
        for key, value in positions.items():
            merged[key] = max(merged.get(key, 0), value)
    return merged


def _gathered(
    tables: Sequence[MemoryProjection], scan: Callable[[MemoryProjection], list[T]]
) -> list[T]:
    return [found for table in tables if table.exists() for found in scan(table)]


#: A memory projection as its users take it: the partitioned one, or one table of every
#: partition (a scratch table, a re-extraction's, one from before partitioning).
MemoryStore = PartitionedMemories | MemoryProjection
