"""The LLM extractor's prompt and what its replies may be: the domain side of
:class:`memstream.streams.llm.extractor.LLMExtractor`, which only talks to the server.

* :data:`SYSTEM_PROMPT` and :func:`render_transcript`: what the model is shown (user and
  assistant turns only, each with its event id and role).
* :class:`ExtractionReply`: the reply's shape, validated with pydantic; :func:`reply_json_schema`
  is its strict JSON schema for servers with structured output.
* :func:`parse_json_reply` (from :mod:`~memstream.models.reply_json`) / :func:`parse_reply`:
  tolerant parsing (code fences, prose around the object, ``<think>`` blocks, trailing
  commas, a reply cut off by the token limit), then validation one item at a time; a reply
  that fails raises :class:`ReplyInvalid`, whose message is fed back to the model.
* :func:`build_candidates`: a validated reply as memory candidates. A preference, fact or
  correction whose cited messages are all the assistant's is dropped; corrections score at
  least :data:`CORRECTION_MIN_IMPORTANCE`; the summary cites every transcript message.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memstream.models import vocabulary
from memstream.models.beliefs import KnownClaim, attribute_key, same_value
from memstream.models.conversation import truncate
from memstream.models.events.consolidation import TranscriptMessage
from memstream.models.events.memory import Claim, ClaimOperation, MemoryCandidate, MemoryType
from memstream.models.extraction import (
    MAX_ANALYSED_CHARS,
    MAX_CONTENT_CHARS,
    MAX_ENTITIES,
    MIN_IMPORTANCE,
    SUMMARY_IMPORTANCE,
)
from memstream.models.reply_json import ReplyInvalid, parse_json_reply

log = logging.getLogger(__name__)

#: Longest validation error fed back to the model or kept in a failure reason.
MAX_ERROR_CHARS = 1_000
#: Identifies the prompt below in ``ExtractionRecorded.prompt_version``; bump it on any change.
PROMPT_VERSION = "extract-v4"
#: Most of the user's current claims shown to the model (the newest first).
MAX_SHOWN_CLAIMS = 60
#: Longest stated end accepted after a claim's start ("for the next three months").
MAX_STATED_END = timedelta(days=366)
#: Corrections are what the user took the trouble to fix: they rank high whatever the model says.
CORRECTION_MIN_IMPORTANCE = 0.8
#: A summary may run longer than one statement.
MAX_SUMMARY_CHARS = 2 * MAX_CONTENT_CHARS
#: Names the model may list; more is noise, and longer strings are not names.
MAX_REPLY_ENTITIES = 50
MAX_ENTITY_CHARS = 200
#: Roles shown to the model. System and tool messages hold prompts and recalled memories.
TRANSCRIPT_ROLES = frozenset({"user", "assistant"})
#: An item the model gave no importance (a bare string, say) counts as a minor one.
DEFAULT_IMPORTANCE = 0.5
#: The reply's lists of items, validated one item at a time.
ITEM_LISTS = ("preferences", "facts", "corrections")

SYSTEM_PROMPT = """\
You extract long-term memories about a user from one chat transcript.

The transcript is a JSON list of messages, each with an "id", a "role" ("user" or \
"assistant") and its "text".

Reply with one JSON object and nothing else, in exactly this shape:
{"preferences": [{"content": "...", "importance": 0.8, "source_event_ids": ["<id>"]}],
 "facts": [{"content": "...", "importance": 0.8, "source_event_ids": ["<id>"]}],
 "summary": "...",
 "entities": ["..."],
 "corrections": [{"content": "...", "importance": 0.9, "source_event_ids": ["<id>"]}]}

Rules:
- Only what the USER says about themselves is a preference or fact. Assistant messages are \
context only: never record the assistant's suggestions, recommendations, questions or claims \
as the user's. If the user accepts a suggestion, the user's reply is the source.
- preferences: lasting likes, dislikes, habits and standing instructions \
("always answer briefly").
- facts: lasting facts about the user: name, home, work, family, diet, health, plans with \
dates. Skip greetings, small talk, one-off requests and what only matters in this chat.
- corrections: what the user corrected (the assistant, or something said earlier), as the \
lesson to remember, e.g. "User lives in Lisbon, not Porto".
- content: one short standalone statement about the user, e.g. "User prefers window seats".
- importance, from 0 to 1: 0.9 identity and hard constraints (name, allergies); 0.7-0.8 clear \
preferences and facts; 0.3-0.6 minor ones; below 0.3 trivia.
- source_event_ids: the ids of the user messages each item comes from.
- summary: 2-3 sentences on what happened and what was decided, naming the people, places, \
plans and changes it was about, with the dates the transcript gives; never the greetings or \
small talk. An empty string when nothing happened worth remembering.
- entities: names of people, places, organisations, products and projects mentioned.
- Language: write every content, the summary and the entities in the language the \
conversation is written in. Never translate.
- Empty lists are fine. Never invent anything that is not in the transcript.

Claims: give every preference and fact a "claim" (null only when it states nothing that \
can change, e.g. a one-off remark), in this shape:
{"reasoning": "...", "subject": "User", "attribute": "home", "value": "Porto", \
"polarity": true, "cardinality": "one", "operation": "update", "target": 2, \
"valid_until": null}
- reasoning: first, one short sentence on how the item relates to the CURRENT CLAIMS listed \
below (same subject and attribute? a new value? taken back? said again?).
- subject: "User", or the person it is about ("User's sister", a speaker's name).
- attribute: a short key for what it is about: the key of the ATTRIBUTES list below \
that fits (the key, not an alias: "employer", never "company"; <...> stands for your own \
words: "budget for wedding"), else a short key of your own; reuse the attribute of a \
current claim when it is about the same thing.
- value: the value alone ("Porto", "2,000 euros", "vegetarian").
- polarity: false when the user says it no longer holds ("not vegetarian any more").
- cardinality: "one" when a new value replaces the old, "many" when values add up; the \
ATTRIBUTES list says which for its keys.
- operation and target (the number of a current claim, or null): "update" when it \
replaces that claim's value; "retract" when the user takes that claim back with nothing \
in its place (polarity false); "none" when it only repeats that claim; "add" for anything \
new, including a value that coexists with a current one ("also", a second pet); target \
null with "add".
- valid_until: an ISO date when the user states an end ("in Berlin this week"), else null.
Only name targets from the CURRENT CLAIMS list. When unsure, "add": replacing a claim that \
still holds loses a true fact.

ATTRIBUTES (key: what it is; one or many; its aliases):
""" + "".join(f"- {line}\n" for line in vocabulary.prompt_lines())


#: The prompt's own examples (values and phrases of :data:`SYSTEM_PROMPT`). A small model
#: copies them as if the user had said them (Qwen2.5 1.5B: "User prefers window seats",
#: "User lives in Lisbon" from a transcript naming neither), so what names one the
#: transcript never mentions is left out (:func:`build_candidates`).
PROMPT_EXAMPLE_TERMS = (
    "window seat", "answer briefly", "Lisbon", "Porto", "2,000 euros", "Berlin",
)


class ExtractedClaim(BaseModel):
    """What a preference or fact asserts, and what it does to the user's current claims."""

    model_config = ConfigDict(extra="ignore")

    reasoning: str = Field(
        "", description="How this relates to the current claims listed (first, one sentence)."
    )
    subject: str = Field("User", description="Who it is about: User, or e.g. User's sister.")
    attribute: str = Field(description="A short key: home, employer, budget, diet, ...")
    value: str = Field(description="The value alone.")
    polarity: bool = Field(True, description="False when the user says it no longer holds.")
    cardinality: Literal["one", "many"] = Field(
        "one", description="one: a new value replaces the old; many: values add up."
    )
    operation: Literal["add", "update", "retract", "none"] = Field(
        "add", description="What it does to the current claim named by target."
    )
    target: int | None = Field(None, description="The number of a current claim, or null.")
    valid_until: str | None = Field(None, description="ISO date of a stated end, or null.")


class ExtractedItem(BaseModel):
    """One preference, fact or correction as the model returns it."""

    model_config = ConfigDict(extra="ignore")

    content: str = Field(description="One short standalone statement about the user.")
    importance: float = Field(
        DEFAULT_IMPORTANCE, ge=0, le=1, description="0 (trivia) to 1 (identity)."
    )
    source_event_ids: list[str] = Field(
        default_factory=list, description="Ids of the user messages this comes from."
    )
    claim: ExtractedClaim | None = Field(
        None, description="What it asserts and what it does to the current claims."
    )

    @field_validator("source_event_ids", mode="before")
    @classmethod
    def _one_id_is_a_list(cls, value: Any) -> Any:
        # Models often cite a single id as a bare string; that is not worth a retry.
        return [value] if isinstance(value, str) else value

    @field_validator("claim", mode="wrap")
    @classmethod
    def _a_broken_claim_is_left_out(cls, value: Any, handler: Any) -> Any:
        # A claim that does not validate costs the item its claim, never the whole reply:
        # the fact is kept and the rules decide what it changes.
        try:
            return handler(value)
        except ValidationError:
            log.info("llm extractor: a claim that does not validate was left out")
            return None


class ExtractionReply(BaseModel):
    """The JSON object the model is asked for, validated before anything is kept.

    Its JSON schema (:func:`reply_json_schema`) requires every field. A reply read from
    text is more forgiving (:func:`parse_reply`): it must have one of ``preferences``,
    ``facts``, ``summary`` or ``corrections`` (an unrelated object is a failed attempt, not
    an empty extraction), and each item is validated on its own.
    """

    model_config = ConfigDict(extra="ignore")

    preferences: list[ExtractedItem]
    facts: list[ExtractedItem]
    summary: str = Field(
        description="2-3 sentences on what happened and was decided: people, places, plans, "
        "changes; never greetings. Empty when nothing happened."
    )
    entities: list[str] = Field(default_factory=list, description="Names mentioned.")
    corrections: list[ExtractedItem] = Field(
        default_factory=list, description="What the user corrected, as lessons."
    )


# --- prompt ------------------------------------------------------------------------------


def render_transcript(messages: Sequence[TranscriptMessage]) -> str:
    """The transcript as the model sees it: a JSON list of ``{id, role, text}``.

    JSON keeps ids and roles unambiguous whatever the text contains (a message cannot pose as
    another turn), and ``ensure_ascii=False`` keeps the text in its own script.

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> at = datetime(2026, 1, 5, tzinfo=timezone.utc)
    >>> print(render_transcript([
    ...     TranscriptMessage(event_id="m-1", role="user", content="Ich wohne in Zürich",
    ...                       occurred_at=at)]))
    Transcript:
    [{"id": "m-1", "role": "user", "text": "Ich wohne in Zürich"}]
    """
    turns = [
        {"id": m.event_id, "role": m.role, "text": _cut(m.content, MAX_ANALYSED_CHARS)}
        for m in messages
    ]
    return "Transcript:\n" + json.dumps(turns, ensure_ascii=False)


def render_claims(known: Sequence[KnownClaim]) -> str:
    """The user's current claims as the model sees them, numbered from 1 (a number, never a
    memory id: the reply names claims by it, and an unknown number is refused).

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> at = datetime(2026, 1, 5, tzinfo=timezone.utc)
    >>> print(render_claims([KnownClaim("m-9", Claim(subject="User", attribute="home",
    ...     value="Lisbon", valid_from=at))]))
    CURRENT CLAIMS:
    [{"n": 1, "subject": "User", "attribute": "home", "value": "Lisbon", "polarity": true, "since": "2026-01-05"}]
    """
    shown = [
        {
            "n": number,
            "subject": known.claim.subject,
            "attribute": known.claim.attribute,
            "value": known.claim.value,
            "polarity": known.claim.polarity,
            "since": known.claim.valid_from.date().isoformat(),
        }
        for number, known in enumerate(known[:MAX_SHOWN_CLAIMS], start=1)
    ]
    return "CURRENT CLAIMS:\n" + json.dumps(shown, ensure_ascii=False)


def shown_claims(known: Sequence[KnownClaim]) -> list[KnownClaim]:
    """The claims :func:`render_claims` shows, in its numbering (the newest first)."""
    ordered = sorted(known, key=lambda k: (k.claim.valid_from, k.memory_id), reverse=True)
    return ordered[:MAX_SHOWN_CLAIMS]


def reply_json_schema() -> dict[str, Any]:
    """The JSON schema sent as ``response_format``: :class:`ExtractionReply`, made strict.

    Strict structured output wants every property required, no extra properties and no
    ``$ref``s on some servers, so the pydantic schema is inlined and tightened.
    """
    schema = ExtractionReply.model_json_schema()
    definitions = schema.pop("$defs", {})

    def tighten(node: Any) -> Any:
        if isinstance(node, list):
            return [tighten(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return tighten(definitions[node["$ref"].rsplit("/", 1)[-1]])
        tightened = {
            key: tighten(value) for key, value in node.items() if key not in ("title", "default")
        }
        if tightened.get("type") == "object":
            # Class docstrings are written for developers, not for the model.
            tightened.pop("description", None)
            tightened["required"] = list(tightened.get("properties", {}))
            tightened["additionalProperties"] = False
        return tightened

    result: dict[str, Any] = tighten(schema)
    return result


# --- parsing -----------------------------------------------------------------------------

_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+")
def parse_reply(text: str, *, finish_reason: str | None = None) -> ExtractionReply:
    """Parse and validate a model's reply, one item at a time.

    Small models give the right object in odd shapes, and one bad item is no reason to lose
    the others (nor to spend a retry: on a small local model a call is a minute of CPU).
    So: a missing list is empty and a missing summary is ``""``; a single item or a bare
    string stands for a list of it; a bare string item is its ``content``
    (:data:`DEFAULT_IMPORTANCE`); an item that still does not validate is left out (and
    logged, without its text); entities that are not strings are left out.

    Raises
    ------
    ReplyInvalid
        With a short, model-readable description of what is wrong: no JSON object, an
        object with none of the reply's fields, or items every one of which was left out.

    Examples
    --------
    >>> reply = parse_reply('{"facts": ["User is vegan", {"importance": 0.9}]}')
    >>> [(item.content, item.importance) for item in reply.facts], reply.summary
    ([('User is vegan', 0.5)], '')
    """
    cut_off = " (the reply was cut off: keep it shorter)" if finish_reason == "length" else ""
    try:
        data = parse_json_reply(text)
    except ReplyInvalid as exc:
        raise ReplyInvalid(f"{exc}{cut_off}") from None
    if not any(key in data for key in (*ITEM_LISTS, "summary")):
        keys = ", ".join(list(data)[:5]) or "none"
        raise ReplyInvalid(shorten(
            f"reply: expected the keys preferences, facts, summary, corrections, entities; "
            f"got {keys}{cut_off}"
        ))
    items: dict[str, list[ExtractedItem]] = {}
    problems: list[str] = []
    offered = 0
    for key in ITEM_LISTS:
        raw = data.get(key)
        entries = [] if raw is None else raw if isinstance(raw, list) else [raw]
        offered += len(entries)
        items[key] = []
        for index, entry in enumerate(entries):
            try:
                items[key].append(ExtractedItem.model_validate(
                    {"content": entry} if isinstance(entry, str) else entry
                ))
            except ValidationError as exc:
                problems.append(_validation_problems(exc, f"{key}.{index}"))
    if problems:
        log.info("llm extractor: %d item(s) that do not validate were left out", len(problems))
    summary = data.get("summary")
    if isinstance(summary, list):
        summary = " ".join(part for part in summary if isinstance(part, str))
    raw_entities = data.get("entities")
    entities = raw_entities if isinstance(raw_entities, list) else []
    reply = ExtractionReply(
        **items,
        summary=summary if isinstance(summary, str) else "",
        entities=[name for name in entities if isinstance(name, str)],
    )
    if offered and not any(items.values()) and not reply.summary.strip():
        raise ReplyInvalid(shorten("; ".join(problems) + cut_off))
    return reply


def _validation_problems(exc: ValidationError, where: str) -> str:
    """A validation error on one line: each field's path under ``where`` and its message."""
    return "; ".join(
        f"{'.'.join([where, *(str(part) for part in error['loc'])])}: {error['msg']}"
        for error in exc.errors()[:5]
    )


# --- candidates --------------------------------------------------------------------------


def build_candidates(
    reply: ExtractionReply,
    transcript: Sequence[TranscriptMessage],
    shown: Sequence[KnownClaim] = (),
) -> tuple[MemoryCandidate, ...]:
    """Memory candidates from a validated reply: preferences, facts, corrections, summary.

    Cited ids are checked against the transcript: unknown ids are dropped, and an item that
    cites no known id is credited to every user message. An item that cites only assistant
    messages is the assistant's statement and is dropped, unless it is worded like a user
    turn more than like what it cites (:func:`_user_turn_meant`: then it cites that turn).
    An item naming one of the prompt's examples (:data:`PROMPT_EXAMPLE_TERMS`) that the
    transcript never mentions is dropped, and so is such a sentence of the summary or such
    an entity. Items with the same text (ignoring case, punctuation and spacing) are merged,
    a preference and a fact included (the type first given is kept). A preference's or
    fact's claim (:func:`claim_of`) starts at the first user message it cites; its
    operation names one of ``shown`` (the claims the prompt listed) by its memory id.
    """
    roles = {m.event_id: m.role for m in transcript}
    times = {m.event_id: m.occurred_at for m in transcript}
    user_ids = tuple(m.event_id for m in transcript if m.role == "user")
    spoken = " ".join(m.content for m in transcript).casefold()
    leaked = tuple(t.casefold() for t in PROMPT_EXAMPLE_TERMS if t.casefold() not in spoken)

    def copied(text: str) -> bool:
        return any(term in text.casefold() for term in leaked)

    entities = tuple(name for name in _clean_entities(reply.entities) if not copied(name))
    drafts: dict[tuple[str, str], MemoryCandidate] = {}
    targeted: set[str] = set()

    def add(
        memory_type: MemoryType,
        content: str,
        importance: float,
        sources: tuple[str, ...],
        claim: Claim | None = None,
    ) -> None:
        content = _cut(" ".join(content.split()), _content_limit(memory_type))
        # A statement given both as a preference and as a fact is one memory, of the type
        # it was first given as (small models often list each item under both).
        kind = "statement" if memory_type in ("preference", "fact") else memory_type
        key = (kind, _dedup_key(content))
        if not key[1]:
            return
        mentioned = tuple(name for name in entities if _mentions(content, name))[:MAX_ENTITIES]
        earlier = drafts.get(key)
        if earlier is not None:
            sources = _unique([*earlier.source_event_ids, *sources])
            mentioned = _unique([*earlier.entities, *mentioned])[:MAX_ENTITIES]
            importance = max(importance, earlier.importance)
            content = earlier.content
        drafts[key] = MemoryCandidate(
            memory_type=earlier.memory_type if earlier is not None else memory_type,
            content=content,
            importance=round(importance, 2),
            source_event_ids=sources,
            entities=mentioned,
            claim=earlier.claim if earlier is not None and earlier.claim else claim,
        )

    groups: tuple[tuple[MemoryType, list[ExtractedItem]], ...] = (
        ("preference", reply.preferences),
        ("fact", reply.facts),
        ("correction", reply.corrections),
    )
    for memory_type, items in groups:
        for item in items:
            cited = _unique(i for i in item.source_event_ids if i in roles)
            if cited and not any(roles[i] == "user" for i in cited):
                cited = _user_turn_meant(item.content, cited, transcript)
                if not cited:
                    log.info("llm extractor: dropped an assistant statement: %r", item.content)
                    continue
            if copied(item.content) or (item.claim is not None and copied(item.claim.value)):
                log.info("llm extractor: dropped an item copied from the prompt's examples")
                continue
            if memory_type == "correction":
                importance = max(item.importance, CORRECTION_MIN_IMPORTANCE)
            elif item.importance < MIN_IMPORTANCE:
                continue
            else:
                importance = item.importance
            sources = cited or user_ids
            said = next((times[i] for i in sources if roles.get(i) == "user"), None)
            claim = None
            if item.claim is not None and said is not None and memory_type != "correction":
                claim = claim_of(item.claim, said, shown, targeted)
            add(memory_type, item.content, importance, sources, claim)
    summary = " ".join(
        sentence for sentence in _SENTENCE_END_RE.split(reply.summary.strip())
        if not copied(sentence)
    )
    if summary.strip():
        # The summary covers the whole span, both sides of it.
        add("summary", summary, SUMMARY_IMPORTANCE, tuple(roles))
    return tuple(drafts.values())


def _user_turn_meant(
    content: str, cited: Sequence[str], transcript: Sequence[TranscriptMessage]
) -> tuple[str, ...]:
    """For an item citing only assistant turns: the user turn that shares the most words
    with it, when it shares more than any cited turn does (``()`` otherwise). A small model
    often cites the wrong turn, the assistant's answer most of all (Qwen2.5 1.5B cited
    "Thanks, I've made a note of that." for "I have a job with Shopify."); an item worded
    like the assistant's own text (its suggestion) finds no such user turn, and is dropped."""
    words = _words(content)
    by_id = {m.event_id: m for m in transcript}
    cited_best = max(len(words & _words(by_id[i].content)) for i in cited)
    best, best_shared = None, cited_best
    for message in transcript:
        shared = len(words & _words(message.content)) if message.role == "user" else 0
        if shared > best_shared:
            best, best_shared = message.event_id, shared
    return (best,) if best is not None else ()


def _words(text: str) -> set[str]:
    """The words of ``text`` worth comparing: longer than two letters, not "user"."""
    return {w for w in re.findall(r"\w+", text.casefold()) if len(w) > 2} - {"user"}


def claim_of(
    item: ExtractedClaim, said: datetime, shown: Sequence[KnownClaim], targeted: set[str]
) -> Claim | None:
    """The claim of a reply's item, starting at ``said``; None when it names no attribute or
    no value. Its operation is kept only when it makes sense: it names a claim the prompt
    showed (``shown``, numbered from 1) that no earlier item of the reply acted on
    (``targeted``, updated here); an "update" to the value the claim already holds is a
    "none", a "retract" takes the value back (polarity false). Anything else leaves the
    operation out, and the rules decide (:mod:`memstream.models.beliefs`)."""
    attribute = attribute_key(item.attribute)[:200]
    value = " ".join(item.value.split())[:500]
    subject = " ".join(item.subject.split())[:200] or "User"
    if not attribute or (not value and item.polarity):
        return None
    operation: ClaimOperation | None = item.operation
    target: str | None = None
    polarity = item.polarity and item.operation != "retract"
    if item.operation != "add":
        known = shown[item.target - 1] if item.target and 1 <= item.target <= len(shown) else None
        if known is None or known.memory_id in targeted:
            log.info("llm extractor: an operation on an unknown or taken claim left to the rules")
            operation = None
        else:
            target = known.memory_id
            targeted.add(target)
            same = same_value(known.claim.value, value) and known.claim.polarity == polarity
            if item.operation == "update" and same:
                operation = "none"
            elif item.operation == "none" and not same:
                operation = None  # "the same" yet another value: the model contradicts itself
                target = None
    return Claim(
        subject=subject,
        attribute=attribute,
        value=value,
        polarity=polarity,
        cardinality=item.cardinality,
        valid_from=said,
        valid_until=_stated_end(item.valid_until, said),
        cue="also" if item.operation == "add" and item.cardinality == "many" else "state",
        operation=operation,
        target=target if operation is not None else None,
    )


def _stated_end(text: str | None, said: datetime) -> datetime | None:
    """The end a reply states, as an aware time after ``said`` and within a year of it
    (anything else is left out); a date ends at the end of its day (UTC)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if len(text.strip()) == 10:  # a date: holds until the day is over
        moment += timedelta(hours=23, minutes=59, seconds=59)
    if not said < moment <= said + MAX_STATED_END:
        return None
    return moment


def _content_limit(memory_type: MemoryType) -> int:
    return MAX_SUMMARY_CHARS if memory_type == "summary" else MAX_CONTENT_CHARS


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary past half of it."""
    return truncate(text, limit, keep_share=0.5, trailing=None)


def shorten(text: str) -> str:
    """``text`` on one line, cut to :data:`MAX_ERROR_CHARS` (an error fed back or kept)."""
    return _cut(" ".join(text.split()), MAX_ERROR_CHARS)


def _dedup_key(text: str) -> str:
    kept = (c for c in text.casefold() if not unicodedata.category(c).startswith(("P", "S")))
    return " ".join("".join(kept).split())


def _clean_entities(names: Iterable[str]) -> tuple[str, ...]:
    cleaned = (" ".join(name.split()) for name in names if isinstance(name, str))
    usable = [name for name in cleaned if 0 < len(name) <= MAX_ENTITY_CHARS]
    seen: set[str] = set()
    unique = []
    for name in usable:
        if name.casefold() not in seen:
            seen.add(name.casefold())
            unique.append(name)
    return tuple(unique[:MAX_REPLY_ENTITIES])


def _mentions(content: str, name: str) -> bool:
    """Whether ``content`` names ``name`` (case-insensitive, whole words in spaced scripts).

    Word boundaries are only checked at ASCII edges: in scripts written without spaces
    (Chinese, Japanese, Thai) a name sits directly between other letters.
    """
    start = r"(?<!\w)" if name[0].isascii() else ""
    end = r"(?!\w)" if name[-1].isascii() else ""
    return re.search(start + re.escape(name) + end, content, re.IGNORECASE) is not None


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))
