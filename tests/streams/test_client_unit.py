"""The client without a broker: message forms, event building, history, user scoping."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeEmbedder, InMemoryPublisher, memory_added, unit_settings
from fuzz import zoned_times
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memstream.models.codec import EventLimits, decode_event
from memstream.models.events.chat import MessageAdded, SessionClosed, SessionStarted
from memstream.models.events.memory import (
    MemoriesRetrieved,
    MemoryAdded,
    MemoryDeleted,
    MemoryReinforced,
    MemorySuperseded,
)
from memstream.models.settings import Settings
from memstream.projections.memories import MemoryProjection, SourcePosition
from memstream.streams.cli import main
from memstream.streams.client import (
    AsyncMemoryClient,
    MemoryClient,
    history_entry,
    normalise_messages,
)
from memstream.streams.keys.sealing import open_event
from memstream.streams.keys.store import FileKeyStore
from memstream.streams.service.chat_events import chat_events_for_add

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def memory(
    memory_id: str, user: str, content: str, offset: int
) -> tuple[MemoryAdded, SourcePosition]:
    return memory_added(memory_id, user, content), SourcePosition("t.memories", 0, offset)


@pytest.fixture
def projection(tmp_path: Path) -> MemoryProjection:
    projection = MemoryProjection(tmp_path / "lancedb", FakeEmbedder())
    projection.apply(
        [
            memory("ann-1", "ann", "Ann lives in Oslo", 0),
            memory("ann-2", "ann", "Ann prefers green tea", 1),
            memory("bob-1", "bob", "Bob lives in Berlin", 2),
        ]
    )
    return projection


def client_with(
    projection: MemoryProjection, tmp_path: Path
) -> tuple[AsyncMemoryClient, InMemoryPublisher]:
    settings = Settings(data_dir=tmp_path, topic_prefix="t")
    keys = FileKeyStore(settings.keys_dir)
    # Their memories came from their own sealed events: they have keys.
    for user in ("ann", "bob"):
        keys.key_for(user, create=True)
    producer = InMemoryPublisher(keys, EventLimits.from_settings(settings))
    client = AsyncMemoryClient(settings, projection=projection, keys=keys, publisher=producer)
    return client, producer


def test_a_string_is_one_user_message_and_bad_messages_are_refused() -> None:
    assert normalise_messages("hi") == [{"role": "user", "content": "hi"}]
    assert normalise_messages([{"role": "assistant", "content": "ok", "tool_call_id": "x"}]) == [
        {"role": "assistant", "content": "ok"}
    ]
    with pytest.raises(ValueError):
        normalise_messages([])
    with pytest.raises(ValueError):
        normalise_messages([{"role": "robot", "content": "x"}])
    with pytest.raises(TypeError):
        normalise_messages([{"role": "user", "content": [{"type": "image"}]}])


def test_add_without_a_session_starts_one_and_closes_it() -> None:
    session, events = chat_events_for_add(
        normalise_messages(
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
        ),
        user_id="ann",
        occurred_at=T0,
    )
    assert [type(e) for e in events] == [SessionStarted, MessageAdded, MessageAdded, SessionClosed]
    assert {e.session_id for e in events} == {session} and {e.user_id for e in events} == {"ann"}
    assert len({e.event_id for e in events}) == 4
    assert [e.occurred_at for e in events] == sorted(e.occurred_at for e in events)


def test_add_to_a_named_session_without_close_publishes_only_the_messages() -> None:
    session, events = chat_events_for_add(
        normalise_messages("a"), user_id="ann", session_id="s9", close=False
    )
    assert session == "s9" and [type(e) for e in events] == [MessageAdded]


def test_caller_event_ids_make_the_whole_add_deterministic() -> None:
    def build() -> tuple[str, list[str]]:
        session, events = chat_events_for_add(
            normalise_messages("a"), user_id="ann", event_ids=["e1"], occurred_at=T0
        )
        return session, [e.event_id for e in events]

    first, again = build(), build()
    assert first == again and first[1][1] == "e1"
    with pytest.raises(ValueError):
        chat_events_for_add(normalise_messages("a"), user_id="ann", event_ids=["e1", "e2"])


def test_history_entries_name_the_memory_on_both_sides_of_a_supersession() -> None:
    added, _ = memory("m1", "ann", "Ann lives in Oslo", 0)
    superseded = MemorySuperseded(
        event_id="sup",
        user_id="ann",
        session_id="s2",
        occurred_at=T0,
        memory_id="m1",
        superseded_by="m2",
        reason="moved",
        similarity=0.8,
    )
    reinforced = MemoryReinforced(
        event_id="r",
        user_id="ann",
        session_id="s3",
        occurred_at=T0,
        memory_id="m1",
        extraction_event_id="x2",
        source_event_ids=("m-9",),
        similarity=0.95,
    )
    assert history_entry(added, "m1", 0, 0)["source_event_ids"] == ["m-m1"]  # type: ignore[index]
    assert history_entry(reinforced, "m1", 0, 1)["source_event_ids"] == ["m-9"]  # type: ignore[index]
    assert history_entry(superseded, "m1", 0, 2)["details"]["superseded_by"] == "m2"  # type: ignore[index]
    assert history_entry(superseded, "m2", 0, 2)["details"]["supersedes"] == "m1"  # type: ignore[index]
    assert history_entry(added, "other", 0, 0) is None


async def test_reads_are_scoped_to_the_user(projection: MemoryProjection, tmp_path: Path) -> None:
    client, _ = client_with(projection, tmp_path)
    assert {m["memory_id"] for m in await client.get_all(user_id="ann")} == {"ann-1", "ann-2"}
    assert await client.get("bob-1", user_id="ann") is None
    assert (await client.get("bob-1", user_id="bob"))["memory"] == "Bob lives in Berlin"  # type: ignore[index]
    hits = await client.search("lives in", user_id="ann", limit=5)
    assert hits and {h["memory_id"] for h in hits} <= {"ann-1", "ann-2"}
    for hostile in ("x' OR '1'='1", "ann' --", "%", ""):
        assert await client.search("lives", user_id=hostile) == []
        assert await client.get_all(user_id=hostile) == []
        assert await client.get("ann-1", user_id=hostile) is None
    # Before any memory was recorded, a point-in-time search finds nothing.
    assert await client.search("lives", user_id="ann", as_of=T0 - timedelta(days=1)) == []


async def test_delete_checks_ownership_and_publishes_an_event(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    client, producer = client_with(projection, tmp_path)
    for foreign in ("bob-1", "nope", "x' OR '1'='1"):
        with pytest.raises(KeyError):
            await client.delete(foreign, user_id="ann")
    assert producer.sent == []
    event_id = await client.delete("ann-1", user_id="ann")
    ((topic, key, value),) = producer.sent
    event = decode_event(value)
    assert topic == "t.memories" and key == b"ann"
    assert isinstance(event, MemoryDeleted) and event.memory_id == "ann-1"
    assert event.event_id == event_id and event.user_id == "ann"
    assert projection.get("ann", "ann-1").status == "active"  # type: ignore[union-attr]  # the projector writes


async def test_a_deletion_reason_is_sealed_with_the_users_key_and_never_creates_one(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    client, producer = client_with(projection, tmp_path)
    await client.delete("ann-1", user_id="ann", reason="I told you I moved from Oslo")
    ((_, _, value),) = producer.sent
    assert b"Oslo" not in value
    event = decode_event(value)
    assert event.encryption is not None
    key_id, _ = client.backend.keys.key_for("ann", create=False)  # type: ignore[misc]
    assert event.encryption.key_id == key_id  # her existing key
    opened = open_event(event, client.backend.keys)
    assert isinstance(opened, MemoryDeleted) and opened.reason == "I told you I moved from Oslo"

    # Erased (her key destroyed) while the projection still lists her memories: nothing is
    # published, sealed or not, and no new key appears.
    producer.sent.clear()
    client.backend.keys.destroy("ann")
    with pytest.raises(KeyError):
        await client.delete("ann-2", user_id="ann", reason="Oslo again")
    assert await client.delete_all(user_id="ann", reason="Oslo again") == []
    assert producer.sent == []
    assert client.backend.keys.key_for("ann", create=False) is None


async def test_delete_all_deletes_only_that_users_active_memories(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    client, producer = client_with(projection, tmp_path)
    ids = await client.delete_all(user_id="ann")
    deleted = [decode_event(value) for _, _, value in producer.sent]
    assert sorted(e.memory_id for e in deleted) == ["ann-1", "ann-2"]  # type: ignore[attr-defined]
    assert {e.user_id for e in deleted} == {"ann"} and len(ids) == 2
    assert await client.delete_all(user_id="nobody") == []


async def test_add_refuses_an_oversized_event_before_publishing(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    client, producer = client_with(projection, tmp_path)
    with pytest.raises(ValueError, match="over the limit"):
        await client.add("x" * 999_999, user_id="ann")
    assert producer.sent == []
    result = await client.add("I live in Oslo", user_id="ann", session_id="s1", close=False)
    assert result["session_id"] == "s1" and len(result["event_ids"]) == 1
    assert [(t, k) for t, k, _ in producer.sent] == [("t.chat", b"ann")]
    ((_, _, value),) = producer.sent
    assert b"Oslo" not in value  # sealed with ann's key, created on her first write
    opened = open_event(decode_event(value), client.backend.keys)
    assert isinstance(opened, MessageAdded) and opened.content == "I live in Oslo"


def test_the_sync_client_works_inside_a_running_loop(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    async def inside() -> list[Any]:
        with MemoryClient(Settings(data_dir=tmp_path), projection=projection) as client:
            return client.get_all(user_id="ann")  # type: ignore[return-value]

    assert len(asyncio.run(inside())) == 2


async def test_search_publishes_the_access_event_of_what_it_returned(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    client, producer = client_with(projection, tmp_path)
    hits = await client.search("Ann lives in Oslo", user_id="ann", limit=1)
    assert [h["memory_id"] for h in hits] == ["ann-1"]
    await client.close()  # waits for the background publish
    ((topic, key, value),) = producer.sent
    event = decode_event(value)
    assert topic == "t.accesses" and key == b"ann"
    assert isinstance(event, MemoriesRetrieved) and event.user_id == "ann"
    assert [m.memory_id for m in event.memories] == ["ann-1"]
    # The query is the user's words: sealed with ann's key, readable with it.
    assert b"lives in Oslo" not in value and event.encryption is not None
    assert open_event(event, client.backend.keys).query == "Ann lives in Oslo"  # type: ignore[union-attr]
    assert await client.search("lives", user_id="bob", limit=200)
    with pytest.raises(ValueError):
        await client.search("lives", user_id="ann", limit=0)


def test_searches_without_a_broker_log_their_lost_access_events_once_in_one_line(
    projection: MemoryProjection, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The real publisher, and no broker where the settings say: every access event is lost.
    settings = unit_settings(tmp_path)
    with MemoryClient(settings, projection=projection) as client:
        for query in ("Oslo", "green tea", "where does Ann live"):
            assert client.search(query, user_id="ann")
    lost = [r for r in caplog.records if r.name == "memstream.streams.service.accesses"
            and r.levelno >= logging.WARNING]
    assert len(lost) == 1, [r.getMessage() for r in lost]
    (record,) = lost
    message = record.getMessage()
    assert record.exc_info is None and "\n" not in message
    assert "1 access event(s) not published" in message
    assert f"cannot reach the broker at {settings.broker}" in message


async def test_explain_gives_every_part_of_the_score_and_they_add_up(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    client, _ = client_with(projection, tmp_path)
    plain = await client.search("where does Ann live", user_id="ann", limit=2)
    explained = await client.search("where does Ann live", user_id="ann", limit=2, explain=True)
    await client.close()
    assert [h["memory_id"] for h in explained] == [h["memory_id"] for h in plain]
    assert all("explain" not in hit for hit in plain)
    for hit in explained:
        parts = hit["explain"]
        weights = parts["weights"]
        total = (
            weights["relevance"] * parts["relevance"]
            + weights["importance"] * parts["importance"]
            + weights["recency"] * parts["recency"]
            + weights["use"] * parts["use"]
        ) / sum(weights.values())
        assert hit["score"] == pytest.approx(total)
        assert parts["text"].startswith(f"{hit['score']:.3f} = ")


async def test_context_places_only_that_users_memories_and_counts_them_as_used(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    client, producer = client_with(projection, tmp_path)
    found = await client.context(
        "Do you remember where I live?", user_id="ann", recent_turns=["Hi"], session_id="s9"
    )
    await client.close()
    assert "Ann lives in Oslo" in found["context"] and "Berlin" not in found["context"]
    placed = [m["memory_id"] for m in found["memories"] if m["in_context"]]
    assert "ann-1" in placed and not any(m.startswith("bob") for m in placed)
    assert found["tokens"] > 0 and found["query"].startswith("Do you remember")
    ((topic, _key, value),) = producer.sent
    event = decode_event(value)
    assert topic == "t.accesses" and isinstance(event, MemoriesRetrieved)
    assert event.session_id == "s9" and {m.memory_id for m in event.memories} == set(placed)
    with pytest.raises(TypeError):
        await client.context("x", user_id="ann", recent_turns="not a list")  # type: ignore[arg-type]


async def test_close_session_publishes_an_explicit_close_of_that_users_session(
    projection: MemoryProjection, tmp_path: Path
) -> None:
    client, producer = client_with(projection, tmp_path)
    event_id = await client.close_session("trip", user_id="ann")
    await client.close()
    ((topic, key, value),) = producer.sent
    closed = decode_event(value)
    assert topic == "t.chat" and key == b"ann"
    assert isinstance(closed, SessionClosed) and closed.event_id == event_id
    assert (closed.user_id, closed.session_id, closed.reason) == ("ann", "trip", "explicit")


@given(times=st.fixed_dictionaries({}, optional=dict.fromkeys(("since", "until", "as_of"), zoned_times)))
@hypothesis_settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_search_at_any_zoned_time_answers_or_refuses_in_one_line(
    projection: MemoryProjection, tmp_path: Path, times: dict[str, datetime]
) -> None:
    as_of = times.pop("as_of", None)

    async def search() -> list[Any]:
        client, _ = client_with(projection, tmp_path)
        async with client:
            return await client.search("lives in", user_id="ann", filters=times, as_of=as_of)

    try:
        hits = asyncio.run(search())
    except ValueError as refused:
        said = str(refused)
        assert "outside the years 1 to 9999 in UTC" in said and "\n" not in said
        assert said.split()[0] in ("since", "until", "as_of")
    else:
        assert {hit["memory_id"] for hit in hits} <= {"ann-1", "ann-2"}


def test_the_cli_refuses_a_time_with_no_utc_equivalent_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for option, moment in (("--as-of", "0001-01-01T00:00+14:00"),
                           ("--since", "9999-12-31T23:59:59-14:00"),
                           ("--until", "0001-01-01T00:00+00:01")):
        with pytest.raises(SystemExit) as ended:
            main(["search", "--user", "ann", option, moment, "where do I live"])
        assert ended.value.code == 2
        said = capsys.readouterr().err.strip().splitlines()[-1]
        assert option in said and "outside the years 1 to 9999 in UTC" in said
