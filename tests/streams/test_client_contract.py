"""One contract for both clients: the same calls through the in-process client and through
the HTTP client (``memstream serve``'s app, in process) answer alike and fail alike.

The HTTP client's key is tenant acme's, so its "ann" is the service's "acme:ann", the user
the in-process client names directly; answers never carry the user id, so they must be equal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import InMemoryPublisher, memory_added, service_on_fakes, unit_settings

from memstream import AccessRefused, AsyncMemoryClient, MemoryClient, ServiceUnreachable
from memstream.models.events import MemoryDeleted, SessionClosed
from memstream.projections.memories import SearchFilters
from memstream.streams.api.app import create_api
from memstream.streams.api.auth import ApiKey, KeyFile
from memstream.streams.runtime.keys import open_event
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

    def client(self, kind: str) -> tuple[AsyncMemoryClient, str]:
        """The client of ``kind`` and the id it names ann by."""
        return (self.local, "acme:ann") if kind == "local" else (self.remote, "ann")


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Service, InMemoryPublisher]:
    seeded = [memory_added(memory_id, user, content) for user, memory_id, content in MEMORIES]
    service, publisher, _ = service_on_fakes(unit_settings(tmp_path), seeded, monkeypatch)
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
        assert memory.settings is None
        since = datetime(2026, 1, 1, tzinfo=UTC)
        assert memory.report("growth", user_id="ann", since=since)["report"] == "growth"
