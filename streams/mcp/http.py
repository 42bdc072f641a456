"""The MCP server over streamable HTTP, behind the HTTP API's keys: ``memstream mcp
--transport http`` (mcp_http_app), and ``/mcp`` inside ``memstream serve`` (mount_mcp).

Every request needs ``Authorization: Bearer <key>`` with a key of the key file, checked
before the request is read any further, per request (as the HTTP API checks it): no key or an
unknown one gets 401. The key rides in the request's ASGI state to the tools
(:data:`~memstream.streams.api.deps.API_KEY_STATE`). The server is stateless and answers in
JSON: each request stands alone, so no MCP session outlives the key that opened it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server import MCPServer
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp

from memstream.streams.api.auth import KeyFile
from memstream.streams.api.deps import RequireApiKey
from memstream.streams.mcp.server import create_mcp_server
from memstream.streams.service.app import Service

__all__ = ["MCP_PATH", "mcp_http_app", "mount_mcp"]

#: Where the MCP endpoint is, standalone and inside ``memstream serve``.
MCP_PATH = "/mcp"


def _streamable_app(
    service: Service, keys: KeyFile, *, default_user: str | None, host: str
) -> tuple[ASGIApp, MCPServer]:
    server = create_mcp_server(service, default_user=default_user)
    # ``host`` turns on the SDK's DNS-rebinding guard for a loopback address.
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, host=host
    )
    return RequireApiKey(app, keys), server


def mcp_http_app(
    service: Service, keys: KeyFile, *, default_user: str | None = None, host: str = "127.0.0.1"
) -> ASGIApp:
    """The MCP server over streamable HTTP at ``/mcp``, open to the holders of ``keys``, as
    an ASGI app to serve (its lifespan runs the SDK's session manager).

    Parameters
    ----------
    service
        What the tools call; the caller owns it.
    keys
        The key file every request's key is checked against.
    default_user
        The user a call acts for when it names none.
    host
        The address the app is served on (a loopback one turns on the Host header check).

    Examples
    --------
    >>> uvicorn.run(mcp_http_app(service, KeyFile(settings.api_keys_path)))  # doctest: +SKIP
    """
    app, _ = _streamable_app(service, keys, default_user=default_user, host=host)
    return app


@asynccontextmanager
async def mount_mcp(
    api: Starlette,
    service: Service,
    keys: KeyFile,
    *,
    default_user: str | None = None,
    host: str = "127.0.0.1",
) -> AsyncIterator[None]:
    """Mount the MCP endpoint at ``/mcp`` in ``api`` (``memstream serve``'s app) and run
    its session manager until the block ends (a mounted app's own lifespan never runs).

    Examples
    --------
    >>> async with mount_mcp(api, service, keys):  # doctest: +SKIP
    ...     await uvicorn.Server(uvicorn.Config(api)).serve()
    """
    app, server = _streamable_app(service, keys, default_user=default_user, host=host)
    api.router.routes.append(Route(MCP_PATH, endpoint=app, include_in_schema=False))
    async with server.session_manager.run():
        yield
