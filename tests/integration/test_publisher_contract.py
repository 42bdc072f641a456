"""The EventPublisher port's contract, run against every implementation: the Kafka publisher
on the real broker, and the in-memory fake unit tests use in its place (so it cannot drift).

What a caller relies on: content leaves sealed with the right key, keyed by its user, in
order; an event that may not be sealed is never sent; a bad call sends nothing at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fakes import InMemoryPublisher

from memstream.models.codec import EventLimits, decode_event
from memstream.models.crypto import SealError
from memstream.models.events.chat import MessageAdded, UserErased
from memstream.models.events.memory import MemoryDeleted
from memstream.models.settings import Settings
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.publisher import EventPublisher, KafkaPublisher, RawRecord
from memstream.streams.keys.sealing import open_event
from memstream.streams.keys.store import FileKeyStore, KeyStore

NOW = datetime.now(UTC)
SettingsFactory = Callable[..., Settings]

#: What the log holds of a topic: (key, value) in offset order.
Read = Callable[[str], Awaitable[list[tuple[bytes | None, bytes]]]]
#: The topic a contract test's short name stands for.
Topic = Callable[[str], str]


def message(user: str, number: int, content: str = "I live in Oslo") -> MessageAdded:
    return MessageAdded(
        event_id=f"{user}-m{number}", user_id=user, session_id="s1", occurred_at=NOW,
        role="user", content=content,
    )


def deletion(user: str) -> MemoryDeleted:
    return MemoryDeleted(
        event_id=f"{user}-del", user_id=user, session_id="s1", occurred_at=NOW,
        memory_id="m1", reason="requested by the user",
    )


class PublisherContract:
    """What every :class:`~memstream.streams.kafka.publisher.EventPublisher` must do."""

    @pytest.fixture
    def settings(self, settings_factory: SettingsFactory) -> Settings:
        return settings_factory(partitions=1, max_content_chars=200)

    @pytest.fixture
    def keys(self, tmp_path: Path) -> KeyStore:
        return FileKeyStore(tmp_path / "keys")

    @pytest.fixture
    async def publisher(self, settings: Settings, keys: KeyStore) -> AsyncIterator[EventPublisher]:
        raise NotImplementedError

    @pytest.fixture
    def read(self, publisher: EventPublisher, settings: Settings) -> Read:
        raise NotImplementedError

    @pytest.fixture
    def topic(self, settings: Settings) -> Topic:
        """Topics under the test's own prefix (they outlive a test on the shared broker)."""
        return lambda name: f"{settings.topic_prefix}.{name}"

    async def test_content_leaves_sealed_with_its_users_key_keyed_and_in_order(
        self, publisher: EventPublisher, read: Read, topic: Topic, keys: KeyStore
    ) -> None:
        events = [message("ann", 0), message("bob", 0), message("ann", 1, "and I prefer tea")]
        sent = await publisher.publish(topic("chat"), events)
        assert [s.event.event_id for s in sent if s.event] == ["ann-m0", "bob-m0", "ann-m1"]
        assert [s.offset for s in sent] == sorted(s.offset for s in sent)
        held = await read(topic("chat"))
        assert [key for key, _ in held] == [b"ann", b"bob", b"ann"]
        for (_, value), original in zip(held, events, strict=True):
            event = decode_event(value)
            assert event.encryption is not None and original.content not in value.decode()
            assert open_event(event, keys) == original
        assert [decode_event(value) for _, value in held] == [s.event for s in sent]

    async def test_without_new_keys_a_user_without_one_gets_nothing_sent(
        self, publisher: EventPublisher, read: Read, topic: Topic, keys: KeyStore
    ) -> None:
        keys.key_for("ann", create=True)
        both = [deletion("ann"), deletion("eve")]
        sent = await publisher.publish(topic("memories"), both, create_keys=False)
        assert [s.event.user_id for s in sent if s.event] == ["ann"]
        assert [key for key, _ in await read(topic("memories"))] == [b"ann"]
        assert keys.key_for("eve", create=False) is None  # none was created

    async def test_a_named_key_seals_or_nothing_is_sent(
        self, publisher: EventPublisher, read: Read, topic: Topic, keys: KeyStore
    ) -> None:
        key_id, _ = keys.key_for("ann", create=True)  # type: ignore[misc]
        bob_key, _ = keys.key_for("bob", create=True)  # type: ignore[misc]
        (sent,) = await publisher.publish(topic("memories"), [deletion("ann")], key_id=key_id)
        assert sent.event is not None and sent.event.encryption is not None
        assert sent.event.encryption.key_id == key_id
        with pytest.raises(SealError):
            await publisher.publish(topic("memories"), [deletion("ann")], key_id=bob_key)
        keys.destroy("ann")  # erased while the event was worked out
        assert await publisher.publish(topic("memories"), [deletion("ann")], key_id=key_id) == []
        assert len(await read(topic("memories"))) == 1

    async def test_events_without_content_go_as_they_are(
        self, publisher: EventPublisher, read: Read, topic: Topic
    ) -> None:
        erased = UserErased(
            event_id="erase-1", user_id="ann", session_id="-", occurred_at=NOW,
            erasure_id="e1", reason="requested",
        )
        (sent,) = await publisher.publish(topic("chat"), [erased])
        assert sent.event == erased
        assert [decode_event(value) for _, value in await read(topic("chat"))] == [erased]

    async def test_raw_records_go_byte_for_byte(
        self, publisher: EventPublisher, read: Read, topic: Topic
    ) -> None:
        records = [RawRecord(b"k", b"\x00not json"), RawRecord(None, b"{}", (("h", b"v"),))]
        sent = await publisher.send_raw(topic("letters"), records)
        assert len(sent) == 2 and all(s.event is None for s in sent)
        assert await read(topic("letters")) == [(b"k", b"\x00not json"), (None, b"{}")]


class CheckedPublisherContract(PublisherContract):
    """A publisher that checks what users send refuses a bad call whole."""

    async def test_one_event_over_the_limits_sends_nothing_of_the_call(
        self, publisher: EventPublisher, read: Read, topic: Topic
    ) -> None:
        too_long = message("ann", 1, "x" * 201)
        with pytest.raises(ValueError, match="ann-m1"):
            await publisher.publish(topic("chat"), [message("ann", 0), too_long])
        assert await read(topic("chat")) == []
        await publisher.publish(topic("chat"), [message("ann", 2)])
        assert len(await read(topic("chat"))) == 1


class TestInMemoryPublisher(CheckedPublisherContract):
    @pytest.fixture
    async def publisher(self, settings: Settings, keys: KeyStore) -> AsyncIterator[EventPublisher]:
        yield InMemoryPublisher(keys, EventLimits.from_settings(settings))

    @pytest.fixture
    def read(self, publisher: EventPublisher, settings: Settings) -> Read:
        assert isinstance(publisher, InMemoryPublisher)

        async def held(topic: str) -> list[tuple[bytes | None, bytes]]:
            return [(key, value) for t, key, value in publisher.sent if t == topic]

        return held


class TestKafkaPublisher(CheckedPublisherContract):
    @pytest.fixture
    async def publisher(self, settings: Settings, keys: KeyStore) -> AsyncIterator[EventPublisher]:
        publisher = KafkaPublisher(settings, keys, watch_log=True)
        yield publisher
        await publisher.close()

    @pytest.fixture
    def read(self, publisher: EventPublisher, settings: Settings) -> Read:
        async def held(topic: str) -> list[tuple[bytes | None, bytes]]:
            return [(r.key, r.value) for r in await read_topic(settings, topic, timeout_s=10)]

        return held


async def test_a_closed_kafka_publisher_starts_again(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    settings = settings_factory(partitions=1)
    publisher = KafkaPublisher(settings, FileKeyStore(tmp_path / "keys"))
    topic = f"{settings.topic_prefix}.chat"
    await publisher.publish(topic, [message("ann", 0)])
    await publisher.close()
    await publisher.publish(topic, [message("ann", 1)])
    await publisher.close()
    held = await asyncio.wait_for(read_topic(settings, topic), timeout=30)
    assert [decode_event(r.value).event_id for r in held] == ["ann-m0", "ann-m1"]


async def test_concurrent_writes_of_a_watching_publisher_all_go_out(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    # A server publishes each search's access event in the background, so writes overlap;
    # each checks the broker's log mark first, and the checks share one consumer.
    settings = settings_factory(partitions=1)
    publisher = KafkaPublisher(settings, FileKeyStore(tmp_path / "keys"), watch_log=True)
    topic = f"{settings.topic_prefix}.chat"
    try:
        await publisher.publish(topic, [message("ann", 0)])  # claims the log: a bound one
        await asyncio.gather(*(publisher.publish(topic, [message("ann", n)]) for n in range(1, 41)))
    finally:
        await publisher.close()
    held = await asyncio.wait_for(read_topic(settings, topic), timeout=30)
    assert sorted(decode_event(r.value).event_id for r in held) == sorted(
        f"ann-m{n}" for n in range(41)
    )
