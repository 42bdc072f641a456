"""The blocking agent: SyncMemoryAgent, a MemoryAgent on an event loop thread of its own, for
code without a loop (a terminal, a script)."""

from __future__ import annotations

from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

from memstream.models.settings import Settings
from memstream.streams.chat.agent import MemoryAgent
from memstream.streams.chat.turns import AgentTurn
from memstream.streams.client.loop import LoopThread

__all__ = ["SyncMemoryAgent"]

T = TypeVar("T")


class SyncMemoryAgent:
    """A :class:`MemoryAgent` for code without an event loop (a terminal, a script): the
    agent runs on a loop thread this object owns. Ctrl-C during :meth:`chat` cancels the
    turn. Close it (``with`` does) to end the session and stop the thread.

    Examples
    --------
    >>> with SyncMemoryAgent.from_settings(Settings(), user_id="ann") as agent:  # doctest: +SKIP
    ...     print(agent.chat("Where do I live?").reply)
    """

    def __init__(self, agent: MemoryAgent) -> None:
        self.agent = agent
        self._loop = LoopThread("memstream-agent")

    @classmethod
    def from_settings(
        cls, settings: Settings, *, user_id: str, session_id: str | None = None
    ) -> SyncMemoryAgent:
        """:meth:`MemoryAgent.from_settings` on a loop thread."""
        return cls(MemoryAgent.from_settings(settings, user_id=user_id, session_id=session_id))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def session_id(self) -> str | None:
        """The session the next turn goes to (None before the first)."""
        return self.agent.session_id

    def chat(self, message: str) -> AgentTurn:
        """One turn (see :meth:`MemoryAgent.chat`)."""
        return self._run(self.agent.chat(message))

    def end(self) -> str | None:
        """Close the session (see :meth:`MemoryAgent.end`)."""
        return self._run(self.agent.end())

    def close(self) -> None:
        """End the session, close what the agent owns and stop the thread; idempotent."""
        if self._loop.stopped:
            return
        try:
            self._loop.run(self.agent.aclose())
        finally:
            self._loop.stop()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coroutine)
