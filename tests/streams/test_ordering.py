"""The in-order guard of the agents and the commit guard patched into faust."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from faust.types import TP

from memstream.streams.agents import ordering
from memstream.streams.agents.ordering import InOrder, install_commit_guard

CHAT = TP("t.chat", 0)
OTHER = TP("t.chat", 1)


@dataclass
class Message:
    tp: TP
    offset: int


def run(guard: InOrder, *messages: Message) -> list[int]:
    """The offsets the guard lets through, in order."""

    async def go() -> list[int]:
        return [m.offset for m in messages if await guard.accept(m)]

    return asyncio.run(go())


def test_records_past_a_hole_wait_for_it_and_the_partition_is_read_again_from_it() -> None:
    seeks: list[tuple[TP, int]] = []

    async def seek(tp: TP, offset: int) -> None:
        seeks.append((tp, offset))

    guard = InOrder("sessions", seek)
    guard.start_at([(CHAT, 10), (OTHER, None)])
    # 10, 11 come; 12 is skipped by the consumer; 13, 14 come before it; the other partition
    # goes on meanwhile; then 12.. again after the seek.
    delivered = run(
        guard,
        Message(CHAT, 10), Message(CHAT, 11), Message(CHAT, 13), Message(OTHER, 7),
        Message(CHAT, 14), Message(CHAT, 12), Message(CHAT, 13), Message(CHAT, 14),
    )
    assert delivered == [10, 11, 7, 12, 13, 14]
    assert seeks == [(CHAT, 12)], "one seek per hole"
    assert guard.rejected == 2


def test_a_redelivery_from_an_earlier_offset_is_processed_again() -> None:
    guard = InOrder("extraction", lambda tp, offset: asyncio.sleep(0))
    assert run(guard, Message(CHAT, 5), Message(CHAT, 6), Message(CHAT, 4), Message(CHAT, 5)) == [
        5, 6, 4, 5,
    ]


def test_a_hole_right_after_an_assignment_is_read_from_the_committed_offset() -> None:
    seeks: list[int] = []

    async def seek(tp: TP, offset: int) -> None:
        seeks.append(offset)

    guard = InOrder("extraction", seek)
    guard.start_at([(CHAT, 100)])
    assert run(guard, Message(CHAT, 103), Message(CHAT, 100)) == [100]
    assert seeks == [100]


def commit_offsets(acked: list[int], committed: int | None) -> int | None:
    consumer = SimpleNamespace(
        _acked=defaultdict(list, {CHAT: list(acked)}),
        _acked_index=defaultdict(set, {CHAT: set(acked)}),
        _committed_offset=defaultdict(lambda: None, {CHAT: committed}),
    )
    return ordering._new_offset_without_skipping(consumer, CHAT)


def test_a_commit_never_passes_the_record_at_the_committed_offset_until_it_is_acked() -> None:
    # faust 0.15.3 commits 13 here: offset 10 would be skipped for good.
    assert commit_offsets([11, 12], committed=10) is None
    assert commit_offsets([10, 11, 12, 14], committed=10) == 13
    assert commit_offsets([3, 4], committed=None) == 5


def test_the_patches_are_in_place_on_faust_consumers() -> None:
    install_commit_guard()
    assert ordering.commit_guard_installed()
    offsets: Any = ordering._ReadOffsets()
    ordering._REWINDING[CHAT] = 12
    try:
        offsets[CHAT] = 40  # a record past the hole still in the fetch buffer
        assert offsets[CHAT] == 12, "the re-read records from 12 on must not be dropped"
        offsets[OTHER] = 40
        assert offsets[OTHER] == 40
    finally:
        ordering._REWINDING.pop(CHAT, None)
    assert offsets[TP("t.chat", 9)] is None


def test_after_a_rebalance_partitions_with_nothing_committed_are_read_from_the_beginning() -> None:
    # aiokafka's seek_to_committed leaves such a partition where its fetcher was: the records
    # fetched before the rebalance (cleared from the agents' queues) would be skipped.
    changelog = TP("t.worker-sessions-changelog", 0)
    began: list[TP] = []

    class Thread:
        async def seek_to_beginning(self, *partitions: TP) -> None:
            began.extend(partitions)

    async def seek_to_committed() -> dict[TP, int | None]:
        return {CHAT: 5, OTHER: None, TP("t.chat", 2): 0, changelog: None}

    async def earliest_offsets(*partitions: TP) -> dict[TP, int]:
        return {tp: 0 for tp in partitions}

    consumer: Any = SimpleNamespace(
        seek_to_committed=seek_to_committed,
        earliest_offsets=earliest_offsets,
        assignment=lambda: {CHAT, OTHER, TP("t.chat", 2), changelog},
        _thread=Thread(),
        app=SimpleNamespace(topics=SimpleNamespace(acks_enabled_for=lambda topic: topic == "t.chat")),
        _read_offset=ordering._ReadOffsets(),
        _committed_offset=defaultdict(lambda: None),
    )
    guard = InOrder("sessions", lambda tp, offset: asyncio.sleep(0))
    guard.expected = {CHAT: 99, OTHER: 42}  # where it was before the rebalance
    asyncio.run(ordering._perform_seek_and_tell(consumer))
    assert began == [OTHER, TP("t.chat", 2)], "the changelog is the tables' business"
    assert consumer._read_offset[CHAT] == 5 and consumer._read_offset[OTHER] is None
    assert consumer._committed_offset[CHAT] == 5 and consumer._committed_offset[OTHER] is None
    # Read from the beginning, they are checked from their first offset: a record fetched
    # from before the seek, past it, waits for the ones before it.
    assert guard.expected == {CHAT: 5, OTHER: 0, TP("t.chat", 2): 0}
    try:
        assert run(guard, Message(OTHER, 553), Message(OTHER, 0), Message(OTHER, 1)) == [0, 1]
    finally:
        ordering._REWINDING.pop(OTHER, None)


def test_records_held_back_past_a_hole_are_acknowledged_but_never_committed() -> None:
    # Seen in the chaos benchmark: 76..291 were held back (faust acknowledges what an agent
    # skips), 55..75 processed after a seek: faust would commit 292 and lose 76..291.
    guard = InOrder("extraction", lambda tp, offset: asyncio.sleep(0))
    guard.start_at([(CHAT, 55)])
    try:
        assert run(guard, *(Message(CHAT, o) for o in range(55, 76))) == list(range(55, 76))
        assert commit_offsets(list(range(55, 292)), committed=55) == 76
    finally:
        guard.start_at([])
    assert commit_offsets(list(range(55, 292)), committed=55) == 292, "no agent, no frontier"


def test_an_idle_agent_reads_again_the_tail_records_it_never_got() -> None:
    # After a rebalance the last records of a partition were fetched and dropped: no later
    # record shows the hole, so the guard looks at the log's end once the agent idles.
    seeks: list[tuple[TP, int]] = []

    async def seek(tp: TP, offset: int) -> None:
        seeks.append((tp, offset))

    ends = {CHAT: 4, OTHER: 9, TP("t.consolidation", 0): 50}

    def highwater(tp: TP) -> int:
        return ends[tp]  # KeyError for a partition not assigned any more

    guard = InOrder("sessions", seek, "t.chat")
    guard.stall_after_s = 0.0
    guard.start_at([(CHAT, 2), (OTHER, 9), (TP("t.consolidation", 0), 3), (TP("t.chat", 7), 0)])

    async def go() -> list[list[TP]]:
        found = []
        async with guard.working():
            found.append(await guard.resume_stalled(highwater))  # busy: nothing yet
        found.append(await guard.resume_stalled(highwater))
        # The re-read records come: the partition is read to its end, nothing to do.
        async with guard.working():
            for offset in (2, 3):
                assert await guard.accept(Message(CHAT, offset))
        found.append(await guard.resume_stalled(highwater))
        return found

    busy, idle, done = asyncio.run(go())
    # Only the agent's own topic, only a partition whose log holds more than it processed.
    assert busy == [] and idle == [CHAT] and done == []
    assert seeks == [(CHAT, 2)]


def test_a_stall_is_only_looked_for_after_the_agent_idled_long_enough() -> None:
    seeks: list[tuple[TP, int]] = []

    async def seek(tp: TP, offset: int) -> None:
        seeks.append((tp, offset))

    guard = InOrder("extraction", seek, "t.chat")
    guard.start_at([(CHAT, 2)])
    # An agent that worked a moment ago (here: was just made) is not stalled.
    assert asyncio.run(guard.resume_stalled(lambda tp: 4)) == [] and seeks == []
