"""The memory projection: ``MemoryAdded`` events as rows of one LanceDB table.

The topic is the truth; this table is a read model rebuilt from it at will. Every row carries
the topic, partition and offset of the event that wrote it (the projection's tracking
record), written in the same ``merge_insert`` as the row itself, so a consumer resumes from
:meth:`MemoryProjection.positions` and a re-delivered event rewrites a row with the same
values. :class:`MemoryProjection` is one object with three parts, each in its module: the
writer, the reader and the index maintenance, over one connection to the table.
"""

from __future__ import annotations

from memstream.projections.memories.maintenance import IndexMaintenance
from memstream.projections.memories.reader import MemoryReader
from memstream.projections.memories.writer import MemoryWriter


class MemoryProjection(MemoryWriter, MemoryReader, IndexMaintenance):
    """The LanceDB table of memories, and the only writer of it.

    Parameters
    ----------
    db_dir
        The LanceDB database directory, or a
        :class:`~memstream.projections.memories.store.ProjectionStore` (an object store).
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
