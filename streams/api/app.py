"""The FastAPI app of ``memstream serve`` (create_api): the memory endpoints under ``/v1``,
behind API keys, each call a thin adapter over :class:`~memstream.streams.service.app.Service`.

Every ``/v1`` path but ``/v1/health`` wants ``Authorization: Bearer <key>``; the key is checked
before the request is read any further, so no key or an unknown one gets 401 whatever the
body. The key's tenant namespaces the user id (:func:`~memstream.streams.api.auth.tenant_user_id`);
responses name the caller's own user id, never the namespaced one. Status codes: 200 for
reads, 202 for writes (events published; the projection follows), 401, 403 (a user the key
may not act for, a write with a read-only key), 404 (an unknown memory, or another user's:
the two are not told apart), 422 (bad input). Error bodies say what was wrong, never whose
data exists.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from memstream.projections.memories import SearchFilters
from memstream.streams.api.auth import ApiKey, KeyFile, Refused
from memstream.streams.api.observability import observe
from memstream.streams.api.schemas import (
    AddRequest,
    AddResponse,
    DeleteAllResponse,
    DeleteResponse,
    Health,
    HistoryResponse,
    MemoryListResponse,
    SearchRequest,
    SearchResponse,
)
from memstream.streams.service.app import Service
from memstream.streams.service.results import MemoryDict

__all__ = ["create_api"]

#: Paths under /v1 that need no key.
OPEN_PATHS = frozenset({"/v1/health"})
#: A presented key longer than this is not looked up (none is; memstream's are 47 characters).
MAX_KEY_BYTES = 1024

_bearer = HTTPBearer(
    auto_error=False,
    description="An API key from the key file (`memstream api-key add`), bound to a tenant.",
)
UserQuery = Annotated[str, Query(max_length=1024, description="Your user id (within your tenant).")]
MemoryIdPath = Annotated[str, Path(min_length=1, max_length=1024)]
_NO_MEMORY = {"detail": "no such memory"}
_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No API key, or an unknown one."},
    403: {"description": "A user the key may not act for, or a write with a read-only key."},
    422: {"description": "Bad input."},
}


class _Authenticate:
    """Refuses every ``/v1`` request without a known key (401) before the app reads it,
    and hands the key on in the request's state."""

    def __init__(self, app: ASGIApp, keys: KeyFile) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith("/v1/") or path in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        key = self._key(scope)
        if key is None:
            refusal = JSONResponse(
                {"detail": "a valid API key is required (Authorization: Bearer <key>)"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await refusal(scope, receive, send)
            return
        # A new state dict: the server's is shared by every request.
        scope = {**scope, "state": {**scope.get("state", {}), "api_key": key}}
        await self.app(scope, receive, send)

    def _key(self, scope: Scope) -> ApiKey | None:
        values = [v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
        if len(values) != 1:
            return None
        scheme, _, token = values[0].partition(b" ")
        token = token.strip(b" ")
        if scheme.lower() != b"bearer" or not token or len(token) > MAX_KEY_BYTES:
            return None
        return self.keys.authenticate(token)


def _caller(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
) -> ApiKey:
    """The key the request was authenticated with (the security scheme is declared here, for
    the OpenAPI document; :class:`_Authenticate` did the checking)."""
    key: ApiKey = request.state.api_key
    return key


Caller = Annotated[ApiKey, Depends(_caller)]


def _user(key: ApiKey, user_id: str, *, write: bool = False) -> str:
    try:
        return key.user_id(user_id, write=write)
    except Refused as refused:
        raise HTTPException(refused.status, refused.reason) from None


def _unprocessable(exc: ValueError | TypeError, namespaced: str, user_id: str) -> HTTPException:
    """422 with the service's reason, naming the caller's user id, not the namespaced one."""
    return HTTPException(422, str(exc).replace(namespaced, user_id))


def create_api(service: Service, keys: KeyFile) -> FastAPI:
    """The HTTP API over ``service``, open to the holders of ``keys``.

    OpenAPI at ``/openapi.json``, interactive docs at ``/docs``. The caller owns ``service``
    (and closes it); the app only calls it, on the server's event loop.

    Examples
    --------
    >>> service = Service.from_settings(Settings())  # doctest: +SKIP
    >>> api = create_api(service, KeyFile(Path("api_keys.toml")))  # doctest: +SKIP
    >>> uvicorn.run(api)  # doctest: +SKIP
    """
    api = FastAPI(
        title="memstream",
        summary="Event-sourced long-term memory for LLM agents.",
        version="1",
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
    )
    api.add_middleware(_Authenticate, keys=keys)
    memories = service.memories

    @api.exception_handler(RequestValidationError)
    async def bad_input(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's default quotes the input back; say where and what only.
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        return JSONResponse({"detail": errors}, status_code=422)

    @api.get("/v1/health", tags=["health"])
    async def health() -> Health:
        """The service answers (no key needed)."""
        return Health(ok=True)

    @api.post("/v1/memories", status_code=202, tags=["memories"], responses=_ERRORS)
    async def add(body: AddRequest, key: Caller) -> AddResponse:
        """Publish a conversation as chat events; the worker turns it into memories."""
        user_id = _user(key, body.user_id, write=True)
        messages = (
            body.messages
            if isinstance(body.messages, str)
            else [m.model_dump(exclude_none=True) for m in body.messages]
        )
        try:
            result = await memories.add(
                messages,
                user_id=user_id,
                session_id=body.session_id,
                agent_id=body.agent_id,
                close=body.close,
                event_ids=body.event_ids,
                occurred_at=body.occurred_at,
            )
        except (ValueError, TypeError) as exc:
            raise _unprocessable(exc, user_id, body.user_id) from None
        return AddResponse(user_id=body.user_id, **result)

    @api.post("/v1/memories/search", tags=["memories"], responses=_ERRORS)
    async def search(body: SearchRequest, key: Caller) -> SearchResponse:
        """The user's memories most relevant to the query, best first."""
        user_id = _user(key, body.user_id)
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
            hits = await memories.search(
                body.query, user_id=user_id, limit=body.limit, filters=filters, as_of=body.as_of
            )
        except (ValueError, TypeError) as exc:
            raise _unprocessable(exc, user_id, body.user_id) from None
        return SearchResponse(user_id=body.user_id, results=list(hits))

    @api.get("/v1/memories", tags=["memories"], responses=_ERRORS)
    async def get_all(
        key: Caller, user_id: UserQuery, include_inactive: bool = False
    ) -> MemoryListResponse:
        """The user's memories, newest first: active ones, or every status."""
        found = await memories.get_all(
            user_id=_user(key, user_id), include_inactive=include_inactive
        )
        return MemoryListResponse(user_id=user_id, results=list(found))

    @api.delete("/v1/memories", status_code=202, tags=["memories"], responses=_ERRORS)
    async def delete_all(key: Caller, user_id: UserQuery) -> DeleteAllResponse:
        """Delete every active memory of the user (one ``memory_deleted`` event each)."""
        event_ids = await memories.delete_all(user_id=_user(key, user_id, write=True))
        return DeleteAllResponse(user_id=user_id, event_ids=event_ids)

    not_found: dict[int | str, dict[str, Any]] = {
        **_ERRORS,
        404: {"description": "No such memory of this user."},
    }

    # Declared before the memory's own path, whose ``path`` parameter would take it in.
    @api.get("/v1/memories/{memory_id:path}/history", tags=["memories"], responses=not_found)
    async def history(memory_id: MemoryIdPath, key: Caller, user_id: UserQuery) -> HistoryResponse:
        """The life of one of the user's memories, from the memories topic, in log order."""
        entries = await memories.history(memory_id, user_id=_user(key, user_id))
        if not entries:
            # Every memory has its memory_added: none means unknown, or not this user's.
            raise HTTPException(404, _NO_MEMORY["detail"])
        return HistoryResponse(user_id=user_id, memory_id=memory_id, results=list(entries))

    @api.get("/v1/memories/{memory_id:path}", tags=["memories"], responses=not_found)
    async def get(memory_id: MemoryIdPath, key: Caller, user_id: UserQuery) -> MemoryDict:
        """One of the user's memories, whatever its status."""
        memory = await memories.get(memory_id, user_id=_user(key, user_id))
        if memory is None:
            raise HTTPException(404, _NO_MEMORY["detail"])
        return memory

    @api.delete(
        "/v1/memories/{memory_id:path}", status_code=202, tags=["memories"], responses=not_found
    )
    async def delete(
        memory_id: MemoryIdPath,
        key: Caller,
        user_id: UserQuery,
        reason: Annotated[str, Query(min_length=1, max_length=500)] = "requested",
    ) -> DeleteResponse:
        """Delete one of the user's memories (a ``memory_deleted`` event, sealed with the
        user's key); it leaves search once projected."""
        namespaced = _user(key, user_id, write=True)
        try:
            event_id = await memories.delete(memory_id, user_id=namespaced, reason=reason)
        except KeyError:
            raise HTTPException(404, _NO_MEMORY["detail"]) from None
        except (ValueError, TypeError) as exc:
            raise _unprocessable(exc, namespaced, user_id) from None
        return DeleteResponse(user_id=user_id, memory_id=memory_id, event_id=event_id)

    observe(api, service.settings)  # request ids, access log, /metrics: the outermost layer
    return api
