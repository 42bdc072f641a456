"""The HTTP API's bodies: requests checked before the service sees them, responses in the
service's plain shapes (:mod:`memstream.streams.service.results`) with the caller's own user id."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memstream.models.events.envelope import CODE_PATTERN, Identifier, Role, UtcInstant
from memstream.models.events.memory import MemoryType
from memstream.projections.entity_graph import (
    ENTITY_LIMIT,
    GRAPH_LIMIT,
    MAX_ENTITY_LIMIT,
    MAX_GRAPH_LIMIT,
)
from memstream.projections.retrieval import MAX_CANDIDATES
from memstream.streams.api.auth import (
    CALLER_USER_ID_PATTERN,
    CALLER_USER_ID_RULE,
    MAX_CALLER_USER_ID_CHARS,
)
from memstream.streams.service.memories import DEFAULT_WAIT_S, MAX_WAIT_S
from memstream.streams.service.projects import ProjectDict
from memstream.streams.service.results import (
    EdgeDict,
    EntityFactDict,
    HistoryEntry,
    MadeMemoryDict,
    MemoryDict,
    MemoryHitDict,
    NodeDict,
    PatternDict,
    ProfileSubjectDict,
    SourceEventDict,
    TimelineEntryDict,
)

__all__ = [
    "AddRequest",
    "AddResponse",
    "BadInput",
    "CloseSessionRequest",
    "CloseSessionResponse",
    "ContextRequest",
    "ContextResponse",
    "DeleteAllResponse",
    "DeleteResponse",
    "EntityRequest",
    "EntityResponse",
    "EraseRequest",
    "EraseResponse",
    "GraphRequest",
    "GraphResponse",
    "Health",
    "HistoryResponse",
    "MemoryListResponse",
    "MessageIn",
    "PatternsRequest",
    "PatternsResponse",
    "Problem",
    "ProfileRequest",
    "ProfileResponse",
    "ProjectsRequest",
    "ProjectsResponse",
    "Readiness",
    "ReportInfo",
    "ReportResponse",
    "SearchFiltersIn",
    "SearchRequest",
    "SearchResponse",
    "ServiceUnavailable",
    "SessionContextResponse",
    "TenantUser",
    "TimelineRequest",
    "TimelineResponse",
    "UsersResponse",
]

#: A user id as a caller names it; the API checks it against the key and namespaces it.
UserId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_CALLER_USER_ID_CHARS,
        pattern=CALLER_USER_ID_PATTERN,
        description=CALLER_USER_ID_RULE,
    ),
]


class _Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MessageIn(BaseModel):
    """One message of a conversation; other fields (``tool_call_id``...) are dropped, as
    the client drops them."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    role: Role
    content: Annotated[str, Field(max_length=1_000_000)]
    name: Annotated[str, Field(max_length=512)] | None = None


class AddRequest(_Request):
    """A conversation to publish as chat events (see ``MemoryService.add``): a string is one
    user message. Without ``session_id`` a session is started; ``close`` (default) ends it
    so the worker consolidates it now. ``event_ids`` (one per message) make a retried call
    repeat the same events."""

    messages: str | Annotated[list[MessageIn], Field(min_length=1, max_length=1000)]
    user_id: UserId
    session_id: Identifier | None = None
    agent_id: Identifier | None = None
    close: bool = True
    event_ids: Annotated[list[Identifier], Field(max_length=1000)] | None = None
    occurred_at: UtcInstant | None = None
    wait: bool = Field(
        False,
        description="Answer only once the session's memories are searchable (needs close), "
        "or the timeout passed; the answer then lists what the session made.",
    )
    timeout_s: Annotated[float, Field(gt=0, le=MAX_WAIT_S)] = DEFAULT_WAIT_S


class AddResponse(BaseModel):
    """What was published and, with ``wait``, what the session made: ``status`` is
    ``searchable``, ``failed`` (an extractor gave up on a span: ``failures``) or ``pending``
    (the timeout came first); ``memories`` the memories added or reinforced (``decision``),
    ``superseded`` the ids of those replaced."""

    user_id: str
    session_id: str
    event_ids: list[str]
    status: Literal["published", "searchable", "failed", "pending"] = "published"
    memories: list[MadeMemoryDict] = []
    superseded: list[str] = []
    failures: list[str] = []


class SearchFiltersIn(_Request):
    """What a search may return: memory types, one session, a least importance, a window of
    creation times (``since`` inclusive, ``until`` exclusive)."""

    memory_types: Annotated[list[MemoryType], Field(min_length=1)] | None = None
    session_id: Identifier | None = None
    min_importance: Annotated[float, Field(ge=0, le=1)] | None = None
    since: UtcInstant | None = None
    until: UtcInstant | None = None


class SearchRequest(_Request):
    """A search of one user's memories; ``as_of`` answers from what memstream believed then."""

    query: Annotated[str, Field(max_length=20_000)]
    user_id: UserId
    limit: Annotated[int, Field(ge=1, le=MAX_CANDIDATES)] = 5
    filters: SearchFiltersIn | None = None
    as_of: UtcInstant | None = None
    explain: bool = Field(False, description="Add every part of each hit's score.")


class SearchResponse(BaseModel):
    """The hits, best first. A hit marked ``stale`` states what no longer held when searched
    (ranked below what replaced it): ``superseded_by`` names the memory that replaced it,
    ``valid_until`` when it stopped holding; ``possibly_outdated_by`` names a newer memory of
    the same speaker about the same thing (what this one states may no longer hold, though
    nothing superseded it); ``claim`` is what a fact or preference asserts."""

    user_id: str
    results: list[MemoryHitDict]


class ContextRequest(_Request):
    """The long-term memory context of one turn: ``message`` (the user's current message)
    with the last of ``recent_turns`` (oldest first) is the query; ``session_id`` names the
    session it serves (recorded with the access)."""

    message: Annotated[str, Field(max_length=20_000)]
    user_id: UserId
    recent_turns: Annotated[list[Annotated[str, Field(max_length=20_000)]], Field(max_length=50)] = []
    session_id: Identifier | None = None
    token_budget: Annotated[int, Field(ge=0, le=100_000)] | None = None
    explain: bool = False
    project: Annotated[
        str | None,
        Field(
            min_length=1, max_length=200,
            description="The project the turn is about: its history joins the context.",
        ),
    ] = None


class ContextResponse(BaseModel):
    """The prompt text (``context``, ``tokens`` of it), the query, and the memories that
    won a slot, each marked ``in_context`` if the budget let it into the text."""

    user_id: str
    context: str
    tokens: int
    query: str
    memories: list[MemoryHitDict]


class MemoryListResponse(BaseModel):
    """A user's memories, newest first; ``valid_until`` says when what one states stopped
    holding (a replaced claim, or an episode that stated it), ``claim`` what a fact or
    preference asserts."""

    user_id: str
    results: list[MemoryDict]


class TimelineRequest(_Request):
    """One attribute of a user over time: ``about`` names it in plain words ("budget",
    "where do I live"); ``subject`` picks whose (a speaker's name, "User's sister"), else
    the user's own."""

    about: Annotated[
        str,
        Field(
            max_length=1_000,
            description="The attribute to follow, in plain words: 'budget', 'where I live'.",
        ),
    ]
    user_id: UserId
    subject: Annotated[
        str | None,
        Field(max_length=200, description="Whose attribute: a speaker's name; else the user's."),
    ] = None


class TimelineResponse(BaseModel):
    """Each value the attribute held, oldest first: its interval in event time
    (``valid_until`` None while it holds), ``status`` (``active``, ``superseded``...), the
    memory that replaced it and the turns (event ids) that stated it. ``attribute`` is what
    ``about`` was matched to; None, with no entries, when nothing the user said matches."""

    user_id: str
    about: str
    subject: str | None
    attribute: str | None
    entries: list[TimelineEntryDict]


class PatternsRequest(_Request):
    """A user's learned patterns: those that hold now, or at ``as_of``."""

    user_id: UserId
    as_of: UtcInstant | None = None


class PatternsResponse(BaseModel):
    """The user's learned patterns by kind (tool, correction, request, hours, weekday), then
    sessions (most first): each with its line, key, evidence (sessions, events, every session
    counted), importance and decay score."""

    user_id: str
    as_of: str | None
    patterns: list[PatternDict]


class ProfileRequest(_Request):
    """A user's profile: what holds about them now, or at ``as_of``; ``subject`` keeps one
    subject's (a speaker's name, "User's sister")."""

    user_id: UserId
    subject: Annotated[
        str | None,
        Field(
            min_length=1, max_length=200,
            description="Whose claims only: 'User', a speaker's name; else every subject's.",
        ),
    ] = None
    as_of: UtcInstant | None = None


class ProfileResponse(BaseModel):
    """The claims that hold (now, or at ``as_of``) by subject, ``User`` first, then the
    others by name; each subject's by kind (fact, preference, correction), each claim with
    its attribute, value, polarity, ``valid_from``, memory id and the turns that stated
    it."""

    user_id: str
    subject: str | None
    as_of: str | None
    subjects: list[ProfileSubjectDict]


class EntityRequest(_Request):
    """One entity of a user's graph, by any of its names, now or at ``as_of``; at most
    ``limit`` of its neighbours, facts and edges each."""

    user_id: UserId
    name: Annotated[
        str,
        Field(min_length=1, max_length=200, description="A name: 'Ana', \"User's sister\"."),
    ]
    as_of: UtcInstant | None = None
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_ENTITY_LIMIT, description="The most neighbours, facts and edges "
              "(each) in the answer: the busiest neighbours, the facts that hold, the latest."),
    ] = ENTITY_LIMIT


class EntityResponse(BaseModel):
    """The entity ``name`` finds (``entity`` null when none): its node (aliases, kind, the
    memories, turns and sessions naming it), its neighbours, its facts and its edges."""

    user_id: str
    name: str
    as_of: str | None
    entity: NodeDict | None
    neighbours: list[str]
    facts: list[EntityFactDict]
    edges: list[EdgeDict]
    total_neighbours: int
    total_facts: int
    total_edges: int
    truncated: bool


class GraphRequest(_Request):
    """A user's entity graph, now or at ``as_of``: at most ``limit`` entities of it."""

    user_id: UserId
    as_of: UtcInstant | None = None
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_GRAPH_LIMIT, description="The most entities in the answer: the "
              "user, then the most mentioned; only the relations among them."),
    ] = GRAPH_LIMIT


class GraphResponse(BaseModel):
    """The entities a user's memories name (``User`` first, then by name) and the relations
    between them: claims with their validity, co-mentions, each with its sources; how many
    the whole graph has (``total_nodes``, ``total_edges``) and whether the limit cut it."""

    user_id: str
    as_of: str | None
    nodes: list[NodeDict]
    edges: list[EdgeDict]
    total_nodes: int
    total_edges: int
    truncated: bool


class ProjectsRequest(_Request):
    """A user's project history, now or at ``as_of``; ``project`` keeps one project's."""

    user_id: UserId
    project: Annotated[
        str | None,
        Field(
            min_length=1, max_length=200,
            description="One project's history (its name, case aside); else every project's.",
        ),
    ] = None
    as_of: UtcInstant | None = None


class ProjectsResponse(BaseModel):
    """Per project, most recently worked on first: its tasks in the order they happened
    (each state with its session, and whether it is the task's current one), what was
    decided in its sessions, and what is open."""

    user_id: str
    project: str | None
    as_of: str | None
    projects: list[ProjectDict]


class HistoryResponse(BaseModel):
    """A memory's life, in log order; with ``sources``, the chat events it came from."""

    user_id: str
    memory_id: str
    results: list[HistoryEntry]
    sources: list[SourceEventDict] | None = None


class CloseSessionRequest(_Request):
    """End one of the user's sessions now, so the worker consolidates it."""

    user_id: UserId


class CloseSessionResponse(BaseModel):
    """The ``session_closed`` event published."""

    user_id: str
    session_id: str
    event_id: str


class SessionContextResponse(BaseModel):
    """An open session's working memory, from the worker that owns it: ``prompt`` (the
    context as prompt text within the budget) and ``context`` (its parts: messages, task,
    progress, scratchpad, entities, tool calls, turn count)."""

    user_id: str
    session_id: str
    prompt: str
    context: dict[str, Any]
    served_by: str | None = None


class EraseRequest(_Request):
    """Erase a user from every store (crypto-shredding); ``reason`` is a short code."""

    user_id: UserId
    reason: Annotated[str, Field(pattern=CODE_PATTERN)] = "requested"


class EraseResponse(BaseModel):
    """The erasure's receipt: what each store held of the user and removed; ``complete``
    is false when a store still held something (``notes`` say which)."""

    user_id: str
    erasure_id: str
    user_key: str
    started_at: str
    removed: dict[str, int]
    notes: list[str]
    #: The notes that say a store still holds something of the user.
    left: list[str]
    complete: bool


class ReportInfo(BaseModel):
    """A named report: what it shows and the options it takes."""

    name: str
    description: str
    options: list[str]


class ReportResponse(BaseModel):
    """A report's rows (JSON); ``format=csv`` or ``png`` answers with the file instead."""

    report: str
    user_id: str
    columns: list[str]
    rows: list[dict[str, Any]]


class TenantUser(BaseModel):
    """A user of the caller's tenant with memories, and how many."""

    user_id: str
    memories: int
    active: int
    last_memory_at: str | None


class UsersResponse(BaseModel):
    """The tenant's users with memories (those the key may act for), by id."""

    results: list[TenantUser]


class DeleteResponse(BaseModel):
    """The ``memory_deleted`` event published; the memory leaves search once projected."""

    user_id: str
    memory_id: str
    event_id: str


class DeleteAllResponse(BaseModel):
    """One ``memory_deleted`` event per active memory of the user."""

    user_id: str
    event_ids: list[str]


class Health(BaseModel):
    """The service answers."""

    ok: bool


class Readiness(BaseModel):
    """Whether the service can do its work: each check with its state (``ok`` or why not),
    and, when not ready, ``detail``: what is not ready and what to do, in one line."""

    ready: bool
    checks: dict[str, str]
    detail: str | None = None


class ServiceUnavailable(BaseModel):
    """A 503: what the answer needed and could not reach now (``unavailable``: the
    ``broker``, or the ``worker`` that holds the user's sessions), and what to do
    (``detail``, one line)."""

    detail: str
    unavailable: Literal["broker", "worker"]


class Problem(BaseModel):
    """A refusal (401, 403, 404, or a 422 the service made): what was wrong, in one line."""

    detail: str


class InputError(BaseModel):
    """Where a request's input is wrong (``loc``: ``body``, ``query`` or ``path``, then the
    field) and what is wrong with it (``msg``)."""

    loc: list[str | int]
    msg: str
    type: str


class BadInput(BaseModel):
    """A 422: the request's input as a whole is wrong (``detail``, one line), or each field
    that is (a list of :class:`InputError`)."""

    detail: str | list[InputError]
