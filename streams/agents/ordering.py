"""Every record of an agent's topic processed, in offset order, and no commit past one that
was not: what faust-streaming does not guarantee around rebalances.

The crash test (``tests/integration/test_chaos.py``) found records that a worker never
processed after a SIGKILL and the rebalances that follow, while it processed the records
after them: a consolidation request never extracted, a chat message never in any session.
Three mechanisms of faust-streaming 0.15.3 and aiokafka 0.14 let that happen:

1. After a rebalance, faust clears the agents' queues (records fetched, not processed) and
   seeks every partition to its committed offset; but aiokafka's ``seek_to_committed`` does
   not move a partition that has no committed offset (or 0), so reading goes on after the
   cleared records. Seen in the test's logs: offset 0 processed, 1-4 never, 5 next.
2. ``Consumer._new_offset`` commits through a hole at the committed offset: it waits only
   when ``min(acked) - committed > 1``, but the committed offset is the *next* record to read,
   so with ``committed = C`` and ``C + 1`` acked it commits ``C + 2``: ``C`` is skipped for good.
3. A jump in the fetched offsets is recorded as a "gap" (``_add_gap``: meant for transaction
   markers) and committed as if it had been processed.

:func:`install_commit_guard` patches all three: partitions with nothing committed are read
from the beginning after a seek to the committed offsets, a commit never passes an offset that
was not acknowledged, and a jump is not taken as processed. Should faust still deliver a record
after one it skipped, the agent would act out of order (an extraction decided without the
memories of the span before it), so each agent also checks its records with an
:class:`InOrder`: a record past a hole is not processed, and the partition is read again from
the hole.

Memstream's topics are not transactional and not compacted, so their offsets have no holes;
the changelog topics of tables (compacted) are not checked. The patches touch private methods
of the faust version pinned in pyproject.toml (checked by :mod:`memstream.streams.kafka.tansu`'s
version guard) and are installed for every broker.
"""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from faust.transport import consumer as faust_consumer
from faust.transport.consumer import ensure_TP
from faust.types import TP
from faust.utils.functional import consecutive_numbers

__all__ = ["InOrder", "commit_guard_installed", "install_commit_guard"]

log = logging.getLogger(__name__)

_consumer_init = faust_consumer.Consumer.__init__
#: The guards of this process, told where each partition continues after every seek to the
#: committed offsets (an assignment).
_GUARDS: weakref.WeakSet[InOrder] = weakref.WeakSet()
#: Partitions being read again from a hole, and the hole's offset.
_REWINDING: dict[TP, int] = {}
#: Per partition an agent checks, the next offset it must process: everything below was
#: processed in order, so no commit goes past it.
_FRONTIER: dict[TP, int] = {}


class _ReadOffsets(defaultdict[TP, int | None]):
    """faust's "read offset" per partition, which it drops any fetched record below. While a
    partition is read again from a hole, the records still in the fetch buffer past the hole
    must not move it past the hole, or the re-read records would be dropped."""

    def __init__(self) -> None:
        super().__init__(lambda: None)

    def __setitem__(self, tp: TP, offset: int | None) -> None:
        hole = _REWINDING.get(tp)
        if hole is not None and offset is not None and offset > hole:
            offset = hole
        super().__setitem__(tp, offset)


def _init_with_read_offsets(self: Any, *args: Any, **kwargs: Any) -> None:
    _consumer_init(self, *args, **kwargs)
    self._read_offset = _ReadOffsets()


def _new_offset_without_skipping(self: Any, tp: TP) -> int | None:
    """The offset to commit for ``tp``: one past the run of acknowledged offsets that starts
    at the committed one, and never past the next offset its agent must process (records an
    agent held back past a hole are acknowledged too, unprocessed); None while the committed
    offset itself is not acknowledged."""
    acked: list[int] = self._acked[tp]
    if not acked:
        return None
    acked.sort()
    committed = self._committed_offset[tp]
    if committed is not None and acked[0] > committed:
        return None  # the record at the committed offset is not processed yet
    batch = list(next(consecutive_numbers(acked)))
    frontier = _FRONTIER.get(tp)
    if frontier is not None:
        batch = [offset for offset in batch if offset < frontier]
        if not batch:
            return None
    acked[: len(batch)] = []
    self._acked_index[tp].difference_update(batch)
    return int(batch[-1]) + 1


async def _no_gap(self: Any, tp: TP, offset_from: int, offset_to: int) -> None:
    """A jump in fetched offsets is not taken as processed (see the module docstring)."""
    if tp not in _REWINDING:  # while re-reading, the buffer's later records jump: expected
        log.warning(
            "consumer: %s jumped to offset %d; offsets from %d are not taken as processed",
            tp, offset_to, offset_from,
        )


async def _perform_seek_and_tell(self: Any) -> None:
    """faust's seek to the committed offsets (after an assignment, before fetching resumes),
    also for partitions with nothing committed; then every :class:`InOrder` continues from
    those offsets.

    aiokafka's ``seek_to_committed`` leaves a partition with no committed offset (or 0)
    where its fetcher was. After a rebalance that kept the partition here, the records fetched
    before it were cleared from the agents' queues unprocessed: reading on from there skips
    them (seen in the crash test: a consolidation request at offset 0 processed, 1-4 never,
    5 next). Such partitions are read from the beginning, as a group that committed nothing
    must.
    """
    # Asked before any seek: records fetched while it is asked are dropped by the seeks below.
    # (Asked after them, records fetched meanwhile reached the agents' queues and were
    # cleared with them, and the partition was read on past them: an extraction waited for
    # its request for good.)
    earliest = await _earliest(
        self, [tp for tp in self.assignment() if self.app.topics.acks_enabled_for(tp.topic)]
    )
    committed: dict[Any, int | None] = dict(await self.seek_to_committed())
    uncommitted = [
        tp for tp, offset in committed.items() if not offset and self.app.topics.acks_enabled_for(tp.topic)
    ]
    starts: dict[Any, int | None] = {tp: offset or None for tp, offset in committed.items()}
    if uncommitted:
        await self._thread.seek_to_beginning(*uncommitted)
        starts.update({tp: earliest.get(tp) for tp in uncommitted})
    self._read_offset.update(
        {tp: offset if offset is not None and offset >= 0 else None for tp, offset in committed.items()}
    )
    self._committed_offset.update(
        {ensure_TP(tp): offset or None for tp, offset in committed.items() if offset is not None}
    )
    for guard in list(_GUARDS):
        guard.start_at((ensure_TP(tp), offset) for tp, offset in starts.items())


async def _earliest(consumer: Any, partitions: list[Any]) -> dict[Any, int | None]:
    """Where partitions read from the beginning start: their first offset, so that the
    guards check the first record too.

    Without it a guard took whatever came first: a record fetched from where the partition
    was before the seek (seen after a kill -9 that came before the first commit: offset 553
    first, then 0..552) was folded first, and the records before it were then skipped as
    re-deliveries, in no session's window. None (take what comes first) if the broker does
    not say."""
    if not partitions:
        return {}
    try:
        found = await consumer.earliest_offsets(*partitions)
    except Exception as exc:  # noqa: BLE001 - the seeks go on; only the check is lost
        log.warning("consumer: no earliest offsets for %s (%r); their first record is not checked", partitions, exc)
        return {}
    return {tp: found.get(tp) for tp in partitions}


def install_commit_guard() -> None:
    """Install the consumer patches (idempotent)."""
    faust_consumer.Consumer._new_offset = _new_offset_without_skipping  # type: ignore[method-assign]
    faust_consumer.Consumer._add_gap = _no_gap  # type: ignore[method-assign]
    faust_consumer.Consumer.perform_seek = _perform_seek_and_tell  # type: ignore[method-assign]
    faust_consumer.Consumer.__init__ = _init_with_read_offsets  # type: ignore[method-assign]


def commit_guard_installed() -> bool:
    """Whether :func:`install_commit_guard` is in place."""
    return (
        faust_consumer.Consumer._new_offset is _new_offset_without_skipping
        and faust_consumer.Consumer._add_gap is _no_gap
        and faust_consumer.Consumer.perform_seek is _perform_seek_and_tell
        and faust_consumer.Consumer.__init__ is _init_with_read_offsets
    )


class InOrder:
    """Lets an agent process each partition's records in offset order, without holes.

    ``accept(message)`` says whether to process a record: yes for the next offset of its
    partition and for an earlier one (a re-delivery after a rebalance: processed again, the
    agents are idempotent); no for one past a hole, and then the partition is read again
    from the hole (``seek``, once per hole). A rejected record is acknowledged like a processed
    one, which commits nothing past the hole (see :func:`install_commit_guard`), and it comes
    again after the hole's records.

    The offset where each partition continues comes from the record last processed, and
    after an assignment from the committed offsets (``start_at``, called by the patched
    ``perform_seek`` for every guard of the process).
    """

    #: Seek to the hole again if records past it still come this long after the last seek.
    reseek_after_s = 5.0
    #: An agent idle this long while a partition's log holds records past the next offset
    #: to process reads that partition again (:meth:`resume_stalled`).
    stall_after_s = 10.0

    def __init__(self, agent: str, seek: Callable[[TP, int], Any], topic: str | None = None) -> None:
        self.agent = agent
        #: The agent's source topic: the partitions :meth:`resume_stalled` looks at.
        self.topic = topic
        self._sought: dict[TP, float] = {}
        self._seek = seek
        #: Next offset to process per partition (None: take whatever comes first).
        self.expected: dict[TP, int] = {}
        #: Records rejected so far (for tests and logs).
        self.rejected = 0
        self._working = 0
        self._idle_since = time.monotonic()
        _GUARDS.add(self)

    @contextlib.asynccontextmanager
    async def working(self) -> AsyncIterator[None]:
        """Around the agent's processing of what it took: the agent is not idle meanwhile."""
        self._working += 1
        try:
            yield
        finally:
            self._working -= 1
            self._idle_since = time.monotonic()

    async def resume_stalled(self, highwater: Callable[[TP], int | None]) -> list[TP]:
        """Read again, from the next offset to process, each partition of the agent's topic
        whose log (``highwater``: the end its consumer last fetched) holds records past that
        offset while the agent has been idle for ``stall_after_s``; return them.

        The hole :meth:`accept` finds is shown by a later record. At the tail of a
        partition there is none: records faust fetched and dropped around a rebalance (seen
        in the three-worker kill test: a survivor took a partition, its last two
        consolidation requests never came, nothing after them) would wait for the next
        record of that partition, which may never come."""
        now = time.monotonic()
        if self._working or now - self._idle_since < self.stall_after_s:
            return []
        stalled = []
        for tp, expected in list(self.expected.items()):
            if self.topic is not None and tp.topic != self.topic:
                continue
            try:
                end = highwater(tp)
            except Exception:  # noqa: BLE001, S112 - not assigned any more: nothing to read
                continue
            if end is None or end <= expected:
                continue
            log.warning(
                "%s: %s idle at offset %d while its log ends at %d; reading it again from %d",
                self.agent, tp, expected, end, expected,
            )
            _REWINDING[tp] = expected
            self._sought[tp] = now
            await self._seek(tp, expected)
            stalled.append(tp)
        self._idle_since = now  # the re-read records get their time to come
        return stalled

    def start_at(self, offsets: Iterable[tuple[TP, int | None]]) -> None:
        """Partitions were assigned: continue each from its committed offset (None: from the
        first record that comes)."""
        for tp in self.expected:
            _REWINDING.pop(tp, None)
            _FRONTIER.pop(tp, None)
        self.expected.clear()
        for tp, offset in offsets:
            if offset is not None:
                self.expected[tp] = offset
                _FRONTIER[tp] = offset

    async def accept(self, message: Any) -> bool:
        """Whether to process ``message`` now (see the class docstring)."""
        tp = message.tp
        expected = self.expected.get(tp)
        if expected is not None and message.offset > expected:
            self.rejected += 1
            now = time.monotonic()
            if _REWINDING.get(tp) != expected:
                log.warning(
                    "%s: %s delivered offset %d before %d; reading it again from %d",
                    self.agent, tp, message.offset, expected, expected,
                )
            elif now - self._sought.get(tp, now) < self.reseek_after_s:
                return False
            _REWINDING[tp] = expected
            self._sought[tp] = now
            await self._seek(tp, expected)
            return False
        _REWINDING.pop(tp, None)
        self.expected[tp] = _FRONTIER[tp] = message.offset + 1
        return True
