"""Replay on the real broker and LanceDB: a rebuilt memory projection is identical to the live
one, a replay swaps in while the worker runs, v1 events replay through the v2 schema, and a
re-extraction writes a new versioned table beside the live one."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from chat import conversation
from harness import archive_caught_up, cli, wait_for, wait_until_projected
from llm_server import Reply, ScriptedServer, completion

from memstream.models.codec import decode_event, encode_event
from memstream.models.events.chat import TaskProgress, TaskSet
from memstream.models.events.envelope import Event
from memstream.models.events.memory import (
    ExtractionRecorded,
    MemoriesRetrieved,
    MemoryAdded,
    RetrievedMemory,
)
from memstream.models.settings import Settings
from memstream.models.upcasting import UNRECORDED_EXTRACTOR
from memstream.projections.analytics import run_sql
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.entity_graph import entity_graph
from memstream.projections.memories import (
    MemoryRecord,
    MemoryStore,
    PartitionedMemories,
)
from memstream.projections.shadow import live_name
from memstream.streams.client import MemoryClient
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics, ensure_topics
from memstream.streams.llm.extractor import LLMExtractor
from memstream.streams.operations.reextract import reextract
from memstream.streams.operations.replay import (
    memories_fingerprint,
    rebuild_memories,
    verify_memories,
)
from memstream.streams.service.chat_events import publish_events
from memstream.streams.service.profiles import profile
from memstream.streams.service.projects import history as project_history
from memstream.streams.worker.process import WorkerProcess

SettingsFactory = Callable[..., Settings]
FIXTURES = Path(__file__).parent.parent / "fixtures"

TRIP = [
    ("user", "I'm planning a trip to Lisbon in March."),
    ("assistant", "Lovely. What do you enjoy?"),
    ("user", "I love seafood and I prefer walking tours over bus tours."),
    ("assistant", "Alfama is very walkable."),
    ("user", "My budget is about 1500 euros."),
    ("assistant", "That works for a week."),
    ("user", "I live in Berlin and I work at Siemens."),
    ("assistant", "Noted."),
    ("user", "My sister Maria is coming with me."),
    ("assistant", "Great, two travellers."),
]
LATER = [
    ("user", "Actually, my budget is now 2000 euros."),
    ("assistant", "More room for seafood."),
    ("user", "I prefer walking tours over bus tours."),
    ("assistant", "Walking it is."),
]


async def publish_raw(settings: Settings, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(topic, key=key, value=value)
    finally:
        await producer.stop()


def retrieval(number: int, user_id: str, memory_id: str) -> MemoriesRetrieved:
    return MemoriesRetrieved(
        event_id=f"{user_id}/retrieval/{number}",
        user_id=user_id,
        session_id="later",
        occurred_at=datetime(2026, 11, 3, 9, number, tzinfo=UTC),
        query="what does she like?",
        memories=(RetrievedMemory(memory_id=memory_id, score=0.5),),
    )


def everything(projection: MemoryStore, users: list[str]) -> list[MemoryRecord]:
    return [m for u in users for m in projection.list_memories(u, include_inactive=True)]


def with_task(events: list[Event], progress: str) -> list[Event]:
    """``events`` (one session, its close last) with the task "Plan the trip" set in
    project lisbon after the start and ``progress`` on it before the close."""
    start, close = events[0], events[-1]
    common = {"user_id": start.user_id, "session_id": start.session_id}
    task = TaskSet(event_id=f"{start.event_id}/task", task="Plan the trip", project="lisbon",
                   occurred_at=start.occurred_at + timedelta(seconds=30), **common)
    moved = TaskProgress(event_id=f"{start.event_id}/progress", progress=progress,
                         occurred_at=close.occurred_at - timedelta(seconds=30), **common)
    return [start, task, *events[1:-1], moved, close]


def workload(settings: Settings, users: list[str], tmp_path: Path) -> MemoryStore:
    """Several users and sessions through a real worker: eviction chunks, duplicates,
    supersessions, promotions, expiries, deletions, access events and a malformed record."""
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    topics = Topics.from_settings(settings)
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        for user in users:
            trip = with_task(conversation(user, "trip", TRIP), "flights booked")
            asyncio.run(publish_events(settings, trip))
        wait_for(lambda: all(projection.list_memories(u) for u in users), "first memories")
        for user in users:
            later = with_task(conversation(
                user, "later", LATER, start=datetime(2026, 11, 9, 9, tzinfo=UTC)
            ), "hotel booked, done")
            asyncio.run(publish_events(settings, later))
        wait_for(
            lambda: all(
                any(m.status == "superseded" for m in projection.list_memories(u, include_inactive=True))
                for u in users
            ),
            "a supersession per user",
        )
        # Three retrievals promote a short-term memory; searches through the client count.
        short = next(m for m in projection.list_memories(users[0]) if m.tier == "short_term"
                     and m.memory_type != "episode")
        accesses = [(users[0].encode(), encode_event(retrieval(i, users[0], short.memory_id)))
                    for i in range(3)]
        asyncio.run(publish_raw(settings, topics.accesses, accesses))
        asyncio.run(publish_raw(settings, topics.memories, [(b"x", b"{not an event")]))
        with MemoryClient(settings) as client:
            client.search("budget for the trip", user_id=users[1])
            doomed = client.get_all(user_id=users[2])[0]["memory_id"]
            client.delete(doomed, user_id=users[2])
        wait_for(lambda: (projection.get(users[0], short.memory_id) or short).tier == "long_term",
                 "the promotion")
        wait_for(lambda: any(m.status == "expired" for m in everything(projection, users)),
                 "expiries")
        wait_for(lambda: (projection.get(users[2], doomed) or short).status == "deleted",
                 "the deletion")
        wait_for(lambda: any(m.access_count for m in projection.list_memories(users[1])),
                 "the client's access event")

        def nothing_left_to_decide() -> bool:
            # Every short-term memory but the episodes expires (a 4 s TTL): once none is
            # active, and none is due a promotion, the keeper publishes nothing more.
            return not [
                m for m in everything(projection, users)
                if m.tier == "short_term" and m.memory_type != "episode" and m.status == "active"
            ] and not projection.promotion_due(settings.promote_after_retrievals)

        wait_for(nothing_left_to_decide, "the keeper to have expired or promoted every memory")
        wait_until_projected(settings, projection)
    return projection


def test_a_rebuilt_memory_projection_is_identical_to_the_live_one(
    settings_factory: SettingsFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = settings_factory(web_port=free_port(), max_messages=4, short_term_ttl_s=4.0)
    users = ["ann", "bob", "cho"]
    projection = workload(settings, users, tmp_path)
    memories = everything(projection, users)
    statuses = {m.status for m in memories}
    assert {"active", "superseded", "expired", "deleted"} <= statuses
    assert any(m.reinforcement_count for m in memories)
    assert any(m.tier == "long_term" and m.access_count >= 3 for m in memories)
    consolidations = [decode_event(r.value) for r in asyncio.run(
        read_topic(settings, Topics.from_settings(settings).consolidation))]
    assert any(c.reason == "evicted" for c in consolidations)  # type: ignore[attr-defined]

    # Each user's profile (what holds now, and at the time of the later sessions) before
    # the replay, to compare with the rebuilt table's.
    moments = [None, datetime(2026, 11, 9, 9, tzinfo=UTC)]
    profiles = [profile(projection, u, as_of=at) for u in users for at in moments]
    assert any(found["subjects"] for found in profiles)
    # And each user's project history (a task in project lisbon across both sessions).
    histories = [project_history(projection, u, as_of=at) for u in users for at in moments]
    assert all(found["projects"] for found in histories)
    graphs = [entity_graph(projection, u, as_of=at) for u in users for at in moments]
    assert any(found["edges"] for found in graphs)
    # ...and in SQL: the analytics' graph views read the live table, the rebuilt one after.
    edge_order = "user_id, source_key, target_key, kind, relation, valid_from, memory_ids"
    graph_views = [
        "SELECT * FROM entity_nodes ORDER BY user_id, entity_key",
        f"SELECT * FROM entity_edges ORDER BY {edge_order}",
    ]
    in_sql = [run_sql(settings, query) for query in graph_views]
    assert in_sql[1].num_rows > 0

    live, rebuilt = asyncio.run(verify_memories(settings))
    assert live == rebuilt and live.rows == len(memories)
    # The fingerprint sees a real difference: one more access changes it.
    assert cli(settings, monkeypatch, "verify", "--projection", "memories") == 0
    assert "same" in capsys.readouterr().out

    # `replay` builds a shadow table, finds it identical, and swaps it in.
    assert cli(settings, monkeypatch, "replay", "--projection", "memories") == 0
    out = capsys.readouterr().out
    assert "identical to the live table memories" in out and "swapped in" in out
    swapped = live_name(settings.lancedb_dir, "memories", "memories")
    assert swapped.startswith("memories-")
    assert memories_fingerprint(PartitionedMemories.from_settings(settings, embedder_from_settings(settings), swapped)) == live
    rebuilt_table = PartitionedMemories.from_settings(
        settings, embedder_from_settings(settings), swapped
    )
    assert [profile(rebuilt_table, u, as_of=at) for u in users for at in moments] == profiles
    assert [
        project_history(rebuilt_table, u, as_of=at) for u in users for at in moments
    ] == histories
    assert [entity_graph(rebuilt_table, u, as_of=at) for u in users for at in moments] == graphs
    assert [run_sql(settings, query) for query in graph_views] == in_sql
    # Readers follow the pointer: the same answers from the new table.
    assert {m.memory_id for m in everything(projection, users)} == {m.memory_id for m in memories}


def test_a_replay_swaps_in_while_the_worker_runs_and_the_projector_follows(
    settings_factory: SettingsFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = settings_factory(web_port=free_port(), log_level="info")  # logs the swap
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    log = tmp_path / "worker.log"
    with WorkerProcess(settings, log_path=log):
        asyncio.run(publish_events(settings, conversation("ann", "trip", TRIP)))
        wait_for(lambda: projection.list_memories("ann"), "memories")
        wait_until_projected(settings, projection)
        assert cli(settings, monkeypatch, "replay", "--projection", "memories") == 0
        assert "swapped in" in capsys.readouterr().out
        new_table = live_name(settings.lancedb_dir, "memories", "memories")
        # The projector looks at the pointer every second and says when it follows it.
        wait_for(
            lambda: f"a replay swapped in table {new_table!r}" in log.read_text(errors="replace"),
            "the projector to follow the pointer",
            30,
        )
        asyncio.run(publish_events(settings, conversation("bob", "trip", TRIP)))
        follower = PartitionedMemories.from_settings(settings, embedder_from_settings(settings), new_table)
        wait_for(lambda: follower.list_memories("bob"), "bob's memories in the swapped-in table")
    old = PartitionedMemories.from_settings(settings, embedder_from_settings(settings), "memories")
    assert old.list_memories("bob") == []
    # A reader opened before the swap follows the pointer on its next read.
    assert projection.list_memories("bob")
    assert projection.of_user("bob").table_name.startswith(f"{new_table}-p")


def test_v1_events_replay_through_the_v2_schema(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    settings = settings_factory(partitions=1)
    asyncio.run(ensure_topics(settings))
    lines = (FIXTURES / "memory_added_v1.jsonl").read_text().splitlines()
    assert all(json.loads(line)["schema_version"] == 1 for line in lines)
    records = [(json.loads(line)["user_id"].encode(), line.encode()) for line in lines]
    asyncio.run(publish_raw(settings, Topics.from_settings(settings).memories, records))
    projection, read, invalid = asyncio.run(rebuild_memories(settings, "memories"))
    assert (read, invalid) == (len(lines), 0)
    rows = projection.list_memories("ann", include_inactive=True)
    assert len(rows) == 2 and {r.extractor for r in rows} == {UNRECORDED_EXTRACTOR}
    superseded = [r for r in rows if r.status == "superseded"]
    assert len(superseded) == 1 and "1500" in superseded[0].content


def test_reextract_writes_a_versioned_table_and_leaves_the_live_one_alone(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    settings = settings_factory(web_port=free_port())
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    events = conversation("ann", "trip", TRIP[:4])
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        asyncio.run(publish_events(settings, events))
        wait_for(lambda: projection.list_memories("ann"), "memories")
        wait_until_projected(settings, projection)
    before = memories_fingerprint(projection)
    body = {
        "preferences": [{"content": "Prefers walking tours to bus tours", "importance": 0.85,
                         "source_event_ids": [events[3].event_id]}],
        "facts": [{"content": "Is travelling to Lisbon in March", "importance": 0.9,
                   "source_event_ids": [events[1].event_id]}],
        "summary": "Planning a Lisbon trip.", "entities": ["Lisbon"], "corrections": [],
    }
    server = ScriptedServer([Reply(completion(json.dumps(body), prompt_tokens=99))])
    server.start()
    try:
        llm = settings_factory(
            extractor="llm", llm_base_url=server.base_url, llm_api_key="sk-local",
            llm_model="scripted", llm_timeout_s=5,
        )
        report = asyncio.run(reextract(llm, LLMExtractor.from_settings(llm), "llm-test"))
    finally:
        server.stop()
    assert report.spans == 1 and report.failed == 0 and report.table == "memories-llm-test"
    assert memories_fingerprint(projection) == before  # the live table is untouched
    version = PartitionedMemories.from_settings(settings, embedder_from_settings(settings), report.table)
    contents = {m.content for m in version.list_memories("ann")}
    assert {"Prefers walking tours to bus tours", "Is travelling to Lisbon in March"} <= contents
    assert all(m.extractor and m.extractor.startswith("llm/") for m in version.list_memories("ann"))
    hits = version.search("ann", "walking tours", limit=3)
    assert hits and hits[0].content == "Prefers walking tours to bus tours"
    # The versioned topic records the LLM's reply: it can be replayed without the LLM.
    recorded = [decode_event(r.value) for r in asyncio.run(read_topic(settings, report.topic))]
    assert [type(e) for e in recorded if isinstance(e, ExtractionRecorded)] == [ExtractionRecorded]
    assert sum(isinstance(e, MemoryAdded) for e in recorded) == report.added >= 3
    with pytest.raises(ValueError, match="exists"):
        asyncio.run(reextract(llm, LLMExtractor.from_settings(llm), "llm-test"))


def test_until_keeps_a_past_projection_beside_the_live_one(
    settings_factory: SettingsFactory,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = settings_factory(partitions=1)
    asyncio.run(ensure_topics(settings))
    topic = Topics.from_settings(settings).memories
    lines = (FIXTURES / "memory_added_v1.jsonl").read_text().splitlines()
    first = [(b"ann", lines[0].encode())]
    asyncio.run(publish_raw(settings, topic, first))
    time.sleep(0.05)
    cut = datetime.now(UTC)
    time.sleep(0.05)
    asyncio.run(publish_raw(settings, topic, [(b"ann", line.encode()) for line in lines[1:]]))
    assert cli(settings, monkeypatch, "replay", "--projection", "memories",
               "--until", cut.isoformat()) == 0
    out = capsys.readouterr().out
    table = out.split("--table ")[1].split()[0]
    past = PartitionedMemories.from_settings(settings, embedder_from_settings(settings), table)
    assert [m.status for m in past.list_memories("ann", include_inactive=True)] == ["active"]
    assert live_name(settings.lancedb_dir, "memories", "memories") == "memories"


def as_of_hits(settings: Settings, when: datetime) -> list[str]:
    with MemoryClient(settings) as client:
        return [h["memory"] for h in client.search("budget", user_id="ann", as_of=when)]


def test_search_as_of_answers_from_what_was_believed_then(
    settings_factory: SettingsFactory,
) -> None:
    settings = settings_factory(partitions=1)
    asyncio.run(ensure_topics(settings))
    lines = (FIXTURES / "memory_added_v1.jsonl").read_text().splitlines()
    records = [(b"ann", line.encode()) for line in lines]
    asyncio.run(publish_raw(settings, Topics.from_settings(settings).memories, records))
    asyncio.run(rebuild_memories(settings, "memories"))
    added = [json.loads(line) for line in lines]
    first = datetime.fromisoformat(added[0]["occurred_at"])
    second = datetime.fromisoformat(added[1]["occurred_at"])
    assert as_of_hits(settings, first - timedelta(minutes=1)) == []
    assert as_of_hits(settings, first + timedelta(minutes=1)) == [added[0]["content"]]
    assert as_of_hits(settings, second + timedelta(minutes=1)) == [added[1]["content"]]
    with MemoryClient(settings) as client:
        assert [h["memory"] for h in client.search("budget", user_id="ann")] == [added[1]["content"]]
        assert client.search("budget", user_id="bob", as_of=second) == []


def test_a_lost_broker_is_reported_then_restored_from_the_archive_and_replayed_identically(
    settings_factory: SettingsFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memstream.streams.kafka.broker import EmbeddedBroker

    first = EmbeddedBroker(free_port(), log_dir=tmp_path / "broker-a").start()
    try:
        settings = settings_factory(broker=first.address, web_port=free_port())
        projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
        with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
            for user in ("ann", "bob"):
                asyncio.run(publish_events(settings, conversation(user, "trip", TRIP)))
            wait_for(lambda: projection.list_memories("ann") and projection.list_memories("bob"),
                     "memories of both users")
            with MemoryClient(settings) as client:
                client.search("budget", user_id="ann")
            wait_for(lambda: any(m.access_count for m in projection.list_memories("ann")),
                     "the access event")
            wait_for(lambda: archive_caught_up(settings), "the archive to hold the whole log")
        before = memories_fingerprint(projection)
    finally:
        first.stop()  # the embedded broker keeps its log in memory: it is gone

    second = EmbeddedBroker(free_port(), log_dir=tmp_path / "broker-b").start()
    try:
        fresh = settings.model_copy(update={"broker": second.address})
        asyncio.run(ensure_topics(fresh))
        # Replaying from the empty log would throw memories away: it refuses, plainly.
        assert cli(fresh, monkeypatch, "replay", "--projection", "memories") == 1
        assert "the broker lost its log" in capsys.readouterr().err
        assert cli(fresh, monkeypatch, "restore") == 0
        assert "restored" in capsys.readouterr().out
        assert cli(fresh, monkeypatch, "replay", "--projection", "memories") == 0
        assert "identical to the live table memories" in capsys.readouterr().out
        rebuilt = PartitionedMemories.from_settings(
            fresh, embedder_from_settings(fresh),
            live_name(fresh.lancedb_dir, "memories", "memories"),
        )
        assert memories_fingerprint(rebuilt) == before
        assert cli(fresh, monkeypatch, "verify", "--projection", "analytics") == 0
    finally:
        second.stop()


def test_an_interrupted_replay_resumes_where_it_stopped(settings_factory: SettingsFactory) -> None:
    from memstream.streams.operations.replay import replay_memories

    settings = settings_factory(partitions=1)
    asyncio.run(ensure_topics(settings))
    topic = Topics.from_settings(settings).memories
    lines = (FIXTURES / "memory_added_v1.jsonl").read_text().splitlines()
    asyncio.run(publish_raw(settings, topic, [(b"ann", lines[0].encode())]))
    time.sleep(0.05)
    cut = datetime.now(UTC)
    time.sleep(0.05)
    asyncio.run(publish_raw(settings, topic, [(b"ann", line.encode()) for line in lines[1:]]))
    # A replay that stopped after the first record: its table and its marker are left.
    partial, _, _ = asyncio.run(rebuild_memories(settings, "memories-interrupted", until=cut))
    assert partial.count() == 1
    (settings.lancedb_dir / "memories.REPLAY").write_text("memories-interrupted\n")
    done: list[tuple[int, int]] = []
    report = asyncio.run(replay_memories(settings, progress=lambda d, t: done.append((d, t))))
    assert report.table == "memories-interrupted" and report.swapped
    assert done[0] == (0, len(lines) - 1)  # only what the first run had not applied
    fresh, _, _ = asyncio.run(rebuild_memories(settings, "memories-fresh"))
    assert report.fingerprint == memories_fingerprint(fresh)
    assert not (settings.lancedb_dir / "memories.REPLAY").exists()
