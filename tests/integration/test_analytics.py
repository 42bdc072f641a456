"""DuckDB analytics on a hand-written log: the real broker, the real archive (``rebuild_archive``)
and the real memory projection (``rebuild_memories``, the projector's own loop and the MiniLM
embedder). Every expected figure below is worked out by hand from the events in this file, not
by the SQL under test."""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import json
import math
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from aiokafka import AIOKafkaProducer

from memstream.models.codec import encode_event
from memstream.models.events.chat import (
    EntityMentioned,
    MessageAdded,
    SessionClosed,
    SessionStarted,
    ToolCalled,
)
from memstream.models.events.envelope import Event
from memstream.models.events.memory import (
    ExtractionFailure,
    ExtractionRecorded,
    MemoriesRetrieved,
    MemoryAdded,
    MemoryCandidate,
    MemoryDeleted,
    MemoryExpired,
    MemoryPromoted,
    MemoryReinforced,
    MemorySuperseded,
    RetrievedMemory,
    TokenUsage,
)
from memstream.models.ranking import decay_score
from memstream.models.settings import Settings
from memstream.projections.analytics import (
    REPORTS,
    VIEWS,
    NotReadOnly,
    ReportOptions,
    Scope,
    open_views,
    run_report,
    run_sql,
)
from memstream.streams.archive import live_archive_dir, rebuild_archive
from memstream.streams.cli import main
from memstream.streams.kafka.deadletters import DeadLetter
from memstream.streams.kafka.topics import Topics, ensure_topics
from memstream.streams.operations.replay import rebuild_memories

NOW = datetime(2026, 11, 20, tzinfo=UTC)
ANN, BOB, OHARA = "ann", "bob", "o'hara ünï"
USERS = (ANN, BOB, OHARA)
#: Ids that must match nothing (and break nothing): SQL, LIKE patterns, prefixes, unicode.
HOSTILE = (
    "' OR '1'='1",
    "ann' --",
    "ann'; DROP TABLE memories; --",
    "%",
    "a%",
    "_nn",
    "*",
    "o'hara",
    "ÜNÏ",
    "ann\u202e",
    "🙂",
    "\udcff",  # a lone surrogate, as a shell passes bytes that are not UTF-8
    "",
)


def at(month: int, day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


# --- the log --------------------------------------------------------------------------------


def chat_events() -> list[Event]:
    def start(user: str, session: str, when: datetime) -> SessionStarted:
        return SessionStarted(
            event_id=f"{user}/{session}/start", user_id=user, session_id=session, occurred_at=when
        )

    def say(user: str, session: str, n: int, role: str, text: str, when: datetime) -> MessageAdded:
        return MessageAdded(
            event_id=f"{user}/{session}/m{n}",
            user_id=user,
            session_id=session,
            occurred_at=when,
            role=role,  # type: ignore[arg-type]
            content=text,
        )

    def close(user: str, session: str, reason: str, when: datetime) -> SessionClosed:
        return SessionClosed(
            event_id=f"{user}/{session}/close",
            user_id=user,
            session_id=session,
            occurred_at=when,
            reason=reason,  # type: ignore[arg-type]
        )

    def mention(user: str, session: str, name: str, when: datetime) -> EntityMentioned:
        return EntityMentioned(
            event_id=f"{user}/{session}/{name}",
            user_id=user,
            session_id=session,
            occurred_at=when,
            name=name,
            kind="place",
        )

    return [
        start(ANN, "old", at(6, 1, 10)),
        say(ANN, "old", 1, "user", "I like jazz", at(6, 1, 10, 1)),
        say(ANN, "old", 2, "user", "Actually I hate jazz", at(6, 1, 10, 2)),
        close(ANN, "old", "explicit", at(6, 1, 10, 3)),
        start(ANN, "trip", at(11, 1, 9)),
        say(ANN, "trip", 1, "user", "I live in Porto", at(11, 1, 9, 1)),
        say(ANN, "trip", 2, "assistant", "Nice city", at(11, 1, 9, 2)),
        ToolCalled(
            event_id="ann/trip/t1",
            user_id=ANN,
            session_id="trip",
            occurred_at=at(11, 1, 9, 3),
            name="weather",
            arguments={"city": "Porto"},
        ),
        mention(ANN, "trip", "Lisbon", at(11, 1, 9, 4)),
        say(ANN, "trip", 3, "user", "I prefer walking tours", at(11, 1, 9, 5)),
        close(ANN, "trip", "explicit", at(11, 1, 9, 6)),
        start(ANN, "later", at(11, 10, 9)),
        say(ANN, "later", 1, "user", "I moved to Lisbon", at(11, 10, 9, 1)),
        mention(ANN, "later", "lisbon", at(11, 10, 9, 2)),
        close(ANN, "later", "idle", at(11, 10, 9, 30)),
        start(BOB, "work", at(11, 2, 9)),
        say(BOB, "work", 1, "user", "I work at Acme", at(11, 2, 9, 1)),
        say(BOB, "work", 2, "assistant", "Cool", at(11, 2, 9, 2)),
        mention(BOB, "work", "Acme", at(11, 2, 9, 3)),
        start(OHARA, "s1", at(11, 5, 9)),
        say(OHARA, "s1", 1, "user", "My cat is called Tom", at(11, 5, 9, 1)),
        close(OHARA, "s1", "max_age", at(11, 5, 9, 2)),
    ]


def extraction(
    event_id: str,
    user: str,
    session: str,
    when: datetime,
    candidates: int,
    *,
    llm: tuple[str, str, int, int, float] | None = None,
) -> ExtractionRecorded:
    """``llm``: (model, prompt version, prompt tokens, completion tokens, latency ms)."""
    found = tuple(
        MemoryCandidate(memory_type="fact", content=f"candidate {i}", importance=0.5)
        for i in range(candidates)
    )
    if llm is None:
        return ExtractionRecorded(
            event_id=event_id,
            user_id=user,
            session_id=session,
            occurred_at=when,
            consolidation_event_id=f"c-{event_id}",
            extractor="offline",
            extractor_version="1",
            latency_ms=5,
            candidates=found,
        )
    model, prompt, tokens_in, tokens_out, latency = llm
    return ExtractionRecorded(
        event_id=event_id,
        user_id=user,
        session_id=session,
        occurred_at=when,
        consolidation_event_id=f"c-{event_id}",
        extractor="llm",
        extractor_version="2",
        model=model,
        prompt_version=prompt,
        usage=TokenUsage(prompt_tokens=tokens_in, completion_tokens=tokens_out),
        latency_ms=latency,
        candidates=found,
    )


def added(
    memory_id: str,
    user: str,
    session: str,
    when: datetime,
    memory_type: str,
    content: str,
    importance: float,
    *,
    extraction_id: str,
    entities: tuple[str, ...] = (),
) -> MemoryAdded:
    return MemoryAdded(
        event_id=f"add-{memory_id}",
        user_id=user,
        session_id=session,
        occurred_at=when,
        extractor="test/1",
        memory_id=memory_id,
        memory_type=memory_type,  # type: ignore[arg-type]
        content=content,
        importance=importance,
        tier="long_term" if importance >= 0.8 else "short_term",
        extraction_event_id=extraction_id,
        entities=entities,
    )


def memory_events() -> list[Event]:
    a1 = added("a1", ANN, "trip", at(11, 1, 9, 7), "fact", "User lives in Porto", 0.9,
               extraction_id="x1", entities=("Porto",))
    return [
        extraction("x0", ANN, "old", at(6, 1, 10, 4), 2),
        added("a0", ANN, "old", at(6, 1, 10, 4), "episode", "I like jazz", 0.05,
              extraction_id="x0"),
        added("a6", ANN, "old", at(6, 1, 10, 4), "correction", "Actually I hate jazz", 0.05,
              extraction_id="x0"),
        extraction("x1", ANN, "trip", at(11, 1, 9, 7), 3, llm=("gpt-x", "p1", 1000, 200, 800)),
        a1,
        added("a2", ANN, "trip", at(11, 1, 9, 7), "preference", "User prefers walking tours",
              0.6, extraction_id="x1"),
        added("a3", ANN, "trip", at(11, 1, 9, 7), "episode", "I prefer walking tours", 0.3,
              extraction_id="x1"),
        a1,  # delivered twice (at least once): one event
        extraction("x1b", ANN, "trip", at(11, 1, 9, 8), 0, llm=("gpt-x", "p1", 400, 100, 1600)),
        extraction("x2", ANN, "later", at(11, 10, 9, 31), 3, llm=("gpt-x", "p2", 500, 100, 1200)),
        added("a4", ANN, "later", at(11, 10, 9, 31), "fact", "User lives in Lisbon", 0.9,
              extraction_id="x2", entities=("Lisbon",)),
        MemorySuperseded(event_id="sup-a1", user_id=ANN, session_id="later",
                         occurred_at=at(11, 10, 9, 31), memory_id="a1", superseded_by="a4",
                         reason="same slot", similarity=0.8),
        MemoryReinforced(event_id="rf-a2", user_id=ANN, session_id="later",
                         occurred_at=at(11, 10, 9, 31), memory_id="a2",
                         extraction_event_id="x2", similarity=0.97),
        added("a5", ANN, "later", at(11, 10, 9, 31), "preference",
              "  user PREFERS walking\ttours ", 0.6, extraction_id="x2"),
        MemoryPromoted(event_id="pr-a2", user_id=ANN, session_id="later",
                       occurred_at=at(11, 13, 11), memory_id="a2", reason="retrieved 3 times"),
        extraction("xb", BOB, "work", at(11, 2, 9, 10), 3),
        added("b1", BOB, "work", at(11, 2, 9, 10), "fact", "User works at Acme", 0.8,
              extraction_id="xb", entities=("Acme",)),
        added("b2", BOB, "work", at(11, 2, 9, 10), "fact", "User has a meeting", 0.4,
              extraction_id="xb"),
        added("b3", BOB, "work", at(11, 2, 9, 10), "correction",
              "Actually the meeting is on Tuesday", 0.7, extraction_id="xb",
              entities=("Tuesday",)),
        MemoryExpired(event_id="ex-b2", user_id=BOB, session_id="work",
                      occurred_at=at(11, 3, 9, 10), memory_id="b2"),
        MemoryDeleted(event_id="del-b3", user_id=BOB, session_id="work",
                      occurred_at=at(11, 4, 9), memory_id="b3"),
        ExtractionFailure(
            event_id="fb",
            user_id=BOB,
            session_id="work",
            occurred_at=at(11, 5, 9),
            consolidation_event_id="c-fb",
            extractor="llm",
            extractor_version="2",
            model="gpt-x",
            prompt_version="p1",
            reason="invalid JSON",
            attempts=3,
            usage=TokenUsage(prompt_tokens=300, completion_tokens=50),
            latency_ms=2000,
        ),
        extraction("xh", OHARA, "s1", at(11, 5, 9, 3), 1, llm=("gpt-y", "p1", 100, 20, 400)),
        added("h1", OHARA, "s1", at(11, 5, 9, 3), "fact", "User's cat is called Tom", 0.5,
              extraction_id="xh", entities=("Tom",)),
    ]


def retrieval(event_id: str, user: str, session: str, when: datetime,
              *hits: tuple[str, float]) -> MemoriesRetrieved:
    return MemoriesRetrieved(
        event_id=event_id,
        user_id=user,
        session_id=session,
        occurred_at=when,
        query="what do I like?",
        memories=tuple(RetrievedMemory(memory_id=m, score=s) for m, s in hits),
    )


def access_events() -> list[Event]:
    return [
        retrieval("r1", ANN, "trip", at(11, 2, 10), ("a1", 0.9), ("a2", 0.7)),
        retrieval("r2", ANN, "later", at(11, 12, 10), ("a4", 0.95), ("a2", 0.5)),
        retrieval("r3", ANN, "later", at(11, 13, 10), ("a2", 0.6)),
        retrieval("r4", BOB, "work", at(11, 3, 8), ("b1", 0.8)),
    ]


BOB_BAD_EVENT = (
    b'{"event_id": "bob/work/bad", "type": "message_added", "user_id": "bob", '
    b'"session_id": "work", "occurred_at": "2026-11-02T09:05:00Z", "role": "user"}'
)


def dead_letters(topics: Topics) -> list[tuple[bytes, DeadLetter]]:
    def letter(agent: str, reason: str, topic: str, key: bytes, value: bytes,
               when: datetime) -> DeadLetter:
        return DeadLetter(
            agent=agent,
            reason=reason,
            source_topic=topic,
            source_partition=1,
            source_offset=7,
            key_b64=base64.b64encode(key).decode(),
            value_b64=base64.b64encode(value).decode(),
            dead_at=when,
        )

    return [
        (b"bob", letter("sessions", "content: Field required", topics.chat, b"bob",
                        BOB_BAD_EVENT, at(11, 2, 9, 6))),
        # Not UTF-8, not JSON: it belongs to the user its key names.
        (b"ann", letter("projector", "not JSON", topics.memories, b"ann",
                        b"\xff{not an event", at(11, 10, 9, 40))),
    ]


async def publish(settings: Settings) -> None:
    topics = Topics.from_settings(settings)
    records: list[tuple[str, bytes, bytes, datetime]] = []
    for topic, events in (
        (topics.chat, chat_events()),
        (topics.memories, memory_events()),
        (topics.accesses, access_events()),
    ):
        records += [(topic, e.user_id.encode(), encode_event(e), e.occurred_at) for e in events]
    records.append((topics.memories, b"ann", b"{not an event", at(11, 10, 9, 35)))
    for key, letter in dead_letters(topics):
        records.append((topics.deadletters, key, letter.model_dump_json().encode(), letter.dead_at))
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    await producer.start()
    try:
        for topic, key, value, when in records:
            await producer.send_and_wait(
                topic, value, key=key, timestamp_ms=int(when.timestamp() * 1000)
            )
    finally:
        await producer.stop()


@pytest.fixture(scope="module")
def settings(
    tmp_path_factory: pytest.TempPathFactory, broker_address: str, broker_kind: str
) -> Settings:
    """The log above, archived and projected, in a data directory of its own."""
    values: dict[str, Any] = {
        "broker": broker_address,
        "broker_kind": broker_kind,
        "data_dir": tmp_path_factory.mktemp("analytics") / "data",
        "topic_prefix": f"t{uuid.uuid4().hex[:10]}",
        "partitions": 2,
        "llm_price_prompt_per_mtok": 2.0,
        "llm_price_completion_per_mtok": 8.0,
    }
    built = Settings(**values)
    asyncio.run(ensure_topics(built))
    asyncio.run(publish(built))
    asyncio.run(rebuild_archive(built, live_archive_dir(built)))
    asyncio.run(rebuild_memories(built, "memories"))
    return built


def report(settings: Settings, name: str, user: str | None = None, *,
           since: datetime | None = None, **options: int) -> list[dict[str, Any]]:
    scope = Scope(user_id=user, since=since, now=NOW)
    return run_report(settings, name, scope, ReportOptions(**options)).table.to_pylist()


def rows(settings: Settings, sql: str, user: str | None = None) -> list[dict[str, Any]]:
    return run_sql(settings, sql, Scope(user_id=user, now=NOW)).to_pylist()


def cli(settings: Settings, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    return main(list(args))


# --- the views --------------------------------------------------------------------------------


def test_memories_view_is_the_projection_without_vectors(settings: Settings) -> None:
    found = rows(settings, "SELECT memory_id, user_id, status, tier, access_count, "
                           "reinforcement_count, superseded_by FROM memories ORDER BY memory_id")
    assert [(r["memory_id"], r["status"]) for r in found] == [
        ("a0", "active"), ("a1", "superseded"), ("a2", "active"), ("a3", "active"),
        ("a4", "active"), ("a5", "active"), ("a6", "active"),
        ("b1", "active"), ("b2", "expired"), ("b3", "deleted"), ("h1", "active"),
    ]
    by_id = {r["memory_id"]: r for r in found}
    assert by_id["a1"]["superseded_by"] == "a4"
    assert by_id["a2"]["tier"] == "long_term"  # promoted
    assert by_id["a2"]["reinforcement_count"] == 1
    assert {m: r["access_count"] for m, r in by_id.items() if r["access_count"]} == {
        "a1": 1, "a2": 3, "a4": 1, "b1": 1,
    }
    assert "vector" not in rows(settings, "SELECT * FROM memories LIMIT 1")[0]


def test_history_sessions_accesses_extractions_and_dead_letters(settings: Settings) -> None:
    history = rows(settings, "SELECT type, count(*) AS n FROM memory_history GROUP BY type "
                             "ORDER BY type")
    # 11 memory_added events (a1 was delivered twice and counts once).
    assert {r["type"]: r["n"] for r in history} == {
        "memory_added": 11, "memory_deleted": 1, "memory_expired": 1, "memory_promoted": 1,
        "memory_reinforced": 1, "memory_superseded": 1,
    }
    (superseded,) = rows(settings, "SELECT * FROM memory_history WHERE type = "
                                   "'memory_superseded'")
    assert (superseded["memory_id"], superseded["superseded_by"], superseded["reason"]) == (
        "a1", "a4", "same slot")
    (a4,) = rows(settings, "SELECT * FROM memory_history WHERE memory_id = 'a4' "
                           "AND type = 'memory_added'")
    assert (a4["memory_type"], a4["importance"], a4["extraction_event_id"], a4["entities"]) == (
        "fact", 0.9, "x2", ["Lisbon"])

    sessions = rows(settings, "SELECT * FROM sessions ORDER BY user_id, session_id")
    assert [
        (s["user_id"], s["session_id"], s["started_at"], s["last_event_at"], s["messages"],
         s["user_messages"], s["tool_calls"], s["entity_mentions"], s["closed"],
         s["close_reason"])
        for s in sessions
    ] == [
        (ANN, "later", at(11, 10, 9), at(11, 10, 9, 30), 1, 1, 0, 1, True, "idle"),
        (ANN, "old", at(6, 1, 10), at(6, 1, 10, 3), 2, 2, 0, 0, True, "explicit"),
        (ANN, "trip", at(11, 1, 9), at(11, 1, 9, 6), 3, 2, 1, 1, True, "explicit"),
        (BOB, "work", at(11, 2, 9), at(11, 2, 9, 3), 2, 1, 0, 1, False, None),
        (OHARA, "s1", at(11, 5, 9), at(11, 5, 9, 2), 1, 1, 0, 0, True, "max_age"),
    ]

    accesses = rows(settings, "SELECT event_id, user_id, rank, memory_id, score FROM accesses "
                              "ORDER BY event_id, rank")
    assert [(a["event_id"], a["user_id"], a["rank"], a["memory_id"], a["score"])
            for a in accesses] == [
        ("r1", ANN, 1, "a1", 0.9), ("r1", ANN, 2, "a2", 0.7),
        ("r2", ANN, 1, "a4", 0.95), ("r2", ANN, 2, "a2", 0.5),
        ("r3", ANN, 1, "a2", 0.6), ("r4", BOB, 1, "b1", 0.8),
    ]

    extractions = rows(settings, "SELECT * FROM extractions ORDER BY event_id")
    assert [(e["event_id"], e["extractor"], e["model"], e["prompt_tokens"], e["candidates"],
             e["ok"]) for e in extractions] == [
        ("fb", "llm", "gpt-x", 300, None, False),
        ("x0", "offline", None, 0, 2, True),
        ("x1", "llm", "gpt-x", 1000, 3, True),
        ("x1b", "llm", "gpt-x", 400, 0, True),
        ("x2", "llm", "gpt-x", 500, 3, True),
        ("xb", "offline", None, 0, 3, True),
        ("xh", "llm", "gpt-y", 100, 1, True),
    ]
    assert extractions[0]["reason"] == "invalid JSON" and extractions[0]["attempts"] == 3

    letters = rows(settings, "SELECT agent, source_topic, user_id, key, event_id, type, "
                             "reason, dead_at FROM dead_letters ORDER BY agent")
    topics = Topics.from_settings(settings)
    assert letters == [
        {"agent": "projector", "source_topic": topics.memories, "user_id": ANN, "key": ANN,
         "event_id": None, "type": None, "reason": "not JSON", "dead_at": at(11, 10, 9, 40)},
        {"agent": "sessions", "source_topic": topics.chat, "user_id": BOB, "key": BOB,
         "event_id": "bob/work/bad", "type": "message_added",
         "reason": "content: Field required", "dead_at": at(11, 2, 9, 6)},
    ]

    mentions = rows(settings, "SELECT user_id, name FROM entity_mentions ORDER BY event_id")
    assert [(m["user_id"], m["name"]) for m in mentions] == [
        (ANN, "lisbon"), (ANN, "Lisbon"), (BOB, "Acme")]

    # events: every record, the malformed one too (no envelope, no user).
    counts = rows(settings, "SELECT topic, count(*) AS n, count(user_id) AS owned FROM events "
                            "GROUP BY topic ORDER BY topic")
    assert {r["topic"]: (r["n"], r["owned"]) for r in counts} == {
        topics.accesses: (4, 4), topics.chat: (22, 22), topics.deadletters: (2, 2),
        topics.memories: (25, 24),
    }


def test_views_have_the_documented_columns(settings: Settings) -> None:
    for scope in (Scope(now=NOW), Scope(user_id=ANN, now=NOW)):
        con = open_views(settings, scope)
        try:
            for view in VIEWS:
                described = [r[0] for r in con.execute(f"DESCRIBE {view.name}").fetchall()]
                assert tuple(described) == view.column_names, view.name
        finally:
            con.close()


# --- the reports -------------------------------------------------------------------------------


def test_access_report(settings: Settings) -> None:
    assert [(r["user_id"], r["memory_type"], r["memories"], r["retrieved"], r["accesses"],
             r["hit_rate"]) for r in report(settings, "access")] == [
        (ANN, "correction", 1, 0, 0, 0.0),   # a6
        (ANN, "episode", 2, 0, 0, 0.0),      # a0, a3
        (ANN, "fact", 2, 2, 2, 1.0),         # a1 (r1), a4 (r2)
        (ANN, "preference", 2, 1, 3, 0.5),   # a2 (r1, r2, r3), a5 never
        (BOB, "correction", 1, 0, 0, 0.0),   # b3
        (BOB, "fact", 2, 1, 1, 0.5),         # b1 (r4), b2 never
        (OHARA, "fact", 1, 0, 0, 0.0),       # h1
    ]


def test_most_and_least_used(settings: Settings) -> None:
    # Active only: a1 (superseded), b2 (expired) and b3 (deleted) are left out.
    most = report(settings, "most-used", limit=3)
    assert [(r["memory_id"], r["access_count"]) for r in most] == [
        ("a2", 3), ("a4", 1), ("b1", 1)]
    least = report(settings, "least-used", limit=3)
    assert [(r["memory_id"], r["access_count"]) for r in least] == [
        ("a0", 0), ("a3", 0), ("a5", 0)]
    assert [r["memory_id"] for r in report(settings, "most-used", BOB)] == ["b1"]


def reference_decay(importance: float, created_at: datetime, access_count: int,
                    now: datetime, settings: Settings) -> float:
    """The decay score as the issue defines it, written out independently of the SQL."""
    age_days = max((now - created_at).total_seconds(), 0.0) / 86_400
    recency = 0.5 ** (age_days / settings.recency_half_life_days)
    use = min(math.log(1 + access_count) / math.log(1 + settings.decay_use_saturation), 1.0)
    weights = settings.weight_importance + settings.weight_recency + settings.weight_use
    return (settings.weight_importance * importance + settings.weight_recency * recency
            + settings.weight_use * use) / weights


def test_decay_matches_the_python_formula_and_marks_what_may_be_forgotten(
    settings: Settings,
) -> None:
    found = report(settings, "decay")
    assert len(found) == 11
    for row in found:
        for decay in (reference_decay, decay_score):
            expected = decay(row["importance"], row["created_at"], row["access_count"], NOW,
                             settings)
            assert row["decay_score"] == pytest.approx(expected, rel=1e-12, abs=1e-15)
    by_id = {r["memory_id"]: r for r in found}
    # By hand, default weights 0.2 / 0.15 / 0.05, half-life 30 days, saturation 10:
    # b1: age 17d 14h 50m = 17.618 d, recency 0.5 ** (17.618 / 30) = 0.66560,
    # use ln 2 / ln 11 = 0.28906 -> (0.16 + 0.099840 + 0.014453) / 0.4 = 0.68573
    assert by_id["b1"]["decay_score"] == pytest.approx(0.6857338, abs=1e-6)
    # a0: importance 0.05, 171.58 days, never used -> (0.01 + 0.15 * 0.018980) / 0.4 = 0.032118
    assert by_id["a0"]["decay_score"] == pytest.approx(0.0321176, abs=1e-6)
    # Under 0.1: a0 and a6; a6 is a correction, a kept type.
    assert {m for m, r in by_id.items() if r["below_threshold"]} == {"a0", "a6"}
    assert {m for m, r in by_id.items() if r["forgettable"]} == {"a0"}
    assert found[0]["memory_id"] == "a0"  # lowest score first (a0 = a6, then by id)

    # Threshold 0.5 also takes a3 (0.394) and b2 (0.450, expired: never forgettable); a3 is
    # younger than 30 days, so only a lower minimum age makes it forgettable.
    looser = settings.model_copy(update={"forget_threshold": 0.5})
    marked = {r["memory_id"]: r for r in report(looser, "decay")}
    assert {m for m, r in marked.items() if r["below_threshold"]} == {"a0", "a6", "a3", "b2"}
    assert {m for m, r in marked.items() if r["forgettable"]} == {"a0"}
    young = looser.model_copy(update={"forget_min_age_days": 10.0, "forget_keep_types": ""})
    marked = {r["memory_id"]: r for r in report(young, "decay")}
    assert {m for m, r in marked.items() if r["forgettable"]} == {"a0", "a6", "a3"}


def test_growth_and_since(settings: Settings) -> None:
    assert [(r["user_id"], r["day"].isoformat(), r["added"], r["total"])
            for r in report(settings, "growth")] == [
        (ANN, "2026-06-01", 2, 2), (ANN, "2026-11-01", 3, 5), (ANN, "2026-11-10", 2, 7),
        (BOB, "2026-11-02", 3, 3), (OHARA, "2026-11-05", 1, 1),
    ]
    since = at(11, 10, 0)
    assert [(r["user_id"], r["day"].isoformat(), r["added"])
            for r in report(settings, "growth", since=since)] == [(ANN, "2026-11-10", 2)]
    recent = run_sql(settings, "SELECT DISTINCT event_id FROM accesses ORDER BY 1",
                     Scope(since=since, now=NOW))
    assert recent.column("event_id").to_pylist() == ["r2", "r3"]
    # Sessions by their start, dead letters by when they died.
    assert [r["session_id"] for r in run_sql(
        settings, "SELECT session_id FROM sessions", Scope(since=since, now=NOW)).to_pylist()
    ] == ["later"]


def test_yield(settings: Settings) -> None:
    assert [(r["user_id"], r["session_id"], r["messages"], r["memories"], r["preference"],
             r["fact"], r["episode"], r["correction"]) for r in report(settings, "yield")] == [
        (ANN, "later", 1, 2, 1, 1, 0, 0),   # a4, a5
        (ANN, "old", 2, 2, 0, 0, 1, 1),     # a0, a6
        (ANN, "trip", 3, 3, 1, 1, 1, 0),    # a1, a2, a3
        (BOB, "work", 2, 3, 0, 2, 0, 1),    # b1, b2, b3
        (OHARA, "s1", 1, 1, 0, 1, 0, 0),    # h1
    ]


def test_junk(settings: Settings) -> None:
    # Every memory is at least 7 days old on NOW; junk = no retrieval within 7 days of it.
    assert [(r["user_id"], r["memory_type"], r["memories"], r["junk"], r["junk_rate"])
            for r in report(settings, "junk")] == [
        (ANN, "correction", 1, 1, 1.0),   # a6
        (ANN, "episode", 2, 2, 1.0),      # a0, a3
        (ANN, "fact", 2, 0, 0.0),         # a1 on day 1, a4 on day 2
        (ANN, "preference", 2, 1, 0.5),   # a2 on day 1; a5 never
        (BOB, "correction", 1, 1, 1.0),   # b3
        (BOB, "fact", 2, 1, 0.5),         # b1 within a day; b2 never
        (OHARA, "fact", 1, 1, 1.0),       # h1
    ]
    # Within one day: a1 (created 11-01 09:07, retrieved 11-02 10:00) and a4 (11-10 09:31,
    # retrieved 11-12) come too late; b1 (11-02 09:10, retrieved 11-03 08:00) does not.
    one_day = {(r["user_id"], r["memory_type"]): (r["junk"], r["memories"])
               for r in report(settings, "junk", days=1)}
    assert one_day[(ANN, "fact")] == (2, 2)
    assert one_day[(ANN, "preference")] == (2, 2)
    assert one_day[(BOB, "fact")] == (1, 2)


def test_duplicates(settings: Settings) -> None:
    # ann: a2 and a5 are the same after lower/trim/collapsed whitespace; a2 was reinforced.
    # bob: b3 is deleted, so only b1 and b2 count.
    assert report(settings, "duplicates") == [
        {"user_id": ANN, "memories": 7, "exact_groups": 1, "exact_duplicates": 1,
         "near_duplicates": 1, "reinforced_memories": 1, "duplicate_rate": 2 / 8},
        {"user_id": BOB, "memories": 2, "exact_groups": 0, "exact_duplicates": 0,
         "near_duplicates": 0, "reinforced_memories": 0, "duplicate_rate": 0.0},
        {"user_id": OHARA, "memories": 1, "exact_groups": 0, "exact_duplicates": 0,
         "near_duplicates": 0, "reinforced_memories": 0, "duplicate_rate": 0.0},
    ]


def test_supersession(settings: Settings) -> None:
    assert [(r["user_id"], r["memory_type"], r["added"], r["superseded"],
             r["supersession_rate"]) for r in report(settings, "supersession")] == [
        (ANN, "correction", 1, 0, 0.0),
        (ANN, "episode", 2, 0, 0.0),
        (ANN, "fact", 2, 1, 0.5),         # a1 by a4; a1's second delivery is not an add
        (ANN, "preference", 2, 0, 0.0),
        (BOB, "correction", 1, 0, 0.0),
        (BOB, "fact", 2, 0, 0.0),
        (OHARA, "fact", 1, 0, 0.0),
    ]


def test_failures(settings: Settings) -> None:
    topics = Topics.from_settings(settings)
    assert [(r["source"], r["extractor"], r["model"], r["agent"], r["source_topic"],
             r["events"], r["failures"], r["failure_rate"], r["last_failure_at"])
            for r in report(settings, "failures")] == [
        ("dead_letter", None, None, "projector", topics.memories, None, 1, None,
         at(11, 10, 9, 40)),
        ("dead_letter", None, None, "sessions", topics.chat, None, 1, None, at(11, 2, 9, 6)),
        # x1, x1b, x2 recorded, fb failed
        ("extraction", "llm/2", "gpt-x", None, None, 4, 1, 0.25, at(11, 5, 9)),
        ("extraction", "llm/2", "gpt-y", None, None, 1, 0, 0.0, None),
        ("extraction", "offline/1", None, None, None, 2, 0, 0.0, None),
    ]


def test_llm_cost(settings: Settings) -> None:
    found = report(settings, "llm-cost")
    assert [(r["user_id"], r["session_id"], r["prompt_version"], r["model"], r["calls"],
             r["failed_calls"], r["prompt_tokens"], r["completion_tokens"], r["total_tokens"])
            for r in found] == [
        (ANN, "later", "p2", "gpt-x", 1, 0, 500, 100, 600),
        (ANN, "trip", "p1", "gpt-x", 2, 0, 1400, 300, 1700),
        (BOB, "work", "p1", "gpt-x", 1, 1, 300, 50, 350),
        (OHARA, "s1", "p1", "gpt-y", 1, 0, 100, 20, 120),
    ]
    latency = [(r["avg_latency_ms"], r["p95_latency_ms"]) for r in found]
    # trip: 800 and 1600 ms -> mean 1200, p95 by linear interpolation 800 + 0.95 * 800
    assert latency == [(1200.0, 1200.0), (1200.0, 1560.0), (2000.0, 2000.0), (400.0, 400.0)]
    # $2 per million prompt tokens, $8 per million completion tokens
    costs = [r["cost"] for r in found]
    assert costs == pytest.approx([0.0018, 0.0052, 0.001, 0.00036], abs=1e-12)


def test_entities(settings: Settings) -> None:
    # ann: "Lisbon" in a4 and mentioned twice ("Lisbon", "lisbon"); "Porto" in a1.
    # bob: "Acme" in b1 and mentioned once; "Tuesday" is in the deleted b3, so not counted.
    assert [(r["user_id"], r["entity"], r["in_memories"], r["mentions"], r["total"])
            for r in report(settings, "entities")] == [
        (ANN, "Lisbon", 1, 2, 3), (ANN, "Porto", 1, 0, 1),
        (BOB, "Acme", 1, 1, 2),
        (OHARA, "Tom", 1, 0, 1),
    ]
    assert [r["entity"] for r in report(settings, "entities", ANN, limit=1)] == ["Lisbon"]


# --- tenant scoping ----------------------------------------------------------------------------

USER_COUNTS: dict[str, dict[str, int]] = {
    # rows per view, by hand from the log above
    ANN: {"memories": 7, "memory_history": 10, "accesses": 5, "sessions": 3, "extractions": 4,
          "entity_mentions": 2, "dead_letters": 1, "events": 34,
          "entity_nodes": 2, "entity_edges": 0},  # Lisbon, Porto: named apart
    BOB: {"memories": 3, "memory_history": 5, "accesses": 1, "sessions": 1, "extractions": 2,
          "entity_mentions": 1, "dead_letters": 1, "events": 13,
          "entity_nodes": 1, "entity_edges": 0},  # Acme
    OHARA: {"memories": 1, "memory_history": 1, "accesses": 0, "sessions": 1, "extractions": 1,
            "entity_mentions": 0, "dead_letters": 0, "events": 5,
            "entity_nodes": 1, "entity_edges": 0},  # Tom
}


def view_counts(settings: Settings, user: str | None) -> dict[str, int]:
    """Rows per view when scoped to ``user``; fails if a view holds anyone else's rows."""
    query = " UNION ALL ".join(
        f"SELECT '{v.name}' AS view, count(*) AS n, list(DISTINCT user_id) AS users "
        f"FROM {v.name}"
        for v in VIEWS
    )
    con = open_views(settings, Scope(user_id=user, now=NOW))
    try:
        found = con.execute(query).fetchall()
    finally:
        con.close()
    for view, _, users in found:
        assert set(users or ()) <= {user}, f"{view} holds other users' rows: {users}"
    return {view: n for view, n, _ in found}


@pytest.mark.parametrize("user", USERS)
def test_every_view_holds_only_the_users_rows(settings: Settings, user: str) -> None:
    assert view_counts(settings, user) == USER_COUNTS[user]
    for name in REPORTS:
        users = {r.get("user_id") for r in report(settings, name, user)} - {None}
        assert users <= {user}, name


def _is_utf8_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@pytest.mark.parametrize("user", HOSTILE)
def test_hostile_user_ids_see_nothing_and_break_nothing(
    settings: Settings, user: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert set(view_counts(settings, user).values()) == {0}
    for name in REPORTS:
        assert report(settings, name, user) == [], name
    assert rows(settings, "SELECT count(*) AS n FROM events", user) == [{"n": 0}]
    command = ("report", "access", "--user", user, "--format", "json")
    if not _is_utf8_text(user):
        # Argv bytes that are not UTF-8 (lone surrogates): the command refuses them.
        with pytest.raises(SystemExit) as refused:
            cli(settings, monkeypatch, *command)
        assert refused.value.code == 2
        assert "argument --user: not UTF-8 text" in capsys.readouterr().err
        return
    assert cli(settings, monkeypatch, *command) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_scoped_query_cannot_read_around_the_views(settings: Settings) -> None:
    archive = live_archive_dir(settings)
    around = [
        f"SELECT count(*) FROM read_parquet('{archive}/**/*.parquet')",
        f"SELECT count(*) FROM read_text('{settings.lancedb_dir}/memories.lance/*')",
        "SELECT count(*) FROM _memories_arrow",
    ]
    for query in around:
        with pytest.raises(duckdb.Error):
            run_sql(settings, query, Scope(user_id=ANN, now=NOW))
    # The base tables behind the views hold only the user's rows too.
    assert rows(settings, "SELECT DISTINCT owner FROM _records", BOB) == [{"owner": BOB}]
    # Unscoped, the operator's query reads what it likes.
    assert run_sql(settings, around[0]).num_rows == 1


# --- the commands -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM memories",
        "ATTACH 'other.duckdb'",
        "COPY memories TO 'out.csv'",
        "SELECT 1; SELECT 2",
        "SELECT 1; DROP TABLE _params",
        "WITH gone AS (DELETE FROM _params RETURNING *) SELECT * FROM gone",
        "CREATE TABLE x AS SELECT 1",
        "INSERT INTO _params SELECT * FROM _params",
        "SET enable_external_access = true",
        "PRAGMA version",
        "EXPLAIN SELECT 1",
    ],
)
def test_sql_refuses_anything_but_one_select(
    settings: Settings, query: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(NotReadOnly):
        run_sql(settings, query)
    assert cli(settings, monkeypatch, "sql", query) == 2
    assert "error:" in capsys.readouterr().err


def test_sql_command_answers_over_the_views(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    query = "WITH m AS (SELECT * FROM memories) SELECT memory_id FROM m ORDER BY memory_id"
    assert cli(settings, monkeypatch, "sql", query, "--user", BOB, "--format", "csv") == 0
    assert capsys.readouterr().out == "memory_id\nb1\nb2\nb3\n"
    assert cli(settings, monkeypatch, "sql", "SELECT nope FROM memories") == 1
    assert "error:" in capsys.readouterr().err


def test_formats_parse_back_to_the_same_rows(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("--now", NOW.isoformat())
    expected = run_report(settings, "decay", Scope(now=NOW)).table
    assert expected.num_rows == 11

    assert cli(settings, monkeypatch, "report", "decay", *args, "--format", "parquet",
               "--out", str(tmp_path / "decay.parquet")) == 0
    assert pq.read_table(tmp_path / "decay.parquet").equals(expected)

    assert cli(settings, monkeypatch, "report", "decay", *args, "--format", "json") == 0
    parsed = json.loads(capsys.readouterr().out)
    assert parsed == [
        {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}
        for row in expected.to_pylist()
    ]

    assert cli(settings, monkeypatch, "report", "decay", *args, "--format", "csv",
               "--out", str(tmp_path / "decay.csv")) == 0
    with (tmp_path / "decay.csv").open(encoding="utf-8") as handle:
        read = list(csv.DictReader(handle))
    assert [typed(row, expected.schema) for row in read] == expected.to_pylist()

    # Lists (entities) survive CSV as JSON arrays; nulls as empty cells.
    assert cli(settings, monkeypatch, "sql", "SELECT memory_id, entities, superseded_by FROM "
               "memories WHERE memory_id IN ('a1', 'a4') ORDER BY 1", "--format", "csv") == 0
    read = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert read == [{"memory_id": "a1", "entities": '["Porto"]', "superseded_by": "a4"},
                    {"memory_id": "a4", "entities": '["Lisbon"]', "superseded_by": ""}]

    assert cli(settings, monkeypatch, "report", "decay", "--format", "parquet") == 2
    assert "--out" in capsys.readouterr().err


def typed(row: dict[str, str], schema: pa.Schema) -> dict[str, Any]:
    """A CSV row read back into the report's column types."""
    out: dict[str, Any] = {}
    for f in schema:
        text = row[f.name]
        if text == "" and not pa.types.is_string(f.type):
            out[f.name] = None
        elif pa.types.is_boolean(f.type):
            out[f.name] = {"true": True, "false": False}[text]
        elif pa.types.is_integer(f.type):
            out[f.name] = int(text)
        elif pa.types.is_floating(f.type):
            out[f.name] = float(text)
        elif pa.types.is_timestamp(f.type):
            out[f.name] = datetime.fromisoformat(text)
        else:
            out[f.name] = text
    return out


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_plot_writes_a_real_png(
    settings: Settings, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import matplotlib.image

    path = tmp_path / f"{name}.png"
    assert cli(settings, monkeypatch, "report", name, "--now", NOW.isoformat(),
               "--plot", str(path)) == 0
    assert "row" in capsys.readouterr().out
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[:2] == (500, 900)
    assert float(pixels[..., :3].std()) > 0.05  # drawn on, not a blank canvas


def test_plot_of_an_empty_report(settings: Settings, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "empty.png"
    assert cli(settings, monkeypatch, "report", "access", "--user", "nobody", "--plot",
               str(path)) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_list_and_unknown_names(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(settings, monkeypatch, "report", "--list") == 0
    listed = capsys.readouterr().out
    for name, item in REPORTS.items():
        assert name in listed and item.description.split(":")[0][:30] in listed
    assert cli(settings, monkeypatch, "report", "nonsense") == 2
    assert "unknown report" in capsys.readouterr().err


def test_scoped_table_output(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(settings, monkeypatch, "report", "llm-cost", "--user", OHARA) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "user_id", "session_id", "prompt_version", "model", "calls", "failed_calls",
        "prompt_tokens", "completion_tokens", "total_tokens", "avg_latency_ms",
        "p95_latency_ms", "cost",
    ]
    assert OHARA in lines[2] and "gpt-y" in lines[2] and "0.00036" in lines[2]
    assert lines[-1] == "(1 row)"


def test_a_report_ignores_time_after_now(settings: Settings) -> None:
    # Ages are floored at 0: a memory from after --now is as recent as can be.
    early = NOW - timedelta(days=200)
    table = run_report(settings, "decay", Scope(now=early)).table
    found = {r["memory_id"]: r for r in table.to_pylist()}
    assert found["h1"]["age_days"] == 0.0 and found["h1"]["recency"] == 1.0
