"""Memory decisions on the real broker and LanceDB: duplicates reinforce, new values supersede."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from chat import conversation
from harness import wait_for

from memstream.models.codec import decode_event
from memstream.models.events.memory import MemoryReinforced, MemorySuperseded
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import PartitionedMemories
from memstream.projections.retrieval import Retriever
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.sealing import open_event
from memstream.streams.keys.store import keystore_from_settings
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess


def test_repeats_reinforce_and_corrections_supersede(settings_factory, tmp_path: Path) -> None:
    settings = settings_factory(web_port=free_port())
    first = conversation(
        "ann", "one",
        [("user", "My budget is about 1500 euros."), ("assistant", "Noted."),
         ("user", "I prefer walking tours over bus tours.")],
    )
    second = conversation(
        "ann", "two",
        [("user", "Actually, my budget is now 2000 euros."), ("assistant", "Great."),
         ("user", "I prefer walking tours over bus tours.")],
        start=datetime(2026, 11, 9, 9, 0, tzinfo=UTC),
    )
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        asyncio.run(publish_events(settings, first))
        wait_for(lambda: projection.list_memories("ann"), "the first session's memories", 60)
        asyncio.run(publish_events(settings, second))

        def decided() -> bool:
            every = projection.list_memories("ann", include_inactive=True)
            return any(m.status == "superseded" for m in every) and any(
                m.memory_type == "preference" and m.reinforcement_count >= 1 for m in every
            )

        # Both decisions of the second session, the supersession and the reinforcement, are
        # waited for by what they leave in the projection: no sleep stands in for either.
        wait_for(decided, "the supersession and the reinforcement", 60)
    records = asyncio.run(read_topic(settings, Topics.from_settings(settings).memories))
    events = [decode_event(r.value) for r in records]
    superseded = [e for e in events if isinstance(e, MemorySuperseded)]
    assert len(superseded) == 1
    # The extraction agent seals the supersession with the span's key: its reason quotes
    # the slot the user's words fill, so it is never in the log in the clear.
    assert superseded[0].encryption is not None and superseded[0].reason == ""
    assert not any(b"budget" in r.value or b"replaces" in r.value for r in records)
    opened = open_event(superseded[0], keystore_from_settings(settings))
    assert opened is not None and opened.reason == "budget: '2000 euros' replaces '1500 euros'"
    old = projection.get("ann", superseded[0].memory_id)
    new = projection.get("ann", superseded[0].superseded_by)
    assert old is not None and "1500" in old.content and old.status == "superseded"
    assert new is not None and "2000" in new.content and new.status == "active"
    current = projection.list_memories("ann")
    assert not any("1500" in m.content and m.memory_type == "fact" for m in current)
    reinforced = [e for e in events if isinstance(e, MemoryReinforced)]
    assert reinforced, "the repeated preference reinforces the existing memory"
    preferences = [m for m in current if m.memory_type == "preference"]
    assert len(preferences) == 1 and preferences[0].reinforcement_count >= 1
    # What a user reads (the retriever): the current budget first, the old one marked.
    found = Retriever(projection, settings).search("ann", "how much can I spend?", limit=10)
    assert "2000" in found[0].memory.content and not found[0].stale
    # The turn that said 1500 is marked, below the fact that replaced it, even where the
    # turn that said 2000 is shown above both.
    said = [item for item in found if item.memory.content == "My budget is about 1500 euros."]
    assert said and all(item.stale for item in said)
    contents = [item.memory.content for item in found]
    assert contents.index("User's budget is now 2000 euros") < contents.index(said[0].memory.content)
    assert all(item.memory.ended_claims for item in found if "1500" in item.memory.content)
