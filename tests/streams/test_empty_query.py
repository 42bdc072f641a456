"""A query with nothing to look for (empty, or only whitespace) is refused, by one rule of
the application layer (``check_query``), in every interface: the CLI (one line, exit 2), the
client, HTTP (422) and MCP (a tool error); never "no memories found"."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import httpx
import pytest
from fakes import memory_added, service_on_fakes, unit_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from tenants import ACME_ALL, KEYS

from memstream.streams.api.app import create_api
from memstream.streams.api.auth import KeyFile
from memstream.streams.cli import main
from memstream.streams.mcp import create_mcp_server
from memstream.streams.service.app import Service

#: Text with nothing to look for: empty, or whitespace of any kind Python knows.
WHITESPACE = [chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace()]
nothing = st.text(alphabet=st.sampled_from(WHITESPACE), max_size=8)


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Service:
    seeded = [memory_added("m-1", "acme:alice", "Alice lives in Oslo")]
    return service_on_fakes(unit_settings(tmp_path), seeded, monkeypatch)[0]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=nothing)
def test_the_cli_refuses_an_empty_search_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    for name, value in unit_settings(tmp_path / "data").to_env().items():
        monkeypatch.setenv(name, value)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["search", "--user", "ann", query])
    assert status == 2
    assert out.getvalue() == ""
    assert len(err.getvalue().splitlines()) == 1
    assert "query is empty: say what to look for" in err.getvalue()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=nothing)
async def test_the_service_refuses_an_empty_search_and_context(
    service: Service, query: str
) -> None:
    with pytest.raises(ValueError, match="query is empty"):
        await service.memories.search(query, user_id="acme:alice")
    with pytest.raises(ValueError, match="query is empty"):
        await service.memories.ranked(query, user_id="acme:alice")
    with pytest.raises(ValueError, match="message is empty"):
        await service.memories.context(query, user_id="acme:alice", recent_turns=[query])
    # A turn that says something is the query: the message may be empty then.
    found = await service.memories.context(
        query, user_id="acme:alice", recent_turns=["where does Alice live?"]
    )
    assert "Oslo" in found["context"]


async def test_http_and_mcp_refuse_an_empty_search(service: Service) -> None:
    api = create_api(service, KeyFile.of(KEYS))
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as http:
        response = await http.post(
            "/v1/memories/search",
            json={"query": " \t", "user_id": "alice"},
            headers={"Authorization": f"Bearer {ACME_ALL}"},
        )
    assert response.status_code == 422 and "query is empty" in response.text
    async with Client(create_mcp_server(service, key=KEYS[ACME_ALL])) as client:
        result = await client.call_tool("search_memories", {"query": "  ", "user_id": "alice"})
    assert result.is_error
    assert "query is empty" in " ".join(getattr(block, "text", "") for block in result.content)
    await service.memories.close()
