"""Extraction: turning a consolidation request into memory candidates.

An :class:`Extractor` reads the transcript carried by a ``ConsolidationRequested`` event and
proposes ``MemoryCandidate`` values. The caller records what it returned as an
``ExtractionRecorded`` event, so a replay never runs an extractor twice. Extractors that call
an LLM do I/O and live outside ``models``; :class:`OfflineExtractor`, here, needs no model and
is deterministic.

Modules
-------
* ``port``: the :class:`Extractor` protocol, the :class:`Extraction` it returns, and the
  limits and importances every extractor keeps (:data:`MIN_IMPORTANCE`,
  :data:`MAX_CONTENT_CHARS`, ...).
* ``offline``: :class:`OfflineExtractor` and its conventions; it assembles a transcript's
  candidates (episodes, statements, corrections, summary), merging duplicates.
* ``words``: the word lists (stopwords, fillers, demonyms, words about the moment).
* ``text``: tokens, sentences, what counts as the same text and as saying nothing.
* ``pronouns``: first person rewritten to the third ("my" → "their", "watch" → "watches").
* ``statements``: the preference or fact one clause states, by patterns tried in order.
* ``sentences``: what a sentence states, corrects and makes stale (correction markers,
  "not X but Y", "no longer").
* ``entities``: capitalised names found by a heuristic.
* ``summary``: the extractive summary of a transcript.
* ``claims``: the claims a sentence asserts (subject, attribute, value), read with the
  patterns of ``claim_patterns`` (built by ``claim_builders`` from the words of
  ``claim_words``); ``state_ends``: the end a temporary state gives itself.

Examples
--------
>>> from datetime import datetime, timezone
>>> from memstream.models.events.consolidation import ConsolidationRequested, TranscriptMessage
>>> at = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
>>> said = TranscriptMessage(
...     event_id="m-1", role="user", occurred_at=at,
...     content="Hi! My name is Maria and I prefer dark roast coffee.")
>>> request = ConsolidationRequested(
...     event_id="c-1", user_id="maria", session_id="s-1", occurred_at=at,
...     reason="session_closed", messages=(said,))
>>> for candidate in OfflineExtractor().extract(request).candidates:
...     print(candidate.memory_type, candidate.importance, candidate.content)
episode 0.45 Hi! My name is Maria and I prefer dark roast coffee.
fact 0.9 User's name is Maria
preference 0.8 User prefers dark roast coffee
"""

from __future__ import annotations

from memstream.models.extraction.offline import (
    EPISODE_IMPORTANCE,
    OfflineExtractor,
    extract_candidates,
)
from memstream.models.extraction.port import (
    MAX_ANALYSED_CHARS,
    MAX_CONTENT_CHARS,
    MAX_ENTITIES,
    MIN_IMPORTANCE,
    SUMMARY_IMPORTANCE,
    Extraction,
    Extractor,
)

__all__ = [
    "EPISODE_IMPORTANCE",
    "MAX_ANALYSED_CHARS",
    "MAX_CONTENT_CHARS",
    "MAX_ENTITIES",
    "MIN_IMPORTANCE",
    "SUMMARY_IMPORTANCE",
    "Extraction",
    "Extractor",
    "OfflineExtractor",
    "extract_candidates",
]
