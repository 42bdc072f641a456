"""Learned patterns: counting by sessions, thresholds, versions, and bounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memstream.models.patterns import (
    MAX_KEYS,
    MAX_SESSIONS,
    MAX_SIGNALS_PER_SPAN,
    MAX_VALUE_CHARS,
    PatternBook,
    SpanObservation,
    observe_span,
    pattern_changes,
    patterns,
    record,
    request_topics,
)

MONDAY = datetime(2026, 3, 2, 8, 15, tzinfo=UTC)


def span(session: str, at: datetime = MONDAY, turns: tuple[str, ...] = (),
         tools: tuple[str, ...] = (), corrections: tuple[str, ...] = ()) -> SpanObservation:
    return observe_span(
        session, at,
        [(f"{session}-u{i}", text) for i, text in enumerate(turns)],
        [(f"{session}-t{i}", name) for i, name in enumerate(tools)],
        [(f"{session}-c{i}", name) for i, name in enumerate(corrections)],
    )


def fold(*spans: SpanObservation) -> PatternBook:
    book = PatternBook()
    for observation in spans:
        book = record(book, observation)
    return book


def test_a_request_asked_in_three_sessions_is_a_pattern_with_its_evidence() -> None:
    asks = [span(f"s{n}", MONDAY + timedelta(days=n),
                 turns=(f"Can you find me vegetarian recipes for day {n}?",)) for n in range(3)]
    assert "request:vegetarian" not in patterns(fold(*asks[:2]))
    found = patterns(fold(*asks))["request:vegetarian"]
    assert found.content == "usually asks about vegetarian (3 sessions)"
    assert found.sessions == ("s0", "s1", "s2")
    assert found.event_ids == ("s0-u0", "s1-u0", "s2-u0")
    assert patterns(fold(*asks))["request:recipe"].content == "usually asks about recipe (3 sessions)"


def test_statements_are_not_requests() -> None:
    assert request_topics("I cooked vegetarian recipes yesterday.") == []
    assert request_topics("Recommend a hiking trail near Porto") == ["hiking", "trail", "porto"]


def test_tools_hours_weekday_and_corrections() -> None:
    spans = [span(f"s{n}", MONDAY + timedelta(weeks=n), tools=("web_search", "web_search"),
                  corrections=("city",) if n < 2 else ()) for n in range(3)]
    found = patterns(fold(*spans))
    assert [p.content for p in found.values()] == [
        "uses the tool web_search (3 sessions)",
        "corrects the city repeatedly (2 sessions)",
        "active mostly 08:00-10:00 UTC (3 sessions)",
        "most sessions on Mondays (3 sessions)",
    ]


def test_a_span_or_a_session_counts_once_in_any_order() -> None:
    spans = [span(f"s{n}", MONDAY + timedelta(days=n), tools=("calc",)) for n in range(3)]
    once = fold(*spans)
    assert fold(*spans, *spans) == once
    assert fold(*reversed(spans)) == once
    # A second span of a session (an evicted chunk) adds no session.
    assert patterns(fold(*spans, span("s1", MONDAY, tools=("calc",))))["tool:calc"].sessions == (
        "s0", "s1", "s2")


def test_a_new_session_makes_a_new_version_that_supersedes_the_old() -> None:
    spans = [span(f"s{n}", MONDAY + timedelta(days=n), tools=("calc",)) for n in range(4)]
    three, four = fold(*spans[:3]), fold(*spans)
    first = pattern_changes(fold(*spans[:2]), three)
    assert [(c.pattern.key, c.supersedes) for c in first] == [("tool:calc", None), ("hours", None)]
    again = [c for c in pattern_changes(three, four) if c.pattern.key == "tool:calc"]
    assert again[0].supersedes == patterns(three)["tool:calc"]
    assert again[0].pattern.content == "uses the tool calc (4 sessions)"
    old, new = patterns(three)["tool:calc"], patterns(four)["tool:calc"]
    assert old.memory_id("u") != new.memory_id("u")
    assert new.memory_id("u") == patterns(fold(*spans))["tool:calc"].memory_id("u")
    assert pattern_changes(four, four) == []


def test_hostile_input_is_bounded() -> None:
    huge = " ".join(f"word{i}x" for i in range(50_000)) + "?"
    names = [f"tool-{i}" * 40 for i in range(500)]
    observed = span("s", turns=(huge,) * 3, tools=tuple(names))
    assert len(observed.signals) == MAX_SIGNALS_PER_SPAN
    assert all(len(s.value) <= MAX_VALUE_CHARS for s in observed.signals)
    book = PatternBook()
    for n in range(MAX_SESSIONS + 50):
        book = record(book, span(f"s{n:04d}", MONDAY + timedelta(minutes=n),
                                 tools=(f"t{n}", "calc")))
    assert len(book.sessions) == MAX_SESSIONS and len(book.seen) <= MAX_KEYS
    assert "s0000" not in book.sessions
    assert len(patterns(book)["tool:calc"].event_ids) == 20
