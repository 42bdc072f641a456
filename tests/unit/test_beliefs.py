"""Beliefs: what a new claim does to the claims a user holds (models/beliefs.py).

The rules are checked case by case (a change, a retraction, a revert, a chain, values that
coexist, an end stated ahead, a claim that arrives late) and as properties over generated
claims: a decision does not depend on the order the current claims come in, and nothing
but a retraction or a later value of a one-value attribute ever ends a claim.
"""

from __future__ import annotations

import doctest
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memstream.models.beliefs as beliefs_module
from memstream.models.beliefs import (
    ClaimBook,
    KnownClaim,
    attribute_key,
    decide_claim,
    mentions,
    same_attribute,
    same_value,
)
from memstream.models.events.memory import Claim

T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)


def claim(attribute: str, value: str, days: float = 0, **more: object) -> Claim:
    return Claim(subject=str(more.pop("subject", "User")), attribute=attribute, value=value,
                 valid_from=T0 + timedelta(days=days), **more)  # type: ignore[arg-type]


def ends(new: Claim, *current: tuple[str, Claim]) -> list[tuple[str, str]]:
    decision = decide_claim(new, [KnownClaim(m, c) for m, c in current])
    return [(end.memory_id, end.change) for end in decision.ends]


def test_the_doctests_run() -> None:
    failures, attempted = doctest.testmod(beliefs_module)
    assert attempted > 10 and failures == 0


def test_a_later_value_of_a_one_value_attribute_ends_the_old_one() -> None:
    assert ends(claim("home", "Porto", 30), ("m1", claim("home", "Lisbon"))) == [("m1", "updated")]
    assert ends(claim("budget", "2,000 euros", 9), ("m1", claim("budget", "1,500 euros"))) == [
        ("m1", "updated")
    ]


def test_the_same_value_again_is_the_same_claim_whatever_its_wording() -> None:
    decision = decide_claim(claim("budget", "1500", 5), [KnownClaim("m1", claim("budget", "1,500 euros"))])
    assert (decision.kind, decision.target) == ("same", "m1")
    decision = decide_claim(claim("home", "Porto, Portugal", 5), [KnownClaim("m1", claim("home", "Porto"))])
    assert (decision.kind, decision.target) == ("same", "m1")


def test_values_that_coexist_never_end_each_other() -> None:
    cat = ("m1", claim("pet", "cat", cardinality="many"))
    assert ends(claim("pet", "dog", 10, cardinality="many"), cat) == []
    phone = ("m2", claim("phone number", "555-1234"))
    assert ends(claim("phone number", "555-9876", 10, cue="also"), phone) == []
    # Where the user lives and where they work are two attributes.
    assert ends(claim("work place", "Madrid", 10), ("m3", claim("home", "Lisbon"))) == []


def test_a_fact_about_someone_else_never_touches_the_users_own() -> None:
    mine = ("m1", claim("home", "Lisbon"))
    assert ends(claim("home", "Leeds", 5, subject="User's sister"), mine) == []
    sisters = ("m2", claim("home", "Leeds", subject="User's sister"))
    assert ends(claim("home", "York", 9, subject="user's  Sister"), mine, sisters) == [
        ("m2", "updated")
    ]


def test_a_retraction_ends_the_value_it_names_and_nothing_else() -> None:
    veg = ("m1", claim("diet", "vegetarian"))
    gone = claim("diet", "vegetarian", 20, polarity=False)
    assert ends(gone, veg) == [("m1", "retracted")]
    # Taking back another value ends nothing: precision first.
    assert ends(claim("diet", "vegan", 20, polarity=False), veg) == []
    # A retraction naming no value ends the attribute's value.
    assert ends(claim("employer", "", 20, polarity=False), ("m2", claim("employer", "Acme"))) == [
        ("m2", "retracted")
    ]
    # Of a many-valued attribute, only the value named.
    pets = ("m3", claim("pet", "cat", cardinality="many")), ("m4", claim("pet", "dog", cardinality="many"))
    assert ends(claim("pet", "dog", 9, polarity=False, cardinality="many"), *pets) == [
        ("m4", "retracted")
    ]


def test_a_revert_is_a_new_claim_ending_the_one_between() -> None:
    book = ClaimBook()
    book.add("m1", claim("home", "Lisbon"))
    for memory_id, value, day in (("m2", "Porto", 10), ("m3", "Lisbon", 20)):
        new = claim("home", value, day)
        decision = decide_claim(new, book.current())
        assert decision.kind == "new" and len(decision.ends) == 1
        book.end(decision.ends[0].memory_id)
        book.add(memory_id, new)
    assert [(k.memory_id, k.claim.value) for k in book.current()] == [("m3", "Lisbon")]


def test_a_chain_of_three_keeps_the_last() -> None:
    book = ClaimBook()
    for memory_id, value, day in (("m1", "1,500", 0), ("m2", "2,000", 5), ("m3", "2,500", 9)):
        new = claim("budget", value, day)
        for end in decide_claim(new, book.current()).ends:
            book.end(end.memory_id)
        book.add(memory_id, new)
    assert [k.claim.value for k in book.current()] == ["2,500"]


def test_a_claim_said_before_the_current_one_arrives_ended() -> None:
    later = ("m2", claim("home", "Porto", 30))
    decision = decide_claim(claim("home", "Lisbon", 1), [KnownClaim(*later)])
    assert decision.ends == () and decision.ended_by is not None
    assert decision.ended_by.by == "m2"


def test_a_temporary_state_never_ends_a_standing_one() -> None:
    home = ("m1", claim("whereabouts", "Lisbon"))
    trip = claim("whereabouts", "Berlin", 10, valid_until=T0 + timedelta(days=14))
    assert ends(trip, home) == []


def test_numbers_and_words_do_not_replace_each_other() -> None:
    assert ends(claim("budget", "tight", 5), ("m1", claim("budget", "1,500 euros"))) == []


def test_a_value_named_as_replaced_gives_the_attribute() -> None:
    budget = ("m1", claim("budget", "1,500 euros"))
    new = claim("", "2,000", 3, replaces="1,500")
    decision = decide_claim(new, [KnownClaim(*budget)])
    assert decision.attribute == "budget" and [e.memory_id for e in decision.ends] == ["m1"]
    # Naming a value nobody holds decides nothing.
    assert decide_claim(claim("", "2,000", 3, replaces="900"), [KnownClaim(*budget)]).ends == ()


def test_an_llm_operation_is_followed_only_for_a_claim_it_may_act_on() -> None:
    home = KnownClaim("m1", claim("home", "Lisbon"))
    update = claim("home", "Porto", 5, operation="update", target="m1")
    decision = decide_claim(update, [home])
    assert decision.decided_by == "llm" and [e.memory_id for e in decision.ends] == ["m1"]
    # A target that is not a current claim of the same subject: the rules decide.
    stranger = claim("home", "Porto", 5, operation="update", target="m-unknown")
    assert decide_claim(stranger, [home]).decided_by == "rules"
    # "add" is the model saying the values coexist: nothing ends.
    added = claim("home", "Porto", 5, operation="add")
    assert decide_claim(added, [home]).ends == ()


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("budget", "budget for the trip", True),
        ("trip budget", "budget", True),
        ("budget for trip", "budget for wedding", False),
        ("sister's name", "brother's name", False),
        ("home", "pet", False),
        ("My Trip Budgets", "the trip budget", True),
    ],
)
def test_attribute_identity(a: str, b: str, same: bool) -> None:
    assert same_attribute(a, b) is same


def test_a_similarity_joins_keys_with_different_heads_above_its_floor() -> None:
    assert same_attribute("salary", "pay", lambda a, b: 0.9)
    assert not same_attribute("salary", "pay", lambda a, b: 0.5)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("1,500 euros", "1500", True),
        ("1.5k", "1,500", True),
        ("1.500", "1500", True),
        ("2 million", "2,000,000", True),
        ("window seat", "aisle seat", False),
        ("Porto", "porto", True),
        ("a vegetarian", "vegetarian", True),
        ("March 3", "March 5", False),
    ],
)
def test_value_identity(a: str, b: str, same: bool) -> None:
    assert same_value(a, b) is same


def test_mentions_needs_every_number_or_every_word() -> None:
    assert mentions("User: budget 1,500 and 200 extra", "1500")
    assert not mentions("User: budget 1,600", "1,500")
    assert mentions("I moved to New York", "new york") and not mentions("I moved", "new york")
    assert attribute_key("The Budget") == "budget"


_ATTRIBUTES = st.sampled_from(["home", "employer", "budget", "pet", "diet", "allergy"])
_VALUES = st.sampled_from(["Lisbon", "Porto", "Acme", "1,500", "2,000", "cat", "dog", "vegan"])
_CLAIMS = st.builds(
    lambda attribute, value, day, polarity, many, cue: Claim(
        subject="User", attribute=attribute, value=value, polarity=polarity,
        cardinality="many" if many else "one", cue=cue,
        valid_from=T0 + timedelta(days=day),
    ),
    _ATTRIBUTES, _VALUES, st.integers(0, 60), st.booleans(), st.booleans(),
    st.sampled_from(["state", "change", "also"]),
)


@settings(max_examples=300, deadline=None)
@given(new=_CLAIMS, current=st.lists(_CLAIMS, max_size=8), order=st.randoms())
def test_a_decision_does_not_depend_on_the_order_of_the_current_claims(
    new: Claim, current: list[Claim], order: object
) -> None:
    known = [KnownClaim(f"m{i}", c) for i, c in enumerate(current)]
    shuffled = list(known)
    order.shuffle(shuffled)  # type: ignore[attr-defined]
    assert decide_claim(new, known) == decide_claim(new, shuffled)


@settings(max_examples=300, deadline=None)
@given(new=_CLAIMS, current=st.lists(_CLAIMS, max_size=8))
def test_only_a_retraction_or_a_later_value_of_a_one_value_attribute_ends_a_claim(
    new: Claim, current: list[Claim]
) -> None:
    known = {f"m{i}": c for i, c in enumerate(current)}
    decision = decide_claim(new, [KnownClaim(m, c) for m, c in known.items()])
    for end in decision.ends:
        old = known[end.memory_id]
        assert same_attribute(old.attribute, new.attribute)
        assert old.valid_from <= new.valid_from
        if end.change == "retracted":
            assert not new.polarity and old.polarity
        else:
            assert new.polarity and new.cue != "also" and new.cardinality == "one"
            assert old.cardinality == "one" and not same_value(old.value, new.value)
