"""What the memory projection raises when a table or a write is not what it should be."""

from __future__ import annotations


class ProjectionWriteError(RuntimeError):
    """A write did not touch the rows it should have (LanceDB reported other counts)."""


class EmbeddingModelMismatch(RuntimeError):
    """The table holds vectors of another model: rebuild it from the topic."""


class ProjectionOutdated(RuntimeError):
    """The table was written by an older memstream: rebuild it from the topic."""


class EncryptedContentError(ValueError):
    """An event's content is ciphertext; it must be decrypted before it is projected."""

