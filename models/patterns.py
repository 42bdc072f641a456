"""Learned patterns (issue 29, part 4): recurring behaviour counted from a user's spans.

Each consolidated span is *observed* once (:func:`observe_span`, pure: the request's user
turns and tool calls, the extraction's corrections), and the observation is recorded in its
:class:`~memstream.models.events.memory.ExtractionRecorded`. A user's
:class:`PatternBook` is the fold of those observations (:func:`record`), counted by
*sessions*, so a span delivered twice, or two spans of one session, count once. The patterns
a book shows (:func:`patterns`) are those seen in enough sessions; when one appears or its
count changes, :func:`pattern_changes` says which memory to add and which version it
supersedes.

Everything is bounded whatever the input: words and names are clipped, a span gives at most
``MAX_SIGNALS_PER_SPAN`` signals, a book keeps ``MAX_SESSIONS`` sessions and ``MAX_KEYS``
keys.

Examples
--------
>>> from datetime import datetime, timezone
>>> def seen(session, hour):
...     at = datetime(2026, 3, 2, hour, tzinfo=timezone.utc)
...     return SpanObservation(session_id=session, started_at=at,
...         signals=(Signal(kind="tool", value="web_search", event_id=f"{session}-t"),))
>>> book = PatternBook()
>>> for n in range(3):
...     book = record(book, seen(f"s{n}", 8))
>>> [p.content for p in patterns(book).values()]
['uses the tool web_search (3 sessions)', 'active mostly 08:00-10:00 UTC (3 sessions)', \
'most sessions on Mondays (3 sessions)']
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AwareDatetime, Field, StringConstraints

from memstream.models import vocabulary
from memstream.models.events.envelope import Frozen, Identifier, derived_id

__all__ = [
    "MIN_SESSIONS",
    "Pattern",
    "PatternBook",
    "PatternChange",
    "Signal",
    "SpanObservation",
    "observe_span",
    "pattern_changes",
    "patterns",
    "record",
]

#: Sessions a behaviour must be seen in before it is a pattern (a correction: two, "again").
MIN_SESSIONS = 3
MIN_CORRECTION_SESSIONS = 2
#: Bounds: signals one span gives, sessions and keys one book keeps, characters of a value.
MAX_SIGNALS_PER_SPAN = 40
MAX_SESSIONS = 400
MAX_KEYS = 400
MAX_VALUE_CHARS = 64
#: Evidence event ids a pattern's memory carries (the most recent sessions').
MAX_EVIDENCE_IDS = 20
#: Hours in the window of "active mostly" (UTC).
HOUR_WINDOW = 2
_UTC = UTC
WEEKDAYS = tuple(f"{day.capitalize()}s" for day in vocabulary.WEEKDAYS)

SignalKind = Literal["request", "tool", "correction"]

#: Stopwords, pronouns and fillers: never a topic. (Not the extractor's list: importing
#: :mod:`memstream.models.extraction` here would be circular through the events.)
_COMMON_WORDS = frozenset(
    ["a", "about", "after", "again", "all", "also", "always", "am", "an", "and", "another", "any", "anyone", "anything", "are", "as", "at", "be", "been", "before", "being", "but", "by", "can", "can't", "cannot", "could", "did", "do", "does", "doing", "don't", "for", "from", "get", "give", "go", "going", "got", "had", "has", "have", "having", "he", "her", "here", "him", "his", "how", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "it", "it's", "its", "just", "know", "let", "let's", "like", "me", "might", "more", "most", "much", "must", "my", "need", "new", "no", "not", "now", "of", "on", "one", "or", "other", "our", "out", "over", "please", "really", "should", "so", "some", "something", "still", "such", "sure", "than", "thank", "thanks", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "today", "tomorrow", "tonight", "too", "up", "us", "very", "want", "was", "we", "were", "what", "when", "where", "which", "while", "who", "why", "will", "with", "would", "yes", "yet", "you", "your", "yours"]
)
#: Words that open a request ("can you", "find me", "recommend"): a user turn with one, or a
#: question mark, asks for something.
_REQUEST_OPENERS = frozenset(
    ["can", "could", "would", "will", "please", "find", "recommend", "suggest", "show", "give", "tell", "help", "plan", "book", "write", "make", "list", "explain", "what", "which", "how", "where", "any", "looking", "need", "want"]
)
#: Words never a topic of a request, beyond the stopwords.
_NOT_TOPICS = _COMMON_WORDS | _REQUEST_OPENERS | frozenset(
    ["ideas", "idea", "some", "good", "best", "few", "couple", "lot", "lots", "kind", "sort", "way", "ways", "recommendations", "suggestions", "options", "tips", "week", "weekend", "day", "time", "anything", "everything", "near", "around", "maybe", "again", "place", "places", "thing", "things"]
)
#: Words of a correction's text that never name what was corrected.
_NOT_ATTRIBUTES = frozenset(
    ["correction", "user", "user's", "said", "says", "lives", "live", "lived", "works", "work", "is", "was", "not"]
)
_WORD = re.compile(r"[^\W\d_][\w'-]*", re.UNICODE)


class Signal(Frozen):
    """One thing a span shows the user doing: asking about a word (``request``), calling a
    tool (``tool``), correcting an attribute (``correction``); with the event that shows it."""

    kind: SignalKind
    value: Annotated[str, StringConstraints(min_length=1, max_length=MAX_VALUE_CHARS)]
    event_id: Identifier


class SpanObservation(Frozen):
    """What one span shows of the user's habits: its session, when the session started, and
    its signals (each kind and value once, the first event that shows it)."""

    session_id: Identifier
    started_at: AwareDatetime
    signals: tuple[Signal, ...] = ()


def _clip(value: str) -> str:
    """``value`` normalised (NFKC, casefolded, whitespace collapsed) and clipped."""
    text = " ".join(unicodedata.normalize("NFKC", value).casefold().split())
    return text[:MAX_VALUE_CHARS].strip()


def request_topics(text: str, *, limit: int = 6) -> list[str]:
    """The words a user turn asks about, when it asks for something: a question, or a turn
    opening with a request word; its content words otherwise none.

    Examples
    --------
    >>> request_topics("Can you find me a vegetarian recipe for dinner?")
    ['vegetarian', 'recipe', 'dinner']
    >>> request_topics("I went to the market.")
    []
    """
    clipped = text[:2_000]
    words = _WORD.findall(clipped.casefold())
    if not words or ("?" not in clipped and words[0] not in _REQUEST_OPENERS):
        return []
    topics: list[str] = []
    for word in words:
        word = word.strip("'-")
        if 3 <= len(word) <= 30 and word not in _NOT_TOPICS and word not in topics:
            # A plural and its singular are one topic ("recipes", "recipe").
            if word.endswith("s") and not word.endswith("ss") and len(word) > 4:
                word = word[:-1]
            if word not in topics:
                topics.append(word)
        if len(topics) >= limit:
            break
    return topics


def observe_span(
    session_id: str,
    started_at: datetime,
    user_turns: Iterable[tuple[str, str]],
    tools: Iterable[tuple[str, str]] = (),
    corrections: Iterable[tuple[str, str]] = (),
) -> SpanObservation:
    """The observation of one span: ``user_turns`` (event id, text), ``tools`` (event id,
    tool name) and ``corrections`` (event id, corrected attribute), each kind and value
    once (its first event), at most ``MAX_SIGNALS_PER_SPAN`` in all."""
    signals: dict[tuple[str, str], Signal] = {}

    def add(kind: SignalKind, value: str, event_id: str) -> None:
        clipped = _clip(value)
        if clipped and (kind, clipped) not in signals and len(signals) < MAX_SIGNALS_PER_SPAN:
            signals[(kind, clipped)] = Signal(kind=kind, value=clipped, event_id=event_id)

    for event_id, name in tools:
        add("tool", name, event_id)
    for event_id, attribute in corrections:
        add("correction", attribute, event_id)
    for event_id, text in user_turns:
        for topic in request_topics(text):
            add("request", topic, event_id)
    return SpanObservation(session_id=session_id, started_at=started_at,
                           signals=tuple(signals.values()))


class PatternBook(Frozen):
    """A user's counts: each session seen (its start), and for each signal key
    (``kind:value``) the sessions that showed it with the first event that did."""

    sessions: dict[str, datetime] = Field(default_factory=dict)
    seen: dict[str, dict[str, str]] = Field(default_factory=dict)


def _session_order(book_sessions: dict[str, datetime], session_id: str) -> tuple[str, str]:
    return (book_sessions[session_id].isoformat(), session_id)


def record(book: PatternBook, observation: SpanObservation) -> PatternBook:
    """``book`` with ``observation`` counted: idempotent (a span, or a session, counts once)
    and bounded (the latest ``MAX_SESSIONS`` sessions by start, then id; the ``MAX_KEYS``
    keys seen in most sessions, then by key)."""
    sessions = dict(book.sessions)
    known = sessions.get(observation.session_id)
    # A session's start is its earliest observed one (a later span says the same or later).
    if known is None or observation.started_at < known:
        sessions[observation.session_id] = observation.started_at
    seen = {key: dict(by_session) for key, by_session in book.seen.items()}
    for signal in observation.signals:
        by_session = seen.setdefault(f"{signal.kind}:{signal.value}", {})
        first = by_session.get(observation.session_id)
        if first is None or signal.event_id < first:
            by_session[observation.session_id] = signal.event_id
    if len(sessions) > MAX_SESSIONS:
        kept = sorted(sessions, key=lambda s: _session_order(sessions, s))[-MAX_SESSIONS:]
        sessions = {s: sessions[s] for s in kept}
        seen = {k: {s: e for s, e in v.items() if s in sessions} for k, v in seen.items()}
        seen = {k: v for k, v in seen.items() if v}
    if len(seen) > MAX_KEYS:
        kept_keys = sorted(seen, key=lambda k: (-len(seen[k]), k))[:MAX_KEYS]
        seen = {k: seen[k] for k in kept_keys}
    return PatternBook(sessions=sessions, seen=seen)


class Pattern(Frozen):
    """One learned pattern: its key, the line that says it, and its evidence (the sessions
    and the events that show it; ``sessions_seen``, every session the book holds)."""

    key: str
    kind: Literal["request", "tool", "correction", "hours", "weekday"]
    content: str
    sessions: tuple[str, ...]
    event_ids: tuple[str, ...]
    sessions_seen: int

    @property
    def importance(self) -> float:
        """Grows with the sessions that show it: 0.5 at the threshold, at most 0.8."""
        return round(min(0.8, 0.5 + 0.05 * (len(self.sessions) - MIN_SESSIONS)), 3)

    def memory_id(self, user_id: str) -> str:
        """Deterministic from the user, the key and the evidence: the same sessions give the
        same id on every run, a new session a new version."""
        return derived_id(user_id, "pattern", self.key, *self.sessions)

    def evidence(self) -> str:
        """The evidence as JSON (the memory's ``context``): kind, key, sessions, events."""
        return json.dumps(
            {
                "pattern": self.key,
                "kind": self.kind,
                "session_count": len(self.sessions),
                "sessions_seen": self.sessions_seen,
                "sessions": list(self.sessions),
                "event_ids": list(self.event_ids),
            },
            ensure_ascii=False,
            sort_keys=True,
        )


def _sorted_sessions(book: PatternBook, sessions: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(sessions, key=lambda s: _session_order(book.sessions, s)))


def _pattern(
    book: PatternBook, key: str, kind: str, content: str, by_session: dict[str, str]
) -> Pattern:
    ordered = _sorted_sessions(book, by_session)
    return Pattern(
        key=key,
        kind=kind,
        content=f"{content} ({len(ordered)} sessions)",
        sessions=ordered,
        event_ids=tuple(by_session[s] for s in ordered[-MAX_EVIDENCE_IDS:]),
        sessions_seen=len(book.sessions),
    )


_SAY = {
    "request": "usually asks about {value}",
    "tool": "uses the tool {value}",
    "correction": "corrects the {value} repeatedly",
}


def patterns(book: PatternBook) -> dict[str, Pattern]:
    """The patterns ``book`` shows, by key: signals seen in at least ``MIN_SESSIONS``
    sessions (corrections ``MIN_CORRECTION_SESSIONS``), then the hours and the weekday most
    of its sessions start at, when at least ``MIN_SESSIONS`` and half of them do. Ordered by
    kind (tool, correction, request, hours, weekday), then sessions (most first), then key."""
    found: list[Pattern] = []
    rank = {"tool": 0, "correction": 1, "request": 2}
    for key, by_session in book.seen.items():
        kind, _, value = key.partition(":")
        least = MIN_CORRECTION_SESSIONS if kind == "correction" else MIN_SESSIONS
        # Only sessions the book still holds count (bounded books drop the oldest).
        held = {s: e for s, e in by_session.items() if s in book.sessions}
        if len(held) >= least and kind in _SAY:
            found.append(_pattern(book, key, kind, _SAY[kind].format(value=value), held))
    found.sort(key=lambda p: (rank[p.kind], -len(p.sessions), p.key))
    result = {p.key: p for p in found}
    for extra in (_hours(book), _weekday(book)):
        if extra is not None:
            result[extra.key] = extra
    return result


def _enough(count: int, total: int) -> bool:
    return count >= MIN_SESSIONS and 2 * count >= total


def _hours(book: PatternBook) -> Pattern | None:
    """The ``HOUR_WINDOW`` hours (UTC, across midnight too) most sessions start in, opening
    at a session's hour; the earliest window on a tie."""
    starts = {s: at.astimezone(_UTC).hour for s, at in book.sessions.items()}
    best: tuple[int, int] | None = None
    for first in sorted(set(starts.values())):
        inside = sum(((h - first) % 24) < HOUR_WINDOW for h in starts.values())
        if best is None or inside > best[1]:
            best = (first, inside)
    if best is None or not _enough(best[1], len(starts)):
        return None
    first = best[0]
    sessions = {s: s for s, h in starts.items() if ((h - first) % 24) < HOUR_WINDOW}
    end = (first + HOUR_WINDOW) % 24
    return _pattern(book, "hours", "hours", f"active mostly {first:02d}:00-{end:02d}:00 UTC",
                    sessions)


def _weekday(book: PatternBook) -> Pattern | None:
    """The weekday (UTC) most sessions start on; the earliest in the week on a tie."""
    days = {s: at.astimezone(_UTC).weekday() for s, at in book.sessions.items()}
    counts = [sum(d == day for d in days.values()) for day in range(7)]
    day = max(range(7), key=lambda d: (counts[d], -d)) if days else 0
    if not _enough(counts[day], len(days)):
        return None
    sessions = {s: s for s, d in days.items() if d == day}
    return _pattern(book, "weekday", "weekday", f"most sessions on {WEEKDAYS[day]}", sessions)


class PatternChange(Frozen):
    """A pattern to record: its new version, and the version it supersedes (None: new)."""

    pattern: Pattern
    supersedes: Pattern | None = None


def pattern_changes(before: PatternBook, after: PatternBook) -> list[PatternChange]:
    """The patterns of ``after`` that ``before`` did not show, or showed with other
    evidence (a new version supersedes the old one), in the order of :func:`patterns`."""
    old = patterns(before)
    changes = []
    for key, pattern in patterns(after).items():
        previous = old.get(key)
        if previous is None or previous.sessions != pattern.sessions:
            changes.append(PatternChange(pattern=pattern, supersedes=previous))
    return changes


def corrected_attributes(
    candidates: Sequence[tuple[str, str, str | None, Sequence[str]]],
) -> list[tuple[str, str]]:
    """(event id, attribute) of each correction among ``candidates`` (memory type,
    content, the claim's attribute or None, source event ids): a ``correction`` memory, by
    its claim's attribute, else that of a claim the same turn states ("User lives in Porto":
    home), else its first content word after "Correction:" (an alias as the vocabulary's key:
    "company" is the employer).

    Examples
    --------
    >>> corrected_attributes([
    ...     ("correction", "Correction: User lives in Porto, not Lisbon", None, ["m-1"]),
    ...     ("fact", "User lives in Porto", "home", ["m-1"]),
    ...     ("correction", 'Correction: User said "the meeting is in Berlin"', None, ["m-2"])])
    [('m-1', 'home'), ('m-2', 'meeting')]
    """
    stated: dict[str, str] = {}
    for memory_type, _, attribute, sources in candidates:
        if attribute and memory_type != "correction":
            for source in sources:
                stated.setdefault(source, attribute)
    found = []
    for memory_type, content, attribute, sources in candidates:
        if memory_type != "correction" or not sources:
            continue
        words = [w for w in _WORD.findall(content.casefold())
                 if w not in _NOT_TOPICS and w not in _NOT_ATTRIBUTES]
        by_turn = next((stated[s] for s in sources if s in stated), None)
        name = attribute or by_turn or (vocabulary.canonical_key(words[0]) if words else "")
        if name:
            found.append((min(sources), name))
    return found