"""``memstream serve`` when its broker goes away, on the real (embedded) broker and a real
worker: while the broker is down, and after it came back without its log (the embedded
broker keeps the log in memory), every publishing endpoint and ``/v1/ready`` answer 503 with
what is not available and what to do; after the recovery the README gives (``memstream
restore``) the same service, never restarted, writes again and is ready."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from harness import archive_caught_up, child_process, cli, wait_for
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from serving import serve_settings

from memstream.streams.api.auth import add_key
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.worker.process import WorkerProcess

BERLIN = [
    {"role": "user", "content": "I live in Berlin and I work at Siemens as a data engineer."},
    {"role": "assistant", "content": "Nice. How can I help?"},
]
OSLO = [{"role": "user", "content": "I moved to Oslo last week."}]


async def mcp_add(url: str, key: str) -> CallToolResult:
    """``add_memory`` over the MCP server at ``url``, with ``key``."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    async with Client(streamable_http_client(url, http_client=http)) as client:
        return await client.call_tool("add_memory", {"text": "I moved to Oslo.", "user_id": "ann"})


def test_publishing_and_readiness_answer_503_with_a_reason_until_the_log_is_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    broker = EmbeddedBroker(port, log_dir=tmp_path / "broker").start()
    settings = serve_settings(tmp_path, broker.address, "tansu", "loss").model_copy(
        update={"archive_flush_s": 0.5}
    )
    key = add_key(settings.api_keys_path, "acme")
    root = f"http://127.0.0.1:{settings.api_port}"
    env = {**os.environ, **settings.to_env(), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "memstream.streams.cli", "serve"]
    worker = WorkerProcess(settings, log_path=tmp_path / "worker-1.log").start()
    try:
        with child_process(command, env, tmp_path / "serve.log") as serve:

            def call(method: str, path: str, **options: Any) -> httpx.Response:
                if serve.poll() is not None:
                    raise RuntimeError(f"memstream serve exited: {(tmp_path / 'serve.log').read_text()}")
                headers = {"Authorization": f"Bearer {key}"}
                return httpx.request(method, f"{root}{path}", headers=headers, timeout=60, **options)

            def ready() -> httpx.Response:
                return call("GET", "/v1/ready")

            def answers() -> bool:
                try:
                    return call("GET", "/v1/health").status_code == 200
                except httpx.TransportError:
                    return False

            wait_for(answers, "memstream serve to answer", timeout_s=60)
            added = call("POST", "/v1/memories", json={"messages": BERLIN, "user_id": "ann", "wait": True, "timeout_s": 60})
            assert added.status_code == 200, added.text
            memory_id = added.json()["memories"][0]["memory_id"]
            wait_for(lambda: archive_caught_up(settings), "the archive")
            assert wait_for(ready, "readiness", until=lambda r: r.status_code == 200).json()["ready"]

            # Each write the API offers, and what it must say while the broker is away.
            writes: list[tuple[str, str, dict[str, Any]]] = [
                ("POST", "/v1/memories", {"json": {"messages": OSLO, "user_id": "ann"}}),
                ("DELETE", f"/v1/memories/{memory_id}", {"params": {"user_id": "ann"}}),
                ("DELETE", "/v1/memories", {"params": {"user_id": "ann"}}),
                ("POST", "/v1/sessions/trip/close", {"json": {"user_id": "ann"}}),
            ]

            def refused_saying(words: str) -> Callable[[httpx.Response], bool]:
                def check(response: httpx.Response) -> bool:
                    assert response.status_code == 503, response.text
                    body = response.json()
                    assert body["unavailable"] == "broker" and "\n" not in body["detail"]
                    return words in body["detail"]

                return check

            broker.stop()
            for method, path, options in writes:
                wait_for(partial(call, method, path, **options), f"{method} {path} to say the broker is down",
                         until=refused_saying("the broker does not answer"))
            down = wait_for(ready, "readiness to see the broker gone", until=lambda r: r.status_code == 503)
            assert down.json()["checks"]["broker"].startswith("unreachable: start the broker")
            assert down.json()["detail"].startswith("not ready: broker unreachable")

            # The broker is back, with an empty log: writes would be lost at the next restore.
            broker = EmbeddedBroker(port, log_dir=tmp_path / "broker").start()
            for method, path, options in writes:
                refusal = wait_for(partial(call, method, path, **options), f"{method} {path} to see the loss",
                                   until=refused_saying("lost its log"))
                assert "memstream restore" in refusal.json()["detail"]
                assert str(settings.data_dir) not in refusal.text  # the operator's log has the paths
            # The MCP server at /mcp of the same service says the same.
            said = asyncio.run(mcp_add(f"{root}/mcp", key))
            assert said.is_error and "lost its log" in said.content[0].text, said  # type: ignore[union-attr]
            lost = wait_for(ready, "readiness to see the lost log",
                            until=lambda r: r.status_code == 503 and "lost its log" in r.json()["checks"]["broker"])
            assert "memstream restore" in lost.json()["detail"]

            # The recovery the README gives; the service itself is not restarted.
            worker.stop()
            assert cli(settings, monkeypatch, "restore") == 0, capsys.readouterr()
            worker = WorkerProcess(settings, log_path=tmp_path / "worker-2.log").start()
            back = wait_for(ready, "readiness after the restore", until=lambda r: r.status_code == 200)
            assert back.json()["checks"]["broker"] == "ok" and back.json()["detail"] is None
            again = call("POST", "/v1/memories", json={"messages": OSLO, "user_id": "ann", "wait": True, "timeout_s": 60})
            assert again.status_code == 200 and again.json()["status"] == "searchable", again.text
    finally:
        worker.stop()
        broker.stop()
