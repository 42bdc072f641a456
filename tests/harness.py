"""Helpers the integration tests share: polling for a condition, the CLI with a test's
settings, the open sessions the workers hold, the archive's and the memory projection's
progress, the workers' committed offsets."""

from __future__ import annotations

import asyncio
import time
import urllib.error
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import urlencode

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from memstream.models.codec import InvalidEvent, decode_event, encode_event
from memstream.models.events import Event, MemoryAdded, MemoryChange
from memstream.models.session import session_key
from memstream.models.settings import Settings
from memstream.projections.memories import MemoryProjection
from memstream.streams.archive import (
    archive_positions,
    archived_topics,
    live_archive_dir,
    worker_group_id,
)
from memstream.streams.cli import main
from memstream.streams.runtime.keys import keystore_from_settings, seal_event
from memstream.streams.runtime.logreader import read_topic
from memstream.streams.runtime.tansu import true_end_offsets
from memstream.streams.runtime.topics import Topics
from memstream.streams.runtime.worker import fetch_json

T = TypeVar("T")


def wait_for(check: Callable[[], T | None], what: str = "a condition", timeout_s: float = 90) -> T:
    """Poll ``check`` until it returns something truthy, and return that; fail naming
    ``what`` otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def eventually(probe: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 90) -> T:
    """Call ``probe`` until ``done`` accepts its result; fail with the last result."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = probe()
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout_s:.0f} s; last: {result!r}")
        time.sleep(0.5)


def cli(settings: Settings, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    """Run the ``memstream`` command with ``settings`` in its environment."""
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    return main(list(args))


def fetch_routed(settings: Settings, path: str, timeout_s: float = 60) -> Any:
    """``fetch_json`` of a page routed to the worker that owns a user, asked again while the
    worker answers 503: it does not know the owner yet (before its first partition
    assignment, during a rebalance)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return fetch_json(settings, path, timeout_s=10)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code != 503 or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def open_sessions(settings: Settings, users: Iterable[str]) -> dict[str, Any]:
    """The open sessions of ``users`` by session key, as the worker's ``/sessions/`` page
    gives them (one request per user, with the token of ``settings``; the worker asked
    forwards each to the worker that owns the user)."""
    found: dict[str, Any] = {}
    for user in users:
        reply = fetch_routed(settings, "/sessions/?" + urlencode({"user": user}))
        for state in reply["sessions"]:
            found[session_key(state["user_id"], state["session_id"])] = state
    return found


def archive_caught_up(settings: Settings) -> bool:
    """Whether the live archive holds every record now in every archived topic."""
    tps = [TopicPartition(t, p) for t in archived_topics(settings) for p in range(settings.partitions)]
    try:
        ends = asyncio.run(true_end_offsets(settings.broker, tps))
    except Exception:  # noqa: BLE001 - the sessions changelog may not exist yet
        return False
    archived = archive_positions(live_archive_dir(settings))
    return all(archived.get((tp.topic, tp.partition), 0) == end for tp, end in ends.items())


def wait_until_projected(settings: Settings, projection: MemoryProjection, timeout_s: float = 60) -> None:
    """Wait until the projection has applied every memory, change and access event in the
    log (the rows record the offsets they took), so a comparison with a replay is not a race
    with a busy projector (it writes access counts every ``access_flush_interval_s``).
    Changes and accesses that name no row never show; so it also returns once the log and
    the projection's offsets have not moved for three polls."""
    topics = Topics.from_settings(settings)
    deadline = time.monotonic() + timeout_s
    previous = None
    still = 0
    while time.monotonic() < deadline:
        last: dict[int, int] = {}
        for record in asyncio.run(read_topic(settings, topics.memories)):
            try:
                event = decode_event(record.value)
            except InvalidEvent:
                continue
            if isinstance(event, MemoryAdded | MemoryChange):
                last[record.partition] = record.offset
        accessed = {r.partition: r.offset for r in asyncio.run(read_topic(settings, topics.accesses))}
        positions = projection.positions()
        access_positions = projection.access_positions()
        if all(positions.get((topics.memories, p), 0) > offset for p, offset in last.items()) and all(
            access_positions.get(p, 0) > offset for p, offset in accessed.items()
        ):
            return
        state = (last, positions, accessed, access_positions)
        still = still + 1 if state == previous else 0
        if still >= 3:
            return
        previous = state
        time.sleep(0.5)


async def publish_unchecked(settings: Settings, events: list[Event]) -> None:
    """Publish chat events sealed as memstream's producers seal them, but without their
    checks (as another producer would): for events a worker must refuse, such as content over
    the limit, which ``publish_events`` no longer sends."""
    keys = keystore_from_settings(settings)
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    await producer.start()
    try:
        for event in events:
            sealed = seal_event(event, keys)
            assert sealed is not None
            await producer.send_and_wait(
                Topics.from_settings(settings).chat, encode_event(sealed), key=event.user_id.encode()
            )
    finally:
        await producer.stop()


async def committed_offsets(
    settings: Settings, positions: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """What a new consumer of the workers' group sees as committed (OffsetFetch), for the
    (topic, partition) positions that have an offset."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker,
        group_id=worker_group_id(settings),
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        found = {}
        for topic, partition in positions:
            offset = await consumer.committed(TopicPartition(topic, partition))
            if offset is not None:
                found[(topic, partition)] = offset
        return found
    finally:
        await consumer.stop()
