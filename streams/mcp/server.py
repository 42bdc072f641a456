"""The MCP server's tools (create_mcp_server): memstream's memory for an agent, each tool a
thin adapter over :class:`~memstream.streams.service.app.Service`, with the HTTP API's keys
and tenancy.

A call acts for one user: its ``user_id``, else the server's default user, else the one user
the key is bound to. The key's tenant namespaces that id (``tenant:user``,
:meth:`~memstream.streams.api.auth.ApiKey.user_id`) before the service sees it, and answers
name the caller's own id. Over stdio the server holds one key; over HTTP each request brings
its own, which :mod:`memstream.streams.mcp.http` checked and left in the request's state.

Every failure a caller can cause or meet is a tool error (``isError``) with a clear message:
a refused user or write, bad input, an unknown memory (another user's is unknown too), no
open session, no worker. Nothing quotes another user's data, and no key is logged.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args

from aiokafka.errors import KafkaError
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memstream.models.events.envelope import Identifier, UtcInstant
from memstream.models.events.memory import MemoryType
from memstream.projections.memories import SearchFilters
from memstream.streams.api.auth import ApiKey, Refused
from memstream.streams.api.deps import API_KEY_STATE
from memstream.streams.kafka.logid import LogLost
from memstream.streams.mcp.entities import ENTITY_LIMIT, EntityAnswer, EntityLimit, entity_answer
from memstream.streams.mcp.errors import OneLineErrors, reasons
from memstream.streams.mcp.patterns import memory_patterns_tool
from memstream.streams.mcp.projects import memory_projects_tool
from memstream.streams.mcp.results import (
    AddAnswer,
    DeleteAnswer,
    HistoryAnswer,
    Limits,
    MemoryAnswer,
    MemoryContextAnswer,
    ProfileAnswer,
    SearchAnswer,
    SessionContextAnswer,
    TimelineAnswer,
    add_answer,
    history_answer,
    memory_answer,
    memory_context_answer,
    profile_answer,
    search_answer,
    session_context_answer,
    timeline_answer,
)
from memstream.streams.service.app import LOG_LOST, Service
from memstream.streams.service.sessions import NoSession, WorkerRefused, WorkerUnreachable

__all__ = ["INSTRUCTIONS", "TOOLS", "create_mcp_server"]

log = logging.getLogger(__name__)

#: The most memories one search returns over MCP (the service allows more; a context
#: window does not).
MAX_SEARCH_LIMIT = 50
_NO_MEMORY = "no such memory for this user"
_SdkLogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
_SDK_LOG_LEVELS: dict[str, _SdkLogLevel] = {level: level for level in get_args(_SdkLogLevel)}

INSTRUCTIONS = """\
memstream is the user's long-term memory, kept across conversations.
- At the start of a turn, call memory_context with the user's message to get what memory \
says about it, ready for your prompt; or search_memories for specific memories with ids.
- After a conversation (or when the user tells you something worth keeping), call \
add_memory with its messages: memstream extracts facts, preferences, corrections, a summary \
and episodes from it. They are searchable a few seconds later, not at once.
- get_memory, memory_history and delete_memory take a memory id from a search.
- A memory marked stale no longer holds (the user changed it): trust the one that replaced \
it (superseded_by). memory_timeline shows how one thing changed over time ("my budget").
- memory_profile: what holds about the user now, compact; load it at a session's start.
- memory_entity: a person, place or thing the user talked about ("Ana", "my sister"), with \
its facts and relations across conversations.
- memory_patterns: the user's habits (tools, repeated corrections, usual requests, hours).
- memory_projects: the user's projects: tasks over time, what was decided, what is open.
- user_id can be left out when the server has a default user."""

UserId = Annotated[
    str | None,
    Field(
        description="The user whose memory this is, within your API key's tenant. Leave it out "
        "to act for the server's default user.",
        max_length=1024,
    ),
]
MemoryId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=1024,
        description="A memory's id, as search_memories or memory_context return it.",
    ),
]


class ChatMessage(BaseModel):
    """One message of a conversation."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    role: Literal["user", "assistant", "system", "tool"] = Field(
        description="Who said it: 'user' (the person the memory is about), 'assistant' (you), "
        "'system' or 'tool'."
    )
    content: str = Field(max_length=100_000, description="What was said.")
    name: str | None = Field(
        None, min_length=1, max_length=512, description="The speaker's name, when several people talk."
    )


class _Caller:
    """The user one tool call acts for: ``user_id`` as the caller named it (or the default),
    ``namespaced`` as the service knows it."""

    def __init__(self, user_id: str, namespaced: str) -> None:
        self.user_id = user_id
        self.namespaced = namespaced

    def refusal(self, exc: BaseException) -> ToolError:
        """A tool error with the service's reason, naming the caller's own user id."""
        said = reasons(exc) if isinstance(exc, ValidationError) else str(exc)
        return ToolError(said.replace(self.namespaced, self.user_id))


def create_mcp_server(
    service: Service,
    *,
    key: ApiKey | None = None,
    default_user: str | None = None,
    limits: Limits | None = None,
) -> MCPServer:
    """The MCP server of memstream's tools over ``service``.

    Parameters
    ----------
    service
        The application layer every tool calls; the caller owns it (and closes it).
    key
        The key every call acts with (stdio); None to take each request's key from its
        HTTP state (:mod:`memstream.streams.mcp.http` put it there).
    default_user
        The user a call acts for when it names none; without one, the key's only user.
    limits
        How large an answer may grow (default: the service's settings').

    Examples
    --------
    >>> server = create_mcp_server(service, key=ApiKey("acme"))  # doctest: +SKIP
    >>> async with mcp.Client(server) as client:  # doctest: +SKIP
    ...     await client.call_tool("search_memories", {"query": "where do I live"})
    """
    settings = service.settings
    limits = limits or Limits(settings.mcp_max_result_chars, settings.mcp_max_memory_chars)
    server = OneLineErrors(
        "memstream",
        title="memstream memory",
        description="Event-sourced long-term memory for LLM agents.",
        instructions=INSTRUCTIONS,
        # The SDK configures the root logger with this level when nothing else has.
        log_level=_SDK_LOG_LEVELS.get(settings.log_level.upper(), "WARNING"),
    )
    memories = service.memories

    def caller(ctx: Context, user_id: str | None, *, write: bool = False) -> _Caller:
        api_key = key if key is not None else _request_key(ctx)
        if user_id is None:
            user_id = default_user
        if user_id is None and api_key.users is not None and len(api_key.users) == 1:
            (user_id,) = api_key.users
        if user_id is None:
            raise ToolError(
                "user_id is required: this server has no default user (memstream mcp --user, "
                "MEMSTREAM_MCP_USER) and the API key is not bound to exactly one user"
            )
        if user_id == "":
            raise ToolError("user_id must not be empty: leave it out to act for the default user")
        try:
            return _Caller(user_id, api_key.user_id(user_id, write=write))
        except Refused as refused:
            raise ToolError(refused.reason) from None

    async def add_memory(
        ctx: Context,
        messages: Annotated[
            list[ChatMessage] | None,
            Field(
                min_length=1,
                max_length=1000,
                description="The conversation, oldest first. Give this or text, not both.",
            ),
        ] = None,
        text: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=100_000,
                description="One thing the user said, as a single user message. Give this or "
                "messages, not both.",
            ),
        ] = None,
        session_id: Annotated[
            Identifier | None,
            Field(
                description="The conversation's id: reuse it to add to an open session. Left "
                "out, a new session is started and its id returned."
            ),
        ] = None,
        close: Annotated[
            bool,
            Field(
                description="Close the session now so it is turned into long-term memories "
                "(default). False keeps it open for more messages (see session_context)."
            ),
        ] = True,
        wait: Annotated[
            bool,
            Field(
                description="Answer only once the memories are searchable (needs close), "
                "listing them; up to 30 seconds. Without it the answer comes at once and the "
                "memories follow a few seconds later."
            ),
        ] = False,
        user_id: UserId = None,
    ) -> AddAnswer:
        """Store a conversation, or one thing the user said, in the user's long-term memory.

        memstream's worker extracts memories from it (facts, preferences, corrections, a
        summary, and episodes that keep the conversation around each user turn) once the
        session is closed, which this does by default. They appear in search_memories and
        memory_context a few seconds later, not at once; with wait=true the answer comes
        once they do, and lists them. Returns the session id and the ids of the events
        published."""
        who = caller(ctx, user_id, write=True)
        if (messages is None) == (text is None):
            raise ToolError("give either messages or text, not both and not neither")
        conversation: str | list[dict[str, Any]] = (
            text if text is not None else [m.model_dump(exclude_none=True) for m in messages or ()]
        )
        try:
            result = await memories.add(
                conversation, user_id=who.namespaced, session_id=session_id, close=close,
                wait=wait,
            )
        except (ValueError, TypeError) as exc:
            raise who.refusal(exc) from None
        return add_answer(who.user_id, result, closed=close, limits=limits)

    async def search_memories(
        ctx: Context,
        query: Annotated[
            str,
            Field(
                max_length=20_000,
                description="What to look for, in plain words (a question works: 'where does "
                "the user live?').",
            ),
        ],
        limit: Annotated[
            int, Field(ge=1, le=MAX_SEARCH_LIMIT, description="How many memories at most.")
        ] = 5,
        memory_types: Annotated[
            list[MemoryType] | None,
            Field(
                min_length=1,
                description="Only these types: preference, fact, correction, summary (of a "
                "conversation), episode (a user turn with its conversation), entity.",
            ),
        ] = None,
        since: Annotated[
            UtcInstant | None,
            Field(description="Only memories from this time on (ISO 8601 with a zone)."),
        ] = None,
        until: Annotated[
            UtcInstant | None,
            Field(description="Only memories from before this time (ISO 8601 with a zone)."),
        ] = None,
        user_id: UserId = None,
    ) -> SearchAnswer:
        """Search the user's long-term memories; the best matches first.

        Each memory has an id (for get_memory, memory_history, delete_memory), a type, a score
        from 0 to 1 (mostly how well it matches the query), its text and, for an episode, the
        conversation it came from. A memory with stale=true states what no longer holds (the
        user said something newer): superseded_by is the memory that replaced it, valid_until
        when it stopped holding, and it ranks below the current one, so answer from that.
        For a ready-made prompt section, use memory_context."""
        who = caller(ctx, user_id)
        filters = SearchFilters(
            memory_types=tuple(memory_types) if memory_types else None, since=since, until=until
        )
        try:
            hits = await memories.search(
                query, user_id=who.namespaced, limit=limit, filters=filters
            )
        except (ValueError, TypeError) as exc:
            raise who.refusal(exc) from None
        return search_answer(who.user_id, query, hits, limits)

    async def get_memory(ctx: Context, memory_id: MemoryId, user_id: UserId = None) -> MemoryAnswer:
        """One of the user's memories by id, whatever its status (active, superseded,
        deleted, expired, forgotten), with its tier, importance and how often it was
        reinforced and used. valid_until, when set, is when what it states stopped holding
        (superseded_by names what replaced it); None while it holds."""
        who = caller(ctx, user_id)
        found = await memories.get(memory_id, user_id=who.namespaced)
        if found is None:
            raise ToolError(_NO_MEMORY)
        return memory_answer(who.user_id, found, limits)

    async def delete_memory(
        ctx: Context, memory_id: MemoryId, user_id: UserId = None
    ) -> DeleteAnswer:
        """Delete one of the user's memories by id. It leaves search once memstream's worker
        has applied the deletion (seconds); memory_history keeps the record. Needs an API key
        that may write."""
        who = caller(ctx, user_id, write=True)
        try:
            event_id = await memories.delete(memory_id, user_id=who.namespaced)
        except KeyError:
            raise ToolError(_NO_MEMORY) from None
        except (ValueError, TypeError) as exc:
            raise who.refusal(exc) from None
        return DeleteAnswer(user_id=who.user_id, memory_id=memory_id, event_id=event_id)

    async def memory_history(
        ctx: Context, memory_id: MemoryId, user_id: UserId = None
    ) -> HistoryAnswer:
        """The life of one of the user's memories from memstream's event log, oldest first:
        added, reinforced, superseded (by or of another memory, with how: updated or
        retracted, and from when), outdated (an episode or summary whose fact changed),
        promoted, expired, forgotten, deleted, each with its time and details."""
        who = caller(ctx, user_id)
        entries = await memories.history(memory_id, user_id=who.namespaced)
        if not entries:
            # Every memory has its memory_added: none means unknown, or another user's.
            raise ToolError(_NO_MEMORY)
        return history_answer(who.user_id, memory_id, entries, limits)

    async def memory_timeline(
        ctx: Context,
        about: Annotated[
            str,
            Field(
                min_length=1,
                max_length=1000,
                description="What to follow over time, in plain words: 'budget', 'where the "
                "user lives', 'employer'.",
            ),
        ],
        subject: Annotated[
            str | None,
            Field(
                max_length=200,
                description="Whose: a speaker's name, or someone the user talks about "
                "(\"User's sister\"). Left out: the user's own.",
            ),
        ] = None,
        user_id: UserId = None,
    ) -> TimelineAnswer:
        """How one thing about the user changed over time ("my budget over time", "where
        have I lived"): each value it held, oldest first, with valid_from and valid_until
        (null: it holds now), its status (active, or superseded when a newer value replaced
        it), the statement and the turns that said it. The last value with valid_until null
        is what holds now. An empty list (attribute null) means nothing the user said
        matches: try other words, or search_memories."""
        who = caller(ctx, user_id)
        try:
            found = await memories.timeline(about, user_id=who.namespaced, subject=subject)
        except (ValueError, TypeError) as exc:
            raise who.refusal(exc) from None
        return timeline_answer(who.user_id, found, limits)

    async def memory_profile(
        ctx: Context,
        subject: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=200,
                description="Only this subject's: 'User', a speaker's name, or someone the "
                "user talks about (\"User's sister\"). Left out: every subject's.",
            ),
        ] = None,
        as_of: Annotated[
            UtcInstant | None,
            Field(description="What held at this time (ISO 8601 with a zone); left out: now."),
        ] = None,
        user_id: UserId = None,
    ) -> ProfileAnswer:
        """What holds about the user now (or at as_of), compact: their current facts and
        preferences, the user's own (subject "User") first, then other people's by name,
        each with its kind, attribute, value, valid_from, the statement, its memory id and
        the turns that said it. A changed fact shows its new value only; memory_timeline
        shows its past. Load it at the start of a conversation."""
        who = caller(ctx, user_id)
        try:
            found = await memories.profile(user_id=who.namespaced, subject=subject, as_of=as_of)
        except (ValueError, TypeError) as exc:
            raise who.refusal(exc) from None
        return profile_answer(who.user_id, found, limits)

    async def memory_entity(
        ctx: Context,
        name: Annotated[
            str,
            Field(
                min_length=1,
                max_length=200,
                description="Any of its names: 'Ana', \"User's sister\", 'my sister', 'Acme'.",
            ),
        ],
        as_of: Annotated[
            UtcInstant | None,
            Field(description="What held at this time (ISO 8601 with a zone); left out: now."),
        ] = None,
        limit: EntityLimit = ENTITY_LIMIT,
        user_id: UserId = None,
    ) -> EntityAnswer:
        """One person, place, organisation, pet, project or thing of the user's memories,
        found by any of its names across conversations: its kind, other names, the memories,
        turns and sessions that name it, its neighbours, its facts (claims about it, each with
        valid_from, valid_until and whether it holds) and its relations (claims whose value
        is another entity, and entities named in the same memory), each with its sources;
        at most limit of each (total_* count them all)."""
        who = caller(ctx, user_id)
        try:
            found = await memories.entity(name, user_id=who.namespaced, as_of=as_of, limit=limit)
        except (ValueError, TypeError) as exc:
            raise who.refusal(exc) from None
        return entity_answer(who.user_id, found, limits)

    async def session_context(
        ctx: Context,
        session_id: Annotated[
            Identifier, Field(description="The open session's id, as add_memory returned it.")
        ],
        token_budget: Annotated[
            int | None,
            Field(
                ge=1, le=100_000, description="Tokens of messages at most (default: the server's)."
            ),
        ] = None,
        user_id: UserId = None,
    ) -> SessionContextAnswer:
        """The working memory of an open session, as prompt text: its newest messages within
        the token budget, with its task, progress, scratchpad, entities and recent tool
        calls. Only a session still open has one (added with close=false, not yet closed);
        a closed session's content is in long-term memory (memory_context)."""
        who = caller(ctx, user_id)
        try:
            reply = await service.sessions.context(
                user_id=who.namespaced, session_id=session_id, budget=token_budget
            )
        except NoSession:
            raise ToolError(
                f"no open session {session_id!r} for this user: it was never opened, or it "
                "closed and its messages went to long-term memory (use memory_context or "
                "search_memories)"
            ) from None
        except WorkerRefused:
            raise ToolError(
                "the memstream worker refused the request: this server lacks its web token "
                "(MEMSTREAM_WEB_TOKEN)"
            ) from None
        except WorkerUnreachable:
            raise ToolError(
                "no memstream worker answers: an open session's context needs a running "
                "worker (memstream worker)"
            ) from None
        return session_context_answer(who.user_id, session_id, reply, limits)

    async def memory_context(
        ctx: Context,
        message: Annotated[
            str,
            Field(max_length=20_000, description="The user's current message."),
        ],
        recent_turns: Annotated[
            list[Annotated[str, Field(max_length=20_000)]],
            Field(
                max_length=20,
                description="The last few turns before it, oldest first (they sharpen the search).",
            ),
        ] = [],  # noqa: B006 -- pydantic copies defaults; the schema shows it
        token_budget: Annotated[
            int | None,
            Field(ge=1, le=8000, description="Tokens of context at most (default: the server's)."),
        ] = None,
        session_id: Annotated[
            Identifier | None,
            Field(description="The current conversation's id, recorded with the retrieval."),
        ] = None,
        project: Annotated[
            str | None,
            Field(min_length=1, max_length=200, description="The project the turn is about."),
        ] = None,
        user_id: UserId = None,
    ) -> MemoryContextAnswer:
        """What the user's long-term memory says that bears on the current turn, as a
        section for your prompt: the most relevant preferences, facts, corrections,
        summaries and episodes, ranked and cut to a token budget. A line starting "until
        <date>:" no longer holds (the user said something newer); "since <date>:" marks what
        replaced it. With project, that project's tasks, decisions and open items follow.
        Call it at the start of a turn with the user's message."""
        who = caller(ctx, user_id)
        try:
            result = await memories.context(
                message,
                user_id=who.namespaced,
                recent_turns=recent_turns,
                session_id=session_id,
                token_budget=token_budget,
                project=project,
            )
        except (ValueError, TypeError) as exc:
            raise who.refusal(exc) from None
        return memory_context_answer(who.user_id, result, limits)

    read = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    tools: list[tuple[Callable[..., Any], str, ToolAnnotations]] = [
        (
            add_memory,
            "Remember a conversation",
            ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
        ),
        (search_memories, "Search memories", read),
        (get_memory, "Get a memory", read),
        (
            delete_memory,
            "Delete a memory",
            ToolAnnotations(
                read_only_hint=False,
                destructive_hint=True,
                idempotent_hint=True,
                open_world_hint=False,
            ),
        ),
        (memory_history, "A memory's history", read),
        (memory_timeline, "How one thing changed over time", read),
        (memory_profile, "What holds about the user", read),
        (memory_entity, "A person, place or thing the user talked about", read),
        (memory_patterns_tool(memories, caller, limits), "The user's learned habits", read),
        (memory_projects_tool(memories, caller, limits, UserId), "The user's projects", read),
        (session_context, "An open session's working memory", read),
        (memory_context, "Long-term memory for this turn", read),
    ]
    for function, title, hints in tools:
        server.add_tool(
            _unexpected_failures_logged(function),
            name=function.__name__,
            title=title,
            description=inspect.cleandoc(function.__doc__ or ""),
            annotations=hints,
        )
    return server


#: The tools :func:`create_mcp_server` offers, by name.
TOOLS = (
    "add_memory",
    "search_memories",
    "get_memory",
    "delete_memory",
    "memory_history",
    "memory_timeline",
    "memory_profile",
    "memory_entity",
    "memory_patterns",
    "memory_projects",
    "session_context",
    "memory_context",
)


def _request_key(ctx: Context) -> ApiKey:
    """The key :mod:`memstream.streams.mcp.http` authenticated this request with."""
    request = ctx.request_context.request
    state = getattr(request, "scope", {}).get("state") or {}
    found = state.get(API_KEY_STATE)
    if not isinstance(found, ApiKey):
        raise ToolError("this server needs an API key (Authorization: Bearer <key>)")
    return found


def _unexpected_failures_logged(
    function: Callable[..., Any],
) -> Callable[..., Any]:
    """``function`` with the failures of memstream's own parts (the broker, the memory
    table) turned into a tool error that says so; the details go to the server's log only."""

    @functools.wraps(function)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return await function(*args, **kwargs)
        except ToolError:
            raise
        except LogLost:
            log.warning("mcp: %s: the broker lost its log", function.__name__)
            raise ToolError(LOG_LOST) from None
        except (KafkaError, OSError, TimeoutError) as exc:
            log.warning("mcp: %s: %s", function.__name__, type(exc).__name__)
            raise ToolError(
                "memstream cannot reach its event log or memory store right now; try again shortly"
            ) from None

    return guarded
