"""What every route of the HTTP API shares: the caller's key, the service, the user id the
service knows the caller's user by, and the documented error answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Path, Query, Request, Security
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from memstream.streams.api.auth import (
    CALLER_USER_ID_PATTERN,
    CALLER_USER_ID_RULE,
    MAX_CALLER_USER_ID_CHARS,
    ApiKey,
    KeyFile,
    Refused,
    bearer_key,
)
from memstream.streams.api.schemas import BadInput, Problem, ServiceUnavailable
from memstream.streams.service.app import Service, Unavailable

__all__ = [
    "API_KEY_STATE",
    "ERRORS",
    "NOT_FOUND",
    "Caller",
    "MemoryIdPath",
    "RequireApiKey",
    "ServiceDep",
    "Unreachable",
    "UserQuery",
    "scoped_user",
    "unprocessable",
]

#: Where in a request's ASGI state the key it was authenticated with rides.
API_KEY_STATE = "memstream_api_key"


class RequireApiKey:
    """Refuses every HTTP request that ``guarded(path)`` selects (all of them by default)
    without a known key (401) before the app reads it, and hands the key on in the request's
    state (:data:`API_KEY_STATE`); other requests and lifespan events pass through.

    The HTTP API guards ``/v1`` but its health pages, the MCP server every request.
    """

    def __init__(
        self, app: ASGIApp, keys: KeyFile, guarded: Callable[[str], bool] = lambda _: True
    ) -> None:
        self.app = app
        self.keys = keys
        self.guarded = guarded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.guarded(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        values = [v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
        key = bearer_key(self.keys, values)
        if key is None:
            refusal = JSONResponse(
                {"detail": "a valid API key is required (Authorization: Bearer <key>)"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await refusal(scope, receive, send)
            return
        # A new state dict: the server's is shared by every request.
        scope = {**scope, "state": {**scope.get("state", {}), API_KEY_STATE: key}}
        await self.app(scope, receive, send)


_bearer = HTTPBearer(
    auto_error=False,
    description="An API key from the key file (`memstream api-key add`), bound to a tenant.",
)
UserQuery = Annotated[
    str,
    Query(
        min_length=1,
        max_length=MAX_CALLER_USER_ID_CHARS,
        pattern=CALLER_USER_ID_PATTERN,
        description=CALLER_USER_ID_RULE,
    ),
]
MemoryIdPath = Annotated[str, Path(min_length=1, max_length=1024)]
#: What every route of ``/v1`` that needs a key may answer besides its success.
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "No API key, or an unknown one."},
    403: {
        "model": Problem,
        "description": "A user the key may not act for, or a write with a read-only key.",
    },
    422: {"model": BadInput, "description": "Bad input: what, and where."},
    503: {
        "model": ServiceUnavailable,
        "description": "What the answer needs is not reachable now (the broker, or the "
        "worker of the user's sessions): which, and what to do.",
    },
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    404: {"model": Problem, "description": "No such memory of this user."},
}


class Unreachable(Exception):
    """Raised by a route whose answer needs what is not available now: the app answers
    503 with :class:`~memstream.streams.api.schemas.ServiceUnavailable`."""

    def __init__(self, unavailable: Unavailable) -> None:
        super().__init__(unavailable.reason)
        self.unavailable = unavailable


# Both dependencies are coroutines: FastAPI runs a plain function in its thread pool, which
# cost every request two thread hops (and a wait for a free thread under load) for two
# attribute reads.
async def _caller(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
) -> ApiKey:
    """The key the request was authenticated with (the security scheme is declared here, for
    the OpenAPI document; :class:`RequireApiKey` did the checking)."""
    key: ApiKey = getattr(request.state, API_KEY_STATE)
    return key


async def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


Caller = Annotated[ApiKey, Depends(_caller)]
ServiceDep = Annotated[Service, Depends(_service)]


def scoped_user(key: ApiKey, user_id: str, *, write: bool = False) -> str:
    """The id the service knows the caller's ``user_id`` by (``tenant:user``); 403 or 422
    when the key may not act for it, or no event can carry it."""
    try:
        return key.user_id(user_id, write=write)
    except Refused as refused:
        raise HTTPException(refused.status, refused.reason) from None


def unprocessable(exc: ValueError | TypeError, namespaced: str, user_id: str) -> HTTPException:
    """422 with the service's reason, naming the caller's user id, not the namespaced one."""
    return HTTPException(422, str(exc).replace(namespaced, user_id))
