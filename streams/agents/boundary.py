"""One guarded boundary per record: no record can stop a partition.

Every agent and task that consumes a topic decodes, validates and applies each record
inside a :class:`RecordBoundary`. What happens to a failure depends on where it comes from:

- **The record's data** (it does not decode, does not validate, overflows a date, recurses
  too deep, is too large, or applying it raises for any other reason while the broker and
  the store answer): the record goes to the dead-letter topic with its reason, and the
  agent moves on to the next one.
- **The broker or the store** (no connection, a timeout, a disk error), told apart by
  asking them (:class:`Probe`): nothing is skipped; the same record is tried again with
  backoff until they are back, and the component reports itself as retrying meanwhile.

A failure that could be either is tried again a few times while the probes answer; if it
still fails with the broker and store healthy, it is the record's, and it is dead-lettered.

:func:`supervise` is the last line around a long-lived task (the memory projector, the
archive sink): an exception that escapes it restarts the task after a backoff instead of
crashing the worker, and the component reports the crash. It is not where poison records
are handled: those never leave the boundary.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from aiokafka import errors as kafka_errors
from pydantic import ValidationError

from memstream.models.codec import InvalidEvent
from memstream.models.crypto import SealError
from memstream.streams.kafka.deadletters import DeadLetterSink
from memstream.streams.observability.metrics import EVENTS_PROCESSED, Children

__all__ = [
    "Backoff",
    "BrokerProbe",
    "Probe",
    "RecordBoundary",
    "StateReport",
    "is_data_fault",
    "supervise",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Told a component's state: ``(component, None)`` when it runs normally again, or
#: ``(component, "retrying: ...")`` / ``(component, "restarting: ...")``.
StateReport = Callable[[str, str | None], None]

#: Exceptions that only a record's data can cause: never worth a second attempt.
_DATA_FAULTS: tuple[type[BaseException], ...] = (
    InvalidEvent,
    ValidationError,
    SealError,
    UnicodeError,
    ArithmeticError,  # OverflowError (dates out of range), ZeroDivisionError
    RecursionError,
    LookupError,  # KeyError, IndexError
    TypeError,
    AttributeError,
    AssertionError,
    MemoryError,
    kafka_errors.MessageSizeTooLargeError,
    kafka_errors.RecordTooLargeError,
)


def is_data_fault(exc: BaseException) -> bool:
    """Whether ``exc`` can only have come from the record being processed (not from the
    broker or the store), so trying again cannot help."""
    if isinstance(exc, RecursionError):
        return True
    if isinstance(exc, OSError | kafka_errors.KafkaError) and not isinstance(exc, _DATA_FAULTS):
        return False  # connections, timeouts, disks: ask the probes
    return isinstance(exc, _DATA_FAULTS) or not isinstance(exc, RuntimeError)


class Probe(Protocol):
    """Something a boundary can ask whether it works right now (the broker, a store)."""

    name: str

    async def healthy(self) -> bool:
        """Whether it answers a cheap request now."""
        ...


@dataclass
class FunctionProbe:
    """A probe from a callable (run in a thread: store probes do I/O)."""

    name: str
    check: Callable[[], object]

    async def healthy(self) -> bool:
        """Whether ``check`` returns without raising."""
        try:
            await asyncio.to_thread(self.check)
        except Exception:  # noqa: BLE001 - any failure means "not healthy now"
            return False
        return True


class BrokerProbe:
    """Whether the broker answers a metadata request, with its own short-lived client."""

    name = "broker"

    def __init__(self, bootstrap: str, timeout_s: float = 5.0) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s

    async def healthy(self) -> bool:
        """Whether a fresh client gets the broker's metadata within ``timeout_s``."""
        from aiokafka import AIOKafkaClient

        client = AIOKafkaClient(bootstrap_servers=self.bootstrap, request_timeout_ms=int(self.timeout_s * 1000))
        try:
            await asyncio.wait_for(client.bootstrap(), self.timeout_s)
        except Exception:  # noqa: BLE001 - any failure means "not healthy now"
            return False
        finally:
            await client.close()
        return True


@dataclass
class Backoff:
    """Exponential backoff between attempts: ``initial_s``, doubling, at most ``max_s``."""

    initial_s: float = 0.1
    max_s: float = 30.0
    _next_s: float = field(default=0.0, init=False)

    async def wait(self) -> None:
        """Sleep for the next delay."""
        self._next_s = self.initial_s if self._next_s == 0 else min(self._next_s * 2, self.max_s)
        await asyncio.sleep(self._next_s)

    def reset(self) -> None:
        """Start from ``initial_s`` again (after a success)."""
        self._next_s = 0.0


class RecordBoundary:
    """The boundary every record of one agent passes through.

    Parameters
    ----------
    agent
        The agent's name: in dead letters, logs and reports.
    letters
        Where dead letters go.
    probes
        The broker and stores the agent depends on: asked whenever a failure could be
        theirs.
    attempts
        How often a failure that could be the broker's or the store's is tried while they
        answer, before it is taken to be the record's.
    report
        Told when the agent starts retrying on a broker or store failure, and when it works
        again.
    """

    def __init__(
        self,
        agent: str,
        letters: DeadLetterSink,
        probes: Sequence[Probe] = (),
        *,
        attempts: int = 3,
        backoff: Backoff | None = None,
        report: StateReport | None = None,
    ) -> None:
        self.agent = agent
        self.letters = letters
        self.probes = list(probes)
        self.attempts = attempts
        self.backoff = backoff or Backoff()
        self.report = report
        #: Records this boundary dead-lettered.
        self.dead_lettered = 0
        self._retrying = False
        self._processed = Children(EVENTS_PROCESSED)
        #: Ids of the records dead-lettered during the step running now (a step may
        #: dead-letter some of its records and succeed): they are not counted processed.
        #: One step at a time: an agent's records are processed in order by one task.
        self._lettered: set[int] | None = None

    async def run(
        self, record: Any, step: Callable[[], Awaitable[T]], *, count: bool = True
    ) -> tuple[bool, T | None]:
        """Run ``step`` for ``record``: ``(True, result)`` once it succeeded, ``(False,
        None)`` if the record was dead-lettered instead. Waits (never skips) while the
        broker or a store is down. Cancellation passes through. A success counts the record
        processed, unless ``count`` is False (a step that is not the record's last: the
        caller counts it, :meth:`processed`)."""
        tries = 0
        while True:
            try:
                lettered = self._lettered = set()
                result = await step()
            except Exception as exc:  # noqa: BLE001 - the boundary: every failure is sorted
                if is_data_fault(exc):
                    await self.dead_letter(record, exc)
                    return False, None
                if not await self._dependencies_healthy():
                    await self._wait_for_dependencies(exc)
                    continue
                tries += 1
                if tries >= self.attempts:
                    await self.dead_letter(record, exc)
                    return False, None
                # The type only: an exception's message may quote the record.
                log.info(
                    "%s: %s on a record with healthy dependencies; trying again",
                    self.agent, type(exc).__name__,
                )
                await asyncio.sleep(0.05 * tries)
                continue
            finally:
                self._lettered = None
            self._recovered()
            if count and id(record) not in lettered:
                self.processed([record])
            return True, result

    async def run_batch(
        self, records: Sequence[Any], step: Callable[[Sequence[Any]], Awaitable[None]]
    ) -> None:
        """Run ``step`` on the whole batch; if it fails for a reason of the data, run it on
        each record alone inside :meth:`run`, so only the records at fault are
        dead-lettered (``step`` must be idempotent: a record it applied before failing is
        recognised when it comes again). A broker or store failure retries the whole batch."""
        if not records:
            return
        while True:
            try:
                lettered = self._lettered = set()
                await step(records)
            except Exception as exc:  # noqa: BLE001 - sorted below
                if not is_data_fault(exc) and not await self._dependencies_healthy():
                    await self._wait_for_dependencies(exc)
                    continue
                log.warning(
                    "%s: a batch of %d failed (%s); one record at a time",
                    self.agent, len(records), type(exc).__name__,
                )
                for record in records:
                    await self.run(record, functools.partial(step, [record]))
                return
            finally:
                self._lettered = None
            self._recovered()
            self.processed([r for r in records if id(r) not in lettered] if lettered else records)
            return

    def processed(self, records: Sequence[Any]) -> None:
        """Count ``records`` processed by this agent, by their topics
        (``memstream_events_processed_total``)."""
        if len(records) == 1:
            self._processed.get(self.agent, _topic(records[0])).inc()
            return
        for topic, n in Counter(map(_topic, records)).items():
            self._processed.get(self.agent, topic).inc(n)

    async def dead_letter(self, record: Any, exc: BaseException | str) -> None:
        """Send ``record`` to the dead-letter topic with the reason ``exc`` gives."""
        reason, detail = describe(exc)
        await self.letters.record(self.agent, record, reason, detail=detail)
        self.dead_lettered += 1
        if self._lettered is not None:
            self._lettered.add(id(record))

    async def _dependencies_healthy(self) -> bool:
        for probe in self.probes:
            if not await probe.healthy():
                return False
        return True

    async def _wait_for_dependencies(self, exc: BaseException) -> None:
        if not self._retrying:
            log.error("%s: %r while a dependency is down; retrying until it is back", self.agent, exc)
        self._retrying = True
        if self.report is not None:
            self.report(self.agent, f"retrying: {type(exc).__name__} (broker or store down)")
        await self.backoff.wait()

    def _recovered(self) -> None:
        if self._retrying:
            log.info("%s: working again", self.agent)
            if self.report is not None:
                self.report(self.agent, None)
        self._retrying = False
        self.backoff.reset()


def _topic(record: Any) -> str:
    return str(getattr(record, "topic", None) or "unknown")


def describe(exc: BaseException | str) -> tuple[str, str | None]:
    """The plain reason of a failure, and the detail to keep sealed.

    An :class:`InvalidEvent` reason is written by memstream and names fields and limits
    only, so it is the reason itself. Any other exception's message may quote the record
    (a ``KeyError`` holding a value, a library quoting its input): the reason is its type,
    the message goes to the sealed detail.
    """
    if isinstance(exc, str):
        return exc, None
    if isinstance(exc, InvalidEvent):
        return f"invalid event: {exc}", exc.detail
    if isinstance(exc, SealError):
        return f"invalid event: {exc}", None
    return f"cannot be processed: {type(exc).__name__}", f"{type(exc).__name__}: {exc}"


async def supervise(
    name: str,
    run: Callable[[], Awaitable[None]],
    *,
    backoff: Backoff | None = None,
    report: StateReport | None = None,
    healthy_after_s: float = 60.0,
) -> None:
    """Run the long-lived task ``run`` and start it again whenever it raises, after a
    backoff that grows while it keeps failing (it is reset once a run lasted
    ``healthy_after_s``). Returns when ``run`` returns; cancellation passes through."""
    backoff = backoff or Backoff(initial_s=1.0, max_s=60.0)
    loop = asyncio.get_running_loop()
    cleared: asyncio.TimerHandle | None = None
    while True:
        started = time.monotonic()
        try:
            await run()
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the task restarts instead of the worker
            log.exception("%s: crashed; starting it again", name)
            if cleared is not None:
                cleared.cancel()
            if report is not None:
                # The type only: readiness is served without a token, and a message may
                # quote a record.
                report(name, f"restarting after {type(exc).__name__}")
                # Well again once a new run has lasted a while without crashing.
                cleared = loop.call_later(healthy_after_s, report, name, None)
            if time.monotonic() - started >= healthy_after_s:
                backoff.reset()
            await backoff.wait()
