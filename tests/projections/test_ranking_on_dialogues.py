"""The client's ranking on the dialogue benchmark's data: never fewer relevant memories than
the projection's own hybrid search (but for stale ones, which give their place to what
replaced them), and above the raw-turn search a user could write."""

from __future__ import annotations

from pathlib import Path

import pytest
from dialogue_recall import conversations, raw_turn_baseline
from dialogues import Dialogue, generate
from quality import build_extracted

from memstream.models.settings import Settings
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import MemoryHit, MemoryProjection
from memstream.projections.retrieval import Retriever

LIMIT = 10


@pytest.fixture(scope="module")
def dialogues() -> list[Dialogue]:
    return generate(3, 8, 16, seed=5)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, dialogues: list[Dialogue]) -> MemoryProjection:
    embedder = MiniLMOnnxEmbedder()
    projection = MemoryProjection(tmp_path_factory.mktemp("memories"), embedder)
    build_extracted(conversations(dialogues), projection, embedder)
    return projection


def hits_by_id(hits: list[MemoryHit]) -> dict[str, MemoryHit]:
    return {hit.memory_id: hit for hit in hits}


def found(cited: list[tuple[str, ...]], evidence: tuple[str, ...]) -> int:
    seen = {turn for hit in cited for turn in hit}
    return sum(turn in seen for turn in evidence)


def test_the_ranking_never_finds_fewer_evidence_turns_than_the_search_it_wraps(
    built: MemoryProjection, dialogues: list[Dialogue]
) -> None:
    last = max(turn.at for dialogue in dialogues for turn in dialogue.turns)
    # Priors weighed far more than by default, so the test would catch a ranking that
    # trades a memory the search found for one it did not.
    # The cross-session steps off: expansion, the session cap and new turns first add what
    # the search did not find, on purpose (tests/projections/test_cross_session_recall.py),
    # and reading the user's own name searches another question (test_own_names.py).
    plain = Settings(recall_entity_expansion=False, recall_session_cap=0, recall_own_names=False,
                     recall_new_turns_first=False)
    heavy = plain.model_copy(update={"weight_importance": 0.5, "weight_recency": 0.5,
                                     "weight_use": 0.2})
    rankings = [Retriever(built, settings, clock=lambda: last) for settings in (plain, heavy)]
    asked = 0
    for dialogue in dialogues:
        for question in dialogue.questions:
            hits = built.search(dialogue.user_id, question.question, limit=LIMIT)
            searched = found([hit.source_event_ids for hit in hits], question.evidence)
            for retriever in rankings:
                ranked = retriever.search(dialogue.user_id, question.question, limit=LIMIT)
                cited = [item.memory.source_event_ids for item in ranked]
                # A stale hit may give its place to what replaced it, and only a stale hit.
                ids = {item.memory.memory_id for item in ranked}
                added = [item for item in ranked if item.memory.memory_id not in hits_by_id(hits)]
                dropped = [h for h in hits if h.memory_id not in ids]
                assert all(item.replaces is not None for item in added)
                assert all(h.stale_at(last) for h in dropped)
                lost = found([h.source_event_ids for h in dropped], question.evidence)
                assert found(cited, question.evidence) + lost >= searched, question.question
                assert len(ranked) == len(hits)
                assert all(0.0 <= item.rank_score <= 1.0 for item in ranked)
            asked += 1
    assert asked >= 20


def test_the_client_ranking_finds_more_evidence_than_raw_turn_search(
    built: MemoryProjection, dialogues: list[Dialogue], tmp_path: Path
) -> None:
    baseline = raw_turn_baseline(tmp_path, dialogues, built.embedder)
    retriever = Retriever(built, Settings())
    ours = theirs = 0
    for dialogue in dialogues:
        for question in dialogue.questions:
            ranked = retriever.search(dialogue.user_id, question.question, limit=LIMIT)
            ours += found([item.memory.source_event_ids for item in ranked], question.evidence)
            raw = baseline(dialogue, question.question)[:LIMIT]
            theirs += found([hit.cited for hit in raw], question.evidence)
    assert ours > theirs
