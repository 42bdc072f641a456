"""Claim builders: what each claim pattern's match asserts (kind, attribute, value, type,
cardinality, polarity), and the clean-up of the values it takes."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memstream.models.beliefs import attribute_key
from memstream.models.events.memory import Cardinality, MemoryType
from memstream.models.extraction.claim_words import (
    _CLOCK,
    _JOB_END,
    _LEADING_ARTICLE,
    _OPTION_END,
    _OVER,
    _VALUE_END,
    _p,
)
from memstream.models.extraction.statements import _TIME_BOUND_RE, _clean_object
from memstream.models.extraction.words import _words
from memstream.models.vocabulary import (
    NOT_OCCUPATIONS,
    OCCUPATION_ENDINGS,
    OCCUPATIONS,
    PLAIN_VALUE_NOUNS,
    TRIP_NOUNS,
    canonical_key,
    cardinality,
)
from memstream.models.vocabulary import attribute as vocabulary_attribute

#: Longest value kept (words); a longer stretch is a clause, not a value.
MAX_VALUE_WORDS = 6


def _cut(text: str, *, words: int = MAX_VALUE_WORDS) -> str:
    """``text`` up to where a value ends (punctuation, a conjunction), at most ``words``."""
    end = _VALUE_END.search(text)
    value = text[: end.start()] if end else text
    value = " ".join(value.split()[:words]).strip(" .,'\"")
    return value


def _name(text: str) -> str:
    """The capitalised name at the start of ``text`` ("Acme Robotics in Porto" → "Acme
    Robotics"); "" when it does not start with one."""
    name: list[str] = []
    for word in text.split()[:MAX_VALUE_WORDS]:
        bare = word.strip(",.;:!?\"'()")
        if not bare or not (
            bare[0].isupper() or bare[0].isdigit() or (name and bare.lower() in _NAME_LINKS)
        ):
            break
        name.append(bare)
        if word[-1:] in ",.;:!?)":
            break  # punctuation after a word ends the name
    while name and name[-1].lower() in _NAME_LINKS:
        name.pop()
    return " ".join(name)


#: Lower-case words inside a name ("University of Porto", "Rio de Janeiro").
_NAME_LINKS = frozenset({"of", "de", "da", "do", "del", "la", "le", "von", "van", "&"})


def _place(text: str) -> str:
    """A place: a name ("Porto", "New York"), else a short phrase ("the countryside")."""
    text = _LEADING_ARTICLE.sub("", text.strip()) if not text[:1].isupper() else text.strip()
    name = _name(text)
    if name:
        return name
    value = _cut(text, words=4)
    return value if value and value.split()[0].lower() not in _STOP_VALUES else ""


_STOP_VALUES = _words(
    """
    it that this there here them him her you me us a an the some something someone
    anything anywhere somewhere everywhere nowhere home work school town place city
    country house
    """
)


def _thing(text: str) -> str:
    """A noun phrase value ("a Volvo", "dark roast coffee"), without a leading article."""
    value = _cut(_LEADING_ARTICLE.sub("", text.strip()))
    if not value or value.split()[0].lower() in _STOP_VALUES:
        return ""
    return value


@dataclass(frozen=True)
class _Read:
    """What a pattern read: before the subject and the turn's time are known."""

    kind: str
    attribute: str
    value: str
    memory_type: MemoryType = "fact"
    polarity: bool = True
    cardinality: Cardinality = "one"
    importance: float = 0.8
    replaces: str | None = None
    temporary: bool = False


_Builder = Callable[[re.Match[str]], "_Read | None"]


def _person_subject(speaker: str, relation: str, name: str | None) -> str:
    """ "User's sister", "User's colleague Anna"."""
    relation = " ".join(relation.lower().split())
    return f"{speaker}'s {relation}" + (f" {name}" if name else "")


def _home(match: re.Match[str]) -> _Read | None:
    value = _place(match.group("val"))
    if not value:
        return None
    return _Read("home", "home", value, importance=0.85)


def _home_gone(match: re.Match[str]) -> _Read | None:
    value = _place(match.group("val"))
    return _Read("home", "home", value, polarity=False, importance=0.8) if value else None


def _whereabouts(match: re.Match[str]) -> _Read | None:
    value = _place(match.group("val"))
    if not value or not value[0].isupper():
        return None
    return _Read("whereabouts", "whereabouts", value, importance=0.6, temporary=True)


def _work_at(match: re.Match[str]) -> _Read | None:
    text = match.group("val")
    name = _name(text)
    if name:
        return _Read("employer", "employer", name, importance=0.85)
    return None


def _work_in(match: re.Match[str]) -> _Read | None:
    text = match.group("val")
    name = _name(text)
    if name:
        return _Read("work place", "work place", name, importance=0.8)
    field = _thing(text)
    return _Read("job", "job field", field, importance=0.75) if field else None


def _employer_gone(match: re.Match[str]) -> _Read | None:
    name = _name(match.group("val"))
    return _Read("employer", "employer", name, polarity=False) if name else None


def _job(match: re.Match[str]) -> _Read | None:
    value = _cut(_JOB_END.split(match.group("val"))[0], words=4)
    words = value.lower().split()
    if not words:
        return None
    head = words[-1]
    if head in NOT_OCCUPATIONS or words[0] in NOT_OCCUPATIONS or " ".join(words[-2:]) in (
        "night owl", "early bird", "morning person", "night person"
    ):
        return None
    if head not in OCCUPATIONS and not head.endswith(OCCUPATION_ENDINGS):
        return None
    if any(w in ("fan", "bit", "lot", "little", "big", "huge", "kind", "sort") for w in words[:1]):
        return None
    return _Read("job", "job", value, importance=0.8)


def _job_as(match: re.Match[str]) -> _Read | None:
    value = _cut(_JOB_END.split(_LEADING_ARTICLE.sub("", match.group("val")))[0], words=4)
    return _Read("job", "job", value, importance=0.8) if value else None


def _job_gone(match: re.Match[str]) -> _Read | None:
    value = _cut(_LEADING_ARTICLE.sub("", match.group("val")), words=4)
    return _Read("job", "job", value, polarity=False) if value else None


def _number(match: re.Match[str]) -> _Read | None:
    attribute = attribute_key(match.group("attr"))
    value = match.group("val").strip(" ,.")
    if not attribute or not value or not re.search(r"\d", value):
        return None
    if _CLOCK.match(match.string, match.end("val")) or _TIME_BOUND_RE.search(match.string):
        return None  # "my flight is at 6pm tomorrow": a time of the moment, not a number
    if attribute.split()[-1] in _NOT_ATTRIBUTES:
        return None
    return _Read("number", attribute, value, importance=0.75)


def _date(match: re.Match[str]) -> _Read | None:
    attribute = attribute_key(match.group("attr"))
    value = match.group("val").strip(" ,.")
    if not attribute or attribute.split()[-1] in _NOT_ATTRIBUTES:
        return None
    return _Read("date", attribute, value, importance=0.75)


_NOT_ATTRIBUTES = _words(
    """
    it this that there question answer point guess bet problem issue idea thing day time
    way plan goal hope bad turn fault pleasure
    """
)


def _count_of(match: re.Match[str]) -> _Read | None:
    noun = attribute_key(match.group("noun"))
    if not noun or noun.split()[-1] in _NOT_ATTRIBUTES:
        return None
    count = match.group("n")
    return _Read("number", f"number of {noun}", count, importance=0.7)


def _person(match: re.Match[str]) -> _Read | None:
    relation = " ".join(match.group("prel").lower().split())
    name = _name(match.group("val"))
    if not name:
        return None
    return _Read("person", relation, name, cardinality=cardinality(relation), importance=0.8)


def _status(match: re.Match[str]) -> _Read | None:
    value = " ".join(match.group("val").lower().split())
    return _Read("relationship", "relationship status", value, importance=0.8)


def _dating(match: re.Match[str]) -> _Read | None:
    name = _name(match.group("val"))
    return _Read("person", "partner", name, importance=0.8) if name else None


def _pet(match: re.Match[str]) -> _Read | None:
    animal = match.group("pet").lower()
    named = match.groupdict().get("pname")
    value = f"{animal} {named}" if named else animal
    return _Read("pet", "pet", value, cardinality="many", importance=0.75)


def _pet_name(match: re.Match[str]) -> _Read | None:
    name = _name(match.group("val"))
    if not name:
        return None
    animal = match.group("pet").lower()
    return _Read("pet", f"{animal}'s name", name, importance=0.75)


def _pet_gone(match: re.Match[str]) -> _Read | None:
    animal = match.group("pet").lower()
    return _Read("pet", "pet", animal, polarity=False, cardinality="many", importance=0.75)


def _car(match: re.Match[str]) -> _Read | None:
    value = _thing(match.group("val"))
    return _Read("possession", "car", value, importance=0.75) if value else None


def _owned(match: re.Match[str]) -> _Read | None:
    item = match.group("item").lower()
    value = _thing(match.group("val"))
    return _Read("possession", item, value, importance=0.7) if value else None


def _sold(match: re.Match[str]) -> _Read | None:
    item = attribute_key(match.group("item"))
    return _Read("possession", item, "", polarity=False, importance=0.7) if item else None


def _feeling(verb: str) -> str:
    verb = verb.lower()
    if verb in ("hate", "hates", "dislike", "dislikes", "detest", "detests", "loathe",
                "loathes", "can't stand", "cannot stand"):
        return "dislikes"
    return "likes"


def _likes(match: re.Match[str]) -> _Read | None:
    thing = _thing(match.group("val"))
    if not thing or _clean_object(match.group("val")) is None:
        return None  # "I love your answer": about the reply, not a lasting taste
    verb = " ".join(match.group("verb").lower().split())
    return _Read(
        "likes", f"feeling about {attribute_key(thing)}", _feeling(verb),
        memory_type="preference", importance=0.7,
    )


def _likes_gone(match: re.Match[str]) -> _Read | None:
    thing = _thing(match.group("val"))
    if not thing:
        return None
    return _Read(
        "likes", f"feeling about {attribute_key(thing)}", "likes", memory_type="preference",
        polarity=False, importance=0.7,
    )


#: Options a preference chooses between, by what they are options of.
_CHOICES = {
    "seat": ("window", "aisle", "middle seat", "exit row", "front row", "back row",
             "front of the plane", "back of the plane"),
    "drink": ("tea", "coffee", "espresso", "latte", "cappuccino", "matcha", "decaf"),
    "time of day": ("morning", "mornings", "evening", "evenings", "night", "nights", "afternoon",
                    "afternoons"),
    "way of travel": ("train", "trains", "plane", "planes", "flying", "driving", "car", "bus",
                      "ferry"),
    "contact": ("email", "emails", "phone call", "phone calls", "call", "calls", "text",
                "texts", "video call", "video calls", "slack", "chat"),
    "meeting format": ("remote", "in person", "in-person", "video", "online", "office"),
    "theme": ("dark mode", "light mode", "dark theme", "light theme"),
}


def preference_topic(thing: str) -> str:
    """What a preference chooses between: a known kind of option ("the aisle" → "seat"),
    else its head noun ("dark roast coffee" → "coffee").

    Examples
    --------
    >>> preference_topic("the aisle"), preference_topic("window seats"), preference_topic("green tea")
    ('seat', 'seat', 'drink')
    """
    key = attribute_key(thing)
    words = key.split()
    for topic, options in _CHOICES.items():
        for option in options:
            if option in key and all(w in words or w + "s" in words for w in option.split()):
                return topic
    return words[-1] if words else ""


def _prefers(match: re.Match[str]) -> _Read | None:
    chosen, *rest = _OVER.split(match.group("val"), maxsplit=1)
    thing = _thing(_OPTION_END.split(chosen)[0])
    if not thing:
        return None
    topic = preference_topic(thing)
    rival = match.groupdict().get("over") or (rest[0] if rest else None)
    replaces = _thing(_OPTION_END.split(rival)[0]) if rival else None
    return _Read(
        "preference", f"preferred {topic}", thing, memory_type="preference",
        importance=0.75, replaces=replaces or None,
    )


def _diet(match: re.Match[str]) -> _Read | None:
    value = " ".join(match.group("val").lower().split())
    value = re.sub(r"^on\s+a\s+", "", value)
    return _Read("diet", "diet", value, importance=0.85)


def _diet_gone(match: re.Match[str]) -> _Read | None:
    value = " ".join((match.groupdict().get("val") or "").lower().split())
    return _Read("diet", "diet", value, polarity=False, importance=0.85)


def _allergy(match: re.Match[str]) -> _Read | None:
    value = _thing(match.group("val"))
    if not value:
        return None
    return _Read("health", "allergy", value, cardinality="many", importance=0.9)


def _allergy_gone(match: re.Match[str]) -> _Read | None:
    value = _thing(match.group("val"))
    if not value:
        return None
    return _Read("health", "allergy", value, polarity=False, cardinality="many", importance=0.9)


def _avoids(match: re.Match[str]) -> _Read | None:
    value = _thing(match.group("val"))
    if not value:
        return None
    return _Read("health", "food to avoid", value, cardinality="many", importance=0.85)


def _tool(match: re.Match[str]) -> _Read | None:
    value = _cut(match.group("val"), words=4)
    if not value or not (value[0].isupper() or value[0].isdigit()):
        return None
    purpose = match.groupdict().get("for")
    attribute = _tool_key(_cut(purpose, words=3)) if purpose else "tool"
    return _Read("tool", attribute, value, cardinality="one" if purpose else "many",
                 importance=0.7)


def _trying(match: re.Match[str]) -> _Read | None:
    value = _cut(match.group("val"), words=4)
    if not value:
        return None
    return _Read("tool", "tool", value, importance=0.6, temporary=True)


def _tool_named(match: re.Match[str]) -> _Read | None:
    value = _cut(match.group("val"), words=4)
    if not value:
        return None
    return _Read("tool", _tool_key(match.group("what")), value, importance=0.7)


def _tool_key(purpose: str) -> str:
    """The attribute of what someone uses for ``purpose``: the vocabulary's when it names
    one ("editor" is the ``tool for editor``, "language" the ``programming language``),
    else ``tool for <purpose>``."""
    key = attribute_key(purpose)
    known = vocabulary_attribute(key)
    return known.key if known is not None and "<" not in known.key else f"tool for {key}"


def _switched(match: re.Match[str]) -> _Read | None:
    value = _cut(match.group("val"), words=4)
    old = match.groupdict().get("old")
    if not value:
        return None
    replaced = _cut(old, words=4) if old else None
    return _Read("tool", "", value, importance=0.7, replaces=replaced or None)


def _trip(match: re.Match[str]) -> _Read | None:
    value = _place(match.group("val"))
    if not value or not value[0].isupper():
        return None
    return _Read("plan", "trip destination", value, importance=0.75)


def _moving_plan(match: re.Match[str]) -> _Read | None:
    value = _place(match.group("val"))
    if not value or not value[0].isupper():
        return None
    return _Read("plan", "moving plan", value, importance=0.75)


_WHEN_WORDS = _p(r"\s+(?:this|next|last)\s+(?:year|summer|winter|spring|autumn|fall|month|week)$")


def _attribute(phrase: str) -> str:
    """The key of an attribute phrase: the vocabulary's key for an alias ("company" is the
    employer), else its normal form ("my big holiday this year" and "my summer trip" are a
    trip's destination)."""
    key = attribute_key(_WHEN_WORDS.sub("", phrase.strip()))
    canonical = canonical_key(key)
    if canonical == key and key.split() and key.split()[-1] in TRIP_NOUNS:
        return "trip destination"
    return canonical


#: Values a "my X is Y" statement may give an attribute: a name, a number or date, or a
#: noun with its article; an adjective ("my flat is tiny") or a clause is no value of one.
_NAMED_VALUE = re.compile(r"^(?:[A-Z0-9€$£]|(?:an?|the)\s+\w)")


def _owned_attribute(match: re.Match[str]) -> _Read | None:
    """ "my main language is TypeScript", "my sister's office is in Ghent"."""
    phrase = match.group("attr")
    attribute = _attribute(phrase)
    words = attribute.split()
    if not words or words[-1] in _NOT_ATTRIBUTES or words[0] in _OWNER_STOPS:
        return None
    raw = re.sub(r"^(?:now\s+|still\s+|currently\s+)?(?:in|at|on|with)\s+", "", match.group("val").strip())
    favourite = words[0] in ("favourite", "favorite", "fav", "fave")
    if re.match(r"^\d", raw):
        value = _cut(raw, words=4)
    elif raw[:1].isupper():
        value = _name(raw) or _cut(raw, words=4)
    elif favourite or words[-1] in PLAIN_VALUE_NOUNS or _NAMED_VALUE.match(raw):
        value = _thing(raw)
    else:
        return None
    if not value:
        return None
    kind = "preference" if favourite else "attribute"
    return _Read(kind, attribute, value, memory_type="preference" if favourite else "fact",
                 cardinality=cardinality(attribute), importance=0.75)


#: First words of a "my X is" phrase that name no lasting attribute of the user.
_OWNER_STOPS = _words(
    """
    question point guess bet problem issue idea worry concern plan answer reply fault
    pleasure turn bad mistake gut head back knee day week morning evening night weekend
    phone battery internet wifi train bus flight coffee order
    """
)


def _employed(match: re.Match[str]) -> _Read | None:
    name = _name(match.group("val"))
    return _Read("employer", "employer", name, importance=0.85) if name else None


def _office(match: re.Match[str]) -> _Read | None:
    name = _name(match.group("val"))
    return _Read("work place", "work place", name, importance=0.8) if name else None


def _office_gone(match: re.Match[str]) -> _Read | None:
    name = _name(match.group("val"))
    return _Read("work place", "work place", name, polarity=False) if name else None


def _habit(match: re.Match[str]) -> _Read | None:
    thing = _thing(_OPTION_END.split(match.group("val"))[0])
    if not thing:
        return None
    return _Read("preference", f"preferred {preference_topic(thing)}", thing,
                 memory_type="preference", importance=0.7)


def _habit_gone(match: re.Match[str]) -> _Read | None:
    thing = _thing(_OPTION_END.split(match.group("val"))[0])
    if not thing:
        return None
    return _Read("preference", f"preferred {preference_topic(thing)}", thing,
                 memory_type="preference", polarity=False, importance=0.7)


def _attribute_gone(match: re.Match[str]) -> _Read | None:
    attribute = _attribute(match.group("attr"))
    if not attribute or attribute.split()[-1] in _NOT_ATTRIBUTES:
        return None
    return _Read("attribute", attribute, "", polarity=False, importance=0.75)


def _pet_died(match: re.Match[str]) -> _Read | None:
    animal = match.group("pet").lower()
    return _Read("pet", "pet", animal, polarity=False, cardinality="many", importance=0.75)


def _due(match: re.Match[str]) -> _Read | None:
    """ "my report is due on 5 April", "the deadline for my report is 28 March"."""
    what = attribute_key(match.group("attr"))
    if not what or what.split()[-1] in _NOT_ATTRIBUTES:
        return None
    attribute = what if what.split()[0] in ("deadline", "due") else f"deadline for {what}"
    return _Read("date", attribute, match.group("val").strip(" ,."), importance=0.75)


def _scheduled(match: re.Match[str]) -> _Read | None:
    """ "the app launch is planned for November", "the wedding is set for 3 June"."""
    attribute = attribute_key(match.group("attr"))
    if not attribute or attribute.split()[-1] in _NOT_ATTRIBUTES:
        return None
    return _Read("date", attribute, match.group("val").strip(" ,."), importance=0.75)


def _spend(match: re.Match[str]) -> _Read | None:
    """ "I can spend €1.2k on the kitchen": the budget for it."""
    what = attribute_key(match.group("attr"))
    value = match.group("val").strip(" ,.")
    if not what or not re.search(r"\d", value):
        return None
    return _Read("number", f"budget for {what}", value, importance=0.75)


def _trip_off(match: re.Match[str]) -> _Read | None:
    return _Read("plan", "trip destination", "", polarity=False, importance=0.75)


def _partner_since(match: re.Match[str]) -> _Read | None:
    name = _name(match.group("val"))
    return _Read("person", "partner", name, importance=0.8) if name else None
