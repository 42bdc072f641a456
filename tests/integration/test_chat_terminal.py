"""``memstream chat`` in a terminal (tmux), as a person uses it, on the real broker beside a
real worker, with the scripted LLM server as the model: a fact told in one chat becomes a
memory when the chat ends, and the next chat shows it used and sent it to the model."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harness import wait_for
from llm_server import Reply, ScriptedServer, completion

from memstream.models.settings import Settings
from memstream.streams.client import MemoryClient
from memstream.streams.kafka.broker import free_port
from memstream.streams.worker.process import WorkerProcess

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


class Terminal:
    """A tmux server of this test's own (its own socket), one window per chat."""

    def __init__(self, tmp_path: Path) -> None:
        self.socket = f"memstream-test-{uuid.uuid4().hex[:8]}"
        self.config = tmp_path / "tmux.conf"
        # A chat that ended keeps its last screen, to be read.
        self.config.write_text("set -g remain-on-exit on\n")

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", str(self.config), *args],
            check=True, capture_output=True, text=True, timeout=30,
        ).stdout

    def open(self, name: str, script: Path) -> None:
        self.tmux("new-session", "-d", "-s", name, "-x", "200", "-y", "50", f"sh {script}")

    def type(self, name: str, line: str) -> None:
        self.tmux("send-keys", "-t", name, "-l", line)
        self.tmux("send-keys", "-t", name, "Enter")

    def screen(self, name: str) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", name, "-S", "-500")

    def shows(self, name: str, text: str, what: str) -> str:
        return wait_for(lambda: self.screen(name), what, 60, until=lambda screen: text in screen)

    def exit_status(self, name: str) -> str:
        """The exit status the chat in ``name`` ended with, as its script printed it (tmux's
        own ``pane_dead_status`` never came when the server was started from pytest)."""
        screen = self.shows(name, "[chat exited ", f"the chat in {name} to end")
        return screen.split("[chat exited ", 1)[1].split("]", 1)[0]

    def close(self) -> None:
        """Stop this test's tmux server (and the chats in it); it may be gone already."""
        subprocess.run(
            ["tmux", "-L", self.socket, "kill-server"], check=False, capture_output=True, timeout=30
        )


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    terminal = Terminal(tmp_path)
    try:
        yield terminal
    finally:
        terminal.close()


@pytest.fixture
def model() -> Iterator[ScriptedServer]:
    server = ScriptedServer(
        replies=[
            Reply(completion("Noted: you live in Porto.", model="scripted")),
            Reply(completion("You live in Porto, as you told me.", model="scripted")),
        ]
    )
    server.start()
    yield server
    server.stop()


def chat_script(settings: Settings, path: Path, *args: str) -> Path:
    """A shell script that runs ``memstream chat`` with ``settings``, as a user would."""
    exports = "".join(
        f"export {name}={shlex.quote(value)}\n" for name, value in settings.to_env().items()
    )
    command = shlex.join([sys.executable, "-m", "memstream.streams.cli", "chat", *args])
    path.write_text(f'{exports}{command}\necho "[chat exited $?]"\n')
    return path


def test_a_fact_told_in_one_chat_is_used_in_the_next(
    settings_factory: Callable[..., Settings], tmp_path: Path, terminal: Terminal,
    model: ScriptedServer,
) -> None:
    settings = settings_factory(
        web_port=free_port(), llm_base_url=model.base_url, llm_model="scripted"
    )
    script = chat_script(settings, tmp_path / "chat.sh", "--user", "ann")
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        terminal.open("first", script)
        terminal.shows("first", "you> ", "the first chat's prompt")
        terminal.type("first", "I live in Porto and I work as a nurse.")
        screen = terminal.shows("first", "assistant> Noted: you live in Porto.", "the first reply")
        assert "(no memories used)" in screen
        terminal.type("first", "/quit")
        assert terminal.exit_status("first") == "0"
        assert "closed: the worker will consolidate it into memories" in terminal.screen("first")

        with MemoryClient(settings) as memory:
            wait_for(
                lambda: memory.search("where do I live?", user_id="ann"),
                "the first chat's memory to be searchable",
                until=lambda hits: any("Porto" in hit["memory"] for hit in hits),
            )

        terminal.open("second", script)
        terminal.shows("second", "you> ", "the second chat's prompt")
        terminal.type("second", "Where do I live?")
        screen = terminal.shows("second", "assistant> You live in Porto", "the second reply")
        used = [line for line in screen.splitlines() if line.strip().startswith("memory used: [")]
        assert any("Porto" in line for line in used), screen
        terminal.type("second", "/memories")
        terminal.shows("second", "· from session", "the list of the memories used")
        terminal.type("second", "/quit")
        assert terminal.exit_status("second") == "0"

    # The second chat is a new session: Porto reached the model only as a memory.
    asked = model.received[-1].body["messages"]
    assert [m["role"] for m in asked] == ["system", "user"]
    assert "Porto" in asked[0]["content"] and asked[-1]["content"] == "Where do I live?"
    assert "Porto" not in model.received[0].body["messages"][0]["content"]
