"""``memstream serve``, ``mcp`` and ``api-key add``: the HTTP API, the MCP server, and the
keys that open them.

And the keys' tenants on the command line: ``--tenant T --user U`` (on every command that
names a user) is the user an API key of tenant T calls U, stored as ``T:U``, the same user
over HTTP, MCP, the inspector and here. Without ``--tenant``, ``--user alice`` is the user
``alice`` of no tenant, whom no API key reaches; where that can surprise (a key file that holds
keys), the commands say so (:func:`untenanted_note`).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memstream.models.settings import Settings
    from memstream.streams.api.auth import KeyFile
    from memstream.streams.service.container import Container


def cmd_serve(args: argparse.Namespace, container: Container) -> int:
    """Serve the HTTP API (OpenAPI at /openapi.json, docs at /docs) and the MCP server (at
    /mcp) until Ctrl-C."""
    from memstream.streams.api.observability import check_metrics_token
    from memstream.streams.api.server import serve_api
    from memstream.streams.observability.logs import configure_logging
    from memstream.streams.service.app import Service

    try:
        check_metrics_token(container.settings)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_logging(container.settings)
    keys = _key_file(container)
    if keys is None:
        return 2

    async def serve() -> bool:
        async with Service(container) as service:
            return await serve_api(service, keys, host=args.host, port=args.port)

    if asyncio.run(serve()):
        raise KeyboardInterrupt  # Ctrl-C, whose cancellation the shutdown swallowed
    return 0


def cmd_mcp(args: argparse.Namespace, container: Container) -> int:
    """Run the MCP server: over stdio (for a client that starts it; the key comes from
    MEMSTREAM_MCP_API_KEY) or streamable HTTP at /mcp (each request brings its key)."""
    from memstream.streams.observability.logs import configure_logging

    settings = container.settings
    # To stderr, as every log line: over stdio, stdout is the protocol's.
    configure_logging(settings)
    keys = _key_file(container)
    if keys is None:
        return 2
    default_user = args.user or settings.mcp_user
    if args.transport == "http":
        return _serve_mcp_http(args, container, keys, default_user)

    from memstream.streams.api.auth import Refused

    # Checked before the service's imports: a client that starts the server with a bad key
    # hears of it at once.
    if settings.mcp_api_key is None:
        print(
            "error: set MEMSTREAM_MCP_API_KEY to an API key (memstream api-key add --tenant T "
            "prints one): the stdio server acts with it",
            file=sys.stderr,
        )
        return 2
    key = keys.authenticate(settings.mcp_api_key.get_secret_value().encode("utf-8", "replace"))
    if key is None:
        print(
            f"error: MEMSTREAM_MCP_API_KEY is not a key of the key file {settings.api_keys_path}",
            file=sys.stderr,
        )
        return 2
    if default_user is not None:
        try:
            key.user_id(default_user)
        except Refused as refused:
            print(f"error: --user / MEMSTREAM_MCP_USER: {refused.reason}", file=sys.stderr)
            return 2

    from memstream.streams.mcp.server import create_mcp_server
    from memstream.streams.service.app import Service

    async def serve_stdio() -> None:
        async with Service(container) as service:
            server = create_mcp_server(service, key=key, default_user=default_user)
            await server.run_stdio_async()

    asyncio.run(serve_stdio())
    return 0


def _serve_mcp_http(
    args: argparse.Namespace, container: Container, keys: KeyFile, default_user: str | None
) -> int:
    """``memstream mcp --transport http``: the streamable HTTP app until Ctrl-C."""
    from memstream.streams.api.server import api_server
    from memstream.streams.mcp.http import mcp_http_app
    from memstream.streams.service.app import Service

    settings = container.settings
    host = args.host or settings.mcp_host
    port = args.port or settings.mcp_port

    async def serve() -> bool:
        async with Service(container) as service:
            app = mcp_http_app(service, keys, default_user=default_user, host=host)
            server = api_server(app, settings, host=host, port=port)
            await server.serve()
            return server.interrupted

    if asyncio.run(serve()):
        raise KeyboardInterrupt  # Ctrl-C, whose cancellation the shutdown swallowed
    return 0


def _key_file(container: Container) -> KeyFile | None:
    """The API key file of the settings (a note when there is none yet); None, said on
    stderr, when it does not parse."""
    from memstream.streams.api.auth import KeyFile, KeyFileError

    path = container.settings.api_keys_path
    try:
        keys = KeyFile(path)
    except KeyFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    if not path.exists():
        print(
            f"note: no API key file at {path}: no key opens memstream until "
            "`memstream api-key add --tenant T` writes one",
            file=sys.stderr,
        )
    return keys


def cmd_api_key_add(args: argparse.Namespace, container: Container) -> int:
    """Add an API key for a tenant to the key file and print it (this once: the file keeps
    only its hash)."""
    from memstream.streams.api.auth import Refused, add_key

    path = container.settings.api_keys_path
    try:
        key = add_key(path, args.tenant, args.user, read_only=args.read_only)
    except Refused as exc:
        print(f"error: --user: {exc.reason}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(key)
    scope = f"users {', '.join(sorted(set(args.user)))}" if args.user else "every user"
    mode = "read-only" if args.read_only else "read and write"
    print(f"added to {path}: tenant {args.tenant}, {scope}, {mode}", file=sys.stderr)
    return 0


def add_serve_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve``, ``mcp`` and ``api-key add`` to the ``memstream`` parser."""
    serve = commands.add_parser("serve", help=cmd_serve.__doc__)
    serve.add_argument("--host", help="address to listen on (default: MEMSTREAM_API_HOST)")
    serve.add_argument("--port", type=int, help="port to listen on (default: MEMSTREAM_API_PORT)")
    serve.set_defaults(run=cmd_serve)

    mcp = commands.add_parser("mcp", help=cmd_mcp.__doc__)
    mcp.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (default: for a client that starts the server) or streamable HTTP",
    )
    mcp.add_argument(
        "--user", help="the user a tool call acts for when it names none (MEMSTREAM_MCP_USER)"
    )
    mcp.add_argument("--host", help="with http: address to listen on (default: MEMSTREAM_MCP_HOST)")
    mcp.add_argument(
        "--port", type=int, help="with http: port to listen on (default: MEMSTREAM_MCP_PORT)"
    )
    mcp.set_defaults(run=cmd_mcp)

    api_key = commands.add_parser("api-key", help="manage the HTTP API's keys")
    api_key_commands = api_key.add_subparsers(dest="api_key_command", required=True)
    add = api_key_commands.add_parser("add", help=cmd_api_key_add.__doc__)
    add.add_argument("--tenant", required=True, help="the tenant the key is bound to")
    add.add_argument(
        "--user", action="append", help="a user the key may act for (repeat; default: any)"
    )
    add.add_argument("--read-only", action="store_true", help="searches and reads only")
    add.set_defaults(run=cmd_api_key_add)


def add_tenant_option(parser: argparse.ArgumentParser, *, without_user: bool = False) -> None:
    """Add ``--tenant`` to a command that takes ``--user``; ``without_user``: the command
    takes ``--tenant`` alone too (``publish``: every event of its file)."""
    parser.add_argument(
        "--tenant",
        help="the user's tenant: --user U is then the user an API key of this tenant calls U "
        "(stored as TENANT:U)",
    )
    # Marked: `api-key add` has a --tenant and a --user of its own, which are not this pair.
    parser.set_defaults(tenant_names_user=True, tenant_without_user=without_user)


def in_tenant(tenant: str, user_id: str, *, named_by: str = "--user") -> str:
    """The stored id of tenant ``tenant``'s user ``user_id``, as the HTTP API makes it;
    ``ValueError`` saying which of the two is wrong (the user id as ``named_by``).

    Examples
    --------
    >>> in_tenant("acme", "alice")
    'acme:alice'
    >>> in_tenant("Acme", "alice")
    Traceback (most recent call last):
    ...
    ValueError: --tenant must be 1 to 64 lower-case letters, digits, '_', '.' or '-', not 'Acme'
    """
    from memstream.streams.api.auth import (
        TENANT_PATTERN,
        Refused,
        check_user_id,
        tenant_user_id,
    )

    if not re.fullmatch(TENANT_PATTERN, tenant):
        raise ValueError(
            f"--tenant must be 1 to 64 lower-case letters, digits, '_', '.' or '-', not {tenant!r}"
        )
    try:
        return tenant_user_id(tenant, check_user_id(user_id, tenant))
    except Refused as refused:
        raise ValueError(f"{named_by}: {refused.reason}") from None


def stored_user(args: argparse.Namespace) -> None:
    """Make ``args.user`` the stored user id: ``T:U`` for ``--tenant T --user U`` (on the
    commands :func:`add_tenant_option` gave them to).

    Raises
    ------
    ValueError
        A malformed tenant or user id, or ``--tenant`` without ``--user`` where a user is
        needed.
    """
    tenant = getattr(args, "tenant", None)
    if tenant is None or not getattr(args, "tenant_names_user", False):
        return
    user = getattr(args, "user", None)
    if user is None:
        if not getattr(args, "tenant_without_user", False):
            raise ValueError("--tenant names a tenant's user: give --user too")
        in_tenant(tenant, "-")  # the tenant's form, checked before anything runs
        return
    args.user = in_tenant(tenant, user)


def untenanted_note(settings: Settings, user_ids: Iterable[str]) -> str | None:
    """What to tell of the user ids among ``user_ids`` that are in no tenant (no ``:``),
    while the key file holds keys: no API key reaches them, and ``--tenant`` names a
    tenant's user. None when there is nothing to tell."""
    from memstream.streams.api.auth import KeyFile, KeyFileError

    bare = sorted({user for user in user_ids if ":" not in user})
    if not bare:
        return None
    try:
        tenants = KeyFile(settings.api_keys_path).tenants()
    except KeyFileError:
        return None  # `memstream serve` says what is wrong with the file; nothing to add here
    if not tenants:
        return None
    tenant, user = tenants[0], bare[0]
    names = ", ".join(repr(name) for name in bare[:3]) + (" …" if len(bare) > 3 else "")
    who = f"user {names} is" if len(bare) == 1 else f"users {names} are"
    return (
        f"note: {who} in no tenant, so no API key reaches them; by {user!r} a key of tenant "
        f"{tenant} means the user {tenant}:{user}, which --tenant {tenant} --user {user} names "
        f"here (tenants with keys: {', '.join(tenants)})"
    )
