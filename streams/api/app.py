"""The FastAPI app of ``memstream serve`` (create_api): the memory service under ``/v1``,
behind API keys, each route a thin adapter over :class:`~memstream.streams.service.app.Service`.

Every ``/v1`` path but ``/v1/health`` and ``/v1/ready`` wants ``Authorization: Bearer
<key>``; the key is checked before the request is read any further, so no key or an unknown
one gets 401 whatever the body. The key's tenant namespaces the user id
(:func:`~memstream.streams.api.auth.tenant_user_id`); responses name the caller's own user id,
never the namespaced one. Status codes: 200 for reads, 202 for writes (events published; the
projection follows), 401, 403 (a user the key may not act for, a write with a read-only key),
404 (an unknown memory, or another user's: the two are not told apart), 422 (bad input), 503
(what the answer needs is not reachable now). Error bodies say what was wrong, never whose
data exists. The routes are in :mod:`~memstream.streams.api.memories`,
:mod:`~memstream.streams.api.sessions` and :mod:`~memstream.streams.api.reports`.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from memstream.streams.api import memories, reports, sessions
from memstream.streams.api.auth import KeyFile
from memstream.streams.api.deps import RequireApiKey, Unreachable
from memstream.streams.api.inspector import mount_inspector
from memstream.streams.api.observability import observe
from memstream.streams.api.schemas import Health, Readiness
from memstream.streams.kafka.logid import LogLost, MarkReader, bound_log_id
from memstream.streams.service.app import Service, Unavailable, unavailable
from memstream.streams.worker.process import worker_readiness

__all__ = ["create_api"]

log = logging.getLogger(__name__)

#: Where the interactive docs' scripts, styles and icon are served from.
DOCS_ASSETS = "/docs/assets"
#: Paths under /v1 that need no key.
OPEN_PATHS = frozenset({"/v1/health", "/v1/ready"})
#: How long a readiness answer is reused: probes from many balancers cost one check.
READY_CACHE_S = 2.0
#: The readiness checks' states besides ``ok``: what is wrong, and what to do.
BROKER_UNREACHABLE = "unreachable: start the broker (`memstream broker`) or check MEMSTREAM_BROKER"
BROKER_LOST_LOG = (
    "lost its log (it restarted empty, or it is another broker): stop the workers, run "
    "`memstream restore`, start the workers again"
)
TABLE_CLOSED = "the memory table does not open: see the service's log"
#: The checks that decide readiness (a worker's state is reported, and does not decide).
DECIDING = ("broker", "memories")
#: The 422 of a body that is not JSON text (FastAPI's own answer is a 400 the document lacks).
UNREADABLE_BODY = {"loc": ["body"], "msg": "the body is not JSON text (UTF-8)", "type": "json_invalid"}


def _needs_a_key(path: str) -> bool:
    return path.startswith("/v1/") and path not in OPEN_PATHS

def create_api(service: Service, keys: KeyFile) -> FastAPI:
    """The HTTP API over ``service``, open to the holders of ``keys``.

    OpenAPI at ``/openapi.json``, interactive docs at ``/docs`` (Swagger UI, its files served
    from :data:`DOCS_ASSETS`, so the page needs no network), the memory inspector at
    ``/inspector/``. The caller owns ``service`` (and closes it); the app only calls it, on
    the server's event loop.

    Examples
    --------
    >>> service = Service.from_settings(Settings())  # doctest: +SKIP
    >>> api = create_api(service, KeyFile(Path("api_keys.toml")))  # doctest: +SKIP
    >>> uvicorn.run(api)  # doctest: +SKIP
    """
    # FastAPIOffline: the same FastAPI app, whose /docs loads Swagger UI from files shipped
    # in the fastapi-offline package (DOCS_ASSETS), not from a CDN: the page works offline.
    api = FastAPIOffline(
        title="memstream",
        summary="Event-sourced long-term memory for LLM agents.",
        version="1",
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
        static_url=DOCS_ASSETS,
    )
    api.add_middleware(RequireApiKey, keys=keys, guarded=_needs_a_key)
    api.state.service = service
    readiness = _Readiness(service)

    @api.exception_handler(RequestValidationError)
    async def bad_input(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's default quotes the input back; say where and what only.
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        return JSONResponse({"detail": errors}, status_code=422)

    @api.exception_handler(StarletteHTTPException)
    async def refused(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400:
            # FastAPI's answer to a body it cannot decode: bad input, like any other.
            return JSONResponse({"detail": [UNREADABLE_BODY]}, status_code=422)
        if exc.status_code == 405:
            # Starlette names only the methods of the first route of the path: one Allow
            # header with those of every route of it.
            methods = _methods_of(api, request)
            if methods:
                exc.headers = {**(exc.headers or {}), "Allow": ", ".join(methods)}
        return await http_exception_handler(request, exc)

    @api.exception_handler(Unreachable)
    async def unreachable(request: Request, exc: Unreachable) -> JSONResponse:
        return _unavailable_response(exc.unavailable)

    async def broker_failed(request: Request, exc: Exception) -> JSONResponse:
        found = unavailable(exc)
        assert found is not None  # registered for the kinds unavailable() knows
        # The whole reason (addresses, paths, the recovery) is the operator's, in the log.
        log.warning("%s %s: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
        return _unavailable_response(found)

    for kind in (LogLost, KafkaError, TimeoutError):
        api.add_exception_handler(kind, broker_failed)

    @api.get("/v1/health", tags=["health"])
    async def health() -> Health:
        """Liveness: the service answers (no key needed)."""
        return Health(ok=True)

    @api.get(
        "/v1/ready",
        tags=["health"],
        responses={503: {"model": Readiness, "description": "Not ready: see the checks."}},
    )
    async def ready() -> JSONResponse:
        """Readiness (no key needed): the broker answers and holds the log this service's
        data came from, and the memory table opens. A worker's own readiness is reported
        too (sessions need one) but does not decide. Not ready: 503, each check saying
        what is wrong and what to do, ``detail`` all of it in one line."""
        answer = await readiness.check()
        return JSONResponse(answer.model_dump(), status_code=200 if answer.ready else 503)

    for router in (memories.router, sessions.router, reports.router):
        # The routes themselves, not the router (FastAPI 0.16x nests an included router):
        # one flat table, which the metrics' route templates are read from.
        api.router.routes.extend(router.routes)
    mount_inspector(api)
    observe(api, service.settings)  # request ids, access log, /metrics: the outermost layer
    return api


class _Readiness:
    """The service's readiness checks, each bounded in time, the answer reused briefly."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self._answer: tuple[float, Readiness] | None = None
        self._lock = asyncio.Lock()

    async def check(self) -> Readiness:
        async with self._lock:
            if self._answer is not None and time.monotonic() - self._answer[0] < READY_CACHE_S:
                return self._answer[1]
            broker, table, worker = await asyncio.gather(
                self._broker(), self._memories(), self._worker()
            )
            checks = {"broker": broker, "memories": table, "worker": worker}
            failing = [f"{name} {checks[name]}" for name in DECIDING if checks[name] != "ok"]
            answer = Readiness(
                ready=not failing,
                checks=checks,
                detail="not ready: " + "; ".join(failing) if failing else None,
            )
            self._answer = (time.monotonic(), answer)
            return answer

    async def _broker(self) -> str:
        settings = self.service.settings
        bound = bound_log_id(settings)
        if bound is None:
            # No log claimed yet: any broker that answers will do (reading the mark could
            # make the broker create its topic).
            return await self._broker_answers()
        reader = MarkReader(settings)
        try:
            found = await asyncio.wait_for(reader.read(timeout_s=3.0), 5.0)
        except Exception:  # noqa: BLE001 - whatever the failure, the broker is not there
            return BROKER_UNREACHABLE
        finally:
            await reader.close()
        return "ok" if found == bound else BROKER_LOST_LOG

    async def _broker_answers(self) -> str:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.service.settings.broker, request_timeout_ms=2000
        )
        try:
            await asyncio.wait_for(consumer.start(), 3.0)
        except Exception:  # noqa: BLE001 - whatever the failure, the answer is "not ready"
            return BROKER_UNREACHABLE
        finally:
            await consumer.stop()
        return "ok"

    async def _memories(self) -> str:
        try:
            await asyncio.to_thread(self.service.container.memory_projection)
        except Exception:  # noqa: BLE001 - whatever the failure, the answer is "not ready"
            return TABLE_CLOSED
        return "ok"

    async def _worker(self) -> str:
        try:
            state = await asyncio.to_thread(worker_readiness, self.service.settings, 2.0)
        except OSError:
            return "no worker answers"
        return "ok" if state.get("ready") else "not ready"


def _unavailable_response(found: Unavailable) -> JSONResponse:
    """The 503 of ``found``: what is not available, and what to do."""
    headers = {"Retry-After": str(found.retry_after_s)} if found.retry_after_s else None
    return JSONResponse(
        {"detail": found.reason, "unavailable": found.what}, status_code=503, headers=headers
    )


def _methods_of(api: FastAPI, request: Request) -> list[str]:
    """Every method some route of ``api`` answers at the request's path, sorted."""
    methods: set[str] = set()
    for route in api.router.routes:
        route_methods = getattr(route, "methods", None)
        if route_methods and route.matches(request.scope)[0] != Match.NONE:
            methods.update(route_methods)
    return sorted(methods)
