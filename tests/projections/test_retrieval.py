"""The retriever, on a real LanceDB table in tmp_path with the real MiniLM embedder."""

from __future__ import annotations

import itertools
import math
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lancedb
import pytest

from memstream.models.events.memory import (
    MemoriesRetrieved,
    MemoryAdded,
    MemoryDeleted,
    MemorySuperseded,
    RetrievedMemory,
)
from memstream.models.session import estimate_tokens
from memstream.models.settings import Settings
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import (
    MemoryHit,
    MemoryProjection,
    SearchFilters,
    SourcePosition,
)
from memstream.projections.prompt_context import LEXICAL_WEIGHT
from memstream.projections.retrieval import (
    QUERY_MESSAGE_CHARS,
    QUERY_TURN_CHARS,
    RankedMemory,
    RankWeights,
    Retrieval,
    Retriever,
    build_query,
    default_quotas,
    fill_quotas,
    rank,
    render_context,
)

MEMORIES = "memstream.memories"
ACCESSES = "memstream.accesses"
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SETTINGS = Settings()
BIG_BUDGET = 100_000

_offsets = itertools.count()


@pytest.fixture(scope="module")
def minilm() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(threads=1)


@pytest.fixture
def projection(tmp_path: Path, minilm: MiniLMOnnxEmbedder) -> MemoryProjection:
    return MemoryProjection(tmp_path / "lancedb", minilm)


@pytest.fixture
def retriever(projection: MemoryProjection) -> Retriever:
    return Retriever(projection, SETTINGS, clock=lambda: NOW)


def added(
    memory_id: str,
    content: str,
    *,
    memory_type: str = "fact",
    user_id: str = "alice",
    session_id: str = "s1",
    days_ago: float = 1.0,
    importance: float = 0.5,
) -> MemoryAdded:
    return MemoryAdded(
        event_id=f"evt-{memory_id}",
        user_id=user_id,
        session_id=session_id,
        occurred_at=NOW - timedelta(days=days_ago),
        memory_id=memory_id,
        memory_type=memory_type,
        content=content,
        importance=importance,
        extraction_event_id=f"ext-{memory_id}",
        extractor="test/1",
    )


def project(
    projection: MemoryProjection,
    events: Iterable[MemoryAdded | MemorySuperseded | MemoryDeleted],
) -> None:
    batch = [(event, SourcePosition(MEMORIES, 0, next(_offsets))) for event in events]
    projection.apply(batch)


def access(projection: MemoryProjection, user_id: str, memory_id: str, times: int) -> None:
    """Count ``times`` retrievals of one memory, as the projector would from the topic."""
    batch = [
        (
            MemoriesRetrieved(
                event_id=f"acc-{uuid.uuid4()}",
                user_id=user_id,
                session_id="s9",
                occurred_at=NOW - timedelta(minutes=5),
                query="q",
                memories=(RetrievedMemory(memory_id=memory_id, score=0.5),),
            ),
            SourcePosition(ACCESSES, 0, next(_offsets)),
        )
        for _ in range(times)
    ]
    assert projection.apply_accesses(batch) == 1  # one row, counted `times` times


def ids(retrieval: Retrieval, *, in_context: bool = False) -> list[str]:
    items = retrieval.in_context if in_context else retrieval.items
    return [item.memory.memory_id for item in items]


def item(retrieval: Retrieval, memory_id: str) -> RankedMemory:
    (found,) = [i for i in retrieval.items if i.memory.memory_id == memory_id]
    return found


# Unrelated memories, so relevance has a spread to be rescaled over.
FILLERS = [
    added(f"f-{i}", text, days_ago=10)
    for i, text in enumerate(
        [
            "User plays the cello in an amateur orchestra",
            "User's favourite board game is Carcassonne",
            "User repaired a bicycle chain last weekend",
            "User grows tomatoes on the balcony",
            "User collects vintage postcards from Japan",
            "User is learning to bake sourdough bread",
            "User watches Formula 1 races on Sundays",
            "User's car is a blue hatchback",
        ]
    )
]


# --- the query --------------------------------------------------------------------------------


def test_query_leads_with_the_message_then_recent_turns_newest_first_bounded() -> None:
    turns = ["oldest turn", "middle turn", "latest   turn\nwith a newline"]
    assert build_query("  and   her name? ", turns) == (
        "and her name?\nlatest turn with a newline\nmiddle turn"
    )
    long = build_query("m" * 50_000, ["t" * 50_000] * 10)
    assert long.startswith("m" * QUERY_MESSAGE_CHARS + "\n")
    assert len(long) <= QUERY_MESSAGE_CHARS + 2 * (QUERY_TURN_CHARS + 1)
    assert build_query("", ["only context"]) == "only context"
    assert build_query("lone \ud800 surrogate") == "lone ? surrogate"
    with pytest.raises(TypeError):
        build_query("q", "a string is not a list of turns")


def test_recent_turns_steer_a_vague_message(
    projection: MemoryProjection, retriever: Retriever
) -> None:
    project(projection, [added("m-sister", "User's sister is called Clara"), *FILLERS])
    found = retriever.retrieve(
        "alice", "what was her name again?", recent_turns=["Tell me about my sister"],
        quotas={"fact": 1},
    )
    assert ids(found) == ["m-sister"]


# --- quotas and ranking -----------------------------------------------------------------------


def test_each_type_fills_at_most_its_quota_and_other_types_get_no_slot(
    projection: MemoryProjection, retriever: Retriever
) -> None:
    per_type = {
        "preference": 5, "fact": 8, "summary": 4, "episode": 5, "correction": 3, "entity": 3
    }
    project(
        projection,
        [
            added(f"{t}-{i}", f"{t} number {i} about travelling to Lisbon", memory_type=t)
            for t, n in per_type.items()
            for i in range(n)
        ],
    )
    found = retriever.retrieve("alice", "trips to Lisbon", token_budget=BIG_BUDGET)
    counts = Counter(i.memory.memory_type for i in found.items)
    assert counts == {"preference": 3, "fact": 5, "summary": 2, "episode": 3, "correction": 2}
    assert all(i.in_context for i in found.items)

    found = retriever.retrieve(
        "alice", "trips to Lisbon", token_budget=BIG_BUDGET,
        quotas={"fact": 1, "entity": 2, "episode": 0, "learned_pattern": 4},
    )
    counts = Counter(i.memory.memory_type for i in found.items)
    assert counts == {"preference": 3, "fact": 1, "summary": 2, "correction": 2, "entity": 2}
    assert "## People, places and things" in found.context
    scores = [i.rank_score for i in found.items]
    assert scores == sorted(scores, reverse=True)

    with pytest.raises(ValueError):
        retriever.retrieve("alice", "trips", quotas={"fact": -1})


def test_a_relevant_fact_beats_an_irrelevant_important_one(projection: MemoryProjection) -> None:
    project(
        projection,
        [
            added("m-peanut", "User is allergic to peanuts", importance=0.3, days_ago=200),
            added("m-name", "User's name is Alexandra", importance=1.0, days_ago=0.1),
            added("m-job", "User works at Siemens as an engineer", importance=1.0, days_ago=0.1),
            *FILLERS,
        ],
    )
    projection.refresh_indexes()
    reranked = Retriever(projection, Settings(recall_rerank="lexical"), clock=lambda: NOW)
    found = reranked.retrieve("alice", "what am I allergic to?", quotas={"fact": 1})
    assert ids(found) == ["m-peanut"]
    top = found.items[0]
    # Relevance is the search's own score of the memory, not a rescaling within the found.
    assert top.relevance == pytest.approx(top.memory.score) and 0 < top.relevance < 1
    w = SETTINGS
    weighted = (
        w.weight_relevance * top.relevance + w.weight_importance * top.importance
        + w.weight_recency * top.recency + w.weight_use * top.use
    ) / (w.weight_relevance + w.weight_importance + w.weight_recency + w.weight_use)
    # The lexical rerank adds the share of the question's words it holds: "allergic", the
    # one content word of the question, is in the memory.
    assert top.word_share == 1.0
    assert top.rank_score == pytest.approx((weighted + LEXICAL_WEIGHT) / (1 + LEXICAL_WEIGHT))
    # The "why ranked" view shows each weight next to the component's value.
    assert top.explain().startswith(
        f"{top.rank_score:.3f} = ((1.00 x relevance {top.relevance:.2f} [meaning "
        f"{top.memory.similarity:.2f}, words {top.memory.words:.2f}] + 0.02 x importance 0.30"
    )
    assert top.explain().endswith(" + 0.10 x the question's words 1.00) / 1.10")
    assert found.explain().splitlines()[0].startswith(" 1 * [fact]")


def test_recency_comes_from_event_time_not_from_access(
    projection: MemoryProjection, retriever: Retriever
) -> None:
    text = "User is planning a trip to Kyoto in autumn"
    project(
        projection,
        [added("m-old", text, days_ago=300), added("m-new", text, days_ago=2), *FILLERS],
    )
    projection.refresh_indexes()
    before = retriever.retrieve("alice", "Kyoto trip plans", quotas={"fact": 3})
    assert ids(before)[:2] == ["m-new", "m-old"]
    assert item(before, "m-old").recency == pytest.approx(0.5 ** (300 / 30))
    assert item(before, "m-new").recency == pytest.approx(0.5 ** (2 / 30))

    # Retrieved a moment ago, many times: more used, not more recent.
    access(projection, "alice", "m-old", times=6)
    after = retriever.retrieve("alice", "Kyoto trip plans", quotas={"fact": 3})
    old = item(after, "m-old")
    assert old.memory.access_count == 6
    assert old.memory.last_accessed_at is not None
    assert old.recency == pytest.approx(0.5 ** (300 / 30))
    assert old.use == pytest.approx(math.log1p(6) / math.log1p(SETTINGS.decay_use_saturation))
    assert ids(after)[:2] == ["m-new", "m-old"]


def test_use_raises_rank(projection: MemoryProjection, retriever: Retriever) -> None:
    text = "User keeps a sourdough starter named Bubbles"
    project(projection, [added("m-a", text), added("m-b", text), *FILLERS[:4]])
    projection.refresh_indexes()
    before = retriever.retrieve("alice", "sourdough starter Bubbles", quotas={"fact": 6})
    second = ids(before)[1]
    assert second in ("m-a", "m-b")
    assert all(i.use == 0.0 for i in before.items)

    access(projection, "alice", second, times=3)
    # Counting the accesses rewrites the row; until the next index refresh its BM25 comes
    # from the unindexed rows' statistics, which differ a little from the index's.
    projection.refresh_indexes()
    after = retriever.retrieve("alice", "sourdough starter Bubbles", quotas={"fact": 6})
    assert ids(after)[0] == second
    boosted = item(after, second)
    use = math.log1p(3) / math.log1p(SETTINGS.decay_use_saturation)
    assert boosted.use == pytest.approx(use)
    total = retriever.weights.total
    assert boosted.rank_score == pytest.approx(
        item(before, second).rank_score + SETTINGS.weight_use * use / total
    )


# --- the current view and filters -------------------------------------------------------------


def test_superseded_and_deleted_memories_never_appear(
    projection: MemoryProjection, retriever: Retriever
) -> None:
    project(
        projection,
        [
            added("m-berlin", "User lives in Berlin", importance=0.9, days_ago=1),
            added("m-munich", "User lives in Munich", importance=0.5, days_ago=40),
            added("m-flat", "User lives in a flat with a balcony", days_ago=1),
            *FILLERS[:3],
        ],
    )
    common = {"user_id": "alice", "session_id": "s2", "occurred_at": NOW}
    project(
        projection,
        [
            MemorySuperseded(
                event_id="sup-1", memory_id="m-berlin", superseded_by="m-munich",
                reason="moved", similarity=0.8, **common,
            ),
            MemoryDeleted(event_id="del-1", memory_id="m-flat", **common),
        ],
    )
    projection.refresh_indexes()
    for filters in (None, SearchFilters(include_inactive=True)):
        found = retriever.retrieve("alice", "where do I live?", filters=filters)
        assert "m-munich" in ids(found)
        assert not {"m-berlin", "m-flat"} & set(ids(found))
        assert "Berlin" not in found.context and "balcony" not in found.context


def test_filters_narrow_by_type_importance_session_and_event_time(
    projection: MemoryProjection, retriever: Retriever
) -> None:
    project(
        projection,
        [
            added("p-1", "User prefers window seats on planes", memory_type="preference",
                  importance=0.8, session_id="s-a", days_ago=50),
            added("p-2", "User prefers night trains to flights", memory_type="preference",
                  importance=0.4, session_id="s-b", days_ago=5),
            added("f-1", "User flies to Oslo next month", importance=0.9, session_id="s-a",
                  days_ago=20),
            added("f-2", "User's passport expires in 2027", importance=0.6, session_id="s-b",
                  days_ago=3),
            added("e-1", "I always get airsick on small planes", memory_type="episode",
                  importance=0.45, session_id="s-c", days_ago=1),
        ],
    )
    question = "how do I like to travel by plane?"

    only_preferences = SearchFilters(memory_types=("preference",))
    found = retriever.retrieve("alice", question, filters=only_preferences)
    assert set(ids(found)) == {"p-1", "p-2"}

    # Unknown types match nothing rather than raising.
    found = retriever.retrieve(
        "alice", question, filters=SearchFilters(memory_types=("fact", "no_such_type"))
    )
    assert set(ids(found)) == {"f-1", "f-2"}
    empty = retriever.retrieve("alice", question, filters=SearchFilters(memory_types=("x",)))
    assert empty.items == () and empty.access_event is None

    found = retriever.retrieve("alice", question, filters=SearchFilters(min_importance=0.6))
    assert set(ids(found)) == {"p-1", "f-1", "f-2"}

    found = retriever.retrieve("alice", question, filters=SearchFilters(session_id="s-b"))
    assert set(ids(found)) == {"p-2", "f-2"}
    assert found.access_event is not None and found.access_event.session_id == "s-b"

    window = SearchFilters(since=NOW - timedelta(days=25), until=NOW - timedelta(days=2))
    found = retriever.retrieve("alice", question, filters=window)
    assert set(ids(found)) == {"p-2", "f-1", "f-2"}


# --- the context and its budget ---------------------------------------------------------------


def test_the_context_never_exceeds_its_budget(
    projection: MemoryProjection, minilm: MiniLMOnnxEmbedder
) -> None:
    project(
        projection,
        [
            added("m-huge", "I told you about my garden. " * 400, memory_type="episode",
                  importance=1.0, days_ago=0.5),
            added("m-garden", "User grows roses in the garden", importance=0.8),
            added("m-herbs", "User prefers growing herbs to flowers", memory_type="preference"),
            added("m-sum", "User and assistant planned a garden layout", memory_type="summary"),
            added("m-fix", "Correction: User's garden faces south", memory_type="correction"),
            added("m-who", "Gardening club", memory_type="entity"),
        ],
    )
    counters: dict[str, Callable[[str], int]] = {
        "estimate_tokens": estimate_tokens, "chars": len, "words": lambda t: len(t.split())
    }
    for name, counter in counters.items():
        retriever = Retriever(projection, SETTINGS, count_tokens=counter, clock=lambda: NOW)
        for budget in (0, 1, 5, 12, 20, 40, 80, 200, 5_000, BIG_BUDGET):
            found = retriever.retrieve(
                "alice", "tell me about my garden", token_budget=budget,
                quotas={"entity": 1, "unheard_of": 2},
            )
            assert found.tokens == counter(found.context) <= budget, (name, budget)
            assert (found.access_event is None) == (found.context == "")
            # A memory too big for the budget is skipped; smaller ones still get in.
            if name != "chars" and 40 <= budget < 5_000:
                assert "m-huge" not in ids(found, in_context=True)
                assert ids(found, in_context=True)
    # The default budget comes from the settings.
    default = Retriever(projection, Settings(memory_context_tokens=30), clock=lambda: NOW)
    assert 0 < default.retrieve("alice", "my garden").tokens <= 30
    with pytest.raises(ValueError):
        default.retrieve("alice", "my garden", token_budget=-1)


def test_sections_have_short_headers_best_section_first() -> None:
    weights = RankWeights.from_settings(SETTINGS)

    def hit(memory_id: str, memory_type: str, score: float, importance: float) -> MemoryHit:
        return MemoryHit(
            memory_id=memory_id, memory_type=memory_type, content=f"{memory_id}\nsecond line",
            importance=importance, created_at=NOW - timedelta(days=3), session_id="s",
            event_id=f"e-{memory_id}", source_event_ids=(), source_topic=MEMORIES,
            source_partition=0, source_offset=0, score=score,
        )

    # A type no version of memstream knows: no KeyError, a header made from its name.
    hits = [
        hit("fact-1", "fact", 0.030, 0.5),
        hit("pattern-1", "learned_pattern", 0.033, 0.9),
        hit("fact-2", "fact", 0.020, 0.5),
        hit("pref-1", "preference", 0.010, 0.5),
    ]
    ranked = rank(hits, weights, NOW)
    chosen = fill_quotas(ranked, {"fact": 5, "learned_pattern": 1, "preference": 1})
    text = render_context(chosen)
    day = f"{NOW - timedelta(days=3):%Y-%m-%d}"
    assert text.split("\n\n") == [
        f"## Learned pattern\n- pattern-1 second line ({day})",
        f"## Facts\n- fact-1 second line ({day})\n- fact-2 second line ({day})",
        f"## Preferences\n- pref-1 second line ({day})",
    ]
    assert fill_quotas(ranked, {"fact": 1}) == [r for r in ranked if r.memory.memory_id == "fact-1"]


# --- the access event: what the caller publishes ----------------------------------------------


def test_the_access_event_names_exactly_the_memories_in_the_context(
    projection: MemoryProjection, retriever: Retriever
) -> None:
    project(
        projection,
        [
            added(f"m-{i}", f"User visited museum number {i} in Vienna", importance=0.3 + i / 20)
            for i in range(8)
        ],
    )
    table = lancedb.connect(projection.db_dir).open_table("memories")
    table_version = table.version  # a read must write nothing
    found = retriever.retrieve(
        "alice", "museums in Vienna", token_budget=40, recent_turns=["we talked about Austria"]
    )
    placed = found.in_context
    assert 0 < len(placed) < len(found.items)  # the budget cut some of the slots
    event = found.access_event
    assert event is not None
    assert [m.memory_id for m in event.memories] == [i.memory.memory_id for i in placed]
    assert [m.score for m in event.memories] == [round(i.rank_score, 6) for i in placed]
    for i in placed:
        assert i.memory.content in found.context
    for i in found.items:
        if not i.in_context:
            assert i.memory.content not in found.context
    assert event.user_id == "alice" and event.session_id == "-"
    assert event.occurred_at == NOW and event.query == found.query
    assert uuid.UUID(event.event_id).version == 4
    again = retriever.retrieve("alice", "museums in Vienna", token_budget=40, session_id="s7")
    assert again.access_event is not None and again.access_event.event_id != event.event_id
    assert again.access_event.session_id == "s7"

    # Nothing written on the read path; the projector counts the event when it comes back.
    table.checkout_latest()
    assert table.version == table_version
    assert all(m.access_count == 0 for m in projection.list_memories("alice"))
    counted = projection.apply_accesses([(event, SourcePosition(ACCESSES, 0, next(_offsets)))])
    assert counted == len(placed)
    counts = {m.memory_id: m.access_count for m in projection.list_memories("alice")}
    assert {m for m, n in counts.items() if n} == {i.memory.memory_id for i in placed}


def test_nothing_found_gives_an_empty_retrieval(
    projection: MemoryProjection, retriever: Retriever
) -> None:
    assert retriever.retrieve("alice", "anything").items == ()  # no table yet
    project(projection, [added("m-1", "User likes jazz")])
    for found in (
        retriever.retrieve("nobody", "jazz"),
        retriever.retrieve("alice", "   "),
        retriever.retrieve("alice", "jazz", quotas=dict.fromkeys(default_quotas(SETTINGS), 0)),
    ):
        assert (found.items, found.context, found.tokens, found.access_event) == ((), "", 0, None)


def test_a_clock_without_timezone_is_refused(projection: MemoryProjection) -> None:
    naive = Retriever(projection, SETTINGS, clock=lambda: datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        naive.retrieve("alice", "jazz")


# --- isolation --------------------------------------------------------------------------------

HOSTILE = [
    "x' OR '1'='1",
    "x' OR '1'='1' --",
    "alice' OR user_id != '",
    "%",
    "*",
    "_",
    "alice%",
    '") OR true; DROP TABLE memories; --',
    "content:*",
    "\\",
    "(",
    "alice\u0000",
    "\ud800",
    "a" * 100_000,
]


@pytest.mark.parametrize("with_fts", [False, True], ids=["vector-only", "hybrid"])
def test_hostile_ids_and_queries_never_reach_another_users_memories(
    projection: MemoryProjection, retriever: Retriever, with_fts: bool
) -> None:
    secrets = {
        "a-1": "User's bank PIN hint is the cat's birthday",
        "a-2": "User's sister is called Clara",
        "a-3": "User is allergic to penicillin",
    }
    project(projection, [added(m, text, user_id="alice") for m, text in secrets.items()])
    project(projection, [added("b-1", "User likes sailing", user_id="bob")])
    if with_fts:
        projection.refresh_indexes()
    queries = [*HOSTILE, "bank PIN", "sister Clara", "penicillin allergy"]
    for hostile_id in HOSTILE:
        for query in queries:
            found = retriever.retrieve(hostile_id, query, token_budget=BIG_BUDGET)
            assert found.items == () and found.access_event is None, (hostile_id[:30], query[:30])
    for query in queries:
        found = retriever.retrieve(
            "bob", query, token_budget=BIG_BUDGET, recent_turns=HOSTILE,
            filters=SearchFilters(session_id=query),
        )
        assert found.items == ()  # bob has no memory in a session named like that
        found = retriever.retrieve("bob", query, token_budget=BIG_BUDGET, recent_turns=HOSTILE)
        assert ids(found) == ["b-1"], query[:30]
        assert not any(secret in found.context for secret in secrets.values())
        assert found.access_event is not None and found.access_event.user_id == "bob"
