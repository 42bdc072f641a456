"""memstream: event-sourced long-term memory for LLM agents.

``from memstream import MemoryClient`` (or ``AsyncMemoryClient``) is the way in for an
application: ``MemoryClient(url="http://host:8080", api_key="msk_...")`` talks to
``memstream serve``; ``MemoryClient()`` runs the service in the application's own process.
The packages are :mod:`memstream.models` (the domain), :mod:`memstream.projections` (the read
models) and :mod:`memstream.streams` (Kafka, the workers, the service and its interfaces).

Nothing is imported until it is used: ``import memstream.models`` loads the domain only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

# In the source tree this folder holds only this file and py.typed: models/, streams/ and
# projections/ lie beside it, at the repository root, and an install maps them under memstream/
# (pyproject's package-dir). Python started at a clone's root finds this folder first on
# sys.path, ahead of any install; searching the root too makes memstream.models & co. resolve
# there as they do installed. Installed, the subpackages are inside this folder: nothing to add.
_SUBPACKAGES = ("models", "streams", "projections")
_beside = Path(__file__).parent.parent
if not any((Path(__file__).parent / name).is_dir() for name in _SUBPACKAGES) and all(
    (_beside / name / "__init__.py").is_file() for name in _SUBPACKAGES
):
    __path__.append(str(_beside))

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
