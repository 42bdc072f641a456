"""Which partitions of the memory projection this worker writes (:class:`Ownership`), and the
lock that keeps one writer per partition table on a machine (:func:`partition_lock`, held as a
:class:`WriterLock`).

The topics are co-partitioned by user and Faust assigns the same partition of every topic a
worker subscribes to to one worker, so the partitions of the consolidation topic (or of the
chat topic) a worker is assigned are the users whose spans it decides: its projector writes
those partitions' tables, and the decisions read tables their own process keeps caught up.
A worker that runs no agent (only the projector role) owns every partition.
"""

from __future__ import annotations

import asyncio
import fcntl
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import IO, Any

from memstream.models.settings import Settings

__all__ = ["Ownership", "WriterLock", "partition_lock"]


class Ownership:
    """The partitions this worker's projector owns, as the consumer group last assigned them.

    Parameters
    ----------
    partitions
        The topics' partition count.
    topic
        The topic whose assigned partitions are the owned ones; None: every partition,
        always (a worker without agents, a replay, a test).
    """

    def __init__(self, partitions: int, topic: str | None = None) -> None:
        self.partitions = partitions
        self.topic = topic
        self._owned: frozenset[int] | None = None if topic is not None else frozenset(
            range(partitions)
        )

    @property
    def owned(self) -> frozenset[int] | None:
        """The owned partitions; None before the first assignment."""
        return self._owned

    def assign(self, partitions: Collection[int]) -> None:
        """Own exactly ``partitions`` from now on (a rebalance's new assignment)."""
        self._owned = frozenset(partitions)

    async def on_assigned(self, sender: Any, assigned: Iterable[Any], **_: Any) -> None:
        """Receiver of Faust's ``on_partitions_assigned``: the partitions of ``topic``
        among the assigned topic partitions."""
        if self.topic is not None:
            self.assign({tp.partition for tp in assigned if tp.topic == self.topic})

    async def known(self, poll_s: float = 0.2) -> frozenset[int]:
        """The owned partitions, once an assignment said which."""
        while self._owned is None:
            await asyncio.sleep(poll_s)
        return self._owned


def partition_lock(settings: Settings, partition: int) -> Path:
    """The lock file of one partition's table: its writer holds it (an advisory lock, one
    process per partition table on a machine; see ``WriterLock``). Only a projection in a
    local directory has them (``ProjectionStore.locks_apply``): on an object store the
    consumer group's assignment alone makes a partition's one writer."""
    return settings.lancedb_dir / f".projector.p{partition}.lock"


class WriterLock:
    """An advisory, process-wide lock file: held by the one projector of a data directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; never blocks."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._file = handle
        return True

    def release(self) -> None:
        """Give the lock back."""
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
