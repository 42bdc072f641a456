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
>>> index.add(0, "I live in Lisbon")
>>> index.add(1, "My budget is 2,000 euros")
>>> scores = index.scores("where do I live?", 2)
>>> bool(scores[0] > 0 == scores[1])
True
"""

from __future__ import annotations

import re
import unicodedata
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
    slot against a query at once.
    """

    def __init__(self) -> None:
        #: term -> (slots, counts) of the texts that hold it.
        self._postings: dict[str, tuple[list[int], list[int]]] = {}
        self._lengths: list[int] = []
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def size(self) -> int:
        return len(self._lengths)

    def add(self, slot: int, text: str) -> None:
        """Index ``text`` as ``slot``, the next free one."""
        if slot != len(self._lengths):
            raise ValueError(f"slot {slot} is not the next one ({len(self._lengths)})")
        counts: dict[str, int] = {}
        for term in tokens(text):
            counts[term] = counts.get(term, 0) + 1
        for term, count in counts.items():
            slots, tfs = self._postings.setdefault(term, ([], []))
            slots.append(slot)
            tfs.append(count)
            self._arrays.pop(term, None)
        self._lengths.append(sum(counts.values()))

    def scores(self, query: str, size: int) -> np.ndarray:
        """Each slot's BM25 score for ``query`` (0 where no term matches), ``size`` long."""
        total = np.zeros(size, dtype=np.float64)
        count = len(self._lengths)
        if count == 0:
            return total
        lengths = np.asarray(self._lengths, dtype=np.float64)
        average = max(float(lengths.mean()), 1e-9)
        for term in dict.fromkeys(tokens(query)):
            found = self._posting(term)
            if found is None:
                continue
            slots, tfs = found
            idf = np.log(1.0 + (count - len(slots) + 0.5) / (len(slots) + 0.5))
            norm = K1 * (1.0 - B + B * lengths[slots] / average)
            total[slots] += idf * tfs * (K1 + 1.0) / (tfs + norm)
        return total

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        cached = self._arrays.get(term)
        if cached is None:
            listed = self._postings.get(term)
            if listed is None:
                return None
            cached = (np.asarray(listed[0], dtype=np.int64), np.asarray(listed[1], np.float64))
            self._arrays[term] = cached
        return cached
