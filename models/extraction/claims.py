"""Claims: what a user sentence asserts about someone, as subject, attribute and value, read
by patterns and without a model.

:func:`read_claims` finds, anywhere in a sentence (a claim is often said in passing: "work
is calmer since I moved to Porto"), statements of the kinds a memory must follow when they
change: where someone lives and works, their job and employer, numbers (a budget, a rent, a
count), dates and deadlines, people and relationships, pets and possessions, likes,
dislikes and preferences, diet and health, tools, and plans. Each becomes a
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
>>> [(f.claim.attribute, f.claim.value, f.content) for f in read_claims(
...     "Work is calmer since I moved to Porto.", "User", at)]
[('home', 'Porto', 'User lives in Porto')]
>>> [(f.claim.subject, f.claim.attribute, f.claim.value) for f in read_claims(
...     "My sister lives in Leeds now.", "User", at)]
[("User's sister", 'home', 'Leeds')]
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from memstream.models.beliefs import attribute_key
from memstream.models.events.memory import Cardinality, Claim, ClaimCue, MemoryType
from memstream.models.extraction.statements import _TIME_BOUND_RE, _clean_object
from memstream.models.extraction.words import _words

#: Longest value kept (words); a longer stretch is a clause, not a value.
MAX_VALUE_WORDS = 6

# --- word classes ------------------------------------------------------------------------

_RELATIONS = (
    r"(?:best\s+friend|sister|brother|mom|mum|mother|dad|father|wife|husband|partner|"
    r"girlfriend|boyfriend|fianc[eé]e?|son|daughter|kid|child|friend|boss|manager|roommate|"
    r"flatmate|cousin|aunt|uncle|grandma|grandmother|grandpa|grandfather|niece|nephew|"
    r"colleague|coworker|co-worker|neighbou?r|twin|parents|in-laws|sibling|stepmom|stepdad)"
)
#: Relations a person has one of at a time: a new one replaces the old.
_ONE_RELATIONS = frozenset(
    {"wife", "husband", "partner", "girlfriend", "boyfriend", "fiance", "fiancé", "fiancee",
     "fiancée", "boss", "manager", "roommate", "flatmate"}
)
_ADVERBS = (
    r"(?:(?:just|recently|finally|now|actually|officially|already|also|still|currently|"
    r"really|totally|basically|mostly|definitely|kind\s+of|sort\s+of|since|then|eventually|"
    r"even|only|both|all)\s+)*"
)
_I = r"(?:i|we)"
_IM = r"(?:i'm|im|i\s+am|we're|we\s+are)"
_IVE = r"(?:i've|i\s+have|we've|we\s+have|i|we)"
_MY = r"(?:my|our)"
#: A subject: the speaker, someone the speaker names by relation, or he / she.
_SUBJECT = (
    rf"(?P<subj>(?:i|we)(?=\s|'|$)|{_MY}\s+(?P<rel>{_RELATIONS})"
    r"(?:\s*,?\s+(?P<relname>[A-Z][\w'-]+))?|he|she)"
)
#: Whose attribute a "my X is Y" statement gives: the speaker's ("my"), or someone's the
#: speaker names ("my sister's", "her").
_OWNER = rf"(?P<owner>{_MY}\s+(?:(?P<orel>{_RELATIONS})(?:'s|s')\s+)?|(?P<opron>his|her)\s+)"
_BE = r"(?:'m|'s|'re|\s+am|\s+is|\s+are)"
_HAVE3 = r"(?:'ve|'s|\s+have|\s+has)?"

_MONTHS = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
)
_WEEKDAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_DATE = (
    rf"(?:(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?(?:\s+of)?\s+{_MONTHS}(?:\s+\d{{4}})?|"
    rf"{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|{_MONTHS}(?:\s+\d{{4}})?|"
    rf"(?:next\s+|this\s+)?{_WEEKDAYS}|the\s+\d{{1,2}}(?:st|nd|rd|th)|"
    r"\d{1,2}/\d{1,2}(?:/\d{2,4})?|\d{4}-\d{2}-\d{2}|(?:the\s+)?(?:end|middle|start|beginning)"
    rf"\s+of\s+(?:{_MONTHS}|next\s+month|the\s+month|the\s+year)|(?:early|mid|late)[\s-]{_MONTHS}|"
    r"q[1-4]|next\s+(?:week|month|year|spring|summer|autumn|fall|winter))"
)
_MONEY = (
    r"(?:(?:[$€£¥]|usd|eur|gbp)\s*)?\d[\d,.]*(?:\s*(?:k|m|bn|thousand|million)\b)?"
    r"(?:\s*(?:euros?|dollars?|pounds?|bucks|usd|eur|gbp|chf|yen|per\s+month|a\s+month|"
    r"a\s+year|per\s+year|per\s+night|a\s+night|kg|kilos?|lbs?|pounds|km|miles|cm|m2|"
    r"square\s+meters|sq\s*ft|hours?|days?|weeks?|people|guests|seats?|rooms?)\b)*"
)
_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a dozen": 12,
}
_COUNT = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_PETS = (
    r"(?:dog|puppy|cat|kitten|hamster|rabbit|bunny|parrot|bird|fish|goldfish|turtle|tortoise|"
    r"snake|lizard|gecko|horse|pony|guinea\s+pig|ferret|budgie|chicken|goat|pig|"
    r"dachshund|greyhound|beagle|labrador|poodle|terrier|spaniel|collie|husky|retriever|pug|"
    r"corgi|bulldog|chihuahua|dalmatian|schnauzer|boxer|whippet|sheepdog|cockatiel|canary|"
    r"tabby|siamese)"
)
_DIETS = (
    r"(?:vegetarian|vegan|pescatarian|pescetarian|flexitarian|carnivore|keto|paleo|"
    r"gluten[\s-]free|dairy[\s-]free|lactose[\s-]free|sugar[\s-]free|kosher|halal|"
    r"teetotal|sober|alcohol[\s-]free|on\s+a\s+(?:diet|[\w-]+\s+diet))"
)
_STATUSES = (
    r"(?:single|married|engaged|divorced|separated|widowed|dating\s+someone|in\s+a\s+relationship|"
    r"seeing\s+someone)"
)
_CHANGE_CUES = re.compile(
    r"\b(?:now|these\s+days|nowadays|anymore|any\s+more|no\s+longer|moved|moving|relocated|"
    r"switched|switching|changed|changing|new|went\s+up|went\s+down|increased|decreased|rose|"
    r"dropped|actually|since|now\s+that|finally|recently|just|update|correction|instead|"
    r"pushed|postponed|rescheduled|promoted|joined|started|became|got)\b",
    re.IGNORECASE,
)
_ALSO_CUES = re.compile(
    r"\b(?:also|too|as\s+well|another|a\s+second|second|in\s+addition|additionally|besides|"
    r"one\s+more|both|a\s+new\s+one\s+as\s+well)\b",
    re.IGNORECASE,
)
#: What makes a sentence say nothing about how things are: wishes, hypotheses, questions.
_IRREAL = re.compile(
    r"\b(?:if|would|wouldn't|could|might|maybe|perhaps|wish|hope|hoping|want\s+to|wanna|"
    r"wants\s+to|thinking\s+(?:about|of)|considering|dream(?:s|ing)?\s+(?:of|about)|"
    r"someday|one\s+day|should\s+i|do\s+you|can\s+you|whether|unless|imagine|pretend|"
    r"plan(?:s|ning)?\s+to|going\s+to|gonna|about\s+to|will|i'll|we'll)\b",
    re.IGNORECASE,
)
#: Where a value ends: punctuation, a conjunction, a clause of its own.
_VALUE_END = re.compile(
    r"\s*(?:[,;:!?()\[\]\"]|\.(?:\s|$)|\s[-–—]\s|\b(?:and|but|so|because|since|as|with|which|"
    r"who|where|when|while|though|although|now|these\s+days|nowadays|again|anymore|any\s+more|"
    r"too|as\s+well|last|this|that|after|before|until|till|in\s+order|at\s+the\s+moment|"
    r"right\s+now|recently|already|btw|lol|haha|instead|rather|not|over|than|for\s+(?:a|the|about|"
    r"over|almost|nearly|\d)|from|if|or|starting|effective|by|thanks|please|which|lately)\b)",
    re.IGNORECASE,
)
#: A number that is a time of day ("6pm", "6:30").
_CLOCK = re.compile(r"\s*(?::\d{2}|[ap]\.?m\b)", re.IGNORECASE)
#: Where a job title ends ("a nurse at St Mary's", "an engineer in Munich").
_JOB_END = re.compile(r"\s+(?:at|in|for|with|from|on|near)\s+", re.IGNORECASE)
#: What a preference is chosen over ("trains to planes", "tea over coffee").
_OVER = re.compile(r"\s+(?:over|rather\s+than|instead\s+of|more\s+than|to|than)\s+", re.IGNORECASE)
#: Where a preferred option ends ("a window seat on long flights").
_OPTION_END = re.compile(r"\s+(?:on|when|for|in|at|during|whenever|if)\s+", re.IGNORECASE)
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an|my|our)\s+", re.IGNORECASE)
#: Nouns of occupations that do not end like one (-er, -or, -ist, ...).
_OCCUPATIONS = _words(
    """
    nurse doctor chef pilot lawyer student dentist surgeon vet veterinarian midwife
    paramedic firefighter barista cashier clerk judge attorney coach tutor professor
    intern apprentice analyst architect economist mechanic plumber electrician carpenter
    pharmacist physician therapist psychologist psychiatrist scientist engineer
    consultant accountant journalist editor author artist designer developer programmer
    freelancer entrepreneur founder ceo cto cfo director secretary receptionist
    assistant librarian waiter waitress bartender chemist biologist physicist researcher
    postdoc lecturer principal realtor agent broker banker trader nanny caregiver carer
    cleaner farmer baker butcher florist tailor soldier officer detective sergeant
    captain admin
    """
)
_NOT_OCCUPATIONS = _words(
    """
    mother father brother sister daughter son member owner lover beginner fan user
    customer player reader listener speaker smoker drinker runner swimmer walker sleeper
    person people partner neighbour neighbor fighter thinker dreamer introvert extrovert
    early bird night owl morning evening worker foodie rider driver winner loser
    """
)
_OCCUPATION_ENDINGS = (
    "er", "or", "ist", "ian", "ant", "ent", "eer", "ect", "man", "woman", "person",
)


@dataclass(frozen=True)
class ClaimFinding:
    """A claim read from a sentence, with the statement that renders it."""

    claim: Claim
    memory_type: MemoryType
    content: str
    importance: float


# --- values --------------------------------------------------------------------------------


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


def _third(verb: str) -> str:
    return {"have": "has", "be": "is", "do": "does", "go": "goes"}.get(verb, verb + "s")


# --- ends of temporary states ----------------------------------------------------------------


def _end_of_day(at: datetime) -> datetime:
    return at.replace(hour=23, minute=59, second=59, microsecond=0)


_DURATION_RE = re.compile(
    rf"\b(?:(?:for\s+|over\s+)?(?:this|the)\s+(?P<span>week|weekend|month)|today|tonight|"
    rf"(?:for\s+)?(?:the\s+)?(?:next|coming)\s+(?P<n>{_COUNT}|few|couple\s+of)\s+"
    r"(?P<unit>days?|weeks?|months?)|"
    rf"for\s+(?:just\s+|only\s+)?(?P<n2>{_COUNT}|a|an|a\s+few|a\s+couple\s+of)\s+"
    r"(?P<unit2>days?|weeks?|months?)|"
    rf"(?P<n3>{_COUNT}|a|one)[\s-](?P<unit3>day|week|month)\s+(?:stint|secondment|trial|"
    r"placement|assignment|cover|break|challenge|experiment|stay|trip|contract|loan)|"
    rf"(?:until|till|til|through|thru)\s+(?P<until>{_WEEKDAYS}|the\s+weekend|next\s+week|"
    rf"the\s+end\s+of\s+(?:the\s+)?(?:week|month)|{_MONTHS}\s+\d{{1,2}}|"
    rf"\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTHS}|the\s+\d{{1,2}}(?:st|nd|rd|th)?))\b",
    re.IGNORECASE,
)


def stated_end(text: str, at: datetime) -> datetime | None:
    """The end a state says it has ("this week", "for the next three days", "until
    Friday"), from ``at`` (the turn's time); None when it states none.

    Examples
    --------
    >>> from datetime import UTC
    >>> at = datetime(2026, 3, 4, 10, 0, tzinfo=UTC)  # a Wednesday
    >>> stated_end("I'm in Berlin this week", at).isoformat()
    '2026-03-08T23:59:59+00:00'
    >>> stated_end("I live in Berlin", at) is None
    True
    """
    match = _DURATION_RE.search(text)
    if match is None:
        return None
    span = match.group("span")
    unit = match.group("unit") or match.group("unit2") or match.group("unit3")
    if span == "week":
        return _end_of_day(at + timedelta(days=6 - at.weekday()))
    if span == "weekend":
        return _end_of_day(at + timedelta(days=max(6 - at.weekday(), 0)))
    if span == "month":
        last = calendar.monthrange(at.year, at.month)[1]
        return _end_of_day(at.replace(day=last))
    if unit:
        raw = (match.group("n") or match.group("n2") or match.group("n3") or "").lower()
        count = 3 if "few" in raw else 2 if "couple" in raw else _count(raw)
        days = {"day": 1, "week": 7, "month": 30}[unit.lower().rstrip("s")]
        return _end_of_day(at + timedelta(days=count * days))
    until = (match.group("until") or "").lower()
    if until:
        if "end of" in until:
            span_end = "month" if "month" in until else "week"
            return stated_end(f"this {span_end}", at)
        day_of_month = re.search(r"\d{1,2}", until)
        if day_of_month is not None:
            return _next_day_of_month(at, int(day_of_month.group()), until)
        for index, day in enumerate(calendar.day_name):
            if day.lower() in until:
                ahead = (index - at.weekday()) % 7 or 7
                return _end_of_day(at + timedelta(days=ahead))
        return _end_of_day(at + timedelta(days=7))
    return _end_of_day(at)  # today, tonight


def _next_day_of_month(at: datetime, day: int, text: str) -> datetime | None:
    """The first date on or after ``at`` with day ``day`` (of the month ``text`` names, if
    it names one), at the end of that day; None when there is no such date within a year."""
    months = [i for i, name in enumerate(calendar.month_name) if name and name.lower()[:3] in text]
    for ahead in range(13):
        month_index = (at.month - 1 + ahead) % 12 + 1
        year = at.year + (at.month - 1 + ahead) // 12
        if months and month_index not in months:
            continue
        if day <= calendar.monthrange(year, month_index)[1]:
            moment = _end_of_day(at.replace(year=year, month=month_index, day=day))
            if moment >= at:
                return moment
    return None


def _count(text: str) -> int:
    text = text.strip().lower()
    if text.isdigit():
        return int(text)
    return _NUMBER_WORDS.get(text, 1)  # "a", "an", "one"


#: A statement of how someone is for now: a subject and a verb in the present ("I'm at the
#: Lyon branch", "my brother is doing keto", "I report to Felipe").
_PRESENT_STATE = re.compile(
    rf"\b(?:{_IM}|we're|(?:i|we)\s+(?!\w+ed\b)\w+|(?:he|she)(?:'s|\s+is)|"
    rf"{_MY}\s+{_RELATIONS}(?:\s+[A-Z]\w+)?\s+(?:is|'s|has|\w+s)\b)",
    re.IGNORECASE,
)


def state_end(sentence: str, at: datetime) -> datetime | None:
    """The end a sentence gives a present state of someone ("I'm at the Lyon branch until
    Friday", "my brother is doing keto for one week only"); None when it states none, or
    when its duration reaches back ("I've been vegetarian for two weeks")."""
    text = " ".join(sentence.replace("\u2019", "'").split())
    if text.endswith("?") or _PAST_DURATION.search(text) or not _PRESENT_STATE.search(text):
        return None
    return stated_end(text, at)


# --- the patterns ---------------------------------------------------------------------------


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


def _p(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.IGNORECASE)


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
    if head in _NOT_OCCUPATIONS or words[0] in _NOT_OCCUPATIONS or " ".join(words[-2:]) in (
        "night owl", "early bird", "morning person", "night person"
    ):
        return None
    if head not in _OCCUPATIONS and not head.endswith(_OCCUPATION_ENDINGS):
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
    many = relation not in _ONE_RELATIONS
    return _Read(
        "person", relation, name, cardinality="many" if many else "one", importance=0.8
    )


def _status(match: re.Match[str]) -> _Read | None:
    value = " ".join(match.group("val").lower().split())
    return _Read("relationship", "relationship status", value, importance=0.8)


def _dating(match: re.Match[str]) -> _Read | None:
    name = _name(match.group("val"))
    return _Read("person", "partner", name, importance=0.8) if name else None


def _partner_gone(match: re.Match[str]) -> _Read | None:
    name = _name(match.group("val"))
    return _Read("person", "partner", name, polarity=False) if name else None


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
    attribute = f"tool for {attribute_key(_cut(purpose, words=3))}" if purpose else "tool"
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
    return _Read("tool", f"tool for {attribute_key(match.group('what'))}", value, importance=0.7)


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


#: Attributes said in several ways, each to one key (other keys are the user's own words).
_ATTRIBUTE_ALIASES = {
    "office": "work place", "workplace": "work place", "work location": "work place",
    "base": "work place", "branch": "work place",
    "job": "job", "job title": "job", "title": "job", "role": "job", "position": "job",
    "occupation": "job", "profession": "job",
    "company": "employer", "employer": "employer", "firm": "employer",
    "boss": "boss", "manager": "boss", "line manager": "boss", "supervisor": "boss",
    "partner": "partner", "boyfriend": "partner", "girlfriend": "partner", "wife": "partner",
    "husband": "partner", "fiance": "partner", "fiancee": "partner", "spouse": "partner",
    "home": "home", "address": "home", "home town": "home", "city": "home",
    "main language": "programming language", "language": "programming language",
    "programming language": "programming language", "editor": "tool for editor",
    "ide": "tool for editor", "code editor": "tool for editor",
    "diet": "diet", "car": "car", "phone": "phone", "pet": "pet",
}


_WHEN_WORDS = _p(r"\s+(?:this|next|last)\s+(?:year|summer|winter|spring|autumn|fall|month|week)$")
_TRIP_NOUNS = frozenset({"trip", "holiday", "vacation", "getaway", "honeymoon", "break"})


def _attribute(phrase: str) -> str:
    """The key of an attribute phrase: its alias, else its normal form ("my big holiday this
    year" and "my summer trip" are a trip's destination)."""
    key = attribute_key(_WHEN_WORDS.sub("", phrase.strip()))
    if key in _ATTRIBUTE_ALIASES:
        return _ATTRIBUTE_ALIASES[key]
    if key.split() and key.split()[-1] in _TRIP_NOUNS:
        return "trip destination"
    return key


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
    elif favourite or words[-1] in _VALUED_ATTRIBUTES or _NAMED_VALUE.match(raw):
        value = _thing(raw)
    else:
        return None
    if not value:
        return None
    kind = "preference" if favourite else "attribute"
    many = attribute in ("friend", "sibling", "kid", "child", "colleague", "neighbour", "neighbor")
    return _Read(kind, attribute, value, memory_type="preference" if favourite else "fact",
                 cardinality="many" if many else "one", importance=0.75)


#: Last words of a "my X is" phrase whose value is a plain word ("my car colour is blue").
_VALUED_ATTRIBUTES = _words(
    """
    colour color shade size model brand make type flavour flavor code name nickname
    """
)


#: First words of a "my X is" phrase that name no lasting attribute of the user.
_OWNER_STOPS = _words(
    """
    question point guess bet problem issue idea worry concern plan answer reply fault
    pleasure turn bad mistake gut head back knee day week morning evening night weekend
    phone battery internet wifi train bus flight coffee order
    """
)


def _reports_to(match: re.Match[str]) -> _Read | None:
    name = _name(match.group("val"))
    return _Read("person", "boss", name, importance=0.8) if name else None


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


_VAL = r"(?P<val>[^.;!?]+)"
_NOT = r"(?:not|n't|never)"

#: (pattern, builder); tried in order over the whole sentence, every match read. A pattern
#: names its subject with ``_SUBJECT`` (group ``subj``); without one the speaker is meant.
_PATTERNS: tuple[tuple[re.Pattern[str], _Builder], ...] = (
    # where someone lives
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:used\s+to\s+live|no\s+longer\s+lives?)\s+(?:in|at)\s+{_VAL}"),
     _home_gone),
    (_p(rf"\b{_SUBJECT}(?:{_BE})?\s+{_ADVERBS}(?:not\s+living|no\s+longer\s+living)\s+(?:in|at)\s+{_VAL}"),
     _home_gone),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:live[sd]?|(?:'s|'re|'m|\s+am|\s+is|\s+are)\s+{_ADVERBS}living)\s+{_ADVERBS}(?:in|at|near|on)\s+{_VAL}"),
     _home),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:moved|relocated|moved\s+back|settled|emigrated)\s+{_ADVERBS}(?:to|in|into)\s+{_VAL}"),
     _home),
    (_p(rf"\b(?:since|after)\s+{_ADVERBS}(?:moving|relocating|the\s+move)\s+(?:back\s+)?to\s+{_VAL}"),
     _home),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:based|settled|living)\s+(?:in|out\s+of)\s+{_VAL}"),
     _home),
    (_p(rf"\b{_MY}\s+(?:new\s+)?(?:home|place|flat|apartment|house)\s+is\s+(?:now\s+)?(?:in|near)\s+{_VAL}"),
     _home),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:rent|rents|own|owns|share|shares|bought|have|has)\s+(?:a|an|the)\s+(?:\w+\s+){{0,2}}?(?:flat|apartment|house|studio|place|room|condo)\s+in\s+(?=[A-Z])(?-i:{_VAL})"),
     _home),
    (_p(rf"\b(?:{_MY}|his|her)\s+(?:new\s+|little\s+|tiny\s+)?(?:flat|apartment|house|studio|place|condo)\s+in\s+(?=[A-Z])(?-i:{_VAL})"),
     _home),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:don't|do\s+not|doesn't|does\s+not)\s+live\s+in\s+(?=[A-Z])(?-i:(?P<val>[A-Z][\w-]+(?:\s+[A-Z][\w-]+)?))\s+any\s?more"),
     _home_gone),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:gave\s+up|left|moved\s+out\s+of|sold)\s+(?:the|my|our|his|her)\s+(?:flat|apartment|house|place|studio)\s+in\s+(?=[A-Z])(?-i:{_VAL})"),
     _home_gone),
    (_p(rf"\bhome\s+is\s+(?:now\s+)?{_VAL}"), _home),
    # where someone is for a while (never their home)
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:in|visiting|staying\s+in|travelling\s+in|traveling\s+in|away\s+in)\s+{_VAL}"),
     _whereabouts),
    # employer, work place, job
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:left|quit|no\s+longer\s+works?\s+(?:at|for)|used\s+to\s+work\s+(?:at|for)|got\s+laid\s+off\s+from|was\s+let\s+go\s+from|resigned\s+from)\s+{_VAL}"),
     _employer_gone),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:no\s+longer|not)\s+(?:working\s+)?(?:at|with|for)\s+{_VAL}(?=.*\bany\s?more\b|)"),
     _employer_gone),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:work(?:s|ed)?|(?:'s|'re|'m|\s+am|\s+is|\s+are)\s+{_ADVERBS}working)\s+{_ADVERBS}(?:at|for)\s+{_VAL}"),
     _work_at),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:joined|started\s+(?:a\s+new\s+job\s+)?at|started\s+working\s+(?:at|for)|got\s+(?:a\s+)?(?:new\s+)?(?:job|position|role|offer)\s+(?:at|with)|been\s+hired\s+by|was\s+hired\s+by|got\s+hired\s+by|signed\s+with|moved\s+over\s+to)\s+{_VAL}"),
     _work_at),
    (_p(rf"\bnow\s+that\s+{_SUBJECT}{_BE}\s+(?:at|with)\s+{_VAL}"), _work_at),
    (_p(rf"\b{_MY}\s+(?:new\s+)?(?:employer|company|firm)\s+is\s+(?:now\s+)?{_VAL}"), _work_at),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:work(?:s|ed)?|(?:'s|'re|'m|\s+am|\s+is|\s+are)\s+{_ADVERBS}working)\s+{_ADVERBS}(?:in|from)\s+{_VAL}"),
     _work_in),
    (_p(rf"\b{_MY}\s+(?:new\s+)?office\s+is\s+(?:now\s+)?(?:in|at)\s+{_VAL}"), _work_in),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:work(?:s|ed)?|(?:'s|'re|'m|\s+am|\s+is|\s+are)\s+{_ADVERBS}working)\s+as\s+{_VAL}"),
     _job_as),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:got\s+promoted\s+to|been\s+promoted\s+to|was\s+promoted\s+to|became|retrained\s+as|qualified\s+as)\s+{_VAL}"),
     _job_as),
    (_p(rf"\b{_MY}\s+(?:new\s+)?(?:job|role|title|position|job\s+title)\s+is\s+(?:now\s+)?{_VAL}"),
     _job_as),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}no\s+longer\s+an?\s+{_VAL}"), _job_gone),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:acting|interim|temporary|stand-in|covering\s+as)\s+(?:an?\s+|the\s+)?{_VAL}"),
     _job_as),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:work|works|worked)\s+(?:weekends|evenings|nights|part-time|shifts)\s+as\s+{_VAL}"),
     _job_as),
    (_p(rf"\b(?:since\s+)?(?:becoming|being)\s+(?:an?|the)\s+(?P<val>(?:[\w-]+\s+){{0,2}}?[\w-]+)\s*,?\s+{_SUBJECT}\b"),
     _job_as),
    (_p(rf"\b{_OWNER}(?:job\s+)?(?:title|role|position|job)\s+(?:changed|switched|moved)\s+to\s+{_VAL}"),
     _job_as),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:an?|the)\s+{_VAL}"), _job),
    (_p(rf"\b{_SUBJECT}(?:{_BE}|\s+was|\s+were|{_HAVE3}\s+been|\s+got)\s+{_ADVERBS}(?:employed|hired|taken\s+on|contracted)\s+(?:by|at)\s+{_VAL}"),
     _employed),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:rejoined|re-joined|returned\s+to|gone\s+back\s+to|went\s+back\s+to)\s+(?=[A-Z])(?-i:{_VAL})"),
     _employed),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+been\s+at\s+(?=[A-Z])(?-i:(?P<val>[^.;!?]+?))\s+for\s+(?:\w+\s+)?(?:years?|months?)"),
     _employed),
    (_p(r"\b(?:the\s+)?(?P<val>[A-Z][\w-]+(?:\s+[A-Z][\w-]+)?)\s+office\s+(?:closed|shut\s+down|shut|was\s+closed|is\s+closing\s+down)"),
     _office_gone),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:(?:got|been|was)\s+)?(?:moved|transferred|relocated|switched)\s+to\s+the\s+(?=[A-Z])(?-i:(?P<val>[A-Z][\w-]+(?:\s+[A-Z][\w-]+)?))\s+(?:office|branch|site|team)"),
     _office),
    (_p(rf"\b{_MY}\s+team\s+(?:got|was|has\s+been)\s+(?:moved|transferred|relocated)\s+to\s+the\s+(?P<val>[A-Z][\w-]+(?:\s+[A-Z][\w-]+)?)\s+(?:office|branch|site)"),
     _office),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:at|in|based\s+at|working\s+(?:at|from))\s+the\s+(?P<val>[A-Z][\w-]+(?:\s+[A-Z][\w-]+)?)\s+(?:office|branch|site|hub)"),
     _office),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:do|does|work|works|spend|spends)\s+(?:\w+\s+){{0,4}}?(?:at|in|from)\s+the\s+(?P<val>[A-Z][\w-]+(?:\s+[A-Z][\w-]+)?)\s+(?:office|branch|site|hub)"),
     _office),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:report|reports|am\s+reporting|'m\s+reporting)\s+(?:directly\s+)?to\s+{_VAL}"),
     _reports_to),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+been\s+(?:with|dating|seeing)\s+(?=[A-Z])(?-i:{_VAL})"),
     _partner_since),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:stepped\s+down\s+as|stopped\s+working\s+as|quit\s+(?:my|his|her|the)\s+job\s+as|retired\s+as|no\s+longer\s+works?\s+as)\s+{_VAL}"),
     _job_gone),
    (_p(r"\b(?:no|without\s+(?:a|any))\s+(?P<attr>deadline|due\s+date|budget(?:\s+limit)?|rent|boss|manager|office|launch\s+date)\s+(?:any\s?more|anymore|now|at\s+all)\b"),
     _attribute_gone),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:don't|do\s+not|doesn't|does\s+not|no\s+longer)\s+(?:pay|have|has)\s+(?:a\s+|any\s+)?(?P<attr>rent|budget|deadline|boss|manager|car|office|mortgage)\b"),
     _attribute_gone),
    (_p(rf"\b(?:the|my|our)\s+(?:old\s+)?(?P<pet>{_PETS})\s+(?:died|passed\s+away|passed|ran\s+away|had\s+to\s+be\s+rehomed)\b"),
     _pet_died),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:drink|drinks|order|orders|have|has)\s+(?:a\s+|an\s+)?{_VAL}(?=\s+(?:every|each)\s+(?:morning|day|evening|afternoon)|\s+(?:at|with)\s+breakfast)"),
     _habit),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:quit|gave\s+up|given\s+up|stopped\s+drinking|cut\s+out)\s+{_VAL}"),
     _habit_gone),
    (_p(rf"\b(?:since\s+)?{_SUBJECT}\s+{_ADVERBS}(?:started|began|am|'m|are|'re)\s+(?:picking|choosing|booking|taking|going\s+for|ordering|drinking)\s+{_VAL}"),
     _habit),
    (_p(rf"\b(?:since\s+)?(?:switching|changing|moving)\s+(?:over\s+)?to\s+{_VAL}"), _habit),
    # people and relationships
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:now\s+)?(?P<val>{_STATUSES})\b"), _status),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}got\s+(?P<val>married|engaged|divorced)\b"), _status),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:dating|seeing|going\s+out\s+with|with)\s+{_VAL}"),
     _dating),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:broke\s+up\s+with|split\s+up\s+with|divorced|left)\s+{_VAL}"),
     _partner_gone),
    (_p(rf"\b{_MY}\s+(?:new\s+)?(?P<prel>{_RELATIONS})(?:'s\s+name|\s+is\s+called|\s+is\s+named|'s\s+called)\s+(?:is\s+)?{_VAL}"),
     _person),
    (_p(rf"\b{_MY}\s+(?:new\s+)?(?P<prel>{_RELATIONS})\s+is\s+(?:now\s+)?{_VAL}"), _person),
    # pets and possessions
    (_p(rf"\b{_MY}\s+(?P<pet>{_PETS})(?:'s\s+name\s+is|\s+is\s+called|\s+is\s+named|'s\s+called)\s+{_VAL}"),
     _pet_name),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:have|has|got|adopted|rescued|bought|took\s+in)\s+(?:a|an|one|another|a\s+second|a\s+new|two|three)\s+(?:\w+\s+)?(?P<pet>{_PETS})s?(?:\s+(?:called|named)\s+(?P<pname>[A-Z][\w'-]+))?"),
     _pet),
    (_p(rf"\b{_MY}\s+(?:old\s+)?(?P<pet>{_PETS})\s+(?:died|passed\s+away|ran\s+away|passed)\b"),
     _pet_gone),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:gave\s+away|rehomed|had\s+to\s+rehome|lost)\s+(?:my|our)\s+(?P<pet>{_PETS})"),
     _pet_gone),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}drives?\s+{_VAL}"), _car),
    (_p(rf"\b{_MY}\s+(?:new\s+)?car\s+is\s+(?:now\s+)?{_VAL}"), _car),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:bought|got|picked\s+up|upgraded\s+to|switched\s+to)\s+(?:a|an)\s+(?:new\s+)?(?P<val>[A-Z][^.;!?]*?)\s+(?P<item>car|phone|laptop|bike|motorbike|watch|tablet)\b"),
     _owned),
    (_p(rf"\b{_MY}\s+(?:new\s+)?(?P<item>phone|laptop|bike|motorbike|tablet|watch)\s+is\s+(?:now\s+)?(?:an?\s+)?{_VAL}"),
     _owned),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:sold|got\s+rid\s+of|gave\s+away|lost)\s+(?:my|our|the)\s+(?:old\s+)?(?P<item>car|phone|laptop|bike|motorbike|house|flat|apartment|boat)\b"),
     _sold),
    # diet and health
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:no\s+longer|not)\s+(?:an?\s+)?(?P<val>{_DIETS})\b"),
     _diet_gone),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:stopped\s+being|gave\s+up\s+being|quit\s+being)\s+(?:an?\s+)?(?P<val>{_DIETS})\b"),
     _diet_gone),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:started\s+eating|eat|eats|am\s+eating|'m\s+eating|back\s+to\s+eating)\s+(?:meat|fish|chicken)\s+again\b"),
     _diet_gone),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:an?\s+)?(?P<val>{_DIETS})\b"), _diet),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:eat|eats|cook|cooks|live|lives|(?:'m|am|is|'s|are|'re)\s+(?:doing|trying|going|eating))\s+(?P<val>{_DIETS})\b"),
     _diet),
    (_p(rf"\b(?:going|gone|went|turned|switching\s+to)\s+(?P<val>{_DIETS})\b"), _diet),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:gone|went|turned|become|became)\s+(?P<val>{_DIETS})\b"),
     _diet),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:no\s+longer|not)\s+allergic\s+to\s+{_VAL}"),
     _allergy_gone),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:outgrown|outgrew|grew\s+out\s+of)\s+(?:my|his|her|the)\s+(?P<val>[\w\s-]+?)\s+allergy"),
     _allergy_gone),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:severely\s+|mildly\s+|very\s+)?allergic\s+to\s+{_VAL}"),
     _allergy),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:have|has|got)\s+(?:an?\s+|a\s+severe\s+|a\s+bad\s+)?(?P<val>[\w-]+(?:\s+[\w-]+)?)\s+allergy"),
     _allergy),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?P<val>lactose|gluten|fructose|histamine)[\s-]intolerant\b"),
     _avoids),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:can't|cannot|can\s+not|must\s+not|mustn't|don't|do\s+not)\s+(?:eat|have|drink|tolerate)\s+{_VAL}"),
     _avoids),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:avoid|avoids|have\s+to\s+avoid|need\s+to\s+avoid)\s+{_VAL}"),
     _avoids),
    # likes, dislikes, preferences
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:don't|do\s+not|doesn't|does\s+not)\s+(?:really\s+)?(?:like|love|enjoy)\s+{_VAL}\s+any\s?more\b"),
     _likes_gone),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:gone\s+off|went\s+off|stopped\s+(?:liking|enjoying)|lost\s+(?:my|his|her|their)\s+taste\s+for|gotten\s+tired\s+of|got\s+tired\s+of|grown\s+tired\s+of)\s+{_VAL}"),
     _likes_gone),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:not|no\s+longer)\s+(?:into|a\s+fan\s+of)\s+{_VAL}"),
     _likes_gone),
    (_p(rf"\b{_SUBJECT}(?:'d|\s+would|'m|\s+am|'re|\s+are)?\s+{_ADVERBS}(?:(?:going\s+)?back\s+to\s+)?(?:prefer|prefers|preferred|preferring)\s+{_VAL}(?:\s+(?:over|to|rather\s+than|instead\s+of)\s+(?P<over>[^.;!?,]+))?"),
     _prefers),
    (_p(rf"\b{_MY}\s+(?:preference|preferred\s+option|go-to)\s+is\s+(?:now\s+)?{_VAL}"), _prefers),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:always|usually|normally)\s+(?:take|pick|choose|book|go\s+for|get|ask\s+for|sit\s+in|drink|have)\s+{_VAL}"),
     _prefers),
    (_p(rf"\b{_SUBJECT}(?:'d|\s+would)\s+{_ADVERBS}rather\s+(?:have|take|get|do|go\s+for|use)?\s*{_VAL}(?:\s+(?:than|over|instead\s+of)\s+(?P<over>[^.;!?,]+))?"),
     _prefers),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?P<verb>like|likes|love|loves|enjoy|enjoys|adore|adores|hate|hates|dislike|dislikes|detest|detests|loathe|loathes|can't\s+stand|cannot\s+stand)\s+{_VAL}"),
     _likes),
    # tools and technology
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:switched|moved|migrated|changed|converted)\s+(?:over\s+)?(?:from\s+(?P<old>[^.;!?,]+?)\s+)?to\s+{_VAL}"),
     _switched),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:replaced)\s+(?P<old>[^.;!?,]+?)\s+with\s+{_VAL}"), _switched),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:trying|testing|trialling|trialing|trying\s+out)\s+(?=[A-Z])(?-i:{_VAL})"),
     _trying),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:use|uses|am\s+using|'m\s+using|are\s+using|'re\s+using|code\s+in|write\s+in|program\s+in|develop\s+in)\s+{_VAL}(?:\s+(?:for|as)\s+(?P<for>[^.;!?,]+))?"),
     _tool),
    (_p(rf"\b{_MY}\s+(?:main\s+|new\s+|favou?rite\s+|go-to\s+)?(?P<what>editor|ide|language|programming\s+language|database|db|os|operating\s+system|browser|framework|stack|laptop|phone|cloud(?:\s+provider)?|note-taking\s+app|notes\s+app|terminal|shell|keyboard|camera|distro)\s+(?:of\s+choice\s+)?is\s+(?:now\s+)?{_VAL}"),
     _tool_named),
    # plans
    (_p(rf"\b(?:the|my|our)\s+(?:trip|holiday|vacation|honeymoon|getaway)\s+(?:is\s+(?:now\s+)?|will\s+be\s+)?(?:to|in)\s+{_VAL}"),
     _trip),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:going|flying|heading|travelling|traveling)\s+to\s+{_VAL}(?=[^.;!?]*\b(?:trip|holiday|vacation|in\s+{_MONTHS}|next|this\s+summer|this\s+winter|for\s+\w+\s+(?:days|weeks))\b)"),
     _trip),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:planning|plan|going)\s+to\s+(?:visit|go\s+to|travel\s+to|fly\s+to)\s+{_VAL}"),
     _trip),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:(?:'m|'re|'s|am|are|is)\s+)?(?:planning|plan|plans|booked|booking|organising|organizing)\s+(?:a|our|my|his|her|the)\s+(?:\w+\s+)?(?:trip|holiday|vacation|getaway|honeymoon)\s+to\s+{_VAL}"),
     _trip),
    (_p(rf"\b(?:the|my|our|{_MY}\s+{_RELATIONS}'s)\s+(?:\w+\s+)?(?:trip|holiday|vacation|getaway)\s+(?:is|'s|got|has\s+been|was)\s+(?:off|cancelled|canceled|called\s+off|scrapped)\b"),
     _trip_off),
    (_p(rf"\b{_SUBJECT}{_BE}\s+{_ADVERBS}(?:planning|plan|going)\s+to\s+(?:move|relocate)\s+to\s+{_VAL}"),
     _moving_plan),
    # dates and deadlines
    (_p(rf"\b{_OWNER}(?P<attr>(?:[\w-]+\s+){{0,2}}?[\w-]+)\s+(?:is|'s|was|are)\s+(?:now\s+|still\s+)?due\s+(?:on\s+|by\s+|for\s+)?(?P<val>{_DATE})"),
     _due),
    (_p(rf"\b(?:the|my|our)\s+(?P<attr>deadline|due\s+date)\s+(?:for|of|on)\s+(?:the\s+|my\s+|our\s+|his\s+|her\s+)?(?:[\w-]+\s+)?[\w-]+\s+(?:is|'s|was)\s+(?:now\s+)?(?:on\s+|by\s+)?(?P<val>{_DATE})"),
     _due),
    (_p(rf"\b(?:the|my|our)\s+(?P<attr>deadline|due\s+date)\s+(?:has\s+|got\s+|was\s+)?(?:slipped|moved|shifted|changed|been\s+moved|been\s+pushed|pushed|pushed\s+back)\s+(?:back\s+)?to\s+(?P<val>{_DATE})"),
     _due),
    (_p(rf"\b(?:the|my|our|{_MY}\s+{_RELATIONS}'s)\s+(?P<attr>(?:[\w-]+\s+){{0,2}}?[\w-]+)\s+(?:is|'s|was|are)\s+(?:now\s+)?(?:planned|scheduled|set|booked|fixed|pencilled\s+in|penciled\s+in)\s+for\s+(?P<val>{_DATE})"),
     _scheduled),
    (_p(rf"\b(?:the|my|our)\s+(?P<attr>(?:[\w-]+\s+){{0,2}}?(?:deadline|due\s+date|exam|interview|appointment|wedding|launch|release|surgery|flight|birthday|anniversary|move|moving\s+date|start\s+date|meeting|party|trip|holiday|vacation|conference|presentation|demo|review|date)(?:\s+(?:for|of)\s+(?:the\s+)?[\w-]+)?)\s+(?:(?:got|has\s+been|was|is|'s)\s+)?(?:moved|pushed|pushed\s+back|postponed|rescheduled|changed|brought\s+forward|delayed|shifted|set|fixed|now)\s+(?:back\s+)?(?:to|for|until|till|on)\s+(?P<val>{_DATE})"),
     _date),
    (_p(rf"\b(?:the|my|our)\s+(?P<attr>(?:[\w-]+\s+){{0,2}}?(?:deadline|due\s+date|exam|interview|appointment|wedding|launch|release|surgery|flight|birthday|anniversary|move|moving\s+date|start\s+date|meeting|party|trip|holiday|vacation|conference|presentation|demo|review)(?:\s+(?:for|of)\s+(?:the\s+)?[\w-]+)?)\s+(?:is|'s|was|falls)\s+(?:now\s+)?(?:on|in|at|for|due)?\s*(?P<val>{_DATE})"),
     _date),
    # numbers
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:can|could|may|am\s+allowed\s+to|'m\s+allowed\s+to)\s+spend\s+(?:up\s+to\s+|about\s+|around\s+)?(?P<val>{_MONEY})\s+on\s+(?:the\s+|a\s+|my\s+|our\s+)?(?P<attr>[\w-]+(?:\s+[\w-]+)?)"),
     _spend),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:pay|pays|paid|spend|spends)\s+(?:about\s+|around\s+)?(?P<val>{_MONEY})\s+(?:in\s+|on\s+|for\s+)?(?P<attr>rent|mortgage|tuition|childcare|insurance)\b"),
     _number),
    (_p(rf"\b{_OWNER}(?P<attr>(?:[\w-]+\s+){{0,2}}?[\w-]+?)\s+(?:(?:has|have)\s+)?(?:went|gone|go|was\s+raised|got\s+raised|was\s+cut|got\s+cut|was\s+increased|was\s+lowered|increased|decreased|rose|risen|dropped|fell|jumped|grew|changed|climbed|shrank)\s+(?:up\s+|down\s+)?(?:to|by)\s+(?:about\s+|around\s+|roughly\s+)?(?P<val>{_MONEY})"),
     _number),
    (_p(rf"\b{_OWNER}(?P<attr>(?:[\w-]+\s+){{0,2}}?[\w-]+?)(?:\s+(?:for|of)\s+(?:the\s+)?[\w-]+)?\s+(?:is|are|'s|was)\s+(?:now\s+|currently\s+|still\s+)?(?:capped\s+at\s+|set\s+at\s+|about\s+|around\s+|roughly\s+|at\s+|only\s+|just\s+|up\s+to\s+)?(?P<val>{_MONEY})"),
     _number),
    (_p(rf"\b(?:the|my|our)\s+(?P<attr>(?:[\w-]+\s+){{0,2}}?[\w-]+?)\s+(?:(?:has|have)\s+)?(?:went|gone|go|was\s+raised|got\s+raised|was\s+cut|got\s+cut|was\s+increased|was\s+lowered|increased|decreased|rose|risen|dropped|fell|jumped|grew|changed|climbed|shrank)\s+(?:up\s+|down\s+)?(?:to|by)\s+(?:about\s+|around\s+|roughly\s+)?(?P<val>{_MONEY})"),
     _number),
    (_p(rf"\b(?:the|my|our)\s+(?P<attr>(?:[\w-]+\s+){{0,2}}?[\w-]+?)(?:\s+(?:for|of)\s+(?:the\s+)?[\w-]+)?\s+(?:is|are|'s|was)\s+(?:now\s+|currently\s+|still\s+)?(?:about\s+|around\s+|roughly\s+|at\s+|only\s+|just\s+|up\s+to\s+)?(?P<val>{_MONEY})"),
     _number),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:got\s+)?(?:a|an)\s+(?P<attr>[\w-]+(?:\s+[\w-]+)?)\s+of\s+(?:about\s+|around\s+)?(?P<val>{_MONEY})"),
     _number),
    (_p(rf"\b{_SUBJECT}\s+{_ADVERBS}(?:pay|pays|paid|spend|spends)\s+(?:about\s+|around\s+)?(?P<val>{_MONEY})\s+(?:in|on|for)\s+(?P<attr>[\w-]+(?:\s+[\w-]+)?)"),
     _number),
    (_p(rf"\b{_SUBJECT}{_HAVE3}\s+{_ADVERBS}(?:have|has|got)\s+(?P<n>{_COUNT})\s+(?P<noun>kids|children|sons|daughters|cats|dogs|pets|siblings|brothers|sisters|grandchildren|employees|roommates|cars|bikes|plants|horses)\b"),
     _count_of),
    # whatever else "my X is Y" gives X, the user's own word for it
    (_p(rf"\b{_OWNER}(?:new\s+|current\s+|main\s+)?(?P<attr>[a-z][\w-]*(?:\s+[a-z][\w-]*){{0,3}}?)\s+(?:is|are|'s)\s+(?:now\s+|currently\s+|still\s+)?(?:called\s+|named\s+)?(?P<val>[^.;!?,]+)"),
     _owned_attribute),
)

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


#: Relations a person often has several of: without a name, two statements about "my
#: colleague" may be about two people.
_MANY_PEOPLE = frozenset(
    {"friend", "colleague", "coworker", "co-worker", "neighbour", "neighbor", "cousin", "kid",
     "child", "sibling"}
)


def _person_subject(speaker: str, relation: str, name: str | None) -> str:
    """ "User's sister", "User's colleague Anna"."""
    relation = " ".join(relation.lower().split())
    return f"{speaker}'s {relation}" + (f" {name}" if name else "")


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
    verbs = {
        "home": ("lives in", "no longer lives in"),
        "whereabouts": ("is in", "is no longer in"),
        "employer": ("works at", "no longer works at"),
        "work place": ("works in", "no longer works in"),
        "job": ("works as", "no longer works as"),
        "job field": ("works in", "no longer works in"),
        "diet": ("is", "is no longer"),
        "allergy": ("is allergic to", "is no longer allergic to"),
        "food to avoid": ("avoids", "no longer avoids"),
        "relationship status": ("is", "is no longer"),
        "car": ("drives", "no longer drives"),
        "pet": ("has a", "no longer has a"),
        "partner": ("is with", "is no longer with"),
        "trip destination": ("plans a trip to", "no longer plans a trip to"),
        "moving plan": ("plans to move to", "no longer plans to move to"),
    }
    if attribute in verbs:
        positive, negative = verbs[attribute]
        return f"{s} {positive if read.polarity else negative} {value}".strip()
    if attribute.startswith("feeling about "):
        thing = attribute[len("feeling about "):]
        if not read.polarity:
            return f"{s} no longer likes {thing}"
        return f"{s} {value} {thing}"
    if attribute.startswith("preferred "):
        return f"{s} prefers {value}" + (f" over {read.replaces}" if read.replaces else "")
    if read.kind == "tool":
        purpose = attribute[len("tool for "):] if attribute.startswith("tool for ") else ""
        return f"{s} uses {value}" + (f" for {purpose}" if purpose else "")
    if not read.polarity:
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


#: A duration that reaches back ("I've been vegetarian for two weeks"): no end ahead.
_PAST_DURATION = _p(r"\b(?:have|has|'ve|had)\s+been\b|\b(?:last|past)\s+(?:few\s+)?(?:days?|weeks?|months?)\b|\bago\b")


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
    cue = _cue(text)
    for match, read in _spans(text):
        if read.kind != "plan" and _irreal(text, match.start()):
            continue
        subject = _subject(match, speaker, referent)
        if subject is None:
            continue
        relation = subject.removeprefix(f"{speaker}'s ").split()
        if subject != speaker and len(relation) == 1 and relation[0] in _MANY_PEOPLE:
            # "my colleague works at X", "my colleague works at Y": maybe two colleagues.
            read = _Read(**{**read.__dict__, "cardinality": "many"})
        end = None if _PAST_DURATION.search(text) else stated_end(text, at)
        if read.temporary and end is None:
            continue  # "I'm in Berlin" without an end: where the user is, not worth a claim
        if read.kind == "home" and end is not None:
            read = _Read("whereabouts", "whereabouts", read.value, importance=0.6)
        replaces = read.replaces
        if replaces is None and read.polarity:
            tail = _NOT_REPLACED.search(text[match.start():])
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
            cue="change" if replaces else cue,
        )
        rendered = _Read(**{**read.__dict__, "replaces": replaces})
        findings.append(
            (match.start(), ClaimFinding(claim, read.memory_type, _render(rendered, subject), read.importance))
        )
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
