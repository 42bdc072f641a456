"""Serving the HTTP API: the uvicorn server of ``memstream serve``, and the same server run
inside a worker (``MEMSTREAM_SERVE_IN_WORKER``), on the worker's event loop, sharing its
container (the key store, the memory table)."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from pathlib import Path

import uvicorn

from memstream.models.settings import Settings
from memstream.streams.api.app import create_api
from memstream.streams.api.auth import KeyFile
from memstream.streams.service.app import Service

__all__ = ["ApiServer", "api_server", "key_file"]


class ApiServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signals alone when ``own_signals`` is
    false: inside a worker, SIGTERM is the worker's (it stops the app, and the app stops
    this server by cancelling its task)."""

    def __init__(self, config: uvicorn.Config, *, own_signals: bool = True) -> None:
        super().__init__(config)
        self.own_signals = own_signals

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if self.own_signals:
            with super().capture_signals():
                yield
        else:
            yield


def key_file(settings: Settings) -> KeyFile:
    """The API keys of ``settings`` (``api_keys_path``; read again whenever it changes).

    Raises
    ------
    KeyFileError
        The file exists but does not parse.
    """
    path: Path = settings.api_keys_path
    return KeyFile(path)


def api_server(
    service: Service,
    keys: KeyFile,
    *,
    host: str | None = None,
    port: int | None = None,
    own_signals: bool = True,
) -> ApiServer:
    """The uvicorn server of the HTTP API over ``service`` on ``host:port`` (the settings'
    ``api_host`` and ``api_port`` by default); ``await server.serve()`` runs it."""
    settings = service.settings
    # uvicorn logs through ours (log_config=None); its access log quotes paths and queries
    # (user and memory ids): the API logs each request itself, by route.
    config = uvicorn.Config(
        create_api(service, keys),
        host=host or settings.api_host,
        port=port or settings.api_port,
        log_config=None,
        log_level=settings.log_level_libraries,
        access_log=False,
    )
    return ApiServer(config, own_signals=own_signals)
