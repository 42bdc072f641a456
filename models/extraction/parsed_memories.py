"""The offline reader's turns and claims beside a model's memories: what the LLM
extractor's items leave out.

A model writes what it makes of a conversation (preferences, facts, a summary), never the
turns themselves, and a small one leaves a claim null where the schema lets it: Qwen2.5
1.5B gave 7 of 84 preferences and facts a claim (``docs/changed-facts.md``), so its
memories rarely supersede anything. The offline reader keeps each turn as an episode and
reads claims from each user turn's parse, deterministically and at no cost beside a
model's call. :func:`with_parsed_memories` keeps the offline reader's episodes beside the
model's memories, gives each of the model's preferences and facts that carries no claim
the claim the parse read in a turn it cites (when the item names that claim's value), and
adds a claim the parse read that no item states as the offline reader's fact. The model's
own claims (and their operations) stand: the parse adds nothing on a subject and
attribute the model claimed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from memstream.models.beliefs import KnownClaim, attribute_key, same_value, subject_key
from memstream.models.events.consolidation import ConsolidationRequested, TranscriptMessage
from memstream.models.events.memory import MemoryCandidate
from memstream.models.extraction.offline import extract_candidates
from memstream.models.extraction.port import Extraction, Extractor

#: The memory types a claim may be given to.
_STATEMENTS = ("preference", "fact")


def with_parsed_memories(
    candidates: Sequence[MemoryCandidate], transcript: Sequence[TranscriptMessage]
) -> tuple[MemoryCandidate, ...]:
    """``candidates`` (a model's) with the offline reader's episodes of ``transcript``, and
    the claims the parse reads in its user turns: given to the item that cites the turn and
    names the value, else added as the offline reader's fact.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> at = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    >>> said = [TranscriptMessage(event_id="t0", role="user", occurred_at=at,
    ...                           content="I work at Shopify. My uncle works at Deloitte.")]
    >>> item = MemoryCandidate(memory_type="fact", content="User works for Shopify",
    ...                        importance=0.8, source_event_ids=("t0",))
    >>> [(c.memory_type, c.content, c.claim and (c.claim.attribute, c.claim.value))
    ...  for c in with_parsed_memories([item], said)]  # doctest: +NORMALIZE_WHITESPACE
    [('episode', 'I work at Shopify. My uncle works at Deloitte.', None),
     ('fact', 'User works for Shopify', ('employer', 'Shopify')),
     ('fact', "User's uncle works at Deloitte", ('employer', 'Deloitte'))]
    """
    offline = extract_candidates(transcript)
    episodes = [c for c in offline if c.memory_type == "episode"]
    parsed = [c for c in offline if c.claim is not None and c.memory_type in _STATEMENTS]
    claimed = {_key(c) for c in candidates if c.claim is not None}
    used: set[int] = set()
    merged: list[MemoryCandidate] = []
    for candidate in candidates:
        if candidate.claim is None and candidate.memory_type in _STATEMENTS:
            match = next(
                (
                    index for index, found in enumerate(parsed)
                    if index not in used and _key(found) not in claimed
                    and set(found.source_event_ids) & set(candidate.source_event_ids)
                    and _names(candidate.content, found)
                ),
                None,
            )
            if match is not None:
                used.add(match)
                claimed.add(_key(parsed[match]))
                candidate = candidate.model_copy(update={"claim": parsed[match].claim})
        merged.append(candidate)
    merged.extend(
        found for index, found in enumerate(parsed)
        if index not in used and _key(found) not in claimed
        and not any(_same_claim(found, c) for c in merged)
    )
    return (*episodes, *merged)


def _key(candidate: MemoryCandidate) -> tuple[str, str]:
    claim = candidate.claim
    assert claim is not None
    return subject_key(claim.subject), attribute_key(claim.attribute)


def _names(content: str, found: MemoryCandidate) -> bool:
    """Whether ``content`` names the value of ``found``'s claim."""
    assert found.claim is not None
    value = found.claim.value.casefold()
    return bool(value) and value in content.casefold()


def _same_claim(found: MemoryCandidate, other: MemoryCandidate) -> bool:
    claim, theirs = found.claim, other.claim
    return (
        claim is not None and theirs is not None and _key(found) == _key(other)
        and claim.polarity == theirs.polarity and same_value(claim.value, theirs.value)
    )


class WithParsedMemories:
    """An extractor whose candidates come with the offline reader's episodes and claims
    (:func:`with_parsed_memories`): how the worker runs a model's extractor. Its version
    names the step, so extractions recorded with and without it never share derived ids."""

    def __init__(self, inner: Extractor) -> None:
        self.inner = inner
        self.name = inner.name
        self.version = f"{inner.version}+parsed"
        self.reads_claims = inner.reads_claims

    def extract(
        self, request: ConsolidationRequested, known_claims: Sequence[KnownClaim] = ()
    ) -> Extraction:
        """The inner extractor's extraction, with the turns' episodes and each claim the
        parse reads given or added."""
        extraction = self.inner.extract(request, known_claims)
        transcript = [m for m in request.messages if m.role in ("user", "assistant")]
        return replace(
            extraction, candidates=with_parsed_memories(extraction.candidates, transcript)
        )

    def close(self) -> None:
        """Closes the inner extractor, when it holds anything to close."""
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
