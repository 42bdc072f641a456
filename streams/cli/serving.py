"""``memstream serve`` and ``api-key add``: the HTTP API, and the keys that open it."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memstream.streams.service.container import Container


def cmd_serve(args: argparse.Namespace, container: Container) -> int:
    """Serve the HTTP API (OpenAPI at /openapi.json, docs at /docs) until Ctrl-C."""
    from memstream.streams.api.auth import KeyFileError
    from memstream.streams.api.observability import check_metrics_token
    from memstream.streams.api.server import api_server, key_file
    from memstream.streams.runtime.logs import configure_logging
    from memstream.streams.service.app import Service

    settings = container.settings
    try:
        check_metrics_token(settings)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings)
    path = settings.api_keys_path
    try:
        keys = key_file(settings)
    except KeyFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not path.exists():
        print(
            f"note: no API key file at {path}: every request will get 401 until "
            "`memstream api-key add --tenant T` writes one",
            file=sys.stderr,
        )

    async def serve() -> None:
        async with Service(container) as service:
            server = api_server(service, keys, host=args.host, port=args.port)
            logging.getLogger(__name__).info(
                "memstream serve: listening on http://%s:%d", server.config.host, server.config.port
            )
            await server.serve()

    asyncio.run(serve())
    return 0


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
    """Add ``serve`` and ``api-key add`` to the ``memstream`` parser."""
    serve = commands.add_parser("serve", help=cmd_serve.__doc__)
    serve.add_argument("--host", help="address to listen on (default: MEMSTREAM_API_HOST)")
    serve.add_argument("--port", type=int, help="port to listen on (default: MEMSTREAM_API_PORT)")
    serve.set_defaults(run=cmd_serve)

    api_key = commands.add_parser("api-key", help="manage the HTTP API's keys")
    api_key_commands = api_key.add_subparsers(dest="api_key_command", required=True)
    add = api_key_commands.add_parser("add", help=cmd_api_key_add.__doc__)
    add.add_argument("--tenant", required=True, help="the tenant the key is bound to")
    add.add_argument(
        "--user", action="append", help="a user the key may act for (repeat; default: any)"
    )
    add.add_argument("--read-only", action="store_true", help="searches and reads only")
    add.set_defaults(run=cmd_api_key_add)
