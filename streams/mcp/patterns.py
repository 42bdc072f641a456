"""The MCP tool memory_patterns: the user's learned patterns (what they usually ask about, the
tools they use, the corrections they repeat, when they are active), each with its evidence,
named by the caller's own user id and cut to fit a model's context window as the other
answers are (:mod:`memstream.streams.mcp.results`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Protocol

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from memstream.models.events.envelope import UtcInstant
from memstream.streams.mcp.results import Limits, _Answer, _Cuts
from memstream.streams.service.results import PatternsDict

__all__ = ["PatternItem", "PatternsAnswer", "memory_patterns_tool", "patterns_answer"]

#: The most sessions or events one pattern lists (its counts say how many there are).
_SOURCES = 20


class PatternItem(_Answer):
    """A learned pattern: the line that says it, its key, the sessions that show it (their
    count, and every session counted), its events, importance and decay score."""

    content: str
    pattern: str
    kind: str
    session_count: int
    sessions_seen: int
    sessions: list[str]
    event_ids: list[str]
    importance: float
    decay: float
    memory_id: str


class PatternsAnswer(_Answer):
    """The user's learned patterns (now, or at ``as_of``), tools first, then corrections,
    requests, hours and weekday."""

    user_id: str
    as_of: str | None
    patterns: list[PatternItem]
    note: str | None


def patterns_answer(user_id: str, found: PatternsDict, limits: Limits) -> PatternsAnswer:
    """The patterns as an answer within ``limits``: those that fit, in order, each text cut
    and each list of sources its last few."""
    cuts = _Cuts(what="patterns")
    items = [
        PatternItem(
            content=cuts.cut(p["content"], limits.memory_chars),
            pattern=cuts.cut(p["pattern"], limits.memory_chars),
            kind=p["kind"],
            session_count=p["session_count"],
            sessions_seen=p["sessions_seen"],
            sessions=p["sessions"][-_SOURCES:],
            event_ids=p["event_ids"][-_SOURCES:],
            importance=p["importance"],
            decay=p["decay"],
            memory_id=p["memory_id"],
        )
        for p in found["patterns"]
    ]
    kept = cuts.fit(items, limits.result_chars)
    note = cuts.note(limits)
    if not items:
        note = "No patterns learned yet: a habit shows after three sessions."
    return PatternsAnswer(user_id=user_id, as_of=found["as_of"], patterns=kept, note=note)


class _Caller(Protocol):
    user_id: str
    namespaced: str

    def refusal(self, exc: BaseException) -> ToolError: ...


class _Memories(Protocol):
    def patterns(self, *, user_id: str, as_of: Any = None) -> Awaitable[PatternsDict]: ...


def memory_patterns_tool(
    memories: _Memories, caller: Callable[[Context, str | None], _Caller], limits: Limits
) -> Callable[..., Awaitable[PatternsAnswer]]:
    """The tool function :func:`memstream.streams.mcp.server.create_mcp_server` adds."""

    async def memory_patterns(
        ctx: Context,
        as_of: Annotated[
            UtcInstant | None,
            Field(description="What held at this time (ISO 8601 with a zone); left out: now."),
        ] = None,
        user_id: Annotated[
            str | None,
            Field(
                description="The user whose memory this is, within your API key's tenant. "
                "Leave it out to act for the server's default user.",
                max_length=1024,
            ),
        ] = None,
    ) -> PatternsAnswer:
        """The user's learned habits across conversations: the tools they use, corrections
        they repeat, what they usually ask about, the hours (UTC) and weekday they are
        active; each with the sessions and turns that show it, its importance and decay
        score. Searches leave patterns out; use this to adapt to how the user works."""
        who = caller(ctx, user_id)
        try:
            found = await memories.patterns(user_id=who.namespaced, as_of=as_of)
        except (ValueError, TypeError) as exc:
            raise who.refusal(exc) from None
        return patterns_answer(who.user_id, found, limits)

    return memory_patterns
