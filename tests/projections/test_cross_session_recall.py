"""Cross-session recall on a real LanceDB projection with the real embedder: a question whose
evidence sits in two sessions finds the second one through the name the first one mentions,
only with entity expansion on, never reaching another user's memories; a session cap gives
another session's memory a place; the same table rebuilt answers the same."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memstream.models.events.memory import MemoryAdded
from memstream.models.settings import Settings
from memstream.projections.cross_session import (
    DIVERSITY_MARGIN,
    below_their_leads,
    diversify_sessions,
    expand_by_entities,
    lexical_rerank,
    new_turns_first,
)
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import (
    MemoryHit,
    MemoryProjection,
    SearchFilters,
    SourcePosition,
)
from memstream.projections.prompt_context import RankedMemory, rank
from memstream.projections.resident import ResidentMemories
from memstream.projections.retrieval import Retriever

START = datetime(2025, 3, 1, 18, 0, tzinfo=UTC)
NOW = START + timedelta(days=90)
QUESTION = "Where does the person Maya met at the choir work?"
#: (user, session, memory id, content, entities): the choir and Viktor in one session, where
#: Viktor works in another; chatter about work in others; another user's Viktor.
MEMORIES = [
    ("maya", "s1", "m-choir", "At the choir I met someone really nice, Viktor. We talked for ages.",
     ("Viktor",)),
    ("maya", "s2", "m-job", "Viktor works at Bosch now.", ("Viktor", "Bosch")),
    ("maya", "s3", "m-busy", "Work has been busy this week, the person next to me left.", ()),
    ("maya", "s3", "m-tired", "I'm so tired after work, I met nobody at all.", ()),
    ("maya", "s4", "m-choir-2", "The choir sings at the town hall at Easter.", ()),
    ("maya", "s4", "m-where", "Where we work now there is a new canteen.", ()),
    ("maya", "s5", "m-tom", "Tom met his old team at the office party.", ("Tom",)),
    ("eve", "s1", "e-viktor", "Viktor works at Siemens, in the choir office.", ("Viktor", "Siemens")),
]
PLAIN = Settings(recall_entity_expansion=False, recall_session_cap=0, recall_rerank="none",
                 recall_new_turns_first=False)
EXPANDING = PLAIN.model_copy(update={"recall_entity_expansion": True})


def events() -> list[tuple[MemoryAdded, SourcePosition]]:
    return [
        (
            MemoryAdded(
                event_id=f"event-{memory_id}", user_id=user, session_id=session,
                occurred_at=START + timedelta(days=offset), extractor="test/1",
                memory_id=memory_id, memory_type="episode", content=content, importance=0.5,
                extraction_event_id=f"extraction-{memory_id}",
                source_event_ids=(f"turn-{memory_id}",), entities=entities,
            ),
            SourcePosition("memstream.memories", 0, offset),
        )
        for offset, (user, session, memory_id, content, entities) in enumerate(MEMORIES)
    ]


@pytest.fixture(scope="module")
def embedder() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder()


def built(directory: Path, embedder: MiniLMOnnxEmbedder) -> MemoryProjection:
    projection = MemoryProjection(directory, embedder)
    projection.apply(events())
    projection.refresh_indexes()
    return projection


@pytest.fixture(scope="module")
def projection(
    tmp_path_factory: pytest.TempPathFactory, embedder: MiniLMOnnxEmbedder
) -> MemoryProjection:
    return built(tmp_path_factory.mktemp("memories"), embedder)


def found(projection: MemoryProjection, settings: Settings, user: str, limit: int) -> list[str]:
    retriever = Retriever(projection, settings, clock=lambda: NOW)
    return [item.memory.memory_id for item in retriever.search(user, QUESTION, limit=limit)]


def test_the_second_sessions_evidence_is_found_only_with_entity_expansion(
    projection: MemoryProjection,
) -> None:
    plain = found(projection, PLAIN, "maya", limit=3)
    expanded = found(projection, EXPANDING, "maya", limit=3)
    assert "m-choir" in plain and "m-job" not in plain
    assert "m-choir" in expanded and "m-job" in expanded
    # The memory the name led to is scored below the hit that named it (a near tie may still
    # put it first: the newer of two near-equal memories leads).
    retriever = Retriever(projection, EXPANDING, clock=lambda: NOW)
    relevance = {
        item.memory.memory_id: item.relevance for item in retriever.search("maya", QUESTION, limit=3)
    }
    assert relevance["m-job"] == pytest.approx(0.9 * relevance["m-choir"])


def test_the_same_path_serves_a_context(projection: MemoryProjection) -> None:
    for settings, expected in ((PLAIN, False), (EXPANDING, True)):
        retriever = Retriever(projection, settings, clock=lambda: NOW)
        found = retriever.retrieve("maya", QUESTION, quotas={"episode": 3})
        assert ("Bosch" in found.context) is expected


def test_expansion_never_reaches_another_users_memories(projection: MemoryProjection) -> None:
    resident = ResidentMemories(projection, budget_bytes=1 << 24)
    for index in (projection, resident):
        expanded = found(index, EXPANDING, "maya", limit=20)  # type: ignore[arg-type]
        assert "e-viktor" not in expanded
        assert all(memory_id.startswith("m-") for memory_id in expanded)
        # The other user's Viktor leads their own search to their own memory only.
        assert found(index, EXPANDING, "eve", limit=20) == ["e-viktor"]  # type: ignore[arg-type]


def test_the_resident_store_answers_as_the_table(
    projection: MemoryProjection,
) -> None:
    resident = ResidentMemories(projection, budget_bytes=1 << 24)
    assert "m-job" in found(resident, EXPANDING, "maya", limit=3)  # type: ignore[arg-type]
    assert "m-job" not in found(resident, PLAIN, "maya", limit=3)  # type: ignore[arg-type]


def test_a_rebuilt_table_answers_the_same(
    projection: MemoryProjection, embedder: MiniLMOnnxEmbedder, tmp_path: Path
) -> None:
    again = built(tmp_path / "again", embedder)
    every = Settings(recall_entity_expansion=True, recall_session_cap=1, recall_rerank="lexical")
    for settings in (PLAIN, EXPANDING, every):
        first = Retriever(projection, settings, clock=lambda: NOW).search("maya", QUESTION, limit=5)
        second = Retriever(again, settings, clock=lambda: NOW).search("maya", QUESTION, limit=5)
        assert [(i.memory.memory_id, round(i.rank_score, 9)) for i in first] == [
            (i.memory.memory_id, round(i.rank_score, 9)) for i in second
        ]


def test_a_session_cap_gives_another_sessions_memory_a_place(
    projection: MemoryProjection,
) -> None:
    hits = projection.search("maya", "work busy tired met", limit=10)
    ranked = rank(hits, Retriever(projection, PLAIN).weights, NOW)
    level = [replace(item, rank_score=0.5) for item in ranked]
    sessions = [item.memory.session_id for item in diversify_sessions(level, 1)]
    # No session has a second memory before every other session had its first.
    firsts = len(set(sessions))
    assert len(set(sessions[:firsts])) == firsts
    assert sorted(sessions) == sorted(item.memory.session_id for item in ranked)


def crowded_and_other(
    projection: MemoryProjection, query: str
) -> tuple[list[RankedMemory], RankedMemory]:
    """The ranked hits of ``query`` of a session with two or more, and another session's
    best hit."""
    hits = projection.search("maya", query, limit=10)
    ranked = rank(hits, Retriever(projection, PLAIN).weights, NOW)
    by_session: dict[str, list[RankedMemory]] = {}
    for item in ranked:
        by_session.setdefault(item.memory.session_id or "", []).append(item)
    crowded = next(items for items in by_session.values() if len(items) >= 2)
    other = next(items[0] for items in by_session.values() if items is not crowded)
    return crowded, other


def test_a_session_cap_never_puts_a_far_worse_memory_first(
    projection: MemoryProjection,
) -> None:
    crowded, other = crowded_and_other(projection, "work busy tired met")
    strong = [replace(crowded[0], rank_score=0.9), replace(crowded[1], rank_score=0.8)]
    for share, expected in ((0.5, [0, 1, 2]), (DIVERSITY_MARGIN + 0.05, [0, 2, 1])):
        weak = replace(other, rank_score=0.8 * share)
        given = [*strong, weak]
        again = diversify_sessions(given, 1)
        assert [given.index(item) for item in again] == expected


def test_a_memory_a_name_led_to_never_ranks_above_the_hit_that_named_it(
    projection: MemoryProjection,
) -> None:
    retriever = Retriever(projection, EXPANDING, clock=lambda: NOW)
    for limit in (3, 5):
        order = [item.memory.memory_id for item in retriever.search("maya", QUESTION, limit=limit)]
        assert order.index("m-choir") < order.index("m-job")
    hits = projection.search("maya", "choir", limit=3)
    lead, follower, other = rank(hits, Retriever(projection, PLAIN).weights, NOW)
    given = [replace(follower, rank_score=0.9), replace(lead, rank_score=0.5), other]
    guarded = below_their_leads(given, {follower.memory.memory_id: lead.memory.memory_id})
    assert [item.memory.memory_id for item in guarded][:2] == [
        lead.memory.memory_id, follower.memory.memory_id
    ]
    assert guarded[1].rank_score < guarded[0].rank_score


def test_ties_keep_the_search_order_whatever_the_step(projection: MemoryProjection) -> None:
    hits = projection.search("maya", "choir", limit=10)
    ranked = rank(hits, Retriever(projection, PLAIN).weights, NOW)
    level = [type(item)(**{**item.__dict__, "rank_score": 0.5}) for item in ranked]

    def ids(items: Sequence[object]) -> list[str]:
        return [item.memory.memory_id for item in items]  # type: ignore[attr-defined]

    assert ids(diversify_sessions(level, 5)) == ids(level)
    # Texts holding no word of the question keep the given order.
    assert ids(lexical_rerank("zebra quartz", level)) == ids(level)


def test_the_table_looks_names_up_by_their_words_alone(projection: MemoryProjection) -> None:
    found = projection.search_by_words("maya", "Viktor", limit=10, filters=SearchFilters())
    assert sorted(hit.memory_id for hit in found) == ["m-choir", "m-job"]
    assert all(hit.similarity == 0.0 and hit.words > 0 for hit in found)
    # Another user's Viktor is theirs; a word no memory holds finds nothing.
    eve = projection.search_by_words("eve", "Viktor", limit=10, filters=SearchFilters())
    assert [hit.memory_id for hit in eve] == ["e-viktor"]
    assert projection.search_by_words("maya", "zebra", limit=10, filters=SearchFilters()) == []


@given(name=st.text(max_size=200))
@hypothesis_settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_name_a_memory_holds_is_search_text_never_syntax_and_stays_with_its_user(
    projection: MemoryProjection, name: str
) -> None:
    # A hop's lookup is made of names taken from the user's own memories: any text at all.
    for user, prefix in (("maya", "m-"), ("eve", "e-")):
        found = projection.search_by_words(user, f"{name} Viktor", limit=20, filters=SearchFilters())
        assert found and all(hit.memory_id.startswith(prefix) for hit in found)
    [hit] = projection.search("maya", "choir Viktor", limit=1)
    led = Retriever(projection, EXPANDING, clock=lambda: NOW)
    expanded = expand_by_entities(
        led._search_by_names, "maya", "choir", [replace(hit, entities=(name, "Viktor"))],
        SearchFilters(),
    )
    assert all(memory.memory_id.startswith("m-") for memory in expanded.hits)


def test_a_session_cap_never_lifts_a_memory_over_the_one_that_led_to_it(
    projection: MemoryProjection,
) -> None:
    crowded, other = crowded_and_other(projection, "work busy tired met choir")
    # The crowded session's third memory led to another session's memory, just below it.
    lead = replace(crowded[1], memory=replace(crowded[1].memory, memory_id="lead"), rank_score=0.8)
    given = [
        replace(crowded[0], rank_score=0.9), replace(crowded[1], rank_score=0.85), lead,
        replace(other, rank_score=0.79),
    ]
    found = other.memory.memory_id
    order = [item.memory.memory_id for item in diversify_sessions(given, 2, {found: "lead"})]
    assert order.index("lead") < order.index(found)
    # Without the link the other session's memory takes its place first.
    order = [item.memory.memory_id for item in diversify_sessions(given, 2)]
    assert order.index(found) < order.index("lead")


def test_a_session_cap_never_holds_back_a_statement(projection: MemoryProjection) -> None:
    session, other = crowded_and_other(projection, "work busy tired met")
    crowded = session[0]
    fact = replace(crowded.memory, memory_id="the-fact", memory_type="fact")
    given = [
        replace(crowded, rank_score=0.9),
        replace(crowded, memory=replace(crowded.memory, memory_id="again"), rank_score=0.9),
        replace(crowded, memory=fact, rank_score=0.85),
        replace(other, rank_score=0.8),
    ]
    # The session's third memory, a fact, keeps its place; a third episode would wait.
    assert [i.memory.memory_id for i in diversify_sessions(given, 2)][2] == "the-fact"
    given[2] = replace(given[2], memory=replace(fact, memory_type="episode"))
    assert [i.memory.memory_id for i in diversify_sessions(given, 2)][2] == other.memory.memory_id


def citing(projection: MemoryProjection, cited: Sequence[tuple[str, ...]]) -> list[RankedMemory]:
    """Ranked hits of the choir search, best first, citing ``cited`` in order (scores
    falling)."""
    hits = projection.search("maya", "choir work met", limit=len(cited))
    ranked = rank(hits, Retriever(projection, PLAIN).weights, NOW)
    return [
        replace(item, memory=replace(item.memory, source_event_ids=turns), rank_score=0.9 - n / 100)
        for n, (item, turns) in enumerate(zip(ranked, cited, strict=True))
    ]


def test_a_hit_that_shows_only_turns_shown_above_waits_below_those_that_show_new_ones(
    projection: MemoryProjection,
) -> None:
    # Episodes of turns 2 and 3 (each citing the turns around it), a fact of turn 2, then
    # the episode of turn 9: the fact shows nothing new and waits below turn 9's.
    given = citing(projection, [("t2", "t1", "t3"), ("t3", "t2", "t4"), ("t2",), ("t9", "t8")])
    order = new_turns_first(given)
    assert [item.memory.source_event_ids[0] for item in order] == ["t2", "t3", "t9", "t2"]
    assert order[-1].memory is given[2].memory
    # Scores stay best first: the fact waits with at most turn 9's score.
    assert order[-1].rank_score == order[-2].rank_score < given[2].rank_score
    # The fact of a new value placed above the stale turn it replaced never waits.
    given[2] = replace(given[2], replaces="the-old-value")
    assert [item.memory for item in new_turns_first(given)] == [item.memory for item in given]


@given(cited=st.lists(st.lists(st.sampled_from("abcdefg"), max_size=3), min_size=1, max_size=7))
@hypothesis_settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_new_turns_first_only_moves_what_shows_nothing_new_to_the_end(
    projection: MemoryProjection, cited: list[list[str]]
) -> None:
    given = citing(projection, [tuple(turns) for turns in cited])
    order = new_turns_first(given)
    memories = [item.memory for item in given]
    assert sorted(id(item.memory) for item in order) == sorted(map(id, memories))
    scores = [item.rank_score for item in order]
    assert scores == sorted(scores, reverse=True)
    shown: set[str] = set()
    at = 0  # the first hit that shows nothing new: every one after it shows nothing new
    while at < len(order):
        turns = set(order[at].memory.source_event_ids)
        if turns and turns <= shown:
            break
        shown |= turns
        at += 1
    assert all(set(item.memory.source_event_ids) <= shown for item in order[at:])
    assert all(item.memory.source_event_ids for item in order[at:])
    # Each part keeps the given order.
    for part in (order[:at], order[at:]):
        indexes = [memories.index(item.memory) for item in part]
        assert indexes == sorted(indexes)


def test_a_name_said_in_many_sessions_leads_to_less_than_one_said_in_one(
    projection: MemoryProjection,
) -> None:
    # Tom is named in one more session than Viktor (a second Tom memory in s3 and s4).
    [choir] = projection.search("maya", "choir Viktor", limit=1)
    lead = replace(choir, entities=("Viktor", "Tom"), score=0.8)
    calls: list[str] = []

    def search(user: str, names: str, limit: int, filters: SearchFilters) -> list[MemoryHit]:
        calls.append(names)
        base = projection.search_by_words(user, "Viktor Tom", limit=limit, filters=filters)
        extra = [
            replace(hit, memory_id=f"tom-{n}", session_id=f"s{n + 6}", content="Tom said hi.",
                    entities=("Tom",))
            for n, hit in enumerate(base[:2])
        ]
        return [*base, *extra]

    expanded = expand_by_entities(search, "maya", "choir", [lead], SearchFilters())
    scores = {hit.memory_id: hit.score for hit in expanded.hits}
    # Viktor: one other session (s2), full weight; Tom: three other sessions, a third of it.
    assert scores["m-job"] == pytest.approx(0.8 * 0.9)
    assert scores["tom-0"] == pytest.approx(0.8 * 0.9 / 3)
