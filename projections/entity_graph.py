"""The entity graph: the people, places, organisations, pets, projects and things a user's
memories name, and the relations between them, each with its sources and validity.

A graph is read from one user's rows of the memory projection
(:meth:`~memstream.projections.memories.index.MemoryIndex.list_memories`, inactive ones
included), so it is a pure function of the projection: a replay rebuilds it identically, an
erasure removes it with the rows, and no read sees another user's. The same functions serve
the ``graph`` and ``entity`` verbs (:func:`entity_graph`, :func:`entity`) and the analytics
views ``entity_nodes`` and ``entity_edges`` (:func:`graph_rows`, over the rows DuckDB reads),
so the SQL and the API cannot disagree. Its sources are each
memory's ``entities`` (the names the extractor took from the turns), its claims (subject,
attribute, value), and the names already known from those that its text says (the offline
extractor leaves out a name that opens a sentence: "Ana got a new job at Acme").

Names are resolved by their normal form (case, punctuation, a trailing possessive "'s"
aside), across sessions and speakers. A name given to someone named by relation makes one
entity of both: a claim "User's sister's name: Ana", "User's sister: Ana" or the subject
"User's sister Ana" make "Ana" and "User's sister" one node, named "Ana". A description
given two different names ("User's friend": Ana, then Eva) stays a node of its own rather
than join two people. Pronouns ("she") are not resolved here: the extractor resolves the
ones it can into its claims' subjects, and the rest name no entity.

Edges are claims whose value is a name (subject --attribute--> value; a claim that
something is not so gives a fact, no edge), with the claim's validity: one that ended
carries its end, and ``as_of`` reads what held then (the rule of a profile); and co-mentions,
two entities in one memory that holds. Everything is in a fixed order: nodes ``User`` first,
then by name; edges by source, target, relation, then when, then memory id.

The verbs answer with a bounded part of a large graph (the analytics views stay whole):
``graph`` with at most ``limit`` nodes, ``User`` and then the most mentioned entities (the most
connected first among equals, then by name key), and only the edges among them; ``entity``
with at most ``limit`` neighbours (chosen the same way), facts (those that hold first, then
the latest) and edges (to the neighbours kept; claims that hold first, then ended claims, then
co-mentions, the most memories first). Each answer says how much there was (``total_*``) and
whether it was cut (``truncated``); what it keeps stays in the fixed order above.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from typing_extensions import TypedDict

from memstream.projections.claims import claim_turns, holds
from memstream.projections.entity_names import (
    is_entity,
    name_key,
    resolve_descriptions,
    subject_kind,
    value_kind,
)

if TYPE_CHECKING:
    from memstream.projections.memories import MemoryIndex, MemoryRecord

__all__ = [
    "ENTITY_LIMIT",
    "GRAPH_LIMIT",
    "KINDS",
    "MAX_ENTITY_LIMIT",
    "MAX_GRAPH_LIMIT",
    "MENTIONED_WITH",
    "EdgeDict",
    "EntityDict",
    "EntityFactDict",
    "GraphDict",
    "NodeDict",
    "check_limit",
    "entity",
    "entity_graph",
    "graph_of_records",
    "graph_rows",
    "name_key",
]

#: The most nodes the ``graph`` verb answers with unless asked for fewer or more, and its cap.
GRAPH_LIMIT, MAX_GRAPH_LIMIT = 200, 2_000
#: The most neighbours, facts and edges (each) the ``entity`` verb answers with, and its cap.
ENTITY_LIMIT, MAX_ENTITY_LIMIT = 100, 1_000

#: The relation of a co-mention edge.
MENTIONED_WITH = "mentioned with"
#: The kinds a node may have, in the order one wins when the evidence names several.
KINDS = ("user", "person", "pet", "organisation", "place", "project", "thing")
class NodeDict(TypedDict):
    """An entity of a user's graph: its name (``User`` for the user), the other names it was
    given (``User's sister``), its kind when known (user, person, pet, organisation, place,
    project, thing), and the memories, turns and sessions that mention it."""

    name: str
    kind: str | None
    aliases: list[str]
    memory_ids: list[str]
    turns: list[str]
    sessions: list[str]


class EdgeDict(TypedDict):
    """A relation of two entities: a claim (``source``'s ``relation`` is ``target``), or a
    co-mention (``relation`` ``"mentioned with"``: both in one memory). A claim's edge has
    its claim's validity (``valid_until`` once it ended, ``holds`` whether it held at the
    graph's moment); a co-mention holds from its first memory."""

    source: str
    target: str
    relation: str
    kind: str
    valid_from: str
    valid_until: str | None
    holds: bool
    memory_ids: list[str]
    turns: list[str]
    sessions: list[str]


class GraphDict(TypedDict):
    """A user's entity graph (now, or at ``as_of``): nodes ``User`` first, then by name;
    edges by source, target, relation, then validity and memory ids. ``total_nodes`` and
    ``total_edges`` count the whole graph; ``truncated`` says the limit left some out."""

    as_of: str | None
    nodes: list[NodeDict]
    edges: list[EdgeDict]
    total_nodes: int
    total_edges: int
    truncated: bool


class EntityFactDict(TypedDict):
    """A claim about an entity: attribute, value (``polarity`` False: not so), the
    statement, its validity and whether it held at the moment asked, its memory and turns."""

    attribute: str
    value: str
    polarity: bool
    statement: str
    valid_from: str
    valid_until: str | None
    holds: bool
    memory_id: str
    turns: list[str]


class EntityDict(TypedDict):
    """One entity of a user's graph as ``name`` finds it (None when no entity has that
    name): its node, the entities it has an edge with, its facts and its edges, each at
    most the limit asked, with how many there are (``total_*``) and whether any was cut."""

    name: str
    as_of: str | None
    entity: NodeDict | None
    neighbours: list[str]
    facts: list[EntityFactDict]
    edges: list[EdgeDict]
    total_neighbours: int
    total_facts: int
    total_edges: int
    truncated: bool


def entity_graph(
    projection: MemoryIndex, user_id: str, as_of: datetime | None = None,
    limit: int = GRAPH_LIMIT,
) -> GraphDict:
    """The entity graph of ``user_id`` now, or at ``as_of``, with at most ``limit`` nodes
    (see the module's docstring).

    Raises
    ------
    ValueError
        ``limit`` is not between 1 and :data:`MAX_GRAPH_LIMIT`.
    """
    check_limit(limit, MAX_GRAPH_LIMIT)
    return graph_of_records(
        projection.list_memories(user_id, include_inactive=True), as_of, limit
    )


def graph_of_records(
    records: Iterable[MemoryRecord], as_of: datetime | None = None, limit: int = GRAPH_LIMIT
) -> GraphDict:
    """The entity graph of one user's memory rows (every status), now or at ``as_of``: at
    most ``limit`` nodes, ``User`` and the most mentioned, and the edges among them.

    Examples
    --------
    >>> graph = graph_of_records([], limit=50)
    >>> graph["nodes"], graph["total_nodes"], graph["truncated"]
    ([], 0, False)
    """
    check_limit(limit, MAX_GRAPH_LIMIT)
    graph = _Graph.read(records, as_of)
    kept = set(graph.ranked_nodes()[:limit])
    names = {graph.names[node] for node in kept}
    edges = [e for e in graph.edges if e["source"] in names and e["target"] in names]
    return {
        "as_of": _iso(as_of),
        "nodes": [graph.node_dict(n) for n in graph.ordered_nodes() if n in kept],
        "edges": edges,
        "total_nodes": len(graph.mentions),
        "total_edges": len(graph.edges),
        "truncated": len(kept) < len(graph.mentions),  # an edge is left out only with a node
    }


def check_limit(limit: int, most: int) -> None:
    """Refuse a ``limit`` that is not a whole number from 1 to ``most``.

    Examples
    --------
    >>> check_limit(0, 2_000)
    Traceback (most recent call last):
    ValueError: limit must be between 1 and 2000
    """
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be a whole number, not {type(limit).__name__}")
    if not 1 <= limit <= most:
        raise ValueError(f"limit must be between 1 and {most}")


def graph_rows(
    records: Iterable[MemoryRecord], user_id: str, as_of: datetime | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of the analytics views ``entity_nodes`` and ``entity_edges`` for one user:
    the whole graph (no limit: :func:`graph_of_records` with every node), node for node
    and edge for edge, with the user's id, each node's key (its normal form) and when its
    memories were recorded (first and last), and each edge's times as datetimes.

    Examples
    --------
    >>> nodes, edges = graph_rows([], "lee")
    >>> nodes, edges
    ([], [])
    """
    rows = list(records)
    graph = _Graph.read(rows, as_of)
    recorded = {r.memory_id: r.created_at for r in rows}
    nodes = []
    for node in graph.ordered_nodes():
        shown = graph.node_dict(node)
        seen = [recorded[m] for m in shown["memory_ids"]]
        nodes.append({
            "user_id": user_id, "entity_key": node, "name": shown["name"],
            "kind": shown["kind"], "aliases": shown["aliases"],
            "mentions": len(shown["memory_ids"]), "memory_ids": shown["memory_ids"],
            "sessions": shown["sessions"], "turns": shown["turns"],
            "first_seen": min(seen), "last_seen": max(seen),
        })
    key_of = {graph.names[node]: node for node in graph.names}
    edges = [
        {
            "user_id": user_id, "source": e["source"], "source_key": key_of[e["source"]],
            "relation": e["relation"], "target": e["target"], "target_key": key_of[e["target"]],
            "kind": e["kind"], "valid_from": datetime.fromisoformat(e["valid_from"]),
            "valid_until": None if e["valid_until"] is None
            else datetime.fromisoformat(e["valid_until"]),
            "ended": e["valid_until"] is not None, "holds": e["holds"],
            "memory_ids": e["memory_ids"], "turns": e["turns"], "sessions": e["sessions"],
        }
        for e in graph.edges
    ]
    return nodes, edges


def entity(
    projection: MemoryIndex, user_id: str, name: str, as_of: datetime | None = None,
    limit: int = ENTITY_LIMIT,
) -> EntityDict:
    """The entity of ``user_id``'s graph that ``name`` names (by any of its names, in normal
    form), with at most ``limit`` each of its neighbours, its facts (the claims about it) and
    its edges (see the module's docstring for which); ``entity`` None when no entity has
    that name.

    Raises
    ------
    ValueError
        ``limit`` is not between 1 and :data:`MAX_ENTITY_LIMIT`.
    """
    check_limit(limit, MAX_ENTITY_LIMIT)
    graph = _Graph.read(projection.list_memories(user_id, include_inactive=True), as_of)
    node = graph.node_of.get(name_key(name))
    if node is None or node not in graph.names:
        return {"name": name, "as_of": _iso(as_of), "entity": None, "neighbours": [],
                "facts": [], "edges": [], "total_neighbours": 0, "total_facts": 0,
                "total_edges": 0, "truncated": False}
    shown = graph.names[node]
    edges = [e for e in graph.edges if shown in (e["source"], e["target"])]
    neighbours = {e["target"] if e["source"] == shown else e["source"] for e in edges} - {shown}
    rank = graph.node_rank()
    key_of = {graph.names[n]: n for n in graph.names}
    kept = set(sorted(neighbours, key=lambda n: rank(key_of[n]))[:limit])
    to_kept = [e for e in edges if {e["source"], e["target"]} - {shown} <= kept]
    facts = graph.facts.get(node, [])
    kept_facts = _first(facts, limit, lambda i: (not facts[i]["holds"], -i))
    kept_edges = _first(to_kept, limit, lambda i: (_edge_weight(to_kept[i]), i))
    return {
        "name": name,
        "as_of": _iso(as_of),
        "entity": graph.node_dict(node),
        "neighbours": sorted(kept, key=_name_order),
        "facts": kept_facts,
        "edges": kept_edges,
        "total_neighbours": len(neighbours),
        "total_facts": len(facts),
        "total_edges": len(edges),
        "truncated": (len(kept), len(kept_facts), len(kept_edges))
        != (len(neighbours), len(facts), len(edges)),
    }


_T = TypeVar("_T")


def _first(items: list[_T], limit: int, rank: Callable[[int], Any]) -> list[_T]:
    """The ``limit`` best of ``items`` by ``rank`` (of each one's position), in their order."""
    if len(items) <= limit:
        return items
    kept = sorted(sorted(range(len(items)), key=rank)[:limit])
    return [items[i] for i in kept]


def _edge_weight(edge: EdgeDict) -> tuple[int, int]:
    """Which of an entity's edges it keeps first: claims that hold, ended claims, then
    co-mentions; the most memories first among equals."""
    tier = 0 if edge["kind"] == "claim" and edge["holds"] else 1 if edge["kind"] == "claim" else 2
    return tier, -len(edge["memory_ids"])


@dataclass
class _Mentions:
    """What is known of one node while the graph is read."""

    spellings: dict[str, str] = field(default_factory=dict)  # key -> first spelling
    kinds: set[str] = field(default_factory=set)
    memory_ids: dict[str, None] = field(default_factory=dict)
    turns: dict[str, None] = field(default_factory=dict)
    sessions: dict[str, None] = field(default_factory=dict)


@dataclass
class _Graph:
    """One user's graph as it is read: nodes by root key, their names, edges, facts."""

    node_of: dict[str, str]
    names: dict[str, str]
    mentions: dict[str, _Mentions]
    edges: list[EdgeDict]
    facts: dict[str, list[EntityFactDict]]
    #: The known names each memory's text says that its entities left out, by memory id.
    said_in: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, records: Iterable[MemoryRecord], as_of: datetime | None) -> _Graph:
        """The graph of one user's rows: those recorded by ``as_of`` (all, without it),
        deleted ones left out, in the order they were recorded."""
        rows = [
            r for r in records
            if r.status != "deleted" and (as_of is None or r.created_at <= as_of)
        ]
        rows.sort(key=lambda r: (r.created_at, r.memory_id))
        claims = [r for r in rows if r.claim is not None]
        stating = {r.memory_id: r for r in rows}
        node_of, described = resolve_descriptions(claims)
        graph = cls(node_of, {}, {}, [], {})
        for record in rows:
            graph._mention_all(record)
        # Again, now that every name is known: a memory that says a name its entities left
        # out ("Ana got a job at Acme", where a name opening a sentence is not taken) names
        # that entity too.
        known = graph._known_names()
        graph.mentions = {}
        for record in rows:
            graph._mention_all(record, known)
        for key, spelling in described.items():  # "User's sister", an alias of "Ana"
            if node_of[key] in graph.mentions:
                graph.mentions[node_of[key]].spellings.setdefault(key, spelling)
        graph.names = {node: graph._display_name(node) for node in graph.mentions}
        graph.edges = sorted(
            [*graph._claim_edges(claims, stating, as_of), *graph._co_mentions(rows, as_of)],
            key=_edge_order,
        )
        for record in claims:
            graph._add_fact(record, stating, as_of)
        return graph

    def _mention(self, spelling: str, record: MemoryRecord, kind: str | None = None) -> None:
        key = name_key(spelling)
        if not key:
            return
        node = self.node_of.setdefault(key, key)
        seen = self.mentions.setdefault(node, _Mentions())
        seen.spellings.setdefault(key, " ".join(spelling.split()))
        if kind is not None:
            seen.kinds.add(kind)
        seen.memory_ids[record.memory_id] = None
        seen.turns.update(dict.fromkeys(record.source_event_ids))
        seen.sessions[record.session_id] = None

    def _mention_all(self, record: MemoryRecord, known: re.Pattern[str] | None = None) -> None:
        """Every name ``record`` gives: its claim's subject and value, its entities, and
        (with ``known``) the known names its text says."""
        claim = record.claim
        if claim is not None:
            self._mention(claim.subject, record, subject_kind(claim.subject))
            if is_entity(claim.value):
                self._mention(claim.value, record, value_kind(claim.attribute))
        for name in record.entities:
            self._mention(name, record)
        if known is not None:
            listed = {name_key(name) for name in record.entities}
            said = [m.group(0) for m in known.finditer(record.content)]
            said = list(dict.fromkeys(n for n in said if name_key(n) not in listed))
            if said:
                self.said_in[record.memory_id] = said
            for name in said:
                self._mention(name, record)

    def _known_names(self) -> re.Pattern[str] | None:
        """The names (not descriptions) given so far, as they were spelt, as one pattern
        of whole words, the longest first; None when there are none."""
        names = {
            spelling for seen in self.mentions.values()
            for key, spelling in seen.spellings.items()
            if key != "user" and "'s " not in key and len(key) > 1 and spelling[:1].isupper()
        }
        if not names:
            return None
        ordered = sorted(names, key=lambda n: (-len(n), n))
        return re.compile(r"(?<![\w'])(?:" + "|".join(map(re.escape, ordered)) + r")(?!\w)")

    def _display_name(self, node: str) -> str:
        """``User`` for the user; else the first name given that is not a description
        ("Ana" before "User's sister"), else the first description."""
        spellings = self.mentions[node].spellings
        if "user" in spellings:
            return "User"
        names = [s for k, s in spellings.items() if "'s " not in k]
        return (names or list(spellings.values()))[0]

    def ordered_nodes(self) -> list[str]:
        """The nodes, ``User`` first, then by name."""
        return sorted(self.mentions, key=lambda n: _name_order(self.names[n]))

    def node_rank(self) -> Callable[[str], tuple[bool, int, int, str]]:
        """The order in which a bounded answer keeps nodes: ``User``, then the most
        mentioned (memories naming it), then the most connected (edges), then by key."""
        degree = Counter(e["source"] for e in self.edges)
        degree.update(e["target"] for e in self.edges)

        def rank(node: str) -> tuple[bool, int, int, str]:
            mentions = len(self.mentions[node].memory_ids)
            return self.names[node] != "User", -mentions, -degree[self.names[node]], node

        return rank

    def ranked_nodes(self) -> list[str]:
        """The nodes in the order a bounded graph keeps them (:meth:`node_rank`)."""
        return sorted(self.mentions, key=self.node_rank())

    def node_dict(self, node: str) -> NodeDict:
        """A node as the graph gives it."""
        seen = self.mentions[node]
        name = self.names[node]
        kinds = sorted(seen.kinds, key=KINDS.index)
        return {
            "name": name,
            "kind": kinds[0] if kinds else None,
            "aliases": sorted({s for s in seen.spellings.values() if s != name}, key=_name_order),
            "memory_ids": list(seen.memory_ids),
            "turns": list(seen.turns),
            "sessions": list(seen.sessions),
        }

    def _named(self, spelling: str) -> str | None:
        node = self.node_of.get(name_key(spelling))
        return None if node is None else self.names.get(node)

    def _claim_edges(
        self, claims: Sequence[MemoryRecord], stating: dict[str, MemoryRecord],
        as_of: datetime | None,
    ) -> Iterable[EdgeDict]:
        for record in claims:
            claim = record.claim
            assert claim is not None
            if not claim.polarity or not is_entity(claim.value):
                continue
            source, target = self._named(claim.subject), self._named(claim.value)
            if source is None or target is None or source == target:
                continue  # a name given to its own subject is an alias, not a relation
            sources = [record.memory_id, *(m for m in record.stated_in if m in stating)]
            yield {
                "source": source,
                "target": target,
                "relation": claim.attribute,
                "kind": "claim",
                "valid_from": claim.valid_from.isoformat(),
                "valid_until": _iso(_ended(record, as_of)),
                "holds": holds(record, as_of),
                "memory_ids": sources,
                "turns": claim_turns(record, stating),
                "sessions": list(dict.fromkeys(stating[m].session_id for m in sources)),
            }

    def _co_mentions(
        self, rows: Sequence[MemoryRecord], as_of: datetime | None
    ) -> Iterable[EdgeDict]:
        """One edge per pair of entities named in one memory that holds, with every such
        memory."""
        pairs: dict[tuple[str, str], list[MemoryRecord]] = {}
        for record in rows:
            if not holds(record, as_of):
                continue
            given = [*record.entities, *self.said_in.get(record.memory_id, ())]
            named = {n for n in (self._named(e) for e in given) if n is not None}
            ordered = sorted(named, key=_name_order)
            for i, first in enumerate(ordered):
                for second in ordered[i + 1 :]:
                    pairs.setdefault((first, second), []).append(record)
        for (first, second), records in pairs.items():
            yield {
                "source": first,
                "target": second,
                "relation": MENTIONED_WITH,
                "kind": "co-mention",
                "valid_from": records[0].created_at.isoformat(),
                "valid_until": None,
                "holds": True,
                "memory_ids": [r.memory_id for r in records],
                "turns": list(dict.fromkeys(t for r in records for t in r.source_event_ids)),
                "sessions": list(dict.fromkeys(r.session_id for r in records)),
            }

    def _add_fact(
        self, record: MemoryRecord, stating: dict[str, MemoryRecord], as_of: datetime | None
    ) -> None:
        claim = record.claim
        assert claim is not None
        node = self.node_of.get(name_key(claim.subject))
        if node is None:
            return
        self.facts.setdefault(node, []).append({
            "attribute": claim.attribute,
            "value": claim.value,
            "polarity": claim.polarity,
            "statement": record.content,
            "valid_from": claim.valid_from.isoformat(),
            "valid_until": _iso(_ended(record, as_of)),
            "holds": holds(record, as_of),
            "memory_id": record.memory_id,
            "turns": claim_turns(record, stating),
        })


def _ended(record: MemoryRecord, as_of: datetime | None) -> datetime | None:
    """When ``record``'s claim ended, if it had by ``as_of`` (by now, without it)."""
    until = record.valid_until or (record.ended_at if record.status != "active" else None)
    if until is None or (as_of is not None and until > as_of):
        return None
    return until


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment is not None else None


def _name_order(name: str) -> tuple[bool, str, str]:
    return (name != "User", name.casefold(), name)


def _edge_order(
    edge: EdgeDict,
) -> tuple[tuple[bool, str, str], tuple[bool, str, str], str, str, str, list[str]]:
    return (
        _name_order(edge["source"]), _name_order(edge["target"]), edge["kind"],
        edge["relation"], edge["valid_from"], edge["memory_ids"],
    )
