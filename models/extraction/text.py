"""Text helpers of the offline extractor: tokens, sentences, what counts as the same text,
and what counts as saying nothing."""

from __future__ import annotations

import re
import unicodedata

from memstream.models.extraction.port import MAX_ANALYSED_CHARS
from memstream.models.extraction.words import _FILLER_WORDS, _TRIVIAL_TURNS

#: Only this many sentences of each message are analysed (see ``MAX_ANALYSED_CHARS``).
MAX_SENTENCES_PER_MESSAGE = 200

_IDEOGRAPHIC = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
#: Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer).
_UNSPACED = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
_TOKEN_RE = re.compile(rf"[{_IDEOGRAPHIC}]|[^\W_{_IDEOGRAPHIC}]+(?:'[^\W_{_IDEOGRAPHIC}]+)*")
_UNSPACED_RE = re.compile(rf"[{_UNSPACED}]")
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})
_FENCE_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\s*\n\s*")
_ABBREVIATION_END_RE = re.compile(
    r"\b(?:mr|mrs|ms|dr|prof|st|jr|sr|vs|e\.g|i\.e|inc|ltd)\.$", re.IGNORECASE
)
_BULLET_RE = re.compile(r"^(?:[-*•>#]+|\d+[.)])\s+")
_TERMINATORS = ".!?。！？…"


def _tokens(text: str) -> list[str]:
    """Word tokens; each Chinese or Japanese character is a token of its own."""
    return _TOKEN_RE.findall(text.translate(_QUOTES))


def _sentences(text: str) -> list[str]:
    """Split on . ! ? and newlines (not after common abbreviations); code blocks are skipped."""
    text = _FENCE_RE.sub("\n", text[:MAX_ANALYSED_CHARS])
    sentences: list[str] = []
    for piece in _SENTENCE_SPLIT_RE.split(text):
        piece = _BULLET_RE.sub("", " ".join(piece.split()))
        if not any(ch.isalnum() for ch in piece):
            continue
        if sentences and _ABBREVIATION_END_RE.search(sentences[-1]):
            sentences[-1] = f"{sentences[-1]} {piece}"
            continue
        sentences.append(piece)
        if len(sentences) >= MAX_SENTENCES_PER_MESSAGE:
            break
    return sentences


def _dedup_key(text: str) -> str:
    """Case, punctuation and spacing folded away: what counts as "the same text"."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(" " if unicodedata.category(ch)[0] in "PZ" else ch for ch in folded)
    return " ".join(kept.split())


def _substance(text: str) -> int:
    """Roughly, how many content words ``text`` has (filler words do not count)."""
    count = 0
    for token in _tokens(text):
        if token.lower() in _FILLER_WORDS:
            continue
        if _UNSPACED_RE.search(token):
            count += max(1, len(token) // 2)
        else:
            count += 1
    return count


def _is_trivial(text: str) -> bool:
    """Greetings, thanks, acknowledgements and emoji-only turns."""
    return _dedup_key(text).replace(" ", "") in _TRIVIAL_TURNS or _substance(text) == 0
