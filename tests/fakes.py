"""Fakes of memstream's ports, for unit tests only."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

_WORD = re.compile(r"\w+")


class FakeEmbedder:
    """A deterministic bag-of-words embedder: each word hashed into one of ``dimensions``.

    Texts that share words get close vectors; no model, no I/O. A text without words maps to
    a fixed unit vector, so every output has unit length like a real embedder's.
    """

    def __init__(self, dimensions: int = 64) -> None:
        self.dimensions = dimensions
        self.model_id = f"fake-bag-of-words-{dimensions}"
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: float32, shape ``(len(texts), dimensions)``, unit length."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dimensions
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:
                out[row, 0] = 1.0
            else:
                out[row] /= norm
        return out
