"""The foreign split's words: names, places, values, chit-chat and the phrasings of facts
and questions, written apart from ``dialogues.py``'s templates (``dialogues_foreign.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PAIRS = [("Priya", "Dmitri"), ("Kwame", "Sunniva"), ("Yusuf", "Beatriz"), ("Hana", "Callum"),
         ("Rosa", "Teodor"), ("Nkechi", "Mattias")]
#: Relatives and their gender ("he", "she", or None for either).
RELATIVES: dict[str, str | None] = {
    "big sister": "she", "little brother": "he", "grandpa": "he", "stepmum": "she",
    "auntie": "she", "brother-in-law": "he", "sister-in-law": "she", "godmother": "she",
    "stepdad": "he", "second cousin": None, "twin": None,
}
#: How the user names a friend a third-person fact is about.
FRIENDS = ["mate from uni", "coworker", "gym buddy", "old roommate", "ex-boss", "teammate"]
POOLS: dict[str, list[Any]] = {
    "city": ["Hobart", "Tucson", "Mombasa", "Halifax", "Kyoto", "Cusco", "Dunedin", "Marrakesh",
             "Tbilisi", "Winnipeg", "Adelaide", "Busan", "Medellin", "Galway", "Reykjavik",
             "Bordeaux", "Windhoek", "Oaxaca", "Savannah", "Durban", "Hanoi", "Montevideo",
             "Valletta", "Quito"],
    "employer": ["Canva", "Shopify", "Atlassian", "Patagonia", "Duolingo", "Etsy", "Mozilla",
                 "Figma", "Nintendo", "Lufthansa", "Unilever", "Deloitte", "Zalando", "Klarna",
                 "Ubisoft", "Revolut"],
    "hobby": ["woodcarving", "aerial yoga", "beekeeping", "crochet", "roller derby",
              "paddleboarding", "origami", "screen printing", "kitesurfing", "bonsai",
              "pole dancing", "improv theatre", "tap dancing", "falconry"],
    "car": ["Hyundai", "Peugeot", "Citroen", "Tesla", "Honda", "Nissan", "Lancia", "Suzuki",
            "Polestar", "Opel", "Chevrolet"],
    "sport": ["pickleball", "water polo", "ultimate frisbee", "netball", "cricket", "rugby",
              "curling", "lacrosse", "table tennis"],
    "language": ["Swahili", "Tagalog", "Hungarian", "Vietnamese", "Welsh", "Hebrew", "Catalan",
                 "Mandarin", "Estonian"],
    "pet_name": ["Noodle", "Pretzel", "Clementine", "Kiwi", "Basil", "Sprout", "Marbles", "Gizmo",
                 "Truffle", "Bagel", "Chai", "Momo", "Fudge", "Tater", "Nugget", "Wasabi"],
    "job": ["surf shop", "botanical garden", "escape room", "brewery", "radio station",
            "food truck", "aquarium", "vineyard", "hostel", "toy shop", "planetarium",
            "animal shelter"],
    "bar": ["Velvet Room", "Copper Kettle", "Night Owl", "Paper Moon", "Anchor Inn",
            "Green Door", "Rusty Nail", "Blue Heron"],
    "he": ["Kofi", "Ravi", "Diego", "Soren", "Idris", "Mateus", "Ewan", "Laszlo", "Tariq",
           "Henrik", "Joaquin", "Ruben", "Kenji", "Dario", "Florin", "Anders", "Bastian", "Cyrus"],
    "she": ["Amara", "Leilani", "Ingrid", "Yara", "Noemi", "Zofia", "Kalinda", "Ottilie", "Esme",
            "Marisol", "Dagny", "Imani", "Saoirse", "Petra", "Lucia", "Wren", "Solveig", "Farah"],
    "occasion": ["over the Christmas break", "for the bank holiday", "on the work retreat",
                 "for spring break", "over Diwali", "for the festival", "for the anniversary",
                 "after the exams"],
    #: What the user did on a day a temporal_date question names: (the words, the answer).
    "activity": [("got my braces off", "braces"), ("donated blood for the first time", "blood"),
                 ("went to a silent disco", "silent disco"),
                 ("built the new wardrobe all by myself", "wardrobe"),
                 ("went skydiving", "skydiving"), ("got my flu jab", "flu jab"),
                 ("saw a whale from the ferry", "whale"),
                 ("had my citizenship interview", "citizenship interview"),
                 ("lost my wallet on the bus", "wallet"),
                 ("picked up the keys to our new flat", "keys"),
                 ("went to a comedy show", "comedy show"),
                 ("baked a three-tier cake for a friend", "three-tier cake"),
                 ("ran into my old headteacher", "headteacher"),
                 ("fixed the leaky tap", "leaky tap")],
}
#: Where the user meets someone a multi-hop chain asks about.
VENUES = ["pub quiz", "beach cleanup", "board game night", "cooking class", "yoga retreat",
          "hackathon", "open mic night", "parkrun", "book swap", "wine tasting"]
OPENERS = ["", "", "honestly ", "oh btw ", "ok so ", "anyway, ", "lol ", "sorry, crazy week. "]
CLOSERS = ["", "", "lol", "anyway, how are you?", "long story.", "we should catch up soon!",
           "ok gtg, dinner's burning"]
ASK_BACK = ["what about you?", "you?", "anything new on your end?", "how about you lol"]
CHATTER = [
    "lol same", "ugh mondays", "did you see the video I sent? I can't stop laughing",
    "brb the cat is screaming for food", "omg the traffic today", "haha yeah",
    "I need a holiday honestly", "what are you having for dinner?", "probably just pasta again",
    "my landlord still hasn't fixed the heating", "can't believe it's already dark at 5",
    "ok that's hilarious", "been binge-watching a baking show, zero regrets",
    "my phone is on 2% sorry if I vanish", "how's the week going?", "slowly lol",
    "did you sleep at all?", "not really, the neighbours had a party", "sounds about right",
    "we should do a call this weekend", "yes!! sunday maybe?", "I'm so behind on emails",
    "the group chat is chaos today", "coffee number three already", "true true",
    "wait did you get my voice note?", "it was like 4 minutes long sorry lol",
    "I just spent 20 min looking for my glasses. they were on my head",
    "the new season drops friday, no spoilers please", "deal", "hahaha stop",
    "my plants are all dying, what am I doing wrong", "less water probably lol",
    "is it just me or is everything expensive now", "it's not just you",
    "can we reschedule thursday? something came up", "sure, no stress",
    "I made soup and it's honestly mid", "hope your day gets better x", "thanks, you too",
]
#: Temporal events said "last <weekday>" (``{day}``), each with a fresh ``{v}``: the texts,
#: then the questions.
EVENTS: dict[str, tuple[list[str], list[str]]] = {
    "kitten": (["last {day} we brought home a kitten!! {v}. she's tiny",
                "we adopted a kitten last {day}, called her {v}",
                "meet {v} lol, our new kitten. we picked her up last {day}"],
               ["When did {user} get the kitten {v}?",
                "On what date did {user} bring {v} home?"]),
    "gig": (["my band played the {v} last {day}, we were terrible and it was great",
             "last {day} was our first gig! at the {v}. so nervous",
             "ok so last {day} we finally played a real show, the {v}, like 40 people came"],
            ["When did {user}'s band play at the {v}?",
             "What date was {user}'s gig at the {v}?"]),
    "baby": (["my best friend had her baby last {day}! tiny little {v}",
              "baby {v} arrived last {day}, I'm basically a godparent now lol",
              "so last {day} my best friend's baby came early, {v}. everyone's fine"],
             ["When was {user}'s friend's baby {v} born?", "On what day did baby {v} arrive?"]),
}
REACTIONS = ["wait what, congrats!!", "ooh nice.", "haha love that.", "no way!", "that's huge!",
             "good for you honestly.", "hm interesting."]


@dataclass(frozen=True)
class Kind:
    """A kind of fact: its pool, phrasings in the first person and about ``{who}``, the
    questions about ``{who}``."""

    pool: str
    first: tuple[str, ...]
    third: tuple[str, ...]
    questions: tuple[str, ...]


KINDS = {
    "work": Kind("employer",
                 ("I'm at {v} now btw, started in {month}",
                  "oh did I tell you? {v} hired me, I started back in {month}",
                  "best thing this year? the new job. it's {v}!",
                  "new job!! working for {v} since {month} lol"),
                 ("{who} just got hired by {v}, so happy for them",
                  "{who} is working for {v} these days", "{who} started at {v} in {month}"),
                 ("Where is {who} working these days?", "Which company does {who} work for now?",
                  "Who employs {who}?")),
    "home": Kind("city",
                 ("we're in {v} now! moved in {month}", "home is {v} these days, since {month}",
                  "moving to {v} was the best decision tbh, been here since {month}"),
                 ("{who} relocated to {v} in {month}", "{who} lives in {v} now apparently",
                  "{who} packed up and moved to {v}, wild"),
                 ("Which city does {who} live in now?", "Where is {who} based these days?")),
    "hobby": Kind("hobby",
                  ("I've gotten really into {v} lately", "my new obsession is {v}, every weekend",
                   "started doing {v} on Wednesdays, it's so fun"),
                  ("{who} is super into {v} now", "{who} has started doing {v}, of all things",
                   "{who} got hooked on {v}"),
                  ("What hobby has {who} picked up?", "What is {who} into these days?")),
    "car": Kind("car",
                ("we finally caved and got a car, {a}", "I'm driving {a} now, secondhand but fine",
                 "bought myself {a} in {month}, don't judge"),
                ("{who} got {a}, a used one", "{who} is driving {a} now",
                 "{who} splurged on a brand new {v}"),
                ("What car did {who} get?", "Which car does {who} drive?")),
    "sport": Kind("sport",
                  ("I joined a {v} team, we play Thursdays",
                   "I've been playing {v} with some people from work",
                   "{v} every Sunday morning now, my knees hate me"),
                  ("{who} plays {v} now, like competitively", "{who} joined a {v} club",
                   "{who} is obsessed with {v} at the moment"),
                  ("What sport does {who} play?", "Which sport is {who} into?")),
    "language": Kind("language",
                     ("I signed up for {v} classes, it's hard",
                      "I'm learning {v} on an app, 200 day streak",
                      "doing {a} course, two evenings a week"),
                     ("{who} is learning {v}", "{who} signed up for {v} lessons",
                      "{who} wants to be fluent in {v} by next year"),
                     ("What language is {who} learning?", "Which language is {who} studying?")),
    "dog": Kind("pet_name",
                ("we adopted a rescue dog, her name's {v}", "meet {v}, our new puppy",
                 "I have a dog now!! {v}, a little terrier"),
                ("{who} got a dog and named it {v}", "{who} adopted a puppy called {v}",
                 "{who} has a dog now, {v}, the cutest thing ever"),
                ("What is {who}'s dog called?", "What did {who} name the dog?")),
}


@dataclass(frozen=True)
class Subject:
    """What a correction changes: its kind and pool, first statements, changes, questions."""

    kind: str
    pool: str
    stated: tuple[str, ...]
    changed: tuple[str, ...]
    questions: tuple[str, ...]


SUBJECTS = [
    Subject("work", "employer",
            ("been at {old} almost three years now, time flies", "{old} keeps me busy, the usual",
             "work at {old} is fine I guess, same old"),
            ("so I quit {old}!! starting at {new} next month",
             "big change: I'm not at {old} anymore, {new} made me an offer I couldn't refuse",
             "update: I left {old}, I work for {new} now"),
            ("Where does {user} work now?", "Who is {user}'s current employer?")),
    Subject("home", "city",
            ("still in {old}, can't afford to leave lol", "{old} is lovely this time of year",
             "my flat in {old} is tiny but I love it"),
            ("we did it, we left {old}! living in {new} now",
             "so... I moved. {new}! {old} was getting too expensive",
             "new address: {new}. goodbye {old}"),
            ("Where does {user} live now?", "What city is {user} living in these days?")),
    Subject("sport", "sport",
            ("{old} tonight again, I never miss it", "I've played {old} since school honestly",
             "{old} training was brutal today"),
            ("I'm done with {old}, switched to {new} and loving it",
             "quit {old} after the injury, doing {new} instead",
             "{old} got boring tbh, it's all {new} now"),
            ("Which sport does {user} play now?", "What sport is {user} doing these days?")),
    Subject("car", "car",
            ("my old {old} is still going strong lol", "the {old} needs new tyres again, ugh",
             "took the {old} to the garage, again"),
            ("sold the {old}! got {a_new} instead", "goodbye {old}, hello {new}",
             "traded the {old} in for {a_new}"),
            ("What car does {user} drive now?", "Which car does {user} have now?")),
]
