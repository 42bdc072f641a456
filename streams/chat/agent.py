"""The memory-augmented agent: the seed's start -> process -> end session over memstream.

Each turn the agent publishes the user's message to the session, asks memstream for the
session's working memory (the worker's window, task, tool calls, entities, scratchpad) and
for the user's long-term memories relevant to the message, builds one bounded prompt of
them (:mod:`memstream.streams.chat.prompt`), calls an OpenAI-compatible model and publishes
its reply. Ending the agent closes the session, which makes the worker consolidate it into
memories. The agent talks to memory only through the client verbs (:class:`AgentMemory`),
so the in-process client and an HTTP client plug in alike.

What it does differently from the seed's ``MemoryAugmentedAgent``, on purpose:

* **The log is the memory.** The seed kept its short-term memory in the agent's process and
  lost it with the process; here every turn is an event, and the working memory is the
  worker's fold of them. When the worker has not folded the session yet, or no worker
  answers, the agent falls back to its own record of the turns it published and says so.
* **Text made for the model, and a budget.** No Python ``repr`` in the prompt, and every
  part of it is measured as it is sent (``chat_prompt_tokens``).
* **Nothing is lost.** The user's message is published before the model is called, so a
  failing model costs the reply, not the user's words; a reply that could not be published
  is kept and sent again before the next event of the session.

Examples
--------
>>> async with MemoryAgent.from_settings(Settings(), user_id="ann") as agent:  # doctest: +SKIP
...     turn = await agent.chat("I moved to Porto last week.")
...     print(turn.reply, [m["memory"] for m in turn.memories])
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Self, cast

import openai
from openai import AsyncOpenAI, Omit
from pydantic import ValidationError

from memstream.models.session import TokenCounter, WorkingContext
from memstream.models.settings import Settings
from memstream.streams.chat.prompt import (
    INSTRUCTIONS,
    MESSAGE_OVERHEAD_TOKENS,
    ChatTurn,
    Prompt,
    WorkingMemory,
    build_prompt,
    chat_tokens,
    render_system,
)
from memstream.streams.chat.turns import (
    AgentMemory,
    AgentTurn,
    MemoryWriteFailed,
    ModelCallFailed,
    ModelNotConfigured,
    TurnDebug,
)
from memstream.streams.llm.endpoint import (
    OPENAI_BASE_URL,
    PLACEHOLDER_API_KEY,
    model_configured,
    request_headers,
)
from memstream.streams.service.results import ContextResult, MemoryHitDict
from memstream.streams.service.sessions import NoSession, WorkerRefused, WorkerUnreachable

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

__all__ = ["MemoryAgent"]

log = logging.getLogger(__name__)

#: Earlier turns that join the message in the long-term memory query.
QUERY_TURNS = 2


class MemoryAgent:
    """An agent with short- and long-term memory over any OpenAI-compatible model.

    Use it on one event loop, one turn at a time; ``async with`` ends the session (and
    closes what :meth:`from_settings` opened) on the way out.

    Parameters
    ----------
    memory
        The memory client (:class:`AgentMemory`).
    llm
        The model's client.
    user_id
        Whose memory this is; every call names this user only.
    model
        The model name the server knows.
    session_id
        A session to continue; None starts a new one with the first turn.
    instructions
        The system prompt's first part.
    prompt_tokens
        The budget of everything sent to the model on a turn.
    memory_tokens
        The most of it the long-term memories may take.
    window_turns
        Turns the agent remembers itself, for when the worker cannot say.
    count_tokens
        How the budget is measured; :func:`~memstream.streams.chat.prompt.chat_tokens` by
        default, or the model's own tokenizer.
    request_headers
        Sent with every model request.
    closers
        Called by :meth:`aclose`: what the agent opened and owns.
    """

    def __init__(
        self,
        memory: AgentMemory,
        llm: AsyncOpenAI,
        *,
        user_id: str,
        model: str,
        session_id: str | None = None,
        instructions: str = INSTRUCTIONS,
        prompt_tokens: int = 6000,
        memory_tokens: int = 1500,
        window_turns: int = 50,
        count_tokens: TokenCounter = chat_tokens,
        request_headers: Mapping[str, str | Omit] | None = None,
        closers: Sequence[Callable[[], Awaitable[None]]] = (),
    ) -> None:
        if not isinstance(user_id, str) or not user_id:
            raise ValueError("user_id must be a non-empty string")
        base = count_tokens(render_system(instructions, [], [])) + 2 * MESSAGE_OVERHEAD_TOKENS
        if base > prompt_tokens // 2:
            raise ValueError(
                f"the instructions take {base} of the prompt's {prompt_tokens} tokens: more "
                "than half"
            )
        self.memory = memory
        self.llm = llm
        self.user_id = user_id
        self.model = model
        self.session_id = session_id
        self.instructions = instructions
        self.prompt_tokens = prompt_tokens
        self.memory_tokens = memory_tokens
        self.count_tokens = count_tokens
        self._headers = dict(request_headers or {})
        self._closers = list(closers)
        self._window: deque[ChatTurn] = deque(maxlen=window_turns)
        self._unsent: deque[ChatTurn] = deque()
        self._closed = False

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        user_id: str,
        session_id: str | None = None,
        memory: AgentMemory | None = None,
        instructions: str = INSTRUCTIONS,
    ) -> MemoryAgent:
        """An agent configured by the settings: the model at ``llm_base_url`` (OpenAI's when
        unset) with ``llm_api_key``, named ``chat_model`` (else ``llm_model``), the budget
        ``chat_prompt_tokens``, memories within ``memory_context_tokens``. Without
        ``memory`` it opens an :class:`~memstream.streams.client.AsyncMemoryClient` of the
        settings, and closes it with the agent.

        Raises
        ------
        ModelNotConfigured
            Neither a base URL nor an API key is set.
        """
        if not model_configured(settings):
            raise ModelNotConfigured(
                "no model configured: set MEMSTREAM_LLM_BASE_URL to an OpenAI-compatible "
                "endpoint (or MEMSTREAM_LLM_API_KEY for OpenAI's), and MEMSTREAM_CHAT_MODEL "
                "or MEMSTREAM_LLM_MODEL"
            )
        closers: list[Callable[[], Awaitable[None]]] = []
        if memory is None:
            from memstream.streams.client import AsyncMemoryClient

            client = AsyncMemoryClient(settings)
            memory = client
            closers.append(client.close)
        api_key = settings.llm_api_key.get_secret_value() or PLACEHOLDER_API_KEY
        llm = AsyncOpenAI(
            base_url=settings.llm_base_url or OPENAI_BASE_URL,
            api_key=api_key,
            timeout=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
        )
        closers.append(llm.close)
        return cls(
            memory,
            llm,
            user_id=user_id,
            model=settings.chat_model or settings.llm_model,
            session_id=session_id,
            instructions=instructions,
            prompt_tokens=settings.chat_prompt_tokens,
            memory_tokens=settings.memory_context_tokens,
            window_turns=settings.max_messages,
            request_headers=request_headers(api_key),
            closers=closers,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def chat(self, message: str) -> AgentTurn:
        """One turn: publish ``message``, build the prompt from working and long-term
        memory, ask the model, publish its reply.

        Raises
        ------
        ValueError, TypeError
            An empty or malformed message (or one over the size the log takes); nothing
            was published.
        MemoryWriteFailed
            The message could not be published; the model was not called. Send it again.
        ModelCallFailed
            The model failed; the message is published (it is the user's words).
        """
        if not isinstance(message, str):
            raise TypeError(f"message must be text, not {type(message).__name__}")
        if not message.strip():
            raise ValueError("message is empty")
        earlier = [turn.content for turn in self._window][-QUERY_TURNS:]
        new_session = self.session_id is None
        user_turn = await self._publish("user", message, keep_on_failure=False)
        session_id = self._session()
        budget = self._memory_budget(message)
        working, found = await asyncio.gather(
            self._working_memory(session_id, user_turn, new_session),
            self.memory.context(
                message,
                user_id=self.user_id,
                recent_turns=earlier,
                session_id=session_id,
                token_budget=budget,
            ),
        )
        prompt = build_prompt(
            message=message,
            memory_context=found["context"],
            working=working,
            budget=self.prompt_tokens,
            memory_budget=budget,
            instructions=self.instructions,
            count=self.count_tokens,
        )
        reply, usage = await self._ask(prompt, session_id, user_turn.event_id)
        reply_turn = ChatTurn("assistant", reply, str(uuid.uuid4()))
        try:
            await self._publish_turn(reply_turn, keep_on_failure=True)
            saved = True
        except MemoryWriteFailed:
            log.warning("chat: reply %s not published yet; kept for the next turn", reply_turn.event_id)
            saved = False
        return AgentTurn(
            reply=reply,
            memories=_used(found, prompt),
            session_id=session_id,
            user_event_id=user_turn.event_id,
            reply_event_id=reply_turn.event_id,
            reply_saved=saved,
            debug=TurnDebug(
                messages=prompt.messages,
                prompt_tokens=prompt.tokens,
                budget=prompt.budget,
                memory_tokens=prompt.memory_tokens,
                query=found["query"],
                working_memory=working.source,
                working_note=working.note,
                turns_in_prompt=prompt.turns,
                turns_left_out=prompt.turns_left_out,
                message_cut=prompt.message_cut,
                model_usage=usage,
            ),
        )

    async def end(self) -> str | None:
        """Close the session (the worker consolidates it) after publishing any reply still
        kept; return the close's event id, None if no session was started. The next
        :meth:`chat` starts a new session.

        Raises
        ------
        MemoryWriteFailed
            A kept reply still cannot be published: the session stays open.
        """
        if self.session_id is None:
            return None
        await self._flush()
        session_id = self.session_id
        try:
            close_id = await self.memory.close_session(session_id, user_id=self.user_id)
        except Exception as exc:
            raise MemoryWriteFailed(f"session {session_id} could not be closed: {exc}") from exc
        self.session_id = None
        self._window.clear()
        return close_id

    async def aclose(self) -> None:
        """End the session, then close what the agent owns; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.end()
        finally:
            for close in self._closers:
                await close()

    # --- one turn's parts ------------------------------------------------------------

    def _session(self) -> str:
        if self.session_id is None:  # set by the first publish; a bug otherwise
            raise RuntimeError("no session after publishing a turn")
        return self.session_id

    def _memory_budget(self, message: str) -> int:
        """The memories' share: what instructions and message leave, halved, and never more
        than ``memory_tokens``."""
        base = self.count_tokens(render_system(self.instructions, [], []))
        message_tokens = min(self.count_tokens(message), (self.prompt_tokens - base) // 2)
        left = self.prompt_tokens - base - message_tokens - 2 * MESSAGE_OVERHEAD_TOKENS
        return max(0, min(self.memory_tokens, left // 2))

    async def _working_memory(self, session_id: str, current: ChatTurn, new: bool) -> WorkingMemory:
        """The worker's working memory of the session, with the turns it has not folded yet
        from the agent's own record; the agent's record alone when the worker cannot say."""
        if new:
            started = (f"Session {session_id} · started with this message",)
            return WorkingMemory(started, (), "new", "a new session: nothing to fold yet")
        try:
            answer = await self.memory.session_context(
                session_id, user_id=self.user_id, budget=self.prompt_tokens
            )
            context = WorkingContext.model_validate(answer["context"])
        except NoSession:
            return self._own_memory(session_id, current, "the worker has not folded this session yet")
        except (WorkerUnreachable, WorkerRefused) as exc:
            return self._own_memory(session_id, current, f"no worker answered: {exc}")
        except (KeyError, TypeError, ValidationError):
            return self._own_memory(session_id, current, "the worker's answer held no working memory")
        folded = [
            ChatTurn(m.role, m.content, m.event_id)
            for m in context.messages
            if m.event_id != current.event_id
        ]
        # The worker may be a few events behind: add what the agent published after the
        # last of its turns the worker shows (its window can also hold other producers' turns).
        known = {turn.event_id for turn in folded}
        own = [turn for turn in self._window if turn.event_id != current.event_id]
        last_known = max((i for i, turn in enumerate(own) if turn.event_id in known), default=-1)
        missing = own[last_known + 1 :]
        lines = _one_lines(context.model_copy(update={"messages": (), "omitted_messages": 0}).render())
        note = f"added {len(missing)} turn(s) the worker had not folded yet" if missing else ""
        return WorkingMemory(lines, (*folded, *missing), "worker", note)

    def _own_memory(self, session_id: str, current: ChatTurn, why: str) -> WorkingMemory:
        turns = tuple(turn for turn in self._window if turn.event_id != current.event_id)
        user_turns = sum(1 for turn in (*turns, current) if turn.role == "user")
        return WorkingMemory(
            (f"Session {session_id} · {user_turns} user turns (as far as this agent knows)",),
            turns,
            "agent",
            why,
        )

    async def _ask(
        self, prompt: Prompt, session_id: str, user_event_id: str
    ) -> tuple[str, dict[str, int] | None]:
        try:
            completion = await self.llm.chat.completions.create(
                model=self.model,
                messages=cast("list[ChatCompletionMessageParam]", [dict(m) for m in prompt.messages]),
                extra_headers=self._headers or None,
            )
        except openai.OpenAIError as exc:
            raise ModelCallFailed(
                f"the model did not answer ({type(exc).__name__}: {exc}); your message is "
                f"saved in session {session_id}",
                session_id=session_id,
                user_event_id=user_event_id,
            ) from exc
        choice = completion.choices[0] if completion.choices else None
        text = choice.message.content if choice is not None else None
        if not text or not text.strip():
            reason = choice.finish_reason if choice is not None else "no choices"
            raise ModelCallFailed(
                f"the model answered with no text ({reason}); your message is saved in "
                f"session {session_id}",
                session_id=session_id,
                user_event_id=user_event_id,
            )
        usage = completion.usage
        counts = (
            {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}
            if usage is not None
            else None
        )
        return text, counts

    # --- publishing --------------------------------------------------------------------

    async def _publish(self, role: str, content: str, *, keep_on_failure: bool) -> ChatTurn:
        turn = ChatTurn(role, content, str(uuid.uuid4()))
        await self._publish_turn(turn, keep_on_failure=keep_on_failure)
        return turn

    async def _publish_turn(self, turn: ChatTurn, *, keep_on_failure: bool) -> None:
        """Publish ``turn`` after anything still kept, in order. A turn that fails is kept
        for the next publish when ``keep_on_failure`` (a reply), else dropped (the user's
        message: the caller sends it again)."""
        self._unsent.append(turn)
        try:
            await self._flush()
        except (MemoryWriteFailed, ValueError, TypeError):
            if not keep_on_failure and self._unsent and self._unsent[-1] is turn:
                self._unsent.pop()
            raise

    async def _flush(self) -> None:
        """Publish the kept turns, oldest first. Each turn's event id is its own, so a turn
        sent again after a failure the broker did in fact take is the same event (the
        worker drops the repeat)."""
        while self._unsent:
            turn = self._unsent[0]
            try:
                result = await self.memory.add(
                    [{"role": turn.role, "content": turn.content}],
                    user_id=self.user_id,
                    session_id=self.session_id,
                    close=False,
                    event_ids=[turn.event_id],
                )
            except (ValueError, TypeError):
                self._unsent.popleft()  # refused before anything was sent: never will be
                raise
            except Exception as exc:
                raise MemoryWriteFailed(
                    f"{'your message' if turn.role == 'user' else 'the last reply'} could not "
                    f"be saved ({type(exc).__name__}: {exc})"
                ) from exc
            self.session_id = result["session_id"]
            self._unsent.popleft()
            self._window.append(turn)


def _used(found: ContextResult, prompt: Prompt) -> tuple[MemoryHitDict, ...]:
    """The retrieved memories the prompt holds: placed in the context by the retriever, and
    still there after the prompt's own budget (which drops a line that does not fit)."""
    placed = tuple(hit for hit in found["memories"] if hit.get("in_context"))
    text = _flat(prompt.memory_text)
    if text == _flat(found["context"]):
        return placed
    # An episode's line is its conversation ("day | User: ... | Assistant: ..."), any other
    # memory's its text and date.
    return tuple(
        hit for hit in placed
        if _flat(" | ".join(hit["context"].splitlines()) if hit.get("context") else hit["memory"])
        in text
    )


def _flat(text: str) -> str:
    return " ".join(text.split())


def _one_lines(text: str) -> tuple[str, ...]:
    """``text``'s lines with any line break inside a value gone: a scratchpad's newline
    must not open a section of the prompt."""
    return tuple(" ".join(line.split()) for line in text.splitlines() if line.strip())
