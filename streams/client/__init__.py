"""Clients of memstream for applications: ``local`` runs the service in the application's
process (it needs the broker, the LanceDB directory and the key store of the workers).

``from memstream.streams.client import MemoryClient`` is the way in; the plain dicts the verbs
answer with are in :mod:`memstream.streams.service.results`.
"""

from memstream.streams.client.local import AsyncMemoryClient, MemoryClient
from memstream.streams.service.results import (
    AddResult,
    HistoryEntry,
    MemoryDict,
    MemoryHitDict,
    history_entry,
    normalise_messages,
)
from memstream.streams.tools.publish import chat_events_for_add

__all__ = [
    "AddResult",
    "AsyncMemoryClient",
    "HistoryEntry",
    "MemoryClient",
    "MemoryDict",
    "MemoryHitDict",
    "chat_events_for_add",
    "history_entry",
    "normalise_messages",
]
