"""Seeded long conversations between two named people, with questions and their evidence.

The data set of the retrieval benchmark (issue 13): it is written to be unlike the offline
extractor's own patterns. Two people talk over many sessions, days apart; one of them is the
memory's user. The facts a question asks about sit where real dialogue puts them, one
category per place:

* ``reply``: in the answer to the other speaker's question ("Where did you go?" "Lisbon!
  It rained..."), about the user or about an unnamed relative;
* ``temporal``: in a time reference relative to the session's date ("Last Tuesday we adopted
  a puppy, Pip"); the question names the event and asks for the date;
* ``temporal_date``: the other way round: the question names the resolved date ("What did
  Maya do on 14 March 2025?") and the turn only says "yesterday", "two days ago" or "last
  Tuesday"; the session's date resolves it;
* ``multi_hop``: in two turns of two sessions ("my brother Leo moved to Oslo" ... "Leo
  started at a bakery"), joined by a name the question does not repeat; or in two or three
  sessions of a chain that starts with a person met somewhere ("At the climbing gym I met
  Vera" ... "She works at Bosch" ... "Vera introduced me to her brother Hugo" ... "Hugo
  started at a ferry line"), and the question names only the place they met;
* ``open_domain``: what is new with a relative the question names by relation only ("What
  is new with Maya's aunt?"); the relative is named in one session ("my aunt Greta") and
  the news comes by name or "she" in one or two later ones: every one of those turns is
  evidence;
* ``correction``: in a later turn that changes an earlier one; the question asks for the
  current value, and the earlier turn is kept as ``stale``;
* ``other_speaker``: the other speaker's facts about themselves, in the first person ("I
  moved to Oslo in May"); the question names them ("Where does Tom live?");
* ``third_person``: the user's facts about a named friend ("My colleague Nora works at
  Zeiss now", or "She works at Zeiss now" in answer to "How is your colleague Nora?"); the
  question names the friend.

Other-speaker and third-person facts often come with a **distractor**: another person of the
dialogue states the same kind of fact with another value ("I moved to Ghent in April. What
about you?" "I moved to Oslo in May."), so a search that loses who said what ranks the wrong
turn. Those turns are kept as the question's ``distractors``.

Every value (city, employer, hobby, ...) is used once per dialogue, so an answer's words
appear in its evidence and in no distractor; dates asked about are unique per dialogue too.
Every other turn is chit-chat (near misses). Each question lists the ids of the turns that
hold its answer (``evidence``): a search is scored by the turns its hits cite in
``source_event_ids``. The generator only makes data; it asks nothing of memstream.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

CATEGORIES = (
    "reply", "temporal", "temporal_date", "multi_hop", "open_domain", "correction",
    "other_speaker", "third_person",
)

PAIRS = [("Maya", "Tom"), ("Ines", "Karl"), ("Ruth", "Omar"), ("Lena", "Jonas"), ("Aiko", "Ben")]
#: A relative and the names that go with it ("he", "she", or either for None).
RELATIVES: dict[str, str | None] = {
    "brother": "he", "sister": "she", "cousin": None, "aunt": "she", "uncle": "he",
    "niece": "she", "nephew": "he", "grandmother": "she", "stepbrother": "he", "godfather": "he",
}
#: Third-person facts are about these; several friends may share a relation (they are named).
FRIENDS = ["friend", "colleague", "neighbour", "flatmate", "old classmate"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
#: Values a dialogue uses at most once each (see :meth:`Writer.pick`).
POOLS: dict[str, list[Any]] = {
    "city": ["Lisbon", "Oslo", "Porto", "Krakow", "Ghent", "Bergen", "Lyon", "Turin", "Cork",
             "Graz", "Aarhus", "Bilbao", "Tartu", "Malmo", "Leipzig", "Utrecht", "Brno",
             "Nantes", "Genoa", "Tampere", "Ljubljana", "Salzburg", "Seville", "Gdansk"],
    "employer": ["Siemens", "Bosch", "Philips", "Nokia", "Airbus", "Zeiss", "Ikea", "Lego",
                 "Spotify", "Adidas", "Heineken", "Ericsson", "Maersk", "Roche"],
    "hobby": ["pottery", "bouldering", "the cello", "sourdough baking", "salsa", "chess",
              "archery", "knitting", "rowing", "birdwatching", "calligraphy", "fencing"],
    "car": ["Volvo", "Skoda", "Fiat", "Renault", "Toyota", "Mazda", "Saab", "Dacia", "Subaru"],
    "sport": ["tennis", "squash", "volleyball", "badminton", "hockey", "handball", "padel"],
    "job": ["a bakery", "a bike shop", "the city library", "a vet clinic", "a print studio",
            "a ferry line", "a flower market", "a recording studio", "a dental practice",
            "a ski school"],
    "he": ["Leo", "Milan", "Felix", "Emil", "Hugo", "Anton", "Rafael", "Oskar", "Viktor", "Jakub",
           "Bruno", "Matteo", "Tobias", "Lukas", "Mateo", "Pavel", "Arvid", "Nils"],
    "she": ["Clara", "Sofia", "Nora", "Vera", "Alba", "Greta", "Mira", "Ida", "Elsa", "Lotte",
            "Hanna", "Carla", "Freya", "Livia", "Selma", "Olga", "Maren", "Astrid"],
    "pet_name": ["Pip", "Miso", "Biscuit", "Olive", "Pepper", "Juno", "Tofu", "Ziggy", "Mango",
                 "Rolo", "Waffle", "Nacho", "Pickle", "Bean", "Dotty", "Crumble"],
    "language": ["Portuguese", "Japanese", "Finnish", "Greek", "Polish", "Korean", "Turkish",
                 "Icelandic"],
    "occasion": ["for the long weekend", "for her birthday", "at Easter", "for the conference",
                 "in the autumn break", "for the wedding", "over New Year", "for the marathon"],
    #: What the user did on a day a temporal_date question names: (the words, the answer).
    "activity": [("passed my driving test", "driving test"),
                 ("ran my first half marathon", "half marathon"),
                 ("painted the kitchen yellow", "painted the kitchen"),
                 ("went to a jazz concert", "jazz concert"),
                 ("planted an apple tree", "apple tree"),
                 ("sold my old piano", "piano"),
                 ("finished a 2000-piece jigsaw", "jigsaw"),
                 ("tried kayaking for the first time", "kayaking"),
                 ("got a small tattoo", "tattoo"),
                 ("went to the opera", "opera"),
                 ("volunteered at the food bank", "food bank"),
                 ("had my wisdom tooth out", "wisdom tooth")],
}
#: Where the user meets someone a multi-hop chain asks about.
VENUES = ["climbing gym", "choir", "book club", "pottery class", "language course", "dog park",
          "running club", "chess cafe", "community garden", "jazz workshop"]
PETS = ["a cat", "a puppy", "a rabbit", "a parrot", "a tortoise"]


@dataclass(frozen=True)
class Kind:
    """A kind of fact a person can state about themselves or about a friend."""

    pool: str
    #: First person, said by the person it is about; ``{v}`` the value, ``{month}`` a month.
    first: tuple[str, ...]
    #: Third person, said by the user about ``{rel} {name}``.
    third: tuple[str, ...]
    #: The question about ``{who}`` (a name, or "Maya's colleague Nora").
    question: str


KINDS = {
    "work": Kind("employer", ("I work at {v} now, since {month}.", "I started at {v} in {month}."),
                 ("My {rel} {name} works at {v} now.", "My {rel} {name} got a job at {v} in {month}."),
                 "Where does {who} work?"),
    "home": Kind("city", ("I moved to {v} in {month}.", "I live in {v} now, since {month}."),
                 ("My {rel} {name} moved to {v} in {month}.",),
                 "Where does {who} live?"),
    "hobby": Kind("hobby", ("I've taken up {v}, twice a week.", "These days I do {v} every Sunday."),
                  ("My {rel} {name} has taken up {v}.",),
                  "What has {who} taken up?"),
    "car": Kind("car", ("I finally bought a car, a {v}.",), ("My {rel} {name} bought a {v}.",),
                "What car did {who} buy?"),
    "sport": Kind("sport", ("I play {v} on Thursdays now.",), ("My {rel} {name} plays {v} now.",),
                  "Which sport does {who} play?"),
    "language": Kind("language", ("I'm learning {v} at evening school.",),
                     ("My {rel} {name} is learning {v}.",), "Which language is {who} learning?"),
    "dog": Kind("pet_name", ("We got a dog! We called her {v}.",),
                ("My {rel} {name} got a dog called {v}.",), "What is the name of {who}'s dog?"),
}


@dataclass(frozen=True)
class Subject:
    """What a correction changes: the kind, the first statement, the change, the question."""

    kind: str
    pool: str
    stated: str
    changed: str
    question: str


SUBJECTS = [
    Subject("work", "employer", "I've been at {old} for three years now.",
            "Big news: I left {old}, I start at {new} on Monday.", "Where does {user} work now?"),
    Subject("home", "city", "I still live in {old}, near the station.",
            "We moved! We live in {new} now, not {old}.", "Where does {user} live now?"),
    Subject("sport", "sport", "My favourite sport is {old}, I play every week.",
            "I gave up {old}; {new} is my thing now.", "Which sport does {user} play now?"),
    Subject("car", "car", "I still drive my old {old}, it never breaks down.",
            "I sold the {old}! I drive a {new} now.", "What car does {user} drive now?"),
]
#: Relative day phrases of temporal_date turns and how many days back each one is.
DAYS_AGO = {"yesterday": 1, "two days ago": 2, "three days ago": 3}
CHATTER = [
    "How was your weekend?", "Not bad, a bit rainy.", "Did you watch the match?",
    "I'm so tired this week.", "Work has been busy.", "Same here, honestly.",
    "We should get coffee soon.", "Definitely, maybe next week.", "The weather is strange lately.",
    "I read a good book on the train.", "My phone keeps dying.", "Have you tried the new cafe?",
    "I was thinking about a trip somewhere.", "Traffic was terrible this morning.",
    "My neighbour's dog barked all night.", "I finally cleaned the flat.",
]


@dataclass(frozen=True)
class Turn:
    """One message: ``speaker`` is a name; ``turn_id`` the event id it is published with."""

    turn_id: str
    session_id: str
    speaker: str
    text: str
    at: datetime


@dataclass(frozen=True)
class Question:
    """A question to the user's memory, the answer's words, and where they were said."""

    question: str
    answer: str
    category: str
    evidence: tuple[str, ...]
    #: For corrections: the turns that hold the earlier, no longer true value.
    stale: tuple[str, ...] = ()
    #: For other-speaker and third-person facts: turns where another person of the dialogue
    #: states the same kind of fact with another value.
    distractors: tuple[str, ...] = ()


@dataclass
class Dialogue:
    """Two people's sessions; ``user`` is the speaker whose memory it is."""

    user: str
    other: str
    #: The memory's user id: unique per dialogue (the same pair of names comes back).
    user_id: str = ""
    sessions: list[list[Turn]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session]


def last_weekday(day: datetime, weekday: int) -> datetime:
    """The date "last <weekday>" names, said on ``day``: the most recent one before it."""
    back = (day.weekday() - weekday) % 7 or 7
    return day - timedelta(days=back)


def spoken_date(day: datetime) -> str:
    """A date as the questions write it: "14 March 2025"."""
    return day.strftime("%d %B %Y").lstrip("0")


def resolve_relative(text: str, said_at: datetime) -> datetime | None:
    """The day a turn's relative time reference names ("yesterday", "two days ago", "last
    Tuesday"), said at ``said_at``; None when the text holds none."""
    lowered = text.lower()
    for phrase, back in DAYS_AGO.items():
        if phrase in lowered:
            return said_at - timedelta(days=back)
    found = re.search(r"\blast (" + "|".join(WEEKDAYS) + r")\b", text, re.IGNORECASE)
    if found is None:
        return None
    return last_weekday(said_at, [d.lower() for d in WEEKDAYS].index(found.group(1).lower()))


class Writer:
    """Builds one dialogue's sessions turn by turn, with values from :attr:`pools`."""

    #: The values a dialogue draws from, by pool.
    pools: ClassVar[dict[str, list[Any]]] = POOLS
    #: The first day a dialogue may start on (within 30 days after).
    start: ClassVar[datetime] = datetime(2025, 1, 6, 18, 0, tzinfo=UTC)

    def __init__(self, rng: random.Random, user: str, other: str, index: int) -> None:
        self.rng = rng
        self.prefix = f"{user.lower()}{index}"
        self.dialogue = Dialogue(user=user, other=other, user_id=self.prefix)
        self.day = self.start + timedelta(days=rng.randrange(30))
        self._used: set[object] = set()
        #: (person, kind) pairs stated: "user", "other" or a friend's name; each person states
        #: a kind once, so a question about it has one answer.
        self.stated: set[tuple[str, str]] = set()

    def fresh(self, options: list[Any]) -> Any | None:
        """An option not planted before in this dialogue (a question has one answer), or
        None when all were."""
        left = [option for option in options if option not in self._used]
        if not left:
            return None
        chosen = self.rng.choice(left)
        self._used.add(chosen)
        return chosen

    def pick(self, pool: str) -> Any | None:
        """A value of ``pools[pool]`` this dialogue has not used yet, or None."""
        chosen = self.fresh([(pool, value) for value in self.pools[pool]])
        return None if chosen is None else chosen[1]

    def person(self, gender: str | None) -> str | None:
        """A name not used before in this dialogue, of ``gender`` ("he", "she"; None: either)."""
        return self.pick(gender or self.rng.choice(["he", "she"]))

    def fresh_day(self, day: datetime) -> bool:
        """Whether no other temporal question of the dialogue is about ``day`` (then it is
        now)."""
        return self.fresh([("day", day.date())]) is not None

    def relative_day(self) -> tuple[str, datetime] | None:
        """A day said relative to the session's ("yesterday", "two days ago", "last
        Tuesday") and the day it is, when no other temporal question is about it."""
        if self.rng.random() < 0.5:
            phrase = self.rng.choice(list(DAYS_AGO))
            when = self.day - timedelta(days=DAYS_AGO[phrase])
        else:
            weekday = self.rng.randrange(7)
            phrase = f"last {WEEKDAYS[weekday]}"
            when = last_weekday(self.day, weekday)
        return (phrase, when) if self.fresh_day(when) else None

    def new_session(self) -> None:
        self.day += timedelta(days=self.rng.randrange(4, 15))
        self.dialogue.sessions.append([])

    @property
    def session_id(self) -> str:
        return f"s{len(self.dialogue.sessions)}"

    def say(self, speaker: str, text: str) -> str:
        session = self.dialogue.sessions[-1]
        turn_id = f"{self.prefix}/{self.session_id}/t{len(session)}"
        at = self.day + timedelta(minutes=len(session))
        session.append(Turn(turn_id, self.session_id, speaker, text, at))
        return turn_id

    def chatter(self, count: int) -> None:
        speakers = (self.dialogue.user, self.dialogue.other)
        for i in range(count):
            self.say(speakers[i % 2], self.rng.choice(CHATTER))

    def ask(
        self,
        question: str,
        answer: str,
        category: str,
        evidence: tuple[str, ...],
        stale: tuple[str, ...] = (),
        distractors: tuple[str, ...] = (),
    ) -> None:
        self.dialogue.questions.append(
            Question(question, answer, category, evidence, stale, distractors)
        )

    def first_person(self, person: str, kind: str) -> tuple[str, str] | None:
        """A first-person statement of ``kind`` with a fresh value, marked as ``person``'s,
        and the value; None when the person stated that kind or the values ran out."""
        if (person, kind) in self.stated:
            return None
        spec = KINDS[kind]
        value = self.pick(spec.pool)
        if value is None:
            return None
        self.stated.add((person, kind))
        text = self.rng.choice(spec.first).format(v=value, month=self.rng.choice(MONTHS))
        return text, value


def _reply(w: Writer) -> None:
    """The user answers the other's question, about a trip (first person) or a relative
    (third person)."""
    user, other, rng = w.dialogue.user, w.dialogue.other, w.rng
    occasion = w.pick("occasion") if rng.random() < 0.5 else None
    if occasion is not None:
        city = w.pick("city")
        if city is None:
            return
        w.say(other, f"Where did you end up going {occasion}?")
        said = w.say(user, f"{city}! It rained, but the food made up for it.")
        w.ask(f"Where did {user} go {occasion}?", city, "reply", (said,))
        return
    relative = w.fresh([("relative", r) for r in RELATIVES])
    hobby = w.pick("hobby")
    if relative is None or hobby is None:
        return
    w.say(other, f"What is your {relative[1]} up to these days?")
    said = w.say(user, f"Oh, they took up {hobby}, every evening now.")
    w.ask(f"What did {user}'s {relative[1]} take up?", hobby, "reply", (said,))


def _temporal(w: Writer) -> None:
    """A time reference relative to the session's date; the question asks for the date."""
    user, rng = w.dialogue.user, w.rng
    weekday = rng.randrange(7)
    when = last_weekday(w.day, weekday)
    if not w.fresh_day(when):
        return
    pet_name = w.pick("pet_name")
    if pet_name is None:
        return
    said = w.say(user, f"Last {WEEKDAYS[weekday]} we finally adopted {rng.choice(PETS)}, {pet_name}.")
    w.say(w.dialogue.other, "That's lovely, send me pictures!")
    w.ask(f"When did {user} adopt {pet_name}?", spoken_date(when), "temporal", (said,))


def _temporal_date(w: Writer) -> None:
    """The question names a date; the turn says "yesterday", "two days ago" or "last
    <weekday>", which the session's date resolves to it."""
    user, rng = w.dialogue.user, w.rng
    said_day = w.relative_day()
    if said_day is None:
        return
    phrase, when = said_day
    activity = w.pick("activity")
    if activity is None:
        return
    words, answer = activity
    if phrase.endswith(" ago"):
        text = f"Guess what, I {words} {phrase}!"
    else:
        text = f"{phrase[0].upper()}{phrase[1:]} I {words}, can you believe it?"
    said = w.say(user, text)
    w.say(w.dialogue.other, rng.choice(["No way, well done!", "How did it go?", "Wow, finally."]))
    w.ask(f"What did {user} do on {spoken_date(when)}?", answer, "temporal_date", (said,))


def _other_speaker(w: Writer) -> None:
    """The other speaker's fact about themselves, often after the user's own of the same
    kind (a distractor)."""
    user, other, rng = w.dialogue.user, w.dialogue.other, w.rng
    kinds = [kind for kind in KINDS if (other, kind) not in w.stated]
    if not kinds:
        return
    kind = rng.choice(kinds)
    own = w.first_person(user, kind) if rng.random() < 0.6 else None
    distractors: tuple[str, ...] = ()
    if own is not None:
        distractors = (w.say(user, f"{own[0]} What about you?"),)
    else:
        w.say(user, rng.choice(["Anything new with you?", "And how are things on your side?",
                                "What's new with you?"]))
    theirs = w.first_person(other, kind)
    if theirs is None:
        return
    said = w.say(other, f"Oh nice! {theirs[0]}" if own is not None else theirs[0])
    w.ask(KINDS[kind].question.format(who=other), theirs[1], "other_speaker", (said,),
          distractors=distractors)


def _third_person(w: Writer) -> None:
    """The user's fact about a named friend, often beside a distractor: the other speaker's
    own fact of the same kind, or another friend's.

    Half the time the user names the friend in the statement ("My colleague Nora works at
    Zeiss now"); otherwise the other speaker asks about the friend by name and the user's
    answer says "she" ("How is your colleague Nora?" "She works at Zeiss now."): the
    evidence, the answer, then shares no word with the question but the kind of fact.
    """
    user, other, rng = w.dialogue.user, w.dialogue.other, w.rng
    gender = rng.choice(["he", "she"])
    name, kind = w.person(gender), rng.choice(list(KINDS))
    spec = KINDS[kind]
    value = w.pick(spec.pool)
    if name is None or value is None:
        return
    rel, month = rng.choice(FRIENDS), rng.choice(MONTHS)
    text = rng.choice(spec.third).format(rel=rel, name=name, v=value, month=month)
    if rng.random() < 0.5:
        w.say(other, rng.choice(["How are your friends doing?", "Any news from people you know?",
                                 "Heard from anyone lately?"]))
    else:
        w.say(other, rng.choice([f"How is your {rel} {name} doing?", f"Any news from {name}?"]))
        text = text.replace(f"My {rel} {name}", gender.capitalize(), 1)
    said = w.say(user, text)
    w.stated.add((name, kind))
    distractors: tuple[str, ...] = ()
    if rng.random() < 0.6:
        if rng.random() < 0.5:
            theirs = w.first_person(other, kind)
            if theirs is not None:
                distractors = (w.say(other, f"Ha, funny. {theirs[0]}"),)
        else:
            friend, second = w.person(None), w.pick(spec.pool)
            if friend is not None and second is not None:
                w.stated.add((friend, kind))
                also = rng.choice(spec.third).format(
                    rel=rng.choice(FRIENDS), name=friend, v=second, month=rng.choice(MONTHS)
                )
                distractors = (w.say(user, f"Oh, and {also[0].lower()}{also[1:]}"),)
    w.ask(spec.question.format(who=f"{user}'s {rel} {name}"), value, "third_person", (said,),
          distractors=distractors)


def _multi_hop(w: Writer, later: list[tuple[str, str, str]]) -> None:
    """A relative's name and city now; what they do, by name only, in a later session."""
    relative = w.fresh([("relative", r) for r in RELATIVES])
    if relative is None:
        return
    name, city = w.person(RELATIVES[relative[1]]), w.pick("city")
    if name is None or city is None:
        return
    first = w.say(w.dialogue.user, f"My {relative[1]} {name} moved to {city} last year.")
    w.say(w.dialogue.other, f"{city}, nice. Does {name} like it?")
    later.append((first, name, f"{relative[1]} in {city}"))


def _multi_hop_close(w: Writer, pending: tuple[str, str, str]) -> None:
    first, name, who = pending
    job = w.pick("job")
    if job is None:
        return
    w.say(w.dialogue.other, f"How is {name} doing?")
    said = w.say(w.dialogue.user, f"{name} just started working at {job}.")
    w.ask(f"Where does {w.dialogue.user}'s {who} work?", job, "multi_hop", (first, said))


def _correction(w: Writer, later: list[tuple[str, int, str]]) -> None:
    """A statement of the user's a later session changes (each kind once per dialogue)."""
    user = w.dialogue.user
    subjects = [i for i, s in enumerate(SUBJECTS) if (user, s.kind) not in w.stated]
    if not subjects:
        return
    subject = w.rng.choice(subjects)
    old = w.pick(SUBJECTS[subject].pool)
    if old is None:
        return
    w.stated.add((user, SUBJECTS[subject].kind))
    first = w.say(user, SUBJECTS[subject].stated.format(old=old))
    w.say(w.dialogue.other, "Oh, I didn't know that.")
    later.append((first, subject, old))


def _correction_close(w: Writer, pending: tuple[str, int, str]) -> None:
    first, subject, old = pending
    spec = SUBJECTS[subject]
    new = w.pick(spec.pool)
    if new is None:
        return
    said = w.say(w.dialogue.user, spec.changed.format(old=old, new=new))
    w.say(w.dialogue.other, "Congratulations!")
    w.ask(spec.question.format(user=w.dialogue.user), new, "correction", (said,), (first,))

#: A plant whose turns span sessions: it says its first turns, then yields once per later
#: session it speaks in; it asks its question when it ends.
Chain = Iterator[None]
_PRONOUNS = {"he": ("he", "his"), "she": ("she", "her")}


def _news(w: Writer, name: str, gender: str, fact: str) -> str:
    """The user's turn telling ``fact`` about ``name`` (the fact's text opens with the
    pronoun's place, e.g. "works at Bosch"): half the time by name, otherwise as "she"
    after the other speaker asks about the person by name. Returns the turn id."""
    if w.rng.random() < 0.5:
        return w.say(w.dialogue.user, f"{name} {fact} now.")
    w.say(w.dialogue.other, w.rng.choice([f"How is {name} doing?", f"Any news from {name}?"]))
    return w.say(w.dialogue.user, f"{_PRONOUNS[gender][0].capitalize()} {fact}, believe it or not.")


def _met_chain(w: Writer) -> Chain:
    """Multi-hop over two or three sessions: someone met at a venue; later where they work;
    half the time, later still, their sibling's job. The questions name only the venue."""
    user, other, rng = w.dialogue.user, w.dialogue.other, w.rng
    gender = rng.choice(["he", "she"])
    venue, name = w.fresh([("venue", v) for v in VENUES]), w.person(gender)
    if venue is None or name is None:
        return
    met = w.say(user, f"At the {venue[1]} I met someone really nice, {name}. We talked for ages.")
    w.say(other, "Sounds like a new friend!")
    yield
    employer = w.pick("employer")
    if employer is None:
        return
    works = _news(w, name, gender, f"works at {employer}")
    w.ask(f"Where does the person {user} met at the {venue[1]} work?", employer, "multi_hop",
          (met, works))
    relation = rng.choice(["brother", "sister"])
    sibling = w.person("he" if relation == "brother" else "she")
    if sibling is None or rng.random() < 0.5:
        return
    introduced = w.say(
        user, f"{name} introduced me to {_PRONOUNS[gender][1]} {relation} {sibling} last night."
    )
    w.chatter(1)
    yield
    job = w.pick("job")
    if job is None:
        return
    said = w.say(user, f"Funny, {sibling} just started working at {job}.")
    w.ask(f"Where does the {relation} of the person {user} met at the {venue[1]} work?", job,
          "multi_hop", (met, introduced, said))


def _relative_chain(w: Writer) -> Chain:
    """Open-domain over two or three sessions: "my aunt Greta" once; by name or "she" later,
    a hobby, and half the time a move; the question names the relation only."""
    user, other, rng = w.dialogue.user, w.dialogue.other, w.rng
    relative = w.fresh([("relative", r) for r in RELATIVES])
    if relative is None:
        return
    gender = RELATIVES[relative[1]] or rng.choice(["he", "she"])
    name = w.person(gender)
    if name is None:
        return
    named = w.say(user, f"My {relative[1]} {name} is coming to stay with us for a while.")
    w.say(other, f"Oh, how nice. Say hi to {name} from me!")
    yield
    hobby = w.pick("hobby")
    if hobby is None:
        return
    evidence = [named, _news(w, name, gender, f"has taken up {hobby}")]
    if rng.random() < 0.5:
        yield
        city = w.pick("city")
        if city is not None:
            evidence.append(w.say(user, f"{name} is moving to {city} in the spring."))
    w.ask(f"What is new with {user}'s {relative[1]}?", hobby, "open_domain", tuple(evidence))


PLANTS: dict[str, Callable[[Writer], None]] = {
    "reply": _reply,
    "temporal": _temporal,
    "temporal_date": _temporal_date,
    "other_speaker": _other_speaker,
    "third_person": _third_person,
}
#: Plants whose turns span two or three sessions.
CHAINS: dict[str, Callable[[Writer], Chain]] = {"met": _met_chain, "relative": _relative_chain}
#: Plants a session draws from; multi_hop, correction and the chains end in later sessions.
PLANTS_PER_SESSION = 3


def generate(dialogues: int, sessions: int, turns_per_session: int, seed: int) -> list[Dialogue]:
    """``dialogues`` seeded dialogues of ``sessions`` sessions each, about
    ``turns_per_session`` turns per session (chit-chat around the planted turns)."""
    return schedule(PLANTING, dialogues, sessions, turns_per_session, seed)


@dataclass(frozen=True)
class Planting:
    """What a generator plants in its sessions: its pairs of speakers, the writer of a
    dialogue (``new_session``, ``chatter``, ``dialogue``) and its plants."""

    pairs: list[tuple[str, str]]
    writer: Callable[[random.Random, str, str, int], Any]
    plants: dict[str, Callable[[Any], None]]
    chains: dict[str, Callable[[Any], Chain]]
    multi_hop: Callable[[Any, list[Any]], None]
    multi_hop_close: Callable[[Any, Any], None]
    correction: Callable[[Any, list[Any]], None]
    correction_close: Callable[[Any, Any], None]


def schedule(
    planting: Planting, dialogues: int, sessions: int, turns_per_session: int, seed: int
) -> list[Dialogue]:
    """The dialogues of a generator: per session, chit-chat, the multi-hop questions and
    corrections planted earlier closed (half the time, all of them in the last session),
    the chains moved on, then :data:`PLANTS_PER_SESSION` new plants."""
    if sessions < 2:
        raise ValueError("sessions must be at least 2 (multi-hop and corrections span two)")
    rng = random.Random(seed)
    made = []
    for index in range(dialogues):
        user, other = planting.pairs[index % len(planting.pairs)]
        w = planting.writer(rng, user, other, index)
        hops: list[Any] = []
        changes: list[Any] = []
        chains: list[Chain] = []
        for number in range(sessions):
            w.new_session()
            w.chatter(rng.randrange(2, 5))
            last = number == sessions - 1
            while hops and (last or rng.random() < 0.5):
                planting.multi_hop_close(w, hops.pop(0))
                if not last:
                    break
            while changes and (last or rng.random() < 0.5):
                planting.correction_close(w, changes.pop(0))
                if not last:
                    break
            chains = [chain for chain in chains if _advance(chain, last, rng)]
            if not last:
                kinds = [*planting.plants, "multi_hop", "correction", *planting.chains]
                for plant in rng.sample(kinds, PLANTS_PER_SESSION):
                    if plant in planting.chains:
                        chain = planting.chains[plant](w)
                        if _advance(chain, False, rng, always=True):
                            chains.append(chain)
                    elif plant == "multi_hop":
                        planting.multi_hop(w, hops)
                    elif plant == "correction":
                        planting.correction(w, changes)
                    else:
                        planting.plants[plant](w)
                    w.chatter(rng.randrange(1, 3))
            w.chatter(max(0, turns_per_session - len(w.dialogue.sessions[-1])))
        made.append(w.dialogue)
    return made


def _advance(chain: Chain, last: bool, rng: random.Random, *, always: bool = False) -> bool:
    """Let ``chain`` speak in this session (always when ``always``; to its end in the last
    session; otherwise half the time); whether it has more to say later."""
    if not (always or last or rng.random() < 0.5):
        return True
    for _ in range(3 if last else 1):
        try:
            next(chain)
        except StopIteration:
            return False
    return not last


PLANTING = Planting(
    PAIRS, Writer, PLANTS, CHAINS, _multi_hop, _multi_hop_close, _correction, _correction_close
)
