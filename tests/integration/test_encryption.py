"""Crypto-shredding on the real broker: content is sealed in every topic and in the sessions
changelog, memories are searchable as before, and destroying a user's key plus a
``user_erased`` event removes the user from every projection, replays included."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from chat import conversation
from harness import wait_for

from memstream.models.codec import encode_event
from memstream.models.events.chat import UserErased
from memstream.models.session import SessionState, session_key
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import PartitionedMemories
from memstream.streams.client import MemoryClient
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.store import FileKeyStore
from memstream.streams.operations.rebuild_sessions import (
    fold_chat_topic,
    live_sessions,
    sessions_changelog_topic,
)
from memstream.streams.operations.replay import rebuild_memories
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess

#: Words that appear nowhere but in the users' own messages.
ANN_PLACE = "Marrowfield"
ANN_OPEN = "Pellucid"
BOB_PLACE = "Quenderby"
CY_PLACE = "Vintrelle"

ANN_CHAT = [
    {"role": "user", "content": f"I live in {ANN_PLACE} and I prefer night trains."},
    {"role": "assistant", "content": "Noted."},
    {"role": "user", "content": f"My favourite bakery is in {ANN_PLACE} too."},
]
BOB_CHAT = [
    ("user", f"I live in {BOB_PLACE} and I work at a lighthouse."),
    ("assistant", "Sounds calm."),
    ("user", f"I prefer tea from {BOB_PLACE} market."),
]


async def send(settings: Settings, records: list[tuple[str, bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    await producer.start()
    try:
        for topic, key, value in records:
            await producer.send_and_wait(topic, key=key, value=value)
    finally:
        await producer.stop()


def raw_log(settings: Settings) -> dict[str, bytes]:
    """Every key and value of the durable topics and of the sessions changelog, by topic."""
    topics = Topics.from_settings(settings)
    names = [topics.chat, topics.consolidation, topics.memories, topics.accesses]
    names += [topics.deadletters, sessions_changelog_topic(settings)]
    return {
        name: b"\n".join(
            (r.key or b"") + b"\t" + (r.value or b"")
            for r in asyncio.run(read_topic(settings, name))
        )
        for name in names
    }


def files_holding(directory: Path, needle: bytes) -> list[str]:
    return [str(p) for p in directory.rglob("*") if p.is_file() and needle in p.read_bytes()]


def erasure(user: str) -> bytes:
    event = UserErased(
        event_id=f"erase-{user}",
        user_id=user,
        session_id="-",
        occurred_at=datetime.now(UTC),
        erasure_id=f"test-{user}",
    )
    return encode_event(event)


def last_changelog_values(settings: Settings) -> dict[str, bytes | None]:
    values: dict[str, bytes | None] = {}
    for record in asyncio.run(read_topic(settings, sessions_changelog_topic(settings))):
        values[json.loads(record.key)] = record.value
    return values


def test_content_is_sealed_everywhere_and_an_erased_user_never_comes_back(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = settings_factory(web_port=free_port())
    topics = Topics.from_settings(settings)
    keys = FileKeyStore(settings.keys_dir)
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        with MemoryClient(settings) as memory:
            memory.add(ANN_CHAT, user_id="ann")
            # An open session: the window (the user's words) sits in the sessions changelog.
            memory.add(
                f"Remind me about the {ANN_OPEN} festival.", user_id="ann", session_id="open", close=False
            )
            asyncio.run(publish_events(settings, conversation("bob", "intro", BOB_CHAT)))
            # A raw producer's plaintext events (no key): the worker seals what it derives.
            cy = conversation("cy", "raw", [("user", f"I grew up in {CY_PLACE}.")])
            cy += conversation("cy", "open", [("user", f"Back to {CY_PLACE} soon.")], close=False)
            asyncio.run(send(settings, [(topics.chat, b"cy", encode_event(e)) for e in cy]))

            # Memories are searchable, decrypted, exactly as before.
            hits = wait_for(
                lambda: memory.search(f"where is {ANN_PLACE}?", user_id="ann"),
                "ann's memory in a search",
                until=lambda found: any(ANN_PLACE in h["memory"] for h in found),
            )
            ann_memory = next(h for h in hits if ANN_PLACE in h["memory"])["memory_id"]
            wait_for(
                lambda: memory.get_all(user_id="bob"),
                "bob's memory",
                until=lambda found: any(BOB_PLACE in m["memory"] for m in found),
            )
            wait_for(
                lambda: memory.get_all(user_id="cy"),
                "cy's memory",
                until=lambda found: any(CY_PLACE in m["memory"] for m in found),
            )
            assert any(
                e["details"].get("content", "").find(ANN_PLACE) >= 0
                for e in memory.history(ann_memory, user_id="ann")
            )
            sessions = wait_for(
                lambda: asyncio.run(live_sessions(settings)),
                "both open sessions in the table",
                until=lambda values: session_key("ann", "open") in values and session_key("cy", "open") in values,
            )
            ann_open = sessions[session_key("ann", "open")]
            assert isinstance(ann_open, SessionState)
            assert ANN_OPEN in ann_open.messages[0].content  # the changelog opens with the key
            bob_memories = len(memory.get_all(user_id="bob"))
        # The client is closed: its access event (the query) is in the log too.

        log = raw_log(settings)
        assert log[topics.accesses] and log[sessions_changelog_topic(settings)]
        for name, data in log.items():
            for word in (ANN_PLACE, ANN_OPEN, BOB_PLACE):
                assert word.encode() not in data, f"{word} in plaintext on {name}"
            if name != topics.chat:  # cy's own chat events were published in plaintext
                assert CY_PLACE.encode() not in data, f"{CY_PLACE} in plaintext on {name}"
        assert files_holding(settings.lancedb_dir, ANN_PLACE.encode())  # the projection reads

        # Erase ann and cy: destroy the keys, then tell the projections.
        assert keys.destroy("ann") >= 1 and keys.destroy("cy") >= 1
        asyncio.run(
            send(
                settings,
                [
                    (topic, user.encode(), erasure(user))
                    for user in ("ann", "cy")
                    for topic in (topics.chat, topics.memories)
                ],
            )
        )

        wait_for(
            lambda: projection.count("ann") + projection.count("cy"),
            "the erased users' memories to go",
            until=lambda n: n == 0,
        )
        changelog = wait_for(
            lambda: last_changelog_values(settings),
            "tombstones for the erased users' sessions",
            until=lambda values: all(
                value is None for key, value in values.items() if key.startswith(("ann\x1f", "cy\x1f"))
            ),
        )
        assert session_key("ann", "open") in changelog  # the worker wrote its tombstone
        assert not [k for k in asyncio.run(live_sessions(settings)) if k.startswith(("ann\x1f", "cy\x1f"))]
        with MemoryClient(settings) as memory:
            assert memory.get_all(user_id="ann", include_inactive=True) == []
            assert memory.search(ANN_PLACE, user_id="ann") == []
            assert memory.history(ann_memory, user_id="ann") == []  # sealed events: unreadable
            assert len(memory.get_all(user_id="bob")) == bob_memories
        # No file of the live table holds the erased content, not even an old version.
        assert files_holding(settings.lancedb_dir, ANN_PLACE.encode()) == []
        assert files_holding(settings.lancedb_dir, CY_PLACE.encode()) == []
        dead = asyncio.run(read_topic(settings, topics.deadletters))
        assert dead == [], "an erased user's events are skipped, never dead-lettered"

    # Replays of the log keep nothing of the erased users.
    rebuilt, _, invalid = asyncio.run(rebuild_memories(settings, "memories-after-erasure"))
    assert invalid == 0
    assert rebuilt.count("ann") == 0 and rebuilt.count("cy") == 0
    assert rebuilt.count("bob") == bob_memories
    folded = asyncio.run(fold_chat_topic(settings))
    assert {value.user_id for value in folded.values()} == {"bob"}

    # A returning user starts a new key generation, readable again.
    with (
        WorkerProcess(settings, log_path=tmp_path / "worker-2.log"),
        MemoryClient(settings) as memory,
    ):
        memory.add([{"role": "user", "content": "I live in Ostravik now."}], user_id="ann")
        wait_for(
            lambda: memory.get_all(user_id="ann"),
            "the returning user's memory",
            until=lambda found: any("Ostravik" in m["memory"] for m in found),
        )
        assert not any(ANN_PLACE in m["memory"] for m in memory.get_all(user_id="ann"))


def test_events_without_keys_are_used_as_they_are(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    """Older events (before encryption) and raw producers' events fold as they are."""
    settings = settings_factory(web_port=free_port(), roles="sessions")
    topics = Topics.from_settings(settings)
    events = conversation("dee", "s", [("user", "plain words")], close=False)
    asyncio.run(send(settings, [(topics.chat, b"dee", encode_event(e)) for e in events]))
    folded: dict[str, Any] = asyncio.run(fold_chat_topic(settings))
    state = folded[session_key("dee", "s")]
    assert state.messages[0].content == "plain words"
    assert FileKeyStore(settings.keys_dir).key_for("dee", create=False) is None
