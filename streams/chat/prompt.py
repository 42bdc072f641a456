"""The agent's prompt: instructions, long-term memories, working memory and the user's
message, within one token budget.

The seed's agent put a Python list ``repr`` of preferences into its scratchpad and sent
every message of the window whatever its size. Here every part is text made for the model
(the retriever's sections, the worker's working-memory lines, the turns as chat messages),
and :func:`build_prompt` admits each part only while the whole prompt, measured the way it
is sent, stays within the budget: the user's message first (cut to half of what is left at
most), then memories best first, the working-memory lines, and the newest turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memstream.models.session import TokenCounter, estimate_tokens

__all__ = [
    "CHARS_PER_TOKEN",
    "INSTRUCTIONS",
    "MESSAGE_OVERHEAD_TOKENS",
    "ChatTurn",
    "Prompt",
    "WorkingMemory",
    "build_prompt",
    "chat_tokens",
    "cut_to_tokens",
]

#: A token of the budget covers at most this many characters, whatever the word count says.
CHARS_PER_TOKEN = 8
#: What each chat message costs beyond its content (role and separators; OpenAI counts 3-4).
MESSAGE_OVERHEAD_TOKENS = 4
#: Appended where the user's message had to be cut to fit the prompt.
MESSAGE_CUT = " … [the rest of this message was cut to fit the prompt]"
#: Appended where any other text had to be cut.
ELLIPSIS = "…"
#: A part is only cut to fit when at least this many tokens of it can stay.
MIN_CUT_TOKENS = 8

INSTRUCTIONS = (
    "You are a helpful assistant with a memory of this user. Below is what you remember "
    "about them from earlier conversations and the state of this conversation. Use them when "
    "they help, without reciting them; when they disagree with what the user says now, "
    "believe the user."
)
MEMORY_HEADER = "# What you remember about the user"
SESSION_HEADER = "# This conversation"
NOTHING_REMEMBERED = "(nothing relevant)"
NEW_SESSION = "(just started)"


def chat_tokens(text: str) -> int:
    """Tokens of ``text`` as the agent budgets them: memstream's word-and-punctuation count
    (:func:`~memstream.models.session.estimate_tokens`, the worker's and the retriever's),
    but never fewer than one per :data:`CHARS_PER_TOKEN` characters, so a "word" of 100,000
    letters cannot pass as one token. Pass the model's own tokenizer to the agent for exact
    counts.

    Examples
    --------
    >>> chat_tokens("Hello, world!"), chat_tokens("x" * 800)
    (4, 100)
    """
    return max(estimate_tokens(text), -(-len(text) // CHARS_PER_TOKEN))


def cut_to_tokens(
    text: str, budget: int, count: TokenCounter = chat_tokens, marker: str = ELLIPSIS
) -> str:
    """``text`` if it fits ``budget`` tokens; else its longest start that fits with
    ``marker`` after it; "" when not even the marker fits.

    Examples
    --------
    >>> cut_to_tokens("one two three four", 3)
    'one two…'
    """
    if count(text) <= budget:
        return text
    if count(marker) > budget:
        return ""
    low, high = 0, len(text)
    while low < high:  # the longest start that fits, by bisection: counts grow with length
        middle = (low + high + 1) // 2
        if count(text[:middle] + marker) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low] + marker


@dataclass(frozen=True)
class ChatTurn:
    """One message of the conversation: its role, text and the id of its event."""

    role: str
    content: str
    event_id: str = ""


@dataclass(frozen=True)
class WorkingMemory:
    """The session part of a prompt and where it came from.

    ``lines`` are the working memory as text (session, task, progress, scratchpad, entities,
    tool calls), ``turns`` the conversation so far, oldest first. ``source`` is ``worker``
    when the worker that owns the session answered (``note`` then says if the agent added
    turns the worker had not folded yet), ``agent`` when the agent used its own record of the
    turns it published (``note`` says why), ``new`` for a session the agent has just
    started (nothing to fold yet).
    """

    lines: tuple[str, ...]
    turns: tuple[ChatTurn, ...]
    source: Literal["worker", "agent", "new"]
    note: str = ""


@dataclass(frozen=True)
class Prompt:
    """The chat messages of one turn, within ``budget`` tokens by the counter they were
    built with (``tokens``, each message's content plus its overhead).

    ``memory_lines`` are the lines of the memory context that made it in, ``turns`` and
    ``turns_left_out`` count the conversation's turns in it and left out,
    ``message_cut`` says whether the user's message had to be cut.
    """

    messages: tuple[dict[str, str], ...]
    tokens: int
    budget: int
    memory_text: str
    memory_tokens: int
    turns: int
    turns_left_out: int
    message_cut: bool


def build_prompt(
    *,
    message: str,
    memory_context: str,
    working: WorkingMemory,
    budget: int,
    memory_budget: int,
    instructions: str = INSTRUCTIONS,
    count: TokenCounter = chat_tokens,
) -> Prompt:
    """The messages of one turn: a system message (``instructions``, the memory context,
    the working-memory lines), the conversation's turns, then the user's ``message``.

    Everything is measured as it is sent: the user's message is cut to half of what the
    instructions leave at most; memory lines are admitted best first (a line that does not
    fit is skipped, a section header comes only with a line of its own) while the memory
    text stays within ``memory_budget``; working-memory lines come next (a third of what is
    left at most; one that does not fit is cut); then the turns, newest first, while they
    fit, the newest cut if it is too long by itself. The turns left out are said in one line.

    Raises
    ------
    ValueError
        ``instructions`` take more than half of ``budget``.
    """
    system_header_only = render_system(instructions, [], [])
    base = count(system_header_only) + 2 * MESSAGE_OVERHEAD_TOKENS
    if base > budget // 2:
        raise ValueError(
            f"the instructions take {base} of the prompt's {budget} tokens: more than half"
        )
    user_text = cut_to_tokens(message, (budget - base) // 2, count, MESSAGE_CUT)
    if not user_text:  # never send an empty turn: at least the marker says what happened
        user_text = MESSAGE_CUT.strip()
    builder = _Builder(instructions, user_text, budget, count)

    sections = _memory_sections(memory_context)
    for header, line in sections:
        lines = [*builder.memory, *([header] if header and header not in builder.memory else []), line]
        if count(_join_memory(lines)) <= memory_budget and builder.fits(memory=lines):
            builder.memory = lines

    share = builder.left() // 3
    for line in working.lines:
        if not builder.add_session_line(line, share):
            break

    kept = builder.admit_turns(working.turns)
    session_lines = builder.session
    while len(kept) < len(working.turns):
        left_out = len(working.turns) - len(kept)
        note = f"[{left_out} earlier turn(s) of this conversation left out for the budget]"
        if builder.fits(session=[*session_lines, note], turns=kept):
            builder.session = [*session_lines, note]
            break
        if not kept:
            break  # no room for the note either: the prompt just has no turns
        kept = kept[1:]
    builder.turns = kept

    messages = builder.messages()
    return Prompt(
        messages=messages,
        tokens=builder.total(messages),
        budget=budget,
        memory_text=_join_memory(builder.memory),
        memory_tokens=count(_join_memory(builder.memory)) if builder.memory else 0,
        turns=len(kept),
        turns_left_out=len(working.turns) - len(kept),
        message_cut=user_text != message,
    )


def render_system(instructions: str, memory: Sequence[str], session: Sequence[str]) -> str:
    """The system message: instructions, then the memory and session sections."""
    return "\n\n".join(
        [
            instructions,
            f"{MEMORY_HEADER}\n{_join_memory(memory) or NOTHING_REMEMBERED}",
            f"{SESSION_HEADER}\n{chr(10).join(session) or NEW_SESSION}",
        ]
    )


def chat_message(turn: ChatTurn) -> dict[str, str]:
    """``turn`` as a chat-completions message. A session's ``system`` and ``tool`` messages
    (from other producers) go as system messages: the API takes a tool message only as the
    answer to a tool call of the same request."""
    if turn.role in ("user", "assistant", "system"):
        return {"role": turn.role, "content": turn.content}
    return {"role": "system", "content": f"{turn.role.capitalize()} message: {turn.content}"}


class _Builder:
    """The parts admitted so far, and the prompt's size with some of them changed."""

    def __init__(self, instructions: str, user_text: str, budget: int, count: TokenCounter) -> None:
        self.instructions = instructions
        self.user_text = user_text
        self.budget = budget
        self.count = count
        self.memory: list[str] = []
        self.session: list[str] = []
        self.turns: list[ChatTurn] = []

    def messages(
        self,
        memory: Sequence[str] | None = None,
        session: Sequence[str] | None = None,
        turns: Sequence[ChatTurn] | None = None,
    ) -> tuple[dict[str, str], ...]:
        system = render_system(
            self.instructions,
            self.memory if memory is None else memory,
            self.session if session is None else session,
        )
        return (
            {"role": "system", "content": system},
            *(chat_message(turn) for turn in (self.turns if turns is None else turns)),
            {"role": "user", "content": self.user_text},
        )

    def total(self, messages: Sequence[dict[str, str]]) -> int:
        return sum(self.count(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)

    def fits(
        self,
        *,
        memory: Sequence[str] | None = None,
        session: Sequence[str] | None = None,
        turns: Sequence[ChatTurn] | None = None,
    ) -> bool:
        return self.total(self.messages(memory, session, turns)) <= self.budget

    def left(self) -> int:
        return self.budget - self.total(self.messages())

    def add_session_line(self, line: str, share: int) -> bool:
        """Admit ``line`` to the session section while that stays within ``share`` tokens
        and the prompt within its budget; a line too long for what is left goes in cut, and
        then no more (False)."""
        lines = [*self.session, line]
        if self.fits(session=lines) and self.count("\n".join(lines)) <= share:
            self.session = lines
            return True
        used = self.count("\n".join(self.session)) if self.session else 0
        room = min(share - used, self.left()) - 1  # the newline before it
        if room >= MIN_CUT_TOKENS:
            lines = [*self.session, cut_to_tokens(line, room, self.count)]
            if self.fits(session=lines) and self.count("\n".join(lines)) <= share:
                self.session = lines
        return False

    def admit_turns(self, turns: Sequence[ChatTurn]) -> list[ChatTurn]:
        """The newest turns that fit, oldest first; the newest is cut if it alone is too long."""
        left = self.left()
        kept: list[ChatTurn] = []
        for turn in reversed(turns):
            cost = self._cost(turn)
            if cost <= left:
                kept.append(turn)
                left -= cost
                continue
            if not kept:
                # What the role label and the message's overhead leave for the content.
                room = left - self._cost(ChatTurn(turn.role, "")) - 1
                if room >= MIN_CUT_TOKENS:
                    cut = ChatTurn(turn.role, cut_to_tokens(turn.content, room, self.count), turn.event_id)
                    if self._cost(cut) <= left:
                        kept.append(cut)
            break
        kept.reverse()
        return kept

    def _cost(self, turn: ChatTurn) -> int:
        return self.count(chat_message(turn)["content"]) + MESSAGE_OVERHEAD_TOKENS


def _memory_sections(context: str) -> list[tuple[str, str]]:
    """The memory context's lines, each with the header of its section ("" if none)."""
    items: list[tuple[str, str]] = []
    header = ""
    for line in context.splitlines():
        if not line.strip():
            continue
        if line.startswith("## "):
            header = line
        else:
            items.append((header, line))
    return items


def _join_memory(lines: Sequence[str]) -> str:
    """Memory lines as text, a blank line before each section header."""
    out: list[str] = []
    for line in lines:
        if line.startswith("## ") and out:
            out.append("")
        out.append(line)
    return "\n".join(out)
