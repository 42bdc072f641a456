"""Writes that survive a broker loss, on the real (embedded) broker.

The embedded broker keeps its log in memory: a restart empties it. The worker running on it
must stop processing rather than build on the new log, memstream's own writers must refuse
to write until the log is back, what other producers wrote meanwhile must be kept by the
recovery the docs give (stop the workers, ``memstream restore``, start them again), and a
worker must refuse to start on the new log. In the end nothing acknowledged is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from chat import conversation
from harness import archive_caught_up, cli, wait_for

from memstream.models.codec import encode_event
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import MemoryStore, PartitionedMemories
from memstream.streams.archive import archive_positions, live_archive_dir
from memstream.streams.client import MemoryClient
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.kafka.logid import LogLost, bound_log_id, read_log_id
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.sealing import seal_event
from memstream.streams.keys.store import keystore_from_settings
from memstream.streams.worker.process import WorkerProcess, worker_readiness

SettingsFactory = Callable[..., Settings]
BEFORE = [("user", "I live in Porto and I work at Bosch."), ("assistant", "Noted.")]
REFUSED = [("user", "I prefer night trains over flights."), ("assistant", "Noted.")]
ELSEWHERE = [("user", "My sister Clara lives in Gdańsk."), ("assistant", "Nice.")]


def remembered(projection: MemoryStore, user: str, word: str) -> bool:
    return any(word in m.content for m in projection.list_memories(user))


async def third_party_publish(settings: Settings, user: str, turns: list[tuple[str, str]]) -> int:
    """A session sent by another producer (not memstream's client), sealed as it should be:
    it cannot be refused, so it must be kept."""
    keys = keystore_from_settings(settings)
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    await producer.start()
    try:
        events = [seal_event(e, keys) for e in conversation(user, "elsewhere", turns)]
        for event in events:
            assert event is not None
            await producer.send_and_wait(Topics.from_settings(settings).chat, encode_event(event), key=user.encode())
    finally:
        await producer.stop()
    return len(events)


def test_after_a_broker_loss_writes_are_refused_or_kept_and_restored_never_acknowledged_and_lost(
    settings_factory: SettingsFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    first = EmbeddedBroker(port, log_dir=tmp_path / "broker").start()
    settings = settings_factory(broker=first.address, web_port=free_port(), archive_flush_s=0.5)
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    worker = WorkerProcess(settings, log_path=tmp_path / "worker-1.log").start()
    client = MemoryClient(settings)
    second: EmbeddedBroker | None = None
    try:
        client.add([{"role": r, "content": t} for r, t in BEFORE], user_id="ann", session_id="before")
        wait_for(lambda: remembered(projection, "ann", "Porto"), "the first session's memories")
        wait_for(lambda: archive_caught_up(settings), "the archive")
        log_id = bound_log_id(settings)
        assert log_id is not None and asyncio.run(read_log_id(settings)) == log_id
        memories_before = {m.memory_id for m in projection.list_memories("ann")}
        archived_before = archive_positions(live_archive_dir(settings))
        positions_before = projection.positions()

        # The broker restarts with an empty log.
        first.stop()
        second = EmbeddedBroker(port, log_dir=tmp_path / "broker").start()
        wait_for(lambda: "the broker lost its log" in (tmp_path / "worker-1.log").read_text(errors="replace"),
                 "the worker to notice the loss", timeout_s=60)
        # Readiness tells the truth: blocked, and why, while the process still answers (the
        # archive may name the loss up to a log-watch interval before the watch blocks all).
        readiness = wait_for(lambda: worker_readiness(settings), "readiness to say the worker is blocked", 10, until=lambda r: not r["ready"])
        assert {c["state"] for c in readiness["components"].values()} == {"blocked"}, readiness
        assert all("lost its log" in c["reason"] for c in readiness["components"].values())

        # memstream's own writers refuse: nothing is acknowledged that a recovery would lose.
        with pytest.raises(LogLost, match="lost its log"):
            client.add([{"role": r, "content": t} for r, t in REFUSED], user_id="ann", session_id="refused")
        assert cli(settings, monkeypatch, "publish", "--user", "ann", "--session", "cli", "--text", "hello") == 2
        assert "lost its log" in capsys.readouterr().err
        # Another producer cannot be refused: its session is acknowledged by the new log.
        sent = asyncio.run(third_party_publish(settings, "bob", ELSEWHERE))

        # Nothing of the new log entered the projection or the archive.
        assert projection.positions() == positions_before
        assert archive_positions(live_archive_dir(settings)) == archived_before
        worker.stop()

        # A worker refuses to start on the new log.
        with pytest.raises(RuntimeError, match="code 3"):
            WorkerProcess(settings, log_path=tmp_path / "worker-refused.log").start(timeout_s=60)
        assert "lost its log" in (tmp_path / "worker-refused.log").read_text()

        # The recovery docs/replay.md gives: restore (it keeps the new log's records), start again.
        assert cli(settings, monkeypatch, "restore") == 0
        out = capsys.readouterr().out
        assert f"appended after them {sent} records" in out, out
        assert asyncio.run(read_log_id(settings)) == log_id
        worker = WorkerProcess(settings, log_path=tmp_path / "worker-2.log").start()
        wait_for(lambda: remembered(projection, "bob", "Clara"), "the other producer's session")
        wait_for(lambda: worker_readiness(settings)["ready"], "the restored worker to be ready")
        # The refused write goes through once the log is back.
        client.add([{"role": r, "content": t} for r, t in REFUSED], user_id="ann", session_id="refused")
        wait_for(lambda: remembered(projection, "ann", "night trains"), "the refused session, sent again")
        assert memories_before <= {m.memory_id for m in projection.list_memories("ann")}
        assert remembered(projection, "ann", "Porto")
    finally:
        client.close()
        worker.stop()
        if second is not None:
            second.stop()
        first.stop()
