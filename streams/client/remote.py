"""The HTTP client: the client's verbs over ``memstream serve`` (:class:`RemoteMemory`, what
``AsyncMemoryClient(url=..., api_key=...)`` calls), with httpx.

The application holds an API key and nothing else: no LanceDB directory, no users' keys, no
broker address. Answers are the same plain dicts as the in-process client's, and errors the
same types (see :mod:`memstream.streams.client.base`); connections are kept alive and a
failed connect is tried again (``retries``), never a request the service may have done.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote

import httpx

from memstream.streams.client.shapes import (
    DEFAULT_WAIT_S,
    ENTITY_LIMIT,
    FILTER_FIELDS,
    GRAPH_LIMIT,
    AccessRefused,
    ReportRows,
    ServiceUnreachable,
    SessionContextDict,
)
from memstream.streams.service.sessions import NoSession, WorkerUnreachable

if TYPE_CHECKING:
    from memstream.projections.memories import SearchFilters
    from memstream.streams.operations.erasure import ErasureReceipt
    from memstream.streams.service.chat_events import Message
    from memstream.streams.service.projects import ProjectsDict
    from memstream.streams.service.results import (
        AddResult,
        ContextResult,
        EntityDict,
        GraphDict,
        HistoryEntry,
        MemoryDict,
        MemoryHitDict,
        PatternsDict,
        ProfileDict,
        TimelineDict,
    )

__all__ = ["RemoteMemory"]

#: Seconds a request may take, beyond what ``add(wait=True)`` itself waits.
DEFAULT_TIMEOUT_S = 30.0


def _path(value: str) -> str:
    """One path segment: every character escaped, dots too (``..`` must stay an id)."""
    return quote(value, safe="").replace(".", "%2E")


def _time(value: datetime | None) -> str | None:
    if value is not None and value.tzinfo is None:
        raise ValueError("times need a timezone")
    return value.isoformat() if value is not None else None


def _filters(filters: SearchFilters | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``filters`` as the search request's JSON (a ``SearchFilters`` or a dict of its fields)."""
    if filters is None:
        return None
    given = (
        dict(filters)
        if isinstance(filters, Mapping)
        else {name: getattr(filters, name) for name in FILTER_FIELDS}
    )
    unknown = set(given) - set(FILTER_FIELDS)
    if unknown:
        raise ValueError(f"unknown search filters: {sorted(unknown)}")
    body: dict[str, Any] = {}
    for name, value in given.items():
        if value is None:
            continue
        if name == "memory_types":
            value = list(value)
        elif isinstance(value, datetime):
            value = _time(value)
        body[name] = value
    return body


class RemoteMemory:
    """The client's verbs over HTTP (see
    :class:`~memstream.streams.client.base.AsyncMemoryClient` for each verb).

    Parameters
    ----------
    url
        The base URL of ``memstream serve`` (``http://host:8080``; ``/v1`` is added).
    api_key
        The API key (``memstream api-key add``); sent as ``Authorization: Bearer``.
    timeout_s
        How long one request may take (``add(wait=True)`` adds its own wait to it).
    retries
        How often a failed connection is tried again.
    transport
        An httpx transport to use instead of the network (``httpx.ASGITransport(app=api)``
        runs the service in the same process, for tests).
    """

    def __init__(
        self,
        url: str,
        api_key: str | None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not api_key:
            raise ValueError("a client over HTTP needs the service's api_key")
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._http = httpx.AsyncClient(
            base_url=f"{self.url}/v1",
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout_s,
            transport=transport or httpx.AsyncHTTPTransport(retries=retries),
        )

    def __repr__(self) -> str:
        # Never the key.
        return f"RemoteMemory(url={self.url!r})"

    async def close(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def _call(
        self, method: str, path: str, *, timeout_s: float | None = None, **options: Any
    ) -> httpx.Response:
        try:
            response = await self._http.request(
                method, path, timeout=timeout_s or self.timeout_s, **options
            )
        except httpx.TransportError as exc:
            raise ServiceUnreachable(f"memstream serve at {self.url} did not answer: {exc}") from None
        if response.status_code >= 400 and response.status_code not in (404,):
            _raise(response)
        return response

    async def add(
        self,
        messages: str | Sequence[Message] | Sequence[dict[str, Any]],
        *,
        user_id: str,
        session_id: str | None = None,
        agent_id: str | None = None,
        close: bool = True,
        event_ids: Sequence[str] | None = None,
        occurred_at: datetime | None = None,
        wait: bool = False,
        timeout_s: float = DEFAULT_WAIT_S,
    ) -> AddResult:
        """``POST /v1/memories``."""
        sent: Any = messages
        if isinstance(sent, Mapping):  # one message, as normalise_messages takes it
            sent = [sent]
        body: dict[str, Any] = {
            "messages": sent if isinstance(sent, str) else list(sent),
            "user_id": user_id,
            "close": close,
            "wait": wait,
            "timeout_s": timeout_s,
        }
        for name, value in (
            ("session_id", session_id),
            ("agent_id", agent_id),
            ("event_ids", list(event_ids) if event_ids is not None else None),
            ("occurred_at", _time(occurred_at)),
        ):
            if value is not None:
                body[name] = value
        response = await self._call(
            "POST", "/memories", json=body, timeout_s=self.timeout_s + (timeout_s if wait else 0)
        )
        answer = response.json()
        answer.pop("user_id", None)
        if not wait:
            for name in ("status", "memories", "superseded", "failures"):
                answer.pop(name, None)
        result: AddResult = answer
        return result

    async def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 5,
        filters: SearchFilters | Mapping[str, Any] | None = None,
        as_of: datetime | None = None,
        explain: bool = False,
    ) -> list[MemoryHitDict]:
        """``POST /v1/memories/search``."""
        body: dict[str, Any] = {"query": query, "user_id": user_id, "limit": limit}
        if (sent := _filters(filters)) is not None:
            body["filters"] = sent
        if as_of is not None:
            body["as_of"] = _time(as_of)
        if explain:
            body["explain"] = True
        response = await self._call("POST", "/memories/search", json=body)
        hits: list[MemoryHitDict] = response.json()["results"]
        return hits

    async def context(
        self,
        message: str,
        *,
        user_id: str,
        recent_turns: Sequence[str] = (),
        session_id: str | None = None,
        token_budget: int | None = None,
        project: str | None = None,
    ) -> ContextResult:
        """``POST /v1/memories/context``."""
        if isinstance(recent_turns, str):
            raise TypeError("recent_turns must be a list of turns, not a string")
        body: dict[str, Any] = {
            "message": message, "user_id": user_id, "recent_turns": list(recent_turns)
        }
        if session_id is not None:
            body["session_id"] = session_id
        if token_budget is not None:
            body["token_budget"] = token_budget
        if project is not None:
            body["project"] = project
        answer = (await self._call("POST", "/memories/context", json=body)).json()
        answer.pop("user_id", None)
        found: ContextResult = answer
        return found

    async def get(self, memory_id: str, *, user_id: str) -> MemoryDict | None:
        """``GET /v1/memories/{id}``; None for 404."""
        response = await self._call(
            "GET", f"/memories/{_path(memory_id)}", params={"user_id": user_id}
        )
        if response.status_code == 404:
            return None
        memory: MemoryDict = response.json()
        return memory

    async def get_all(self, *, user_id: str, include_inactive: bool = False) -> list[MemoryDict]:
        """``GET /v1/memories``."""
        params = {"user_id": user_id, "include_inactive": "true" if include_inactive else "false"}
        response = await self._call("GET", "/memories", params=params)
        _found(response)
        memories: list[MemoryDict] = response.json()["results"]
        return memories

    async def timeline(
        self, about: str, *, user_id: str, subject: str | None = None
    ) -> TimelineDict:
        """``POST /v1/memories/timeline``."""
        body: dict[str, Any] = {"about": about, "user_id": user_id}
        if subject is not None:
            body["subject"] = subject
        response = await self._call("POST", "/memories/timeline", json=body)
        _found(response)
        answer = response.json()
        answer.pop("user_id", None)
        found: TimelineDict = answer
        return found

    async def profile(
        self, *, user_id: str, subject: str | None = None, as_of: datetime | None = None
    ) -> ProfileDict:
        """``POST /v1/memories/profile``."""
        body: dict[str, Any] = {"user_id": user_id}
        if subject is not None:
            body["subject"] = subject
        if as_of is not None:
            body["as_of"] = _time(as_of)
        response = await self._call("POST", "/memories/profile", json=body)
        _found(response)
        answer = response.json()
        answer.pop("user_id", None)
        found: ProfileDict = answer
        return found

    async def entity(
        self, name: str, *, user_id: str, as_of: datetime | None = None,
        limit: int = ENTITY_LIMIT,
    ) -> EntityDict:
        """``POST /v1/memories/entity``."""
        body: dict[str, Any] = {"user_id": user_id, "name": name, "limit": limit}
        if as_of is not None:
            body["as_of"] = _time(as_of)
        response = await self._call("POST", "/memories/entity", json=body)
        _found(response)
        answer = response.json()
        answer.pop("user_id", None)
        found: EntityDict = answer
        return found

    async def projects(
        self, *, user_id: str, project: str | None = None, as_of: datetime | None = None
    ) -> ProjectsDict:
        """``POST /v1/memories/projects``."""
        body: dict[str, Any] = {"user_id": user_id}
        if project is not None:
            body["project"] = project
        if as_of is not None:
            body["as_of"] = _time(as_of)
        response = await self._call("POST", "/memories/projects", json=body)
        _found(response)
        answer = response.json()
        answer.pop("user_id", None)
        found: ProjectsDict = answer
        return found

    async def graph(
        self, *, user_id: str, as_of: datetime | None = None, limit: int = GRAPH_LIMIT
    ) -> GraphDict:
        """``POST /v1/memories/graph``."""
        body: dict[str, Any] = {"user_id": user_id, "limit": limit}
        if as_of is not None:
            body["as_of"] = _time(as_of)
        response = await self._call("POST", "/memories/graph", json=body)
        _found(response)
        answer = response.json()
        answer.pop("user_id", None)
        found: GraphDict = answer
        return found

    async def patterns(self, *, user_id: str, as_of: datetime | None = None) -> PatternsDict:
        """``POST /v1/memories/patterns``."""
        body: dict[str, Any] = {"user_id": user_id}
        if as_of is not None:
            body["as_of"] = _time(as_of)
        response = await self._call("POST", "/memories/patterns", json=body)
        _found(response)
        answer = response.json()
        answer.pop("user_id", None)
        found: PatternsDict = answer
        return found

    async def history(self, memory_id: str, *, user_id: str) -> list[HistoryEntry]:
        """``GET /v1/memories/{id}/history``; an empty list for 404 (unknown, or another
        user's), as in this process."""
        response = await self._call(
            "GET", f"/memories/{_path(memory_id)}/history", params={"user_id": user_id}
        )
        if response.status_code == 404:
            return []
        entries: list[HistoryEntry] = response.json()["results"]
        return entries

    async def delete(self, memory_id: str, *, user_id: str, reason: str = "requested") -> str:
        """``DELETE /v1/memories/{id}``; ``KeyError`` for 404."""
        response = await self._call(
            "DELETE",
            f"/memories/{_path(memory_id)}",
            params={"user_id": user_id, "reason": reason},
        )
        if response.status_code == 404:
            raise KeyError(memory_id)
        return str(response.json()["event_id"])

    async def delete_all(self, *, user_id: str, reason: str = "requested") -> list[str]:
        """``DELETE /v1/memories``."""
        response = await self._call(
            "DELETE", "/memories", params={"user_id": user_id, "reason": reason}
        )
        _found(response)
        return [str(event_id) for event_id in response.json()["event_ids"]]

    async def erase(self, *, user_id: str, reason: str = "requested") -> ErasureReceipt:
        """``POST /v1/erasures``: the receipt."""
        from memstream.streams.operations.erasure import ErasureReceipt

        body = {"user_id": user_id, "reason": reason}
        answer = (
            await self._call("POST", "/erasures", json=body, timeout_s=self.timeout_s + 120)
        ).json()
        return ErasureReceipt(
            user_key=answer["user_key"],
            erasure_id=answer["erasure_id"],
            started_at=datetime.fromisoformat(answer["started_at"]),
            removed=dict(answer["removed"]),
            notes=list(answer["notes"]),
            left=list(answer["left"]),
        )

    async def session_context(
        self, session_id: str, *, user_id: str, budget: int | None = None
    ) -> SessionContextDict:
        """``GET /v1/sessions/{id}/context``; ``NoSession`` for 404, ``WorkerUnreachable``
        for 503."""
        params: dict[str, Any] = {"user_id": user_id}
        if budget is not None:
            params["budget"] = budget
        response = await self._call(
            "GET", f"/sessions/{_path(session_id)}/context", params=params
        )
        if response.status_code == 404:
            raise NoSession(f"no open session {session_id!r} for user {user_id!r}")
        answer = response.json()
        return {
            "session_id": answer["session_id"],
            "prompt": answer["prompt"],
            "context": answer["context"],
            "served_by": answer.get("served_by"),
        }

    async def close_session(self, session_id: str, *, user_id: str) -> str:
        """``POST /v1/sessions/{id}/close``."""
        response = await self._call(
            "POST", f"/sessions/{_path(session_id)}/close", json={"user_id": user_id}
        )
        _found(response)
        return str(response.json()["event_id"])

    async def report(
        self,
        name: str,
        *,
        user_id: str,
        since: datetime | None = None,
        now: datetime | None = None,
        days: int = 7,
        limit: int = 10,
    ) -> ReportRows:
        """``GET /v1/reports/{name}``; ``ValueError`` for an unknown report."""
        params: dict[str, Any] = {"user_id": user_id, "days": days, "limit": limit}
        if since is not None:
            params["since"] = _time(since)
        if now is not None:
            params["now"] = _time(now)
        response = await self._call("GET", f"/reports/{_path(name)}", params=params)
        if response.status_code == 404:
            raise ValueError(f"unknown report {name!r}")
        answer = response.json()
        return {"report": answer["report"], "columns": answer["columns"], "rows": answer["rows"]}


def _reason(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        return response.text[:200]
    if isinstance(detail, list):  # validation errors: where and what
        return "; ".join(
            f"{'.'.join(str(part) for part in error.get('loc', ()))}: {error.get('msg', '')}"
            for error in detail
        )
    return str(detail)


def _raise(response: httpx.Response) -> NoReturn:
    """The error of a refused request, as the in-process client raises it."""
    status, reason = response.status_code, _reason(response)
    if status in (401, 403):
        raise AccessRefused(status, reason)
    if status == 422:
        raise ValueError(reason)
    if status == 503:
        if "/sessions/" in response.request.url.path:
            raise WorkerUnreachable(reason)
        raise ServiceUnreachable(reason)
    raise ServiceUnreachable(f"memstream serve answered {status}: {reason}")


def _found(response: httpx.Response) -> None:
    """A 404 where none is documented (a proxy's, or an older service's) is an error."""
    if response.status_code == 404:
        raise ServiceUnreachable(f"{response.request.url.path} is not a memstream endpoint")
