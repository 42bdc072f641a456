"""The embedded broker: start, readiness, topics, clean stop, and the foreground runner."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from harness import wait_for

from memstream.models.settings import Settings
from memstream.streams.kafka.broker import (
    BrokerStartError,
    EmbeddedBroker,
    broker_reachable,
    free_port,
)
from memstream.streams.kafka.topics import Topics, ensure_topics

SettingsFactory = Callable[..., Settings]


def _broker_processes(port: int) -> list[int]:
    """Pids of live processes whose command line holds Tansu's listener for ``port``."""
    needle = f"tcp://127.0.0.1:{port}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            status = (proc / "status").read_text()
        except OSError:
            continue  # exited while we looked
        if needle in cmdline and b"broker" in cmdline and "State:\tZ" not in status:
            pids.append(int(proc.name))
    return pids


async def _partition_counts(bootstrap: str, topics: list[str]) -> dict[str, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return {d["topic"]: len(d["partitions"]) for d in await admin.describe_topics(topics)}
    finally:
        await admin.close()


async def test_embedded_broker_starts_and_stops_without_leftovers(tmp_path: Path) -> None:
    with EmbeddedBroker(free_port(), log_dir=tmp_path) as broker:
        assert broker.running
        assert broker.pid is not None
        assert await broker_reachable(broker.address, timeout_s=5)
        assert _broker_processes(broker.port) == [broker.pid]
        assert broker.log_path is not None and broker.log_path.exists()

    assert not broker.running
    assert _broker_processes(broker.port) == []
    assert not await broker_reachable(broker.address, timeout_s=1)
    assert broker.stop() is not None  # a second stop is harmless


def test_start_fails_clearly_when_the_port_is_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BrokerStartError, match=f"127.0.0.1:{port}"):
            EmbeddedBroker(port, startup_timeout_s=5).start()
    assert _broker_processes(port) == []


def test_start_reports_the_output_of_a_broker_that_exits(tmp_path: Path) -> None:
    fake = tmp_path / "fake-tansu"
    fake.write_text("#!/bin/sh\necho 'cannot open storage' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(BrokerStartError, match=r"(?s)code 3.*cannot open storage"):
        EmbeddedBroker(binary=str(fake), startup_timeout_s=5).start()


async def test_ensure_topics_is_idempotent(settings_factory: SettingsFactory) -> None:
    settings = settings_factory(partitions=3)
    names = list(Topics.from_settings(settings).all())

    await ensure_topics(settings)
    await ensure_topics(settings)

    assert await _partition_counts(settings.broker, names) == {name: 3 for name in names}
    with pytest.raises(ValueError, match="exists with 3 partitions"):
        await ensure_topics(settings_factory(partitions=5))


_RUN_FOREVER = textwrap.dedent(
    """
    import sys
    from memstream.models.settings import Settings
    from memstream.streams.kafka.broker import run_broker_forever
    sys.exit(run_broker_forever(Settings(), int(sys.argv[1])))
    """
)


def _read_lines(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


def test_run_broker_forever_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "MEMSTREAM_BROKER": f"127.0.0.1:{port + 1}",  # the port argument wins
        "MEMSTREAM_BROKER_KIND": "tansu",
        "MEMSTREAM_DATA_DIR": str(tmp_path / "data"),
        "MEMSTREAM_TOPIC_PREFIX": "forever",
        "MEMSTREAM_PARTITIONS": "2",
    }
    runner = subprocess.Popen(
        [sys.executable, "-c", _RUN_FOREVER, str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(runner.stdout, lines), daemon=True)
    reader.start()
    output: list[str] = []
    try:

        def printed() -> list[str]:
            assert runner.poll() is None, f"runner exited early: {output}"
            with contextlib.suppress(queue.Empty):
                output.append(lines.get(timeout=0.5))  # the pause between two looks
            return output

        wait_for(
            printed,
            "the start banner",
            30,
            until=lambda out: any("memory-only" in line for line in out),
            interval_s=0,
        )
        address = f"127.0.0.1:{port}"
        assert any(f"listening on {address}" in line for line in output), output
        assert len(_broker_processes(port)) == 1
        names = list(Topics(prefix="forever").all())
        assert asyncio.run(_partition_counts(address, names)) == {name: 2 for name in names}
    finally:
        runner.send_signal(signal.SIGTERM)
        exit_code = runner.wait(30)
    reader.join(5)  # the pipe closes when the runner exits
    while not lines.empty():
        output.append(lines.get())

    assert exit_code == 0, output
    assert any("loses every topic" in line for line in output), output
    assert "stopped" in output[-1], output
    assert _broker_processes(port) == []
    assert not asyncio.run(broker_reachable(f"127.0.0.1:{port}", timeout_s=1))
    assert list((tmp_path / "data" / "logs").glob("tansu-*.log"))
