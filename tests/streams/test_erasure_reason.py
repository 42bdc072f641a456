"""``user_erased`` is read after the user's key is destroyed, so its reason is a short code:
older free-text reasons upcast to ``redacted`` (an erasure always decodes), and ``memstream
erase --reason`` refuses anything else before it touches a key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memstream.models.codec import InvalidEvent, decode_event
from memstream.models.events.chat import UserErased
from memstream.streams.cli import main
from memstream.streams.keys.store import FileKeyStore

V1: dict[str, Any] = {
    "event_id": "erase-1",
    "type": "user_erased",
    "schema_version": 1,
    "user_id": "ann",
    "session_id": "-",
    "occurred_at": "2026-11-02T09:00:00Z",
    "erasure_id": "e1",
}


@pytest.mark.parametrize(
    ("reason", "read_as"),
    [
        ("she asked on the phone: 'delete me, I moved to Oslo'", "redacted"),
        ("requested", "requested"),
        ("gdpr.art17", "gdpr.art17"),
        ("", "redacted"),
        (None, "redacted"),
        (42, "redacted"),
        ("x" * 500, "redacted"),
    ],
)
def test_an_older_erasure_always_decodes_without_its_words(reason: Any, read_as: str) -> None:
    event = decode_event(json.dumps({**V1, "reason": reason}).encode())
    assert isinstance(event, UserErased)
    assert (event.schema_version, event.reason) == (2, read_as)


def test_an_older_erasure_without_a_reason_reads_as_requested() -> None:
    event = decode_event(json.dumps(V1).encode())
    assert isinstance(event, UserErased) and event.reason == "requested"


def test_a_current_erasure_takes_only_a_code() -> None:
    assert UserErased(**{**V1, "schema_version": 2}).reason == "requested"
    with pytest.raises(InvalidEvent, match="reason"):
        decode_event(json.dumps({**V1, "schema_version": 2, "reason": "Ann moved"}).encode())
    with pytest.raises(ValueError):
        UserErased(**{**V1, "schema_version": 2, "reason": "Ann moved to Oslo"})


def test_erase_refuses_a_free_text_reason_before_touching_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MEMSTREAM_BROKER", "127.0.0.1:1")  # nothing may be contacted
    keys = FileKeyStore(tmp_path / "keys")
    key_id, _ = keys.key_for("ann", create=True)
    assert main(["erase", "--user", "ann", "--reason", "Ann asked me on Monday"]) == 2
    error = capsys.readouterr().err
    assert "--reason must be a short code" in error and "requested" in error
    assert keys.key_by_id(key_id) is not None  # nothing was destroyed
