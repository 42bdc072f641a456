"""The terminal chat of ``memstream chat``: the agent's replies, and under each the memories
it used.

Plain ``input()`` and ``print``: a line is a turn; ``/quit`` or Ctrl-D (Ctrl-C at the prompt
too) ends the chat and closes the session, ``/memories`` lists the memories the chat has
used, ``/help`` says this. Ctrl-C during a turn cancels that turn.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import TextIO

from memstream.models.conversation import truncate
from memstream.streams.chat.sync import SyncMemoryAgent
from memstream.streams.chat.turns import AgentTurn, MemoryWriteFailed, ModelCallFailed
from memstream.streams.service.results import MemoryHitDict

__all__ = ["HELP", "PROMPT", "run_chat"]

PROMPT = "you> "
HELP = """\
  /memories  the memories this chat has used so far
  /help      this help
  /quit      end the chat (Ctrl-D does too): the session closes and becomes memories
  Anything else goes to the assistant; start a line with // to send one that begins with /."""
#: Characters of a memory shown under a reply (``/memories`` shows more).
SHOWN_CHARS = 100
LISTED_CHARS = 300

_DIM, _RESET = "\033[2m", "\033[0m"
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class _Screen:
    """Where the chat writes: plain lines, and dimmed ones on a colour terminal; neither
    with control characters (but line breaks and tabs) from a reply, a memory or an error:
    escape sequences could move the cursor or retitle the terminal."""

    def __init__(self, out: TextIO, color: bool) -> None:
        self.out = out
        self.color = color

    def say(self, text: str = "") -> None:
        print(_CONTROLS.sub("\N{REPLACEMENT CHARACTER}", text), file=self.out, flush=True)

    def aside(self, text: str) -> None:
        text = _CONTROLS.sub("\N{REPLACEMENT CHARACTER}", text)
        print(f"{_DIM}{text}{_RESET}" if self.color else text, file=self.out, flush=True)


def run_chat(
    agent: SyncMemoryAgent,
    *,
    read: Callable[[str], str] = input,
    out: TextIO | None = None,
    color: bool = False,
) -> int:
    """Chat with ``agent`` until ``/quit`` or end of input, then close the session.

    Returns 0, or 1 when the session could not be closed (its turns are published; the
    worker's idle timer closes it later).
    """
    screen = _Screen(out or sys.stdout, color)
    used: dict[str, MemoryHitDict] = {}
    shown_note = ""
    while True:
        try:
            line = read(PROMPT)
        except (EOFError, KeyboardInterrupt):
            screen.say()
            break
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            break
        if text == "/help":
            screen.say(HELP)
            continue
        if text == "/memories":
            _list_memories(screen, used)
            continue
        if text.startswith("/") and not text.startswith("//"):
            screen.say(f"unknown command {text.split()[0]}: /help lists them")
            continue
        turn = _turn(agent, screen, text[1:] if text.startswith("//") else text)
        if turn is None:
            continue
        screen.say(f"assistant> {turn.reply}")
        for hit in turn.memories:
            used.setdefault(hit["memory_id"], hit)
            screen.aside(f"  memory used: [{hit['type']}] {truncate(_flat(hit['memory']), SHOWN_CHARS)}")
        if not turn.memories:
            screen.aside("  (no memories used)")
        if turn.debug.working_memory == "agent" and turn.debug.working_note != shown_note:
            shown_note = turn.debug.working_note
            screen.aside(f"  (working memory: this chat's own record; {shown_note})")
        if not turn.reply_saved:
            screen.aside("  (the reply is not saved yet: it is sent again with your next message)")
    return _end(agent, screen)


def _turn(agent: SyncMemoryAgent, screen: _Screen, text: str) -> AgentTurn | None:
    try:
        return agent.chat(text)
    except KeyboardInterrupt:
        screen.say("(interrupted)")
    except ModelCallFailed as exc:
        screen.say(f"error: {exc}")
    except MemoryWriteFailed as exc:
        screen.say(f"error: {exc}; the assistant was not asked, send it again")
    except (ValueError, TypeError) as exc:
        screen.say(f"error: {exc}")
    except Exception as exc:  # noqa: BLE001 - one failed turn must not end the chat
        screen.say(f"error: {type(exc).__name__}: {exc}")
    return None


def _end(agent: SyncMemoryAgent, screen: _Screen) -> int:
    session_id = agent.session_id
    try:
        closed = agent.end()
    except MemoryWriteFailed as exc:
        screen.say(f"error: {exc}")
        return 1
    if closed is None:
        screen.say("nothing was said: no session to close")
    else:
        screen.say(f"session {session_id} closed: the worker will consolidate it into memories")
    return 0


def _list_memories(screen: _Screen, used: dict[str, MemoryHitDict]) -> None:
    if not used:
        screen.say("no memories used yet")
        return
    for hit in used.values():
        screen.say(f"  [{hit['type']}] {truncate(_flat(hit['memory']), LISTED_CHARS)}")
        screen.aside(f"      memory {hit['memory_id']} · from session {hit['session_id']}")


def _flat(text: str) -> str:
    return " ".join(text.split())
