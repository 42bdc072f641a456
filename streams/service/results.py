"""What the memory operations answer with: plain dicts, the same over every interface.

A hit's ``score`` is its rank score (0..1); a memory's times are ISO 8601 strings; a history
entry is one event of the memories topic with its place in the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NotRequired, cast, get_args

# pydantic (the HTTP API's answers) takes typing_extensions' TypedDict before Python 3.12.
from typing_extensions import TypedDict

from memstream.models.events.chat import MessageAdded, TaskSet, ToolCalled
from memstream.models.events.envelope import Event, Role
from memstream.models.events.memory import (
    MemoryAdded,
    MemoryDeleted,
    MemoryExpired,
    MemoryForgotten,
    MemoryOutdated,
    MemoryPromoted,
    MemoryReinforced,
    MemorySuperseded,
)
from memstream.projections.entity_graph import (
    EdgeDict,
    EntityDict,
    EntityFactDict,
    GraphDict,
    NodeDict,
)

if TYPE_CHECKING:
    # Annotations only: the HTTP client reads these shapes without loading LanceDB or Kafka.
    from memstream.projections.memories import MemoryHit, MemoryRecord
    from memstream.projections.retrieval import RankedMemory, Retrieval
    from memstream.streams.service.chat_events import Message

__all__ = [
    "AddResult",
    "ContextResult",
    "EdgeDict",
    "EntityDict",
    "EntityFactDict",
    "GraphDict",
    "HistoryEntry",
    "MadeMemoryDict",
    "MemoryDict",
    "MemoryHitDict",
    "NodeDict",
    "PatternDict",
    "PatternsDict",
    "ProfileDict",
    "ProfileEntryDict",
    "ProfileKindDict",
    "ProfileSubjectDict",
    "ScoreExplanation",
    "SourceEventDict",
    "TimelineDict",
    "TimelineEntryDict",
    "history_entry",
    "hit_dict",
    "memory_dict",
    "normalise_messages",
    "ranked_dict",
    "retrieval_dict",
    "source_event",
]

_ROLES: frozenset[str] = frozenset(get_args(Role))


class AddResult(TypedDict):
    """What :meth:`~memstream.streams.service.memories.MemoryService.add` published and,
    when it waited (``wait=True``), what the session became.

    ``status`` (waited only): ``searchable`` (every memory listed is searchable now),
    ``failed`` (an extractor gave up on a span for good: ``failures`` says why; what the
    other spans made is still listed) or ``pending`` (the timeout came first: the memories
    will follow; ``memories`` holds what was projected by then). ``memories`` are the
    memories the session added and those it reinforced (``decision``), as projected;
    ``superseded`` the ids of memories it replaced.
    """

    session_id: str
    event_ids: list[str]
    status: NotRequired[str]
    memories: NotRequired[list[MadeMemoryDict]]
    superseded: NotRequired[list[str]]
    failures: NotRequired[list[str]]


class ScoreExplanation(TypedDict):
    """Every part of a hit's rank score: ``score = (relevance x w_relevance + importance x
    w_importance + recency x w_recency + use x w_use) / sum of the weights``, each part on
    0..1, and ``text``, the same as one line."""

    relevance: float
    similarity: float
    words: float
    importance: float
    recency: float
    use: float
    weights: dict[str, float]
    text: str


class MemoryHitDict(TypedDict):
    """A search hit, as a plain dict.

    ``score`` (0..1) is the rank score: mostly ``relevance``, which weighs ``similarity``
    (cosine of query and memory, 0..1) and ``words`` (the BM25 match of the query's words,
    saturated to 0..1) equally; importance, recency and use move it by a few hundredths at
    most with the default weights. ``context`` is the conversation around the memory (the
    day, who said what; "" when none), and ``source_event_ids`` cites every turn it shows.
    """

    memory_id: str
    memory: str
    type: str
    score: float
    relevance: float
    similarity: float
    words: float
    importance: float
    created_at: str
    session_id: str
    source_event_ids: list[str]
    context: str
    #: Whether what it states no longer held when searched (it ranks below what replaced
    #: it); ``superseded_by`` names what replaced it (None: it ran out on its own, or it
    #: holds), ``valid_until`` when it stopped holding (ISO 8601; None while it holds).
    stale: bool
    superseded_by: str | None
    valid_until: str | None
    #: A newer memory of the same speaker about the same thing, ranked above it: what it
    #: states may no longer hold, though nothing superseded it (None: none found).
    possibly_outdated_by: str | None
    #: What a fact or preference asserts, with when it began to hold; None for others.
    claim: ClaimDict | None
    #: Only when asked for (``explain=True``): how ``score`` was made.
    explain: NotRequired[ScoreExplanation]
    #: Only in a prompt context's memories: whether the memory made it into the text.
    in_context: NotRequired[bool]


class ClaimDict(TypedDict):
    """What a fact or preference asserts: about whom, which attribute, what value, whether
    it holds (``polarity``), and from when (``valid_from``, the turn that said it)."""

    subject: str
    attribute: str
    value: str
    polarity: bool
    valid_from: str


class TimelineEntryDict(TypedDict):
    """One value an attribute held: its claim's memory, the value (``polarity`` False: it
    was taken back), the statement, its interval in event time (``valid_until`` None while
    it holds), status, what replaced it, and the turns that stated it (event ids)."""

    memory_id: str
    value: str
    polarity: bool
    statement: str
    valid_from: str
    valid_until: str | None
    status: str
    superseded_by: str | None
    turns: list[str]
    stated_in: list[str]


class TimelineDict(TypedDict):
    """An attribute of one subject over time, oldest value first; ``attribute`` None (and
    no entries) when nothing the user said matches ``about``."""

    about: str
    subject: str | None
    attribute: str | None
    entries: list[TimelineEntryDict]


class ProfileEntryDict(TypedDict):
    """One claim a profile holds: its attribute and value (``polarity`` False: no longer
    so), the statement, since when it holds (event time), its memory and the turns that
    stated it (event ids)."""

    attribute: str
    value: str
    polarity: bool
    statement: str
    valid_from: str
    memory_id: str
    turns: list[str]


class ProfileKindDict(TypedDict):
    """A subject's claims of one kind (memory type: fact, preference, correction), by
    attribute."""

    kind: str
    entries: list[ProfileEntryDict]


class ProfileSubjectDict(TypedDict):
    """What holds about one subject (``User``, a named speaker, ``User's sister``)."""

    subject: str
    kinds: list[ProfileKindDict]


class ProfileDict(TypedDict):
    """A user's profile: the claims that hold (now, or at ``as_of``) by subject, ``User``
    first, then the others by name; ``subject`` is the one asked for, if any."""

    subject: str | None
    as_of: str | None
    subjects: list[ProfileSubjectDict]


class PatternDict(TypedDict):
    """A learned pattern (a ``pattern`` memory): the line that says it, its key (``tool:``,
    ``request:``, ``correction:`` and a value, or ``hours``, ``weekday``), its evidence (the
    sessions and events that show it, and every session counted when it was learned), its
    importance and its decay score now (or at ``as_of``: see ``models/ranking.decay_score``)."""

    memory_id: str
    pattern: str
    kind: str
    content: str
    session_count: int
    sessions_seen: int
    sessions: list[str]
    event_ids: list[str]
    importance: float
    decay: float
    learned_at: str


class PatternsDict(TypedDict):
    """A user's learned patterns (now, or at ``as_of``), by kind, then sessions (most
    first), then key."""

    as_of: str | None
    patterns: list[PatternDict]


class ContextResult(TypedDict):
    """The long-term memory context of one turn, for an agent's prompt.

    ``context`` is the prompt text (one section per memory type, within the token budget),
    ``tokens`` its size, ``query`` what was searched, ``memories`` the memories that won a slot
    of their type, best first, each marked ``in_context`` if the budget let it into the text.
    """

    context: str
    tokens: int
    query: str
    memories: list[MemoryHitDict]


class MemoryDict(TypedDict):
    """One memory as the projection holds it, as a plain dict."""

    memory_id: str
    memory: str
    type: str
    importance: float
    created_at: str
    session_id: str
    source_event_ids: list[str]
    status: str
    superseded_by: str | None
    tier: str
    entities: list[str]
    reinforcement_count: int
    access_count: int
    #: What a fact or preference asserts; None for other memories.
    claim: ClaimDict | None
    #: When what it states stopped holding (ISO 8601): a claim replaced or run out, or an
    #: episode stating one; None while it holds.
    valid_until: str | None


class MadeMemoryDict(MemoryDict):
    """A memory an ``add`` made: ``decision`` is ``added`` or ``reinforced``."""

    decision: str


class HistoryEntry(TypedDict):
    """One step in a memory's life: an event of the memories topic."""

    event_id: str
    type: str
    occurred_at: str
    memory_id: str
    source_event_ids: list[str]
    #: Type-specific fields: content, reason, superseded_by, supersedes, similarity...
    details: dict[str, Any]
    partition: int
    offset: int


class SourceEventDict(TypedDict):
    """One event a memory came from (a chat message, usually), as the log holds it, opened.

    ``role``, ``content`` and ``name`` are the message's; for other chat events ``role`` and
    ``name`` are None and ``content`` a short description (a tool call's name, a task).
    """

    event_id: str
    type: str
    occurred_at: str
    session_id: str
    role: str | None
    name: str | None
    content: str
    partition: int
    offset: int


# --- conversions -----------------------------------------------------------------------


def normalise_messages(
    messages: str | Sequence[Message] | Sequence[dict[str, Any]],
) -> list[Message]:
    """mem0's message forms as a list of ``{"role", "content"[, "name"]}`` dicts.

    A string is one user message. Raises ``ValueError`` for an empty list, a missing role or
    content, or an unknown role, and ``TypeError`` for non-text content.

    Examples
    --------
    >>> normalise_messages("I like tea")
    [{'role': 'user', 'content': 'I like tea'}]
    """
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, dict):
        messages = [messages]
    normalised: list[Message] = []
    for number, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TypeError(f"message {number} is {type(message).__name__}, not a dict")
        entry = cast(dict[str, Any], message)
        role, content = entry.get("role"), entry.get("content")
        if role not in _ROLES:
            raise ValueError(
                f"message {number}: role must be one of {sorted(_ROLES)}, not {role!r}"
            )
        if not isinstance(content, str):
            raise TypeError(f"message {number}: content must be text, not {type(content).__name__}")
        out: Message = {"role": role, "content": content}
        if entry.get("name") is not None:
            out["name"] = str(entry["name"])
        normalised.append(out)
    if not normalised:
        raise ValueError("add() needs at least one message")
    return normalised


def hit_dict(
    hit: MemoryHit, *, stale: bool = False, possibly_outdated_by: str | None = None
) -> MemoryHitDict:
    """A projection hit as a plain dict (times as ISO 8601 strings); ``stale`` and
    ``possibly_outdated_by`` as its search found it."""
    until = hit.valid_until or (hit.ended_at if hit.status == "superseded" else None)
    return {
        "memory_id": hit.memory_id,
        "memory": hit.content,
        "type": hit.memory_type,
        "score": hit.score,
        "relevance": hit.score,
        "similarity": hit.similarity,
        "words": hit.words,
        "importance": hit.importance,
        "created_at": hit.created_at.isoformat(),
        "session_id": hit.session_id,
        "source_event_ids": list(hit.source_event_ids),
        "context": hit.context,
        "stale": stale,
        "superseded_by": hit.superseded_by if stale else None,
        "valid_until": until.isoformat() if stale and until is not None else None,
        "possibly_outdated_by": possibly_outdated_by,
        "claim": claim_dict(hit),
    }


def claim_dict(record: MemoryRecord) -> ClaimDict | None:
    """What ``record`` asserts, as a plain dict; None for a memory without a claim."""
    claim = record.claim
    if claim is None:
        return None
    return {
        "subject": claim.subject,
        "attribute": claim.attribute,
        "value": claim.value,
        "polarity": claim.polarity,
        "valid_from": claim.valid_from.isoformat(),
    }


def ranked_dict(item: RankedMemory, *, explain: bool = False) -> MemoryHitDict:
    """A retrieval's ranked memory as a search hit; ``score`` is the composite rank score,
    and ``explain`` adds every part of it."""
    hit: MemoryHitDict = {
        **hit_dict(
            item.memory, stale=item.stale, possibly_outdated_by=item.possibly_outdated_by
        ),
        "score": item.rank_score,
    }
    if explain:
        weights = item.weights
        hit["explain"] = {
            "relevance": item.relevance,
            "similarity": item.memory.similarity,
            "words": item.memory.words,
            "importance": item.importance,
            "recency": item.recency,
            "use": item.use,
            "weights": {
                "relevance": weights.relevance,
                "importance": weights.importance,
                "recency": weights.recency,
                "use": weights.use,
            },
            "text": item.explain(),
        }
    return hit


def retrieval_dict(retrieval: Retrieval, *, explain: bool = False) -> ContextResult:
    """A retrieval (the memory context of a turn) as a plain dict."""
    memories = []
    for item in retrieval.items:
        hit = ranked_dict(item, explain=explain)
        hit["in_context"] = item.in_context
        memories.append(hit)
    return {
        "context": retrieval.context,
        "tokens": retrieval.tokens,
        "query": retrieval.query,
        "memories": memories,
    }


def memory_dict(record: MemoryRecord) -> MemoryDict:
    """A projection record as a plain dict (times as ISO 8601 strings)."""
    return {
        "memory_id": record.memory_id,
        "memory": record.content,
        "type": record.memory_type,
        "importance": record.importance,
        "created_at": record.created_at.isoformat(),
        "session_id": record.session_id,
        "source_event_ids": list(record.source_event_ids),
        "status": record.status,
        "superseded_by": record.superseded_by,
        "tier": record.tier,
        "entities": list(record.entities),
        "reinforcement_count": record.reinforcement_count,
        "access_count": record.access_count,
        "claim": claim_dict(record),
        "valid_until": record.valid_until.isoformat() if record.valid_until else None,
    }


def source_event(event: Event, partition: int, offset: int) -> SourceEventDict:
    """A chat event as a memory's source: a message with its role and words; another event
    with what it was about."""
    role = name = None
    if isinstance(event, MessageAdded):
        role, name, content = event.role, event.name, event.content
    elif isinstance(event, ToolCalled):
        content = f"tool {event.name}"
    elif isinstance(event, TaskSet):
        content = f"task: {event.task}"
    else:
        content = event.type.replace("_", " ")
    return {
        "event_id": event.event_id,
        "type": event.type,
        "occurred_at": event.occurred_at.isoformat(),
        "session_id": event.session_id,
        "role": role,
        "name": name,
        "content": content,
        "partition": partition,
        "offset": offset,
    }


def _change_details(event: MemorySuperseded) -> dict[str, Any]:
    """How a supersession ended its memory: a new value or a retraction, by whom, from when."""
    return {
        "change": event.change,
        "decided_by": event.decided_by,
        "valid_until": event.valid_until.isoformat() if event.valid_until else None,
    }


def history_entry(event: Event, memory_id: str, partition: int, offset: int) -> HistoryEntry | None:
    """The step ``event`` is in the life of ``memory_id``; None if it is not about it.

    A supersession appears in the life of both memories: as ``superseded_by`` in the old
    one's, as ``supersedes`` in the new one's.
    """
    details: dict[str, Any]
    sources: tuple[str, ...] = ()
    if isinstance(event, MemorySuperseded) and event.superseded_by == memory_id:
        details = {
            "supersedes": event.memory_id,
            "reason": event.reason,
            "similarity": event.similarity,
            **_change_details(event),
        }
    elif getattr(event, "memory_id", None) != memory_id:
        return None
    elif isinstance(event, MemoryAdded):
        details = {
            "content": event.content,
            "memory_type": event.memory_type,
            "importance": event.importance,
            "tier": event.tier,
            "extraction_event_id": event.extraction_event_id,
            "claim": event.claim.model_dump(mode="json", exclude_none=True) if event.claim else None,
            "stated_in": list(event.stated_in),
        }
        sources = event.source_event_ids
    elif isinstance(event, MemoryReinforced):
        details = {"similarity": event.similarity, "extraction_event_id": event.extraction_event_id}
        sources = event.source_event_ids
    elif isinstance(event, MemorySuperseded):
        details = {
            "superseded_by": event.superseded_by,
            "reason": event.reason,
            "similarity": event.similarity,
            **_change_details(event),
        }
    elif isinstance(event, MemoryOutdated):
        details = {
            "claim_memory_id": event.claim_memory_id,
            "superseded_by": event.superseded_by,
            "valid_until": event.valid_until.isoformat(),
        }
    elif isinstance(event, MemoryDeleted | MemoryPromoted | MemoryExpired):
        details = {"reason": event.reason}
    elif isinstance(event, MemoryForgotten):
        details = {
            "policy": event.policy,
            "score": event.score,
            "threshold": event.threshold,
            "reason": event.reason,
        }
    else:
        return None
    return {
        "event_id": event.event_id,
        "type": event.type,
        "occurred_at": event.occurred_at.isoformat(),
        "memory_id": memory_id,
        "source_event_ids": list(sources),
        "details": details,
        "partition": partition,
        "offset": offset,
    }
