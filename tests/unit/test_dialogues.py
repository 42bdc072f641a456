"""The retrieval benchmark's data set: seeded, every answer where its evidence says."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest
from dialogues import CATEGORIES, generate, last_weekday


def test_the_same_seed_makes_the_same_dialogues_and_another_seed_others() -> None:
    assert generate(3, 6, 12, seed=1) == generate(3, 6, 12, seed=1)
    assert generate(3, 6, 12, seed=1) != generate(3, 6, 12, seed=2)


def test_every_answer_is_in_its_evidence_and_every_category_is_asked() -> None:
    dialogues = generate(5, 10, 14, seed=7)
    asked: Counter[str] = Counter()
    for dialogue in dialogues:
        turns = {turn.turn_id: turn for turn in dialogue.turns}
        assert len(turns) == len(dialogue.turns), "turn ids are unique"
        for question in dialogue.questions:
            asked[question.category] += 1
            evidence = [turns[turn_id] for turn_id in question.evidence]
            if question.category == "temporal":
                # The answer is a date: the turn says a weekday relative to its session.
                (turn,) = evidence
                weekday = next(d for d in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                                           "Saturday", "Sunday") if d in turn.text)
                assert weekday in datetime.strptime(question.answer, "%d %B %Y").strftime("%A")
                assert question.answer not in turn.text
            else:
                assert any(question.answer in turn.text for turn in evidence), question
            if question.category == "multi_hop":
                first, second = evidence
                assert first.session_id != second.session_id
                assert question.answer not in first.text  # the first hop only names the person
            if question.category == "correction":
                (stale,) = question.stale
                assert turns[stale].at < evidence[0].at
    assert set(asked) == set(CATEGORIES) and min(asked.values()) >= 5, asked


def test_both_speakers_talk_and_most_turns_are_chatter() -> None:
    (dialogue,) = generate(1, 8, 20, seed=3)
    speakers = Counter(turn.speaker for turn in dialogue.turns)
    assert set(speakers) == {dialogue.user, dialogue.other}
    cited = {turn_id for q in dialogue.questions for turn_id in q.evidence}
    assert len(cited) < len(dialogue.turns) / 4


def test_last_weekday_is_before_the_day_and_within_a_week() -> None:
    tuesday = datetime(2025, 3, 4, tzinfo=UTC)  # a Tuesday
    assert last_weekday(tuesday, 1) == datetime(2025, 2, 25, tzinfo=UTC)
    assert last_weekday(tuesday, 0) == datetime(2025, 3, 3, tzinfo=UTC)
    with pytest.raises(ValueError):
        generate(1, 1, 10, seed=0)


def test_no_question_is_asked_twice_in_a_dialogue() -> None:
    for dialogue in generate(5, 16, 12, seed=11):
        asked = [question.question for question in dialogue.questions]
        assert len(asked) == len(set(asked)), asked
