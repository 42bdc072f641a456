"""The ``memstream`` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from memstream.models.codec import EventLimits
from memstream.models.events import CODE_PATTERN, MemoryType, json_schemas
from memstream.models.settings import Settings
from memstream.streams.runtime.command_settings import settings_from_args


def _timestamp(text: str) -> datetime:
    """An ISO 8601 time for a filter; one without a zone is taken as UTC."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _with_checked_erasure_reason(
    run: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """``run`` (``memstream erase``) behind a check of ``--reason``: the reason stays readable
    in the log after the user's key is destroyed, so it must be a short code. Checked before
    anything happens: ``erase`` destroys the key before it builds the erasure event."""

    def checked(args: argparse.Namespace) -> int:
        if not re.fullmatch(CODE_PATTERN, args.reason):
            print(
                f"error: --reason must be a short code of 1 to 64 lower-case letters, digits, "
                f"'_', '.' or '-' (like 'requested' or 'gdpr.art17'), not {args.reason!r}: it "
                "stays readable in the log after the user's key is destroyed, so it must "
                "never hold anyone's words",
                file=sys.stderr,
            )
            return 2
        return run(args)

    return checked


def cmd_broker(args: argparse.Namespace) -> int:
    """Run the embedded broker (Tansu, memory storage) until Ctrl-C."""
    from memstream.streams.runtime.broker import run_broker_forever

    settings = settings_from_args(args)
    return run_broker_forever(settings, args.port or settings.broker_port)


def cmd_worker(args: argparse.Namespace) -> int:
    """Run the Faust worker: session state, consolidation, extraction, projection."""
    from memstream.streams.runtime.web import UnsafeWebExposure
    from memstream.streams.runtime.worker import run_worker

    try:
        run_worker(settings_from_args(args))
    except UnsafeWebExposure as exc:
        print(f"error: the worker will not start: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    """Publish chat events from JSONL (file or stdin) or the quick form."""
    from memstream.streams.tools.publish import LineError, publish_events, quick_events, read_events

    settings = settings_from_args(args)
    if args.text is not None or args.close:
        if not (args.user and args.session):
            print("error: the quick form needs --user and --session", file=sys.stderr)
            return 2
        events = quick_events(
            user_id=args.user,
            session_id=args.session,
            role=args.role,
            text=args.text,
            agent_id=args.agent,
            close=args.close,
        )
        errors: list[LineError] = []
    else:
        limits = EventLimits.from_settings(settings)
        if args.file in (None, "-"):
            events, errors = read_events(sys.stdin, settings.max_event_bytes, limits)
        else:
            with Path(args.file).open(encoding="utf-8") as source:
                events, errors = read_events(source, settings.max_event_bytes, limits)
    for error in errors:
        print(f"line {error.line}: {error.reason}", file=sys.stderr)
    from memstream.streams.runtime.logid import LogLost

    try:
        published = asyncio.run(publish_events(settings, events)) if events else 0
    except (ValueError, LogLost) as exc:
        print(f"memstream publish: nothing published: {exc}", file=sys.stderr)
        return 2
    print(f"published {published} event(s); {len(errors)} line(s) rejected")
    return 1 if errors else 0


def cmd_search(args: argparse.Namespace) -> int:
    """Search one user's memories (hybrid: vectors + full text), now or as of a past time."""
    from datetime import UTC, datetime

    from memstream.projections.embedder import embedder_from_settings
    from memstream.projections.memories import MemoryProjection, SearchFilters
    from memstream.projections.retrieval import Retriever

    settings = settings_from_args(args)
    projection = MemoryProjection(
        settings.lancedb_dir, embedder_from_settings(settings), args.table
    )
    if args.table is not None and not projection.exists():
        print(f"error: no memory table {args.table!r} in {settings.lancedb_dir}", file=sys.stderr)
        return 2
    filters = SearchFilters(
        memory_types=tuple(args.type) if args.type else None,
        session_id=args.session,
        min_importance=args.min_importance,
        since=args.since,
        until=args.until,
        as_of=args.as_of,
    )
    now = args.as_of or datetime.now(UTC)
    retriever = Retriever(projection, settings, clock=lambda: now)
    ranked = retriever.search(args.user, args.query, limit=args.limit, filters=filters)
    if args.json:
        print(json.dumps([ranked_json(item) for item in ranked], default=str, indent=2))
        return 0
    if not ranked:
        print(f"no memories found for user {args.user!r}")
        return 0
    print(SCORE_LEGEND)
    for item in ranked:
        hit = item.memory
        print(f"{item.rank_score:5.2f}  [{hit.memory_type}] {hit.content}")
        if args.explain:
            print(f"       {item.explain()}")
        for line in hit.context.splitlines():
            print(f"       | {line}")
        print(
            f"       memory {hit.memory_id} · session {hit.session_id} · importance "
            f"{hit.importance:.2f} · from {', '.join(hit.source_event_ids) or '-'} · "
            f"{hit.source_topic}[{hit.source_partition}]@{hit.source_offset}"
        )
    return 0


#: What the score column of ``memstream search`` means.
SCORE_LEGEND = (
    "score 0-1: how well the memory matches the query (meaning and words, equally), nudged "
    "by its importance, recency and use (--explain shows each part)"
)


def ranked_json(item: Any) -> dict[str, Any]:
    """A ranked memory for ``--json``: the memory's fields and every part of its score."""
    return {
        **item.memory.__dict__,
        "score": item.rank_score,
        "relevance": item.relevance,
        "importance_part": item.importance,
        "recency": item.recency,
        "use": item.use,
    }


class _ProgressBar:
    """A progress bar on stderr: records done, records per second, what remains."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        from tqdm import tqdm

        if self._bar is None:
            self._bar = tqdm(total=total, desc=self.what, unit=" events", file=sys.stderr)
        self._bar.total = total
        self._bar.n = done
        self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def cmd_replay(args: argparse.Namespace) -> int:
    """Rebuild projections from the topics into shadow targets, verify, swap them in."""
    settings = settings_from_args(args)
    if args.reextract:
        return _reextract(settings, args)
    chosen = ["sessions", "memories", "analytics"] if args.projection == "all" else [args.projection]
    status = 0
    for name in chosen:
        status = max(status, _REPLAYS[name](settings, args))
    return status


def _reextract(settings: Settings, args: argparse.Namespace) -> int:
    from memstream.models.extraction import OfflineExtractor
    from memstream.streams.llm_extractor import LLMExtractor
    from memstream.streams.tools.reextract import LabelInUse, default_label, reextract

    if args.extractor is None:
        print("error: --reextract needs --extractor offline|llm", file=sys.stderr)
        return 2
    extractor = LLMExtractor.from_settings(settings) if args.extractor == "llm" else OfflineExtractor()
    label = args.label or default_label(extractor)
    bar = _ProgressBar(f"re-extract {label}")
    try:
        report = asyncio.run(reextract(settings, extractor, label, progress=bar))
    except (LabelInUse, ValueError) as exc:
        bar.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bar.close()
    print(
        f"re-extracted {report.spans} span(s) with {extractor.name} {extractor.version} in "
        f"{report.elapsed_s:.1f} s: {report.added} memories added, {report.changes} changes, "
        f"{report.failed} failed span(s)"
    )
    print(f"events: topic {report.topic}; table: {report.table} (the live table is untouched)")
    print(f"compare: memstream search QUERY --user U --table {report.table}")
    return 0


def _replay_memories(settings: Settings, args: argparse.Namespace) -> int:
    from memstream.streams.projector.memories import TopicMissing
    from memstream.streams.tools.replay import LogShorterThanProjection, replay_memories

    bar = _ProgressBar("memories")
    try:
        report = asyncio.run(
            replay_memories(
                settings,
                until=args.until,
                swap=not args.no_swap,
                resume=not args.restart,
                progress=bar,
            )
        )
    except (LogShorterThanProjection, TopicMissing) as exc:
        bar.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    bar.close()
    rate = report.records / report.elapsed_s if report.elapsed_s else 0.0
    print(
        f"memories: {report.records} events into table {report.table} in "
        f"{report.elapsed_s:.1f} s ({rate:,.0f} events/s); {report.fingerprint}"
    )
    if report.invalid:
        print(f"memories: {report.invalid} record(s) were not valid events (dead letters)")
    if report.matches_live is True:
        print(f"memories: identical to the live table {report.live_table}")
    elif report.matches_live is False:
        print(
            f"memories: DIFFERS from the live table {report.live_table} "
            f"({report.live_fingerprint}); the rebuilt one follows the log",
            file=sys.stderr,
        )
    if report.swapped:
        print(f"memories: swapped in; the previous table {report.live_table} is kept")
    elif args.until is not None:
        print(f"memories: as of {args.until.isoformat()}: memstream search --table {report.table}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Fingerprint each live projection and one rebuilt from the log; exit 1 if they differ."""
    settings = settings_from_args(args)
    chosen = ["sessions", "memories", "analytics"] if args.projection == "all" else [args.projection]
    differ = []
    for name in chosen:
        live, rebuilt = _VERIFIES[name](settings)
        same = live == rebuilt
        print(f"{'same' if same else 'DIFFERENT':9}  live    {live}")
        print(f"{'':9}  rebuilt {rebuilt}")
        if not same:
            differ.append(name)
    if differ:
        print(f"the live {', '.join(differ)} projection(s) differ from the log", file=sys.stderr)
        return 1
    return 0


def _verify_memories(settings: Settings) -> tuple[Any, Any]:
    from memstream.streams.tools.replay import verify_memories

    return asyncio.run(verify_memories(settings))


def _replay_sessions(settings: Settings, args: argparse.Namespace) -> int:
    from memstream.projections.shadow import shadow_name, swap_in
    from memstream.streams.tools.rebuild_sessions import (
        live_sessions,
        rebuild_sessions,
        sessions_fingerprint,
    )

    base = settings.data_dir / "sessions"
    name = shadow_name("sessions-until" if args.until is not None else "sessions")
    bar = _ProgressBar("sessions")
    started = time.perf_counter()
    rebuilt = asyncio.run(rebuild_sessions(settings, base / name, until=args.until, progress=bar))
    bar.close()
    print(f"sessions: snapshot {base / name} in {time.perf_counter() - started:.1f} s; {rebuilt}")
    if args.until is not None:
        print(f"sessions: as of {args.until.isoformat()}, kept beside the live snapshot")
        return 0
    live = sessions_fingerprint(asyncio.run(live_sessions(settings)))
    if live == rebuilt:
        print("sessions: identical to the workers' live session tables")
    else:
        print(f"sessions: DIFFERS from the workers' live tables ({live})", file=sys.stderr)
    if not args.no_swap:
        swap_in(base, "sessions", name)
        print(f"sessions: swapped in as the sessions snapshot ({base / name})")
    return 0


def _verify_sessions(settings: Settings) -> tuple[Any, Any]:
    from memstream.streams.tools.rebuild_sessions import (
        fold_chat_topic,
        live_sessions,
        sessions_fingerprint,
    )

    live = sessions_fingerprint(asyncio.run(live_sessions(settings)))
    return live, sessions_fingerprint(asyncio.run(fold_chat_topic(settings)))


def _replay_analytics(settings: Settings, args: argparse.Namespace) -> int:
    from memstream.projections.shadow import shadow_name, swap_in
    from memstream.streams.archive import (
        ArchiveError,
        archive_fingerprint,
        archive_positions,
        live_archive_dir,
        rebuild_archive,
    )

    name = shadow_name("archive-until" if args.until is not None else "archive")
    target = settings.archive_dir / name
    bar = _ProgressBar("analytics")
    started = time.perf_counter()
    try:
        records = asyncio.run(rebuild_archive(settings, target, until=args.until, progress=bar))
    except ArchiveError as exc:
        bar.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    bar.close()
    rebuilt = archive_fingerprint(target)
    print(
        f"analytics: {records} records archived into {target} in "
        f"{time.perf_counter() - started:.1f} s; {rebuilt}"
    )
    if args.until is not None:
        print(f"analytics: as of {args.until.isoformat()}, kept beside the live archive")
        return 0
    live_dir = live_archive_dir(settings)
    if archive_positions(live_dir) == archive_positions(target):
        same = archive_fingerprint(live_dir) == rebuilt
        print(f"analytics: {'identical to' if same else 'DIFFERS from'} the live archive")
    else:
        print("analytics: the live archive is at other log positions (its sink flushes in batches)")
    if not args.no_swap:
        swap_in(settings.archive_dir, "archive", name)
        print(f"analytics: swapped in as the live archive ({target})")
    return 0


def _verify_analytics(settings: Settings) -> tuple[Any, Any]:
    import shutil
    import tempfile

    from memstream.streams.archive import (
        archive_fingerprint,
        archive_positions,
        live_archive_dir,
        rebuild_archive,
    )

    live_dir = live_archive_dir(settings)
    with tempfile.TemporaryDirectory(dir=settings.data_dir, prefix=".verify-") as scratch:
        asyncio.run(rebuild_archive(settings, Path(scratch) / "archive"))
        rebuilt = archive_fingerprint(Path(scratch) / "archive")
        behind = sum(archive_positions(Path(scratch) / "archive").values()) - sum(
            archive_positions(live_dir).values()
        )
        shutil.rmtree(scratch, ignore_errors=True)
    if behind:
        print(f"analytics: the live archive is {behind} record(s) behind the log (it flushes "
              f"every {settings.archive_flush_s:g} s); compare again once it has caught up")
    return archive_fingerprint(live_dir), rebuilt


_REPLAYS: dict[str, Any] = {
    "memories": _replay_memories,
    "sessions": _replay_sessions,
    "analytics": _replay_analytics,
}
_VERIFIES: dict[str, Any] = {
    "memories": _verify_memories,
    "sessions": _verify_sessions,
    "analytics": _verify_analytics,
}


def cmd_restore(args: argparse.Namespace) -> int:
    """Re-seed an empty broker from the Parquet archive (same keys, ids, times, offsets)."""
    from memstream.streams.archive import ArchiveError, live_archive_dir, restore

    settings = settings_from_args(args)
    source = Path(args.source) if args.source else live_archive_dir(settings)
    if not source.is_dir():
        print(f"error: no archive at {source}", file=sys.stderr)
        return 2
    bar = _ProgressBar("restore")
    try:
        report = asyncio.run(restore(settings, source, progress=bar))
    except ArchiveError as exc:
        bar.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    bar.close()
    print(report.summary())
    print("next: memstream replay --projection all (or start the worker: it carries on)")
    return 0


def cmd_memories_list(args: argparse.Namespace) -> int:
    """List one user's memories, newest first (--all: every status)."""
    from memstream.streams.client import MemoryClient

    with MemoryClient(settings_from_args(args)) as client:
        memories = client.get_all(user_id=args.user, include_inactive=args.all)
    for memory in memories:
        status = "" if memory["status"] == "active" else f"  <{_status(memory)}>"
        print(f"[{memory['type']}] ({memory['importance']:.2f}) {memory['memory']}{status}")
        print(f"         memory {memory['memory_id']} · session {memory['session_id']}")
    print(f"{len(memories)} memories")
    return 0


def _status(memory: Mapping[str, Any]) -> str:
    if memory["status"] == "superseded" and memory.get("superseded_by"):
        return f"superseded by {memory['superseded_by']}"
    return str(memory["status"])


def cmd_memories_get(args: argparse.Namespace) -> int:
    """Show one of a user's memories, whatever its status."""
    from memstream.streams.client import MemoryClient

    with MemoryClient(settings_from_args(args)) as client:
        memory = client.get(args.memory_id, user_id=args.user)
    if memory is None:
        print(f"no memory {args.memory_id!r} for user {args.user!r}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(memory, indent=2))
        return 0
    print(f"[{memory['type']}] ({memory['importance']:.2f}) {memory['memory']}")
    print(f"  memory   {memory['memory_id']}")
    print(f"  status   {_status(memory)} · tier {memory['tier']}")
    print(f"  session  {memory['session_id']} · created {memory['created_at']}")
    print(f"  from     {', '.join(memory['source_event_ids']) or '-'}")
    print(f"  reinforced {memory['reinforcement_count']}× · retrieved {memory['access_count']}×")
    return 0


def cmd_memories_history(args: argparse.Namespace) -> int:
    """Show the life of a memory from the memories topic: each event, its time and sources."""
    from memstream.streams.client import MemoryClient

    with MemoryClient(settings_from_args(args)) as client:
        entries = client.history(args.memory_id, user_id=args.user)
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    if not entries:
        print(f"no history for memory {args.memory_id!r} of user {args.user!r}", file=sys.stderr)
        return 1
    for entry in entries:
        details = " · ".join(f"{name} {value}" for name, value in entry["details"].items())
        print(f"{entry['occurred_at']}  {entry['type']:<18} {details}")
        print(
            f"    event {entry['event_id']} at [{entry['partition']}]@{entry['offset']} · from "
            f"{', '.join(entry['source_event_ids']) or '-'}"
        )
    return 0


def cmd_memories_delete(args: argparse.Namespace) -> int:
    """Delete one of a user's memories (publishes a memory_deleted event)."""
    from memstream.streams.client import MemoryClient

    with MemoryClient(settings_from_args(args)) as client:
        try:
            event_id = client.delete(args.memory_id, user_id=args.user, reason=args.reason)
        except KeyError:
            print(f"no memory {args.memory_id!r} for user {args.user!r}", file=sys.stderr)
            return 1
    print(f"published memory_deleted {event_id}; the memory leaves search once projected")
    return 0


def cmd_session_show(args: argparse.Namespace) -> int:
    """Show a session's working-memory context (asks the worker that owns it)."""
    from urllib.parse import urlencode

    from memstream.streams.runtime.worker import fetch_json

    settings = settings_from_args(args)
    query = {"user": args.user, "session": args.session}
    if args.budget is not None:
        query["budget"] = str(args.budget)
    try:
        reply = fetch_json(settings, f"/session/?{urlencode(query)}", timeout_s=10)
    except OSError as exc:
        status = getattr(exc, "code", None)
        if status == 404:
            print(f"no open session {args.session!r} for user {args.user!r}", file=sys.stderr)
            return 1
        if status == 401:
            print("error: the worker wants its token: set MEMSTREAM_WEB_TOKEN", file=sys.stderr)
            return 2
        print(f"error: no worker answers on port {settings.web_port} ({exc})", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(reply, indent=2))
    else:
        print(reply["prompt"])
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    """Write one JSON Schema file per event type."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for event_type, schema in json_schemas().items():
        path = out / f"{event_type}.schema.json"
        path.write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
        print(path)
    return 0


def _analytics_scope(args: argparse.Namespace) -> Any:
    from memstream.projections.analytics import Scope

    # `is not None`: an empty --user is a (matchless) user, never "every user".
    return Scope(user_id=args.user, since=args.since, now=args.now)


def _analytics_output(args: argparse.Namespace, table: Any) -> int:
    from memstream.projections.analytics import write_output

    out = Path(args.out) if args.out else None
    write_output(table, args.format, out)
    sys.stdout.flush()  # before any note on stderr
    if out is not None:
        print(f"{table.num_rows} row(s) written to {out}", file=sys.stderr)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Run a named analytics report (DuckDB over the memory table and the archive)."""
    import duckdb

    from memstream.projections.analytics import REPORTS, ReportOptions, render_plot, run_report

    if args.list:
        for name, report in REPORTS.items():
            takes = "".join(f" [--{option}]" for option in report.options)
            print(f"{name + takes:<24} {report.description}")
        return 0
    if args.name is None or args.name not in REPORTS:
        what = "a report name" if args.name is None else f"unknown report {args.name!r}"
        print(f"error: {what}; known: {', '.join(REPORTS)} (--list)", file=sys.stderr)
        return 2
    if args.format == "parquet" and not args.out:
        print("error: --format parquet needs --out FILE", file=sys.stderr)
        return 2
    try:
        options = ReportOptions(days=args.days, limit=args.limit)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        result = run_report(settings_from_args(args), args.name, _analytics_scope(args), options)
    except (ValueError, duckdb.Error) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    _analytics_output(args, result.table)
    if args.plot:
        render_plot(result, Path(args.plot))
        print(f"chart written to {args.plot}", file=sys.stderr)
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    """Run one read-only SELECT over the analytics views."""
    import duckdb

    from memstream.projections.analytics import NotReadOnly, run_sql

    if args.format == "parquet" and not args.out:
        print("error: --format parquet needs --out FILE", file=sys.stderr)
        return 2
    try:
        table = run_sql(settings_from_args(args), args.query, _analytics_scope(args))
    except NotReadOnly as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except duckdb.Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return _analytics_output(args, table)


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the whole path on the bundled sample and print what memory holds."""
    from memstream.streams.tools.demo import run_demo

    return run_demo(settings_from_args(args))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``memstream`` command."""
    parser = argparse.ArgumentParser(
        prog="memstream",
        description="Event-sourced long-term memory for LLM agents. Settings come from "
        "MEMSTREAM_* environment variables (see README).",
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
    erase.set_defaults(run=_with_checked_erasure_reason(erase.get_default("run")))

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

    commands.add_parser("demo", help=cmd_demo.__doc__).set_defaults(run=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``memstream`` console command."""
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
