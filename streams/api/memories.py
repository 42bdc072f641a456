"""The memory routes of the HTTP API: add, search, a turn's context, list, get, an attribute's
timeline, a user's profile, project history and entity graph (and one entity), history (with the chat events a
memory came from), delete, delete all, and erase a user.

Each route checks the caller's key against the user it names (:func:`scoped_user`), calls
:class:`~memstream.streams.service.memories.MemoryService` with the namespaced id, and
answers with the caller's own id. Writes answer 202 (events published; the projection
follows), but ``add`` with ``wait`` answers 200 once the session's memories are searchable.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response

from memstream.projections.memories import SearchFilters
from memstream.streams.api.deps import (
    ERRORS,
    NOT_FOUND,
    Caller,
    MemoryIdPath,
    ServiceDep,
    UserQuery,
    scoped_user,
    unprocessable,
)
from memstream.streams.api.schemas import (
    AddRequest,
    AddResponse,
    ContextRequest,
    ContextResponse,
    DeleteAllResponse,
    DeleteResponse,
    EntityRequest,
    EntityResponse,
    EraseRequest,
    EraseResponse,
    GraphRequest,
    GraphResponse,
    HistoryResponse,
    MemoryListResponse,
    PatternsRequest,
    PatternsResponse,
    ProfileRequest,
    ProfileResponse,
    ProjectsRequest,
    ProjectsResponse,
    SearchRequest,
    SearchResponse,
    TimelineRequest,
    TimelineResponse,
)
from memstream.streams.service.results import MemoryDict

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["memories"])
_NO_MEMORY = "no such memory"


@router.post("/memories", status_code=202, responses={**ERRORS, 200: {"model": AddResponse}})
async def add(
    body: AddRequest, key: Caller, service: ServiceDep, response: Response
) -> AddResponse:
    """Publish a conversation as chat events; the worker turns it into memories. With
    ``wait``, answer (200) once they are searchable, listing them, or when the timeout
    passes (202, ``status: pending``)."""
    user_id = scoped_user(key, body.user_id, write=True)
    messages = (
        body.messages
        if isinstance(body.messages, str)
        else [m.model_dump(exclude_none=True) for m in body.messages]
    )
    try:
        result = await service.memories.add(
            messages,
            user_id=user_id,
            session_id=body.session_id,
            agent_id=body.agent_id,
            close=body.close,
            event_ids=body.event_ids,
            occurred_at=body.occurred_at,
            wait=body.wait,
            timeout_s=body.timeout_s,
        )
    except (ValueError, TypeError) as exc:
        raise unprocessable(exc, user_id, body.user_id) from None
    if result.get("status") in ("searchable", "failed"):
        response.status_code = 200
    return AddResponse(user_id=body.user_id, **result)


@router.post("/memories/search", responses=ERRORS)
async def search(body: SearchRequest, key: Caller, service: ServiceDep) -> SearchResponse:
    """The user's memories most relevant to the query, best first; ``explain`` adds every
    part of each score."""
    user_id = scoped_user(key, body.user_id)
    filters = None
    if body.filters is not None:
        types = body.filters.memory_types
        filters = SearchFilters(
            memory_types=tuple(types) if types is not None else None,
            session_id=body.filters.session_id,
            min_importance=body.filters.min_importance,
            since=body.filters.since,
            until=body.filters.until,
        )
    try:
        hits = await service.memories.search(
            body.query,
            user_id=user_id,
            limit=body.limit,
            filters=filters,
            as_of=body.as_of,
            explain=body.explain,
        )
    except (ValueError, TypeError) as exc:
        raise unprocessable(exc, user_id, body.user_id) from None
    return SearchResponse(user_id=body.user_id, results=list(hits))


@router.post("/memories/context", responses=ERRORS)
async def context(body: ContextRequest, key: Caller, service: ServiceDep) -> ContextResponse:
    """The long-term memory context of one turn, for an agent's prompt: per-type quotas of
    the best memories, as text within the token budget. The memories placed count as used."""
    user_id = scoped_user(key, body.user_id)
    try:
        found = await service.memories.context(
            body.message,
            user_id=user_id,
            recent_turns=body.recent_turns,
            session_id=body.session_id,
            token_budget=body.token_budget,
            explain=body.explain,
            project=body.project,
        )
    except (ValueError, TypeError) as exc:
        raise unprocessable(exc, user_id, body.user_id) from None
    return ContextResponse(user_id=body.user_id, **found)


@router.post("/memories/timeline", responses=ERRORS)
async def timeline(body: TimelineRequest, key: Caller, service: ServiceDep) -> TimelineResponse:
    """One attribute of the user over time ("my budget over time"): each value it held,
    oldest first.

    ``about`` names the attribute in plain words ("budget", "where do I live"); it is
    matched to an attribute of the user's facts and preferences (``attribute`` in the
    answer; None, with no entries, when nothing matches). Each entry has the value, the
    statement, when it held in event time (``valid_from``, ``valid_until``: None while it
    holds), its ``status``, the memory that replaced it (``superseded_by``) and the turns
    that stated it (``turns``, chat event ids). ``subject`` picks whose attribute (a
    speaker's name), else the user's own. 422 for an empty ``about`` or one over 1,000
    characters."""
    user_id = scoped_user(key, body.user_id)
    try:
        found = await service.memories.timeline(
            body.about, user_id=user_id, subject=body.subject
        )
    except (ValueError, TypeError) as exc:
        raise unprocessable(exc, user_id, body.user_id) from None
    return TimelineResponse(user_id=body.user_id, **found)


@router.post("/memories/profile", responses=ERRORS)
async def profile(body: ProfileRequest, key: Caller, service: ServiceDep) -> ProfileResponse:
    """What holds about the user, compact: the claims (facts, preferences, corrections) that
    hold now, or at ``as_of``, by subject (``User`` first, then the others by name), then by
    kind and attribute.

    Each entry has the attribute, the value, its ``polarity`` (False: no longer so), the
    statement, since when it holds (``valid_from``, event time), its ``memory_id`` and the
    turns that stated it (``turns``, chat event ids). ``subject`` keeps one subject's. A user
    without claims has no subjects."""
    user_id = scoped_user(key, body.user_id)
    try:
        found = await service.memories.profile(
            user_id=user_id, subject=body.subject, as_of=body.as_of
        )
    except (ValueError, TypeError) as exc:
        raise unprocessable(exc, user_id, body.user_id) from None
    return ProfileResponse(user_id=body.user_id, **found)


@router.post("/memories/entity", responses=ERRORS)
async def entity(body: EntityRequest, key: Caller, service: ServiceDep) -> EntityResponse:
    """One entity of the user's graph found by any of its names ("Ana", "User's sister"),
    now or at ``as_of``: its node (aliases, kind, and the memories, turns and sessions that
    name it), its neighbours, its facts (the claims about it, each with its validity and
    turns) and its edges, at most ``limit`` of each (``total_*`` count them all).
    ``entity`` is null when no entity has that name."""
    user_id = scoped_user(key, body.user_id)
    try:
        found = await service.memories.entity(
            body.name, user_id=user_id, as_of=body.as_of, limit=body.limit
        )
    except (ValueError, TypeError) as exc:
        raise unprocessable(exc, user_id, body.user_id) from None
    return EntityResponse(user_id=body.user_id, **found)


@router.post("/memories/graph", responses=ERRORS)
async def graph(body: GraphRequest, key: Caller, service: ServiceDep) -> GraphResponse:
    """The user's entity graph, now or at ``as_of``: the people, places, organisations,
    pets, projects and things their memories name, and the relations between them (claims,
    with ``valid_from``, ``valid_until`` and ``holds``; co-mentions), each with the memories,
    turns and sessions it comes from: at most ``limit`` entities (the user, then the most
    mentioned) and the relations among them; ``total_nodes``, ``total_edges`` and
    ``truncated`` say what was left out."""
    user_id = scoped_user(key, body.user_id)
    try:
        found = await service.memories.graph(
            user_id=user_id, as_of=body.as_of, limit=body.limit
        )
    except (ValueError, TypeError) as exc:
        raise unprocessable(exc, user_id, body.user_id) from None
    return GraphResponse(user_id=body.user_id, **found)


@router.post("/memories/patterns", responses=ERRORS)
async def patterns(body: PatternsRequest, key: Caller, service: ServiceDep) -> PatternsResponse:
    """The user's learned patterns: what they usually ask about, the tools they use, the
    corrections they repeat, the hours and weekday they are active. Each has its line
    (``content``), key (``pattern``), evidence (``sessions``, ``event_ids``,
    ``sessions_seen``), ``importance`` and ``decay`` score; ``as_of`` reads those that held
    then. Searches leave patterns out."""
    user_id = scoped_user(key, body.user_id)
    try:
        found = await service.memories.patterns(user_id=user_id, as_of=body.as_of)
    except (ValueError, TypeError) as exc:
        raise unprocessable(exc, user_id, body.user_id) from None
    return PatternsResponse(user_id=body.user_id, **found)
@router.post("/memories/projects", responses=ERRORS)
async def projects(body: ProjectsRequest, key: Caller, service: ServiceDep) -> ProjectsResponse:
    """The user's project history, now or at ``as_of``: per project (most recently worked
    on first), its tasks in the order they happened, each state with its status, progress,
    time and session (``current`` for a task's latest), what was decided in those sessions
    (``decided``) and the tasks still open (``open``). ``project`` keeps one project's."""
    user_id = scoped_user(key, body.user_id)
    try:
        found = await service.memories.projects(
            user_id=user_id, project=body.project, as_of=body.as_of
        )
    except (ValueError, TypeError) as exc:
        raise unprocessable(exc, user_id, body.user_id) from None
    return ProjectsResponse(user_id=body.user_id, **found)


@router.get("/memories", responses=ERRORS)
async def get_all(
    key: Caller, service: ServiceDep, user_id: UserQuery, include_inactive: bool = False
) -> MemoryListResponse:
    """The user's memories, newest first: active ones, or every status."""
    found = await service.memories.get_all(
        user_id=scoped_user(key, user_id), include_inactive=include_inactive
    )
    return MemoryListResponse(user_id=user_id, results=list(found))


@router.delete("/memories", status_code=202, responses=ERRORS)
async def delete_all(key: Caller, service: ServiceDep, user_id: UserQuery) -> DeleteAllResponse:
    """Delete every active memory of the user (one ``memory_deleted`` event each)."""
    event_ids = await service.memories.delete_all(user_id=scoped_user(key, user_id, write=True))
    return DeleteAllResponse(user_id=user_id, event_ids=event_ids)


# Declared before the memory's own path, whose ``path`` parameter would take it in.
@router.get("/memories/{memory_id:path}/history", responses=NOT_FOUND)
async def history(
    memory_id: MemoryIdPath,
    key: Caller,
    service: ServiceDep,
    user_id: UserQuery,
    sources: Annotated[
        bool, Query(description="Add the chat events the memory came from.")
    ] = False,
) -> HistoryResponse:
    """The life of one of the user's memories, from the memories topic, in log order; with
    ``sources``, the chat messages its events cite, from the chat topic."""
    namespaced = scoped_user(key, user_id)
    entries = await service.memories.history(memory_id, user_id=namespaced)
    if not entries:
        # Every memory has its memory_added: none means unknown, or not this user's.
        raise HTTPException(404, _NO_MEMORY)
    cited = None
    if sources:
        event_ids = dict.fromkeys(e for entry in entries for e in entry["source_event_ids"])
        cited = await service.memories.sources(list(event_ids), user_id=namespaced)
    return HistoryResponse(
        user_id=user_id, memory_id=memory_id, results=list(entries), sources=cited
    )


@router.get("/memories/{memory_id:path}", responses=NOT_FOUND)
async def get(
    memory_id: MemoryIdPath, key: Caller, service: ServiceDep, user_id: UserQuery
) -> MemoryDict:
    """One of the user's memories, whatever its status; ``valid_until`` says when what it
    states stopped holding, ``claim`` what a fact or preference asserts."""
    memory = await service.memories.get(memory_id, user_id=scoped_user(key, user_id))
    if memory is None:
        raise HTTPException(404, _NO_MEMORY)
    return memory


@router.delete("/memories/{memory_id:path}", status_code=202, responses=NOT_FOUND)
async def delete(
    memory_id: MemoryIdPath,
    key: Caller,
    service: ServiceDep,
    user_id: UserQuery,
    reason: Annotated[str, Query(min_length=1, max_length=500)] = "requested",
) -> DeleteResponse:
    """Delete one of the user's memories (a ``memory_deleted`` event, sealed with the
    user's key); it leaves search once projected."""
    namespaced = scoped_user(key, user_id, write=True)
    try:
        event_id = await service.memories.delete(memory_id, user_id=namespaced, reason=reason)
    except KeyError:
        raise HTTPException(404, _NO_MEMORY) from None
    except (ValueError, TypeError) as exc:
        raise unprocessable(exc, namespaced, user_id) from None
    return DeleteResponse(user_id=user_id, memory_id=memory_id, event_id=event_id)


@router.post("/erasures", tags=["users"], responses=ERRORS)
async def erase(body: EraseRequest, key: Caller, service: ServiceDep) -> EraseResponse:
    """Erase the user from every store: the user's key is destroyed (every sealed copy in
    the log, the archive and the changelogs becomes unreadable at once) and the projections
    are cleaned; answers with the receipt once the stores are checked (seconds)."""
    user_id = scoped_user(key, body.user_id, write=True)
    receipt = await service.memories.erase(user_id, reason=body.reason)
    return EraseResponse(
        user_id=body.user_id,
        erasure_id=receipt.erasure_id,
        user_key=receipt.user_key,
        started_at=receipt.started_at.isoformat(),
        removed=dict(receipt.removed),
        notes=[note.replace(user_id, body.user_id) for note in receipt.notes],
        left=[note.replace(user_id, body.user_id) for note in receipt.left],
        complete=receipt.complete,
    )
