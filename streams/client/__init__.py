"""Clients of memstream for applications: the same verbs over HTTP or in this process.

``MemoryClient(url=..., api_key=...)`` (and ``AsyncMemoryClient``) talks to ``memstream
serve`` (:mod:`~memstream.streams.client.remote`); without ``url`` the service runs in the
application's process (:mod:`~memstream.streams.client.local`, which needs the broker, the
LanceDB directory and the key store of the workers). ``from memstream import MemoryClient``
is the way in; :mod:`~memstream.streams.client.base` documents every verb once, and the plain
dicts they answer with are in :mod:`memstream.streams.service.results`.
"""

from memstream.streams.client.base import AsyncMemoryClient
from memstream.streams.client.shapes import (
    AccessRefused,
    ReportRows,
    ServiceUnreachable,
    SessionContextDict,
)
from memstream.streams.client.sync import MemoryClient
from memstream.streams.service.projects import ProjectDict, ProjectsDict
from memstream.streams.service.results import (
    AddResult,
    ClaimDict,
    ContextResult,
    EdgeDict,
    EntityDict,
    GraphDict,
    HistoryEntry,
    MadeMemoryDict,
    MemoryDict,
    MemoryHitDict,
    NodeDict,
    PatternDict,
    PatternsDict,
    ProfileDict,
    ProfileEntryDict,
    TimelineDict,
    TimelineEntryDict,
    history_entry,
    normalise_messages,
)
from memstream.streams.service.sessions import NoSession, WorkerUnreachable

__all__ = [
    "AccessRefused",
    "AddResult",
    "AsyncMemoryClient",
    "ClaimDict",
    "ContextResult",
    "EdgeDict",
    "EntityDict",
    "GraphDict",
    "HistoryEntry",
    "MadeMemoryDict",
    "MemoryClient",
    "MemoryDict",
    "MemoryHitDict",
    "NoSession",
    "NodeDict",
    "PatternDict",
    "PatternsDict",
    "ProfileDict",
    "ProfileEntryDict",
    "ProjectDict",
    "ProjectsDict",
    "ReportRows",
    "ServiceUnreachable",
    "SessionContextDict",
    "TimelineDict",
    "TimelineEntryDict",
    "WorkerUnreachable",
    "history_entry",
    "normalise_messages",
]
