"""``memstream forget --policy decay`` on the real broker and LanceDB.

Memories are published with old event times (and a few retrievals) to the real topics and
projected by the replay's projector loop; the decay policy then judges them. Expected scores
(default weights 0.2 / 0.15 / 0.05, half-life 30 days, use saturation 10, threshold 0.1):

==============  ==========  ===  ========  =======  ====================================
memory          importance  age  accesses  score    verdict
==============  ==========  ===  ========  =======  ====================================
ann/trivia      0.1         200  0         0.05369  forgotten
ann/used        0.1         200  3         0.12596  kept: use lifts it over 0.1
ann/correction  0.0         200  0         0.00369  kept: corrections are kept
ann/young       0.0         60   0         0.09375  kept: younger than the 90-day minimum
bob/fact        0.1         120  0         0.07344  forgotten
bob/summary     0.05        360  0         0.02509  forgotten
==============  ==========  ===  ========  =======  ====================================

(ann/trivia: recency 2 ** (-200 / 30) = 0.009843, (0.02 + 0.001476) / 0.4; ann/used adds
0.05 * ln 4 / ln 11 = 0.028906.)
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka import AIOKafkaProducer

from memstream.models.codec import decode_event, encode_event
from memstream.models.events.envelope import Event, derived_id
from memstream.models.events.memory import (
    MemoriesRetrieved,
    MemoryAdded,
    MemoryForgotten,
    MemoryType,
    RetrievedMemory,
)
from memstream.models.settings import Settings
from memstream.projections.memories import MemoryStore, SearchFilters
from memstream.streams.cli.command import settings_from_args
from memstream.streams.client import AsyncMemoryClient
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics, ensure_topics
from memstream.streams.keys.sealing import open_event, seal_event
from memstream.streams.keys.store import keystore_from_settings
from memstream.streams.operations.forgetting import add_forget_command, forget
from memstream.streams.operations.replay import rebuild_memories
from memstream.streams.service.container import Container

SettingsFactory = Callable[..., Settings]

#: The decision time of the runs. The memories' event times count back from the wall clock,
#: so the command (which decides at the wall clock) judges the same ages to the day.
NOW = datetime.now(UTC).replace(microsecond=0)

MEMORIES: list[tuple[str, str, MemoryType, float, float, str]] = [
    # (user, memory id, type, importance, age in days, content)
    ("ann", "ann/trivia", "fact", 0.1, 200, "User once mentioned a parking garage on Elm Street."),
    ("ann", "ann/used", "fact", 0.1, 200, "User's gym is on Elm Street."),
    ("ann", "ann/correction", "correction", 0.0, 200, "User's sister lives in Porto, not Lisbon."),
    ("ann", "ann/young", "fact", 0.0, 60, "User bought a blue umbrella on Elm Street."),
    ("bob", "bob/fact", "fact", 0.1, 120, "User watched a film about Elm Street."),
    ("bob", "bob/summary", "summary", 0.05, 360, "Talked about the weather on Elm Street."),
]
FORGOTTEN = ["bob/summary", "ann/trivia", "bob/fact"]  # lowest score first
HOSTILE_USER = "x' OR '1'='1"


def added(user_id: str, memory_id: str, memory_type: MemoryType, importance: float,
          age_days: float, content: str) -> MemoryAdded:
    return MemoryAdded(
        event_id=f"add/{memory_id}",
        user_id=user_id,
        session_id=f"{user_id}/old-session",
        occurred_at=NOW - timedelta(days=age_days),
        memory_id=memory_id,
        memory_type=memory_type,
        content=content,
        importance=importance,
        extraction_event_id=f"extraction/{memory_id}",
        extractor="test/1",
    )


def retrieval(number: int, memory_id: str) -> MemoriesRetrieved:
    return MemoriesRetrieved(
        event_id=f"ann/retrieval/{number}",
        user_id="ann",
        session_id="ann/old-session",
        occurred_at=NOW - timedelta(days=150, hours=number),
        query="where is my gym?",
        memories=(RetrievedMemory(memory_id=memory_id, score=0.5),),
    )


async def publish(settings: Settings, topic: str, events: list[Event]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    await producer.start()
    try:
        for event in events:
            key = event.user_id.encode()
            await producer.send_and_wait(topic, key=key, value=encode_event(event))
    finally:
        await producer.stop()


def sealed(settings: Settings, events: list[MemoryAdded]) -> list[Event]:
    """The events sealed with their users' keys (created now), as the worker seals the
    memories it derives from the users' sealed chat events."""
    keys = keystore_from_settings(settings)
    return [e for e in (seal_event(event, keys) for event in events) if e is not None]


def seed(settings: Settings) -> MemoryStore:
    """Publish the memories (sealed) and ann/used's three retrievals; project them."""
    topics = Topics.from_settings(settings)
    asyncio.run(ensure_topics(settings))
    asyncio.run(publish(settings, topics.memories, sealed(settings, [added(*m) for m in MEMORIES])))
    asyncio.run(publish(settings, topics.accesses, [retrieval(i, "ann/used") for i in range(3)]))
    return project(settings)


def project(settings: Settings) -> MemoryStore:
    """Bring the live table up to the end of the log, as the worker's projector would."""
    projection, _, invalid = asyncio.run(rebuild_memories(settings, "memories"))
    assert invalid == 0
    return projection


def forgotten_on_topic(settings: Settings) -> list[tuple[bytes, MemoryForgotten]]:
    records = asyncio.run(read_topic(settings, Topics.from_settings(settings).memories))
    found = []
    for record in records:
        event = decode_event(record.value)
        if isinstance(event, MemoryForgotten):
            found.append((record.key, event))
    return found


def run_command(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="memstream")
    parser.add_argument("--broker")
    add_forget_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["forget", *argv])
    return int(args.run(args, Container(settings_from_args(args))))


@pytest.fixture
def settings(settings_factory: SettingsFactory, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """This test's settings, also exported for the command; memories forgotten at 90 days."""
    made = settings_factory(forget_min_age_days=90.0)
    for name, value in made.to_env().items():
        monkeypatch.setenv(name, value)
    return made


def test_decay_forgets_old_unused_memories_once_and_history_keeps_them(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    projection = seed(settings)
    used = projection.get("ann", "ann/used")
    assert used is not None and used.access_count == 3

    # A dry run lists the memories, lowest score first, and publishes nothing.
    assert run_command("--policy", "decay", "--dry-run") == 0
    out = capsys.readouterr().out
    listed = [
        line.split("memory ")[1].split(" ·")[0] for line in out.splitlines() if "memory " in line
    ]
    assert listed == FORGOTTEN
    assert "user bob" in out and "user ann" in out and "[summary]" in out
    assert "0.0251" in out and "0.0537" in out and "0.0734" in out
    assert "3 memories below the decay threshold 0.1" in out
    assert "dry run: nothing was published" in out
    dry = asyncio.run(forget(settings, dry_run=True, now=NOW))
    assert [c.memory_id for c in dry.candidates] == FORGOTTEN and dry.events == ()
    assert [round(c.score, 5) for c in dry.candidates] == [0.02509, 0.05369, 0.07344]
    assert forgotten_on_topic(settings) == []

    # The real run publishes exactly those, keyed by user, at the decision time.
    report = asyncio.run(forget(settings, dry_run=False, now=NOW))
    assert report.candidates == dry.candidates
    published = forgotten_on_topic(settings)
    assert [(key, e.memory_id) for key, e in published] == [
        (b"bob", "bob/summary"), (b"ann", "ann/trivia"), (b"bob", "bob/fact")
    ]
    assert all(e.event_id == derived_id(e.memory_id, "forget", "decay") for _, e in published)
    assert all(e.occurred_at == NOW and e.policy == "decay" and e.threshold == 0.1
               for _, e in published)
    assert [e for _, e in published] == list(report.events)
    # The reason is free text: sealed with the user's key, it opens with it.
    keys = keystore_from_settings(settings)
    assert all(e.encryption is not None and e.reason == "" for _, e in published)
    opened = [open_event(e, keys) for _, e in published]
    assert all(o is not None and o.reason.startswith("decay score ") for o in opened)

    # Run again before the projector has seen the first run: the same ids go out again, and
    # the projection applies each memory's first only (ended_at stays NOW).
    again = asyncio.run(forget(settings, dry_run=False, now=NOW + timedelta(hours=1)))
    assert {e.event_id for e in again.events} == {e.event_id for _, e in published}

    projection = project(settings)
    everything = {m.memory_id: m for m in projection.list_memories("ann", include_inactive=True)}
    everything |= {m.memory_id: m for m in projection.list_memories("bob", include_inactive=True)}
    assert {m: r.status for m, r in everything.items()} == {
        "ann/trivia": "forgotten",
        "ann/used": "active",
        "ann/correction": "active",
        "ann/young": "active",
        "bob/fact": "forgotten",
        "bob/summary": "forgotten",
    }
    assert all(everything[m].ended_at == NOW for m in FORGOTTEN)

    # Out of the current view and of search...
    assert {m.memory_id for m in projection.list_memories("ann")} == {
        "ann/used", "ann/correction", "ann/young"
    }
    assert projection.list_memories("bob") == []
    query = "Elm Street parking garage"
    assert "ann/trivia" not in {h.memory_id for h in projection.search("ann", query, limit=10)}
    assert projection.search("bob", "film about Elm Street", limit=10) == []
    # ...but still what memstream believed before the forget, and in the memory's history.
    before = SearchFilters(as_of=NOW - timedelta(seconds=1))
    found = projection.search("ann", query, limit=10, filters=before)
    assert "ann/trivia" in {h.memory_id for h in found}
    after = SearchFilters(as_of=NOW + timedelta(seconds=1))
    assert "ann/trivia" not in {h.memory_id for h in projection.search("ann", query, filters=after)}

    async def history() -> list[str]:
        async with AsyncMemoryClient(settings, projection=projection) as client:
            life = await client.history("ann/trivia", user_id="ann")
        return [entry["type"] for entry in life]

    assert asyncio.run(history()) == ["memory_added", "memory_forgotten", "memory_forgotten"]

    # Once projected, a run finds nothing more and publishes nothing.
    count = len(forgotten_on_topic(settings))
    assert run_command("--policy", "decay") == 0
    out = capsys.readouterr().out
    assert "0 memories below the decay threshold" in out
    assert "published 0 memory_forgotten event(s)" in out
    assert len(forgotten_on_topic(settings)) == count


def test_user_restricts_the_run_to_that_user(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(settings)
    assert run_command("--policy", "decay", "--user", HOSTILE_USER) == 0
    assert "0 memories below" in capsys.readouterr().out
    assert forgotten_on_topic(settings) == []

    assert run_command("--policy", "decay", "--user", "ann") == 0
    out = capsys.readouterr().out
    assert "memory ann/trivia · user ann" in out and "bob/" not in out
    assert "published 1 memory_forgotten event(s)" in out
    assert [(key, e.memory_id) for key, e in forgotten_on_topic(settings)] == [
        (b"ann", "ann/trivia")
    ]
    projection = project(settings)
    trivia = projection.get("ann", "ann/trivia")
    assert trivia is not None and trivia.status == "forgotten"
    assert {m.memory_id for m in projection.list_memories("bob")} == {"bob/fact", "bob/summary"}
    # The rest of the users are left to a run for them (or for everyone).
    remaining = asyncio.run(forget(settings, dry_run=True, now=NOW))
    assert [c.memory_id for c in remaining.candidates] == ["bob/summary", "bob/fact"]
