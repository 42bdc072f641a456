"""What the MCP tools answer with: the service's results for one user, named by the caller's
own user id and cut to fit a model's context window (each memory's text, an episode's
conversation, the whole answer), with a note that says what was cut.

The answers are pydantic models, so each tool publishes an output schema and returns both
structured content and the same as JSON text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from memstream.streams.service.results import (
    AddResult,
    ContextResult,
    HistoryEntry,
    MemoryDict,
    MemoryHitDict,
    ProfileDict,
    TimelineDict,
)

__all__ = [
    "AddAnswer",
    "DeleteAnswer",
    "FoundMemory",
    "HistoryAnswer",
    "HistoryStep",
    "Limits",
    "MemoryAnswer",
    "MemoryContextAnswer",
    "PlacedMemory",
    "ProfileAnswer",
    "ProfileClaim",
    "SearchAnswer",
    "SessionContextAnswer",
    "TimelineAnswer",
    "TimelineValue",
    "add_answer",
    "history_answer",
    "memory_answer",
    "memory_context_answer",
    "profile_answer",
    "search_answer",
    "session_context_answer",
    "timeline_answer",
]

#: Marks where a text was cut.
ELLIPSIS = "…"
#: The longest detail value a history step keeps whole (a memory's text is cut like any).
_DETAIL_CHARS = 200
#: The most turns a timeline's value lists (a value said in many conversations has many).
_TURNS = 20

_Item = TypeVar("_Item", bound=BaseModel)


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True)
class Limits:
    """How large an answer may grow: ``result_chars`` for the whole (about: its JSON), and
    ``memory_chars`` for one memory's text or an episode's conversation."""

    result_chars: int = 16_000
    memory_chars: int = 1000


@dataclass
class _Cuts:
    """What an answer left out, for its note."""

    texts: int = 0
    items: int = 0
    what: str = "items"
    #: Other things cut, each said as it is.
    others: list[str] = field(default_factory=list)
    #: What the caller can do about it, said when anything was cut.
    hints: list[str] = field(default_factory=list)

    def cut(self, text: str, limit: int) -> str:
        """``text``, or its first ``limit`` characters ending in an ellipsis (counted)."""
        if len(text) <= limit:
            return text
        self.texts += 1
        return text[: max(limit - 1, 0)].rstrip() + ELLIPSIS

    def fit(self, items: Sequence[_Item], budget: int) -> list[_Item]:
        """The leading ``items`` whose JSON fits ``budget`` characters (at least none)."""
        kept: list[_Item] = []
        used = 0
        for item in items:
            size = len(item.model_dump_json())
            if used + size > budget:
                break
            kept.append(item)
            used += size
        self.items += len(items) - len(kept)
        return kept

    def note(self, limits: Limits) -> str | None:
        """One sentence saying what was cut, or None when nothing was."""
        parts = []
        if self.texts:
            parts.append(
                f"{self.texts} text(s) cut to {limits.memory_chars} characters (ending in "
                f"{ELLIPSIS}; get_memory shows a memory's whole text, cut the same way)"
            )
        if self.items:
            parts.append(
                f"{self.items} more {self.what} left out to keep this answer under about "
                f"{limits.result_chars} characters"
            )
        parts += self.others
        if not parts:
            return None
        return "; ".join(parts + self.hints) + "."


# --- add and delete ---------------------------------------------------------------------


class MadeMemory(_Answer):
    """A memory ``add_memory`` made with ``wait``: ``decision`` is ``added`` (new) or
    ``reinforced`` (it repeated one the user had)."""

    memory_id: str
    type: str
    text: str
    decision: str


class AddAnswer(_Answer):
    """What ``add_memory`` published and, with ``wait``, what it made: ``status``
    (``searchable``, ``failed``, or ``pending`` when the wait ran out), the memories, and the
    ids of those it replaced (``superseded``)."""

    user_id: str
    session_id: str
    event_ids: list[str]
    closed: bool
    note: str
    status: str | None = None
    memories: list[MadeMemory] | None = None
    superseded: list[str] | None = None


def add_answer(user_id: str, result: AddResult, *, closed: bool, limits: Limits) -> AddAnswer:
    """The published events of ``result``, with what happens next (or, when the add waited,
    what it made, within ``limits``)."""
    if "status" in result:
        cuts = _Cuts(what="memories", hints=["get_memory or search_memories show the others"])
        made = [
            MadeMemory(
                memory_id=memory["memory_id"],
                type=memory["type"],
                text=cuts.cut(memory["memory"], limits.memory_chars),
                decision=memory["decision"],
            )
            for memory in result.get("memories", [])
        ]
        kept = cuts.fit(made, limits.result_chars)
        status = result["status"]
        said = {
            "searchable": "Stored: these memories are searchable now.",
            "failed": "The extractor failed on part of the conversation: "
            + "; ".join(result.get("failures", [])),
            "pending": "Still being consolidated: the memories appear in search_memories "
            "shortly.",
        }.get(status, status)
        return AddAnswer(
            user_id=user_id,
            session_id=result["session_id"],
            event_ids=list(result["event_ids"]),
            closed=closed,
            note=" ".join(part for part in (said, cuts.note(limits)) if part),
            status=status,
            memories=kept,
            superseded=list(result.get("superseded", [])),
        )
    if closed:
        note = (
            "Published and the session closed. memstream's worker now consolidates it: the "
            "memories it extracts (facts, preferences, corrections, a summary, episodes) "
            "appear in search_memories and memory_context after that, usually within seconds, "
            "not at once."
        )
    else:
        note = (
            "Published; the session stays open. Its messages are in its working memory "
            "(session_context with this session_id) and become long-term memories once it "
            "closes: a later add_memory with this session_id and close=true, or the worker's "
            "idle timeout."
        )
    return AddAnswer(
        user_id=user_id,
        session_id=result["session_id"],
        event_ids=list(result["event_ids"]),
        closed=closed,
        note=note,
    )


class DeleteAnswer(_Answer):
    """The ``memory_deleted`` event ``delete_memory`` published."""

    user_id: str
    memory_id: str
    event_id: str
    note: str = (
        "Deletion published: the memory leaves search once the worker has applied it, "
        "usually within seconds. memory_history keeps the record of it."
    )


# --- search -------------------------------------------------------------------------------


class FoundMemory(_Answer):
    """One search hit: ``score`` (0..1) is mostly how well the memory matches the query;
    ``context`` is the conversation an episode came from (None for other types). ``stale``
    marks a memory whose statement no longer held when searched: ``superseded_by`` is the
    memory that replaced it (None when it ran out on its own), ``valid_until`` when it
    stopped holding. ``possibly_outdated_by`` names a newer memory of the same speaker
    about the same thing: what this one states may no longer hold."""

    memory_id: str
    type: str
    score: float
    text: str
    context: str | None
    created_at: str
    session_id: str
    stale: bool
    superseded_by: str | None
    valid_until: str | None
    possibly_outdated_by: str | None


class SearchAnswer(_Answer):
    """The user's memories that best match ``query``, best first."""

    user_id: str
    query: str
    memories: list[FoundMemory]
    note: str | None


def search_answer(
    user_id: str, query: str, hits: Sequence[MemoryHitDict], limits: Limits
) -> SearchAnswer:
    """The hits of a search as an answer within ``limits``."""
    cuts = _Cuts(what="memories", hints=["ask for fewer (limit) or narrow the query"])
    found = [
        FoundMemory(
            memory_id=hit["memory_id"],
            type=hit["type"],
            score=round(hit["score"], 3),
            text=cuts.cut(hit["memory"], limits.memory_chars),
            context=cuts.cut(hit["context"], limits.memory_chars) if hit["context"] else None,
            created_at=hit["created_at"],
            session_id=hit["session_id"],
            stale=hit["stale"],
            superseded_by=hit["superseded_by"],
            valid_until=hit["valid_until"],
            possibly_outdated_by=hit["possibly_outdated_by"],
        )
        for hit in hits
    ]
    shown_query = cuts.cut(query, limits.memory_chars)
    kept = cuts.fit(found, limits.result_chars - len(shown_query))
    return SearchAnswer(user_id=user_id, query=shown_query, memories=kept, note=cuts.note(limits))


# --- one memory, its history ----------------------------------------------------------------


class MemoryAnswer(_Answer):
    """One memory of the user, whatever its status; ``valid_until`` is when what it states
    stopped holding (None while it holds)."""

    user_id: str
    memory_id: str
    type: str
    text: str
    status: str
    tier: str
    importance: float
    created_at: str
    session_id: str
    superseded_by: str | None
    valid_until: str | None
    entities: list[str]
    reinforcement_count: int
    access_count: int
    note: str | None


def memory_answer(user_id: str, memory: MemoryDict, limits: Limits) -> MemoryAnswer:
    """``memory`` as an answer within ``limits``."""
    cuts = _Cuts(what="entities")
    entities = [cuts.cut(entity, _DETAIL_CHARS) for entity in memory["entities"][:50]]
    cuts.items += len(memory["entities"]) - len(entities)
    return MemoryAnswer(
        user_id=user_id,
        memory_id=memory["memory_id"],
        type=memory["type"],
        text=cuts.cut(memory["memory"], limits.memory_chars),
        status=memory["status"],
        tier=memory["tier"],
        importance=round(memory["importance"], 3),
        created_at=memory["created_at"],
        session_id=memory["session_id"],
        superseded_by=memory["superseded_by"],
        valid_until=memory["valid_until"],
        entities=entities,
        reinforcement_count=memory["reinforcement_count"],
        access_count=memory["access_count"],
        note=cuts.note(limits),
    )


class HistoryStep(_Answer):
    """One event in a memory's life: its type (``memory_added``, ``memory_reinforced``,
    ``memory_superseded``, ``memory_outdated``, ``memory_promoted``, ``memory_expired``,
    ``memory_forgotten``, ``memory_deleted``), when, and what it said."""

    type: str
    occurred_at: str
    event_id: str
    details: dict[str, Any]


class HistoryAnswer(_Answer):
    """A memory's life, oldest first."""

    user_id: str
    memory_id: str
    steps: list[HistoryStep]
    note: str | None


def history_answer(
    user_id: str, memory_id: str, entries: Sequence[HistoryEntry], limits: Limits
) -> HistoryAnswer:
    """A memory's history as an answer within ``limits``: the first steps kept (its birth
    first), every text in them cut."""
    cuts = _Cuts(what="steps")

    def shown(value: object) -> object:
        if isinstance(value, str):
            return cuts.cut(value, limits.memory_chars)
        return value

    steps = [
        HistoryStep(
            type=entry["type"],
            occurred_at=entry["occurred_at"],
            event_id=entry["event_id"],
            details={name: shown(value) for name, value in entry["details"].items()},
        )
        for entry in entries
    ]
    kept = cuts.fit(steps, limits.result_chars)
    return HistoryAnswer(user_id=user_id, memory_id=memory_id, steps=kept, note=cuts.note(limits))


# --- what holds about the user ----------------------------------------------------------------


class ProfileClaim(_Answer):
    """One claim that holds about a subject: its kind (fact, preference, correction), the
    attribute and value (``polarity`` False: no longer so), since when, the statement, its
    memory and the turns (event ids) that stated it."""

    subject: str
    kind: str
    attribute: str
    value: str
    polarity: bool
    valid_from: str
    statement: str
    memory_id: str
    turns: list[str]


class ProfileAnswer(_Answer):
    """What holds about the user (now, or at ``as_of``), ``User``'s claims first, then the
    other subjects' by name, each subject's by kind and attribute."""

    user_id: str
    subject: str | None
    as_of: str | None
    claims: list[ProfileClaim]
    note: str | None


def profile_answer(user_id: str, found: ProfileDict, limits: Limits) -> ProfileAnswer:
    """A profile as an answer within ``limits``: in the profile's order (the user's own
    claims first), the claims that fit, each text cut."""
    cuts = _Cuts(what="claims", hints=["ask for one subject to see the rest"])
    claims = []
    for who in found["subjects"]:
        for kind in who["kinds"]:
            for entry in kind["entries"]:
                claims.append(
                    ProfileClaim(
                        subject=who["subject"],
                        kind=kind["kind"],
                        attribute=entry["attribute"],
                        value=cuts.cut(entry["value"], limits.memory_chars),
                        polarity=entry["polarity"],
                        valid_from=entry["valid_from"],
                        statement=cuts.cut(entry["statement"], limits.memory_chars),
                        memory_id=entry["memory_id"],
                        turns=entry["turns"][:_TURNS],
                    )
                )
    kept = cuts.fit(claims, limits.result_chars)
    note = cuts.note(limits)
    if not claims:
        note = "Nothing holds about the user yet: no fact or preference was recorded."
    return ProfileAnswer(
        user_id=user_id, subject=found["subject"], as_of=found["as_of"], claims=kept, note=note
    )


# --- an attribute over time ------------------------------------------------------------------


class TimelineValue(_Answer):
    """One value the attribute held: from ``valid_from`` until ``valid_until`` (None: it
    holds now), its ``status``, the memory that replaced it, the statement, and the turns
    (event ids) that stated it. ``polarity`` False: the user took the value back."""

    memory_id: str
    value: str
    polarity: bool
    statement: str
    valid_from: str
    valid_until: str | None
    status: str
    superseded_by: str | None
    turns: list[str]


class TimelineAnswer(_Answer):
    """An attribute of the user over time, oldest value first; ``attribute`` is what
    ``about`` was matched to (None, with no values, when nothing matched)."""

    user_id: str
    about: str
    subject: str | None
    attribute: str | None
    values: list[TimelineValue]
    note: str | None


def timeline_answer(user_id: str, found: TimelineDict, limits: Limits) -> TimelineAnswer:
    """A timeline as an answer within ``limits``: when it is too long, the newest values
    are kept (what holds now matters most), each text cut."""
    cuts = _Cuts(what="older values", hints=["the newest are kept"])
    values = []
    for entry in found["entries"]:
        turns = entry["turns"][:_TURNS]
        if len(turns) < len(entry["turns"]):
            cuts.others.append(
                f"{len(entry['turns']) - len(turns)} more turns of {entry['memory_id']} left out"
            )
        values.append(
            TimelineValue(
                memory_id=entry["memory_id"],
                value=cuts.cut(entry["value"], limits.memory_chars),
                polarity=entry["polarity"],
                statement=cuts.cut(entry["statement"], limits.memory_chars),
                valid_from=entry["valid_from"],
                valid_until=entry["valid_until"],
                status=entry["status"],
                superseded_by=entry["superseded_by"],
                turns=turns,
            )
        )
    about = cuts.cut(found["about"], limits.memory_chars)
    newest_first = cuts.fit(values[::-1], limits.result_chars - len(about))
    note = cuts.note(limits)
    if found["attribute"] is None:
        note = (
            "Nothing the user said matches this: no fact or preference with such an "
            "attribute. Try other words, or search_memories."
        )
    return TimelineAnswer(
        user_id=user_id,
        about=about,
        subject=found["subject"],
        attribute=found["attribute"],
        values=newest_first[::-1],
        note=note,
    )


# --- contexts for a prompt -------------------------------------------------------------------


class SessionContextAnswer(_Answer):
    """An open session's working memory as prompt text."""

    user_id: str
    session_id: str
    prompt: str
    tokens: int
    turn_count: int
    omitted_messages: int
    note: str | None


def session_context_answer(
    user_id: str, session_id: str, reply: dict[str, Any], limits: Limits
) -> SessionContextAnswer:
    """The worker's ``/session/`` reply as an answer within ``limits``: a prompt that is too
    long keeps its first line (the session's header) and its newest messages."""
    context = reply.get("context") or {}
    prompt = str(reply.get("prompt", ""))
    note = None
    if len(prompt) > limits.result_chars:
        head, _, rest = prompt.partition("\n")
        head = _Cuts().cut(head, _DETAIL_CHARS)
        keep = max(limits.result_chars - len(head) - 60, 0)
        cut = len(rest) - keep
        prompt = f"{head}\n[{cut} characters of older context cut]\n{rest[-keep:] if keep else ''}"
        note = (
            f"The context was cut to about {limits.result_chars} characters, newest messages "
            "kept; ask with a smaller token_budget for less."
        )
    return SessionContextAnswer(
        user_id=user_id,
        session_id=session_id,
        prompt=prompt,
        tokens=_int(context.get("tokens")),
        turn_count=_int(context.get("turn_count")),
        omitted_messages=_int(context.get("omitted_messages")),
        note=note,
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


class PlacedMemory(_Answer):
    """A memory placed in a memory context's text."""

    memory_id: str
    type: str
    score: float


class MemoryContextAnswer(_Answer):
    """The long-term memory context of one turn: ``context`` is the text for the prompt,
    ``memories`` the memories in it, best first."""

    user_id: str
    context: str
    tokens: int
    memories: list[PlacedMemory]
    note: str | None


def memory_context_answer(
    user_id: str, result: ContextResult, limits: Limits
) -> MemoryContextAnswer:
    """A memory context as an answer within ``limits`` (its text was already cut to the
    token budget by the service)."""
    cuts = _Cuts(what="memory ids", hints=["use a smaller token_budget for less"])
    context = _cut_end(result["context"], limits.result_chars // 2, cuts)
    placed = [
        PlacedMemory(memory_id=m["memory_id"], type=m["type"], score=round(m["score"], 3))
        for m in result["memories"]
        if m.get("in_context")
    ]
    kept = cuts.fit(placed, limits.result_chars - len(context))
    return MemoryContextAnswer(
        user_id=user_id,
        context=context,
        tokens=result["tokens"],
        memories=kept,
        note=cuts.note(limits),
    )


def _cut_end(text: str, limit: int, cuts: _Cuts) -> str:
    if len(text) <= limit:
        return text
    cuts.others.append(f"the context text was cut to {limit} characters")
    return text[: limit - 1].rstrip() + ELLIPSIS
