"""``memstream report`` and ``sql``: the analytics reports, through the service."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstream.streams.service.container import Container



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


def cmd_report(args: argparse.Namespace, container: Container) -> int:
    """Run a named analytics report (DuckDB over the memory table and the archive)."""
    import duckdb

    from memstream.projections.analytics import ReportOptions, render_plot
    from memstream.streams.service.app import Service

    reports = Service(container).reports
    if args.list:
        for name, report in reports.reports.items():
            takes = "".join(f" [--{option}]" for option in report.options)
            print(f"{name + takes:<24} {report.description}")
        return 0
    if args.name is None or args.name not in reports.reports:
        what = "a report name" if args.name is None else f"unknown report {args.name!r}"
        print(f"error: {what}; known: {', '.join(reports.reports)} (--list)", file=sys.stderr)
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
        result = asyncio.run(reports.run(args.name, _analytics_scope(args), options))
    except (ValueError, duckdb.Error) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    _analytics_output(args, result.table)
    if args.plot:
        render_plot(result, Path(args.plot))
        print(f"chart written to {args.plot}", file=sys.stderr)
    return 0


def cmd_sql(args: argparse.Namespace, container: Container) -> int:
    """Run one read-only SELECT over the analytics views."""
    import duckdb

    from memstream.projections.analytics import NotReadOnly
    from memstream.streams.service.app import Service

    if args.format == "parquet" and not args.out:
        print("error: --format parquet needs --out FILE", file=sys.stderr)
        return 2
    try:
        table = asyncio.run(Service(container).reports.sql(args.query, _analytics_scope(args)))
    except NotReadOnly as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except duckdb.Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return _analytics_output(args, table)
