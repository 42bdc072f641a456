"""LanceDB's index and metadata caches, one bounded session per process."""

from __future__ import annotations

import threading

import lancedb

#: Byte bounds of LanceDB's caches, shared by every projection of a process. LanceDB's own
#: defaults are 6 GiB (index) and 1 GiB (metadata) per connection, and their keys name index
#: UUIDs and table versions: each write and each optimize() makes new ones, so under steady
#: writes the dead entries (and the files they hold open, deleted ones too) only go when the
#: bound is reached; a soak worker grew by ~140 MB/min with them. These bounds hold the live
#: entries of a table of tens of thousands of memories; pass larger ones for a far larger table.
INDEX_CACHE_BYTES = 64 * 2**20
METADATA_CACHE_BYTES = 16 * 2**20
_cache_sessions: dict[tuple[int, int], lancedb.Session] = {}
_cache_sessions_lock = threading.Lock()


def cache_session(
    index_cache_bytes: int = INDEX_CACHE_BYTES, metadata_cache_bytes: int = METADATA_CACHE_BYTES
) -> lancedb.Session:
    """The process's LanceDB cache session with these bounds (one per pair of sizes).

    Shared, so the projector, the decider and a client in one process hold one copy of the
    current index and metadata entries rather than one each.

    Examples
    --------
    >>> cache_session() is cache_session()
    True
    """
    key = (int(index_cache_bytes), int(metadata_cache_bytes))
    with _cache_sessions_lock:
        session = _cache_sessions.get(key)
        if session is None:
            session = lancedb.Session(
                index_cache_size_bytes=key[0], metadata_cache_size_bytes=key[1]
            )
            _cache_sessions[key] = session
        return session
