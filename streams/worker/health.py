"""What the worker's parts are doing: a registry the readiness page reads.

Every agent and task the worker runs is a *component* with a state. The wrappers here report
the states Faust does not keep for us (an agent's actor that raised and is being restarted,
a task that ended), and probes read the ones it does keep (a crashed app, agent or agent
supervisor: ``mode.Service.crashed`` / ``crash_reason``) or other signs of work (the memory
projector has caught up with the log). A component can also report for itself through the
:class:`ComponentReport` its task function receives, e.g. the memory projector saying it is
blocked because the broker lost its log::

    async def project_memories(health: ComponentReport) -> None:
        ...
        health.blocked("the broker lost its log")
        ...
        health.running()

The worker is ready when every component is ``running``.

Reasons are shown to anyone who can reach the web port (the readiness page stays open, so
a load balancer can ask it), so a reason is a fixed text written in code, never user data;
an exception passed as ``error`` is shown only to requests that carry the web token.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, Protocol

#: What a component is; shown in the readiness page.
Kind = Literal["app", "agent", "task"]

#: The longest exception text kept for a component (it is for an operator, not a log).
MAX_DETAIL_CHARS = 500


class State(StrEnum):
    """A component's state; only ``running`` counts as ready."""

    STARTING = "starting"
    RUNNING = "running"
    #: An agent's actor raised; Faust's supervisor is starting a new one.
    RESTARTING = "restarting"
    #: The component works around a failure it expects to pass (e.g. a store failure).
    RETRYING = "retrying"
    #: The component cannot go on until someone acts (e.g. the broker lost its log).
    BLOCKED = "blocked"
    CRASHED = "crashed"
    #: The component's task returned or was cancelled: it does nothing any more.
    ENDED = "ended"


@dataclass(frozen=True)
class Status:
    """One component's state as the readiness page shows it.

    ``reason`` is fixed text (shown to anyone); ``detail`` is the text of the exception
    behind it, if any (shown only with the web token).
    """

    kind: Kind
    state: State
    #: When the component entered this state (UTC).
    since: datetime
    reason: str | None = None
    detail: str | None = None
    #: How often an agent's actor raised and was restarted since the worker started.
    restarts: int = 0
    #: When it last reported ``restarting``, and why (for the settling time after it).
    restarted_at: datetime | None = None
    restarted_because: str | None = None

    def as_json(self, *, with_detail: bool) -> dict[str, Any]:
        """This status as JSON; the exception text only if ``with_detail``."""
        shown: dict[str, Any] = {
            "kind": self.kind,
            "state": self.state.value,
            "reason": self.reason,
            "since": self.since.isoformat(),
            "restarts": self.restarts,
        }
        if with_detail:
            shown["detail"] = self.detail
        return shown


@dataclass(frozen=True)
class Observed:
    """What a probe sees of a component, overriding what was reported."""

    state: State
    reason: str | None = None
    error: BaseException | None = None


#: A probe: given the component's status so far, what its own state says now, or None to
#: leave the status as it is.
Probe = Callable[[Status], Observed | None]


@dataclass(frozen=True)
class Readiness:
    """Every component's status at one moment; ready when all are running."""

    components: Mapping[str, Status]

    @property
    def ready(self) -> bool:
        """Whether every component is running (and there is at least one)."""
        return bool(self.components) and all(
            status.state is State.RUNNING for status in self.components.values()
        )

    def not_running(self) -> list[str]:
        """Names of the components that are not running, in name order."""
        return sorted(n for n, s in self.components.items() if s.state is not State.RUNNING)

    def as_json(self, *, with_detail: bool) -> dict[str, Any]:
        """``{"ready": bool, "components": {name: status}}``; see :meth:`Status.as_json`."""
        return {
            "ready": self.ready,
            "components": {
                name: status.as_json(with_detail=with_detail)
                for name, status in sorted(self.components.items())
            },
        }


def _detail(error: BaseException | None) -> str | None:
    if error is None:
        return None
    return f"{type(error).__name__}: {error}"[:MAX_DETAIL_CHARS]


def _now() -> datetime:
    return datetime.now(UTC)


class Components:
    """The registry of the worker's components and their states.

    Thread-safe: a component may report from a worker thread (``asyncio.to_thread``).

    Examples
    --------
    >>> components = Components()
    >>> components.expect("projector", "task")
    >>> components.snapshot().ready
    False
    >>> components.running("projector")
    >>> components.snapshot().ready
    True
    >>> components.blocked("projector", "the broker lost its log")
    >>> components.snapshot().components["projector"].state.value
    'blocked'
    """

    def __init__(self, settle_s: float = 30.0) -> None:
        #: After a restart an agent counts as restarting until it has run this long without
        #: failing again: one that fails at every batch is not ready between its restarts.
        self.settle_s = settle_s
        self._lock = threading.Lock()
        self._statuses: dict[str, Status] = {}
        self._probes: dict[str, list[Probe]] = {}
        #: Why the whole worker is blocked for good (see :meth:`block_all`).
        self._held: tuple[str, datetime] | None = None

    def expect(self, name: str, kind: Kind) -> None:
        """Declare a component; it is ``starting`` until it reports otherwise."""
        with self._lock:
            if name in self._statuses:
                raise ValueError(f"component {name!r} is declared twice")
            self._statuses[name] = Status(kind=kind, state=State.STARTING, since=_now())

    def probe(self, name: str, probe: Probe) -> None:
        """Ask ``probe`` at every snapshot; what it returns replaces the reported state.
        A component's probes run in the order they were added, each given the status the
        ones before it left."""
        with self._lock:
            self._known(name)
            self._probes.setdefault(name, []).append(probe)

    def running(self, name: str) -> None:
        """The component works."""
        self._report(name, State.RUNNING, None, None)

    def restarting(self, name: str, reason: str, error: BaseException | None = None) -> None:
        """The component failed and is being started again (counts a restart)."""
        self._report(name, State.RESTARTING, reason, error, restarted=True)

    def retrying(self, name: str, reason: str, error: BaseException | None = None) -> None:
        """The component works around a failure it expects to pass."""
        self._report(name, State.RETRYING, reason, error)

    def blocked(self, name: str, reason: str, error: BaseException | None = None) -> None:
        """The component cannot go on until someone acts."""
        self._report(name, State.BLOCKED, reason, error)

    def failed(self, name: str, reason: str, error: BaseException | None = None) -> None:
        """The component crashed and will not come back by itself."""
        self._report(name, State.CRASHED, reason, error)

    def ended(self, name: str, reason: str) -> None:
        """The component's task is over (returned, or cancelled)."""
        self._report(name, State.ENDED, reason, None)

    def block_all(self, reason: str) -> None:
        """The whole worker cannot go on until someone acts (the broker lost its log):
        from now on every component reads ``blocked`` with ``reason``, whatever it reports
        afterwards (a boundary whose broker answers again reports ``running``, but nothing
        is processed), unless it crashed or ended."""
        with self._lock:
            if self._held is None:
                self._held = (reason, _now())

    def names(self, kind: Kind | None = None) -> list[str]:
        """The declared components (of ``kind``, if given), in name order."""
        with self._lock:
            return sorted(n for n, s in self._statuses.items() if kind in (None, s.kind))

    def reporter(self, name: str) -> ComponentReport:
        """A handle that reports for ``name`` only, to give to the component itself."""
        with self._lock:
            self._known(name)
        return ComponentReport(self, name)

    def snapshot(self) -> Readiness:
        """Every component's status now: what it reported, unsettled restarts, then what
        its probes say."""
        now = _now()
        with self._lock:
            statuses = dict(self._statuses)
            probes = {name: list(found) for name, found in self._probes.items()}
            held = self._held
        for name, status in statuses.items():
            if (
                status.state is State.RUNNING
                and status.restarted_at is not None
                and (now - status.restarted_at).total_seconds() < self.settle_s
            ):
                statuses[name] = replace(
                    status,
                    state=State.RESTARTING,
                    reason=f"restarted after it {status.restarted_because}",
                )
        for name, found in probes.items():
            for probe in found:
                status = statuses[name]
                observed = probe(status)
                if observed is None or (observed.state, observed.reason) == (
                    status.state, status.reason
                ):
                    continue
                statuses[name] = replace(
                    status,
                    state=observed.state,
                    reason=observed.reason,
                    detail=_detail(observed.error),
                )
        if held is not None:
            reason, since = held
            for name, status in statuses.items():
                if status.state not in (State.CRASHED, State.ENDED):
                    statuses[name] = replace(
                        status, state=State.BLOCKED, reason=reason, detail=None, since=since
                    )
        return Readiness(statuses)

    def _report(
        self,
        name: str,
        state: State,
        reason: str | None,
        error: BaseException | None,
        *,
        restarted: bool = False,
    ) -> None:
        with self._lock:
            status = self._known(name)
            if (state, reason) == (status.state, status.reason) and not restarted:
                return  # keep the time it entered the state
            now = _now()
            self._statuses[name] = replace(
                status,
                state=state,
                reason=reason,
                detail=_detail(error),
                since=now,
                restarts=status.restarts + restarted,
                restarted_at=now if restarted else status.restarted_at,
                restarted_because=reason if restarted else status.restarted_because,
            )

    def _known(self, name: str) -> Status:
        try:
            return self._statuses[name]
        except KeyError:
            raise KeyError(f"unknown component {name!r}; declare it with expect()") from None


@dataclass(frozen=True)
class ComponentReport:
    """What one component uses to report its own state (see :class:`Components`)."""

    components: Components
    name: str

    def running(self) -> None:
        """The component works (again)."""
        self.components.running(self.name)

    def retrying(self, reason: str, error: BaseException | None = None) -> None:
        """The component works around a failure it expects to pass, e.g. a store failure."""
        self.components.retrying(self.name, reason, error)

    def blocked(self, reason: str, error: BaseException | None = None) -> None:
        """The component cannot go on until someone acts, e.g. the broker lost its log."""
        self.components.blocked(self.name, reason, error)

    def failed(self, reason: str, error: BaseException | None = None) -> None:
        """The component crashed and will not come back by itself."""
        self.components.failed(self.name, reason, error)


#: A task's body: it receives the handle it reports through.
TaskBody = Callable[[ComponentReport], Awaitable[None]]


def watched_task(components: Components, name: str, body: TaskBody) -> Callable[[], Awaitable[None]]:
    """Declare the task ``name`` and wrap ``body`` to report its life.

    The wrapped task is ``running`` once it starts (``body`` may report otherwise through
    its :class:`ComponentReport`), ``ended`` when it returns or is cancelled, and
    ``crashed`` when it raises. The exception is raised again, so Faust does what it did
    before (a task that raises crashes the app).
    """
    components.expect(name, "task")
    report = components.reporter(name)

    # Not functools.wraps: Faust passes the app to a task whose signature (which follows
    # __wrapped__) takes an argument.
    async def task() -> None:
        report.running()
        try:
            await body(report)
        except asyncio.CancelledError:
            components.ended(name, "cancelled")
            raise
        except BaseException as exc:
            report.failed(f"raised {type(exc).__name__}", exc)
            raise
        components.ended(name, "returned")

    _name_after(task, body)
    return task


AgentBody = Callable[[Any], Awaitable[None]]


def watched_agent(components: Components, name: str, body: AgentBody) -> AgentBody:
    """Declare the agent ``name`` and wrap its function to report its actor's life.

    ``running`` while an actor runs the function; ``restarting`` when it raised (Faust's
    supervisor starts a new actor, which reports ``running`` again, though it counts as
    restarting for :attr:`Components.settle_s`); ``ended`` if the function returns. A
    crash of the agent itself or of its supervisor is read from Faust by
    :func:`watch_faust`.
    """
    components.expect(name, "agent")

    @functools.wraps(body)
    async def agent(stream: Any) -> None:
        components.running(name)
        try:
            await body(stream)
        except asyncio.CancelledError:
            # A rebalance (Faust starts a new actor) or a stop (the probe says so).
            raise
        except Exception as exc:
            components.restarting(name, f"raised {type(exc).__name__}", exc)
            raise
        components.ended(name, "returned")

    return agent


def periodic(app: Any, interval_s: float, tick: Callable[[], Awaitable[None]]) -> TaskBody:
    """A task body that runs ``tick`` every ``interval_s`` seconds, as ``app.timer`` does
    (through ``app.itertimer``), for :func:`watched_task`: a tick that raises ends the task."""

    async def every(health: ComponentReport) -> None:
        async for _ in app.itertimer(interval_s, name=tick.__qualname__):
            await tick()

    _name_after(every, tick)
    return every


def _name_after(wrapper: Callable[..., Any], wrapped: Callable[..., Any]) -> None:
    """Give ``wrapper`` the name and docstring of ``wrapped`` (Faust labels tasks by name)."""
    for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(wrapper, attribute, getattr(wrapped, attribute, None))


def _service_probe(service: Callable[[], Any], *, healthy: State | None) -> Probe:
    """A probe of a ``mode.Service`` (found by calling ``service``): crashed with its crash
    reason, starting before it started, ended once it stops; ``healthy`` otherwise (None:
    go by the reports)."""

    def probe(status: Status) -> Observed | None:
        found = service()
        if found is None:
            return Observed(State.STARTING, "not created yet")
        if found.crashed:
            reason = found.crash_reason
            cause = f"crashed: {type(reason).__name__}" if reason is not None else "crashed"
            return Observed(State.CRASHED, cause, reason)
        supervisor = getattr(found, "supervisor", None)
        if supervisor is not None and getattr(supervisor, "crashed", False):
            reason = supervisor.crash_reason
            return Observed(State.CRASHED, "its supervisor crashed", reason)
        state = found.state
        if state == "init":
            return Observed(State.STARTING, "not started")
        if state in ("stopping", "shutdown"):
            return Observed(State.ENDED, state)
        if healthy is None or status.state in (State.BLOCKED, State.RETRYING):
            return None  # what the component reported about itself stands
        return Observed(healthy)

    return probe


class CatchUp(Protocol):
    """What :func:`caught_up` reads: ``ProjectorProgress`` of the memory projector."""

    #: ``time.monotonic()`` of the last time it held everything in the log (None: never).
    caught_up_at: float | None


def caught_up(progress: CatchUp) -> Probe:
    """A probe that keeps a running component ``starting`` until ``progress`` says it has
    caught up with the log once: a projector still replaying, or waiting for another
    process's writer lock, serves stale memories."""

    def probe(status: Status) -> Observed | None:
        if status.state is State.RUNNING and progress.caught_up_at is None:
            return Observed(State.STARTING, "has not caught up with the log since it started")
        return None

    return probe


def watch_faust(components: Components, app: Any) -> None:
    """Declare the Faust app as the component ``app`` and probe it and every agent declared
    with :func:`watched_agent` that ``app`` runs (``app.agents``), through their
    ``mode.Service`` state; the app is ``starting`` while it recovers its tables."""
    components.expect("app", "app")
    components.probe("app", _service_probe(lambda: app, healthy=State.RUNNING))

    def recovering(status: Status) -> Observed | None:
        # Faust sets in_recovery while it reads a table's changelog (after the start and
        # after each rebalance): the sessions table is incomplete meanwhile.
        if status.state is State.RUNNING and getattr(app, "in_recovery", False):
            return Observed(State.STARTING, "recovering its tables from their changelogs")
        return None

    components.probe("app", recovering)
    for name in components.names("agent"):
        if name in app.agents:
            lookup: Callable[[], Any] = functools.partial(app.agents.get, name)
            components.probe(name, _service_probe(lookup, healthy=None))
