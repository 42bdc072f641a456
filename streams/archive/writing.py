"""Writing records into an archive directory: one Parquet file per contiguous run of one
partition on one day, the snapshot of the group's offsets, and clearing the temporary files
a crash left behind."""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from aiokafka import ConsumerRecord, TopicPartition

from memstream.streams.archive.durable import _fsync_directory, _replace_file, _rewrite_lock
from memstream.streams.archive.erasures import ArchiveErasures
from memstream.streams.archive.layout import GroupOffsets, _group_offsets_path
from memstream.streams.archive.rows import _day, _table


def _write_file(
    directory: Path,
    day: str,
    records: Sequence[ConsumerRecord],
    max_bytes: int,
    erasures: ArchiveErasures | None = None,
) -> None:
    """Write one file of a contiguous run of one partition on one day: temp name, fsync,
    rename, so the file is either whole or absent. Records ``erasures`` cover are written
    blanked: their bytes never reach the disk."""
    first, last = records[0], records[-1]
    folder = directory / f"topic={first.topic}" / f"date={day}"
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        # The new directory entries must survive a crash too, or the file would vanish.
        for parent in (folder.parent, directory):
            _fsync_directory(parent)
    name = f"part-{first.partition:04d}-{first.offset:020d}-{last.offset:020d}.parquet"
    table = _table(records, max_bytes)
    if erasures:
        table, _ = erasures.blank(table)
    _replace_file(folder / name, table, "tmp")


def _write_partition(
    directory: Path,
    records: Sequence[ConsumerRecord],
    max_event_bytes: int,
    erasures: ArchiveErasures | None = None,
) -> None:
    """Write one partition's records (offset order) as one file per run of one day.

    Runs, not one file per day: a file then always covers a contiguous range, and files are
    written in offset order, so after a crash the files on disk are a prefix of the batch
    and the next start resumes after the last of them.
    """
    for day, run in itertools.groupby(records, key=_day):
        _write_file(directory, day, list(run), max_event_bytes, erasures)


def _write_batch(
    directory: Path,
    batch: Mapping[TopicPartition, Sequence[ConsumerRecord]],
    max_bytes: int,
    erasures: ArchiveErasures | None = None,
    newly_erased: ArchiveErasures | None = None,
) -> None:
    """Write a batch, blanking what ``erasures`` cover; first, when the batch brings
    erasures (``newly_erased``), blank what they cover in the files already written.

    In that order: once the erasure record is on disk its erasure is applied, so a sink
    restarting from the files never has to apply it again.
    """
    if newly_erased:
        newly_erased.blank_files(directory)
    for records in batch.values():
        if records:
            _write_partition(directory, records, max_bytes, erasures)


def _write_group_offsets(directory: Path, snapshot: GroupOffsets) -> None:
    """Replace the group's snapshot file whole: temp name, fsync, rename."""
    path = _group_offsets_path(directory, snapshot.group_id)
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        _fsync_directory(directory)
    staging = path.with_name(f".{path.name}.tmp")
    with staging.open("w", encoding="utf-8") as handle:
        handle.write(snapshot.to_json())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, path)
    _fsync_directory(path.parent)


def _remove_staging(directory: Path) -> None:
    """Delete temporary files a crash left behind (never a finished file)."""
    for stale in directory.glob("topic=*/date=*/.part-*.parquet.tmp"):
        stale.unlink(missing_ok=True)
    if directory.is_dir():
        # Under the rewrite lock: an erasure blanking files right now owns its temp files.
        with _rewrite_lock(directory):
            for stale in directory.glob("topic=*/date=*/.part-*.parquet.erasing"):
                stale.unlink(missing_ok=True)
