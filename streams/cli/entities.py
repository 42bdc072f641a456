"""``memstream entity`` and ``graph``: one user's entity graph, through the service: the
entities their memories name, the relations between them, and one entity's neighbours and
facts, each with the memories it comes from."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memstream.streams.cli.answers import print_answer

if TYPE_CHECKING:
    from memstream.streams.service.container import Container
    from memstream.streams.service.results import EdgeDict, EntityDict, GraphDict, NodeDict


def _day(iso: str) -> str:
    return f"{datetime.fromisoformat(iso).astimezone(UTC):%Y-%m-%d}"


def node_line(node: NodeDict) -> str:
    """An entity on one line: its name, kind, other names and how many memories name it.

    Examples
    --------
    >>> node_line({"name": "Ana", "kind": "person", "aliases": ["User's sister"],
    ...     "memory_ids": ["m-1", "m-2"], "turns": [], "sessions": ["s1", "s2"]})
    "Ana (person) · also User's sister · 2 memories in 2 sessions"
    """
    kind = f" ({node['kind']})" if node["kind"] else ""
    also = f" · also {', '.join(node['aliases'])}" if node["aliases"] else ""
    count = len(node["memory_ids"])
    return (
        f"{node['name']}{kind}{also} · {count} memor{'y' if count == 1 else 'ies'}"
        f" in {len(node['sessions'])} session{'' if len(node['sessions']) == 1 else 's'}"
    )


def edge_line(edge: EdgeDict) -> str:
    """A relation on one line: source, relation, target, when it held, its first memory.

    Examples
    --------
    >>> edge_line({"source": "User", "target": "Berlin", "relation": "home", "kind": "claim",
    ...     "valid_from": "2026-03-01T09:00:00+00:00",
    ...     "valid_until": "2026-04-02T09:00:00+00:00", "holds": False,
    ...     "memory_ids": ["m-1"], "turns": ["e-1"], "sessions": ["s1"]})
    'User --home--> Berlin (2026-03-01 to 2026-04-02, ended) · m-1'
    """
    if edge["kind"] == "co-mention":
        count = len(edge["memory_ids"])
        return (
            f"{edge['source']} -- {edge['relation']} -- {edge['target']}"
            f" · {count} memor{'y' if count == 1 else 'ies'}"
        )
    since = _day(edge["valid_from"])
    if edge["valid_until"] is not None:
        when = f"{since} to {_day(edge['valid_until'])}"
    else:
        when = f"since {since}"
    state = "" if edge["holds"] else ", ended"
    return (
        f"{edge['source']} --{edge['relation']}--> {edge['target']} ({when}{state})"
        f" · {edge['memory_ids'][0]}"
    )


def _count(shown: int, total: int) -> str:
    """How many are shown: "3", or "200 of 1,234" when the limit left some out.

    Examples
    --------
    >>> _count(3, 3), _count(200, 1234)
    ('3', '200 of 1,234')
    """
    return f"{shown:,}" if shown == total else f"{shown:,} of {total:,}"


def graph_lines(found: GraphDict) -> list[str]:
    """``memstream graph``'s lines: the entities, then the relations (with their totals when
    the limit left some out)."""
    when = f"as of {found['as_of']}" if found["as_of"] else "now"
    if not found["nodes"]:
        return [f"no entities {when}: nothing named yet"]
    lines = [f"entities {when} ({_count(len(found['nodes']), found['total_nodes'])}):"]
    lines += [f"  {node_line(node)}" for node in found["nodes"]]
    lines.append(f"relations ({_count(len(found['edges']), found['total_edges'])}):")
    lines += [f"  {edge_line(edge)}" for edge in found["edges"]]
    if found["truncated"]:
        lines.append("(the most mentioned entities and the relations among them: --limit for more)")
    return lines


def entity_lines(found: EntityDict) -> list[str]:
    """``memstream entity``'s lines: the entity, its facts, its relations."""
    when = f"as of {found['as_of']}" if found["as_of"] else "now"
    node = found["entity"]
    if node is None:
        return [f"no entity named {found['name']!r} {when}"]
    lines = [node_line(node), f"facts ({_count(len(found['facts']), found['total_facts'])}):"]
    for fact in found["facts"]:
        value = fact["value"] if fact["polarity"] else f"not {fact['value']}"
        until = f" to {_day(fact['valid_until'])}" if fact["valid_until"] else ""
        state = "" if fact["holds"] else ", ended"
        lines.append(
            f"  {fact['attribute'] or '-'}: {value}"
            f" ({_day(fact['valid_from'])}{until}{state}) · {fact['memory_id']}"
        )
    lines.append(f"relations ({_count(len(found['edges']), found['total_edges'])}):")
    lines += [f"  {edge_line(edge)}" for edge in found["edges"]]
    if found["truncated"]:
        shown = _count(len(found["neighbours"]), found["total_neighbours"])
        lines.append(f"(neighbours: {shown}; --limit for more)")
    return lines


def cmd_graph(args: argparse.Namespace, container: Container) -> int:
    """Show a user's entity graph now (or as of a past time): the people, places and things
    their memories name, and the relations between them."""
    return print_answer(
        container,
        lambda client: client.graph(user_id=args.user, as_of=args.as_of, limit=args.limit),
        graph_lines,
        args.json,
    )


def cmd_entity(args: argparse.Namespace, container: Container) -> int:
    """Show one entity of a user's graph by any of its names: its facts and relations."""
    return print_answer(
        container,
        lambda client: client.entity(
            args.name, user_id=args.user, as_of=args.as_of, limit=args.limit
        ),
        entity_lines,
        args.json,
    )
