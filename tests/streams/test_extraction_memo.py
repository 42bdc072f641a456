"""The extraction memo, with an in-memory stand-in for the Faust table and a real key store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from chat import conversation
from test_session_store import Clock, records

from memstream.models.crypto import SealError
from memstream.models.events import ConsolidationRequested, ExtractionRecorded
from memstream.models.extraction import OfflineExtractor
from memstream.models.session import WindowLimits
from memstream.streams.agents import record_extraction
from memstream.streams.extraction_memo import (
    ExtractionMemo,
    dump_memo,
    load_memo,
    memo_header,
    memo_key_id,
)
from memstream.streams.keys import FileKeyStore
from memstream.streams.sessions import SessionStore, fold_batch

SECRET = "Quokka-Harbour-5521"


class AckedTable:
    """The parts of a Faust table the memo uses; each changelog send returns a future the
    test acknowledges (the broker's ack), so a test sees whether a write waited for it."""

    def __init__(self, *, auto_ack: bool = True) -> None:
        self.data: dict[str, bytes] = {}
        self.sent: list[tuple[str, bytes | None, int]] = []
        self.pending: list[asyncio.Future[None]] = []
        self.changelog_topic = SimpleNamespace(
            prepare_key=lambda key, _: (key.encode(), None), get_topic_name=lambda: "changelog"
        )

        async def send(topic: str, key: bytes, value: bytes | None, partition: int, *_: Any) -> Any:
            self.sent.append((key.decode(), value, partition))
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            if auto_ack:
                future.set_result(None)
            else:
                self.pending.append(future)
            return future

        self.app = SimpleNamespace(producer=SimpleNamespace(send=send))


@pytest.fixture
def keys(tmp_path: Path) -> FileKeyStore:
    return FileKeyStore(tmp_path / "keys")


def span(user: str = "ann", session: str = "s") -> ConsolidationRequested:
    turns = [("user", f"I live in {SECRET} and I prefer night trains."), ("assistant", "Noted.")]
    batch = fold_batch(
        SessionStore(SimpleNamespace(data={}), cache_size=0),
        records(conversation(user, session, turns)),
        WindowLimits(),
        1_000_000,
    )
    (request,) = batch.consolidations
    return request


def extraction(request: ConsolidationRequested) -> ExtractionRecorded:
    recorded = record_extraction(request, OfflineExtractor())
    assert recorded.candidates and any(SECRET in c.content for c in recorded.candidates)
    return recorded


async def test_a_recorded_extraction_reads_back_sealed_from_its_request_partition(
    keys: FileKeyStore,
) -> None:
    table = AckedTable()
    request = span()
    recorded = extraction(request)
    memo = ExtractionMemo(table, keys, retention_s=3600)
    assert memo.lookup(request) is None
    assert await memo.record(request, recorded, partition=3, key_id=None)
    ((key, raw, partition),) = table.sent
    assert (key, partition) == (request.event_id, 3)
    assert raw is not None and SECRET.encode() not in raw  # sealed in the changelog
    assert memo_header(raw).partition == 3
    key_id = memo_key_id(raw)
    assert key_id is not None and keys.key_by_id(key_id) is not None
    # A worker that recovered the table from the changelog finds the same extraction.
    recovered = ExtractionMemo(SimpleNamespace(data={key: raw}), keys, retention_s=3600)
    assert recovered.lookup(request) == recorded
    # Another request (another span) finds nothing.
    assert recovered.lookup(span(session="other")) is None


async def test_a_record_returns_only_once_the_broker_has_acknowledged_it(
    keys: FileKeyStore,
) -> None:
    table = AckedTable(auto_ack=False)
    request = span()
    memo = ExtractionMemo(table, keys, retention_s=3600)
    writing = asyncio.create_task(memo.record(request, extraction(request), 0, None))
    for _ in range(5):
        await asyncio.sleep(0)
    assert table.sent and not writing.done()  # sent, not acknowledged: not yet recorded
    table.pending[0].set_result(None)
    assert await writing is True


async def test_the_span_key_seals_the_entry_and_a_destroyed_one_keeps_nothing(
    keys: FileKeyStore,
) -> None:
    key_id, _ = keys.key_for("ann", create=True) or ("", b"")
    request = span()
    recorded = extraction(request)
    table = AckedTable()
    memo = ExtractionMemo(table, keys, retention_s=3600)
    assert await memo.record(request, recorded, 1, key_id)
    assert memo_key_id(table.data[request.event_id]) == key_id
    keys.destroy("ann")
    # Unreadable now: absent, so the agent would skip the (erased) span.
    assert memo.lookup(request) is None
    assert load_memo(request.event_id, table.data[request.event_id], keys) is None
    # Erased while it was extracted: nothing is kept, nothing is sent.
    other = AckedTable()
    assert not await ExtractionMemo(other, keys, 3600).record(request, recorded, 1, key_id)
    assert other.data == {} and other.sent == []


def test_a_value_moved_to_another_key_or_altered_does_not_open(keys: FileKeyStore) -> None:
    request = span()
    raw = dump_memo(
        request.event_id, extraction(request), partition=0, written_at=0.0, keys=keys, key_id=None
    )
    assert raw is not None
    with pytest.raises(SealError):
        load_memo("another-request", raw, keys)
    with pytest.raises(SealError):
        load_memo(request.event_id, raw[:-1] + bytes([raw[-1] ^ 1]), keys)
    with pytest.raises(SealError):
        load_memo(request.event_id, b'{"not": "a memo"}', keys)
    # The memo treats any of these as absent: the span is extracted again.
    table = SimpleNamespace(data={request.event_id: raw[:-1] + bytes([raw[-1] ^ 1])})
    assert ExtractionMemo(table, keys, 3600).lookup(request) is None


def test_without_a_key_store_the_extraction_is_kept_as_it_is() -> None:
    request = span()
    recorded = extraction(request)
    raw = dump_memo(request.event_id, recorded, partition=2, written_at=5.0, keys=None, key_id=None)
    assert raw is not None and memo_key_id(raw) is None
    assert load_memo(request.event_id, raw, None) == recorded


async def test_entries_are_tombstoned_after_the_retention_counted_from_when_they_are_held(
    keys: FileKeyStore,
) -> None:
    clock = Clock()
    table = AckedTable()
    memo = ExtractionMemo(table, keys, retention_s=100, clock=clock)
    first, second = span("ann", "a"), span("bob", "b")
    await memo.record(first, extraction(first), 0, None)
    clock.now += 60
    await memo.record(second, extraction(second), 1, None)
    table.sent.clear()

    clock.now += 39  # first: 99 s old
    assert await memo.sweep({0, 1}) == 0 and len(memo) == 2
    clock.now += 1  # first: 100 s old
    assert await memo.sweep({0, 1}) == 1
    assert table.sent == [(first.event_id, None, 0)]
    assert memo.lookup(first) is None and memo.lookup(second) is not None

    # Partitions assigned again (a restart, a rebalance): held entries get a full retention.
    memo.note_assignment()
    clock.now += 99
    assert await memo.sweep({0, 1}) == 0
    clock.now += 1
    assert await memo.sweep({0, 1}) == 1 and len(memo) == 0
    assert table.sent[-1] == (second.event_id, None, 1)


async def test_an_erased_users_entries_are_tombstoned_at_the_next_sweep(
    keys: FileKeyStore,
) -> None:
    table = AckedTable()
    memo = ExtractionMemo(table, keys, retention_s=3600)
    ann, bob = span("ann", "a"), span("bob", "b")
    await memo.record(ann, extraction(ann), 2, None)
    await memo.record(bob, extraction(bob), 3, None)
    table.sent.clear()
    keys.destroy("ann")
    assert await memo.sweep({2, 3}) == 1
    assert table.sent == [(ann.event_id, None, 2)]
    assert memo.lookup(bob) is not None and len(memo) == 1


async def test_entries_of_partitions_held_elsewhere_are_dropped_here_without_a_tombstone(
    keys: FileKeyStore,
) -> None:
    clock = Clock()
    table = AckedTable()
    memo = ExtractionMemo(table, keys, retention_s=10, clock=clock)
    request = span()
    await memo.record(request, extraction(request), 1, None)
    table.sent.clear()
    assert await memo.sweep({0}) == 0 and len(memo) == 1  # not due yet: kept
    clock.now += 10
    assert await memo.sweep({0}) == 0 and len(memo) == 0
    assert table.sent == []  # partition 1's owner writes its tombstone
