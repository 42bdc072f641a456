"""Seeded scenarios of beliefs that change: one user per scenario, a few sessions days apart.

The data set of ``beliefs.py``. Each scenario is one user's chats (3 to 6 sessions, 2 to 20
days apart) in which a fact is stated and later changes, or a second value joins the first:

* ``update``: A, then B (B current);
* ``chain``: A, B, then C (C current);
* ``revert``: A, B, then A again (A current);
* ``retraction``: A, then A ends with nothing in its place ("I left Acme, between jobs
  now"); the retraction's own wording is the current "value";
* ``expiry``: a standing value, and weeks later a temporary one with an end ("I'm in Berlin
  this week"): the standing value is current, the temporary one stale;
* ``control``: two values that coexist ("also", a second phone, a cat and later a dog, a
  friend's city beside the user's own): both current, nothing may be superseded.

Twelve kinds of fact (where someone lives, where they work, job title, employer, numbers,
dates, people and relationships, pets and possessions, preferences, diet and health,
tools, plans), said in the first person or about someone the user talks about (``person``),
and ``explicit`` ("Correction: ..."), ``implicit`` ("since I moved to Porto the commute is
shorter") or in ``passing`` (inside a longer turn about something else) (``style``). About
15 % are two-person conversations: the user's turns carry the user's name, the other
person's turns are role ``assistant`` with their name, and the question names the user.
Between the stating turns: chit-chat, and near misses on the same topic (a colleague's
city, a friend's employer, another speaker's own value).

Two splits, ``dev`` and ``heldout``, share no template and, where the kind allows, no value
(other cities, employers, names, numbers, tools), so a ranking tuned on ``dev`` meets
unseen phrasings on ``heldout``. Each value is a case-insensitive regex over its surface
forms; the generator checks that no chit-chat or near miss matches any value of its
scenario, that no statement of a stale value matches a current one, and that no question
names a value. The module only makes data; it asks nothing of memstream.

Examples
--------
>>> scenarios = generate(seed=26, per_split=12)
>>> len(scenarios), scenarios[0].split, scenarios[-1].split
(24, 'dev', 'heldout')
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memstream.models.events.consolidation import TranscriptMessage

SPLITS = ("dev", "heldout")
KINDS = (
    "home", "work_location", "job_title", "employer", "number", "date", "relationship",
    "possession", "preference", "diet", "tool", "plan",
)
CHANGES = ("update", "chain", "revert", "retraction", "expiry", "control")
STYLES = ("explicit", "implicit", "passing")
#: Fifteen change types per kind and split (4 controls: 27 %), cycled so that a short run
#: (``per_split`` below 180) still sees every kind with a mix of changes.
CHANGE_CYCLE = (
    "update", "control", "chain", "revert", "retraction", "expiry", "control", "update",
    "control", "chain", "revert", "retraction", "expiry", "control", "update",
)
THIRD_PERSON_SHARE = 0.35
TWO_PERSON_SHARE = 0.15
#: Temporary states are stated at least this long before the question.
EXPIRY_AGE = timedelta(days=15)
START = {"dev": datetime(2025, 1, 6, tzinfo=UTC), "heldout": datetime(2025, 1, 13, tzinfo=UTC)}


# --- values and voices ---------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """A value of a topic: the ways it is written (the first is its label), and a
    case-insensitive regex that matches every one of them."""

    forms: tuple[str, ...]
    pattern: str

    @property
    def label(self) -> str:
        """How the value is named in reports: its first form."""
        return self.forms[0]


@dataclass(frozen=True)
class Value:
    """A value a scenario asks about: ``pattern`` matches its surface forms in any text."""

    label: str
    pattern: str

    def matches(self, text: str) -> bool:
        """Whether ``text`` states (or mentions) this value, case ignored."""
        return re.search(self.pattern, text, re.IGNORECASE) is not None


def _words(*names: str) -> tuple[Item, ...]:
    """Items written one way each, matched as whole words (spaces may vary, a plural too)."""
    return tuple(
        Item((name,), r"\b" + r"\s+".join(map(re.escape, name.split())) + r"(?:e?s)?\b")
        for name in names
    )


def _item(label: str, *others: str, pattern: str | None = None) -> Item:
    """An item written several ways; by default matched by any of them as whole words."""
    forms = (label, *others)
    return Item(forms, pattern or r"\b(?:" + "|".join(map(re.escape, forms)) + r")\b")


def _amounts(*numbers: int) -> tuple[Item, ...]:
    """Amounts written "1,500", "1500" and "1.5k" (the last two from 1,000 up)."""
    items = []
    for number in numbers:
        forms = [f"{number:,}", str(number)] if number >= 1000 else [str(number)]
        if number >= 1000 and number % 100 == 0:
            forms.append(f"{number / 1000:g}k")
        unique = list(dict.fromkeys(forms))
        # No digit, separator or letter around: "1,500" must not match "11,500" or "1,5000".
        pattern = (r"(?<![\d.,])(?:" + "|".join(map(re.escape, unique)) + r")(?![\w]|[.,]\d)")
        items.append(Item(tuple(unique), pattern))
    return tuple(items)


_NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven",
                 8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve", 14: "fourteen"}


def _counts(noun: str, *numbers: int, nouns: str | None = None) -> tuple[Item, ...]:
    """Counts of ``noun`` written "two kids" and "2 kids" (``nouns``: other nouns matched)."""
    matched = nouns or noun
    return tuple(
        Item((f"{_NUMBER_WORDS[n]} {noun}", f"{n} {noun}"),
             rf"\b(?:{_NUMBER_WORDS[n]}|{n})\s+(?:{matched})\b")
        for n in numbers
    )


def _ordinal(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _days(*dates: tuple[str, int]) -> tuple[Item, ...]:
    """Dates written "March 3", "3 March", "March 3rd" and "3rd of March"."""
    return tuple(
        Item(
            (f"{month} {day}", f"{day} {month}", f"{month} {_ordinal(day)}",
             f"{_ordinal(day)} of {month}"),
            rf"\b{month}\s+{day}(?:st|nd|rd|th)?\b|\b{day}(?:st|nd|rd|th)?\s+(?:of\s+)?{month}\b",
        )
        for month, day in dates
    )


ALTERNATION = re.compile(r"\[([^\[\]|]*)\|([^\[\]|]*)\]")
#: A template that names who it is about (its subject or possessive field, not a pronoun).
_NAMES_SUBJECT = re.compile(r"\{(?:S|s|W|w)\}")
#: "a" before a vowel sound ("an iPhone", "an account manager"; still "a UX researcher").
_AN = re.compile(r"\b([Aa]) (?=(?!one)(?:[aeio]|u(?!x|ni|s))\w)", re.IGNORECASE)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


@dataclass(frozen=True)
class Voice:
    """Who a sentence is about, and the words that refer to them.

    Templates use ``{S}``/``{s}`` (subject: "I", "my sister", "Maya"), ``{P}``/``{p}``
    (pronoun), ``{W}``/``{w}`` (whose: "my", "my sister's", "Maya's"), ``{pos}`` (its
    pronoun: "my", "her"), ``{obj}`` ("me", "her") and ``[first|third]`` for the verb
    forms; capitals at a sentence's start.
    """

    first: bool
    subject: str
    pronoun: str
    possessive: str
    whose: str
    obj: str

    def render(self, template: str, **values: str) -> str:
        """``template`` in this voice, with ``values`` filled in."""
        text = ALTERNATION.sub(lambda m: m.group(1 if self.first else 2), template)
        text = text.format(
            S=_cap(self.subject), s=self.subject, P=_cap(self.pronoun), p=self.pronoun,
            W=_cap(self.whose), w=self.whose, pos=self.possessive, obj=self.obj, **values,
        )
        return _cap(_AN.sub(r"\1n ", text))


ME = Voice(True, "I", "I", "my", "my", "me")
_PRONOUNS = {"she": ("her", "her"), "he": ("his", "him")}


def relative(noun_phrase: str, pronoun: str) -> Voice:
    """A third person the user talks about: ``relative("my sister", "she")``."""
    possessive, obj = _PRONOUNS[pronoun]
    return Voice(False, noun_phrase, pronoun, possessive, f"{noun_phrase}'s", obj)


# --- topics ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Control:
    """A second value that coexists with the first (both stay current), and the questions
    that ask for both. ``items`` is the second value's pool (the topic's by default)."""

    also: tuple[str, ...]
    also_implicit: tuple[str, ...]
    questions: tuple[str, ...]
    items: tuple[Item, ...] = ()
    third: bool = True


@dataclass(frozen=True)
class Topic:
    """One kind of fact of one split: its values and every way it is said and asked.

    Templates fill ``{v}`` (the value stated), ``{old}`` (the value it replaces), ``{a}``
    (a control's first value), ``{x}`` (a near miss's value, never one of the scenario's)
    and ``{n}`` (another person's name), in a :class:`Voice`.
    """

    kind: str
    name: str
    items: tuple[Item, ...]
    state: tuple[str, ...]
    implicit: tuple[str, ...]
    change: tuple[str, ...]
    change_implicit: tuple[str, ...]
    correction: tuple[str, ...]
    questions: tuple[str, ...]
    near: tuple[str, ...]
    back: tuple[str, ...] = ()
    retract: tuple[str, ...] = ()
    retract_implicit: tuple[str, ...] = ()
    #: Matches the wording of every retraction above (and what a summary of one would say).
    retract_pattern: str = ""
    temporary: tuple[str, ...] = ()
    temporary_implicit: tuple[str, ...] = ()
    controls: tuple[Control, ...] = ()
    third: bool = True
    revert: bool = True
    #: Values only grow (a family): a scenario's values follow the pool's order.
    ascending: bool = False

    def supports(self, change: str) -> bool:
        """Whether this topic can make a scenario of ``change``."""
        return {
            "update": True, "chain": True, "revert": self.revert,
            "retraction": bool(self.retract), "expiry": bool(self.temporary),
            "control": bool(self.controls),
        }[change]


@dataclass(frozen=True)
class Phrasebook:
    """What one split says around the topics: frames, chit-chat, replies, names."""

    #: Explicit frames around a change ("Correction: {c}").
    frames: tuple[str, ...]
    #: A passing statement is ``prefix + clause + suffix``: the value mid-turn.
    prefixes: tuple[str, ...]
    suffixes: tuple[str, ...]
    chit_chat: tuple[str, ...]
    replies: tuple[str, ...]
    acknowledgements: tuple[str, ...]
    #: Two-person conversations: what friends say to each other (a line and its answer),
    #: and reactions to news.
    friend_lines: tuple[tuple[str, str], ...]
    friend_reactions: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    #: People a third-person scenario is about: (noun phrase, pronoun).
    relatives: tuple[tuple[str, str], ...]
    #: Near misses are about these people ("my colleague Raj"): roles, and (name, pronoun).
    others: tuple[str, ...]
    names: tuple[tuple[str, str], ...]


# --- the dev split -----------------------------------------------------------------------

DEV_CITIES = _words("Lisbon", "Porto", "Valencia", "Bologna", "Ghent", "Leipzig", "Krakow",
                    "Bergen", "Lyon", "Utrecht", "Tallinn", "Seville", "Bristol", "Aarhus")
DEV_COMPANIES = _words("Siemens", "Bosch", "Zalando", "Philips", "Novartis", "Spotify",
                       "Heineken", "Ericsson", "Decathlon", "Lufthansa", "Unilever", "Nestle")
DEV_TITLES = _words("product manager", "data analyst", "staff nurse", "primary teacher",
                    "backend developer", "project coordinator", "sales director",
                    "graphic designer", "lab technician", "account manager")
DEV_PARTNERS = _words("Marco", "Elena", "Jonas", "Sofia", "Pedro", "Ingrid", "Lukas", "Carmen",
                      "Henrik", "Beatriz")
DEV_BOSSES = _words("Dana", "Victor", "Yvonne", "Gregor", "Marta", "Oscar", "Helga", "Felipe")

DEV = Phrasebook(
    frames=("Correction: {c}", "Update: {c}", "Actually, {c}", "Small update for you: {c}",
            "Please note a change: {c}"),
    prefixes=(
        "Rough morning, the bus was twenty minutes late.",
        "I finally finished that crime novel last night.",
        "My knee has been clicking again after football.",
        "We had a power cut for an hour this afternoon.",
        "I tried a new pasta recipe yesterday and it flopped.",
        "The neighbours are renovating and it's so loud.",
        "Been a long week of meetings.",
    ),
    suffixes=(
        "Anyway, can you suggest a quick dinner idea?",
        "Could you help me plan a lazy Sunday?",
        "Any idea how to keep basil alive indoors?",
        "What's a good podcast for the commute?",
        "Do you have tips for staying focused after lunch?",
        "Can you recommend a light novel?",
    ),
    chit_chat=(
        "Can you suggest a film for a rainy evening?",
        "How long do I boil an egg for a runny yolk?",
        "Write me a limerick about a sleepy owl.",
        "What's a good stretch for a stiff neck?",
        "Thanks, that helps a lot!",
        "Explain recursion like I'm five.",
        "Any tips for falling asleep faster?",
        "What's the difference between baking soda and baking powder?",
        "Summarise the plot of Macbeth in three lines.",
        "How do I get wine stains out of a shirt?",
        "Give me a fun fact about octopuses.",
        "ok cool",
        "Is it worth learning to touch type?",
        "How many glasses of water should I drink a day?",
        "Recommend a podcast about history.",
        "Can you help me word a polite email declining a meeting?",
        "What's a good warm-up before a run?",
        "haha nice",
        "Why is the sky blue?",
        "How do I descale a kettle?",
        "Suggest a board game for four people.",
        "How do noise-cancelling headphones work?",
        "Tell me something cheerful, rough day.",
        "What's a polite way to ask someone to stop interrupting?",
    ),
    replies=(
        "Sure, here's a suggestion that might help.",
        "Good question. In short: it depends, but here's a rule of thumb.",
        "Here you go, I kept it short.",
        "Happy to help with that.",
        "Here are three options to choose from.",
        "Of course. Let me break it down.",
    ),
    acknowledgements=(
        "Thanks for letting me know, I'll keep that in mind.",
        "Got it, noted.",
        "Good to know!",
        "Understood, I'll remember that.",
    ),
    friend_lines=(
        ("How was your weekend?", "Not bad, a bit rainy. Yours?"),
        ("Did you watch the match?", "Only the second half, what a finish."),
        ("I'm so tired this week.", "Same here, honestly."),
        ("Work has been busy.", "Tell me about it, mine too."),
        ("We should grab lunch soon.", "Definitely, maybe next week."),
        ("The weather is strange lately.", "Sun one minute, hail the next."),
        ("I read a good book on the train.", "Oh, which one? I need something new."),
        ("My phone battery keeps dying.", "Time for a new battery, maybe."),
        ("Have you tried the new bakery?", "Yes! The cinnamon buns are unreal."),
        ("Traffic was terrible this morning.", "The roadworks again?"),
        ("I finally cleaned the flat.", "Impressive, mine is a disaster."),
    ),
    friend_reactions=("Oh wow, big news!", "No way, since when?", "Ha, good for you.",
                      "Makes sense.", "Oh really? Tell me more."),
    pairs=(("Maya", "Tom"), ("Ines", "Karl"), ("Ruth", "Omar")),
    relatives=(("my sister", "she"), ("my brother", "he"), ("my dad", "he"), ("my aunt", "she")),
    others=("colleague", "neighbour", "friend"),
    names=(("Raj", "he"), ("Lucy", "she"), ("Ahmed", "he"), ("Zoe", "she"), ("Kenji", "he"),
           ("Anna", "she")),
)

DEV_TOPICS: tuple[Topic, ...] = (
    Topic(
        "home", "city", DEV_CITIES,
        state=("{S} [live|lives] in {v}.", "{S} [rent|rents] a small flat in {v}.",
               "[I'm|{S} is] based in {v}.", "Home for [me|{s}] is {v}."),
        implicit=("{W} flat in {v} gets great light in the mornings.",
                  "The rent in {v} keeps going up, {s} [complain|complains] about it monthly."),
        change=("[I've|{S} has] moved to {v}.", "{S} [live|lives] in {v} now.",
                "{S} moved from {old} to {v} last weekend."),
        change_implicit=("Since [I|{s}] moved to {v}, the commute is so much shorter.",
                         "{W} new place in {v} finally has a proper kitchen.",
                         "Now that [I'm|{s} is] living in {v}, {p} can walk to the sea."),
        correction=("{s} [don't|doesn't] live in {old} any more, it's {v} now.",
                    "it's {v} now, not {old}: {s} moved last month."),
        back=("{S} moved back to {v} after all.",
              "[I'm|{S} is] back in {v} again, {old} didn't work out."),
        retract=("{S} gave up the flat in {old} and [have|has] no fixed address for now.",
                 "[I'm|{S} is] between places at the moment, sofa-surfing since leaving {old}."),
        retract_implicit=(
            ("Living out of a backpack since giving up {old} is tiring, "
             "but [I|{s}] [don't|doesn't] miss the rent."),
        ),
        retract_pattern=r"no fixed address|between places|sofa-surfing|out of a backpack|"
                        r"gave up the flat",
        temporary=("[I'm|{S} is] in {v} this week for a conference, back home on Sunday.",
                   "Just for a few days: [I'm|{s} is] staying in {v} until Friday."),
        temporary_implicit=(("{W} hotel in {v} has terrible wifi, good thing it's only till "
                             "Thursday."),),
        controls=(
            Control(("{W} best friend lives in {v}, so [I|{p}] [visit|visits] a lot.",),
                    ("Visiting {w} best friend in {v} is always the highlight of the month.",),
                    ("Where [do I|does {s}] live, and where does {w} best friend live?",
                     "Which cities do {w} best friend and [I|{s}] live in?")),
            Control(("{S} also [keep|keeps] a tiny studio in {v} for work weeks.",),
                    ("The studio in {v} is where [I|{s}] [sleep|sleeps] on work weeks.",),
                    ("Where [do|does] {s} live and stay during the week?",
                     "What places [do|does] {s} have to live in?")),
        ),
        questions=("Where [do|does] {s} live these days?",
                   "Which city [am I|is {s}] living in now?",
                   "Remind me, where [am I|is {s}] based?",
                   "What city [do|does] {s} call home at the moment?"),
        near=("My {role} {n} just moved to {x}, lucky thing.", "Is {x} a nice place to live?",
              "{n} keeps telling me to visit {x}."),
    ),
    Topic(
        "work_location", "office", DEV_CITIES,
        state=("{S} [work|works] out of the {v} office.", "{W} office is in {v}.",
               "{S} [commute|commutes] to {v} for work every day."),
        implicit=("The train to the {v} office was packed again this morning.",
                  "Lunch options near {w} office in {v} are pretty grim."),
        change=("{S} [work|works] from the {v} office now.",
                "{W} team got moved to the {v} office.",
                "{S} switched from the {old} office to the one in {v}."),
        change_implicit=(("Since [I|{s}] started working in {v}, [I|{p}] [cycle|cycles] to "
                          "the office."),
                         "Now that {w} desk is in the {v} office, lunch is way better."),
        correction=("{w} office isn't in {old} any more, it's in {v}.",
                    "[I|{s}] [work|works] in {v} now, not {old}."),
        back=("{W} team moved back to the {v} office.",
              "[I'm|{S} is] back at the {v} office, the move to {old} was reversed."),
        retract=("{S} [have|has] no office any more: fully remote since {old} closed.",
                 "The {old} office shut down, so [I|{s}] [work|works] from home full-time now."),
        retract_implicit=(("Working from the kitchen table every day since the {old} office "
                           "closed is getting old."),),
        retract_pattern=r"no office|fully remote|from home full-time|kitchen table every day",
        temporary=(("This week only, [I'm|{s} is] working from the {v} office to cover for "
                    "someone."),
                   "[I'm|{S} is] at the {v} branch until Friday, just helping out."),
        temporary_implicit=(("The hot desk [I|{s}] borrowed in {v} this week is tiny, "
                             "thank god it's just till Friday."),),
        controls=(
            Control(("{S} [live|lives] in {v} but [work|works] in {a}.",),
                    ("The commute from {v} to the office in {a} takes about an hour.",),
                    ("Where [do|does] {s} live and where [do|does] {s} work?",
                     "Which city [am I|is {s}] living in, and where's {w} office?")),
            Control(("{S} also [do|does] two days a week at the {v} office.",),
                    ("The {v} office days are {w} favourite part of the week.",),
                    ("Which offices [do|does] {s} work from?",
                     "Where [do|does] {s} go in to work?")),
        ),
        questions=("Where [do|does] {s} work from these days?",
                   "Which office [am I|is {s}] at now?",
                   "Where is {w} office?"),
        near=("My {role} {n} works out of the {x} office.",
              "Is the {x} office any nicer than ours?",
              "{n} from the team got transferred to {x}."),
    ),
    Topic(
        "job_title", "title", DEV_TITLES,
        state=("[I'm|{S} is] a {v}.", "{S} [work|works] as a {v}.", "{W} job title is {v}."),
        implicit=("Being a {v} means [I'm|{s} is] in meetings half the day.",
                  "The {v} role keeps [me|{s}] busy, but {p} [like|likes] it."),
        change=("{S} got promoted, [I'm|{p}'s] a {v} now.", "{W} title changed to {v}.",
                "{S} went from {old} to {v} this month."),
        change_implicit=("Now that [I'm|{s} is] a {v}, {p} [have|has] a lot more say.",
                         "Since becoming a {v}, [I|{s}] barely [code|codes] any more."),
        correction=("[I'm|{s} is] not a {old} any more, [I'm|{p}'s] a {v}.",
                    "{w} title is {v} now, not {old}."),
        back=("{S} went back to being a {v}, the {old} job wasn't for [me|{obj}].",),
        retract=("{S} stepped down as {old} and [am|is] taking a career break.",
                 "[I'm|{S} is] on sabbatical now, no title, after years as {old}."),
        retract_implicit=("The career break after quitting as {old} has been restful.",),
        retract_pattern=r"career break|sabbatical|stepped down",
        temporary=("For the next two weeks [I'm|{s} is] acting {v} while the boss is on leave.",
                   "Just until the end of the month, [I'm|{s} is] filling in as {v}."),
        temporary_implicit=(("Covering as {v} this fortnight is exhausting, can't wait till "
                             "it's over."),),
        controls=(
            Control(("{S} also [work|works] weekends as a {v} on the side.",),
                    ("The weekend shifts as a {v} pay for [my|{pos}] holidays.",),
                    ("What jobs [do|does] {s} have?", "What [do|does] {s} do for work?")),
        ),
        questions=("What's {w} job title?", "What [do|does] {s} do for a living now?",
                   "What's {w} role at work these days?"),
        near=("My {role} {n} just became a {x}.", "What does a {x} actually do all day?",
              "{n} is a {x} and hates the hours."),
    ),
    Topic(
        "employer", "company", DEV_COMPANIES,
        state=("{S} [work|works] at {v}.", "[I'm|{S} is] employed by {v}.",
               "[I've|{S} has] been at {v} for three years."),
        implicit=("The canteen at {v} is honestly the best perk.",
                  "{W} badge for {v} stopped working again this morning."),
        change=("{S} [work|works] at {v} now.", "{S} switched jobs, [I'm|{p}'s] at {v} now.",
                "{S} left {old} and joined {v}."),
        change_implicit=(("Now that [I'm|{s} is] at {v}, {p} finally [get|gets] proper "
                          "parental leave."),
                         "The onboarding at {v} has been a blur this week."),
        correction=("[I|{s}] [don't|doesn't] work at {old} any more, it's {v} now.",
                    "{w} employer is {v} now, not {old}."),
        back=("{S} went back to {v}, {old} wasn't a good fit.",
              "{S} rejoined {v} this month."),
        retract=("{S} left {old} and [am|is] between jobs now.",
                 "{S} quit {old}; [I'm|{p}'s] job hunting at the moment."),
        retract_implicit=("Job hunting since leaving {old} is more work than the job was.",),
        retract_pattern=r"between jobs|job hunting|unemployed|out of work",
        temporary=("[I'm|{S} is] on a two-week secondment at {v}, just till the 20th.",
                   "For this month only, [I'm|{s} is] contracting for {v}."),
        temporary_implicit=("The short secondment at {v} ends next Friday, thank goodness.",),
        controls=(
            Control(("{S} also [freelance|freelances] for {v} on the side.",),
                    ("The side gig with {v} pays for [my|{pos}] holidays.",),
                    ("Who [do|does] {s} work for?", "Which companies [do|does] {s} work with?")),
        ),
        questions=("Where [do|does] {s} work?", "Which company [am I|is {s}] with now?",
                   "Who's {w} employer at the moment?", "Who [do|does] {s} work for these days?"),
        near=("My {role} {n} just got an offer from {x}.", "Is {x} a good place to work?",
              "{n} used to work at {x} and hated it."),
    ),
    Topic(
        "number", "budget", _amounts(1500, 2000, 2400, 3200, 1800, 2750, 4500, 1200),
        state=("{W} budget for the new kitchen is €{v}.",
               "{S} can spend €{v} on the kitchen, tops."),
        implicit=("With €{v} to spend on the kitchen, the fancy taps are out.",),
        change=("{W} kitchen budget is €{v} now.", "{S} raised the kitchen budget to €{v}.",
                "The kitchen budget went from €{old} to €{v}."),
        change_implicit=(("Now that there's €{v} for the kitchen, the oak worktop is back on "
                          "the table."),),
        correction=("it's €{v} for the kitchen, not €{old}.",
                    "the kitchen budget is €{v}, I had said €{old} before."),
        back=("{W} kitchen budget is back to €{v} after all.",),
        retract=("There's no budget cap for the kitchen any more, the insurance covers it.",
                 "{S} dropped the kitchen budget entirely: no limit now."),
        retract_implicit=("Without any budget limit for the kitchen, choosing tiles is easy.",),
        retract_pattern=r"no budget cap|dropped the kitchen budget|no limit|without any budget",
        temporary=(
            "Just for this month {w} kitchen budget is capped at €{v}, until the bonus comes.",
        ),
        temporary_implicit=("Living on €{v} this month only is a stretch.",),
        controls=(
            Control(("{W} kitchen budget is €{a} and the bathroom gets €{v} on top.",),
                    ("Out of the €{v} for the bathroom, tiles take most of it.",),
                    ("What are {w} budgets for the kitchen and the bathroom?",
                     "How much can {s} spend on the renovation rooms?")),
        ),
        questions=("What's {w} kitchen budget?", "How much can {s} spend on the kitchen?",
                   "What budget [do|does] {s} have for the kitchen now?"),
        near=("My {role} {n} spent €{x} on their kitchen.",
              "Is €{x} enough for a decent kitchen?"),
    ),
    Topic(
        "number", "rent", _amounts(900, 780, 1150, 640, 1320, 860, 1040, 720),
        state=("{W} rent is €{v} a month.", "{S} [pay|pays] €{v} in rent."),
        implicit=("After the €{v} for rent there's not much left each month.",),
        change=("{W} rent went up to €{v}.", "{S} [pay|pays] €{v} rent now.",
                "The landlord changed the rent from €{old} to €{v}."),
        change_implicit=("With rent at €{v} now, {p} [have|has] to cut back on eating out.",),
        correction=("the rent is €{v}, not €{old}.",),
        back=("The rent is back down to €{v}.",),
        retract=("{S} bought a place, so no more rent.",
                 "{S} [don't|doesn't] pay rent any more, [I|{p}] moved in with family."),
        retract_implicit=("Not paying rent since buying the flat feels amazing.",),
        retract_pattern=r"no more rent|pay rent any more|not paying rent",
        temporary=("This month only the rent is €{v} because of the broken heating.",),
        temporary_implicit=("Paying just €{v} this month while the heating's broken helps.",),
        controls=(
            Control(("{W} rent is €{a}, and the parking space is another €{v}.",),
                    ("The €{v} for the parking space is a rip-off.",),
                    ("What [do|does] {s} pay for rent and parking?",
                     "What are {w} monthly housing costs?")),
        ),
        questions=("What's {w} rent?", "How much rent [do|does] {s} pay?",
                   "What [do|does] {s} pay for the flat each month?"),
        near=("My {role} {n} pays €{x} for a studio.", "Is €{x} a fair rent around here?"),
    ),
    Topic(
        "number", "kids", _counts("kids", 2, 3, 4, 5, nouns="kids|children"),
        state=("{S} [have|has] {v}.", "[I'm|{S} is] a parent of {v}."),
        implicit=("With {v} in the house, {w} mornings are chaos.",),
        change=("{S} [have|has] {v} now, the baby arrived last month.",
                "The family grew: {v} now."),
        change_implicit=("Juggling {v} since the baby came is wild.",),
        correction=("it's {v} now, not {old}: the family grew.",),
        questions=("How many kids [do|does] {s} have?", "How big is {w} family, kids-wise?"),
        near=("My {role} {n} has {x}.", "Is it hard to travel with {x}?"),
        revert=False,
        ascending=True,
    ),
    Topic(
        "date", "deadline", _days(("March", 3), ("April", 17), ("June", 9), ("September", 22),
                                  ("November", 14), ("March", 28), ("April", 5), ("June", 30)),
        state=("The deadline for {w} report is {v}.", "{W} report is due on {v}."),
        implicit=("Working every evening until the {v} deadline is brutal.",),
        change=("The deadline moved to {v}.", "{W} report is now due {v}.",
                "They pushed the deadline from {old} to {v}."),
        change_implicit=("Since the deadline slipped to {v}, {p} can breathe a bit.",),
        correction=("the deadline is {v}, not {old}.",),
        back=("The deadline is back to {v} again, annoyingly.",),
        retract=("The report got cancelled, so there's no deadline now.",
                 "There's no due date any more, the project was called off."),
        retract_implicit=("With the project called off, the evenings are free again.",),
        retract_pattern=r"no deadline|no due date|called off|got cancelled",
        controls=(
            Control(("The report is due {a}, and {w} presentation is on {v}.",),
                    ("Preparing slides for {v} on top of everything is a lot.",),
                    ("What deadlines [do|does] {s} have coming up?",
                     "When are {w} report and presentation due?")),
        ),
        questions=("When is {w} report due?", "What's the deadline for {w} report?",
                   "When [do|does] {s} have to hand in the report?"),
        near=("My {role} {n} has a deadline on {x}.", "Is {x} a bank holiday?"),
    ),
    Topic(
        "date", "launch", _words("June", "September", "November", "April"),
        state=("The app launch is planned for {v}.", "{W} product launches in {v}.",
               "{W} team's launch is set for {v}."),
        implicit=("Everyone is stressed about the {v} launch.",),
        change=("The launch moved to {v}.", "The launch got pushed from {old} to {v}."),
        change_implicit=("With the launch in {v} now, {p} can take a holiday first.",),
        correction=("the launch is in {v}, not {old}.",),
        back=("The launch is back in {v}, as originally planned.",),
        retract=("The launch is cancelled, no date at all now.",),
        retract_implicit=("Since they scrapped the launch, the team has nothing to ship.",),
        retract_pattern=r"launch is cancelled|scrapped the launch|no date at all",
        questions=("When is the launch?", "When does {w} product launch?",
                   "What month is the launch planned for?"),
        near=("{n}'s company launches in {x}.", "Is {x} a good month for a launch?"),
    ),
    Topic(
        "relationship", "partner", DEV_PARTNERS,
        state=("{W} partner is called {v}.", "[I've|{S} has] been with {v} for two years."),
        implicit=("{v} and [I|{s}] are doing the cooking course together.",
                  "{W} date night with {v} was lovely."),
        change=("[I'm|{S} is] seeing {v} now.", "{W} new partner is {v}.",
                "[{old} and I|{S} and {old}] split; [I'm|{p}'s] with {v} now."),
        change_implicit=("{v} and [I|{s}] have been inseparable since getting together.",),
        correction=("[I'm|{s} is] with {v} now, not {old}.",),
        back=("{S} got back together with {v}.", "{v} and [I|{s}] are back together."),
        retract=("[{old} and I|{S} and {old}] broke up; [I'm|{p}'s] single now.",
                 "[I'm|{S} is] single again, it's over with {old}."),
        retract_implicit=("Being single again after {old} is strange but fine.",),
        retract_pattern=r"\bsingle\b|broke up",
        controls=(
            Control(("{W} partner is {a}, and {w} best friend is {v}.",),
                    ("{v}, {w} best friend, is coming over with {a} on Friday.",),
                    ("Who are {w} partner and best friend?",
                     "Who [am I|is {s}] closest to?")),
        ),
        questions=("Who is {w} partner?", "Who [am I|is {s}] seeing?",
                   "What's the name of {w} partner?"),
        near=("My {role} {n} is dating someone called {x}.", "{x} from the gym is so funny."),
    ),
    Topic(
        "relationship", "boss", DEV_BOSSES,
        state=("{W} boss is {v}.", "{S} [report|reports] to {v}."),
        implicit=("{v} scheduled yet another one-to-one with [me|{s}].",),
        change=("{W} new boss is {v}.", "{S} [report|reports] to {v} now.",
                "{W} manager changed from {old} to {v}."),
        change_implicit=("Since {v} took over the team, meetings are shorter.",),
        correction=("{w} manager is {v} now, not {old}.",),
        back=("{v} is {w} boss again after the reorg.",),
        temporary=("While the boss is away, [I|{s}] [report|reports] to {v} for two weeks.",),
        temporary_implicit=("Reporting to {v} this fortnight is a bit odd.",),
        controls=(
            Control(("{S} also [report|reports] to {v} on the side project.",),
                    ("{v} runs the side project [I'm|{s} is] on.",),
                    ("Who [do|does] {s} report to?", "Who are {w} managers?")),
        ),
        questions=("Who is {w} boss?", "Who [do|does] {s} report to now?",
                   "Who's {w} manager?"),
        near=("My {role} {n} reports to {x}.", "{x} from finance keeps emailing me."),
    ),
    Topic(
        "possession", "car", _words("Volvo", "Skoda", "Mazda", "Peugeot", "Fiat", "Subaru",
                                    "Hyundai", "Citroen"),
        state=("{S} [drive|drives] a {v}.", "{W} car is an old {v}."),
        implicit=("The {v} needs new tyres before winter.",),
        change=("{S} sold the {old} and bought a {v}.", "{S} [drive|drives] a {v} now.",
                "{W} new car is a {v}."),
        change_implicit=("The new {v} is so much quieter on the motorway.",),
        correction=("it's a {v} now, not the {old}.",),
        back=("{S} bought another {v}, the {old} was a lemon.",),
        retract=("{S} sold the {old} and [don't|doesn't] have a car now.",
                 "[I'm|{S} is] car-free since selling the {old}."),
        retract_implicit=("Being car-free since the {old} went is fine with the trams.",),
        retract_pattern=r"car-free|have a car now|no car",
        temporary=(("[I'm|{S} is] driving a rental {v} this week while [mine|{pos} car] is in "
                    "the garage."),),
        temporary_implicit=("The rental {v} [I|{s}] [have|has] till Friday smells of smoke.",),
        controls=(
            Control(("{S} also [have|has] a {v} for the weekends.",),
                    ("The {v} only comes out at weekends.",),
                    ("What cars [do|does] {s} have?", "What [do|does] {s} drive?")),
        ),
        questions=("What car [do|does] {s} drive?", "What's {w} car these days?",
                   "Which car [do|does] {s} have now?"),
        near=("My {role} {n} just bought a {x}.", "Are {x}s reliable?"),
    ),
    Topic(
        "possession", "pet", _words("beagle", "greyhound", "parrot", "rabbit", "tortoise",
                                    "dachshund", "budgie", "guinea pig"),
        state=("{S} [have|has] a {v}.", "[We've|{S} has] got a {v} at home."),
        implicit=("The {v} kept [me|{s}] up half the night again.",),
        change=("{S} adopted a {v}.", "{S} [have|has] a {v} now."),
        change_implicit=("The {v} [I|{s}] adopted has taken over the flat.",),
        correction=("it's a {v}, not a {old}.",),
        back=("{S} adopted another {v}, [I|{p}] missed having one.",),
        retract=("The {old} passed away; no pets at home now.",
                 "{S} [don't|doesn't] have any pets any more."),
        retract_implicit=("The house is so quiet with no pets since the {old} died.",),
        retract_pattern=r"no pets|any pets any more",
        temporary=("[I'm|{S} is] pet-sitting a {v} for the neighbours this week only.",),
        temporary_implicit=("The {v} [I'm|{s} is] minding till Sunday is adorable.",),
        controls=(
            Control(("{S} got a {v} too, to keep the {a} company.",),
                    ("The {v} and the {a} get on really well.",),
                    ("What pets [do|does] {s} have?", "Which animals live with {obj}?")),
        ),
        questions=("What pet [do|does] {s} have?", "What animal [do|does] {s} keep at home?",
                   "Tell me about {w} pet."),
        near=("My {role} {n} has a {x}.", "Are {x}s good with kids?"),
    ),
    Topic(
        "possession", "phone", _words("Pixel", "iPhone", "Galaxy", "Fairphone", "Nokia",
                                      "OnePlus"),
        state=("{S} [use|uses] a {v}.", "{W} phone is a {v}."),
        implicit=("The {v} battery barely lasts till lunch.",),
        change=("{S} switched to a {v}.", "{W} new phone is a {v}."),
        change_implicit=("The camera on the new {v} is ridiculous.",),
        correction=("it's a {v} now, the {old} died.",),
        back=("{S} went back to a {v}.",),
        controls=(
            Control(("{S} also [have|has] a {v} as a work phone.",),
                    ("The work {v} stays off at weekends.",),
                    ("What phones [do|does] {s} have?", "Which phones [do|does] {s} use?")),
        ),
        questions=("What phone [do|does] {s} use?", "What's {w} phone?"),
        near=("My {role} {n} swears by the {x}.", "Is the new {x} worth it?"),
    ),
    Topic(
        "preference", "seat", (_item("window seat", "window", pattern=r"\bwindow\b"),
                               _item("aisle seat", "aisle", pattern=r"\baisle\b"),
                               _item("front row", pattern=r"\bfront row\b")),
        state=("{S} always [book|books] the {v} on flights.", "{S} [prefer|prefers] the {v}."),
        implicit=("Being in the {v} makes long flights bearable.",),
        change=("{S} [prefer|prefers] the {v} now.", "These days {s} [pick|picks] the {v}."),
        change_implicit=(("Since [I|{s}] started picking the {v}, flights are way less "
                          "stressful."),),
        correction=("{v} please, not {old}, from now on.",),
        back=("[I'm|{S} is] back to booking the {v}.",),
        retract=(("{S} honestly [don't|doesn't] mind where [I|{p}] [sit|sits] on planes "
                  "any more."),),
        retract_implicit=("Whatever seat is free is fine by [me|{s}] now.",),
        retract_pattern=r"don't mind where|doesn't mind where|whatever seat is free",
        questions=("Where [do|does] {s} like to sit on flights?",
                   "What's {w} seat preference?", "Which seat should be booked for {obj}?"),
        near=("My {role} {n} always wants the {x}.", "Why do people like the {x}?"),
    ),
    Topic(
        "preference", "drink", _words("tea", "coffee", "matcha", "hot chocolate", "rooibos",
                                      "kombucha"),
        state=("{S} [drink|drinks] {v} every morning.", "For [me|{s}], {v} beats anything else."),
        implicit=("The first {v} of the day is sacred.",),
        change=("{S} switched to {v}.", "[I'm|{S} is] into {v} now."),
        change_implicit=("Since switching to {v}, [I|{s}] [sleep|sleeps] better.",),
        correction=("it's {v} for [me|{s}] now, not {old}.",),
        back=("{S} went back to {v}.",),
        retract=("{S} quit {old} and [drink|drinks] only water now.",),
        retract_implicit=(
            "Only water since quitting {old}, and honestly [I|{s}] [feel|feels] great.",
        ),
        retract_pattern=r"only water",
        temporary=("This week [I'm|{s} is] only drinking {v} because of a sore stomach.",),
        temporary_implicit=("The {v} [I'm|{s} is] stuck with till Friday tastes of nothing.",),
        controls=(
            Control(("{S} [like|likes] {v} too, in the afternoons.",),
                    ("An afternoon {v} is a nice change from the morning {a}.",),
                    ("What [do|does] {s} like to drink?", "Which drinks [do|does] {s} enjoy?")),
        ),
        questions=("What [do|does] {s} like to drink?", "What's {w} usual hot drink?",
                   "What [do|does] {s} usually order at a cafe?"),
        near=("My {role} {n} lives on {x}.", "Is {x} bad for sleep?"),
    ),
    Topic(
        "diet", "diet", _words("vegetarian", "vegan", "pescatarian", "keto"),
        state=("[I'm|{S} is] {v}.", "{S} [eat|eats] {v}, strictly."),
        implicit=("Finding {v} options at the canteen is a pain.",),
        change=("[I'm|{S} is] {v} now.", "{S} went {v} last month."),
        change_implicit=("Going {v} has been easier than [I|{s}] expected.",),
        correction=("[I'm|{s} is] {v} now, not {old}.",),
        back=("{S} went back to being {v}.",),
        retract=("[I'm|{S} is] not {old} any more, eating meat again.",
                 "{S} stopped being {old}."),
        retract_implicit=("That first steak after years of being {old} was amazing.",),
        retract_pattern=r"not \w+ any more|stopped being|eating meat again|first steak",
        temporary=("[I'm|{S} is] doing {v} for one week only, as a challenge.",),
        temporary_implicit=("This week-long {v} challenge is harder than it sounds.",),
        controls=(
            Control(("[I'm|{S} is] {a}, and also allergic to {v}.",),
                    ("Checking labels for {v} is second nature to [me|{s}].",),
                    ("What are {w} dietary needs?", "What can't {s} eat?"),
                    items=_words("peanuts", "sesame", "shellfish", "kiwi")),
        ),
        questions=("What diet [do|does] {s} follow?", "What [do|does] {s} eat these days?",
                   "Any dietary restrictions for {obj}?"),
        near=("My {role} {n} is {x}.", "Is a {x} diet healthy?"),
    ),
    Topic(
        "diet", "allergy", _words("peanuts", "shellfish", "sesame", "strawberries", "mustard",
                                  "hazelnuts"),
        state=("[I'm|{S} is] allergic to {v}.", "{S} can't eat {v}, [I'm|{p}'s] allergic."),
        implicit=("Checking every label for {v} gets tiring.",),
        change=("Turns out {w} allergy is to {v}.", "{W} allergy test came back: {v}."),
        change_implicit=("Now that {p} [know|knows] it's {v}, eating out is easier.",),
        correction=("it's {v} [I'm|{s} is] allergic to, not {old}.",),
        retract=("[I'm|{S} is] not allergic to {old} any more, the test was clear.",),
        retract_implicit=("Eating {old} again after the clear test felt so weird.",),
        retract_pattern=r"not allergic|clear test|test was clear",
        controls=(
            Control(("[I'm|{S} is] also allergic to {v}.",),
                    ("{v} are off the menu for [me|{s}] as well.",),
                    ("What [am I|is {s}] allergic to?", "Which allergies [do|does] {s} have?")),
        ),
        questions=("What [am I|is {s}] allergic to?", "Which foods should {s} avoid?"),
        near=("My {role} {n} is allergic to {x}.", "Are {x} allergies common?"),
        revert=False,
    ),
    Topic(
        "tool", "editor", (_item("Vim", pattern=r"\bvim\b"),
                           _item("VS Code", "VSCode", pattern=r"\bVS ?Code\b"),
                           _item("Emacs"), _item("Sublime Text", "Sublime"),
                           _item("IntelliJ"), _item("Helix")),
        state=("{S} [code|codes] in {v}.", "{W} editor is {v}."),
        implicit=("{W} {v} config is a work of art.",),
        change=("{S} switched to {v}.", "{S} [use|uses] {v} now."),
        change_implicit=("Since moving to {v}, {w} setup is much simpler.",),
        correction=("it's {v} now, not {old}.",),
        back=("{S} went back to {v}.",),
        retract=("{S} stopped coding altogether, no editor now.",),
        retract_implicit=("No editor open all day since [I|{s}] stopped coding.",),
        retract_pattern=r"stopped coding|no editor",
        temporary=("This week [I'm|{s} is] trying {v}, just as an experiment.",),
        temporary_implicit=("The {v} trial week is almost over.",),
        controls=(
            Control(("{S} also [use|uses] {v} for quick edits.",),
                    ("{v} is great for the quick edits.",),
                    ("Which editors [do|does] {s} use?", "What [do|does] {s} code in?")),
        ),
        questions=("What editor [do|does] {s} use?", "What [do|does] {s} write code in?"),
        near=("My {role} {n} swears by {x}.", "Is {x} hard to learn?"),
    ),
    Topic(
        "tool", "language", _words("Rust", "Kotlin", "TypeScript", "Elixir", "Scala", "Ruby"),
        state=("{S} mostly [write|writes] {v} at work.", "{W} main language is {v}."),
        implicit=("The {v} compiler keeps [me|{s}] humble.",),
        change=("{S} [write|writes] {v} now.", "The team moved to {v}."),
        change_implicit=("Since the team moved to {v}, the builds are faster.",),
        correction=("it's {v} now, not {old}.",),
        back=("The team went back to {v}.", "{W} team went back to {v}."),
        controls=(
            Control(("{S} also [write|writes] {v} for the scripts.",),
                    ("The {v} scripts glue everything together.",),
                    ("Which languages [do|does] {s} use?",
                     "What languages [do|does] {s} code in?")),
        ),
        questions=("What language [do|does] {s} code in?",
                   "What's {w} main programming language?"),
        near=("My {role} {n} is learning {x}.", "Is {x} worth learning?"),
    ),
    Topic(
        "plan", "trip", _words("Japan", "Peru", "Iceland", "Vietnam", "Morocco", "Norway",
                               "Mexico", "Greece"),
        state=("[I'm|{S} is] planning a trip to {v} in the summer.",
               "{W} big holiday this year is {v}."),
        implicit=("Saving up for {v} means no takeaways.",),
        change=("The summer trip is to {v} now.", "{S} changed the trip to {v}."),
        change_implicit=("Since the trip is to {v} now, {p} [need|needs] a new guidebook.",),
        correction=("the trip is to {v}, not {old}.",),
        back=("The trip is back to {v}.",),
        retract=("The summer trip is off, not going anywhere this year.",
                 "{W} summer trip is off, [I'm|{p}'s] not going anywhere this year."),
        retract_implicit=("Staying home this summer after cancelling the trip.",),
        retract_pattern=r"trip is off|not going anywhere|staying home|cancelling the trip",
        temporary=("This weekend [I'm|{s} is] off to {v}, just a short break.",),
        temporary_implicit=("The long weekend in {v} will be quick.",),
        controls=(
            Control(("{S} also [want|wants] to fit in a week in {v} in the autumn.",),
                    ("The autumn week in {v} should be quieter.",),
                    ("Which trips [am I|is {s}] planning?", "Where [am I|is {s}] travelling?")),
        ),
        questions=("Where [am I|is {s}] going on holiday?", "What's the summer trip?",
                   "Where [do|does] {s} plan to travel?"),
        near=("My {role} {n} just got back from {x}.", "Is {x} expensive to visit?"),
    ),
)


# --- the held-out split ------------------------------------------------------------------

HELD_CITIES = _words("Halifax", "Adelaide", "Nagoya", "Curitiba", "Tromso", "Galway",
                     "Wellington", "Busan", "Cusco", "Asheville", "Ljubljana", "Bratislava",
                     "Hobart", "Savannah")
HELD_COMPANIES = _words("Shopify", "Atlassian", "Canva", "Rakuten", "Ubisoft", "Klarna",
                        "Deloitte", "Pfizer", "Nintendo", "Patagonia", "Vestas", "Carlsberg")
HELD_TITLES = _words("sous chef", "paralegal", "UX researcher", "site engineer", "pharmacist",
                     "physiotherapist", "copy editor", "logistics planner",
                     "quantity surveyor", "dental hygienist")
HELD_PARTNERS = _words("Tariq", "Mirela", "Callum", "Yuki", "Anouk", "Dmitri", "Rosalind",
                       "Emeka", "Solveig", "Joaquin")
HELD_SUPERVISORS = _words("Thandiwe", "Ignatius", "Wilhelmina", "Desmond", "Ottilie",
                          "Cormac", "Esperanza", "Leopold")

HELDOUT = Phrasebook(
    frames=("Oh, I should say: {c}", "Scratch what I told you before, {c}", "Heads up, {c}",
            "FYI {c}", "Just to set the record straight, {c}", "For the record: {c}",
            "ok so, news: {c}"),
    prefixes=(
        "Ugh, I spilled juice all over my keyboard today.",
        "The dog next door howled half the night.",
        "I've been binge-watching a baking show all weekend.",
        "Spent the afternoon untangling fairy lights, don't ask.",
        "The heating broke again, so I'm wrapped in three blankets.",
        "Finally booked the dentist after putting it off for months.",
        "lol my group chat is on fire about the football.",
    ),
    suffixes=(
        "Anyway, what's a good snack that isn't crisps?",
        "Could you suggest a film for tonight?",
        "How do I stop my glasses fogging up?",
        "What should I read next?",
        "Any tips for keeping a desk tidy?",
        "Can you give me a ten-minute stretching routine?",
        "Oh and how long does rice keep in the fridge?",
    ),
    chit_chat=(
        "My tomato plants look droopy, too much water maybe?",
        "Can you explain how compound interest works?",
        "I need a birthday message for my grandmother, something warm.",
        "lol fair",
        "What's a decent beginner yoga routine?",
        "Is it bad to charge my phone overnight?",
        "Help me come up with a pun about cheese.",
        "What's the best way to learn chess openings?",
        "I can't stop procrastinating today.",
        "Are standing desks actually good for you?",
        "Translate 'good luck' into Italian please.",
        "Cheers, perfect.",
        "Which houseplants survive low light?",
        "How do you fold a fitted sheet?",
        "Give me a riddle to tell a six-year-old.",
        "Should I stretch before or after lifting?",
        "Make up a name for a grumpy robot.",
        "Why do cats knead blankets?",
        "whats the rule for who gets the armrest lol",
        "How do I politely leave a group chat?",
        "Is it normal for bread to go mouldy in three days?",
        "Tell me one weird fact about the moon.",
    ),
    replies=(
        "Here's what I'd suggest.",
        "Short answer: yes, with a couple of caveats.",
        "A few ideas below, pick whichever fits.",
        "Let's take it step by step.",
        "Sure thing!",
        "Okay, here's a quick rundown.",
    ),
    acknowledgements=(
        "Thanks, I've made a note of that.",
        "Okay, noted!",
        "Oh nice, thanks for the update.",
        "Makes sense, I'll keep it in mind.",
    ),
    friend_lines=(
        ("Did you see the state of the queue at the post office?", "ha, classic"),
        ("I've been sleeping terribly.", "Same, it's the heat I think."),
        ("Are you coming to the quiz night?", "Maybe, depends on the babysitter."),
        ("I burnt the toast again, three days running.", "lol, get a new toaster"),
        ("Have you finished that series yet?", "Two episodes left, no spoilers!"),
        ("My back is killing me from the new chair.", "You need a proper one, honestly."),
        ("Rain again, unbelievable.", "We should do a picnic when it clears up."),
        ("Guess who I bumped into at the market?", "No idea, who?"),
    ),
    friend_reactions=("Wait, seriously?", "Oh that's huge!", "Huh, didn't see that coming.",
                      "Nice one.", "Ahh okay, fair enough."),
    pairs=(("Priya", "Diego"), ("Hannah", "Kofi"), ("Sanne", "Mateus")),
    relatives=(("my mum", "she"), ("my cousin", "he"), ("my daughter", "she"),
               ("my uncle", "he")),
    others=("housemate", "old uni friend", "coworker"),
    names=(("Farid", "he"), ("Chiara", "she"), ("Bram", "he"), ("Noor", "she"),
           ("Tomasz", "he"), ("Imke", "she")),
)

HELDOUT_TOPICS: tuple[Topic, ...] = (
    Topic(
        "home", "town", HELD_CITIES,
        state=("These days {s} [call|calls] {v} home.", "{S} settled in {v} a while ago.",
               "[I'm|{S} is] renting a place in {v}, near the harbour."),
        implicit=("Got a parking ticket outside {w} place in {v} again, classic.",
                  "The wind in {v} is brutal this time of year, [I'm|{s} is] frozen."),
        change=("{S} relocated to {v}.", "{S} just finished moving into a place in {v}.",
                "{S} packed up in {old} and landed in {v}."),
        change_implicit=("Still unpacking boxes at the new place in {v}, send help.",
                         "Ever since the move to {v}, {p} [sleep|sleeps] so much better."),
        correction=("[I'm|{s} is] in {v} now, {old} is history.",
                    "{w} address is in {v} now, not {old}."),
        back=("{S} ended up moving back to {v}.",
              "[Guess who's|{S} is] back in {v}! {old} was a mistake."),
        retract=("{S} handed back the keys in {old}; no home base for a while.",
                 ("No home base right now, [I'm|{s} is] house-sitting around since leaving "
                  "{old}.")),
        retract_implicit=("House-sitting for strangers since giving up {old} is oddly fun.",),
        retract_pattern=r"no home base|house-sitting|handed back the keys",
        temporary=("[I'm|{S} is] popping over to {v} for a few days, back by Thursday.",
                   "[I'm|{S} is] visiting {v} through the weekend, then home."),
        temporary_implicit=("The Airbnb in {v} has a view, shame it's only three nights.",),
        controls=(
            Control(("{W} oldest friend is over in {v}, we talk every Sunday.",),
                    ("Flights to see {w} oldest friend in {v} keep getting pricier.",),
                    ("Where [do|does] {s} live, and where's {w} oldest friend?",
                     "Which towns are {w} oldest friend and [I|{s}] in?")),
            Control(("Weekends {s} [escape|escapes] to the family cottage near {v}.",),
                    ("The cottage near {v} has no signal, bliss.",),
                    ("Where [do|does] {s} live and spend the weekends?",
                     "Where can {s} be found on weekdays and weekends?")),
        ),
        questions=("What town [am I|is {s}] living in?", "Where's home for [me|{s}] right now?",
                   "Where [have I|has {s}] ended up living?", "Which city is {w} home now?"),
        near=("My {role} {n} is thinking of buying in {x}.", "Is {x} rainy all year?",
              "{n} grew up in {x}, apparently."),
    ),
    Topic(
        "work_location", "site", HELD_CITIES,
        state=("[I'm|{S} is] on the {v} site most days.", "{W} desk is at the {v} campus.",
               "{S} [clock|clocks] in at the {v} site."),
        implicit=("Parking at the {v} site is a nightmare.",
                  "Someone stole {w} mug from the {v} site kitchen, unbelievable."),
        change=("{S} got transferred to the {v} site.", "[I'm|{S} is] stationed in {v} now.",
                "They moved [me|{s}] from the {old} site to {v}."),
        change_implicit=("The drive to the {v} site is nicer than the old one.",
                         "Getting used to the {v} site canteen, it's not bad."),
        correction=("{w} workplace is {v} now, {old} is done.",),
        back=("{S} got moved back to the {v} site.",),
        retract=(("There's no site for [me|{s}] any more, [I|{p}] [work|works] remotely since "
                  "{old} shut."),),
        retract_implicit=("Working remotely since the {old} site closed, pyjamas all day.",),
        retract_pattern=r"remotely|no site",
        temporary=("[I'm|{S} is] helping out at the {v} site until Wednesday.",),
        temporary_implicit=("Three more days at the {v} site and then back to normal.",),
        controls=(
            Control(("Home is {v} for [me|{s}], though the site is in {a}.",),
                    ("The drive from {v} to the site in {a} is pretty.",),
                    ("Where [do|does] {s} live, and which site [do|does] {s} work at?",)),
            Control(("{S} [split|splits] the week between {a} and the {v} site.",),
                    ("Thursdays at the {v} site are the best.",),
                    ("Which sites [do|does] {s} work at?",
                     "Where [am I|is {s}] stationed for work, all of it?")),
        ),
        questions=("Which site [do|does] {s} work at?", "Where [am I|is {s}] stationed for work?",
                   "Where's {w} workplace?"),
        near=("My {role} {n} works at the {x} site.", "Is the {x} site hiring?"),
    ),
    Topic(
        "job_title", "position", HELD_TITLES,
        state=("[I'm|{S} is] a {v} by trade.", "{W} official title: {v}."),
        implicit=("Long shift as a {v} today, feet are dead.",
                  "As a {v}, [I'm|{s} is] always the last to leave."),
        change=("{S} moved into a {v} role.", "[I'm|{S} is] officially a {v} now.",
                "{S} made the jump from {old} to {v}."),
        change_implicit=("First week as a {v} and [I'm|{s} is] loving it.",
                         "The {v} gig comes with way more paperwork."),
        correction=("the title is {v} now, no longer {old}.",),
        back=("{S} returned to working as a {v}.",),
        retract=(("{S} handed in [my|{pos}] notice as {old}; taking time off, no job title for "
                  "now."),),
        retract_implicit=("Time off after leaving the {old} job has been glorious.",),
        retract_pattern=r"time off|no job title",
        temporary=("[I'm|{S} is] standing in as {v} for a fortnight.",),
        temporary_implicit=("Standing in as {v} ends on Friday, phew.",),
        controls=(
            Control(("Besides the day job, [I|{s}] [moonlight|moonlights] as a {v}.",),
                    ("Moonlighting as a {v} keeps things interesting.",),
                    ("Which jobs [do|does] {s} juggle?",
                     "What [do|does] {s} do, day job and side job?")),
        ),
        questions=("What [do|does] {s} do professionally?", "What's {w} current position?",
                   "What role [do|does] {s} hold now?"),
        near=("My {role} {n} trained as a {x}.", "Do {x}s earn much?"),
    ),
    Topic(
        "employer", "firm", HELD_COMPANIES,
        state=("[I'm|{S} is] on the payroll at {v}.", "{v} is where [I|{s}] [work|works].",
               "{S} [have|has] a job with {v}."),
        implicit=("The {v} holiday party was a bit much.", "Another all-hands at {v} today."),
        change=("{S} accepted an offer from {v} and started last week.",
                "{S} jumped ship from {old} to {v}.", "[I'm|{S} is] with {v} these days."),
        change_implicit=("Week two at {v} and [I|{s}] still [get|gets] lost in the building.",
                         "The laptop {v} gave [me|{s}] is amazing."),
        correction=("[I'm|{s} is] with {v}, {old} was before.",),
        back=("{S} boomeranged back to {v}.",),
        retract=("{S} got laid off from {old}, so no job right now.",),
        retract_implicit=("Being laid off from {old} has its perks: long lunches.",),
        retract_pattern=r"laid off|no job right now",
        temporary=("[I'm|{S} is] doing a short stint at {v}, it ends this month.",),
        temporary_implicit=("The temp contract at {v} wraps up on Friday.",),
        controls=(
            Control(("{S} also [do|does] consulting for {v} a few hours a week.",),
                    ("Consulting hours for {v} ate the whole weekend.",),
                    ("Who all [do|does] {s} work for?",
                     "Which companies [do|does] {s} do work for?")),
        ),
        questions=("Which company [do|does] {s} work for now?",
                   "Who's paying {w} salary these days?", "What's the name of {w} company?"),
        near=("My {role} {n} interviewed at {x}.", "Does {x} pay well?"),
    ),
    Topic(
        "number", "salary", _amounts(52000, 61000, 47500, 58000, 66000, 43000),
        state=("{W} salary is ${v} a year.", "{S} [earn|earns] ${v} before tax."),
        implicit=("On ${v} a year, saving for a house is slow.",),
        change=("{W} salary went up to ${v}.", "{S} negotiated ${v}.",
                "{W} pay went from ${old} to ${v}."),
        change_implicit=("With the raise to ${v}, the mortgage looks doable.",),
        correction=("it's ${v}; ${old} was last year's number.",),
        back=("{W} pay dropped back to ${v} when the bonus scheme ended.",),
        retract=("[I'm|{S} is] on unpaid leave, no salary for now.",),
        retract_implicit=("No paycheck during the unpaid leave, tightening belts.",),
        retract_pattern=r"unpaid leave|no salary|no paycheck",
        controls=(
            Control(("{W} base is ${a}, plus a ${v} bonus.",),
                    ("The ${v} bonus goes straight to savings.",),
                    ("What's {w} pay, base and bonus?", "How much [do|does] {s} earn in total?"),
                    items=_amounts(5000, 8000, 3500, 6000)),
        ),
        questions=("What [do|does] {s} earn?", "What's {w} salary?",
                   "How much [am I|is {s}] paid a year?"),
        near=("My {role} {n} makes ${x}.", "Is ${x} a good salary here?"),
    ),
    Topic(
        "number", "team", _counts("people", 5, 6, 8, 12, nouns="people|folks|persons"),
        state=("{W} team has {v}.", "{S} [run|runs] a team of {v}."),
        implicit=("Booking a table for {v} for the team lunch is always a hassle.",),
        change=("The team grew to {v}.", "{W} team is {v} now."),
        change_implicit=("With {v} on the team now, standups take forever.",),
        correction=("it's {v} on the team now, not {old}.",),
        back=("The team is back to {v} after the reshuffle.",),
        retract=("The team was dissolved; [I'm|{s} is] a team of one now.",),
        retract_implicit=("A team of one since the reorg dissolved everything.",),
        retract_pattern=r"dissolved|team of one",
        controls=(
            Control(("{W} team is {a}, plus {v} who come and go.",),
                    ("The {v} finish their contracts in spring.",),
                    ("How many people work with {obj}, contractors included?",),
                    items=_counts("contractors", 2, 3, 4,
                                  nouns="contractors|freelancers|people on contract")),
        ),
        questions=("How big is {w} team?", "How many people are on {w} team?"),
        near=("My {role} {n} manages {x}.", "Is {x} too many for one standup?"),
    ),
    Topic(
        "number", "asking_price", _amounts(450, 530, 675, 815, 940, 585),
        state=("[I'm|{S} is] selling [my|{pos}] bike for ${v}.",
               "The asking price for {w} bike is ${v}."),
        implicit=("Nobody bites at ${v} for the bike.",),
        change=("{S} dropped the bike's price to ${v}.", "The bike is listed at ${v} now.",
                "{S} cut the bike price from ${old} to ${v}."),
        change_implicit=("At ${v} the bike should go quickly now.",),
        correction=("the bike is ${v}, not ${old}.",),
        back=("The bike is back at ${v}.",),
        retract=("{S} decided not to sell the bike after all.",),
        retract_implicit=("Keeping the bike after all, took the ad down.",),
        retract_pattern=r"not to sell|keeping the bike|took the ad down",
        temporary=("Weekend special: {w} bike is ${v}, until Sunday only.",),
        temporary_implicit=("The ${v} weekend deal on {w} bike ends Sunday.",),
        controls=(
            Control(("[I'm|{S} is] also selling the helmet for ${v}.",),
                    ("Whoever buys the bike can have the helmet for ${v}.",),
                    ("What [am I|is {s}] asking for the bike and the helmet?",),
                    items=_amounts(40, 55, 35, 65)),
        ),
        questions=("What [am I|is {s}] asking for the bike?", "How much is {w} bike listed for?"),
        near=("My {role} {n} sold a bike for ${x}.", "Is ${x} fair for a used bike?"),
    ),
    Topic(
        "date", "visa", _days(("January", 19), ("February", 8), ("July", 24), ("August", 11),
                              ("October", 6), ("December", 2), ("July", 15), ("October", 27)),
        state=("{W} visa interview is on {v}.", ("The embassy gave [me|{s}] {v} for the "
                                                 "visa interview.")),
        implicit=("Gathering bank statements before the {v} visa interview.",),
        change=("The visa interview got rescheduled to {v}.",
                "The embassy moved {w} interview from {old} to {v}."),
        change_implicit=("With {w} interview on {v} now, there's time to get photos done.",),
        correction=("the interview is {v}, I had {old} written down wrong.",),
        back=("{W} interview is back on {v} after another reshuffle.",),
        retract=("The visa interview isn't happening, [I|{s}] withdrew the application.",),
        retract_implicit=("Since withdrawing the visa application, no more embassy forms.",),
        retract_pattern=r"isn't happening|withdr[ae]w(?:ing)? the (?:visa )?application",
        controls=(
            Control(("The visa interview is {a} and the medical check is {v}.",),
                    ("{W} medical on {v} needs fasting, ugh.",),
                    ("What visa appointments [do|does] {s} have?",
                     "When are {w} visa interview and medical?")),
        ),
        questions=("When is {w} visa interview?", "What date is the visa interview?"),
        near=("My {role} {n} has an embassy appointment on {x}.", "Are embassies open {x}?"),
    ),
    Topic(
        "date", "wedding", _days(("January", 25), ("February", 14), ("July", 5), ("August", 30),
                                 ("October", 18), ("December", 20), ("August", 9)),
        state=("{W} wedding is on {v}.", "The wedding date is set: {v}."),
        implicit=("Only a few months till {v} and the venue still wants a deposit.",
                  "{W} wedding on {v} is creeping up, and the venue still wants a deposit."),
        change=("The wedding moved to {v}.", "The date's changed to {v}.",
                "{W} wedding got moved to {v}.",
                "The wedding got moved from {old} to {v}."),
        change_implicit=("Now that {w} wedding is on {v}, the invites need redoing.",),
        correction=("{w} wedding is {v}, not {old}, the venue mixed it up.",),
        back=("{W} wedding's back on {v}.",),
        retract=("The wedding's off, [I|{s}] called it off.",),
        retract_implicit=("Calling off the wedding was hard but right.",),
        retract_pattern=r"wedding's off|called it off|calling off the wedding",
        controls=(
            Control(("{W} wedding is {a}, and the engagement party is {v}.",),
                    ("{W} engagement party on {v} is at the boathouse.",),
                    ("What are the dates for {w} wedding plans?",
                     "When are the wedding and the engagement party?")),
        ),
        questions=("When's {w} wedding?", "What date is {w} wedding?",
                   "When [am I|is {s}] getting married?"),
        near=("My {role} {n} gets married on {x}.", "Is {x} a good date for a wedding?"),
    ),
    Topic(
        "relationship", "other_half", HELD_PARTNERS,
        state=("{W} other half is {v}.", "[I've|{S} has] been going out with {v} since spring."),
        implicit=("{v} made pancakes for [me|{s}] today, so sweet.",),
        change=("[I'm|{S} is] dating {v} now.", "{S} met someone new: {v}.",
                "Things ended with {old}; {v} is the one now."),
        change_implicit=("[I'm|{S} is] meeting {v}'s parents on Saturday, nervous!",),
        correction=("{v} is {w} other half, not {old} any more.",),
        back=("[{v} and I|{S} and {v}] rekindled things.", "Back with {v}, who'd have thought."),
        retract=("[{old} and I|{S} and {old}] called it quits; no one in the picture now.",),
        retract_implicit=("Flying solo since {old} and [I|{s}] called it quits.",),
        retract_pattern=r"called it quits|no one in the picture|flying solo",
        controls=(
            Control(("{W} other half is {a}, and {w} oldest friend is {v}.",),
                    ("{v}, {w} oldest friend, gets on great with {a}.",),
                    ("Who are the important people in {w} life?",
                     "Who [am I|is {s}] closest to these days?")),
        ),
        questions=("Who's {w} other half?", "Who [am I|is {s}] going out with?",
                   "Who [do|does] {s} date?"),
        near=("My {role} {n} is going out with someone called {x}.", "{x} from yoga is a hoot."),
    ),
    Topic(
        "relationship", "supervisor", HELD_SUPERVISORS,
        state=("{W} line manager is {v}.", "{v} is {w} supervisor."),
        implicit=("{v} signed off {w} leave request, finally.",),
        change=("{v} took over as {w} supervisor.", "{S} [have|has] a new supervisor, {v}."),
        change_implicit=("Since {v} took over, the rota actually makes sense.",),
        correction=("{w} supervisor is {v} now, {old} left.",),
        back=("{v} is supervising [me|{s}] again.",),
        temporary=("{v} is covering as {w} supervisor until the end of the month.",),
        temporary_implicit=("Two more weeks of {v} covering, then normal service.",),
        controls=(
            Control(("{S} also [have|has] a mentor, {v}.",),
                    ("Coffee with {v}, {w} mentor, was really useful.",),
                    ("Who supervises and mentors [me|{s}]?",)),
        ),
        questions=("Who's {w} line manager?", "Who supervises [me|{s}] at work?"),
        near=("My {role} {n} works under {x}.", "{x} in HR is lovely."),
    ),
    Topic(
        "possession", "bike", _words("Brompton", "Trek", "Cannondale", "Gazelle", "Bianchi",
                                     "Canyon"),
        state=("{S} [ride|rides] a {v} to work.", "{W} bike's a {v}."),
        implicit=("The {v}'s gears are slipping again.",),
        change=("{S} traded the {old} in for a {v}.", "{S} [ride|rides] a {v} these days."),
        change_implicit=("The new {v} handles hills like a dream.",),
        correction=("it's a {v} now, the {old} got nicked.",),
        back=("{S} bought a {v} again.",),
        retract=("The {old} got stolen and [I|{s}] [haven't|hasn't] replaced it, no bike now.",),
        retract_implicit=("Walking everywhere since the {old} got stolen.",),
        retract_pattern=r"no bike|replaced it|walking everywhere",
        temporary=("[I'm|{S} is] borrowing a {v} until the weekend.",),
        temporary_implicit=("The borrowed {v} goes back on Sunday.",),
        controls=(
            Control(("{S} also [keep|keeps] a {v} for the trails.",),
                    ("The {v} is strictly for muddy trails.",),
                    ("What bikes [do|does] {s} own?", "Which bikes [do|does] {s} ride?")),
        ),
        questions=("What bike [do|does] {s} ride?", "What's {w} bike?"),
        near=("My {role} {n} is saving up for a {x}.", "Are {x}s any good?"),
    ),
    Topic(
        "possession", "animal", _words("ferret", "cockatiel", "hamster", "corgi", "labrador",
                                       "axolotl", "chinchilla"),
        state=("{S} [share|shares] the flat with a {v}.", "{S} [look|looks] after a {v}."),
        implicit=("The {v} woke [me|{s}] up at five again.",),
        change=("[I've|{S} has] taken in a {v}.", "A {v} joined {w} household."),
        change_implicit=("The new {v} has claimed the sofa.",),
        correction=("it's a {v}, not the {old}, I misspoke.",),
        back=("{S} got another {v}.",),
        retract=("{S} rehomed the {old}, no animals now.",),
        retract_implicit=("The flat feels empty with no animals since the {old} went.",),
        retract_pattern=r"no animals|rehomed",
        temporary=("[I'm|{S} is] minding a friend's {v} until Tuesday.",),
        temporary_implicit=("The {v} [I'm|{s} is] babysitting goes home Tuesday.",),
        controls=(
            Control(("A {v} joined the {a} last month.",),
                    ("The {v} and the {a} are best mates.",),
                    ("Which animals live with [me|{s}]?", "What animals [do|does] {s} keep?")),
        ),
        questions=("What animal [do|does] {s} have?", "What pet lives with [me|{s}]?"),
        near=("{n}, my {role}, has a pet {x}.", "Do {x}s smell?"),
    ),
    Topic(
        "possession", "laptop", (_item("ThinkPad"), _item("MacBook"), _item("Chromebook"),
                                 _item("Surface"), _item("Zenbook")),
        state=("{S} [work|works] on a {v}.", "{W} laptop is a {v}."),
        implicit=("The {v} fan sounds like a jet engine.",),
        change=("{S} upgraded to a {v}.", "{W} new laptop is a {v}."),
        change_implicit=("The {v} battery lasts all day, finally.",),
        correction=("it's a {v} now, the {old} is dead.",),
        back=("{S} returned to a {v} in the end.",),
        controls=(
            Control(("{S} also [have|has] a {v} for travel.",),
                    ("The travel {v} is tiny.",),
                    ("What laptops [do|does] {s} have?",)),
        ),
        questions=("What laptop [do|does] {s} use?", "What's {w} laptop?"),
        near=("My {role} {n} hates the {x} keyboard.", "Is the {x} keyboard any good?"),
    ),
    Topic(
        "preference", "workout_time", (
            _item("early mornings", pattern=r"\bearly[- ]mornings?\b"),
            _item("late evenings", pattern=r"\blate[- ]evenings?\b"),
            _item("lunch breaks", pattern=r"\blunch[- ]?breaks?\b")),
        state=("{S} [train|trains] in the {v}.", "{v} are {w} workout slot."),
        implicit=("Gym in the {v} means [I|{s}] [skip|skips] the crowds.",),
        change=("[I've|{S} has] moved workouts to {v}.", "These days {s} [train|trains] in {v}."),
        change_implicit=("Training in {v} now, and the energy boost is real.",
                         "[I'm|{S} is] training in {v} now, and loving the energy boost."),
        correction=("it's {v} for workouts now, not {old}.",),
        back=("{W} workouts are back in the {v}.",),
        retract=("{S} stopped working out, no routine at all.",),
        retract_implicit=("No routine since [I|{s}] stopped working out, feeling it.",),
        retract_pattern=r"stopped working out|no routine",
        temporary=("This week only [I'm|{s} is] training in {v}, the gym's changed hours.",),
        temporary_implicit=("Training in {v} this week because of the gym hours is odd.",),
        questions=("When [do|does] {s} like to work out?", "What's {w} preferred training time?"),
        near=("My {role} {n} trains in {x}.", "Is training in {x} bad for sleep?"),
    ),
    Topic(
        "preference", "cuisine", _words("Thai", "Ethiopian", "Georgian", "Lebanese",
                                        "Vietnamese", "Peruvian"),
        state=("{v} food is {w} favourite.", "{S} [pick|picks] {v} over Italian every time."),
        implicit=("That {v} place on the corner knows {w} order by heart.",),
        change=("[I've|{S} has] fallen for {v} food lately.", "{W} go-to cuisine is {v} now."),
        change_implicit=("Cooking {v} at home is [my|{pos}] new obsession.",),
        correction=("{v} is the favourite now, {old} has been dethroned.",),
        back=("{v} is back on top for [me|{s}].",),
        retract=("{S} [have|has] no favourite cuisine any more, [I|{p}] [eat|eats] anything.",),
        retract_implicit=("No favourite cuisine these days, anything goes.",),
        retract_pattern=r"no favourite cuisine|anything goes|eat anything",
        temporary=("This week [I'm|{s} is] on a {v} kick, just till the leftovers run out.",),
        temporary_implicit=("The {v} leftovers run out tomorrow, sadly.",),
        controls=(
            Control(("{S} also [love|loves] {v} food.",),
                    ("A {v} night is a close second to {a}.",),
                    ("Which cuisines [do|does] {s} love?", "What food [do|does] {s} like?")),
        ),
        questions=("What's {w} favourite cuisine?", "What food [do|does] {s} like best?"),
        near=("My {role} {n} is obsessed with {x} food.", "Is {x} food spicy?"),
    ),
    Topic(
        "diet", "eating", _words("gluten-free", "dairy-free", "low-carb", "paleo", "sugar-free"),
        state=("{S} [eat|eats] {v} these days.", "[I'm|{S} is] strictly {v}."),
        implicit=("Cooking {v} every night takes planning.",),
        change=("[I've|{S} has] gone {v}.", "The doctor put [me|{s}] on a {v} diet."),
        change_implicit=("Shopping {v} is pricier than expected.",),
        correction=("{v} from now on, {old} is over.",),
        back=("[I'm|{S} is] {v} again.",),
        retract=("{S} dropped the {old} thing, [I|{p}] [eat|eats] everything again.",),
        retract_implicit=("Eating everything again feels great.",),
        retract_pattern=r"eat(?:ing|s)? everything again|dropped the .{0,20} thing",
        temporary=("For ten days before the procedure [I'm|{s} is] strictly {v}.",),
        temporary_implicit=("Ten days of {v} before the procedure, counting down.",),
        controls=(
            Control(("[I'm|{S} is] {a}, and {v} intolerant too.",),
                    ("The {v} intolerance makes the {a} diet even trickier.",),
                    ("What should I know about {w} diet?", "What's off the menu for [me|{s}]?"),
                    items=_words("lactose", "fructose")),
        ),
        questions=("What [do|does] {s} eat at the moment?", "How [do|does] {s} eat these days?"),
        near=("My {role} {n} went {x}.", "Is {x} healthy?"),
    ),
    Topic(
        "diet", "intolerance", _words("lactose", "soy", "eggs", "celery", "fructose"),
        state=("[I'm|{S} is] intolerant to {v}.",
               "Anything with {v} in it doesn't agree with [me|{s}]."),
        implicit=("Reading labels for {v} is a chore.",),
        change=("The dietitian says it's {v}, not {old}.", "The culprit turned out to be {v}."),
        change_implicit=("Cutting out {v} fixed everything.",),
        correction=("it's {v} [I'm|{s} is] intolerant to, not {old}.",),
        retract=("[I|{S}] can tolerate {old} again, the intolerance is gone.",),
        retract_implicit=("The intolerance is gone, apparently.",),
        retract_pattern=r"intolerance is gone|tolerate \w+ again",
        controls=(
            Control(("{v} is a problem for [me|{s}] as well.",),
                    ("Avoiding {v} on top of {a} is tricky.",),
                    ("What [am I|is {s}] intolerant to?", "Which foods upset {w} stomach?")),
        ),
        questions=("What [am I|is {s}] intolerant to?", "Which food doesn't agree with [me|{s}]?"),
        near=("My {role} {n} can't have {x}.", "Is {x} intolerance common?"),
        revert=False,
    ),
    Topic(
        "tool", "database", (_item("Postgres", "PostgreSQL", pattern=r"\bpostgres(?:ql)?\b"),
                             _item("MySQL"), _item("MongoDB"), _item("SQLite"),
                             _item("DynamoDB"), _item("Cassandra")),
        state=("{W} backend runs on {v}.", "{W} team stores everything in {v}."),
        implicit=("Tuning {v} indexes all afternoon, fun times.",),
        change=("{S} migrated the app to {v}.", "The app is on {v} since the migration."),
        change_implicit=("Post-migration, {v} queries are way faster.",),
        correction=("the database is {v}, {old} was the old one.",),
        back=("Rolled back to {v} after the migration failed.",
              "{S} rolled back to {v} after the migration failed."),
        retract=("{S} ripped out the database entirely, it's flat files now.",),
        retract_implicit=("Flat files everywhere since the database went.",),
        retract_pattern=r"flat files|ripped out the database",
        temporary=("Just for this sprint {w} prototype runs on {v}.",),
        temporary_implicit=("{W} {v} prototype gets binned after the sprint.",),
        controls=(
            Control(("{S} also [use|uses] {v} for caching.",),
                    ("The {v} cache sits in front of {a}.",),
                    ("Which databases [do|does] {s} use?",)),
        ),
        questions=("Which database [do|does] {s} use?", "What's the backend running on?"),
        near=("My {role} {n} loves {x}.", "Is {x} good for analytics?"),
    ),
    Topic(
        "tool", "os", _words("Fedora", "Ubuntu", "macOS", "Debian", "FreeBSD"),
        state=("{S} [run|runs] {v} on [my|{pos}] laptop.", "{W} daily driver is {v}."),
        implicit=("Another {v} update broke the wifi driver.",),
        change=("{S} switched the laptop to {v}.", "[I'm|{S} is] on {v} now."),
        change_implicit=("Fresh {v} install, everything feels snappy.",),
        correction=("it's {v} now, {old} got wiped.",),
        back=("{S} reinstalled {v}.",),
        temporary=("Trying {v} on a spare partition this week only.",),
        temporary_implicit=("The {v} test partition gets wiped on Friday.",),
        controls=(
            Control(("{S} [dual-boot|dual-boots] {v} for gaming.",),
                    ("Booting into {v} for gaming nights.",),
                    ("Which operating systems [do|does] {s} run?",)),
        ),
        questions=("What OS [do|does] {s} run?", "Which operating system is on {w} laptop?"),
        near=("My {role} {n} runs {x}.", "Is {x} good for beginners?"),
    ),
    Topic(
        "tool", "notes", _words("Obsidian", "Notion", "Evernote", "OneNote", "Logseq"),
        state=("All {w} notes live in {v}.", "{S} [keep|keeps] everything in {v}."),
        implicit=("{W} {v} vault is a mess.",),
        change=("{S} moved [my|{pos}] notes to {v}.", "{S} [use|uses] {v} for notes now."),
        change_implicit=("Importing everything into {v} took all weekend.",),
        correction=("notes are in {v} now, {old} is gone.",),
        back=("{S} moved the notes back to {v}.",),
        retract=("{S} quit note apps, paper notebook only now.",),
        retract_implicit=("Paper notebook only, and honestly it's freeing.",),
        retract_pattern=r"paper notebook|quit note apps",
        controls=(
            Control(("{S} also [use|uses] {v} for work notes.",),
                    ("Work stuff goes in {v}, the rest in {a}.",),
                    ("Which note apps [do|does] {s} use?",)),
        ),
        questions=("Where [do|does] {s} keep notes?", "What notes app [do|does] {s} use?"),
        near=("My {role} {n} is a {x} fanatic.", "Is {x} free?"),
    ),
    Topic(
        "plan", "holiday", _words("Chile", "Namibia", "Mongolia", "Sri Lanka", "Croatia",
                                  "Tanzania", "Cuba"),
        state=("Next spring [I'm|{s} is] heading to {v}.", "{W} big trip next year is {v}."),
        implicit=("Reading up on {v} every night, so excited.",),
        change=("The big trip is {v} now instead.", "{S} rebooked everything for {v}."),
        change_implicit=("Got the {v} guidebook, trip's locked in.",),
        correction=("the big trip is {v}, not {old}.",),
        back=("The big trip is back to {v}.",),
        retract=("The big trip is cancelled, the money's needed elsewhere.",),
        retract_implicit=("No trip this year, the money's needed elsewhere.",),
        retract_pattern=r"trip is cancelled|no trip|money's needed elsewhere",
        temporary=("Quick hop to {v} this weekend, back Monday.",
                   "[I'm|{S} is] taking a quick hop to {v} this weekend, back Monday."),
        temporary_implicit=("{W} weekend in {v} was short but sweet.",),
        controls=(
            Control(("[I'm|{S} is] also squeezing in {v} on the way back.",),
                    ("The stopover in {v} should be fun.",),
                    ("Where [am I|is {s}] travelling next year?",)),
        ),
        questions=("Where [am I|is {s}] travelling next year?", "What's {w} big trip?"),
        near=("My {role} {n} backpacked through {x}.", "When is the best time for {x}?"),
    ),
    Topic(
        "plan", "move", HELD_CITIES,
        state=("[I'm|{S} is] planning to move to {v} next year.",),
        implicit=("Looking at flats in {v} online every evening.",),
        change=("The plan now is to move to {v}.", "{S} [want|wants] to move to {v} instead."),
        change_implicit=("Scrolling {v} flat listings instead now.",),
        correction=("the move is to {v}, not {old}.",),
        back=("The move is back to {v}.",),
        retract=("{S} scrapped the moving plan, staying put.",),
        retract_implicit=("Staying put after all, the moving plan is dead.",),
        retract_pattern=r"staying put|scrapped the moving plan|moving plan is dead",
        questions=("Where [am I|is {s}] planning to move?", "Where's the move going to be?"),
        near=("My {role} {n} might move to {x}.", "Is {x} affordable?"),
    ),
)

TOPICS = {"dev": DEV_TOPICS, "heldout": HELDOUT_TOPICS}
BOOKS = {"dev": DEV, "heldout": HELDOUT}


# --- scenarios ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One message: ``role`` is ``user`` or ``assistant``; ``name`` the speaker's name in a
    two-person conversation, None otherwise; ``event_id`` is stable for a seed."""

    event_id: str
    role: str
    name: str | None
    text: str
    occurred_at: datetime


@dataclass
class Scenario:
    """One user's sessions, the question about the fact, and what must rank first.

    ``current`` holds the values that are true now (two or more for a control), ``stale``
    those that no longer are; ``as_of`` is a past moment (None for controls) at which
    ``as_of_current`` was the current value; ``stating_turns`` maps each value's label to
    the event ids of the turns that state it. ``speakers`` is (user, other) in a two-person
    conversation.
    """

    scenario_id: str
    split: str
    kind: str
    topic: str
    change: str
    person: str
    style: str
    sessions: list[list[Turn]]
    question: str
    current: tuple[Value, ...]
    stale: tuple[Value, ...]
    as_of: datetime | None
    as_of_current: Value | None
    stating_turns: dict[str, tuple[str, ...]]
    speakers: tuple[str, str] | None = None

    @property
    def user_id(self) -> str:
        """The memory's user: one per scenario."""
        return self.scenario_id

    @property
    def turns(self) -> list[Turn]:
        """Every turn, oldest first."""
        return [turn for session in self.sessions for turn in session]

    @property
    def values(self) -> tuple[Value, ...]:
        """Every value the scenario asks about, current first."""
        return self.current + self.stale

    def messages(self) -> list[list[TranscriptMessage]]:
        """The sessions as the pipeline takes them, the speaker's name on each message."""
        return [
            [
                TranscriptMessage(event_id=turn.event_id, role=turn.role, name=turn.name,
                                  content=turn.text, occurred_at=turn.occurred_at)
                for turn in session
            ]
            for session in self.sessions
        ]


@dataclass
class _Step:
    """A stating turn to write: what it does (``first``, ``restate``, ``change``, ``back``,
    ``retract``, ``temporary``, ``also``) and with which values."""

    role: str
    label: str
    value: str | None = None
    old: str | None = None
    first: str | None = None
    #: The value this turn states ends up stale, so the turn may name no current value.
    stale: bool = False
    session: int = 0
    event_id: str = ""
    at: datetime | None = None


def _question_voice(noun_phrase: str) -> Voice:
    """A voice for questions about someone: every reference is the noun phrase itself."""
    return Voice(False, noun_phrase, noun_phrase, f"{noun_phrase}'s", f"{noun_phrase}'s",
                 noun_phrase)


def _cross_matches(items: Sequence[Item]) -> bool:
    """Whether any item's pattern matches another item's forms."""
    return any(
        re.search(a.pattern, form, re.IGNORECASE)
        for a in items for b in items if a is not b for form in b.forms
    )


class _Writer:
    """Writes one scenario; every random choice comes from the split's ``rng``."""

    def __init__(self, rng: random.Random, split: str, scenario_id: str) -> None:
        self.rng = rng
        self.split = split
        self.book = BOOKS[split]
        self.topics = TOPICS[split]
        self.scenario_id = scenario_id

    # --- choices ---

    def pick_items(
        self, pool: Sequence[Item], count: int, taken: Sequence[Item] = ()
    ) -> list[Item]:
        """``count`` distinct items of ``pool`` none of whose patterns matches another's."""
        free = [item for item in pool if item not in taken]
        for _ in range(100):
            chosen = self.rng.sample(free, count)
            if not _cross_matches([*taken, *chosen]):
                return chosen
        raise ValueError(f"no {count} distinct values in {[i.label for i in pool]}")

    def form(self, item: Item) -> str:
        return self.rng.choice(item.forms)

    def clean(self, make: Callable[[], str]) -> str:
        """A filler line (chit-chat, near miss) that names none of the scenario's values."""
        for _ in range(200):
            text = make()
            if not any(value.matches(text) for value in self.values):
                return text
        raise ValueError(f"{self.scenario_id}: no filler line free of the scenario's values")

    # --- the scenario ---

    def write(self, kind: str, change: str, style: str) -> Scenario:
        """The scenario of ``kind``, ``change`` and ``style`` (a kind that cannot make
        ``change`` makes an update)."""
        rng = self.rng
        topics = [t for t in self.topics if t.kind == kind and t.supports(change)]
        if not topics:
            change, topics = "update", [t for t in self.topics if t.kind == kind]
        self.topic = topic = rng.choice(topics)
        self.style = style
        self.control = control = rng.choice(topic.controls) if change == "control" else None
        third = (rng.random() < THIRD_PERSON_SHARE and topic.third
                 and (control is None or control.third))
        pair = rng.choice(self.book.pairs) if rng.random() < TWO_PERSON_SHARE else None
        if third:
            noun_phrase, pronoun = rng.choice(self.book.relatives)
            voice = relative(noun_phrase, pronoun)
            about = f"{pair[0]}'s {noun_phrase.removeprefix('my ')}" if pair else noun_phrase
            asked = _question_voice(about)
        else:
            voice = ME
            asked = _question_voice(pair[0]) if pair else ME
        self.voice, self.pair = voice, pair
        self.said: set[str] = set()

        steps, current, stale, window = self.plan(change, control)
        self.current, self.stale = current, stale
        self.values = (*current, *stale)
        templates = control.questions if control else topic.questions
        question = self.clean(lambda: asked.render(rng.choice(templates)))
        sessions = self.place(steps, change)
        stating: dict[str, list[str]] = {value.label: [] for value in self.values}
        for step in steps:
            stating[step.label].append(step.event_id)
        as_of, as_of_current = None, None
        if window is not None:
            before, after, as_of_current = window
            start, end = steps[before].at, steps[after].at
            assert start is not None and end is not None
            as_of = start + (end - start) / 2
        scenario = Scenario(
            scenario_id=self.scenario_id, split=self.split, kind=kind, topic=topic.name,
            change=change, person="third" if third else "first", style=style,
            sessions=sessions, question=question, current=current, stale=stale, as_of=as_of,
            as_of_current=as_of_current,
            stating_turns={label: tuple(ids) for label, ids in stating.items()},
            speakers=pair,
        )
        check(scenario)
        return scenario

    def plan(
        self, change: str, control: Control | None
    ) -> tuple[list[_Step], tuple[Value, ...], tuple[Value, ...], tuple[int, int, Value] | None]:
        """The stating steps, the current and stale values, and the ``as_of`` window (the
        indices of the two steps around it, and the value current inside it)."""
        topic, rng = self.topic, self.rng

        def value(item: Item) -> Value:
            return Value(item.label, item.pattern)

        if change == "control":
            assert control is not None
            first = self.pick_items(topic.items, 1)[0]
            second = self.pick_items(control.items or topic.items, 1, [first])[0]
            steps = [_Step("first", first.label, self.form(first)),
                     _Step("also", second.label, self.form(second), first=self.form(first))]
            return steps, (value(first), value(second)), (), None
        if change == "retraction":
            (old,) = self.pick_items(topic.items, 1)
            ended = Value(f"no longer {old.label}", topic.retract_pattern)
            steps = [_Step("first", old.label, self.form(old), stale=True),
                     _Step("retract", ended.label, old=self.form(old))]
            return steps, (ended,), (value(old),), (0, 1, value(old))
        if change == "expiry":
            standing, temporary = self.pick_items(topic.items, 2)
            steps = [_Step("first", standing.label, self.form(standing)),
                     _Step("temporary", temporary.label, self.form(temporary), stale=True)]
            return steps, (value(standing),), (value(temporary),), (0, 1, value(standing))
        current: tuple[Value, ...]
        stale: tuple[Value, ...]
        count = {"update": 2, "chain": 3, "revert": 2}[change]
        items = self.pick_items(topic.items, count)
        if topic.ascending:
            items.sort(key=topic.items.index)
        if change == "revert":
            a, b = items
            steps = [_Step("first", a.label, self.form(a)),
                     _Step("change", b.label, self.form(b), old=self.form(a), stale=True),
                     _Step("back", a.label, self.form(a), old=self.form(b))]
            window = (1, 2, value(b))
            current, stale = (value(a),), (value(b),)
        else:
            steps = [_Step("first", items[0].label, self.form(items[0]), stale=True)]
            for before, item in itertools.pairwise(items):
                steps.append(_Step("change", item.label, self.form(item), old=self.form(before),
                                   stale=item is not items[-1]))
            window = (0, 1, value(items[0]))
            current, stale = (value(items[-1]),), tuple(value(i) for i in items[:-1])
        if rng.random() < 0.3:
            # The first value said again before it changes: stale turns outnumber current.
            said = steps[0]
            steps.insert(1, _Step("restate", said.label, self.form(items[0]), stale=said.stale))
            window = (window[0] + 1, window[1] + 1, window[2])
        return steps, current, stale, window

    # --- sessions ---

    def place(self, steps: list[_Step], change: str) -> list[list[Turn]]:
        """Sessions days apart with the steps in order, chit-chat and near misses around."""
        rng = self.rng
        together = change == "control" and rng.random() < 0.3
        needed = len(steps) - together
        # A temporary state is never in the last session: it must be weeks old at the end.
        sessions = rng.randint(max(3, needed + (change == "expiry")), 6)
        chosen = sorted(rng.sample(range(sessions - (change == "expiry")), needed))
        if together:
            chosen.insert(1, chosen[0])
        for step, session in zip(steps, chosen, strict=True):
            step.session = session
        starts = []
        day = START[self.split] + timedelta(days=rng.randint(0, 40))
        for _ in range(sessions):
            starts.append(day + timedelta(hours=rng.randint(8, 21), minutes=rng.randint(0, 59)))
            day += timedelta(days=rng.randint(2, 20))
        if change == "expiry":
            temporary = steps[-1].session
            shortfall = EXPIRY_AGE - (starts[-1] - starts[temporary])
            if shortfall > timedelta(0):
                starts[temporary + 1:] = [s + shortfall + timedelta(days=1)
                                          for s in starts[temporary + 1:]]
        return [
            self.session(s, starts[s], [step for step in steps if step.session == s])
            for s in range(sessions)
        ]

    def session(self, index: int, start: datetime, steps: list[_Step]) -> list[Turn]:
        """One session: user turns (fillers and the steps' statements), each answered."""
        rng, book = self.rng, self.book
        # A filler is a user line and, between friends, the other's answer to it.
        exchanges: Sequence[tuple[str, str | None]] = (
            book.friend_lines if self.pair else [(line, None) for line in book.chit_chat]
        )
        # Sampled without replacement: nobody says the same thing twice in one chat.
        fillers = [exchange for exchange in rng.sample(exchanges, min(len(exchanges), (
                       rng.randint(3, 7) if steps else rng.randint(4, 7))))
                   if not any(value.matches(line) for value in self.values
                              for line in exchange if line)]
        fillers += [(self.clean(self.near_miss), None)
                    for _ in range(rng.randint(1, 2) if steps else rng.randint(0, 1))]
        rng.shuffle(fillers)
        slots = sorted(rng.sample(range(len(fillers) + len(steps)), len(steps)))
        turns: list[Turn] = []
        at = start
        user, other = self.pair or (None, None)
        pending_steps = iter(steps)
        for position in range(len(fillers) + len(steps)):
            step = next(pending_steps) if position in slots else None
            text, answer = (self.statement(step), None) if step else fillers.pop()
            event_id = f"{self.scenario_id}-s{index}-t{len(turns)}"
            if step:
                step.event_id, step.at = event_id, at
            turns.append(Turn(event_id, "user", user, text, at))
            at += timedelta(seconds=rng.randint(30, 150))
            turns.append(Turn(f"{self.scenario_id}-s{index}-t{len(turns)}", "assistant", other,
                              answer or self.reply(stated=step is not None), at))
            at += timedelta(seconds=rng.randint(40, 240))
        return turns

    def reply(self, *, stated: bool) -> str:
        """The assistant's answer, or the other person's line in a two-person chat (now and
        then their own value of the same kind: a near miss by another speaker)."""
        rng, book = self.rng, self.book
        if not self.pair:
            return self.clean(lambda: rng.choice(book.acknowledgements if stated
                                                 else book.replies))
        if stated:
            return self.clean(lambda: rng.choice(book.friend_reactions))
        # The other person's own value of the same kind ("I moved to Ghent in May"), or
        # small talk.
        own = self.distractor(self.topic)
        if own is not None and rng.random() < 0.5:
            return self.clean(lambda: ME.render(rng.choice(self.topic.state), v=own))
        return self.clean(lambda: rng.choice(book.friend_lines)[0])

    def distractor(self, topic: Topic) -> str | None:
        """A value of ``topic`` that is none of the scenario's (None if it has no other)."""
        pool = [item for item in topic.items
                if not any(value.matches(form) for value in self.values for form in item.forms)]
        return self.form(self.rng.choice(pool)) if pool else None

    def near_miss(self) -> str:
        """A line on the same topic that is not the fact: someone else's value, a question
        about another value, or (now and then) another topic's near miss."""
        rng, book = self.rng, self.book
        role = rng.choice(book.others)
        name, pronoun = rng.choice(book.names)
        draw = rng.random()
        topic = self.topic
        if draw < 0.2 or self.distractor(topic) is None:
            topic = rng.choice([t for t in self.topics if self.distractor(t) is not None])
        elif draw < 0.55:
            # Someone else's value, said the way the fact is: "My colleague Raj lives in Ghent".
            # In a third-person scenario, the user's own value is the nearest miss of all.
            voice = ME if self.voice is not ME and rng.random() < 0.5 else relative(
                f"my {role} {name}", pronoun)
            return voice.render(rng.choice(topic.state), v=self.distractor(topic) or "")
        x = self.distractor(topic) or ""
        return ME.render(rng.choice(topic.near), role=role, n=name, x=x)

    def statement(self, step: _Step) -> str:
        """The user's turn for ``step``: its style's wording, in the scenario's voice. A
        stale value's turn never names a current value."""
        for attempt in range(100):
            text = self._statement(step, strict=attempt < 50)
            own = next(v for v in self.values if v.label == step.label)
            names_current = any(v.matches(text) for v in self.current if v.label != step.label)
            if own.matches(text) and not (step.stale and names_current) and text not in self.said:
                self.said.add(text)
                return text
        raise ValueError(f"{self.scenario_id}: cannot word step {step.role} of {step.label}")

    def _statement(self, step: _Step, *, strict: bool) -> str:
        topic, rng, style, book, role = self.topic, self.rng, self.style, self.book, step.role
        # The old value may be named only where it is not current (a revert's middle value
        # is stale, and its old value is the current one).
        old_is_current = step.stale and any(v.matches(step.old or "") for v in self.current)

        def pick(wanted: Sequence[str], fallback: Sequence[str]) -> str:
            """One of ``wanted``; about someone else, one that names them (a turn that does
            not say whose flat it is cannot be about the sister), else one of ``fallback``;
            ``strict`` off, any (when every template that names them is used up)."""
            usable = [t for t in wanted if not ("{old}" in t and old_is_current)]
            if strict and not self.voice.first:
                named = [t for t in usable if _NAMES_SUBJECT.search(t)]
                spare = [t for t in fallback if _NAMES_SUBJECT.search(t)
                         and not ("{old}" in t and old_is_current)]
                usable = named or spare or usable
            return rng.choice(usable)

        if role in ("first", "restate"):
            if style == "passing":
                wanted = (*topic.state, *topic.implicit)
            elif style == "implicit" or role == "restate":
                wanted = topic.implicit if rng.random() < 0.6 else topic.state
            else:
                wanted = topic.state
            template = pick(wanted, topic.state)
        elif role in ("change", "back"):
            plain = (topic.back or topic.change) if role == "back" else topic.change
            wanted = {"explicit": (*plain, *topic.correction), "implicit": topic.change_implicit,
                      "passing": (*plain, *topic.change_implicit)}[style]
            template = pick(wanted, (*plain, *topic.correction))
        elif role == "retract":
            wanted = {"explicit": topic.retract,
                      "implicit": topic.retract_implicit or topic.retract,
                      "passing": (*topic.retract, *topic.retract_implicit)}[style]
            template = pick(wanted, topic.retract)
        elif role == "temporary":
            wanted = topic.temporary_implicit if style == "implicit" else topic.temporary
            template = pick(wanted, topic.temporary)
        else:
            assert self.control is not None
            control = self.control
            wanted = control.also_implicit if style == "implicit" else control.also
            template = pick(wanted, control.also)
        clause = self.voice.render(template, v=step.value or "", old=step.old or "",
                                   a=step.first or "")
        if style == "explicit" and role in ("change", "back", "retract"):
            keep = template.startswith(("{v}", "{old}", "{a}")) or re.match(r"I\b", clause)
            framed = clause if keep else clause[:1].lower() + clause[1:]
            return rng.choice(book.frames).format(c=framed)
        if style == "passing":
            return f"{rng.choice(book.prefixes)} {clause} {rng.choice(book.suffixes)}"
        return clause


def check(scenario: Scenario) -> None:
    """Raise ``ValueError`` unless the scenario scores what it claims: no turn but a stating
    one names a value, no stale value's turn names a current one, the question names none,
    and ``as_of`` falls strictly inside its window."""
    stating = {event_id for ids in scenario.stating_turns.values() for event_id in ids}
    stale_turns = {event_id for value in scenario.stale
                   for event_id in scenario.stating_turns[value.label]}
    for turn in scenario.turns:
        named = [value.label for value in scenario.values if value.matches(turn.text)]
        if named and turn.event_id not in stating:
            raise ValueError(f"{turn.event_id} names {named}: {turn.text!r}")
        if turn.event_id in stale_turns and any(v.matches(turn.text) for v in scenario.current):
            raise ValueError(f"{turn.event_id} states a stale value beside a current one")
    for value in scenario.values:
        if not scenario.stating_turns[value.label]:
            raise ValueError(f"{scenario.scenario_id}: nothing states {value.label}")
    if any(value.matches(scenario.question) for value in scenario.values):
        raise ValueError(f"{scenario.scenario_id}: the question names a value")
    if scenario.as_of is not None:
        assert scenario.as_of_current is not None
        said = [t.occurred_at for t in scenario.turns
                if t.event_id in scenario.stating_turns[scenario.as_of_current.label]]
        if not said or min(said) >= scenario.as_of:
            raise ValueError(f"{scenario.scenario_id}: as_of before its value was stated")


def generate(seed: int = 26, per_split: int = 180) -> list[Scenario]:
    """``per_split`` scenarios of each split (dev first), the same for the same seed.

    Kinds take turns, and each kind cycles through :data:`CHANGE_CYCLE` and the three
    styles, so every kind sees every change type and style in a full split of 180.
    """
    scenarios = []
    for split in SPLITS:
        rng = random.Random(f"{seed}/{split}")
        for index in range(per_split):
            kind_index, round_ = index % len(KINDS), index // len(KINDS)
            change = CHANGE_CYCLE[(round_ + kind_index) % len(CHANGE_CYCLE)]
            style = STYLES[round_ % len(STYLES)]
            writer = _Writer(rng, split, f"belief-{split}-{index:03d}")
            scenarios.append(writer.write(KINDS[kind_index], change, style))
    return scenarios


def composition(scenarios: Sequence[Scenario]) -> dict[str, dict[str, int]]:
    """How many scenarios of each kind, change, person, style, and two-person ones."""
    counts: dict[str, dict[str, int]] = {}
    for field_name in ("kind", "change", "person", "style"):
        column: dict[str, int] = {}
        for scenario in scenarios:
            key = getattr(scenario, field_name)
            column[key] = column.get(key, 0) + 1
        counts[field_name] = column
    counts["two_person"] = {"yes": sum(s.speakers is not None for s in scenarios),
                            "no": sum(s.speakers is None for s in scenarios)}
    return counts


if __name__ == "__main__":
    import sys

    made = generate(per_split=int(sys.argv[1]) if len(sys.argv) > 1 else 180)
    for split in SPLITS:
        print(split, composition([s for s in made if s.split == split]))
