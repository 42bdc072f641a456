"""How the worker's native memory is allocated and handed back (glibc; elsewhere nothing).

A long-running worker frees most of what LanceDB, Arrow and ONNX Runtime allocate in their
own threads, and glibc keeps much of it: one arena per thread (up to eight per core), and a
threshold for ``mmap`` that rises after every large free, so later large buffers come from
the arenas and fragment them. Under a steady soak that showed as RSS growth with no live
allocation behind it (memray saw ~340 MB live of a 765 MB RSS). :func:`tune_allocators`
caps the arenas, fixes the threshold (large buffers are mapped and unmapped whole) and moves
pyarrow's allocations from its bundled mimalloc, which keeps freed pages, to the same
malloc; :func:`release_freed_memory` trims what is free after a burst of work.
"""

from __future__ import annotations

import ctypes
import logging
from typing import Any

log = logging.getLogger(__name__)

#: glibc's mallopt parameters (malloc.h).
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
#: Arenas for the whole process: the worker's threads share them instead of one each.
ARENA_MAX = 2
#: Allocations of this size or more are mapped, and unmapped when freed.
MMAP_THRESHOLD_BYTES = 128 * 1024


def _load_libc() -> Any:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim  # noqa: B018 - musl and others have no malloc_trim
        libc.mallopt  # noqa: B018
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _load_libc()


def tune_allocators() -> bool:
    """Cap glibc's arenas, fix its mmap threshold and make pyarrow allocate with malloc;
    call it at the start of a long-running process, before its threads start. Returns
    whether glibc took the settings (False on other C libraries: nothing is changed)."""
    if _LIBC is None:
        return False
    tuned = bool(_LIBC.mallopt(M_ARENA_MAX, ARENA_MAX)) and bool(
        _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    )
    if not tuned:
        log.warning("allocator: glibc refused mallopt; its defaults stay")
        return False
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    return True


def release_freed_memory() -> None:
    """Hand memory freed by a burst of work back to the system (glibc only; else nothing)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
