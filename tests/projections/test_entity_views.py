"""The entity graph in DuckDB SQL: the views ``entity_nodes`` and ``entity_edges`` and the
``graph`` report, on a real LanceDB projection of the graph tests' log (``entity_log``),
against the graph the API serves from the same table."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from entity_log import JOB_AT, MOVED_AT, SAID_AT, the_log
from fakes import FakeEmbedder

from memstream.models.settings import Settings
from memstream.models.topics import Topics
from memstream.projections.analytics import REPORTS, Scope, run_report, run_sql
from memstream.projections.entity_graph import GraphDict, entity_graph
from memstream.projections.memories import PartitionedMemories, SourcePosition

NODE_SQL = "SELECT * FROM entity_nodes ORDER BY user_id, name"
EDGE_SQL = "SELECT * FROM entity_edges"


@pytest.fixture
def projected(tmp_path: Path) -> tuple[Settings, PartitionedMemories]:
    """Settings whose live projection holds :func:`the_log` (one partition)."""
    settings = Settings(data_dir=tmp_path / "data", partitions=1)
    projection = PartitionedMemories.from_settings(settings, FakeEmbedder())
    topic = Topics.from_settings(settings).memories
    projection.apply([(e, SourcePosition(topic, 0, n)) for n, e in enumerate(the_log())])
    return settings, projection


def as_api(rows: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The view's rows in the API's shape: its keys, times as ISO text."""
    if kind == "nodes":
        keys = ("name", "kind", "aliases", "memory_ids", "turns", "sessions")
        return [{k: r[k] for k in keys} for r in rows]
    return [
        {
            "source": r["source"], "target": r["target"], "relation": r["relation"],
            "kind": r["kind"], "valid_from": r["valid_from"].isoformat(),
            "valid_until": r["valid_until"] and r["valid_until"].isoformat(),
            "holds": r["holds"], "memory_ids": r["memory_ids"], "turns": r["turns"],
            "sessions": r["sessions"],
        }
        for r in rows
    ]


def sql_graph(settings: Settings, user: str, now: datetime | None = None) -> GraphDict:
    scope = Scope(user_id=user, now=now)
    nodes = run_sql(settings, "SELECT * FROM entity_nodes", scope).to_pylist()
    edges = run_sql(settings, EDGE_SQL, scope).to_pylist()
    assert {r["user_id"] for r in nodes + edges} <= {user}
    return {"as_of": None, "nodes": as_api(nodes, "nodes"), "edges": as_api(edges, "edges")}


def test_the_views_hold_the_graph_the_api_serves_at_each_moment(
    projected: tuple[Settings, PartitionedMemories],
) -> None:
    settings, projection = projected
    for user in ("lee", "kim", "nobody"):
        for moment in (None, SAID_AT, JOB_AT, MOVED_AT - timedelta(hours=1), MOVED_AT):
            served = entity_graph(projection, user, moment)
            found = sql_graph(settings, user, moment)
            assert (found["nodes"], found["edges"]) == (served["nodes"], served["edges"]), (
                user, moment)
    # Unscoped, every user's rows, each user's graph as the API serves it.
    everyone = run_sql(settings, NODE_SQL).to_pylist()
    assert [r["user_id"] for r in everyone] == ["kim"] * 3 + ["lee"] * 5
    lee = [r for r in everyone if r["user_id"] == "lee"]
    assert [r["name"] for r in lee] == ["Acme", "Ana", "Berlin", "Porto", "User"]
    ana = next(r for r in lee if r["name"] == "Ana")
    assert (ana["entity_key"], ana["aliases"], ana["mentions"]) == ("ana", ["User's sister"], 5)
    assert (ana["first_seen"], ana["last_seen"]) == (SAID_AT, datetime(2026, 3, 9, 12, 0,
                                                                       tzinfo=SAID_AT.tzinfo))


def test_one_users_views_never_hold_another_users_entities(
    projected: tuple[Settings, PartitionedMemories],
) -> None:
    settings, _ = projected
    kim = Scope(user_id="kim")
    names = run_sql(settings, "SELECT list(name ORDER BY name) AS n FROM entity_nodes", kim)
    assert names.to_pylist() == [{"n": ["Oslo", "User", "Zed"]}]
    edges = run_sql(settings, "SELECT DISTINCT user_id FROM entity_edges", kim).to_pylist()
    assert edges == [{"user_id": "kim"}]
    for query in (
        "SELECT count(*) AS n FROM entity_nodes WHERE name IN ('Ana', 'Acme', 'Porto')",
        "SELECT count(*) AS n FROM entity_edges WHERE user_id = 'lee'",
    ):
        assert run_sql(settings, query, kim).to_pylist() == [{"n": 0}]
    nobody = Scope(user_id="x' OR 1=1 --")
    assert run_sql(settings, "SELECT count(*) AS n FROM entity_edges", nobody
                   ).to_pylist() == [{"n": 0}]


def test_an_ended_edge_has_its_valid_until_and_the_current_one_none(
    projected: tuple[Settings, PartitionedMemories],
) -> None:
    settings, _ = projected
    homes = run_sql(
        settings,
        "SELECT source, target, valid_from, valid_until, ended, holds FROM entity_edges "
        "WHERE relation = 'home' AND user_id = 'lee' ORDER BY valid_from",
    ).to_pylist()
    assert homes == [
        {"source": "User", "target": "Berlin", "valid_from": SAID_AT, "valid_until": MOVED_AT,
         "ended": True, "holds": False},
        {"source": "User", "target": "Porto", "valid_from": MOVED_AT, "valid_until": None,
         "ended": False, "holds": True},
    ]
    # At --now before the move, Berlin held and Porto was not yet known.
    before = run_sql(
        settings, "SELECT target, ended, holds FROM entity_edges WHERE relation = 'home'",
        Scope(user_id="lee", now=MOVED_AT - timedelta(days=1)),
    ).to_pylist()
    assert before == [{"target": "Berlin", "ended": False, "holds": True}]
    # --since keeps the relations that began then or later.
    since = run_sql(settings, "SELECT target FROM entity_edges WHERE relation = 'home'",
                    Scope(user_id="lee", since=MOVED_AT)).to_pylist()
    assert since == [{"target": "Porto"}]


def test_the_graph_report_counts_each_users_entities_and_relations(
    projected: tuple[Settings, PartitionedMemories],
) -> None:
    settings, projection = projected
    assert "graph" in REPORTS
    rows = run_report(settings, "graph").table.to_pylist()
    assert [r["user_id"] for r in rows] == ["kim", "lee"]
    for row in rows:
        served = entity_graph(projection, row["user_id"])
        claims = [e for e in served["edges"] if e["kind"] == "claim"]
        assert row["entities"] == len(served["nodes"])
        assert row["relations"] == len(claims)
        assert row["current_relations"] == sum(e["holds"] for e in claims)
        assert row["ended_relations"] == sum(e["valid_until"] is not None for e in claims)
        assert row["co_mentions"] == len(served["edges"]) - len(claims)
    lee = rows[1]
    assert lee["ended_relations"] == 1  # Berlin
    # Ana: the sister and employer claims, and her co-mentions with Acme and the user.
    assert lee["most_connected"][0].startswith("Ana (")
    mine = run_report(settings, "graph", Scope(user_id="kim")).table.to_pylist()
    assert mine == [rows[0]]
