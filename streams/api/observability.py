"""Request ids, the access log and Prometheus metrics of the HTTP API (:func:`observe`).

Every request gets an id: the caller's ``X-Request-ID`` if it is short and safe (1 to 64
letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit), else a new one. The
id goes back in the response's ``X-Request-ID`` header and is set in
:data:`memstream.streams.observability.logs.request_id` while the request runs, so every log
record of the request carries it. Each request is logged once when it ends (method, route
template, status, duration; never the path, the query, a header or the body: they hold user
ids, memory ids, keys and content) and counted in ``memstream_http_requests_total`` and
``memstream_http_request_duration_seconds`` by method, *route template* and status
(``/v1/memories/{memory_id}``, never the requested path, whose ids would make a series per
memory).

``GET /metrics`` serves every metric of the process in Prometheus' text format. It needs no
API key (a tenant's key must not read the traffic of others); with ``MEMSTREAM_METRICS_TOKEN``
set it needs ``Authorization: Bearer <that token>``. The metrics hold counts and latencies
by route template and status, no user data.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memstream.models.settings import Settings, weak_token_problem
from memstream.streams.observability.logs import request_id
from memstream.streams.observability.metrics import (
    HTTP_REQUESTS,
    HTTP_SECONDS,
    Children,
    exposition,
)

__all__ = ["METRICS_PATH", "check_metrics_token", "observe"]

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
#: An incoming X-Request-ID is kept only if it matches this; else a new id replaces it.
SAFE_REQUEST_ID = re.compile(rb"[A-Za-z0-9][A-Za-z0-9._\-]{0,63}")
#: Methods counted under their own name; any other is counted as ``other`` (a client
#: choosing methods must not choose the metric's series).
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: The route label of a request that matched no route.
UNMATCHED = "unmatched"
#: Routes logged at debug only: probes and scrapes come every few seconds.
QUIET_ROUTES = frozenset({"/v1/health", METRICS_PATH})


def check_metrics_token(settings: Settings) -> None:
    """Refuse a metrics token that is too weak to guard anything.

    Raises
    ------
    ValueError
        ``metrics_token`` is set and shorter than :data:`~memstream.models.settings.MIN_TOKEN_CHARS` or holds anything
        but printable ASCII. The message never contains the token.
    """
    problem = weak_token_problem("MEMSTREAM_METRICS_TOKEN", settings.metrics_token)
    if problem is not None:
        raise ValueError(problem)


def new_request_id(scope: Scope) -> str:
    """The caller's ``X-Request-ID`` when there is exactly one and it is safe, else a new
    random id.

    Examples
    --------
    >>> new_request_id({"headers": [(b"x-request-id", b"trace-42")]})
    'trace-42'
    >>> len(new_request_id({"headers": [(b"x-request-id", b"<script>")]}))
    32
    """
    given = [v for k, v in scope.get("headers", ()) if k.lower() == b"x-request-id"]
    if len(given) == 1 and SAFE_REQUEST_ID.fullmatch(given[0]):
        return given[0].decode("ascii")
    return uuid.uuid4().hex


class RequestObservation:
    """ASGI middleware: the request id, one log record and the metrics of each request."""

    def __init__(self, app: ASGIApp, api: FastAPI) -> None:
        self.app = app
        self.api = api
        self._requests = Children(HTTP_REQUESTS)
        self._seconds = Children(HTTP_SECONDS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = new_request_id(scope)
        header = rid.encode("ascii")
        status = 500  # unless the app starts a response

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [
                    (k, v) for k, v in message.get("headers", ()) if k.lower() != b"x-request-id"
                ]
                message = {**message, "headers": [*headers, (b"x-request-id", header)]}
            await send(message)

        token = request_id.set(rid)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            self._done(scope, status, elapsed)
            request_id.reset(token)

    def _done(self, scope: Scope, status: int, elapsed_s: float) -> None:
        method = scope.get("method", "")
        method = method if method in KNOWN_METHODS else "other"
        route = self.route_of(scope)
        self._requests.get(method, route, str(status)).inc()
        self._seconds.get(method, route).observe(elapsed_s)
        log.log(
            logging.DEBUG if route in QUIET_ROUTES else logging.INFO,
            "%s %s %d",
            method,
            route,
            status,
            extra={
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": round(elapsed_s * 1000, 3),
            },
        )

    def route_of(self, scope: Scope) -> str:
        """The template of the route ``scope`` matches (``/v1/memories/{memory_id}``), that
        of a route that matches but for the method, else :data:`UNMATCHED`."""
        partial = None
        for route in self.api.router.routes:
            match, _ = route.matches(scope)
            if match == Match.FULL:
                return _template(route)
            if match == Match.PARTIAL and partial is None:
                partial = _template(route)
        return partial or UNMATCHED


def _template(route: Any) -> str:
    # path_format drops the convertors: "/v1/memories/{memory_id}", not "{memory_id:path}".
    return str(getattr(route, "path_format", None) or getattr(route, "path", UNMATCHED))


def _bearer_matches(headers: Headers, token: str) -> bool:
    given = headers.getlist("authorization")
    if len(given) != 1:
        return False
    scheme, _, credentials = given[0].partition(" ")
    sent = credentials.encode("utf-8", "surrogateescape")
    return hmac.compare_digest(sent, token.encode("ascii")) and scheme.lower() == "bearer"


def observe(api: FastAPI, settings: Settings) -> None:
    """Give ``api`` request ids, an access log and metrics, and serve ``GET /metrics``
    (see the module docstring). Call it once the app's other middleware is added: this one
    must be the outermost, so a request refused before it reaches a route is counted, logged
    and answered with its id too.

    Raises
    ------
    ValueError
        See :func:`check_metrics_token`.

    Examples
    --------
    >>> api = FastAPI()
    >>> observe(api, Settings())
    >>> METRICS_PATH in {route.path for route in api.routes}
    True
    """
    check_metrics_token(settings)
    token = settings.metrics_token

    async def metrics(request: Request) -> Response:
        """Every metric of this process, in Prometheus' text format."""
        if token is not None and not _bearer_matches(request.headers, token.get_secret_value()):
            return JSONResponse(
                {"detail": "send the metrics token as 'Authorization: Bearer <token>'"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="memstream metrics"'},
            )
        body, content_type = exposition()
        return Response(content=body, headers={"Content-Type": content_type})

    api.add_api_route(METRICS_PATH, metrics, methods=["GET"], include_in_schema=False)
    api.add_middleware(RequestObservation, api=api)
