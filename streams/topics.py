"""The memstream topics, their keys, and creating them."""

from __future__ import annotations

from dataclasses import dataclass

from memstream.models.settings import Settings


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
    def deadletters(self) -> str:
        """Events an agent could not process, with the original bytes and the reason."""
        return f"{self.prefix}.deadletters"

    def all(self) -> tuple[str, ...]:
        """Every topic memstream creates."""
        return (self.chat, self.consolidation, self.memories, self.deadletters)

    @classmethod
    def from_settings(cls, settings: Settings) -> Topics:
        """The topics named by ``settings``."""
        return cls(prefix=settings.topic_prefix)
