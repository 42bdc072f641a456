"""How the entity graph resolves names into entities: each name's normal form
(:func:`name_key`), the descriptions given one name ("User's sister" is "Ana":
:func:`resolve_descriptions`), which claim values name an entity (:func:`is_entity`), and
the kinds a claim's subject and attribute say (:func:`subject_kind`, :func:`value_kind`).
See :mod:`memstream.projections.entity_graph` for the graph built on them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from memstream.models import vocabulary
from memstream.models.beliefs import subject_key

if TYPE_CHECKING:
    from memstream.projections.memories import MemoryRecord

__all__ = [
    "is_entity",
    "name_key",
    "resolve_descriptions",
    "subject_kind",
    "value_kind",
]

#: Relations by which a user names people, and the animals they keep.
_RELATIONS = vocabulary.RELATIONS.as_set()
_ANIMALS = vocabulary.PETS.as_set()
#: The kinds of value (:class:`~memstream.models.vocabulary.Attribute`) that are entities.
_ENTITY_KINDS = frozenset({"person", "place", "organisation", "thing"})
#: "<owner>'s <relation> <Name>": a person named by relation and by name at once.
_NAMED_RELATION = re.compile(
    r"^(?P<description>.+?'s(?:\s+[a-z][\w-]*)+)\s+(?P<name>[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)$"
)
_POSSESSIVE_END = re.compile(r"'s$")


# A graph asks the key of the same few names again and again (every mention of each).
@lru_cache(maxsize=65_536)
def name_key(name: str) -> str:
    """A name in its normal form: case, punctuation and a trailing possessive aside, "my"
    as the user's.

    Examples
    --------
    >>> name_key("Ana's"), name_key("User's  Sister"), name_key("my sister"), name_key("A.N.A!")
    ('ana', "user's sister", "user's sister", 'a n a')
    """
    key = _POSSESSIVE_END.sub("", subject_key(name))
    if key.startswith("my "):
        key = "user's " + key[3:]
    return key


def resolve_descriptions(claims: Sequence[MemoryRecord]) -> tuple[dict[str, str], dict[str, str]]:
    """Descriptions to the key of the one name each was given, if exactly one (see the
    module's docstring), and how each such description was first spelt; every other key is
    its own node, added as the graph reads it."""
    given: dict[str, dict[str, None]] = {}  # description key -> name keys, in order
    spelt: dict[str, str] = {}
    for record in claims:
        claim = record.claim
        assert claim is not None
        named = _NAMED_RELATION.match(" ".join(claim.subject.split()))
        pairs: list[tuple[str, str]] = []
        if named:
            pairs += [(named["description"], named["name"]), (claim.subject, named["name"])]
        description = _described(claim.subject, claim.attribute)
        if description and claim.polarity and is_entity(claim.value):
            pairs.append((description, claim.value))
        for spelling, name in pairs:
            key = name_key(spelling)
            given.setdefault(key, {})[name_key(name)] = None
            spelt.setdefault(key, " ".join(spelling.split()))
    one_name: dict[str, str] = {}
    for description, names in given.items():
        (name, *others) = names
        if not others and name and description and name != "user" and description != name:
            one_name[description] = name
    # A name may itself be a description named in turn ("User's partner" is "User's
    # sister", who is "Ana"): each to the end of its chain; a cycle joins nothing.
    node_of = {description: _end_of_chain(description, one_name) for description in one_name}
    node_of = {key: node for key, node in node_of.items() if key != node}
    return node_of, {k: spelt[k] for k in node_of}


def _end_of_chain(start: str, named: dict[str, str]) -> str:
    """The name at the end of ``start``'s chain of names; ``start`` itself in a cycle."""
    key, seen = start, {start}
    while key in named:
        key = named[key]
        if key in seen:
            return start
        seen.add(key)
    return key


def _described(subject: str, attribute: str) -> str | None:
    """The description a claim gives a name to, if it does: "User"'s "sister" (or
    "sister's name") is "User's sister"; "User's sister"'s "name" is "User's sister"."""
    key = subject_key(attribute)
    words = key.split()
    if words and words[-1] == "name":
        relation = _POSSESSIVE_END.sub("", " ".join(words[:-1])).strip()
    elif key in _RELATIONS:
        relation = key
    else:
        return None
    if not relation or name_key(subject).endswith(f"'s {relation}"):
        return subject
    return f"{subject}'s {relation}"


def subject_kind(subject: str) -> str | None:
    key = name_key(subject)
    if key == "user":
        return "user"
    if "'s " in key:
        relation = key.rsplit("'s ", 1)[1]
        if relation in _ANIMALS:
            return "pet"
        return "person" if relation.split()[0] in _RELATIONS or relation in _RELATIONS else None
    return None


def value_kind(attribute: str) -> str | None:
    key = subject_key(attribute)
    if key == "pet" or (
        key.endswith(" name") and _POSSESSIVE_END.sub("", key.removesuffix(" name")) in _ANIMALS
    ):
        return "pet"
    if "project" in key.split():
        return "project"
    known = vocabulary.attribute(key)
    return known.value_kind if known is not None and known.value_kind in _ENTITY_KINDS else None


def is_entity(value: str) -> bool:
    """Whether a claim's value names an entity: a name ("Acme", "New York"), capitalised
    as the extractor takes names; not a phrase like "a dog" or "window"."""
    text = value.strip()
    return bool(text) and len(text) <= 200 and text[0].isupper()
