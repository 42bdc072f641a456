"""REALTALK as the benchmark reads it: hand-written evidence ids cleaned, every evidence turn
a turn of its chat, each turn published as a user's app would. The data set is not in the
repository: the tests that read it are skipped where it is missing."""

from __future__ import annotations

import doctest
from dataclasses import replace
from pathlib import Path

import pytest
import realtalk
import realtalk_recall
from realtalk import DEFAULT_DATA, evidence_ids, load

needs_data = pytest.mark.skipif(
    not any(DEFAULT_DATA.glob("Chat_*.json")), reason=f"REALTALK is not in {DEFAULT_DATA}"
)


def test_the_loaders_examples_run() -> None:
    result = doctest.testmod(realtalk)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("D1:11; D3:18", ["D1:11", "D3:18"]),
        ("D5:3.", ["D5:3"]),
        ("D13:4. D14:4", ["D13:4", "D14:4"]),
        ("D12:3-D12:5", ["D12:3", "D12:4", "D12:5"]),
        ("D 2:18", ["D2:18"]),
        ("D1:11, D1:11", ["D1:11"]),
        ("D9:9", []),  # names no turn of the file
        ("", []),
        ("D:56", []),
    ],
)
def test_hand_written_evidence_ids_are_read_as_the_turns_they_name(
    raw: str, expected: list[str]
) -> None:
    known = {"D1:11", "D3:18", "D5:3", "D13:4", "D14:4", "D12:3", "D12:4", "D12:5", "D2:18"}
    assert evidence_ids(raw, known) == expected


def test_a_folder_without_the_data_set_is_one_line_that_says_where_to_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert realtalk_recall.main(["--data", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and str(tmp_path) in error and "--data" in error


@needs_data
def test_every_chat_loads_with_its_questions_evidence_in_its_own_turns() -> None:
    chats = load()
    assert len(chats) == 10
    assert sum(len(chat.turns) for chat in chats) == 8_944
    assert sum(len(chat.sessions) for chat in chats) == 219
    questions = [question for chat in chats for question in chat.questions]
    # 728 questions; those whose evidence names no turn of their file are left out.
    assert 700 <= len(questions) <= 728
    assert {question.category for question in questions} == {"multi-hop", "time", "inference"}
    for chat in chats:
        ids = [turn.dia_id for turn in chat.turns]
        assert len(ids) == len(set(ids)), chat.name  # a dia_id names one turn of its file
        sessions = chat.session_of()
        assert all(turn in sessions for q in chat.questions for turn in q.evidence)
        # Turns are oldest first within each session, and sessions follow each other.
        times = [turn.at for turn in chat.turns]
        assert times == sorted(times), chat.name


@needs_data
def test_a_turn_is_published_with_its_speaker_as_name_or_before_its_words() -> None:
    [chat] = load(chats=["Chat_1_Emi_Elise"])
    first, reply = chat.sessions[0][0], chat.sessions[0][1]
    assert realtalk_recall.message(chat, first, "named") == {
        "role": "user", "content": first.text, "name": "Emi"
    }
    assert realtalk_recall.message(chat, reply, "unnamed") == {
        "role": "assistant", "content": f"elise: {reply.text}"
    }
    assert realtalk_recall.user_id(chat, "named") != realtalk_recall.user_id(chat, "unnamed")


@needs_data
def test_a_slice_of_a_real_chat_is_recalled_from_its_own_turns_at_least_as_well_as_plain(
    tmp_path: Path,
) -> None:
    """The benchmark end to end, offline, on the first five sessions of one chat: every
    question is asked, and memstream finds at least the plain search's evidence."""
    [chat] = load(chats=["Chat_1_Emi_Elise"])
    sessions = chat.sessions[:5]
    kept = {turn.dia_id for session in sessions for turn in session}
    small = replace(
        chat, sessions=sessions,
        questions=[q for q in chat.questions if set(q.evidence) <= kept],
        events=chat.events[:5],
    )
    assert len(small.questions) >= 3
    tallies = realtalk_recall.offline_tallies(tmp_path, [small], ["named"], {}, steps=False)
    plain = tallies[realtalk_recall.PLAIN]["named"]
    memstream = tallies[realtalk_recall.MEMSTREAM]["named"]
    assert len(memstream.latencies_s) == len(small.questions)
    assert memstream.recall_at("all") >= plain.recall_at("all") > 0
