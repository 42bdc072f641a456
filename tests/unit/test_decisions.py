"""Memory decisions: duplicate, supersede or add."""

from __future__ import annotations

import pytest

from memstream.models.decisions import ExistingMemory, decide, slot
from memstream.models.events import MemoryCandidate


def candidate(content: str, memory_type: str = "fact") -> MemoryCandidate:
    return MemoryCandidate(memory_type=memory_type, content=content, importance=0.7)  # type: ignore[arg-type]


def test_the_same_statement_again_is_a_duplicate_of_the_existing_memory() -> None:
    existing = [ExistingMemory("m1", "preference", "User prefers walking tours.", 0.99)]
    decision = decide(candidate("user prefers walking tours", "preference"), existing)
    assert (decision.kind, decision.target) == ("duplicate", "m1")


def test_a_near_identical_statement_reinforces_instead_of_adding() -> None:
    existing = [ExistingMemory("m1", "fact", "User lives in Berlin", 0.95)]
    assert decide(candidate("User lives in Berlin, Germany"), existing).kind == "duplicate"


def test_a_new_value_for_the_same_slot_supersedes_the_old_one() -> None:
    existing = [
        ExistingMemory("m1", "fact", "User's budget is about 1500 euros", 0.8),
        ExistingMemory("m2", "fact", "User works at Siemens", 0.3),
    ]
    decision = decide(candidate("User's budget is now 2000 euros because Clara joins"), existing)
    assert (decision.kind, decision.target) == ("supersede", "m1")


def test_different_slots_or_dissimilar_memories_are_added() -> None:
    existing = [ExistingMemory("m1", "preference", "User prefers window seats", 0.3)]
    assert decide(candidate("User prefers walking tours", "preference"), existing).kind == "add"
    existing = [ExistingMemory("m2", "fact", "User lives in Berlin", 0.6)]
    assert decide(candidate("User works at Siemens"), existing).kind == "add"


def test_episodes_and_summaries_are_never_superseded() -> None:
    existing = [ExistingMemory("m1", "episode", "My budget is 1500 euros", 0.9)]
    assert decide(candidate("My budget is 2000 euros", "episode"), existing).kind == "add"
    existing = [ExistingMemory("m2", "episode", "My budget is 1500 euros", 0.99)]
    assert decide(candidate("my budget is 1500 euros!", "episode"), existing).kind == "duplicate"


def test_different_attributes_of_the_user_never_supersede_each_other() -> None:
    existing = [ExistingMemory("m1", "fact", "User is vegetarian", 0.7)]
    assert decide(candidate("User is allergic to peanuts"), existing).kind == "add"


def test_a_move_supersedes_where_the_user_lives() -> None:
    existing = [ExistingMemory("m1", "fact", "User lives in Berlin", 0.62)]
    assert decide(candidate("User moved to Munich"), existing).target == "m1"


def test_nothing_existing_means_add() -> None:
    assert decide(candidate("User lives in Oslo"), []).kind == "add"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("User lives in Lisbon", "user lives in"),
        ("User's budget is now 2000 euros", "user s budget is"),
        ("User works at Acme Robotics in Porto", "user works at"),
        ("Prefers tea", None),
        ("User is vegetarian", None),
        ("User moved to Munich", "user lives in"),  # a bare "is" names no single attribute
    ],
)
def test_slots(text: str, expected: str | None) -> None:
    assert slot(text) == expected
