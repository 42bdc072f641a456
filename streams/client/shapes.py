"""What every client of memstream shares: the errors it raises beyond Python's own, the
shapes of the answers that are not the service's (a session's context, a report's rows), and
the defaults of its verbs."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

# The service's own defaults (the graph module is pure Python: no LanceDB comes with it).
from memstream.projections.entity_graph import ENTITY_LIMIT, GRAPH_LIMIT

__all__ = [
    "DEFAULT_WAIT_S",
    "ENTITY_LIMIT",
    "FILTER_FIELDS",
    "GRAPH_LIMIT",
    "AccessRefused",
    "ReportRows",
    "ServiceUnreachable",
    "SessionContextDict",
]

#: How long ``add(wait=True)`` follows a session by default (the service's own default).
DEFAULT_WAIT_S = 30.0
#: The fields of ``SearchFilters`` a client sends (``filters`` may be a dict of them).
FILTER_FIELDS = ("memory_types", "session_id", "min_importance", "since", "until")


class AccessRefused(PermissionError):
    """The service refused the key: none or an unknown one (``status`` 401), or one that may
    not act for that user or may not write (403)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class ServiceUnreachable(ConnectionError):
    """``memstream serve`` did not answer (or answered 503: not ready)."""


class SessionContextDict(TypedDict):
    """An open session's working memory, from the worker that holds it: ``prompt`` (the
    context as prompt text within the budget) and ``context`` (its parts: messages, task,
    progress, scratchpad, entities, tool calls, turn count); ``served_by`` the worker."""

    session_id: str
    prompt: str
    context: dict[str, Any]
    served_by: str | None


class ReportRows(TypedDict):
    """A named report's rows for one user (times as ISO 8601 strings)."""

    report: str
    columns: list[str]
    rows: list[dict[str, Any]]
