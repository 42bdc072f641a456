"""Beliefs: what a new claim does to the claims a user holds now.

A :class:`~memstream.models.events.memory.Claim` says who a fact or preference is about, which
attribute it fills, with what value and polarity, and from when it holds. :func:`decide_claim`
compares a new claim with the user's *current* claims (those not yet ended) and says what it
does, with a reason:

- **same**: it states a current claim again (same subject, attribute, value and polarity): it
  reinforces it.
- **ends** one or more current claims: a later value of an attribute that holds one value at a
  time (``updated``), or a retraction of a value, with nothing in its place (``retracted``:
  "I'm not vegetarian any more", "I left Acme").
- **ended by** a current claim: it was stated *before* a current claim that replaced it (its
  session was consolidated late); it is recorded, already ended.
- **new**: nothing else.

Precision comes first: a false supersession loses a true fact, a missed one only leaves two
values side by side, and the newer still ranks first. So a value ends another only when
both are about the same subject and the same attribute, the attribute holds one value at a
time (as the claims say; a key :mod:`memstream.models.vocabulary` knows holds many always
does), and nothing in the wording adds a value ("also", "another", "a second"); values of
attributes that hold many (pets, allergies, likes) end only by a retraction of that very
value; a temporary state ("in Berlin this week") never ends a standing one; a number never
replaces a word or the other way round.

**Attribute identity** is a normalised key plus similarity, not a list: ``attribute_key``
folds case, articles, possessive pronouns and plurals ("my trip budgets" → "trip budget");
two keys name one attribute when equal, when they share their head noun and one's
qualifiers contain the other's ("budget" and "budget for trip"; never "sister's name" and
"brother's name"), or when a similarity the caller gives (the embedder's cosine of the two
keys) reaches :data:`ATTRIBUTE_SIMILARITY`. A statement that names only the value it replaces
("it's 2,000, not 1,500") takes the attribute of the current claim holding that value.

Examples
--------
>>> from datetime import UTC, datetime
>>> lisbon = Claim(subject="User", attribute="home", value="Lisbon",
...                valid_from=datetime(2026, 3, 1, tzinfo=UTC))
>>> porto = Claim(subject="User", attribute="home", value="Porto", cue="change",
...               valid_from=datetime(2026, 4, 2, tzinfo=UTC))
>>> decision = decide_claim(porto, [KnownClaim("m1", lisbon)])
>>> [(end.memory_id, end.change) for end in decision.ends]
[('m1', 'updated')]
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from memstream.models import vocabulary
from memstream.models.events.memory import ChangeKind, Claim, DecidedBy

#: Two attribute keys with different head nouns name one attribute at or above this cosine
#: of their embeddings ("salary" and "pay"); far above what unrelated keys reach.
ATTRIBUTE_SIMILARITY = 0.82
#: Longest reason recorded (the events' field holds 500 characters).
MAX_REASON_CHARS = 480

Similarity = Callable[[str, str], float]

_DROPPED_WORDS = frozenset(
    {"a", "an", "the", "my", "our", "your", "his", "her", "their", "its", "current", "new",
     "now", "currently", "these", "days", "again", "anymore", "any", "more", "still", "just",
     "actually"}
)
_LINKS = frozenset({"for", "of", "on", "at", "in", "to", "with"})
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)*)(?:\s*(k|m|bn|thousand|million)\b)?", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_SCALE = {"k": 1_000, "thousand": 1_000, "m": 1_000_000, "million": 1_000_000,
          "bn": 1_000_000_000}


@dataclass(frozen=True)
class KnownClaim:
    """A claim the user holds now, by the memory that asserts it."""

    memory_id: str
    claim: Claim


@dataclass(frozen=True)
class Ending:
    """A claim ended by another: ``memory_id`` ends, ``by`` ended it."""

    memory_id: str
    by: str
    change: ChangeKind
    reason: str


@dataclass(frozen=True)
class ClaimDecision:
    """What a new claim does: ``same`` as ``target``, or a ``new`` claim that ``ends`` current
    ones or is ``ended_by`` one. ``attribute`` is the new claim's attribute as resolved (it
    may come from the claim whose value it replaces); ``decided_by`` says whether the LLM's
    operation was followed. Endings name the new claim as :data:`NEW`."""

    kind: Literal["same", "new"]
    attribute: str
    target: str | None = None
    ends: tuple[Ending, ...] = ()
    ended_by: Ending | None = None
    decided_by: DecidedBy = "rules"
    note: str = ""


#: How an :class:`Ending` names the new claim, whose memory id the caller mints.
NEW = ""


# --- normal forms ------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    return _WORD.findall(folded)


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def attribute_key(phrase: str) -> str:
    """An attribute phrase in its normal form: lower case, no articles or possessive
    pronouns, singular words.

    Examples
    --------
    >>> attribute_key("My Trip Budgets"), attribute_key("the budget for the trip")
    ('trip budget', 'budget for trip')
    """
    return " ".join(_singular(w) for w in _words(phrase) if w not in _DROPPED_WORDS)


def subject_key(subject: str) -> str:
    """A subject in its normal form ("User's Sister" → "user's sister").

    Examples
    --------
    >>> subject_key("User's  Sister"), subject_key("Maya")
    ("user's sister", 'maya')
    """
    return " ".join(_words(subject))


def _head_and_qualifiers(key: str) -> tuple[str, frozenset[str]]:
    """The head noun of a key and the words that qualify it: "budget for trip" and "trip
    budget" both give ``("budget", {"trip"})``."""
    words = key.split()
    if not words:
        return "", frozenset()
    for index, word in enumerate(words):
        if word in _LINKS and index > 0:
            head_part, rest = words[:index], words[index + 1 :]
            return head_part[-1], frozenset(head_part[:-1] + [w for w in rest if w not in _LINKS])
    return words[-1], frozenset(words[:-1])


def same_attribute(a: str, b: str, similar: Similarity | None = None) -> bool:
    """Whether two attribute keys name one attribute (see the module's docstring).

    Examples
    --------
    >>> same_attribute("budget", "budget for trip"), same_attribute("trip budget", "budget")
    (True, True)
    >>> same_attribute("budget for trip", "budget for wedding"), same_attribute("home", "pet")
    (False, False)
    """
    a, b = attribute_key(a), attribute_key(b)
    if not a or not b:
        return False
    if a == b:
        return True
    head_a, qualifiers_a = _head_and_qualifiers(a)
    head_b, qualifiers_b = _head_and_qualifiers(b)
    if head_a == head_b:
        return qualifiers_a <= qualifiers_b or qualifiers_b <= qualifiers_a
    return similar is not None and similar(a, b) >= ATTRIBUTE_SIMILARITY


def numbers(text: str) -> tuple[float, ...]:
    """The numbers a value states, scaled ("1,500" → 1500, "1.5k" → 1500, "2 million").

    Examples
    --------
    >>> numbers("1,500 euros"), numbers("about 1.5k"), numbers("EUR 2000")
    ((1500.0,), (1500.0,), (2000.0,))
    """
    found = []
    for match in _NUMBER.finditer(text):
        digits, scale = match.group(1), (match.group(2) or "").lower()
        if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", digits):
            digits = digits.replace(",", "")
        elif re.fullmatch(r"\d{1,3}(?:\.\d{3})+", digits) and not scale:
            digits = digits.replace(".", "")  # 1.500 written the continental way
        else:
            digits = digits.replace(",", ".")
        try:
            value = float(digits)
        except ValueError:
            continue
        found.append(value * _SCALE.get(scale, 1))
    return tuple(found)


def value_words(value: str) -> frozenset[str]:
    """The words of a value that tell it from another (articles and fillers left out)."""
    return frozenset(_singular(w) for w in _words(value) if w not in _DROPPED_WORDS)


def same_value(a: str, b: str) -> bool:
    """Whether two values say the same: the same numbers when both hold numbers, else the
    words of one among the other's ("Porto" and "Porto, Portugal"; "a vegetarian" and
    "vegetarian"; not "window seat" and "aisle seat").

    Examples
    --------
    >>> same_value("1,500 euros", "1500"), same_value("Porto", "Porto, Portugal")
    (True, True)
    >>> same_value("window seat", "aisle seat"), same_value("1,500", "2,000")
    (False, False)
    """
    numbers_a, numbers_b = numbers(a), numbers(b)
    if numbers_a and numbers_b:
        return numbers_a == numbers_b
    words_a, words_b = value_words(a), value_words(b)
    if not words_a or not words_b:
        return not words_a and not words_b and not numbers_a and not numbers_b
    return words_a <= words_b or words_b <= words_a


def mentions(text: str, value: str) -> bool:
    """Whether ``text`` states ``value``: every number of the value, or every word of it.

    Examples
    --------
    >>> mentions("User: my budget is 1,500 euros. User: hotels?", "1500 euros")
    True
    >>> mentions("I live in Lisbon", "Porto"), mentions("anything", "")
    (False, False)
    """
    wanted = numbers(value)
    if wanted:
        return set(wanted) <= set(numbers(text))
    words = value_words(value)
    return bool(words) and words <= value_words(text)


def _comparable(a: str, b: str) -> bool:
    """Whether one value can replace the other: both numbers, or both words."""
    return bool(numbers(a)) == bool(numbers(b))


# --- how a claim is found ------------------------------------------------------------------

def attribute_gloss(attribute: str) -> str:
    """The words a question about ``attribute`` tends to use that its statements often do
    not ("where do I live?" for "User moved to Porto": the vocabulary's ``question_words``),
    indexed with a claim so that a question about the attribute finds it; the attribute's
    own words for one without them.

    Examples
    --------
    >>> attribute_gloss("home"), attribute_gloss("budget for trip")
    ('where they live, home, address, city', 'budget for trip')
    >>> attribute_gloss("preferred seat"), attribute_gloss("feeling about sushi")
    ('preference, prefers, seat', 'likes, dislikes, sushi')
    """
    key = attribute_key(attribute)
    known = vocabulary.attribute(key)
    if known is not None and known.key == key and known.question_words:
        return known.question_words
    if key.startswith("preferred "):
        return f"preference, prefers, {key[len('preferred '):]}"
    if key.startswith("feeling about "):
        return f"likes, dislikes, {key[len('feeling about '):]}"
    if key.startswith("tool"):
        return f"uses, tool, software{key[len('tool'):].replace(' for ', ', for ')}"
    return key


# --- decisions ---------------------------------------------------------------------------


def decide_claim(
    new: Claim, current: Sequence[KnownClaim], similar: Similarity | None = None
) -> ClaimDecision:
    """What ``new`` does to the user's ``current`` claims (see the module's docstring).

    ``current`` holds the claims of the user's view when ``new`` was extracted: recorded
    before it and not ended before it. The result depends on their order only through
    ties, which break on memory id, so the same inputs always give the same decision.
    """
    known = sorted(current, key=lambda k: k.memory_id)
    subject = subject_key(new.subject)
    same_subject = [k for k in known if subject_key(k.claim.subject) == subject]
    attribute = new.attribute
    if not attribute_key(attribute) and new.replaces:
        holders = [k for k in same_subject if same_value(k.claim.value, new.replaces)]
        if not holders:
            return ClaimDecision("new", attribute, note="the value it replaces is not held")
        attribute = max(holders, key=lambda k: (k.claim.valid_from, k.memory_id)).claim.attribute
    rivals = [k for k in same_subject if same_attribute(k.claim.attribute, attribute, similar)]
    if new.operation is not None:
        followed = _follow_operation(new, attribute, same_subject)
        if followed is not None:
            return followed
    for rival in sorted(rivals, key=lambda k: (-k.claim.valid_from.timestamp(), k.memory_id)):
        if rival.claim.polarity == new.polarity and same_value(rival.claim.value, new.value):
            return ClaimDecision("same", attribute, target=rival.memory_id)
    if not new.polarity:
        return _retraction(new, attribute, rivals)
    return _assertion(new, attribute, rivals)


def _retraction(new: Claim, attribute: str, rivals: Sequence[KnownClaim]) -> ClaimDecision:
    """A value taken back ends the current claims asserting it (any, when it names none)."""
    ends: list[Ending] = []
    for rival in rivals:
        old = rival.claim
        if not old.polarity or (new.value and not same_value(old.value, new.value)):
            continue
        if old.valid_from > new.valid_from:
            # Asserted after the retraction was said: it holds, the retraction ended then.
            reason = f"{attribute}: {old.value!r} said again after it was taken back"
            return ClaimDecision(
                "new", attribute, ended_by=Ending(NEW, rival.memory_id, "updated", _cut(reason))
            )
        reason = f"{attribute}: {old.value!r} taken back"
        ends.append(Ending(rival.memory_id, NEW, "retracted", _cut(reason)))
    return ClaimDecision("new", attribute, ends=tuple(ends))


def _assertion(new: Claim, attribute: str, rivals: Sequence[KnownClaim]) -> ClaimDecision:
    """A value of an attribute that holds one at a time ends the current other values; a
    value named as replaced ends its claim whatever the attribute holds."""
    additive = new.cue == "also" or _holds_many(new)
    ends: list[Ending] = []
    later: list[KnownClaim] = []
    for rival in rivals:
        old = rival.claim
        named = new.replaces is not None and same_value(old.value, new.replaces)
        if not named:
            if additive or _holds_many(old) or not old.polarity:
                continue  # one more value; or a retraction note, which stays true
            if not _comparable(old.value, new.value):
                continue
            if new.valid_until is not None and old.valid_until is None:
                continue  # "in Berlin this week" does not end where the user lives
        if old.valid_from > new.valid_from:
            later.append(rival)
            continue
        reason = f"{attribute}: {new.value!r} replaces {old.value!r}"
        ends.append(Ending(rival.memory_id, NEW, "updated", _cut(reason)))
    if later and not ends:
        first = min(later, key=lambda k: (k.claim.valid_from, k.memory_id))
        reason = f"{attribute}: {new.value!r} was replaced by {first.claim.value!r}, said later"
        return ClaimDecision(
            "new", attribute, ended_by=Ending(NEW, first.memory_id, "updated", _cut(reason))
        )
    return ClaimDecision("new", attribute, ends=tuple(ends))


def _holds_many(claim: Claim) -> bool:
    """Whether ``claim``'s attribute holds many values: as the vocabulary knows its key (a
    pet is one of many, whatever a claim says), else as the claim says."""
    key = attribute_key(claim.attribute)
    return claim.cardinality == "many" or vocabulary.cardinality(key) == "many"


def _follow_operation(
    new: Claim, attribute: str, same_subject: Sequence[KnownClaim]
) -> ClaimDecision | None:
    """The LLM's operation, when it names a claim it may act on: one of the user's current
    claims about the same subject. None (decide by the rules) when it names no such claim."""
    operation = new.operation
    if operation == "add":
        return ClaimDecision("new", attribute, decided_by="llm", note="llm: add")
    target = next((k for k in same_subject if k.memory_id == new.target), None)
    if target is None:
        return None
    attribute = attribute if attribute_key(attribute) else target.claim.attribute
    if operation == "none":
        return ClaimDecision("same", attribute, target=target.memory_id, decided_by="llm")
    change: ChangeKind = "retracted" if operation == "retract" else "updated"
    reason = (
        f"{attribute}: {target.claim.value!r} taken back (llm)"
        if change == "retracted"
        else f"{attribute}: {new.value!r} replaces {target.claim.value!r} (llm)"
    )
    ending = Ending(target.memory_id, NEW, change, _cut(reason))
    return ClaimDecision("new", attribute, ends=(ending,), decided_by="llm")


def _cut(reason: str) -> str:
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 1] + "…"


@dataclass
class ClaimBook:
    """The claims of one user as decisions go: what :func:`decide_claim` compares a new claim
    with, kept current as claims are added and ended (the decider's per-extraction view)."""

    claims: dict[str, Claim] = field(default_factory=dict)

    def current(self) -> list[KnownClaim]:
        """The claims held now, by memory id."""
        return [KnownClaim(m, c) for m, c in sorted(self.claims.items())]

    def add(self, memory_id: str, claim: Claim) -> None:
        """Hold ``claim`` (asserted by ``memory_id``)."""
        self.claims[memory_id] = claim

    def end(self, memory_id: str) -> None:
        """Stop holding the claim of ``memory_id``."""
        self.claims.pop(memory_id, None)
