"""Claims: what a user sentence asserts about someone, as subject, attribute and value, read
from its parse and by patterns, without a language model.

:func:`read_clause_claims` finds, anywhere in a sentence (a claim is often said in passing:
"work is calmer since I moved to Porto"), first what the vocabulary's verb frames read from
the parse (:mod:`.frames`: "live in", "work for", "take up"), then, clause by clause, what
the patterns of :func:`read_claims` read of the rest: statements of the kinds a memory must
follow when they
change: where someone lives and works, their job and employer, numbers (a budget, a rent, a
count), dates and deadlines, people and relationships, pets and possessions, likes,
dislikes and preferences, activities (hobbies, sports, what they are learning), diet and
health, tools, and plans. Each becomes a
:class:`~memstream.models.events.memory.Claim` with the turn's time as its start, and a statement
that renders it ("User lives in Porto").

* **Subject.** ``I`` and ``we`` are the speaker (``User``, or the speaker's name in a
  conversation among named people); "my sister", "my boss Tom" are someone else
  (``User's sister``): a fact about them never touches the speaker's.
* **Attribute.** A normalised key (:func:`memstream.models.beliefs.attribute_key`): a
  word for the kinds above ("home", "employer", "job", "diet"), else the noun the user used
  ("budget", "rent", "deadline for the report", "dog's name").
* **Cardinality.** Attributes that hold one value at a time (home, employer, job, a number, a
  date, diet, a partner, a preference between options) are ``one``; those that hold several
  (pets, allergies, friends, likes) are ``many``, and a new value never ends another.
* **Cue.** "also", "too", "another", "a second" add a value (``also``); "moved", "now",
  "switched", "went up to", "these days" mark a change (``change``).
* **Negation and retraction.** "not vegetarian any more", "no longer at Acme", "I left
  Acme", "I sold my car" take a value back (polarity False); a bare "not" on a present
  statement is not read, nor are questions, wishes and hypotheticals ("I'd love to live in
  Rome", "if I moved to Oslo").
* **Ends.** A state stated with its own end ("in Berlin this week", "until Friday") holds
  until then (``valid_until``); such a state is a whereabouts, never a home.
* **Replaced values.** "X, not Y", "X instead of Y", "switched from Y to X" name the value
  they replace (``replaces``); "it's 2,000, not 1,500" names nothing else, and its attribute
  is the one of the claim holding 1,500 (decided later, against the user's claims).

Examples
--------
>>> from datetime import UTC, datetime
>>> at = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
>>> [(f.claim.attribute, f.claim.value, f.content) for f in read_clause_claims(
...     "Work is calmer since I moved to Porto.", "User", at)]
[('home', 'Porto', 'User lives in Porto')]
>>> [(f.claim.subject, f.claim.attribute, f.claim.value) for f in read_clause_claims(
...     "My sister lives in Leeds now.", "User", at)]
[("User's sister", 'home', 'Leeds')]
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from memstream.models import vocabulary
from memstream.models.beliefs import attribute_key
from memstream.models.events.memory import Claim, ClaimCue, MemoryType
from memstream.models.extraction.claim_builders import _cut, _person_subject, _Read
from memstream.models.extraction.claim_patterns import _PATTERNS
from memstream.models.extraction.claim_words import (
    _ALSO_CUES,
    _CHANGE_CUES,
    _IRREAL,
    _MY,
    _RELATIONS,
    _p,
)
from memstream.models.extraction.frames import frame_reads
from memstream.models.extraction.parse import Clause, clauses
from memstream.models.extraction.state_ends import _PAST_DURATION, stated_end


@dataclass(frozen=True)
class ClaimFinding:
    """A claim read from a sentence, with the statement that renders it."""

    claim: Claim
    memory_type: MemoryType
    content: str
    importance: float


#: A statement replacing a value it names, with no attribute of its own ("it's 2,000, not
#: 1,500"; "make that Tuesday, not Monday").
_REPLACED_VALUE = r"(?:\d[\d,.]*\d|[^,;.!?])+?"
_BARE_REPLACEMENT = _p(
    r"\b(?:it's|it\s+is|that's|that\s+is|make\s+that|it'll\s+be|it\s+will\s+be|it\s+was|"
    r"it's\s+actually|it\s+is\s+actually|actually\s+it's)\s+(?:now\s+)?"
    rf"(?P<val>{_REPLACED_VALUE}),?\s+(?:not|rather\s+than|instead\s+of)\s+"
    rf"(?P<old>{_REPLACED_VALUE})(?=[,;.!?]|$)"
)
_NOT_REPLACED = _p(r",?\s+(?:not|rather\s+than|instead\s+of)\s+(?P<old>[^,;.!?]+)$")


def _short(text: str) -> str:
    """A replaced value: a number as it is, else a short phrase."""
    text = text.strip(" ,.")
    return text if re.fullmatch(r"[\d,.]+", text) else _cut(text, words=4)


def _subject(match: re.Match[str], speaker: str, referent: str | None) -> str | None:
    """Who a match is about: the speaker, "<speaker>'s <relation>", or for he / she / his /
    her the person last named by relation (``referent``; None when there is none)."""
    groups = match.groupdict()
    relation = groups.get("rel") or groups.get("orel")
    if relation:
        name = groups.get("relname")
        return _person_subject(speaker, relation, name)
    said = (groups.get("subj") or groups.get("opron") or "").lower()
    if said in ("he", "she", "his", "her"):
        return referent
    if "subj" not in groups and "owner" not in groups:
        # A pattern without a subject of its own ("the trip is now to Morocco"): whom the
        # clause named before it ("my brother changed the trip to Morocco").
        return _clause_subject(match.string[: match.start()], speaker, referent)
    return speaker


def _clause_subject(before: str, speaker: str, referent: str | None) -> str:
    """Who the clause ending at a subjectless statement is about: the person it names by
    relation or pronoun last, else the speaker."""
    clause = re.split(r"[;:.!?]|,\s+(?:and|but|so)\b", before)[-1]
    named = list(_NAMED_PERSON.finditer(clause))
    pronoun = list(re.finditer(r"\b(?:he|she|his|her)\b", clause, re.IGNORECASE))
    if named and (not pronoun or named[-1].start() > pronoun[-1].start()):
        return _person_subject(speaker, named[-1].group("rel"), None)
    if pronoun and referent is not None:
        return referent
    return speaker


_NAMED_PERSON = _p(rf"\b{_MY}\s+(?P<rel>{_RELATIONS})\b")


def person_named(sentence: str, speaker: str) -> str | None:
    """The last person ``sentence`` names by relation ("my aunt" → "User's aunt"): whom a
    later "she" or "his" means.

    Examples
    --------
    >>> person_named("My aunt is a product manager.", "User")
    "User's aunt"
    """
    found = list(_NAMED_PERSON.finditer(sentence))
    if not found:
        return None
    return f"{speaker}'s {' '.join(found[-1].group('rel').lower().split())}"


def _render(read: _Read, subject: str) -> str:
    """The statement of a claim, as a memory's content."""
    value, attribute = read.value, read.attribute
    s = subject
    known = vocabulary.attribute(attribute)
    if known is not None and known.key == attribute and known.statement is not None:
        phrase = known.statement[0] if read.polarity else known.statement[1]
        if not value:  # "User no longer plans a trip", not "... a trip to"
            phrase = re.sub(r"\s+(?:to|in|at|with|as|an?)$", "", phrase)
        return f"{s} {phrase} {value}".strip()
    if attribute.startswith("feeling about "):
        thing = attribute[len("feeling about "):]
        if not read.polarity:
            return f"{s} no longer likes {thing}"
        return f"{s} {value} {thing}"
    if attribute.startswith("preferred "):
        if not read.polarity:
            return f"{s} no longer prefers {value}"
        return f"{s} prefers {value}" + (f" over {read.replaces}" if read.replaces else "")
    if read.kind == "tool":
        purpose = attribute[len("tool for "):] if attribute.startswith("tool for ") else ""
        return f"{s} uses {value}" + (f" for {purpose}" if purpose else "")
    if not read.polarity:
        if not attribute:  # let go of, whatever it was: "User no longer has the Subaru"
            return f"{s} no longer has {value}"
        return f"{s} no longer has a {attribute}" + (f" ({value})" if value else "")
    if attribute.startswith("number of "):
        return f"{s} has {value} {match_plural(attribute[len('number of '):])}"
    if not attribute:
        return f"{s}: {value}" + (f", not {read.replaces}" if read.replaces else "")
    return f"{s}'s {attribute} is {value}"


def match_plural(noun: str) -> str:
    """A count's noun in the plural ("kid" → "kids")."""
    if noun.endswith("child"):
        return noun + "ren"
    return noun if noun.endswith("s") else noun + "s"


def _cue(sentence: str) -> ClaimCue:
    if _ALSO_CUES.search(sentence):
        return "also"
    if _CHANGE_CUES.search(sentence):
        return "change"
    return "state"


def _irreal(sentence: str, start: int) -> bool:
    """Whether a statement at ``start`` is a wish, a question or a hypothesis: a marker in
    its clause before it (a marker after a comma or "and" belongs to another clause)."""
    before = sentence[:start]
    clause = re.split(r"[,;:]|\band\b|\bbut\b|\bso\b", before)[-1]
    return bool(_IRREAL.search(clause))


def _spans(sentence: str) -> Iterator[tuple[re.Match[str], _Read]]:
    """Every pattern's matches in ``sentence`` with what they read; a match inside a
    stretch another pattern already read is left out (the first pattern wins)."""
    taken: list[tuple[int, int]] = []
    for pattern, build in _PATTERNS:
        for match in pattern.finditer(sentence):
            start, end = match.span()
            if any(start < e and s < end for s, e in taken):
                continue
            read = build(match)
            if read is None:
                continue
            taken.append((start, end))
            yield match, read


def _finding(
    read: _Read, subject: str, speaker: str, text: str, start: int, at: datetime
) -> ClaimFinding | None:
    """The claim ``read`` makes of ``subject`` in ``text`` (its statement at ``start``),
    with the end the sentence states and the value it says it replaces; None for a
    temporary state with no end ("I'm in Berlin": where the user is, not worth a claim)."""
    relation = subject.removeprefix(f"{speaker}'s ").split()
    if subject != speaker and len(relation) == 1 and relation[0] in vocabulary.OFTEN_SEVERAL:
        # "my colleague works at X", "my colleague works at Y": maybe two colleagues.
        read = _Read(**{**read.__dict__, "cardinality": "many"})
    end = None if _PAST_DURATION.search(text) else stated_end(text, at)
    if read.temporary and end is None:
        return None
    if read.kind == "home" and end is not None:
        read = _Read("whereabouts", "whereabouts", read.value, importance=0.6)
    replaces = read.replaces
    if replaces is None and read.polarity:
        tail = _NOT_REPLACED.search(text[start:])
        if tail is not None:
            replaces = _cut(tail.group("old"), words=4) or None
    claim = Claim(
        subject=subject,
        attribute=read.attribute,
        value=read.value,
        polarity=read.polarity,
        cardinality=read.cardinality,
        valid_from=at,
        valid_until=end if read.polarity else None,
        replaces=replaces,
        cue="change" if replaces else _cue(text),
    )
    rendered = _Read(**{**read.__dict__, "replaces": replaces})
    return ClaimFinding(claim, read.memory_type, _render(rendered, subject), read.importance)


def read_claims(
    sentence: str, speaker: str, at: datetime, referent: str | None = None
) -> list[ClaimFinding]:
    """The claims one user sentence asserts, in the order they appear.

    ``speaker`` names whoever says ``sentence`` (``User``, or a name); ``at`` is the turn's
    event time, the start of every claim found (and the base of a stated end);
    ``referent`` is whom "she" or "his" means (see :func:`person_named`).
    """
    text = " ".join(sentence.replace("\u2019", "'").split())
    if not text or text.endswith("?"):
        return []
    findings: list[tuple[int, ClaimFinding]] = []
    for match, read in _spans(text):
        if read.kind != "plan" and _irreal(text, match.start()):
            continue
        subject = _subject(match, speaker, referent)
        if subject is not None and (found := _finding(read, subject, speaker, text, match.start(), at)):
            findings.append((match.start(), found))
    if not findings:
        bare = _BARE_REPLACEMENT.search(text)
        if bare is not None:
            value, old = _short(bare.group("val")), _short(bare.group("old"))
            if value and old:
                claim = Claim(
                    subject=speaker, attribute="", value=value, valid_from=at, replaces=old,
                    cue="change",
                )
                content = f"{speaker}: {value}, not {old}"
                findings.append((bare.start(), ClaimFinding(claim, "fact", content, 0.8)))
    return [finding for _, finding in sorted(findings, key=lambda item: item[0])]


def read_clause_claims(
    sentence: str, speaker: str, at: datetime, referent: str | None = None
) -> list[ClaimFinding]:
    """The claims of ``sentence`` read clause by clause (:func:`.parse.clauses`): the patterns
    of :func:`read_claims` on each coordinated clause ("I prefer window seats and I live
    in Lisbon" holds two), and where they read nothing in a clause, what its structure
    says (:func:`possessed_value`).

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> at = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    >>> [(f.claim.attribute, f.claim.value) for f in read_clause_claims(
    ...     "I prefer window seats and I live in Lisbon.", "User", at)]
    [('preferred seat', 'window seats'), ('home', 'Lisbon')]
    >>> [(f.claim.attribute, f.claim.value) for f in read_clause_claims(
    ...     "My Spotify password is Tulip", "User", at)]
    [('spotify password', 'Tulip')]
    """
    text = " ".join(sentence.replace("\u2019", "'").split())
    if not text or text.endswith("?"):
        return []
    framed = [
        (read.start, found) for read in frame_reads(text, speaker, referent)
        if (found := _finding(read.read, read.subject, speaker, text, read.start, at))
    ]
    parts = clauses(text)
    findings: list[tuple[int, ClaimFinding]] = []
    for clause in parts if len(parts) > 1 else ():
        read = read_claims(clause.text, speaker, at, referent)
        if not read and (value := possessed_value(clause, speaker, at, text)) is not None:
            read = [value]
        findings.extend((text.find(clause.text), finding) for finding in read)
    if len(parts) < 2:
        read = read_claims(text, speaker, at, referent)
        read = read or [f for c in parts if (f := possessed_value(c, speaker, at, text))]
        findings.extend((0, finding) for finding in read)
    # Where a frame reads the structure, its claim stands for the patterns' on the same
    # thing or the same value ("moved to Porto" is a home, not a tool switched to).
    said = {(f.claim.subject, f.claim.attribute) for _, f in framed}
    values = {(f.claim.subject, f.claim.value.casefold()) for _, f in framed}
    # A replacement with no attribute is a fallback for sentences nothing else reads.
    findings = [
        item for item in findings
        if (item[1].claim.subject, item[1].claim.attribute) not in said
        and not _same_value(item[1].claim.subject, item[1].claim.value, values)
        and not (framed and not item[1].claim.attribute)
    ]
    return [finding for _, finding in sorted(framed + findings, key=lambda item: item[0])]


def _same_value(subject: str, value: str, values: set[tuple[str, str]]) -> bool:
    """Whether ``value`` is one of ``values`` of ``subject``, or one with words after it
    ("Python mostly" where a frame read "Python")."""
    words = value.casefold().split()
    return any((subject, " ".join(words[:end])) in values for end in range(1, len(words) + 1))


def possessed_value(
    clause: Clause, speaker: str, at: datetime, sentence: str
) -> ClaimFinding | None:
    """The claim of a clause that gives one of the speaker's things a value: "my budget for
    the trip is 1,500 euros", "our wifi password is tulip7" (a possessed subject, the verb
    *be* in the present, not negated, a noun, number or adjective as complement: "my
    question is how to deploy" gives nothing a value). Its attribute is the thing as said
    (:func:`~memstream.models.beliefs.attribute_key`), one value at a time; a person ("my
    sister is a nurse") is left to the patterns that know relations."""
    if (
        clause.possessor not in ("my", "our")
        or clause.lemma != "be"
        or clause.negated
        or clause.tense != "present"
        or clause.complement_kind not in ("NOUN", "PROPN", "NUM", "ADJ")
        or re.fullmatch(_RELATIONS, clause.subject_head, re.IGNORECASE)
    ):
        return None
    thing = clause.subject.split(maxsplit=1)[1] if " " in clause.subject else ""
    attribute = attribute_key(thing)
    value = _cut(clause.complement, words=6)
    if not attribute or not value:
        return None
    claim = Claim(
        subject=speaker, attribute=attribute, value=value, valid_from=at, cue=_cue(sentence),
    )
    content = f"{speaker}'s {' '.join(thing.split())} is {value}"
    return ClaimFinding(claim, "fact", content, 0.8)
