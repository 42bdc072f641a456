"""The analytics reports: named DuckDB reports and read-only SQL over the memory table and
the archive of the log (one DuckDB connection per report)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from memstream.models.settings import Settings
from memstream.projections.analytics import (
    REPORTS,
    Report,
    ReportOptions,
    ReportResult,
    Scope,
    open_views,
    run_report,
    run_sql,
)

#: Most users one ``users`` call lists.
MAX_USERS = 1000

__all__ = ["ReportService"]


class ReportService:
    """Reports over the projections of one settings' data directory."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @property
    def reports(self) -> Mapping[str, Report]:
        """Every named report, by name."""
        return REPORTS

    async def run(
        self, name: str, scope: Scope | None = None, options: ReportOptions | None = None
    ) -> ReportResult:
        """Run the report ``name`` over ``scope`` (every user by default); ``ValueError``
        for an unknown report, or bad options."""
        if name not in REPORTS:
            raise ValueError(f"unknown report {name!r}; known: {', '.join(REPORTS)}")
        return await asyncio.to_thread(
            run_report, self.settings, name, scope or Scope(), options or ReportOptions()
        )

    async def sql(self, query: str, scope: Scope | None = None) -> pa.Table:
        """One read-only SELECT over the analytics views (``NotReadOnly`` otherwise)."""
        return await asyncio.to_thread(run_sql, self.settings, query, scope or Scope())

    async def users(self, prefix: str = "", *, limit: int = MAX_USERS) -> list[dict[str, Any]]:
        """The users with memories whose id starts with ``prefix`` (a tenant's ``acme:``),
        by id, at most ``limit``: ``user_id``, ``memories`` (every status), ``active`` and
        ``last_memory_at`` (event time of the newest). ``prefix`` is a bound parameter,
        never SQL text."""
        if not 1 <= limit <= MAX_USERS:
            raise ValueError(f"limit must be between 1 and {MAX_USERS}")

        def listed() -> list[dict[str, Any]]:
            con = open_views(self.settings, Scope(), views=frozenset({"memories"}))
            try:
                cursor = con.execute(
                    """
                    SELECT user_id, count(*) AS memories,
                           count(*) FILTER (WHERE status = 'active') AS active,
                           max(created_at) AS last_memory_at
                    FROM memories WHERE starts_with(user_id, $prefix)
                    GROUP BY user_id ORDER BY user_id LIMIT $limit
                    """,
                    {"prefix": prefix, "limit": limit},
                )
                names = [column[0] for column in cursor.description or ()]
                return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            finally:
                con.close()

        return await asyncio.to_thread(listed)
