"""Conversation context: speakers, relative times resolved against the day said, episodes
with their neighbours, and statements of other named people never written as the user's."""

from __future__ import annotations

import doctest
from datetime import UTC, date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

import memstream.models.conversation as conversation_module
from memstream.models.conversation import annotate_times, resolve_times, turn_context
from memstream.models.events.consolidation import TranscriptMessage
from memstream.models.extraction import extract_candidates

TUESDAY = datetime(2026, 3, 17, 18, 0, tzinfo=UTC)


def said(event_id: str, role: str, content: str, name: str | None = None) -> TranscriptMessage:
    return TranscriptMessage(
        event_id=event_id, role=role, name=name, content=content, occurred_at=TUESDAY  # type: ignore[arg-type]
    )


def test_module_docstring_examples_run() -> None:
    failures, attempted = doctest.testmod(conversation_module)
    assert attempted > 0 and failures == 0


@pytest.mark.parametrize(
    ("words", "meant"),
    [
        ("yesterday", date(2026, 3, 16)),
        ("last night", date(2026, 3, 16)),
        ("the day before yesterday", date(2026, 3, 15)),
        ("this morning", date(2026, 3, 17)),
        ("last Monday", date(2026, 3, 16)),
        ("last Tuesday", date(2026, 3, 10)),  # said on a Tuesday: a week before
        ("last Wednesday", date(2026, 3, 11)),
        ("last Sunday", date(2026, 3, 15)),
        ("last weekend", date(2026, 3, 14)),
        ("two days ago", date(2026, 3, 15)),
        ("3 weeks ago", date(2026, 2, 24)),
        ("a month ago", date(2026, 2, 1)),
        ("last week", date(2026, 3, 9)),
        ("last month", date(2026, 2, 1)),
        ("last year", date(2025, 1, 1)),
    ],
)
def test_relative_times_resolve_against_the_moment_said(words: str, meant: date) -> None:
    [found] = resolve_times(f"We did it {words}, finally.", TUESDAY)
    assert found.words == words and found.day == meant


def test_annotated_text_keeps_every_word_and_adds_the_dates() -> None:
    text = "Last Tuesday we adopted a puppy. Last month was busy."
    annotated = annotate_times(text, TUESDAY)
    assert annotated == (
        "Last Tuesday (10 March 2026) we adopted a puppy. Last month (February 2026) was busy."
    )
    assert annotate_times("No times here.", TUESDAY) == "No times here."


@given(st.text(max_size=300), st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)))
def test_any_text_on_any_day_annotates_without_losing_words(text: str, moment: datetime) -> None:
    at = moment.replace(tzinfo=UTC)
    annotated = annotate_times(text, at)
    for ref in resolve_times(text, at):
        assert ref.day <= at.date()
    # Removing the inserted dates gives the text back.
    stripped = annotated
    for ref in resolve_times(text, at):
        stripped = stripped.replace(f" ({ref.label})", "", 1)
    assert stripped == text


def test_a_turn_context_shows_its_day_neighbours_and_speakers() -> None:
    turns = [
        said("t1", "assistant", "Where did you end up going at Easter?", "Tom"),
        said("t2", "user", "Lisbon! Last Sunday it rained.", "Maya"),
        said("t3", "assistant", "Rain in Lisbon, unlucky.", "Tom"),
        said("t4", "user", "Anyway.", "Maya"),
    ]
    text, cited = turn_context(turns, 1)
    assert text.splitlines() == [
        "Tuesday 17 March 2026",
        "Tom: Where did you end up going at Easter?",
        "Maya: Lisbon! Last Sunday (15 March 2026) it rained.",
        "Tom: Rain in Lisbon, unlucky.",
    ]
    assert cited == ("t1", "t2", "t3")
    assert turn_context(turns, 0)[1] == ("t1", "t2")


def test_episodes_cite_every_turn_their_context_shows() -> None:
    turns = [
        said("t1", "assistant", "Where did you end up going for the long weekend?", "Tom"),
        said("t2", "user", "Lisbon! It rained, but the food made up for it.", "Maya"),
    ]
    episodes = [c for c in extract_candidates(turns) if c.memory_type == "episode"]
    [episode] = [c for c in episodes if c.source_event_ids[0] == "t2"]
    # Said by a named person: the episode says who said it.
    assert episode.content == "Maya: Lisbon! It rained, but the food made up for it."
    assert episode.source_event_ids == ("t2", "t1")
    assert "Tom: Where did you end up going for the long weekend?" in episode.context
    assert all("User:" not in c.context and "Assistant:" not in c.context for c in episodes)


def test_statements_of_other_named_people_are_theirs_not_the_users() -> None:
    turns = [
        said("t1", "user", "I work at Bosch now, since May.", "Tom"),
        said("t2", "user", "I live in Oslo and I prefer tea.", "Maya"),
    ]
    contents = {c.content for c in extract_candidates(turns) if c.memory_type != "summary"}
    assert not any(content.startswith("User") for content in contents)
    assert "Tom works at Bosch now, since May" in contents
    assert "Maya lives in Oslo" in contents and "Maya prefers tea" in contents
    assert "Tom: I work at Bosch now, since May." in contents


def test_one_named_user_is_the_user() -> None:
    turns = [
        said("t1", "user", "I live in Oslo.", "Maya"),
        said("t2", "assistant", "I live in the cloud.", "Tom"),
    ]
    facts = [c.content for c in extract_candidates(turns) if c.memory_type == "fact"]
    # Her name is hers, and what Tom says of himself is his.
    assert facts == ["User's name is Maya", "User lives in Oslo", "Tom lives in the cloud"]


def test_a_time_long_ago_does_not_fail_the_extraction() -> None:
    turns = [said("t1", "user", "I moved here 999 years ago and 999 months ago.")]
    [episode] = [c for c in extract_candidates(turns) if c.memory_type == "episode"]
    assert "(1027)" in episode.context and "(December 1942)" in episode.context
