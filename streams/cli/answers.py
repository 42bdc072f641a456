"""How the reading commands answer (profile, timeline, graph, entity, patterns, projects):
one question to the service through the in-process client, printed as JSON or as lines."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from memstream.streams.client import MemoryClient
    from memstream.streams.service.container import Container

__all__ = ["print_answer"]

T = TypeVar("T")


def print_answer(
    container: Container,
    ask: Callable[[MemoryClient], T],
    lines: Callable[[T], list[str]],
    as_json: bool,
) -> int:
    """Ask the service ``ask`` and print the answer (JSON, or its ``lines``); return the exit
    status: 0, or 2 with one line on stderr when the service refuses the arguments."""
    from memstream.streams.client import MemoryClient
    from memstream.streams.service.app import Service

    with MemoryClient(service=Service(container)) as client:
        try:
            found: Any = ask(client)
        except (ValueError, TypeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    print(json.dumps(found, indent=2) if as_json else "\n".join(lines(found)))
    return 0
