"""Generated hostile records against the real decode-and-apply path of every consumer.

The strategies (``tests/fuzz.py``) make what producers cannot be trusted not to send: any
bytes, any JSON, and valid events of every topic mutated at random. For each consumer the
property is the same: it never raises, a record it refuses is dead-lettered (once), and the
valid records around it come out exactly as if the bad ones had not been there.
"""

from __future__ import annotations

import asyncio
import hashlib
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from aiokafka import ConsumerRecord
from fakes import FakeEmbedder, InMemoryPublisher
from fuzz import NOW, TOPIC_TYPES, is_rejected, record_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_session_store import FakeTable

from memstream.models.codec import EventLimits, InvalidEvent, decode_event, encode_event
from memstream.models.events.chat import MessageAdded, SessionClosed, SessionStarted, ToolCalled
from memstream.models.events.consolidation import ConsolidationRequested, TranscriptMessage
from memstream.models.events.envelope import Event
from memstream.models.events.memory import MemoryAdded
from memstream.models.extraction import OfflineExtractor
from memstream.models.session import WindowLimits
from memstream.models.settings import Settings
from memstream.projections.memories import MemoryProjection
from memstream.streams.agents.consolidation import record_extraction
from memstream.streams.agents.decisions import MemoryDecider
from memstream.streams.agents.decoding import decode_opened
from memstream.streams.agents.session_table import (
    SessionStore,
    fold_batch,
    open_session_value,
    seal_session_value,
)
from memstream.streams.archive.rows import _table
from memstream.streams.kafka.deadletters import DeadLetter
from memstream.streams.keys.store import FileKeyStore, keystore_from_settings
from memstream.streams.projector.loop import ProjectorLoop

LIMITS = EventLimits.from_settings(Settings())
#: What the worker derives (spans, memories) is bounded by the record size, not per event.
DERIVED = EventLimits.from_settings(Settings(), derived=True)
FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)

#: Text a real user might write: any character UTF-8 can carry (no lone surrogates).
user_text = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=400)
long_text = st.sampled_from(["x", "é", "\u0001", "😀", "word "]).flatmap(
    lambda piece: st.integers(min_value=1, max_value=100_000 // len(piece)).map(lambda n: piece * n)
)


def record(topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None, headers: Any = ()) -> ConsumerRecord:
    timestamp = int(NOW.timestamp() * 1000) + offset
    return ConsumerRecord(topic, partition, offset, timestamp, 0, key, value, None, 0, 0, list(headers))


def valid_session(user: str, texts: list[str]) -> list[Event]:
    """A valid session of ``user`` whose messages say ``texts``, with a tool call and a close."""
    session = "s"
    events: list[Event] = [SessionStarted(event_id=f"{user}/start", user_id=user, session_id=session, occurred_at=NOW)]
    for i, text in enumerate(texts):
        events.append(
            MessageAdded(
                event_id=f"{user}/m{i}", user_id=user, session_id=session,
                occurred_at=NOW + timedelta(seconds=i + 1), role="user" if i % 2 == 0 else "assistant", content=text,
            )
        )
    events.append(
        ToolCalled(event_id=f"{user}/t", user_id=user, session_id=session, occurred_at=NOW + timedelta(seconds=90),
                   name="lookup", arguments={"q": texts[0][:5000]}, result=texts[-1][:5000])
    )
    events.append(SessionClosed(event_id=f"{user}/close", user_id=user, session_id=session,
                                occurred_at=NOW + timedelta(seconds=100)))
    return events


def interleave(valid: list[Any], hostile: list[Any], picks: list[int]) -> list[Any]:
    """``valid`` in order with ``hostile`` records put between them at the drawn places."""
    out = list(valid)
    for item, pick in zip(hostile, picks, strict=False):
        out.insert(pick % (len(out) + 1), item)
    return out


@pytest.fixture
def keys(tmp_path: Path) -> FileKeyStore:
    return FileKeyStore(tmp_path / "keys")


# --- decoding -------------------------------------------------------------------------------


@FUZZ
@given(topic=st.sampled_from(sorted(TOPIC_TYPES)), data=st.data())
def test_decoding_refuses_with_a_reason_and_what_it_accepts_survives_the_log(topic: str, data: st.DataObject) -> None:
    key, value, _ = data.draw(record_of(topic))
    allowed = TOPIC_TYPES[topic] + ("user_erased",)
    try:
        event = decode_opened(value, key, allowed, LIMITS, None, now=NOW)
    except InvalidEvent as exc:
        assert str(exc)
        return
    assert event is not None
    # Accepted: it goes through the log unchanged, and out again the same.
    again = decode_event(encode_event(event.event), max_bytes=10**8)
    assert again == event.event


# --- the session fold -----------------------------------------------------------------------


@FUZZ
@given(
    texts=st.lists(st.one_of(user_text, long_text), min_size=1, max_size=6),
    hostile=st.lists(record_of("chat"), min_size=1, max_size=12),
    picks=st.lists(st.integers(min_value=0, max_value=10**6), min_size=12, max_size=12),
)
def test_the_session_fold_dead_letters_bad_records_and_folds_the_rest_as_if_they_were_not_there(
    keys: FileKeyStore, texts: list[str], hostile: list[Any], picks: list[int]
) -> None:
    valid = [("valid", e.user_id.encode(), encode_event(e)) for e in valid_session("valid", texts)]
    bad = [("bad", key, value) for key, value, _ in hostile]
    mixed = interleave(valid, bad, picks)
    records = [record("chat", 0, i, key, value) for i, (_, key, value) in enumerate(mixed)]
    window = WindowLimits(max_messages=4, max_chars=150_000)

    store = SessionStore(FakeTable(), 100, keys)
    batch = fold_batch(store, records, window, LIMITS, keys)
    alone = fold_batch(SessionStore(FakeTable(), 100, keys), [r for r, (k, *_) in zip(records, mixed) if k == "valid"], window, LIMITS, keys)

    rejected = {r.offset for r, (kind, key, value) in zip(records, mixed) if kind == "bad" and is_rejected("chat", key, value, LIMITS, NOW, keys)}
    assert {message.offset for message, _ in batch.dead} == rejected
    assert all(isinstance(fault, Exception) for _, fault in batch.dead)
    # The valid user's session and spans are the same as without the hostile records.
    assert [c for c in batch.consolidations if c.user_id == "valid"] == alone.consolidations
    mine = {k: v for k, v in batch.writes.items() if k.startswith("valid\x1f")}
    assert mine == alone.writes
    # Everything the fold would write is storable and reads back the same.
    for key, (value, _) in batch.writes.items():
        if value is None:
            continue
        stored = seal_session_value(key, value, keys)
        assert stored is not None and len(stored) <= Settings().max_record_bytes
        assert open_session_value(key, stored, keys)[0] == value
    for request in batch.consolidations:
        raw = encode_event(request)
        assert len(raw) <= Settings().max_record_bytes
        assert decode_event(raw, max_bytes=10**8) == request


# --- extraction -------------------------------------------------------------------------------


@settings(FUZZ, max_examples=40)
@given(texts=st.lists(st.one_of(user_text, long_text), min_size=1, max_size=8))
def test_every_request_the_decoder_accepts_is_extracted_and_decided_into_events_that_fit_the_log(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str]
) -> None:
    started = NOW - timedelta(minutes=5)
    request = ConsolidationRequested(
        event_id=hashlib.sha256("".join(texts).encode("utf-8", "surrogatepass")).hexdigest()[:32],
        user_id="valid", session_id="s", occurred_at=NOW, reason="session_closed",
        messages=tuple(
            TranscriptMessage(event_id=f"m{i}", role="user" if i % 2 == 0 else "assistant", content=text,
                              occurred_at=started + timedelta(seconds=i))
            for i, text in enumerate(texts)
        ),
        session_started_at=started,
    )
    raw = encode_event(request)
    opened = decode_opened(raw, b"valid", ("consolidation_requested",), DERIVED, None, now=NOW)
    assert opened is not None
    recorded = record_extraction(opened.event, OfflineExtractor())  # type: ignore[arg-type]
    embedder = FakeEmbedder()
    projection = MemoryProjection(tmp_path_factory.mktemp("lancedb"), embedder)
    decider = MemoryDecider(projection, embedder)
    decisions = decider.decide(recorded)
    for event in [recorded, *decisions]:
        encoded = encode_event(event)
        assert len(encoded) <= Settings().max_record_bytes
        assert decode_event(encoded, max_bytes=10**8) == event
    # Decided in a batch (its texts embedded beforehand, as the extraction agent does): the same.
    batched = MemoryDecider(projection, embedder)
    batched.prefetch([recorded])
    assert batched.decide(recorded) == decisions


# --- the memory projector ---------------------------------------------------------------------


def projector_for(tmp_path: Path) -> tuple[ProjectorLoop, InMemoryPublisher]:
    settings_ = Settings(data_dir=tmp_path / "data", topic_prefix="fz")
    # The projector's publisher: what it sends to the dead-letter topic is kept.
    letters = InMemoryPublisher(keystore_from_settings(settings_))
    projection = MemoryProjection(settings_.lancedb_dir, FakeEmbedder())
    projector = ProjectorLoop(
        settings_, None, letters, projection, {}, asyncio.Event()  # type: ignore[arg-type]
    )
    # The store is real; the broker is not needed: the probe asks only the store.
    projector.boundary.probes = projector.boundary.probes[1:]
    return projector, letters


def valid_memories(count: int) -> list[MemoryAdded]:
    return [
        MemoryAdded(
            event_id=f"valid-mem-{i}", user_id="valid", session_id="s", occurred_at=NOW + timedelta(seconds=i),
            memory_id=f"valid-{i}", memory_type="fact", content=f"User owns bicycle number {i}", importance=0.6,
            extraction_event_id="x", extractor="offline/1",
        )
        for i in range(count)
    ]


@settings(FUZZ, max_examples=30)
@given(
    hostile=st.lists(st.tuples(st.sampled_from(["memories", "accesses"]), st.data()), min_size=1, max_size=10),
    picks=st.lists(st.integers(min_value=0, max_value=10**6), min_size=10, max_size=10),
)
def test_the_projector_dead_letters_bad_records_once_and_projects_every_valid_memory(
    tmp_path_factory: pytest.TempPathFactory, hostile: list[tuple[str, st.DataObject]], picks: list[int]
) -> None:
    projector, letters = projector_for(tmp_path_factory.mktemp("projector"))
    topics = projector.topics
    valid = [("valid", topics.memories, e.user_id.encode(), encode_event(e)) for e in valid_memories(5)]
    bad = []
    for kind, data in hostile:
        key, value, _ = data.draw(record_of(kind))
        bad.append(("bad", topics.memories if kind == "memories" else topics.accesses, key, value))
    mixed = interleave(valid, bad, picks)
    records = [record(topic, 0, i, key, value) for i, (_, topic, key, value) in enumerate(mixed)]

    async def project() -> None:
        batch: list[Any] = []
        for item in records:
            await projector._take(item, batch)
        if batch:
            await projector._apply_memories(batch)
        held = [item for items in projector.held.values() for item in items]
        projector.held.clear()
        if held:
            await projector._apply_accesses(held)

    asyncio.run(project())
    rejected = {
        r.offset
        for r, (kind, topic, key, value) in zip(records, mixed)
        if kind == "bad"
        and is_rejected(
            "memories" if topic == topics.memories else "accesses",
            key,
            value,
            projector.memory_limits if topic == topics.memories else projector.access_limits,
            NOW,
            projector.keys,
        )
    }
    dead = [DeadLetter.model_validate_json(value) for topic, _, value in letters.sent]
    offsets = [letter.source_offset for letter in dead]
    assert len(offsets) == len(set(offsets)), "a record was dead-lettered twice"
    # Refused at decoding: dead-lettered. A valid event the table cannot take is too.
    assert rejected <= set(offsets)
    for letter in dead:
        assert letter.reason and letter.source_offset in {r.offset for r, m in zip(records, mixed) if m[0] == "bad"}
    assert {m.memory_id for m in projector.projection.list_memories("valid")} >= {f"valid-{i}" for i in range(5)}


# --- the archive sink -------------------------------------------------------------------------


@settings(FUZZ, max_examples=60)
@given(data=st.data(), count=st.integers(min_value=1, max_value=8))
def test_the_archive_keeps_every_record_as_it_came_whatever_it_holds(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, count: int
) -> None:
    records = []
    for offset in range(count):
        key, value, headers = data.draw(record_of(data.draw(st.sampled_from(sorted(TOPIC_TYPES)))))
        timestamp = data.draw(st.sampled_from([-1, 0, int(NOW.timestamp() * 1000), 2**62, 253402300800000]))
        records.append(ConsumerRecord("t", 0, offset, timestamp, 0, key, value, None, 0, 0, headers))
    table = _table(records, 1_000_000)
    path = tmp_path_factory.mktemp("archive") / "part.parquet"
    pq.write_table(table, path)
    back = pq.read_table(path).to_pylist()
    assert [row["value"] for row in back] == [r.value for r in records]
    # The analytics views read every archive file with DuckDB: one record must not stop them.
    with duckdb.connect() as connection:
        rows = connection.sql(f"SELECT count(*), max(timestamp) FROM read_parquet('{path}')").fetchall()
    assert rows[0][0] == count
    assert [row["key"] for row in back] == [r.key for r in records]
    assert [row["offset"] for row in back] == list(range(count))
