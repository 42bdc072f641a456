"""The HTTP API against its own OpenAPI document, in process (ASGI, no socket): schemathesis
generates requests for every operation from ``/openapi.json`` and checks each answer (no
unhandled error, a documented status code, content type and body); hypothesis sends times
from the whole calendar in every offset.

The app runs over the real LanceDB memory table and DuckDB reports, with an API key of tenant
acme; events go to an in-memory publisher, and no broker answers: what needs one (a read of
the log, an erasure, the readiness check) must say so with a documented 503.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from fakes import InMemoryPublisher, memory_added, unit_settings
from fuzz import zoned_times
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import CheckContext
from schemathesis.core.transport import Response
from schemathesis.generation.case import Case
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from tenants import ACME_ALL, KEYS

from memstream.models.codec import EventLimits
from memstream.models.settings import Settings
from memstream.models.topics import user_partition
from memstream.projections.memories import SourcePosition
from memstream.streams.api.app import create_api
from memstream.streams.api.auth import KeyFile
from memstream.streams.keys.store import FileKeyStore
from memstream.streams.service.app import Service
from memstream.streams.service.container import Container

#: Examples per operation: every operation is covered, the module stays within a minute or two.
EXAMPLES_PER_OPERATION = 40
AUTH = {"Authorization": f"Bearer {ACME_ALL}"}
SEEDED = [
    ("acme:alice", "mem-acme-alice-1", "Alice lives in Oslo"),
    ("acme:alice", "mem-acme-alice-2", "Alice prefers green tea"),
    ("beta:alice", "mem-beta-alice-1", "Alice lives in Vladivostok"),
]

# The document, read from an app over a service that opens nothing until it is called; the
# requests go to the app of the ``api`` fixture, built the same way over real stores.
schema = schemathesis.openapi.from_dict(
    create_api(
        Service.from_settings(Settings(data_dir=Path("never-opened"))), KeyFile.of(KEYS)
    ).openapi()
)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The HTTP API over the real memory table (seeded) and reports, no broker."""
    settings = unit_settings(tmp_path_factory.mktemp("contract"))
    keys = FileKeyStore(settings.keys_dir)
    publisher = InMemoryPublisher(keys, EventLimits.from_settings(settings))
    container = Container(settings, keys=keys, publisher=publisher)
    topic = container.topics.memories
    container.memory_table().apply(
        [
            (memory_added(memory_id, user, content), SourcePosition(
                topic, user_partition(user, settings.partitions), offset))
            for offset, (user, memory_id, content) in enumerate(SEEDED)
        ]
    )
    yield create_api(Service(container), KeyFile.of(KEYS))


@schemathesis.check
def no_unhandled_error(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """No 500: every failure the service can meet is answered as such. A 503 (documented:
    what it needs is not reachable here) must say which part and what to do."""
    if response.status_code == 503:
        body = response.json()
        assert isinstance(body, dict) and (body.get("detail") or body.get("checks")), (
            f"a 503 without a reason: {response.text[:300]}"
        )
    else:
        assert response.status_code < 500, f"{response.status_code}: {response.text[:300]}"
    return None


CHECKS = [
    no_unhandled_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.filter_too_much],
)
def test_every_operation_answers_as_its_document_says(case: Case, api: Any) -> None:
    case.call_and_validate(app=api, headers=AUTH, checks=CHECKS)


def test_the_document_lists_every_operation_of_the_app(api: Any) -> None:
    # What the parametrized test covers is what the app serves under /v1.
    served = {
        (method, route.path_format)
        for route in api.routes
        if getattr(route, "include_in_schema", False)
        for method in getattr(route, "methods", ())
    }
    documented = {
        (operation.method.upper(), operation.path)
        for operation in (result.ok() for result in schema.get_all_operations())
    }
    assert served == documented and len(documented) >= 17


# --- times anywhere in the calendar ----------------------------------------------------------

#: Requests naming a time, each as (method, path, httpx options) for one zoned time.
def timed_requests(moment: datetime) -> list[tuple[str, str, dict[str, Any]]]:
    stamp = moment.isoformat()
    search = {"query": "where does Alice live", "user_id": "alice"}
    return [
        ("POST", "/v1/memories/search", {"json": {**search, "as_of": stamp}}),
        ("POST", "/v1/memories/search", {"json": {**search, "filters": {"since": stamp}}}),
        ("POST", "/v1/memories/search", {"json": {**search, "filters": {"until": stamp}}}),
        ("POST", "/v1/memories", {"json": {"messages": "I live in Oslo", "user_id": "alice",
                                           "occurred_at": stamp}}),
        ("GET", "/v1/reports/growth", {"params": {"user_id": "alice", "since": stamp}}),
        ("GET", "/v1/reports/decay", {"params": {"user_id": "alice", "now": stamp}}),
    ]


@given(moment=zoned_times)
@settings(max_examples=60, deadline=None)
def test_a_time_anywhere_in_the_calendar_is_answered_or_refused_in_one_line(
    api: Any, moment: datetime
) -> None:
    async def send() -> list[tuple[str, httpx.Response]]:
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as http:
            return [
                (path, await http.request(method, path, headers=AUTH, **options))
                for method, path, options in timed_requests(moment)
            ]

    for path, response in asyncio.run(send()):
        assert response.status_code in (200, 202, 422), (path, moment, response.text)
        if response.status_code == 422:
            detail = response.json()["detail"]
            reasons = [e["msg"] for e in detail] if isinstance(detail, list) else [detail]
            assert all(reason and "\n" not in reason for reason in reasons), reasons
        if not _in_utc(moment):
            assert response.status_code == 422, (path, moment)
            assert "outside the years 1 to 9999 in UTC" in response.text


def _in_utc(moment: datetime) -> bool:
    """Whether ``moment`` has a UTC equivalent (in the years 1 to 9999)."""
    try:
        moment.astimezone(UTC)
    except OverflowError:
        return False
    return True
