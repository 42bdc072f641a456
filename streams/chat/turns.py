"""What a turn of the memory-augmented agent needs and gives: the memory verbs it calls
(AgentMemory), the turn it answers with and how its prompt was made, and the errors it raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from memstream.streams.client.shapes import SessionContextDict
from memstream.streams.service.results import AddResult, ContextResult, MemoryHitDict

__all__ = [
    "AgentMemory",
    "AgentTurn",
    "MemoryWriteFailed",
    "ModelCallFailed",
    "ModelNotConfigured",
    "TurnDebug",
]


class AgentMemory(Protocol):
    """The client verbs the agent uses: :class:`~memstream.streams.client.AsyncMemoryClient`
    has them, and so does any client with the same names and signatures."""

    async def add(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        user_id: str,
        session_id: str | None = None,
        close: bool = True,
        event_ids: Sequence[str] | None = None,
    ) -> AddResult:
        """Publish messages to a session (a new one when ``session_id`` is None)."""
        ...

    async def context(
        self,
        message: str,
        *,
        user_id: str,
        recent_turns: Sequence[str] = (),
        session_id: str | None = None,
        token_budget: int | None = None,
    ) -> ContextResult:
        """The long-term memory context of one turn."""
        ...

    async def session_context(
        self, session_id: str, *, user_id: str, budget: int | None = None
    ) -> SessionContextDict:
        """The session's working memory, from the worker that owns it."""
        ...

    async def close_session(self, session_id: str, *, user_id: str) -> str:
        """End the session now; the worker consolidates it."""
        ...


class ModelNotConfigured(ValueError):
    """No model to talk to: neither ``MEMSTREAM_LLM_BASE_URL`` nor ``MEMSTREAM_LLM_API_KEY``."""


class ModelCallFailed(RuntimeError):
    """The model did not answer (or answered no text); the user's message is published."""

    def __init__(self, message: str, *, session_id: str | None, user_event_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.user_event_id = user_event_id


class MemoryWriteFailed(RuntimeError):
    """A turn could not be published to the session (the broker did not acknowledge it)."""


@dataclass(frozen=True)
class TurnDebug:
    """How one turn's prompt was made.

    ``working_memory`` says where the session part came from: ``worker`` (``working_note``
    says if the agent added turns the worker had not folded yet), ``agent``, its own record
    of the turns it published (``working_note`` says why), or ``new``: the turn started the
    session, so there was nothing to ask the worker for. ``prompt_tokens`` is the prompt's
    size by the agent's counter, within ``budget``; ``model_usage`` is what the model
    reported (``prompt_tokens``, ``completion_tokens``), None if it did not.
    """

    messages: tuple[dict[str, str], ...]
    prompt_tokens: int
    budget: int
    memory_tokens: int
    query: str
    working_memory: Literal["worker", "agent", "new"]
    working_note: str
    turns_in_prompt: int
    turns_left_out: int
    message_cut: bool
    model_usage: Mapping[str, int] | None


@dataclass(frozen=True)
class AgentTurn:
    """One exchange: the model's ``reply`` and the long-term ``memories`` its prompt held
    (best first), with the session and the ids of the two published turns.

    ``reply_saved`` is False when the reply could not be published yet: the agent keeps it
    and publishes it before the session's next event.
    """

    reply: str
    memories: tuple[MemoryHitDict, ...]
    session_id: str
    user_event_id: str
    reply_event_id: str
    reply_saved: bool
    debug: TurnDebug
