"""The analytics routes of the HTTP API: the named reports of one user (JSON rows, CSV, or
the report's chart as a PNG), and the tenant's users with memories.

A report's rows are the DuckDB views of :mod:`memstream.projections.analytics`, scoped to the
caller's user (:class:`~memstream.projections.analytics.Scope`), one connection per report;
the namespaced user id in the rows and the chart's title is the caller's own again.
"""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any, Literal

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from fastapi import APIRouter, HTTPException, Path, Query, Response

from memstream.models.events.envelope import UtcInstant
from memstream.projections.analytics import (
    REPORTS,
    ReportOptions,
    Scope,
    json_rows,
    render_plot,
    write_output,
)
from memstream.streams.api.deps import ERRORS, Caller, ServiceDep, UserQuery, scoped_user
from memstream.streams.api.schemas import ReportInfo, ReportResponse, TenantUser, UsersResponse

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["analytics"])
ReportName = Annotated[str, Path(min_length=1, max_length=64)]


def _as_caller(table: pa.Table, namespaced: str, user_id: str) -> pa.Table:
    """``table`` with every text cell that is exactly ``namespaced`` reading ``user_id``."""
    columns = []
    for column in table.columns:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            column = pc.if_else(pc.equal(column, namespaced), user_id, column)
        columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


@router.get("/reports", responses=ERRORS)
async def list_reports(_key: Caller) -> list[ReportInfo]:
    """Every named report: what it shows and the options it takes (``days``, ``limit``)."""
    return [
        ReportInfo(name=report.name, description=report.description, options=list(report.options))
        for report in REPORTS.values()
    ]


@router.get(
    "/reports/{name}",
    responses={
        **ERRORS,
        404: {"description": "No report of that name."},
        200: {
            "content": {"text/csv": {}, "image/png": {}},
            "description": "The rows (JSON, CSV) or the chart (PNG).",
        },
    },
)
async def report(
    name: ReportName,
    key: Caller,
    service: ServiceDep,
    user_id: UserQuery,
    format: Literal["json", "csv", "png"] = "json",
    since: Annotated[UtcInstant | None, Query(description="Rows from this time on.")] = None,
    now: Annotated[UtcInstant | None, Query(description="Ages measured at this time.")] = None,
    days: Annotated[int, Query(ge=0, le=36_500)] = 7,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 10,
) -> Any:
    """One named report over the user's memories and log (``/v1/reports`` lists them): rows
    as JSON, or as CSV, or the report's default chart as a PNG."""
    if name not in REPORTS:
        raise HTTPException(404, "no report of that name (GET /v1/reports lists them)")
    namespaced = scoped_user(key, user_id)
    scope = Scope(user_id=namespaced, since=since, now=now)
    try:
        result = await service.reports.run(name, scope, ReportOptions(days=days, limit=limit))
    except (ValueError, duckdb.Error):
        raise HTTPException(422, "the report could not run with these options") from None
    table = _as_caller(result.table, namespaced, user_id)
    if format == "png":
        chart = io.BytesIO()
        shown = replace(result, table=table, chart=_as_caller(result.chart, namespaced, user_id))
        render_plot(shown, chart, user_label=user_id)
        return Response(chart.getvalue(), media_type="image/png")
    if format == "csv":
        text = io.StringIO()
        write_output(table, "csv", stream=text)
        return Response(
            text.getvalue(),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{name}.csv"'},
        )
    return ReportResponse(
        report=name, user_id=user_id, columns=table.column_names, rows=json_rows(table)
    )


@router.get("/users", tags=["users"], responses=ERRORS)
async def users(key: Caller, service: ServiceDep) -> UsersResponse:
    """The users of the caller's tenant that have memories (for a key bound to some users,
    those among them), by id."""
    prefix = f"{key.tenant}:"
    found = []
    for row in await service.reports.users(prefix):
        user_id = str(row["user_id"])[len(prefix) :]
        if key.users is not None and user_id not in key.users:
            continue
        last = row["last_memory_at"]
        found.append(
            TenantUser(
                user_id=user_id,
                memories=int(row["memories"]),
                active=int(row["active"]),
                last_memory_at=last.isoformat() if isinstance(last, datetime) else last,
            )
        )
    return UsersResponse(results=found)
