"""Profiles: what holds about a user now (or at a moment), compact, for an agent to load at
the start of a session: the current claims by subject, then by kind and attribute.

A profile is read from the claims the memory projection holds
(:meth:`~memstream.projections.memories.index.MemoryIndex.claim_history`), so it is a pure
function of the projection and a replay rebuilds it identically. A claim holds now when its
memory is active; at ``as_of`` when it was recorded by then and had not ended by then (the
rule of a search's ``as_of``). Subjects come ``User`` first, then the others by name; kinds
fact, preference, correction, then any other by name; entries by attribute, then when the
claim began, then memory id.
"""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.models.beliefs import subject_key
from memstream.projections.claims import claim_turns, holds
from memstream.projections.memories import MemoryIndex, MemoryRecord
from memstream.streams.service.results import (
    ProfileDict,
    ProfileEntryDict,
    ProfileKindDict,
    ProfileSubjectDict,
)

__all__ = ["holds", "profile", "profile_lines"]

#: The kinds in the order a profile lists them; any other follows by name.
KIND_ORDER = ("fact", "preference", "correction")


def profile(
    projection: MemoryIndex,
    user_id: str,
    subject: str | None = None,
    as_of: datetime | None = None,
) -> ProfileDict:
    """The profile of ``user_id`` (see the module's docstring): every subject's, or only
    ``subject``'s (matched as claims match it: case and "'s" aside)."""
    records = [r for r in projection.claim_history(user_id) if holds(r, as_of)]
    if subject is not None:
        records = [r for r in records if subject_key(r.claim_subject or "") == subject_key(subject)]
    stating = projection.get_many(user_id, [m for r in records for m in r.stated_in])
    # One subject however it was spelt ("Maya", "maya"), named as its first claim spells it
    # (claim_history is in a fixed order: when the claim began, then memory id).
    names: dict[str, str] = {}
    by_subject: dict[str, dict[str, list[MemoryRecord]]] = {}
    for record in records:
        key = subject_key(record.claim_subject or "")
        names.setdefault(key, record.claim_subject or "")
        by_subject.setdefault(key, {}).setdefault(record.memory_type, []).append(record)
    subjects: list[ProfileSubjectDict] = []
    for key in sorted(by_subject, key=lambda k: (k != "user", k, names[k])):
        kinds: list[ProfileKindDict] = []
        for kind in sorted(by_subject[key], key=_kind_order):
            claims = sorted(by_subject[key][kind], key=_entry_order)
            kinds.append({"kind": kind, "entries": [_entry(r, stating) for r in claims]})
        subjects.append({"subject": names[key], "kinds": kinds})
    return {
        "subject": subject,
        "as_of": as_of.astimezone(UTC).isoformat() if as_of is not None else None,
        "subjects": subjects,
    }


def profile_lines(found: ProfileDict) -> list[tuple[str, str]]:
    """One line per claim of ``found``, in the profile's order, with its memory id: what a
    prompt context shows of it.

    Examples
    --------
    >>> found = {"subject": None, "as_of": None, "subjects": [{"subject": "User", "kinds": [
    ...     {"kind": "fact", "entries": [{"attribute": "home", "value": "Porto",
    ...     "polarity": True, "statement": "User lives in Porto",
    ...     "valid_from": "2026-04-02T09:00:00+00:00", "memory_id": "m-2", "turns": []}]}]}]}
    >>> profile_lines(found)
    [('m-2', "User's home: Porto (since 2026-04-02)")]
    """
    lines = []
    for who in found["subjects"]:
        for kind in who["kinds"]:
            for entry in kind["entries"]:
                value = entry["value"] if entry["polarity"] else f"not {entry['value']}"
                what = who["subject"]
                if entry["attribute"]:
                    what = f"{what}'s {entry['attribute']}"
                line = f"{what}: {value} (since {entry['valid_from'][:10]})"
                lines.append((entry["memory_id"], " ".join(line.split())))
    return lines


def _kind_order(kind: str) -> tuple[int, str]:
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), kind)


def _entry_order(record: MemoryRecord) -> tuple[str, datetime, str]:
    return (record.claim_attribute or "", record.valid_from or record.created_at, record.memory_id)


def _entry(record: MemoryRecord, stating: dict[str, MemoryRecord]) -> ProfileEntryDict:
    """One claim of the profile, with the turns that said it."""
    claim = record.claim
    assert claim is not None
    return {
        "attribute": claim.attribute,
        "value": claim.value,
        "polarity": claim.polarity,
        "statement": record.content,
        "valid_from": claim.valid_from.isoformat(),
        "memory_id": record.memory_id,
        "turns": claim_turns(record, stating),
    }
