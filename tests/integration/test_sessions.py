"""Short-term memory on the real broker: eviction chunks, closes, routing, crash exactness."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from chat import conversation
from harness import fetch_routed, open_sessions, wait_for
from sealed import opened
from sealed import topic_events as sealed_topic_events

from memstream.models.events.chat import MessageAdded, SessionClosed
from memstream.models.events.consolidation import ConsolidationRequested
from memstream.models.session import SessionState, WindowLimits, apply, session_key
from memstream.models.settings import Settings
from memstream.streams.agents.session_table import window_limits
from memstream.streams.cli import main
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess, fetch_json


def topic_events(settings: Settings, name: str) -> list[Any]:
    return sealed_topic_events(settings, name)


def consolidations(settings: Settings) -> dict[str, ConsolidationRequested]:
    """Consolidation requests by event id (re-deliveries repeat an id, never a span)."""
    topic = Topics.from_settings(settings).consolidation
    return {e.event_id: e for e in topic_events(settings, topic)}


def reference_states(settings: Settings, limits: WindowLimits) -> dict[str, Any]:
    """The open sessions a crash-free worker holds: the pure fold of the chat topic."""
    values: dict[str, Any] = {}
    for record in asyncio.run(read_topic(settings, Topics.from_settings(settings).chat)):
        event = opened(settings, record.value)
        key = session_key(event.user_id, event.session_id)
        transition = apply(values.get(key), event, record.offset, limits, record.partition)  # type: ignore[arg-type]
        if not transition.skipped:
            values[key] = transition.state
    return {k: v.model_dump(mode="json") for k, v in values.items() if isinstance(v, SessionState)}


def turns(n: int, tag: str) -> list[tuple[str, str]]:
    return [("user" if i % 2 == 0 else "assistant", f"{tag} message {i} about Lisbon") for i in range(n)]


def test_long_sessions_consolidate_in_chunks_and_lose_no_message(settings_factory, tmp_path: Path) -> None:
    settings = settings_factory(web_port=free_port(), max_messages=8)
    events = conversation("ann", "long", turns(45, "long"))
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        asyncio.run(publish_events(settings, events))
        wait_for(lambda: any(c.reason == "session_closed" for c in consolidations(settings).values()),
                   what="the closing consolidation")
    requests = sorted(consolidations(settings).values(), key=lambda c: c.chunk)
    assert [c.reason for c in requests[:-1]] == ["evicted"] * (len(requests) - 1)
    assert len(requests) >= 5  # bounded pieces, not one request per message
    assert all(len(c.messages) <= 8 for c in requests)
    consolidated = [m.event_id for c in requests for m in c.messages]
    sent = [e.event_id for e in events if isinstance(e, MessageAdded)]
    assert consolidated == sent  # every message exactly once, in order


def test_idle_sessions_close_from_the_timer_and_the_close_is_an_event(
    settings_factory, tmp_path: Path
) -> None:
    settings = settings_factory(web_port=free_port(), idle_timeout_s=2, session_scan_interval_s=0.5)
    events = conversation("ann", "quiet", turns(4, "quiet"), close=False)
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        asyncio.run(publish_events(settings, events))
        wait_for(lambda: any(c.session_id == "quiet" for c in consolidations(settings).values()),
                   what="the idle close's consolidation")
        assert open_sessions(settings, ["ann"]) == {}
    closes = [e for e in topic_events(settings, Topics.from_settings(settings).chat)
              if isinstance(e, SessionClosed)]
    assert len(closes) == 1
    assert closes[0].reason == "idle" and closes[0].last_event_id == events[-1].event_id
    (request,) = consolidations(settings).values()
    assert [m.event_id for m in request.messages] == [e.event_id for e in events[1:]]


def test_double_close_and_late_events_are_handled_and_nothing_is_lost(
    settings_factory, tmp_path: Path
) -> None:
    settings = settings_factory(web_port=free_port(), idle_timeout_s=2, session_scan_interval_s=0.5)
    first = conversation("ann", "s", turns(3, "first"))
    again = conversation("ann", "s", [], close=True)[1:]  # a second close
    late = conversation("ann", "s", [("user", "one more thing about Porto")], close=False, first=50)[1:]
    for event_list, suffix in ((again, "again"), (late, "late")):
        for i, event in enumerate(event_list):
            event_list[i] = event.model_copy(update={"event_id": f"{event.event_id}-{suffix}"})
    with WorkerProcess(settings, log_path=tmp_path / "worker.log") as worker:
        asyncio.run(publish_events(settings, first + again + late))
        wait_for(lambda: len(consolidations(settings)) == 2, what="two consolidations")
        assert worker.stop() == 0
    consolidated = sorted(m.content for c in consolidations(settings).values() for m in c.messages)
    assert consolidated == sorted([t for _, t in turns(3, "first")] + ["one more thing about Porto"])
    log = (tmp_path / "worker.log").read_text()
    assert "session already closed" in log and "session reopened" in log
    letters = asyncio.run(read_topic(settings, Topics.from_settings(settings).deadletters))
    assert letters == []


def test_session_show_is_routed_to_the_worker_that_owns_the_session(
    settings_factory, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    one = settings_factory(web_port=free_port())
    two = one.model_copy(update={"web_port": free_port()})
    users = [f"user{i}" for i in range(12)]
    events = [e for u in users for e in conversation(u, "chat", turns(6, u), close=False)]
    with WorkerProcess(one, log_path=tmp_path / "one.log"), WorkerProcess(two, log_path=tmp_path / "two.log"):
        asyncio.run(publish_events(one, events))

        owners: dict[str, str] = {}

        def both_hold_all() -> bool:
            # Worker one answers for every user, forwarding to two for two's users.
            for user in users:
                reply = fetch_routed(one, f"/sessions/?user={user}")
                if reply["sessions"]:
                    owners[user] = reply["served_by"]
            return len(owners) == len(users) and len(set(owners.values())) == 2

        wait_for(both_hold_all, timeout_s=90, what="both workers to hold sessions")
        assert open_sessions(one, users) == open_sessions(two, users)
        two_url = f"http://{two.web_host}:{two.web_port}"
        local_to_two = open_sessions(two, [next(u for u, o in owners.items() if o == two_url)])
        local_to_two = next(iter(local_to_two.values()))
        for name, value in one.to_env().items():
            monkeypatch.setenv(name, value)  # the CLI asks worker one for a session on worker two
        assert main(["session", "show", "chat", "--user", local_to_two["user_id"], "--budget", "20"]) == 0
        out = capsys.readouterr().out
        assert f"{local_to_two['user_id']} message 5 about Lisbon" in out
        assert "earlier message(s) left out" in out
        for user in users:
            reply = fetch_json(one, f"/session/?user={user}&session=chat")
            assert reply["state"]["message_count"] == 6
            assert "Lisbon" in reply["context"]["entities"]
        assert main(["session", "show", "nope", "--user", users[0]]) == 1


def folded_up_to(settings: Settings, users: list[str]) -> list[int] | None:
    """The number of the last message folded into each session the worker holds (None while
    its sessions page does not answer). Reading the page also reads sessions while a
    restarted worker recovers its table, as users do."""
    try:
        found = open_sessions(settings, users).values()
    except OSError:
        return None
    numbers = []
    for state in found:
        _, marker, number = (state["last_event_id"] or "").rpartition("/m")
        numbers.append(int(number) if marker and number.isdigit() else -1)  # -1: only its start
    return numbers


def differences(found: dict[str, Any], expected: dict[str, Any]) -> str:
    """Which sessions differ from the fold, and how (for a failure message)."""
    lines = [f"{len(found)} sessions held, {len(expected)} expected"]
    for key in sorted(set(found) | set(expected)):
        got, want = found.get(key), expected.get(key)
        if got == want:
            continue
        fields = sorted(k for k in {*(got or {}), *(want or {})} if (got or {}).get(k) != (want or {}).get(k))
        summary = {k: ((got or {}).get(k), (want or {}).get(k)) for k in ("last_offset", "message_count")}
        lines.append(f"{key}: differs in {fields}; (held, expected) {summary}")
    return "\n".join(lines[:12])


def test_state_after_kill_9_mid_stream_equals_the_crash_free_fold(settings_factory, tmp_path: Path) -> None:
    # The rounds span days of event time: no over-age close may come between the fold of the
    # log and the comparison (a close is clock-driven, recorded when the scan makes it).
    settings = settings_factory(
        web_port=free_port(), max_messages=12, session_batch_size=50, max_session_age_s=90 * 86400
    )
    users = [f"user{i}" for i in range(20)]
    batches = [
        [
            e
            for u in users
            for e in conversation(u, "s", turns(150, f"{u}-{r}"), close=False, first=r * 1000)[
                (1 if r else 0) :
            ]
        ]
        for r in range(3)
    ]
    worker = WorkerProcess(settings, log_path=tmp_path / "worker.log").start()
    try:
        mid_stream = []
        for r, batch in enumerate(batches):
            publisher = threading.Thread(target=lambda b=batch: asyncio.run(publish_events(settings, b)))
            publisher.start()
            # Killed as soon as it folds this round's first events; before that it recovered
            # its table from the changelog while this loop read its sessions.
            seen: list[int] = wait_for(
                lambda: folded_up_to(settings, users) or [],
                f"the worker to fold round {r}",
                90,
                until=lambda folded, r=r: any(n >= r * 1000 for n in folded),
                interval_s=0.02,
            )
            worker.kill()
            mid_stream.append(publisher.is_alive() or len(seen) < len(users) or min(seen) < r * 1000 + 149)
            publisher.join()
            worker.start()
        limits = window_limits(settings)
        expected = reference_states(settings, limits)
        assert len(expected) == len(users)
        held: dict[str, Any] = {}

        def recovered() -> bool:
            held.clear()
            held.update(open_sessions(settings, users))
            return held == expected

        try:
            wait_for(recovered, timeout_s=90, what="the recovered state to equal the crash-free fold")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{differences(held, expected)}") from None
    finally:
        worker.stop()
    assert any(mid_stream)  # the test did kill a worker with events still to fold
    # Evicted spans reached consolidation exactly once each, despite three crashes.
    spans = [m.event_id for c in consolidations(settings).values() for m in c.messages]
    assert len(spans) == len(set(spans))
