"""Writing rows out: an aligned text table, CSV, JSON or Parquet (:func:`write_output`)."""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Iterator, Sequence
from datetime import date, datetime, time
from pathlib import Path
from typing import IO, Any, Literal, get_args

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

OutputFormat = Literal["table", "csv", "json", "parquet"]
FORMATS: tuple[str, ...] = get_args(OutputFormat)

#: Width at which a cell of the text table is cut.
_CELL_CHARS = 60


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, list):
        return ", ".join(_cell(item) for item in value)
    text = " ".join(str(value).split())
    return text if len(text) <= _CELL_CHARS else text[: _CELL_CHARS - 1] + "…"


def _rows(table: pa.Table) -> Iterator[tuple[Any, ...]]:
    """The rows as tuples: by position, so two columns of one name both stay."""
    return zip(*(column.to_pylist() for column in table.columns), strict=True)


def render_table(table: pa.Table) -> str:
    """The rows as an aligned text table, with a row count; numbers right-aligned."""
    names = table.column_names
    rows = [[_cell(v) for v in row] for row in _rows(table)]
    widths = [max([len(n), *(len(r[i]) for r in rows)]) for i, n in enumerate(names)]
    numeric = [
        pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in table.schema
    ]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if right else c.ljust(w)
            for c, w, right in zip(cells, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out = [line(names), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    out.append(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})")
    return "\n".join(out)


def _unique_names(names: Sequence[str]) -> list[str]:
    """Column names as JSON keys: a repeated name gets ``_2``, ``_3``... (an ad-hoc query
    may select two columns of one name)."""
    used: set[str] = set()
    unique = []
    for name in names:
        candidate, n = name, 1
        while candidate in used:
            n += 1
            candidate = f"{name}_{n}"
        used.add(candidate)
        unique.append(candidate)
    return unique


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def _csv_strings(column: pa.ChunkedArray) -> list[str]:
    """A column as CSV cells: empty for null (and NaN, infinity), ISO 8601 times, ``true`` /
    ``false``, shortest round-trip floats, lists and structs as JSON."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        if kind.tz is None:
            text = pc.strftime(column, format="%Y-%m-%dT%H:%M:%S")
        else:
            text = pc.replace_substring_regex(
                pc.strftime(column, format="%Y-%m-%dT%H:%M:%S%z"),
                pattern=r"([+-]\d\d)(\d\d)$",
                replacement=r"\1:\2",
            )
    elif pa.types.is_floating(kind):
        text = pc.if_else(pc.is_finite(column), pc.cast(column, pa.string()), None)
    elif (
        pa.types.is_integer(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_date(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
    ):
        text = pc.cast(column, pa.string())
    else:
        return [_csv_value(value) for value in column.to_pylist()]
    return list(pc.fill_null(text, "").to_pylist())


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if not math.isfinite(value) else repr(value)
    if isinstance(value, list | dict):
        return json.dumps(_json_value(value), ensure_ascii=False)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return str(value)


def write_output(
    table: pa.Table, fmt: OutputFormat, out: Path | None = None, stream: IO[str] | None = None
) -> None:
    """Write the rows as ``fmt`` to ``out`` (a file) or ``stream`` (stdout by default).

    ``table``: aligned text; ``csv``: a header line, empty cells for nulls, lists as JSON,
    times in ISO 8601; ``json``: an array of objects; ``parquet``: the Arrow table as is
    (needs ``out``).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    if fmt == "parquet":
        if out is None:
            raise ValueError("the parquet format needs an output file")
        pq.write_table(table, out)
        return
    if out is None:
        _write_text(table, fmt, stream or sys.stdout)
        return
    with out.open("w", encoding="utf-8", newline="") as handle:
        _write_text(table, fmt, handle)


def json_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows as JSON-ready objects: times in ISO 8601, NaN and infinity as null, and a
    repeated column name made unique (``n``, ``n_2``)."""
    names = _unique_names(table.column_names)
    return [
        {name: _json_value(v) for name, v in zip(names, row, strict=True)} for row in _rows(table)
    ]


def _write_text(table: pa.Table, fmt: OutputFormat, target: IO[str]) -> None:
    if fmt == "table":
        target.write(render_table(table) + "\n")
    elif fmt == "json":
        json.dump(json_rows(table), target, ensure_ascii=False, indent=1)
        target.write("\n")
    else:
        writer = csv.writer(target, lineterminator="\n")
        writer.writerow(table.column_names)
        # Column by column, vectorised: a million-row report is written in seconds.
        writer.writerows(zip(*(_csv_strings(column) for column in table.columns), strict=True))
