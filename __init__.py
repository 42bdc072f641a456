"""A clone's folder as the package ``memstream``, for Python started in the folder above it.

``git clone`` names the folder ``memstream``; from the folder above, Python finds it first on
sys.path, ahead of the installed package (an editable install's finder comes after the path),
and without this file it would be an empty namespace package. With it the folder is a regular
package whose subpackages are this repository's models/, streams/ and projections/, as
installed, with the names of memstream/__init__.py (tests/unit/test_packaging.py holds the two
alike). No install holds this file. It imports nothing: pytest imports it too (the repository
root is a package to pytest), under whatever name the folder has.
"""

from __future__ import annotations

from typing import Any

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
