"""The user's own name in a question, on a real LanceDB projection with the real embedder:
"Where does Ines work now?" asked of Ines's memories finds the statement written about
``User``; another person's name, another user's name and a user with no name change nothing;
resident memories and the table answer the same."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstream.models.events.memory import Claim, MemoryAdded, MemoryType
from memstream.models.settings import Settings
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import MemoryProjection, SourcePosition
from memstream.projections.own_names import as_user, capitalised
from memstream.projections.resident import ResidentMemories
from memstream.projections.retrieval import Retriever

START = datetime(2025, 3, 1, 18, 0, tzinfo=UTC)
NOW = START + timedelta(days=60)
#: (user, session, memory id, type, content, claim (attribute, value) about User or None).
MEMORIES: list[tuple[str, str, str, MemoryType, str, tuple[str, str] | None]] = [
    ("ines", "s1", "m-name", "fact", "User's name is Ines", ("name", "Ines")),
    ("ines", "s1", "m-summary", "summary",
     ("Ines: Lotte just started working at a flower market. Ines: Viktor works at Adidas now. "
      "Ines: Traffic was terrible, Ines was late."), None),
    ("ines", "s2", "m-viktor", "episode", "Viktor works at Adidas now.", None),
    ("ines", "s3", "m-job", "fact", "User works at Airbus", ("employer", "Airbus")),
    ("ines", "s4", "m-cousin", "episode", "My cousin Maren has taken up rowing.", None),
    ("eve", "s1", "e-name", "fact", "User's name is Eve", ("name", "Eve")),
    ("eve", "s1", "e-job", "fact", "User works at Siemens", ("employer", "Siemens")),
    ("eve", "s2", "e-ines", "episode", "Ines works at Lego, she told me.", None),
]
ON = Settings(recall_own_names=True, recall_entity_expansion=False, recall_session_cap=0)
OFF = ON.model_copy(update={"recall_own_names": False})


def event(offset: int, row: tuple[str, str, str, MemoryType, str, tuple[str, str] | None]) -> MemoryAdded:
    user, session, memory_id, memory_type, content, claim = row
    at = START + timedelta(days=offset)
    return MemoryAdded(
        event_id=f"event-{memory_id}", user_id=user, session_id=session, occurred_at=at,
        extractor="test/1", memory_id=memory_id, memory_type=memory_type, content=content,
        importance=0.6, extraction_event_id=f"extraction-{memory_id}",
        source_event_ids=(f"turn-{memory_id}",), entities=tuple(re.findall(r"\b[A-Z]\w+", content)),
        claim=None if claim is None else Claim(
            subject="User", attribute=claim[0], value=claim[1], valid_from=at
        ),
    )


@pytest.fixture(scope="module")
def projection(tmp_path_factory: pytest.TempPathFactory) -> MemoryProjection:
    built = MemoryProjection(Path(tmp_path_factory.mktemp("own-names")), MiniLMOnnxEmbedder())
    built.apply([
        (event(n, row), SourcePosition("memstream.memories", 0, n)) for n, row in enumerate(MEMORIES)
    ])
    built.refresh_indexes()
    return built


def found(projection: object, settings: Settings, user: str, question: str) -> list[str]:
    retriever = Retriever(projection, settings, clock=lambda: NOW)  # type: ignore[arg-type]
    return [hit.memory.memory_id for hit in retriever.search(user, question, limit=5)]


def test_a_question_naming_the_user_finds_what_is_said_of_them(projection: MemoryProjection) -> None:
    question = "Where does Ines work now?"
    assert found(projection, ON, "ines", question)[0] == "m-job"
    # Without the step the name finds the summary that repeats it, above the answer.
    assert found(projection, OFF, "ines", question).index("m-job") > 0


def test_resident_memories_answer_as_the_table_does(projection: MemoryProjection) -> None:
    resident = ResidentMemories(projection, budget_bytes=1 << 26)
    for user, question in [
        ("ines", "Where does Ines work now?"),
        ("ines", "What has Ines's cousin taken up?"),
        ("eve", "Where does Ines work?"),
    ]:
        assert found(resident, ON, user, question) == found(projection, ON, user, question)


def test_only_the_users_own_names_are_read_as_theirs(projection: MemoryProjection) -> None:
    # Viktor is not Ines: his job stays his.
    assert found(projection, ON, "ines", "Where does Viktor work?")[0] == "m-viktor"
    # Eve's memories: Ines is someone Eve knows, and Eve's own name is hers alone.
    assert found(projection, ON, "eve", "Where does Ines work?")[0] == "e-ines"
    assert found(projection, ON, "eve", "Where does Eve work?")[0] == "e-job"
    # A user with no name fact: the question is searched as asked.
    assert found(projection, ON, "nobody", "Where does Ines work?") == []


NAMES = st.from_regex(r"[A-Z][a-z]{1,8}", fullmatch=True)


@given(question=st.text(max_size=80), name=NAMES)
def test_a_name_is_never_left_and_nothing_else_changes(question: str, name: str) -> None:
    said = as_user(question, [name])
    assert not re.search(rf"(?<![\w'-]){name}(?![\w'-])", said)
    assert as_user(question, []) == question
    if not re.search(rf"(?<![\w'-]){name}", question):
        assert said == question


@given(question=st.text(max_size=80))
def test_only_capitalised_words_are_looked_up(question: str) -> None:
    for word in capitalised(question):
        assert word[0].isupper() and word in question and word != "User"
