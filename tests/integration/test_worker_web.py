"""The worker's web port on the real broker: with a token, any worker answers for any user by
forwarding the request (and its token) to the worker that owns the user; ``/ready/`` names a
component that does not work while ``/health/`` still answers."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from chat import conversation
from harness import cli, fetch_routed, metric_values, wait_for, worker_metrics
from pydantic import SecretStr

from memstream.models.settings import Settings
from memstream.streams.kafka.broker import free_port
from memstream.streams.projector.ownership import WriterLock, partition_lock
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess, worker_healthy, worker_readiness

TOKEN = "routing-token-8d2f6a1c4e9b"


def get(settings: Settings, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """GET ``path`` with exactly ``headers``: (status, JSON body)."""
    url = f"http://{settings.web_host}:{settings.web_port}{path}"
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def url_of(settings: Settings) -> str:
    return f"http://{settings.web_host}:{settings.web_port}"


def test_a_routed_request_carries_the_token_to_the_worker_that_owns_the_user(
    settings_factory: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one = settings_factory(web_port=free_port(), web_token=TOKEN, roles="sessions")
    two = one.model_copy(update={"web_port": free_port()})
    users = [f"user{i}" for i in range(12)]
    turns = [("user", f"note {i}: the Lisbon trip") for i in range(3)]
    events = [e for u in users for e in conversation(u, "chat", turns, close=False)]
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with WorkerProcess(one, log_path=tmp_path / "one.log"), WorkerProcess(two, log_path=tmp_path / "two.log"):
        asyncio.run(publish_events(one, events))

        def owners() -> dict[str, str] | None:
            # Who answered each user's /sessions/ asked of worker one (fetch_json sends the
            # token from the settings); every user answered and both workers own some.
            found = {}
            for user in users:
                reply = fetch_routed(one, "/sessions/?" + urlencode({"user": user}))
                if reply["sessions"]:
                    found[user] = reply["served_by"]
            return found if len(found) == len(users) and len(set(found.values())) == 2 else None

        polls: list[dict[str, str] | None] = []

        def settled() -> dict[str, str] | None:
            # The same owners twice running: the workers' first rebalances are over.
            polls.append(owners())
            return polls[-1] if len(polls) > 1 and polls[-1] == polls[-2] else None

        owner = wait_for(settled, "both workers to own some users' sessions")
        assert set(owner.values()) == {url_of(one), url_of(two)}
        routed = {url_of(one): 0, url_of(two): 0}
        for asked in (one, two):
            for user in users:
                # A request the asked worker forwards goes with the caller's Authorization
                # header, and the owner checks it (without it the owner would answer 401).
                status, reply = get(asked, f"/sessions/?user={user}", bearer)
                assert status == 200 and [s["user_id"] for s in reply["sessions"]] == [user], reply
                routed[url_of(asked)] += reply["served_by"] != url_of(asked)
                status, reply = get(asked, f"/session/?user={user}&session=chat&budget=50", bearer)
                assert status == 200, reply
                assert reply["state"]["user_id"] == user and "Lisbon" in reply["prompt"]
                routed[url_of(asked)] += reply["served_by"] != url_of(asked)
                # Refused by the worker asked, before anything goes to the owner.
                for headers, suffix in (
                    ({}, ""),
                    ({"Authorization": f"Bearer {TOKEN[:-1]}x"}, ""),
                    ({"Authorization": f"Bearer {TOKEN}{TOKEN}"}, ""),
                    ({"X-Authorization": f"Bearer {TOKEN}"}, ""),
                    ({}, f"&token={TOKEN}"),
                ):
                    for page in (f"/sessions/?user={user}", f"/session/?user={user}&session=chat"):
                        status, reply = get(asked, page + suffix, headers)
                        assert status == 401 and set(reply) == {"error"}, (page, headers, reply)
            status, reply = get(asked, "/sessions/", bearer)
            assert status == 400 and set(reply) == {"error"}, reply
        # Each worker answered some users by asking the other (half of them, unless the
        # partitions moved meanwhile).
        assert all(routed.values()), routed
        # The CLI sends the token from MEMSTREAM_WEB_TOKEN, through worker one.
        on_two = next(u for u, o in owner.items() if o == url_of(two))
        assert cli(one, monkeypatch, "session", "show", "chat", "--user", on_two) == 0
        assert "note 2: the Lisbon trip" in capsys.readouterr().out
        wrong = one.model_copy(update={"web_token": SecretStr("not-the-token-at-all")})
        assert cli(wrong, monkeypatch, "session", "show", "chat", "--user", on_two) == 2
        assert "MEMSTREAM_WEB_TOKEN" in capsys.readouterr().err
        # Both workers run everything they were given: each is ready.
        for worker in (one, two):
            readiness = wait_for(
                lambda w=worker: worker_readiness(w), "the worker to be ready", until=lambda r: r["ready"]
            )
            assert {n: c["state"] for n, c in readiness["components"].items()} == {
                "app": "running", "sessions": "running", "idle-scan": "running"
            }
        # /metrics wants the token like the pages with data; the two workers' session agents
        # processed every chat event (at least once).
        with pytest.raises(urllib.error.HTTPError) as refused:
            worker_metrics(one, token="")
        assert refused.value.code == 401
        processed = sum(
            metric_values(worker_metrics(w), "memstream_events_processed_total").get(
                frozenset({("agent", "sessions"), ("topic", f"{one.topic_prefix}.chat")}), 0
            )
            for w in (one, two)
        )
        assert processed >= len(events)


def test_ready_names_a_projector_that_cannot_work_while_health_still_answers(
    settings_factory: Any, tmp_path: Path
) -> None:
    settings = settings_factory(
        web_port=free_port(), web_token=TOKEN, roles="sessions,projector", session_scan_interval_s=0.5,
        log_level="info",  # the projector logs each attempt at the lock
    )
    log = tmp_path / "worker.log"
    # Another process holds the writer locks of every partition's table in this data
    # directory: the worker's projector waits for them and projects nothing.
    locks = [WriterLock(partition_lock(settings, p)) for p in range(settings.partitions)]
    assert all(lock.try_acquire() for lock in locks)
    try:
        with WorkerProcess(settings, log_path=log):

            def the_rest_runs() -> dict[str, Any] | None:
                found = worker_readiness(settings)
                states = {n: c["state"] for n, c in found["components"].items()}
                others = {n: s for n, s in states.items() if n != "projector"}
                return found if set(others.values()) == {"running"} else None

            wait_for(the_rest_runs, "the worker's other components to run")

            def waited_twice_for_the_lock() -> bool:
                # Not ready at any point until the projector has tried a lock again (it
                # retries every second) and found it still held.
                status, found = get(settings, "/ready/")
                assert status == 503 and found["ready"] is False, found
                projector = found["components"]["projector"]
                assert projector["state"] == "starting", projector
                assert projector["reason"] == "has not caught up with the log since it started"
                assert worker_healthy(settings)  # the process answers all the same
                return log.read_text(errors="replace").count("another process writes") >= 2

            wait_for(waited_twice_for_the_lock, "the projector to find the lock held twice", 60, interval_s=0.5)
            for lock in locks:
                lock.release()
            ready = wait_for(
                lambda: worker_readiness(settings), "the projector to run", 90, until=lambda r: r["ready"]
            )
            assert ready["components"]["projector"]["state"] == "running"
            assert get(settings, "/ready/")[0] == 200
    finally:
        for lock in locks:
            lock.release()


def test_a_task_that_keeps_raising_is_started_again_and_the_worker_is_never_ready(
    settings_factory: Any, tmp_path: Path
) -> None:
    settings = settings_factory(web_port=free_port(), web_token=TOKEN, roles="sessions,projector")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    settings.lancedb_dir.write_text("a file where the projector's directory should be")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with WorkerProcess(settings, log_path=tmp_path / "worker.log") as worker:
        # The projector's supervisor starts it again after each crash (with a growing
        # backoff) instead of letting one task take the worker down; /ready/ says so and
        # never says ready, while the process keeps answering.
        def restarted_twice() -> dict[str, Any] | None:
            try:
                status, body = get(settings, "/ready/", auth)
            except OSError:
                return None  # not listening yet
            assert status == 503 and body["ready"] is False, body
            projector = body["components"]["projector"]
            return projector if projector["restarts"] >= 2 else None

        projector = wait_for(restarted_twice, "the projector to be started again twice", 90)
        assert projector["state"] == "restarting", projector
        assert projector["reason"] == "restarting after FileExistsError", projector
        assert not worker.exited()
        assert worker_healthy(settings)
        sessions = get(settings, "/ready/", auth)[1]["components"]["sessions"]
        assert sessions["state"] == "running", sessions  # the other components go on
    assert "FileExistsError" in (tmp_path / "worker.log").read_text()
