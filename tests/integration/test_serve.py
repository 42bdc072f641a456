"""``memstream serve`` on the real broker, beside a real worker (one of each for the module):
conversations added over HTTP become searchable over HTTP, ``wait`` answers once they are,
another tenant's key sees none of it, an open session's working memory is routed to the
worker that holds it, the reports and the tenant's users are served, and a user is erased."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import metric_values, wait_for, worker_metrics
from serving import serve_settings, serving

from memstream.models.settings import Settings
from memstream.streams.api.auth import add_key

BERLIN = [
    {"role": "user", "content": "I live in Berlin and I work at Siemens as a data engineer."},
    {"role": "assistant", "content": "Nice. How can I help?"},
]


@dataclass
class Stack:
    settings: Settings
    url: str
    acme: str
    beta: str
    #: The same API, served inside the worker (MEMSTREAM_SERVE_IN_WORKER).
    worker_url: str
    #: Where serve.log and worker.log are.
    tmp: Path

    def call(self, key: str | None, method: str, path: str, **options: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=60, **options)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, broker_address: str, broker_kind: str
) -> Iterator[Stack]:
    """A worker and ``memstream serve`` in child processes, on one settings; two tenants. The
    worker serves the API too, on a port of its own."""
    tmp = tmp_path_factory.mktemp("serve")
    settings = serve_settings(tmp, broker_address, broker_kind, "srv")
    acme = add_key(settings.api_keys_path, "acme")
    beta = add_key(settings.api_keys_path, "beta")
    with serving(settings, tmp) as served:
        yield Stack(settings, f"{served.root}/v1", acme, beta, f"{served.worker_root}/v1", tmp)


def test_add_search_isolate_and_delete_over_http(stack: Stack) -> None:
    acme, beta, call = stack.acme, stack.beta, stack.call
    assert call(None, "GET", "/memories", params={"user_id": "ann"}).status_code == 401
    # The MCP server is mounted beside the API, behind the same keys.
    assert httpx.post(stack.url.removesuffix("/v1") + "/mcp", json={}).status_code == 401
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
    life = call(
        acme, "GET", f"/memories/{memory_id}/history", params={"user_id": "ann", "sources": "true"}
    )
    assert life.status_code == 200 and life.json()["results"][0]["type"] == "memory_added"
    # The memory's source events, opened from the chat topic: the user's own words.
    assert any("Siemens" in source["content"] for source in life.json()["sources"])

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

    # Any instance answers: the API inside the worker finds the same memories.
    inside = httpx.post(
        f"{stack.worker_url}/memories/search",
        json={"query": "where does the user live", "user_id": "ann"},
        headers={"Authorization": f"Bearer {acme}"}, timeout=60,
    )
    assert inside.status_code == 200, inside.text
    assert memory_id in {hit["memory_id"] for hit in inside.json()["results"]}

    deleted = call(acme, "DELETE", f"/memories/{memory_id}", params={"user_id": "ann"})
    assert deleted.status_code == 202 and deleted.json()["memory_id"] == memory_id
    wait_for(
        lambda: call(acme, "GET", "/memories", params={"user_id": "ann"}).json()["results"],
        "the deleted memory to go",
        until=lambda found: memory_id not in {m["memory_id"] for m in found},
    )


def test_add_with_wait_answers_once_what_it_made_is_searchable(stack: Stack) -> None:
    acme, call = stack.acme, stack.call
    first = call(
        acme, "POST", "/memories",
        json={"messages": BERLIN, "user_id": "bo", "wait": True, "timeout_s": 60},
    )
    assert first.status_code == 200, first.text
    made = first.json()
    assert made["status"] == "searchable" and made["failures"] == []
    facts = {m["memory"]: m for m in made["memories"] if m["type"] == "fact"}
    lives = next(m for text, m in facts.items() if "Berlin" in text)
    assert lives["decision"] == "added" and lives["status"] == "active"
    assert {m["session_id"] for m in made["memories"]} == {made["session_id"]}
    # Searchable the moment the answer came: no polling.
    hits = call(
        acme, "POST", "/memories/search", json={"query": "where does bo live", "user_id": "bo"}
    ).json()["results"]
    assert lives["memory_id"] in {hit["memory_id"] for hit in hits}

    # The same fact again reinforces the memory; a move supersedes it.
    again = call(
        acme, "POST", "/memories",
        json={"messages": "I live in Berlin.", "user_id": "bo", "wait": True, "timeout_s": 60},
    ).json()
    assert again["status"] == "searchable"
    assert {
        (m["memory_id"], m["decision"]) for m in again["memories"] if m["type"] == "fact"
    } == {(lives["memory_id"], "reinforced")}
    moved = call(
        acme, "POST", "/memories",
        json={"messages": "I live in Munich now.", "user_id": "bo", "wait": True, "timeout_s": 60},
    ).json()
    assert moved["status"] == "searchable" and moved["superseded"] == [lives["memory_id"]]
    old = call(acme, "GET", f"/memories/{lives['memory_id']}", params={"user_id": "bo"}).json()
    assert old["status"] == "superseded"


def test_an_open_sessions_working_memory_is_routed_to_its_worker(stack: Stack) -> None:
    acme, beta, call = stack.acme, stack.beta, stack.call
    opened = call(
        acme, "POST", "/memories",
        json={"messages": "Plan my trip to Kyoto in May.", "user_id": "cy", "session_id": "kyoto",
              "close": False},
    )
    assert opened.status_code == 202, opened.text

    def context() -> httpx.Response:
        return call(acme, "GET", "/sessions/kyoto/context", params={"user_id": "cy"})

    found = wait_for(context, "the open session", until=lambda r: r.status_code == 200)
    body = found.json()
    assert "Kyoto" in body["prompt"] and body["user_id"] == "cy" and "acme:" not in found.text
    assert body["context"]["turn_count"] == 1 and body["served_by"]
    other = call(beta, "GET", "/sessions/kyoto/context", params={"user_id": "cy"})
    assert other.status_code == 404 and "Kyoto" not in other.text
    closed = call(acme, "POST", "/sessions/kyoto/close", json={"user_id": "cy"})
    assert closed.status_code == 202
    wait_for(context, "the session to close", until=lambda r: r.status_code == 404)


def test_reports_users_readiness_and_erasure(stack: Stack) -> None:
    acme, beta, call = stack.acme, stack.beta, stack.call
    made = call(
        acme, "POST", "/memories",
        json={"messages": "I prefer green tea and I live in Oslo.", "user_id": "di", "wait": True,
              "timeout_s": 60},
    ).json()
    assert made["status"] == "searchable", made
    call(beta, "POST", "/memories", json={"messages": "I live in Rome.", "user_id": "eve",
                                          "wait": True, "timeout_s": 60})

    users = call(acme, "GET", "/users").json()["results"]
    assert "di" in {u["user_id"] for u in users} and "eve" not in {u["user_id"] for u in users}
    assert next(u for u in users if u["user_id"] == "di")["active"] == len(made["memories"])
    growth = call(acme, "GET", "/reports/growth", params={"user_id": "di"})
    assert growth.status_code == 200 and growth.json()["rows"], growth.text
    assert "acme:" not in growth.text and "Rome" not in growth.text
    png = call(acme, "GET", "/reports/growth", params={"user_id": "di", "format": "png"})
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
    ready = call(None, "GET", "/ready")
    assert ready.status_code == 200 and ready.json()["checks"]["worker"] == "ok", ready.text

    # An id that spells another tenant's user is still acme's own (and has nothing).
    spelled = call(acme, "POST", "/erasures", json={"user_id": "beta:eve"})
    assert spelled.status_code == 200 and spelled.json()["removed"]["keys destroyed"] == 0
    erased = call(acme, "POST", "/erasures", json={"user_id": "di", "reason": "gdpr.art17"})
    assert erased.status_code == 200, erased.text
    receipt = erased.json()
    live_rows = [n for name, n in receipt["removed"].items() if name.startswith("memory rows")]
    assert receipt["complete"] and receipt["removed"]["keys destroyed"] >= 1, (receipt["notes"], receipt["removed"])
    assert sum(live_rows) >= len(made["memories"]), receipt
    assert call(acme, "GET", "/memories", params={"user_id": "di"}).json()["results"] == []
    assert call(
        beta, "GET", "/memories", params={"user_id": "eve"}
    ).json()["results"], "another tenant's user is untouched"


def test_an_application_uses_memory_over_http_with_the_client(stack: Stack) -> None:
    from memstream import MemoryClient

    with MemoryClient(url=stack.url.removesuffix("/v1"), api_key=stack.acme) as memory:
        made = memory.add(
            [{"role": "user", "content": "I live in Porto and I prefer aisle seats."}],
            user_id="fay", wait=True,
        )
        assert made["status"] == "searchable" and made["memories"]
        hits = memory.search("where does fay live", user_id="fay")
        assert any("Porto" in hit["memory"] for hit in hits)
        context = memory.context("Book me a seat to my home town", user_id="fay")
        assert "Porto" in context["context"]
        assert memory.get_all(user_id="fay") and memory.report("growth", user_id="fay")["rows"]


def test_a_user_published_with_the_command_is_the_same_user_over_http(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``memstream publish --tenant acme --user cleo`` writes the user acme's keys call cleo;
    without ``--tenant`` the command says that its user is one no key reaches, and how to
    name the tenant's."""
    from memstream.streams.cli import main

    for name, value in stack.settings.to_env().items():
        monkeypatch.setenv(name, value)
    acme, call = stack.acme, stack.call
    cleo = ["--tenant", "acme", "--user", "cleo", "--session", "c1"]
    assert main(["publish", *cleo, "--text", "I live in Tromsø and I keep bees."]) == 0
    assert main(["publish", *cleo, "--close"]) == 0

    def search() -> list[dict[str, Any]]:
        query = {"query": "where does cleo live", "user_id": "cleo"}
        return list(call(acme, "POST", "/memories/search", json=query).json()["results"])

    hits = wait_for(search, "cleo's memory over HTTP", until=lambda found: any(
        "Tromsø" in hit["memory"] for hit in found
    ))
    assert {hit["session_id"] for hit in hits} == {"c1"}
    # The inspector's list of the tenant's users has her, and the command reads the same user.
    assert "cleo" in {user["user_id"] for user in call(acme, "GET", "/users").json()["results"]}
    capsys.readouterr()
    assert main(["memories", "list", "--tenant", "acme", "--user", "cleo"]) == 0
    assert "Tromsø" in capsys.readouterr().out

    # The command's cleo without a tenant is another user, and the command says so.
    assert main(["search", "--user", "cleo", "where do I live"]) == 0
    out, err = capsys.readouterr()
    assert "no memories found for user 'cleo'" in out
    assert "no API key reaches" in err and "--tenant acme" in err
    assert main(["publish", "--user", "dora", "--session", "d1", "--text", "I live in Bergen."]) == 0
    out, err = capsys.readouterr()
    assert "published 1 event(s)" in out
    assert err.count("\n") == 1 and "'dora' is in no tenant" in err and "--tenant acme" in err


def test_operations_are_observable(stack: Stack) -> None:
    """What requests leave in the metrics and the logs of serve and the worker."""
    settings, served, key, tmp_path = stack.settings, stack.url, stack.acme, stack.tmp
    made = stack.call(
        key, "POST", "/memories",
        json={"messages": BERLIN, "user_id": "gus", "wait": True, "timeout_s": 60},
    ).json()
    memory_id = made["memories"][0]["memory_id"]
    stack.call(key, "POST", "/memories/search", json={"query": "Berlin", "user_id": "gus"})
    root = served.removesuffix("/v1")
    traced = httpx.get(
        f"{served}/memories/{memory_id}", params={"user_id": "gus"},
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
    # The memory's candidate embedded by the decisions, its search text by the projector.
    embedded = metric_values(text, "memstream_embedded_texts_total")
    assert embedded[frozenset({("stage", "decisions")})] >= 1
    # The memory events carry their vectors: the projection embeds nothing again.
    assert embedded.get(frozenset({("stage", "projection")}), 0) == 0

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

