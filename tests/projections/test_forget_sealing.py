"""``memstream forget`` seals what it publishes: each ``memory_forgotten`` reaches the publisher
sealed with its user's current key; a user without a key (erased) gets nothing
published and no new key. Real LanceDB (fake embedder), real AES-GCM and key store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from fakes import FakeEmbedder, InMemoryPublisher

from memstream.models.events.memory import MemoryAdded, MemoryForgotten
from memstream.models.settings import Settings
from memstream.projections.memories import MemoryProjection, SourcePosition
from memstream.streams.keys.sealing import open_event
from memstream.streams.keys.store import FileKeyStore
from memstream.streams.operations.forgetting import forget

NOW = datetime(2026, 11, 20, tzinfo=UTC)


def old_memory(user_id: str, memory_id: str, offset: int) -> tuple[MemoryAdded, SourcePosition]:
    event = MemoryAdded(
        event_id=f"add-{memory_id}",
        user_id=user_id,
        session_id="s",
        occurred_at=NOW - timedelta(days=400),
        extractor="test/1",
        memory_id=memory_id,
        memory_type="fact",
        content=f"{user_id} once parked on Elm Street",
        importance=0.05,
        extraction_event_id="x",
    )
    return event, SourcePosition("memories", 0, offset)


async def test_forgettings_are_sealed_with_the_users_key_and_dropped_without_one(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path / "data", forget_min_age_days=30)
    projection = MemoryProjection(settings.lancedb_dir, FakeEmbedder())
    projection.apply([old_memory("ann", "ann-1", 0), old_memory("bob", "bob-1", 1)])
    keys = FileKeyStore(tmp_path / "keys")
    ann_key_id, _ = keys.key_for("ann", create=True)
    # bob never had a key here: erased, or his memories came from another producer.
    publisher = InMemoryPublisher(keys)
    report = await forget(
        settings, dry_run=False, now=NOW, projection=projection, publisher=publisher
    )
    sent_events = publisher.events()
    assert sorted(c.memory_id for c in report.candidates) == ["ann-1", "bob-1"]
    assert [(e.user_id, e.memory_id) for e in sent_events] == [("ann", "ann-1")]
    ((topic, _, _),) = publisher.sent
    (sent,) = sent_events
    assert isinstance(sent, MemoryForgotten)
    assert topic == "memstream.memories" and report.events == (sent,)
    assert sent.encryption is not None and sent.encryption.key_id == ann_key_id
    assert sent.reason == "" and "decay score" not in sent.model_dump_json()
    assert (sent.score, sent.threshold, sent.policy) == (report.candidates[0].score, 0.1, "decay")
    opened = open_event(sent, keys)
    assert opened is not None and opened.reason.startswith("decay score ")
    assert keys.key_for("bob", create=False) is None  # never created one

    # A dry run publishes nothing, sealed or not.
    publisher.sent.clear()
    dry = await forget(
        settings, dry_run=True, now=NOW, projection=projection, publisher=publisher
    )
    assert publisher.sent == [] and dry.events == ()
