"""The offline extractor: a transcript's candidates, assembled from its episodes, statements,
corrections and summary.

:class:`OfflineExtractor` needs no model and is deterministic: the same request always
yields the same candidates, in the same order, with the same ``raw_response``.

Conventions of the offline extractor
------------------------------------
* **Source roles.** Only what the *user* said becomes a preference, fact or correction of
  theirs. Every turn that says something becomes an episode, the assistant's included
  ("what was the hotel you suggested?"), written about who said it, so an assistant's
  "I recommend ..." is never read as the user's taste. In a conversation between named
  people (every message carries a name, the other side's not the user's: two friends
  talking), what the other person states of themselves becomes facts and preferences about
  them ("Tom works at Bosch", a claim whose subject is Tom): the user's to remember (who
  works where), never the user's own. System and tool messages are ignored: they hold
  prompts and recalled memories, and extracting recalled memories again is how junk
  multiplies.
* **The user's name.** When the user's messages carry one name that reads as a person's
  ("Ines", "Ines Duarte": capitalised words; not a handle, not several names), it is stated
  as "User's name is Ines", as "my name is Ines" would be, citing the first message that
  carried it.
* **Statements** (preferences, facts, corrections) are third-person sentences with ``User``
  as the subject and no final full stop: "User prefers dark roast coffee", "User's name is
  Maria", "User works at Acme". The words after the verb are the user's own, with first-person
  pronouns rewritten (my → their, I → they); nothing is translated. The patterns are English;
  other languages still give episodes and summaries.
* **Corrections** read ``Correction: <statement>``, e.g. "Correction: User lives in Lisbon,
  not Porto". When the corrected statement is itself a fact or preference it is emitted too,
  and an earlier candidate of the same request that it contradicts ("User lives in Porto")
  is dropped. A correction that matches no pattern quotes the user: ``Correction: User said
  "..."``.
* **Episodes** are each turn verbatim (whitespace collapsed), in its own language, after the
  name of who said it when the message carries one ("Tom: I started at Bosch in May"), and
  an assistant's after ``Assistant:``. Greetings, thanks and one-word replies are not
  episodes. Each carries its ``context`` (:func:`memstream.models.conversation.turn_context`):
  the day, the turn before and after, who said each, and relative times resolved to dates
  ("last Tuesday (10 March 2026)"); its ``source_event_ids`` name the turn first, then
  every other turn the context shows.
* **Speakers.** When the user turns carry several names (a group conversation among named
  people, none of them known to be the user), statements and episodes are written about
  their speaker by name ("Tom works at Bosch", "Tom: I work at Bosch now"), never as the
  user's.
* **No summary.** A summary made of the transcript's own sentences says nothing its turns
  do not, and every turn is an episode already; on REALTALK's real chats searching such
  summaries lowered recall (``docs/search.md``). The LLM extractor writes one.
* **Entities** are capitalised names (people, places, organisations, products) found by a
  heuristic and listed in each candidate's ``entities``. No ``entity`` candidates are emitted:
  a bare name is a poor memory that crowds retrieval, while the ``entities`` field already
  gives a projection what it needs for an entity graph.
* **Importance:** name 0.9; employer, home, diet and allergies 0.85; standing instructions
  ("please always ...") 0.85; corrections 0.85; other facts 0.6-0.8; preferences 0.7-0.8;
  summary 0.55; episodes 0.4 (0.45 with names or numbers). Candidates under
  :data:`MIN_IMPORTANCE` are dropped; duplicates within a request (same text once case,
  punctuation and spacing are ignored) are merged, keeping every source. Content is capped at
  :data:`MAX_CONTENT_CHARS` and the work per message is bounded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memstream.models.beliefs import KnownClaim, mentions
from memstream.models.conversation import SPEAKER_PREFIX, speaker, truncate, turn_context
from memstream.models.events.consolidation import ConsolidationRequested, TranscriptMessage
from memstream.models.events.memory import Claim, MemoryCandidate, MemoryType
from memstream.models.extraction.claims import ClaimFinding, person_named, read_clause_claims
from memstream.models.extraction.entities import _entities, _mid_sentence_capitals, _unique
from memstream.models.extraction.port import (
    MAX_ANALYSED_CHARS,
    MAX_CONTENT_CHARS,
    MAX_ENTITIES,
    MIN_IMPORTANCE,
    Extraction,
)
from memstream.models.extraction.sentences import _analyse_sentence
from memstream.models.extraction.state_ends import state_end
from memstream.models.extraction.tasks import with_task_candidates
from memstream.models.extraction.text import _dedup_key, _is_trivial, _sentences, _substance

#: A message ``name`` read as the user's own name: one to three capitalised words.
_PERSON_NAME = re.compile(r"[^\W\d_a-z][^\W\d_]*(?:['-][^\W\d_]+)*(?: [^\W\d_a-z][^\W\d_]*(?:['-][^\W\d_]+)*){0,2}")

EPISODE_IMPORTANCE = 0.4
EPISODE_DETAIL_IMPORTANCE = 0.45


@dataclass(frozen=True)
class _Turn:
    message: TranscriptMessage
    sentences: list[str]


class OfflineExtractor:
    """A deterministic, model-free extractor: patterns, term frequencies, no clock.

    See the module docstring for the conventions it follows.

    Examples
    --------
    >>> extractor = OfflineExtractor()
    >>> (extractor.name, extractor.version)
    ('offline', '10')
    """

    name: str = "offline"
    version: str = "10"
    reads_claims: bool = False

    def extract(
        self, request: ConsolidationRequested, known_claims: Sequence[KnownClaim] = ()
    ) -> Extraction:
        """Extract episodes, preferences, facts and corrections from ``request``
        (from its transcript alone: ``known_claims`` are not read), then the task memories of
        its task changes (:mod:`memstream.models.extraction.tasks`)."""
        candidates = with_task_candidates(extract_candidates(request.messages), request)
        return Extraction(candidates=candidates, raw_response=dump_candidates(candidates))


def dump_candidates(candidates: Sequence[MemoryCandidate]) -> str:
    """The JSON an LLM extractor would return for ``candidates``: ``{"candidates": [...]}``,
    without the fields a candidate leaves unset.

    Examples
    --------
    >>> dump_candidates([MemoryCandidate(memory_type="fact", content="x", importance=0.6)])
    '{"candidates":[{"memory_type":"fact","content":"x","importance":0.6,"source_event_ids":[],"entities":[],"context":""}]}'
    """
    # Fields left unset (a candidate without a claim) are left out, as a model would.
    payload = {
        "candidates": [candidate.model_dump(mode="json", exclude_none=True) for candidate in candidates]
    }
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def extract_candidates(messages: Sequence[TranscriptMessage]) -> tuple[MemoryCandidate, ...]:
    """The offline extractor's candidates for a transcript, in transcript order.

    Per turn: its episode with the conversation around it, then, for the user (or, in a
    conversation among several named people, each of them) and the other person of a
    conversation between two, what its sentences state.
    """
    turns = [
        _Turn(message, _sentences(message.content))
        for message in messages
        if message.role in ("user", "assistant")
    ]
    said = [turn.message for turn in turns]
    attributed = _attributed_speakers(said)
    known_names = _mid_sentence_capitals(sentence for turn in turns for sentence in turn.sentences)
    drafts = _Drafts()
    referent: str | None = None  # whom "she" or "his" means: the last person named
    people = _between_people(said)
    named = None if attributed else _own_name(said)
    for index, turn in enumerate(turns):
        if turn.message.role != "user":
            _others_episode(drafts, said, index, turn, known_names)
            if people:
                _statements(drafts, turn, speaker(turn.message), known_names, None)
            continue
        if named is not None and turn.message.name:
            _statements(drafts, _Turn(turn.message, [f"My name is {named}."]), None, known_names)
            named = None
        source = (turn.message.event_id,)
        subject = speaker(turn.message) if attributed else None
        entities = [name for s in turn.sentences for name in _entities(s, known_names)]
        text = " ".join(turn.message.content[:MAX_ANALYSED_CHARS].split())
        if text:
            context, shown = turn_context(said, index)
            ends = [state_end(s, turn.message.occurred_at) for s in turn.sentences]
            drafts.add(
                "episode",
                f"{speaker(turn.message)}: {text}" if turn.message.name else text,
                _episode_importance(text, entities),
                (*source, *(s for s in shown if s not in source)),
                entities,
                context,
                valid_until=max((end for end in ends if end is not None), default=None),
            )
        referent = _statements(drafts, turn, subject, known_names, referent)
    return drafts.candidates()


def _between_people(messages: Sequence[TranscriptMessage]) -> bool:
    """Whether the conversation is between named people: every message carries a name, and
    the other side's differ from the user's ("Maya" and "Tom", not an assistant)."""
    users = {speaker(m).casefold() for m in messages if m.role == "user"}
    others = {speaker(m).casefold() for m in messages if m.role == "assistant"}
    return (
        bool(users and others)
        and all(m.name for m in messages)
        and not others & users
    )


def _statements(
    drafts: _Drafts,
    turn: _Turn,
    subject: str | None,
    known_names: frozenset[str],
    referent: str | None = None,
) -> str | None:
    """What ``turn``'s sentences state (preferences, facts, corrections and their claims),
    written about ``subject`` (None: the user); returns whom "she" or "his" means after it."""
    source = (turn.message.event_id,)
    speaking = subject or "User"
    for sentence in turn.sentences:
        analysis = _analyse_sentence(sentence)
        for stale in analysis.stale:
            drafts.discard(_about(stale, subject), ("fact", "preference"))
        statements = []
        for finding in analysis.findings:
            found = _entities(finding.source_text, known_names)
            content = _about(finding.content, subject)
            statements.append((finding.memory_type, content))
            drafts.add(finding.memory_type, content, finding.importance, source, found)
        for read in read_clause_claims(sentence, speaking, turn.message.occurred_at, referent):
            drafts.claim(read, statements, source, _entities(sentence, known_names))
        referent = person_named(sentence, speaking) or referent
    return referent


def _own_name(messages: Sequence[TranscriptMessage]) -> str | None:
    """The user's name when their messages carry one, the same on each that has one, and it
    reads as a person's name ("Ines", "Ines Duarte": capitalised words, not a handle like
    ``u-123`` or the role ``User``); else None."""
    names = {speaker(m) for m in messages if m.role == "user" and m.name}
    if len(names) != 1:
        return None
    (name,) = names
    words = name.split()
    if (
        not _PERSON_NAME.fullmatch(name)
        or not all(word[0].isupper() for word in words)
        or name.casefold() in ("user", "assistant")
    ):
        return None
    return name


def _others_episode(
    drafts: _Drafts,
    said: Sequence[TranscriptMessage],
    index: int,
    turn: _Turn,
    known_names: frozenset[str],
) -> None:
    """The other side's turn (the assistant's, or another person's) as an episode written
    about who said it, by name ("Tom: I started at Bosch in May", "Assistant: The Ritz
    has rooms free"), with its context: what was said to the user is theirs to remember
    ("what was the hotel you suggested?"), never their own preference, fact or claim."""
    text = " ".join(turn.message.content[:MAX_ANALYSED_CHARS].split())
    if not text:
        return
    entities = [name for s in turn.sentences for name in _entities(s, known_names)]
    context, shown = turn_context(said, index)
    source = turn.message.event_id
    # An unnamed turn whose text names its speaker ("Nebraas: I got a cat") is written as
    # it is, not "Assistant: Nebraas: ...".
    named_in_text = turn.message.name is None and SPEAKER_PREFIX.match(text)
    drafts.add(
        "episode",
        text if named_in_text else f"{speaker(turn.message)}: {text}",
        _episode_importance(text, entities),
        (source, *(s for s in shown if s != source)),
        entities,
        context,
    )


def _attributed_speakers(messages: Sequence[TranscriptMessage]) -> bool:
    """Whether the user turns come from several named people (a group conversation).

    Then no one of them can be told to be the user, and each statement is written about its
    speaker by name ("Tom works at Bosch"), never as the user's. One name, or none, on every
    user turn: they are the user's own.
    """
    names = {speaker(m).casefold() for m in messages if m.role == "user" and m.name}
    return len(names) > 1


def _about(statement: str, subject: str | None) -> str:
    """``statement`` ("User works at Acme", "Correction: User ...") about ``subject``."""
    if subject is None:
        return statement
    prefix = "Correction: " if statement.startswith("Correction: ") else ""
    rest = statement[len(prefix) :]
    if rest.startswith("User"):
        rest = subject + rest[len("User") :]
    return prefix + rest


def _episode_importance(text: str, entities: Sequence[str]) -> float:
    """0.4 for a substantive user turn, 0.45 with names or numbers; trivial turns score 0."""
    if _is_trivial(text):
        return 0.0
    if _substance(text) < 3:
        return 0.2  # "yes, Lisbon": meaningless without the question, below MIN_IMPORTANCE
    if entities or any(ch.isdigit() for ch in text):
        return EPISODE_DETAIL_IMPORTANCE
    return EPISODE_IMPORTANCE


# --- assembling candidates -----------------------------------------------------------------


@dataclass
class _Draft:
    memory_type: MemoryType
    content: str
    importance: float
    sources: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    context: str = ""
    claim: Claim | None = None
    valid_until: datetime | None = None


class _Drafts:
    """Candidates being collected, merged by normalised content."""

    def __init__(self) -> None:
        self._by_key: dict[str, _Draft] = {}

    def add(
        self,
        memory_type: MemoryType,
        content: str,
        importance: float,
        sources: Iterable[str],
        entities: Iterable[str],
        context: str = "",
        *,
        valid_until: datetime | None = None,
    ) -> None:
        content = truncate(content.strip(), MAX_CONTENT_CHARS)
        key = _dedup_key(content)
        if not key:
            return
        draft = self._by_key.get(key)
        if draft is None:
            draft = self._by_key[key] = _Draft(
                memory_type, content, importance, context=context, valid_until=valid_until
            )
        else:
            draft.importance = max(draft.importance, importance)
        draft.sources = _unique([*draft.sources, *sources])
        draft.entities = _unique([*draft.entities, *entities])[:MAX_ENTITIES]

    def claim(
        self,
        read: ClaimFinding,
        statements: Sequence[tuple[MemoryType, str]],
        sources: Iterable[str],
        entities: Iterable[str],
    ) -> None:
        """Attach a claim read from a sentence to the statement of the same sentence that
        says its value (a fact or preference first, then a correction); with none, the
        claim's own statement becomes a candidate."""
        claim = read.claim
        for wanted in (read.memory_type, "correction"):
            for memory_type, content in statements:
                draft = self._by_key.get(_dedup_key(truncate(content.strip(), MAX_CONTENT_CHARS)))
                if (
                    memory_type == wanted
                    and draft is not None
                    and draft.claim is None
                    and (mentions(content, claim.value) or not claim.value)
                ):
                    draft.claim = claim
                    return
        self.add(read.memory_type, read.content, read.importance, sources, entities)
        draft = self._by_key.get(_dedup_key(truncate(read.content.strip(), MAX_CONTENT_CHARS)))
        if draft is not None and draft.claim is None:
            draft.claim = claim

    def discard(self, content: str, memory_types: tuple[MemoryType, ...]) -> None:
        key = _dedup_key(truncate(content.strip(), MAX_CONTENT_CHARS))
        draft = self._by_key.get(key)
        if draft is not None and draft.memory_type in memory_types:
            del self._by_key[key]

    def candidates(self) -> tuple[MemoryCandidate, ...]:
        return tuple(
            MemoryCandidate(
                memory_type=draft.memory_type,
                content=draft.content,
                importance=round(draft.importance, 2),
                source_event_ids=tuple(draft.sources),
                entities=tuple(draft.entities),
                context=draft.context,
                claim=draft.claim,
                valid_until=draft.valid_until,
            )
            for draft in self._by_key.values()
            if draft.importance >= MIN_IMPORTANCE
        )
