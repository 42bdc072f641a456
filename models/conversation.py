"""Conversation context: who said what, on which day, and what "last Tuesday" means.

A turn is rarely understood alone: "Lisbon! It rained" answers a question asked the turn
before, and "last Tuesday" means a date only next to the day it was said. These pure
functions give extractors what they need to store a turn with its context:

* :func:`speaker` names who said a message: its ``name`` when the producer gave one, else
  ``User`` or ``Assistant`` by role.
* :func:`resolve_times` finds relative time expressions ("yesterday", "last Tuesday", "two
  days ago", "last week", "last month") and resolves each against the moment the message was
  sent; :func:`annotate_times` writes the dates into the text, ``last Tuesday (10 March
  2026)``.
* :func:`turn_context` renders a turn with its neighbours: a first line with the day, then one
  line per turn, ``Speaker: words``, with the dates annotated.

Examples
--------
>>> from datetime import datetime, timezone
>>> at = datetime(2026, 3, 17, 18, 0, tzinfo=timezone.utc)  # a Tuesday
>>> annotate_times("Last Tuesday we adopted a puppy, and yesterday a cat.", at)
'Last Tuesday (10 March 2026) we adopted a puppy, and yesterday (16 March 2026) a cat.'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from memstream.models import vocabulary
from memstream.models.events.consolidation import TranscriptMessage

WEEKDAYS = vocabulary.WEEKDAYS.words
#: "Kate: ..." or "Tom Ray: ...": a text that starts with who said it.
SPEAKER_PREFIX = re.compile(r"([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}): ")
MONTHS = tuple(month.capitalize() for month in vocabulary.MONTHS)
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3,
}
_COUNT = r"(?P<count>\d{1,3}|a couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_TIME_RE = re.compile(
    r"\b(?:"
    r"(?P<before_yesterday>the day before yesterday)"
    r"|(?P<yesterday>yesterday|last night)"
    r"|(?P<today>today|tonight|this (?:morning|afternoon|evening))"
    rf"|(?P<last_day>last (?P<weekday>{'|'.join(WEEKDAYS)}))"
    r"|(?P<last_weekend>last weekend)"
    r"|(?P<last_unit>last (?P<unit>week|month|year))"
    rf"|(?P<ago>{_COUNT} (?P<ago_unit>day|week|month|year)s? ago)"
    r")\b",
    re.IGNORECASE,
)
#: Neighbours shown on each side of a turn, and the characters kept of each.
CONTEXT_TURNS_BEFORE = 1
CONTEXT_TURNS_AFTER = 1
CONTEXT_TURN_CHARS = 300
CONTEXT_OWN_CHARS = 600


@dataclass(frozen=True)
class TimeReference:
    """A relative time expression found in a text and what it resolves to.

    ``day`` is the date meant; for a week, month or year, ``label`` says so ("week of 2 March
    2026", "February 2026", "2025") and ``day`` is its first day.
    """

    start: int
    end: int
    words: str
    day: date
    label: str


def speaker(message: TranscriptMessage) -> str:
    """Who said ``message``: its ``name``, else ``User`` or ``Assistant`` (or the role).

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> at = datetime(2026, 3, 17, tzinfo=timezone.utc)
    >>> speaker(TranscriptMessage(event_id="m", role="assistant", content="Hi", occurred_at=at))
    'Assistant'
    >>> speaker(TranscriptMessage(event_id="m", role="user", name="Tom", content="Hi",
    ...                           occurred_at=at))
    'Tom'
    """
    if message.name:
        return " ".join(message.name.split())
    return str(message.role).capitalize()


def format_day(day: date) -> str:
    """``10 March 2026``: day, month name, year (no leading zero)."""
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def resolve_times(text: str, at: datetime) -> list[TimeReference]:
    """The relative time expressions of ``text`` resolved against ``at`` (when it was said).

    "last <weekday>" is the most recent such day before ``at`` (said on a Tuesday, "last
    Tuesday" is a week earlier); "last weekend" is the Saturday of the last weekend that
    ended before ``at``'s day; "last week" is the week (Monday) before ``at``'s week.
    """
    found = []
    today = at.date()
    for match in _TIME_RE.finditer(text):
        words = match.group(0)
        if match.group("before_yesterday"):
            day, label = today - timedelta(days=2), None
        elif match.group("yesterday"):
            day, label = today - timedelta(days=1), None
        elif match.group("today"):
            day, label = today, None
        elif match.group("last_day"):
            weekday = WEEKDAYS.index(match.group("weekday").lower())
            day, label = today - timedelta(days=(today.weekday() - weekday) % 7 or 7), None
        elif match.group("last_weekend"):
            day = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
            if day + timedelta(days=1) >= today:  # said during a weekend: the one before
                day -= timedelta(days=7)
            label = f"weekend of {format_day(day)}"
        elif match.group("last_unit"):
            day, label = _unit_back(today, match.group("unit").lower(), 1)
        else:
            count = _NUMBERS.get(match.group("count").lower())
            count = int(match.group("count")) if count is None else count
            unit = match.group("ago_unit").lower()
            if unit == "day":
                day, label = today - timedelta(days=count), None
            elif unit == "week":
                day, label = today - timedelta(days=7 * count), None
            else:
                day, label = _unit_back(today, unit, count)
        found.append(
            TimeReference(match.start(), match.end(), words, day, label or format_day(day))
        )
    return found


def annotate_times(text: str, at: datetime) -> str:
    """``text`` with each relative time expression followed by its date in brackets."""
    parts, last = [], 0
    for ref in resolve_times(text, at):
        parts += [text[last : ref.end], f" ({ref.label})"]
        last = ref.end
    return "".join([*parts, text[last:]])


def turn_context(
    turns: Sequence[TranscriptMessage],
    index: int,
    *,
    before: int = CONTEXT_TURNS_BEFORE,
    after: int = CONTEXT_TURNS_AFTER,
) -> tuple[str, tuple[str, ...]]:
    """Turn ``index`` of ``turns`` with its neighbours, and the event ids of every turn shown.

    The first line is the day the turn was said (in the time zone it was sent with); each turn
    follows as ``Speaker: words`` with relative times resolved against its own moment. The
    turn itself keeps up to :data:`CONTEXT_OWN_CHARS` characters, neighbours
    :data:`CONTEXT_TURN_CHARS`.

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> at = datetime(2026, 3, 17, 18, 0, tzinfo=timezone.utc)
    >>> turns = [
    ...     TranscriptMessage(event_id="t1", role="assistant", name="Tom", occurred_at=at,
    ...                       content="Where did you go at Easter?"),
    ...     TranscriptMessage(event_id="t2", role="user", name="Maya", occurred_at=at,
    ...                       content="Lisbon! It rained."),
    ... ]
    >>> text, cited = turn_context(turns, 1)
    >>> print(text)
    Tuesday 17 March 2026
    Tom: Where did you go at Easter?
    Maya: Lisbon! It rained.
    >>> cited
    ('t1', 't2')
    """
    own = turns[index]
    shown = list(turns[max(0, index - before) : index + after + 1])
    lines = [f"{WEEKDAYS[own.occurred_at.weekday()].capitalize()} {format_day(own.occurred_at.date())}"]
    for turn in shown:
        limit = CONTEXT_OWN_CHARS if turn is own else CONTEXT_TURN_CHARS
        words = truncate(" ".join(turn.content[: 4 * limit].split()), limit)
        lines.append(f"{speaker(turn)}: {annotate_times(words, turn.occurred_at)}")
    return "\n".join(lines), tuple(dict.fromkeys(turn.event_id for turn in shown))


def _unit_back(today: date, unit: str, count: int) -> tuple[date, str]:
    """The week, month or year ``count`` units before ``today``'s, and its label."""
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7 * count)
        return monday, f"week of {format_day(monday)}"
    if unit == "month":
        months = today.year * 12 + today.month - 1 - count
        first = date(months // 12, months % 12 + 1, 1)
        return first, f"{MONTHS[first.month - 1]} {first.year}"
    first = date(today.year - count, 1, 1)
    return first, str(first.year)


def truncate(
    text: str, limit: int, *, keep_share: float = 0.6, trailing: str | None = " ,;:"
) -> str:
    """``text`` cut to at most ``limit`` characters, ending with an ellipsis: at the last
    word boundary if that keeps more than ``keep_share`` of the limit, with ``trailing``
    characters (None: whitespace) stripped before the ellipsis.

    Examples
    --------
    >>> truncate("Lisbon! It rained, but the food made up for it.", 20)
    'Lisbon! It rained…'
    """
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit * keep_share:
        cut = cut[:space]
    return cut.rstrip(trailing) + "…"
