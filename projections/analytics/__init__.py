"""Analytics: DuckDB SQL over the memory projection and the Parquet archive of the log.

Every call opens **one in-memory DuckDB connection** (never a ``.duckdb`` file), defines the
documented views (:data:`VIEWS`) over two sources, runs one report or one query, and closes:

* the live LanceDB memory table, read as Arrow without its vectors (LanceDB directly, no
  embedder, no model load; DuckDB's ``lance`` extension would need a download);
* the Parquet archive of every topic (:func:`memstream.projections.archive_format.live_archive_dir`), read
  with ``read_parquet('<dir>/**/*.parquet', hive_partitioning = true, union_by_name = true)``;
  the event fields are parsed from each record's ``value`` with DuckDB's own JSON functions.

A missing or empty table or archive gives the same views, empty, with the same columns.

**Tenant scoping by construction.** With ``Scope(user_id=U)`` every view holds only U's rows,
and no id ever becomes SQL text: memory rows are selected by the SHA-256 digest of U computed
here (as the projection does) and checked again in pyarrow; archive records are copied into a
temporary table by a prepared statement (``WHERE user_id = $1``); then the unfiltered
sources are dropped, file access is switched off and DuckDB's configuration is locked, so an
ad-hoc query cannot read the archive files or the table around the views. ``since`` and
``now`` are parameters too (a one-row ``_params`` table).

The modules:

* ``scope``: :class:`Scope` (whose rows, which times) and :class:`ReportOptions`;
* ``views``: the documented views (:data:`VIEWS`, :class:`View`), their columns;
* ``view_sql``: the SQL of each view, and of ``_records`` over the archive;
* ``literals``: the code-made SQL literals (topic and type names) the SQL text may hold;
* ``reports``: the named reports (:data:`REPORTS`, :class:`Report`, :class:`PlotSpec`);
* ``sources``: the two sources as read, the LanceDB memory table and the Parquet archive;
* ``connection``: :func:`open_views`, one connection with the views defined and scoped;
* ``guard``: the SQL guard, :func:`check_read_only` and :class:`NotReadOnly`;
* ``running``: :func:`run_report`, :func:`run_sql` and :class:`ReportResult`;
* ``output``: :func:`write_output`, :func:`render_table` and :func:`json_rows` (text, CSV, JSON, Parquet);
* ``plots``: :func:`render_plot`, a report's default chart as a PNG.

The public names are re-exported here; the modules import each other directly.

Examples
--------
>>> result = run_report(Settings(), "access", Scope(user_id="alice"))  # doctest: +SKIP
>>> result.table.column_names  # doctest: +SKIP
['user_id', 'memory_type', 'memories', 'retrieved', 'accesses', 'hit_rate']
>>> run_sql(Settings(), "SELECT count(*) AS n FROM memories").to_pylist()  # doctest: +SKIP
[{'n': 1532}]
"""

from memstream.projections.analytics.connection import open_views
from memstream.projections.analytics.guard import NotReadOnly, check_read_only
from memstream.projections.analytics.output import FORMATS, json_rows, render_table, write_output
from memstream.projections.analytics.plots import render_plot
from memstream.projections.analytics.reports import REPORTS, PlotSpec, Report
from memstream.projections.analytics.running import ReportResult, run_report, run_sql
from memstream.projections.analytics.scope import ReportOptions, Scope
from memstream.projections.analytics.views import VIEWS, View

__all__ = [
    "FORMATS",
    "REPORTS",
    "VIEWS",
    "NotReadOnly",
    "PlotSpec",
    "Report",
    "ReportOptions",
    "ReportResult",
    "Scope",
    "View",
    "check_read_only",
    "json_rows",
    "open_views",
    "render_plot",
    "render_table",
    "run_report",
    "run_sql",
    "write_output",
]
