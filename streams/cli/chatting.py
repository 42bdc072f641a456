"""``memstream chat``: the memory-augmented agent as a terminal chat."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstream.models.settings import Settings
    from memstream.streams.chat.sync import SyncMemoryAgent
    from memstream.streams.service.container import Container


def add_chat_command(commands: Any) -> None:
    """Add ``memstream chat`` to the command's subparsers."""
    chat = commands.add_parser("chat", help=cmd_chat.__doc__)
    chat.add_argument("--user", required=True, help="whose memory the chat uses and adds to")
    chat.add_argument("--session", help="continue this session instead of starting a new one")
    chat.set_defaults(run=cmd_chat)


def cmd_chat(args: argparse.Namespace, container: Container) -> int:
    """Chat in the terminal with an agent that remembers (the model of MEMSTREAM_LLM_*)."""
    from memstream.streams.chat.sync import SyncMemoryAgent
    from memstream.streams.chat.turns import MemoryWriteFailed, ModelNotConfigured

    settings = container.settings
    try:
        agent = SyncMemoryAgent.from_settings(settings, user_id=args.user, session_id=args.session)
    except (ModelNotConfigured, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        with agent:
            return _chat(args, settings, agent)
    except MemoryWriteFailed as exc:  # the close on the way out: the broker went away
        print(f"error: {exc}; the worker's idle timer closes the session later", file=sys.stderr)
        return 1


def _chat(args: argparse.Namespace, settings: Settings, agent: SyncMemoryAgent) -> int:
    """Check the broker (and warn without a worker), then chat until the person ends it."""
    from memstream.streams.chat.terminal import run_chat
    from memstream.streams.kafka.broker import broker_reachable
    from memstream.streams.worker.process import worker_healthy

    if not asyncio.run(broker_reachable(settings.broker, timeout_s=3.0)):
        print(
            f"error: no Kafka broker answers at {settings.broker}: start one "
            "(`memstream broker`) or set MEMSTREAM_BROKER",
            file=sys.stderr,
        )
        return 1
    if not worker_healthy(settings):
        print(
            f"note: no worker answers on port {settings.web_port}: the chat works, but its "
            "sessions become memories only once `memstream worker` runs",
            file=sys.stderr,
        )
    try:
        import readline  # noqa: F401 - line editing and history for input()
    except ImportError:
        pass
    model = settings.chat_model or settings.llm_model
    print(
        f"memstream chat · user {args.user} · model {model} · /help for commands, /quit or "
        "Ctrl-D to end",
        flush=True,
    )
    return run_chat(agent, color=sys.stdout.isatty())
