"""Serving the HTTP API: the uvicorn server of ``memstream serve`` and ``memstream mcp
--transport http``, and the whole API (``/v1``, the MCP server at ``/mcp``) run by
``memstream serve`` or inside a worker (``MEMSTREAM_SERVE_IN_WORKER``, on the worker's event
loop, sharing its container)."""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Generator
from types import FrameType

import uvicorn
from starlette.types import ASGIApp

from memstream.models.settings import Settings
from memstream.streams.api.app import create_api
from memstream.streams.api.auth import KeyFile
from memstream.streams.mcp.http import mount_mcp
from memstream.streams.service.app import Service

__all__ = ["ApiServer", "api_server", "serve_api"]

log = logging.getLogger(__name__)


class ApiServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signals alone when ``own_signals`` is
    false: inside a worker, SIGTERM is the worker's (it stops the app, and the app stops
    this server by cancelling its task)."""

    def __init__(self, config: uvicorn.Config, *, own_signals: bool = True) -> None:
        super().__init__(config)
        self.own_signals = own_signals
        #: Whether Ctrl-C (SIGINT) stopped the server. uvicorn raises the signal again once
        #: it has stopped, which reaches ``asyncio.run`` as a cancellation of its task; a
        #: library awaited during the shutdown may swallow that cancellation, so the
        #: command asks this instead.
        self.interrupted = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGINT:
            self.interrupted = True
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if self.own_signals:
            with super().capture_signals():
                yield
        else:
            yield


def api_server(
    app: ASGIApp, settings: Settings, *, host: str, port: int, own_signals: bool = True
) -> ApiServer:
    """The uvicorn server of ``app`` on ``host:port``; ``await server.serve()`` runs it."""
    # uvicorn logs through ours (log_config=None); its access log quotes paths and queries
    # (user and memory ids): the API logs each request itself, by route.
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        log_level=settings.log_level_libraries,
        access_log=False,
    )
    return ApiServer(config, own_signals=own_signals)


async def serve_api(
    service: Service,
    keys: KeyFile,
    *,
    host: str | None = None,
    port: int | None = None,
    own_signals: bool = True,
) -> bool:
    """Serve the HTTP API over ``service`` (``/v1``, ``/docs``, ``/metrics``, the memory
    inspector) with the MCP server at ``/mcp``, on ``host:port`` (the settings' ``api_host``
    and ``api_port`` by default), until the server stops or the task is cancelled; whether
    Ctrl-C stopped it."""
    settings = service.settings
    host = host or settings.api_host
    port = port or settings.api_port
    api = create_api(service, keys)
    async with mount_mcp(api, service, keys, default_user=settings.mcp_user, host=host):
        log.info("memstream: the HTTP API listens on http://%s:%d", host, port)
        server = api_server(api, settings, host=host, port=port, own_signals=own_signals)
        await server.serve()
    return server.interrupted
