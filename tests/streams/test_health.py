"""The component registry behind /ready/, and the wrappers that report into it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from memstream.models.settings import Settings
from memstream.streams.worker.health import (
    ComponentReport,
    Components,
    State,
    periodic,
    watch_faust,
    watched_agent,
    watched_task,
)


def states(components: Components) -> dict[str, str]:
    return {name: s.state.value for name, s in components.snapshot().components.items()}


def test_ready_only_when_every_component_runs() -> None:
    components = Components()
    assert not components.snapshot().ready  # nothing declared: nothing to vouch for
    components.expect("projector", "task")
    components.expect("sessions", "agent")
    assert states(components) == {"projector": "starting", "sessions": "starting"}
    components.running("projector")
    components.running("sessions")
    assert components.snapshot().ready
    for report in (components.blocked, components.retrying, components.failed):
        report("projector", "the broker lost its log")
        snapshot = components.snapshot()
        assert not snapshot.ready and snapshot.not_running() == ["projector"]
        components.running("projector")
    components.ended("projector", "returned")
    assert components.snapshot().not_running() == ["projector"]


def test_exception_text_is_kept_apart_from_the_reason_and_shown_only_when_asked() -> None:
    components = Components()
    components.expect("projector", "task")
    components.retrying("projector", "store failure", OSError("disk full at ann's row"))
    status = components.snapshot().components["projector"]
    assert (status.state, status.reason) == (State.RETRYING, "store failure")
    assert status.detail == "OSError: disk full at ann's row"
    public = components.snapshot().as_json(with_detail=False)
    assert public == {
        "ready": False,
        "components": {
            "projector": {
                "kind": "task",
                "state": "retrying",
                "reason": "store failure",
                "since": status.since.isoformat(),
                "restarts": 0,
            }
        },
    }
    assert "ann" not in str(public)
    shown = components.snapshot().as_json(with_detail=True)["components"]["projector"]
    assert shown["detail"] == "OSError: disk full at ann's row"


def test_a_repeated_report_keeps_the_time_the_state_began() -> None:
    components = Components()
    components.expect("archive", "task")
    components.blocked("archive", "the broker lost its log")
    first = components.snapshot().components["archive"].since
    components.blocked("archive", "the broker lost its log")
    assert components.snapshot().components["archive"].since == first


def test_names_are_declared_once_and_unknown_names_are_refused() -> None:
    components = Components()
    components.expect("archive", "task")
    with pytest.raises(ValueError, match="twice"):
        components.expect("archive", "task")
    with pytest.raises(KeyError, match="unknown component"):
        components.running("archvie")
    with pytest.raises(KeyError):
        components.reporter("nope")
    assert components.names() == ["archive"] and components.names("agent") == []


def test_a_component_reports_for_itself_through_its_handle() -> None:
    components = Components()
    components.expect("projector", "task")
    handle = components.reporter("projector")
    assert isinstance(handle, ComponentReport)
    handle.blocked("the broker lost its log")
    assert states(components) == {"projector": "blocked"}
    handle.running()
    assert components.snapshot().ready


async def test_a_watched_task_runs_reports_through_its_argument_and_ends() -> None:
    components = Components()
    seen: list[str] = []
    gate = asyncio.Event()

    async def body(health: ComponentReport) -> None:
        seen.append(states(components)["projector"])
        health.blocked("the broker lost its log")
        await gate.wait()
        health.running()

    task = watched_task(components, "projector", body)
    assert states(components) == {"projector": "starting"}
    running = asyncio.create_task(task())
    await asyncio.sleep(0)
    assert seen == ["running"] and states(components) == {"projector": "blocked"}
    gate.set()
    await running
    assert states(components) == {"projector": "ended"}
    assert components.snapshot().components["projector"].reason == "returned"


async def test_a_watched_task_that_raises_is_crashed_and_the_error_goes_on_to_faust() -> None:
    components = Components()

    async def body(health: ComponentReport) -> None:
        raise RuntimeError("lancedb is gone")

    task = watched_task(components, "projector", body)
    with pytest.raises(RuntimeError, match="lancedb is gone"):
        await task()
    status = components.snapshot().components["projector"]
    assert (status.state, status.reason) == (State.CRASHED, "raised RuntimeError")
    assert status.detail == "RuntimeError: lancedb is gone"


async def test_a_cancelled_task_has_ended() -> None:
    components = Components()

    async def body(health: ComponentReport) -> None:
        await asyncio.sleep(3600)

    running = asyncio.create_task(watched_task(components, "archive", body)())
    await asyncio.sleep(0)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert components.snapshot().components["archive"].reason == "cancelled"


def test_a_watched_task_takes_no_argument_so_faust_does_not_pass_it_the_app() -> None:
    import inspect

    async def body(health: ComponentReport) -> None:
        """Project memories."""

    task = watched_task(Components(), "projector", body)
    assert list(inspect.signature(task).parameters) == []
    assert task.__name__ == "body" and task.__doc__ == "Project memories."


async def test_a_watched_agent_is_restarting_after_it_raised_and_running_when_started_again() -> None:
    components = Components()
    calls = 0

    async def body(stream: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ValueError("bad event")

    agent = watched_agent(components, "sessions", body)
    with pytest.raises(ValueError):
        await agent(None)
    status = components.snapshot().components["sessions"]
    assert (status.state, status.reason, status.restarts) == (
        State.RESTARTING, "raised ValueError", 1
    )
    await agent(None)  # what Faust's supervisor does: a new actor runs the function again
    status = components.snapshot().components["sessions"]
    assert status.state is State.ENDED and status.restarts == 1  # it returned this time


async def test_periodic_ticks_until_a_tick_raises() -> None:
    ticks: list[int] = []

    async def tick() -> None:
        ticks.append(1)
        if len(ticks) == 3:
            raise RuntimeError("scan failed")

    async def itertimer(interval: float, name: str) -> Any:
        while True:
            yield interval

    components = Components()
    task = watched_task(components, "idle-scan", periodic(SimpleNamespace(itertimer=itertimer), 1.0, tick))
    with pytest.raises(RuntimeError):
        await task()
    assert len(ticks) == 3 and states(components) == {"idle-scan": "crashed"}


def test_probes_read_faust_state_over_what_was_reported() -> None:
    service = SimpleNamespace(crashed=False, crash_reason=None, state="running", supervisor=None)
    app = SimpleNamespace(
        crashed=False, crash_reason=None, state="init", supervisor=None, agents={"sessions": service},
        in_recovery=False,
    )
    components = Components()
    watched_agent(components, "sessions", lambda stream: asyncio.sleep(0))
    watch_faust(components, app)
    assert states(components) == {"app": "starting", "sessions": "starting"}
    app.state = "running"
    components.running("sessions")
    assert components.snapshot().ready
    app.in_recovery = True
    assert components.snapshot().components["app"].reason == (
        "recovering its tables from their changelogs"
    )
    app.in_recovery = False
    service.supervisor = SimpleNamespace(crashed=True, crash_reason=SystemExit(1))
    assert states(components)["sessions"] == "crashed"
    assert components.snapshot().components["sessions"].reason == "its supervisor crashed"
    service.supervisor = None
    app.crashed, app.crash_reason = True, RuntimeError("a task raised")
    app_status = components.snapshot().components["app"]
    assert (app_status.state, app_status.reason) == (State.CRASHED, "crashed: RuntimeError")
    assert app_status.detail == "RuntimeError: a task raised"


def test_a_built_app_declares_each_agent_and_task_of_its_roles(tmp_path: Any) -> None:
    from memstream.streams.agents.app import create_app

    components = Components()
    create_app(
        Settings(data_dir=tmp_path, topic_prefix="health", roles="sessions,projector"),
        components=components,
    )
    snapshot = components.snapshot()
    assert {n: s.kind for n, s in snapshot.components.items()} == {
        "app": "app", "sessions": "agent", "idle-scan": "task", "projector": "task"
    }
    assert not snapshot.ready  # nothing started


def test_an_agent_counts_as_restarting_until_it_has_run_a_while_without_failing() -> None:
    components = Components(settle_s=3600)
    components.expect("extraction", "agent")
    components.running("extraction")
    components.restarting("extraction", "raised KeyError")
    components.running("extraction")  # the supervisor's new actor
    status = components.snapshot().components["extraction"]
    assert (status.state, status.reason, status.restarts) == (
        State.RESTARTING, "restarted after it raised KeyError", 1
    )
    components.settle_s = 0
    assert components.snapshot().ready


def test_the_projector_is_starting_until_it_has_caught_up_once() -> None:
    from memstream.streams.projector.loop import ProjectorProgress
    from memstream.streams.worker.health import caught_up

    progress = ProjectorProgress()
    components = Components()
    components.expect("projector", "task")
    components.probe("projector", caught_up(progress))
    components.running("projector")
    status = components.snapshot().components["projector"]
    assert (status.state, status.reason) == (
        State.STARTING, "has not caught up with the log since it started"
    )
    progress.mark()
    assert components.snapshot().ready
    components.blocked("projector", "the broker lost its log")  # reports still count
    assert components.snapshot().components["projector"].state is State.BLOCKED


def test_a_worker_blocked_for_good_stays_blocked_whatever_its_components_report_later() -> None:
    components = Components()
    components.expect("projector", "task")
    components.expect("sessions", "agent")
    components.expect("archive", "task")
    components.running("projector")
    components.running("sessions")
    components.running("archive")
    components.block_all("the broker lost its log: run memstream restore")
    # A boundary whose broker answers again reports running; a supervisor restarts a task.
    components.running("projector")
    components.restarting("sessions", "restarting after OSError")
    components.ended("archive", "returned")
    snapshot = components.snapshot()
    assert not snapshot.ready
    assert states(components) == {"projector": "blocked", "sessions": "blocked", "archive": "ended"}
    assert snapshot.components["projector"].reason == "the broker lost its log: run memstream restore"
