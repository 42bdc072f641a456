"""What the MCP tool memory_entity answers with: one entity of the user's graph, its facts and
its relations, each with its sources, named by the caller's own user id and cut to fit a
model's context window as the other answers are (:mod:`memstream.streams.mcp.results`), and
first to the tool's ``limit`` of neighbours, facts and relations (the service's choice)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from memstream.projections.entity_graph import ENTITY_LIMIT, MAX_ENTITY_LIMIT
from memstream.streams.mcp.results import Limits, _Answer, _Cuts
from memstream.streams.service.results import EntityDict

__all__ = ["ENTITY_LIMIT", "EntityAnswer", "EntityFact", "EntityLimit", "EntityRelation",
           "entity_answer"]

#: The tool's ``limit`` argument, checked as the HTTP API checks it.
EntityLimit = Annotated[
    int,
    Field(
        ge=1, le=MAX_ENTITY_LIMIT,
        description="The most neighbours, facts and relations (each): the most mentioned "
        "neighbours, the facts that hold, then the latest.",
    ),
]

#: The most memories, turns or sessions one node, fact or relation lists.
_SOURCES = 20


class EntityFact(_Answer):
    """A claim about the entity: attribute and value (``polarity`` False: not so), from
    ``valid_from`` until ``valid_until`` (None: not ended), whether it ``holds`` at the time
    asked, the statement, its memory and the turns (event ids) that stated it."""

    attribute: str
    value: str
    polarity: bool
    valid_from: str
    valid_until: str | None
    holds: bool
    statement: str
    memory_id: str
    turns: list[str]


class EntityRelation(_Answer):
    """A relation of the entity: ``source``'s ``relation`` is ``target`` (a claim, with its
    validity), or both named in one memory (``relation`` "mentioned with"), with the
    memories, turns and sessions it comes from."""

    source: str
    relation: str
    target: str
    kind: str
    valid_from: str
    valid_until: str | None
    holds: bool
    memory_ids: list[str]
    turns: list[str]
    sessions: list[str]


class EntityAnswer(_Answer):
    """One entity (``found`` False when no entity has the name asked): its name, kind, the
    other names it was given, the memories, turns and sessions that name it, its neighbours,
    facts and relations, and how many of each it has (``total_*``: the limit may keep
    fewer)."""

    user_id: str
    asked: str
    as_of: str | None
    found: bool
    name: str | None
    kind: str | None
    aliases: list[str]
    memory_ids: list[str]
    turns: list[str]
    sessions: list[str]
    neighbours: list[str]
    facts: list[EntityFact]
    relations: list[EntityRelation]
    total_neighbours: int
    total_facts: int
    total_relations: int
    note: str | None


def entity_answer(user_id: str, found: EntityDict, limits: Limits) -> EntityAnswer:
    """An entity as an answer within ``limits``: its facts, then its relations, those that
    fit, each text cut and each list of sources its first few."""
    cuts = _Cuts(what="facts or relations")
    node = found["entity"]
    if found["truncated"]:
        cuts.others.append(
            f"the limit kept {len(found['neighbours'])} of {found['total_neighbours']} "
            f"neighbours, {len(found['facts'])} of {found['total_facts']} facts and "
            f"{len(found['edges'])} of {found['total_edges']} relations"
        )
        cuts.hints.append(f"a higher limit (at most {MAX_ENTITY_LIMIT}) shows more")
    facts = [
        EntityFact(
            attribute=fact["attribute"],
            value=cuts.cut(fact["value"], limits.memory_chars),
            polarity=fact["polarity"],
            valid_from=fact["valid_from"],
            valid_until=fact["valid_until"],
            holds=fact["holds"],
            statement=cuts.cut(fact["statement"], limits.memory_chars),
            memory_id=fact["memory_id"],
            turns=fact["turns"][:_SOURCES],
        )
        for fact in found["facts"]
    ]
    relations = [
        EntityRelation(
            source=cuts.cut(edge["source"], limits.memory_chars),
            relation=cuts.cut(edge["relation"], limits.memory_chars),
            target=cuts.cut(edge["target"], limits.memory_chars),
            kind=edge["kind"],
            valid_from=edge["valid_from"],
            valid_until=edge["valid_until"],
            holds=edge["holds"],
            memory_ids=edge["memory_ids"][:_SOURCES],
            turns=edge["turns"][:_SOURCES],
            sessions=edge["sessions"][:_SOURCES],
        )
        for edge in found["edges"]
    ]
    budget = limits.result_chars // 2
    kept_facts = cuts.fit(facts, budget)
    kept_relations = cuts.fit(relations, budget)
    note = cuts.note(limits)
    if node is None:
        note = "No entity of the user's memories has that name: try another of its names."
    return EntityAnswer(
        user_id=user_id,
        asked=cuts.cut(found["name"], limits.memory_chars),
        as_of=found["as_of"],
        found=node is not None,
        name=node["name"] if node else None,
        kind=node["kind"] if node else None,
        aliases=node["aliases"][:_SOURCES] if node else [],
        memory_ids=node["memory_ids"][:_SOURCES] if node else [],
        turns=node["turns"][:_SOURCES] if node else [],
        sessions=node["sessions"][:_SOURCES] if node else [],
        neighbours=found["neighbours"][:_SOURCES],
        facts=kept_facts,
        relations=kept_relations,
        total_neighbours=found["total_neighbours"],
        total_facts=found["total_facts"],
        total_relations=found["total_edges"],
        note=note,
    )
