"""The SQL guard: an ad-hoc query must be one read-only SELECT (or WITH ... SELECT),
checked with DuckDB's own parser (:func:`check_read_only`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import duckdb

#: Parse-tree node types of a read-only query (``json_serialize_sql``); DuckDB also parses
#: data-modifying CTEs (``WITH d AS (DELETE ... RETURNING *) SELECT ...``) as a SELECT.
_READ_ONLY_NODES = frozenset(
    {"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"}
)


class NotReadOnly(ValueError):
    """An ad-hoc query that is not one read-only SELECT (or WITH ... SELECT) statement."""


def check_read_only(query: str, con: duckdb.DuckDBPyConnection | None = None) -> str:
    """The one statement of ``query`` if it is a read-only SELECT (or WITH ... SELECT).

    Checked with DuckDB's own parser, never by matching text: exactly one statement, of type
    SELECT, and no data-modifying node anywhere in its parse tree (DuckDB parses
    ``WITH d AS (DELETE ... RETURNING *) SELECT ...`` as a SELECT). The parse tree comes from
    ``json_serialize_sql`` on ``con`` (a throwaway connection when None).

    Raises
    ------
    NotReadOnly
        With the reason.

    Examples
    --------
    >>> check_read_only("SELECT 1")
    'SELECT 1'
    >>> check_read_only("DELETE FROM memories")
    Traceback (most recent call last):
    ...
    memstream.projections.analytics.guard.NotReadOnly: only a SELECT (or WITH ... SELECT) statement is allowed, not DELETE
    """
    statement = _single_select(query)
    if con is not None:
        _refuse_modifying_nodes(con, statement)
        return statement
    parser = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False})
    try:
        _refuse_modifying_nodes(parser, statement)
    finally:
        parser.close()
    return statement


def _single_select(query: str) -> str:
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise NotReadOnly(f"not valid SQL: {exc}") from None
    if len(statements) != 1:
        raise NotReadOnly(f"exactly one statement is allowed, not {len(statements)}")
    statement = statements[0]
    if statement.type != duckdb.StatementType.SELECT:
        raise NotReadOnly(
            "only a SELECT (or WITH ... SELECT) statement is allowed, "
            f"not {statement.type.name}"
        )
    return str(statement.query)


def _refuse_modifying_nodes(con: duckdb.DuckDBPyConnection, statement: str) -> None:
    # fetchall, not fetchone: DuckDB 2 refuses other work while a result is unfinished.
    (row,) = con.execute("SELECT json_serialize_sql($1)", [statement]).fetchall()
    tree = json.loads(row[0])
    if tree.get("error"):
        raise NotReadOnly(f"not a plain SELECT: {tree.get('error_message', 'unparsable')}")
    for node_type in _node_types(tree):
        if node_type.endswith("_NODE") and node_type not in _READ_ONLY_NODES:
            raise NotReadOnly(f"the query modifies data ({node_type.removesuffix('_NODE')})")


def _node_types(tree: Any) -> Iterator[str]:
    """Every ``type`` value in a serialized parse tree."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            node_type = item.get("type")
            if isinstance(node_type, str):
                yield node_type
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
