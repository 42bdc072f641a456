"""Resident memories: each active user's memories held in the process that searches them
(vectors in a matrix, words in BM25), over the LanceDB projection that stays the durable
store. See :mod:`memstream.projections.resident.index`."""

from memstream.projections.resident.index import ResidentMemories
from memstream.projections.resident.user import ResidentUser
from memstream.projections.resident.words import WordIndex, tokens

__all__ = ["ResidentMemories", "ResidentUser", "WordIndex", "tokens"]
