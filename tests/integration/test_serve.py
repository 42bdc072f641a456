"""``memstream serve`` on the real broker, beside a worker: a conversation added over HTTP
becomes searchable over HTTP, another tenant's key sees none of it, and it is deleted over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import metric_values, wait_for, worker_metrics

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
    with (tmp_path / "serve.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "memstream.streams.cli", "serve"],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
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
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_add_search_isolate_and_delete_over_http(
    worker_settings: Settings, served: str, tmp_path: Path
) -> None:
    acme = add_key(worker_settings.api_keys_path, "acme")
    beta = add_key(worker_settings.api_keys_path, "beta")

    def call(key: str | None, method: str, path: str, **options: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.request(method, f"{served}{path}", headers=headers, timeout=30, **options)

    assert call(None, "GET", "/memories", params={"user_id": "ann"}).status_code == 401
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
    operations_are_observable(worker_settings, served, acme, memory_id, tmp_path)


def operations_are_observable(
    settings: Settings, served: str, key: str, memory_id: str, tmp_path: Path
) -> None:
    """What the requests above left in the metrics and the logs of serve and the worker."""
    root = served.removesuffix("/v1")
    traced = httpx.get(
        f"{served}/memories/{memory_id}", params={"user_id": "ann"},
        headers={"Authorization": f"Bearer {key}", "X-Request-ID": "ops-trace-1"}, timeout=30,
    )
    assert traced.headers["x-request-id"] == "ops-trace-1"
    page = httpx.get(f"{root}/metrics", timeout=30)
    assert page.status_code == 200
    requests = metric_values(page.text, "memstream_http_requests_total")
    by_route = {dict(labels)["route"] for labels in requests}
    assert {"/v1/memories", "/v1/memories/search", "/v1/memories/{memory_id}"} <= by_route
    assert memory_id not in page.text  # a series per route template, never per memory

    # serve's log: JSON lines, the traced request's under its id, no key in any of them.
    lines = [json.loads(line) for line in (tmp_path / "serve.log").read_text().splitlines()
             if line.startswith("{")]
    traced_lines = [line for line in lines if line.get("request_id") == "ops-trace-1"]
    assert [(line["route"], line["status"]) for line in traced_lines] == [("/v1/memories/{memory_id}", 200)]
    assert key not in (tmp_path / "serve.log").read_text()

    # The worker's: what its agents and its projector did, and how far behind they are.
    prefix = settings.topic_prefix
    text = worker_metrics(settings)
    processed = {
        (dict(labels)["agent"], dict(labels)["topic"]): value
        for labels, value in metric_values(text, "memstream_events_processed_total").items()
    }
    assert processed[("sessions", f"{prefix}.chat")] >= 4  # start, two messages, close
    assert processed[("extraction", f"{prefix}.consolidation")] >= 1
    assert processed[("projector", f"{prefix}.memories")] >= 2  # the extraction, a memory
    written = metric_values(text, "memstream_projector_rows_written_total")
    assert written[frozenset({("kind", "memories")})] >= 1
    extractions = metric_values(text, "memstream_extraction_seconds_count")
    assert extractions[frozenset({("extractor", "offline"), ("outcome", "recorded")})] >= 1

    def lag() -> dict[tuple[str, str], float] | None:
        found: dict[tuple[str, str], float] = {}
        for labels, value in metric_values(worker_metrics(settings), "memstream_consumer_lag").items():
            named = dict(labels)
            key_ = (named["consumer"], named["topic"])
            found[key_] = found.get(key_, 0) + value
        wanted = {("agents", f"{prefix}.chat"), ("projector", f"{prefix}.memories")}
        return found if wanted <= set(found) and not any(found.values()) else None

    # Everything processed and committed: every partition reported, none behind.
    wait_for(lag, "the worker's consumers to report no lag", timeout_s=60)
    worker_lines = [
        json.loads(line) for line in (tmp_path / "worker.log").read_text().splitlines()
        if line.startswith("{")
    ]
    assert any(line["logger"].startswith("memstream.") and line["level"] == "info" for line in worker_lines)
    assert not any(line["logger"].startswith("faust") and line["level"] == "info" for line in worker_lines)
