"""The client and the ``memstream memories`` commands on the real broker, with a worker; a
user's profile after a move, and at the head of the first turn's context."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from harness import wait_for, wait_for_async

from memstream.models.settings import Settings
from memstream.streams.cli import main
from memstream.streams.client import AsyncMemoryClient, MemoryClient

BERLIN = [
    {"role": "user", "content": "I live in Berlin and I work at Siemens as a data engineer."},
    {"role": "assistant", "content": "Nice. How can I help?"},
    {"role": "user", "content": "I prefer type hints everywhere and small functions."},
]
HOSTILE = ["x' OR '1'='1", "ann' --", "%", "*", "ann\\", '"; DROP TABLE memories; --']


def test_add_search_get_history_delete_scoped_to_one_user(worker_settings: Settings) -> None:
    with MemoryClient(worker_settings) as memory:
        added = memory.add(BERLIN, user_id="ann", agent_id="helper")
        assert added["session_id"].startswith("session-") and len(added["event_ids"]) == 5

        memories = wait_for(
            lambda: memory.get_all(user_id="ann"),
            "ann's Berlin memory",
            until=lambda found: any("Berlin" in m["memory"] for m in found),
        )
        berlin = next(m for m in memories if "Berlin" in m["memory"])
        assert berlin["session_id"] == added["session_id"] and berlin["status"] == "active"
        assert set(berlin["source_event_ids"]) <= set(added["event_ids"])

        hits = memory.search("where does the user live", user_id="ann")
        assert hits and any("Berlin" in hit["memory"] for hit in hits)
        # An episode comes with the conversation it was said in, and cites every turn shown.
        episode = next(hit for hit in hits if hit["type"] == "episode")
        assert episode["memory"] in episode["context"]
        assert set(episode["source_event_ids"]) <= set(added["event_ids"])
        assert set(hits[0]) == {
            "memory_id",
            "memory",
            "type",
            "score",
            "relevance",
            "similarity",
            "words",
            "importance",
            "created_at",
            "session_id",
            "source_event_ids",
            "context",
            "stale",
            "superseded_by",
            "valid_until",
            "possibly_outdated_by",
            "claim",
        }
        # Scores a person can read: all on 0..1, best first.
        for hit in hits:
            assert all(0.0 <= hit[key] <= 1.0 for key in ("score", "relevance", "similarity", "words"))
        scores = [hit["score"] for hit in hits]
        assert scores == sorted(scores, reverse=True)
        json.dumps(hits)  # plain data

        # Scoped: another user, and ids written to break a filter, see nothing of ann's.
        for other in ["bob", *HOSTILE]:
            assert memory.search("where does the user live", user_id=other) == []
            assert memory.get_all(user_id=other, include_inactive=True) == []
            assert memory.get(berlin["memory_id"], user_id=other) is None
            assert memory.history(berlin["memory_id"], user_id=other) == []
            with pytest.raises(KeyError):
                memory.delete(berlin["memory_id"], user_id=other)
        for hostile in HOSTILE:
            assert memory.get(hostile, user_id="ann") is None
            assert memory.history(hostile, user_id="ann") == []

        # The search published an access event in the background; the projector counts it.
        seen = wait_for(
            lambda: memory.get(berlin["memory_id"], user_id="ann"),
            "the access to be counted",
            until=lambda found: found is not None and found["access_count"] >= 1,
        )
        assert seen == {**berlin, "access_count": seen["access_count"]}  # type: ignore[index]
        (born,) = memory.history(berlin["memory_id"], user_id="ann")
        assert born["type"] == "memory_added" and born["details"]["content"] == berlin["memory"]
        assert born["source_event_ids"] == berlin["source_event_ids"] and born["occurred_at"]

        deletion = memory.delete(berlin["memory_id"], user_id="ann", reason="user asked")
        wait_for(
            lambda: memory.get_all(user_id="ann"),
            "the deleted memory to go",
            until=lambda found: berlin["memory_id"] not in {m["memory_id"] for m in found},
        )
        assert all(
            hit["memory_id"] != berlin["memory_id"]
            for hit in memory.search("where does the user live", user_id="ann", limit=50)
        )
        gone = memory.get(berlin["memory_id"], user_id="ann")
        assert gone is not None and gone["status"] == "deleted"
        assert berlin["memory_id"] in {
            m["memory_id"] for m in memory.get_all(user_id="ann", include_inactive=True)
        }
        life = memory.history(berlin["memory_id"], user_id="ann")
        assert [entry["type"] for entry in life] == ["memory_added", "memory_deleted"]
        assert life[1]["event_id"] == deletion and life[1]["details"]["reason"] == "user asked"

        remaining = memory.get_all(user_id="ann")
        assert len(memory.delete_all(user_id="ann")) == len(remaining)
        wait_for(lambda: memory.get_all(user_id="ann"), "every memory of ann to go", until=lambda found: found == [])


async def test_the_async_client_does_the_same(worker_settings: Settings) -> None:
    async with AsyncMemoryClient(worker_settings) as memory:
        added = await memory.add(
            BERLIN, user_id="cy", session_id="intro", event_ids=["a", "b", "c"]
        )
        assert added == {"session_id": "intro", "event_ids": ["a", "b", "c", added["event_ids"][3]]}
        memories = await wait_for_async(
            lambda: memory.get_all(user_id="cy"), "cy's memories", interval_s=0.5
        )
        hits = await memory.search("which city", user_id="cy")
        assert any("Berlin" in hit["memory"] for hit in hits)
        assert await memory.search("which city", user_id="dee") == []
        target = memories[0]["memory_id"]
        await memory.delete(target, user_id="cy")
        await wait_for_async(
            lambda: memory.get_all(user_id="cy"),
            "the delete to be projected",
            until=lambda found: target not in {m["memory_id"] for m in found},
            interval_s=0.5,
        )
        life = await memory.history(target, user_id="cy")
        assert [entry["type"] for entry in life] == ["memory_added", "memory_deleted"]


@pytest.fixture
def cli_env(worker_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The worker's settings, exported the way a user would for the command."""
    for name, value in worker_settings.to_env().items():
        monkeypatch.setenv(name, value)
    return worker_settings


def test_memories_commands_get_history_delete_and_list_all(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    def listing(*extra: str) -> str:
        capsys.readouterr()
        assert main(["memories", "list", "--user", "ann", *extra]) == 0
        return capsys.readouterr().out

    with MemoryClient(cli_env) as memory:
        memory.add(BERLIN, user_id="ann")
        found = wait_for(
            lambda: memory.get_all(user_id="ann"),
            "ann's Berlin memory",
            until=lambda memories: any("Berlin" in m["memory"] for m in memories),
        )
    berlin = next(m for m in found if "Berlin" in m["memory"])
    memory_id = berlin["memory_id"]
    # The command reads the table, which the projector commits after the client's view
    # (it follows the memories topic) has the memory: wait for the table too.
    wait_for(listing, "ann's Berlin memory in the listing", until=lambda out: f"memory {memory_id}" in out)

    capsys.readouterr()
    assert main(["memories", "get", memory_id, "--user", "ann", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memory"] == berlin["memory"]
    assert main(["memories", "get", memory_id, "--user", "bob"]) == 1
    assert "no memory" in capsys.readouterr().err

    assert main(["memories", "delete", memory_id, "--user", "bob"]) == 1
    assert main(["memories", "delete", "x' OR '1'='1", "--user", "ann"]) == 1
    capsys.readouterr()
    assert main(["memories", "delete", memory_id, "--user", "ann"]) == 0
    assert "published memory_deleted" in capsys.readouterr().out

    wait_for(listing, "the deleted memory to leave the listing", until=lambda out: f"memory {memory_id}" not in out)
    everything = listing("--all")
    assert f"memory {memory_id}" in everything and "<deleted>" in everything

    capsys.readouterr()
    assert main(["memories", "history", memory_id, "--user", "ann"]) == 0
    out = capsys.readouterr().out
    assert out.index("memory_added") < out.index("memory_deleted")
    assert ", ".join(berlin["source_event_ids"]) in out
    assert main(["memories", "history", memory_id, "--user", "ann", "--json"]) == 0
    life = json.loads(capsys.readouterr().out)
    assert [entry["type"] for entry in life] == ["memory_added", "memory_deleted"]
    assert main(["memories", "history", memory_id, "--user", "bob"]) == 1


def test_search_filters_on_the_command_line(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    with MemoryClient(cli_env) as memory:
        memory.add(BERLIN, user_id="ann", session_id="work")
        # The session's memories land in batches: wait for the one the query is about.
        wait_for(
            lambda: memory.get_all(user_id="ann"), "ann's home",
            until=lambda found: any("Berlin" in hit["memory"] for hit in found),
        )

    def search(*options: str) -> list[dict[str, Any]]:
        capsys.readouterr()
        assert main(["search", "--user", "ann", "where do I live", "--json", *options]) == 0
        hits: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
        return hits

    # The command reads the table, committed after the client's view has the memory.
    wait_for(search, "ann's memories in the command's search", until=bool)
    assert search() and search("--session", "work")
    assert search("--session", "elsewhere") == []
    assert search("--min-importance", "1.01") == []
    assert search("--since", "2000-01-01") and search("--until", "2000-01-01T00:00:00+00:00") == []
    assert search("--since", "2999-01-01") == []
    with pytest.raises(SystemExit):
        main(["search", "--user", "ann", "x", "--since", "yesterday"])


def test_the_profile_follows_a_move_and_opens_the_first_turns_context(
    worker_settings: Settings,
) -> None:
    # Through the real worker (the offline extractor and the decider): a month apart.
    berlin_at = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    porto_at = datetime(2026, 4, 2, 9, 0, tzinfo=UTC)
    with MemoryClient(worker_settings) as memory:
        for text, at in (("I live in Berlin.", berlin_at), ("I moved to Porto.", porto_at)):
            made = memory.add(text, user_id="lee", occurred_at=at, wait=True, timeout_s=60)
            assert made["status"] == "searchable", made
        homes = [
            (entry["value"], entry["valid_from"][:10])
            for who in memory.profile(user_id="lee")["subjects"] if who["subject"] == "User"
            for kind in who["kinds"] for entry in kind["entries"] if entry["attribute"] == "home"
        ]
        assert homes == [("Porto", "2026-04-02")]
        before = memory.profile(user_id="lee", as_of=datetime(2026, 3, 15, tzinfo=UTC))
        assert [e["value"] for who in before["subjects"] for k in who["kinds"]
                for e in k["entries"] if e["attribute"] == "home"] == ["Berlin"]
        assert memory.profile(user_id="nobody-else")["subjects"] == []

        first = memory.context("Can you book me a flight home?", user_id="lee")
        profile_part = first["context"].split("\n\n")[0]
        assert profile_part.startswith("## Profile\n")
        assert "User's home: Porto (since 2026-04-02)" in profile_part
        assert "Berlin" not in profile_part
