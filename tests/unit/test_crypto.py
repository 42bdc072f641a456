"""Sealing event content with a per-user key (AES-256-GCM) and opening it again."""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime
from typing import Any

import pytest

from memstream.models.codec import decode_event, encode_event
from memstream.models.crypto import (
    ENCRYPTED,
    SCHEME,
    SealError,
    open_bytes,
    seal,
    seal_bytes,
    sealed_key_id,
    unseal,
)
from memstream.models.events.chat import (
    EntityMentioned,
    MessageAdded,
    ScratchpadUpdated,
    SessionClosed,
    SessionStarted,
    TaskProgress,
    TaskSet,
    ToolCalled,
    UserErased,
)
from memstream.models.events.consolidation import (
    ConsolidationRequested,
    TaskChange,
    ToolUse,
    TranscriptMessage,
)
from memstream.models.events.envelope import Event
from memstream.models.events.memory import (
    Claim,
    ExtractionFailure,
    ExtractionRecorded,
    MemoriesRetrieved,
    MemoryAdded,
    MemoryCandidate,
    MemoryDeleted,
    MemoryExpired,
    MemoryForgotten,
    MemoryPromoted,
    MemoryReinforced,
    MemorySuperseded,
    RetrievedMemory,
    TokenUsage,
)
from memstream.models.patterns import Signal, SpanObservation
from memstream.models.vectors import pack_vector

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
SECRET = "Zanzibar-7731"
ENVELOPE: dict[str, Any] = {"user_id": "ann", "session_id": "trip", "occurred_at": T0}


def transcript() -> tuple[TranscriptMessage, ...]:
    return (
        TranscriptMessage(
            event_id="m1", role="user", content=f"I moved to {SECRET}", name=SECRET, occurred_at=T0
        ),
        TranscriptMessage(event_id="m2", role="assistant", content="Nice!", occurred_at=T0),
    )


#: One event of every type that has content fields, each holding SECRET in all of them.
EXAMPLES: list[Event] = [
    SessionStarted(event_id="e-start", metadata={"topic": SECRET, SECRET: "key"}, **ENVELOPE),
    MessageAdded(event_id="e-msg", role="user", content=f"I live in {SECRET}", name=SECRET, **ENVELOPE),
    ToolCalled(
        event_id="e-tool",
        name=f"lookup-{SECRET}",
        arguments={"city": SECRET, "nested": [1, {"x": SECRET}]},
        result={"found": SECRET},
        **ENVELOPE,
    ),
    TaskSet(event_id="e-task", task=f"move to {SECRET}", project=SECRET, **ENVELOPE),
    EntityMentioned(event_id="e-entity", name=SECRET, kind=f"home of {SECRET}", **ENVELOPE),
    TaskProgress(event_id="e-progress", progress=f"flat in {SECRET} found", percent=50, **ENVELOPE),
    ScratchpadUpdated(event_id="e-pad", content=f"note: {SECRET}", **ENVELOPE),
    ConsolidationRequested(
        event_id="e-span", reason="session_closed", messages=transcript(), session_started_at=T0,
        tools=(ToolUse(event_id="t1", name=SECRET),),
        task_changes=(
            TaskChange(event_id="e-task", task=f"move to {SECRET}", project=SECRET, occurred_at=T0),
        ),
        **ENVELOPE,
    ),
    ExtractionRecorded(
        event_id="e-rec",
        consolidation_event_id="e-span",
        extractor="offline",
        extractor_version="1",
        raw_response=f'{{"facts": ["{SECRET}"]}}',
        usage=TokenUsage(prompt_tokens=3, completion_tokens=2),
        candidates=(
            MemoryCandidate(
                memory_type="fact",
                content=f"User lives in {SECRET}",
                importance=0.9,
                source_event_ids=("m1",),
                entities=(SECRET,),
            ),
        ),
        observed=SpanObservation(
            session_id="s1", started_at=T0,
            signals=(Signal(kind="request", value=SECRET.casefold(), event_id="m1"),),
        ),
        **ENVELOPE,
    ),
    ExtractionFailure(
        event_id="e-fail",
        consolidation_event_id="e-span",
        extractor="llm",
        extractor_version="2",
        reason=f"not JSON: sorry, {SECRET}",
        raw_response=f"sorry, {SECRET}",
        attempts=2,
        **ENVELOPE,
    ),
    MemoryAdded(
        event_id="e-mem",
        extractor="offline/1",
        memory_id="mem-1",
        memory_type="fact",
        content=f"User lives in {SECRET}",
        importance=0.9,
        extraction_event_id="e-rec",
        source_event_ids=("m1",),
        entities=(SECRET,),
        context=f"Monday 5 January 2026\nUser: I live in {SECRET}",
        vector=pack_vector([0.25, -0.5, 1.0]),
        embedding_model="test-model",
        claim=Claim(
            subject="User", attribute="home", value=SECRET,
            valid_from=datetime(2026, 1, 5, tzinfo=UTC),
        ),
        **ENVELOPE,
    ),
    MemorySuperseded(
        event_id="e-sup",
        memory_id="mem-1",
        superseded_by="mem-2",
        reason=f"same slot: 'User lives in {SECRET}'",
        similarity=0.9,
        **ENVELOPE,
    ),
    MemoryDeleted(event_id="e-del", memory_id="mem-1", reason=f"wrong, not {SECRET}", **ENVELOPE),
    MemoryPromoted(event_id="e-pro", memory_id="mem-1", reason=f"{SECRET} used", **ENVELOPE),
    MemoryExpired(event_id="e-exp", memory_id="mem-1", reason=f"{SECRET} unused", **ENVELOPE),
    MemoryForgotten(
        event_id="e-forget",
        memory_id="mem-1",
        policy="decay",
        score=0.05,
        threshold=0.1,
        reason=f"{SECRET} decayed",
        **ENVELOPE,
    ),
    MemoriesRetrieved(
        event_id="e-access",
        query=f"where is {SECRET}?",
        memories=(RetrievedMemory(memory_id="mem-1", score=0.5),),
        **ENVELOPE,
    ),
]


def _event_types(base: type[Event] = Event) -> set[type[Event]]:
    found: set[type[Event]] = set()
    for sub in base.__subclasses__():
        found |= {sub} | _event_types(sub)
    return found


def test_the_examples_cover_every_event_type_with_content() -> None:
    # Only the schema's own classes: other tests define subclasses of their own.
    with_content = {
        cls
        for cls in _event_types()
        if cls.content_fields and cls.__module__.startswith("memstream.models.events.")
    }
    assert with_content == {type(event) for event in EXAMPLES}


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: e.type)
def test_sealed_events_open_to_the_original(event: Event) -> None:
    sealed = seal(event, KEY, "key-1")
    assert sealed.encryption is not None
    assert sealed.encryption.scheme == SCHEME == "aes-256-gcm-v2"
    assert sealed.encryption.key_id == "key-1"
    assert sealed.encryption.fields == type(event).content_fields
    assert sealed != event
    assert unseal(sealed, KEY) == event
    # Through the wire format too: what a consumer reads opens to what the producer sealed.
    assert unseal(decode_event(encode_event(sealed)), KEY) == event
    assert unseal(sealed, KEY).encryption is None


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: e.type)
def test_placeholders_still_validate_and_the_envelope_stays_readable(event: Event) -> None:
    sealed = seal(event, KEY, "key-1")
    assert type(sealed).model_validate(sealed.model_dump()) == sealed
    assert decode_event(encode_event(sealed)) == sealed
    for name in ("event_id", "type", "user_id", "session_id", "occurred_at"):
        assert getattr(sealed, name) == getattr(event, name)
    for name in type(event).content_fields:
        assert getattr(sealed, name) != getattr(event, name)


def test_placeholders_follow_the_field_types() -> None:
    by_type = {event.type: seal(event, KEY, "k") for event in EXAMPLES}
    assert by_type["message_added"].content == ""  # type: ignore[attr-defined]
    assert by_type["memory_added"].content == ENCRYPTED  # type: ignore[attr-defined]
    assert by_type["memory_added"].entities == ()  # type: ignore[attr-defined]
    assert by_type["entity_mentioned"].name == ENCRYPTED  # type: ignore[attr-defined]
    assert by_type["entity_mentioned"].kind is None  # type: ignore[attr-defined]
    assert by_type["message_added"].name is None  # type: ignore[attr-defined]
    assert by_type["tool_called"].name == ENCRYPTED  # type: ignore[attr-defined]
    assert by_type["session_started"].metadata == {}  # type: ignore[attr-defined]
    assert by_type["memory_superseded"].reason == ""  # type: ignore[attr-defined]
    tool = by_type["tool_called"]
    assert (tool.arguments, tool.result) == ({}, None)  # type: ignore[attr-defined]
    span = by_type["consolidation_requested"]
    assert isinstance(span, ConsolidationRequested)
    assert [m.event_id for m in span.messages] == ["m1", "m2"]
    assert {m.content for m in span.messages} == {ENCRYPTED}
    assert {m.name for m in span.messages} == {None}  # a speaker's name is content too
    assert span.task_changes == ()  # a task and its project are the user's words
    assert by_type["task_set"].project is None  # type: ignore[attr-defined]
    recorded = by_type["extraction_recorded"]
    assert recorded.candidates == () and recorded.raw_response == ""  # type: ignore[attr-defined]
    assert by_type["memories_retrieved"].query == ""  # type: ignore[attr-defined]


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: e.type)
def test_the_sealed_bytes_hold_no_plaintext(event: Event) -> None:
    sealed = seal(event, KEY, "key-1")
    assert SECRET.encode() in encode_event(event)
    assert SECRET.encode() not in encode_event(sealed)
    assert sealed.encryption is not None
    assert SECRET.encode() not in base64.b64decode(sealed.encryption.ciphertext)


def test_each_seal_uses_a_fresh_nonce() -> None:
    first, second = (seal(EXAMPLES[0], KEY, "k") for _ in range(2))
    assert first.encryption is not None and second.encryption is not None
    assert first.encryption.ciphertext != second.encryption.ciphertext


@pytest.mark.parametrize("event", EXAMPLES[:3], ids=lambda e: e.type)
def test_a_wrong_key_does_not_open(event: Event) -> None:
    with pytest.raises(SealError, match="wrong key"):
        unseal(seal(event, KEY, "k"), OTHER_KEY)


def test_a_ciphertext_moved_to_another_event_id_does_not_open() -> None:
    sealed = seal(EXAMPLES[0], KEY, "k")
    with pytest.raises(SealError):
        unseal(sealed.model_copy(update={"event_id": "someone-else"}), KEY)


def test_altered_ciphertext_or_fields_do_not_open() -> None:
    sealed = seal(EXAMPLES[1], KEY, "k")
    assert sealed.encryption is not None
    blob = bytearray(base64.b64decode(sealed.encryption.ciphertext))
    blob[-1] ^= 1
    flipped = sealed.encryption.model_copy(update={"ciphertext": base64.b64encode(blob).decode()})
    with pytest.raises(SealError):
        unseal(sealed.model_copy(update={"encryption": flipped}), KEY)
    fewer = sealed.encryption.model_copy(update={"fields": ("arguments",)})
    with pytest.raises(SealError):
        unseal(sealed.model_copy(update={"encryption": fewer}), KEY)


def test_events_without_content_and_sealed_events_are_left_as_they_are() -> None:
    plain: list[Event] = [
        SessionClosed(event_id="c", **ENVELOPE),
        MemoryReinforced(
            event_id="r", memory_id="mem-1", extraction_event_id="x", similarity=0.95, **ENVELOPE
        ),
        UserErased(event_id="x", erasure_id="e1", **{**ENVELOPE, "session_id": "-"}),
    ]
    for event in plain:
        assert seal(event, KEY, "k") is event
        assert unseal(event, KEY) is event
    sealed = seal(EXAMPLES[0], KEY, "k")
    assert seal(sealed, OTHER_KEY, "other") is sealed


def test_keys_must_be_256_bits() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        seal(EXAMPLES[0], b"short", "k")


def test_opaque_values_seal_with_their_key_id_in_the_clear() -> None:
    data = f"session window: {SECRET}".encode()
    blob = seal_bytes(data, KEY, "k-7", b"ann\x1ftrip")
    assert SECRET.encode() not in blob
    assert sealed_key_id(blob) == "k-7"
    assert sealed_key_id(b'{"status":"closed"}') is None
    assert open_bytes(blob, KEY, b"ann\x1ftrip") == data
    with pytest.raises(SealError):
        open_bytes(blob, OTHER_KEY, b"ann\x1ftrip")
    with pytest.raises(SealError):
        open_bytes(blob, KEY, b"bob\x1ftrip")  # bound to its table key
    with pytest.raises(SealError):
        open_bytes(os.urandom(40), KEY, b"")
