"""The foreign split of the dialogue benchmark: seeded, every answer where its evidence says,
in words and phrasings of its own."""

from __future__ import annotations

import re
from collections import Counter

import dialogues
import pytest
from dialogue_recall import session_of
from dialogues import CATEGORIES, Dialogue, Question, Turn, resolve_relative, spoken_date
from dialogues_foreign import generate
from foreign_phrasings import CHATTER, KINDS, PAIRS, POOLS, SUBJECTS


@pytest.fixture(scope="module")
def foreign() -> list[Dialogue]:
    return generate(6, 16, 20, seed=5)


def asked(found: list[Dialogue], category: str) -> list[tuple[Dialogue, Question, dict[str, Turn]]]:
    """Every question of ``category``, with its dialogue and the dialogue's turns by id."""
    return [
        (dialogue, question, {turn.turn_id: turn for turn in dialogue.turns})
        for dialogue in found
        for question in dialogue.questions
        if question.category == category
    ]


def values(pools: dict[str, list[object]]) -> set[str]:
    """Every word value of ``pools`` (an activity by its answer), lowercased."""
    return {
        (value[1] if isinstance(value, tuple) else str(value)).lower()
        for pool in pools.values()
        for value in pool
    }


def test_the_same_seed_makes_the_same_dialogues_and_another_seed_others() -> None:
    assert generate(3, 6, 12, seed=1) == generate(3, 6, 12, seed=1)
    assert generate(3, 6, 12, seed=1) != generate(3, 6, 12, seed=2)
    with pytest.raises(ValueError):
        generate(1, 1, 10, seed=0)


def test_turn_ids_are_unique_and_name_the_user_and_session(foreign: list[Dialogue]) -> None:
    assert len({dialogue.user_id for dialogue in foreign}) == len(foreign)
    for dialogue in foreign:
        ids = [turn.turn_id for turn in dialogue.turns]
        assert len(ids) == len(set(ids))
        for number, session in enumerate(dialogue.sessions, start=1):
            for index, turn in enumerate(session):
                assert turn.turn_id == f"{dialogue.user_id}/s{number}/t{index}"
                assert session_of(turn.turn_id) == f"{dialogue.user_id}/{turn.session_id}"
        assert {turn.speaker for turn in dialogue.turns} == {dialogue.user, dialogue.other}


def test_every_answer_is_in_its_evidence_and_in_no_other_turn(foreign: list[Dialogue]) -> None:
    for dialogue in foreign:
        turns = {turn.turn_id: turn for turn in dialogue.turns}
        for question in dialogue.questions:
            cited = {*question.evidence, *question.stale, *question.distractors}
            assert cited <= set(turns)
            if question.category == "temporal":
                continue  # a date, which no turn says
            answer = question.answer.lower()
            assert any(answer in turns[turn_id].text.lower() for turn_id in question.evidence)
            elsewhere = [t.text for t in dialogue.turns if t.turn_id not in question.evidence]
            assert not any(answer in text.lower() for text in elsewhere), (question, elsewhere)


def test_every_category_is_asked_about_as_often_as_in_dev(foreign: list[Dialogue]) -> None:
    ours = Counter(q.category for d in foreign for q in d.questions)
    theirs = Counter(q.category for d in dialogues.generate(6, 16, 20, seed=5) for q in d.questions)
    assert set(ours) == set(CATEGORIES) and min(ours.values()) >= 5, ours
    for category in CATEGORIES:
        share, dev = ours[category] / ours.total(), theirs[category] / theirs.total()
        assert dev / 2 <= share <= dev * 2, (category, ours, theirs)


def test_no_question_is_asked_twice_in_a_dialogue(foreign: list[Dialogue]) -> None:
    for dialogue in foreign:
        questions = [question.question for question in dialogue.questions]
        assert len(questions) == len(set(questions)), questions


def test_temporal_answers_are_the_dates_the_session_resolves(foreign: list[Dialogue]) -> None:
    days: dict[str, list[str]] = {}
    for category in ("temporal", "temporal_date"):
        for dialogue, question, turns in asked(foreign, category):
            (turn,) = (turns[turn_id] for turn_id in question.evidence)
            resolved = resolve_relative(turn.text, turn.at)
            assert resolved is not None and turn.speaker == dialogue.user, turn.text
            date = spoken_date(resolved)
            assert date not in turn.text and resolved.strftime("%B") not in turn.text
            if category == "temporal":
                assert question.answer == date
            else:
                assert question.question.endswith(f" on {date}?")
            days.setdefault(dialogue.user_id, []).append(date)
    # No two temporal questions of a dialogue are about the same day.
    assert all(len(dates) == len(set(dates)) for dates in days.values())


def test_corrections_keep_the_earlier_statement_as_stale(foreign: list[Dialogue]) -> None:
    for dialogue, question, turns in asked(foreign, "correction"):
        (stale,) = (turns[turn_id] for turn_id in question.stale)
        (new,) = (turns[turn_id] for turn_id in question.evidence)
        assert stale.at < new.at and stale.session_id != new.session_id
        assert stale.speaker == new.speaker == dialogue.user
        assert question.answer not in stale.text


def test_distractors_are_another_persons_fact_of_the_same_kind(foreign: list[Dialogue]) -> None:
    speakers: Counter[str] = Counter()
    for category in ("other_speaker", "third_person"):
        found = asked(foreign, category)
        with_distractor = 0
        for dialogue, question, turns in found:
            (turn,) = (turns[turn_id] for turn_id in question.evidence)
            speaker = dialogue.other if category == "other_speaker" else dialogue.user
            assert turn.speaker == speaker
            pool = next(pool for pool in POOLS.values() if question.answer in pool)
            for distractor in (turns[turn_id] for turn_id in question.distractors):
                assert distractor.session_id == turn.session_id
                assert question.answer.lower() not in distractor.text.lower()
                assert any(str(value).lower() in distractor.text.lower() for value in pool)
                speakers[distractor.speaker == dialogue.user] += 1
                with_distractor += 1
        assert 0.2 * len(found) <= with_distractor < len(found), category
    assert set(speakers) == {True, False}  # the user's own facts and the other's


def test_multi_hop_and_open_domain_span_sessions(foreign: list[Dialogue]) -> None:
    hops: Counter[int] = Counter()
    for _, question, turns in asked(foreign, "multi_hop"):
        first, *rest = (turns[turn_id] for turn_id in question.evidence)
        hops[len(rest) + 1] += 1
        assert all(first.session_id != turn.session_id and first.at < turn.at for turn in rest)
        assert question.answer not in first.text and question.answer in rest[-1].text
    assert set(hops) == {2, 3}, hops
    for _, question, turns in asked(foreign, "open_domain"):
        named, *news = (turns[turn_id] for turn_id in question.evidence)
        assert news and all(named.session_id != turn.session_id for turn in news)


def test_names_values_and_chatter_are_not_the_dev_splits(foreign: list[Dialogue]) -> None:
    ours, theirs = values(POOLS), values(dialogues.POOLS)
    assert ours.isdisjoint(theirs)
    names = {name for pair in PAIRS for name in pair}
    assert names.isdisjoint(name for pair in dialogues.PAIRS for name in pair)
    assert set(CHATTER).isdisjoint(dialogues.CHATTER)
    # No value hides inside chit-chat or another value (an answer found where it was not said).
    for value in ours:
        assert not any(value in line.lower() for line in CHATTER), value
        assert not any(value in other and value != other for other in ours), value
    # No sentence of dev's templates is said here.
    templates = [
        *(t for kind in dialogues.KINDS.values()
          for t in (*kind.first, *kind.third, kind.question)),
        *(t for subject in dialogues.SUBJECTS
          for t in (subject.stated, subject.changed, subject.question)),
    ]
    pieces = {
        piece.strip(" .,!?") for template in templates for piece in re.split(r"\{[^}]*\}", template)
    }
    for turn in (turn for dialogue in foreign for turn in dialogue.turns):
        assert not any(len(piece.split()) > 2 and piece in turn.text for piece in pieces), turn.text


def test_facts_and_questions_come_in_several_phrasings(foreign: list[Dialogue]) -> None:
    for kind in KINDS.values():
        assert len(kind.first) >= 3 and len(kind.third) >= 3 and len(kind.questions) >= 2
    for subject in SUBJECTS:
        assert len(subject.stated) >= 3 and len(subject.changed) >= 3
        assert len(subject.questions) >= 2
    shapes: dict[str, set[str]] = {}
    for category in CATEGORIES:
        for dialogue, question, _ in asked(foreign, category):
            shape = question.question.split(dialogue.user)[0].split(dialogue.other)[0]
            shapes.setdefault(category, set()).add(shape)
    assert all(len(found) >= 2 for found in shapes.values()), shapes
