"""Consolidation through the LLM extractor: the real openai client, a scripted local server,
the real broker and LanceDB."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer, TopicPartition
from chat import conversation
from harness import committed_offsets, wait_for, wait_until_projected
from llm_server import Reply, ScriptedServer, completion
from sealed import topic_events

from memstream.models.events import Event, ExtractionFailure, ExtractionRecorded
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import MemoryProjection
from memstream.streams.broker import free_port
from memstream.streams.deadletters import DeadLetter
from memstream.streams.logreader import read_topic
from memstream.streams.publish import publish_events
from memstream.streams.tansu import true_end_offsets
from memstream.streams.topics import Topics
from memstream.streams.worker import WorkerProcess

TURNS = [("user", "I work at Siemens and I prefer trains over planes."), ("assistant", "Noted!")]


def good_reply(message_id: str) -> Reply:
    body = {
        "preferences": [{"content": "Prefers trains over planes", "importance": 0.8, "source_event_ids": [message_id]}],
        "facts": [
            {"content": "Works at Siemens", "importance": 0.9, "source_event_ids": [message_id]},
            {"content": "Said hello", "importance": 0.1, "source_event_ids": [message_id]},
        ],
        "summary": "The user said where they work and how they like to travel.",
        "entities": ["Siemens"],
        "corrections": [],
    }
    return Reply(completion(json.dumps(body), prompt_tokens=321, completion_tokens=45))


def changing_reply(message_id: str, call: int) -> Reply:
    """A reply that differs on every call, as an LLM's may: another employer each time."""
    body = {
        "preferences": [{"content": "Prefers trains over planes", "importance": 0.8, "source_event_ids": [message_id]}],
        "facts": [{"content": f"Works at company number {call}", "importance": 0.9, "source_event_ids": [message_id]}],
        "summary": f"Reply number {call}.",
        "entities": [],
        "corrections": [],
    }
    return Reply(completion(json.dumps(body)))


def memory_events(settings) -> list:
    return topic_events(settings, Topics.from_settings(settings).memories)


def test_llm_extraction_is_recorded_with_usage_and_becomes_memories(settings_factory, tmp_path: Path) -> None:
    events = conversation("ann", "s", TURNS)
    server = ScriptedServer([good_reply(events[1].event_id)])
    server.start()
    try:
        settings = settings_factory(
            web_port=free_port(), extractor="llm", llm_base_url=server.base_url,
            llm_api_key="sk-local", llm_model="scripted", llm_timeout_s=5,
        )
        with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
            asyncio.run(publish_events(settings, events))
            projection = MemoryProjection(settings.lancedb_dir, embedder_from_settings(settings))
            wait_for(lambda: len(projection.list_memories("ann")) >= 3)
    finally:
        server.stop()
    (recorded,) = [e for e in memory_events(settings) if isinstance(e, ExtractionRecorded)]
    assert recorded.extractor == "llm" and recorded.model == "test-model-2026-01-01"
    assert recorded.usage is not None and recorded.usage.prompt_tokens == 321
    assert "Works at Siemens" in recorded.raw_response
    contents = {m.content for m in projection.list_memories("ann")}
    assert {"Prefers trains over planes", "Works at Siemens"} <= contents
    assert "Said hello" not in contents  # importance below 0.3 is dropped
    assert server.received[0].headers["authorization"] == "Bearer sk-local"


def test_a_reply_that_never_validates_is_recorded_dead_lettered_and_retried(
    settings_factory, tmp_path: Path
) -> None:
    bad = Reply(completion("this is not JSON at all"))
    server = ScriptedServer([bad] * 4)
    server.start()
    try:
        settings = settings_factory(
            web_port=free_port(), extractor="llm", llm_base_url=server.base_url,
            llm_model="scripted", llm_timeout_s=5, llm_max_retries=1,
            llm_retry_delay_s=0.5, llm_attempts_per_span=2,
        )
        with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
            asyncio.run(publish_events(settings, conversation("ann", "s", TURNS)))
            wait_for(lambda: sum(isinstance(e, ExtractionFailure) for e in memory_events(settings)) == 2)
            time.sleep(1.5)  # no third attempt: the span has used its two
            failures = [e for e in memory_events(settings) if isinstance(e, ExtractionFailure)]
    finally:
        server.stop()
    assert len(failures) == 2
    assert [f.retry_scheduled for f in failures] == [True, False]
    assert all("this is not JSON" in f.raw_response and f.attempts == 2 for f in failures)
    letters = [
        DeadLetter.model_validate_json(r.value)
        for r in asyncio.run(read_topic(settings, Topics.from_settings(settings).deadletters))
    ]
    # The reply is the user's content: it is in the sealed extraction_failed events, and the
    # plaintext reason of the dead letter only says so.
    assert len(letters) == 2 and all("raw reply in the sealed" in letter.reason for letter in letters)
    assert not any("this is not JSON" in letter.reason for letter in letters)
    assert len(server.received) == 4  # 2 attempts per try, 2 tries


def runs(events: list[Event]) -> list[list[dict]]:
    """The memory topic (one user, one partition) cut into runs: each extraction with the
    decisions published after it, content opened, without the per-publication encryption."""
    cut: list[list[dict]] = []
    for event in events:
        if isinstance(event, ExtractionRecorded):
            cut.append([])
        cut[-1].append(event.model_dump(mode="json", exclude={"encryption"}))
    return cut


async def send_again(settings, records: list) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    await producer.start()
    try:
        for r in records:
            await producer.send_and_wait(r.topic, key=r.key, value=r.value, partition=r.partition)
    finally:
        await producer.stop()


def test_a_request_delivered_again_after_a_crash_reuses_its_recorded_extraction(
    settings_factory, tmp_path: Path
) -> None:
    """The LLM answers differently on every call; a consolidation request delivered again
    after a SIGKILL (killed as soon as its memory events are out, and the same request
    published once more, so it comes again whatever was committed) must not reach the LLM
    again: the second delivery publishes exactly what the first did."""
    events = conversation("ann", "s", TURNS)
    server = ScriptedServer([changing_reply(events[1].event_id, call) for call in range(1, 6)])
    server.start()
    try:
        settings = settings_factory(
            web_port=free_port(), extractor="llm", llm_base_url=server.base_url,
            llm_model="scripted", llm_timeout_s=5,
        )
        topics = Topics.from_settings(settings)
        projection = MemoryProjection(settings.lancedb_dir, embedder_from_settings(settings))
        worker = WorkerProcess(settings, log_path=tmp_path / "worker.log").start()
        try:
            asyncio.run(publish_events(settings, events))
            wait_for(
                lambda: any(isinstance(e, ExtractionRecorded) for e in memory_events(settings))
                and len(runs(memory_events(settings))[0]) >= 3,
                "the extraction and its memory events",
            )
            worker.kill()  # most likely before the request's offset was committed
            (request,) = asyncio.run(read_topic(settings, topics.consolidation))
            asyncio.run(send_again(settings, [request]))
            worker.start()
            position = (topics.consolidation, request.partition)
            end = asyncio.run(true_end_offsets(settings.broker, [TopicPartition(*position)]))
            wait_for(
                lambda: asyncio.run(committed_offsets(settings, [position])).get(position)
                == end[TopicPartition(*position)],
                "the request delivered again to be processed and committed",
                # Past MEMSTREAM_DECISION_CATCH_UP_S: a loaded machine's restarted projector
                # may take that long, and the agent decides anyway after it.
                timeout_s=180,
            )
            wait_until_projected(settings, projection)
            after = sorted((m.memory_id, m.content) for m in projection.list_memories("ann"))
        finally:
            worker.stop()
    finally:
        server.stop()
    assert len(server.received) == 1, "the LLM was asked again for a span it had answered"
    published = runs(memory_events(settings))
    assert len(published) >= 2  # delivered at least twice: once more after the restart
    assert all(run == published[0] for run in published[1:])
    # The projection holds what one delivery gives: the first reply's memories, nothing else.
    single = sorted((e["memory_id"], e["content"]) for e in published[0] if e["type"] == "memory_added")
    assert "Works at company number 1" in {content for _, content in single}
    assert after == single
