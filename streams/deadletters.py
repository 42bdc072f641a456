"""Dead letters: events an agent could not process, kept with their bytes and the reason.

The original bytes may hold user content, so when the record's key is a user id with a key
in the key store, they are sealed with that key (``key_id`` names it): erasing the user
makes the dead letter unreadable too. The reason, the agent and the source position stay
readable.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from pydantic import AwareDatetime

from memstream.models.crypto import open_bytes, seal_bytes
from memstream.models.events import Frozen
from memstream.streams.keys import KeyStore


class SealedDeadLetter(LookupError):
    """A dead letter's bytes are sealed and cannot be read: no key store was given, or the
    user's key is destroyed (the user was erased)."""


class DeadLetter(Frozen):
    """One event an agent gave up on. The original bytes are kept, base64-encoded (sealed
    with the user's key when ``key_id`` is set)."""

    agent: str
    reason: str
    source_topic: str
    source_partition: int
    source_offset: int
    key_b64: str | None
    value_b64: str
    dead_at: AwareDatetime
    key_id: str | None = None

    @classmethod
    def of(
        cls,
        *,
        agent: str,
        reason: str,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        keys: KeyStore | None = None,
    ) -> DeadLetter:
        """A dead letter for the message at ``topic``/``partition``/``offset``; its bytes
        sealed when ``key`` is a user id that has a key in ``keys``."""
        value = value or b""
        key_id = None
        found = _user_key(key, keys)
        if found is not None:
            key_id, secret = found
            value = seal_bytes(value, secret, key_id, _associated(topic, partition, offset))
        return cls(
            agent=agent,
            reason=reason[:2000],
            source_topic=topic,
            source_partition=partition,
            source_offset=offset,
            key_b64=None if key is None else base64.b64encode(key).decode(),
            value_b64=base64.b64encode(value).decode(),
            dead_at=datetime.now(UTC),
            key_id=key_id,
        )

    @property
    def sealed(self) -> bool:
        """Whether the original bytes are sealed with a user's key."""
        return self.key_id is not None

    def original_value(self, keys: KeyStore | None = None) -> bytes:
        """The bytes of the event as they were on the source topic.

        Raises
        ------
        SealedDeadLetter
            The bytes are sealed and ``keys`` is None or no longer holds the key.
        """
        stored = base64.b64decode(self.value_b64)
        if self.key_id is None:
            return stored
        secret = keys.key_by_id(self.key_id) if keys is not None else None
        if secret is None:
            raise SealedDeadLetter(
                f"dead letter of {self.source_topic}[{self.source_partition}]@"
                f"{self.source_offset} is sealed with key {self.key_id}, which "
                + ("is destroyed: the user was erased" if keys is not None else "was not given")
            )
        return open_bytes(
            stored,
            secret,
            _associated(self.source_topic, self.source_partition, self.source_offset),
        )


def _user_key(key: bytes | None, keys: KeyStore | None) -> tuple[str, bytes] | None:
    if key is None or keys is None:
        return None
    try:
        user_id = key.decode()
    except UnicodeDecodeError:
        return None
    if not user_id:
        return None
    return keys.key_for(user_id, create=False)


def _associated(topic: str, partition: int, offset: int) -> bytes:
    return f"deadletter\x1f{topic}\x1f{partition}\x1f{offset}".encode()
