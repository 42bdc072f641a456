"""The vocabulary claims are built from: the attributes a claim may fill, and the word lists
the readers share (relations, months, weekdays, pets, diets, statuses, occupations), each
defined once.

An :class:`Attribute` says what a key means (``gloss``), whether a new value replaces the
old (``cardinality`` ``one``) or adds to it (``many``), whether it lasts (a home) or holds for
a while (where someone is this week, a trip), what kind of value it takes, the other phrases
that name it (``aliases``) and the attributes it depends on. A key may hold a placeholder
in angle brackets: ``budget for <thing>`` is every budget for something. People named by
relation ("sister", "boss") and things owned ("phone", "laptop") are attributes too, one per
word of :data:`RELATIONS` and :data:`POSSESSIONS`.

A :class:`WordList` is written once, in the order a regex should try it, and given as a
regex alternation (:meth:`WordList.alternation`) or a set (:meth:`WordList.as_set`).

Keys are looked up in their normal form (:func:`memstream.models.beliefs.attribute_key`:
lower case, singular, no articles); this module depends on nothing else of memstream, so
any module may use it.

Examples
--------
>>> attribute("company").key, cardinality("pet"), cardinality("budget for trip")
('employer', 'many', 'one')
>>> cardinality("girlfriend"), cardinality("sister"), cardinality("no such key")
('one', 'many', 'one')
>>> WEEKDAYS.alternation()
'(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)'
>>> prompt_lines()[0]
'home: where someone lives; one; also: address, home town, city'
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Literal

__all__ = [
    "ATTRIBUTES",
    "DIETS",
    "MONTHS",
    "MONTH_ABBREVIATIONS",
    "NOT_OCCUPATIONS",
    "OCCUPATIONS",
    "OCCUPATION_ENDINGS",
    "OFTEN_SEVERAL",
    "ONE_AT_A_TIME",
    "PETS",
    "PLAIN_VALUE_NOUNS",
    "POSSESSIONS",
    "RELATIONS",
    "STATUSES",
    "TRIP_NOUNS",
    "WEEKDAYS",
    "Attribute",
    "Cardinality",
    "FrameRole",
    "LETTING_GO",
    "REPLACING",
    "TAKING_ON",
    "ValueKind",
    "WordList",
    "attribute",
    "canonical_key",
    "cardinality",
    "frame",
    "prompt_lines",
]

#: One value at a time (a new one replaces the old), or values that add up. The same
#: literal as the events' ``Cardinality``: this module imports nothing of memstream.
Cardinality = Literal["one", "many"]
ValueKind = Literal["place", "organisation", "person", "name", "amount", "date", "thing", "text"]


@dataclass(frozen=True)
class WordList:
    """Words and phrases, in the order a regex tries them (the first that fits wins)."""

    words: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> WordList:
        """The comma-separated words and phrases of ``text``, in order."""
        return cls(tuple(" ".join(word.split()) for word in text.split(",") if word.strip()))

    def __iter__(self) -> Iterator[str]:
        return iter(self.words)

    def __add__(self, other: WordList) -> WordList:
        return WordList(self.words + other.words)

    def alternation(self, *, loose_hyphens: bool = False) -> str:
        """A regex group matching any of the words: a space in a phrase matches any run of
        whitespace; with ``loose_hyphens`` a hyphen matches a space too ("gluten free")."""
        hyphen = r"[\s-]" if loose_hyphens else "-"
        forms = (re.escape(word).replace(r"\ ", r"\s+").replace(r"\-", hyphen) for word in self)
        return "(?:" + "|".join(forms) + ")"

    def as_set(self) -> frozenset[str]:
        """The words, for a membership test."""
        return frozenset(self.words)


# --- word lists ------------------------------------------------------------------------------

#: Relations by which someone names people ("my sister", "my boss Tom").
RELATIONS = WordList.of(
    """
    best friend, sister, brother, mom, mum, mother, dad, father, wife, husband, partner,
    girlfriend, boyfriend, fiancée, fiancee, fiancé, fiance, son, daughter, kid, child, friend,
    boss, manager, roommate, flatmate, cousin, aunt, uncle, grandma, grandmother, grandpa,
    grandfather, niece, nephew, colleague, coworker, co-worker, neighbour, neighbor, twin,
    parents, in-laws, sibling, stepmom, stepdad
    """
)
#: Relations a person has one of at a time: a new one replaces the old.
ONE_AT_A_TIME = frozenset(WordList.of(
    """
    wife, husband, partner, girlfriend, boyfriend, fiance, fiancé, fiancee, fiancée, boss,
    manager, roommate, flatmate
    """
))
#: Relations a person often has several of: without a name, two statements about "my
#: colleague" may be about two people.
OFTEN_SEVERAL = frozenset(WordList.of(
    "friend, colleague, coworker, co-worker, neighbour, neighbor, cousin, kid, child, sibling"
))
MONTHS = WordList.of(
    """
    january, february, march, april, may, june, july, august, september, october, november,
    december
    """
)
MONTH_ABBREVIATIONS = WordList.of("jan, feb, mar, apr, jun, jul, aug, sept, sep, oct, nov, dec")
#: In the order of :meth:`datetime.date.weekday`.
WEEKDAYS = WordList.of("monday, tuesday, wednesday, thursday, friday, saturday, sunday")
#: Animals kept as pets, breeds among them.
PETS = WordList.of(
    """
    dog, puppy, cat, kitten, hamster, rabbit, bunny, parrot, bird, fish, goldfish, turtle,
    tortoise, snake, lizard, gecko, horse, pony, guinea pig, ferret, budgie, chicken, goat, pig,
    dachshund, greyhound, beagle, labrador, poodle, terrier, spaniel, collie, husky, retriever,
    pug, corgi, bulldog, chihuahua, dalmatian, schnauzer, boxer, whippet, sheepdog, cockatiel,
    canary, tabby, siamese
    """
)
#: Ways of eating and drinking someone keeps to ("I'm vegan", "I went keto").
DIETS = WordList.of(
    """
    vegetarian, vegan, pescatarian, pescetarian, flexitarian, carnivore, keto, paleo,
    gluten-free, dairy-free, lactose-free, sugar-free, kosher, halal, teetotal, sober,
    alcohol-free
    """
)
#: Relationship statuses.
STATUSES = WordList.of(
    """
    single, married, engaged, divorced, separated, widowed, dating someone,
    in a relationship, seeing someone
    """
)
#: Things owned one at a time, each its own attribute ("I sold my car", "my phone is a Pixel").
POSSESSIONS = WordList.of("car, phone, laptop, bike, motorbike, watch, tablet, house, flat, "
                          "apartment, boat")
#: Nouns of a trip: an attribute phrase ending in one ("my summer holiday") names a trip's
#: destination.
TRIP_NOUNS = WordList.of("trip, holiday, vacation, getaway, honeymoon, break").as_set()
#: Last nouns of an attribute phrase whose value may be a plain word ("my car colour is blue").
PLAIN_VALUE_NOUNS = WordList.of(
    "colour, color, shade, size, model, brand, make, type, flavour, flavor, code, name, nickname"
).as_set()
#: Occupations that do not end like one (-er, -or, -ist, ...).
OCCUPATIONS = WordList.of(
    """
    nurse, doctor, chef, pilot, lawyer, student, dentist, surgeon, vet, veterinarian, midwife,
    paramedic, firefighter, barista, cashier, clerk, judge, attorney, coach, tutor, professor,
    intern, apprentice, analyst, architect, economist, mechanic, plumber, electrician,
    carpenter, pharmacist, physician, therapist, psychologist, psychiatrist, scientist,
    engineer, consultant, accountant, journalist, editor, author, artist, designer, developer,
    programmer, freelancer, entrepreneur, founder, ceo, cto, cfo, director, secretary,
    receptionist, assistant, librarian, waiter, waitress, bartender, chemist, biologist,
    physicist, researcher, postdoc, lecturer, principal, realtor, agent, broker, banker,
    trader, nanny, caregiver, carer, cleaner, farmer, baker, butcher, florist, tailor, soldier,
    officer, detective, sergeant, captain, admin
    """
).as_set()
#: Words that end like an occupation, or start a phrase ending like one, yet name none.
NOT_OCCUPATIONS = WordList.of(
    """
    mother, father, brother, sister, daughter, son, member, owner, lover, beginner, fan, user,
    customer, player, reader, listener, speaker, smoker, drinker, runner, swimmer, walker,
    sleeper, person, people, partner, neighbour, neighbor, fighter, thinker, dreamer,
    introvert, extrovert, early, bird, night, owl, morning, evening, worker, foodie, rider,
    driver, winner, loser
    """
).as_set()
#: How the name of an occupation ends.
OCCUPATION_ENDINGS = ("er", "or", "ist", "ian", "ant", "ent", "eer", "ect", "man", "woman",
                      "person")


# --- attributes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attribute:
    """What a claim's attribute key means.

    ``standing`` is False for what holds for a while (where someone is this week, a trip);
    ``depends_on`` names the attributes whose change may end this one's value (a work place
    on the employer); ``question_words`` are the words a question about it tends to use that
    its statements may not ("where do I live?"); ``statement`` is how a claim of it is said,
    held and taken back ("lives in", "no longer lives in").

    Its verb frames say which predicates of a parse state it, each as the verb's lemma (with
    its particle) and the preposition whose object is the value, ``_`` for the direct
    object ("live in", "take up _", "allergic to"): ``said_by`` states it while said in the
    present ("I live in Porto"), ``begun_by`` starts it in any tense but the future ("I moved
    to Porto"), ``ended_by`` ends it ("I moved out of Porto").
    """

    key: str
    gloss: str
    cardinality: Cardinality = "one"
    standing: bool = True
    value_kind: ValueKind = "text"
    aliases: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()
    question_words: str = ""
    statement: tuple[str, str] | None = None
    said_by: tuple[str, ...] = ()
    begun_by: tuple[str, ...] = ()
    ended_by: tuple[str, ...] = ()


_A = Attribute
#: Every attribute memstream names, in the order the LLM's prompt lists them.
ATTRIBUTES: tuple[Attribute, ...] = (
    _A("home", "where someone lives", value_kind="place",
       aliases=("address", "home town", "city"),
       question_words="where they live, home, address, city",
       statement=("lives in", "no longer lives in"),
       said_by=("live in", "live on", "live near", "base in"),
       begun_by=("move to", "move into", "relocate to", "settle in", "emigrate to"),
       ended_by=("move out of", "move away from")),
    _A("whereabouts", 'where someone is for a while ("in Berlin this week")', standing=False,
       value_kind="place", question_words="where they are now, travelling, staying",
       statement=("is in", "is no longer in")),
    _A("moving plan", "where someone plans to move", standing=False, value_kind="place",
       depends_on=("home",), question_words="plans to move, moving, relocation",
       statement=("plans to move to", "no longer plans to move to")),
    _A("trip destination", "where someone's planned trip goes", standing=False,
       value_kind="place", question_words="trip, travel plans, holiday, going to",
       statement=("plans a trip to", "no longer plans a trip to")),
    _A("employer", "the organisation someone works for", value_kind="organisation",
       aliases=("company", "firm"), question_words="where they work, employer, company, job",
       statement=("works at", "no longer works at"),
       said_by=("work at", "work for"),
       begun_by=("join _", "rejoin _", "start at", "hire by", "employ by", "sign with"),
       ended_by=("leave _", "quit _", "resign from", "lay off from")),
    _A("work place", "where someone works: an office, a site, a city", value_kind="place",
       aliases=("office", "workplace", "work location", "base", "branch"),
       depends_on=("employer",), question_words="where they work, office, workplace",
       statement=("works in", "no longer works in")),
    _A("job", "what someone works as", aliases=(
        "job title", "title", "role", "position", "occupation", "profession"),
       question_words="job, occupation, profession, work as",
       statement=("works as", "no longer works as"),
       said_by=("work as",), begun_by=("promote to", "retrain as", "qualify as", "start as"),
       ended_by=("step down as", "retire as")),
    _A("job field", "the field someone works in (finance, nursing)", depends_on=("job",),
       question_words="job, field, industry, work in",
       statement=("works in", "no longer works in")),
    _A("boss", "whom someone reports to", value_kind="person",
       aliases=("manager", "line manager", "supervisor"), depends_on=("employer",),
       said_by=("report to",)),
    _A("partner", "the person someone is with", value_kind="person", aliases=(
        "boyfriend", "girlfriend", "wife", "husband", "fiance", "fiancé", "fiancee", "fiancée",
        "spouse"),
       question_words="partner, relationship, dating", statement=("is with", "is no longer with"),
       said_by=("date _", "go out with"), begun_by=("marry _",),
       ended_by=("break up with", "split up with", "divorce _")),
    _A("relationship status", "whether someone is single, married, engaged, ...", depends_on=("partner",),
       question_words="relationship, partner, married, single", statement=("is", "is no longer")),
    _A("name", "what someone is called", value_kind="name"),
    _A("pet", "an animal someone keeps", "many", value_kind="thing",
       question_words="pets, animals", statement=("has a", "no longer has a")),
    _A("<animal>'s name", "the name of someone's pet", value_kind="name", depends_on=("pet",)),
    _A("car", "the car someone drives", value_kind="thing", question_words="car, vehicle, drives",
       statement=("drives", "no longer drives"), said_by=("drive _",)),
    _A("diet", "how someone eats (vegetarian, keto)", question_words="diet, what they eat, food",
       statement=("is", "is no longer")),
    _A("allergy", "what someone is allergic to", "many", value_kind="thing",
       question_words="allergy, allergic, must avoid eating, food to avoid, health",
       statement=("is allergic to", "is no longer allergic to"), said_by=("allergic to",)),
    _A("food to avoid", "what someone cannot eat", "many", value_kind="thing",
       question_words="cannot eat, must avoid eating, food to avoid, diet, health",
       statement=("avoids", "no longer avoids")),
    _A("activity", "a hobby or pastime someone has taken up", "many",
       statement=("has taken up", "has given up"),
       begun_by=("take up _", "get into _")),
    _A("learning", "what someone is learning", "many",
       statement=("is learning", "is no longer learning"), said_by=("learn _", "study _")),
    _A("sport", "a sport someone plays", "many", statement=("plays", "no longer plays"),
       said_by=("play _",)),
    _A("tool", "software or a tool someone uses", "many", value_kind="thing"),
    _A("tool for <purpose>", "what someone uses for one purpose", value_kind="thing"),
    _A("tool for editor", "the editor someone writes code in", value_kind="thing",
       aliases=("editor", "ide", "code editor")),
    _A("programming language", "the language someone mainly programs in",
       aliases=("main language", "language"), said_by=("code in", "program in", "write in")),
    _A("preferred <option>", "which option someone picks among several (preferred seat: aisle)"),
    _A("feeling about <thing>", "whether someone likes or dislikes something (likes, dislikes)"),
    _A("budget", "the money someone can spend", value_kind="amount"),
    _A("budget for <thing>", "the money someone can spend on one thing", value_kind="amount"),
    _A("rent", "what someone pays for their home", value_kind="amount", depends_on=("home",)),
    _A("number of <things>", "how many of something someone has (number of kids: 2)", value_kind="amount"),
    _A("deadline", "when something is due", value_kind="date"),
    _A("deadline for <thing>", "when one thing is due", value_kind="date"),
)
del _A

_PLACEHOLDER = re.compile(r"<[^>]+>")


def _normal(phrase: str) -> str:
    return " ".join(phrase.casefold().split())


#: Each key and alias of :data:`ATTRIBUTES` without a placeholder: its attribute.
_NAMED = {
    name: found
    for found in ATTRIBUTES
    if not _PLACEHOLDER.search(found.key)
    for name in (found.key, *found.aliases)
}
#: The attributes whose key holds a placeholder, each with the pattern of its keys.
_FAMILIES = tuple(
    (re.compile("".join(
        "(.+)" if _PLACEHOLDER.fullmatch(part) else re.escape(part)
        for part in re.split(r"(<[^>]+>)", found.key)
    )), found)
    for found in ATTRIBUTES
    if _PLACEHOLDER.search(found.key)
)


@cache
def attribute(key_or_alias: str) -> Attribute | None:
    """The attribute a key in its normal form names: by its key or an alias, as a relation
    ("sister") or a possession ("laptop"), or by the shape of a key with a placeholder
    ("budget for trip"); None for a key the vocabulary does not know.

    Examples
    --------
    >>> attribute("office").key, attribute("budget for trip").key, attribute("cousin").cardinality
    ('work place', 'budget for <thing>', 'many')
    """
    key = _normal(key_or_alias)
    if key in _NAMED:
        return _NAMED[key]
    if key in RELATIONS.as_set():
        one = key in ONE_AT_A_TIME
        return Attribute(key, f"the name of someone's {key}", "one" if one else "many",
                         value_kind="person")
    if key in POSSESSIONS.as_set():
        return Attribute(key, f"the {key} someone has", value_kind="thing")
    return next((found for pattern, found in _FAMILIES if pattern.fullmatch(key)), None)


def canonical_key(key: str) -> str:
    """The key of the attribute ``key`` (in its normal form) is an alias of, else ``key``:
    "company" is the "employer", "budget for trip" stays as it is.

    Examples
    --------
    >>> canonical_key("line manager"), canonical_key("budget for trip")
    ('boss', 'budget for trip')
    """
    found = _NAMED.get(_normal(key))
    return found.key if found is not None else key


def cardinality(key: str) -> Cardinality:
    """Whether the attribute ``key`` names holds ``one`` value at a time or ``many``; one
    for a key the vocabulary does not know."""
    found = attribute(key)
    return found.cardinality if found is not None else "one"


#: What a verb frame does to its attribute's value: states it, starts it or ends it.
FrameRole = Literal["said", "begun", "ended"]

#: Verb frames that let go of their object, whatever attribute holds it ("I sold the
#: Subaru", "she gave away the bike"): the claim whose value it is ends.
LETTING_GO = WordList.of("sell _, give away _, get rid of, trade in _, ditch _, scrap _")
#: Verb frames that take on their object, whatever it is ("bought a Skoda"): beside one that
#: lets go of a value, the value that replaces it.
TAKING_ON = WordList.of("buy _, get _, adopt _, pick up _, switch to, move to, take up _")
#: Verb frames that name a value and what replaces it, whatever the attribute: the verb, the
#: link of the old value, the link of the new ("switch from _ to _", "swap _ for _").
REPLACING: tuple[tuple[str, str, str], ...] = tuple(
    (" ".join(words[:-2]), words[-2], words[-1])
    for words in (phrase.split() for phrase in WordList.of(
        """
        switch from to, change from to, go from to, move from to, swap _ for, trade _ for,
        exchange _ for, replace _ with, trade in _ for
        """
    ))
)


@cache
def _frames() -> dict[tuple[str, str], tuple[Attribute, FrameRole]]:
    table: dict[tuple[str, str], tuple[Attribute, FrameRole]] = {}
    for found in ATTRIBUTES:
        for role, frames in (("said", found.said_by), ("begun", found.begun_by),
                             ("ended", found.ended_by)):
            for text in frames:
                *verb, link = text.split()
                table[" ".join(verb), link] = (found, role)  # type: ignore[assignment]
    return table


def frame(verb: str, link: str) -> tuple[Attribute, FrameRole] | None:
    """The attribute a predicate's verb (lemma and particle) and link (a preposition, ``_``
    for the direct object) state, and what it does to it; None when no attribute's frame
    is that.

    Examples
    --------
    >>> [(found.key, role) for found, role in (frame("move", "to"), frame("quit", "_"))]
    [('home', 'begun'), ('employer', 'ended')]
    >>> frame("move", "from") is None
    True
    """
    return _frames().get((verb, link))


def prompt_lines() -> list[str]:
    """The vocabulary as the LLM's prompt shows it: a line per attribute (key: what it is,
    one or many, its aliases), then one for relations and one for possessions."""
    lines = []
    for found in ATTRIBUTES:
        also = f"; also: {', '.join(found.aliases)}" if found.aliases else ""
        lines.append(f"{found.key}: {found.gloss}; {found.cardinality}{also}")
    named = [word for word in RELATIONS if word not in _NAMED]
    ones = [word for word in named if word in ONE_AT_A_TIME]
    lines.append(
        f"<relation> ({', '.join(named)}): the name of the person someone calls so; one for "
        f"{', '.join(ones)}, many for the rest"
    )
    owned = [word for word in POSSESSIONS if word not in _NAMED]
    lines.append(f"<possession> ({', '.join(owned)}): the one someone has; one")
    return lines
