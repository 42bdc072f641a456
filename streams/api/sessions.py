"""The session routes of the HTTP API: an open session's working memory, answered by the
worker that owns the user's partition (any instance routes the request there, through the
workers' web port), and ending a session now."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query

from memstream.streams.api.deps import (
    ERRORS,
    Caller,
    ServiceDep,
    Unreachable,
    UserQuery,
    scoped_user,
)
from memstream.streams.api.schemas import (
    CloseSessionRequest,
    CloseSessionResponse,
    Problem,
    SessionContextResponse,
)
from memstream.streams.service.app import Unavailable
from memstream.streams.service.sessions import NoSession, WorkerRefused, WorkerUnreachable

__all__ = ["router"]

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])
#: A session id as events carry it (the events' ``Identifier``): no control characters, so
#: none that the path could not route either.
SessionPath = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")]
_SESSION_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    404: {"model": Problem, "description": "No open session of that id for this user."},
}
_NO_WORKER = Unavailable(
    "worker",
    "no worker answers for this user's sessions now: ask again in a few seconds (a worker "
    "must be running: `memstream worker`)",
    retry_after_s=5,
)


def _renamed(value: Any, namespaced: str, user_id: str) -> Any:
    """``value`` with every ``user_id`` field that holds ``namespaced`` holding ``user_id``."""
    if isinstance(value, dict):
        return {
            k: user_id if k == "user_id" and v == namespaced else _renamed(v, namespaced, user_id)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_renamed(v, namespaced, user_id) for v in value]
    return value


@router.get("/{session_id:path}/context", responses=_SESSION_ERRORS)
async def session_context(
    session_id: SessionPath,
    key: Caller,
    service: ServiceDep,
    user_id: UserQuery,
    budget: Annotated[int, Query(ge=1, le=1_000_000)] | None = None,
) -> SessionContextResponse:
    """An open session's working memory (message window, task, progress, scratchpad,
    entities, recent tool calls) and its prompt within ``budget`` tokens."""
    namespaced = scoped_user(key, user_id)
    try:
        reply = await service.sessions.context(
            user_id=namespaced, session_id=session_id, budget=budget
        )
    except NoSession:
        raise HTTPException(404, "no open session of that id for this user") from None
    except (WorkerRefused, WorkerUnreachable):
        # The reason stays in the service's log: it names the worker's address.
        raise Unreachable(_NO_WORKER) from None
    return SessionContextResponse(
        user_id=user_id,
        session_id=session_id,
        prompt=str(reply.get("prompt", "")),
        context=_renamed(reply.get("context", {}), namespaced, user_id),
        served_by=reply.get("served_by"),
    )


@router.post(
    "/{session_id:path}/close",
    status_code=202,
    responses={
        **ERRORS,
        # The router's own answer: a path parameter never spans a line break.
        404: {"model": Problem, "description": "A path no route takes (a line break in it)."},
    },
)
async def close_session(
    session_id: SessionPath, body: CloseSessionRequest, key: Caller, service: ServiceDep
) -> CloseSessionResponse:
    """End the session now (a ``session_closed`` event): the worker consolidates what it
    still holds. Closing a session that is not open changes nothing."""
    namespaced = scoped_user(key, body.user_id, write=True)
    try:
        event_id = await service.sessions.close(user_id=namespaced, session_id=session_id)
    except (ValueError, TypeError):
        raise HTTPException(422, "session_id is not an id an event can carry") from None
    return CloseSessionResponse(user_id=body.user_id, session_id=session_id, event_id=event_id)
