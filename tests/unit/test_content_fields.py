"""Every field that can hold free text is sealed, by construction: an event class with an
unsealed text field does not define. And every field left plain is a decision written here."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args

import pytest
from pydantic import AwareDatetime, JsonValue

from memstream.models.events.catalog import AnyEvent
from memstream.models.events.consolidation import TranscriptMessage
from memstream.models.events.envelope import Code, Event, Identifier, Text
from memstream.models.events.memory import RetrievedMemory, TokenUsage

ENVELOPE = {
    "event_id", "type", "schema_version", "user_id", "agent_id", "session_id", "occurred_at",
    "encryption",
}
#: What each event type keeps plain besides the envelope. A change here is a decision about
#: what the log shows without the user's key: make it deliberately (see PLAIN_TEXT_FIELDS).
PLAIN: dict[str, set[str]] = {
    "session_started": set(),
    "message_added": {"role"},
    "tool_called": set(),
    "task_set": set(),
    "task_progress": {"percent"},
    "scratchpad_updated": set(),
    "entity_mentioned": set(),
    "session_closed": {"reason", "last_event_id"},  # reason: explicit, idle or max_age
    "user_erased": {"erasure_id", "reason"},  # reason: a Code, read after the key is gone
    "consolidation_requested": {"reason", "chunk", "attempt", "session_started_at"},
    "extraction_recorded": {
        "consolidation_event_id", "extractor", "extractor_version", "model", "prompt_version",
        "usage", "latency_ms",
    },
    "extraction_failed": {
        "consolidation_event_id", "extractor", "extractor_version", "model", "prompt_version",
        "attempts", "usage", "latency_ms", "retry_scheduled",
    },
    "memory_added": {
        "extractor", "memory_id", "memory_type", "importance", "tier", "extraction_event_id",
        "source_event_ids", "embedding_model", "stated_in", "states", "valid_until",
    },
    "memory_reinforced": {
        "memory_id", "extraction_event_id", "source_event_ids", "similarity", "stated_in",
    },
    # change: updated or retracted; decided_by: rules or llm; valid_until: a time.
    "memory_superseded": {
        "memory_id", "superseded_by", "similarity", "change", "decided_by", "valid_until",
    },
    # ids of memories and a time: which claim ended, what replaced it, from when.
    "memory_outdated": {"memory_id", "claim_memory_id", "superseded_by", "valid_until"},
    "memory_deleted": {"memory_id"},
    "memory_promoted": {"memory_id"},
    "memory_expired": {"memory_id"},
    "memory_forgotten": {"memory_id", "policy", "score", "threshold"},
    "memories_retrieved": {"memories"},  # ids and scores only (RetrievedMemory)
}


def test_every_plain_field_of_every_event_type_is_a_decision_written_here() -> None:
    found = {
        cls.model_fields["type"].default: set(cls.model_fields) - set(cls.content_fields) - ENVELOPE
        for cls in get_args(get_args(AnyEvent)[0])
    }
    assert found == PLAIN


@pytest.mark.parametrize(
    "annotation",
    [
        str,
        Text,
        Identifier,
        Identifier | None,
        tuple[str, ...],
        dict[str, int],  # the keys are text
        dict[str, JsonValue],
        JsonValue,
        Any,
        tuple[TranscriptMessage, ...],  # a model holding text
        list[Identifier],
    ],
    ids=repr,
)
def test_a_class_with_an_unsealed_free_text_field_does_not_define(annotation: Any) -> None:
    with pytest.raises(TypeError, match=r"Leaky\.note can hold free text but is not sealed"):

        class Leaky(Event):
            content_fields: ClassVar[tuple[str, ...]] = ()
            type: Literal["leaky"] = "leaky"
            note: annotation = None  # type: ignore[valid-type]


def test_the_same_field_sealed_defines_and_seals() -> None:
    from memstream.models.crypto import seal, unseal

    class Noted(Event):
        content_fields: ClassVar[tuple[str, ...]] = ("note",)
        type: Literal["noted"] = "noted"
        note: Text = ""

    event = Noted(
        event_id="n", user_id="ann", session_id="s", occurred_at="2026-11-02T09:00:00Z",
        note="I live in Oslo",
    )
    key = bytes(range(32))
    sealed = seal(event, key, "k")
    assert sealed.note == "" and b"Oslo" not in sealed.model_dump_json().encode()
    assert unseal(sealed, key) == event


@pytest.mark.parametrize(
    "annotation",
    [int, float | None, bool, AwareDatetime, Literal["a", "b"], Code, TokenUsage | None,
     tuple[RetrievedMemory, ...], tuple[Code, ...]],
    ids=repr,
)
def test_fields_that_cannot_hold_text_stay_plain_without_a_decision(annotation: Any) -> None:
    class Counted(Event):
        type: Literal["counted"] = "counted"
        value: annotation = None  # type: ignore[valid-type]

    assert Counted.content_fields == ()


def test_content_fields_must_name_fields_outside_the_envelope() -> None:
    with pytest.raises(TypeError, match="names no field"):

        class Missing(Event):
            content_fields: ClassVar[tuple[str, ...]] = ("nothing",)
            type: Literal["missing"] = "missing"

    with pytest.raises(TypeError, match="envelope"):

        class Routed(Event):
            content_fields: ClassVar[tuple[str, ...]] = ("user_id",)
            type: Literal["routed"] = "routed"


def test_a_nested_model_gaining_text_makes_its_field_content() -> None:
    from memstream.models.events.envelope import Frozen

    class Hit(Frozen):
        memory_id: Identifier
        snippet: str

    with pytest.raises(TypeError, match=r"Found\.hits can hold free text"):

        class Found(Event):
            type: Literal["found"] = "found"
            hits: tuple[Hit, ...] = ()
