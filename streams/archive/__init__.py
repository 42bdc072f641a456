"""The durable archive of the event log: every record of every topic, in Parquet files.

The embedded broker keeps its log in memory only, so a broker restart loses every topic. The
archive sink (:func:`run_archive_sink`, worker role ``archive``) copies each record into
Parquet files as it arrives; :func:`restore` republishes them into an empty broker with the
same partitions, offsets, keys, values, headers and timestamps, after which a replay
rebuilds the projections. The same files feed the DuckDB analytics views.

Layout, under the live archive directory (:func:`live_archive_dir`)::

    topic=<topic>/date=<YYYY-MM-DD>/part-<partition:04d>-<first:020d>-<last:020d>.parquet

The directories are Hive-style, so ``read_parquet('<dir>/**/*.parquet', hive_partitioning =
true)`` in DuckDB prunes by topic and day; the day is the UTC date of the broker timestamp
(1970-01-01 for a record without one). A file holds a contiguous run of offsets of one
partition on one day, in offset order, and is written under a temporary name, then renamed:
a crash never leaves half a file, and the file names alone say what is archived
(:func:`archive_positions`), which is where the sink resumes. Every record is kept with its
original bytes, valid event or not, so offsets stay contiguous; the parsed columns
(``event_id``, ``type``, ...) serve queries and are null when the value is not an event.

Besides the memstream topics the archive keeps the changelog of the workers' ``sessions``
table (:func:`archived_topics`), and a snapshot of the offsets the workers' consumer group
has committed (:class:`GroupOffsets`, in ``group_offsets/<group id>.json``). A restore puts
all three back, so a worker started on the restored broker carries on as after a crash: from
those offsets, with its session table recovered from the changelog, instead of consolidating
and extracting every transcript again.

Modules
-------
``layout``
    Reading an archive directory: its files (:class:`ArchiveFile`, :func:`archive_files`),
    the positions their names give (:func:`archive_positions`), the topics it keeps, the group
    offset snapshots (:class:`GroupOffsets`) and the fingerprint of its records.
``rows``
    A Kafka record as a row of an archive file: timestamp, day, parsed event columns.
``durable``
    Files written whole or not at all (temporary name, fsync, rename), the rewrite lock.
``erasures``
    Which records an erasure covers, and blanking them (:class:`ArchiveErasures`).
``writing``
    Writing batches of records as Parquet files, and the group offsets snapshot.
``broker_log``
    The broker's side: its partitions, where their logs end, and whether a log is still the
    archived one (:func:`log_shortfalls`, :class:`ArchivePastLog`).
``sink``
    The live sink (:func:`run_archive_sink`).
``rebuild``
    Rebuilding an archive from the log (:func:`rebuild_archive`).
``restoring``
    Restoring a broker from an archive (:func:`restore`, :class:`RestoreReport`).
``restored_offsets``
    The archive's gaps (:class:`Gap`) and the group offsets a restore commits past them.
``new_log``
    Keeping, across a restore, what producers wrote to a broker that lost the archived log.
``errors``
    :class:`ArchiveError` and :class:`RestoreRefused`.

Code outside the package imports the names below from here; the modules import each other
directly.
"""

from __future__ import annotations

from memstream.projections.archive_format import ARCHIVE, SCHEMA, live_archive_dir
from memstream.streams.archive.broker_log import ArchivePastLog, log_shortfalls
from memstream.streams.archive.erasures import BLANKED, ArchiveErasures, blank_erased
from memstream.streams.archive.errors import ArchiveError, RestoreRefused
from memstream.streams.archive.layout import (
    FINGERPRINT_FIELDS,
    GROUP_OFFSETS,
    ArchiveFile,
    GroupOffsets,
    archive_directories,
    archive_files,
    archive_fingerprint,
    archive_positions,
    archived_topics,
    read_group_offsets,
    worker_group_id,
)
from memstream.streams.archive.rebuild import rebuild_archive
from memstream.streams.archive.restored_offsets import Gap
from memstream.streams.archive.restoring import RestoreReport, restore
from memstream.streams.archive.sink import run_archive_sink

__all__ = [
    "ARCHIVE",
    "BLANKED",
    "FINGERPRINT_FIELDS",
    "GROUP_OFFSETS",
    "SCHEMA",
    "ArchiveErasures",
    "ArchiveError",
    "ArchiveFile",
    "ArchivePastLog",
    "Gap",
    "GroupOffsets",
    "RestoreRefused",
    "RestoreReport",
    "archive_directories",
    "archive_files",
    "archive_fingerprint",
    "archive_positions",
    "archived_topics",
    "blank_erased",
    "live_archive_dir",
    "log_shortfalls",
    "read_group_offsets",
    "rebuild_archive",
    "restore",
    "run_archive_sink",
    "worker_group_id",
]
