"""Claims read from a sentence's structure: a predicate of the parse whose verb and link are
one of the vocabulary's verb frames (:func:`memstream.models.vocabulary.frame`).

"I moved back to Lyon", "we've been based in Lyon since May", "Lyon is where I live now"
say one thing in three shapes; a pattern per shape grows a list without end, where the
parse gives each the same predicate: a verb, its subject and what it links to. A frame
reads the predicate whatever words stand between ("I have, after a long search, finally
moved to Lyon"), whatever the subject ("my sister works for Acme"), and any objects it
coordinates ("I took up climbing and yoga").

When a frame holds: ``said`` in the present, not negated, as the verb itself or under
"start", "begin", "keep", "continue" ("I started working for Siemens"); ``begun`` in the
past or the present; ``ended`` likewise, and ``said`` negated with "no longer" or "any
more", or under "used to" or "stopped", ends its value. A wish, a question, a
hypothesis ("if I moved to Oslo", "I'd love to live in Rome") or the future states nothing,
nor does a bare "not" ("I don't work at Acme" is a correction the decisions cannot place)
unless "it's X" beside it names what took its place ("I don't live in Aarhus any more,
it's Valencia now"). A value named to be denied ("allergic to sesame, not peanuts") does
not hold.

What no attribute's frame reads may still replace a value: a value let go of ("sold the
Subaru") ends whatever claim holds it, and one taken on beside it ("... and bought a
Skoda"), or "switched from Vim to Emacs", replaces it; the decisions find the attribute
by the claim whose value it names (:data:`memstream.models.vocabulary.LETTING_GO`,
``TAKING_ON``, ``REPLACING``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from memstream.models import vocabulary
from memstream.models.extraction.claim_builders import (
    _JOB_END,
    _LEADING_ARTICLE,
    _cut,
    _name,
    _person_subject,
    _place,
    _Read,
    _thing,
)
from memstream.models.extraction.parse import Predicate, predicates

#: Where an activity's name ends: when and how often it is done ("chess, twice a week",
#: "yoga every Sunday", "Portuguese at evening school").
_ACTIVITY_END = re.compile(
    r"(?:^|\s+)(?:on|in|at|with|every|each|twice|once|three\s+times|whenever|when|after|"
    r"before|a\s+lot|more|less|all|most|sometimes|often|together|again|later)\b|\s+\d",
    re.IGNORECASE,
)
#: Verbs a frame may hang under and still state its value now, or end it.
_GOING_ON = frozenset({"", "start", "begin", "keep", "continue"})
_STOPPED = frozenset({"use", "stop", "quit"})
#: Attributes whose value is what someone does, cut where when and how often begin.
_PASTIMES = {"activity": 6, "learning": 6, "sport": 2}


@dataclass(frozen=True)
class FrameRead:
    """A claim a frame read: whom it is about, what it asserts, where its subject starts."""

    subject: str
    read: _Read
    start: int


def frame_reads(sentence: str, speaker: str, referent: str | None = None) -> Iterator[FrameRead]:
    """Every claim a verb frame reads in ``sentence``, in the order the parse gives them.

    ``speaker`` is who "I" and "we" are; ``referent`` whom "he" and "she" mean (None: such a
    predicate is left out).

    Examples
    --------
    >>> [(f.subject, f.read.attribute, f.read.value, f.read.polarity)
    ...  for f in frame_reads("I no longer live in Berlin, I moved back to Lyon.", "User")]
    [('User', 'home', 'Berlin', False), ('User', 'home', 'Lyon', True)]
    >>> [(f.subject, f.read.attribute, f.read.value)
    ...  for f in frame_reads("My sister started working for Acme Robotics.", "User")]
    [("User's sister", 'employer', 'Acme Robotics')]
    >>> list(frame_reads("I'd love to live in Rome.", "User"))
    []
    """
    read = predicates(sentence)
    # "I don't live in Aarhus any more, **it's Valencia now**": what took a denied value's place.
    foci = [p.focus for p in read if p.focus and not p.negated and not p.irreal]
    for predicate in read:
        subject = _subject(predicate, speaker, referent)
        if subject is None:
            continue
        framed = list(_attribute_reads(predicate, subject, foci))
        yield from framed or _replacements(predicate, subject, read)


def _attribute_reads(predicate: Predicate, subject: str, foci: list[str]) -> Iterator[FrameRead]:
    """What ``predicate`` says of the attributes whose verb frames it fits."""
    for link, words, holds, instead in _link_reads(predicate, foci):
        found = vocabulary.frame(predicate.verb, link)
        if found is None:
            continue
        attribute, role = found
        kind = attribute.value_kind
        taken = [value for focus in instead if (value := _value(attribute.key, kind, focus))]
        if holds is None and taken and role == "said":
            holds = False  # its value was replaced: "..., it's Valencia now"
        elif holds is not None:
            holds, taken = _holds(role, holds, predicate), []
        if holds is None:
            continue
        if value := _value(attribute.key, kind, words):
            yield FrameRead(subject, _read(attribute, value, holds), predicate.start)
        yield from (
            FrameRead(subject, _read(attribute, value, True), predicate.start) for value in taken
        )


def _replacements(
    predicate: Predicate, subject: str, read: tuple[Predicate, ...]
) -> Iterator[FrameRead]:
    """What ``predicate`` replaces or lets go of, whatever attribute holds it: "switched
    from Vim to Emacs", "sold the Subaru and bought a Skoda" (the new value replaces the
    old), "gave away the bike" (the old value ends). The decisions find the attribute by the
    claim whose value it names; a value nobody holds stays a fact of its own."""
    if _polarity(predicate) is not True:
        return
    links = dict(reversed(predicate.links))  # the first object of each link
    for verb, old_link, new_link in vocabulary.REPLACING:
        if predicate.verb == verb and old_link in links and new_link in links:
            old, new = _thing(links[old_link]), _thing(links[new_link])
            if old and new:
                yield FrameRead(subject, _Read("", "", new, replaces=old), predicate.start)
            return
    let_go = next(
        (words for link, words in predicate.links
         if f"{predicate.verb} {link}" in vocabulary.LETTING_GO.as_set()),
        None,
    )
    old = _thing(let_go) if let_go else ""
    if not old:
        return
    taken = [
        _thing(words)
        for other in read if other.start > predicate.start
        and other.subject == predicate.subject and _polarity(other) is True
        for link, words in other.links
        if f"{other.verb} {link}" in vocabulary.TAKING_ON.as_set()
    ]
    if new := next((value for value in taken if value), ""):
        yield FrameRead(subject, _Read("", "", new, replaces=old), predicate.start)
    else:
        yield FrameRead(subject, _Read("", "", old, polarity=False, replaces=old), predicate.start)


def _link_reads(
    predicate: Predicate, foci: list[str]
) -> Iterator[tuple[str, str, bool | None, list[str]]]:
    """Each link of ``predicate`` with the predicate's polarity (True, False, or None when
    it states nothing) and, for a negated one, what took its place ("it's Valencia now");
    a value it denies ("allergic to sesame, not peanuts") with False."""
    polarity = _polarity(predicate)
    replaced = foci if predicate.negated and not predicate.irreal else []
    if polarity is None and not replaced:
        return
    for link, words in predicate.links:
        if polarity is not None and not (replaced and polarity is False):
            yield link, words, polarity, []
        else:
            yield link, words, None, replaced
    if polarity:
        yield from ((link, words, False, []) for link, words in predicate.denied)


def _polarity(predicate: Predicate) -> bool | None:
    """Whether the predicate asserts (True) or takes back (False) what it says; None when it
    states nothing: a wish, a question, the future, a bare "not", an unknown lead verb."""
    if predicate.irreal or predicate.tense == "future":
        return None
    if predicate.lead in _STOPPED:
        return None if predicate.negated else False
    if predicate.lead not in _GOING_ON:
        return None
    if predicate.negated:
        return False if predicate.ended else None
    return True


def _holds(role: vocabulary.FrameRole, polarity: bool, predicate: Predicate) -> bool | None:
    """Whether the frame's value holds after the predicate (True), ends (False), or neither
    can be told (None: "I lived in Lyon" may or may not be over)."""
    if role == "ended":
        return False if polarity else None
    if role == "said" and polarity and not predicate.lead and (
        predicate.tense == "past" or predicate.perfect and not predicate.lasts
    ):
        return None  # "I lived in Lyon", "I have played chess": maybe over, maybe not
    return polarity


def _subject(predicate: Predicate, speaker: str, referent: str | None) -> str | None:
    """Whom the predicate is about: the speaker for "I" and "we", "<speaker>'s <relation>"
    for "my sister", the referent for "he" and "she"; None for anyone else."""
    head = predicate.subject_head
    if head in ("i", "we"):
        return speaker
    if head in ("he", "she"):
        return referent
    relation = " ".join(
        word for word in predicate.subject.lower().split()
        if word not in ("my", "our") and word not in predicate.subject_name.lower().split()
    )
    if predicate.possessor in ("my", "our") and relation in vocabulary.RELATIONS.as_set():
        return _person_subject(speaker, relation, predicate.subject_name or None)
    return None


def _value(key: str, kind: vocabulary.ValueKind, words: str) -> str:
    """The value a frame's object gives its attribute, cleaned as its kind asks: a place,
    a name, a job, what someone does, a thing; "" when the words are none."""
    if key in _PASTIMES:
        value = _thing(_ACTIVITY_END.split(words)[0])
        return value if len(value.split()) <= _PASTIMES[key] else ""
    if key == "job":
        return _cut(_JOB_END.split(_LEADING_ARTICLE.sub("", words))[0], words=4)
    if kind == "place":
        return _place(words)
    if kind in ("organisation", "person", "name"):
        name = _name(words)
        return name if name[:1].isalpha() else ""  # "started at 9", not at a company
    return _thing(words)


def _read(attribute: vocabulary.Attribute, value: str, holds: bool) -> _Read:
    kind = "activity" if attribute.key in _PASTIMES else attribute.key
    return _Read(
        kind, attribute.key, value, polarity=holds, cardinality=attribute.cardinality,
        importance=0.85 if attribute.key in ("home", "employer") else 0.8,
    )
