"""The memory-augmented agent: :class:`~memstream.streams.chat.agent.MemoryAgent` (its prompt
in :mod:`~memstream.streams.chat.prompt`, what a turn needs and gives in
:mod:`~memstream.streams.chat.turns`), the blocking :class:`~memstream.streams.chat.sync.SyncMemoryAgent`
and the terminal chat of ``memstream chat`` (:mod:`~memstream.streams.chat.terminal`)."""

from memstream.streams.chat.agent import MemoryAgent
from memstream.streams.chat.sync import SyncMemoryAgent
from memstream.streams.chat.turns import (
    AgentMemory,
    AgentTurn,
    MemoryWriteFailed,
    ModelCallFailed,
    ModelNotConfigured,
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
