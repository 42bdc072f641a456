"""Dead letters: records an agent could not process, kept with their bytes and the reason.

The original bytes may hold user content, so when the record's key is a user id with a key
in the key store, they are sealed with that key (``key_id`` names it): erasing the user
makes the dead letter unreadable too. The reason, the agent and the source position stay
readable, so the reason never quotes the record: what an exception said about it (which
may quote the user's words) is ``detail``, sealed like the bytes.

A record too large to dead-letter whole (the dead-letter record itself must fit the
broker's record size) is kept as a reference: its size, its sha256 and its first bytes,
with the source topic, partition and offset to find the rest. Nothing is dropped silently.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import AwareDatetime

from memstream.models.crypto import open_bytes, seal_bytes
from memstream.models.events.envelope import Frozen
from memstream.streams.keys.store import KeyStore, key_belongs_to, key_prefix
from memstream.streams.observability.metrics import DEAD_LETTERS, Children, reason_class

log = logging.getLogger(__name__)

#: The largest dead-letter record sent: below the 1 MiB default record size of Kafka's
#: brokers and producers, so a letter is accepted wherever the topics were.
MAX_LETTER_BYTES = 900_000
#: What a reference keeps of a record too large to dead-letter whole.
PREFIX_BYTES = 4096
#: A record key longer than this is kept as a prefix too (user ids are at most 256).
MAX_KEY_BYTES = 1024
#: Characters of a reason or detail kept.
MAX_REASON_CHARS = 2000


class SealedDeadLetter(LookupError):
    """A dead letter's bytes are sealed and cannot be read: no key store was given, or the
    user's key is destroyed (the user was erased)."""


class TruncatedDeadLetter(LookupError):
    """A dead letter keeps only a reference to its record (the record was too large): its
    first bytes, size and sha256; the record itself is at its source position."""


class DeadLetter(Frozen):
    """One record an agent gave up on. The original bytes are kept, base64-encoded (sealed
    with the user's key when ``key_id`` is set); only their first bytes when ``truncated``."""

    agent: str
    reason: str
    source_topic: str
    source_partition: int
    source_offset: int
    key_b64: str | None
    value_b64: str
    dead_at: AwareDatetime
    key_id: str | None = None
    #: The original value's size and sha256 (so a reference can be checked against the
    #: record at its source position); None in letters written before they were recorded.
    value_size: int | None = None
    value_sha256: str | None = None
    #: Only the first :data:`PREFIX_BYTES` of the value (and of an over-long key) are kept.
    truncated: bool = False
    #: What the failure said about the record (an exception's message), base64; sealed
    #: like the value, since it may quote the record.
    detail_b64: str | None = None

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
        detail: str | None = None,
        max_bytes: int = MAX_LETTER_BYTES,
        prefix_bytes: int = PREFIX_BYTES,
    ) -> DeadLetter:
        """A dead letter for the record at ``topic``/``partition``/``offset``; its bytes
        (and ``detail``) sealed when ``key`` is a user id that has a key in ``keys``; a
        reference (the first ``prefix_bytes``, the size, the sha256) when the whole letter
        would pass ``max_bytes``.

        Examples
        --------
        >>> letter = DeadLetter.of(agent="sessions", reason="not JSON", topic="t",
        ...                        partition=0, offset=7, key=b"ann", value=b"x" * 2_000_000)
        >>> letter.truncated, letter.value_size, len(letter.original_prefix())
        (True, 2000000, 4096)
        """
        value = value or b""
        found = _user_key(key, keys)
        full = cls._build(agent, reason, topic, partition, offset, key, value, found, detail)
        if len(full.model_dump_json()) <= max_bytes:
            return full
        prefix_key = key if key is None or len(key) <= MAX_KEY_BYTES else key[:MAX_KEY_BYTES]
        return cls._build(
            agent,
            reason,
            topic,
            partition,
            offset,
            prefix_key,
            value[:prefix_bytes],
            found,
            detail,
            whole=value,
        )

    @classmethod
    def _build(
        cls,
        agent: str,
        reason: str,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        kept: bytes,
        found: tuple[str, bytes] | None,
        detail: str | None,
        whole: bytes | None = None,
    ) -> DeadLetter:
        original = kept if whole is None else whole
        detail_bytes = None if detail is None else detail[:MAX_REASON_CHARS].encode("utf-8", "replace")
        key_id = None
        if found is not None:
            key_id, secret = found
            kept = seal_bytes(kept, secret, key_id, _associated(topic, partition, offset))
            if detail_bytes is not None:
                detail_bytes = seal_bytes(
                    detail_bytes, secret, key_id, _associated(topic, partition, offset, "detail")
                )
        return cls(
            agent=agent,
            reason=reason[:MAX_REASON_CHARS],
            source_topic=topic,
            source_partition=partition,
            source_offset=offset,
            key_b64=None if key is None else base64.b64encode(key).decode(),
            value_b64=base64.b64encode(kept).decode(),
            dead_at=datetime.now(UTC),
            key_id=key_id,
            value_size=len(original),
            value_sha256=hashlib.sha256(original).hexdigest(),
            truncated=whole is not None,
            detail_b64=None if detail_bytes is None else base64.b64encode(detail_bytes).decode(),
        )

    @property
    def sealed(self) -> bool:
        """Whether the original bytes are sealed with a user's key."""
        return self.key_id is not None

    def original_prefix(self, keys: KeyStore | None = None) -> bytes:
        """The bytes kept of the record: all of them, or the first ones of a reference.

        Raises
        ------
        SealedDeadLetter
            The bytes are sealed and ``keys`` is None or no longer holds the key.
        """
        return self._open(self.value_b64, keys)

    def original_value(self, keys: KeyStore | None = None) -> bytes:
        """The bytes of the record as they were on the source topic.

        Raises
        ------
        SealedDeadLetter
            The bytes are sealed and ``keys`` is None or no longer holds the key.
        TruncatedDeadLetter
            The letter is a reference: only the first bytes were kept.
        """
        if self.truncated:
            raise TruncatedDeadLetter(
                f"dead letter of {self.position} keeps only the first {PREFIX_BYTES} of "
                f"{self.value_size} bytes (sha256 {self.value_sha256}); the record is at its "
                "source position while the topic keeps it"
            )
        return self.original_prefix(keys)

    def original_detail(self, keys: KeyStore | None = None) -> str | None:
        """What the failure said about the record, opened if sealed; None if nothing."""
        if self.detail_b64 is None:
            return None
        return self._open(self.detail_b64, keys, "detail").decode("utf-8", "replace")

    @property
    def position(self) -> str:
        """``topic[partition]@offset`` of the record."""
        return f"{self.source_topic}[{self.source_partition}]@{self.source_offset}"

    def _open(self, b64: str, keys: KeyStore | None, part: str | None = None) -> bytes:
        stored = base64.b64decode(b64)
        if self.key_id is None:
            return stored
        owner = None if self.key_b64 is None else base64.b64decode(self.key_b64)
        if owner is None or not key_belongs_to(self.key_id, owner.decode("utf-8", "replace")):
            # A letter names the key of the user it was keyed by; any other is not opened.
            raise SealedDeadLetter(f"dead letter of {self.position} names a key of another user")
        secret = keys.key_by_id(self.key_id) if keys is not None else None
        if secret is None:
            raise SealedDeadLetter(
                f"dead letter of {self.position} is sealed with key {self.key_id}, which "
                + ("is destroyed: the user was erased" if keys is not None else "was not given")
            )
        return open_bytes(
            stored,
            secret,
            _associated(self.source_topic, self.source_partition, self.source_offset, part),
        )


#: Sends one dead-letter record: (record key, record value), awaited until acknowledged.
SendRecord = Callable[[bytes | None, bytes], Awaitable[None]]


class DeadLetterSink:
    """Where an agent's dead letters go: one send path for every agent.

    A letter is sent and awaited until the broker acknowledged it. A broker failure (no
    connection, a timeout) is retried with backoff until it goes through: a dead letter is
    never dropped, and the agent does not move past the record meanwhile. A broker that
    refuses the letter for its size gets the reference form, then one without any bytes.
    Each letter sent is logged (agent, position, reason) and counted in
    ``memstream_dead_letters_total{agent, reason}`` (the reason's class); a ``quiet`` sink
    (a replay's, whose records the live worker dead-lettered already) does neither.
    """

    def __init__(
        self,
        send: SendRecord,
        keys: KeyStore | None,
        *,
        max_bytes: int = MAX_LETTER_BYTES,
        backoff_s: tuple[float, float] = (0.1, 30.0),
        on_retry: Callable[[str | None], None] | None = None,
        quiet: bool = False,
    ) -> None:
        self._send = send
        self.quiet = quiet
        self.keys = keys
        self.max_bytes = max_bytes
        self.backoff_s = backoff_s
        #: Told "retrying: ..." while a broker failure holds a letter up, and None after.
        self.on_retry = on_retry
        #: Letters sent by this sink.
        self.sent = 0
        self._counted = Children(DEAD_LETTERS)

    async def record(
        self, agent: str, message: Any, reason: str, *, detail: str | None = None
    ) -> DeadLetter:
        """Dead-letter ``message`` (a Kafka record with topic, partition, offset, key and
        value) for ``reason``; return the letter sent."""
        if not self.quiet:
            log.warning(
                "%s: dead-lettered %s[%s]@%s: %s",
                agent, message.topic, message.partition, message.offset, reason,
            )
        # Whole (or a reference if too large); then, if the broker's record limit is lower
        # than ours, a reference; then a reference without any bytes.
        for max_bytes, prefix_bytes in ((self.max_bytes, PREFIX_BYTES), (1, PREFIX_BYTES), (1, 0)):
            letter = DeadLetter.of(
                agent=agent,
                reason=reason,
                topic=message.topic,
                partition=message.partition,
                offset=message.offset,
                key=message.key,
                value=message.value,
                keys=self.keys,
                detail=None if prefix_bytes == 0 else detail,
                max_bytes=max_bytes,
                prefix_bytes=prefix_bytes,
            )
            if await self._deliver(message.key, letter):
                self.sent += 1
                if not self.quiet:
                    # A quiet sink is a replay's: the live worker counted these already.
                    self._counted.get(agent, reason_class(reason)).inc()
                return letter
        raise AssertionError("a dead letter without bytes was refused for its size")  # pragma: no cover

    async def _deliver(self, key: bytes | None, letter: DeadLetter) -> bool:
        """Send until acknowledged; False if the broker refuses the letter for its size."""
        from aiokafka import errors as kafka_errors

        record_key = key
        if key is not None and len(key) > MAX_KEY_BYTES:
            record_key = b"oversized-key:" + hashlib.sha256(key).hexdigest().encode()
        value = letter.model_dump_json().encode()
        delay, ceiling = self.backoff_s
        while True:
            try:
                await self._send(record_key, value)
            except (kafka_errors.MessageSizeTooLargeError, kafka_errors.RecordTooLargeError):
                return False
            except (kafka_errors.KafkaError, OSError) as exc:
                log.warning("dead letters: the broker did not take a letter (%r); retrying", exc)
                if self.on_retry is not None:
                    self.on_retry(f"retrying a dead letter: {type(exc).__name__}")
                await asyncio.sleep(delay)
                delay = min(delay * 2, ceiling)
                continue
            if self.on_retry is not None and delay != self.backoff_s[0]:
                self.on_retry(None)
            return True


def _user_key(key: bytes | None, keys: KeyStore | None) -> tuple[str, bytes] | None:
    if key is None or keys is None or len(key) > MAX_KEY_BYTES:
        return None
    try:
        user_id = key.decode()
    except UnicodeDecodeError:
        return None
    if not user_id:
        return None
    found = keys.key_for(user_id, create=False)
    # Only a key of that user: a key store that answers otherwise is not trusted with it.
    if found is None or not found[0].startswith(key_prefix(user_id)):
        return None
    return found


def _associated(topic: str, partition: int, offset: int, part: str | None = None) -> bytes:
    tail = "" if part is None else f"\x1f{part}"
    return f"deadletter\x1f{topic}\x1f{partition}\x1f{offset}{tail}".encode()
