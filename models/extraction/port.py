"""The extraction port: what an extractor is given, what it returns, and the bounds every
extractor keeps.

An :class:`Extractor` reads the transcript carried by a :class:`ConsolidationRequested`
event and proposes :class:`MemoryCandidate` values, returned in an :class:`Extraction`. The
caller records it as an ``ExtractionRecorded`` event, so a replay never runs an extractor
twice. The limits and importances below are shared by the offline extractor
(:mod:`memstream.models.extraction.offline`) and the LLM extractor's reply rules
(:mod:`memstream.models.llm_reply`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memstream.models.beliefs import KnownClaim
from memstream.models.events.consolidation import ConsolidationRequested
from memstream.models.events.memory import MemoryCandidate, TokenUsage

#: Candidates scoring below this are dropped (the seed consolidator's threshold).
MIN_IMPORTANCE = 0.3
#: Longest candidate content; longer text is cut at a word boundary and ends with "…".
MAX_CONTENT_CHARS = 500
#: Only this much of each message is analysed, so a pasted log cannot stall consolidation.
MAX_ANALYSED_CHARS = 20_000
#: Most names listed on one candidate.
MAX_ENTITIES = 10
#: What every extractor's summary scores.
SUMMARY_IMPORTANCE = 0.55


@dataclass(frozen=True)
class Extraction:
    """What an extractor made of one consolidation request.

    ``raw_response`` is what the model returned (for the offline extractor, a JSON dump of
    the candidates), recorded so the event explains itself without re-running anything.
    """

    candidates: tuple[MemoryCandidate, ...]
    raw_response: str
    model: str | None = None
    prompt_version: str | None = None
    usage: TokenUsage | None = None


@runtime_checkable
class Extractor(Protocol):
    """Turns a consolidation request into memory candidates.

    ``name`` and ``version`` identify the extractor in ``ExtractionRecorded`` and in the ids
    derived from it; change ``version`` whenever the output for the same input changes.
    ``reads_claims`` says whether it is shown the user's current claims (``known_claims``):
    then each span must be decided before the next is extracted, so requests go one at a
    time; one that reads the transcript alone is given a batch at once.
    """

    name: str
    version: str
    reads_claims: bool

    def extract(
        self, request: ConsolidationRequested, known_claims: Sequence[KnownClaim] = ()
    ) -> Extraction:
        """Propose memory candidates for ``request``; never raise on odd text.

        ``known_claims`` are the user's claims when the span was consolidated: an extractor
        may name one in a candidate's claim (its ``operation`` and ``target``); the offline
        extractor reads the transcript alone.
        """
        ...
