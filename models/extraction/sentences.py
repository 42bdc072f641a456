"""Sentences: what one user sentence states, corrects and makes stale, after its lead-ins,
correction markers ("Actually, ..."), contrasts ("not X but Y") and "no longer" are read."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memstream.models.extraction.pronouns import _third_person, _third_person_text
from memstream.models.extraction.statements import (
    _ADV,
    _IM,
    _TRAILING_FILLER_RE,
    _Finding,
    _statements,
)
from memstream.models.extraction.text import _QUOTES, _TERMINATORS
from memstream.models.extraction.words import (
    _AUXILIARIES,
    _DEICTIC,
    _NOT_BUT_X_STOP,
    _NOT_BUT_Y_STOP,
)

#: Longer "sentences" are pasted text, not statements about the user.
MAX_STATEMENT_CHARS = 400

CORRECTION_IMPORTANCE = 0.85

_LEAD_IN_RE = re.compile(
    r"^(?:(?:oh|ah|well|also|and|but|so|btw|by\s+the\s+way|fyi|fwiw|honestly|anyway|plus|ps|"
    r"hi|hey|hello|ok|okay|yeah|yes|sure|just\s+so\s+you\s+know|for\s+the\s+record|"
    r"for\s+context|to\s+be\s+honest|tbh|in\s+fact)\b[\s,:;!.-]*)+",
    re.IGNORECASE,
)
_STRONG_MARKER_RE = re.compile(
    r"^(?:correction\s*:|to\s+correct\s+myself\b|let\s+me\s+correct\s+(?:that|myself)\b|"
    r"scratch\s+that\b|i\s+misspoke\b|i\s+was\s+wrong\b|my\s+mistake\b)[\s,:;!.-]*",
    re.IGNORECASE,
)
_WEAK_MARKER_RE = re.compile(r"^(?:actually|no|nope|oops|wait|hmm)\b[\s,:;!.-]*", re.IGNORECASE)
_INLINE_ACTUALLY_RE = re.compile(rf"^(?:i|{_IM})\s+actually\b", re.IGNORECASE)
_MEANT_RE = re.compile(
    r"^(?:what\s+)?i\s+meant(?:\s+to\s+say)?(?:\s+was)?(?:\s+that)?\s*[:,]?\s*(?P<obj>.+)$",
    re.IGNORECASE,
)
_HEDGE_RE = re.compile(
    r"^(?:i\s+think|i\s+guess|i\s+believe|i\s+suppose|i'd\s+say)\s+(?:that\s+)?(?=(?:i|i'm|my)\b)",
    re.IGNORECASE,
)
_CLAUSE_SPLIT_RE = re.compile(
    r"\s*;\s*|,?\s+(?:and|but|so|plus|also|while|whereas)\s+(?=(?:i|i'm|im|i've|i'd|my)\b)"
    r"|,\s+(?=(?:i|i'm|i've|my)\s)",
    re.IGNORECASE,
)
_FIRST_PERSON_START_RE = re.compile(r"^(?:i|i'm|im|my|not)\b", re.IGNORECASE)
_NOT_BUT_RE = re.compile(
    r"(?:^|(?<=\s))not\s+(?P<x>[^,;]{1,60}?),?\s+but\s+(?P<y>[^,;]+)(?P<rest>[,;].*)?$",
    re.IGNORECASE,
)
_TRAILING_CONTRAST_RE = re.compile(r",\s*not\s+(?P<x>[^,;]{1,60})$", re.IGNORECASE)
_INSTEAD_RE = re.compile(r"\binstead\b|\brather\s+than\b", re.IGNORECASE)
_NO_LONGER_VERB_RE = re.compile(
    rf"^i\s+{_ADV}no\s+longer\s+(?P<verb>[^\W\d_]+)\b(?P<rest>.*)$", re.IGNORECASE
)
_NO_LONGER_BE_RE = re.compile(rf"^{_IM}\s+{_ADV}no\s+longer\s+(?P<rest>.+)$", re.IGNORECASE)
_ANYMORE_VERB_RE = re.compile(
    rf"^i\s+{_ADV}(?:do\s+not|don't|dont)\s+(?P<verb>[^\W\d_]+)\b(?P<rest>.*?)\s+any\s?more$",
    re.IGNORECASE,
)
_ANYMORE_BE_RE = re.compile(rf"^{_IM}\s+not\s+(?P<rest>.+?)\s+any\s?more$", re.IGNORECASE)

_NO_MARKER, _WEAK, _STRONG = 0, 1, 2


@dataclass(frozen=True)
class _Analysis:
    findings: tuple[_Finding, ...] = ()
    #: Contents this sentence contradicts: earlier candidates with them are dropped.
    stale: tuple[str, ...] = ()


def _strip_markers(text: str) -> tuple[str, int]:
    """``text`` without greetings, discourse markers and correction markers; the marker seen."""
    marker = _NO_MARKER
    while True:
        before = text
        text = _LEAD_IN_RE.sub("", text, count=1)
        strong = _STRONG_MARKER_RE.match(text)
        if strong:
            text, marker = text[strong.end() :], _STRONG
        weak = _WEAK_MARKER_RE.match(text)
        if weak and not re.match(r"no\s+longer\b", text, re.IGNORECASE):
            text, marker = text[weak.end() :], max(marker, _WEAK)
        if text == before:
            return text.strip(), marker


def _split_contrast(text: str) -> tuple[str, str | None, str | None]:
    """``(positive, contrast, stale)`` for "not X but Y" and "Y, not X"; else ``(text, None, None)``.

    >>> _split_contrast("I live not in Porto but in Lisbon")
    ('I live in Lisbon', 'in Porto', 'I live in Porto')
    >>> _split_contrast("I live in Lisbon, not Porto")
    ('I live in Lisbon', 'Porto', 'I live in Porto')
    """
    if _FIRST_PERSON_START_RE.match(text):
        match = _NOT_BUT_RE.search(text)
        if match is not None:
            before = text[: match.start()]
            previous = before.split()[-1].lower() if before.split() else ""
            x, y, rest = (
                match.group("x").strip(),
                match.group("y").strip(),
                match.group("rest") or "",
            )
            if (
                x
                and y
                and previous not in _AUXILIARIES
                and x.split()[0].lower() not in _NOT_BUT_X_STOP
                and y.split()[0].lower() not in _NOT_BUT_Y_STOP
                and len(x.split()) <= 5
                and len(y.split()) <= 10
            ):
                return f"{before}{y}{rest}".strip(), x, f"{before}{x}{rest}".strip()
    match = _TRAILING_CONTRAST_RE.search(text)
    if match is not None:
        x = match.group("x").strip()
        positive = _TRAILING_FILLER_RE.sub("", text[: match.start()]).strip()
        words = positive.split()
        if x and len(x.split()) <= 5 and x.split()[0].lower() not in _NOT_BUT_X_STOP | _DEICTIC:
            width = len(x.split())
            stale = " ".join(words[:-width] + [x]) if len(words) > width else None
            return positive, x, stale
    return text, None, None


def _no_longer(clause: str) -> tuple[str, str] | None:
    """``(correction, stale statement)`` for "I no longer ..." and "I don't ... anymore"."""
    for regex in (_NO_LONGER_VERB_RE, _ANYMORE_VERB_RE):
        match = regex.match(clause)
        if match is not None:
            verb, rest = match.group("verb"), match.group("rest")
            content = f"User no longer {_third_person(verb)}{_third_person_text(rest)}"
            return content, f"I {verb}{rest}"
    for regex in (_NO_LONGER_BE_RE, _ANYMORE_BE_RE):
        match = regex.match(clause)
        if match is not None:
            rest = match.group("rest").strip()
            return f"User is no longer {_third_person_text(rest)}", f"I'm {rest}"
    return None


def _analyse_sentence(sentence: str) -> _Analysis:
    """What one user sentence states, corrects, and makes stale."""
    text = sentence.translate(_QUOTES).strip()
    if text.endswith("?") or len(text) > MAX_STATEMENT_CHARS:
        return _Analysis()  # questions assert nothing; overlong "sentences" are pasted text
    text = text.rstrip(" " + _TERMINATORS)
    text, marker = _strip_markers(text)
    meant = _MEANT_RE.match(text)
    if meant is not None:
        text, marker = meant.group("obj").strip(), _STRONG
    text = _HEDGE_RE.sub("", text)
    if not text:
        return _Analysis()
    bare_not_but = text.lower().startswith("not ")
    positive, contrast, stale_statement = _split_contrast(text)

    findings: list[_Finding] = []
    corrections: list[_Finding] = []
    stale: list[str] = []
    for clause in _CLAUSE_SPLIT_RE.split(positive):
        clause = _HEDGE_RE.sub("", _strip_markers(clause)[0])
        no_longer = _no_longer(clause)
        if no_longer is not None:
            content, was = no_longer
            corrections.append(
                _Finding("correction", f"Correction: {content}", CORRECTION_IMPORTANCE, clause)
            )
            stale.extend(finding.content for finding in _statements(was))
        else:
            findings.extend(_statements(clause))

    inline_actually = _INLINE_ACTUALLY_RE.match(text) is not None
    corrective = (
        marker == _STRONG
        or (bool(findings) and (contrast is not None or marker == _WEAK or inline_actually))
        or (not findings and contrast is not None and (marker == _WEAK or bare_not_but))
        or (not findings and marker == _WEAK and _INSTEAD_RE.search(text) is not None)
    )
    if corrective and not corrections:
        if findings:
            statement = "; ".join(finding.content for finding in findings)
            if contrast is not None:
                statement = f"{statement}, not {_third_person_text(contrast)}"
        elif meant is not None:
            statement = f"User meant {_third_person_text(text)}"
        else:
            statement = f'User said "{text}"'
        corrections.append(
            _Finding("correction", f"Correction: {statement}", CORRECTION_IMPORTANCE, sentence)
        )
        if stale_statement is not None:
            stale.extend(finding.content for finding in _statements(stale_statement))
    return _Analysis(tuple(corrections + findings), tuple(stale))
