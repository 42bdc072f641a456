"""A user's entity graph (``service.memories.graph`` and ``entity``), on a real LanceDB table:
names resolved across sessions, claim edges with their validity, co-mentions, one user's
only, the same after a replay, and hostile names harmless.

Lee said "my sister Ana is visiting" and "I live in Berlin" in session s1 (1 March), "Ana got
a new job at Acme" in s2 (5 March), had lunch with "ANA's" team in s3, and moved to Porto in
s4 (2 April; the Berlin fact superseded, as the decider does). Kim lives in Oslo and knows Zed.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from entity_log import JOB_AT, MOVED_AT, SAID_AT, claimed, said, the_log
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from projected import projected, service_over
from pydantic import ValidationError

from memstream.models.events.memory import MemoryAdded, MemoryChange, MemorySuperseded
from memstream.projections.entity_graph import entity, entity_graph, name_key
from memstream.streams.service.app import Service
from memstream.streams.service.results import EdgeDict, GraphDict


@pytest.fixture
def service(tmp_path: Path) -> Service:
    """The service over a real LanceDB projection of :func:`the_log`, one event at a time."""
    return service_over(tmp_path, the_log())


def claim_edges(graph: GraphDict, relation: str) -> list[tuple[str, str, bool, str | None]]:
    """(source, target, holds, valid_until) of the claim edges of ``relation``."""
    return [
        (e["source"], e["target"], e["holds"], e["valid_until"])
        for e in graph["edges"] if e["kind"] == "claim" and e["relation"] == relation
    ]


def edge(graph: GraphDict, source: str, target: str, relation: str) -> EdgeDict:
    (found,) = [
        e for e in graph["edges"]
        if (e["source"], e["target"], e["relation"]) == (source, target, relation)
    ]
    return found


async def test_my_sister_ana_and_ana_at_acme_are_one_node_across_sessions(
    service: Service,
) -> None:
    graph = await service.memories.graph(user_id="lee")
    assert [(n["name"], n["kind"]) for n in graph["nodes"]] == [
        ("User", "user"), ("Acme", "organisation"), ("Ana", "person"), ("Berlin", "place"),
        ("Porto", "place"),
    ]
    ana = graph["nodes"][2]
    assert ana["aliases"] == ["User's sister"]
    assert ana["sessions"] == ["s1", "s2", "s3"]  # "Ana", "Ana got a job", "ANA's team"
    assert ana["memory_ids"] == [
        "lee-said-sister", "lee-sister", "lee-ana-acme", "lee-said-job", "lee-lunch"
    ]
    job = edge(graph, "Ana", "Acme", "employer")
    assert job == {
        "source": "Ana", "target": "Acme", "relation": "employer", "kind": "claim",
        "valid_from": JOB_AT.isoformat(), "valid_until": None, "holds": True,
        "memory_ids": ["lee-ana-acme", "lee-said-job"],
        "turns": ["m-lee-ana-acme", "m-lee-said-job"], "sessions": ["s2"],
    }
    sister = edge(graph, "User", "Ana", "sister")
    assert (sister["sessions"], sister["holds"]) == (["s1"], True)
    # Named together in one memory, twice in s2: one co-mention edge with both memories
    # (the episode's entities left "Ana" out; its text says the name, known from s1).
    together = edge(graph, "Acme", "Ana", "mentioned with")
    assert together["memory_ids"] == ["lee-ana-acme", "lee-said-job"]

    # The entity by any of its names: its neighbours, facts and edges, with sources.
    for asked in ("Ana", "ana's", "user's  SISTER", "my sister"):
        found = await service.memories.entity(asked, user_id="lee")
        assert found["entity"] == ana, asked
    found = await service.memories.entity("Ana", user_id="lee")
    assert found["neighbours"] == ["User", "Acme"]
    assert [(f["attribute"], f["value"], f["holds"]) for f in found["facts"]] == [
        ("employer", "Acme", True)
    ]
    assert found["facts"][0]["turns"] == ["m-lee-ana-acme", "m-lee-said-job"]
    assert job in found["edges"] and sister in found["edges"]
    nobody = await service.memories.entity("Bea", user_id="lee")
    assert (nobody["entity"], nobody["edges"], nobody["facts"]) == (None, [], [])


async def test_a_moved_home_is_a_current_edge_to_porto_and_berlin_before(
    service: Service,
) -> None:
    now = await service.memories.graph(user_id="lee")
    assert claim_edges(now, "home") == [
        ("User", "Berlin", False, MOVED_AT.isoformat()),
        ("User", "Porto", True, None),
    ]
    before = await service.memories.graph(user_id="lee", as_of=MOVED_AT - timedelta(days=1))
    assert claim_edges(before, "home") == [("User", "Berlin", True, None)]
    assert "Porto" not in [n["name"] for n in before["nodes"]]
    assert before["as_of"] == (MOVED_AT - timedelta(days=1)).isoformat()
    # Before Ana's job was said, Ana had no employer and Acme was no one's neighbour.
    early = await service.memories.entity("Ana", user_id="lee", as_of=SAID_AT)
    assert early["neighbours"] == ["User"] and early["facts"] == []
    # The user's facts hold the move: Porto now, Berlin then.
    user = await service.memories.entity("user", user_id="lee")
    assert [(f["value"], f["holds"]) for f in user["facts"] if f["attribute"] == "home"] == [
        ("Berlin", False), ("Porto", True)
    ]
    empty = await service.memories.graph(user_id="lee", as_of=SAID_AT - timedelta(seconds=1))
    assert (empty["nodes"], empty["edges"]) == ([], [])


async def test_another_users_graph_never_shows_this_users_entities(service: Service) -> None:
    kim = await service.memories.graph(user_id="kim")
    assert [n["name"] for n in kim["nodes"]] == ["User", "Oslo", "Zed"]
    assert [(e["source"], e["target"], e["relation"]) for e in kim["edges"]] == [
        ("User", "Oslo", "home"), ("Oslo", "Zed", "mentioned with")
    ]
    assert (await service.memories.entity("Ana", user_id="kim"))["entity"] is None
    nobody = await service.memories.graph(user_id="nobody")
    assert (nobody["nodes"], nobody["edges"]) == ([], [])
    for name in ("", "   ", "x" * 201):
        with pytest.raises(ValueError, match="name"):
            await service.memories.entity(name, user_id="lee")
    with pytest.raises(ValueError, match="as_of"):
        await service.memories.graph(user_id="lee", as_of=datetime(2026, 3, 1))
    with pytest.raises(TypeError):
        await service.memories.entity(3, user_id="lee")  # type: ignore[arg-type]


def test_a_replayed_projection_has_the_same_graph(tmp_path: Path) -> None:
    # Live: one event at a time, as the projector applies them; replayed: the whole log in
    # one batch into a fresh table, as a replay does.
    live = projected(tmp_path / "live", the_log(), batch=1)
    replayed = projected(tmp_path / "replayed", the_log(), batch=len(the_log()))
    moments = [None, SAID_AT, JOB_AT, MOVED_AT - timedelta(hours=1), MOVED_AT]
    for user in ("lee", "kim"):
        for moment in moments:
            assert entity_graph(replayed, user, moment) == entity_graph(live, user, moment)
            for name in ("Ana", "User", "Oslo"):
                assert entity(replayed, user, name, moment) == entity(live, user, name, moment)
    assert claim_edges(entity_graph(replayed, "lee"), "home")[-1] == (
        "User", "Porto", True, None
    )


def test_names_are_resolved_by_their_normal_form() -> None:
    assert name_key("Ana") == name_key("ANA's") == name_key(" ana. ") == "ana"
    assert name_key("User's  Sister") == name_key("my sister") == "user's sister"
    assert name_key("!?") == name_key("") == ""


_NAMES = st.text(min_size=1, max_size=40).filter(lambda s: s.strip())


@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(_NAMES, min_size=1, max_size=4), asked=_NAMES)
def test_hostile_names_never_raise_and_never_leak_across_users(
    names: list[str], asked: str
) -> None:
    try:
        events: list[MemoryAdded | MemoryChange] = [
            said("eve-1", "eve", "e1", " ".join(names), SAID_AT, tuple(names)),
            claimed("eve-2", "eve", "e2", "claim", JOB_AT, (names[0], names[-1], names[-1]),
                    tuple(names)),
            claimed("eve-3", "eve", "e2", "claim", JOB_AT, (names[-1], "name", names[0])),
            said("bob-1", "bob", "b1", "Bob's secret Quux", SAID_AT, ("Quux", "Bob")),
        ]
    except ValidationError:
        return  # a claim the event schema refuses is never in the log
    with tempfile.TemporaryDirectory() as directory:
        projection = projected(Path(directory), events, batch=len(events))
        graph = entity_graph(projection, "eve")
        bob = entity_graph(projection, "bob")
        for name in [*names, asked, "Quux", "Bob"]:
            entity(projection, "eve", name)
            entity(projection, "eve", name, SAID_AT)
        assert (entity(projection, "eve", "Quux")["entity"] is None) == (
            name_key("Quux") not in {name_key(n) for n in names}
        )
    eve_names = {n["name"] for n in graph["nodes"]} | {
        a for n in graph["nodes"] for a in n["aliases"]
    }
    assert "Bob's secret Quux" not in str(graph)
    assert {name_key(n) for n in eve_names} <= {name_key(n) for n in names} | {"user"}
    assert {n["name"] for n in bob["nodes"]} == {"Bob", "Quux"}
    assert all(m.startswith("eve-") for n in graph["nodes"] for m in n["memory_ids"])


def test_names_given_in_a_chain_join_and_in_a_cycle_do_not(tmp_path: Path) -> None:
    chain = [
        claimed("c-1", "ivy", "i1", "x", SAID_AT, ("User", "partner", "User's sister")),
        claimed("c-2", "ivy", "i1", "x", SAID_AT, ("User", "sister", "Ana")),
        claimed("c-3", "ivy", "i1", "x", SAID_AT, ("Ana", "employer", "Acme")),
        # "User's friend" is given two names: it joins neither.
        claimed("c-4", "ivy", "i2", "x", JOB_AT, ("User", "friend", "Bo")),
        claimed("c-5", "ivy", "i2", "x", JOB_AT, ("User", "friend", "Cy")),
        # Each description the other's name: a cycle, nothing joined.
        claimed("c-6", "ivy", "i3", "x", JOB_AT, ("Max", "name", "Rex")),
        claimed("c-7", "ivy", "i3", "x", JOB_AT, ("Rex", "name", "Max")),
    ]
    projection = projected(tmp_path / "chain", chain, batch=len(chain))
    graph = entity_graph(projection, "ivy")
    names = {n["name"]: n["aliases"] for n in graph["nodes"]}
    assert names["Ana"] == ["User's partner", "User's sister"]
    assert "User's friend" not in str(graph) and {"Bo", "Cy", "Max", "Rex"} <= set(names)
    for asked in ("user's partner", "my sister", "ana"):
        assert entity(projection, "ivy", asked)["entity"]["name"] == "Ana"  # type: ignore[index]
    assert entity(projection, "ivy", "my friend")["entity"] is None
    assert entity(projection, "ivy", "Max")["entity"]["name"] == "Max"  # type: ignore[index]


def test_an_erased_user_has_no_graph_and_the_others_keep_theirs(tmp_path: Path) -> None:
    projection = projected(tmp_path / "erased", the_log(), batch=len(the_log()))
    kim = entity_graph(projection, "kim")
    assert projection.erase_user("lee") > 0  # as memstream erase removes the rows
    erased = entity_graph(projection, "lee")
    assert (erased["nodes"], erased["edges"]) == ([], [])
    assert entity(projection, "lee", "Ana")["entity"] is None
    assert entity_graph(projection, "kim") == kim


def crowd(user: str = "max") -> list[MemoryAdded | MemoryChange]:
    """Max names Zoe in three memories, Bob and Cal in two each (Bob and Cal each linked to
    two others), Dee (linked to Bob) and Eve (linked to no one) in one; lives with Cal;
    took up chess, then go (chess superseded), and drinks tea."""
    at = [SAID_AT + timedelta(hours=h) for h in range(10)]
    return [
        said(f"{user}-1", user, "c1", "a note", at[0], ("Zoe", "Bob")),
        said(f"{user}-2", user, "c1", "a note", at[1], ("Zoe", "Cal")),
        said(f"{user}-3", user, "c2", "a note", at[2], ("Zoe",)),
        said(f"{user}-4", user, "c2", "a note", at[3], ("Bob", "Dee")),
        claimed(f"{user}-home", user, "c3", "lives there", at[4], ("User", "home", "Cal"),
                ("Cal",)),
        said(f"{user}-6", user, "c3", "a note", at[5], ("Eve",)),
        claimed(f"{user}-chess", user, "c4", "plays chess", at[6], ("User", "hobby", "chess")),
        claimed(f"{user}-tea", user, "c4", "drinks tea", at[7], ("User", "drink", "tea")),
        claimed(f"{user}-go", user, "c5", "plays go", at[8], ("User", "hobby", "go")),
        MemorySuperseded(
            event_id=f"sup-{user}-chess", user_id=user, session_id="c5", occurred_at=at[8],
            memory_id=f"{user}-chess", superseded_by=f"{user}-go", reason="changed",
            similarity=0.8, change="updated", decided_by="rules", valid_until=at[8],
        ),
    ]


def test_a_bounded_graph_keeps_the_user_and_the_most_mentioned_and_their_edges(
    tmp_path: Path,
) -> None:
    projection = projected(tmp_path / "crowd", crowd(), batch=1)
    whole = entity_graph(projection, "max", limit=2_000)
    assert [n["name"] for n in whole["nodes"]] == ["User", "Bob", "Cal", "Dee", "Eve", "Zoe"]
    assert (whole["total_nodes"], whole["total_edges"], whole["truncated"]) == (6, 4, False)
    # The order kept: User, Zoe (3 memories), Bob and Cal (2 each, 2 edges each: by key),
    # Dee (1 memory, 1 edge), Eve (1 memory, no edge); listed User first, then by name.
    expected = [["User"], ["User", "Zoe"], ["User", "Bob", "Zoe"], ["User", "Bob", "Cal", "Zoe"],
                ["User", "Bob", "Cal", "Dee", "Zoe"], ["User", "Bob", "Cal", "Dee", "Eve", "Zoe"]]
    for limit, names in enumerate(expected, start=1):
        graph = entity_graph(projection, "max", limit=limit)
        assert [n["name"] for n in graph["nodes"]] == names, limit
        assert graph["nodes"] == [n for n in whole["nodes"] if n["name"] in names]
        assert graph["edges"] == [
            e for e in whole["edges"] if e["source"] in names and e["target"] in names
        ]
        assert (graph["total_nodes"], graph["total_edges"]) == (6, 4)
        assert graph["truncated"] == (limit < 6)
    three = entity_graph(projection, "max", limit=3)
    assert [(e["source"], e["target"]) for e in three["edges"]] == [("Bob", "Zoe")]
    # The same answer from a table written in one batch, and by default (200) the whole.
    replayed = projected(tmp_path / "replayed", crowd(), batch=len(crowd()))
    assert entity_graph(replayed, "max", limit=3) == three
    assert entity_graph(projection, "max") == whole
    for limit in (0, -1, 2_001):
        with pytest.raises(ValueError, match="limit must be between 1 and 2000"):
            entity_graph(projection, "max", limit=limit)


def test_a_bounded_entity_keeps_its_busiest_neighbours_and_current_facts(
    tmp_path: Path,
) -> None:
    projection = projected(tmp_path / "crowd", crowd(), batch=1)
    zoe = entity(projection, "max", "Zoe", limit=1)
    assert (zoe["neighbours"], zoe["total_neighbours"]) == (["Bob"], 2)  # Bob before Cal: key
    assert [(e["source"], e["target"]) for e in zoe["edges"]] == [("Bob", "Zoe")]
    assert (zoe["total_edges"], zoe["truncated"]) == (2, True)
    bob = entity(projection, "max", "Bob", limit=1)
    assert bob["neighbours"] == ["Zoe"]  # three memories name Zoe, one Dee
    # The user's facts: those that hold first (chess ended), then the latest; in their order.
    user = entity(projection, "max", "User", limit=2)
    assert [(f["value"], f["holds"]) for f in user["facts"]] == [("tea", True), ("go", True)]
    assert (user["total_facts"], user["truncated"]) == (4, True)
    whole = entity(projection, "max", "User")
    assert [f["value"] for f in whole["facts"]] == ["Cal", "chess", "tea", "go"]
    assert (whole["neighbours"], whole["truncated"]) == (["Cal"], False)
    assert entity(projection, "max", "Nobody", limit=1)["total_facts"] == 0


async def test_the_service_refuses_a_limit_out_of_range(service: Service) -> None:
    for limit in (0, 2_001):
        with pytest.raises(ValueError, match="limit must be between 1 and 2000"):
            await service.memories.graph(user_id="lee", limit=limit)
    with pytest.raises(ValueError, match="limit must be between 1 and 1000"):
        await service.memories.entity("Ana", user_id="lee", limit=1_001)
    with pytest.raises(TypeError, match="limit"):
        await service.memories.graph(user_id="lee", limit="5")  # type: ignore[arg-type]
    one = await service.memories.graph(user_id="lee", limit=1)
    assert ([n["name"] for n in one["nodes"]], one["edges"]) == (["User"], [])
    assert (one["total_nodes"], one["truncated"]) == (5, True)
