"""Entities: capitalised names (people, places, organisations, products) found by a
heuristic, listed in each candidate's ``entities``."""

from __future__ import annotations

import re
from collections.abc import Iterable

from memstream.models.extraction.port import MAX_ENTITIES
from memstream.models.extraction.text import _QUOTES
from memstream.models.extraction.words import _COMMON_WORDS, _NEVER_ENTITIES

_NAME_WORD_RE = re.compile(r"[^\W\d_][\w'&.-]*\w|[^\W\d_]")


def _is_capitalised(word: str) -> bool:
    """Title case ("Lisbon", "McKinsey") or an acronym ("NASA", "AWS")."""
    if not word[0].isupper():
        return False
    if any(ch.islower() for ch in word):
        return True
    letters = sum(ch.isalpha() for ch in word)
    return 2 <= letters <= 6


def _name_words(sentence: str) -> list[tuple[str, int, int]]:
    """``(word, start, end)`` for each word, possessive "'s" removed."""
    words = []
    for match in _NAME_WORD_RE.finditer(sentence.translate(_QUOTES)):
        word = match.group(0)
        word = word.removesuffix("'s")
        words.append((word.rstrip("."), match.start(), match.end()))
    return words


def _mid_sentence_capitals(sentences: Iterable[str]) -> frozenset[str]:
    """Capitalised words seen somewhere other than at the start of a sentence."""
    seen: set[str] = set()
    for sentence in sentences:
        for word, _, _ in _name_words(sentence)[1:]:
            if word and _is_capitalised(word):
                seen.add(word)
    return frozenset(seen)


def _entities(sentence: str, known_names: frozenset[str]) -> list[str]:
    """Capitalised names in ``sentence``, runs of them joined ("New York", "Acme Corp").

    The first word of a sentence is capitalised anyway, so it counts only if it is not a
    common word and appears capitalised mid-sentence somewhere in the same request (or
    starts a longer run). Languages that capitalise every noun over-report; caseless scripts
    report nothing.
    """
    found: list[str] = []
    run: list[str] = []
    run_is_initial = False

    def flush() -> None:
        words = list(run)
        if run_is_initial:
            while words and words[0].lower() in _COMMON_WORDS:
                words.pop(0)
            if len(run) == 1 and words and words[0] not in known_names:
                words = []
        if words:
            found.append(" ".join(words))

    previous_end: int | None = None
    text = sentence.translate(_QUOTES)
    for index, (word, start, end) in enumerate(_name_words(sentence)):
        adjacent = previous_end is not None and not text[previous_end:start].strip()
        if word and _is_capitalised(word) and word.lower() not in _NEVER_ENTITIES:
            if run and adjacent:
                run.append(word)
            else:
                flush()
                run, run_is_initial = [word], index == 0
        elif run:
            flush()
            run = []
        previous_end = end
    if run:
        flush()
    return _unique(found)[:MAX_ENTITIES]


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
