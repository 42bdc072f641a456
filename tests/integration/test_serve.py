"""``memstream serve`` on the real broker, beside a worker: a conversation added over HTTP
becomes searchable over HTTP, another tenant's key sees none of it, and it is deleted over HTTP."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import child_process, wait_for

from memstream.models.settings import Settings
from memstream.streams.api.auth import add_key
from memstream.streams.runtime.broker import free_port
from memstream.streams.runtime.worker import WorkerProcess

BERLIN = [
    {"role": "user", "content": "I live in Berlin and I work at Siemens as a data engineer."},
    {"role": "assistant", "content": "Nice. How can I help?"},
]


@pytest.fixture
def worker_settings(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> Iterator[Settings]:
    """Settings of a running worker, with a port for the API."""
    settings = settings_factory(web_port=free_port(), api_port=free_port())
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        yield settings


@pytest.fixture
def served(worker_settings: Settings, tmp_path: Path) -> Iterator[str]:
    """``memstream serve`` in a child process, with the worker's settings; its /v1 URL."""
    env = {**os.environ, **worker_settings.to_env(), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "memstream.streams.cli", "serve"]
    with child_process(command, env, tmp_path / "serve.log") as process:
        url = f"http://127.0.0.1:{worker_settings.api_port}/v1"

        def healthy() -> bool:
            if process.poll() is not None:
                output = (tmp_path / "serve.log").read_text()
                raise RuntimeError(f"memstream serve exited: {output}")
            try:
                return httpx.get(f"{url}/health", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(healthy, "memstream serve to answer", timeout_s=60)
        yield url


def test_add_search_isolate_and_delete_over_http(worker_settings: Settings, served: str) -> None:
    acme = add_key(worker_settings.api_keys_path, "acme")
    beta = add_key(worker_settings.api_keys_path, "beta")

    def call(key: str | None, method: str, path: str, **options: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.request(method, f"{served}{path}", headers=headers, timeout=30, **options)

    assert call(None, "GET", "/memories", params={"user_id": "ann"}).status_code == 401
    # The MCP server is mounted beside the API, behind the same keys.
    assert httpx.post(served.removesuffix("/v1") + "/mcp", json={}).status_code == 401
    added = call(acme, "POST", "/memories", json={"messages": BERLIN, "user_id": "ann"})
    assert added.status_code == 202, added.text
    assert added.json()["user_id"] == "ann" and len(added.json()["event_ids"]) == 4

    def search(key: str) -> list[dict[str, Any]]:
        query = {"query": "where does the user live", "user_id": "ann"}
        response = call(key, "POST", "/memories/search", json=query)
        assert response.status_code == 200, response.text
        return list(response.json()["results"])

    hits = wait_for(
        lambda: search(acme),
        "ann's Berlin memory over HTTP",
        until=lambda found: any("Berlin" in hit["memory"] for hit in found),
    )
    berlin = next(hit for hit in hits if "Berlin" in hit["memory"])
    assert berlin["session_id"] == added.json()["session_id"]
    memory_id = berlin["memory_id"]
    assert call(acme, "GET", f"/memories/{memory_id}", params={"user_id": "ann"}).status_code == 200
    life = call(acme, "GET", f"/memories/{memory_id}/history", params={"user_id": "ann"})
    assert life.status_code == 200 and life.json()["results"][0]["type"] == "memory_added"

    # Tenant beta's "ann" is another user: nothing of acme's ann reaches beta's key.
    assert search(beta) == []
    listed = call(beta, "GET", "/memories", params={"user_id": "ann", "include_inactive": "true"})
    assert listed.status_code == 200 and listed.json()["results"] == []
    for method, path in [
        ("GET", f"/memories/{memory_id}"),
        ("GET", f"/memories/{memory_id}/history"),
        ("DELETE", f"/memories/{memory_id}"),
    ]:
        response = call(beta, method, path, params={"user_id": "ann"})
        assert response.status_code == 404 and "Berlin" not in response.text
    for spelled in ("acme:ann", "ann"):
        assert "Berlin" not in call(beta, "GET", "/memories", params={"user_id": spelled}).text

    deleted = call(acme, "DELETE", f"/memories/{memory_id}", params={"user_id": "ann"})
    assert deleted.status_code == 202 and deleted.json()["memory_id"] == memory_id
    wait_for(
        lambda: call(acme, "GET", "/memories", params={"user_id": "ann"}).json()["results"],
        "the deleted memory to go",
        until=lambda found: memory_id not in {m["memory_id"] for m in found},
    )
