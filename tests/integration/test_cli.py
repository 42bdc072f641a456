"""The ``memstream`` command on the real broker: publish, search, schema, demo."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest
from harness import child_process, wait_for

from memstream.models.codec import decode_event
from memstream.streams.api.auth import add_key
from memstream.streams.cli import main
from memstream.streams.cli.demo import run_demo
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics
from memstream.streams.worker.process import WorkerProcess


@pytest.fixture
def cli_env(settings_factory, monkeypatch: pytest.MonkeyPatch):
    """Settings for this test, also exported the way a user would for the command."""
    settings = settings_factory(web_port=free_port())
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    return settings


def test_publish_reports_bad_lines_by_number_and_publishes_the_valid_ones(
    cli_env, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {
        "event_id": "g1", "type": "message_added", "user_id": "ann", "session_id": "s",
        "occurred_at": "2026-11-02T09:00:00Z", "role": "user", "content": "I live in Oslo",
    }
    lines = [
        json.dumps(good),
        "{broken json",
        json.dumps({**good, "event_id": "g2", "role": "robot"}),
        "",
        json.dumps({**good, "event_id": "g3", "content": "I work at Equinor"}),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["publish", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "line 2: not JSON" in err
    assert "line 3: message_added.role" in err
    assert "published 2 event(s); 2 line(s) rejected" in out
    records = asyncio.run(read_topic(cli_env, Topics.from_settings(cli_env).chat))
    assert sorted(decode_event(r.value).event_id for r in records) == ["g1", "g3"]
    assert {r.key for r in records} == {b"ann"}


def test_publish_with_a_tenant_stores_each_event_of_the_file_as_the_tenants_user(
    cli_env, tmp_path: Path
) -> None:
    """``--tenant acme`` on a file: its ann is the user acme's API keys call ann."""
    event = {
        "type": "message_added", "session_id": "s", "occurred_at": "2026-11-02T09:00:00Z",
        "role": "user", "content": "I live in Oslo",
    }
    path = tmp_path / "events.jsonl"
    path.write_text("".join(
        json.dumps({**event, "event_id": f"t-{user}", "user_id": user}) + "\n"
        for user in ("ann", "ben")
    ))
    assert main(["publish", str(path), "--tenant", "acme"]) == 0
    records = asyncio.run(read_topic(cli_env, Topics.from_settings(cli_env).chat))
    assert {decode_event(r.value).user_id for r in records} == {"acme:ann", "acme:ben"}
    assert {r.key for r in records} == {b"acme:ann", b"acme:ben"}


def test_quick_publish_then_search_prints_the_memory_with_its_source(
    cli_env, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with WorkerProcess(cli_env, log_path=tmp_path / "worker.log"):
        assert main(["publish", "--user", "ann", "--session", "s1", "--text",
                     "My favourite colour is teal and I live in Oslo."]) == 0
        assert main(["publish", "--user", "ann", "--session", "s1", "--close"]) == 0

        def searched() -> str | None:
            capsys.readouterr()
            main(["search", "--user", "ann", "which colour do I like"])
            out = capsys.readouterr().out
            return out if "teal" in out else None

        out = wait_for(searched, "the search to find the teal memory", 60)
    assert "teal" in out
    assert "session s1" in out and "memstream.chat" not in out
    main(["search", "--user", "someone-else", "which colour do I like"])
    assert "no memories found" in capsys.readouterr().out


def test_schema_writes_one_json_schema_per_event(tmp_path: Path) -> None:
    assert main(["schema", "--out", str(tmp_path)]) == 0
    written = {p.name for p in tmp_path.glob("*.schema.json")}
    assert "message_added.schema.json" in written and "session_closed.schema.json" in written
    schema = json.loads((tmp_path / "message_added.schema.json").read_text())
    assert schema["additionalProperties"] is False
    assert "content" in schema["required"]


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_the_demo_runs_on_its_own_broker_and_data_and_leaves_the_users_untouched(
    settings_factory, capsys: pytest.CaptureFixture[str]
) -> None:
    # The user's own broker runs (the test broker) and their data directory holds data.
    settings = settings_factory(web_port=free_port())
    settings.data_dir.mkdir(parents=True)
    (settings.data_dir / "log_id").write_text("the user's log\n")
    (settings.data_dir / "lancedb").mkdir()
    (settings.data_dir / "lancedb" / "memories.lance").write_bytes(b"the user's memories")
    before = _tree(settings.data_dir)
    assert run_demo(settings) == 0
    out = capsys.readouterr().out
    assert _tree(settings.data_dir) == before
    user_topics = Topics.from_settings(settings)
    for topic in (user_topics.chat, user_topics.memories):
        assert asyncio.run(read_topic(settings, topic, timeout_s=10)) == []
    assert "started the embedded broker" in out and settings.broker not in out
    for user in ("alice", "bob", "chen"):
        assert f"== {user}:" in out
    assert "User is allergic to peanuts" in out
    assert "importance (the number before each memory): 0-1" in out
    # Bob moved: Munich first, Berlin after it and marked, and the move in his timeline.
    bob = out.split("search --user bob 'where do I live?'")[1].split("search")[0]
    assert bob.index("Munich") < bob.index("Berlin")
    assert "Berlin" in bob and "no longer holds since 2026-11-20" in bob
    alice = out.split("timeline --user alice 'budget'")[1].split("timeline")[0]
    assert alice.index("1500") < alice.index("2000") and ".. now" in alice
    assert "stopped the broker and worker the demo started" in out


def test_serve_stops_on_ctrl_c_without_a_traceback_after_the_broker_went_away(
    settings_factory, tmp_path: Path
) -> None:
    # A broker of its own: this test stops it.
    broker = EmbeddedBroker(free_port(), log_dir=tmp_path)
    settings = settings_factory(broker=broker.address, api_port=free_port(), web_port=free_port())
    key = add_key(settings.api_keys_path, "acme")
    env = {**os.environ, **settings.to_env(), "PYTHONUNBUFFERED": "1"}
    root = f"http://127.0.0.1:{settings.api_port}"
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "memstream.streams.cli", "serve"]
    headers = {"Authorization": f"Bearer {key}"}
    with broker, child_process(command, env, log) as serve:

        def answers() -> bool:
            assert serve.poll() is None, log.read_text()
            try:
                return httpx.get(f"{root}/v1/health", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(answers, "memstream serve to answer", 60)
        # A write starts the service's producer and the reader of the log's mark.
        body = {"user_id": "ann", "messages": "I live in Oslo"}
        added = httpx.post(f"{root}/v1/memories", json=body, headers=headers, timeout=60)
        assert added.status_code == 202, added.text
        broker.stop()
        broker.start()  # the same address, an empty log
        # Refused (the log is gone); the reader of the mark now fails its fetches.
        httpx.post(f"{root}/v1/memories", json=body, headers=headers, timeout=60)
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=60) in (0, 130)  # 130: stopped by Ctrl-C, as shells count
    # Log records are JSON lines; what Python prints of an exception nobody caught is not.
    printed = [line for line in log.read_text().splitlines() if not line.startswith("{")]
    assert printed == ["memstream serve: stopped (Ctrl-C)"], printed


def test_the_worker_says_in_one_line_when_it_consumes_and_where(cli_env, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    topics = Topics.from_settings(cli_env)
    with WorkerProcess(cli_env, log_path=log):
        line = wait_for(
            lambda: next((x for x in log.read_text().splitlines() if "consuming" in x), None),
            "the worker to say it consumes",
            60,
        )
    message = json.loads(line)["message"]
    assert message.startswith("memstream worker: consuming ")
    for part in (topics.chat, topics.consolidation, topics.memories, cli_env.broker,
                 f"group {cli_env.topic_prefix}.{cli_env.app_id}",
                 f"http://{cli_env.web_host}:{cli_env.web_port}/"):
        assert part in message


def test_a_cli_search_counts_as_use_like_a_clients(
    cli_env, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def listed() -> str | None:
        capsys.readouterr()
        main(["memories", "list", "--user", "ann"])  # a listing is not a use
        out = capsys.readouterr().out
        return out if "teal" in out else None

    def access_count(memory_id: str) -> int:
        assert main(["memories", "get", memory_id, "--user", "ann", "--json"]) == 0
        return int(json.loads(capsys.readouterr().out)["access_count"])

    with WorkerProcess(cli_env, log_path=tmp_path / "worker.log"):
        assert main(["publish", "--user", "ann", "--session", "s1", "--text",
                     "My favourite colour is teal."]) == 0
        assert main(["publish", "--user", "ann", "--session", "s1", "--close"]) == 0
        wait_for(listed, "the teal memory", 60)
        command = ["search", "--user", "ann", "which colour do I like", "--limit", "1", "--json"]
        assert main(command) == 0
        (hit,) = json.loads(capsys.readouterr().out)
        assert "teal" in hit["content"] and hit["access_count"] == 0
        counted = wait_for(
            lambda: access_count(hit["memory_id"]) or None,
            "the search to count as a use of the memory",
            60,
        )
    assert counted == 1
