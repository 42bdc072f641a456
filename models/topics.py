"""The memstream topics: their names under one prefix, and how they are keyed.

Pure names and the event types each topic carries, so any layer can refer to a topic
without a Kafka client; creating them is :func:`memstream.streams.kafka.topics.ensure_topics`.
"""

from __future__ import annotations

from dataclasses import dataclass

from memstream.models.settings import Settings

#: The event types each topic carries; a record of another type is refused (dead-lettered).
CHAT_TYPES = (
    "session_started",
    "message_added",
    "tool_called",
    "task_set",
    "task_progress",
    "scratchpad_updated",
    "entity_mentioned",
    "session_closed",
    "user_erased",
)
CONSOLIDATION_TYPES = ("consolidation_requested",)
MEMORIES_TOPIC_TYPES = (
    "extraction_recorded",
    "extraction_failed",
    "memory_added",
    "memory_reinforced",
    "memory_superseded",
    "memory_outdated",
    "memory_deleted",
    "memory_promoted",
    "memory_expired",
    "memory_forgotten",
    "user_erased",
)
ACCESS_TYPES = ("memories_retrieved",)


@dataclass(frozen=True)
class Topics:
    """Names of the memstream topics under one prefix.

    Every topic is keyed by ``user_id``: one user's events land on one partition and stay in
    order, which the session table, consolidation and memory decisions rely on.
    """

    prefix: str = "memstream"

    @property
    def chat(self) -> str:
        """Chat events from clients: messages, tool calls, tasks, session closes."""
        return f"{self.prefix}.chat"

    @property
    def consolidation(self) -> str:
        """Transcript spans ready to be turned into memories."""
        return f"{self.prefix}.consolidation"

    @property
    def memories(self) -> str:
        """Extraction records and memory events; the truth behind the LanceDB projection."""
        return f"{self.prefix}.memories"

    @property
    def accesses(self) -> str:
        """Retrievals: which memories were returned for which query (use counts, promotion)."""
        return f"{self.prefix}.accesses"

    @property
    def deadletters(self) -> str:
        """Events an agent could not process, with the original bytes and the reason."""
        return f"{self.prefix}.deadletters"

    @property
    def log(self) -> str:
        """The log's identity: its first record names the log (see
        :mod:`memstream.streams.kafka.logid`), so a broker that lost its log is recognised."""
        return f"{self.prefix}.log"

    def all(self) -> tuple[str, ...]:
        """Every topic memstream creates."""
        return (
            self.chat, self.consolidation, self.memories, self.accesses, self.deadletters, self.log
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> Topics:
        """The topics named by ``settings``."""
        return cls(prefix=settings.topic_prefix)


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of ``data`` (``org.apache.kafka.common.utils.Utils.murmur2``, as
    the Java clients and aiokafka's default partitioner compute it), a 32-bit value."""
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = data[length - length % 4 :]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def user_partition(user_id: str, partitions: int) -> int:
    """The partition of every topic that ``user_id``'s events land on: Kafka's default
    partitioner (murmur2 of the UTF-8 key, as every memstream producer and the Java clients
    send it), so a reader finds a user's partition without a Kafka client.

    Examples
    --------
    >>> user_partition("alice", 4) == user_partition("alice", 4)
    True
    """
    if partitions < 1:
        raise ValueError("a topic has at least one partition")
    return (murmur2(user_id.encode("utf-8", "surrogatepass")) & 0x7FFFFFFF) % partitions
