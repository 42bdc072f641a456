"""A sealed ciphertext opens only on the event it was sealed for, and only for its own user.

The ``encryption`` block of one sealed event is copied onto events that differ in user,
session, type and id (one at a time and all together), its key id relabelled, its field list
changed: none opens, neither through :func:`unseal` nor through the consumers' real path,
:func:`memstream.streams.agents.decoding.decode_opened`. Events sealed by the first scheme (bound to
their event id only) still open for their own user, never for another, and not at all once
``accept_legacy_seals`` is off. Real AES-GCM, a real key store in a temporary directory.
"""

from __future__ import annotations

import base64
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memstream.models.codec import EventLimits, InvalidEvent, decode_event, encode_event
from memstream.models.crypto import SealError, seal_bytes, unseal
from memstream.models.events.chat import MessageAdded, ScratchpadUpdated
from memstream.models.events.envelope import ContentEncryption, Event
from memstream.models.session import SessionState, dump_session, session_key
from memstream.models.settings import Settings
from memstream.models.topics import CHAT_TYPES
from memstream.streams.agents.decoding import decode_opened
from memstream.streams.agents.session_table import (
    SessionStore,
    open_session_value,
    seal_session_value,
)
from memstream.streams.keys.sealing import open_event, seal_event
from memstream.streams.keys.store import BatchKeys, FileKeyStore, keystore_from_settings

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
SECRET = "I live at 12 Harbour Lane"


@pytest.fixture
def keys(tmp_path: Path) -> FileKeyStore:
    store = FileKeyStore(tmp_path / "keys")
    for user in ("ann", "bob"):
        store.key_for(user, create=True)
    return store


def message(**overrides: Any) -> MessageAdded:
    fields: dict[str, Any] = {
        "event_id": "E",
        "user_id": "ann",
        "session_id": "S",
        "occurred_at": T0,
        "role": "user",
        "content": SECRET,
        "name": "Ann",
    }
    return MessageAdded(**(fields | overrides))


def sealed_message(keys: FileKeyStore) -> MessageAdded:
    found = seal_event(message(), keys)
    assert found is not None and found.encryption is not None
    return found


def consume(event: Event, keys: FileKeyStore, **options: Any) -> Any:
    """The session agent's path: bytes off the chat topic, keyed by the event's user."""
    return decode_opened(
        encode_event(event), event.user_id.encode(), CHAT_TYPES, EventLimits(), keys, **options
    )


def transplanted(source: MessageAdded, **differences: Any) -> Event:
    """An event that differs from ``source`` in ``differences`` (and ``type`` ``scratchpad``
    for another type), carrying ``source``'s encryption block and placeholders."""
    target = dict(differences)
    event_type = target.pop("type", "message_added")
    envelope = {
        name: target.get(name, getattr(source, name))
        for name in ("event_id", "user_id", "session_id", "occurred_at")
    }
    if event_type == "scratchpad_updated":
        return ScratchpadUpdated(content="", encryption=source.encryption, **envelope)
    return MessageAdded(
        role="user", content="", name=None, encryption=source.encryption, **envelope
    )


DIFFERENCES: list[dict[str, Any]] = [
    {"user_id": "bob"},
    {"session_id": "S2"},
    {"type": "scratchpad_updated"},  # its content field has the same name
    {"event_id": "E2"},
    {"user_id": "bob", "session_id": "S2"},
    {"user_id": "bob", "event_id": "E2"},
    {"session_id": "S2", "type": "scratchpad_updated", "event_id": "E2"},
    {"user_id": "bob", "session_id": "S2", "type": "scratchpad_updated", "event_id": "E2"},
]


def test_the_original_opens_on_both_paths(keys: FileKeyStore) -> None:
    sealed = sealed_message(keys)
    assert sealed.encryption is not None and sealed.encryption.scheme == "aes-256-gcm-v2"
    key = keys.key_by_id(sealed.encryption.key_id)
    assert key is not None
    assert unseal(sealed, key) == message()
    opened = consume(sealed, keys)
    assert opened is not None and opened.event == message()


@pytest.mark.parametrize("differences", DIFFERENCES, ids=lambda d: "+".join(sorted(d)))
def test_a_ciphertext_copied_onto_another_event_never_opens(
    keys: FileKeyStore, differences: dict[str, Any]
) -> None:
    sealed = sealed_message(keys)
    assert sealed.encryption is not None
    forged = transplanted(sealed, **differences)
    # With the very key it was sealed with: the associated data differs.
    ann_key = keys.key_by_id(sealed.encryption.key_id)
    assert ann_key is not None
    with pytest.raises(SealError):
        unseal(forged, ann_key)
    # And the consumers' path turns it into a dead letter, never into memories.
    with pytest.raises(InvalidEvent):
        consume(forged, keys)
    with pytest.raises(SealError):
        open_event(forged, keys)


def test_a_relabelled_key_id_never_opens(keys: FileKeyStore, tmp_path: Path) -> None:
    from memstream.streams.keys.store import key_belongs_to

    sealed = sealed_message(keys)
    assert sealed.encryption is not None
    ann_id = sealed.encryption.key_id
    ann_key = keys.key_by_id(ann_id)
    bob = keys.key_for("bob", create=False)
    assert ann_key is not None and bob is not None
    # The same key bytes under another of ann's key ids (a copied key file): the key id is
    # bound, so it does not open even though the key is right.
    other_id = ann_id[:25] + ("0" if ann_id[25] != "0" else "1") + ann_id[26:]
    assert key_belongs_to(other_id, "ann")
    copy = FileKeyStore(tmp_path / "copied")
    copy.directory.mkdir()
    (copy.directory / other_id).write_bytes(ann_key)
    relabelled = sealed.model_copy(
        update={"encryption": sealed.encryption.model_copy(update={"key_id": other_id})}
    )
    with pytest.raises(SealError):
        unseal(relabelled, ann_key)
    with pytest.raises(InvalidEvent):
        consume(relabelled, copy)
    # Relabelled to bob's key, on ann's event or on bob's: refused or does not open.
    to_bob = sealed.encryption.model_copy(update={"key_id": bob[0]})
    on_ann = sealed.model_copy(update={"encryption": to_bob})
    on_bob = transplanted(sealed, user_id="bob").model_copy(update={"encryption": to_bob})
    for forged in (on_ann, on_bob):
        with pytest.raises(InvalidEvent):
            consume(forged, keys)
        with pytest.raises(SealError):
            unseal(forged, bob[1])
    # Fewer fields named: bound too.
    fewer = sealed.encryption.model_copy(update={"fields": ("content",)})
    with pytest.raises(SealError):
        unseal(sealed.model_copy(update={"encryption": fewer}), ann_key)


def test_the_associated_data_is_unambiguous() -> None:
    from memstream.models.crypto import event_aad

    # Length prefixes: moving a character between neighbouring parts changes the bytes.
    a = message(user_id="ab", session_id="c")
    b = message(user_id="a", session_id="bc")
    assert event_aad(a, "k", ("content",)) != event_aad(b, "k", ("content",))
    assert event_aad(a, "k", ("content", "name")) != event_aad(a, "k", ("contentname",))
    assert event_aad(a, "k", ()).startswith(b"\x00\x00\x00\x1ememstream.event.aes-256-gcm-v2")


# --- the first scheme: bound to the event id alone ------------------------------------------


def legacy_sealed(event: MessageAdded, key: bytes, key_id: str, fields: tuple[str, ...]) -> Any:
    """``event`` sealed as memstream sealed before this version: AES-256-GCM over the JSON
    of ``fields``, associated data the event id, scheme ``aes-256-gcm`` (written here from
    the old code, not with memstream's own seal)."""
    plaintext = json.dumps(
        event.model_dump(mode="json", include=set(fields)), ensure_ascii=False, separators=(",", ":")
    ).encode()
    nonce = os.urandom(12)
    blob = nonce + AESGCM(key).encrypt(nonce, plaintext, event.event_id.encode())
    payload = event.model_dump(mode="json")
    payload.update({name: "" if name == "content" else None for name in fields})
    payload["encryption"] = {
        "scheme": "aes-256-gcm",
        "key_id": key_id,
        "fields": list(fields),
        "ciphertext": base64.b64encode(blob).decode(),
    }
    return decode_event(json.dumps(payload).encode())


def test_a_legacy_event_opens_for_its_own_user(keys: FileKeyStore) -> None:
    ann_id, ann_key = keys.key_for("ann", create=False)  # type: ignore[misc]
    # Sealed when only the content was a content field: the name stayed plain.
    old = legacy_sealed(message(), ann_key, ann_id, ("content",))
    assert old.encryption.scheme == "aes-256-gcm" and old.name == "Ann"
    assert unseal(old, ann_key) == message()
    opened = consume(old, keys)
    assert opened is not None and opened.event == message() and opened.key_id == ann_id
    # Also when both fields were sealed.
    both = legacy_sealed(message(), ann_key, ann_id, ("content", "name"))
    assert open_event(both, keys) == message()


def test_a_legacy_event_copied_to_another_user_is_refused(keys: FileKeyStore) -> None:
    ann_id, ann_key = keys.key_for("ann", create=False)  # type: ignore[misc]
    old = legacy_sealed(message(), ann_key, ann_id, ("content",))
    # Same event id, bob's user id: the old associated data cannot tell, the key store does.
    forged = decode_event(encode_event(old).replace(b'"user_id":"ann"', b'"user_id":"bob"'))
    assert forged.user_id == "bob" and forged.encryption == old.encryption
    assert unseal(forged, ann_key).user_id == "bob"  # why the ownership check is needed
    with pytest.raises(SealError, match="not a key of its user"):
        open_event(forged, keys)
    with pytest.raises(InvalidEvent, match="not a key of its user"):
        consume(forged, keys)


def test_legacy_events_are_refused_once_the_setting_is_off(
    keys: FileKeyStore, tmp_path: Path
) -> None:
    ann_id, ann_key = keys.key_for("ann", create=False)  # type: ignore[misc]
    old = legacy_sealed(message(), ann_key, ann_id, ("content",))
    with pytest.raises(SealError, match="legacy"):
        unseal(old, ann_key, accept_legacy=False)
    with pytest.raises(InvalidEvent, match="legacy"):
        consume(old, keys, accept_legacy=False)
    # From the settings, through the key store every process builds from them (the
    # projector, replays, the sessions fold via BatchKeys), with no argument at the call.
    settings = Settings(data_dir=tmp_path, accept_legacy_seals=False)
    strict = keystore_from_settings(settings)
    assert strict.directory == keys.directory
    for store in (strict, BatchKeys(strict)):
        with pytest.raises(InvalidEvent, match="legacy"):
            consume(old, store)  # type: ignore[arg-type]
    # New seals still open with the setting off.
    fresh = sealed_message(keys)
    opened = consume(fresh, strict)
    assert opened is not None and opened.event == message()
    assert keystore_from_settings(Settings(data_dir=tmp_path)).accept_legacy_seals


# --- sealed session values ------------------------------------------------------------------


def test_a_session_value_sealed_with_another_users_key_is_refused(keys: FileKeyStore) -> None:
    state = SessionState(
        user_id="bob", session_id="S", started_at=T0, last_event_at=T0, scratchpad=SECRET
    )
    bob_key = session_key("bob", "S")
    raw = seal_session_value(bob_key, state, keys)
    assert raw is not None and SECRET.encode() not in raw
    assert open_session_value(bob_key, raw, keys)[0] == state
    # Ann's key over bob's table key (the associated data matches): refused by ownership.
    ann_id, ann_key = keys.key_for("ann", create=False)  # type: ignore[misc]
    forged = seal_bytes(dump_session(state), ann_key, ann_id, bob_key.encode())
    with pytest.raises(SealError, match="not a key of its user"):
        open_session_value(bob_key, forged, keys)
    with pytest.raises(SealError):
        seal_session_value(bob_key, state, keys, ann_id)
    # Bob's value moved under ann's table key: bound to its table key, and not ann's key.
    with pytest.raises(SealError):
        open_session_value(session_key("ann", "S"), raw, keys)
    # In the session agent's store: read as no session, and its key never seals what follows.
    store = SessionStore(SimpleNamespace(data={bob_key: forged}), cache_size=10, keys=keys)
    assert store.get(bob_key) is None and store.key_id(bob_key) is None
    store.table.data[bob_key] = raw
    assert store.get(bob_key) == state and store.key_id(bob_key) is not None


def test_seal_event_refuses_a_key_of_another_user(keys: FileKeyStore) -> None:
    bob_id, _ = keys.key_for("bob", create=False)  # type: ignore[misc]
    with pytest.raises(SealError):
        seal_event(message(), keys, key_id=bob_id)


def test_the_encryption_block_names_a_known_scheme() -> None:
    with pytest.raises(ValueError):
        ContentEncryption(scheme="rot13", key_id="k", fields=())  # type: ignore[arg-type]
