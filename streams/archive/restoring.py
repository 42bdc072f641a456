"""Restoring a broker from an archive (:func:`restore`): every archived record republished
to its own topic, partition and offset, the sessions changelog created as the worker would,
and what it did (:class:`RestoreReport`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiokafka.errors as kafka_errors
import pyarrow as pa
import pyarrow.parquet as pq
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from memstream.models.settings import Settings
from memstream.streams.archive.broker_log import _ADMIN_TIMEOUT_MS, _RESTORE_REQUEST_BYTES
from memstream.streams.archive.errors import ArchiveError, RestoreRefused
from memstream.streams.archive.layout import (
    ArchiveFile,
    archive_files,
    archived_topics,
    read_group_offsets,
    worker_group_id,
)
from memstream.streams.archive.new_log import (
    _append_kept,
    _delete_topics,
    _keep_new_log,
    archived_log_id,
)
from memstream.streams.archive.restored_offsets import (
    Gap,
    _commit_group_offsets,
    _restored_group_offsets,
)
from memstream.streams.kafka.tansu import true_end_offsets
from memstream.streams.kafka.topics import ensure_topics

log = logging.getLogger(__name__)

#: Records restore sends per partition before it waits for their acknowledgements.
_RESTORE_CHUNK = 2000


@dataclass(frozen=True)
class RestoreReport:
    """What :func:`restore` republished, and the group offsets it committed.

    ``group_offsets`` holds the offsets committed for the consumer group ``group_id`` per
    (topic, partition), from the archive's snapshot taken at ``group_offsets_taken_at``;
    empty when the archive has none. ``group_offsets_lowered`` holds the snapshot's offsets
    that were past the restored log (records the archive never got), each lowered to its end.
    """

    records: Mapping[str, int]
    partitions: int
    gaps: tuple[Gap, ...]
    elapsed_s: float
    group_id: str = ""
    group_offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)
    group_offsets_taken_at: datetime | None = None
    group_offsets_lowered: Mapping[tuple[str, int], int] = field(default_factory=dict)
    #: Records producers wrote to a new log after the broker lost the old one, kept and
    #: appended after the archive, per topic.
    appended: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Records republished, all topics."""
        return sum(self.records.values())

    def summary(self) -> str:
        """A few lines for a terminal."""
        head = f"restored {self.total} records into {self.partitions} partitions"
        lines = [f"{head} in {self.elapsed_s:.1f} s"]
        lines += [f"  {topic}: {count}" for topic, count in sorted(self.records.items())]
        if self.appended:
            lines.append(
                f"appended after them {sum(self.appended.values())} records that producers "
                "wrote to the broker after it lost its log (none of them is lost):"
            )
            lines += [f"  {topic}: {count}" for topic, count in sorted(self.appended.items())]
        if self.gaps:
            lines.append("the archive has gaps, so these restored offsets shifted:")
            lines += [f"  {gap.explain()}" for gap in self.gaps]
        if self.group_offsets_taken_at is None:
            lines.append(
                f"the archive has no committed offsets of consumer group {self.group_id!r}: "
                "a worker will read its topics from the start (consolidating and extracting "
                "again; decisions see the old memories as duplicates)"
            )
            return "\n".join(lines)
        taken_at = self.group_offsets_taken_at.isoformat(timespec="seconds")
        lines.append(
            f"committed offsets of consumer group {self.group_id!r} as archived at "
            f"{taken_at} ({len(self.group_offsets)} partitions); a worker carries on from them:"
        )
        by_topic: dict[str, list[str]] = {}
        for (topic, partition), offset in sorted(self.group_offsets.items()):
            by_topic.setdefault(topic, []).append(f"[{partition}] {offset}")
        lines += [f"  {topic}: {', '.join(parts)}" for topic, parts in by_topic.items()]
        for (topic, partition), archived in sorted(self.group_offsets_lowered.items()):
            lines.append(
                f"  {topic}[{partition}]: the snapshot had {archived}, past the restored log; "
                f"lowered to {self.group_offsets[(topic, partition)]}"
            )
        return "\n".join(lines)


async def restore(
    settings: Settings, source: Path, *, progress: Callable[[int, int], None] | None = None
) -> RestoreReport:
    """Republish the archive in ``source`` into the (empty) topics of ``settings.broker``.

    Every record goes to its own topic and partition, in offset order, with its key, value
    bytes, headers and timestamp, acknowledged by the broker (``acks="all"``); so an archive
    that is contiguous from offset 0 gives back the same offsets. The sessions changelog is
    restored with them (created compacted, with the memstream topics' partition count), and
    the archive's snapshot of the workers' consumer group offsets (:class:`GroupOffsets`) is
    committed for that group, each offset moved past the archive's gaps and capped at the
    restored log end. A worker started afterwards then carries on from those offsets with its
    session table recovered, as after a crash; the projections on this machine continue from
    their own positions (elsewhere, rebuild them: ``memstream replay --projection all``).

    Parameters
    ----------
    settings
        The broker to restore into, and the topics (prefix, partition count).
    source
        An archive directory, e.g. :func:`live_archive_dir`.
    progress
        Called now and then with (records restored, records in all).

    Returns
    -------
    RestoreReport
        Records per topic, partitions written, the archive's gaps (a gap means the records
        after it got lower offsets than in the original log), and the committed offsets.

    Raises
    ------
    RestoreRefused
        If any archived topic partition on the broker already holds records (republishing
        onto a live log would duplicate it), or the workers' consumer group has members.
    ArchiveError
        If the archive names topics or partitions ``settings`` do not have, overlaps itself,
        the broker's log does not end where the restore put it, or it refuses the offsets.

    Examples
    --------
    >>> report = await restore(settings, live_archive_dir(settings))  # doctest: +SKIP
    >>> print(report.summary())  # doctest: +SKIP
    restored 1532 records into 20 partitions in 0.4 s
    """
    if not source.is_dir():
        raise ArchiveError(f"no archive at {source}")
    started = time.monotonic()
    files = await asyncio.to_thread(archive_files, source)
    topics = archived_topics(settings)
    foreign = sorted({file.topic for file in files} - set(topics))
    if foreign:
        raise ArchiveError(
            f"the archive holds topics {', '.join(foreign)}, which are not memstream topics "
            f"under the prefix {settings.topic_prefix!r}; set MEMSTREAM_TOPIC_PREFIX to the "
            "archive's"
        )
    beyond = sorted({(f.topic, f.partition) for f in files if f.partition >= settings.partitions})
    if beyond:
        raise ArchiveError(
            f"the archive holds partitions {beyond} but topics have {settings.partitions} "
            "partitions; set MEMSTREAM_PARTITIONS to the archive's"
        )
    group_id = worker_group_id(settings)
    snapshot = await asyncio.to_thread(read_group_offsets, source, group_id)
    await ensure_topics(settings)
    await _ensure_changelog(settings, topics[-1])
    partitions = [TopicPartition(t, p) for t in topics for p in range(settings.partitions)]
    ends = await true_end_offsets(settings.broker, partitions)
    busy = [f"{tp.topic}[{tp.partition}] ({end} records)" for tp, end in ends.items() if end]
    kept_files = sorted(settings.archive_dir.glob("kept-*.parquet"))
    if busy:
        from memstream.streams.kafka.logid import read_log_id

        broker_log = await read_log_id(settings)
        archived_log = await asyncio.to_thread(archived_log_id, files, settings)
        if archived_log is None or broker_log == archived_log:
            if kept_files and broker_log == archived_log:
                # An earlier restore put the archive back and stopped before appending.
                await _refuse_active_group(settings, group_id)
                appended = await _append_kept(settings, kept_files)
                return RestoreReport(
                    records={}, partitions=0, gaps=(), elapsed_s=time.monotonic() - started,
                    group_id=group_id, appended=appended,
                )
            raise RestoreRefused(
                "refusing to restore: these partitions already hold records of the archived "
                f"log, and republishing the archive onto them would duplicate it: "
                f"{', '.join(busy)}. Restore into an empty broker (a fresh embedded broker, or "
                "delete the memstream topics first)."
            )
        # The broker lost the archived log and producers have written to a new one since:
        # keep their records (durably, first), clear the topics, restore, then append them.
        await _refuse_active_group(settings, group_id)
        kept_files = [*kept_files, await _keep_new_log(settings)]
        await _delete_topics(settings, topics)
        await ensure_topics(settings)
        await _ensure_changelog(settings, topics[-1])
    elif snapshot is not None:
        await _refuse_active_group(settings, group_id)
    by_partition: dict[TopicPartition, list[ArchiveFile]] = {}
    for file in files:
        by_partition.setdefault(TopicPartition(file.topic, file.partition), []).append(file)
    counter = _Progress(progress, await asyncio.to_thread(_count_rows, files))
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.broker,
        acks="all",
        linger_ms=5,
        max_batch_size=1 << 20,
        max_request_size=_RESTORE_REQUEST_BYTES,
    )
    await producer.start()
    try:
        results = await asyncio.gather(
            *(_restore_partition(producer, tp, f, counter) for tp, f in by_partition.items())
        )
    finally:
        await producer.stop()
    restored = {tp: count for tp, (count, _) in zip(by_partition, results, strict=True)}
    after = await true_end_offsets(settings.broker, partitions)
    wrong = [
        f"{tp.topic}[{tp.partition}] ends at {after[tp]}, expected {restored.get(tp, 0)}"
        for tp in partitions
        if after[tp] != restored.get(tp, 0)
    ]
    if wrong:
        raise ArchiveError(
            "after the restore the log does not end where expected (did something else "
            f"write to it meanwhile?): {'; '.join(wrong)}"
        )
    records: dict[str, int] = {}
    for tp, count in restored.items():
        records[tp.topic] = records.get(tp.topic, 0) + count
    counter.finish()
    gaps = tuple(gap for _, partition_gaps in results for gap in partition_gaps)
    committed: dict[tuple[str, int], int] = {}
    lowered: dict[tuple[str, int], int] = {}
    if snapshot is not None:
        targets, lowered = _restored_group_offsets(snapshot, after, gaps)
        committed = await _commit_group_offsets(settings, group_id, targets)
    appended = await _append_kept(settings, kept_files) if kept_files else {}
    return RestoreReport(
        records=records,
        partitions=sum(1 for count in restored.values() if count),
        gaps=gaps,
        elapsed_s=time.monotonic() - started,
        group_id=group_id,
        group_offsets=committed,
        group_offsets_taken_at=None if snapshot is None else snapshot.taken_at,
        group_offsets_lowered=lowered,
        appended=appended,
    )


async def _ensure_changelog(settings: Settings, topic: str) -> None:
    """Create the sessions changelog as the worker's Faust app would: compacted, with the
    partitions ``create_app`` gives the table (those of the chat topic)."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.broker, request_timeout_ms=_ADMIN_TIMEOUT_MS
    )
    await admin.start()
    try:
        new = NewTopic(
            topic, settings.partitions, 1, topic_configs={"cleanup.policy": "compact"}
        )
        response = await admin.create_topics([new])
        for name, error_code, *_ in response.topic_errors:
            error = kafka_errors.for_code(error_code)
            if error is kafka_errors.TopicAlreadyExistsError:
                (description,) = await admin.describe_topics([name])
                found = len(description["partitions"])
                if found != settings.partitions:
                    raise ArchiveError(
                        f"topic {name!r} exists with {found} partitions, but settings ask for "
                        f"{settings.partitions}"
                    )
            elif error is not kafka_errors.NoError:
                raise error(f"creating topic {name!r}")
    finally:
        await admin.close()


async def _refuse_active_group(settings: Settings, group_id: str) -> None:
    """Refuse before republishing anything when the group has members: the broker would
    refuse the offsets of a client outside the group (Tansu as Kafka do)."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.broker, request_timeout_ms=_ADMIN_TIMEOUT_MS
    )
    await admin.start()
    try:
        responses = await admin.describe_consumer_groups([group_id])
    except kafka_errors.KafkaError as exc:
        # Not knowing is no reason to refuse; committing will tell.
        log.warning("restore: could not describe consumer group %s: %r", group_id, exc)
        return
    finally:
        await admin.close()
    # DescribeGroups v0-v3: (error_code, group_id, state, protocol_type, protocol, members...)
    members = sum(len(group[5]) for response in responses for group in response.groups)
    if members:
        raise RestoreRefused(
            f"refusing to restore: consumer group {group_id!r} has {members} member(s) on the "
            "broker (a worker is running against it), so the broker would refuse the group's "
            "archived offsets. Stop the workers, then restore."
        )


def _count_rows(files: Sequence[ArchiveFile]) -> int:
    return sum(pq.read_metadata(file.path).num_rows for file in files)


class _Progress:
    """Shared record count of the partitions restoring at once."""

    def __init__(self, callback: Callable[[int, int], None] | None, total: int) -> None:
        self.callback = callback
        self.total = total
        self.done = 0
        if callback is not None:
            callback(0, total)

    def add(self, count: int) -> None:
        self.done += count
        if self.callback is not None:
            self.callback(self.done, self.total)

    def finish(self) -> None:
        if self.callback is not None and self.done != self.total:
            self.callback(self.done, self.total)


#: offset, timestamp (epoch ms), key, value, headers
_Row = tuple[int, int | None, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def _rows_to_restore(path: Path) -> list[_Row]:
    table = pq.ParquetFile(path).read(columns=["offset", "timestamp", "key", "value", "headers"])
    headers = [
        [(header["key"], header["value"]) for header in row or ()]
        for row in table.column("headers").to_pylist()
    ]
    return list(
        zip(
            table.column("offset").to_pylist(),
            table.column("timestamp").cast(pa.int64()).to_pylist(),
            table.column("key").to_pylist(),
            table.column("value").to_pylist(),
            headers,
            strict=True,
        )
    )


async def _restore_partition(
    producer: AIOKafkaProducer,
    tp: TopicPartition,
    files: Sequence[ArchiveFile],
    counter: _Progress,
) -> tuple[int, list[Gap]]:
    """Republish one partition's files in offset order; return the count and its gaps.

    aiokafka keeps one request in flight per broker and mutes a partition while its batch
    is in flight, so the records of a partition land in the order they are sent; each
    acknowledged offset is still checked against the expected one.
    """
    gaps: list[Gap] = []
    next_archived = 0
    restored = 0
    pending: list[tuple[asyncio.Future[Any], int]] = []

    async def settle() -> None:
        acks = await asyncio.gather(*(future for future, _ in pending))
        for metadata, (_, expected) in zip(acks, pending, strict=True):
            if metadata.offset != expected:
                raise ArchiveError(
                    f"{tp.topic}[{tp.partition}]: a restored record got offset "
                    f"{metadata.offset}, expected {expected}: something else writes to it"
                )
        counter.add(len(pending))
        pending.clear()

    for file in files:
        for offset, timestamp, key, value, headers in await asyncio.to_thread(
            _rows_to_restore, file.path
        ):
            if offset < next_archived:
                raise ArchiveError(
                    f"{tp.topic}[{tp.partition}]: offset {offset} is archived twice "
                    f"(again in {file.path.name}); the archive is damaged"
                )
            if offset > next_archived:
                shift = (gaps[-1].shift if gaps else 0) + offset - next_archived
                gaps.append(Gap(tp.topic, tp.partition, next_archived, offset, shift))
            future = await producer.send(
                tp.topic,
                value,
                key=key,
                partition=tp.partition,
                timestamp_ms=timestamp,
                headers=headers or None,
            )
            pending.append((future, restored))
            restored += 1
            next_archived = offset + 1
            if len(pending) >= _RESTORE_CHUNK:
                await settle()
    await settle()
    return restored, gaps
