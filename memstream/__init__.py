"""memstream: event-sourced long-term memory for LLM agents.

``from memstream import MemoryClient`` (or ``AsyncMemoryClient``) is the way in for an
application: ``MemoryClient(url="http://host:8080", api_key="msk_...")`` talks to
``memstream serve``; ``MemoryClient()`` runs the service in the application's own process.
The packages are :mod:`memstream.models` (the domain), :mod:`memstream.projections` (the read
models) and :mod:`memstream.streams` (Kafka, the workers, the service and its interfaces).

Nothing is imported until it is used: ``import memstream.models`` loads the domain only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstream.streams.client import (
        AccessRefused,
        AsyncMemoryClient,
        MemoryClient,
        NoSession,
        ServiceUnreachable,
        WorkerUnreachable,
    )

__all__ = [
    "AccessRefused",
    "AsyncMemoryClient",
    "MemoryClient",
    "NoSession",
    "ServiceUnreachable",
    "WorkerUnreachable",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from memstream.streams import client

        return getattr(client, name)
    raise AttributeError(f"module 'memstream' has no attribute {name!r}")
