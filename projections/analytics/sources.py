"""The two sources the views read: the live LanceDB memory table as Arrow (no vectors), and
the Parquet archive of the log as a ``read_parquet`` FROM clause (an empty table when none)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from memstream.models.settings import Settings
from memstream.models.topics import user_partition
from memstream.projections.archive_format import SCHEMA as ARCHIVE_SCHEMA
from memstream.projections.archive_format import live_archive_dir
from memstream.projections.memories import (
    DEFAULT_TABLE,
    VIEW_COLUMNS,
    memory_schema,
    partition_table,
    user_key,
)
from memstream.projections.memories.store import ProjectionStore


def _path_literal(path: Path) -> str:
    """A directory glob as a SQL string literal (paths come from settings, not from users)."""
    return "'" + str(path).replace("'", "''") + "'"


def _memory_arrow_schema() -> pa.Schema:
    """The ``memories`` view's columns with the projection's types (all nullable)."""
    full = memory_schema(1, "analytics")
    return pa.schema([full.field(name).with_nullable(True) for name in VIEW_COLUMNS])


def _memory_rows(settings: Settings, user_id: str | None) -> pa.Table:
    """The live memory projection's rows (every status, no vectors), one user's when given:
    every partition's table, or the user's partition's.

    The tables are opened with LanceDB itself: no embedder, no model load. The user's rows
    are selected by the digest of the id (code-made SQL, as in the projection), then checked
    once more by equality in pyarrow.
    """
    schema = _memory_arrow_schema()
    store = ProjectionStore.from_settings(settings)
    if not store.exists():
        return schema.empty_table()
    base = store.live_name("memories", DEFAULT_TABLE)
    partitions = (
        [user_partition(user_id, settings.partitions)]
        if user_id is not None
        else range(settings.partitions)
    )
    db = store.connect()
    parts = [_table_rows(db, partition_table(base, p), user_id, schema) for p in partitions]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _table_rows(db: Any, name: str, user_id: str | None, schema: pa.Schema) -> pa.Table:
    """The rows of one memory table in the views' columns (none if it does not exist)."""
    try:
        table = db.open_table(name)
    except (ValueError, FileNotFoundError):
        return schema.empty_table()
    present = [c for c in VIEW_COLUMNS if c in table.schema.names]
    query = table.search()
    if user_id is not None:
        key = user_key(user_id)
        if not re.fullmatch(r"[0-9a-f]{64}", key):
            raise AssertionError("user_key is not a sha256 hex digest")
        query = query.where(f"user_key = '{key}'")
    rows: pa.Table = query.select(present).limit(None).to_arrow()
    if user_id is not None:
        rows = rows.filter(pc.equal(rows.column("user_id"), pa.scalar(user_id, pa.string())))
    columns = [
        rows.column(f.name).cast(f.type) if f.name in present else pa.nulls(rows.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _archive_source(settings: Settings, con: duckdb.DuckDBPyConnection) -> str:
    """The FROM clause of the archive: ``read_parquet`` of its files, or an empty table of
    the archive's columns when there are none."""
    directory = live_archive_dir(settings)
    if any(directory.glob("topic=*/date=*/*.parquet")):
        glob = _path_literal(directory / "**" / "*.parquet")
        # hive_types: the directory names must not be guessed into numbers.
        return (
            f"read_parquet({glob}, hive_partitioning = true, union_by_name = true, "
            "hive_types = {'topic': VARCHAR, 'date': DATE})"
        )
    return _empty_archive(con)


def _empty_archive(con: duckdb.DuckDBPyConnection) -> str:
    """Register an empty table of the archive's columns (and its ``date`` directory)."""
    con.register("_archive_empty", ARCHIVE_SCHEMA.append(pa.field("date", pa.date32())).empty_table())
    return "_archive_empty"
