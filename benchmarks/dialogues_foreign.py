"""The dialogue benchmark's foreign split: conversations the offline extractor was not written for.

The same categories, question contract and turn-id scheme as ``dialogues.py`` (its
dataclasses and date helpers are reused), but with phrasings, names, places, employers,
hobbies and chit-chat written apart from its templates: messaging-app style, lowercase
openings, fillers ("lol", "honestly", "anyway"), several sentences per turn, facts mentioned
in passing. Every fact-bearing turn and every question has several phrasings.

As in ``dialogues.py``, every value is used once per dialogue, so an answer's words appear in
its evidence and in no other turn; dates asked about are unique per dialogue; corrections
keep the earlier statement as ``stale``; other-speaker and third-person facts often come
with a ``distractor`` (someone else's fact of the same kind, another value).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from dialogues import (
    CATEGORIES,
    MONTHS,
    WEEKDAYS,
    Dialogue,
    Planting,
    Question,
    Writer,
    last_weekday,
    schedule,
    spoken_date,
)
from foreign_phrasings import (
    ASK_BACK,
    CHATTER,
    CLOSERS,
    EVENTS,
    FRIENDS,
    KINDS,
    OPENERS,
    PAIRS,
    POOLS,
    REACTIONS,
    RELATIVES,
    SUBJECTS,
    VENUES,
)

__all__ = ["CATEGORIES", "POOLS", "generate"]

_PRONOUNS = {"he": ("he", "his"), "she": ("she", "her")}


def article(noun: str) -> str:
    """``noun`` with "a" or "an" in front."""
    return f"{'an' if noun[0].lower() in 'aeiou' else 'a'} {noun}"


def chat_case(text: str) -> str:
    """``text`` with its first letter capitalised, as most phones do."""
    return text[:1].upper() + text[1:]


#: Words a turn may open with that make another opening filler redundant.
FILLERS = {"oh", "ok", "so", "honestly", "lol", "anyway", "sorry", "guess", "wait"}


class _Writer(Writer):
    """Builds one dialogue's sessions turn by turn, with this module's values, chit-chat
    and padding."""

    pools: ClassVar[dict[str, list[Any]]] = POOLS
    start: ClassVar[datetime] = datetime(2025, 2, 3, 20, 0, tzinfo=UTC)

    def pad(self, text: str) -> str:
        """``text`` with a chatty opening or closing, now and then (none it already has)."""
        opener, closer = self.rng.choice(OPENERS), self.rng.choice(CLOSERS)
        if opener and text.split()[0].strip(",.").lower() in FILLERS:
            opener = ""
        if closer and closer.split()[0].strip(",.") not in text.lower():
            text += (". " if text[-1].isalnum() and closer != "lol" else " ") + closer
        return chat_case(opener + text)

    def chatter(self, count: int) -> None:
        speakers = (self.dialogue.user, self.dialogue.other)
        start = self.rng.randrange(2)
        for i in range(start, start + count):
            self.say(speakers[i % 2], self.rng.choice(CHATTER))

    def ask_any(self, questions: Sequence[str], answer: str, category: str,
            evidence: tuple[str, ...], stale: tuple[str, ...] = (),
            distractors: tuple[str, ...] = (), **names: str) -> None:
        """Ask one of ``questions`` (formatted with ``names``)."""
        question = self.rng.choice(list(questions)).format(**names)
        self.dialogue.questions.append(
            Question(question, answer, category, evidence, stale, distractors)
        )

    def first_person(self, person: str, kind: str) -> tuple[str, str] | None:
        """``person``'s own statement of ``kind`` with a fresh value, and the value; None when
        they stated that kind already or the values ran out."""
        if (person, kind) in self.stated:
            return None
        spec = KINDS[kind]
        value = self.pick(spec.pool)
        if value is None:
            return None
        self.stated.add((person, kind))
        text = self.rng.choice(spec.first).format(v=value, a=article(value),
                                                  month=self.rng.choice(MONTHS))
        return text, value


def _reply(w: _Writer) -> None:
    """The user's answer to the other's question: a trip, or an unnamed relative's hobby."""
    user, other, rng = w.dialogue.user, w.dialogue.other, w.rng
    occasion = w.pick("occasion") if rng.random() < 0.5 else None
    if occasion is not None:
        city = w.pick("city")
        if city is None:
            return
        w.say(other, rng.choice([f"so where did you go {occasion}?",
                                 f"wait where did you end up {occasion}??",
                                 f"did you go anywhere nice {occasion}?"]))
        said = w.say(user, rng.choice([
            f"{city}! rained the whole time but the food was amazing",
            f"we went to {city}, honestly best trip in ages",
            f"{city} :) flights were cheap, couldn't say no. still tired lol",
        ]))
        w.ask_any(["Where did {user} go {occasion}?", "Which city did {user} visit {occasion}?"],
              city, "reply", (said,), user=user, occasion=occasion)
        return
    relative = w.fresh([("relative", r) for r in RELATIVES])
    hobby = w.pick("hobby")
    if relative is None or hobby is None:
        return
    rel = relative[1]
    w.say(other, rng.choice([f"what's your {rel} up to these days?", f"how's your {rel}?",
                             f"how's your {rel} doing lately?"]))
    said = w.say(user, rng.choice([
        f"oh they've gotten super into {hobby}, it's all they talk about",
        f"{hobby}! every single evening lol",
        f"honestly? {hobby}. don't ask. it's a whole thing",
    ]))
    w.ask_any(["What did {user}'s {rel} take up?", "What is {user}'s {rel} into now?"], hobby,
          "reply", (said,), user=user, rel=rel)


def _temporal(w: _Writer) -> None:
    """An event "last <weekday>"; the question names the event and asks for the date."""
    user, rng = w.dialogue.user, w.rng
    weekday = rng.randrange(7)
    when = last_weekday(w.day, weekday)
    if not w.fresh_day(when):
        return
    day = WEEKDAYS[weekday]
    event = rng.choice(list(EVENTS))
    pool = {"kitten": "pet_name", "gig": "bar", "baby": rng.choice(["he", "she"])}[event]
    value = w.pick(pool)
    if value is None:
        return
    texts, questions = EVENTS[event]
    said = w.say(user, w.pad(rng.choice(texts).format(day=day, v=value)))
    w.say(w.dialogue.other, rng.choice(["aww congrats!", "send pics!!", "haha amazing",
                                        "omg that's so exciting"]))
    w.ask_any(questions, spoken_date(when), "temporal", (said,), user=user, v=value)


def _temporal_date(w: _Writer) -> None:
    """The question names a date; the turn says "yesterday", "two days ago", "three days ago"
    or "last <weekday>", which the session's date resolves to it."""
    user, rng = w.dialogue.user, w.rng
    said_day = w.relative_day()
    if said_day is None:
        return
    phrase, when = said_day
    activity = w.pick("activity")
    if activity is None:
        return
    words, answer = activity
    text = rng.choice([f"ok so I {words} {phrase} lol", f"{phrase} I {words}. what a day honestly",
                       f"not much news, except I {words} {phrase}!",
                       f"sorry for the slow replies, I {words} {phrase} and I'm still recovering"])
    said = w.say(user, chat_case(text))
    w.say(w.dialogue.other, rng.choice(["no way, how was it?", "haha of course you did",
                                        "wow ok", "wait tell me everything"]))
    w.ask_any(["What did {user} do on {date}?", "What happened in {user}'s life on {date}?",
           "What was {user} up to on {date}?"], answer, "temporal_date", (said,),
          user=user, date=spoken_date(when))


def _other_speaker(w: _Writer) -> None:
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
        distractors = (w.say(user, chat_case(f"{own[0]}. {rng.choice(ASK_BACK)}")),)
    else:
        w.say(user, rng.choice(["anyway enough about me, what's new with you?",
                                "how are things on your side?", "tell me your news!"]))
    theirs = w.first_person(other, kind)
    if theirs is None:
        return
    text = f"{rng.choice(REACTIONS)} {theirs[0]}" if own is not None else w.pad(theirs[0])
    said = w.say(other, chat_case(text))
    w.ask_any(KINDS[kind].questions, theirs[1], "other_speaker", (said,), distractors=distractors,
          who=other)


def _third_person(w: _Writer) -> None:
    """The user's fact about a named friend (by name, or "she" in answer to the other's
    question naming the friend), often beside a distractor: the other speaker's own fact of
    the same kind, or another friend's."""
    user, other, rng = w.dialogue.user, w.dialogue.other, w.rng
    gender = rng.choice(["he", "she"])
    name, kind = w.person(gender), rng.choice(list(KINDS))
    spec = KINDS[kind]
    value = w.pick(spec.pool)
    if name is None or value is None:
        return
    rel = rng.choice(FRIENDS)
    if rng.random() < 0.5:
        w.say(other, rng.choice(["heard from anyone lately?", "any gossip? lol",
                                 "how's everyone doing?"]))
        who = rng.choice([f"my {rel} {name}", f"{name} (my {rel})",
                          f"you know {name}, my {rel}? {gender}"])
    else:
        w.say(other, rng.choice([f"how's your {rel} {name} doing?", f"any news from {name}?",
                                 f"what's {name} up to these days?"]))
        who = gender
    template = rng.choice(spec.third)
    fact = template.format(who=who, v=value, a=article(value),
                                         month=rng.choice(MONTHS))
    said = w.say(user, w.pad(fact))
    w.stated.add((name, kind))
    distractors: tuple[str, ...] = ()
    if rng.random() < 0.6:
        if rng.random() < 0.5:
            theirs = w.first_person(other, kind)
            if theirs is not None:
                distractors = (w.say(other, chat_case(f"ha funny, {theirs[0]}")),)
        else:
            friend, second = w.person(None), w.pick(spec.pool)
            if friend is not None and second is not None:
                w.stated.add((friend, kind))
                also = rng.choice([t for t in spec.third if t != template]).format(
                    who=f"my {rng.choice(FRIENDS)} {friend}", v=second, a=article(second),
                    month=rng.choice(MONTHS),
                )
                distractors = (w.say(user, f"oh and {also}, everyone's changing everything lol"),)
    w.ask_any(spec.questions, value, "third_person", (said,), distractors=distractors,
          who=f"{user}'s {rel} {name}")


def _multi_hop(w: _Writer, later: list[tuple[str, str, str, str]]) -> None:
    """A relative's name and new city now; their job, by name only, in a later session."""
    relative = w.fresh([("relative", r) for r in RELATIVES])
    if relative is None:
        return
    rel = relative[1]
    name, city = w.person(RELATIVES[rel]), w.pick("city")
    if name is None or city is None:
        return
    first = w.say(w.dialogue.user, w.pad(w.rng.choice([
        f"my {rel} {name} just moved to {city}!",
        f"{name}, my {rel}, finally left for {city} last month",
        f"we helped my {rel} {name} move to {city} this weekend, my back is dead",
    ])))
    w.say(w.dialogue.other, w.rng.choice([f"{city}?? so cool. does {name} like it?",
                                          f"ooh {city}, I've always wanted to go"]))
    later.append((first, name, rel, city))


def _multi_hop_close(w: _Writer, pending: tuple[str, str, str, str]) -> None:
    first, name, rel, city = pending
    job = w.pick("job")
    if job is None:
        return
    w.say(w.dialogue.other, w.rng.choice([f"how's {name} settling in?", f"any news from {name}?"]))
    said = w.say(w.dialogue.user, w.pad(w.rng.choice([
        f"{name} found a job at {article(job)}!",
        f"{name} is working at {article(job)} now, loves it",
        f"oh {name} got hired at {article(job)}, finally",
    ])))
    w.ask_any(["Where does {user}'s {rel} in {city} work?",
           "What kind of place does {user}'s {rel} who moved to {city} work at?"], job,
          "multi_hop", (first, said), user=w.dialogue.user, rel=rel, city=city)


def _correction(w: _Writer, later: list[tuple[str, int, str]]) -> None:
    """A statement of the user's that a later session changes (each kind once per dialogue)."""
    user = w.dialogue.user
    subjects = [i for i, s in enumerate(SUBJECTS) if (user, s.kind) not in w.stated]
    if not subjects:
        return
    subject = w.rng.choice(subjects)
    old = w.pick(SUBJECTS[subject].pool)
    if old is None:
        return
    w.stated.add((user, SUBJECTS[subject].kind))
    first = w.say(user, w.pad(w.rng.choice(SUBJECTS[subject].stated).format(old=old)))
    w.say(w.dialogue.other, w.rng.choice(["haha classic", "sounds like you", "fair enough"]))
    later.append((first, subject, old))


def _correction_close(w: _Writer, pending: tuple[str, int, str]) -> None:
    first, subject, old = pending
    spec = SUBJECTS[subject]
    new = w.pick(spec.pool)
    if new is None:
        return
    text = w.rng.choice(spec.changed).format(old=old, new=new, a_new=article(new))
    said = w.say(w.dialogue.user, w.pad(text))
    w.say(w.dialogue.other, w.rng.choice(["WHAT. since when??", "omg congrats!", "big news!!"]))
    w.ask_any(spec.questions, new, "correction", (said,), (first,), user=w.dialogue.user)


#: A plant whose turns span sessions: it yields once per later session it speaks in.
Chain = Iterator[None]


def _news(w: _Writer, name: str, gender: str, fact: str) -> str:
    """The user's turn telling ``fact`` about ``name`` ("works at Canva"): by name, or as
    "she" after the other asks about them by name. Returns the turn id."""
    if w.rng.random() < 0.5:
        return w.say(w.dialogue.user, w.pad(w.rng.choice(
            [f"{name} {fact}", f"did I mention {name} {fact}?", f"so apparently {name} {fact}"]
        )))
    w.say(w.dialogue.other, w.rng.choice([f"how's {name}?", f"and {name}? still around?",
                                          f"what's the latest with {name}?"]))
    return w.say(w.dialogue.user, chat_case(f"{_PRONOUNS[gender][0]} {fact}, believe it or not"))


def _met_chain(w: _Writer) -> Chain:
    """Multi-hop over two or three sessions: someone met at a venue; later their employer;
    half the time, later still, their sibling's job. The questions name only the venue."""
    user, other, rng = w.dialogue.user, w.dialogue.other, w.rng
    gender = rng.choice(["he", "she"])
    venue, name = w.fresh([("venue", v) for v in VENUES]), w.person(gender)
    if venue is None or name is None:
        return
    place = venue[1]
    met = w.say(user, w.pad(rng.choice([
        f"went to a {place} on saturday and met {name}, super funny",
        f"ok so at the {place} I got talking to {name}, we're getting coffee next week",
        f"{name} from the {place} added me on insta lol",
    ])))
    w.say(other, rng.choice(["a new friend!", "ooh who's that", "love that for you"]))
    yield
    employer = w.pick("employer")
    if employer is None:
        return
    works = _news(w, name, gender, rng.choice([f"works at {employer} now", f"is at {employer}"]))
    w.ask_any(["Where does the person {user} met at the {place} work?",
           "Which company does {user}'s friend from the {place} work for?"], employer,
          "multi_hop", (met, works), user=user, place=place)
    relation = rng.choice(["brother", "sister"])
    sibling = w.person("he" if relation == "brother" else "she")
    if sibling is None or rng.random() < 0.5:
        return
    introduced = w.say(user, w.pad(rng.choice([
        f"{name} introduced me to {_PRONOUNS[gender][1]} {relation} {sibling} at a party",
        f"met {name}'s {relation} yesterday, {sibling}, same sense of humour lol",
    ])))
    w.chatter(1)
    yield
    job = w.pick("job")
    if job is None:
        return
    said = w.say(user, w.pad(rng.choice([f"{sibling} works at {article(job)} btw, small world",
                                         f"turns out {sibling} runs {article(job)}"])))
    w.ask_any(["Where does the {relation} of the person {user} met at the {place} work?",
           "What kind of place does the {relation} of {user}'s friend from the {place} work at?"],
          job, "multi_hop", (met, introduced, said), user=user, place=place, relation=relation)


def _relative_chain(w: _Writer) -> Chain:
    """Open-domain over two or three sessions: the relative named once; by name or "she"
    later, a hobby, and half the time a move; the question names the relation only."""
    user, other, rng = w.dialogue.user, w.dialogue.other, w.rng
    relative = w.fresh([("relative", r) for r in RELATIVES])
    if relative is None:
        return
    rel = relative[1]
    gender = RELATIVES[rel] or rng.choice(["he", "she"])
    name = w.person(gender)
    if name is None:
        return
    named = w.say(user, w.pad(rng.choice([
        f"my {rel} {name} is staying with us for a few weeks, send help",
        f"{name} (my {rel}) is visiting next week",
        f"guess who's crashing on our sofa: my {rel} {name}",
    ])))
    w.say(other, rng.choice([f"aww say hi to {name}!", "haha good luck", "that'll be fun"]))
    yield
    hobby = w.pick("hobby")
    if hobby is None:
        return
    evidence = [named, _news(w, name, gender, rng.choice([f"has gotten into {hobby}",
                                                          f"is doing {hobby} now"]))]
    if rng.random() < 0.5:
        yield
        city = w.pick("city")
        if city is not None:
            evidence.append(w.say(user, w.pad(rng.choice([
                f"{name} is moving to {city} in the spring", f"{name} is off to {city} soon",
            ]))))
    w.ask_any(["What is new with {user}'s {rel}?", "Any news about {user}'s {rel}?",
           "What has {user}'s {rel} been up to lately?"], hobby, "open_domain", tuple(evidence),
          user=user, rel=rel)


PLANTS: dict[str, Callable[[_Writer], None]] = {
    "reply": _reply,
    "temporal": _temporal,
    "temporal_date": _temporal_date,
    "other_speaker": _other_speaker,
    "third_person": _third_person,
}
CHAINS: dict[str, Callable[[_Writer], Chain]] = {"met": _met_chain, "relative": _relative_chain}


def generate(dialogues: int, sessions: int, turns_per_session: int, seed: int) -> list[Dialogue]:
    """``dialogues`` seeded dialogues of ``sessions`` sessions each, about
    ``turns_per_session`` turns per session; the same schedule as ``dialogues.generate``."""
    return schedule(PLANTING, dialogues, sessions, turns_per_session, seed)


PLANTING = Planting(
    PAIRS, _Writer, PLANTS, CHAINS, _multi_hop, _multi_hop_close, _correction, _correction_close
)
