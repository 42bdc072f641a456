"""The ``memstream`` command: its parser, and the one container every command runs with.

:func:`main` is also the one place where a failure a user can cause (no broker, a file that
is missing or not UTF-8, an argument that is not UTF-8) becomes one line on stderr instead
of a traceback; ``memstream --debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import gc
import logging
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import NoReturn, cast, get_args

from pydantic import ValidationError
from pydantic_settings import SettingsError

from memstream.models.events.envelope import CODE_PATTERN, utc_instant
from memstream.models.events.memory import MemoryType
from memstream.models.settings import Settings
from memstream.projections.entity_graph import (
    ENTITY_LIMIT,
    GRAPH_LIMIT,
    MAX_ENTITY_LIMIT,
    MAX_GRAPH_LIMIT,
)
from memstream.streams.cli.chatting import add_chat_command
from memstream.streams.cli.entities import cmd_entity, cmd_graph
from memstream.streams.cli.log import cmd_replay, cmd_restore, cmd_verify
from memstream.streams.cli.memories import (
    cmd_erase,
    cmd_memories_delete,
    cmd_memories_get,
    cmd_memories_history,
    cmd_memories_list,
    cmd_profile,
    cmd_search,
    cmd_session_show,
    cmd_timeline,
)
from memstream.streams.cli.patterns import cmd_patterns
from memstream.streams.cli.projects import add_projects_command
from memstream.streams.cli.reports import cmd_report, cmd_sql
from memstream.streams.cli.running import cmd_broker, cmd_demo, cmd_publish, cmd_schema, cmd_worker
from memstream.streams.cli.serving import add_serve_commands, add_tenant_option, stored_user
from memstream.streams.service.container import Container

#: What a command runs: its arguments and the process's container; the exit status.
Command = Callable[[argparse.Namespace, Container], int]

#: Arguments that name files: any bytes are a valid file name, so they need not be UTF-8.
PATH_ARGUMENTS = frozenset({"file", "out", "source", "plot"})


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line: what is wrong, and where the help
    is (argparse's own print the whole usage first)."""

    def error(self, message: str) -> NoReturn:
        """Exit with status 2 and ``message`` on one line."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def utf8_text(value: str) -> str:
    r"""``value``, if it is UTF-8 text. The shell hands Python bytes that are not UTF-8 as
    lone surrogates (PEP 383); they would reach the log, or fail deep inside, as garbage.

    Examples
    --------
    >>> utf8_text("Zürich")
    'Zürich'
    >>> utf8_text("caf\udce9")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: not UTF-8 text (byte 0xe9 at character 4): type it again in UTF-8, or run in a UTF-8 locale (LANG=C.UTF-8)
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(value[exc.start])
        byte = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "a lone surrogate"
        raise argparse.ArgumentTypeError(
            f"not UTF-8 text ({byte} at character {exc.start + 1}): type it again in UTF-8, "
            "or run in a UTF-8 locale (LANG=C.UTF-8)"
        ) from None
    return value


def _require_utf8(parser: argparse.ArgumentParser) -> None:
    """Check every text argument of ``parser`` and its subcommands with :func:`utf8_text`
    (file names excepted), so each command needs no check of its own."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                _require_utf8(command)
        elif action.type is None and action.nargs != 0 and action.dest not in PATH_ARGUMENTS:
            action.type = utf8_text


def _timestamp(text: str) -> datetime:
    """An ISO 8601 time for a filter; one without a zone is taken as UTC."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    value = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    try:
        return utc_instant(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} {exc}") from None


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
    parser = OneLineParser(
        prog="memstream",
        description="Event-sourced long-term memory for LLM agents. Settings come from "
        "MEMSTREAM_* environment variables, a .env file and memstream.toml (see docs/settings.md).",
    )
    parser.add_argument("--broker", help="Kafka bootstrap address (overrides MEMSTREAM_BROKER)")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of a failure, not one line"
    )
    # Its parsers are OneLineParsers; the add_*_command helpers take any ArgumentParser's.
    commands = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", required=True),
    )

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
    add_tenant_option(publish, without_user=True)

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
    add_tenant_option(search)

    timeline = commands.add_parser("timeline", help=cmd_timeline.__doc__)
    timeline.add_argument("about", help="the attribute, in plain words: 'budget', 'where I live'")
    timeline.add_argument("--user", required=True)
    timeline.add_argument("--subject", help="whose: a speaker's name (default: the user's own)")
    timeline.add_argument("--json", action="store_true")
    timeline.set_defaults(run=cmd_timeline)
    add_tenant_option(timeline)

    profile = commands.add_parser("profile", help=cmd_profile.__doc__)
    profile.add_argument("--user", required=True)
    profile.add_argument("--subject", help="whose only: 'User', a speaker's name")
    profile.add_argument(
        "--as-of", type=_timestamp, help="what held at this time (ISO 8601; UTC if no zone)"
    )
    profile.add_argument("--json", action="store_true")
    profile.set_defaults(run=cmd_profile)
    add_tenant_option(profile)
    add_tenant_option(add_projects_command(commands, _timestamp))

    entity = commands.add_parser("entity", help=cmd_entity.__doc__)
    entity.add_argument("name", help="any of its names: 'Ana', \"User's sister\"")
    entity.add_argument("--user", required=True)
    entity.add_argument(
        "--as-of", type=_timestamp, help="what held at this time (ISO 8601; UTC if no zone)"
    )
    entity.add_argument(
        "--limit", type=int, default=ENTITY_LIMIT,
        help=f"the most neighbours, facts and relations, each (default {ENTITY_LIMIT}, "
        f"at most {MAX_ENTITY_LIMIT})",
    )
    entity.add_argument("--json", action="store_true")
    entity.set_defaults(run=cmd_entity)
    add_tenant_option(entity)

    graph = commands.add_parser("graph", help=cmd_graph.__doc__)
    graph.add_argument("--user", required=True)
    graph.add_argument(
        "--as-of", type=_timestamp, help="what held at this time (ISO 8601; UTC if no zone)"
    )
    graph.add_argument(
        "--limit", type=int, default=GRAPH_LIMIT,
        help=f"the most entities: the user, then the most mentioned (default {GRAPH_LIMIT}, "
        f"at most {MAX_GRAPH_LIMIT})",
    )
    graph.add_argument("--json", action="store_true")
    graph.set_defaults(run=cmd_graph)
    add_tenant_option(graph)

    learned = commands.add_parser("patterns", help=cmd_patterns.__doc__)
    learned.add_argument("--user", required=True)
    learned.add_argument(
        "--as-of", type=_timestamp, help="what held at this time (ISO 8601; UTC if no zone)"
    )
    learned.add_argument("--json", action="store_true")
    learned.set_defaults(run=cmd_patterns)
    add_tenant_option(learned)

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

    from memstream.streams.operations.forgetting import add_forget_command

    add_forget_command(commands)
    add_tenant_option(commands.choices["forget"])
    from memstream.streams.operations.dlq import add_dlq_command

    add_dlq_command(commands)
    from memstream.streams.operations.erasure import add_erase_command

    add_erase_command(commands)
    erase = commands.choices["erase"]
    erase.set_defaults(run=_with_checked_erasure_reason(cmd_erase))
    add_tenant_option(erase)

    restore = commands.add_parser("restore", help=cmd_restore.__doc__)
    restore.add_argument("--from", dest="source", help="archive directory (default: the live one)")
    restore.set_defaults(run=cmd_restore)

    memories = commands.add_parser("memories", help="inspect and delete memories")
    memory_commands = memories.add_subparsers(dest="memories_command", required=True)
    listing = memory_commands.add_parser("list", help=cmd_memories_list.__doc__)
    listing.add_argument("--user", required=True)
    listing.add_argument("--all", action="store_true", help="also superseded, expired, forgotten, deleted")
    add_tenant_option(listing)
    listing.set_defaults(run=cmd_memories_list)
    get = memory_commands.add_parser("get", help=cmd_memories_get.__doc__)
    get.add_argument("memory_id")
    get.add_argument("--user", required=True)
    get.add_argument("--json", action="store_true")
    add_tenant_option(get)
    get.set_defaults(run=cmd_memories_get)
    history = memory_commands.add_parser("history", help=cmd_memories_history.__doc__)
    history.add_argument("memory_id")
    history.add_argument("--user", required=True)
    history.add_argument("--json", action="store_true")
    add_tenant_option(history)
    history.set_defaults(run=cmd_memories_history)
    delete = memory_commands.add_parser("delete", help=cmd_memories_delete.__doc__)
    delete.add_argument("memory_id")
    delete.add_argument("--user", required=True)
    delete.add_argument("--reason", default="requested", help="recorded in the event")
    add_tenant_option(delete)
    delete.set_defaults(run=cmd_memories_delete)

    session = commands.add_parser("session", help="inspect short-term memory")
    session_commands = session.add_subparsers(dest="session_command", required=True)
    show = session_commands.add_parser("show", help=cmd_session_show.__doc__)
    show.add_argument("session")
    show.add_argument("--user", required=True)
    show.add_argument("--budget", type=int, help="token budget of the message window")
    show.add_argument("--json", action="store_true", help="state and context as JSON")
    add_tenant_option(show)
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
        add_tenant_option(command)

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
    add_tenant_option(commands.choices["chat"])

    commands.add_parser("demo", help=cmd_demo.__doc__).set_defaults(run=cmd_demo)
    _require_utf8(parser)
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


def user_problem(exc: BaseException, settings: Settings) -> tuple[str, int] | None:
    """What a failure a user can cause means, in one line that says what to do, and the
    exit status; None for any other failure (a bug: its traceback is wanted).

    Examples
    --------
    >>> user_problem(FileNotFoundError(2, "No such file or directory", "chat.jsonl"), Settings())
    ('chat.jsonl: No such file or directory: check the path and its permissions', 2)
    """
    from memstream.streams.kafka.broker import broker_problem
    from memstream.streams.kafka.logid import LogLost

    problem = broker_problem(exc, settings.broker)
    if problem is not None:
        return problem, 3 if isinstance(exc, LogLost) else 1
    if isinstance(exc, UnicodeDecodeError):
        return f"cannot read text that is not UTF-8 ({_bad_bytes(exc)}): save it as UTF-8", 2
    if isinstance(exc, OSError) and exc.filename is not None:
        what = exc.strerror or type(exc).__name__
        return f"{exc.filename}: {what}: check the path and its permissions", 2
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {exc} (--debug shows where)", 1
    return None


def _bad_bytes(exc: UnicodeDecodeError) -> str:
    """Where a decoding failed: "byte 0xff at position 11"."""
    return f"byte 0x{exc.object[exc.start]:02x} at position {exc.start + 1}"


class _OneLineRecords(logging.Formatter):
    """A log record as ``memstream: <message>``, with no traceback."""

    def format(self, record: logging.LogRecord) -> str:
        """The record's message on one line."""
        return f"memstream: {' '.join(record.getMessage().split())}"


def _log_to_stderr(debug: bool) -> logging.Handler:
    """Where the short commands' log records go: memstream's warnings as one line each on
    stderr, the libraries' (aiokafka's connection errors) nowhere, as the one line of the
    failure says it better; with ``debug`` every warning, with its traceback. The
    long-running commands replace it with their own logging (``configure_logging``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)  # whatever levels the loggers were left at
    if debug:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(_OneLineRecords())
        handler.addFilter(lambda record: record.name.split(".")[0] == "memstream")
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
    return handler


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``memstream`` console command: one settings object, one container
    (its parts opened on first use), handed to the command. Bad settings end it with exit
    status 2 and what is wrong; a failure a user can cause (:func:`user_problem`) with one
    line on stderr, unless ``--debug`` asks for the traceback."""
    args = build_parser().parse_args(argv)
    handler = _log_to_stderr(args.debug)
    try:
        return _run(args)
    finally:
        # A Kafka client that failed to start logs "Unclosed ..." when it is collected: let
        # that happen while the handler still keeps such lines off a failure's one line.
        gc.collect()
        logging.getLogger().removeHandler(handler)


def _run(args: argparse.Namespace) -> int:
    try:
        stored_user(args)  # --tenant T --user U: the user T's API keys call U, as stored
    except ValueError as exc:
        print(f"memstream: error: {exc}", file=sys.stderr)
        return 2
    try:
        settings = settings_from_args(args)
    except (ValidationError, SettingsError) as exc:
        print(f"memstream: {settings_problem(exc)}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:
        if args.debug:
            raise
        print(
            f"memstream: bad settings: .env or the TOML settings file is not UTF-8 text "
            f"({_bad_bytes(exc)}): save it as UTF-8",
            file=sys.stderr,
        )
        return 2
    container = Container(settings)
    try:
        return int(args.run(args, container))
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"memstream {args.command}: stopped (Ctrl-C)", file=sys.stderr)
        return 130
    except Exception as exc:
        found = None if args.debug else user_problem(exc, settings)
        if found is None:
            raise
        problem, status = found
        print(f"memstream {args.command}: {problem}", file=sys.stderr)
        return status
