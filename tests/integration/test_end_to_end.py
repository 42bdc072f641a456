"""The whole path on the real broker and LanceDB: publish → worker → memories → search."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiokafka import AIOKafkaProducer
from chat import conversation
from harness import wait_for

from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import MemoryStore, PartitionedMemories
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.deadletters import DeadLetter
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.store import keystore_from_settings
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess, worker_healthy

ALICE_TRIP = [
    ("user", "I'm planning a trip to Lisbon in March."),
    ("assistant", "Lovely. What do you enjoy?"),
    ("user", "I love seafood and I prefer walking tours over bus tours."),
    ("assistant", "Alfama is very walkable."),
    ("user", "My budget is about 1500 euros."),
]
ALICE_LATER = [
    ("user", "Actually, my budget is now 2000 euros because my sister Clara is joining."),
    ("assistant", "Great, that opens up Chiado."),
    ("user", "I hate early flights, never book anything before 9am."),
]
BOB = [
    ("user", "I live in Berlin and I work at Siemens as a data engineer."),
    ("assistant", "Nice. How can I help?"),
    ("user", "I prefer type hints everywhere and small functions."),
]


def wait_for_memories(
    projection: MemoryStore, expected: dict[str, set[str]], timeout_s: float = 90
) -> None:
    """Wait until every user in ``expected`` has memories of each of its sessions."""
    wait_for(
        lambda: {user: {r.session_id for r in projection.list_memories(user)} for user in expected},
        f"memories of the sessions {expected}",
        timeout_s,
        until=lambda seen: all(expected[user] <= seen[user] for user in expected),
        interval_s=0.5,
    )


async def publish_raw(settings: Settings, records: list[tuple[bytes | None, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker)
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(Topics.from_settings(settings).chat, key=key, value=value)
    finally:
        await producer.stop()


def test_conversations_become_searchable_memories_scoped_to_their_user(
    settings_factory, tmp_path: Path
) -> None:
    settings = settings_factory(web_port=free_port())
    events = (
        conversation("alice", "trip", ALICE_TRIP)
        + conversation("bob", "intro", BOB)
        + conversation("alice", "later", ALICE_LATER)
    )
    malformed = [
        (b"alice", b"{not json"),
        (b"alice", json.dumps({"event_id": "x", "type": "message_added"}).encode()),
        (
            b"mallory",
            json.dumps({**json.loads(events[1].model_dump_json()), "event_id": "spoof"}).encode(),
        ),
        (b"bob", json.dumps({"type": "no_such_type", "user_id": "bob"}).encode()),
    ]
    with WorkerProcess(settings, log_path=tmp_path / "worker.log") as worker:
        asyncio.run(publish_events(settings, events[:4]))
        asyncio.run(publish_raw(settings, malformed))  # bad events between good ones
        asyncio.run(publish_events(settings, events[4:]))

        projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
        wait_for_memories(projection, {"alice": {"trip", "later"}, "bob": {"intro"}})
        assert worker_healthy(settings), "a malformed event must not take the worker down"

        hits = projection.search("alice", "how much money can I spend on the trip?", limit=5)
        assert hits, "alice has memories about her budget"
        assert any("2000" in hit.content or "1500" in hit.content for hit in hits[:3])
        assert all(hit.session_id in {"trip", "later"} for hit in hits)
        # Every hit names the chat events it came from.
        alice_ids = {e.event_id for e in events if e.user_id == "alice"}
        assert all(set(hit.source_event_ids) <= alice_ids and hit.source_event_ids for hit in hits)

        flights = projection.search("alice", "what time can flights leave?", limit=3)
        assert any("9am" in hit.content for hit in flights)

        bob_hits = projection.search("bob", "where does he live", limit=5)
        assert any("Berlin" in hit.content for hit in bob_hits)
        assert not any("Lisbon" in hit.content or "budget" in hit.content for hit in bob_hits)
        assert projection.search("mallory", "budget") == []

        letters = [
            DeadLetter.model_validate_json(r.value)
            for r in asyncio.run(read_topic(settings, Topics.from_settings(settings).deadletters))
        ]
        keys = keystore_from_settings(settings)
        assert sorted(letter.original_value(keys) for letter in letters) == sorted(
            v for _, v in malformed
        )
        # Keyed by a user with a key (alice, bob): sealed; mallory has none.
        assert {letter.sealed for letter in letters} == {True, False}
        assert all(letter.reason and letter.agent == "sessions" for letter in letters)
        reasons = " | ".join(letter.reason for letter in letters)
        assert "not JSON" in reasons and "key is not the event's user_id" in reasons
        assert worker.stop() == 0
