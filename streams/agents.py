"""The agents' logic apart from Faust: checking events off a topic, running extraction."""

from __future__ import annotations

import time
from collections.abc import Sequence

from memstream.models.codec import InvalidEvent, decode_event
from memstream.models.events import (
    ConsolidationRequested,
    Event,
    ExtractionRecorded,
    MemoryAdded,
    derived_id,
)
from memstream.models.extraction import Extractor

#: Importance at or above which a memory goes straight to the long-term tier (seed 2).
LONG_TERM_IMPORTANCE = 0.8

CHAT_TYPES = (
    "session_started",
    "message_added",
    "tool_called",
    "task_set",
    "task_progress",
    "scratchpad_updated",
    "entity_mentioned",
    "session_closed",
)
CONSOLIDATION_TYPES = ("consolidation_requested",)
MEMORY_TYPES = ("extraction_recorded", "memory_added")


def decode_checked(
    raw: bytes | None, key: bytes | None, allowed: Sequence[str], max_bytes: int
) -> Event:
    """Decode an event and check it belongs on this topic and under this key.

    Raises
    ------
    InvalidEvent
        If the bytes are not a valid event, the type is wrong for the topic, or the message
        key is not the event's user id (keys decide partitions, so a wrong key breaks order).
    """
    if raw is None:
        raise InvalidEvent("empty message (tombstone) on an event topic")
    event = decode_event(raw, max_bytes=max_bytes)
    if event.type not in allowed:
        raise InvalidEvent(f"event type {event.type!r} does not belong on this topic")
    if key is not None and key != event.user_id.encode():
        raise InvalidEvent("message key is not the event's user_id")
    return event


def extract_memories(
    request: ConsolidationRequested, extractor: Extractor
) -> tuple[ExtractionRecorded, list[MemoryAdded]]:
    """Run ``extractor`` on a consolidation request; record its output and the memories.

    Ids derive from the request's id and the extractor, so a re-delivered request yields the
    same events and the projection stays idempotent.
    """
    started = time.perf_counter()
    extraction = extractor.extract(request)
    latency_ms = (time.perf_counter() - started) * 1000
    extraction_id = derived_id(request.event_id, "extraction", extractor.name, extractor.version)
    recorded = ExtractionRecorded(
        event_id=extraction_id,
        user_id=request.user_id,
        agent_id=request.agent_id,
        session_id=request.session_id,
        occurred_at=request.occurred_at,
        consolidation_event_id=request.event_id,
        extractor=extractor.name,
        extractor_version=extractor.version,
        model=extraction.model,
        prompt_version=extraction.prompt_version,
        raw_response=extraction.raw_response,
        usage=extraction.usage,
        latency_ms=round(latency_ms, 3),
        candidates=extraction.candidates,
    )
    memories = [
        MemoryAdded(
            event_id=derived_id(extraction_id, "memory", str(index)),
            user_id=request.user_id,
            agent_id=request.agent_id,
            session_id=request.session_id,
            occurred_at=request.occurred_at,
            memory_id=derived_id(extraction_id, "memory-id", str(index)),
            memory_type=candidate.memory_type,
            content=candidate.content,
            importance=candidate.importance,
            tier="long_term" if candidate.importance >= LONG_TERM_IMPORTANCE else "short_term",
            extraction_event_id=extraction_id,
            source_event_ids=candidate.source_event_ids,
            entities=candidate.entities,
        )
        for index, candidate in enumerate(extraction.candidates)
    ]
    return recorded, memories
