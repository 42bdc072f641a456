"""The rows of the views ``entity_nodes`` and ``entity_edges``: each user's entity graph,
built from the memory rows the connection read by :func:`memstream.projections.entity_graph.graph_rows`,
the code that serves the ``graph`` verb, so the SQL and the API cannot disagree."""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime
from typing import Any

import pyarrow as pa

from memstream.projections.entity_graph import graph_rows
from memstream.projections.memories import MemoryRecord
from memstream.projections.memories.records import _record_fields

#: The views built from the graph (they read the memory projection, not the archive).
GRAPH_VIEWS = frozenset({"entity_nodes", "entity_edges"})

_TIME = pa.timestamp("us", tz="UTC")
_NAMES = pa.list_(pa.string())

#: The columns of ``entity_nodes``, in order.
NODE_SCHEMA = pa.schema([
    ("user_id", pa.string()),
    ("entity_key", pa.string()),
    ("name", pa.string()),
    ("kind", pa.string()),
    ("aliases", _NAMES),
    ("mentions", pa.int64()),
    ("memory_ids", _NAMES),
    ("sessions", _NAMES),
    ("turns", _NAMES),
    ("first_seen", _TIME),
    ("last_seen", _TIME),
])

#: The columns of ``entity_edges``, in order.
EDGE_SCHEMA = pa.schema([
    ("user_id", pa.string()),
    ("source", pa.string()),
    ("source_key", pa.string()),
    ("relation", pa.string()),
    ("target", pa.string()),
    ("target_key", pa.string()),
    ("kind", pa.string()),
    ("valid_from", _TIME),
    ("valid_until", _TIME),
    ("ended", pa.bool_()),
    ("holds", pa.bool_()),
    ("memory_ids", _NAMES),
    ("turns", _NAMES),
    ("sessions", _NAMES),
])

_RECORD_FIELDS = frozenset(f.name for f in fields(MemoryRecord))
#: Where a row sits in the log is not in the view's columns, and no graph reads it.
_NO_POSITION = {"source_topic": "", "source_partition": 0, "source_offset": 0}


def graph_tables(memories: pa.Table, as_of: datetime | None) -> tuple[pa.Table, pa.Table]:
    """The rows of ``entity_nodes`` and ``entity_edges`` for every user in ``memories``
    (the ``memories`` view's rows, every status), each user's graph now or at ``as_of``;
    users in id order."""
    by_user: dict[str, list[MemoryRecord]] = {}
    for row in memories.to_pylist():
        if row["user_id"] is None:
            continue
        by_user.setdefault(row["user_id"], []).append(_record(row))
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for user_id in sorted(by_user):
        user_nodes, user_edges = graph_rows(by_user[user_id], user_id, as_of)
        nodes += user_nodes
        edges += user_edges
    return (
        pa.Table.from_pylist(nodes, schema=NODE_SCHEMA),
        pa.Table.from_pylist(edges, schema=EDGE_SCHEMA),
    )


def _record(row: dict[str, Any]) -> MemoryRecord:
    """A ``memories`` view row as the projection's reader gives it."""
    kept = {k: v for k, v in row.items() if k in _RECORD_FIELDS}
    kept["entities"] = kept.get("entities") or ()
    kept["source_event_ids"] = kept.get("source_event_ids") or ()
    for name in ("reinforcement_count", "access_count"):
        kept[name] = kept.get(name) or 0
    kept["context"] = kept.get("context") or ""
    return MemoryRecord(**_record_fields({**kept, **_NO_POSITION}))
