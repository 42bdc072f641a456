"""The memory projector: the single writer that projects the memories and accesses topics
into LanceDB, and runs the tier keeper beside it.

The projection has one table per partition of the topics
(:class:`~memstream.projections.memories.PartitionedMemories`). The projector is a plain
consumer with no consumer group of its own: it reads the partitions of both topics its worker
owns (the worker's Faust assignment: :mod:`memstream.streams.projector.ownership`), and
resumes each from the source offsets stored in that partition's rows (the projection's
tracking records: :meth:`MemoryProjection.positions` for memory events,
:meth:`MemoryProjection.access_positions` for retrievals), so a crash between a write and a
commit cannot lose or double anything, and a partition that moves to another worker is taken
up where its table stands (:mod:`memstream.streams.projector.starts`). An advisory lock per
partition table keeps it to one writer when several workers share a data directory
(:class:`~memstream.streams.projector.ownership.WriterLock`). Every write goes through one
loop (:mod:`memstream.streams.projector.loop`), so memory changes and access counts never
race on a row.

A retrieval names memories the retriever found in a projection, so they are earlier in the
memories log than the retrieval is in the accesses log. A replay reads both topics at once and
the cheap access events would outrun the embedded memories; so access events of a partition
are held until the same partition of the memories topic is read to its end (both topics are
keyed by user id, so a user's memories and retrievals share the partition number). A replay
therefore counts exactly the retrievals the live projection counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaConsumer

from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import (
    DEFAULT_TABLE,
    MemoryProjection,
    PartitionedMemories,
    ProjectionStore,
)
from memstream.streams.agents.boundary import StateReport
from memstream.streams.kafka.publisher import KafkaPublisher
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.store import KeyStore, keystore_from_settings
from memstream.streams.observability.metrics import PROJECTOR_PARTITIONS, MeteredEmbedder
from memstream.streams.projector.loop import ProjectorLoop, ProjectorProgress
from memstream.streams.projector.ownership import Ownership, WriterLock, partition_lock
from memstream.streams.projector.starts import assigned_partitions, start_positions
from memstream.streams.projector.stopping import stop_task
from memstream.streams.projector.tiers import run_tier_keeper, scan_interval

log = logging.getLogger(__name__)


async def run_memory_projector(
    settings: Settings,
    stop: asyncio.Event | None = None,
    *,
    tiers: bool = True,
    progress: ProjectorProgress | None = None,
    log_intact: Callable[[], Awaitable[bool]] | None = None,
    report: StateReport | None = None,
    keys: KeyStore | None = None,
    ownership: Ownership | None = None,
) -> None:
    """Project memory and access events into LanceDB until cancelled (or ``stop`` is set).

    It writes the live projection, one table per partition
    (:class:`~memstream.projections.memories.PartitionedMemories`), and of those only the
    partitions ``ownership`` says this worker owns (every one without it), holding each
    partition's lock file while it writes it. When a replay swaps a rebuilt projection in,
    or a rebalance changes the owned partitions, it finishes its batch and starts again on
    the new ones, each from the positions its table holds.

    With ``tiers`` (the default) the tier keeper (:mod:`memstream.streams.projector.tiers`) runs in
    the same process, on the partitions this writes, and publishes its promotions and
    expiries with the projector's producer. It scans only while the projection is caught up
    with the log, so a replay or a restart never acts on a half-built projection.
    ``progress`` is marked whenever it is caught up; ``report`` is told when it retries a
    broker or store failure, and when it works again. ``log_intact`` is asked after every
    fetch (:meth:`memstream.streams.kafka.logid.LogWatch.verifier`): once the broker lost the log,
    nothing fetched is applied and the projector stops.
    """
    stop = stop or asyncio.Event()
    ownership = ownership or Ownership(settings.partitions)
    embedder = MeteredEmbedder(
        await asyncio.to_thread(embedder_from_settings, settings), "projection"
    )
    while not stop.is_set():
        owned = await ownership.known()
        locks = await _lock_partitions(settings, owned, ownership, stop)
        if locks is None:
            continue  # the owned partitions changed while waiting for a lock
        _show_partitions(owned)
        try:
            table = live_table(settings)
            projection = PartitionedMemories.from_settings(settings, embedder, table, owned=owned)
            projection.vector_donor = _unpartitioned(settings, embedder, table, projection)
            halt = asyncio.Event()
            watcher = asyncio.create_task(
                _watch_spell(settings, table, owned, ownership, stop, halt)
            )
            try:
                await _project_table(
                    settings,
                    projection,
                    halt,
                    tiers=tiers,
                    progress=progress,
                    log_intact=log_intact,
                    report=report,
                    keys=keys,
                )
            finally:
                await stop_task(watcher)
        finally:
            _show_partitions(frozenset())
            for lock in locks:
                lock.release()


def _show_partitions(owned: frozenset[int]) -> None:
    """Say on /metrics which partitions' tables this worker writes now."""
    PROJECTOR_PARTITIONS.clear()
    for partition in owned:
        PROJECTOR_PARTITIONS.labels(partition=str(partition)).set(1)


async def _lock_partitions(
    settings: Settings, owned: frozenset[int], ownership: Ownership, stop: asyncio.Event
) -> list[WriterLock] | None:
    """The lock of every owned partition's table, waiting for another process (the previous
    owner finishing its batch) to let go; None if the ownership changed meanwhile. None to
    take on an object store: there the consumer group's assignment is the one writer of a
    partition, and a previous owner's last commit is ordered by LanceDB's conditional PUT
    of the table's manifest (docs/long-term-memory.md, "Memories on an object store")."""
    locks: list[WriterLock] = []
    if not ProjectionStore.from_settings(settings).locks_apply:
        return locks
    for partition in sorted(owned):
        lock = WriterLock(partition_lock(settings, partition))
        while not lock.try_acquire():
            if ownership.owned != owned or stop.is_set():
                for held in locks:
                    held.release()
                return None
            log.info("projector: another process writes partition %d; waiting", partition)
            await asyncio.sleep(1)
        locks.append(lock)
    return locks


def _unpartitioned(
    settings: Settings, embedder: Any, table: str, projection: PartitionedMemories
) -> MemoryProjection | None:
    """The table of every partition a data directory held before the projection was
    partitioned, when its partitions' tables are still to be built: they take its vectors
    (rebuilt from the log, nothing embedded again). None otherwise."""
    if projection.exists():
        return None
    old = MemoryProjection(ProjectionStore.from_settings(settings), embedder, table)
    return old if old.exists() else None


def live_table(settings: Settings) -> str:
    """The name of the live memories table in ``settings``' store."""
    return ProjectionStore.from_settings(settings).live_name("memories", DEFAULT_TABLE)


async def _watch_spell(
    settings: Settings,
    table: str,
    owned: frozenset[int],
    ownership: Ownership,
    stop: asyncio.Event,
    halt: asyncio.Event,
) -> None:
    """Set ``halt`` once ``stop`` is set, a replay swapped another projection in, or the
    owned partitions changed."""
    store = ProjectionStore.from_settings(settings)
    pointer_due = 0.0
    while not stop.is_set():
        # The pointer of an object store is a GET: off the event loop, and no more often
        # than its readers look.
        if time.monotonic() >= pointer_due:
            pointer_due = time.monotonic() + store.pointer_check_s
            live = await asyncio.to_thread(store.live_name, "memories", DEFAULT_TABLE)
            if live != table:
                log.info("projector: a replay swapped in table %r", live)
                break
        if ownership.owned != owned:
            log.info(
                "projector: now owns partitions %s (was %s)",
                sorted(ownership.owned or ()), sorted(owned),
            )
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.5)
    halt.set()


async def _project_table(
    settings: Settings,
    projection: PartitionedMemories,
    stop: asyncio.Event,
    *,
    tiers: bool,
    progress: ProjectorProgress | None = None,
    log_intact: Callable[[], Awaitable[bool]] | None = None,
    report: StateReport | None = None,
    keys: KeyStore | None = None,
) -> None:
    """One spell of projecting into ``projection``'s table, until ``stop`` is set."""
    keys = keys if keys is not None else keystore_from_settings(settings)
    topics = Topics.from_settings(settings)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        # Tansu holds a fetch this long even when memory events arrive meanwhile.
        fetch_max_wait_ms=settings.fetch_max_wait_ms,
    )
    # Tier changes and dead letters; the worker claimed the log, and neither is a user's.
    producer = KafkaPublisher(settings, keys, check=False, claim=False)
    keeper: asyncio.Task[None] | None = None
    try:
        await consumer.start()
        partitions = await assigned_partitions(consumer, topics.memories)
        partitions += await assigned_partitions(consumer, topics.accesses)
        partitions = [tp for tp in partitions if tp.partition in projection.owned]
        starts, shortfalls = await start_positions(settings, projection, partitions)
        for shortfall in shortfalls:
            log.error("projector: %s", shortfall.explain())
        lost = {s.partition for s in shortfalls}
        # A partition whose log is shorter than the projection is not read at all: reading
        # it again from 0 would mix two logs, and offsets the projection already holds
        # would be taken as seen. Restore the log (`memstream restore`) and restart.
        starts = {tp: offset for tp, offset in starts.items() if tp.partition not in lost}
        consumer.assign(list(starts))
        for tp, offset in starts.items():
            consumer.seek(tp, offset)
        caught_up = asyncio.Event()
        if tiers:
            keeper = asyncio.create_task(
                run_tier_keeper(
                    settings,
                    projection,
                    producer,
                    interval_s=scan_interval(settings),
                    ready=caught_up,
                    stop=stop,
                ),
                name="tier-keeper",
            )
        projector = ProjectorLoop(
            settings,
            consumer,
            producer,
            projection,
            starts,
            caught_up,
            progress=progress,
            log_intact=log_intact,
            report=report,
            keys=keys,
        )
        await projector.run(stop)
    finally:
        if keeper is not None:
            await stop_task(keeper)
        await consumer.stop()
        await producer.close()
