"""First person to third: pronouns ("my dog" → "their dog") and present-tense verbs
("watch" → "watches"), so statements read as about the user."""

from __future__ import annotations

import re

_PRONOUN_RE = re.compile(
    r"\b(?:I\s+am|I\s+was|I'm|I've|I'd|I'll|I|me|my|mine|myself)\b", re.IGNORECASE
)
_PRONOUNS = {
    "i am": "they are",
    "i was": "they were",
    "i'm": "they're",
    "i've": "they've",
    "i'd": "they'd",
    "i'll": "they'll",
    "i": "they",
    "me": "them",
    "my": "their",
    "mine": "theirs",
    "myself": "themselves",
}
_IRREGULAR_VERBS = {"have": "has", "be": "is", "am": "is", "do": "does", "go": "goes"}


def _third_person_text(text: str) -> str:
    """First-person pronouns rewritten to the third person ("my dog" → "their dog")."""

    def replace(match: re.Match[str]) -> str:
        word = match.group(0)
        if word == "i" and text[match.end() : match.end() + 1] == ".":
            return word  # "i.e."
        return _PRONOUNS[" ".join(word.lower().split())]

    return _PRONOUN_RE.sub(replace, text)


def _third_person(verb: str) -> str:
    """The third-person singular of a present-tense verb ("watch" → "watches")."""
    verb = verb.lower()
    if verb in _IRREGULAR_VERBS:
        return _IRREGULAR_VERBS[verb]
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(verb) > 1 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"
