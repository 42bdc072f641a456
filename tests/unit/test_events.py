"""The event schema: validation, JSON round trips, upcasting, JSON Schema export."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from fuzz import zoned_times
from hypothesis import given
from pydantic import TypeAdapter, ValidationError

from memstream.models.codec import InvalidEvent, decode_event, encode_event
from memstream.models.events.catalog import json_schemas
from memstream.models.events.chat import MessageAdded, SessionClosed, ToolCalled
from memstream.models.events.envelope import OUTSIDE_UTC, UtcInstant, utc_instant
from memstream.models.upcasting import Upcasters

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def message(**overrides: object) -> dict[str, object]:
    payload: dict[str, object] = {
        "event_id": "e-1",
        "type": "message_added",
        "user_id": "alice",
        "session_id": "s-1",
        "occurred_at": "2026-11-02T09:00:00Z",
        "role": "user",
        "content": "I prefer window seats",
    }
    payload.update(overrides)
    return payload


def test_a_valid_message_decodes_to_its_type() -> None:
    event = decode_event(json.dumps(message()).encode())
    assert isinstance(event, MessageAdded)
    assert event.content == "I prefer window seats"
    assert event.occurred_at == NOW


def test_round_trip_through_bytes_is_lossless() -> None:
    event = ToolCalled(
        event_id="t-1",
        user_id="bob",
        session_id="s",
        occurred_at=NOW,
        name="search_flights",
        arguments={"to": "LIS", "max_price": 300, "flex": True},
        result={"found": 3},
    )
    assert decode_event(encode_event(event)) == event


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (message(color="red"), "…: Extra inputs are not permitted"),
        (message(role="robot"), "role"),
        (message(occurred_at="2026-11-02T09:00:00"), "timezone"),
        (message(user_id=""), "user_id"),
        (message(type="no_such_event"), "does not match any of the expected tags"),
        ({k: v for k, v in message().items() if k != "event_id"}, "event_id: Field required"),
    ],
)
def test_invalid_payloads_are_rejected_with_a_reason(payload: dict, reason: str) -> None:
    with pytest.raises(InvalidEvent, match=reason):
        decode_event(json.dumps(payload))


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\xff\xfe", b"null"])
def test_bytes_that_are_not_an_event_object_are_rejected(raw: bytes) -> None:
    with pytest.raises(InvalidEvent):
        decode_event(raw)


def test_oversized_event_is_rejected_before_parsing() -> None:
    raw = json.dumps(message(content="x" * 5000)).encode()
    with pytest.raises(InvalidEvent, match="over the limit"):
        decode_event(raw, max_bytes=1024)


def test_events_are_frozen() -> None:
    event = SessionClosed(event_id="c", user_id="u", session_id="s", occurred_at=NOW)
    with pytest.raises(ValueError):
        event.reason = "idle"  # type: ignore[misc]


def test_upcasters_rewrite_old_payloads_before_validation() -> None:
    upcasters = Upcasters()

    # A hypothetical v0 of message_added called the text "text" and had no version field.
    @upcasters.register("message_added", 0)
    def upcast_v0_v1(payload: dict) -> dict:
        payload["content"] = payload.pop("text")
        payload["schema_version"] = 1
        return payload

    old = message(schema_version=0)
    old["text"] = old.pop("content")
    event = decode_event(json.dumps(old), upcasters=upcasters)
    assert isinstance(event, MessageAdded)
    assert event.content == "I prefer window seats"
    assert event.schema_version == 1


def test_a_reason_names_no_field_the_record_chose_and_the_detail_does() -> None:
    # The reason is kept in clear in a dead letter; a name the producer chose may be a
    # user's words, so it is only in the (sealed) detail.
    with pytest.raises(InvalidEvent) as raised:
        decode_event(json.dumps(message(**{"my secret plan": 1})).encode())
    assert "my secret plan" not in str(raised.value)
    assert raised.value.detail is not None and "my secret plan" in raised.value.detail


def test_an_upcaster_that_does_not_raise_the_version_is_an_error() -> None:
    upcasters = Upcasters()
    upcasters.register("message_added", 0)(lambda payload: payload)
    with pytest.raises(InvalidEvent, match="did not raise the version"):
        decode_event(json.dumps(message(schema_version=0)), upcasters=upcasters)


def test_a_version_newer_than_the_schema_is_rejected() -> None:
    with pytest.raises(InvalidEvent, match="schema_version"):
        decode_event(json.dumps(message(schema_version=2)))


def test_every_event_type_has_a_json_schema_that_forbids_unknown_fields() -> None:
    schemas = json_schemas()
    for name in ("session_started", "message_added", "tool_called", "task_set",
                 "task_progress", "scratchpad_updated", "entity_mentioned", "session_closed"):
        assert name in schemas
        assert schemas[name]["additionalProperties"] is False
        assert {"event_id", "user_id", "session_id", "occurred_at"} <= set(schemas[name]["required"])
    assert "encryption" in schemas["message_added"]["properties"]


@given(moment=zoned_times)
def test_a_time_a_caller_names_is_taken_only_if_it_exists_in_utc(moment: datetime) -> None:
    # What every interface's requests use for as_of, since, until: a time is either usable
    # in UTC (where every store keeps it), or refused in one line that says what to send.
    try:
        taken = TypeAdapter(UtcInstant).validate_python(moment.isoformat())
    except ValidationError as refused:
        (error,) = refused.errors()
        assert OUTSIDE_UTC in error["msg"] and "\n" not in error["msg"]
        with pytest.raises(ValueError, match="outside the years 1 to 9999 in UTC"):
            utc_instant(moment)
    else:
        assert taken == moment
        assert 1 <= taken.astimezone(UTC).year <= 9999
