"""Words of resident memories: the tokens a text is found by, and BM25 over one user's texts.

The tokens follow LanceDB's full-text index as memstream creates it (``FTS()``: split on
anything not a letter or digit, tokens over 40 characters dropped, lower case, English stop
accents folded, Snowball English stems, English stop words removed), so a word finds the same memories
in memory as in the table. Scores are Okapi BM25 (``k1`` 1.2, ``b`` 0.75, Lucene's idf)
over **one user's** memories: a user's answers never depend on what other users wrote.

Examples
--------
>>> tokens("I moved to Porto, São Paulo's rival!")
['move', 'porto', 'sao', 'paulo', 'rival']
>>> index = WordIndex()
>>> index.add(0, "I live in Lisbon")  # its distinct terms
2
>>> index.add(1, "My budget is 2,000 euros")  # budget, 2, 000, euro
4
>>> scores = index.scores("where do I live?", 2)
>>> bool(scores[0] > 0 == scores[1])
True
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from functools import lru_cache

import numpy as np
import Stemmer

#: BM25's term-frequency saturation and length normalisation (Lucene's and tantivy's).
K1 = 1.2
B = 0.75
#: Longer tokens are dropped, as the full-text index drops them.
MAX_TOKEN_CHARS = 40
#: Stems dropped: NLTK's English stop words that are their own stem, as LanceDB 0.40's
#: index drops them (it removes stop words after stemming: "because" stays as "becaus").
#: Found by asking its index for each word.
STOP_WORDS = frozenset({
    "a", "about", "after", "again", "against", "ain", "all", "am", "an", "and", "are", "aren",
    "as", "at", "be", "been", "being", "below", "between", "both", "but", "by", "can",
    "couldn", "d", "did", "didn", "do", "doesn", "doing", "don", "down", "each", "few", "for",
    "from", "further", "had", "hadn", "has", "hasn", "have", "haven", "having", "he", "her",
    "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is",
    "isn", "it", "its", "itself", "just", "ll", "m", "ma", "me", "mightn", "more", "most",
    "mustn", "my", "myself", "needn", "no", "nor", "not", "now", "o", "of", "off", "on", "or",
    "other", "our", "ours", "out", "over", "own", "re", "s", "same", "shan", "she", "should",
    "shouldn", "so", "some", "such", "t", "than", "that", "the", "their", "theirs", "them",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under",
    "until", "up", "ve", "was", "wasn", "we", "were", "weren", "what", "when", "where",
    "which", "while", "who", "whom", "will", "with", "won", "wouldn", "y", "you", "your",
    "yours", "yourself",
})
_WORD = re.compile(r"[^\W_]+")
_STEMMER = Stemmer.Stemmer("english")


@lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


def tokens(text: str) -> list[str]:
    """The index terms of ``text``, in order (repeats kept)."""
    folded = unicodedata.normalize("NFKD", text.lower())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    stems = (_stem(word) for word in _WORD.findall(folded) if len(word) <= MAX_TOKEN_CHARS)
    return [stem for stem in stems if stem not in STOP_WORDS]


class WordIndex:
    """BM25 over the texts of one user, by slot (0, 1, 2, ... in the order added).

    A slot's text is set once (a memory's text never changes); :meth:`scores` scores every
    slot against a query at once, :meth:`matches` only the slots a query term is in (what a
    search over tens of thousands of texts reads).
    """

    def __init__(self) -> None:
        #: term -> (slots, counts) of the texts that hold it: arrays, not lists, so a full
        #: garbage collection does not visit every entry (and an entry is 4 bytes, not an
        #: 8-byte pointer).
        self._postings: dict[str, tuple[array[int], array[int]]] = {}
        self._lengths = np.zeros(16, dtype=np.float64)
        self._count = 0
        #: Sum of the lengths: an exact integer, so the average is the mean of the lengths.
        self._total_length = 0
        #: Postings of the terms queried, as arrays (dropped when a text adds to them).
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        #: Bytes those arrays hold.
        self.cached_bytes = 0

    @property
    def size(self) -> int:
        return self._count

    def add(self, slot: int, text: str) -> int:
        """Index ``text`` as ``slot``, the next free one; return its distinct terms."""
        if slot != self._count:
            raise ValueError(f"slot {slot} is not the next one ({self._count})")
        counts: dict[str, int] = {}
        for term in tokens(text):
            counts[term] = counts.get(term, 0) + 1
        for term, count in counts.items():
            slots, tfs = self._postings.setdefault(term, (array("i"), array("i")))
            slots.append(slot)
            tfs.append(count)
            dropped = self._arrays.pop(term, None)
            if dropped is not None:
                self.cached_bytes -= dropped[0].nbytes + dropped[1].nbytes
        if slot == len(self._lengths):
            self._lengths = np.concatenate([self._lengths, np.zeros_like(self._lengths)])
        length = sum(counts.values())
        self._lengths[slot] = length
        self._total_length += length
        self._count += 1
        return len(counts)

    def scores(self, query: str, size: int) -> np.ndarray:
        """Each slot's BM25 score for ``query`` (0 where no term matches), ``size`` long."""
        total = np.zeros(size, dtype=np.float64)
        slots, scores = self.matches(query)
        total[slots] = scores
        return total

    def matches(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """The slots ``query`` has a term in (ascending) and their BM25 scores (all > 0)."""
        count = self._count
        found = [p for p in map(self._posting, dict.fromkeys(tokens(query))) if p is not None]
        if count == 0 or not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        average = max(self._total_length / count, 1e-9)
        if len(found) == 1:
            slots, tfs = found[0]
            return slots, self._term_scores(slots, tfs, count, average)
        # Each slot's terms summed in query order, as a dense sum over every slot would.
        matched = np.unique(np.concatenate([slots for slots, _ in found]))
        total = np.zeros(matched.size, dtype=np.float64)
        for slots, tfs in found:
            total[np.searchsorted(matched, slots)] += self._term_scores(slots, tfs, count, average)
        return matched, total

    def _term_scores(
        self, slots: np.ndarray, tfs: np.ndarray, count: int, average: float
    ) -> np.ndarray:
        idf = np.log(1.0 + (count - len(slots) + 0.5) / (len(slots) + 0.5))
        norm = K1 * (1.0 - B + B * self._lengths[slots] / average)
        return np.asarray(idf * tfs * (K1 + 1.0) / (tfs + norm), dtype=np.float64)

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        cached = self._arrays.get(term)
        if cached is None:
            listed = self._postings.get(term)
            if listed is None:
                return None
            cached = (
                np.frombuffer(listed[0], dtype=np.int32).astype(np.int64),
                np.frombuffer(listed[1], dtype=np.int32).astype(np.float64),
            )
            self._arrays[term] = cached
            self.cached_bytes += cached[0].nbytes + cached[1].nbytes
        return cached
