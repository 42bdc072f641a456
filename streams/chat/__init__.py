"""The memory-augmented agent: :class:`~memstream.streams.chat.agent.MemoryAgent` (its prompt
in :mod:`~memstream.streams.chat.prompt`) and the terminal chat of ``memstream chat``
(:mod:`~memstream.streams.chat.terminal`)."""

from memstream.streams.chat.agent import (
    AgentMemory,
    AgentTurn,
    MemoryAgent,
    MemoryWriteFailed,
    ModelCallFailed,
    ModelNotConfigured,
    SyncMemoryAgent,
    TurnDebug,
)

__all__ = [
    "AgentMemory",
    "AgentTurn",
    "MemoryAgent",
    "MemoryWriteFailed",
    "ModelCallFailed",
    "ModelNotConfigured",
    "SyncMemoryAgent",
    "TurnDebug",
]
