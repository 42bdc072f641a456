"""``memstream serve`` in a child process beside a real worker, for the integration tests of the
HTTP API and of the memory inspector (one of each per test module). The worker serves the API
too (``MEMSTREAM_SERVE_IN_WORKER``), on a port of its own."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from harness import child_process, wait_for

from memstream.models.settings import Settings
from memstream.streams.kafka.broker import free_port
from memstream.streams.worker.process import WorkerProcess


def serve_settings(tmp: Path, broker_address: str, broker_kind: str, prefix: str) -> Settings:
    """Settings of one module's stack: its own topics (``prefix`` and the time), data
    directory and ports; sessions that time out in seconds, not minutes."""
    return Settings(
        broker=broker_address, broker_kind=broker_kind, data_dir=tmp / "data",  # type: ignore[arg-type]
        topic_prefix=f"{prefix}{int(time.time() * 1000) % 10**9}", partitions=4,
        web_port=free_port(), api_port=free_port(), session_timeout_s=10.0,
        heartbeat_interval_s=2.0,
    )


@dataclass(frozen=True)
class Served:
    """Where the stack answers: ``memstream serve``'s root (``http://127.0.0.1:PORT``) and
    the worker's own API's."""

    root: str
    worker_root: str


@contextmanager
def serving(settings: Settings, tmp: Path) -> Iterator[Served]:
    """A worker (serving the API too) and ``memstream serve`` on ``settings`` (logs in
    ``tmp``), until the block ends; yields where they answer once ``serve`` does."""
    env = {**os.environ, **settings.to_env(), "PYTHONUNBUFFERED": "1"}
    in_worker = settings.model_copy(update={"serve_in_worker": True, "api_port": free_port()})
    command = [sys.executable, "-m", "memstream.streams.cli", "serve"]
    with (
        WorkerProcess(in_worker, log_path=tmp / "worker.log"),
        child_process(command, env, tmp / "serve.log") as process,
    ):
        root = f"http://127.0.0.1:{settings.api_port}"

        def healthy() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"memstream serve exited: {(tmp / 'serve.log').read_text()}")
            try:
                return httpx.get(f"{root}/v1/health", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(healthy, "memstream serve to answer", timeout_s=60)
        yield Served(root, f"http://127.0.0.1:{in_worker.api_port}")
