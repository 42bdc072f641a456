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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from memstream.models.beliefs import subject_key
from memstream.projections.claims import claim_turns, holds

if TYPE_CHECKING:
    from memstream.projections.memories import MemoryIndex, MemoryRecord

__all__ = [
    "KINDS",
    "MENTIONED_WITH",
    "EdgeDict",
    "EntityDict",
    "EntityFactDict",
    "GraphDict",
    "NodeDict",
    "entity",
    "entity_graph",
    "graph_of_records",
    "graph_rows",
    "name_key",
]

#: The relation of a co-mention edge.
MENTIONED_WITH = "mentioned with"
#: The kinds a node may have, in the order one wins when the evidence names several.
KINDS = ("user", "person", "pet", "organisation", "place", "project", "thing")
#: What a claim's attribute says its value is.
_VALUE_KINDS = {
    "home": "place", "whereabouts": "place", "work place": "place", "trip destination": "place",
    "moving plan": "place", "employer": "organisation", "car": "thing", "project": "project",
}
#: Relations by which a user names people (the extractor's own list: `claim_words.py`).
_RELATIONS = frozenset({
    "best friend", "sister", "brother", "mom", "mum", "mother", "dad", "father", "wife",
    "husband", "partner", "girlfriend", "boyfriend", "fiance", "fiancé", "fiancee", "fiancée",
    "son", "daughter", "kid", "child", "friend", "boss", "manager", "roommate", "flatmate",
    "cousin", "aunt", "uncle", "grandma", "grandmother", "grandpa", "grandfather", "niece",
    "nephew", "colleague", "coworker", "co-worker", "neighbor", "neighbour", "twin", "sibling",
    "stepmom", "stepdad",
})
_ANIMALS = frozenset({
    "dog", "cat", "puppy", "kitten", "rabbit", "bunny", "hamster", "bird", "parrot", "fish",
    "horse", "turtle", "tortoise",
})
#: "<owner>'s <relation> <Name>": a person named by relation and by name at once.
_NAMED_RELATION = re.compile(
    r"^(?P<description>.+?'s(?:\s+[a-z][\w-]*)+)\s+(?P<name>[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)$"
)
_POSSESSIVE_END = re.compile(r"'s$")


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
    edges by source, target, relation, then validity and memory ids."""

    as_of: str | None
    nodes: list[NodeDict]
    edges: list[EdgeDict]


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
    name): its node, the entities it has an edge with, its facts and its edges."""

    name: str
    as_of: str | None
    entity: NodeDict | None
    neighbours: list[str]
    facts: list[EntityFactDict]
    edges: list[EdgeDict]


# A graph asks the key of the same few names again and again (every mention of each).
@lru_cache(maxsize=65_536)
def name_key(name: str) -> str:
    """A name in its normal form: case, punctuation and a trailing possessive aside, "my"
    as the user's.

    Examples
    --------
    >>> name_key("Ana's"), name_key("User's  Sister"), name_key("my sister"), name_key("A.N.A!")
    ('ana', "user's sister", "user's sister", 'a n a')
    """
    key = _POSSESSIVE_END.sub("", subject_key(name))
    if key.startswith("my "):
        key = "user's " + key[3:]
    return key


def entity_graph(
    projection: MemoryIndex, user_id: str, as_of: datetime | None = None
) -> GraphDict:
    """The entity graph of ``user_id`` now, or at ``as_of`` (see the module's docstring)."""
    return graph_of_records(projection.list_memories(user_id, include_inactive=True), as_of)


def graph_of_records(records: Iterable[MemoryRecord], as_of: datetime | None = None) -> GraphDict:
    """The entity graph of one user's memory rows (every status), now or at ``as_of``."""
    graph = _Graph.read(records, as_of)
    return {
        "as_of": _iso(as_of),
        "nodes": [graph.node_dict(n) for n in graph.ordered_nodes()],
        "edges": graph.edges,
    }


def graph_rows(
    records: Iterable[MemoryRecord], user_id: str, as_of: datetime | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of the analytics views ``entity_nodes`` and ``entity_edges`` for one user:
    the graph :func:`graph_of_records` gives, node for node and edge for edge, with the
    user's id, each node's key (its normal form) and when its memories were recorded
    (first and last), and each edge's times as datetimes.

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
    projection: MemoryIndex, user_id: str, name: str, as_of: datetime | None = None
) -> EntityDict:
    """The entity of ``user_id``'s graph that ``name`` names (by any of its names, in normal
    form), with its neighbours, its facts (the claims about it) and its edges; ``entity``
    None when no entity has that name."""
    graph = _Graph.read(projection.list_memories(user_id, include_inactive=True), as_of)
    node = graph.node_of.get(name_key(name))
    if node is None or node not in graph.names:
        return {"name": name, "as_of": _iso(as_of), "entity": None, "neighbours": [],
                "facts": [], "edges": []}
    shown = graph.names[node]
    edges = [e for e in graph.edges if shown in (e["source"], e["target"])]
    neighbours = {e["target"] if e["source"] == shown else e["source"] for e in edges}
    return {
        "name": name,
        "as_of": _iso(as_of),
        "entity": graph.node_dict(node),
        "neighbours": sorted(neighbours - {shown}, key=_name_order),
        "facts": graph.facts.get(node, []),
        "edges": edges,
    }


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
        node_of, described = _resolve(claims)
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
            self._mention(claim.subject, record, _subject_kind(claim.subject))
            if _is_entity(claim.value):
                self._mention(claim.value, record, _value_kind(claim.attribute))
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
            if not claim.polarity or not _is_entity(claim.value):
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


def _resolve(claims: Sequence[MemoryRecord]) -> tuple[dict[str, str], dict[str, str]]:
    """Descriptions to the key of the one name each was given, if exactly one (see the
    module's docstring), and how each such description was first spelt; every other key is
    its own node, added as the graph reads it."""
    given: dict[str, dict[str, None]] = {}  # description key -> name keys, in order
    spelt: dict[str, str] = {}
    for record in claims:
        claim = record.claim
        assert claim is not None
        named = _NAMED_RELATION.match(" ".join(claim.subject.split()))
        pairs: list[tuple[str, str]] = []
        if named:
            pairs += [(named["description"], named["name"]), (claim.subject, named["name"])]
        description = _described(claim.subject, claim.attribute)
        if description and claim.polarity and _is_entity(claim.value):
            pairs.append((description, claim.value))
        for spelling, name in pairs:
            key = name_key(spelling)
            given.setdefault(key, {})[name_key(name)] = None
            spelt.setdefault(key, " ".join(spelling.split()))
    one_name: dict[str, str] = {}
    for description, names in given.items():
        (name, *others) = names
        if not others and name and description and name != "user" and description != name:
            one_name[description] = name
    # A name may itself be a description named in turn ("User's partner" is "User's
    # sister", who is "Ana"): each to the end of its chain; a cycle joins nothing.
    node_of = {description: _end_of_chain(description, one_name) for description in one_name}
    node_of = {key: node for key, node in node_of.items() if key != node}
    return node_of, {k: spelt[k] for k in node_of}


def _end_of_chain(start: str, named: dict[str, str]) -> str:
    """The name at the end of ``start``'s chain of names; ``start`` itself in a cycle."""
    key, seen = start, {start}
    while key in named:
        key = named[key]
        if key in seen:
            return start
        seen.add(key)
    return key


def _described(subject: str, attribute: str) -> str | None:
    """The description a claim gives a name to, if it does: "User"'s "sister" (or
    "sister's name") is "User's sister"; "User's sister"'s "name" is "User's sister"."""
    key = subject_key(attribute)
    words = key.split()
    if words and words[-1] == "name":
        relation = _POSSESSIVE_END.sub("", " ".join(words[:-1])).strip()
    elif key in _RELATIONS:
        relation = key
    else:
        return None
    if not relation or name_key(subject).endswith(f"'s {relation}"):
        return subject
    return f"{subject}'s {relation}"


def _subject_kind(subject: str) -> str | None:
    key = name_key(subject)
    if key == "user":
        return "user"
    if "'s " in key:
        relation = key.rsplit("'s ", 1)[1]
        if relation in _ANIMALS:
            return "pet"
        return "person" if relation.split()[0] in _RELATIONS or relation in _RELATIONS else None
    return None


def _value_kind(attribute: str) -> str | None:
    key = subject_key(attribute)
    if key in _RELATIONS:
        return "person"
    if key.endswith(" name") and _POSSESSIVE_END.sub("", key.removesuffix(" name")) in _ANIMALS:
        return "pet"
    if "project" in key.split():
        return "project"
    return _VALUE_KINDS.get(key)


def _is_entity(value: str) -> bool:
    """Whether a claim's value names an entity: a name ("Acme", "New York"), capitalised
    as the extractor takes names; not a phrase like "a dog" or "window"."""
    text = value.strip()
    return bool(text) and len(text) <= 200 and text[0].isupper()


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
