"""The session table survives worker restarts exactly (changelog recovery on the real broker)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from chat import conversation
from harness import open_sessions as open_sessions_of
from harness import wait_for

from memstream.models.settings import Settings
from memstream.streams.kafka.broker import free_port
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess

USERS = [f"user{u}" for u in range(6)]


def open_sessions(round_: int) -> list[Any]:
    events = []
    for u, user in enumerate(USERS):
        turns = [
            ("user" if i % 2 == 0 else "assistant", f"round {round_} message {i} from {user}")
            for i in range(20 + 7 * u)
        ]
        session = conversation(user, f"s{u % 3}", turns, close=False, first=round_ * 100)
        events += session[1 if round_ else 0 :]
    return events


def sessions(settings: Settings) -> dict[str, Any]:
    found = open_sessions_of(settings, USERS).values()
    return {f"{s['user_id']}/{s['session_id']}": s for s in found}


def wait_for_counts(
    settings: Settings, message_counts: dict[str, int], timeout_s: float = 60
) -> dict[str, Any]:
    """The sessions once their message counts are ``message_counts``."""
    return wait_for(
        lambda: sessions(settings),
        f"the sessions to reach {message_counts}",
        timeout_s,
        until=lambda state: {k: s["message_count"] for k, s in state.items()} == message_counts,
    )


def test_session_table_comes_back_exactly_after_restarts(settings_factory, tmp_path: Path) -> None:
    settings = settings_factory(web_port=free_port(), max_messages=16)
    worker = WorkerProcess(settings, log_path=tmp_path / "worker.log").start()
    try:
        counts: dict[str, int] = {}
        for round_, stop in enumerate(["sigterm", "sigkill", "sigterm"]):
            events = open_sessions(round_)
            asyncio.run(publish_events(settings, events))
            for u, user in enumerate(USERS):
                key = f"{user}/s{u % 3}"
                counts[key] = counts.get(key, 0) + 20 + 7 * u
            before = wait_for_counts(settings, counts)
            if stop == "sigterm":
                assert worker.stop() == 0
            else:
                worker.kill()
            worker.start()
            # Lost or doubled updates show up as counts that never match; then compare it all.
            after = wait_for_counts(settings, counts)
            assert after == before, f"round {round_}: state changed across a {stop} restart"
    finally:
        worker.stop()
