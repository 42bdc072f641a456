"""A few hundred generated hostile records between valid sessions, on the real broker.

The records come from the strategies in ``tests/fuzz.py`` (any bytes, any JSON, mutated
events of every topic, odd keys and headers, records of megabytes), spread over the four
topics the worker reads. Required: the worker never restarts and no agent or task crashes;
every valid session becomes memories; every record the decoder refuses is dead-lettered
exactly once, with a reason, and nothing else is.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.producer import message_accumulator
from aiokafka.producer import producer as aiokafka_producer
from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy
from fuzz import RawHeaderKey, draw_many, is_rejected, record_of
from harness import wait_for
from hypothesis import strategies as st

from memstream.models.codec import EventLimits, encode_event
from memstream.models.events.chat import (
    EntityMentioned,
    MessageAdded,
    SessionClosed,
    SessionStarted,
    ToolCalled,
)
from memstream.models.events.envelope import Event
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import PartitionedMemories
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.topics import Topics, ensure_topics
from memstream.streams.keys.sealing import seal_event
from memstream.streams.keys.store import keystore_from_settings
from memstream.streams.operations.dlq import dead_letters
from memstream.streams.worker.process import WorkerProcess, worker_healthy, worker_readiness

SettingsFactory = Callable[..., Settings]
HOSTILE = 300
#: The generators' seed: the same records every run (a failure can be replayed).
SEED = 20261201
#: Share of the hostile records per topic the worker reads.
TOPIC_MIX = ["chat"] * 6 + ["consolidation"] * 2 + ["memories"] * 2 + ["accesses"]
SENTENCES = [
    "I live in {place} and I work at {org}.",
    "My sister {name} is visiting me in {place} next month.",
    "I prefer {thing} over anything else, honestly.",
    "Actually, I moved to {place} last year.",
    "Remind me that {name} likes {thing}.",
]
WORDS = {
    "place": ["Porto", "Reykjavík", "東京", "Zürich", "São Paulo", "Łódź", "Kraków"],
    "org": ["Bosch", "Initech", "Ωmega Labs", "Café Müller"],
    "name": ["Zoë", "Åsa", "Dmitrij", "Nguyễn", "Siobhán"],
    "thing": ["night trains", "green tea 🍵", "window seats", "jazz", "long walks"],
}


def valid_sessions(rng: random.Random, start: datetime) -> dict[str, list[Event]]:
    """Fifty sessions of 25 users, as a client would send them; a few are extreme but valid
    (a message of 90,000 characters, 60 messages that make the window evict, a tool call
    with large arguments)."""
    sessions: dict[str, list[Event]] = {}
    for number in range(50):
        user, session = f"valid-{number // 2}", f"trip-{number % 2}"
        at = start + timedelta(hours=number)
        events: list[Event] = [SessionStarted(event_id=f"{user}/{session}/start", user_id=user, session_id=session, occurred_at=at)]
        turns = 60 if number == 7 else rng.randint(2, 6)
        for i in range(turns):
            text = rng.choice(SENTENCES).format(**{k: rng.choice(v) for k, v in WORDS.items()})
            if number == 3 and i == 0:
                text += " " + "detail " * 12_850  # about 90,000 characters
            role = "user" if i % 2 == 0 else "assistant"
            events.append(MessageAdded(event_id=f"{user}/{session}/m{i}", user_id=user, session_id=session,
                                       occurred_at=at + timedelta(seconds=i + 1), role=role, content=text))
        if number % 5 == 0:
            events.append(ToolCalled(event_id=f"{user}/{session}/tool", user_id=user, session_id=session,
                                     occurred_at=at + timedelta(seconds=turns + 1), name="search",
                                     arguments={"q": "hotels " * (6000 if number == 10 else 3)}, result={"hits": 3}))
            events.append(EntityMentioned(event_id=f"{user}/{session}/entity", user_id=user, session_id=session,
                                          occurred_at=at + timedelta(seconds=turns + 2), name="Lisbon", kind="place"))
        events.append(SessionClosed(event_id=f"{user}/{session}/close", user_id=user, session_id=session,
                                    occurred_at=at + timedelta(seconds=turns + 5)))
        sessions[f"{user}\x1f{session}"] = events
    return sessions


def test_generated_hostile_records_between_valid_sessions_never_stop_a_partition(
    settings_factory: SettingsFactory,
) -> None:
    settings_ = settings_factory(web_port=free_port(), partitions=4)
    tmp = Path(settings_.data_dir).parent
    asyncio.run(ensure_topics(settings_))
    topics = Topics.from_settings(settings_)
    names = {"chat": topics.chat, "consolidation": topics.consolidation, "memories": topics.memories, "accesses": topics.accesses}
    rng = random.Random(SEED)
    records = st.sampled_from(TOPIC_MIX).flatmap(lambda kind: st.tuples(st.just(kind), record_of(kind)))
    hostile = [(kind, *record) for kind, record in draw_many(records, HOSTILE, SEED)]
    keys = keystore_from_settings(settings_)
    sessions = valid_sessions(rng, datetime(2026, 10, 1, tzinfo=UTC))
    valid = []
    for events in sessions.values():
        for event in events:
            sealed = seal_event(event, keys)
            assert sealed is not None
            valid.append(("valid", event.user_id.encode(), encode_event(sealed), []))
    # Hostile records land between the valid ones; each session's events keep their order.
    mixed = list(valid)
    for item in hostile:
        mixed.insert(rng.randrange(len(mixed) + 1), item)

    projection = PartitionedMemories.from_settings(settings_, embedder_from_settings(settings_))
    log_path = tmp / "worker.log"
    worker = WorkerProcess(settings_, log_path=log_path).start()
    pid = worker.pid
    try:
        positions = asyncio.run(publish(settings_, [(names.get(kind, topics.chat), key, value, headers) for kind, key, value, headers in mixed]))
        client = EventLimits.from_settings(settings_)
        derived = EventLimits.from_settings(settings_, derived=True)
        expected_dead = {
            position
            for (kind, key, value, _), position in zip(mixed, positions, strict=True)
            if kind != "valid"
            and is_rejected(kind, key, value, derived if kind in ("consolidation", "memories") else client, keys=keys)
        }
        assert len(expected_dead) >= HOSTILE // 2, "the generators made too few bad records"

        def every_session_remembered() -> bool:
            return all(
                any(m.session_id == key.split("\x1f")[1] for m in projection.list_memories(key.split("\x1f")[0]))
                for key in sessions
            )

        wait_for(every_session_remembered, "memories of every valid session", timeout_s=240)
        wait_for(lambda: len(asyncio.run(dead_letters(settings_))[0]) >= len(expected_dead),
                 f"{len(expected_dead)} dead letters", timeout_s=120)
        assert worker_healthy(settings_)
        # Every agent and task still runs: none crashed, none restarting or retrying.
        readiness = wait_for(lambda: worker_readiness(settings_), "the worker to be ready", 60, until=lambda r: r["ready"])
        assert all(c["restarts"] == 0 for c in readiness["components"].values()), readiness
        assert not worker.exited() and worker.pid == pid, "the worker restarted"
    finally:
        worker.stop()
    letters, unreadable = asyncio.run(dead_letters(settings_))
    assert unreadable == 0
    found = Counter((s.letter.source_topic, s.letter.source_partition, s.letter.source_offset) for s in letters)
    assert [p for p, n in found.items() if n > 1] == [], "dead-lettered more than once"
    assert set(found) == expected_dead, (
        f"{len(set(found) - expected_dead)} dead letters of records the decoder accepts, "
        f"{len(expected_dead - set(found))} refused records not dead-lettered"
    )
    assert all(s.letter.reason and len(s.letter.reason) <= 2000 for s in letters)
    # Header keys that are not UTF-8 were among them, and the partitions went on.
    assert any(isinstance(k, RawHeaderKey) for *_, headers in hostile for k, _ in headers)
    # A record too large to keep whole is a reference, never dropped.
    assert any(s.letter.truncated and s.letter.value_size and s.letter.value_sha256 for s in letters)
    kinds = Counter(kind for kind, *_ in hostile)
    print(
        f"\n{HOSTILE} hostile records {dict(kinds)} between {len(valid)} valid events of "
        f"{len(sessions)} sessions: {len(expected_dead)} refused and dead-lettered once each "
        f"({sum(s.letter.truncated for s in letters)} as references), every session remembered"
    )
    log = log_path.read_text(errors="replace")
    for sign in ("Crashed", "crashed; starting it again", "Restarting dead"):
        assert sign not in log, f"{sign!r} in the worker log"


async def publish(
    settings_: Settings, records: list[tuple[str, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]
) -> list[tuple[str, int, int]]:
    """Send every record (as a raw producer would: any size, any headers, header keys of any
    bytes); their positions."""
    # aiokafka's pure-Python batch builder writes a header key's ``encode()``: so a
    # RawHeaderKey goes out as the bytes it holds, as a librdkafka producer could send them.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(message_accumulator, "DefaultRecordBatchBuilder", _DefaultRecordBatchBuilderPy)
        patch.setattr(aiokafka_producer, "DefaultRecordBatchBuilder", _DefaultRecordBatchBuilderPy)
        return await _send(settings_, records)


async def _send(
    settings_: Settings, records: list[tuple[str, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]
) -> list[tuple[str, int, int]]:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings_.broker, acks="all", linger_ms=5, max_request_size=16 * 1024 * 1024
    )
    await producer.start()
    try:
        futures = [
            await producer.send(topic, key=key, value=value, headers=[(k, v or b"") for k, v in headers] or None)
            for topic, key, value, headers in records
        ]
        metadata = [await future for future in futures]
    finally:
        await producer.stop()
    return [(m.topic, m.partition, m.offset) for m in metadata]
