"""The worker from outside: its web pages (``fetch_json``, readiness) and a worker run as a
child process (``WorkerProcess``); ``memstream worker`` itself is
:func:`memstream.streams.agents.app.run_worker`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any, Self

from memstream.models.settings import Settings


def worker_url(settings: Settings, path: str) -> str:
    """URL of ``path`` on the worker's web server."""
    return f"http://{settings.web_host}:{settings.web_port}{path}"


def fetch_json(settings: Settings, path: str, timeout_s: float = 2.0) -> Any:
    """GET a JSON view of the worker, with the web token of ``settings`` if it has one.

    Raises ``OSError`` when the worker does not answer, and ``urllib.error.HTTPError`` (an
    ``OSError``) when it refuses: 400 for a bad request, 401 for a missing or wrong token,
    404 for no such session.
    """
    request = urllib.request.Request(worker_url(settings, path))
    if settings.web_token is not None:
        request.add_header("Authorization", f"Bearer {settings.web_token.get_secret_value()}")
    with urllib.request.urlopen(request, timeout=timeout_s) as reply:
        return json.loads(reply.read())


def worker_healthy(settings: Settings) -> bool:
    """Whether a worker of this app answers on its web port (``/health/``: the process is
    up; whether its agents and tasks run is ``/ready/``, see :func:`worker_ready`)."""
    try:
        return bool(fetch_json(settings, "/health/", timeout_s=1.0).get("ok"))
    except (OSError, ValueError, urllib.error.URLError):
        return False


def worker_readiness(settings: Settings, timeout_s: float = 2.0) -> dict[str, Any]:
    """The worker's ``/ready/`` page: ``{"ready": bool, "app": id, "components": {name:
    {"kind", "state", "reason", "since", "restarts"[, "detail"]}}}``, whether it is ready
    (200) or not (503). Raises ``OSError`` when the worker does not answer."""
    try:
        return dict(fetch_json(settings, "/ready/", timeout_s=timeout_s))
    except urllib.error.HTTPError as exc:
        with exc:
            if exc.code != 503:
                raise
            return dict(json.loads(exc.read()))


def worker_ready(settings: Settings) -> bool:
    """Whether the worker answers and every agent and task it runs is running."""
    try:
        return bool(worker_readiness(settings, timeout_s=1.0).get("ready"))
    except (OSError, ValueError):
        return False


class WorkerProcess:
    """A worker in a child process, for the demo and the integration tests."""

    def __init__(self, settings: Settings, log_path: Path | None = None) -> None:
        self.settings = settings
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> Self:
        """Start the worker and wait until it answers on its web port."""
        # Unbuffered: the last lines before a SIGKILL (crash tests) must reach the log.
        env = {**os.environ, **self.settings.to_env(), "PYTHONUNBUFFERED": "1"}
        out: IO[bytes] | int = subprocess.DEVNULL
        if self.log_path is not None:
            self._log = self.log_path.open("ab")
            out = self._log
        self._process = subprocess.Popen(
            [sys.executable, "-m", "memstream.streams.cli", "worker"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"worker exited with code {self._process.returncode}{self._tail()}")
            if worker_healthy(self.settings):
                return self
            time.sleep(0.2)
        self.kill()
        raise TimeoutError(f"worker did not answer within {timeout_s:.0f} s{self._tail()}")

    @property
    def pid(self) -> int | None:
        """The worker process's id while it is started (None before and after)."""
        return self._process.pid if self._process is not None else None

    def exited(self) -> bool:
        """Whether the started worker has exited by itself (crashed): not stopped or killed
        through this object."""
        return self._process is not None and self._process.poll() is not None

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """Stop cleanly (SIGTERM); kill if it does not exit in time."""
        if self._process is None:
            return None
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        return self._finish()

    def kill(self) -> int | None:
        """SIGKILL the worker, as a crash would."""
        if self._process is None:
            return None
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        return self._finish()

    def _finish(self) -> int | None:
        code = self._process.returncode if self._process else None
        if self._log is not None:
            self._log.close()
            self._log = None
        self._process = None
        return code

    def _tail(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n--- worker log (tail) ---\n" + self.log_path.read_text(errors="replace")[-3000:]

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
