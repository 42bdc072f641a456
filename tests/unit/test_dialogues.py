"""The retrieval benchmark's data set: seeded, every answer where its evidence says."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime

import pytest
from dialogues import (
    CATEGORIES,
    POOLS,
    Dialogue,
    Question,
    Turn,
    generate,
    last_weekday,
    resolve_relative,
    spoken_date,
)

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@pytest.fixture(scope="module")
def dialogues() -> list[Dialogue]:
    return generate(5, 12, 16, seed=7)


def asked(dialogues: list[Dialogue], category: str) -> list[tuple[Dialogue, Question, dict[str, Turn]]]:
    """Every question of ``category``, with its dialogue and the dialogue's turns by id."""
    found = []
    for dialogue in dialogues:
        turns = {turn.turn_id: turn for turn in dialogue.turns}
        found += [(dialogue, q, turns) for q in dialogue.questions if q.category == category]
    return found


def another_value(question: Question, distractor: Turn) -> bool:
    """Whether ``distractor`` holds another value of the pool the answer comes from (the
    same kind of fact: another city, another employer) and not the answer."""
    (pool,) = (values for values in POOLS.values() if question.answer in values)
    return question.answer not in distractor.text and any(
        value in distractor.text for value in pool if value != question.answer
    )


def test_the_same_seed_makes_the_same_dialogues_and_another_seed_others() -> None:
    assert generate(3, 6, 12, seed=1) == generate(3, 6, 12, seed=1)
    assert generate(3, 6, 12, seed=1) != generate(3, 6, 12, seed=2)


def test_every_category_is_asked_and_every_answer_is_in_its_evidence(dialogues: list[Dialogue]) -> None:
    counts: Counter[str] = Counter()
    for dialogue in dialogues:
        turns = {turn.turn_id: turn for turn in dialogue.turns}
        assert len(turns) == len(dialogue.turns), "turn ids are unique"
        for question in dialogue.questions:
            counts[question.category] += 1
            texts = [turns[turn_id].text.lower() for turn_id in question.evidence]
            if question.category == "temporal":
                assert not any(question.answer.lower() in text for text in texts)  # a date
            else:
                assert any(question.answer.lower() in text for text in texts), question
    assert set(counts) == set(CATEGORIES) and min(counts.values()) >= 5, counts


def test_temporal_answers_are_the_date_the_session_resolves(dialogues: list[Dialogue]) -> None:
    for _, question, turns in asked(dialogues, "temporal"):
        (turn,) = (turns[turn_id] for turn_id in question.evidence)
        weekday = next(day for day in WEEKDAYS if f"Last {day}" in turn.text)
        resolved = resolve_relative(turn.text, turn.at)
        assert resolved is not None and resolved.strftime("%A") == weekday
        assert spoken_date(resolved) == question.answer
        assert 1 <= (turn.at - resolved).days <= 7


def test_temporal_date_questions_name_a_date_only_the_session_date_resolves(
    dialogues: list[Dialogue],
) -> None:
    phrases: Counter[str] = Counter()
    for dialogue, question, turns in asked(dialogues, "temporal_date"):
        (turn,) = (turns[turn_id] for turn_id in question.evidence)
        resolved = resolve_relative(turn.text, turn.at)
        assert resolved is not None, turn.text
        date = spoken_date(resolved)
        assert question.question == f"What did {dialogue.user} do on {date}?"
        assert turn.speaker == dialogue.user
        # The turn holds the relative phrase and the answer, never the date itself.
        assert date not in turn.text and resolved.strftime("%B") not in turn.text
        phrases["last" if "Last" in turn.text else "days ago"] += 1
    assert min(phrases.values()) >= 3, phrases  # both forms of reference are used


def test_no_two_temporal_questions_of_a_dialogue_are_about_the_same_day(
    dialogues: list[Dialogue],
) -> None:
    for dialogue in dialogues:
        turns = {turn.turn_id: turn for turn in dialogue.turns}
        days = [
            resolve_relative(turns[q.evidence[0]].text, turns[q.evidence[0]].at)
            for q in dialogue.questions
            if q.category in ("temporal", "temporal_date")
        ]
        assert None not in days and len({d.date() for d in days if d}) == len(days)


def test_other_speaker_facts_are_theirs_in_the_first_person_beside_the_users_own(
    dialogues: list[Dialogue],
) -> None:
    with_distractor = 0
    found = asked(dialogues, "other_speaker")
    for dialogue, question, turns in found:
        (turn,) = (turns[turn_id] for turn_id in question.evidence)
        assert turn.speaker == dialogue.other and dialogue.other in question.question
        assert dialogue.user not in question.question
        assert re.search(r"\b(I|We)\b", turn.text), turn.text
        for distractor in (turns[turn_id] for turn_id in question.distractors):
            # The user's own fact of the same kind, with another value, just before.
            assert distractor.speaker == dialogue.user
            assert another_value(question, distractor), (question, distractor)
            assert distractor.session_id == turn.session_id and distractor.at < turn.at
            with_distractor += 1
    assert 0.25 * len(found) <= with_distractor < len(found)


def test_third_person_facts_name_a_friend_of_the_user(dialogues: list[Dialogue]) -> None:
    forms: Counter[str] = Counter()
    distractor_speakers: Counter[str] = Counter()
    for dialogue, question, turns in asked(dialogues, "third_person"):
        (turn,) = (turns[turn_id] for turn_id in question.evidence)
        assert turn.speaker == dialogue.user and f"{dialogue.user}'s " in question.question
        # "Where does Maya's colleague Nora work?"; the friend is neither speaker.
        name = re.findall(r"\b[A-Z][a-z]+\b", question.question)[-1]
        assert name not in (dialogue.user, dialogue.other)
        if turn.text.startswith("My "):
            forms["named"] += 1
            assert name in turn.text
        else:
            # "She works at Zeiss now", the answer to the other's question naming the friend.
            forms["pronoun"] += 1
            session = next(session for session in dialogue.sessions if turn in session)
            asking = session[session.index(turn) - 1]
            assert turn.text.split()[0] in ("He", "She") and name not in turn.text
            assert asking.speaker == dialogue.other and name in asking.text
        for distractor in (turns[turn_id] for turn_id in question.distractors):
            assert another_value(question, distractor), (question, distractor)
            assert name not in distractor.text
            distractor_speakers["user" if distractor.speaker == dialogue.user else "other"] += 1
    assert min(forms.values()) >= 5, forms
    assert set(distractor_speakers) == {"user", "other"}, distractor_speakers


def test_multi_hop_and_corrections_span_two_sessions(dialogues: list[Dialogue]) -> None:
    hops: Counter[int] = Counter()
    for _, question, turns in asked(dialogues, "multi_hop"):
        first, *rest = (turns[turn_id] for turn_id in question.evidence)
        hops[len(rest) + 1] += 1
        assert all(first.session_id != turn.session_id for turn in rest)
        assert all(first.at < turn.at for turn in rest)
        assert question.answer not in first.text  # the first hop only names the person
        assert question.answer in rest[-1].text
    assert set(hops) == {2, 3}, hops  # chains of two and of three turns
    for _, question, turns in asked(dialogues, "correction"):
        (stale,) = (turns[turn_id] for turn_id in question.stale)
        (new,) = (turns[turn_id] for turn_id in question.evidence)
        assert stale.at < new.at and question.answer not in stale.text


def test_open_domain_questions_name_a_relative_whose_news_come_by_name_later(
    dialogues: list[Dialogue],
) -> None:
    sessions: Counter[int] = Counter()
    for dialogue, question, turns in asked(dialogues, "open_domain"):
        named, *news = (turns[turn_id] for turn_id in question.evidence)
        # "What is new with Maya's aunt?": the relation only; "My aunt Greta ..." names her.
        relation = question.question.removeprefix(f"What is new with {dialogue.user}'s ")[:-1]
        assert named.text.startswith(f"My {relation} ")
        name = named.text.split()[1 + len(relation.split())]
        assert name not in question.question
        assert all(named.session_id != turn.session_id for turn in news)
        assert all(name in turn.text or turn.text.split()[0] in ("He", "She") for turn in news)
        sessions[len({turn.session_id for turn in (named, *news)})] += 1
    assert sessions[2] > 0 and sessions[3] > 0, sessions


def test_both_speakers_talk_and_most_turns_are_chatter() -> None:
    (dialogue,) = generate(1, 8, 20, seed=3)
    speakers = Counter(turn.speaker for turn in dialogue.turns)
    assert set(speakers) == {dialogue.user, dialogue.other}
    cited = {turn_id for q in dialogue.questions for turn_id in q.evidence}
    assert len(cited) < len(dialogue.turns) / 3


def test_last_weekday_and_relative_days_count_back_from_the_day() -> None:
    tuesday = datetime(2025, 3, 4, 18, tzinfo=UTC)  # a Tuesday
    assert last_weekday(tuesday, 1) == datetime(2025, 2, 25, 18, tzinfo=UTC)
    assert last_weekday(tuesday, 0) == datetime(2025, 3, 3, 18, tzinfo=UTC)
    assert resolve_relative("Yesterday I sold my old piano", tuesday) == datetime(2025, 3, 3, 18, tzinfo=UTC)
    assert resolve_relative("I got a tattoo two days ago!", tuesday) == datetime(2025, 3, 2, 18, tzinfo=UTC)
    assert resolve_relative("last tuesday we met", tuesday) == datetime(2025, 2, 25, 18, tzinfo=UTC)
    assert resolve_relative("We should get coffee soon.", tuesday) is None
    assert spoken_date(tuesday) == "4 March 2025"
    with pytest.raises(ValueError):
        generate(1, 1, 10, seed=0)


def test_no_question_is_asked_twice_in_a_dialogue() -> None:
    for dialogue in generate(5, 16, 12, seed=11):
        questions = [question.question for question in dialogue.questions]
        assert len(questions) == len(set(questions)), questions
