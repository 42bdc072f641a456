"""Timelines: one attribute of a user over time ("my budget over time"), each value it held
with its interval in event time and the turns that stated it.

A timeline is read from the claims the memory projection holds, whatever their status
(:meth:`~memstream.projections.memories.index.MemoryIndex.claim_history`): the current one and
those it replaced. What the caller asks about ("budget", "where do I live", "my budget over
time") is matched to an attribute of the user's claims by its normalised key, then by the
words of the attribute and its gloss, then by a search of the user's facts and preferences
(a hit that holds a word of the request; nothing when none does);
the subject is the one the caller names, else the speaker's own (``User``) when the
attribute has one, else the first by name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memstream.models.beliefs import attribute_gloss, attribute_key, same_attribute, subject_key
from memstream.projections.claims import claim_turns
from memstream.projections.memories import MemoryIndex, MemoryRecord, SearchFilters
from memstream.streams.service.results import TimelineDict, TimelineEntryDict

__all__ = ["claim_turns", "timeline"]

#: Words of a request that name no attribute ("what is my budget over time?").
_ASKING = re.compile(
    r"\b(?:what|what's|whats|where|when|who|which|how|is|are|was|were|do|does|did|i|my|me|"
    r"our|we|the|a|an|of|over|time|history|timeline|changes?|changed|been|has|have|had|"
    r"now|current|currently|so|far|to|date|user|user's|s)\b",
    re.IGNORECASE,
)
#: Facts and preferences searched when no attribute matches the words.
_CLAIM_TYPES = ("fact", "preference", "correction")


def timeline(
    projection: MemoryIndex, user_id: str, about: str, subject: str | None = None
) -> TimelineDict:
    """The timeline of the attribute of ``user_id``'s claims that ``about`` names (see the
    module's docstring); an empty one (``attribute`` None) when none matches."""
    records = projection.claim_history(user_id)
    if subject is not None:
        records = [r for r in records if subject_key(r.claim_subject or "") == subject_key(subject)]
    chosen = _matching(records, about) or _searched(projection, user_id, about, records)
    if chosen is None:
        return {"about": about, "subject": subject, "attribute": None, "entries": []}
    who, attribute = chosen
    entries = [
        r for r in records
        if subject_key(r.claim_subject or "") == subject_key(who)
        and same_attribute(r.claim_attribute or "", attribute)
    ]
    stating = projection.get_many(user_id, [m for r in entries for m in r.stated_in])
    return {
        "about": about,
        "subject": who,
        "attribute": attribute,
        "entries": [_entry(record, stating) for record in entries],
    }


def _matching(records: Sequence[MemoryRecord], about: str) -> tuple[str, str] | None:
    """The (subject, attribute) ``about`` names by its words, the best match first: the
    same key, then the most words shared with the attribute and its gloss."""
    wanted = attribute_key(_ASKING.sub(" ", about))
    if not wanted:
        return None
    words = set(wanted.split())
    best: tuple[int, int, str, str] | None = None
    for record in records:
        attribute = record.claim_attribute or ""
        if not attribute:
            continue
        if same_attribute(attribute, wanted):
            score = 100
        else:
            known = set(attribute_key(f"{attribute} {attribute_gloss(attribute)}").split())
            score = len(words & known)
        if score == 0:
            continue
        own = 1 if subject_key(record.claim_subject or "") in ("user",) else 0
        candidate = (score, own, record.claim_subject or "", attribute)
        if best is None or candidate[:2] > best[:2]:
            best = candidate
    return None if best is None else (best[2], best[3])


def _searched(
    projection: MemoryIndex, user_id: str, about: str, records: Sequence[MemoryRecord]
) -> tuple[str, str] | None:
    """The (subject, attribute) of the best search hit for ``about`` that asserts a claim
    and holds one of its words (``words`` above 0): a hit found by meaning alone is only
    the nearest of what the user said, which for a topic they never spoke of ("salary")
    is about something else."""
    if not records or not about.strip():
        return None
    known = {r.memory_id for r in records}
    hits = projection.search(
        user_id, about, limit=20,
        filters=SearchFilters(memory_types=_CLAIM_TYPES, include_inactive=True),
    )
    for hit in hits:
        if hit.memory_id in known and hit.claim_attribute and hit.claim_subject and hit.words > 0:
            return hit.claim_subject, hit.claim_attribute
    return None


def _entry(record: MemoryRecord, stating: dict[str, MemoryRecord]) -> TimelineEntryDict:
    """One value of the timeline: its interval and the turns that said it."""
    claim = record.claim
    assert claim is not None
    until = record.valid_until or (record.ended_at if record.status != "active" else None)
    turns = claim_turns(record, stating)
    return {
        "memory_id": record.memory_id,
        "value": claim.value,
        "polarity": claim.polarity,
        "statement": record.content,
        "valid_from": claim.valid_from.isoformat(),
        "valid_until": until.isoformat() if until is not None else None,
        "status": record.status,
        "superseded_by": record.superseded_by,
        "turns": turns,
        "stated_in": list(record.stated_in),
    }
