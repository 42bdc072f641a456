"""Rebuilding the memory projection from the log: ``memstream replay`` and ``verify``.

A replay projects the memories and accesses topics, from offset 0 to the ends they had when
it began, into a fresh shadow table with the projector's own loop (so it folds events
exactly as the live projector does), while the live table keeps serving. It never calls an
extractor: the memories topic holds the recorded extractions and decisions. Then it builds
the indexes, fingerprints the result, and swaps it in by replacing one pointer file; the
live projector notices, reopens on the new table and carries on from that table's own
positions.

An interrupted replay resumes: the name of the table being built is kept in
``memories.REPLAY`` beside the tables, and the rows of the shadow table record their source
offsets like any projection's, so a second run continues where the first stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from aiokafka import AIOKafkaConsumer

from memstream.models.fingerprint import Fingerprint, fingerprint
from memstream.models.settings import Settings
from memstream.projections.embedder import Embedder, embedder_from_settings
from memstream.projections.memories import (
    VIEW_COLUMNS,
    EmbeddingModelMismatch,
    MemoryProjection,
    MemoryStore,
    PartitionedMemories,
    ProjectionOutdated,
    ProjectionStore,
)
from memstream.projections.shadow import shadow_name
from memstream.streams.kafka.tansu import true_end_offsets
from memstream.streams.kafka.topics import Topics
from memstream.streams.projector.loop import ProjectorLoop
from memstream.streams.projector.memories import live_table
from memstream.streams.projector.starts import (
    ProjectionPastLog,
    assigned_partitions,
    start_positions,
)

log = logging.getLogger(__name__)

#: Records per write of a replay.
REPLAY_BATCH = 5_000
#: Called with (records done, records in all) as a replay goes.
Progress = Callable[[int, int], None]
#: Allocations between two young-generation collections while a replay runs (CPython's
#: default is 700).
REPLAY_GC_THRESHOLD = 100_000


@dataclass(frozen=True)
class MemoryReplay:
    """What a replay of the memory projection did."""

    table: str
    records: int
    invalid: int
    fingerprint: Fingerprint
    live_table: str
    live_fingerprint: Fingerprint | None
    swapped: bool
    elapsed_s: float

    @property
    def matches_live(self) -> bool | None:
        """Whether the rebuilt view equals the live one (None when the live one was not
        compared: it was missing, or at other log positions)."""
        if self.live_fingerprint is None:
            return None
        return self.live_fingerprint == self.fingerprint


def memories_fingerprint(projection: MemoryStore) -> Fingerprint:
    """The fingerprint of the memory projection's current view (every row, every status)."""
    return fingerprint("memories", projection.view_rows(VIEW_COLUMNS), VIEW_COLUMNS)


#: Beside the tables: the name of the shadow table a replay is building.
PENDING_REPLAY = "memories.REPLAY"


def pending_replay(settings: Settings) -> str | None:
    """The shadow table an interrupted replay was building, if any."""
    text = ProjectionStore.from_settings(settings).read_text(PENDING_REPLAY)
    return (text or "").strip() or None


async def rebuild_memories(
    settings: Settings,
    table: str,
    *,
    embedder: Embedder | None = None,
    donor: PartitionedMemories | None = None,
    until: datetime | None = None,
    progress: Progress | None = None,
    bulk: bool = True,
) -> tuple[PartitionedMemories, int, int]:
    """Project both topics into ``table`` up to their current ends; return the projection,
    the records read and the records that were not valid events.

    A new ``table`` is built in bulk (:meth:`PartitionedMemories.stage`: events folded in
    memory, each partition written with one ``create_table``); one that holds part of a
    projection already (a resumed replay) continues from the offsets its rows record,
    through merges (as every table does with ``bulk`` False). With ``until``, records the
    log got after that time are read past and not applied (the projection as it stood
    then). Vectors are taken from
    ``donor`` (the live table) for memories it holds with the same content, so a rebuild
    embeds only what is new.

    Raises
    ------
    LogShorterThanProjection
        ``table`` holds offsets past the end of the log (the broker lost it).
    TopicMissing
        The memories or accesses topic is not on the broker.
    """
    with _collections_deferred():
        return await _rebuild(settings, table, embedder, donor, until, progress, bulk)


@contextlib.contextmanager
def _collections_deferred() -> Iterator[None]:
    """Run the cyclic garbage collector rarely meanwhile (the thresholds are the process's).

    A replay allocates millions of objects that stay alive (decoded events, rows held for
    the bulk write) and makes no cycles of its own, so each collection finds nothing while
    it walks them all: at CPython's thresholds, collections took about half of decoding and
    of building rows (20,000 memories: decoding 0.37 -> 0.20 s, rows 0.30 -> 0.10 s).
    """
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], REPLAY_GC_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


async def _rebuild(
    settings: Settings,
    table: str,
    embedder: Embedder | None,
    donor: PartitionedMemories | None,
    until: datetime | None,
    progress: Progress | None,
    bulk: bool,
) -> tuple[PartitionedMemories, int, int]:
    """:func:`rebuild_memories`' work."""
    if embedder is None:
        embedder = await asyncio.to_thread(embedder_from_settings, settings)
    projection = PartitionedMemories.from_settings(settings, embedder, table)
    projection.vector_donor = donor
    # Bigger batches than live: nobody waits on a replay's individual events.
    settings = settings.model_copy(
        update={"projection_batch_size": max(settings.projection_batch_size, REPLAY_BATCH)}
    )
    topics = Topics.from_settings(settings)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:  # stopped below even when the start fails: no leak
        await consumer.start()
        partitions = await assigned_partitions(consumer, topics.memories, timeout_s=10)
        partitions += await assigned_partitions(consumer, topics.accesses, timeout_s=10)
        starts, shortfalls = await start_positions(settings, projection, partitions)
        if donor is not None and not shortfalls:
            # A log shorter than the live projection is a lost log, not a smaller truth:
            # rebuilding from it would swap a projection with less in it. Restore first.
            _, shortfalls = await start_positions(settings, donor, partitions)
        if shortfalls:
            raise LogShorterThanProjection(shortfalls)
        ends = await true_end_offsets(settings.broker, partitions)
        total = sum(max(ends[tp] - starts[tp], 0) for tp in partitions)
        done = 0

        def on_batch(records: int) -> None:
            nonlocal done
            done += records
            if progress is not None:
                progress(min(done, total), total)

        if progress is not None:
            progress(0, total)
        consumer.assign(partitions)
        for tp, offset in starts.items():
            consumer.seek(tp, offset)
        # A new table is built in bulk: the same fold, in memory, then one create_table per
        # partition. A resumed one (rows and offsets already in it) goes through merges.
        bulk = (
            bulk
            and not any(starts.values())
            and not await asyncio.to_thread(projection.exists)
        )
        if bulk:
            await asyncio.to_thread(projection.stage)
        projector = ProjectorLoop(
            settings,
            consumer,
            None,
            projection,
            starts,
            asyncio.Event(),
            until=until,
            finish_at=ends,
            on_batch=on_batch,
        )
        await projector.run(asyncio.Event())
        # One thread per partition's table: LanceDB writes and builds indexes without the GIL,
        # and a table's indexes need not wait for the other tables' writes.
        tables = [projection.table(p) for p in range(projection.partitions)]
        await asyncio.gather(*(asyncio.to_thread(_finish_table, t, bulk) for t in tables))
        if progress is not None:
            progress(total, total)
        return projection, total, projector.invalid
    finally:
        await consumer.stop()


def _finish_table(table: MemoryProjection, bulk: bool) -> None:
    """Write a partition's held rows (a bulk build) and build its table's indexes."""
    if bulk:
        table.write_staged()
    if table.exists():
        table.refresh_indexes()


class LogShorterThanProjection(RuntimeError):
    """The log ends before offsets a projection already holds: the broker lost it."""

    def __init__(self, shortfalls: list[ProjectionPastLog]) -> None:
        super().__init__("\n".join(s.explain() for s in shortfalls))
        self.shortfalls = shortfalls


async def replay_memories(
    settings: Settings,
    *,
    until: datetime | None = None,
    swap: bool = True,
    resume: bool = True,
    progress: Progress | None = None,
) -> MemoryReplay:
    """Rebuild the memory projection into a shadow table and (by default) swap it in.

    With ``until`` the table is the projection as it stood then; it is kept under its own
    name and never swapped in (search it with ``memstream search --table NAME``).
    """
    started = time.perf_counter()
    pending = pending_replay(settings) if resume and until is None else None
    table = pending or shadow_name("memories-until" if until is not None else "memories")
    store = ProjectionStore.from_settings(settings)
    if until is None:
        store.write_text(PENDING_REPLAY, table + "\n")
    embedder = await asyncio.to_thread(embedder_from_settings, settings)
    live = live_table(settings)
    live_projection = PartitionedMemories.from_settings(settings, embedder, live)
    projection, records, invalid = await rebuild_memories(
        settings,
        table,
        embedder=embedder,
        donor=live_projection if live != table and _readable(live_projection) else None,
        until=until,
        progress=progress,
    )
    rebuilt = await asyncio.to_thread(memories_fingerprint, projection)
    live_print: Fingerprint | None = None
    if until is None and live != table and _readable(live_projection):
        same_positions = await asyncio.to_thread(
            lambda: live_projection.positions() == projection.positions()
        )
        if same_positions:
            live_print = await asyncio.to_thread(memories_fingerprint, live_projection)
    swapped = False
    if swap and until is None:
        store.swap_in("memories", table)
        store.delete(PENDING_REPLAY)
        swapped = True
    return MemoryReplay(
        table=table,
        records=records,
        invalid=invalid,
        fingerprint=rebuilt,
        live_table=live,
        live_fingerprint=live_print,
        swapped=swapped,
        elapsed_s=time.perf_counter() - started,
    )


def _readable(projection: PartitionedMemories) -> bool:
    """Whether a table exists and this memstream can read it (a table of an older schema or
    another embedding model is exactly what a replay replaces)."""
    try:
        return projection.exists()
    except (ProjectionOutdated, EmbeddingModelMismatch) as exc:
        log.warning("replay: the live table cannot be read (%s); nothing is compared", exc)
        return False


async def verify_memories(settings: Settings, *, progress: Progress | None = None) -> tuple[Fingerprint, Fingerprint]:
    """Fingerprint the live memory projection and one rebuilt from the log (in a scratch
    table, dropped afterwards); return (live, rebuilt).

    The live projector should be caught up (or stopped) for the two to be comparable.
    """
    embedder = await asyncio.to_thread(embedder_from_settings, settings)
    live = PartitionedMemories.from_settings(settings, embedder, live_table(settings))
    scratch = shadow_name("memories-verify")
    projection, _, _ = await rebuild_memories(
        settings,
        scratch,
        embedder=embedder,
        donor=live if _readable(live) else None,
        progress=progress,
    )
    try:
        rebuilt = await asyncio.to_thread(memories_fingerprint, projection)
        current = await asyncio.to_thread(memories_fingerprint, live)
    finally:
        await asyncio.to_thread(projection.drop)
    return current, rebuilt
