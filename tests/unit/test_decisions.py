"""Memory decisions: a candidate repeats a memory (duplicate) or is added. Whether a fact
changes another is decided by claims (tests/unit/test_beliefs.py), never by the words."""

from __future__ import annotations

from memstream.models.decisions import ExistingMemory, decide
from memstream.models.events.memory import MemoryCandidate


def candidate(content: str, memory_type: str = "fact") -> MemoryCandidate:
    return MemoryCandidate(memory_type=memory_type, content=content, importance=0.7)  # type: ignore[arg-type]


def test_the_same_statement_again_is_a_duplicate_of_the_existing_memory() -> None:
    existing = [ExistingMemory("m1", "preference", "User prefers walking tours.", 0.99)]
    decision = decide(candidate("user prefers walking tours", "preference"), existing)
    assert (decision.kind, decision.target) == ("duplicate", "m1")


def test_a_near_identical_statement_reinforces_instead_of_adding() -> None:
    existing = [ExistingMemory("m1", "fact", "User lives in Berlin", 0.95)]
    assert decide(candidate("User lives in Berlin, Germany"), existing).kind == "duplicate"


def test_a_similar_statement_of_another_value_is_added_never_superseded_by_its_words() -> None:
    existing = [ExistingMemory("m1", "fact", "User's budget is about 1500 euros", 0.8)]
    assert decide(candidate("User's budget is now 2000 euros"), existing).kind == "add"


def test_different_statements_are_added() -> None:
    existing = [ExistingMemory("m1", "preference", "User prefers window seats", 0.3)]
    assert decide(candidate("User prefers walking tours", "preference"), existing).kind == "add"
    existing = [ExistingMemory("m2", "fact", "User lives in Berlin", 0.6)]
    assert decide(candidate("User works at Siemens"), existing).kind == "add"


def test_episodes_and_summaries_repeat_only_word_for_word() -> None:
    existing = [ExistingMemory("m1", "episode", "My budget is 1500 euros", 0.95)]
    assert decide(candidate("My budget is 1500 euros, ok", "episode"), existing).kind == "add"
    existing = [ExistingMemory("m2", "episode", "My budget is 1500 euros", 0.99)]
    assert decide(candidate("my budget is 1500 euros!", "episode"), existing).kind == "duplicate"


def test_nothing_existing_means_add() -> None:
    assert decide(candidate("User lives in Oslo"), []).kind == "add"
