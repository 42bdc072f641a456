"""A failing broker or store stops no record for good and loses none: the agents wait it
out, retrying with backoff, and carry on where they were; nothing valid is dead-lettered.

The broker is frozen with SIGSTOP (a hung broker: connections open, nothing answers); the
store is made unwritable with the immutable attribute (a disk that refuses writes even to
root), both while the worker has work in flight.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from chat import conversation
from harness import wait_for

from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import MemoryStore, PartitionedMemories
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.operations.dlq import dead_letters
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess, worker_readiness

SettingsFactory = Callable[..., Settings]
TURNS = [("user", "I live in Porto and I work at Bosch number {n}."), ("assistant", "Noted.")]


def sessions(prefix: str, count: int) -> list:
    return [
        event
        for n in range(count)
        for event in conversation(f"{prefix}{n}", "s", [(r, t.format(n=n)) for r, t in TURNS])
    ]


def everyone_remembered(projection: MemoryStore, prefix: str, count: int) -> bool:
    return all(projection.list_memories(f"{prefix}{n}") for n in range(count))


@contextmanager
def immutable(directory: Path) -> Iterator[None]:
    """Every directory under ``directory`` refuses new files, even to root (chattr +i)."""
    folders = [str(directory), *(str(Path(root) / d) for root, dirs, _ in os.walk(directory) for d in dirs)]
    done = subprocess.run(["chattr", "+i", *folders], check=False, capture_output=True)
    if done.returncode != 0:
        subprocess.run(["chattr", "-i", *folders], check=False, capture_output=True)
        pytest.skip(f"chattr +i is not permitted here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *folders], check=True)


def test_a_frozen_broker_is_waited_out_and_nothing_is_skipped_or_dead_lettered(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    broker = EmbeddedBroker(free_port(), log_dir=tmp_path / "broker").start()
    settings = settings_factory(broker=broker.address, web_port=free_port())
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    worker = WorkerProcess(settings, log_path=tmp_path / "worker.log").start()
    try:
        pid = worker.pid
        before = sessions("before", 10)
        first_half = {f"before{n}" for n in range(5)}
        asyncio.run(publish_events(settings, [e for e in before if e.user_id in first_half]))
        # The worker is folding, extracting and projecting now (its first memory is there),
        # and the second half is in flight when the broker freezes.
        wait_for(lambda: any(projection.list_memories(u) for u in first_half),
                 "the first memory from before", timeout_s=120)
        asyncio.run(publish_events(settings, [e for e in before if e.user_id not in first_half]))
        assert broker.pid is not None
        os.kill(broker.pid, signal.SIGSTOP)
        time.sleep(15)  # longer than the group session timeout: heartbeats fail too
        os.kill(broker.pid, signal.SIGCONT)
        asyncio.run(publish_events(settings, sessions("after", 10)))
        wait_for(lambda: everyone_remembered(projection, "before", 10), "every session from before", timeout_s=180)
        wait_for(lambda: everyone_remembered(projection, "after", 10), "every session from after", timeout_s=180)
        assert not worker.exited() and worker.pid == pid
        assert asyncio.run(_letters(settings)) == 0
    finally:
        worker.stop()
        broker.stop()


def test_a_store_that_refuses_writes_is_retried_until_it_takes_them_and_nothing_is_dead_lettered(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    settings = settings_factory(web_port=free_port())
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    log = tmp_path / "worker.log"
    worker = WorkerProcess(settings, log_path=log).start()
    try:
        pid = worker.pid
        asyncio.run(publish_events(settings, sessions("before", 5)))
        wait_for(lambda: everyone_remembered(projection, "before", 5), "the first sessions")
        with immutable(settings.lancedb_dir):
            asyncio.run(publish_events(settings, sessions("during", 10)))
            wait_for(lambda: "retrying until it is back" in log.read_text(errors="replace"),
                     "the projector to retry the store", timeout_s=120)

            def projector_retrying() -> bool:
                assert not worker.exited(), "the worker died while the store refused writes"
                return worker_readiness(settings)["components"]["projector"]["state"] == "retrying"

            # Alive, and saying so: readiness names the component that waits for the store.
            wait_for(projector_retrying, "readiness to say the projector retries", 60)
            assert not worker.exited()
        wait_for(lambda: everyone_remembered(projection, "during", 10), "the sessions held up", timeout_s=180)
        assert worker.pid == pid
    finally:
        worker.stop()
    assert asyncio.run(_letters(settings)) == 0
    assert "Crashed" not in log.read_text(errors="replace")


async def _letters(settings: Settings) -> int:
    found, unreadable = await dead_letters(settings)
    return len(found) + unreadable
