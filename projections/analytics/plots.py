"""A report's default chart as a PNG (:func:`render_plot`, matplotlib with the Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from memstream.projections.analytics.output import _cell
from memstream.projections.analytics.running import ReportResult


def _label(value: Any) -> str:
    # Matplotlib reads $...$ as math: a user id must stay plain text.
    return _cell(value).replace("$", r"\$")[:40]


def render_plot(
    result: ReportResult, path: Path | IO[bytes], *, user_label: str | None = None
) -> None:
    """Draw the report's default chart (matplotlib, Agg backend) into the PNG ``path`` (a
    file, or a binary stream). The title names the scope's user, or ``user_label`` (the id
    the reader knows the user by) when given."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    spec, chart = result.report.plot, result.chart
    figure = Figure(figsize=(9, 5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    title = spec.title
    if result.scope.user_id is not None:
        title += f" - user {_label(user_label or result.scope.user_id)}"
    axes.set_title(title)
    axes.set_ylabel(spec.ylabel)
    if chart.num_rows == 0:
        axes.text(0.5, 0.5, "no data", ha="center", va="center", transform=axes.transAxes)
        axes.set_xticks([])
    elif spec.kind == "line":
        xs = chart.column(spec.x).to_pylist()
        for name in spec.y:
            axes.plot(xs, chart.column(name).to_pylist(), marker="o", label=name)
        axes.legend()
        figure.autofmt_xdate()
    else:
        labels = [_label(v) for v in chart.column(spec.x).to_pylist()]
        positions = range(len(labels))
        width = 0.8 / len(spec.y)
        for i, name in enumerate(spec.y):
            values = [v if v is not None else 0 for v in chart.column(name).to_pylist()]
            axes.bar([p + i * width for p in positions], values, width=width, label=name)
        axes.set_xticks([p + width * (len(spec.y) - 1) / 2 for p in positions])
        crowded = len(labels) > 6
        axes.set_xticklabels(
            labels, rotation=45 if crowded else 0, ha="right" if crowded else "center"
        )
        if len(spec.y) > 1:
            axes.legend()
    axes.set_xlabel(spec.x)
    figure.tight_layout()
    figure.savefig(path, format="png")
