"""Operations without a broker: the HTTP API's request ids, access log and /metrics driven in
process; the JSON log lines; the consumer lag read from a consumer's positions.

What a user cares about: a caller can follow a request by its id through the log; the log
never holds a key, a token or anyone's words; /metrics is Prometheus' format, with a series
per route template however many ids callers send.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fakes import FakeEmbedder, InMemoryMemoryIndex, InMemoryPublisher
from faust.types import TP
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from memstream.models.codec import EventLimits
from memstream.models.events.memory import MemoryAdded
from memstream.models.settings import Settings
from memstream.projections.memories import SourcePosition
from memstream.streams.api.app import create_api
from memstream.streams.api.auth import ApiKey, KeyFile
from memstream.streams.api.observability import SAFE_REQUEST_ID
from memstream.streams.keys.store import FileKeyStore
from memstream.streams.observability.logs import Redactor, configure_logging
from memstream.streams.observability.metrics import (
    ConsumerLag,
    MeteredEmbedder,
    exposition,
    faust_lag_source,
)
from memstream.streams.service.app import Service
from memstream.streams.service.container import Container

KEY = "msk_acme-observed-0123456789abcdef"
OTHER_KEY = "msk_acme-unknown-0123456789abcdef"
METRICS_TOKEN = "metrics-token-5b1e9c0d7a"
#: What the caller said: it must never reach the log.
CONTENT = "Quintessa keeps her spare key under the blue flowerpot"
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
HEX_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """Everything logged meanwhile, as the long-running commands log it (JSON lines), at
    debug for memstream and every library alike."""
    out = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logging.getLogger("memstream").level)
    handler = configure_logging(
        Settings(log_level="debug", log_level_libraries="debug", log_format="json"), out
    )
    # The test's HTTP client logs the URLs it requests: that is the caller, not the server.
    client_log = logging.getLogger("httpx")
    client_level = client_log.level
    client_log.setLevel(logging.WARNING)
    yield out
    client_log.setLevel(client_level)
    root.removeHandler(handler)
    for old in saved[0]:
        root.addHandler(old)
    root.setLevel(saved[1])
    logging.getLogger("memstream").setLevel(saved[2])


def records(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def api_over_fakes(tmp_path: Path, **overrides: Any) -> tuple[Any, Service]:
    settings = Settings(data_dir=tmp_path, topic_prefix="t", **overrides)
    keys = FileKeyStore(settings.keys_dir)
    index = InMemoryMemoryIndex()
    index.apply([(
        MemoryAdded(
            event_id="add-1", user_id="acme:ann", session_id="s1", occurred_at=T0,
            memory_id="mem-1", memory_type="fact", content="Ann lives in Oslo", importance=0.7,
            extraction_event_id="x1", extractor="test/1", source_event_ids=("m-1",),
        ),
        SourcePosition("t.memories", 0, 0),
    )])
    publisher = InMemoryPublisher(keys, EventLimits.from_settings(settings))
    service = Service(Container(settings, keys=keys, projection=index, publisher=publisher))
    return create_api(service, KeyFile.of({KEY: ApiKey("acme")})), service


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    api, service = api_over_fakes(tmp_path)
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as http:
        yield http
    await service.memories.close()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_a_request_id_is_in_the_response_and_in_every_log_record_of_the_request(
    client: httpx.AsyncClient, log_lines: io.StringIO
) -> None:
    given_id = await client.get("/v1/memories/mem-1", params={"user_id": "ann"},
                                headers={**bearer(KEY), "X-Request-ID": "trace-42.a_b"})
    assert given_id.status_code == 200 and given_id.headers["x-request-id"] == "trace-42.a_b"
    fresh = await client.post("/v1/memories", json={"messages": "I moved to Bergen", "user_id": "ann"},
                              headers=bearer(KEY))
    assert fresh.status_code == 202 and HEX_ID.fullmatch(fresh.headers["x-request-id"])
    refused = await client.get("/v1/memories", params={"user_id": "ann"})
    assert refused.status_code == 401 and HEX_ID.fullmatch(refused.headers["x-request-id"])

    lines = records(log_lines)
    by_id = {rid: [r for r in lines if r.get("request_id") == rid]
             for rid in ("trace-42.a_b", fresh.headers["x-request-id"], refused.headers["x-request-id"])}
    # Each request's own access record names its route template and status, under its id.
    access = {rid: [(r["method"], r["route"], r["status"]) for r in found if "route" in r]
              for rid, found in by_id.items()}
    assert access == {
        "trace-42.a_b": [("GET", "/v1/memories/{memory_id}", 200)],
        fresh.headers["x-request-id"]: [("POST", "/v1/memories", 202)],
        refused.headers["x-request-id"]: [("GET", "/v1/memories", 401)],
    }
    for line in lines:
        assert {"time", "level", "logger", "message"} <= set(line)
        assert line["time"].endswith("Z")


@given(sent=st.binary(max_size=120))
@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
async def test_an_unsafe_request_id_is_replaced_never_echoed(
    client: httpx.AsyncClient, sent: bytes
) -> None:
    try:
        response = await client.get("/v1/health", headers={"X-Request-ID": sent})
    except (httpx.LocalProtocolError, ValueError, UnicodeError):
        return  # a header the client itself refuses to send
    answered = response.headers["x-request-id"].encode()
    if SAFE_REQUEST_ID.fullmatch(sent):
        assert answered == sent
    else:
        assert HEX_ID.fullmatch(answered.decode())


async def test_no_key_and_no_content_reach_the_log(
    client: httpx.AsyncClient, log_lines: io.StringIO
) -> None:
    calls = [
        ("POST", "/v1/memories", {"json": {"messages": CONTENT, "user_id": "ann"}}, KEY),
        ("POST", "/v1/memories/search", {"json": {"query": CONTENT, "user_id": "ann"}}, KEY),
        # Bad input that quotes the content back nowhere: 422.
        ("POST", "/v1/memories", {"json": {"messages": CONTENT, "user_id": "ann", "close": CONTENT}}, KEY),
        ("GET", "/v1/memories", {"params": {"user_id": CONTENT}}, KEY),
        ("GET", "/v1/memories", {"params": {"user_id": "ann"}}, OTHER_KEY),
        ("GET", "/v1/memories", {"params": {"user_id": "ann"}, "headers": {"X-Request-ID": CONTENT}}, KEY),
    ]
    statuses = []
    for method, path, options, key in calls:
        headers = {**bearer(key), **options.pop("headers", {})}
        response = await client.request(method, path, headers=headers, **options)
        statuses.append(response.status_code)
    assert statuses == [202, 200, 422, 200, 401, 200]
    text = log_lines.getvalue()
    assert len([r for r in records(log_lines) if "route" in r]) == len(calls)  # all logged
    # The content's own words, not ones any log line may say ("the": "reading the table").
    for secret in (KEY, OTHER_KEY, KEY.removeprefix("msk_"), CONTENT, "Quintessa", "flowerpot"):
        assert secret not in text


async def test_metrics_count_requests_by_route_template_never_by_the_path(
    client: httpx.AsyncClient,
) -> None:
    ids = [f"mem-{n}-secret-{n * 7919}" for n in range(25)]
    for memory_id in ids:
        await client.get(f"/v1/memories/{memory_id}", params={"user_id": "ann"}, headers=bearer(KEY))
    await client.request("BREW", "/v1/memories", headers=bearer(KEY))
    await client.get(f"/nowhere/{ids[0]}")
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    requests = families["memstream_http_requests"].samples
    by_labels = {(s.labels["method"], s.labels["route"], s.labels["status"]): s.value for s in requests}
    assert by_labels[("GET", "/v1/memories/{memory_id}", "404")] >= len(ids)
    assert ("other", "/v1/memories", "405") in by_labels
    assert ("GET", "unmatched", "404") in by_labels
    assert not any(memory_id in response.text for memory_id in ids)
    routes = {s.labels["route"] for s in requests}
    assert all(route.startswith("/") or route == "unmatched" for route in routes)
    latency = families["memstream_http_request_duration_seconds"].samples
    assert any(s.name.endswith("_count") and s.labels["route"] == "/v1/memories/{memory_id}"
               for s in latency)


async def test_metrics_need_the_metrics_token_when_one_is_set(tmp_path: Path) -> None:
    api, service = api_over_fakes(tmp_path, metrics_token=METRICS_TOKEN)
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as http:
        assert (await http.get("/metrics")).status_code == 401
        assert (await http.get("/metrics", headers=bearer(KEY))).status_code == 401  # an API key is not it
        assert (await http.get("/metrics", headers=bearer(METRICS_TOKEN + "x"))).status_code == 401
        allowed = await http.get("/metrics", headers=bearer(METRICS_TOKEN))
        assert allowed.status_code == 200 and "memstream_http_requests_total" in allowed.text
    await service.memories.close()
    with pytest.raises(ValueError, match="MEMSTREAM_METRICS_TOKEN") as refused:
        api_over_fakes(tmp_path, metrics_token="short")
    assert "short" not in str(refused.value)


# --- log lines ----------------------------------------------------------------------------


def test_memstream_logs_at_info_by_default_and_the_libraries_at_warning() -> None:
    out = io.StringIO()
    root = logging.getLogger()
    saved = list(root.handlers)
    handler = configure_logging(Settings(), out)
    try:
        logging.getLogger("memstream.streams.example").info("projected %d rows", 3, extra={"rows": 3})
        logging.getLogger("faust.transport").info("a rebalance table")
        logging.getLogger("aiokafka").warning("a broker went away")
    finally:
        root.removeHandler(handler)
        for old in saved:
            root.addHandler(old)
    lines = records(out)
    assert [(r["level"], r["logger"], r["message"]) for r in lines] == [
        ("info", "memstream.streams.example", "projected 3 rows"),
        ("warning", "aiokafka", "a broker went away"),
    ]
    assert lines[0]["rows"] == 3


def test_text_lines_for_a_terminal_carry_the_request_id() -> None:
    out = io.StringIO()
    root = logging.getLogger()
    saved = list(root.handlers)
    handler = configure_logging(Settings(log_format="text"), out)
    try:
        logging.getLogger("memstream.x").warning("slow", extra={"request_id": "r-7"})
    finally:
        root.removeHandler(handler)
        for old in saved:
            root.addHandler(old)
    line = out.getvalue().strip()
    assert re.fullmatch(r"\S+ \S+ WARNING memstream\.x: slow \[request_id=r-7\]", line), line


@given(secret=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=16, max_size=40))
def test_the_settings_secrets_are_redacted_wherever_they_appear(secret: str) -> None:
    redactor = Redactor.from_settings(Settings(web_token=secret, llm_api_key="sk-" + secret))
    for line in (f"token={secret}", json.dumps({"message": f"x {secret} y"}),
                 f"Traceback: KeyError('sk-{secret}')"):
        assert secret not in redactor.redact(line)


# --- consumer lag -------------------------------------------------------------------------


def test_the_lag_is_the_high_watermark_minus_the_committed_offset_on_the_agents_topics() -> None:
    chat0, chat1, chat2 = TP("t.chat", 0), TP("t.chat", 1), TP("t.chat", 2)
    changelog = TP("t.worker-sessions-changelog", 0)
    consumer = SimpleNamespace(
        assignment=lambda: {chat0, chat1, chat2, changelog},
        highwater=lambda p: {chat0: 120, chat1: 40, changelog: 9}.get(p),  # chat2: nothing fetched
        _committed_offset={chat0: 100},
        _read_offset={chat1: 34},  # nothing committed yet: the next offset after the last read
    )
    lag = ConsumerLag()
    lag.track("agents", faust_lag_source(SimpleNamespace(_consumer=consumer), ["t.chat"]))
    lag.track("broken", lambda: (_ for _ in ()).throw(RuntimeError("not started")))
    [family] = list(lag.collect())
    assert {(s.labels["consumer"], s.labels["topic"], s.labels["partition"]): s.value
            for s in family.samples} == {("agents", "t.chat", "0"): 20, ("agents", "t.chat", "1"): 5}
    lag.forget("agents")
    assert next(iter(lag.collect())).samples == []


def test_an_app_never_started_reports_no_lag() -> None:
    assert list(faust_lag_source(SimpleNamespace(_consumer=None), ["t.chat"])()) == []


def test_the_exposition_is_prometheus_text() -> None:
    body, content_type = exposition()
    assert content_type.startswith("text/plain")
    names = {f.name for f in text_string_to_metric_families(body.decode())}
    assert {"memstream_events_processed", "memstream_consumer_lag", "process_resident_memory_bytes"} <= names


def embedding_counts(stage: str) -> tuple[float, float]:
    """(texts embedded, embedder calls) of ``stage`` on this process's /metrics page."""
    samples = {
        (sample.name, sample.labels.get("stage")): sample.value
        for family in text_string_to_metric_families(exposition()[0].decode())
        for sample in family.samples
    }
    return (
        samples.get(("memstream_embedded_texts_total", stage), 0.0),
        samples.get(("memstream_embedding_seconds_count", stage), 0.0),
    )


@given(batches=st.lists(st.lists(st.text(max_size=40), max_size=5), max_size=4))
@hypothesis_settings(max_examples=20, deadline=None)
def test_a_metered_embedder_counts_the_texts_of_its_stage_and_changes_no_vector(
    batches: list[list[str]],
) -> None:
    plain, metered = FakeEmbedder(), MeteredEmbedder(FakeEmbedder(), "test-stage")
    assert (metered.model_id, metered.dimensions) == (plain.model_id, plain.dimensions)
    texts_before, calls_before = embedding_counts("test-stage")
    for texts in batches:
        assert (metered.embed(texts) == plain.embed(texts)).all()
    texts_after, calls_after = embedding_counts("test-stage")
    assert texts_after - texts_before == sum(len(texts) for texts in batches)
    assert calls_after - calls_before == len(batches)
