"""One contract for both clients: the same calls through the in-process client and through
the HTTP client (``memstream serve``'s app, in process) answer alike and fail alike.

The HTTP client's key is tenant acme's, so its "ann" is the service's "acme:ann", the user
the in-process client names directly; answers never carry the user id, so they must be equal.
Cy's home changed (:mod:`beliefs`): both clients mark the same stale hits and follow the same
timeline.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from beliefs import BERLIN, BERLIN_SAID, MOVED_AT, MUNICH, moved_home, project
from fakes import InMemoryPublisher, memory_added, service_on_fakes, unit_settings

from memstream import AccessRefused, AsyncMemoryClient, MemoryClient, ServiceUnreachable
from memstream.models.events.chat import SessionClosed
from memstream.models.events.consolidation import TaskChange
from memstream.models.events.memory import MemoryAdded, MemoryDeleted
from memstream.models.extraction.tasks import task_candidate
from memstream.projections.memories import SearchFilters
from memstream.streams.api.app import create_api
from memstream.streams.api.auth import ApiKey, KeyFile
from memstream.streams.keys.sealing import open_event
from memstream.streams.service.app import Service
from memstream.streams.service.sessions import WorkerUnreachable

KEY = "msk_acme-contract-0123456789"
READ_ONLY = "msk_acme-read-only-0123456789"
MEMORIES = [
    ("acme:ann", "ann-1", "Ann lives in Oslo"),
    ("acme:ann", "ann-2", "Ann prefers green tea"),
    ("acme:bob", "bob-1", "Bob lives in Lisbon"),
]


class Pair:
    """The same service behind both clients, and the log they write to."""

    def __init__(self, world: tuple[Service, InMemoryPublisher]) -> None:
        self.service, self.publisher = world
        api = create_api(
            self.service, KeyFile.of({KEY: ApiKey("acme"), READ_ONLY: ApiKey("acme", None, True)})
        )
        self.transport = httpx.ASGITransport(app=api)
        self.local = AsyncMemoryClient(service=self.service)
        self.remote = AsyncMemoryClient(url="http://memstream", api_key=KEY, transport=self.transport)

    def client(self, kind: str, user: str = "ann") -> tuple[AsyncMemoryClient, str]:
        """The client of ``kind`` and the id it names ``user`` by."""
        return (self.local, f"acme:{user}") if kind == "local" else (self.remote, user)


def task_memories(user: str) -> list[MemoryAdded]:
    """Dee's task memories: "Migrate billing" in project atlas, set in s1, open in s2."""
    made = []
    for memory_id, session, day, progress in (
        ("dee-t1", "s1", 4, None), ("dee-t2", "s2", 6, "data copied, cutover open"),
    ):
        candidate = task_candidate(TaskChange(
            event_id=f"t-{memory_id}", task="Migrate billing", project="atlas",
            progress=progress, occurred_at=datetime(2026, 5, day, 9, 0, tzinfo=UTC),
        ))
        added = memory_added(memory_id, user, candidate.content, memory_type="task",
                             context=candidate.context,
                             occurred_at=datetime(2026, 5, day, 10, 0, tzinfo=UTC))
        made.append(added.model_copy(update={"session_id": session}))
    return made


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Service, InMemoryPublisher]:
    seeded = [memory_added(memory_id, user, content) for user, memory_id, content in MEMORIES]
    seeded += task_memories("acme:dee")
    service, publisher, index = service_on_fakes(unit_settings(tmp_path), seeded, monkeypatch)
    topic = service.container.topics.memories
    asyncio.run(project(index, publisher, topic, moved_home("acme:cy")))
    return service, publisher


@pytest.fixture
async def pair(world: tuple[Service, InMemoryPublisher]) -> AsyncIterator[Pair]:
    both = Pair(world)
    yield both
    await both.remote.close()
    await both.local.close()


async def answers(client: AsyncMemoryClient, ann: str) -> dict[str, Any]:
    """What the read verbs answer for ann."""
    return {
        "search": await client.search("where does Ann live", user_id=ann, limit=2),
        "explained": await client.search(
            "tea", user_id=ann, limit=1, explain=True, filters={"memory_types": ["fact"]}
        ),
        "filtered": await client.search(
            "Ann", user_id=ann, filters=SearchFilters(min_importance=0.9)
        ),
        "context": await client.context("Where do I live?", user_id=ann, recent_turns=["hi"]),
        "get": await client.get("ann-1", user_id=ann),
        "missing": await client.get("bob-1", user_id=ann),
        "all": await client.get_all(user_id=ann, include_inactive=True),
        "history": await client.history("ann-1", user_id=ann),
        "foreign history": await client.history("bob-1", user_id=ann),
        "report": await client.report("growth", user_id=ann),
    }


def rounded(value: Any) -> Any:
    """``value`` with floats to 6 places: recency moves with the clock between two calls."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


async def test_both_clients_read_alike(pair: Pair) -> None:
    local = await answers(*pair.client("local"))
    remote = await answers(*pair.client("remote"))
    assert rounded(remote) == rounded(local)
    assert local["search"][0]["memory_id"] == "ann-1"
    assert local["missing"] is None and local["foreign history"] == []
    assert "Oslo" in local["context"]["context"] and local["explained"][0]["explain"]["text"]


async def test_both_clients_read_a_project_history_alike(pair: Pair) -> None:
    found = {}
    for kind in ("local", "remote"):
        client, dee = pair.client(kind, "dee")
        found[kind] = {
            "all": await client.projects(user_id=dee),
            "atlas then": await client.projects(
                user_id=dee, project="ATLAS", as_of=datetime(2026, 5, 5, tzinfo=UTC)
            ),
            "none": await client.projects(user_id=client is pair.local and "acme:ann" or "ann"),
            "context": await client.context("What next?", user_id=dee, project="atlas"),
        }
    assert rounded(found["remote"]) == rounded(found["local"])
    local = found["local"]
    (atlas,) = local["all"]["projects"]
    assert (atlas["project"], atlas["sessions"]) == ("atlas", ["s1", "s2"])
    assert [t["progress"] for t in atlas["open"]] == ["data copied, cutover open"]
    assert local["atlas then"]["as_of"] == "2026-05-05T00:00:00+00:00"
    assert [t["status"] for t in local["atlas then"]["projects"][0]["open"]] == ["started"]
    assert local["none"]["projects"] == []
    assert "Open: Migrate billing: data copied, cutover open" in local["context"]["context"]


async def beliefs(client: AsyncMemoryClient, cy: str, ann: str) -> dict[str, Any]:
    """What the read verbs answer about cy's changed home, and ann's timeline (no claims)."""
    return {
        "timeline": await client.timeline("where do I live", user_id=cy),
        "subject's": await client.timeline("home", user_id=cy, subject="User"),
        "nobody's": await client.timeline("home", user_id=cy, subject="Cy's sister"),
        "no claims": await client.timeline("where do I live", user_id=ann),
        "profile": await client.profile(user_id=cy),
        "profile before": await client.profile(
            user_id=cy, as_of=datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
        ),
        "profile of User": await client.profile(user_id=cy, subject="user"),
        "no profile": await client.profile(user_id=ann),
        "graph": await client.graph(user_id=cy),
        "graph before": await client.graph(
            user_id=cy, as_of=datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
        ),
        "entity": await client.entity("munich", user_id=cy),
        "no entity": await client.entity("Ana", user_id=cy),
        "no graph": await client.graph(user_id=ann),
        "graph of one": await client.graph(user_id=cy, limit=1),
        "entity of one": await client.entity("user", user_id=cy, limit=1),
        "search": await client.search("where does the user live", user_id=cy, limit=5),
        "outdated": await client.get(BERLIN_SAID, user_id=cy),
        "all": await client.get_all(user_id=cy, include_inactive=True),
        "history": await client.history(BERLIN, user_id=cy),
        "outdated history": await client.history(BERLIN_SAID, user_id=cy),
    }


async def test_both_clients_follow_a_changed_fact_alike(pair: Pair) -> None:
    local = await beliefs(pair.local, "acme:cy", "acme:ann")
    remote = await beliefs(pair.remote, "cy", "ann")
    assert rounded(remote) == rounded(local)
    moved = MOVED_AT.isoformat()
    timeline = local["timeline"]
    assert (timeline["subject"], timeline["attribute"]) == ("User", "home")
    assert [(e["value"], e["status"], e["valid_until"], e["superseded_by"])
            for e in timeline["entries"]] == [
        ("Berlin", "superseded", moved, MUNICH), ("Munich", "active", None, None)
    ]
    assert timeline["entries"][0]["turns"] == [f"m-{BERLIN}", f"m-{BERLIN_SAID}"]
    assert local["subject's"]["entries"] == timeline["entries"]
    assert local["nobody's"]["entries"] == [] and local["nobody's"]["attribute"] is None
    assert local["no claims"] == {
        "about": "where do I live", "subject": None, "attribute": None, "entries": []
    }
    # The profile holds Munich now, Berlin the day before the move, each with its turns.
    assert local["profile"] == {"subject": None, "as_of": None, "subjects": [
        {"subject": "User", "kinds": [{"kind": "fact", "entries": [{
            "attribute": "home", "value": "Munich", "polarity": True,
            "statement": "User lives in Munich", "valid_from": moved, "memory_id": MUNICH,
            "turns": [f"m-{MUNICH}"],
        }]}]},
    ]}
    before = local["profile before"]
    assert before["as_of"] == "2026-04-01T09:00:00+00:00"
    assert [e["value"] for e in before["subjects"][0]["kinds"][0]["entries"]] == ["Berlin"]
    assert before["subjects"][0]["kinds"][0]["entries"][0]["turns"] == [
        f"m-{BERLIN}", f"m-{BERLIN_SAID}"
    ]
    assert local["profile of User"]["subjects"] == local["profile"]["subjects"]
    assert local["no profile"]["subjects"] == []
    # The graph: an ended edge to Berlin and a current one to Munich; Berlin before the move.
    homes = [(e["target"], e["holds"], e["valid_until"])
             for e in local["graph"]["edges"] if e["relation"] == "home"]
    assert homes == [("Berlin", False, moved), ("Munich", True, None)]
    assert [(e["target"], e["holds"]) for e in local["graph before"]["edges"]
            if e["relation"] == "home"] == [("Berlin", True)]
    found = local["entity"]
    assert found["entity"] is not None and found["entity"]["name"] == "Munich"
    assert (found["neighbours"], found["edges"][0]["turns"]) == (["User"], [f"m-{MUNICH}"])
    assert local["no entity"]["entity"] is None
    assert (local["no graph"]["nodes"], local["no graph"]["edges"]) == ([], [])
    one = local["graph of one"]
    assert ([n["name"] for n in one["nodes"]], one["total_nodes"], one["truncated"]) == (
        ["User"], 3, True
    )
    user = local["entity of one"]
    assert ([f["value"] for f in user["facts"]], user["total_facts"]) == (["Munich"], 2)
    assert (len(user["neighbours"]), user["total_neighbours"], user["truncated"]) == (1, 2, True)
    # The episode that said Berlin is found, marked, below what replaced it.
    hits = {hit["memory_id"]: hit for hit in local["search"]}
    order = [hit["memory_id"] for hit in local["search"]]
    assert order.index(MUNICH) < order.index(BERLIN_SAID)
    said = hits[BERLIN_SAID]
    assert (said["stale"], said["superseded_by"], said["valid_until"]) == (True, MUNICH, moved)
    assert hits[MUNICH]["stale"] is False and hits[MUNICH]["claim"] == {
        "subject": "User", "attribute": "home", "value": "Munich", "polarity": True,
        "valid_from": moved,
    }
    assert local["outdated"] is not None and local["outdated"]["valid_until"] == moved
    listed = {memory["memory_id"]: memory for memory in local["all"]}
    assert listed[BERLIN]["claim"]["value"] == "Berlin"  # type: ignore[index]
    assert listed[BERLIN]["valid_until"] == moved and listed[MUNICH]["valid_until"] is None
    (superseded,) = [e for e in local["history"] if e["type"] == "memory_superseded"]
    details = superseded["details"]
    assert (details["change"], details["decided_by"], details["valid_until"]) == (
        "updated", "rules", moved
    )
    assert [e["type"] for e in local["outdated history"]] == ["memory_added", "memory_outdated"]


@pytest.mark.parametrize("kind", ["local", "remote"])
async def test_both_clients_write_the_same_events(pair: Pair, kind: str) -> None:
    client, ann = pair.client(kind)
    pair.publisher.sent.clear()
    added = await client.add(
        [{"role": "user", "content": "I moved to Bergen"}], user_id=ann, session_id="trip",
        close=False, event_ids=["e-1"],
    )
    assert added == {"session_id": "trip", "event_ids": ["e-1"]}
    closed = await client.close_session("trip", user_id=ann)
    deleted = await client.delete("ann-2", user_id=ann, reason="moved")
    events = pair.publisher.events()
    assert [e.event_id for e in events] == ["e-1", closed, deleted]
    assert {e.user_id for e in events} == {"acme:ann"}
    assert isinstance(events[1], SessionClosed) and events[1].session_id == "trip"
    assert isinstance(events[2], MemoryDeleted) and events[2].memory_id == "ann-2"
    reason = open_event(events[2], pair.service.container.key_store)
    assert reason is not None and reason.reason == "moved"  # type: ignore[union-attr]


PATTERN_EVIDENCE = json.dumps({
    "pattern": "tool:web_search", "kind": "tool", "session_count": 3, "sessions_seen": 4,
    "sessions": ["s1", "s2", "s3"], "event_ids": ["t1", "t2", "t3"],
})


async def test_both_clients_read_patterns_alike_and_search_leaves_them_out(pair: Pair) -> None:
    index = pair.service.container.memory_projection()
    topic = pair.service.container.topics.memories
    learned = memory_added("ann-p", "acme:ann", "uses the tool web_search (3 sessions)",
                           memory_type="pattern", context=PATTERN_EVIDENCE)
    await project(index, pair.publisher, topic, [learned])
    found = {}
    for kind in ("local", "remote"):
        client, ann = pair.client(kind)
        found[kind] = {
            "now": await client.patterns(user_id=ann),
            "before": await client.patterns(user_id=ann, as_of=datetime(2026, 1, 1, tzinfo=UTC)),
            "bob's": await client.patterns(user_id=pair.client(kind, "bob")[1]),
            "search": await client.search("uses the tool web_search", user_id=ann, limit=5),
            "asked": await client.search("uses the tool web_search", user_id=ann, limit=5,
                                         filters={"memory_types": ["pattern"]}),
        }
    assert rounded(found["remote"]) == rounded(found["local"])
    local = found["local"]
    (pattern,) = local["now"]["patterns"]
    assert {k: pattern[k] for k in ("memory_id", "pattern", "kind", "content", "session_count",
                                     "sessions_seen", "sessions", "event_ids")} == {
        "memory_id": "ann-p", "pattern": "tool:web_search", "kind": "tool",
        "content": "uses the tool web_search (3 sessions)", "session_count": 3,
        "sessions_seen": 4, "sessions": ["s1", "s2", "s3"], "event_ids": ["m-ann-p"],
    }
    assert 0 < pattern["decay"] < 1 and pattern["importance"] == 0.7
    assert local["before"] == {"as_of": "2026-01-01T00:00:00+00:00", "patterns": []}
    assert local["bob's"] == {"as_of": None, "patterns": []}
    assert "ann-p" not in {hit["memory_id"] for hit in local["search"]}
    assert [hit["memory_id"] for hit in local["asked"]] == ["ann-p"]


@pytest.mark.parametrize("kind", ["local", "remote"])
async def test_both_clients_fail_alike(pair: Pair, kind: str) -> None:
    client, ann = pair.client(kind)
    with pytest.raises(KeyError):
        await client.delete("bob-1", user_id=ann)
    with pytest.raises(ValueError):
        await client.search("x", user_id=ann, limit=0)
    with pytest.raises(ValueError):
        await client.add("hi", user_id=ann, session_id="open", close=False, wait=True)
    with pytest.raises(ValueError):
        await client.search("x", user_id=ann, filters={"colour": "red"})
    with pytest.raises(ValueError):
        await client.report("no-such-report", user_id=ann)
    with pytest.raises(TypeError):
        await client.context("x", user_id=ann, recent_turns="not a list")  # type: ignore[arg-type]
    for about in ("", "   ", "x" * 1001):
        with pytest.raises(ValueError):
            await client.timeline(about, user_id=ann)
    for subject in ("", "x" * 201):
        with pytest.raises(ValueError):
            await client.profile(user_id=ann, subject=subject)
    with pytest.raises(ValueError):
        await client.profile(user_id=ann, as_of=datetime(2026, 4, 1))
    for name in ("", "x" * 201):
        with pytest.raises(ValueError):
            await client.projects(user_id=ann, project=name)
        with pytest.raises(ValueError):
            await client.context("hi", user_id=ann, project=name)
    with pytest.raises(ValueError):
        await client.projects(user_id=ann, as_of=datetime(2026, 4, 1))
    for name in ("", "   ", "x" * 201):
        with pytest.raises(ValueError):
            await client.entity(name, user_id=ann)
    with pytest.raises(ValueError):
        await client.graph(user_id=ann, as_of=datetime(2026, 4, 1))
    for limit in (0, 2_001):
        with pytest.raises(ValueError):
            await client.graph(user_id=ann, limit=limit)
    with pytest.raises(ValueError):
        await client.entity("Ana", user_id=ann, limit=1_001)
    with pytest.raises(ValueError):
        await client.patterns(user_id=ann, as_of=datetime(2026, 4, 1))
    # No worker runs here.
    with pytest.raises(WorkerUnreachable):
        await client.session_context("trip", user_id=ann)


async def test_the_http_client_says_when_the_key_or_the_service_fails(pair: Pair) -> None:
    wrong = AsyncMemoryClient(url="http://memstream", api_key="msk_wrong", transport=pair.transport)
    reader = AsyncMemoryClient(url="http://memstream", api_key=READ_ONLY, transport=pair.transport)
    nowhere = AsyncMemoryClient(url="http://127.0.0.1:9", api_key=KEY, retries=0)
    try:
        with pytest.raises(AccessRefused) as refused:
            await wrong.search("x", user_id="ann")
        assert refused.value.status == 401
        assert await reader.search("Oslo", user_id="ann")
        with pytest.raises(AccessRefused) as forbidden:
            await reader.delete("ann-1", user_id="ann")
        assert forbidden.value.status == 403
        with pytest.raises(ServiceUnreachable):
            await nowhere.get_all(user_id="ann")
    finally:
        for client in (wrong, reader, nowhere):
            await client.close()
    assert "msk_" not in repr(wrong) and "msk_" not in repr(nowhere)
    with pytest.raises(ValueError):
        AsyncMemoryClient(url="http://memstream")  # no key
    with pytest.raises(TypeError):
        AsyncMemoryClient(api_key=KEY)  # a key without a url


def test_the_sync_client_speaks_http_too(world: tuple[Service, InMemoryPublisher]) -> None:
    api = create_api(world[0], KeyFile.of({KEY: ApiKey("acme")}))
    transport = httpx.ASGITransport(app=api)
    with MemoryClient(url="http://memstream", api_key=KEY, transport=transport) as memory:
        hits = memory.search("where does Ann live", user_id="ann", limit=1)
        assert [hit["memory_id"] for hit in hits] == ["ann-1"]
        moved = memory.timeline("where do I live", user_id="cy")
        assert [entry["value"] for entry in moved["entries"]] == ["Berlin", "Munich"]
        (home,) = memory.profile(user_id="cy")["subjects"][0]["kinds"][0]["entries"]
        assert home["value"] == "Munich"
        (atlas,) = memory.projects(user_id="dee")["projects"]
        assert atlas["open"][0]["memory_id"] == "dee-t2"
        assert memory.settings is None
        since = datetime(2026, 1, 1, tzinfo=UTC)
        assert memory.report("growth", user_id="ann", since=since)["report"] == "growth"
