"""The summary: an extractive summary of a transcript, 2-3 of its sentences, each labelled
with its speaker."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from memstream.models.conversation import speaker, truncate
from memstream.models.events.consolidation import TranscriptMessage
from memstream.models.extraction.entities import _entities, _unique
from memstream.models.extraction.port import MAX_ENTITIES
from memstream.models.extraction.text import _IDEOGRAPHIC, _TERMINATORS, _is_trivial, _tokens
from memstream.models.extraction.words import _COMMON_WORDS

SUMMARY_SENTENCES = 3
SUMMARY_SENTENCE_CHARS = 160
#: A summary sentence that names someone or something, or holds a number, scores this much
#: more: small talk between people is frequent but says nothing (the dialogue benchmark).
SUMMARY_DETAIL_WEIGHT = 3.0

_REQUEST_RE = re.compile(
    r"\?$|^(?:please|can|could|would|will|help|how|what|why|when|where|which|who|"
    r"i\s+need|i\s+want|i'd\s+like|i\s+would\s+like|i'm\s+looking|i\s+am\s+looking|let's|"
    r"tell|show|write|give|make|explain|find|plan|create|suggest|recommend)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Turn:
    message: TranscriptMessage
    sentences: list[str]


@dataclass(frozen=True)
class _SummarySentence:
    position: int
    turn_index: int
    turn: _Turn
    text: str
    terms: frozenset[str]


@dataclass(frozen=True)
class _Summary:
    content: str
    sources: tuple[str, ...]
    entities: list[str]


def _terms(sentence: str) -> list[str]:
    """Content words for term-frequency scoring (stopwords removed, lower case)."""
    terms = []
    for token in _tokens(sentence):
        term = token.lower()
        if term in _COMMON_WORDS or (len(term) < 2 and not re.match(rf"[{_IDEOGRAPHIC}]", term)):
            continue
        terms.append(term)
    return terms


def _summary(turns: Sequence[_Turn], known_names: frozenset[str]) -> _Summary | None:
    """An extractive summary: the user's first request, then the highest-scoring sentences.

    A sentence scores the transcript-wide frequencies of its distinct content words, divided
    by the square root of its length so long sentences do not always win; the user's
    sentences weigh a quarter more. A sentence from a message already quoted scores half, so
    the summary spans the conversation, and near-repeats of a chosen sentence are skipped.
    """
    eligible: list[_SummarySentence] = []
    for turn_index, turn in enumerate(turns):
        is_user = turn.message.role == "user"
        for sentence in turn.sentences:
            if len(_tokens(sentence)) < (3 if is_user else 4) or _is_trivial(sentence):
                continue
            if not is_user and sentence.endswith("?"):
                continue  # "Anything else?"
            terms = _terms(sentence)
            if terms:
                eligible.append(
                    _SummarySentence(len(eligible), turn_index, turn, sentence, frozenset(terms))
                )
    user_sentences = [s for s in eligible if s.turn.message.role == "user"]
    if not user_sentences or len({s.turn_index for s in eligible}) < 2:
        return None  # one message is already its own episode

    frequency: Counter[str] = Counter()
    for candidate in eligible:
        frequency.update(_terms(candidate.text))
    scores = {
        s.position: (1.25 if s.turn.message.role == "user" else 1.0)
        * (SUMMARY_DETAIL_WEIGHT if _has_detail(s.text, known_names) else 1.0)
        * sum(frequency[term] for term in sorted(s.terms))
        / math.sqrt(len(s.terms))
        for s in eligible
    }

    opening_turn = user_sentences[0].turn_index
    opening = [s for s in user_sentences if s.turn_index == opening_turn]
    detailed = [s for s in opening if _has_detail(s.text, known_names)]
    request = next((s for s in detailed if _REQUEST_RE.search(s.text)), None)
    if request is None and detailed:
        request = detailed[0]
    if request is None:
        # The conversation opens with small talk (people chatting, "How was your weekend?"):
        # the summary starts with its best sentence instead of the first words said.
        request = max(user_sentences, key=lambda s: (scores[s.position], -s.position))
    chosen = [request]
    while len(chosen) < SUMMARY_SENTENCES:
        quoted = {c.turn_index for c in chosen}
        best: _SummarySentence | None = None
        best_score = 0.0
        for candidate in eligible:
            if any(_jaccard(candidate.terms, c.terms) >= 0.6 for c in chosen):
                continue  # also skips the chosen sentences themselves
            score = scores[candidate.position] * (0.5 if candidate.turn_index in quoted else 1.0)
            if best is None or score > best_score:
                best, best_score = candidate, score
        if best is None:
            break
        chosen.append(best)
    if len(chosen) < 2:
        return None
    chosen.sort(key=lambda s: s.position)

    parts = []
    for picked in chosen:
        label = speaker(picked.turn.message)
        text = truncate(picked.text, SUMMARY_SENTENCE_CHARS)
        if text[-1] not in _TERMINATORS:
            text += "."
        parts.append(f"{label}: {text}")
    sources = tuple(_unique(s.turn.message.event_id for s in chosen))
    entities = _unique(name for s in chosen for name in _entities(s.text, known_names))
    return _Summary(" ".join(parts), sources, entities[:MAX_ENTITIES])


def _has_detail(sentence: str, known_names: frozenset[str]) -> bool:
    """Whether a sentence names someone or something, or holds a number: what a summary is
    for, unlike small talk ("Work has been busy")."""
    return bool(_entities(sentence, known_names)) or any(ch.isdigit() for ch in sentence)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0
