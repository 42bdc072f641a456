"""The KeyStore port's contract, run against every implementation: the key directory, and the
in-memory store unit tests may use in its place (so it cannot drift from the real one).

A KMS-backed store would get its own subclass and the same tests.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstream.models.crypto import seal, unseal
from memstream.models.events.chat import MessageAdded
from memstream.streams.keys.store import FileKeyStore, KeyStore, key_belongs_to, key_prefix


class InMemoryKeyStore:
    """Keys in a dict: the fake of the port, for unit tests."""

    def __init__(self) -> None:
        self._keys: dict[str, bytes] = {}
        self._current: dict[str, str] = {}

    def key_for(self, user_id: str, *, create: bool) -> tuple[str, bytes] | None:
        key_id = self._current.get(user_id)
        if key_id is not None and key_id in self._keys:
            return key_id, self._keys[key_id]
        if not create:
            return None
        key_id = f"{key_prefix(user_id)}-{secrets.token_hex(4)}"
        self._keys[key_id] = os.urandom(32)
        self._current[user_id] = key_id
        return key_id, self._keys[key_id]

    def key_by_id(self, key_id: str) -> bytes | None:
        return self._keys.get(key_id)

    def destroy(self, user_id: str) -> int:
        doomed = [key_id for key_id in self._keys if key_belongs_to(key_id, user_id)]
        for key_id in doomed:
            del self._keys[key_id]
        self._current.pop(user_id, None)
        return len(doomed)


user_ids = st.text(min_size=1, max_size=40).filter(lambda text: "\x00" not in text)


class KeyStoreContract:
    """What every :class:`~memstream.streams.keys.store.KeyStore` must do."""

    @pytest.fixture
    def keys(self, tmp_path: Path) -> Iterator[KeyStore]:
        raise NotImplementedError

    def test_no_key_until_one_is_asked_for(self, keys: KeyStore) -> None:
        assert keys.key_for("ann", create=False) is None

    def test_a_created_key_is_the_users_current_key_and_named_for_them(
        self, keys: KeyStore
    ) -> None:
        created = keys.key_for("ann", create=True)
        assert created is not None
        key_id, key = created
        assert len(key) == 32 and key_belongs_to(key_id, "ann")
        assert not key_belongs_to(key_id, "bob")
        assert "ann" not in key_id
        assert keys.key_for("ann", create=False) == created
        assert keys.key_for("ann", create=True) == created
        assert keys.key_by_id(key_id) == key

    def test_users_have_their_own_keys(self, keys: KeyStore) -> None:
        ann, bob = keys.key_for("ann", create=True), keys.key_for("bob", create=True)
        assert ann is not None and bob is not None and ann != bob and ann[1] != bob[1]

    def test_destroy_removes_every_generation_and_only_that_users(self, keys: KeyStore) -> None:
        first = keys.key_for("ann", create=True)
        assert first is not None
        assert keys.destroy("ann") == 1
        second = keys.key_for("ann", create=True)  # after an erasure: a new generation
        assert second is not None and second[0] != first[0]
        bob = keys.key_for("bob", create=True)
        assert keys.destroy("ann") == 1
        assert keys.key_by_id(first[0]) is None and keys.key_by_id(second[0]) is None
        assert keys.key_for("ann", create=False) is None
        assert bob is not None and keys.key_for("bob", create=False) == bob
        assert keys.destroy("nobody") == 0

    def test_a_sealed_event_opens_with_its_key_and_never_after_destroy(
        self, keys: KeyStore
    ) -> None:
        created = keys.key_for("ann", create=True)
        assert created is not None
        event = MessageAdded(
            event_id="m1", user_id="ann", session_id="s1", role="user",
            content="my passport number is X123", occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        sealed = seal(event, created[1], created[0])
        assert sealed.encryption is not None
        key = keys.key_by_id(sealed.encryption.key_id)
        assert key is not None
        assert unseal(sealed, key) == event
        keys.destroy("ann")
        assert keys.key_by_id(sealed.encryption.key_id) is None

    # Each subclass runs this one method on its own store (hence "differing executors"); the
    # store is made fresh per example, so no example depends on another.
    @settings(max_examples=25, deadline=None,
              suppress_health_check=[HealthCheck.differing_executors])
    @given(user_ids)
    def test_any_user_id_gets_a_key_named_without_it(self, user_id: str) -> None:
        keys = self.fresh()
        created = keys.key_for(user_id, create=True)
        assert created is not None and key_belongs_to(created[0], user_id)
        assert keys.key_for(user_id, create=False) == created

    def fresh(self) -> KeyStore:
        raise NotImplementedError


class TestFileKeyStore(KeyStoreContract):
    @pytest.fixture
    def keys(self, tmp_path: Path) -> Iterator[KeyStore]:
        yield FileKeyStore(tmp_path / "keys")

    def fresh(self) -> KeyStore:
        return FileKeyStore(Path(tempfile.mkdtemp()) / "keys")


class TestInMemoryKeyStore(KeyStoreContract):
    @pytest.fixture
    def keys(self, tmp_path: Path) -> Iterator[KeyStore]:
        yield InMemoryKeyStore()

    def fresh(self) -> KeyStore:
        return InMemoryKeyStore()
