"""The analytics reports: named DuckDB reports and read-only SQL over the memory table and
the archive of the log (one DuckDB connection per report)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pyarrow as pa

from memstream.models.settings import Settings
from memstream.projections.analytics import (
    REPORTS,
    Report,
    ReportOptions,
    ReportResult,
    Scope,
    run_report,
    run_sql,
)

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
