"""Files a crash leaves whole or as they were (temporary name, fsync, rename), and the lock
that serialises rewrites of one archive directory."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def _rewrite_lock(directory: Path) -> Iterator[None]:
    with (directory / ".rewrite.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _replace_file(path: Path, table: pa.Table, suffix: str = "erasing") -> None:
    """Write ``table`` to ``path`` (over the file there, if any): temp name, fsync, rename,
    so the file is whole or as it was."""
    staging = path.with_name(f".{path.name}.{suffix}")
    with staging.open("wb") as handle:
        pq.write_table(table, handle, compression="zstd")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, path)
    _fsync_directory(path.parent)
