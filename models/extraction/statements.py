"""Statements: the preference or fact one clause states ("I prefer dark roast coffee" →
"User prefers dark roast coffee"), recognised by patterns tried in order."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memstream.models.events.memory import MemoryType
from memstream.models.extraction.pronouns import _third_person_text
from memstream.models.extraction.words import (
    _COMMON_WORDS,
    _DEICTIC,
    _DEMONYMS,
    _EPHEMERAL_HAVE,
    _EPHEMERAL_KEYS,
    _HIGH_KEYS,
    _RESPONSE_NOUNS,
)
from memstream.models.vocabulary import DIETS

#: Adverbs allowed between "I" and the verb ("I really like", "I currently work").
_ADV = (
    r"(?:(?:really|also|generally|usually|normally|typically|much|strongly|definitely|always|"
    r"still|absolutely|just|truly|totally|actually|personally|mostly|honestly|do|kinda|"
    r"kind\s+of|sort\s+of|quite|very\s+much|even|now|currently|already|mainly|only)\s+)*"
)
_IM = r"(?:i'm|im|i\s+am)"
_TIME_BOUND_RE = re.compile(
    r"\b(?:today|tonight|tomorrow|yesterday|this\s+(?:morning|afternoon|evening|week|weekend)|"
    r"right\s+now|at\s+the\s+moment|next\s+(?:week|month)|\d{1,2}(?::\d{2})?\s*(?:am|pm))\b",
    re.IGNORECASE,
)
_TRAILING_FILLER_RE = re.compile(
    r"(?:[,\s]+(?:please|now|nowadays|these\s+days|too|as\s+well|though|thanks|thank\s+you))+$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Finding:
    memory_type: MemoryType
    content: str
    importance: float
    source_text: str


def _clean_object(obj: str, *, time_bound_ok: bool = True) -> str | None:
    """The words after the verb, tidied and in the third person; ``None`` if not worth keeping.

    Objects that point at the reply in front of the user ("I like it", "I love your answer")
    are not lasting preferences and are refused.
    """
    obj = _TRAILING_FILLER_RE.sub("", obj.strip(" \t\"'.,;:!-")).strip(" \t\"'.,;:!-")
    if not any(ch.isalnum() for ch in obj):
        return None
    words = obj.lower().split()
    if words[0] in _DEICTIC and (
        len(words) <= 3 or words[1] not in ("when", "whenever", "if", "that", "you")
    ):
        return None
    if (
        words[0] in ("your", "the", "this", "that")
        and len(words) > 1
        and words[1] in _RESPONSE_NOUNS
    ):
        return None
    if not time_bound_ok and _TIME_BOUND_RE.search(obj):
        return None
    return _third_person_text(obj)


def _name_value(text: str, *, require_capital: bool) -> str | None:
    """The leading name in ``text``: the first word and any capitalised words after it."""
    words = text.strip(" \"'").split()[:4]
    if not words or not words[0][0].isalpha():
        return None
    if require_capital and not words[0][0].isupper():
        return None
    name = [words[0]]
    for word in words[1:]:
        if name[-1][-1] in ",;:" or not word[0].isupper():
            break
        name.append(word)
    value = " ".join(name).strip(" ,;:.!\"'")
    if not value or value.lower() in _COMMON_WORDS:
        return None
    return value


Render = Callable[[re.Match[str]], list[_Finding]]


def _simple(
    memory_type: MemoryType, importance: float, template: str, *, time_bound_ok: bool = True
) -> Render:
    """A renderer filling ``template``'s ``{obj}`` with the cleaned object."""

    def render(match: re.Match[str]) -> list[_Finding]:
        obj = _clean_object(match.group("obj"), time_bound_ok=time_bound_ok)
        if obj is None:
            return []
        groups = {
            k: (v or "") if k == "key" else (v or "").lower()
            for k, v in match.groupdict().items()
            if k != "obj"
        }
        content = " ".join(template.format(obj=obj, **groups).split())
        return [_Finding(memory_type, content, importance, match.string)]

    return render


_PREFERENCE_VERBS = {
    "prefer": ("prefers", 0.8),
    "like": ("likes", 0.7),
    "love": ("loves", 0.75),
    "adore": ("adores", 0.75),
    "enjoy": ("enjoys", 0.7),
    "hate": ("hates", 0.75),
    "dislike": ("dislikes", 0.75),
    "detest": ("detests", 0.75),
    "loathe": ("loathes", 0.75),
}


def _render_preference(match: re.Match[str]) -> list[_Finding]:
    verb, importance = _PREFERENCE_VERBS[match.group("verb").lower()]
    obj = _clean_object(match.group("obj"))
    if obj is None:
        return []
    return [_Finding("preference", f"User {verb} {obj}", importance, match.string)]


def _render_negative_preference(match: re.Match[str]) -> list[_Finding]:
    verb = " ".join(match.group("verb").lower().split())
    obj = _clean_object(match.group("obj"))
    if obj is None:
        return []
    phrase = "dislikes" if verb == "like" else f"does not {verb}"
    return [_Finding("preference", f"User {phrase} {obj}", 0.75, match.string)]


def _render_instruction(match: re.Match[str]) -> list[_Finding]:
    adverb = "always" if match.group("adv").lower() == "always" else "never"
    obj = _clean_object(match.group("obj"))
    if obj is None:
        return []
    content = f"User wants the assistant to {adverb} {obj}"
    return [_Finding("preference", content, 0.85, match.string)]


def _render_name(match: re.Match[str]) -> list[_Finding]:
    name = _name_value(match.group("obj"), require_capital=False)
    if name is None:
        return []
    return [_Finding("fact", f"User's name is {name}", 0.9, match.string)]


def _render_call_me(match: re.Match[str]) -> list[_Finding]:
    name = _name_value(match.group("obj"), require_capital=True)
    if name is None:
        return []
    return [_Finding("fact", f"User wants to be called {name}", 0.85, match.string)]


def _render_introduction(match: re.Match[str]) -> list[_Finding]:
    """ "I'm Maria", "I'm German", "I'm Maria, a nurse in Leeds"."""
    words = match.group("obj").split()
    if not all(word[0].isupper() and word.lower() not in _COMMON_WORDS for word in words):
        return []
    if any(word.isupper() and len(word) > 1 for word in words):
        return []  # "I'm OK"
    findings: list[_Finding] = []
    if len(words) == 1 and words[0].lower() in _DEMONYMS:
        findings.append(_Finding("fact", f"User is {words[0]}", 0.75, match.string))
    else:
        findings.append(_Finding("fact", f"User's name is {' '.join(words)}", 0.9, match.string))
    apposition = match.group("appos")
    if apposition:
        findings.extend(_statements(f"I'm {apposition}"))
    return findings


_WORK_IMPORTANCE = {"at": 0.85, "for": 0.85, "as": 0.8, "in": 0.75, "on": 0.7, "with": 0.65}


def _render_work(match: re.Match[str]) -> list[_Finding]:
    prep = match.group("prep").lower()
    obj = _clean_object(match.group("obj"), time_bound_ok=False)
    if obj is None:
        return []
    if match.group("ing"):
        content, importance = f"User is working {prep} {obj}", _WORK_IMPORTANCE[prep] - 0.1
    else:
        content, importance = f"User works {prep} {obj}", _WORK_IMPORTANCE[prep]
    return [_Finding("fact", content, importance, match.string)]


def _render_have(match: re.Match[str]) -> list[_Finding]:
    words = match.group("obj").lower().split()
    if any(word.strip(",.") in _EPHEMERAL_HAVE for word in words[1:4]):
        return []
    obj = _clean_object(match.group("obj"), time_bound_ok=False)
    if obj is None:
        return []
    return [_Finding("fact", f"User has {obj}", 0.65, match.string)]


def _render_identity(match: re.Match[str]) -> list[_Finding]:
    """ "I'm a nurse" → "User is a nurse"; "I'm a bit tired" is refused."""
    words = match.group("obj").lower().split()
    if not words or words[0] in ("bit", "little", "lot", "few", "tad", "kind", "sort", "couple", "while"):
        return []
    obj = _clean_object(match.group("obj"), time_bound_ok=False)
    if obj is None:
        return []
    article = match.group("art").lower()
    return [_Finding("fact", f"User is {article} {obj}", 0.75, match.string)]


def _render_possession(match: re.Match[str]) -> list[_Finding]:
    """ "my X is Y" → "User's X is Y", unless X is about the moment ("my question is")."""
    key = " ".join(match.group("key").lower().split())
    key_words = key.replace("'s", " ").split()
    if (
        not key_words
        or key_words[0] in _EPHEMERAL_KEYS
        or any(word in ("and", "or", "i", "me", "you", "we") for word in key_words)
    ):
        return []
    obj = match.group("obj")
    if match.groupdict().get("cop") is None:
        if re.search(r"\b(?:is|are)\b", obj, re.IGNORECASE):
            return []
        # "my X's ..." is a possessive as often as "my X is": "my neighbour's dog barked all
        # night" says nothing of a neighbour being anything. Only attributes the user has
        # one of, followed by a value ("my name's Maria", "my wife's a nurse"), read as "is".
        words = obj.split()
        if key_words[-1] not in _HIGH_KEYS or (
            len(words) >= 3 and words[0].islower() and words[0].lower() not in ("a", "an", "the")
        ):
            return []
    cleaned = _clean_object(obj, time_bound_ok=False)
    if cleaned is None:
        return []
    verb = (match.groupdict().get("cop") or "is").lower()
    importance = 0.75 if key in _HIGH_KEYS or key_words[-1] in _HIGH_KEYS else 0.6
    # Names keep their capitals ("my friend Elsa" -> "User's friend Elsa"); the first word,
    # capitalised only by the sentence, does not.
    raw = match.group("key").split()
    named = " ".join([raw[0].lower(), *raw[1:]])
    content = f"User's {_third_person_text(named)} {verb} {cleaned}"
    return [_Finding("fact", content, importance, match.string)]


def _pattern(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.IGNORECASE)


#: Tried in order against one clause; the first pattern that renders something wins.
_STATEMENT_PATTERNS: tuple[tuple[re.Pattern[str], Render], ...] = (
    # preferences
    (
        _pattern(
            rf"^i\s+{_ADV}(?:do\s+not|don't|dont)\s+{_ADV}(?P<verb>like|enjoy|love|care\s+for)\s+(?P<obj>.+)$"
        ),
        _render_negative_preference,
    ),
    (
        _pattern(rf"^i\s+{_ADV}(?:can't|cannot|can\s+not|cant)\s+stand\s+(?P<obj>.+)$"),
        _simple("preference", 0.75, "User cannot stand {obj}"),
    ),
    (
        _pattern(
            rf"^i\s+{_ADV}(?P<verb>prefer|like|love|adore|enjoy|hate|dislike|detest|loathe)\s+(?P<obj>.+)$"
        ),
        _render_preference,
    ),
    (
        _pattern(rf"^i(?:'d|\s+would)\s+{_ADV}(?P<verb>prefer|rather)\s+(?P<obj>.+)$"),
        _simple("preference", 0.7, "User would {verb} {obj}"),
    ),
    (
        _pattern(
            rf"^{_IM}\s+{_ADV}(?P<neg>not\s+)?(?:a\s+)?(?:big\s+|huge\s+|massive\s+)?fan\s+of\s+(?P<obj>.+)$"
        ),
        _simple("preference", 0.7, "User is {neg}a fan of {obj}"),
    ),
    (
        _pattern(rf"^{_IM}\s+{_ADV}into\s+(?P<obj>.+)$"),
        _simple("preference", 0.7, "User is into {obj}"),
    ),
    (
        _pattern(
            r"^my\s+(?:all[- ]time\s+)?(?:favou?rite|fav|fave)\s+(?P<key>[^\W\d_][\w' -]{0,40}?)"
            r"\s+(?P<cop>is|are)\s+(?P<obj>.+)$"
        ),
        _simple("preference", 0.75, "User's favourite {key} {cop} {obj}"),
    ),
    (
        _pattern(r"^please\s+(?P<adv>always|never|don't\s+ever|do\s+not\s+ever)\s+(?P<obj>.+)$"),
        _render_instruction,
    ),
    (
        _pattern(r"^(?P<adv>always|never)\s+(?P<obj>.+?),?\s+please$"),
        _render_instruction,
    ),
    (
        _pattern(
            r"^(?:from\s+now\s+on|in\s+(?:the\s+)?future|going\s+forward),?\s+(?:please\s+)?"
            r"(?P<obj>(?!(?:i|i'm|i'll|we|we'll)\b).+)$"
        ),
        _simple("preference", 0.8, "User wants the assistant to {obj} from now on"),
    ),
    # facts
    (
        _pattern(r"^my\s+(?:full\s+|first\s+|real\s+)?name(?:\s+is|'s)\s+(?P<obj>.+)$"),
        _render_name,
    ),
    (
        _pattern(r"^(?:please\s+|you\s+can\s+|just\s+)?call\s+me\s+(?P<obj>.+)$"),
        _render_call_me,
    ),
    (
        _pattern(
            rf"^(?:i\s+{_ADV}work|{_IM}\s+{_ADV}(?P<ing>working))\s+(?P<prep>at|for|as|in|on|with)\s+(?P<obj>.+)$"
        ),
        _render_work,
    ),
    (
        _pattern(rf"^(?:i|we)\s+{_ADV}live\s+(?P<prep>in|near|on|at)\s+(?P<obj>.+)$"),
        _simple("fact", 0.85, "User lives {prep} {obj}"),
    ),
    (
        _pattern(rf"^{_IM}\s+{_ADV}(?:based|located)\s+(?P<prep>in|near|out\s+of)\s+(?P<obj>.+)$"),
        _simple("fact", 0.85, "User is based {prep} {obj}"),
    ),
    (
        _pattern(rf"^(?:i|we)\s+{_ADV}(?P<verb>moved|relocated)\s+to\s+(?P<obj>.+)$"),
        _simple("fact", 0.8, "User {verb} to {obj}"),
    ),
    (
        _pattern(rf"^(?:{_IM}\s+{_ADV}|i\s+{_ADV}come\s+)(?:originally\s+)?from\s+(?P<obj>.+)$"),
        _simple("fact", 0.8, "User is from {obj}"),
    ),
    (
        _pattern(r"^i\s+was\s+born\s+(?P<prep>in|on)\s+(?P<obj>.+)$"),
        _simple("fact", 0.75, "User was born {prep} {obj}"),
    ),
    (
        _pattern(rf"^{_IM}\s+(?P<obj>\d{{1,3}})\s*(?:years?\s+old|yo|y/o)\b.*$"),
        _simple("fact", 0.7, "User is {obj} years old"),
    ),
    (
        _pattern(rf"^i\s+{_ADV}speak\s+(?P<obj>.+)$"),
        _simple("fact", 0.7, "User speaks {obj}"),
    ),
    (
        _pattern(rf"^i\s+{_ADV}study\s+(?P<obj>.+)$"),
        _simple("fact", 0.7, "User studies {obj}"),
    ),
    (
        _pattern(rf"^{_IM}\s+{_ADV}studying\s+(?P<obj>.+)$"),
        _simple("fact", 0.7, "User is studying {obj}"),
    ),
    (
        _pattern(rf"^i\s+{_ADV}use\s+(?P<obj>.+)$"),
        _simple("fact", 0.6, "User uses {obj}", time_bound_ok=False),
    ),
    (
        _pattern(
            rf"^{_IM}\s+{_ADV}(?P<obj>(?:an?\s+)?(?:{DIETS.alternation(loose_hyphens=True)}|"
            r"lactose[\s-]intolerant|allergic\s+to\s+.+|diabetic|celiac|coeliac)\b.*)$"
        ),
        _simple("fact", 0.85, "User is {obj}"),
    ),
    (
        _pattern(rf"^{_IM}\s+{_ADV}(?P<art>an?)\s+(?P<obj>.+)$"),
        _render_identity,
    ),
    (
        _pattern(
            rf"^i(?:\s+{_ADV}have(?:\s+got)?|'ve\s+{_ADV}got)\s+(?P<obj>(?:an?|one|two|three|four|"
            r"five|six|seven|eight|nine|ten|\d+)\s+.+)$"
        ),
        _render_have,
    ),
    (
        _pattern(
            rf"^{_IM}\s+(?P<obj>[^\W\d_][\w'-]*(?:\s+[^\W\d_][\w'-]*){{0,2}})(?:,\s*(?P<appos>.+))?$"
        ),
        _render_introduction,
    ),
    (
        _pattern(
            r"^my\s+(?P<key>[^\W\d_][\w'-]*(?:\s+[^\W\d_][\w'-]*){0,3}?)\s+(?P<cop>is|are)\s+"
            r"(?P<obj>.+)$"
        ),
        _render_possession,
    ),
    (
        _pattern(r"^my\s+(?P<key>[^\W\d_][\w-]*(?:\s+[^\W\d_][\w-]*){0,3}?)'s\s+(?P<obj>.+)$"),
        _render_possession,
    ),
)


def _statements(clause: str) -> list[_Finding]:
    """The preference or fact one clause states, if any pattern recognises it."""
    clause = clause.strip(" ,;:-")
    for pattern, render in _STATEMENT_PATTERNS:
        match = pattern.match(clause)
        if match is not None:
            findings = render(match)
            if findings:
                return findings
    return []
