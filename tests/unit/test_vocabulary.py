"""The vocabulary (models/vocabulary.py): one catalogue of attributes and word lists, which
the extractors, the decisions and the projections read, and which no other module copies."""

from __future__ import annotations

import ast
import doctest
import re
from datetime import UTC, datetime
from pathlib import Path

import memstream.models
import memstream.models.vocabulary as vocabulary_module
import memstream.projections
import memstream.streams
from memstream.models.beliefs import KnownClaim, decide_claim
from memstream.models.events.memory import Claim
from memstream.models.extraction.claims import read_claims
from memstream.models.llm_reply import SYSTEM_PROMPT
from memstream.models.vocabulary import (
    ATTRIBUTES,
    OFTEN_SEVERAL,
    ONE_AT_A_TIME,
    RELATIONS,
    attribute,
    canonical_key,
    cardinality,
    prompt_lines,
)

AT = datetime(2026, 3, 2, 9, tzinfo=UTC)
PACKAGES = (memstream.models, memstream.projections, memstream.streams)
#: Words only a list of relations, months, weekdays, pets or diets would hold.
TELLTALES = ("hamster", "dachshund", "girlfriend", "stepdad", "september", "thursday", "pescetarian")


def test_the_doctests_run() -> None:
    failures, attempted = doctest.testmod(vocabulary_module)
    assert attempted > 5 and failures == 0


def test_no_other_module_keeps_a_list_of_its_own() -> None:
    vocabulary = Path(vocabulary_module.__file__)
    found = [
        f"{path.name}: {word}"
        for package in PACKAGES
        for path in Path(package.__file__).parent.rglob("*.py")
        if path != vocabulary
        for word in TELLTALES
        if re.search(rf"\b{word}\b", path.read_text(), re.IGNORECASE)
    ]
    assert found == []


def test_the_guard_sees_the_lists_it_guards() -> None:
    text = Path(vocabulary_module.__file__).read_text().casefold()
    assert all(re.search(rf"\b{word}\b", text) for word in TELLTALES)


def _emitted_keys() -> set[str]:
    """The attribute keys the claim builders write as literals (``_Read(kind, "<key>", ...)``)."""
    source = Path(memstream.models.__file__).parent / "extraction" / "claim_builders.py"
    return {
        call.args[1].value
        for call in ast.walk(ast.parse(source.read_text()))
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "_Read"
        and len(call.args) > 1 and isinstance(call.args[1], ast.Constant) and call.args[1].value
    }


def test_every_key_the_offline_extractor_writes_is_known() -> None:
    keys = _emitted_keys()
    assert {"home", "employer", "pet", "trip destination"} <= keys
    assert sorted(key for key in keys if attribute(key) is None) == []
    # And the shapes it builds: a purpose, a feeling, a preference, a count, a pet's name.
    for key in ("tool for notes", "feeling about sushi", "preferred seat", "number of kid",
                "dog's name", "budget for trip", "deadline for report"):
        assert attribute(key) is not None, key


def test_a_key_or_alias_names_one_attribute() -> None:
    names = [name for found in ATTRIBUTES for name in (found.key, *found.aliases)]
    assert sorted({n for n in names if names.count(n) > 1}) == []
    keys = {found.key for found in ATTRIBUTES}
    assert all(set(found.depends_on) <= keys for found in ATTRIBUTES)


def test_aliases_relations_and_shapes_resolve() -> None:
    assert canonical_key("company") == "employer" and canonical_key("manager") == "boss"
    assert canonical_key("budget for trip") == "budget for trip"  # a shape is no alias
    assert attribute("girlfriend").key == "partner"  # type: ignore[union-attr]
    assert (cardinality("wife"), cardinality("roommate"), cardinality("cousin")) == (
        "one", "one", "many",
    )
    assert (cardinality("allergy"), cardinality("tool"), cardinality("tool for notes")) == (
        "many", "many", "one",
    )
    assert attribute("laptop").value_kind == "thing"  # type: ignore[union-attr]
    assert cardinality("spotify password") == "one" and attribute("spotify password") is None


def test_the_relation_groups_are_relations() -> None:
    assert ONE_AT_A_TIME <= RELATIONS.as_set() and OFTEN_SEVERAL <= RELATIONS.as_set()
    assert not ONE_AT_A_TIME & OFTEN_SEVERAL


def test_a_list_is_a_regex_alternation_and_a_set() -> None:
    pattern = re.compile(rf"^{RELATIONS.alternation()}$", re.IGNORECASE)
    assert all(pattern.match(word) for word in RELATIONS)
    assert pattern.match("best   friend") and not pattern.match("best")


def test_the_llm_prompt_shows_the_catalogue() -> None:
    lines = prompt_lines()
    assert len(lines) == len(ATTRIBUTES) + 2
    assert all(f"- {line}\n" in SYSTEM_PROMPT for line in lines)
    assert "pet: an animal someone keeps; many" in SYSTEM_PROMPT


def test_a_key_that_holds_many_never_ends_another_value_whatever_the_claim_says() -> None:
    old = Claim(subject="User", attribute="pet", value="a hamster", valid_from=AT)
    new = Claim(subject="User", attribute="pets", value="a dog", valid_from=AT.replace(day=9))
    assert decide_claim(new, [KnownClaim("m1", old)]).ends == ()
    # A key the vocabulary holds one of at a time goes by what the claim says.
    home = Claim(subject="User", attribute="home", value="Lisbon", valid_from=AT)
    moved = Claim(subject="User", attribute="home", value="Porto", valid_from=AT.replace(day=9))
    assert [end.memory_id for end in decide_claim(moved, [KnownClaim("m1", home)]).ends] == ["m1"]


def test_the_extractor_reads_cardinality_from_the_vocabulary() -> None:
    def read(sentence: str) -> list[tuple[str, str, str]]:
        return [(f.claim.attribute, f.claim.value, f.claim.cardinality)
                for f in read_claims(sentence, "User", AT)]

    assert read("My pet is a hamster.") == [("pet", "hamster", "many")]
    assert read("My girlfriend is Ana.") == [("girlfriend", "Ana", "one")]
    assert read("My best friend is Tom.") == [("best friend", "Tom", "many")]
