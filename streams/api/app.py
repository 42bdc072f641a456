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
import time

from aiokafka import AIOKafkaConsumer
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from memstream.streams.api import memories, reports, sessions
from memstream.streams.api.auth import KeyFile
from memstream.streams.api.deps import RequireApiKey
from memstream.streams.api.inspector import mount_inspector
from memstream.streams.api.observability import observe
from memstream.streams.api.schemas import Health, Readiness
from memstream.streams.runtime.worker import worker_readiness
from memstream.streams.service.app import Service

__all__ = ["create_api"]

#: Paths under /v1 that need no key.
OPEN_PATHS = frozenset({"/v1/health", "/v1/ready"})
#: How long a readiness answer is reused: probes from many balancers cost one check.
READY_CACHE_S = 2.0


def _needs_a_key(path: str) -> bool:
    return path.startswith("/v1/") and path not in OPEN_PATHS

def create_api(service: Service, keys: KeyFile) -> FastAPI:
    """The HTTP API over ``service``, open to the holders of ``keys``.

    OpenAPI at ``/openapi.json``, interactive docs at ``/docs``, the memory inspector at
    ``/inspector/``. The caller owns ``service`` (and closes it); the app only calls it, on
    the server's event loop.

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
        """Readiness (no key needed): the broker answers and the memory table opens. A
        worker's own readiness is reported too (sessions need one) but does not decide."""
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
            answer = Readiness(
                ready=broker == "ok" and table == "ok",
                checks={"broker": broker, "memories": table, "worker": worker},
            )
            self._answer = (time.monotonic(), answer)
            return answer

    async def _broker(self) -> str:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.service.settings.broker, request_timeout_ms=2000
        )
        try:
            await asyncio.wait_for(consumer.start(), 3.0)
        except Exception:  # noqa: BLE001 - whatever the failure, the answer is "not ready"
            return "unreachable"
        finally:
            await consumer.stop()
        return "ok"

    async def _memories(self) -> str:
        try:
            await asyncio.to_thread(self.service.container.memory_projection)
        except Exception:  # noqa: BLE001 - whatever the failure, the answer is "not ready"
            return "the memory table does not open"
        return "ok"

    async def _worker(self) -> str:
        try:
            state = await asyncio.to_thread(worker_readiness, self.service.settings, 2.0)
        except OSError:
            return "no worker answers"
        return "ok" if state.get("ready") else "not ready"
