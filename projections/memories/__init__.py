"""The memory projection: ``MemoryAdded`` events and their changes as rows of one LanceDB
table, a read model rebuilt from the memories topic at will.

Modules, each one part of it:

* :mod:`~memstream.projections.memories.index`: the ``MemoryIndex`` port, what readers and
  writers of memories rely on.
* :mod:`~memstream.projections.memories.table`: :class:`MemoryProjection`, the LanceDB
  adapter of the port for one table, composed of the parts below.
* :mod:`~memstream.projections.memories.partitioned`: :class:`PartitionedMemories`, the
  projection as one such table per topic partition (what the workers write and the service
  reads).
* :mod:`~memstream.projections.memories.connection`: opening the table, checking its schema
  version and embedding model, following the live table, lookups by memory key.
* :mod:`~memstream.projections.memories.writer`: batched, retried, checked ``merge_insert``
  writes, idempotent by source offsets; access counts; erasure; the bulk build of a replay
  (one ``create_table``).
* :mod:`~memstream.projections.memories.fold`: the rules both writers fold events by (new
  rows, first adds, lifecycle changes, retrievals).
* :mod:`~memstream.projections.memories.reader`: positions, search, neighbours, get, list,
  and the scans of the tier keeper and of forgetting.
* :mod:`~memstream.projections.memories.maintenance`: index refresh and ``optimize()``.
* :mod:`~memstream.projections.memories.hybrid`: the two legs of a search and their fusion.
* :mod:`~memstream.projections.memories.filters`: the SQL filters, built from code-made text.
* :mod:`~memstream.projections.memories.schema`: the Arrow schema, columns and filter keys.
* :mod:`~memstream.projections.memories.records`: positions, filters, records and hits.
* :mod:`~memstream.projections.memories.cache`: LanceDB's cache sessions, bounded.
* :mod:`~memstream.projections.memories.store`: where the projection lives (a directory or
  an object store), its pointers and whether writers lock.
* :mod:`~memstream.projections.memories.errors`: what the projection raises.
"""

from memstream.projections.memories.cache import (
    INDEX_CACHE_BYTES,
    METADATA_CACHE_BYTES,
    cache_session,
)
from memstream.projections.memories.connection import KEY_LOOKUP_CHUNK, partition_table
from memstream.projections.memories.errors import (
    EmbeddingModelMismatch,
    EncryptedContentError,
    ProjectionOutdated,
    ProjectionWriteError,
)
from memstream.projections.memories.hybrid import (
    BM25_SATURATION,
    MAX_SEARCH_LIMIT,
    VECTOR_SHARE,
    fuse,
)
from memstream.projections.memories.index import MemoryIndex
from memstream.projections.memories.partitioned import MemoryStore, PartitionedMemories
from memstream.projections.memories.records import (
    MemoryHit,
    MemoryRecord,
    SearchFilters,
    SourcePosition,
)
from memstream.projections.memories.schema import (
    CLAIM_COLUMNS,
    DEFAULT_TABLE,
    MEMORY_TYPES,
    SCHEMA_VERSION,
    VIEW_COLUMNS,
    embedded_texts,
    memory_key,
    memory_schema,
    search_text,
    session_filter_key,
    user_key,
)
from memstream.projections.memories.store import ObjectStoreOptions, ProjectionStore
from memstream.projections.memories.table import MemoryProjection

__all__ = [
    "BM25_SATURATION",
    "CLAIM_COLUMNS",
    "DEFAULT_TABLE",
    "INDEX_CACHE_BYTES",
    "KEY_LOOKUP_CHUNK",
    "MAX_SEARCH_LIMIT",
    "MEMORY_TYPES",
    "METADATA_CACHE_BYTES",
    "SCHEMA_VERSION",
    "VECTOR_SHARE",
    "VIEW_COLUMNS",
    "EmbeddingModelMismatch",
    "EncryptedContentError",
    "MemoryHit",
    "MemoryIndex",
    "MemoryProjection",
    "MemoryRecord",
    "MemoryStore",
    "ObjectStoreOptions",
    "PartitionedMemories",
    "ProjectionOutdated",
    "ProjectionStore",
    "ProjectionWriteError",
    "SearchFilters",
    "SourcePosition",
    "cache_session",
    "embedded_texts",
    "fuse",
    "memory_key",
    "memory_schema",
    "partition_table",
    "search_text",
    "session_filter_key",
    "user_key",
]
