"""The entity graph of a user, as the service serves it (the ``graph`` and ``entity``
verbs): :mod:`memstream.projections.entity_graph` builds it from the memory projection, the
same code the analytics views ``entity_nodes`` and ``entity_edges`` run, so the two never
disagree. See that module for how names are resolved, what an edge is, and which part of a
large graph each verb answers with (``limit``)."""

from __future__ import annotations

from memstream.projections.entity_graph import (
    ENTITY_LIMIT,
    GRAPH_LIMIT,
    KINDS,
    MAX_ENTITY_LIMIT,
    MAX_GRAPH_LIMIT,
    MENTIONED_WITH,
    check_limit,
    entity,
    entity_graph,
    name_key,
)

__all__ = [
    "ENTITY_LIMIT",
    "GRAPH_LIMIT",
    "KINDS",
    "MAX_ENTITY_LIMIT",
    "MAX_GRAPH_LIMIT",
    "MENTIONED_WITH",
    "check_limit",
    "entity",
    "entity_graph",
    "name_key",
]
