"""The file key store, and sealing in the session fold, the session store and dead letters."""

from __future__ import annotations

import multiprocessing
import stat
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from chat import conversation
from test_session_store import FakeTable

from memstream.models.codec import EventLimits, encode_event
from memstream.models.events.chat import MessageAdded, UserErased
from memstream.models.events.envelope import Event
from memstream.models.session import ClosedSession, SessionState, WindowLimits, session_key
from memstream.streams.agents.session_table import SessionStore, fold_batch
from memstream.streams.kafka.deadletters import DeadLetter, SealedDeadLetter
from memstream.streams.keys.sealing import open_event, seal_event
from memstream.streams.keys.store import FileKeyStore, key_prefix

SECRET = "Quokka-Harbour-5521"
NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def keys(tmp_path: Path) -> FileKeyStore:
    return FileKeyStore(tmp_path / "keys")


def test_a_key_is_created_once_and_named_without_the_user_id(keys: FileKeyStore) -> None:
    assert keys.key_for("ann@example.com", create=False) is None
    key_id, key = keys.key_for("ann@example.com", create=True) or ("", b"")
    assert len(key) == 32
    assert key_id.startswith(key_prefix("ann@example.com") + "-") and len(key_id) == 33
    assert keys.key_for("ann@example.com", create=True) == (key_id, key)
    assert keys.key_for("ann@example.com", create=False) == (key_id, key)
    assert keys.key_by_id(key_id) == key
    key_file = keys.directory / key_id
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert all("ann" not in path.name for path in keys.directory.iterdir())
    assert keys.key_for("bob", create=True) != (key_id, key)


def test_destroy_shreds_every_key_of_the_user_and_a_new_generation_follows(
    keys: FileKeyStore,
) -> None:
    first, _ = keys.key_for("ann", create=True) or ("", b"")
    bob, bob_key = keys.key_for("bob", create=True) or ("", b"")
    assert keys.destroy("ann") == 1
    assert keys.key_by_id(first) is None
    assert not (keys.directory / first).exists()
    assert keys.key_for("ann", create=False) is None
    second, _ = keys.key_for("ann", create=True) or ("", b"")
    assert second != first and second.startswith(key_prefix("ann"))
    assert keys.key_by_id(bob) == bob_key  # other users keep theirs
    assert keys.destroy("ann") == 1 and keys.destroy("ann") == 0
    assert keys.destroy("nobody") == 0


def test_ids_that_are_not_key_ids_never_reach_the_file_system(keys: FileKeyStore) -> None:
    keys.key_for("ann", create=True)
    assert keys.key_by_id("../keys") is None
    assert keys.key_by_id(f"{key_prefix('ann')}.current") is None


def test_a_pointer_left_by_a_cut_short_erasure_gives_way_to_a_new_key(keys: FileKeyStore) -> None:
    key_id, _ = keys.key_for("ann", create=True) or ("", b"")
    (keys.directory / key_id).unlink()  # the key went, the pointer stayed
    assert keys.key_for("ann", create=False) is None
    renewed, _ = keys.key_for("ann", create=True) or ("", b"")
    assert renewed != key_id and keys.key_by_id(renewed) is not None


def _create_key(directory: str, barrier: Any, results: Any) -> None:
    barrier.wait()
    found = FileKeyStore(Path(directory)).key_for("racer", create=True)
    results.put(found[0] if found else None)


def test_processes_racing_to_create_a_key_agree_on_one(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(8), context.Queue()
    racers = [
        context.Process(target=_create_key, args=(str(tmp_path / "keys"), barrier, results))
        for _ in range(8)
    ]
    for racer in racers:
        racer.start()
    ids = [results.get(timeout=30) for _ in racers]
    for racer in racers:
        racer.join(timeout=30)
    assert len(set(ids)) == 1 and ids[0] is not None
    keys = FileKeyStore(tmp_path / "keys")
    assert [p.name for p in keys.directory.glob(f"{key_prefix('racer')}-*")] == [ids[0]]


def records(events: list[Event], partition: int = 2, first: int = 0) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(
            value=encode_event(e), key=e.user_id.encode(), offset=first + i, partition=partition, topic="chat"
        )
        for i, e in enumerate(events)
    ]


def sealed(events: list[Event], keys: FileKeyStore) -> list[Event]:
    return [e for e in (seal_event(event, keys) for event in events) if e is not None]


def erasure(user: str) -> UserErased:
    return UserErased(event_id=f"erase-{user}", user_id=user, session_id="-", occurred_at=NOW, erasure_id="e1")


async def test_the_session_fold_opens_sealed_events_and_stores_sealed_sessions(
    keys: FileKeyStore,
) -> None:
    table = FakeTable()
    store = SessionStore(table, cache_size=10, keys=keys)
    events = sealed(conversation("ann", "a", [("user", f"I live in {SECRET}")], close=False), keys)
    assert SECRET.encode() not in b"".join(r.value for r in records(events))
    batch = fold_batch(store, records(events), WindowLimits(), EventLimits(), keys=keys)
    key = session_key("ann", "a")
    state = batch.writes[key][0]
    assert isinstance(state, SessionState) and state.messages[0].content == f"I live in {SECRET}"
    assert batch.key_ids[key] == events[1].encryption.key_id  # type: ignore[union-attr]
    await store.write(key, state, 2, batch.key_ids[key])
    stored = table.data[key]
    assert SECRET.encode() not in stored and all(SECRET.encode() not in (v or b"") for _, v, _ in table.sent)
    assert SessionStore(table, 0, keys).get(key) == state  # opened from the bytes
    assert store.key_id(key) == batch.key_ids[key]
    keys.destroy("ann")
    assert SessionStore(table, 0, keys).get(key) is None  # the key is gone: no session
    assert store.get(key) is None  # nor from the cache


async def test_events_of_an_erased_user_are_skipped_not_dead_lettered(keys: FileKeyStore) -> None:
    events = sealed(conversation("ann", "a", [("user", "hello")], close=False), keys)
    keys.destroy("ann")
    batch = fold_batch(SessionStore(FakeTable(), 10, keys), records(events), WindowLimits(), EventLimits(), keys=keys)
    # The start (its metadata is content) and the message: sealed, their key destroyed.
    assert batch.dead == [] and batch.erased == 2
    assert batch.writes == {}


async def test_user_erased_drops_every_session_of_the_user_and_nobody_elses(keys: FileKeyStore) -> None:
    table = FakeTable()
    store = SessionStore(table, cache_size=10, keys=keys)
    events = conversation("ann", "open", [("user", "one")], close=False)
    events += conversation("ann", "done", [("user", "two")])
    events += conversation("bob", "b", [("user", "three")], close=False)
    first = fold_batch(store, records(sealed(events, keys)), WindowLimits(), EventLimits(), keys=keys)
    for key, (value, partition) in first.writes.items():
        await store.write(key, value, partition, first.key_ids.get(key))
    assert isinstance(store.get(session_key("ann", "done")), ClosedSession)
    later = conversation("ann", "pending", [("user", "four")], close=False)
    batch = fold_batch(
        store,
        records(sealed(later, keys), first=100) + records([erasure("ann")], first=110),
        WindowLimits(),
        EventLimits(),
        keys=keys,
    )
    dropped = {key for key, (value, _) in batch.writes.items() if value is None}
    assert dropped == {session_key("ann", s) for s in ("open", "done", "pending")}
    for key, (value, partition) in batch.writes.items():
        await store.write(key, value, partition)
    assert store.session_keys() == [session_key("bob", "b")]
    assert [value for key, value, _ in table.sent[-3:]] == [None, None, None]


def test_a_derived_event_sealed_with_a_destroyed_key_is_dropped(keys: FileKeyStore) -> None:
    key_id, _ = keys.key_for("ann", create=True) or ("", b"")
    message = MessageAdded(
        event_id="m", user_id="ann", session_id="s", occurred_at=NOW, role="user", content=SECRET
    )
    assert open_event(seal_event(message, keys, key_id=key_id), keys) == message  # type: ignore[arg-type]
    keys.destroy("ann")
    assert seal_event(message, keys, key_id=key_id) is None
    renewed = seal_event(message, keys)  # no source key: the user's new generation
    assert renewed is not None and renewed.encryption is not None
    assert renewed.encryption.key_id != key_id


def test_dead_letters_of_a_user_with_a_key_are_sealed(keys: FileKeyStore) -> None:
    value = f'{{"content": "{SECRET}"'.encode()
    common: dict[str, Any] = {"agent": "sessions", "reason": "not JSON", "topic": "chat", "partition": 1, "offset": 7}
    plain = DeadLetter.of(key=b"ann", value=value, keys=keys, **common)
    assert plain.key_id is None and plain.original_value() == value  # ann has no key yet
    keys.key_for("ann", create=True)
    letter = DeadLetter.of(key=b"ann", value=value, keys=keys, **common)
    assert letter.sealed and SECRET.encode() not in letter.model_dump_json().encode()
    assert letter.original_value(keys) == value
    with pytest.raises(SealedDeadLetter, match="not given"):
        letter.original_value()
    keys.destroy("ann")
    with pytest.raises(SealedDeadLetter, match="erased"):
        letter.original_value(keys)
