"""Seeded long conversations between two named people, with questions and their evidence.

The data set of the retrieval benchmark (issue 13): it is written to be unlike the offline
extractor's own patterns. Two people talk over many sessions, weeks apart; one of them is the
memory's user. The facts a question asks about sit where real dialogue puts them:

* ``reply``: in the answer to the other speaker's question ("Where did you go?" "Lisbon,
  with my sister."), in the first person or about a third person;
* ``temporal``: in a time reference relative to the session's date ("last Tuesday"); the
  question asks for the date;
* ``multi_hop``: in two turns of two sessions ("my brother Leo lives in Oslo" ... "Leo
  started at a bakery"), joined by a name the question does not repeat;
* ``correction``: in a later turn that changes an earlier one; the question asks for the
  current value, and the earlier turn is kept as ``stale``.

Every other turn is chit-chat on the same topics (near misses). Each question lists the ids
of the turns that hold its answer (``evidence``): a search is scored by the turns its hits
cite in ``source_event_ids``. The generator only makes data; it asks nothing of memstream.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

CATEGORIES = ("reply", "temporal", "multi_hop", "correction")

PAIRS = [("Maya", "Tom"), ("Ines", "Karl"), ("Ruth", "Omar"), ("Lena", "Jonas"), ("Aiko", "Ben")]
CITIES = ["Lisbon", "Oslo", "Porto", "Krakow", "Ghent", "Bergen", "Lyon", "Turin", "Cork", "Graz"]
RELATIVES = ["brother", "sister", "cousin", "aunt", "uncle", "niece"]
KIN_NAMES = ["Leo", "Clara", "Milan", "Sofia", "Felix", "Nora", "Emil", "Vera"]
JOBS = ["a bakery", "a bike shop", "the city library", "a vet clinic", "a print studio", "a ferry line"]
EMPLOYERS = ["Siemens", "Bosch", "Philips", "Nokia", "Airbus", "Zeiss", "Ikea", "Lego"]
PETS = ["a cat", "a puppy", "a rabbit", "a parrot", "a tortoise"]
PET_NAMES = ["Pip", "Miso", "Biscuit", "Olive", "Pepper", "Juno", "Tofu", "Ziggy", "Mango", "Rolo"]
OCCASIONS = ["for the long weekend", "for her birthday", "at Easter", "for the conference",
             "in the autumn break", "for the wedding", "over New Year", "for the marathon"]
#: What a correction changes: the first statement, the change, the question.
SUBJECTS = [
    ("I've been at {old} for three years now.", "Big news: I left {old}, I start at {new} on Monday.",
     "Where does {user} work now?", EMPLOYERS),
    ("I still live in {old}, near the station.", "We moved! We live in {new} now, not {old}.",
     "Where does {user} live now?", CITIES),
    ("My favourite sport is {old}, I play every week.", "I gave up {old}; {new} is my thing now.",
     "Which sport does {user} play now?", ["tennis", "squash", "volleyball", "badminton", "hockey"]),
]
HOBBIES = ["pottery", "bouldering", "the cello", "sourdough baking", "salsa", "chess"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
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


class _Writer:
    """Builds one dialogue's sessions turn by turn."""

    def __init__(self, rng: random.Random, user: str, other: str, index: int) -> None:
        self.rng = rng
        self.prefix = f"{user.lower()}{index}"
        self.dialogue = Dialogue(user=user, other=other, user_id=self.prefix)
        self.day = datetime(2025, 1, 6, 18, 0, tzinfo=UTC) + timedelta(days=rng.randrange(30))
        self._used: set[object] = set()

    def fresh(self, options: list[Any]) -> Any | None:
        """An option not planted before in this dialogue (a question has one answer), or
        None when all were."""
        left = [option for option in options if option not in self._used]
        if not left:
            return None
        chosen = self.rng.choice(left)
        self._used.add(chosen)
        return chosen

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

    def ask(self, question: str, answer: str, category: str, evidence: tuple[str, ...], stale: tuple[str, ...] = ()) -> None:
        self.dialogue.questions.append(Question(question, answer, category, evidence, stale))


def _reply(w: _Writer) -> None:
    """The user answers the other's question, about a trip (first person) or a relative
    (third person)."""
    user, other, rng = w.dialogue.user, w.dialogue.other, w.rng
    occasion = w.fresh(OCCASIONS) if rng.random() < 0.5 else None
    if occasion is not None:
        city = rng.choice(CITIES)
        w.say(other, f"Where did you end up going {occasion}?")
        said = w.say(user, f"{city}! It rained, but the food made up for it.")
        w.ask(f"Where did {user} go {occasion}?", city, "reply", (said,))
        return
    relative = w.fresh([("hobby", r) for r in RELATIVES])
    if relative is None:
        return
    hobby = rng.choice(HOBBIES)
    w.say(other, f"What is your {relative[1]} up to these days?")
    said = w.say(user, f"Oh, they took up {hobby}, every evening now.")
    w.ask(f"What did {user}'s {relative[1]} take up?", hobby, "reply", (said,))


def _temporal(w: _Writer) -> None:
    """A time reference relative to the session's date."""
    user, rng = w.dialogue.user, w.rng
    pet_name = w.fresh(PET_NAMES)
    if pet_name is None:
        return
    pet, weekday = rng.choice(PETS), rng.randrange(7)
    said = w.say(user, f"Last {WEEKDAYS[weekday]} we finally adopted {pet}, {pet_name}.")
    w.say(w.dialogue.other, "That's lovely, send me pictures!")
    when = last_weekday(w.day, weekday)
    w.ask(f"When did {user} adopt {pet_name}?", when.strftime("%d %B %Y").lstrip("0"), "temporal", (said,))


def _multi_hop(w: _Writer, later: list[tuple[str, str, str]]) -> None:
    """A relative's name and city now; what they do, by name only, in a later session."""
    user, rng = w.dialogue.user, w.rng
    relative, name = w.fresh([("kin", r) for r in RELATIVES]), w.fresh(KIN_NAMES)
    if relative is None or name is None:
        return
    city = rng.choice(CITIES)
    first = w.say(user, f"My {relative[1]} {name} moved to {city} last year.")
    w.say(w.dialogue.other, f"{city}, nice. Does {name} like it?")
    later.append((first, name, f"{relative[1]} in {city}"))


def _multi_hop_close(w: _Writer, pending: tuple[str, str, str]) -> None:
    first, name, who = pending
    job = w.rng.choice(JOBS)
    w.say(w.dialogue.other, f"How is {name} doing?")
    said = w.say(w.dialogue.user, f"{name} just started working at {job}.")
    w.ask(f"Where does {w.dialogue.user}'s {who} work?", job, "multi_hop", (first, said))


def _correction(w: _Writer, later: list[tuple[str, int, str]]) -> None:
    """A statement a later session changes (each subject once per dialogue)."""
    subject = w.fresh(list(range(len(SUBJECTS))))
    if subject is None:
        return
    stated, _, _, values = SUBJECTS[subject]
    old = w.rng.choice(values)
    first = w.say(w.dialogue.user, stated.format(old=old))
    w.say(w.dialogue.other, "Oh, I didn't know that.")
    later.append((first, subject, old))


def _correction_close(w: _Writer, pending: tuple[str, int, str]) -> None:
    first, subject, old = pending
    _, changed, question, values = SUBJECTS[subject]
    new = w.rng.choice([value for value in values if value != old])
    said = w.say(w.dialogue.user, changed.format(old=old, new=new))
    w.say(w.dialogue.other, "Congratulations!")
    w.ask(question.format(user=w.dialogue.user), new, "correction", (said,), (first,))


def generate(dialogues: int, sessions: int, turns_per_session: int, seed: int) -> list[Dialogue]:
    """``dialogues`` seeded dialogues of ``sessions`` sessions each, about
    ``turns_per_session`` turns per session (chit-chat around the planted turns)."""
    if sessions < 2:
        raise ValueError("sessions must be at least 2 (multi-hop and corrections span two)")
    rng = random.Random(seed)
    made = []
    for index in range(dialogues):
        user, other = PAIRS[index % len(PAIRS)]
        w = _Writer(rng, user, other, index)
        hops: list[tuple[str, str, str]] = []
        changes: list[tuple[str, int, str]] = []
        for number in range(sessions):
            w.new_session()
            w.chatter(rng.randrange(2, 5))
            last = number == sessions - 1
            while hops and (last or rng.random() < 0.5):
                _multi_hop_close(w, hops.pop(0))
                if not last:
                    break
            while changes and (last or rng.random() < 0.5):
                _correction_close(w, changes.pop(0))
                if not last:
                    break
            if not last:
                for plant in rng.sample(["reply", "temporal", "multi_hop", "correction"], 2):
                    if plant == "reply":
                        _reply(w)
                    elif plant == "temporal":
                        _temporal(w)
                    elif plant == "multi_hop":
                        _multi_hop(w, hops)
                    else:
                        _correction(w, changes)
                    w.chatter(rng.randrange(1, 3))
            w.chatter(max(0, turns_per_session - len(w.dialogue.sessions[-1])))
        made.append(w.dialogue)
    return made
