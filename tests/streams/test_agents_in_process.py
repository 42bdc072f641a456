"""The session and extraction agents run in-process: no broker, no subprocess.

Each agent is declared on a Faust app and driven through Faust's own testing support
(``agent.test_context()``: an in-memory channel in place of the topic, real Faust streams and
batching), with in-memory collaborators: topics that record what the agents publish, an
in-memory sessions table, a real key store and a LanceDB projection in a temporary
directory, the fake embedder of ``tests/fakes.py``. Chat is sealed as the client seals it, so
what the agents publish is opened with the user's key before it is looked at.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import faust
import pytest
from chat import conversation
from fakes import FakeEmbedder
from prometheus_client import REGISTRY

from memstream.models.beliefs import KnownClaim
from memstream.models.codec import decode_event, encode_event
from memstream.models.events.chat import SessionClosed
from memstream.models.events.consolidation import ConsolidationRequested
from memstream.models.events.envelope import Event
from memstream.models.events.memory import (
    ExtractionFailure,
    ExtractionRecorded,
    MemoryAdded,
    TokenUsage,
)
from memstream.models.extraction import Extraction, OfflineExtractor
from memstream.models.session import ClosedSession, SessionState, session_key
from memstream.models.settings import Settings
from memstream.projections.memories import MemoryProjection
from memstream.streams.agents.boundary import RecordBoundary
from memstream.streams.agents.consolidation import ExtractionAgent
from memstream.streams.agents.decisions import MemoryDecider
from memstream.streams.agents.ordering import InOrder
from memstream.streams.agents.publishing import topic_publisher
from memstream.streams.agents.session import SessionAgent
from memstream.streams.agents.session_table import IdleTracker, SessionStore
from memstream.streams.kafka.deadletters import DeadLetter, DeadLetterSink
from memstream.streams.kafka.logid import LogWatch
from memstream.streams.keys.sealing import open_event, seal_event
from memstream.streams.keys.store import FileKeyStore, keystore_from_settings
from memstream.streams.llm.extractor import ExtractionFailed

#: A while ago, so every event time is inside the window the agents accept.
START = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
RAW = faust.Schema(key_serializer="raw", value_serializer="raw")
_apps = itertools.count()


class MemoryTable:
    """The parts of a Faust table :class:`SessionStore` uses: local data and a changelog."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.changelog: list[tuple[str, bytes | None, int]] = []
        self.changelog_topic = SimpleNamespace(
            prepare_key=lambda key, _: (key.encode(), None), get_topic_name=lambda: "changelog"
        )

        async def send(topic: str, key: bytes, value: bytes | None, partition: int, *_: Any) -> None:
            self.changelog.append((key.decode(), value, partition))

        self.app = SimpleNamespace(producer=SimpleNamespace(send=send))


class RecordingTopic:
    """A topic as the publishers send to it: each record kept, acknowledged at once."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes]] = []

    async def send(self, *, key: bytes | None, value: bytes) -> asyncio.Future[None]:
        self.records.append((key, value))
        acked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        acked.set_result(None)
        return acked

    def opened(self, keys: FileKeyStore) -> list[Event]:
        """What was published, opened with the users' keys."""
        events = [open_event(decode_event(value), keys) for _, value in self.records]
        assert all(event is not None for event in events)
        return [event for event in events if event is not None]


@dataclass
class Letters:
    """The dead-letter topic."""

    sent: list[DeadLetter] = field(default_factory=list)

    async def send(self, key: bytes | None, value: bytes) -> None:
        self.sent.append(DeadLetter.model_validate_json(value))


def chat_record(event: Event, keys: FileKeyStore) -> tuple[bytes, bytes]:
    """(key, value) of a chat event as the client writes it: sealed with its user's key."""
    sealed = seal_event(event, keys)
    assert sealed is not None
    return event.user_id.encode(), encode_event(sealed)


async def eventually(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Wait until ``condition()`` holds: an agent works through what it was given on its
    own task (Faust's ``put`` returns once the stream took the record)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the agent did not get there in time"
        await asyncio.sleep(0.02)


def settings_for(tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(
        data_dir=tmp_path, topic_prefix="inproc", session_batch_wait_s=0.05, **overrides
    )


async def no_seek(tp: Any, offset: int) -> None:
    raise AssertionError(f"records came out of order: a seek to {tp}@{offset}")


def in_order(agent: str) -> InOrder:
    return InOrder(agent, no_seek)


def faust_app() -> faust.App:
    # A fresh app per test: nothing connects to a broker until a worker starts it.
    return faust.App(f"inproc-{next(_apps)}", store="memory://")


@dataclass
class SessionRig:
    """The session agent with its collaborators in memory."""

    agent: SessionAgent
    store: SessionStore
    keys: FileKeyStore
    clock: list[float]
    consolidation: RecordingTopic
    chat: RecordingTopic
    letters: Letters

    def requests(self) -> list[ConsolidationRequested]:
        found = self.consolidation.opened(self.keys)
        assert all(isinstance(event, ConsolidationRequested) for event in found)
        return [event for event in found if isinstance(event, ConsolidationRequested)]


@pytest.fixture
def sessions(tmp_path: Path) -> SessionRig:
    settings = settings_for(tmp_path, idle_timeout_s=600)
    keys = keystore_from_settings(settings)
    store = SessionStore(MemoryTable(), cache_size=100, keys=keys)
    clock = [1000.0]
    idle = IdleTracker(settings.idle_timeout_s, settings.max_session_age_s, clock=lambda: clock[0])
    consolidation, chat, letters = RecordingTopic(), RecordingTopic(), Letters()
    agent = SessionAgent(
        settings,
        store,
        idle,
        keys=keys,
        request_consolidation=topic_publisher(consolidation, keys),
        publish_chat=topic_publisher(chat, keys),
        boundary=RecordBoundary("sessions", DeadLetterSink(letters.send, keys)),
        order=in_order("sessions"),
        watch=LogWatch(settings),
    )
    return SessionRig(agent, store, keys, clock, consolidation, chat, letters)


@pytest.fixture
async def chat_in(sessions: SessionRig) -> AsyncIterator[Any]:
    """The session agent running on Faust's test channel in place of the chat topic."""
    declared = faust_app().agent(name="sessions")(sessions.agent.fold_chat)
    async with declared.test_context(channel=declared.app.channel(schema=RAW)) as agent:
        yield agent


async def put_chat(agent: Any, sessions: SessionRig, events: Sequence[Event]) -> None:
    for event in events:
        key, value = chat_record(event, sessions.keys)
        await agent.put(key=key, value=value)


def folded(sessions: SessionRig, key: str) -> int:
    """How many messages the open session ``key`` holds (0: none open)."""
    value = sessions.store.get(key)
    return value.message_count if isinstance(value, SessionState) else 0


TURNS = [
    ("user", "My sister Clara lives in Lisbon."),
    ("assistant", "Lisbon is lovely in spring."),
    ("user", "I prefer green tea over coffee."),
]


async def test_chat_folds_into_a_session_window_and_its_close_requests_consolidation_of_the_transcript(
    sessions: SessionRig, chat_in: Any
) -> None:
    events = conversation("ann", "s1", TURNS, start=START)
    key = session_key("ann", "s1")
    await put_chat(chat_in, sessions, events[:-1])  # the close comes later
    await eventually(lambda: folded(sessions, key) == len(TURNS))
    window = sessions.store.get(key)
    assert isinstance(window, SessionState)
    assert [m.content for m in window.messages] == [text for _, text in TURNS]
    assert sessions.consolidation.records == []  # nothing to consolidate while it is open

    await put_chat(chat_in, sessions, events[-1:])
    await eventually(lambda: len(sessions.consolidation.records) == 1)
    [request] = sessions.requests()
    assert (request.user_id, request.session_id, request.reason) == ("ann", "s1", "session_closed")
    assert [(m.role, m.content) for m in request.messages] == TURNS
    assert [m.event_id for m in request.messages] == [e.event_id for e in events[1:-1]]
    # Sealed on the topic with the session's key: the transcript is not readable there.
    assert b"Lisbon" not in sessions.consolidation.records[0][1]
    await eventually(lambda: isinstance(sessions.store.get(key), ClosedSession))
    assert sessions.letters.sent == []


async def test_an_idle_session_is_closed_by_the_timer_and_the_close_folds_into_a_consolidation(
    sessions: SessionRig, chat_in: Any
) -> None:
    await put_chat(chat_in, sessions, conversation("bob", "s2", TURNS[:2], start=START, close=False))
    key = session_key("bob", "s2")
    # Every message folded first: a close requested for an earlier last event is skipped
    # by the fold (the session went on), as it must be.
    await eventually(lambda: folded(sessions, key) == 2)

    await sessions.agent.close_idle_sessions()
    assert sessions.chat.records == []  # not idle yet
    sessions.clock[0] += 601
    await sessions.agent.close_idle_sessions()
    [close] = sessions.chat.opened(sessions.keys)
    assert isinstance(close, SessionClosed)
    assert (close.user_id, close.session_id, close.reason) == ("bob", "s2", "idle")
    await sessions.agent.close_idle_sessions()
    assert len(sessions.chat.records) == 1  # requested once per last event

    # The worker reads its own close back from the chat topic.
    await chat_in.put(key=sessions.chat.records[0][0], value=sessions.chat.records[0][1])
    await eventually(lambda: len(sessions.consolidation.records) == 1)
    [request] = sessions.requests()
    assert [(m.role, m.content) for m in request.messages] == TURNS[:2]


async def test_a_malformed_chat_record_is_dead_lettered_and_the_records_after_it_are_folded(
    sessions: SessionRig, chat_in: Any
) -> None:
    await chat_in.put(key=b"carol", value=b"\x00 not an event")
    stranger = conversation("dave", "s3", TURNS[:1], start=START, close=False)[0]
    await chat_in.put(key=b"carol", value=chat_record(stranger, sessions.keys)[1])  # wrongly keyed
    await put_chat(chat_in, sessions, conversation("carol", "s3", TURNS, start=START))

    await eventually(lambda: len(sessions.consolidation.records) == 1)
    [request] = sessions.requests()
    assert (request.user_id, [m.content for m in request.messages]) == (
        "carol", [text for _, text in TURNS]
    )
    assert [(letter.agent, letter.source_offset) for letter in sessions.letters.sent] == [
        ("sessions", 0), ("sessions", 1)
    ]
    assert "not the event's user_id" in sessions.letters.sent[1].reason
    assert session_key("dave", "s3") not in sessions.store.session_keys()


class FailingExtractor:
    """An extractor whose every call fails, as an LLM extractor does after its attempts."""

    name = "failing"
    version = "1"
    reads_claims = True

    def extract(
        self, request: ConsolidationRequested, known_claims: Sequence[KnownClaim] = ()
    ) -> Extraction:
        raise ExtractionFailed("no JSON in the reply", "Sorry, I cannot help.", 2, TokenUsage())


@dataclass
class ExtractionRig:
    """The extraction agent with its collaborators in memory."""

    agent: ExtractionAgent
    keys: FileKeyStore
    memories: RecordingTopic
    consolidation: RecordingTopic
    letters: Letters


def extraction_rig(
    tmp_path: Path, extractor: Any = None, decider_class: type[MemoryDecider] = MemoryDecider,
    **overrides: Any,
) -> ExtractionRig:
    settings = settings_for(tmp_path, llm_retry_delay_s=0, llm_attempts_per_span=2, **overrides)
    keys = keystore_from_settings(settings)
    embedder = FakeEmbedder()
    decider = decider_class(MemoryProjection(settings.lancedb_dir, embedder), embedder)
    memories, consolidation, letters = RecordingTopic(), RecordingTopic(), Letters()
    sink = DeadLetterSink(letters.send, keys)
    agent = ExtractionAgent(
        settings,
        extractor or OfflineExtractor(),
        lambda: decider,
        keys=keys,
        publish_memories=topic_publisher(memories, keys),
        request_consolidation=topic_publisher(consolidation, keys),
        letters=sink,
        boundary=RecordBoundary("extraction", sink),
        order=in_order("extraction"),
        watch=LogWatch(settings),
        progress=None,
    )
    return ExtractionRig(agent, keys, memories, consolidation, letters)


@pytest.fixture
def extraction(tmp_path: Path) -> ExtractionRig:
    return extraction_rig(tmp_path)


async def consolidation_records(sessions: SessionRig, chat_in: Any, user: str) -> list[tuple[bytes | None, bytes]]:
    """The consolidation request a real session agent makes of a closed conversation."""
    await put_chat(chat_in, sessions, conversation(user, "s1", TURNS, start=START))
    await eventually(lambda: len(sessions.consolidation.records) == 1)
    return sessions.consolidation.records


async def test_a_consolidation_request_becomes_an_extraction_and_memory_events(
    sessions: SessionRig, chat_in: Any, extraction: ExtractionRig
) -> None:
    [(key, value)] = await consolidation_records(sessions, chat_in, "erin")
    [request] = sessions.requests()
    declared = faust_app().agent(name="extraction")(extraction.agent.extract_requests)
    async with declared.test_context(channel=declared.app.channel(schema=RAW)) as agent:
        await agent.put(key=key, value=value)
        await eventually(lambda: len(extraction.memories.records) >= 2)
        first = extraction.memories.opened(extraction.keys)
        # Re-delivered (at-least-once): the same events again, under the same ids.
        await agent.put(key=key, value=value)
        await eventually(lambda: len(extraction.memories.records) == 2 * len(first))

    recorded, *decisions = first
    assert isinstance(recorded, ExtractionRecorded)
    assert (recorded.consolidation_event_id, recorded.extractor) == (request.event_id, "offline")
    added = [event for event in decisions if isinstance(event, MemoryAdded)]
    assert added and all(event.extraction_event_id == recorded.event_id for event in added)
    assert any("Lisbon" in event.content for event in added)
    again = extraction.memories.opened(extraction.keys)[len(first):]
    assert [event.event_id for event in again] == [event.event_id for event in first]
    assert b"Lisbon" not in b"".join(value for _, value in extraction.memories.records)
    assert extraction.letters.sent == []


async def test_a_malformed_consolidation_request_is_dead_lettered_and_the_next_is_extracted(
    sessions: SessionRig, chat_in: Any, extraction: ExtractionRig
) -> None:
    [(key, value)] = await consolidation_records(sessions, chat_in, "fay")
    declared = faust_app().agent(name="extraction")(extraction.agent.extract_requests)
    async with declared.test_context(channel=declared.app.channel(schema=RAW)) as agent:
        await agent.put(key=key, value=b'{"type": "consolidation_requested"}')
        await agent.put(key=key, value=value)
        await eventually(lambda: len(extraction.memories.records) >= 2)

    [letter] = extraction.letters.sent
    assert (letter.agent, letter.source_offset) == ("extraction", 0)
    assert isinstance(extraction.memories.opened(extraction.keys)[0], ExtractionRecorded)


async def test_a_failed_extraction_is_recorded_dead_lettered_and_retried_while_attempts_remain(
    sessions: SessionRig, chat_in: Any, tmp_path: Path
) -> None:
    [(key, value)] = await consolidation_records(sessions, chat_in, "gus")
    failing = extraction_rig(tmp_path, FailingExtractor())  # the same key store
    declared = faust_app().agent(name="extraction")(failing.agent.extract_requests)
    async with declared.test_context(channel=declared.app.channel(schema=RAW)) as agent:
        await agent.put(key=key, value=value)
        await eventually(lambda: len(failing.consolidation.records) == 1)  # the retry

    [failure] = failing.memories.opened(failing.keys)
    assert isinstance(failure, ExtractionFailure)
    assert (failure.raw_response, failure.retry_scheduled) == ("Sorry, I cannot help.", True)
    [letter] = failing.letters.sent
    assert letter.reason.startswith("extraction failed: ExtractionFailed")
    [retry] = failing.consolidation.opened(failing.keys)
    assert isinstance(retry, ConsolidationRequested)
    assert (retry.event_id, retry.attempt) == (sessions.requests()[0].event_id, 1)


def sample(name: str, **labels: str) -> float:
    """A metric's value in this process (0 before its first increment)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_the_metrics_count_the_records_processed_and_dead_lettered_and_the_extractions(
    sessions: SessionRig, chat_in: Any, extraction: ExtractionRig
) -> None:
    def invalid(agent: str) -> float:
        return sample("memstream_dead_letters_total", agent=agent, reason="invalid_event")

    invalid_before = {agent: invalid(agent) for agent in ("sessions", "extraction")}
    events = conversation("hal", "s1", TURNS, start=START)
    await chat_in.put(key=b"hal", value=b"\x00 not an event")
    await put_chat(chat_in, sessions, events)
    await eventually(lambda: len(sessions.consolidation.records) == 1)
    [letter] = sessions.letters.sent
    chat_topic = letter.source_topic  # the test channel's name stands for the chat topic
    processed = ("memstream_events_processed_total", {"agent": "sessions", "topic": chat_topic})
    # Every event of the conversation counted once; the poison record only as a dead letter.
    await eventually(lambda: sample(processed[0], **processed[1]) == len(events))
    assert invalid("sessions") == invalid_before["sessions"] + 1

    extracted = ("memstream_extraction_seconds_count", {"extractor": "offline", "outcome": "recorded"})
    before = sample(extracted[0], **extracted[1])
    [(key, value)] = sessions.consolidation.records
    declared = faust_app().agent(name="extraction")(extraction.agent.extract_requests)
    async with declared.test_context(channel=declared.app.channel(schema=RAW)) as agent:
        await agent.put(key=key, value=b'{"type": "consolidation_requested"}')
        await agent.put(key=key, value=value)
        await eventually(lambda: sample(extracted[0], **extracted[1]) == before + 1)
        topic = extraction.letters.sent[0].source_topic
        # The malformed request is not counted processed: one record is.
        await eventually(
            lambda: sample("memstream_events_processed_total", agent="extraction", topic=topic) == 1
        )
    assert invalid("extraction") == invalid_before["extraction"] + 1


async def test_a_failed_extraction_is_counted_as_failed_and_as_a_dead_letter(
    sessions: SessionRig, chat_in: Any, tmp_path: Path
) -> None:
    [(key, value)] = await consolidation_records(sessions, chat_in, "ida")
    failing = extraction_rig(tmp_path, FailingExtractor())
    letters = ("memstream_dead_letters_total", {"agent": "extraction", "reason": "extraction_failed"})
    failed = ("memstream_extraction_seconds_count", {"extractor": "failing", "outcome": "failed"})
    letters_before = sample(letters[0], **letters[1])
    failed_before = sample(failed[0], **failed[1])
    declared = faust_app().agent(name="extraction")(failing.agent.extract_requests)
    async with declared.test_context(channel=declared.app.channel(schema=RAW)) as agent:
        await agent.put(key=key, value=value)
        await eventually(lambda: len(failing.consolidation.records) == 1)  # the retry
    assert sample(failed[0], **failed[1]) == failed_before + 1
    assert sample(letters[0], **letters[1]) == letters_before + 1


class FailsForKim(MemoryDecider):
    """A decider that cannot take one user's candidates (as a candidate it chokes on)."""

    def decide(self, recorded: ExtractionRecorded) -> list[Event]:
        if recorded.user_id == "kim":
            raise LookupError("a candidate the decider cannot take")
        return super().decide(recorded)


async def test_a_request_of_a_batch_that_cannot_be_decided_is_dead_lettered_and_the_others_publish_what_they_would_alone(
    sessions: SessionRig, chat_in: Any, tmp_path: Path
) -> None:
    users = ("jon", "kim", "lea")
    for user in users:
        await put_chat(chat_in, sessions, conversation(user, "s1", TURNS, start=START))
    await eventually(lambda: len(sessions.consolidation.records) == len(users))
    records = sessions.consolidation.records

    async def extract(rig: ExtractionRig) -> list[Event]:
        declared = faust_app().agent(name="extraction")(rig.agent.extract_requests)
        async with declared.test_context(channel=declared.app.channel(schema=RAW)) as agent:
            for key, value in records:
                await agent.put(key=key, value=value)
            await eventually(lambda: rig.letters.sent or len(rig.memories.records) > 0)
            await eventually(lambda: {e.user_id for e in rig.memories.opened(rig.keys)} >= {"jon", "lea"})
        return rig.memories.opened(rig.keys)

    # All three in one batch (embedded together), kim's decision failing.
    batched = extraction_rig(tmp_path, decider_class=FailsForKim, extraction_batch_size=3,
                             extraction_batch_wait_s=5.0)
    together = await extract(batched)
    # One at a time, every decision made.
    alone = await extract(extraction_rig(tmp_path, extraction_batch_size=1))

    [letter] = batched.letters.sent
    assert (letter.agent, letter.source_offset) == ("extraction", 1)
    assert {e.user_id for e in together} == {"jon", "lea"}
    # The same events (the extractor's latency aside: it is measured).
    def timeless(events: list[Event]) -> list[dict[str, Any]]:
        return [e.model_dump(exclude={"latency_ms"}) for e in events]

    assert timeless(together) == timeless([e for e in alone if e.user_id != "kim"])
    assert {e.user_id for e in alone} == set(users)
