"""The dependency container: every part memstream's interfaces share, built once.

``create_app`` (the worker) and the ``memstream`` command each build one :class:`Container`
from one :class:`~memstream.models.settings.Settings`; the parts that cost something to
open (the embedder's model, the LanceDB table, the producer) are built on first use, once,
and shared by every call after.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memstream.models.settings import Settings
from memstream.models.topics import Topics
from memstream.streams.kafka.publisher import EventPublisher, KafkaPublisher
from memstream.streams.keys.store import KeyStore, keystore_from_settings

if TYPE_CHECKING:
    # Built on first use: a command that needs none of them (``memstream broker``) never
    # loads LanceDB or the model.
    from memstream.projections.embedder import Embedder
    from memstream.projections.memories import MemoryIndex, PartitionedMemories
    from memstream.streams.projector.follower import ResidentFollower

__all__ = ["Container"]


@dataclass
class Container:
    """The shared parts of one process.

    Parameters
    ----------
    settings
        The one settings object.
    keys
        The users' content keys; the key directory of ``settings`` by default. It must be
        the store the workers use.
    projection
        The memory index readers use (any
        :class:`~memstream.projections.memories.MemoryIndex`); by default the live
        projection in the store of ``settings`` (``memory_store``, or the data directory),
        opened with the embedder on first use, its active users held in memory
        (``resident_memory_mb``) and kept current by following the log
        (:meth:`follow_log`).
    publisher
        How events reach the topics; a :class:`KafkaPublisher` that checks what users send
        and the broker's log mark, started on the first write, by default.
    """

    settings: Settings
    keys: KeyStore | None = None
    projection: MemoryIndex | None = None
    publisher: EventPublisher | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _follower: ResidentFollower | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.keys is None:
            self.keys = keystore_from_settings(self.settings)

    @property
    def topics(self) -> Topics:
        return Topics.from_settings(self.settings)

    @property
    def key_store(self) -> KeyStore:
        assert self.keys is not None  # set in __post_init__
        return self.keys

    def embedder(self) -> Embedder:
        """The embedder of ``settings`` (one per process and configuration)."""
        from memstream.projections.embedder import embedder_from_settings

        return embedder_from_settings(self.settings)

    def memory_projection(self) -> MemoryIndex:
        """The live memory projection the service reads, opened on first use (it loads the
        embedder). On an object store it sees changes up to ``memory_store_read_lag_s`` late
        (see :meth:`ProjectionStore.reader_options`)."""

        with self._lock:
            if self.projection is None:
                table = self.memory_table(reader=True)
                self.projection = table
                if self.settings.resident_memory_mb > 0:
                    from memstream.projections.resident import ResidentMemories
                    from memstream.streams.projector.follower import ResidentFollower

                    resident = ResidentMemories(
                        table, budget_bytes=self.settings.resident_memory_mb << 20
                    )
                    self._follower = ResidentFollower(self.settings, self.key_store, resident)
                    self.projection = resident
            return self.projection

    def follow_log(self) -> None:
        """Start keeping the resident memories current (in the running loop; once). Until
        the follower has read to the end of the log, searches read the table."""
        if self._follower is not None:
            self._follower.start()

    def memory_table(self, table: str | None = None, *, reader: bool = False) -> PartitionedMemories:
        """A memory projection of the settings' store, one LanceDB table per partition: the
        live one (None), or another by name (a re-extraction's), which must exist. With
        ``reader``, one that only answers the service's reads (see
        :meth:`ProjectionStore.reader_options`); otherwise every read is current.

        Raises
        ------
        LookupError
            No projection of that name.
        """
        from memstream.projections.memories import PartitionedMemories, ProjectionStore

        options = ProjectionStore.from_settings(self.settings).reader_options() if reader else {}
        projection = PartitionedMemories.from_settings(
            self.settings, self.embedder(), table, **options
        )
        if table is not None and not projection.exists():
            raise LookupError(f"no memory table {table!r} in {projection.store}")
        return projection

    def event_publisher(self) -> EventPublisher:
        """The publisher every write of this process goes through."""
        with self._lock:
            if self.publisher is None:
                self.publisher = KafkaPublisher(self.settings, self.key_store, watch_log=True)
            return self.publisher

    async def close(self) -> None:
        """Release what was opened (the log follower, the producer and its log watch)."""
        if self._follower is not None:
            await self._follower.close()
        if self.publisher is not None:
            await self.publisher.close()
