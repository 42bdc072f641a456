"""Ends of temporary states: the end a statement gives itself ("this week", "until Friday",
"for three days") as a time after the turn that said it."""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta

from memstream.models.extraction.claim_words import (
    _COUNT,
    _IM,
    _MONTHS,
    _MY,
    _NUMBER_WORDS,
    _RELATIONS,
    _WEEKDAYS,
    _p,
)
from memstream.models.extraction.parse import clauses


def _end_of_day(at: datetime) -> datetime:
    return at.replace(hour=23, minute=59, second=59, microsecond=0)


_DURATION_RE = re.compile(
    rf"\b(?:(?:for\s+|over\s+)?(?:this|the)\s+(?P<span>week|weekend|month)|today|tonight|"
    rf"(?:for\s+)?(?:the\s+)?(?:next|coming)\s+(?P<n>{_COUNT}|few|couple\s+of)\s+"
    r"(?P<unit>days?|weeks?|months?)|"
    rf"for\s+(?:just\s+|only\s+)?(?P<n2>{_COUNT}|a|an|a\s+few|a\s+couple\s+of)\s+"
    r"(?P<unit2>days?|weeks?|months?)|"
    rf"(?P<n3>{_COUNT}|a|one)[\s-](?P<unit3>day|week|month)\s+(?:stint|secondment|trial|"
    r"placement|assignment|cover|break|challenge|experiment|stay|trip|contract|loan)|"
    rf"(?:until|till|til|through|thru)\s+(?P<until>{_WEEKDAYS}|the\s+weekend|next\s+week|"
    rf"the\s+end\s+of\s+(?:the\s+)?(?:week|month)|{_MONTHS}\s+\d{{1,2}}|"
    rf"\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTHS}|the\s+\d{{1,2}}(?:st|nd|rd|th)?))\b",
    re.IGNORECASE,
)


def stated_end(text: str, at: datetime) -> datetime | None:
    """The end a state says it has ("this week", "for the next three days", "until
    Friday"), from ``at`` (the turn's time); None when it states none.

    Examples
    --------
    >>> from datetime import UTC
    >>> at = datetime(2026, 3, 4, 10, 0, tzinfo=UTC)  # a Wednesday
    >>> stated_end("I'm in Berlin this week", at).isoformat()
    '2026-03-08T23:59:59+00:00'
    >>> stated_end("I live in Berlin", at) is None
    True
    """
    match = _DURATION_RE.search(text)
    if match is None:
        return None
    span = match.group("span")
    unit = match.group("unit") or match.group("unit2") or match.group("unit3")
    if span == "week":
        return _end_of_day(at + timedelta(days=6 - at.weekday()))
    if span == "weekend":
        return _end_of_day(at + timedelta(days=max(6 - at.weekday(), 0)))
    if span == "month":
        last = calendar.monthrange(at.year, at.month)[1]
        return _end_of_day(at.replace(day=last))
    if unit:
        raw = (match.group("n") or match.group("n2") or match.group("n3") or "").lower()
        count = 3 if "few" in raw else 2 if "couple" in raw else _count(raw)
        days = {"day": 1, "week": 7, "month": 30}[unit.lower().rstrip("s")]
        return _end_of_day(at + timedelta(days=count * days))
    until = (match.group("until") or "").lower()
    if until:
        if "end of" in until:
            span_end = "month" if "month" in until else "week"
            return stated_end(f"this {span_end}", at)
        day_of_month = re.search(r"\d{1,2}", until)
        if day_of_month is not None:
            return _next_day_of_month(at, int(day_of_month.group()), until)
        for index, day in enumerate(calendar.day_name):
            if day.lower() in until:
                ahead = (index - at.weekday()) % 7 or 7
                return _end_of_day(at + timedelta(days=ahead))
        return _end_of_day(at + timedelta(days=7))
    return _end_of_day(at)  # today, tonight


def _next_day_of_month(at: datetime, day: int, text: str) -> datetime | None:
    """The first date on or after ``at`` with day ``day`` (of the month ``text`` names, if
    it names one), at the end of that day; None when there is no such date within a year."""
    months = [i for i, name in enumerate(calendar.month_name) if name and name.lower()[:3] in text]
    for ahead in range(13):
        month_index = (at.month - 1 + ahead) % 12 + 1
        year = at.year + (at.month - 1 + ahead) // 12
        if months and month_index not in months:
            continue
        if day <= calendar.monthrange(year, month_index)[1]:
            moment = _end_of_day(at.replace(year=year, month=month_index, day=day))
            if moment >= at:
                return moment
    return None


def _count(text: str) -> int:
    text = text.strip().lower()
    if text.isdigit():
        return int(text)
    return _NUMBER_WORDS.get(text, 1)  # "a", "an", "one"


#: A statement of how someone is for now: a subject and a verb in the present ("I'm at the
#: Lyon branch", "my brother is doing keto", "I report to Felipe").
#: A duration that reaches back ("I've been vegetarian for two weeks"): no end ahead.
_PAST_DURATION = _p(r"\b(?:have|has|'ve|had)\s+been\b|\b(?:last|past)\s+(?:few\s+)?(?:days?|weeks?|months?)\b|\bago\b")
_PRESENT_STATE = re.compile(
    rf"\b(?:{_IM}|we're|(?:i|we)\s+(?!\w+ed\b)\w+|(?:he|she)(?:'s|\s+is)|"
    rf"{_MY}\s+{_RELATIONS}(?:\s+[A-Z]\w+)?\s+(?:is|'s|has|\w+s)\b)",
    re.IGNORECASE,
)


def state_end(sentence: str, at: datetime) -> datetime | None:
    """The end a sentence gives a present state of someone ("I'm at the Lyon branch until
    Friday", "my brother is doing keto for one week only"); None when it states none, when
    its duration reaches back ("I've been vegetarian for two weeks"), or when every clause
    of it is in the past ("I went to the beach today", read by :mod:`.parse`)."""
    text = " ".join(sentence.replace("\u2019", "'").split())
    if text.endswith("?") or _PAST_DURATION.search(text) or not _PRESENT_STATE.search(text):
        return None
    if all(clause.tense == "past" for clause in clauses(text)):
        return None  # "I went to the beach today": what happened, not how someone is
    return stated_end(text, at)
