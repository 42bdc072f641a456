"""A Kafka record as a row of an archive file: its broker timestamp and day, the columns
parsed from its value when it is an event, and the Arrow table of a run of records."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pydantic_core
from aiokafka import ConsumerRecord

from memstream.projections.archive_format import SCHEMA

_EPOCH_DAY = "1970-01-01"
_STRING_FIELDS = ("event_id", "type", "user_id", "session_id", "agent_id")
#: The last millisecond of year 9999: later timestamps fit neither Python's datetime nor
#: DuckDB's microsecond timestamps (one such value made every analytics query fail).
_LAST_MS = 253_402_300_799_999


def _timestamp_ms(record: ConsumerRecord) -> int | None:
    """The broker timestamp, None when the record has none (Kafka's -1) or one only a
    producer could have set, past year 9999 (such a record is archived without it)."""
    timestamp = record.timestamp
    if timestamp is None or not 0 <= timestamp <= _LAST_MS:
        return None
    return int(timestamp)


def _day(record: ConsumerRecord) -> str:
    timestamp = _timestamp_ms(record)
    if timestamp is None:
        return _EPOCH_DAY
    return datetime.fromtimestamp(timestamp / 1000, UTC).date().isoformat()


def _text(value: Any) -> str | None:
    """``value`` if it is a string Parquet can store (JSON allows lone surrogates; UTF-8 not)."""
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def _event_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
        # Year 1 at +01:00 has no UTC value: the conversion overflows.
        return parsed.astimezone(UTC) if parsed.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None


def _event_fields(value: bytes | None, max_bytes: int) -> dict[str, Any]:
    """The envelope fields of ``value`` for the query columns; empty when it is not an event.

    Lenient on purpose: an event is any JSON object with a string ``event_id`` and ``type``,
    and each other field is kept when it has the right shape. Full validation is the
    agents' job; the archive must take every record as it is, so nothing a record holds
    can make this raise (the parser bounds depth and number size; anything else that goes
    wrong leaves the columns null).
    """
    if value is None or len(value) > max_bytes:
        return {}
    try:
        return _parsed_fields(value)
    except Exception:  # noqa: BLE001 - a hostile record: archived, columns null
        return {}


def _parsed_fields(value: bytes) -> dict[str, Any]:
    try:
        data = pydantic_core.from_json(value)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    fields: dict[str, Any] = {name: _text(data.get(name)) for name in _STRING_FIELDS}
    if fields["event_id"] is None or fields["type"] is None:
        return {}
    fields["occurred_at"] = _event_time(data.get("occurred_at"))
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and 0 <= version < 2**31:
        fields["schema_version"] = version
    return fields


def _table(records: Sequence[ConsumerRecord], max_event_bytes: int) -> pa.Table:
    parsed = [_event_fields(record.value, max_event_bytes) for record in records]
    columns: dict[str, list[Any]] = {
        "topic": [record.topic for record in records],
        "partition": [record.partition for record in records],
        "offset": [record.offset for record in records],
        "timestamp": [_timestamp_ms(record) for record in records],
        "key": [record.key for record in records],
        "value": [record.value for record in records],
    }
    for name in (*_STRING_FIELDS, "occurred_at", "schema_version"):
        columns[name] = [fields.get(name) for fields in parsed]
    columns["headers"] = [_headers(record) for record in records]
    return pa.Table.from_pydict(columns, schema=SCHEMA)


def _headers(record: ConsumerRecord) -> list[dict[str, Any]]:
    """A record's headers as the archive stores them; a header key Parquet cannot hold as
    text (not UTF-8) is kept with its undecodable bytes replaced, never a failed write."""
    kept = []
    for key, value in record.headers or ():
        text = key if isinstance(key, str) else bytes(key).decode("utf-8", "replace")
        if _text(text) is None:
            text = text.encode("utf-8", "replace").decode("utf-8")
        kept.append({"key": text, "value": None if value is None else bytes(value)})
    return kept
