"""Memory decisions made again (a request re-delivered after a crash) on a real LanceDB
projection with the real MiniLM embedder: the same events as the first time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memstream.models.decisions import ExistingMemory
from memstream.models.events.envelope import Event
from memstream.models.events.memory import (
    Claim,
    ExtractionRecorded,
    MemoryAdded,
    MemoryCandidate,
    MemoryChange,
)
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import MemoryProjection, SourcePosition, embedded_texts
from memstream.streams.agents.decisions import MemoryDecider

T0 = datetime(2026, 11, 2, 9, tzinfo=UTC)


@pytest.fixture(scope="module")
def minilm() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(threads=1)


#: What the facts of these tests assert: (attribute, value) by content.
CLAIMS = {
    "User lives in Lisbon.": ("home", "Lisbon"),
    "User moved to Porto.": ("home", "Porto"),
    "User works at Acme.": ("employer", "Acme"),
}


def extraction(name: str, hours: int, *facts: str) -> ExtractionRecorded:
    at = T0 + timedelta(hours=hours)
    return ExtractionRecorded(
        event_id=f"ext-{name}",
        user_id="alice",
        session_id=name,
        occurred_at=at,
        consolidation_event_id=f"span-{name}",
        extractor="offline",
        extractor_version="1",
        candidates=tuple(
            MemoryCandidate(
                memory_type="fact", content=fact, importance=0.6,
                claim=Claim(subject="User", attribute=CLAIMS[fact][0], value=CLAIMS[fact][1],
                            valid_from=at - timedelta(minutes=5)) if fact in CLAIMS else None,
            )
            for fact in facts
        ),
    )


class Log:
    """The memories topic of one partition, projected as it grows."""

    def __init__(self, projection: MemoryProjection) -> None:
        self.projection = projection
        self.offset = 0

    def publish(self, events: Sequence[Event]) -> None:
        batch = []
        for event in events:
            assert isinstance(event, MemoryAdded | MemoryChange)
            batch.append((event, SourcePosition("t.memories", 0, self.offset)))
            self.offset += 1
        self.projection.apply(batch)


def test_a_request_decided_again_after_later_ones_were_projected_gets_the_same_events(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    projection = MemoryProjection(tmp_path / "lancedb", minilm)
    log = Log(projection)
    first = MemoryDecider(projection, minilm)
    lisbon = extraction("a", 0, "User lives in Lisbon.", "User works at Acme.")
    again = extraction("b", 1, "User lives in Lisbon.")
    porto = extraction("c", 2, "User moved to Porto.", "User works at Acme.")
    decided = {}
    for recorded in (lisbon, again, porto):
        decided[recorded.event_id] = first.decide(recorded)
        log.publish(decided[recorded.event_id])
    # What the first run did: add two, reinforce Lisbon, supersede it with Porto and
    # reinforce Acme.
    assert [e.type for e in decided["ext-a"]] == ["memory_added", "memory_added"]
    assert [e.type for e in decided["ext-b"]] == ["memory_reinforced"]
    assert [e.type for e in decided["ext-c"]] == [
        "memory_added", "memory_superseded", "memory_reinforced",
    ]

    # A restarted worker (a new decider, nothing in memory) gets the requests again: the
    # projection now holds their own memories, Lisbon superseded and Acme reinforced.
    restarted = MemoryDecider(projection, minilm)
    for recorded in (lisbon, again, porto):
        assert restarted.decide(recorded) == decided[recorded.event_id], recorded.event_id
    # The same again in the other order (a rebalance hands them over out of turn).
    other = MemoryDecider(projection, minilm)
    for recorded in (porto, again, lisbon):
        assert other.decide(recorded) == decided[recorded.event_id], recorded.event_id
    # Re-published, they change nothing: the reinforcements count once.
    before = {m.memory_id: m.reinforcement_count for m in projection.list_memories("alice", include_inactive=True)}
    for events in decided.values():
        log.publish(events)
    after = {m.memory_id: m.reinforcement_count for m in projection.list_memories("alice", include_inactive=True)}
    assert after == before and sum(after.values()) == 2


def test_the_decider_holds_a_bounded_number_of_recent_memories() -> None:
    decider = MemoryDecider(projection=None, embedder=None, recent_kept=5, recent_per_user=3)  # type: ignore[arg-type]
    vector = np.zeros(4, dtype=np.float32)

    def memories(user: str, count: int) -> list[tuple[ExistingMemory, np.ndarray, datetime]]:
        return [(ExistingMemory(f"{user}-{i}", "fact", "x", 0.0), vector, T0) for i in range(count)]

    decider._remember("ann", memories("ann", 4))  # only the newest 3 of a user
    decider._remember("bob", memories("bob", 2))
    assert {u: len(m) for u, m in decider._recent.items()} == {"ann": 3, "bob": 2}
    decider._remember("cho", memories("cho", 1))  # 6 > 5: the user longest without one goes
    assert set(decider._recent) == {"bob", "cho"}
    decider._remember("bob", memories("bob", 1))
    decider._remember("dan", memories("dan", 2))  # cho is now the oldest
    assert set(decider._recent) == {"bob", "dan"}


def test_an_added_memory_carries_the_vector_of_what_it_is_found_by(tmp_path: Path) -> None:
    from fakes import FakeEmbedder

    from memstream.models.vectors import unpack_vector
    from memstream.projections.embedder import embed_groups

    embedder = FakeEmbedder()
    projection = MemoryProjection(tmp_path / "lancedb", embedder)
    episode = MemoryCandidate(
        memory_type="episode", content="I live in Lisbon.", importance=0.4,
        context="Monday 2 November 2026\nUser: I live in Lisbon.\nAssistant: Lovely city.",
    )
    recorded = extraction("a", 0, "User lives in Lisbon.").model_copy(
        update={"candidates": (*extraction("a", 0, "User lives in Lisbon.").candidates, episode)}
    )
    added = MemoryDecider(projection, embedder).decide(recorded)
    assert [e.type for e in added] == ["memory_added", "memory_added"]
    for event in added:
        assert isinstance(event, MemoryAdded) and event.vector is not None
        assert event.embedding_model == embedder.model_id
        # Its words' vector, and an episode's the mean of its words' and its context's.
        expected = embed_groups(embedder.embed, [embedded_texts(event)])[0]
        assert np.array_equal(np.frombuffer(unpack_vector(event.vector), np.float32), expected)
    # The projection takes them as they are: nothing embedded on the way in.
    embedder.calls.clear()
    Log(projection).publish(added)
    assert embedder.calls == [] and projection.vectors_embedded == 0


def test_a_fact_said_again_is_reinforced_without_being_embedded(tmp_path: Path) -> None:
    from fakes import FakeEmbedder

    embedder = FakeEmbedder()
    projection = MemoryProjection(tmp_path / "lancedb", embedder)
    log = Log(projection)
    decider = MemoryDecider(projection, embedder)
    said = "User's sister is called Clara."
    others = [f"User talked about {topic}." for topic in ("sailing", "tax forms", "jazz", "chess")]
    for hours, other in enumerate(others):
        log.publish(decider.decide(extraction(f"s{hours}", hours, other, said.upper())))
    clara = [m for m in projection.list_memories("alice") if m.content.lower() == said.lower()]
    assert len(clara) == 1 and clara[0].reinforcement_count == len(others) - 1
    # Embedded: each new fact once, and the fact said again only the first time.
    assert sum(len(texts) for texts in embedder.calls) == len(others) + 1
    # A new decider (after a restart) finds it in the projection alone.
    embedder.calls.clear()
    again = MemoryDecider(projection, embedder).decide(extraction("late", 99, said))
    assert [e.type for e in again] == ["memory_reinforced"] and embedder.calls == []


def test_an_episode_is_decided_by_its_words_in_their_context(tmp_path: Path) -> None:
    # An episode is its words in their context (the turns around it, which it cites): the
    # same line said again is compared by its vector, which embeds that context, never
    # reinforced by its words alone.
    from fakes import FakeEmbedder

    embedder = FakeEmbedder()
    projection = MemoryProjection(tmp_path / "lancedb", embedder)
    log = Log(projection)
    decider = MemoryDecider(projection, embedder)
    said = "Anything new with you?"

    def episode(name: str, hours: int, reply: str) -> ExtractionRecorded:
        candidate = MemoryCandidate(
            memory_type="episode", content=said, importance=0.3,
            context=f"User: {said}\nTom: {reply}",
        )
        return extraction(name, hours).model_copy(update={"candidates": (candidate,)})

    log.publish(decider.decide(episode("a", 0, "I started working at Bosch last week.")))
    embedder.calls.clear()
    decider.decide(episode("b", 1, "We adopted a puppy called Rex!"))
    assert embedder.calls == [[f"User: {said}\nTom: We adopted a puppy called Rex!"]]


def test_decisions_of_a_batch_prefetched_across_users_are_the_ones_made_one_at_a_time(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    # The extraction agent embeds a batch's texts in one call across sessions and users
    # (prefetch), then decides each extraction in order: the events must be those of
    # deciding them one at a time, embedding as it goes (a text's vector does not depend on
    # the other texts of a call).
    def episode(line: str, reply: str) -> MemoryCandidate:
        return MemoryCandidate(
            memory_type="episode", content=line, importance=0.3,
            context=f"User: {line}\nTom: {reply}",
        )

    def of(user: str, name: str, hours: int, *candidates: MemoryCandidate) -> ExtractionRecorded:
        base = extraction(name, hours)
        return base.model_copy(update={
            "event_id": f"ext-{user}-{name}", "user_id": user, "candidates": candidates,
        })

    facts = extraction("f", 0, "User lives in Lisbon.", "User works at Acme.").candidates
    batch = [
        of("alice", "a", 0, *facts, episode("Anything new?", "A puppy!")),
        of("bob", "a", 0, episode("Anything new?", "A puppy!"), *facts),
        # Said again by alice within the batch: reinforced by its words, by the memories
        # that the first extraction of the batch added.
        of("alice", "b", 1, facts[1], episode("How was Porto?", "We sold the boat in March.")),
        of("bob", "b", 2, *extraction("g", 2, "User moved to Porto.").candidates),
    ]
    alone = MemoryDecider(MemoryProjection(tmp_path / "alone", minilm), minilm)
    expected = [alone.decide(recorded) for recorded in batch]

    class Counting:
        model_id, dimensions = minilm.model_id, minilm.dimensions

        def __init__(self) -> None:
            self.calls: list[list[str]] = []

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            self.calls.append(list(texts))
            return minilm.embed(texts)

    counting = Counting()
    batched = MemoryDecider(MemoryProjection(tmp_path / "batched", minilm), counting)
    prefetched = batched.prefetch(batch)
    assert len(counting.calls[-1]) == prefetched
    counting.calls.clear()
    assert [batched.decide(recorded) for recorded in batch] == expected
    # Every episode's vector came from that one call, and every candidate's of each user's
    # first extraction here; embedded now: the claims' attribute keys (once each, for their
    # similarity) and the new claim of bob's second extraction (planned when it is decided).
    keys = {c.claim.attribute for r in batch for c in r.candidates if c.claim}
    porto = set(embedded_texts(batch[3].candidates[0]))
    assert {text for call in counting.calls for text in call} <= keys | porto
    assert [e.type for e in expected[2]] == ["memory_reinforced", "memory_added"]


def test_a_search_text_seen_before_is_not_embedded_again_and_decides_the_same(tmp_path: Path) -> None:
    # The same words in the same context (a chit-chat exchange repeated): the decider keeps
    # the vector of each search text it embedded, which is the vector embedding would give.
    from fakes import FakeEmbedder

    embedder = FakeEmbedder()
    candidate = MemoryCandidate(
        memory_type="episode", content="Same here, honestly.", importance=0.3,
        context="Tom: Long week.\nUser: Same here, honestly.",
    )
    requests = [
        extraction(name, hours).model_copy(update={"candidates": (candidate,)})
        for name, hours in (("a", 0), ("b", 1))
    ]
    keeping = MemoryDecider(MemoryProjection(tmp_path / "keeping", embedder), embedder)
    decided = [keeping.decide(r) for r in requests]
    assert embedder.calls == [list(embedded_texts(candidate))]
    assert [e.type for e in decided[1]] == ["memory_reinforced"]
    embedder.calls.clear()
    keeping_none = MemoryDecider(
        MemoryProjection(tmp_path / "none", embedder), embedder, vectors_kept=0
    )
    assert [keeping_none.decide(r) for r in requests] == decided
    assert len(embedder.calls) == 2
