"""Dead letters on the real broker: 1,000 malformed records between valid events are each
dead-lettered once with a reason, every valid event is processed, and the worker never
restarts; ``memstream dlq`` lists, shows and retries them."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from chat import conversation
from harness import wait_for, wait_until_projected

from memstream.models.codec import encode_event
from memstream.models.events.memory import MemoryAdded
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import PartitionedMemories
from memstream.streams.cli import main
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.progress import group_caught_up
from memstream.streams.kafka.topics import Topics, ensure_topics
from memstream.streams.keys.sealing import seal_event
from memstream.streams.keys.store import KeyStore, keystore_from_settings
from memstream.streams.operations.dlq import dead_letters
from memstream.streams.worker.process import WorkerProcess

SettingsFactory = Callable[..., Settings]
TURNS = [
    ("user", "I live in Porto and I work at Bosch."),
    ("assistant", "Noted."),
    ("user", "I prefer night trains over flights."),
]
MAX_CONTENT = 2_000
MAX_EVENT = 8_192


def bad_chat_records(rng: random.Random, count: int) -> list[tuple[str, bytes | None, bytes | None]]:
    """(kind, key, value) of malformed chat records, every kind a worker can meet."""

    def message(**fields: object) -> bytes:
        base = {"event_id": f"bad-{rng.random()}", "type": "message_added", "user_id": "mallory",
                "session_id": "s", "occurred_at": "2026-11-02T09:00:00Z", "role": "user",
                "content": "hello"}
        return json.dumps({**base, **fields}).encode()

    kinds: list[Callable[[], tuple[str, bytes | None, bytes | None]]] = [
        lambda: ("not json", b"mallory", b"{not json " + str(rng.random()).encode()),
        lambda: ("not an object", b"mallory", b"[1, 2, 3]"),
        lambda: ("wrong schema", b"mallory", message(role="robot")),
        lambda: ("missing field", b"mallory", json.dumps({"type": "message_added"}).encode()),
        lambda: ("unknown type", b"mallory", message(type="telepathy_happened")),
        lambda: ("wrong topic", b"mallory", message(type="memory_expired", memory_id="m")),
        lambda: ("content too long", b"mallory", message(content="x" * (MAX_CONTENT + 1))),
        lambda: ("event too large", b"mallory", message(name="y" * 200, content="z" * 1900)
                 + b" " * MAX_EVENT),
        lambda: ("no key", None, message()),
        lambda: ("wrong key", b"somebody-else", message()),
        lambda: ("tombstone", b"mallory", None),
        lambda: ("unknown field", b"mallory", message(sneaky=True)),
    ]
    return [kinds[i % len(kinds)]() for i in range(count)]


async def publish_mixed(settings: Settings, records: list[tuple[str, bytes | None, bytes | None]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = []
        for topic, key, value in records:
            # A keyless record still goes to a partition: the producer picks one.
            futures.append(await producer.send(topic, key=key, value=value))
        for future in futures:
            await future
    finally:
        await producer.stop()


def poison_memory(user: str, keys: KeyStore) -> MemoryAdded:
    """A well-formed event the projector cannot use: sealed with the user's key, then its
    ciphertext altered, so it no longer opens (an erased user's events, whose key is gone,
    are skipped instead)."""
    event = MemoryAdded(
        event_id=f"{user}/poison", user_id=user, session_id="s", occurred_at="2026-11-02T09:00:00Z",
        memory_id=f"{user}/poison", memory_type="fact", content="the user's words", importance=0.5,
        extraction_event_id="x", extractor="test/1",
    )
    sealed = seal_event(event, keys)
    assert sealed is not None and sealed.encryption is not None
    altered = sealed.encryption.model_copy(update={"ciphertext": "A" * 64})
    return sealed.model_copy(update={"encryption": altered})


def test_a_thousand_malformed_records_are_dead_lettered_and_valid_events_all_processed(
    settings_factory: SettingsFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = settings_factory(
        web_port=free_port(), max_content_chars=MAX_CONTENT, max_event_bytes=MAX_EVENT
    )
    asyncio.run(ensure_topics(settings))
    topics = Topics.from_settings(settings)
    rng = random.Random(5)
    users = [f"user{i}" for i in range(10)]
    bad = bad_chat_records(rng, 990)
    valid = [(topics.chat, e.user_id.encode(), encode_event(e))
             for u in users for e in conversation(u, "trip", TURNS)]
    records: list[tuple[str, bytes | None, bytes | None]] = [
        (topics.chat, key, value) for _, key, value in bad
    ]
    # The rest of the thousand on the other topics the worker reads.
    records += [(topics.memories, b"mallory", b"{broken") for _ in range(4)]
    records += [(topics.accesses, b"mallory", b'{"type": "memories_retrieved"}') for _ in range(3)]
    keys = keystore_from_settings(settings)
    records += [
        (topics.memories, u.encode(), encode_event(poison_memory(u, keys))) for u in users[:3]
    ]
    assert len(records) == 1_000
    mixed = records + valid
    rng.shuffle(mixed)
    # Valid events of one session stay in order among the bad ones.
    order = iter(valid)
    mixed = [next(order) if r in valid else r for r in mixed]

    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    worker = WorkerProcess(settings, log_path=tmp_path / "worker.log").start()
    try:
        pid = worker._process.pid  # type: ignore[union-attr]
        asyncio.run(publish_mixed(settings, mixed))
        wait_for(lambda: len(asyncio.run(dead_letters(settings))[0]) >= 1_000, "1,000 dead letters", timeout_s=120)
        wait_for(lambda: all(projection.list_memories(u) for u in users), "every user's memories", timeout_s=120)
        # Anything still in flight would show up as a 1,001st letter: wait until the
        # worker has processed every record it reads (and sent what that took).
        wait_for(lambda: group_caught_up(settings, [topics.chat, topics.consolidation]),
                 "the workers to commit every chat and consolidation record", timeout_s=120)
        wait_until_projected(settings, projection)
        assert worker._process is not None and worker._process.poll() is None  # never died
        assert worker._process.pid == pid
    finally:
        worker.stop()
    letters, unreadable = asyncio.run(dead_letters(settings))
    assert unreadable == 0 and len(letters) == 1_000
    assert all(s.letter.reason for s in letters)
    assert Counter(s.letter.source_topic for s in letters) == {
        topics.chat: 990, topics.memories: 7, topics.accesses: 3
    }
    reasons = Counter(s.letter.reason.split(":")[0] for s in letters if s.letter.source_topic == topics.chat)
    assert sum(reasons.values()) == 990
    by_kind = Counter(kind for kind, _, _ in bad)
    texts = [s.letter.reason for s in letters]
    assert sum("over the limit of 2000" in t for t in texts) == by_kind["content too long"]
    assert sum("over the limit of 8192" in t for t in texts) == by_kind["event too large"]
    assert sum("has no key" in t for t in texts) == by_kind["no key"]
    assert sum("does not open with key" in t for t in texts) == 3
    # Every valid session was consolidated; the poisoned users still got their memories.
    for user in users:
        assert any("Porto" in m.content or "Bosch" in m.content for m in projection.list_memories(user))
        assert projection.get(user, f"{user}/poison") is None
    # The original bytes are kept.
    originals = {s.letter.original_value(keys) for s in letters}
    assert b"{broken" in originals
    # Records keyed by a user with a key are kept sealed with it; mallory has none.
    assert {s.letter.sealed for s in letters} == {True, False}

    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    assert main(["dlq", "list", "--topic", topics.memories]) == 0
    listed = capsys.readouterr().out
    assert "7 dead letter(s)" in listed
    first = next(s for s in letters if s.letter.source_topic == topics.memories)
    assert main(["dlq", "show", first.letter_id]) == 0
    assert first.letter.reason in capsys.readouterr().out
    assert main(["dlq", "retry", first.letter_id]) == 0
    assert "retried 1" in capsys.readouterr().out
