"""Running a named report (:func:`run_report`) or one ad-hoc query (:func:`run_sql`), each on
one fresh connection."""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import pyarrow as pa

from memstream.models.settings import Settings
from memstream.projections.analytics.connection import open_views
from memstream.projections.analytics.graph_views import GRAPH_VIEWS
from memstream.projections.analytics.guard import _refuse_modifying_nodes, _single_select
from memstream.projections.analytics.reports import REPORTS, Report
from memstream.projections.analytics.scope import ReportOptions, Scope
from memstream.projections.analytics.views import VIEWS


@dataclass(frozen=True)
class ReportResult:
    """A report's rows and the data of its default chart."""

    report: Report
    table: pa.Table
    chart: pa.Table
    scope: Scope = field(default_factory=Scope)


def _arrow(relation: duckdb.DuckDBPyRelation) -> pa.Table:
    """A relation's rows as Arrow (``to_arrow_table`` in DuckDB 1.4+, ``arrow`` before)."""
    convert = getattr(relation, "to_arrow_table", None) or relation.arrow
    table = convert()
    if isinstance(table, pa.RecordBatchReader):
        table = table.read_all()
    assert isinstance(table, pa.Table)
    return table


def run_report(
    settings: Settings,
    name: str,
    scope: Scope = Scope(),
    options: ReportOptions = ReportOptions(),
) -> ReportResult:
    """Run the named report on one fresh connection; return its rows and chart data.

    Raises
    ------
    KeyError
        If there is no report of that name (see :data:`REPORTS`).
    """
    report = REPORTS[name]
    con = open_views(settings, scope, views=report.views, options=options)
    try:
        table = _arrow(con.sql(report.sql))
        con.register("result", table)
        chart = _arrow(con.sql(report.plot.sql))
    finally:
        con.close()
    return ReportResult(report, table, chart, scope)


def run_sql(settings: Settings, query: str, scope: Scope = Scope()) -> pa.Table:
    """Run one read-only ad-hoc query over the views, on one fresh connection.

    Raises
    ------
    NotReadOnly
        If ``query`` is not a single read-only SELECT / WITH statement.
    duckdb.Error
        If DuckDB cannot run it (unknown column, a file read while scoped to a user, ...).
    """
    statement = _single_select(query)  # before anything is opened
    # The graph views are built in Python, user by user: only for a query that names them.
    named = statement.casefold()
    views = frozenset(v.name for v in VIEWS if v.name not in GRAPH_VIEWS or v.name in named)
    con = open_views(settings, scope, views=views)
    try:
        _refuse_modifying_nodes(con, statement)
        return _arrow(con.sql(statement))
    finally:
        con.close()
