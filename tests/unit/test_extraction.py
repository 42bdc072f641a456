"""The offline extractor: what a finished conversation turns into, and what it must not."""

from __future__ import annotations

import doctest
import importlib
import json
import pkgutil
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

import memstream.models.extraction as extraction_module
from memstream.models.events.consolidation import ConsolidationRequested, TranscriptMessage
from memstream.models.events.memory import MemoryCandidate
from memstream.models.extraction import (
    MAX_CONTENT_CHARS,
    MIN_IMPORTANCE,
    Extraction,
    Extractor,
    OfflineExtractor,
)
from memstream.models.extraction.claims import read_clause_claims

START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)

TRIP_PLANNING = (
    (
        "user",
        (
            "Hi! I'm planning a trip to Japan in April and need help with the itinerary. "
            "My name is Maria and I work at Acme Robotics in Porto."
        ),
    ),
    (
        "assistant",
        (
            "Great to meet you, Maria! April is cherry blossom season. I recommend three days in "
            "Kyoto and two in Tokyo. Would you like hotel suggestions?"
        ),
    ),
    (
        "user",
        "Yes please. I prefer quiet ryokans over big hotels, and I hate crowded tourist spots.",
    ),
    (
        "assistant",
        (
            "Noted. In Kyoto, the Arashiyama area has quiet ryokans. I suggest visiting Fushimi Inari "
            "at sunrise to avoid the crowds."
        ),
    ),
    ("user", "Actually, I live in Lisbon now, not Porto. Please always give prices in euros."),
    ("user", "ok thanks!"),
)


def request(*turns: tuple[str, str], event_id: str = "c-1") -> ConsolidationRequested:
    """A consolidation request whose messages are ``m1``, ``m2``, ... a minute apart."""
    messages = tuple(
        TranscriptMessage(
            event_id=f"m{i + 1}",
            role=role,
            content=content,
            occurred_at=START + timedelta(minutes=i),
        )
        for i, (role, content) in enumerate(turns)
    )
    return ConsolidationRequested(
        event_id=event_id,
        user_id="maria",
        session_id="s-1",
        occurred_at=START + timedelta(minutes=len(turns)),
        reason="session_closed",
        messages=messages,
    )


def extract(*turns: tuple[str, str]) -> tuple[MemoryCandidate, ...]:
    return OfflineExtractor().extract(request(*turns)).candidates


def of_type(candidates: Sequence[MemoryCandidate], memory_type: str) -> list[MemoryCandidate]:
    return [c for c in candidates if c.memory_type == memory_type]


def contents(candidates: Sequence[MemoryCandidate], memory_type: str) -> list[str]:
    return [c.content for c in of_type(candidates, memory_type)]


def find(candidates: Sequence[MemoryCandidate], content: str) -> MemoryCandidate:
    matches = [c for c in candidates if c.content == content]
    assert matches, f"{content!r} not among {[c.content for c in candidates]}"
    return matches[0]


# --- the port ------------------------------------------------------------------------------


def test_offline_extractor_satisfies_the_extractor_protocol() -> None:
    extractor = OfflineExtractor()
    assert isinstance(extractor, Extractor)
    assert (extractor.name, extractor.version) == ("offline", "10")


def test_extraction_carries_no_model_and_a_json_dump_of_its_candidates() -> None:
    result = OfflineExtractor().extract(request(*TRIP_PLANNING))
    assert isinstance(result, Extraction)
    assert (result.model, result.prompt_version, result.usage) == (None, None, None)
    dumped = json.loads(result.raw_response)["candidates"]
    assert [MemoryCandidate.model_validate(c) for c in dumped] == list(result.candidates)


def test_the_same_request_always_gives_the_same_extraction() -> None:
    first = OfflineExtractor().extract(request(*TRIP_PLANNING))
    again = OfflineExtractor().extract(request(*TRIP_PLANNING))
    assert first == again
    assert first.raw_response == again.raw_response


def test_module_docstring_examples_run() -> None:
    # The package and each of its modules: testmod does not follow re-exported names.
    modules = [
        extraction_module,
        *(
            importlib.import_module(f"{extraction_module.__name__}.{info.name}")
            for info in pkgutil.iter_modules(extraction_module.__path__)
        ),
    ]
    results = [doctest.testmod(module) for module in modules]
    assert sum(result.attempted for result in results) > 0
    assert sum(result.failed for result in results) == 0


# --- what is kept --------------------------------------------------------------------------


def test_a_realistic_conversation_yields_typed_candidates_with_sources() -> None:
    candidates = extract(*TRIP_PLANNING)
    assert find(candidates, "User's name is Maria").source_event_ids == ("m1",)
    assert find(candidates, "User works at Acme Robotics in Porto").memory_type == "fact"
    assert find(candidates, "User prefers quiet ryokans over big hotels").source_event_ids == (
        "m3",
    )
    assert find(candidates, "User hates crowded tourist spots").memory_type == "preference"
    correction = find(candidates, "Correction: User lives in Lisbon, not Porto")
    assert correction.memory_type == "correction" and correction.source_event_ids == ("m5",)
    assert find(candidates, "User lives in Lisbon").memory_type == "fact"
    instruction = find(candidates, "User wants the assistant to always give prices in euros")
    assert instruction.memory_type == "preference"


def test_each_substantive_turn_is_kept_verbatim_as_an_episode_of_who_said_it() -> None:
    episodes = of_type(extract(*TRIP_PLANNING), "episode")
    # Each episode cites its own turn first, then the neighbours its context shows; the
    # assistant's turns are episodes too, written as the assistant's.
    assert [e.source_event_ids for e in episodes] == [
        ("m1", "m2"), ("m2", "m1", "m3"), ("m3", "m2", "m4"), ("m4", "m3", "m5"),
        ("m5", "m4", "m6"),
    ]
    assert episodes[2].content == TRIP_PLANNING[2][1]
    assert episodes[1].content == f"Assistant: {TRIP_PLANNING[1][1]}"
    lines = episodes[2].context.splitlines()
    assert lines[1:] == [
        f"Assistant: {TRIP_PLANNING[1][1]}", f"User: {TRIP_PLANNING[2][1]}",
        f"Assistant: {TRIP_PLANNING[3][1]}",
    ]
    assert all(0.35 <= e.importance <= 0.5 for e in episodes)


@pytest.mark.parametrize(
    "trivial",
    ["ok", "thanks!", "hi", "Thank you so much!", "great, got it", "👍", "merci", "Yes, Lisbon."],
)
def test_trivial_turns_are_not_episodes(trivial: str) -> None:
    candidates = extract(("user", trivial), ("user", "Can you compare Kyoto and Osaka for a week?"))
    assert [c.source_event_ids[0] for c in of_type(candidates, "episode")] == ["m2"]


@pytest.mark.parametrize(
    ("said", "stored"),
    [
        ("I prefer dark roast coffee.", "User prefers dark roast coffee"),
        ("I really like hiking in the mountains!", "User likes hiking in the mountains"),
        ("I love my morning runs.", "User loves their morning runs"),
        ("I enjoy cooking Thai food.", "User enjoys cooking Thai food"),
        ("I don't like long answers.", "User dislikes long answers"),
        (
            "I hate meetings that could have been emails.",
            "User hates meetings that could have been emails",
        ),
        ("My favourite editor is Helix.", "User's favourite editor is Helix"),
        ("My favorite band is Radiohead.", "User's favourite band is Radiohead"),
        ("Please never use emojis.", "User wants the assistant to never use emojis"),
        ("I think I prefer Vim over Emacs.", "User prefers Vim over Emacs"),
    ],
)
def test_first_person_preferences_become_third_person_statements(said: str, stored: str) -> None:
    preference = find(extract(("user", said)), stored)
    assert preference.memory_type == "preference"
    assert preference.source_event_ids == ("m1",)
    assert 0.7 <= preference.importance <= 0.85


@pytest.mark.parametrize(
    ("said", "stored", "at_least"),
    [
        ("My name is Maria.", "User's name is Maria", 0.85),
        ("I'm Maria, a data engineer at Acme.", "User's name is Maria", 0.85),
        ("I work for Stripe.", "User works for Stripe", 0.85),
        ("I live in Berlin with my partner.", "User lives in Berlin with their partner", 0.85),
        ("I'm from Brazil.", "User is from Brazil", 0.8),
        ("I'm allergic to peanuts.", "User is allergic to peanuts", 0.85),
        ("I am a pediatric nurse.", "User is a pediatric nurse", 0.7),
        ("I have a dog named Rex.", "User has a dog named Rex", 0.6),
        ("My birthday is on May 3rd.", "User's birthday is on May 3rd", 0.7),
        ("My laptop is a ThinkPad X1.", "User's laptop is a ThinkPad X1", 0.6),
    ],
)
def test_first_person_facts_are_recognised(said: str, stored: str, at_least: float) -> None:
    fact = find(extract(("user", said)), stored)
    assert fact.memory_type == "fact"
    assert fact.source_event_ids == ("m1",)
    assert at_least <= fact.importance <= 0.9


def test_names_employers_and_homes_outrank_incidental_facts() -> None:
    candidates = extract(
        ("user", "My name is Ana. I work at Globex. I live in Quito. I have a cat.")
    )
    high = [
        find(candidates, s).importance
        for s in ("User's name is Ana", "User works at Globex", "User lives in Quito")
    ]
    assert min(high) > find(candidates, "User has a cat").importance


# --- corrections ---------------------------------------------------------------------------


def test_no_i_meant_is_a_correction_carrying_the_corrected_statement() -> None:
    candidates = extract(("user", "No, I meant the 3pm meeting, not the 5pm one."))
    correction = find(candidates, "Correction: User meant the 3pm meeting, not the 5pm one")
    assert correction.memory_type == "correction" and correction.importance >= 0.8


def test_a_correction_prefix_quotes_an_unrecognised_statement() -> None:
    candidates = extract(("user", "Correction: the launch is on Friday."))
    assert contents(candidates, "correction") == ['Correction: User said "the launch is on Friday"']


def test_not_x_but_y_corrects_and_drops_the_earlier_statement() -> None:
    candidates = extract(("user", "My name is Jon."), ("user", "My name is not Jon but John."))
    assert contents(candidates, "correction") == ["Correction: User's name is John, not Jon"]
    assert contents(candidates, "fact") == ["User's name is John"]
    assert find(candidates, "User's name is John").source_event_ids == ("m2",)


def test_i_no_longer_is_a_correction_and_the_stale_fact_is_dropped() -> None:
    candidates = extract(
        ("user", "I work at Google."),
        ("user", "I no longer work at Google; I work for Stripe now."),
        ("user", "I don't eat meat anymore."),
    )
    assert contents(candidates, "correction") == [
        "Correction: User no longer works at Google",
        "Correction: User no longer eats meat",
    ]
    assert contents(candidates, "fact") == ["User works for Stripe"]
    assert all(c.importance >= 0.8 for c in of_type(candidates, "correction"))


@pytest.mark.parametrize(
    "said",
    [
        "I'm not only a developer but also a designer.",
        "I'm not sure but I think it works.",
        "I do not like it but I'll manage.",
        "Actually, can you make it shorter?",
        "No problem at all, take your time.",
    ],
)
def test_ordinary_negations_and_questions_are_not_corrections(said: str) -> None:
    assert of_type(extract(("user", said)), "correction") == []


# --- what is not kept ----------------------------------------------------------------------


def test_assistant_statements_never_become_the_users_memories() -> None:
    candidates = extract(
        ("user", "Can you suggest a coffee for my espresso machine?"),
        (
            "assistant",
            (
                "I recommend the Ethiopian Yirgacheffe. I love light roasts. My name is Coffeebot. "
                "I live in the cloud and I prefer pour-over myself."
            ),
        ),
    )
    assert of_type(candidates, "preference") == of_type(candidates, "fact") == []
    assert of_type(candidates, "correction") == []
    # What the assistant said is remembered as the assistant's words, never as the user's.
    episodes = of_type(candidates, "episode")
    assert [(e.source_event_ids[0], e.content[:30]) for e in episodes] == [
        ("m1", "Can you suggest a coffee for m"), ("m2", "Assistant: I recommend the Eth"),
    ]


def test_system_and_tool_messages_are_ignored() -> None:
    candidates = extract(
        ("system", "Known memories: User prefers tea. User lives in Porto."),
        ("tool", '{"profile": "I live in Paris and I prefer cats."}'),
        ("assistant", "Hello! How can I help you today?"),
    )
    assert [c.content for c in candidates] == ["Assistant: Hello! How can I help you today?"]


@pytest.mark.parametrize(
    "said",
    [
        "I like it.",
        "I love your answer!",
        "I have a quick question about Python.",
        "My question is how to deploy this.",
        "My flight is at 6pm tomorrow.",
        "I'm a bit confused.",
        "I prefer dark roast coffee?",
    ],
)
def test_remarks_about_the_moment_are_not_stored_as_facts_or_preferences(said: str) -> None:
    candidates = extract(("user", said))
    assert of_type(candidates, "preference") == of_type(candidates, "fact") == []


def test_an_empty_transcript_gives_no_candidates_and_an_assistants_only_its_words() -> None:
    assert extract() == ()
    said = "Welcome back! Shall we continue planning the Kyoto trip?"
    assert [(c.memory_type, c.content) for c in extract(("assistant", said))] == [
        ("episode", f"Assistant: {said}")
    ]


def test_duplicates_within_a_request_merge_and_keep_every_source() -> None:
    candidates = extract(
        ("user", "I prefer dark roast coffee."),
        ("assistant", "Noted, dark roast it is."),
        ("user", "i prefer dark roast coffee!!"),
    )
    assert contents(candidates, "preference") == ["User prefers dark roast coffee"]
    assert find(candidates, "User prefers dark roast coffee").source_event_ids == ("m1", "m3")
    [episode, reply] = of_type(candidates, "episode")
    assert episode.source_event_ids[0] == "m1" and set(episode.source_event_ids) == {"m1", "m2", "m3"}
    assert reply.content == "Assistant: Noted, dark roast it is."


def test_every_candidate_clears_the_importance_threshold() -> None:
    candidates = extract(*TRIP_PLANNING, ("user", "cool"), ("user", "Yes, Lisbon."))
    assert candidates
    assert all(MIN_IMPORTANCE <= c.importance <= 1 for c in candidates)


# --- no summary --------------------------------------------------------------------------


def test_the_offline_extractor_writes_no_summary() -> None:
    # Its turns' own sentences would say nothing the episodes do not (docs/search.md).
    assert of_type(extract(*TRIP_PLANNING), "summary") == []


# --- entities, bounds, other languages -----------------------------------------------------


def test_entities_are_capitalised_names_not_sentence_starters() -> None:
    candidates = extract(*TRIP_PLANNING)
    assert find(candidates, "User works at Acme Robotics in Porto").entities == (
        "Acme Robotics",
        "Porto",
    )
    episode_entities = of_type(candidates, "episode")[0].entities
    assert "Japan" in episode_entities and "Maria" in episode_entities
    assert not {"Hi", "I'm", "My", "April"} & set(episode_entities)
    assert of_type(candidates, "entity") == []


def test_very_long_messages_are_bounded_but_still_read() -> None:
    pasted = (
        "I prefer concise answers. " + "lorem ipsum dolor sit amet " * 30_000
    )  # 810k chars, near the event limit
    candidates = extract(("user", pasted), ("assistant", "Understood."))
    assert all(len(c.content) <= MAX_CONTENT_CHARS for c in candidates)
    assert "User prefers concise answers" in contents(candidates, "preference")
    assert of_type(candidates, "episode")[0].content.endswith("…")


def test_other_languages_are_kept_as_said_never_translated() -> None:
    turns = (
        ("user", "Je préfère le café noir et j'habite à Lyon."),
        ("assistant", "Très bien, c'est noté pour le café."),
        ("user", "私はコーヒーが好きです。東京に住んでいます。"),
    )
    candidates = extract(*turns)
    assert contents(candidates, "episode") == [
        turns[0][1], f"Assistant: {turns[1][1]}", turns[2][1]
    ]


def test_code_blocks_are_not_read_as_statements() -> None:
    candidates = extract(
        ("user", "Why does this fail?\n```python\n# my name is Bob\nprint('I prefer tabs')\n```")
    )
    assert of_type(candidates, "fact") == of_type(candidates, "preference") == []


@pytest.mark.parametrize(
    ("said", "stored"),
    [
        # A possessive is not a copula: nothing is stated about the neighbour.
        ("My neighbour's dog barked all night.", []),
        ("My boss's car broke down.", []),
        ("My name's Maria.", ["User's name is Maria"]),
        ("My wife's a nurse.", ["User's wife is a nurse"]),
        # Names keep their capitals.
        ("My friend Elsa is learning Greek.", ["User's friend Elsa is learning Greek"]),
        # "We" moving house is the user moving house, and "now, not X" corrects.
        ("We moved! We live in Porto now, not Lyon.",
         ["Correction: User lives in Porto, not Lyon", "User lives in Porto"]),
        # Activities: a hobby taken up or done every week, a sport, what they are learning.
        ("I've taken up chess, twice a week.", ["User has taken up chess"]),
        ("I took up climbing and yoga this spring.",
         ["User has taken up climbing", "User has taken up yoga"]),
        ("I'm learning Portuguese at evening school.", ["User is learning Portuguese"]),
        ("I play handball on Thursdays now.", ["User plays handball"]),
        ("I play it safe.", []),
        ("My favourite sport is padel, I play every week.", ["User's favourite sport is padel"]),
        ("My sister no longer works for Acme.", ["User's sister no longer works at Acme"]),
        ("I used to live in Lyon.", ["User no longer lives in Lyon"]),
        ("I'd love to live in Rome.", []),
        # "has" is no part of the sister's name; giving something up is no preference for it.
        ("My sister has joined Acme.", ["User's sister works at Acme"]),
        ("I gave up padel.", ["User no longer prefers padel"]),
    ],
)
def test_statements_in_the_words_people_chat_in(said: str, stored: list[str]) -> None:
    candidates = extract(("user", said))
    assert [c.content for c in candidates if c.memory_type not in ("episode", "summary")] == stored


def named(*turns: tuple[str, str, str]) -> tuple[MemoryCandidate, ...]:
    """The candidates of a transcript whose turns are (role, name, words)."""
    plain = request(*((role, content) for role, _, content in turns))
    messages = tuple(
        message.model_copy(update={"name": name})
        for message, (_, name, _) in zip(plain.messages, turns, strict=True)
    )
    return OfflineExtractor().extract(plain.model_copy(update={"messages": messages})).candidates


def test_between_named_people_the_other_persons_turns_are_episodes_of_theirs() -> None:
    candidates = named(
        ("assistant", "Karl", "How is work going for you?"),
        ("user", "Ines", "Busy, we ship the new release on Friday."),
        ("assistant", "Karl", "I started at Heineken in February, and I love my team there."),
        ("user", "Ines", "That's great news, congratulations!"),
    )
    karl = find(candidates, "Karl: I started at Heineken in February, and I love my team there.")
    assert karl.memory_type == "episode" and karl.source_event_ids[0] == "m3"
    assert "Ines: Busy, we ship the new release on Friday." in karl.context
    # What Karl asked is his too: a name he asks about links the sessions that mention it.
    assert [e.source_event_ids[0] for e in of_type(candidates, "episode")] == ["m1", "m2", "m3"]
    # What Karl says of himself is a fact about Karl, never the user's.
    job = find(candidates, "Karl works at Heineken")
    assert job.memory_type == "fact" and job.source_event_ids == ("m3",)
    assert job.claim is not None and (job.claim.subject, job.claim.value) == ("Karl", "Heineken")
    assert not any("User" in c.content and "Heineken" in c.content for c in candidates)
    assert all(c.claim.subject == "Karl" for c in candidates if c.claim and "Heineken" in c.content)


def test_the_name_the_users_messages_carry_is_their_name() -> None:
    candidates = named(
        ("user", "Ines Duarte", "Hi! I work at Ikea now."),
        ("assistant", "Karl", "Oh nice!"),
        ("user", "Ines Duarte", "Yes, since May."),
    )
    name = find(candidates, "User's name is Ines Duarte")
    assert name.memory_type == "fact" and name.source_event_ids == ("m1",)
    assert name.claim is not None
    assert (name.claim.subject, name.claim.attribute, name.claim.value) == ("User", "name", "Ines Duarte")
    assert find(candidates, "User works at Ikea").claim is not None


@pytest.mark.parametrize(
    "names",
    [
        ("u-123", "u-123"),  # a handle, not a name
        ("ines", "ines"),  # not written as a name
        ("Ines", "Tom"),  # a group: no one of them is known to be the user
        ("User", "User"),
    ],
)
def test_a_message_name_that_is_no_persons_own_gives_no_name(names: tuple[str, str]) -> None:
    candidates = named(("user", names[0], "I work at Ikea now."), ("user", names[1], "Since May."))
    assert not [c for c in candidates if c.claim is not None and c.claim.attribute == "name"]


def test_a_named_assistants_words_are_its_episode_and_never_its_statements() -> None:
    candidates = named(
        ("user", "", "Can you suggest a coffee for my espresso machine?"),
        ("assistant", "Coffeebot", "I recommend the Ethiopian Yirgacheffe, I love light roasts."),
    )
    assert [(e.source_event_ids[0], e.content[:20]) for e in of_type(candidates, "episode")] == [
        ("m1", "Can you suggest a co"), ("m2", "Coffeebot: I recomme"),
    ]
    assert of_type(candidates, "preference") == of_type(candidates, "fact") == []


def test_the_other_speakers_turn_that_names_its_speaker_in_the_text_says_it_once() -> None:
    found = extract(
        ("user", "Emi: my cat knocked over the plant again"),
        ("assistant", "Nebraas: I got a cat too, she is called Miso"),
        ("assistant", "That sounds like a busy week."),
    )
    episodes = contents(found, "episode")
    assert "Nebraas: I got a cat too, she is called Miso" in episodes
    assert "Assistant: That sounds like a busy week." in episodes
    assert not any(text.startswith("Assistant: Nebraas") for text in episodes)


def test_a_plan_called_off_is_stated_without_a_place() -> None:
    at = datetime(2026, 3, 2, tzinfo=UTC)
    said = read_clause_claims("My summer trip is off, I'm not going anywhere this year.", "User", at)
    assert [(f.claim.attribute, f.claim.polarity, f.content) for f in said] == [
        ("trip destination", False, "User no longer plans a trip")
    ]


def test_a_sentence_that_starts_with_its_adverb_is_read() -> None:
    # "More" first, where "no more" / "any more" is looked for before it: nothing there.
    at = datetime(2026, 3, 2, tzinfo=UTC)
    said = read_clause_claims("More and more I play tennis.", "User", at)
    assert [(f.claim.attribute, f.claim.value, f.claim.polarity) for f in said] == [
        ("sport", "tennis", True)
    ]


@pytest.mark.parametrize(
    ("said", "claims"),
    [
        # A verb coordinated without a subject of its own has the first verb's.
        ("My sister left Zalando and joined Novartis.",
         [("User's sister", "employer", "Zalando", False),
          ("User's sister", "employer", "Novartis", True)]),
        # A cleft names the value before the clause it completes; "not X" denies X.
        ("Small update: it's sesame my brother is allergic to, not peanuts.",
         [("User's brother", "allergy", "sesame", True),
          ("User's brother", "allergy", "peanuts", False)]),
        ("It's Novartis that my sister works for now.",
         [("User's sister", "employer", "Novartis", True)]),
        ("Berlin is where my sister lives.", [("User's sister", "home", "Berlin", True)]),
        ("That is where I live.", []),
        # "it's X now" beside a denied value names what took its place.
        ("I don't live in Aarhus any more, it's Valencia now.",
         [("User", "home", "Aarhus", False), ("User", "home", "Valencia", True)]),
        ("I don't work at Google, it's Meta.",
         [("User", "employer", "Google", False), ("User", "employer", "Meta", True)]),
        # ... and a remark that names no value of the kind leaves the bare "not" saying nothing.
        ("I don't work at Google, it's a nice company though.", []),
    ],
)
def test_values_that_replace_or_deny_others_are_read_from_the_parse(
    said: str, claims: list[tuple[str, str, str, bool]]
) -> None:
    at = datetime(2026, 3, 2, tzinfo=UTC)
    found = read_clause_claims(said, "User", at)
    assert [(f.claim.subject, f.claim.attribute, f.claim.value, f.claim.polarity)
            for f in found] == claims


def test_a_language_is_one_attribute_however_it_is_said() -> None:
    at = datetime(2026, 3, 2, tzinfo=UTC)
    keys = {
        (f.claim.attribute, f.claim.value)
        for said in ("My main language is Scala.", "I write in Python mostly.")
        for f in read_clause_claims(said, "User", at)
    }
    assert keys == {("programming language", "Scala"), ("programming language", "Python")}


@pytest.mark.parametrize(
    ("said", "claims"),
    [
        # What replaces what, whatever the attribute: the decisions find it by the old value.
        ("I sold the Subaru and bought a Skoda.", [("User", "", "Skoda", True, "Subaru")]),
        ("My sister switched from Vim to Emacs.", [("User's sister", "", "Emacs", True, "Vim")]),
        ("I swapped my Kindle for a Kobo.", [("User", "", "Kobo", True, "Kindle")]),
        # Let go of alone: whatever held it ends.
        ("We gave away the dog.", [("User", "", "dog", False, "dog")]),
        # A wish or a denial lets go of nothing.
        ("I'd sell the car if I could.", []),
        ("I didn't sell the car.", []),
    ],
)
def test_a_value_let_go_of_or_replaced_is_read_whatever_its_attribute(
    said: str, claims: list[tuple[str, str, str, bool, str]]
) -> None:
    at = datetime(2026, 3, 2, tzinfo=UTC)
    found = read_clause_claims(said, "User", at)
    assert [(f.claim.subject, f.claim.attribute, f.claim.value, f.claim.polarity,
             f.claim.replaces) for f in found] == claims
