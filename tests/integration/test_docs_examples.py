"""Every code block of README.md and docs/ that claims to run, run as written (docs/tests.md,
"Code blocks that run"): each ``python`` block as a script in a fresh interpreter and each
``bash`` block with ``bash -e``, in document order, beside the real broker, a worker and
``memstream serve`` of the same settings, exported as the ``MEMSTREAM_*`` variables a user
would have; ``KEY`` an API key of tenant acme; a scripted model server for the agent."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from docs_pages import Block, all_blocks
from llm_server import Reply, ScriptedServer, completion
from serving import serve_settings, serving

from memstream.streams.api.auth import add_key

#: Where the pages say ``memstream serve`` answers; the tests' own port replaces it.
DOCUMENTED_SERVE = "127.0.0.1:8080"
RUNNABLE = [block for block in all_blocks() if block.runs]


@dataclass(frozen=True)
class Place:
    """Where the examples run: their environment, working directory and service address."""

    env: dict[str, str]
    cwd: Path
    serve: str  # host:port of memstream serve


@pytest.fixture(scope="module")
def place(
    tmp_path_factory: pytest.TempPathFactory, broker_address: str, broker_kind: str
) -> Iterator[Place]:
    tmp = tmp_path_factory.mktemp("docs")
    settings = serve_settings(tmp, broker_address, broker_kind, "docs")
    key = add_key(settings.api_keys_path, "acme")
    # The agent's example asks a model once per turn: plenty of scripted replies.
    model = ScriptedServer(
        replies=[Reply(completion("Try the coastal path.", model="scripted")) for _ in range(20)]
    )
    model.start()
    cwd = tmp / "work"
    cwd.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")},
        **settings.to_env(),
        "KEY": key,
        "MEMSTREAM_LLM_BASE_URL": model.base_url,
        "MEMSTREAM_LLM_MODEL": "scripted",
        # The virtual environment's memstream command, as after `. .venv/bin/activate`.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
    }
    try:
        with serving(settings, tmp):
            yield Place(env, cwd, f"127.0.0.1:{settings.api_port}")
    finally:
        model.stop()


def test_some_blocks_of_each_interface_run() -> None:
    names = {block.name.split(":")[0] for block in RUNNABLE}
    assert {"README.md", "docs/getting-started.md", "docs/interfaces/client.md",
            "docs/interfaces/http.md", "docs/interfaces/mcp.md", "docs/interfaces/chat.md",
            "docs/analytics.md"} <= names


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda block: block.name)
def test_the_block_runs_as_written(block: Block, place: Place) -> None:
    if block.language == "bash" and "curl " in block.code and shutil.which("curl") is None:
        pytest.skip("curl is not installed (apt-get install curl)")
    code = block.code.replace(DOCUMENTED_SERVE, place.serve)
    command = (
        [sys.executable, "-c", code] if block.language == "python"
        else ["bash", "-e", "-o", "pipefail", "-c", code]
    )
    started = time.monotonic()
    done = subprocess.run(
        command, env=place.env, cwd=place.cwd, capture_output=True, text=True, timeout=240,
        check=False,
    )
    assert done.returncode == 0, (
        f"{block.name} exited {done.returncode} after {time.monotonic() - started:.0f} s\n"
        f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
    if "MemoryClient()" in code:  # the in-process client's examples print what they found
        if "memory.profile(" in code:  # the profile's: the move, and where pia lived before
            said = ["now User fact home Porto", "2026-03-10T00:00:00+00:00 User fact home Berlin"]
            assert done.stdout.splitlines() == said, done.stdout
        elif "memory.graph(" in code:  # the entity graph's: Ana across sessions, the move
            said = ["Ana person 2 sessions", "User sister Ana holds",
                    "User home Berlin until 2026-03-20", "User home Porto holds",
                    "Ana employer Acme holds"]
            assert done.stdout.splitlines() == said, done.stdout
        elif "memory.patterns(" in code:  # learned patterns: three Monday-morning requests
            said = ["usually asks about dinner (3 sessions)",
                    "usually asks about vegetarian (3 sessions)",
                    "active mostly 08:00-10:00 UTC (3 sessions)",
                    "most sessions on Mondays (3 sessions)"]
            assert done.stdout.splitlines() == said, done.stdout
        else:
            assert "[fact] User lives in Oslo" in done.stdout, done.stdout
    if "memstream projects --user tom --project atlas" in code:  # tom's task across sessions
        # The decision's line ends with its memory id (a digest): the page shows "…".
        shown = [line.rsplit(" · ", 1)[0] + " · …" if "decided to keep" in line else line
                 for line in done.stdout.splitlines()]
        assert shown[-10:] == [
            "projects now (1):",
            "atlas · 2026-05-04 to 2026-05-06 · 2 sessions",
            "  tasks (3):",
            "    2026-05-04 Migrate billing (started) · session atlas-1",
            "    2026-05-04 Migrate billing (open): schema copied (40%) · session atlas-1",
            "    2026-05-06 Migrate billing (open): data copied, cutover open (80%) · session atlas-2",
            "  decided (1):",
            "    2026-05-04 We decided to keep Postgres for billing. · …",
            "  open (1):",
            "    2026-05-06 Migrate billing (open): data copied, cutover open (80%) · session atlas-2",
        ], done.stdout
