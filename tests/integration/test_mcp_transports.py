"""``memstream mcp`` on the real broker, beside one real worker, driven by the MCP SDK's own
client over both transports: stdio (the client starts the server) and streamable HTTP (each
request brings its key). A conversation added over MCP becomes searchable, is read, traced and
deleted over MCP; another tenant sees none of it, and a wrong key is refused."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from harness import child_process, wait_for, wait_for_async
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from memstream.models.settings import Settings
from memstream.streams.api.auth import add_key
from memstream.streams.kafka.broker import free_port
from memstream.streams.worker.process import WorkerProcess

COMMAND = [sys.executable, "-m", "memstream.streams.cli", "mcp"]


@dataclass(frozen=True)
class World:
    settings: Settings
    acme: str
    beta: str
    tmp: Path


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, broker_address: str, broker_kind: str
) -> Iterator[World]:
    """One worker for the module, and keys for tenants acme and beta."""
    tmp = tmp_path_factory.mktemp("mcp")
    settings = Settings(
        broker=broker_address,
        broker_kind=broker_kind,
        data_dir=tmp / "data",  # type: ignore[arg-type]
        topic_prefix=f"t{uuid.uuid4().hex[:10]}",
        partitions=2,
        web_port=free_port(),
        mcp_port=free_port(),
        session_timeout_s=10.0,
        heartbeat_interval_s=2.0,
    )
    acme = add_key(settings.api_keys_path, "acme")
    beta = add_key(settings.api_keys_path, "beta")
    with WorkerProcess(settings, log_path=tmp / "worker.log"):
        yield World(settings, acme, beta, tmp)


def answer(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def remember_find_trace_and_delete(
    client: Client, city: str, *, wait: bool = False, **user: str
) -> None:
    """The path an agent takes: add a conversation (waiting for its memories, or not), find
    it once consolidated, read it, its history, delete it, and see it go."""
    said = f"I live in {city} and I work at Siemens as a data engineer."
    added = answer(
        await client.call_tool(
            "add_memory",
            {
                "messages": [
                    {"role": "user", "content": said},
                    {"role": "assistant", "content": "Nice."},
                ],
                "wait": wait,
                **user,
            },
        )
    )
    assert len(added["event_ids"]) == 4 and added["closed"]
    assert added["user_id"] == user.get("user_id", "ann")  # the server's default user
    if wait:
        assert added["status"] == "searchable", added
        assert any(city in m["text"] and m["decision"] == "added" for m in added["memories"])

    async def search() -> CallToolResult:
        return await client.call_tool(
            "search_memories", {"query": "where does the user live", **user}
        )

    def about_the_city(result: CallToolResult) -> list[dict[str, Any]]:
        # An error is "not yet" here; the wait's failure message shows the last one.
        found = [] if result.is_error else answer(result)["memories"]
        return [m for m in found if city in m["text"]]

    if wait:  # searchable the moment the answer came
        hits = about_the_city(await search())
    else:
        hits = about_the_city(
            await wait_for_async(search, f"the {city} memory over MCP", until=about_the_city)
        )
    memory_id = hits[0]["memory_id"]
    assert hits[0]["session_id"] == added["session_id"]
    got = answer(await client.call_tool("get_memory", {"memory_id": memory_id, **user}))
    assert city in got["text"] and got["status"] == "active"
    life = answer(await client.call_tool("memory_history", {"memory_id": memory_id, **user}))
    assert life["steps"][0]["type"] == "memory_added"
    deleted = answer(await client.call_tool("delete_memory", {"memory_id": memory_id, **user}))
    assert deleted["memory_id"] == memory_id
    await wait_for_async(
        search,
        "the deleted memory to go",
        until=lambda r: not r.is_error and memory_id not in str(r.structured_content),
    )


async def test_over_stdio_the_client_starts_the_server_with_the_settings_key(
    world: World,
) -> None:
    env = {
        **os.environ,
        **world.settings.to_env(),
        "MEMSTREAM_MCP_API_KEY": world.acme,
        "MEMSTREAM_MCP_USER": "ann",
    }
    server = StdioServerParameters(
        command=COMMAND[0], args=[*COMMAND[1:], "--transport", "stdio"], env=env
    )
    log_path = world.tmp / "mcp-stdio.log"
    with log_path.open("w") as log:
        async with Client(stdio_client(server, errlog=log)) as client:
            # No user_id: the server's default user, ann.
            await remember_find_trace_and_delete(client, "Lisbon")
            # An open session's working memory, from the worker that owns it.
            opened = answer(
                await client.call_tool(
                    "add_memory",
                    {"text": "Book me a hotel in Porto", "session_id": "trip", "close": False},
                )
            )
            assert opened["session_id"] == "trip"

            async def context() -> CallToolResult:
                return await client.call_tool("session_context", {"session_id": "trip"})

            found = await wait_for_async(
                context, "the open session's context", until=lambda r: not r.is_error
            )
            assert "hotel in Porto" in answer(found)["prompt"]
    assert world.acme not in log_path.read_text()


def test_over_stdio_a_missing_or_unknown_key_stops_the_server_with_a_clear_message(
    world: World,
) -> None:
    base = {**os.environ, **world.settings.to_env()}
    base.pop("MEMSTREAM_MCP_API_KEY", None)
    cases = [
        (base, "set MEMSTREAM_MCP_API_KEY"),
        ({**base, "MEMSTREAM_MCP_API_KEY": "msk_wrong-key-0123456789"}, "not a key of the key"),
    ]
    # Both at once: each start is mostly imports.
    started = [
        subprocess.Popen(
            [*COMMAND, "--transport", "stdio"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for env, _ in cases
    ]
    for process, (_, said) in zip(started, cases, strict=True):
        out, err = process.communicate(timeout=60)
        assert process.returncode == 2 and said in err, err
        assert "msk_wrong" not in out + err


@pytest.fixture(scope="module")
def http_url(world: World) -> Iterator[str]:
    """``memstream mcp --transport http`` in a child process; its /mcp URL."""
    env = {**os.environ, **world.settings.to_env(), "PYTHONUNBUFFERED": "1"}
    log_path = world.tmp / "mcp-http.log"
    url = f"http://127.0.0.1:{world.settings.mcp_port}/mcp"
    with child_process([*COMMAND, "--transport", "http"], env, log_path) as process:

        def refuses_without_a_key() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"memstream mcp exited: {log_path.read_text()}")
            try:
                return httpx.post(url, json={}, timeout=2).status_code == 401
            except httpx.TransportError:
                return False

        wait_for(refuses_without_a_key, "memstream mcp --transport http to answer", 60)
        yield url
    assert world.acme not in log_path.read_text()


async def test_over_http_each_request_brings_its_key(world: World, http_url: str) -> None:
    def client(key: str) -> Client:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
        return Client(streamable_http_client(http_url, http_client=http))

    async with httpx2.AsyncClient(timeout=10) as http:
        for wrong in ("msk_wrong-key-0123456789", world.acme + "x"):
            headers = {"Authorization": f"Bearer {wrong}"}
            assert (await http.post(http_url, json={}, headers=headers)).status_code == 401

    async with client(world.acme) as acme:
        await remember_find_trace_and_delete(acme, "Tallinn", wait=True, user_id="ben")
        await acme.call_tool("add_memory", {"text": "I live in Riga", "user_id": "ben"})
        await wait_for_async(
            lambda: acme.call_tool("search_memories", {"query": "Riga", "user_id": "ben"}),
            "ben's Riga memory",
            until=lambda r: "Riga" in str(r.structured_content),
        )
    # Tenant beta's "ben" is another user: nothing of acme's ben reaches beta's key.
    async with client(world.beta) as beta:
        for user in ("ben", "acme:ben"):
            found = answer(
                await beta.call_tool("search_memories", {"query": "Riga", "user_id": user})
            )
            assert found["memories"] == []
