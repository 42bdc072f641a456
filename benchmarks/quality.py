"""Retrieval quality on a synthetic multi-session data set: recall of planted facts.

The script generates (seeded) conversations of several users over several months. Early
sessions plant facts ("My sister's name is Clara", "I work at Siemens"); every session has
distractor chit-chat and near misses on the same topics ("My neighbour's dog barks all
night"); later sessions correct some facts ("Actually, I moved to Munich").
The conversations then go through the real pipeline pieces, without a broker:

(a) **extracted**: each closed session becomes a ``ConsolidationRequested``, the
    ``OfflineExtractor`` runs through ``streams.agents.consolidation.record_extraction``, the
    ``MemoryDecider`` (real projection, real MiniLM embedder) decides add / reinforce /
    supersede, and the events go to ``MemoryProjection.apply``;
(b) **raw turns**: every user turn is stored as an episode memory, nothing else.

Each planted fact is then asked about with ``Retriever.retrieve`` ("What is my sister's
name?"). Figures:

* **recall@5 / recall@10**: a memory among the first 5 / 10 ranked contains the fact's
  current value (the corrected one where there was a correction). Ranked with a slot of 10
  for every type, so the figure measures the ranking, not the quotas.
* **in context**: the current value appears in the context a default retrieval builds
  (default quotas and token budget): what the model would see.
* **stale first**: of the corrected facts, how often a memory with the old value ranks above
  every memory with the new value (within the first 10).

Run from the repository root (about 1-2 minutes)::

    python benchmarks/quality.py
    python benchmarks/quality.py --users 20 --seed 3
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memstream.models.events.consolidation import ConsolidationRequested, TranscriptMessage
from memstream.models.events.envelope import derived_id
from memstream.models.events.memory import ExtractionRecorded, MemoryAdded, MemoryChange
from memstream.models.extraction import EPISODE_IMPORTANCE, Extractor, OfflineExtractor
from memstream.models.settings import Settings
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import MEMORY_TYPES, MemoryProjection, SourcePosition
from memstream.projections.retrieval import Retrieval, Retriever
from memstream.streams.agents.consolidation import record_extraction
from memstream.streams.agents.decisions import MemoryDecider
from memstream.streams.llm.extractor import ExtractionFailed

TOPIC = "memstream.memories"
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SESSION_GAP = timedelta(days=6)
TURN_GAP = timedelta(seconds=75)
#: Ranking figures give every type this many slots, so quotas do not cap recall@10.
RANK_SLOTS = 10
#: Sessions decided between two index refreshes of the projection being built.
REFRESH_EVERY = 50

# --- the data set ------------------------------------------------------------------------------

NAMES = ["Clara", "Jonas", "Aiko", "Omar", "Lena", "Pablo", "Nina", "Priya", "Felix", "Sofia",
         "Mateo", "Hana", "Ivan", "Chloe", "Yusuf", "Elif", "Noah", "Greta"]
PETS = ["Rex", "Pixel", "Biscuit", "Luna", "Mochi", "Pepper", "Ziggy", "Nala"]
CITIES = ["Munich", "Berlin", "Lisbon", "Porto", "Vienna", "Oslo", "Kyoto", "Toronto",
          "Madrid", "Prague", "Dublin", "Zurich"]
COMPANIES = ["Siemens", "Bosch", "Zalando", "Airbus", "Philips", "Novartis", "Spotify", "SAP"]
FOODS = ["ramen", "paella", "falafel", "risotto", "dumplings", "tacos", "goulash", "pho"]
ALLERGENS = ["peanuts", "shellfish", "penicillin", "pollen", "sesame", "lactose"]
CARS = ["Volvo", "Skoda", "Tesla", "Fiat", "Subaru", "Renault"]
INSTRUMENTS = ["cello", "violin", "saxophone", "drums", "harp", "banjo"]
MONTHS = ["January", "March", "April", "June", "August", "October", "November"]
#: Distractors draw from other lists, so a distractor never mentions a planted value.
OTHER_CITIES = ["Paris", "Rome", "Athens", "Cairo", "Lima", "Hanoi", "Denver", "Seville"]
OTHER_NAMES = ["Tom", "Anna", "Raj", "Lucy", "Marco", "Zoe"]


@dataclass(frozen=True)
class Slot:
    """A kind of planted fact: how it is said, asked about and (maybe) corrected."""

    kind: str
    values: Sequence[str]
    statements: Sequence[str]
    question: str
    corrections: Sequence[str] = ()


SLOTS = [
    Slot("sister", NAMES, ["My sister's name is {v}.", "By the way, my sister is called {v}."],
         "What is my sister's name?"),
    Slot("employer", COMPANIES, ["I work at {v}.", "I've been working at {v} for three years."],
         "Where do I work?",
         ["Actually, I now work at {v}.", "I switched jobs, I work at {v} now."]),
    Slot("city", CITIES, ["I live in {v}.", "I'm based in {v}, in a small flat."],
         "Which city do I live in?",
         ["Actually, I moved to {v}.", "Correction: I live in {v} now."]),
    Slot("allergy", ALLERGENS, ["I'm allergic to {v}.", "Please remember I am allergic to {v}."],
         "What am I allergic to?"),
    Slot("pet", PETS, ["My dog is called {v}.", "Our dog's name is {v}."],
         "What is my dog's name?"),
    Slot("food", FOODS, ["My favourite food is {v}.", "I love {v} more than anything."],
         "What is my favourite food?",
         ["Actually, my favourite food is now {v}.", "These days I prefer {v} to anything else."]),
    Slot("car", CARS, ["I drive a {v}.", "My car is a {v}."], "What car do I drive?",
         ["I sold my old car, now I drive a {v}."]),
    Slot("instrument", INSTRUMENTS, ["I play the {v} in an orchestra.",
                                     "I've played the {v} since school."],
         "Which instrument do I play?"),
    Slot("birthday", MONTHS, ["My birthday is in {v}.", "I was born in {v}."],
         "When is my birthday?"),
]

CHIT_CHAT: list[Callable[[random.Random], str]] = [
    lambda r: "Can you recommend a good movie for tonight?",
    lambda r: f"What's the weather usually like in {r.choice(OTHER_CITIES)} in spring?",
    lambda r: "Thanks, that's helpful!",
    lambda r: "How long should I boil an egg?",
    lambda r: "Tell me a joke about cats.",
    lambda r: "I had a really long day today.",
    lambda r: f"My colleague {r.choice(OTHER_NAMES)} keeps talking about crypto.",
    lambda r: f"I might visit {r.choice(OTHER_CITIES)} next summer, any tips?",
    lambda r: "Can you summarise the plot of Hamlet in two sentences?",
    lambda r: "What is a good stretch for a stiff back?",
    lambda r: "ok",
    lambda r: f"{r.choice(OTHER_NAMES)} from the gym recommended a protein shake, is that wise?",
    lambda r: "Write a short haiku about autumn leaves.",
    lambda r: "How do I convert Celsius to Fahrenheit?",
]
#: Near misses: about the same topics as the questions, so they compete for the top ranks.
NEAR_MISSES: list[Callable[[random.Random], str]] = [
    lambda r: f"My friend {r.choice(OTHER_NAMES)} has a sister who lives in "
              f"{r.choice(OTHER_CITIES)}.",
    lambda r: "I'm wondering which job I should apply for next year.",
    lambda r: "What's the best city in Europe for a weekend trip?",
    lambda r: "My neighbour's dog barks all night.",
    lambda r: "Which car brands are the most reliable?",
    lambda r: f"When is the best month to visit {r.choice(OTHER_CITIES)}?",
    lambda r: "What instrument is easiest for kids to learn?",
    lambda r: "What should I cook for dinner tonight?",
    lambda r: f"My brother works in finance in {r.choice(OTHER_CITIES)} and hates it.",
    lambda r: "Are food allergies more common than they used to be?",
    lambda r: f"{r.choice(OTHER_NAMES)}'s birthday party is next weekend, gift ideas?",
    lambda r: "Is it expensive to own a pet in a big city?",
    lambda r: f"My cousin {r.choice(OTHER_NAMES)} just moved to {r.choice(OTHER_CITIES)}.",
    lambda r: "Do you think remote work is here to stay?",
]
ASSISTANT_REPLIES = [
    "Sure, here is a suggestion that might help.",
    "Good question. In short: it depends, but here is a rule of thumb.",
    "Noted. Anything else I can help with?",
    "Here you go, I kept it brief.",
    "That sounds tiring, take it easy tonight.",
]


@dataclass
class Planted:
    """One planted fact of one user: the value asked for, and the old value if corrected."""

    user_id: str
    slot: Slot
    value: str
    stale: str | None = None


@dataclass
class Conversation:
    """A user's sessions (each a list of transcript messages) and planted facts."""

    user_id: str
    sessions: list[list[TranscriptMessage]] = field(default_factory=list)
    planted: list[Planted] = field(default_factory=list)


def generate(users: int, sessions: int, seed: int) -> list[Conversation]:
    """The seeded data set: facts planted in the first two sessions, corrected later."""
    rng = random.Random(seed)
    conversations = []
    for u in range(users):
        user_id = f"user-{u:03d}"
        conversation = Conversation(user_id)
        slots = rng.sample(SLOTS, k=min(6, len(SLOTS)))
        plan: dict[int, list[str]] = defaultdict(list)
        for index, slot in enumerate(slots):
            value = rng.choice(slot.values)
            fact = Planted(user_id, slot, value)
            plan[index % 2].append(rng.choice(slot.statements).format(v=value))
            if slot.corrections and rng.random() < 0.7:
                new = rng.choice([v for v in slot.values if v != value])
                plan[rng.randrange(3, sessions)].append(
                    rng.choice(slot.corrections).format(v=new)
                )
                fact.value, fact.stale = new, value
            conversation.planted.append(fact)
        for s in range(sessions):
            turns = [chat(rng) for chat in rng.sample(CHIT_CHAT, k=rng.randint(4, 7))]
            turns += [chat(rng) for chat in rng.sample(NEAR_MISSES, k=rng.randint(2, 4))]
            rng.shuffle(turns)
            for statement in plan[s]:
                turns.insert(rng.randrange(len(turns) + 1), statement)
            started = START + SESSION_GAP * s + timedelta(hours=rng.randint(0, 48))
            messages = []
            for t, text in enumerate(turns):
                at = started + TURN_GAP * (2 * t)
                messages.append(_message(user_id, s, 2 * t, "user", text, at))
                reply = rng.choice(ASSISTANT_REPLIES)
                messages.append(_message(user_id, s, 2 * t + 1, "assistant", reply, at + TURN_GAP))
            conversation.sessions.append(messages)
        conversations.append(conversation)
    return conversations


def _message(
    user_id: str, session: int, index: int, role: str, text: str, at: datetime
) -> TranscriptMessage:
    return TranscriptMessage(
        event_id=f"{user_id}-s{session}-m{index}", role=role, content=text, occurred_at=at,
    )


# --- the two builds ------------------------------------------------------------------------------


class Log:
    """Hands out consecutive offsets of one partition, as the memories topic would."""

    def __init__(self) -> None:
        self.offset = 0

    def positions(
        self, events: Sequence[MemoryAdded | MemoryChange]
    ) -> list[tuple[MemoryAdded | MemoryChange, SourcePosition]]:
        """``events`` with the positions they would get on the topic."""
        batch = []
        for event in events:
            batch.append((event, SourcePosition(TOPIC, 0, self.offset)))
            self.offset += 1
        return batch


@dataclass
class Extractions:
    """What a build's extractor did: the recorded extractions, and the sessions it gave up
    on (a dead letter in the worker; here nothing is learned from them)."""

    recorded: list[ExtractionRecorded] = field(default_factory=list)
    failed: list[tuple[ConsolidationRequested, ExtractionFailed]] = field(default_factory=list)

    def extend(self, other: Extractions) -> None:
        """Add ``other``'s records to these."""
        self.recorded.extend(other.recorded)
        self.failed.extend(other.failed)


def build_extracted(
    conversations: list[Conversation],
    projection: MemoryProjection,
    embedder: MiniLMOnnxEmbedder,
    extractor: Extractor | None = None,
) -> Extractions:
    """Build (a): extraction (offline unless ``extractor`` is given) and memory decisions,
    session by session. An extractor other than the offline one is shown the user's claims
    as they stood, as the worker's extraction agent does; a session it fails on is kept in
    the result's ``failed`` and teaches nothing."""
    extractor = extractor or OfflineExtractor()
    decider = MemoryDecider(projection, embedder)
    extractions = Extractions()
    log = Log()
    # Sessions in event-time order across users, as the topic would deliver them.
    closed = sorted(
        ((c.user_id, s, messages) for c in conversations for s, messages in enumerate(c.sessions)),
        key=lambda item: item[2][-1].occurred_at,
    )
    for done, (user_id, s, messages) in enumerate(closed, start=1):
        if done % REFRESH_EVERY == 0:
            # As the worker's projector does on its schedule: compaction and indexes keep
            # each decision's read of one user's view fast as the table grows.
            projection.refresh_indexes()
        request = ConsolidationRequested(
            event_id=derived_id(user_id, str(s), "consolidation"),
            user_id=user_id,
            session_id=f"{user_id}-s{s}",
            occurred_at=messages[-1].occurred_at,
            reason="session_closed",
            messages=tuple(messages),
            session_started_at=messages[0].occurred_at,
        )
        claims = (decider.claims_at(request.user_id, request.occurred_at)
                  if extractor.reads_claims else [])
        try:
            recorded = record_extraction(request, extractor, claims)
        except ExtractionFailed as failure:
            extractions.failed.append((request, failure))
            continue
        extractions.recorded.append(recorded)
        events = decider.decide(recorded)
        decided = [e for e in events if isinstance(e, MemoryAdded | MemoryChange)]
        if len(decided) != len(events):
            raise AssertionError("the decider returned an event the projection does not take")
        projection.apply(log.positions(decided))
    projection.refresh_indexes()
    return extractions


def build_raw_turns(conversations: list[Conversation], projection: MemoryProjection) -> None:
    """Build (b): every user turn stored as an episode, no extraction, no decisions."""
    log = Log()
    for conversation in conversations:
        events = [
            MemoryAdded(
                event_id=derived_id(message.event_id, "raw"),
                user_id=conversation.user_id,
                session_id=message.event_id.rsplit("-m", 1)[0],
                occurred_at=message.occurred_at,
                memory_id=derived_id(message.event_id, "raw-memory"),
                memory_type="episode",
                content=message.content,
                importance=EPISODE_IMPORTANCE,
                tier="short_term",
                extraction_event_id=derived_id(message.event_id, "raw-extraction"),
                extractor="raw/1",
                source_event_ids=(message.event_id,),
            )
            for messages in conversation.sessions
            for message in messages
            if message.role == "user"
        ]
        projection.apply(log.positions(events))
    projection.refresh_indexes()


# --- scoring -------------------------------------------------------------------------------------


def mentions(text: str, value: str) -> bool:
    """Whether ``text`` names ``value`` as a word (case ignored)."""
    return re.search(rf"\b{re.escape(value)}\b", text, re.IGNORECASE) is not None


def first_rank(found: Retrieval, value: str, depth: int) -> int | None:
    """1-based rank of the first of the top ``depth`` items that mentions ``value``."""
    for rank, item in enumerate(found.items[:depth], start=1):
        if mentions(item.memory.content, value):
            return rank
    return None


@dataclass
class Score:
    """The figures of one build."""

    name: str
    memories: int = 0
    build_s: float = 0.0
    asked: int = 0
    at5: int = 0
    at10: int = 0
    in_context: int = 0
    corrected: int = 0
    stale_first: int = 0
    context_tokens: int = 0
    per_kind: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))


def score(
    name: str, conversations: list[Conversation], retriever: Retriever, projection: MemoryProjection
) -> Score:
    """Ask every planted fact's question and count what came back."""
    result = Score(name, memories=projection.count())
    rank_quotas = dict.fromkeys(MEMORY_TYPES, RANK_SLOTS)
    for conversation in conversations:
        for fact in conversation.planted:
            question = fact.slot.question
            ranked = retriever.retrieve(
                fact.user_id, question, quotas=rank_quotas, token_budget=100_000
            )
            context = retriever.retrieve(fact.user_id, question)
            new_rank = first_rank(ranked, fact.value, RANK_SLOTS)
            result.asked += 1
            result.at5 += new_rank is not None and new_rank <= 5
            result.at10 += new_rank is not None
            result.in_context += mentions(context.context, fact.value)
            result.context_tokens += context.tokens
            result.per_kind[fact.slot.kind][0] += 1
            result.per_kind[fact.slot.kind][1] += new_rank is not None and new_rank <= 5
            if fact.stale is not None:
                stale_rank = first_rank(ranked, fact.stale, RANK_SLOTS)
                result.corrected += 1
                result.stale_first += stale_rank is not None and (
                    new_rank is None or stale_rank < new_rank
                )
    return result


def print_table(scores: list[Score], users: int, sessions: int, seed: int) -> None:
    """The result table, a per-kind recall@5 breakdown, and notes."""

    def pct(part: int, whole: int) -> str:
        return f"{100 * part / whole:5.1f} %" if whole else "    -  "

    header = (
        f"{'build':<12} {'memories':>8} {'build s':>7} {'facts':>5} {'recall@5':>8} "
        f"{'recall@10':>9} {'in context':>10} {'stale first':>11} {'ctx tokens':>10}"
    )
    print()
    print(header)
    print("-" * len(header))
    for s in scores:
        print(
            f"{s.name:<12} {s.memories:>8} {s.build_s:>7.1f} {s.asked:>5} {pct(s.at5, s.asked):>8} "
            f"{pct(s.at10, s.asked):>9} {pct(s.in_context, s.asked):>10} "
            f"{pct(s.stale_first, s.corrected) + f' /{s.corrected}':>11} "
            f"{s.context_tokens / max(s.asked, 1):>10.0f}"
        )
    kinds = sorted({k for s in scores for k in s.per_kind})
    print()
    print("recall@5 by kind of fact: " + ", ".join(
        f"{k} " + " / ".join(
            f"{s.per_kind[k][1]}/{s.per_kind[k][0]}" for s in scores
        ) for k in kinds
    ) + f"  ({' / '.join(s.name for s in scores)})")
    print()
    print(f"- {users} users x {sessions} sessions, seed {seed}; facts planted in sessions 1-2, "
          "about 70 % of the changeable ones corrected in session 4 or later.")
    print("- recall@k: a memory in the top k (every type given 10 slots) contains the current "
          "value; in context: the default retrieval's context (default quotas and budget) "
          "contains it; stale first: the old value outranks every memory with the new one "
          "(of the corrected facts); ctx tokens: mean size of the default context.")


def main(argv: list[str] | None = None) -> int:
    """Generate the data set, build both memory stores, score them, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=12)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="embedder threads")
    args = parser.parse_args(argv)
    if args.sessions < 4:
        parser.error("--sessions must be at least 4 (corrections come in session 4 or later)")

    conversations = generate(args.users, args.sessions, args.seed)
    last = max(m.occurred_at for c in conversations for s in c.sessions for m in s)
    embedder = MiniLMOnnxEmbedder(threads=args.threads)
    settings = Settings()
    base = Path(tempfile.mkdtemp(prefix="memstream-quality-bench-"))
    scores = []
    try:
        builds: list[tuple[str, Callable[[MemoryProjection], object]]] = [
            ("extracted", lambda p: build_extracted(conversations, p, embedder)),
            ("raw turns", lambda p: build_raw_turns(conversations, p)),
        ]
        for name, build in builds:
            projection = MemoryProjection(base / name.replace(" ", "-"), embedder)
            started = time.perf_counter()
            build(projection)
            build_s = time.perf_counter() - started
            retriever = Retriever(projection, settings, clock=lambda: last + timedelta(days=1))
            result = score(name, conversations, retriever, projection)
            result.build_s = build_s
            scores.append(result)
            print(f"{name}: {result.memories} memories, built in {build_s:.1f} s", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print_table(scores, args.users, args.sessions, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
