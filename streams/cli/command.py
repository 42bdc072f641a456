"""The ``memstream`` command: its parser, and the one container every command runs with."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import get_args

from pydantic import ValidationError
from pydantic_settings import SettingsError

from memstream.models.events import CODE_PATTERN, MemoryType
from memstream.models.settings import Settings
from memstream.streams.cli.chatting import add_chat_command
from memstream.streams.cli.log import cmd_replay, cmd_restore, cmd_verify
from memstream.streams.cli.memories import (
    cmd_erase,
    cmd_memories_delete,
    cmd_memories_get,
    cmd_memories_history,
    cmd_memories_list,
    cmd_search,
    cmd_session_show,
    cmd_timeline,
)
from memstream.streams.cli.reports import cmd_report, cmd_sql
from memstream.streams.cli.running import cmd_broker, cmd_demo, cmd_publish, cmd_schema, cmd_worker
from memstream.streams.cli.serving import add_serve_commands
from memstream.streams.service.container import Container

#: What a command runs: its arguments and the process's container; the exit status.
Command = Callable[[argparse.Namespace, Container], int]


def _timestamp(text: str) -> datetime:
    """An ISO 8601 time for a filter; one without a zone is taken as UTC."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _with_checked_erasure_reason(run: Command) -> Command:
    """``run`` (``memstream erase``) behind a check of ``--reason``: the reason stays readable
    in the log after the user's key is destroyed, so it must be a short code. Checked before
    anything happens: ``erase`` destroys the key before it builds the erasure event."""

    def checked(args: argparse.Namespace, container: Container) -> int:
        if not re.fullmatch(CODE_PATTERN, args.reason):
            print(
                f"error: --reason must be a short code of 1 to 64 lower-case letters, digits, "
                f"'_', '.' or '-' (like 'requested' or 'gdpr.art17'), not {args.reason!r}: it "
                "stays readable in the log after the user's key is destroyed, so it must "
                "never hold anyone's words",
                file=sys.stderr,
            )
            return 2
        return run(args, container)

    return checked


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``memstream`` command."""
    parser = argparse.ArgumentParser(
        prog="memstream",
        description="Event-sourced long-term memory for LLM agents. Settings come from "
        "MEMSTREAM_* environment variables, a .env file and memstream.toml (see docs/settings.md).",
    )
    parser.add_argument("--broker", help="Kafka bootstrap address (overrides MEMSTREAM_BROKER)")
    commands = parser.add_subparsers(dest="command", required=True)

    broker = commands.add_parser("broker", help=cmd_broker.__doc__)
    broker.add_argument("--port", type=int, help="port on 127.0.0.1 (default: the broker setting's)")
    broker.set_defaults(run=cmd_broker)

    commands.add_parser("worker", help=cmd_worker.__doc__).set_defaults(run=cmd_worker)

    publish = commands.add_parser("publish", help=cmd_publish.__doc__)
    publish.add_argument("file", nargs="?", help="JSONL file of events; '-' or none for stdin")
    publish.add_argument("--user")
    publish.add_argument("--session")
    publish.add_argument("--agent")
    publish.add_argument("--role", default="user", choices=["user", "assistant", "system", "tool"])
    publish.add_argument("--text", help="quick form: publish one message with this text")
    publish.add_argument("--close", action="store_true", help="quick form: then close the session")
    publish.set_defaults(run=cmd_publish)

    search = commands.add_parser("search", help=cmd_search.__doc__)
    search.add_argument("query")
    search.add_argument("--user", required=True)
    search.add_argument("--limit", type=int, default=5)
    search.add_argument("--type", action="append", choices=get_args(MemoryType))
    search.add_argument("--json", action="store_true")
    search.add_argument(
        "--explain", action="store_true", help="show the parts of each score and their weights"
    )
    search.add_argument("--session", help="only memories from this session")
    search.add_argument(
        "--min-importance", type=float, help="only memories at least this important"
    )
    search.add_argument(
        "--since", type=_timestamp, help="created at or after (ISO 8601; UTC if no zone)"
    )
    search.add_argument(
        "--until", type=_timestamp, help="created before (ISO 8601; UTC if no zone)"
    )
    search.add_argument(
        "--as-of",
        type=_timestamp,
        help="answer from what memstream believed at this time (ISO 8601; UTC if no zone)",
    )
    search.add_argument(
        "--table", help="search this memory table (a re-extraction or --until replay)"
    )
    search.set_defaults(run=cmd_search)

    timeline = commands.add_parser("timeline", help=cmd_timeline.__doc__)
    timeline.add_argument("about", help="the attribute, in plain words: 'budget', 'where I live'")
    timeline.add_argument("--user", required=True)
    timeline.add_argument("--subject", help="whose: a speaker's name (default: the user's own)")
    timeline.add_argument("--json", action="store_true")
    timeline.set_defaults(run=cmd_timeline)

    replay = commands.add_parser("replay", help=cmd_replay.__doc__)
    replay.add_argument(
        "--projection", choices=["memories", "sessions", "analytics", "all"], default="all"
    )
    replay.add_argument(
        "--until",
        type=_timestamp,
        help="only what the log had received by this time; kept beside the live projection",
    )
    replay.add_argument("--no-swap", action="store_true", help="build and verify, keep the live one")
    replay.add_argument("--restart", action="store_true", help="do not resume an interrupted replay")
    replay.add_argument(
        "--reextract",
        action="store_true",
        help="re-run consolidation with --extractor into a new, versioned memory table",
    )
    replay.add_argument("--extractor", choices=["offline", "llm"], help="with --reextract")
    replay.add_argument("--label", help="with --reextract: the new table's version label")
    replay.set_defaults(run=cmd_replay)

    verify = commands.add_parser("verify", help=cmd_verify.__doc__)
    verify.add_argument(
        "--projection", choices=["memories", "sessions", "analytics", "all"], default="all"
    )
    verify.set_defaults(run=cmd_verify)

    from memstream.streams.tools.forgetting import add_forget_command

    add_forget_command(commands)
    from memstream.streams.tools.dlq import add_dlq_command

    add_dlq_command(commands)
    from memstream.streams.tools.erasure import add_erase_command

    add_erase_command(commands)
    erase = commands.choices["erase"]
    erase.set_defaults(run=_with_checked_erasure_reason(cmd_erase))

    restore = commands.add_parser("restore", help=cmd_restore.__doc__)
    restore.add_argument("--from", dest="source", help="archive directory (default: the live one)")
    restore.set_defaults(run=cmd_restore)

    memories = commands.add_parser("memories", help="inspect and delete memories")
    memory_commands = memories.add_subparsers(dest="memories_command", required=True)
    listing = memory_commands.add_parser("list", help=cmd_memories_list.__doc__)
    listing.add_argument("--user", required=True)
    listing.add_argument("--all", action="store_true", help="also superseded, expired, forgotten, deleted")
    listing.set_defaults(run=cmd_memories_list)
    get = memory_commands.add_parser("get", help=cmd_memories_get.__doc__)
    get.add_argument("memory_id")
    get.add_argument("--user", required=True)
    get.add_argument("--json", action="store_true")
    get.set_defaults(run=cmd_memories_get)
    history = memory_commands.add_parser("history", help=cmd_memories_history.__doc__)
    history.add_argument("memory_id")
    history.add_argument("--user", required=True)
    history.add_argument("--json", action="store_true")
    history.set_defaults(run=cmd_memories_history)
    delete = memory_commands.add_parser("delete", help=cmd_memories_delete.__doc__)
    delete.add_argument("memory_id")
    delete.add_argument("--user", required=True)
    delete.add_argument("--reason", default="requested", help="recorded in the event")
    delete.set_defaults(run=cmd_memories_delete)

    session = commands.add_parser("session", help="inspect short-term memory")
    session_commands = session.add_subparsers(dest="session_command", required=True)
    show = session_commands.add_parser("show", help=cmd_session_show.__doc__)
    show.add_argument("session")
    show.add_argument("--user", required=True)
    show.add_argument("--budget", type=int, help="token budget of the message window")
    show.add_argument("--json", action="store_true", help="state and context as JSON")
    show.set_defaults(run=cmd_session_show)

    schema = commands.add_parser("schema", help=cmd_schema.__doc__)
    schema.add_argument("--out", default="schemas", help="directory to write into")
    schema.set_defaults(run=cmd_schema)

    def analytics_options(command: argparse.ArgumentParser) -> None:
        command.add_argument("--user", help="only this user's rows, in every view")
        command.add_argument(
            "--since", type=_timestamp, help="only rows from this event time on (ISO 8601)"
        )
        command.add_argument(
            "--now", type=_timestamp, help="compute ages (decay, junk) at this time, not now"
        )
        command.add_argument(
            "--format", choices=["table", "csv", "json", "parquet"], default="table"
        )
        command.add_argument("--out", help="write to this file instead of stdout")

    report = commands.add_parser("report", help=cmd_report.__doc__)
    report.add_argument("name", nargs="?", help="the report (see --list)")
    report.add_argument("--list", action="store_true", help="list the reports")
    analytics_options(report)
    report.add_argument("--days", type=int, default=7, help="junk: retrieval window in days")
    report.add_argument("--limit", type=int, default=10, help="rows per ranking")
    report.add_argument("--plot", help="also draw the report's chart into this PNG file")
    report.set_defaults(run=cmd_report)

    sql = commands.add_parser("sql", help=cmd_sql.__doc__)
    sql.add_argument("query", help="one SELECT (or WITH ... SELECT) statement")
    analytics_options(sql)
    sql.set_defaults(run=cmd_sql)

    add_serve_commands(commands)
    add_chat_command(commands)

    commands.add_parser("demo", help=cmd_demo.__doc__).set_defaults(run=cmd_demo)
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The settings of a command: ``MEMSTREAM_*`` variables, and ``--broker`` over them."""
    overrides = {}
    if getattr(args, "broker", None):
        overrides["broker"] = args.broker
    return Settings(**overrides)


def settings_problem(exc: ValidationError | SettingsError) -> str:
    """What is wrong with the settings, in words: each bad field with pydantic's reason, never
    the value given (it may be a token or a key).

    Examples
    --------
    >>> try:
    ...     Settings(partitions=0, web_tokn="secret")
    ... except ValidationError as exc:
    ...     print(settings_problem(exc))
    bad settings (from arguments, MEMSTREAM_* variables, .env or the TOML settings file):
      MEMSTREAM_PARTITIONS: Input should be greater than or equal to 1
      MEMSTREAM_WEB_TOKN: Extra inputs are not permitted
    """
    if not isinstance(exc, ValidationError):
        return f"bad settings: {exc}"
    lines = [
        f"  MEMSTREAM_{'.'.join(str(part) for part in error['loc']).upper()}: {error['msg']}"
        for error in exc.errors(include_input=False, include_url=False)
    ]
    where = "arguments, MEMSTREAM_* variables, .env or the TOML settings file"
    return "\n".join([f"bad settings (from {where}):", *lines])


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``memstream`` console command: one settings object, one container
    (its parts opened on first use), handed to the command. Bad settings end it with exit
    status 2 and what is wrong."""
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
    except (ValidationError, SettingsError) as exc:
        print(f"memstream: {settings_problem(exc)}", file=sys.stderr)
        return 2
    container = Container(settings)
    return int(args.run(args, container))

