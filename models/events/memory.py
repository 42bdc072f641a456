"""Memory events (topic ``memories``, and ``accesses`` for retrievals): what an extractor made of
a span, the memories it added and every change to them after, and the retrievals that used them.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AwareDatetime, Field, StringConstraints

from memstream.models.events.chat import UserErased
from memstream.models.events.envelope import Event, Frozen, Identifier, Text
from memstream.models.patterns import SpanObservation
from memstream.models.vectors import MAX_PACKED_CHARS, PACKED_PATTERN

MemoryType = Literal[
    "preference", "fact", "summary", "episode", "correction", "entity", "pattern", "task"
]
Tier = Literal["short_term", "long_term"]


class TokenUsage(Frozen):
    """Tokens an LLM call used."""

    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)


#: How many values an attribute holds at once: ``one`` (home, employer, budget: a new value
#: replaces the old) or ``many`` (pets, allergies, likes: a new value is one more).
Cardinality = Literal["one", "many"]
#: What a statement's wording says about earlier values: ``state`` nothing, ``change`` that
#: something changed ("moved to", "now", "switched to", "went up to"), ``also`` that the value
#: is one more ("also", "another", "a second").
ClaimCue = Literal["state", "change", "also"]
#: The LLM extractor's decision against the user's current claims on the same attribute.
ClaimOperation = Literal["add", "update", "retract", "none"]
ClaimText = Annotated[str, StringConstraints(max_length=500)]


class Claim(Frozen):
    """What a fact or preference asserts, with when it holds: the belief behind a memory.

    ``subject`` is who it is about: the speaker (``User``, or their name when several people
    speak) or someone they talk about (``User's sister``). ``attribute`` is a normalised key
    (``home``, ``employer``, ``budget``, ``sister's name``; empty when the statement names only
    the value it replaces, ``replaces``). ``polarity`` False asserts the value no longer holds
    ("not vegetarian any more"). The claim is valid in event time from ``valid_from`` (the
    turn that stated it) until the turn that changed or retracted it, or until
    ``valid_until`` when the statement gave its own end ("in Berlin this week").
    """

    subject: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    attribute: Annotated[str, StringConstraints(max_length=200)]
    value: ClaimText
    polarity: bool = True
    cardinality: Cardinality = "one"
    valid_from: AwareDatetime
    valid_until: AwareDatetime | None = None
    #: An earlier value the statement itself names ("2,000, not 1,500"; "from Postgres").
    replaces: ClaimText | None = None
    cue: ClaimCue = "state"
    #: Set by the LLM extractor only: its decision, and the memory id of the claim it names.
    operation: ClaimOperation | None = None
    target: Identifier | None = None


class MemoryCandidate(Frozen):
    """One memory an extractor proposes."""

    memory_type: MemoryType
    content: Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
    importance: float = Field(ge=0, le=1)
    source_event_ids: tuple[Identifier, ...] = ()
    entities: tuple[str, ...] = ()
    #: The conversation around the memory (day, neighbouring turns, who said what), indexed
    #: and returned with it; every turn it shows is in ``source_event_ids``.
    context: Annotated[str, StringConstraints(max_length=20_000)] = ""
    #: What the memory asserts (a fact or preference), when the extractor could tell.
    claim: Claim | None = None
    #: An end the memory states itself ("I'm at the Lyon branch until Friday"): it holds
    #: until then (event time).
    valid_until: AwareDatetime | None = None


class ExtractionRecorded(Event):
    """What an extractor made of a consolidation request, recorded so replay never re-runs it."""

    #: The observation quotes the user's words (request topics, tool names).
    content_fields: ClassVar[tuple[str, ...]] = ("raw_response", "candidates", "observed")
    type: Literal["extraction_recorded"] = "extraction_recorded"
    consolidation_event_id: Identifier
    extractor: Identifier
    extractor_version: Identifier
    model: Identifier | None = None
    prompt_version: Identifier | None = None
    raw_response: Text = ""
    usage: TokenUsage | None = None
    latency_ms: float = Field(0, ge=0)
    candidates: tuple[MemoryCandidate, ...] = ()
    #: What the span shows of the user's habits, counted by the pattern learner; None in
    #: records made before it (see :mod:`memstream.models.patterns`).
    observed: SpanObservation | None = None


class ExtractionFailure(Event):
    """An extractor gave up on a consolidation request; the raw reply is kept, never dropped."""

    #: The reason quotes the extractor's error, which can quote the reply (user content).
    content_fields: ClassVar[tuple[str, ...]] = ("raw_response", "reason")
    type: Literal["extraction_failed"] = "extraction_failed"
    consolidation_event_id: Identifier
    extractor: Identifier
    extractor_version: Identifier
    model: Identifier | None = None
    prompt_version: Identifier | None = None
    reason: Annotated[str, StringConstraints(max_length=5_000)]
    raw_response: Text = ""
    attempts: int = Field(0, ge=0)
    usage: TokenUsage | None = None
    latency_ms: float = Field(0, ge=0)
    retry_scheduled: bool = False


class MemoryAdded(Event):
    """A new memory entered the user's long-term store.

    Version 2 records which extractor proposed the memory (``extractor``, name/version), so
    memories of two extractors can be told apart; version 1 events are upcast with
    ``"unrecorded"`` (see :mod:`memstream.models.upcasting`). Version 3 carries the memory's
    vector (``vector``, packed by :func:`memstream.models.vectors.pack_vector`, and the
    ``embedding_model`` that made it): the decider embeds a memory once, and every projection
    and replay takes that vector instead of embedding again. Earlier events have none (the
    projection embeds them). Version 4 carries the memory's ``claim`` (what a fact or
    preference asserts, with its validity) and ``stated_in``, the memories of the same
    extraction that state it (its turn's episode, the summary quoting it); an episode's or
    summary's carries ``states``, the claims it states; earlier events have none.
    """

    #: The entities are names taken from the user's words: content too; so is the context,
    #: the vector (it reveals its text to whoever holds the model) and the claim.
    content_fields: ClassVar[tuple[str, ...]] = (
        "content", "entities", "context", "vector", "claim"
    )
    type: Literal["memory_added"] = "memory_added"
    schema_version: Literal[4] = 4  # type: ignore[assignment]
    extractor: Identifier
    memory_id: Identifier
    memory_type: MemoryType
    content: Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
    importance: float = Field(ge=0, le=1)
    tier: Tier = "long_term"
    extraction_event_id: Identifier
    source_event_ids: tuple[Identifier, ...] = ()
    entities: tuple[str, ...] = ()
    #: The conversation around the memory, as the extractor gave it (see ``MemoryCandidate``).
    context: Annotated[str, StringConstraints(max_length=20_000)] = ""
    #: The embedding of what the memory is found by (its ``search_text``), float32 in base64.
    vector: (
        Annotated[str, StringConstraints(max_length=MAX_PACKED_CHARS, pattern=PACKED_PATTERN)]
        | None
    ) = None
    #: The embedder that made ``vector`` (its model id, as the projection's table records it).
    embedding_model: Identifier | None = None
    #: What the memory asserts, when it is a fact or preference the extractor could read.
    claim: Claim | None = None
    #: The memories that state the claim too (episodes, summaries), so they can be marked
    #: when it ends.
    stated_in: tuple[Identifier, ...] = ()
    #: An episode's or summary's: the claims of its extraction it states (memory ids). It
    #: no longer holds once every one of them has ended.
    states: tuple[Identifier, ...] = ()
    #: An end the memory states itself (see ``MemoryCandidate``).
    valid_until: AwareDatetime | None = None


#: How a supersession ended its memory: a new value (``updated``), or the value taken back
#: with nothing in its place (``retracted``: "not vegetarian any more", "left Acme").
ChangeKind = Literal["updated", "retracted"]
#: Who decided a change: the rules of :mod:`memstream.models.beliefs`, or the LLM extractor.
DecidedBy = Literal["rules", "llm"]


class MemoryReinforced(Event):
    """A candidate repeated a memory the user already has: it reinforces it, no new row.

    Version 2 adds ``stated_in``: the memories of the reinforcing extraction that state the
    same claim again (its turn's episode), marked with it when the claim ends.
    """

    type: Literal["memory_reinforced"] = "memory_reinforced"
    schema_version: Literal[2] = 2  # type: ignore[assignment]
    memory_id: Identifier
    extraction_event_id: Identifier
    source_event_ids: tuple[Identifier, ...] = ()
    similarity: float = Field(ge=-1, le=1)
    stated_in: tuple[Identifier, ...] = ()


class MemorySuperseded(Event):
    """A newer memory replaces an older one: the old one leaves the current view, not history.

    Version 2 says how (``change``: a new value, or a retraction), who decided it
    (``decided_by``) and when the old claim stopped being true in event time
    (``valid_until``: the turn that changed it; None for version 1 events, whose end is the
    event's own time). When a claim stated earlier arrives after the one that replaced it
    (sessions consolidated out of order), ``memory_id`` is the new memory and
    ``superseded_by`` the earlier-recorded one that is still true.
    """

    #: The decider's reason quotes the memories' text.
    content_fields: ClassVar[tuple[str, ...]] = ("reason",)
    type: Literal["memory_superseded"] = "memory_superseded"
    schema_version: Literal[2] = 2  # type: ignore[assignment]
    memory_id: Identifier
    superseded_by: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)]
    similarity: float = Field(ge=-1, le=1)
    change: ChangeKind = "updated"
    decided_by: DecidedBy = "rules"
    valid_until: AwareDatetime | None = None


class MemoryOutdated(Event):
    """A claim that a memory states (an episode, a summary) ended, or ends, at
    ``valid_until`` (event time). Once one claim the memory states has ended, the memory
    no longer holds as a whole: it stays in the current view, marked and ranked below what replaced
    the claim (``superseded_by``; None when the claim ran out on its own: "in Berlin this
    week").
    """

    type: Literal["memory_outdated"] = "memory_outdated"
    memory_id: Identifier
    #: The claim (a memory id) whose end outdates it.
    claim_memory_id: Identifier
    superseded_by: Identifier | None = None
    valid_until: AwareDatetime


class MemoryDeleted(Event):
    """A memory was deleted on request: out of every view; its history stays in the log."""

    #: Given by the client or the user ("I told you I moved").
    content_fields: ClassVar[tuple[str, ...]] = ("reason",)
    type: Literal["memory_deleted"] = "memory_deleted"
    memory_id: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)] = "requested"


class MemoryPromoted(Event):
    """A short-term memory moved to the long-term tier (retrieved often enough)."""

    #: Written by the tier keeper, but free text: sealed like any other.
    content_fields: ClassVar[tuple[str, ...]] = ("reason",)
    type: Literal["memory_promoted"] = "memory_promoted"
    memory_id: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)]


class MemoryExpired(Event):
    """A short-term memory's time ran out: it leaves the ranked view; episodes stay findable."""

    #: Written by the tier keeper, but free text: sealed like any other.
    content_fields: ClassVar[tuple[str, ...]] = ("reason",)
    type: Literal["memory_expired"] = "memory_expired"
    memory_id: Identifier
    reason: Annotated[str, StringConstraints(max_length=500)] = "ttl"


class MemoryForgotten(Event):
    """A forgetting policy let a memory go: it leaves search and the current view like an
    expired one, and stays in history (and in point-in-time reads before ``occurred_at``).

    The decision is recorded, not derived: ``score`` and ``threshold`` are what the policy
    saw at ``occurred_at``, so a replay applies the event and never scores again.
    """

    #: Written by the policy, but free text: sealed like any other.
    content_fields: ClassVar[tuple[str, ...]] = ("reason",)
    type: Literal["memory_forgotten"] = "memory_forgotten"
    memory_id: Identifier
    policy: Literal["decay"]
    score: float = Field(ge=0, le=1)
    threshold: float = Field(ge=0, le=1)
    reason: Annotated[str, StringConstraints(max_length=500)]


class RetrievedMemory(Frozen):
    """One memory a retrieval returned, with its rank score."""

    memory_id: Identifier
    score: float


class MemoriesRetrieved(Event):
    """A retrieval happened (topic: accesses): it updates use counts off the read path."""

    content_fields: ClassVar[tuple[str, ...]] = ("query",)
    type: Literal["memories_retrieved"] = "memories_retrieved"
    query: Annotated[str, StringConstraints(max_length=20_000)]
    memories: tuple[RetrievedMemory, ...]


MemoryChange = (
    MemoryReinforced
    | MemorySuperseded
    | MemoryOutdated
    | MemoryDeleted
    | MemoryPromoted
    | MemoryExpired
    | MemoryForgotten
)

MemoryEvent = Annotated[
    ExtractionRecorded | ExtractionFailure | MemoryAdded | MemoryChange | UserErased,
    Field(discriminator="type"),
]
