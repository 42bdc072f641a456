"""The memstream topics: their names under one prefix, and how they are keyed.

Pure names and the event types each topic carries, so any layer can refer to a topic
without a Kafka client; creating them is :func:`memstream.streams.runtime.topics.ensure_topics`.
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
        :mod:`memstream.streams.runtime.logid`), so a broker that lost its log is recognised."""
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
