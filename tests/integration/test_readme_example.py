"""README's Python client example, run as written against the real broker and a worker.

The example is the first ``python`` code block under README's "Python client" heading. It runs
in a fresh interpreter, as a user's script would, with its settings in ``MEMSTREAM_*``
variables (the worker's own), so it takes them the way the README says it does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from harness import wait_for

from memstream.models.settings import Settings
from memstream.streams.client import MemoryClient
from memstream.streams.runtime.broker import free_port
from memstream.streams.runtime.worker import WorkerProcess

README = Path(__file__).resolve().parents[2] / "README.md"
HEADING = "## Python client"


def readme_client_example() -> str:
    """The code of the first ``python`` block under README's "Python client" heading."""
    text = README.read_text()
    section = text[text.index(HEADING):]
    start = section.index("```python\n") + len("```python\n")
    return section[start:section.index("```", start)]


def settings_environment(settings: Settings) -> dict[str, str]:
    """This process's environment with ``settings`` as the ``MEMSTREAM_*`` variables a user
    would export (any other ``MEMSTREAM_*`` variable left out)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    for name in (
        "broker",
        "broker_kind",
        "data_dir",
        "topic_prefix",
        "partitions",
        "session_timeout_s",
        "heartbeat_interval_s",
        "web_port",
    ):
        environment[f"MEMSTREAM_{name.upper()}"] = str(getattr(settings, name))
    return environment


def test_the_readme_client_example_runs_as_written(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    example = readme_client_example()
    assert "MemoryClient()" in example  # settings from the environment, as the README says

    settings = settings_factory(web_port=free_port())
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        finished = subprocess.run(
            [sys.executable, "-c", example],
            check=False,  # the assertion below shows its stderr
            env=settings_environment(settings),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert finished.returncode == 0, finished.stderr
        printed = finished.stdout.splitlines()
        assert any("[fact] User lives in Oslo" in line for line in printed), finished.stdout

        # The example ends by deleting its best hit: the worker projects the deletion.
        with MemoryClient(settings) as memory:
            wait_for(
                lambda: memory.get_all(user_id="ann", include_inactive=True),
                "the example's deletion projected",
                until=lambda found: any(m["status"] == "deleted" for m in found),
            )
