"""The live sink (worker role ``archive``): every record of every archived topic into the
live archive as it arrives, with the workers' committed offsets, erasures applied as it
writes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

import aiokafka.errors as kafka_errors
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from memstream.models.settings import Settings
from memstream.projections.archive_format import ARCHIVE
from memstream.projections.shadow import live_name
from memstream.streams.archive.broker_log import (
    _ADMIN_TIMEOUT_MS,
    ArchivePastLog,
    _diverged,
    _Last,
    _last_archived,
    _log_ends,
    log_shortfalls,
)
from memstream.streams.archive.erasures import ArchiveErasures
from memstream.streams.archive.errors import ArchiveError
from memstream.streams.archive.layout import (
    GroupOffsets,
    archive_positions,
    archived_topics,
    read_group_offsets,
    worker_group_id,
)
from memstream.streams.archive.writing import (
    _remove_staging,
    _write_batch,
    _write_group_offsets,
)
from memstream.streams.kafka.tansu import true_end_offsets

log = logging.getLogger(__name__)


async def run_archive_sink(
    settings: Settings,
    stop: asyncio.Event | None = None,
    *,
    log_intact: Callable[[], Awaitable[bool]] | None = None,
) -> None:
    """Archive every record of every archived topic to Parquet until cancelled (or ``stop``).

    A plain consumer with no consumer group: it reads every partition and resumes after the
    last archived offset of each (:func:`archive_positions`), so it needs no committed
    offsets and a crash never loses or doubles a record. A batch is written once
    ``settings.archive_batch_size`` records are buffered or ``settings.archive_flush_s`` after
    the first of them; on ``stop`` the buffer is written first. Between batches it checks the
    live pointer and, when a replay swapped a rebuilt archive in, continues in that one.

    It starts once the memstream topics exist; the sessions changelog, which the worker's
    Faust app creates, is looked for every ``archive_flush_s`` until it exists. As often, it
    reads the offsets the workers' consumer group has committed and, when they changed, keeps
    them as ``group_offsets/<group id>.json`` (:class:`GroupOffsets`) once the archive holds
    every partition up to where its log ended after the read. So the archive always holds
    what the group had processed by then, changelog writes included, and a restore that
    commits those offsets leaves a worker where a crash at that moment would.

    A partition whose log is shorter than the archive, or no longer holds the last archived
    record as archived, means the broker lost its log: it is reported as an error and left
    alone until the sink restarts, never archived again from offset 0 (and no group offsets
    are kept meanwhile: they would be offsets in another log). ``log_intact`` is asked after
    every fetch (:meth:`memstream.streams.kafka.logid.LogWatch.verifier`): once the broker's log
    is not the archived one, nothing more is archived (``memstream restore`` keeps what the
    new log received and appends it after the archive).
    """
    # Imported here: the projector module loads LanceDB, which restore and rebuild never need.
    from memstream.streams.projector.ownership import WriterLock

    stop = stop or asyncio.Event()
    lock = WriterLock(settings.archive_dir / ".sink.lock")
    while not lock.try_acquire():
        log.info("archive: another process writes %s; waiting", settings.archive_dir)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=5)
        if stop.is_set():
            return
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker,
        enable_auto_commit=False,
        # Never jump anywhere on its own: an out-of-range position means the log changed.
        auto_offset_reset="none",
    )
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.broker, request_timeout_ms=_ADMIN_TIMEOUT_MS
    )
    try:
        await consumer.start()
        await admin.start()
        topics = archived_topics(settings)
        # The memstream topics are created before the worker starts; the changelog later.
        required, optional = topics[:-1], topics[-1:]
        partitions = await _wait_for_partitions(consumer, required, stop)
        sink = _ArchiveSink(settings, consumer, admin, partitions, optional, log_intact)
        while not stop.is_set():
            await sink.open_live()
            try:
                await sink.run(stop)
            except asyncio.CancelledError:
                # A worker stops its tasks by cancelling them: keep what was read, so a
                # clean stop loses nothing (a crash only means reading it again).
                await sink.flush_unless_swapped()
                raise
    finally:
        await consumer.stop()
        await admin.close()
        lock.release()


async def _wait_for_partitions(
    consumer: AIOKafkaConsumer, topics: Sequence[str], stop: asyncio.Event
) -> list[TopicPartition]:
    """Every partition of ``topics``, once they all exist (the worker creates them)."""
    while not stop.is_set():
        found = {topic: consumer.partitions_for_topic(topic) for topic in topics}
        if all(found.values()):
            return [TopicPartition(t, p) for t in topics for p in sorted(found[t] or ())]
        # An update of all topics: asking for these by name could auto-create them.
        await consumer._client.force_metadata_update()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.5)
    return []


class _ArchiveSink:
    """The sink's state between batches: where each partition stands, and the buffer."""

    def __init__(
        self,
        settings: Settings,
        consumer: AIOKafkaConsumer,
        admin: AIOKafkaAdminClient,
        partitions: list[TopicPartition],
        awaited: Sequence[str],
        log_intact: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.settings = settings
        self.log_intact = log_intact
        self.consumer = consumer
        self.admin = admin
        self.partitions = partitions
        #: Topics to archive once they exist.
        self.awaited = list(awaited)
        self.name = ARCHIVE
        self.directory = settings.archive_dir / ARCHIVE
        #: Next offset to take per partition: archived, or buffered to be.
        self.read_to: dict[TopicPartition, int] = {}
        #: The last archived record of a resumed partition, until the log shows it again.
        self.expected: dict[TopicPartition, _Last] = {}
        #: Partitions not archived until the sink restarts (their log is not the archived one).
        self.lost: set[TopicPartition] = set()
        self.buffer: dict[TopicPartition, list[ConsumerRecord]] = {}
        self.buffered = 0
        self.first_buffered_at: float | None = None
        self.group_id = worker_group_id(settings)
        #: The group offsets snapshot in ``directory``.
        self.group_offsets: GroupOffsets | None = None
        #: Newer group offsets, kept once every partition is archived up to these ends.
        self.pending_group_offsets: tuple[GroupOffsets, dict[TopicPartition, int]] | None = None
        self.group_offsets_failing = False
        #: Every erasure in the archive and the buffer: what the sink blanks as it writes.
        self.erasures = ArchiveErasures(settings)
        #: Users whose erasure the buffer brought: blanked in the written files at the flush.
        self.newly_erased: set[str] = set()

    async def open_live(self) -> None:
        """(Re)start on the live archive directory: positions, log checks, seeks."""
        self.name = live_name(self.settings.archive_dir, ARCHIVE, ARCHIVE)
        self.directory = self.settings.archive_dir / self.name
        await asyncio.to_thread(_remove_staging, self.directory)
        positions = await asyncio.to_thread(archive_positions, self.directory)
        shortfalls = await log_shortfalls(self.settings, positions)
        for shortfall in shortfalls:
            log.error("archive: %s", shortfall.explain())
        short = {TopicPartition(s.topic, s.partition) for s in shortfalls}
        starts = {
            tp: positions.get((tp.topic, tp.partition), 0)
            for tp in self.partitions
            if tp not in short
        }
        self.expected = await asyncio.to_thread(_last_archived, self.directory, starts)
        self.read_to = starts
        self.lost = short & set(self.partitions)
        self.buffer = {}
        self.buffered = 0
        self.first_buffered_at = None
        try:
            self.group_offsets = await asyncio.to_thread(
                read_group_offsets, self.directory, self.group_id
            )
        except ArchiveError as exc:
            log.error("archive: %s; writing a new one", exc)
            self.group_offsets = None
        self.pending_group_offsets = None
        # The erasures already archived keep applying to what is archived from now on (a
        # record of an erased user can arrive on another topic after its erasure record).
        self.erasures = ArchiveErasures(self.settings)
        await asyncio.to_thread(self.erasures.load, self.directory)
        self.newly_erased = set()
        self.consumer.assign(list(starts))
        for tp, position in starts.items():
            # From the last archived record, to check the log still holds it as archived.
            self.consumer.seek(tp, position - 1 if tp in self.expected else position)
        log.info("archive: writing %s from %d partitions", self.directory, len(starts))

    async def run(self, stop: asyncio.Event) -> None:
        """Archive until ``stop`` is set (writing the buffer first), until a replay swaps the
        live archive (dropping the buffer: the new archive has its own positions), or until
        an awaited topic appears (writing the buffer, to start again with it)."""
        wait_s = min(self.settings.archive_flush_s, 0.5)
        next_check = time.monotonic() + self.settings.archive_flush_s
        while not stop.is_set():
            for tp, records in (await self._fetch(wait_s)).items():
                self._take(tp, records)
            self._check_highwaters()
            now = time.monotonic()
            due = self.buffered >= self.settings.archive_batch_size or (
                self.first_buffered_at is not None
                and now - self.first_buffered_at >= self.settings.archive_flush_s
            )
            if (due or now >= next_check) and self._swapped():
                return
            if now >= next_check:
                next_check = now + self.settings.archive_flush_s
                if await self._awaited_topic_appeared():
                    await self._flush()
                    return
                await self._read_group_offsets()
            if due:
                await self._flush()
        await self.flush_unless_swapped()

    async def flush_unless_swapped(self) -> None:
        """Write the buffer, unless a replay swapped the live archive meanwhile (the new one
        has its own positions, which the buffer may not continue)."""
        if not self._swapped():
            await self._flush()

    async def _fetch(self, wait_s: float) -> dict[TopicPartition, list[ConsumerRecord]]:
        room = max(self.settings.archive_batch_size - self.buffered, 1)
        try:
            fetched: dict[TopicPartition, list[ConsumerRecord]] = await self.consumer.getmany(
                timeout_ms=int(wait_s * 1000), max_records=room
            )
        except kafka_errors.OffsetOutOfRangeError as exc:
            # Apache Kafka answers a position past the log end (or below a log start that
            # retention moved) this way; Tansu answers with a smaller high watermark.
            await self._out_of_range(list(dict(exc.args[0])))
            return {}
        if fetched and self.log_intact is not None and not await self.log_intact():
            for tp in list(self.read_to):
                self._lose(tp, "the broker's log is not the archived one (it lost its log)")
            return {}
        return fetched

    async def _out_of_range(self, partitions: list[TopicPartition]) -> None:
        ends = await _log_ends(self.settings, partitions)
        for tp in partitions:
            position = self.read_to[tp]
            if position > ends[tp]:
                self._lose(tp, ArchivePastLog(tp.topic, tp.partition, position, ends[tp]).explain())
            else:
                self._lose(
                    tp,
                    f"{tp.topic}[{tp.partition}]: the broker no longer holds offset {position} "
                    "(its retention deleted it before it was archived), so the archive would "
                    "have a gap here. This partition is not archived until the sink restarts; "
                    "raise the topic's retention, then restart the worker.",
                )

    def _take(self, tp: TopicPartition, records: list[ConsumerRecord]) -> None:
        if tp in self.lost or tp not in self.read_to:
            return
        for record in records:
            last = self.expected.pop(tp, None)
            if last is not None and record.offset == last.offset:
                if not last.matches(record):
                    self._lose(tp, _diverged(tp, last))
                    return
                continue
            if record.offset < self.read_to[tp]:
                continue
            self.buffer.setdefault(tp, []).append(record)
            self.read_to[tp] = record.offset + 1
            self.buffered += 1
            if self.first_buffered_at is None:
                self.first_buffered_at = time.monotonic()
            erased = self.erasures.note(record)
            if erased is not None:
                # Applied at the flush: to the buffered records as they are written, and to
                # the files written before, which may hold the user's earlier records.
                log.info("archive: a user_erased record at %s[%d]@%d", tp.topic, tp.partition, record.offset)
                self.newly_erased.add(erased)

    def _check_highwaters(self) -> None:
        """A log end below what was already read: the broker restarted with an empty log."""
        for tp, position in self.read_to.items():
            highwater = self.consumer.highwater(tp)
            if tp not in self.lost and highwater is not None and highwater < position:
                self._lose(tp, ArchivePastLog(tp.topic, tp.partition, position, highwater).explain())

    def _lose(self, tp: TopicPartition, reason: str) -> None:
        # Records already buffered came from the old log and are still archived.
        log.error("archive: %s", reason)
        self.lost.add(tp)
        self.expected.pop(tp, None)
        self.consumer.pause(tp)

    def _swapped(self) -> bool:
        name = live_name(self.settings.archive_dir, ARCHIVE, ARCHIVE)
        if name == self.name:
            return False
        log.info("archive: a replay swapped in %s; continuing there", name)
        return True

    async def _awaited_topic_appeared(self) -> bool:
        """Whether an awaited topic exists now; its partitions are then added."""
        if not self.awaited:
            return False
        try:
            # Listing every topic: asking for these by name could auto-create them.
            existing = set(await self.admin.list_topics())
            appeared = [topic for topic in self.awaited if topic in existing]
            described = await self.admin.describe_topics(appeared) if appeared else []
        except kafka_errors.KafkaError as exc:
            log.warning("archive: could not list the broker's topics: %r", exc)
            return False
        added = False
        for description in described:
            numbers = sorted(p["partition"] for p in description["partitions"])
            if description["error_code"] or not numbers:
                continue  # still being created
            topic = description["topic"]
            self.awaited.remove(topic)
            self.partitions += [TopicPartition(topic, number) for number in numbers]
            log.info("archive: %s exists now; archiving its %d partitions", topic, len(numbers))
            added = True
        return added

    async def _read_group_offsets(self) -> None:
        """Read the group's committed offsets; when they changed, keep them pending until the
        archive reaches the log ends taken after the read (:meth:`_keep_group_offsets`)."""
        if self.pending_group_offsets is not None or self.lost or not self.read_to:
            return
        taken_at = datetime.now(UTC)
        try:
            # With the partitions named: Tansu cannot answer the "all partitions" form.
            found = await self.admin.list_consumer_group_offsets(
                self.group_id, partitions=list(self.read_to)
            )
            committed = {
                (tp.topic, tp.partition): meta.offset
                for tp, meta in found.items()
                if tp in self.read_to and meta.offset >= 0
            }
            if not committed or (
                self.group_offsets is not None and committed == dict(self.group_offsets.offsets)
            ):
                self._group_offsets_readable()
                return
            ends = await true_end_offsets(self.settings.broker, list(self.read_to))
        except kafka_errors.KafkaError as exc:
            if not self.group_offsets_failing:
                log.warning(
                    "archive: cannot read the committed offsets of group %s (%r); a restore "
                    "of this archive will start workers from older offsets",
                    self.group_id,
                    exc,
                )
            self.group_offsets_failing = True
            return
        self._group_offsets_readable()
        self.pending_group_offsets = (GroupOffsets(self.group_id, taken_at, committed), ends)
        await self._keep_group_offsets()

    def _group_offsets_readable(self) -> None:
        if self.group_offsets_failing:
            log.info("archive: the committed offsets of group %s are readable again", self.group_id)
        self.group_offsets_failing = False

    def _archived_to(self, tp: TopicPartition) -> int:
        buffered = self.buffer.get(tp)
        return buffered[0].offset if buffered else self.read_to[tp]

    async def _keep_group_offsets(self) -> None:
        """Write the pending group offsets once every partition is archived up to the log end
        read after them: then the archive holds all the group had processed by then."""
        if self.pending_group_offsets is None:
            return
        snapshot, ends = self.pending_group_offsets
        if self.lost or any(self._archived_to(tp) < end for tp, end in ends.items()):
            return
        await asyncio.to_thread(_write_group_offsets, self.directory, snapshot)
        self.group_offsets = snapshot
        self.pending_group_offsets = None

    async def _flush(self) -> None:
        if self.buffered:
            batch = dict(sorted(self.buffer.items()))
            newly = self.erasures.only(self.newly_erased) if self.newly_erased else None
            write = asyncio.ensure_future(
                asyncio.to_thread(
                    _write_batch,
                    self.directory,
                    batch,
                    self.settings.max_event_bytes,
                    self.erasures.copy(),
                    newly,
                )
            )
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                # A stop cancels the task, not the thread: let the write land before anything
                # else (the final flush of a clean stop) writes the same files.
                await asyncio.wait({write})
                if write.exception() is None:
                    self._written()
                raise
            self._written()
        await self._keep_group_offsets()

    def _written(self) -> None:
        self.buffer = {}
        self.buffered = 0
        self.first_buffered_at = None
        self.newly_erased = set()
