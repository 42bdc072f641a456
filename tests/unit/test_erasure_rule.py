"""The rule deciding which records an erasure covers (memstream.models.erasure)."""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.models.codec import encode_event
from memstream.models.erasure import ErasureLedger, ErasureMark, erasure_of
from memstream.models.events.chat import MessageAdded, UserErased

AT = datetime(2026, 3, 1, tzinfo=UTC)


def erasure(user: str, erasure_id: str = "e1") -> bytes:
    return encode_event(
        UserErased(event_id=f"erase-{erasure_id}", user_id=user, session_id="-", occurred_at=AT, erasure_id=erasure_id)
    )


def test_offsets_decide_on_the_erasures_partitions_timestamps_elsewhere() -> None:
    mark = ErasureMark("ann", "e1").with_record("chat", 1, 40, 5_000).with_record("memories", 1, 7, 5_000)
    assert mark.covers("chat", 1, 39, 9_999) and not mark.covers("chat", 1, 41, 1)
    assert mark.covers("memories", 1, 6, 6_000) and not mark.covers("memories", 1, 8, 4_000)
    assert mark.covers("chat", 0, 900, 5_000) and not mark.covers("chat", 0, 0, 5_001)
    assert mark.covers("accesses", 3, 0, None)  # no time to place it by: covered
    assert not mark.covers("chat", 1, 40, 0)  # the erasure record itself stays


def test_only_a_valid_erasure_keyed_by_its_user_counts() -> None:
    assert erasure_of(b"ann", erasure("ann")) is not None
    assert erasure_of(b"bob", erasure("ann")) is None
    assert erasure_of(None, erasure("ann")) is None
    assert erasure_of(b"ann", b'{"type": "user_erased", "user_id": "ann"}') is None
    message = MessageAdded(event_id="m", user_id="ann", session_id="s", occurred_at=AT, role="user", content="user_erased")
    assert erasure_of(b"ann", encode_event(message)) is None


def test_the_ledger_notes_erasure_records_of_its_topics_and_merges_copies() -> None:
    ledger = ErasureLedger(["chat", "memories"])
    assert ledger.note("accesses", 0, 1, 10, b"ann", erasure("ann")) is None  # not an erasure topic
    assert not ledger
    assert ledger.note("chat", 0, 5, 10, b"ann", erasure("ann")) == "ann"
    assert ledger.note("chat", 0, 5, 10, b"ann", erasure("ann")) is None  # nothing new
    assert ledger.note("memories", 2, 3, 12, b"ann", erasure("ann")) == "ann"
    (mark,) = ledger.marks("ann")
    assert mark.positions == {("chat", 0): 5, ("memories", 2): 3} and mark.timestamp_ms == 12
    # A second copy later on the same partition moves the cut later, never earlier.
    ledger.note("chat", 0, 9, 11, b"ann", erasure("ann"))
    ledger.note("chat", 0, 2, 11, b"ann", erasure("ann"))
    assert ledger.marks("ann")[0].positions[("chat", 0)] == 9
    assert ledger.covers({"ann"}, "chat", 0, 8, 100)
    assert not ledger.covers({"bob"}, "chat", 0, 8, 100)


def test_a_record_is_covered_if_it_precedes_any_erasure_of_its_owner() -> None:
    ledger = ErasureLedger(["chat"])
    ledger.note("chat", 0, 10, 1_000, b"ann", erasure("ann", "first"))
    ledger.note("chat", 0, 20, 2_000, b"ann", erasure("ann", "second"))
    assert ledger.covers({"ann"}, "chat", 0, 15, 1_500)  # the returning user's, then erased again
    assert not ledger.covers({"ann"}, "chat", 0, 21, 2_500)
    assert ledger.covers({"zoe", "ann"}, "accesses", 0, 0, 1_999)
    assert ledger.only({"bob"}).users == frozenset()
    assert ledger.copy().marks("ann") == ledger.marks("ann")
