"""Helpers the integration tests share: polling for a condition, the CLI with a test's
settings, the open sessions the workers hold, the archive's and the memory projection's
progress, the workers' committed offsets, their metrics."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from memstream.models.codec import InvalidEvent, decode_event, encode_event
from memstream.models.events.envelope import Event
from memstream.models.events.memory import MemoryAdded, MemoryChange
from memstream.models.session import session_key
from memstream.models.settings import Settings
from memstream.projections.memories import MemoryStore
from memstream.streams.archive import (
    archive_positions,
    archived_topics,
    live_archive_dir,
)
from memstream.streams.cli import main
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.tansu import true_end_offsets
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.sealing import seal_event
from memstream.streams.keys.store import keystore_from_settings
from memstream.streams.worker.process import fetch_json, worker_url

T = TypeVar("T")


def wait_for(
    check: Callable[[], T | None],
    what: str = "a condition",
    timeout_s: float = 90,
    *,
    until: Callable[[Any], object] = bool,
    interval_s: float = 0.3,
) -> T:
    """Call ``check`` until ``until`` accepts its result (by default: until the result is
    truthy), and return that result; fail naming ``what`` and the last result otherwise.

    The one way the tests wait for something to have happened: ``check`` may raise to give
    up early (a process that exited), and is called at least once.

    >>> wait_for(lambda: [1], "a list")
    [1]
    >>> wait_for(lambda: [], "an empty list", until=lambda found: found == [])
    []
    """
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if until(result):
            return result  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout_s, result)
        time.sleep(interval_s)


async def wait_for_async(
    check: Callable[[], T | None | Awaitable[T | None]],
    what: str = "a condition",
    timeout_s: float = 90,
    *,
    until: Callable[[Any], object] = bool,
    interval_s: float = 0.3,
) -> T:
    """:func:`wait_for` for a coroutine: ``check`` may be a coroutine function, and the
    pauses between calls give the event loop back."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if until(result):
            return result  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout_s, result)
        await asyncio.sleep(interval_s)


def _timed_out(what: str, timeout_s: float, last: object) -> AssertionError:
    shown = repr(last)
    if len(shown) > 2000:
        shown = shown[:2000] + " ..."
    return AssertionError(f"timed out after {timeout_s:g} s waiting for {what}; last: {shown}")


@contextmanager
def child_process(
    args: Sequence[str], env: Mapping[str, str], log_path: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """A child process with its output in ``log_path``, stopped when the block ends (SIGTERM,
    then SIGKILL if it has not exited 20 s later)."""
    with log_path.open("ab") as log:
        process = subprocess.Popen(list(args), env=dict(env), stdout=log, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def cli(settings: Settings, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    """Run the ``memstream`` command with ``settings`` in its environment."""
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    return main(list(args))


def fetch_routed(settings: Settings, path: str, timeout_s: float = 60) -> Any:
    """``fetch_json`` of a page routed to the worker that owns a user, asked again while the
    worker answers 503: it does not know the owner yet (before its first partition
    assignment, during a rebalance)."""

    def answered() -> Any:
        try:
            return fetch_json(settings, path, timeout_s=10)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code != 503:
                raise
            return exc

    return wait_for(
        answered,
        f"a worker that knows who owns {path}",
        timeout_s,
        until=lambda reply: not isinstance(reply, urllib.error.HTTPError),
        interval_s=0.2,
    )


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


def wait_until_projected(settings: Settings, projection: MemoryStore, timeout_s: float = 60) -> None:
    """Wait until the projection has applied every memory, change and access event in the
    log (the rows record the offsets they took), so a comparison with a replay is not a race
    with a busy projector (it writes access counts every ``access_flush_interval_s``).
    Changes and accesses that name no row never show; so it also returns once the log and
    the projection's offsets have not moved for three polls."""
    topics = Topics.from_settings(settings)
    seen: list[object] = []

    def projected_or_still() -> bool:
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
            return True
        seen.append((last, positions, accessed, access_positions))
        return len(seen) >= 4 and all(state == seen[-1] for state in seen[-4:])

    try:
        wait_for(projected_or_still, "the projection to apply the log", timeout_s, interval_s=0.5)
    except AssertionError:
        return  # as before: the comparison that follows says what differs


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


def metric_values(exposition: str, name: str) -> dict[frozenset[tuple[str, str]], float]:
    """The samples called ``name`` in a /metrics page (Prometheus' text format, parsed by
    prometheus-client's own parser), by their labels."""
    return {
        frozenset(sample.labels.items()): sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == name
    }


def worker_metrics(settings: Settings, token: str | None = None) -> str:
    """The worker's /metrics page (its web token sent from ``settings`` unless ``token``)."""
    request = urllib.request.Request(worker_url(settings, "/metrics"))
    sent = token if token is not None else (
        settings.web_token.get_secret_value() if settings.web_token is not None else None
    )
    if sent:
        request.add_header("Authorization", f"Bearer {sent}")
    with urllib.request.urlopen(request, timeout=10) as reply:
        return str(reply.read().decode())
