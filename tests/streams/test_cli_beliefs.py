"""The ``memstream`` command on a changed fact, without a broker: ``timeline``, ``profile``,
and the marks ``search`` and ``memories list|get`` put on what no longer holds.

Each command is parsed by the real parser and run on a container over the fakes (the user's
home changed from Berlin to Munich: :mod:`beliefs`), as ``main`` runs it on the real one.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from beliefs import BERLIN, BERLIN_SAID, MUNICH, moved_home, project
from fakes import memory_added, service_on_fakes, unit_settings

from memstream.projections.memories import SourcePosition
from memstream.streams.cli.command import build_parser
from memstream.streams.service.container import Container


@pytest.fixture
def container(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Container:
    """Ann's home changed; bo said nothing with a claim."""
    seeded = [memory_added("bo-tea", "bo", "Bo drinks green tea")]
    service, publisher, index = service_on_fakes(unit_settings(tmp_path), seeded, monkeypatch)
    topic = service.container.topics.memories
    asyncio.run(project(index, publisher, topic, moved_home("ann")))
    return service.container


def run(container: Container, *argv: str) -> int:
    """``memstream argv`` on ``container``: its exit status."""
    args = build_parser().parse_args(argv)
    return int(args.run(args, container))


def test_a_timeline_prints_one_line_per_value_oldest_first(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(container, "timeline", "--user", "ann", "where do I live") == 0
    assert capsys.readouterr().out.splitlines() == [
        "home of User, oldest first:",
        f"2026-03-01 → 2026-04-02  Berlin · User lives in Berlin · superseded by {MUNICH}",
        "2026-04-02 → now         Munich · User lives in Munich · active",
    ]
    assert run(container, "timeline", "--user", "ann", "home", "--subject", "User", "--json") == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["attribute"], [e["value"] for e in found["entries"]]) == (
        "home", ["Berlin", "Munich"]
    )
    assert found["entries"][0]["turns"] == [f"m-{BERLIN}", f"m-{BERLIN_SAID}"]


def test_a_timeline_of_nothing_says_so_and_bad_input_is_one_line(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(container, "timeline", "--user", "bo", "budget") == 0
    assert capsys.readouterr().out == "nothing the user said matches 'budget': try other words\n"
    assert run(container, "timeline", "--user", "bo", "budget", "--json") == 0
    assert json.loads(capsys.readouterr().out)["entries"] == []
    # Ann said where she lives and nothing of a salary: her home is no answer.
    assert run(container, "timeline", "--user", "ann", "salary") == 0
    assert capsys.readouterr().out == "nothing the user said matches 'salary': try other words\n"
    assert run(container, "timeline", "--user", "ann", "my salary over time", "--json") == 0
    assert json.loads(capsys.readouterr().out)["attribute"] is None
    for about in ("", "   ", "x" * 1001):
        assert run(container, "timeline", "--user", "ann", about) == 2
        said = capsys.readouterr()
        assert said.out == "" and said.err.startswith("error: about ")
        assert said.err.count("\n") == 1 and "Traceback" not in said.err


def test_search_marks_a_stale_hit_with_what_replaced_it(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(container, "search", "--user", "ann", "where does the user live") == 0
    lines = capsys.readouterr().out.splitlines()
    (munich,) = [line for line in lines if "User lives in Munich" in line]
    (said,) = [line for line in lines if "] I live in Berlin" in line]
    assert lines.index(munich) < lines.index(said)
    assert said.endswith(f"[stale since 2026-04-02, replaced by {MUNICH}]")
    assert "stale" not in munich
    assert run(container, "search", "--user", "ann", "where does the user live", "--json") == 0
    hits = {hit["memory_id"]: hit for hit in json.loads(capsys.readouterr().out)}
    assert hits[BERLIN_SAID]["stale"] is True and hits[MUNICH]["stale"] is False


def test_a_listing_shows_until_when_what_a_memory_states_held(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(container, "memories", "list", "--user", "ann", "--all") == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"[fact] (0.70) User lives in Berlin  <superseded by {MUNICH}, until 2026-04-02>" in lines
    assert (
        "[episode] (0.70) I live in Berlin and I ride to work  "
        f"<active, until 2026-04-02, replaced by {MUNICH}>"
    ) in lines
    assert "[fact] (0.70) User lives in Munich" in lines
    assert run(container, "memories", "get", BERLIN, "--user", "ann") == 0
    shown = capsys.readouterr().out
    assert f"status   superseded by {MUNICH}, until 2026-04-02" in shown
    assert "claim    User · home = Berlin · since 2026-03-01" in shown


def test_a_profile_prints_what_holds_now_and_as_of_a_past_time(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(container, "profile", "--user", "ann") == 0
    assert capsys.readouterr().out.splitlines() == [
        "what holds now:",
        "User",
        "  fact",
        f"    home: Munich (since 2026-04-02) · {MUNICH}",
    ]
    assert run(container, "profile", "--user", "ann", "--as-of", "2026-04-01") == 0
    assert capsys.readouterr().out.splitlines() == [
        "what holds as of 2026-04-01T00:00:00+00:00:",
        "User",
        "  fact",
        f"    home: Berlin (since 2026-03-01) · {BERLIN}",
    ]
    assert run(container, "profile", "--user", "ann", "--subject", "user", "--json") == 0
    found = json.loads(capsys.readouterr().out)
    (home,) = found["subjects"][0]["kinds"][0]["entries"]
    assert (home["value"], home["turns"]) == ("Munich", [f"m-{MUNICH}"])


def test_a_profile_of_nothing_says_so_and_bad_input_is_one_line(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(container, "profile", "--user", "bo") == 0
    assert capsys.readouterr().out == "nothing holds now: no facts or preferences yet\n"
    assert run(container, "profile", "--user", "ann", "--subject", "Maya") == 0
    assert capsys.readouterr().out == "nothing holds about 'Maya' now: no facts or preferences yet\n"
    for subject in ("", "   ", "x" * 201):
        assert run(container, "profile", "--user", "ann", "--subject", subject) == 2
        said = capsys.readouterr()
        assert said.out == "" and said.err == (
            "error: subject must name whose profile, e.g. 'User' or 'Maya'\n"
        )


def test_a_graph_and_an_entity_print_the_move_with_its_sources(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(container, "graph", "--user", "ann") == 0
    assert capsys.readouterr().out.splitlines() == [
        "entities now (3):",
        "  User (user) · 2 memories in 1 session",
        "  Berlin (place) · 2 memories in 1 session",  # the fact, and the turn that said it
        "  Munich (place) · 1 memory in 1 session",
        "relations (2):",
        f"  User --home--> Berlin (2026-03-01 to 2026-04-02, ended) · {BERLIN}",
        f"  User --home--> Munich (since 2026-04-02) · {MUNICH}",
    ]
    assert run(container, "entity", "--user", "ann", "user") == 0
    assert capsys.readouterr().out.splitlines()[1:4] == [
        "facts (2):",
        f"  home: Berlin (2026-03-01 to 2026-04-02, ended) · {BERLIN}",
        f"  home: Munich (2026-04-02) · {MUNICH}",
    ]
    assert run(container, "entity", "--user", "ann", "berlin", "--as-of", "2026-04-01") == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"  User --home--> Berlin (since 2026-03-01) · {BERLIN}"
    )
    assert run(container, "graph", "--user", "ann", "--json") == 0
    found = json.loads(capsys.readouterr().out)
    assert [e["turns"] for e in found["edges"]] == [[f"m-{BERLIN}", f"m-{BERLIN_SAID}"],
                                                    [f"m-{MUNICH}"]]
    assert (found["total_nodes"], found["truncated"]) == (3, False)


def test_a_limited_graph_and_entity_say_what_they_left_out(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    # The user, then the most mentioned (Berlin: the fact and the turn that said it).
    assert run(container, "graph", "--user", "ann", "--limit", "2") == 0
    assert capsys.readouterr().out.splitlines() == [
        "entities now (2 of 3):",
        "  User (user) · 2 memories in 1 session",
        "  Berlin (place) · 2 memories in 1 session",
        "relations (1 of 2):",
        f"  User --home--> Berlin (2026-03-01 to 2026-04-02, ended) · {BERLIN}",
        "(the most mentioned entities and the relations among them: --limit for more)",
    ]
    assert run(container, "graph", "--user", "ann", "--limit", "1", "--json") == 0
    found = json.loads(capsys.readouterr().out)
    assert ([n["name"] for n in found["nodes"]], found["edges"]) == (["User"], [])
    assert (found["total_nodes"], found["total_edges"], found["truncated"]) == (3, 2, True)
    # The user's facts: the one that holds (Munich) before the ended one.
    assert run(container, "entity", "--user", "ann", "user", "--limit", "1") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == ["facts (1 of 2):", f"  home: Munich (2026-04-02) · {MUNICH}"]
    assert lines[3] == "relations (1 of 2):" and lines[-1] == "(neighbours: 1 of 2; --limit for more)"
    for command, most in ((["graph"], 2000), (["entity", "user"], 1000)):
        for limit in ("0", str(most + 1)):
            assert run(container, *command, "--user", "ann", "--limit", limit) == 2
            said = capsys.readouterr()
            assert said.out == "" and said.err == f"error: limit must be between 1 and {most}\n"


def test_a_graph_of_nothing_says_so_and_bad_input_is_one_line(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(container, "graph", "--user", "nobody") == 0
    assert capsys.readouterr().out == "no entities now: nothing named yet\n"
    assert run(container, "entity", "--user", "ann", "Ana") == 0
    assert capsys.readouterr().out == "no entity named 'Ana' now\n"
    for name in ("", "   ", "x" * 201):
        assert run(container, "entity", "--user", "ann", name) == 2
        said = capsys.readouterr()
        assert said.out == "" and said.err == (
            "error: name must name an entity, e.g. 'Ana' or 'User's sister'\n"
        )


PATTERN_EVIDENCE = json.dumps({
    "pattern": "tool:web_search", "kind": "tool", "session_count": 3, "sessions_seen": 5,
    "sessions": ["s1", "s2", "s3"], "event_ids": ["t1", "t2", "t3"],
})


def test_patterns_print_one_line_each_and_bad_input_is_one_line(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(container, "patterns", "--user", "bo") == 0
    assert capsys.readouterr().out == (
        "no patterns learned now: a habit needs at least three sessions\n"
    )
    index = container.memory_projection()
    learned = memory_added("bo-p", "bo", "uses the tool web_search (3 sessions)",
                           memory_type="pattern", context=PATTERN_EVIDENCE)
    index.apply([(learned, SourcePosition(container.topics.memories, 0, 99))])
    assert run(container, "patterns", "--user", "bo") == 0
    (heading, line) = capsys.readouterr().out.splitlines()
    assert heading == "patterns learned, now:"
    assert line.startswith("uses the tool web_search (3 sessions) · 3 of 5 sessions · decay 0.")
    assert line.endswith(" · bo-p")
    assert run(container, "patterns", "--user", "bo", "--json") == 0
    (found,) = json.loads(capsys.readouterr().out)["patterns"]
    assert (found["pattern"], found["sessions"]) == ("tool:web_search", ["s1", "s2", "s3"])
    assert run(container, "patterns", "--user", "ann") == 0  # another user's: none
    assert "no patterns learned" in capsys.readouterr().out
