"""Rebuilding an archive from the broker's log: every archived topic from offset 0 (or from
where the target's files end) to its current end, or only up to a given time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from memstream.models.settings import Settings
from memstream.streams.archive.broker_log import (
    _diverged,
    _existing_partitions,
    _Last,
    _last_archived,
    log_shortfalls,
)
from memstream.streams.archive.erasures import ArchiveErasures
from memstream.streams.archive.errors import ArchiveError
from memstream.streams.archive.layout import archive_positions, archived_topics
from memstream.streams.archive.rows import _timestamp_ms
from memstream.streams.archive.writing import _remove_staging, _write_batch
from memstream.streams.kafka.tansu import true_end_offsets


def _until_ms(until: datetime | None) -> int | None:
    """``until`` in epoch milliseconds, rounded down (a naive time is taken as UTC)."""
    if until is None:
        return None
    aware = until if until.tzinfo is not None else until.replace(tzinfo=UTC)
    return (aware - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


async def rebuild_archive(
    settings: Settings,
    target: Path,
    *,
    until: datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Archive every archived topic (:func:`archived_topics`) from offset 0 to its current
    end into ``target``. It keeps no group offsets: the live sink does.

    Erasures apply as the live sink applies them (:class:`ArchiveErasures`): a record of an
    erased user that the log held before the ``user_erased`` event is written blanked, or
    blanked once the rebuild has read the erasure, so the rebuilt archive holds what the
    live one does after ``memstream erase``.

    Parameters
    ----------
    settings
        Broker, topics and ``archive_batch_size`` (records per write).
    target
        A fresh directory (created if missing). If it already holds archive files, the
        rebuild continues after them, once it has checked the log still holds their last
        records.
    until
        Keep only records whose broker timestamp is at or before this time (naive = UTC);
        each partition stops at its first later record. Erasures later in the log still
        apply: what was erased stays erased in a past archive too.
    progress
        Called now and then with (records done, records in all).

    Returns
    -------
    int
        Records written by this call.

    Raises
    ------
    ArchiveError
        If ``target`` holds records the log does not have (another log's archive).
    TimeoutError
        If the broker sends nothing for 30 s while records remain.

    Examples
    --------
    >>> await rebuild_archive(settings, settings.archive_dir / "archive-rebuilt")  # doctest: +SKIP
    1532
    """
    target.mkdir(parents=True, exist_ok=True)
    await asyncio.to_thread(_remove_staging, target)
    positions = await asyncio.to_thread(archive_positions, target)
    shortfalls = await log_shortfalls(settings, positions)
    if shortfalls:
        raise ArchiveError(
            f"{target} already holds records the broker's log does not have:\n"
            + "\n".join(s.explain() for s in shortfalls)
        )
    existing = await _existing_partitions(settings, archived_topics(settings))
    partitions = [TopicPartition(t, p) for t, numbers in existing.items() for p in numbers]
    ends = await true_end_offsets(settings.broker, partitions)
    starts = {tp: positions.get((tp.topic, tp.partition), 0) for tp in partitions}
    erasures = ArchiveErasures(settings)
    await asyncio.to_thread(erasures.load, target)
    reader = _Rebuild(settings, target, starts, ends, _until_ms(until), progress, erasures)
    expected = await asyncio.to_thread(_last_archived, target, reader.read_to)
    written = await reader.run(expected)
    # Records written before the rebuild read their erasure (topics are read side by side,
    # and an earlier, interrupted run may have stopped before this pass): one pass over the
    # files with every erasure the log holds.
    await asyncio.to_thread(erasures.blank_files, target)
    return written


class _Rebuild:
    """One bounded read of every partition into an archive directory."""

    def __init__(
        self,
        settings: Settings,
        target: Path,
        starts: Mapping[TopicPartition, int],
        ends: Mapping[TopicPartition, int],
        until_ms: int | None,
        progress: Callable[[int, int], None] | None,
        erasures: ArchiveErasures,
    ) -> None:
        self.settings = settings
        self.target = target
        self.erasures = erasures
        #: Partitions past ``until``: read on for erasures only.
        self.cut: set[TopicPartition] = set()
        self.starts = dict(starts)
        self.ends = dict(ends)
        self.until_ms = until_ms
        self.progress = progress
        self.read_to = {tp: start for tp, start in starts.items() if start < ends[tp]}
        self.total = sum(self.ends[tp] - start for tp, start in self.read_to.items())
        self.finished: set[TopicPartition] = set()
        self.buffer: dict[TopicPartition, list[ConsumerRecord]] = {}
        self.buffered = 0
        self.written = 0

    def _done(self) -> int:
        return sum(
            (self.ends[tp] if tp in self.finished else position) - self.starts[tp]
            for tp, position in self.read_to.items()
        )

    def _report(self) -> None:
        if self.progress is not None:
            self.progress(self._done(), self.total)

    async def run(self, expected: dict[TopicPartition, _Last]) -> int:
        self._report()
        if not self.read_to:
            return 0
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.broker,
            enable_auto_commit=False,
            auto_offset_reset="none",
        )
        await consumer.start()
        try:
            consumer.assign(list(self.read_to))
            for tp, position in self.read_to.items():
                consumer.seek(tp, position - 1 if tp in expected else position)
            stalled_at = time.monotonic()
            while len(self.finished) < len(self.read_to):
                fetched = await consumer.getmany(
                    timeout_ms=500, max_records=self.settings.archive_batch_size
                )
                if not fetched and time.monotonic() - stalled_at > 30:
                    raise TimeoutError("the broker sent nothing for 30 s while rebuilding")
                if fetched:
                    stalled_at = time.monotonic()
                for tp, records in fetched.items():
                    self._take(tp, records, expected)
                    if tp in self.finished:
                        consumer.pause(tp)
                if self.buffered >= self.settings.archive_batch_size:
                    await self._flush()
                if fetched:
                    self._report()
            await self._flush()
        finally:
            await consumer.stop()
        self._report()
        return self.written

    def _take(
        self,
        tp: TopicPartition,
        records: list[ConsumerRecord],
        expected: dict[TopicPartition, _Last],
    ) -> None:
        if tp in self.finished:
            return
        for record in records:
            last = expected.pop(tp, None)
            if last is not None and record.offset == last.offset:
                if not last.matches(record):
                    raise ArchiveError(
                        f"{self.target} is not an archive of this log: " + _diverged(tp, last)
                    )
                continue
            if record.offset < self.read_to[tp]:
                continue
            timestamp = _timestamp_ms(record)
            if record.offset >= self.ends[tp]:
                self.finished.add(tp)
                return
            if tp in self.cut or (
                self.until_ms is not None and timestamp is not None and timestamp > self.until_ms
            ):
                # Past ``until``: not archived. An erasure later in the log still applies to
                # the archive as it stood then, so the partitions that carry erasures are
                # read on to their end for them.
                if tp.topic not in self.erasures.ledger.topics:
                    self.finished.add(tp)
                    return
                self.cut.add(tp)
                self.erasures.note(record)
                self.read_to[tp] = record.offset + 1
                continue
            self.buffer.setdefault(tp, []).append(record)
            self.read_to[tp] = record.offset + 1
            self.buffered += 1
            self.erasures.note(record)
        if self.read_to[tp] >= self.ends[tp]:
            self.finished.add(tp)

    async def _flush(self) -> None:
        if not self.buffered:
            return
        batch = dict(sorted(self.buffer.items()))
        await asyncio.to_thread(
            _write_batch, self.target, batch, self.settings.max_event_bytes, self.erasures.copy()
        )
        self.written += self.buffered
        self.buffer = {}
        self.buffered = 0
