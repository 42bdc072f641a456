"""The user's own names in a question: "Where does Ines work now?" asked of Ines's memories.

Statements are written about ``User`` ("User works at Airbus"), while a question, or the
agent asking it, may call the user by name. The user's names are what their memories say:
the current facts that state a claim ``(User, name, <name>)``, which the extractor writes
from "my name is ..." and from the name their messages carry. :func:`as_user` says each of
those names in a question the way the user's memories say it: ``User`` where the name is the
question's subject (a statement's subject), "my" for a possessive and "I" elsewhere (the
user's own words in an episode). A name that is not the user's is left as it is (a
friend's, the other speaker's).

Measured on ``benchmarks/dialogue_recall.py`` (dev split, session recall@5): writing every
name as ``User`` raised corrections from 0.50 to 0.91 but lowered open-domain questions
("What is new with Ines's cousin?" then meets every "User's <relative> ..." fact) from 0.93
to 0.86; the three forms keep both (docs/search.md).

Only the question's capitalised words can be a name, and a word that is no index term (a
stop word: "Where", "What") or a month or day is never looked up. The lookup is one search
of the user's own facts by those words alone (:meth:`Retriever._as_user
<memstream.projections.retrieval.Retriever>`); a question without such words costs nothing.

Examples
--------
>>> as_user("Where does Ines work now? Ask Ines's boss", ["Ines"])
'Where does User work now? Ask my boss'
>>> as_user("Where does the person Inês Duarte met work?", ["Inês Duarte", "Inês"])
'Where does the person I met work?'
>>> as_user("What did Inesa say?", ["Ines"])
'What did Inesa say?'
>>> capitalised("Where does Ines work in May? and Karl's sister?")
['Ines', 'Karl']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from memstream.models.vocabulary import MONTHS, WEEKDAYS
from memstream.projections.memories import MemoryRecord
from memstream.projections.resident.words import tokens

__all__ = ["OWN", "as_user", "capitalised", "own_names"]

#: How statements name the user.
OWN = "User"
#: The claim attribute of a name.
NAME_ATTRIBUTE = "name"
#: Capitalised words a question holds without naming anyone.
_CALENDAR = MONTHS.as_set() | WEEKDAYS.as_set()
#: The verbs a question's subject follows ("does Ines work", "is Ines still ...").
_AUXILIARIES = (
    "(?i:does|did|do|is|was|has|had|can|could|will|would|should|might)"
)
_WORD = re.compile(r"(?<![\w'])[^\W\d_][^\W_]*(?:-[^\W\d_][^\W_]*)*")


def capitalised(question: str) -> list[str]:
    """The words of ``question`` that could be a name, in order, each once: capitalised,
    an index term (no stop word), no month or day, not ``User`` itself."""
    words: list[str] = []
    for word in _WORD.findall(question):
        if (
            not word[0].isupper()
            or word in words
            or word == OWN
            or word.casefold() in _CALENDAR
            or not tokens(word)
        ):
            continue
        words.append(word)
    return words


def own_names(facts: Iterable[MemoryRecord]) -> list[str]:
    """The user's names that ``facts`` state (a claim ``(User, name, <name>)`` that holds),
    and the first word of each longer one ("Ines Duarte", "Ines"); longest first, then
    alphabetically."""
    names: set[str] = set()
    for fact in facts:
        value = " ".join((fact.claim_value or "").split())
        if (
            value
            and value != OWN
            and fact.claim_subject == OWN
            and fact.claim_attribute == NAME_ATTRIBUTE
            and fact.claim_polarity is not False
        ):
            names.update((value, value.split()[0]))
    return sorted(names, key=lambda name: (-len(name), name))


def as_user(question: str, names: Sequence[str]) -> str:
    """``question`` with each of ``names`` (whole words, as written) said the way the user's
    memories say it: the subject of a question ("does Ines work") as ``User``, the subject of
    their statements; a possessive ("Ines's cousin") as "my", and anywhere else ("the person
    Ines met") as "I", the user's own words in their episodes."""
    for name in sorted(names, key=lambda name: (-len(name), name)):
        word = re.escape(name)
        question = re.sub(rf"(?<![\w'-]){word}(?:'s|')(?![\w-])", "my", question)
        question = re.sub(rf"\b({_AUXILIARIES})\s+{word}(?![\w'-])", rf"\1 {OWN}", question)
        question = re.sub(rf"(?<![\w'-]){word}(?![\w'-])", "I", question)
    return question
