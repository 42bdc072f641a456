"""The HTTP API's bodies: requests checked before the service sees them, responses in the
service's plain shapes (:mod:`memstream.streams.service.results`) with the caller's own user id."""

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from memstream.models.events import Identifier, MemoryType, Role
from memstream.projections.retrieval import MAX_CANDIDATES
from memstream.streams.service.results import HistoryEntry, MemoryDict, MemoryHitDict

__all__ = [
    "AddRequest",
    "AddResponse",
    "DeleteAllResponse",
    "DeleteResponse",
    "Health",
    "HistoryResponse",
    "MemoryListResponse",
    "MessageIn",
    "SearchFiltersIn",
    "SearchRequest",
    "SearchResponse",
]

#: A user id as a caller names it; the API checks it against the key and namespaces it.
UserId = Annotated[str, Field(max_length=1024, description="Your user id (within your tenant).")]


class _Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MessageIn(BaseModel):
    """One message of a conversation; other fields (``tool_call_id``...) are dropped, as
    the client drops them."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    role: Role
    content: Annotated[str, Field(max_length=1_000_000)]
    name: Annotated[str, Field(max_length=512)] | None = None


class AddRequest(_Request):
    """A conversation to publish as chat events (see ``MemoryService.add``): a string is one
    user message. Without ``session_id`` a session is started; ``close`` (default) ends it
    so the worker consolidates it now. ``event_ids`` (one per message) make a retried call
    repeat the same events."""

    messages: str | Annotated[list[MessageIn], Field(min_length=1, max_length=1000)]
    user_id: UserId
    session_id: Identifier | None = None
    agent_id: Identifier | None = None
    close: bool = True
    event_ids: Annotated[list[Identifier], Field(max_length=1000)] | None = None
    occurred_at: AwareDatetime | None = None


class AddResponse(BaseModel):
    """What was published; the memories appear once the worker has consolidated them."""

    user_id: str
    session_id: str
    event_ids: list[str]


class SearchFiltersIn(_Request):
    """What a search may return: memory types, one session, a least importance, a window of
    creation times (``since`` inclusive, ``until`` exclusive)."""

    memory_types: Annotated[list[MemoryType], Field(min_length=1)] | None = None
    session_id: Identifier | None = None
    min_importance: Annotated[float, Field(ge=0, le=1)] | None = None
    since: AwareDatetime | None = None
    until: AwareDatetime | None = None


class SearchRequest(_Request):
    """A search of one user's memories; ``as_of`` answers from what memstream believed then."""

    query: Annotated[str, Field(max_length=20_000)]
    user_id: UserId
    limit: Annotated[int, Field(ge=1, le=MAX_CANDIDATES)] = 5
    filters: SearchFiltersIn | None = None
    as_of: AwareDatetime | None = None


class SearchResponse(BaseModel):
    """The hits, best first."""

    user_id: str
    results: list[MemoryHitDict]


class MemoryListResponse(BaseModel):
    """A user's memories, newest first."""

    user_id: str
    results: list[MemoryDict]


class HistoryResponse(BaseModel):
    """A memory's life, in log order."""

    user_id: str
    memory_id: str
    results: list[HistoryEntry]


class DeleteResponse(BaseModel):
    """The ``memory_deleted`` event published; the memory leaves search once projected."""

    user_id: str
    memory_id: str
    event_id: str


class DeleteAllResponse(BaseModel):
    """One ``memory_deleted`` event per active memory of the user."""

    user_id: str
    event_ids: list[str]


class Health(BaseModel):
    """The service answers."""

    ok: bool
