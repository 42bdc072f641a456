"""The entity graph of a user, as the service serves it (the ``graph`` and ``entity``
verbs): :mod:`memstream.projections.entity_graph` builds it from the memory projection, the
same code the analytics views ``entity_nodes`` and ``entity_edges`` run, so the two never
disagree. See that module for how names are resolved and what an edge is."""

from __future__ import annotations

from memstream.projections.entity_graph import (
    KINDS,
    MENTIONED_WITH,
    entity,
    entity_graph,
    name_key,
)

__all__ = ["KINDS", "MENTIONED_WITH", "entity", "entity_graph", "name_key"]
