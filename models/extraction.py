"""Extraction: turning a consolidation request into memory candidates.

An :class:`Extractor` reads the transcript carried by a :class:`ConsolidationRequested`
event and proposes :class:`MemoryCandidate` values. The caller records what it returned as
an ``ExtractionRecorded`` event, so a replay never runs an extractor twice. Extractors that
call an LLM do I/O and live outside ``models``; :class:`OfflineExtractor`, here, needs no
model and is deterministic: the same request always yields the same candidates, in the same
order, with the same ``raw_response``.

Conventions of the offline extractor
------------------------------------
* **Source roles.** Only what the *user* said becomes an episode, preference, fact or
  correction. Assistant turns feed the summary alone, labelled as the assistant's, so an
  assistant's "I recommend ..." is never stored as the user's taste. System and tool messages
  are ignored: they hold prompts and recalled memories, and extracting recalled memories
  again is how junk multiplies.
* **Statements** (preferences, facts, corrections) are third-person sentences with ``User``
  as the subject and no final full stop: "User prefers dark roast coffee", "User's name is
  Maria", "User works at Acme". The words after the verb are the user's own, with first-person
  pronouns rewritten (my → their, I → they); nothing is translated. The patterns are English;
  other languages still give episodes and summaries.
* **Corrections** read ``Correction: <statement>``, e.g. "Correction: User lives in Lisbon,
  not Porto". When the corrected statement is itself a fact or preference it is emitted too,
  and an earlier candidate of the same request that it contradicts ("User lives in Porto")
  is dropped. A correction that matches no pattern quotes the user: ``Correction: User said
  "..."``.
* **Episodes** are the user's turn verbatim (whitespace collapsed), in its own language.
  Greetings, thanks and one-word replies are not episodes. Each carries its ``context``
  (:func:`memstream.models.conversation.turn_context`): the day, the turn before and after,
  who said each, and relative times resolved to dates ("last Tuesday (10 March 2026)"); its
  ``source_event_ids`` name the turn first, then every other turn the context shows.
* **Speakers.** When the user turns carry several names (a group conversation among named
  people, none of them known to be the user), statements and episodes are written about
  their speaker by name ("Tom works at Bosch", "Tom: I work at Bosch now"), never as the
  user's. The summary labels each sentence with its speaker's name (``User:`` and
  ``Assistant:`` when the messages carry none).
* **The summary** is extractive: 2-3 sentences from the transcript, each prefixed with its
  speaker (``User:`` or ``Assistant:`` when the messages carry no name), starting with the
  user's first request, then the sentences with the highest term-frequency score; sentences
  that name someone or something or hold a number score three times more (small talk
  between people is frequent and says nothing). A conversation that opens with small talk
  starts with its best sentence instead. It needs at least two messages; it names every
  message it quotes in ``source_event_ids``.
* **Entities** are capitalised names (people, places, organisations, products) found by a
  heuristic and listed in each candidate's ``entities``. No ``entity`` candidates are emitted:
  a bare name is a poor memory that crowds retrieval, while the ``entities`` field already
  gives a projection what it needs for an entity graph.
* **Importance:** name 0.9; employer, home, diet and allergies 0.85; standing instructions
  ("please always ...") 0.85; corrections 0.85; other facts 0.6-0.8; preferences 0.7-0.8;
  summary 0.55; episodes 0.4 (0.45 with names or numbers). Candidates under
  :data:`MIN_IMPORTANCE` are dropped; duplicates within a request (same text once case,
  punctuation and spacing are ignored) are merged, keeping every source. Content is capped at
  :data:`MAX_CONTENT_CHARS` and the work per message is bounded.

Examples
--------
>>> from datetime import datetime, timezone
>>> at = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
>>> said = TranscriptMessage(
...     event_id="m-1", role="user", occurred_at=at,
...     content="Hi! My name is Maria and I prefer dark roast coffee.")
>>> request = ConsolidationRequested(
...     event_id="c-1", user_id="maria", session_id="s-1", occurred_at=at,
...     reason="session_closed", messages=(said,))
>>> for candidate in OfflineExtractor().extract(request).candidates:
...     print(candidate.memory_type, candidate.importance, candidate.content)
episode 0.45 Hi! My name is Maria and I prefer dark roast coffee.
fact 0.9 User's name is Maria
preference 0.8 User prefers dark roast coffee
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from memstream.models.conversation import speaker, truncate, turn_context
from memstream.models.events import (
    ConsolidationRequested,
    MemoryCandidate,
    MemoryType,
    TokenUsage,
    TranscriptMessage,
)

#: Candidates scoring below this are dropped (the seed consolidator's threshold).
MIN_IMPORTANCE = 0.3
#: Longest candidate content; longer text is cut at a word boundary and ends with "…".
MAX_CONTENT_CHARS = 500
#: Only this much of each message is analysed, so a pasted log cannot stall consolidation.
MAX_ANALYSED_CHARS = 20_000
MAX_SENTENCES_PER_MESSAGE = 200
#: Longer "sentences" are pasted text, not statements about the user.
MAX_STATEMENT_CHARS = 400
MAX_ENTITIES = 10
SUMMARY_SENTENCES = 3
SUMMARY_SENTENCE_CHARS = 160
#: A summary sentence that names someone or something, or holds a number, scores this much
#: more: small talk between people is frequent but says nothing (the dialogue benchmark).
SUMMARY_DETAIL_WEIGHT = 3.0

CORRECTION_IMPORTANCE = 0.85
SUMMARY_IMPORTANCE = 0.55
EPISODE_IMPORTANCE = 0.4
EPISODE_DETAIL_IMPORTANCE = 0.45


@dataclass(frozen=True)
class Extraction:
    """What an extractor made of one consolidation request.

    ``raw_response`` is what the model returned (for the offline extractor, a JSON dump of
    the candidates), recorded so the event explains itself without re-running anything.
    """

    candidates: tuple[MemoryCandidate, ...]
    raw_response: str
    model: str | None = None
    prompt_version: str | None = None
    usage: TokenUsage | None = None


@runtime_checkable
class Extractor(Protocol):
    """Turns a consolidation request into memory candidates.

    ``name`` and ``version`` identify the extractor in ``ExtractionRecorded`` and in the ids
    derived from it; change ``version`` whenever the output for the same input changes.
    """

    name: str
    version: str

    def extract(self, request: ConsolidationRequested) -> Extraction:
        """Propose memory candidates for ``request``; never raise on odd text."""
        ...


class OfflineExtractor:
    """A deterministic, model-free extractor: patterns, term frequencies, no clock.

    See the module docstring for the conventions it follows.

    Examples
    --------
    >>> extractor = OfflineExtractor()
    >>> (extractor.name, extractor.version)
    ('offline', '2')
    """

    name: str = "offline"
    version: str = "2"

    def extract(self, request: ConsolidationRequested) -> Extraction:
        """Extract episodes, preferences, facts, corrections and a summary from ``request``."""
        candidates = extract_candidates(request.messages)
        return Extraction(candidates=candidates, raw_response=dump_candidates(candidates))


def dump_candidates(candidates: Sequence[MemoryCandidate]) -> str:
    """The JSON an LLM extractor would return for ``candidates``: ``{"candidates": [...]}``.

    Examples
    --------
    >>> dump_candidates([MemoryCandidate(memory_type="fact", content="x", importance=0.6)])
    '{"candidates":[{"memory_type":"fact","content":"x","importance":0.6,"source_event_ids":[],"entities":[],"context":""}]}'
    """
    payload = {"candidates": [candidate.model_dump(mode="json") for candidate in candidates]}
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def extract_candidates(messages: Sequence[TranscriptMessage]) -> tuple[MemoryCandidate, ...]:
    """The offline extractor's candidates for a transcript, in transcript order.

    Per turn of the user (or, in a conversation among several named people, of each of
    them): its episode with the conversation around it, then what its sentences state; the
    summary comes last.
    """
    turns = [
        _Turn(message, _sentences(message.content))
        for message in messages
        if message.role in ("user", "assistant")
    ]
    said = [turn.message for turn in turns]
    attributed = _attributed_speakers(said)
    known_names = _mid_sentence_capitals(sentence for turn in turns for sentence in turn.sentences)
    drafts = _Drafts()
    for index, turn in enumerate(turns):
        if turn.message.role != "user":
            continue
        source = (turn.message.event_id,)
        subject = speaker(turn.message) if attributed else None
        entities = [name for s in turn.sentences for name in _entities(s, known_names)]
        text = " ".join(turn.message.content[:MAX_ANALYSED_CHARS].split())
        if text:
            context, shown = turn_context(said, index)
            drafts.add(
                "episode",
                text if subject is None else f"{subject}: {text}",
                _episode_importance(text, entities),
                (*source, *(s for s in shown if s not in source)),
                entities,
                context,
            )
        for sentence in turn.sentences:
            analysis = _analyse_sentence(sentence)
            for stale in analysis.stale:
                drafts.discard(_about(stale, subject), ("fact", "preference"))
            for finding in analysis.findings:
                found = _entities(finding.source_text, known_names)
                drafts.add(
                    finding.memory_type,
                    _about(finding.content, subject),
                    finding.importance,
                    source,
                    found,
                )
    summary = _summary(turns, known_names)
    if summary is not None:
        drafts.add(
            "summary", summary.content, SUMMARY_IMPORTANCE, summary.sources, summary.entities
        )
    return drafts.candidates()


def _attributed_speakers(messages: Sequence[TranscriptMessage]) -> bool:
    """Whether the user turns come from several named people (a group conversation).

    Then no one of them can be told to be the user, and each statement is written about its
    speaker by name ("Tom works at Bosch"), never as the user's. One name, or none, on every
    user turn: they are the user's own.
    """
    names = {speaker(m).casefold() for m in messages if m.role == "user" and m.name}
    return len(names) > 1


def _about(statement: str, subject: str | None) -> str:
    """``statement`` ("User works at Acme", "Correction: User ...") about ``subject``."""
    if subject is None:
        return statement
    prefix = "Correction: " if statement.startswith("Correction: ") else ""
    rest = statement[len(prefix) :]
    if rest.startswith("User"):
        rest = subject + rest[len("User") :]
    return prefix + rest


# --- word lists ----------------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text``."""
    return frozenset(text.split())


#: Stopwords, pronouns and sentence starters: never scored, never a sentence-initial entity.
_COMMON_WORDS = _words(
    """
    a about above actually after again against all almost also although always am an and any
    anyway are aren't as at be because been before being below between both but by can can't
    cannot could couldn't did didn't do does doesn't doing don't done down during each either
    else even ever every few first for from further get gets getting give go going gone got
    great had hadn't has hasn't have haven't having he he'd he'll he's hello help her here
    hers herself hey hi him himself his how however i i'd i'll i'm i've if in into is isn't
    it it's its itself just know last let let's like made make many may maybe me might mine
    more most much must my myself need never new next no nope nor not now of off often oh ok
    okay on once one only or other our ours ourselves out over own perhaps please plus quite
    rather really right said same say see she she'd she'll she's should shouldn't since so
    some something sometimes sorry still such sure take tell than thank thanks that that's
    the their theirs them themselves then there there's these they they'd they'll they're
    they've thing things think this those though through thus to too under until up upon us
    use used very want was wasn't we we'd we'll we're we've well were weren't what what's
    when where where's whether which while who who's whom why will with within without
    won't would wouldn't yes yet you you'd you'll you're you've your yours yourself
    yourselves yeah yep wow great good nice cool awesome perfect fine sounds looks here's
    first second third also another next finally today tomorrow yesterday tonight
    """
)
_DAYS_AND_MONTHS = _words(
    """
    monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december
    """
)
#: Capitalised words that are never entities wherever they stand.
_NEVER_ENTITIES = _DAYS_AND_MONTHS | _words(
    """
    i i'm i've i'd i'll ok okay hi hello hey thanks user assistant am pm fyi asap btw lol
    imo imho tldr ps eta faq diy yes no
    """
)
#: Words that carry no content in a chat turn ("ok thanks!", "great, got it").
_FILLER_WORDS = _words(
    """
    ok okay k kk thanks thank you thx ty tysm cheers hi hello hey yo yes yeah yep yup no nope
    nah sure cool great nice good fine perfect awesome excellent wonderful lovely amazing bye
    goodbye see later lol haha hmm hm um uh ah oh wow got it alright right so much a lot very
    really that's thats sounds np please all for the help appreciated works worked done
    morning evening night day and too also that this is was will do i we me there makes sense
    indeed exactly agreed of course welcome again
    """
)
#: Whole turns that are trivial in languages the word list above does not cover.
_TRIVIAL_TURNS = _words(
    """
    merci danke gracias obrigado obrigada grazie ciao hola bonjour salut ja nein oui non si sí
    da спасибо привет пока 谢谢 好的 好 嗯 ありがとう ありがとうございます はい うん 감사합니다 네
    """
)
_DEMONYMS = _words(
    """
    american british english french german italian spanish portuguese chinese japanese korean
    indian canadian mexican brazilian dutch swiss swedish norwegian danish finnish polish
    russian ukrainian irish scottish welsh australian greek turkish israeli egyptian nigerian
    kenyan argentinian chilean colombian peruvian vietnamese thai filipino indonesian
    pakistani austrian belgian czech hungarian romanian
    """
)
#: "my X is ..." about these is about the moment, not the person.
_EPHEMERAL_KEYS = _words(
    """
    question problem issue point guess bad answer code error output request idea concern
    understanding thought thoughts bet reasoning plan mistake fault pleasure apologies turn
    query prompt message reply response bug test tests build internet connection screen
    battery head flight train meeting appointment order package delivery current last first
    next previous main only biggest take hope worry suggestion solution script function file
    result results version favourite favorite fav fave and or i me you we
    """
)
_HIGH_KEYS = _words(
    """
    birthday email phone address age job role title occupation profession employer company
    wife husband partner son daughter kids children child boss manager pronouns timezone
    nationality hometown dog cat pet team username handle website language tongue name
    """
)
#: "I have a ..." about these is about the moment.
_EPHEMERAL_HAVE = _words(
    """
    question questions problem problems issue issues doubt idea bug error feeling suggestion
    request favor favour follow-up concern query task look sec second minute moment meeting
    deadline call appointment lot few bit couple headache cold fever hunch clue
    """
)
#: "I like it/that/this" refers to the reply in front of the user, not a lasting taste.
_DEICTIC = _words("it this that these those them one you")
_RESPONSE_NOUNS = _words(
    """
    answer response reply suggestion idea plan explanation version code solution example list
    draft option approach proposal edit summary recommendation first second last
    """
)
_AUXILIARIES = _words(
    "do does did could would should can will may might must have has had shall don't"
)
_NOT_BUT_X_STOP = _words("only just merely even sure bad too so really quite that very")
_NOT_BUT_Y_STOP = _words("i i'm i've i'd i'll we you he she they it it's that this also still then")

# --- text helpers --------------------------------------------------------------------------

_IDEOGRAPHIC = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
#: Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer).
_UNSPACED = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
_TOKEN_RE = re.compile(rf"[{_IDEOGRAPHIC}]|[^\W_{_IDEOGRAPHIC}]+(?:'[^\W_{_IDEOGRAPHIC}]+)*")
_UNSPACED_RE = re.compile(rf"[{_UNSPACED}]")
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})
_FENCE_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\s*\n\s*")
_ABBREVIATION_END_RE = re.compile(
    r"\b(?:mr|mrs|ms|dr|prof|st|jr|sr|vs|e\.g|i\.e|inc|ltd)\.$", re.IGNORECASE
)
_BULLET_RE = re.compile(r"^(?:[-*•>#]+|\d+[.)])\s+")
_TERMINATORS = ".!?。！？…"


def _tokens(text: str) -> list[str]:
    """Word tokens; each Chinese or Japanese character is a token of its own."""
    return _TOKEN_RE.findall(text.translate(_QUOTES))


def _sentences(text: str) -> list[str]:
    """Split on . ! ? and newlines (not after common abbreviations); code blocks are skipped."""
    text = _FENCE_RE.sub("\n", text[:MAX_ANALYSED_CHARS])
    sentences: list[str] = []
    for piece in _SENTENCE_SPLIT_RE.split(text):
        piece = _BULLET_RE.sub("", " ".join(piece.split()))
        if not any(ch.isalnum() for ch in piece):
            continue
        if sentences and _ABBREVIATION_END_RE.search(sentences[-1]):
            sentences[-1] = f"{sentences[-1]} {piece}"
            continue
        sentences.append(piece)
        if len(sentences) >= MAX_SENTENCES_PER_MESSAGE:
            break
    return sentences


def _dedup_key(text: str) -> str:
    """Case, punctuation and spacing folded away: what counts as "the same text"."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(" " if unicodedata.category(ch)[0] in "PZ" else ch for ch in folded)
    return " ".join(kept.split())


def _substance(text: str) -> int:
    """Roughly, how many content words ``text`` has (filler words do not count)."""
    count = 0
    for token in _tokens(text):
        if token.lower() in _FILLER_WORDS:
            continue
        if _UNSPACED_RE.search(token):
            count += max(1, len(token) // 2)
        else:
            count += 1
    return count


def _is_trivial(text: str) -> bool:
    """Greetings, thanks, acknowledgements and emoji-only turns."""
    return _dedup_key(text).replace(" ", "") in _TRIVIAL_TURNS or _substance(text) == 0


def _episode_importance(text: str, entities: Sequence[str]) -> float:
    """0.4 for a substantive user turn, 0.45 with names or numbers; trivial turns score 0."""
    if _is_trivial(text):
        return 0.0
    if _substance(text) < 3:
        return 0.2  # "yes, Lisbon": meaningless without the question, below MIN_IMPORTANCE
    if entities or any(ch.isdigit() for ch in text):
        return EPISODE_DETAIL_IMPORTANCE
    return EPISODE_IMPORTANCE


# --- pronouns and verbs --------------------------------------------------------------------

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


# --- statements: preferences and facts -----------------------------------------------------

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
            rf"^{_IM}\s+{_ADV}(?P<obj>(?:an?\s+)?(?:vegetarian|vegan|pescatarian|"
            r"lactose[\s-]intolerant|gluten[\s-]free|allergic\s+to\s+.+|diabetic|celiac|coeliac|"
            r"kosher|halal|teetotal)\b.*)$"
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


# --- sentences: markers, contrasts, corrections --------------------------------------------

_LEAD_IN_RE = re.compile(
    r"^(?:(?:oh|ah|well|also|and|but|so|btw|by\s+the\s+way|fyi|fwiw|honestly|anyway|plus|ps|"
    r"hi|hey|hello|ok|okay|yeah|yes|sure|just\s+so\s+you\s+know|for\s+the\s+record|"
    r"for\s+context|to\s+be\s+honest|tbh|in\s+fact)\b[\s,:;!.-]*)+",
    re.IGNORECASE,
)
_STRONG_MARKER_RE = re.compile(
    r"^(?:correction\s*:|to\s+correct\s+myself\b|let\s+me\s+correct\s+(?:that|myself)\b|"
    r"scratch\s+that\b|i\s+misspoke\b|i\s+was\s+wrong\b|my\s+mistake\b)[\s,:;!.-]*",
    re.IGNORECASE,
)
_WEAK_MARKER_RE = re.compile(r"^(?:actually|no|nope|oops|wait|hmm)\b[\s,:;!.-]*", re.IGNORECASE)
_INLINE_ACTUALLY_RE = re.compile(rf"^(?:i|{_IM})\s+actually\b", re.IGNORECASE)
_MEANT_RE = re.compile(
    r"^(?:what\s+)?i\s+meant(?:\s+to\s+say)?(?:\s+was)?(?:\s+that)?\s*[:,]?\s*(?P<obj>.+)$",
    re.IGNORECASE,
)
_HEDGE_RE = re.compile(
    r"^(?:i\s+think|i\s+guess|i\s+believe|i\s+suppose|i'd\s+say)\s+(?:that\s+)?(?=(?:i|i'm|my)\b)",
    re.IGNORECASE,
)
_CLAUSE_SPLIT_RE = re.compile(
    r"\s*;\s*|,?\s+(?:and|but|so|plus|also|while|whereas)\s+(?=(?:i|i'm|im|i've|i'd|my)\b)"
    r"|,\s+(?=(?:i|i'm|i've|my)\s)",
    re.IGNORECASE,
)
_FIRST_PERSON_START_RE = re.compile(r"^(?:i|i'm|im|my|not)\b", re.IGNORECASE)
_NOT_BUT_RE = re.compile(
    r"(?:^|(?<=\s))not\s+(?P<x>[^,;]{1,60}?),?\s+but\s+(?P<y>[^,;]+)(?P<rest>[,;].*)?$",
    re.IGNORECASE,
)
_TRAILING_CONTRAST_RE = re.compile(r",\s*not\s+(?P<x>[^,;]{1,60})$", re.IGNORECASE)
_INSTEAD_RE = re.compile(r"\binstead\b|\brather\s+than\b", re.IGNORECASE)
_NO_LONGER_VERB_RE = re.compile(
    rf"^i\s+{_ADV}no\s+longer\s+(?P<verb>[^\W\d_]+)\b(?P<rest>.*)$", re.IGNORECASE
)
_NO_LONGER_BE_RE = re.compile(rf"^{_IM}\s+{_ADV}no\s+longer\s+(?P<rest>.+)$", re.IGNORECASE)
_ANYMORE_VERB_RE = re.compile(
    rf"^i\s+{_ADV}(?:do\s+not|don't|dont)\s+(?P<verb>[^\W\d_]+)\b(?P<rest>.*?)\s+any\s?more$",
    re.IGNORECASE,
)
_ANYMORE_BE_RE = re.compile(rf"^{_IM}\s+not\s+(?P<rest>.+?)\s+any\s?more$", re.IGNORECASE)

_NO_MARKER, _WEAK, _STRONG = 0, 1, 2


@dataclass(frozen=True)
class _Analysis:
    findings: tuple[_Finding, ...] = ()
    #: Contents this sentence contradicts: earlier candidates with them are dropped.
    stale: tuple[str, ...] = ()


def _strip_markers(text: str) -> tuple[str, int]:
    """``text`` without greetings, discourse markers and correction markers; the marker seen."""
    marker = _NO_MARKER
    while True:
        before = text
        text = _LEAD_IN_RE.sub("", text, count=1)
        strong = _STRONG_MARKER_RE.match(text)
        if strong:
            text, marker = text[strong.end() :], _STRONG
        weak = _WEAK_MARKER_RE.match(text)
        if weak and not re.match(r"no\s+longer\b", text, re.IGNORECASE):
            text, marker = text[weak.end() :], max(marker, _WEAK)
        if text == before:
            return text.strip(), marker


def _split_contrast(text: str) -> tuple[str, str | None, str | None]:
    """``(positive, contrast, stale)`` for "not X but Y" and "Y, not X"; else ``(text, None, None)``.

    >>> _split_contrast("I live not in Porto but in Lisbon")
    ('I live in Lisbon', 'in Porto', 'I live in Porto')
    >>> _split_contrast("I live in Lisbon, not Porto")
    ('I live in Lisbon', 'Porto', 'I live in Porto')
    """
    if _FIRST_PERSON_START_RE.match(text):
        match = _NOT_BUT_RE.search(text)
        if match is not None:
            before = text[: match.start()]
            previous = before.split()[-1].lower() if before.split() else ""
            x, y, rest = (
                match.group("x").strip(),
                match.group("y").strip(),
                match.group("rest") or "",
            )
            if (
                x
                and y
                and previous not in _AUXILIARIES
                and x.split()[0].lower() not in _NOT_BUT_X_STOP
                and y.split()[0].lower() not in _NOT_BUT_Y_STOP
                and len(x.split()) <= 5
                and len(y.split()) <= 10
            ):
                return f"{before}{y}{rest}".strip(), x, f"{before}{x}{rest}".strip()
    match = _TRAILING_CONTRAST_RE.search(text)
    if match is not None:
        x = match.group("x").strip()
        positive = _TRAILING_FILLER_RE.sub("", text[: match.start()]).strip()
        words = positive.split()
        if x and len(x.split()) <= 5 and x.split()[0].lower() not in _NOT_BUT_X_STOP | _DEICTIC:
            width = len(x.split())
            stale = " ".join(words[:-width] + [x]) if len(words) > width else None
            return positive, x, stale
    return text, None, None


def _no_longer(clause: str) -> tuple[str, str] | None:
    """``(correction, stale statement)`` for "I no longer ..." and "I don't ... anymore"."""
    for regex in (_NO_LONGER_VERB_RE, _ANYMORE_VERB_RE):
        match = regex.match(clause)
        if match is not None:
            verb, rest = match.group("verb"), match.group("rest")
            content = f"User no longer {_third_person(verb)}{_third_person_text(rest)}"
            return content, f"I {verb}{rest}"
    for regex in (_NO_LONGER_BE_RE, _ANYMORE_BE_RE):
        match = regex.match(clause)
        if match is not None:
            rest = match.group("rest").strip()
            return f"User is no longer {_third_person_text(rest)}", f"I'm {rest}"
    return None


def _analyse_sentence(sentence: str) -> _Analysis:
    """What one user sentence states, corrects, and makes stale."""
    text = sentence.translate(_QUOTES).strip()
    if text.endswith("?") or len(text) > MAX_STATEMENT_CHARS:
        return _Analysis()  # questions assert nothing; overlong "sentences" are pasted text
    text = text.rstrip(" " + _TERMINATORS)
    text, marker = _strip_markers(text)
    meant = _MEANT_RE.match(text)
    if meant is not None:
        text, marker = meant.group("obj").strip(), _STRONG
    text = _HEDGE_RE.sub("", text)
    if not text:
        return _Analysis()
    bare_not_but = text.lower().startswith("not ")
    positive, contrast, stale_statement = _split_contrast(text)

    findings: list[_Finding] = []
    corrections: list[_Finding] = []
    stale: list[str] = []
    for clause in _CLAUSE_SPLIT_RE.split(positive):
        clause = _HEDGE_RE.sub("", _strip_markers(clause)[0])
        no_longer = _no_longer(clause)
        if no_longer is not None:
            content, was = no_longer
            corrections.append(
                _Finding("correction", f"Correction: {content}", CORRECTION_IMPORTANCE, clause)
            )
            stale.extend(finding.content for finding in _statements(was))
        else:
            findings.extend(_statements(clause))

    inline_actually = _INLINE_ACTUALLY_RE.match(text) is not None
    corrective = (
        marker == _STRONG
        or (bool(findings) and (contrast is not None or marker == _WEAK or inline_actually))
        or (not findings and contrast is not None and (marker == _WEAK or bare_not_but))
        or (not findings and marker == _WEAK and _INSTEAD_RE.search(text) is not None)
    )
    if corrective and not corrections:
        if findings:
            statement = "; ".join(finding.content for finding in findings)
            if contrast is not None:
                statement = f"{statement}, not {_third_person_text(contrast)}"
        elif meant is not None:
            statement = f"User meant {_third_person_text(text)}"
        else:
            statement = f'User said "{text}"'
        corrections.append(
            _Finding("correction", f"Correction: {statement}", CORRECTION_IMPORTANCE, sentence)
        )
        if stale_statement is not None:
            stale.extend(finding.content for finding in _statements(stale_statement))
    return _Analysis(tuple(corrections + findings), tuple(stale))


# --- entities ------------------------------------------------------------------------------

_NAME_WORD_RE = re.compile(r"[^\W\d_][\w'&.-]*\w|[^\W\d_]")


def _is_capitalised(word: str) -> bool:
    """Title case ("Lisbon", "McKinsey") or an acronym ("NASA", "AWS")."""
    if not word[0].isupper():
        return False
    if any(ch.islower() for ch in word):
        return True
    letters = sum(ch.isalpha() for ch in word)
    return 2 <= letters <= 6


def _name_words(sentence: str) -> list[tuple[str, int, int]]:
    """``(word, start, end)`` for each word, possessive "'s" removed."""
    words = []
    for match in _NAME_WORD_RE.finditer(sentence.translate(_QUOTES)):
        word = match.group(0)
        word = word.removesuffix("'s")
        words.append((word.rstrip("."), match.start(), match.end()))
    return words


def _mid_sentence_capitals(sentences: Iterable[str]) -> frozenset[str]:
    """Capitalised words seen somewhere other than at the start of a sentence."""
    seen: set[str] = set()
    for sentence in sentences:
        for word, _, _ in _name_words(sentence)[1:]:
            if word and _is_capitalised(word):
                seen.add(word)
    return frozenset(seen)


def _entities(sentence: str, known_names: frozenset[str]) -> list[str]:
    """Capitalised names in ``sentence``, runs of them joined ("New York", "Acme Corp").

    The first word of a sentence is capitalised anyway, so it counts only if it is not a
    common word and appears capitalised mid-sentence somewhere in the same request (or
    starts a longer run). Languages that capitalise every noun over-report; caseless scripts
    report nothing.
    """
    found: list[str] = []
    run: list[str] = []
    run_is_initial = False

    def flush() -> None:
        words = list(run)
        if run_is_initial:
            while words and words[0].lower() in _COMMON_WORDS:
                words.pop(0)
            if len(run) == 1 and words and words[0] not in known_names:
                words = []
        if words:
            found.append(" ".join(words))

    previous_end: int | None = None
    text = sentence.translate(_QUOTES)
    for index, (word, start, end) in enumerate(_name_words(sentence)):
        adjacent = previous_end is not None and not text[previous_end:start].strip()
        if word and _is_capitalised(word) and word.lower() not in _NEVER_ENTITIES:
            if run and adjacent:
                run.append(word)
            else:
                flush()
                run, run_is_initial = [word], index == 0
        elif run:
            flush()
            run = []
        previous_end = end
    if run:
        flush()
    return _unique(found)[:MAX_ENTITIES]


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# --- summary -------------------------------------------------------------------------------

_REQUEST_RE = re.compile(
    r"\?$|^(?:please|can|could|would|will|help|how|what|why|when|where|which|who|"
    r"i\s+need|i\s+want|i'd\s+like|i\s+would\s+like|i'm\s+looking|i\s+am\s+looking|let's|"
    r"tell|show|write|give|make|explain|find|plan|create|suggest|recommend)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Turn:
    message: TranscriptMessage
    sentences: list[str]


@dataclass(frozen=True)
class _SummarySentence:
    position: int
    turn_index: int
    turn: _Turn
    text: str
    terms: frozenset[str]


@dataclass(frozen=True)
class _Summary:
    content: str
    sources: tuple[str, ...]
    entities: list[str]


def _terms(sentence: str) -> list[str]:
    """Content words for term-frequency scoring (stopwords removed, lower case)."""
    terms = []
    for token in _tokens(sentence):
        term = token.lower()
        if term in _COMMON_WORDS or (len(term) < 2 and not re.match(rf"[{_IDEOGRAPHIC}]", term)):
            continue
        terms.append(term)
    return terms


def _summary(turns: Sequence[_Turn], known_names: frozenset[str]) -> _Summary | None:
    """An extractive summary: the user's first request, then the highest-scoring sentences.

    A sentence scores the transcript-wide frequencies of its distinct content words, divided
    by the square root of its length so long sentences do not always win; the user's
    sentences weigh a quarter more. A sentence from a message already quoted scores half, so
    the summary spans the conversation, and near-repeats of a chosen sentence are skipped.
    """
    eligible: list[_SummarySentence] = []
    for turn_index, turn in enumerate(turns):
        is_user = turn.message.role == "user"
        for sentence in turn.sentences:
            if len(_tokens(sentence)) < (3 if is_user else 4) or _is_trivial(sentence):
                continue
            if not is_user and sentence.endswith("?"):
                continue  # "Anything else?"
            terms = _terms(sentence)
            if terms:
                eligible.append(
                    _SummarySentence(len(eligible), turn_index, turn, sentence, frozenset(terms))
                )
    user_sentences = [s for s in eligible if s.turn.message.role == "user"]
    if not user_sentences or len({s.turn_index for s in eligible}) < 2:
        return None  # one message is already its own episode

    frequency: Counter[str] = Counter()
    for candidate in eligible:
        frequency.update(_terms(candidate.text))
    scores = {
        s.position: (1.25 if s.turn.message.role == "user" else 1.0)
        * (SUMMARY_DETAIL_WEIGHT if _has_detail(s.text, known_names) else 1.0)
        * sum(frequency[term] for term in sorted(s.terms))
        / math.sqrt(len(s.terms))
        for s in eligible
    }

    opening_turn = user_sentences[0].turn_index
    opening = [s for s in user_sentences if s.turn_index == opening_turn]
    detailed = [s for s in opening if _has_detail(s.text, known_names)]
    request = next((s for s in detailed if _REQUEST_RE.search(s.text)), None)
    if request is None and detailed:
        request = detailed[0]
    if request is None:
        # The conversation opens with small talk (people chatting, "How was your weekend?"):
        # the summary starts with its best sentence instead of the first words said.
        request = max(user_sentences, key=lambda s: (scores[s.position], -s.position))
    chosen = [request]
    while len(chosen) < SUMMARY_SENTENCES:
        quoted = {c.turn_index for c in chosen}
        best: _SummarySentence | None = None
        best_score = 0.0
        for candidate in eligible:
            if any(_jaccard(candidate.terms, c.terms) >= 0.6 for c in chosen):
                continue  # also skips the chosen sentences themselves
            score = scores[candidate.position] * (0.5 if candidate.turn_index in quoted else 1.0)
            if best is None or score > best_score:
                best, best_score = candidate, score
        if best is None:
            break
        chosen.append(best)
    if len(chosen) < 2:
        return None
    chosen.sort(key=lambda s: s.position)

    parts = []
    for picked in chosen:
        label = speaker(picked.turn.message)
        text = truncate(picked.text, SUMMARY_SENTENCE_CHARS)
        if text[-1] not in _TERMINATORS:
            text += "."
        parts.append(f"{label}: {text}")
    sources = tuple(_unique(s.turn.message.event_id for s in chosen))
    entities = _unique(name for s in chosen for name in _entities(s.text, known_names))
    return _Summary(" ".join(parts), sources, entities[:MAX_ENTITIES])


def _has_detail(sentence: str, known_names: frozenset[str]) -> bool:
    """Whether a sentence names someone or something, or holds a number: what a summary is
    for, unlike small talk ("Work has been busy")."""
    return bool(_entities(sentence, known_names)) or any(ch.isdigit() for ch in sentence)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


# --- assembling candidates -----------------------------------------------------------------


@dataclass
class _Draft:
    memory_type: MemoryType
    content: str
    importance: float
    sources: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    context: str = ""


class _Drafts:
    """Candidates being collected, merged by normalised content."""

    def __init__(self) -> None:
        self._by_key: dict[str, _Draft] = {}

    def add(
        self,
        memory_type: MemoryType,
        content: str,
        importance: float,
        sources: Iterable[str],
        entities: Iterable[str],
        context: str = "",
    ) -> None:
        content = truncate(content.strip(), MAX_CONTENT_CHARS)
        key = _dedup_key(content)
        if not key:
            return
        draft = self._by_key.get(key)
        if draft is None:
            draft = self._by_key[key] = _Draft(memory_type, content, importance, context=context)
        else:
            draft.importance = max(draft.importance, importance)
        draft.sources = _unique([*draft.sources, *sources])
        draft.entities = _unique([*draft.entities, *entities])[:MAX_ENTITIES]

    def discard(self, content: str, memory_types: tuple[MemoryType, ...]) -> None:
        key = _dedup_key(truncate(content.strip(), MAX_CONTENT_CHARS))
        draft = self._by_key.get(key)
        if draft is not None and draft.memory_type in memory_types:
            del self._by_key[key]

    def candidates(self) -> tuple[MemoryCandidate, ...]:
        return tuple(
            MemoryCandidate(
                memory_type=draft.memory_type,
                content=draft.content,
                importance=round(draft.importance, 2),
                source_event_ids=tuple(draft.sources),
                entities=tuple(draft.entities),
                context=draft.context,
            )
            for draft in self._by_key.values()
            if draft.importance >= MIN_IMPORTANCE
        )

