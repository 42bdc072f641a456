"""Consolidation through the LLM extractor: the real openai client, a scripted local server,
the real broker and LanceDB."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from chat import conversation
from harness import wait_for
from llm_server import Reply, ScriptedServer, completion
from sealed import topic_events

from memstream.models.events.memory import ExtractionFailure, ExtractionRecorded
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import PartitionedMemories
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.deadletters import DeadLetter
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.progress import group_caught_up
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.store import keystore_from_settings
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess

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
            projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
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
            # No third attempt: the span has used its two. A retry goes out from a timer
            # llm_retry_delay_s (0.5 s) after a failure, so give a third one that long three
            # times over, then wait until the workers have committed everything in the log:
            # a retry sent by then would have been extracted (and failed) already.
            second_failure = time.monotonic()
            topics = Topics.from_settings(settings)
            wait_for(
                lambda: time.monotonic() - second_failure > 3 * settings.llm_retry_delay_s
                and group_caught_up(settings, [topics.chat, topics.consolidation]),
                "the workers to commit every chat and consolidation record",
            )
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
    # The reply is the user's content: it is in the sealed extraction_failed events and the
    # dead letter's sealed detail; the plaintext reason only says where.
    assert len(letters) == 2 and all("raw reply in the extraction_failed" in letter.reason for letter in letters)
    assert not any("this is not JSON" in letter.reason for letter in letters)
    assert all(letter.sealed and letter.detail_b64 for letter in letters)
    keys = keystore_from_settings(settings)
    assert all("this is not JSON" in (letter.original_detail(keys) or "") for letter in letters)
    assert len(server.received) == 4  # 2 attempts per try, 2 tries
