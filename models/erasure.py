"""Which records an erasure covers: the one rule the archive, its rebuild and history apply.

``memstream erase`` publishes a :class:`~memstream.models.events.chat.UserErased` event to the
chat and memories topics. Every record of the user that the log held before it is the
erased user's; a record of the same user after it belongs to a returning user, who starts
afresh and keeps it. "Before" is decided per record:

* on a partition that holds a record of the erasure, by offset: the records at lower
  offsets are covered (offsets are the log's own order there);
* anywhere else, by the broker timestamp: offsets of different partitions say nothing
  about each other, so a record is covered when its broker timestamp is at or before the
  erasure's (the latest of its records' timestamps, if they differ). A tie is covered: an
  erasure errs on the side of removal. A record without a timestamp is covered too.

A record is the user's when it names the user (see :func:`covered_by`'s callers: the
archive matches the record key, the parsed ``user_id``, a sessions-changelog key and the
user of a dead letter's original event). Only a valid ``user_erased`` event on an erasure
topic, keyed by its own user id, counts as an erasure: that is what the session agent and
the projector apply, and anything else they dead-letter.

Pure: no I/O. The caller says which topics carry erasures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from memstream.models.codec import InvalidEvent, decode_event
from memstream.models.events.chat import UserErased

#: A cheap test before decoding: every ``user_erased`` value holds its type name.
_ERASED_TYPE = b'"user_erased"'


@dataclass(frozen=True)
class ErasureMark:
    """One erasure of one user, as far as its records have been seen.

    ``positions`` maps (topic, partition) to the offset of the erasure's record there;
    ``timestamp_ms`` is the latest broker timestamp of those records (None if none had one).
    """

    user_id: str
    erasure_id: str
    positions: Mapping[tuple[str, int], int] = field(default_factory=dict)
    timestamp_ms: int | None = None

    def covers(self, topic: str, partition: int, offset: int, timestamp_ms: int | None) -> bool:
        """Whether a record of this user at that position precedes the erasure.

        Examples
        --------
        >>> mark = ErasureMark("ann", "e1", {("chat", 2): 10}, timestamp_ms=5_000)
        >>> [mark.covers("chat", 2, offset, 9_999) for offset in (9, 10, 11)]
        [True, False, False]
        >>> [mark.covers("accesses", 0, 99, ts) for ts in (4_999, 5_000, 5_001, None)]
        [True, True, False, True]
        """
        erased_at = self.positions.get((topic, partition))
        if erased_at is not None:
            return offset < erased_at
        if timestamp_ms is None or self.timestamp_ms is None:
            return True
        return timestamp_ms <= self.timestamp_ms

    def with_record(self, topic: str, partition: int, offset: int, timestamp_ms: int | None) -> ErasureMark:
        """This mark with one more of its records."""
        return self.merged(ErasureMark(self.user_id, self.erasure_id, {(topic, partition): offset}, timestamp_ms))

    def merged(self, other: ErasureMark) -> ErasureMark:
        """This mark and ``other`` (the same erasure) as one. A copy of a record published
        again moves the cut later, never earlier: an erasure outranks what came between
        its copies."""
        positions = dict(self.positions)
        for where, offset in other.positions.items():
            positions[where] = max(offset, positions.get(where, offset))
        stamps = [s for s in (self.timestamp_ms, other.timestamp_ms) if s is not None]
        return ErasureMark(self.user_id, self.erasure_id, positions, max(stamps, default=None))


def erasure_of(
    key: bytes | None, value: bytes | None, *, max_bytes: int = 1_000_000
) -> UserErased | None:
    """The ``user_erased`` event in a record, if it is a valid one keyed by its user.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> from memstream.models.codec import encode_event
    >>> event = UserErased(event_id="x", user_id="ann", session_id="-",
    ...                    occurred_at=datetime(2026, 1, 1, tzinfo=UTC), erasure_id="e1")
    >>> erasure_of(b"ann", encode_event(event)).erasure_id
    'e1'
    >>> erasure_of(b"bob", encode_event(event)) is None  # another user's key: not applied
    True
    """
    if value is None or key is None or _ERASED_TYPE not in value:
        return None
    try:
        event = decode_event(value, max_bytes=max_bytes)
    except InvalidEvent:
        return None
    if not isinstance(event, UserErased):
        return None
    if key != event.user_id.encode("utf-8", "surrogatepass"):
        return None
    return event


class ErasureLedger:
    """The erasures seen so far, by user: what decides whether a record is erased.

    Parameters
    ----------
    topics
        The topics whose ``user_erased`` records count (chat and memories).
    max_bytes
        Larger values are not decoded (the agents dead-letter them).

    Examples
    --------
    >>> ledger = ErasureLedger(["chat"])
    >>> ledger.add(ErasureMark("ann", "e1", {("chat", 0): 3}, 1_000))
    True
    >>> ledger.covers({"ann"}, "chat", 0, 2, 2_000), ledger.covers({"ann"}, "chat", 0, 4, 900)
    (True, False)
    >>> ledger.covers({"bob"}, "chat", 0, 2, 0)
    False
    """

    def __init__(self, topics: Iterable[str], *, max_bytes: int = 1_000_000) -> None:
        self.topics = frozenset(topics)
        self.max_bytes = max_bytes
        self._marks: dict[str, dict[str, ErasureMark]] = {}

    def __bool__(self) -> bool:
        return bool(self._marks)

    @property
    def users(self) -> frozenset[str]:
        """The users with at least one erasure."""
        return frozenset(self._marks)

    def marks(self, user_id: str) -> tuple[ErasureMark, ...]:
        """The erasures of ``user_id``."""
        return tuple(self._marks.get(user_id, {}).values())

    def add(self, mark: ErasureMark) -> bool:
        """Merge ``mark`` in; True if the ledger covers more than before."""
        held = self._marks.setdefault(mark.user_id, {})
        old = held.get(mark.erasure_id)
        merged = mark if old is None else old.merged(mark)
        if merged == old:
            return False
        held[mark.erasure_id] = merged
        return True

    def note(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp_ms: int | None,
        key: bytes | None,
        value: bytes | None,
    ) -> str | None:
        """Take a record into account; the erased user's id if it is an erasure record that
        made the ledger cover more, else None."""
        if topic not in self.topics:
            return None
        event = erasure_of(key, value, max_bytes=self.max_bytes)
        if event is None:
            return None
        mark = ErasureMark(event.user_id, event.erasure_id).with_record(
            topic, partition, offset, timestamp_ms
        )
        return event.user_id if self.add(mark) else None

    def covers(
        self,
        owners: Iterable[str],
        topic: str,
        partition: int,
        offset: int,
        timestamp_ms: int | None,
    ) -> bool:
        """Whether a record belonging to any of ``owners`` precedes an erasure of its owner."""
        for owner in owners:
            for mark in self._marks.get(owner, {}).values():
                if mark.covers(topic, partition, offset, timestamp_ms):
                    return True
        return False

    def only(self, users: Iterable[str]) -> ErasureLedger:
        """A ledger of the erasures of ``users`` alone (to apply one user's erasure)."""
        subset = ErasureLedger(self.topics, max_bytes=self.max_bytes)
        for user in users:
            for mark in self.marks(user):
                subset.add(mark)
        return subset

    def copy(self) -> ErasureLedger:
        """An independent copy (for a writer thread while the ledger keeps growing)."""
        return self.only(self._marks)
