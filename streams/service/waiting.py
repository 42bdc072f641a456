"""Waiting for what one ``add`` made: the session's spans extracted, the decisions projected.

``add(..., wait=True)`` publishes a closed conversation and then follows it through the log,
never guessing from the clock: the session agent's ``consolidation_requested`` spans of the
session (read from the user's partition of the consolidation topic, from where it stood
before the add), each span's ``extraction_recorded`` (or its final ``extraction_failed``) on
the memories topic, and the decision each candidate became (``memory_added`` or
``memory_reinforced``, one per candidate, their ids derived from the extraction's; a
``memory_superseded`` follows its ``memory_added``). Once every decision is in the log, the
wait ends when the memory projection this process reads has applied the last of them, so
what the answer lists is searchable.

A supersession is published right after the memory that supersedes it, in the same batch as
the other decisions; the watch reads the partition to its end once more after the last
decision, so a supersession acknowledged by then is waited for too.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Literal, Self

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from memstream.models.codec import InvalidEvent, decode_event
from memstream.models.crypto import SealError
from memstream.models.events.consolidation import ConsolidationRequested
from memstream.models.events.envelope import Event, derived_id
from memstream.models.events.memory import (
    ExtractionFailure,
    ExtractionRecorded,
    MemoryAdded,
    MemoryOutdated,
    MemoryReinforced,
    MemorySuperseded,
)
from memstream.models.settings import Settings
from memstream.models.topics import Topics
from memstream.projections.memories import MemoryIndex
from memstream.streams.kafka.logreader import key_topic_partition
from memstream.streams.kafka.tansu import true_end_offsets
from memstream.streams.keys.sealing import open_event
from memstream.streams.keys.store import KeyStore

__all__ = ["ConsolidationWatch", "Outcome"]

log = logging.getLogger(__name__)

#: How often the projection is asked whether it has applied the decisions.
PROJECTION_POLL_S = 0.05


@dataclass
class _Extraction:
    """One span's extraction as the watch has seen it so far."""

    event_id: str
    candidates: int
    #: Decision events by candidate index, with their offsets.
    decisions: dict[int, tuple[Event, int]] = field(default_factory=dict)

    def complete(self) -> bool:
        return len(self.decisions) == self.candidates


@dataclass
class Outcome:
    """What the watch saw: the spans, their extractions and decisions, and how it ended.

    ``status`` is ``searchable`` (every span extracted, every decision projected),
    ``failed`` (an extractor gave up on a span for good: ``failures`` holds its reasons; the
    other spans' memories are still listed) or ``pending`` (the timeout came first).
    """

    status: Literal["searchable", "failed", "pending"]
    added: list[str] = field(default_factory=list)
    reinforced: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


class ConsolidationWatch:
    """Follows one user's partition of the consolidation and memories topics from where they
    stood when :meth:`open` was called. Use once: ``open`` before publishing, ``wait`` after,
    ``close`` in all cases (``async with`` does both ends).

    Parameters
    ----------
    settings
        Broker and topic names.
    keys
        The user's key opens an extraction's candidates (how many decisions to expect).
    projection
        The memory projection that must have applied the decisions before the wait ends.
    user_id
        Whose partition (the records' key).
    """

    def __init__(
        self, settings: Settings, keys: KeyStore, projection: MemoryIndex, user_id: str
    ) -> None:
        self.settings = settings
        self.keys = keys
        self.projection = projection
        self.user_id = user_id
        self.topics = Topics.from_settings(settings)
        self._consumer: AIOKafkaConsumer | None = None
        self._consolidation: TopicPartition | None = None
        self._memories: TopicPartition | None = None
        # What the log said so far. Spans: consolidation id -> whether it is the close's.
        self._spans: dict[str, bool] = {}
        self._extractions: dict[str, _Extraction] = {}  # by consolidation id
        self._by_extraction: dict[str, _Extraction] = {}  # by extraction event id
        self._failed: dict[str, str] = {}  # consolidation id -> reason
        self._early_decisions: list[tuple[Event, int]] = []
        self._supersessions: list[tuple[MemorySuperseded, int]] = []
        self._outdatings: list[tuple[MemoryOutdated, int]] = []

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Note where the user's partitions end now: what the wait reads starts there."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.broker, enable_auto_commit=False
        )
        self._consumer = consumer
        try:  # a failed open stops the consumer (it may have started): no leak
            await consumer.start()
            chosen = []
            for topic in (self.topics.consolidation, self.topics.memories):
                tp = await key_topic_partition(consumer, topic, self.user_id.encode())
                if tp is None:
                    raise LookupError(f"the topic {topic} does not exist: is a worker running?")
                chosen.append(tp)
            self._consolidation, self._memories = chosen
            ends = await true_end_offsets(self.settings.broker, chosen)
        except BaseException:
            await self.close()
            raise
        consumer.assign(chosen)
        for tp in chosen:
            consumer.seek(tp, ends[tp])

    async def close(self) -> None:
        """Stop the consumer."""
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    async def wait(self, session_id: str, timeout_s: float) -> Outcome:
        """Follow ``session_id``'s spans until each is extracted and its decisions are
        projected, or ``timeout_s`` passes (status ``pending``, with what was seen)."""
        assert self._consumer is not None, "open() first"
        try:
            return await asyncio.wait_for(self._follow(session_id), timeout_s)
        except TimeoutError:
            return self._outcome("pending")

    # --- following the log ---------------------------------------------------------------

    async def _follow(self, session_id: str) -> Outcome:
        while not self._done():
            await self._read(session_id)
        # A supersession of the last candidate's memory may follow it: read to the end once.
        await self._read(session_id, to_end=True)
        last = max(
            (offset for ex in self._ours() for _, offset in ex.decisions.values()), default=None
        )
        # Then what the decisions changed: supersessions, and the memories they outdated.
        changes = [offset for _, offset in self._supersessions] + [
            offset for event, offset in self._outdatings if event.session_id == session_id
        ]
        if changes:
            last = max(last or 0, *changes)
        if last is not None:
            await self._projected(last)
        return self._outcome("failed" if self._failed else "searchable")

    def _ours(self) -> list[_Extraction]:
        return [self._extractions[c] for c in self._spans if c in self._extractions]

    def _done(self) -> bool:
        if True not in self._spans.values():
            return False  # the close's span is not in the log yet
        return all(
            c in self._failed or (c in self._extractions and self._extractions[c].complete())
            for c in self._spans
        )

    async def _read(self, session_id: str, *, to_end: bool = False) -> None:
        assert self._consumer is not None
        assert self._consolidation is not None and self._memories is not None
        if to_end:
            ends = await true_end_offsets(self.settings.broker, [self._memories])
            while await self._consumer.position(self._memories) < ends[self._memories]:
                await self._take(session_id, await self._consumer.getmany(timeout_ms=200))
            return
        await self._take(session_id, await self._consumer.getmany(timeout_ms=200))

    async def _take(
        self, session_id: str, fetched: dict[TopicPartition, list[ConsumerRecord]]
    ) -> None:
        for tp, records in fetched.items():
            for record in records:
                event = self._decode(record)
                if event is None:
                    continue
                if tp == self._consolidation:
                    if (
                        isinstance(event, ConsolidationRequested)
                        and event.session_id == session_id
                    ):
                        self._spans[event.event_id] = event.reason == "session_closed"
                else:
                    self._note_memory_event(event, record.offset)

    def _decode(self, record: ConsumerRecord) -> Event | None:
        if record.key != self.user_id.encode() or record.value is None:
            return None
        try:
            event = decode_event(record.value, max_bytes=self.settings.max_event_bytes)
        except InvalidEvent:
            return None  # the agents dead-letter it; it made nothing
        return event if event.user_id == self.user_id else None

    def _note_memory_event(self, event: Event, offset: int) -> None:
        if isinstance(event, ExtractionRecorded):
            try:
                opened = open_event(event, self.keys)
            except SealError:
                opened = None
            if opened is None:
                return  # erased meanwhile, or altered: the projector makes nothing of it
            extraction = _Extraction(event.event_id, len(opened.candidates))
            self._extractions[event.consolidation_event_id] = extraction
            self._by_extraction[event.event_id] = extraction
            # Decisions are published after their extraction, but keep any seen before.
            pending, self._early_decisions = self._early_decisions, []
            for decision, at in pending:
                self._note_memory_event(decision, at)
        elif isinstance(event, ExtractionFailure):
            if not event.retry_scheduled:
                try:
                    opened_failure = open_event(event, self.keys)
                except SealError:
                    opened_failure = None
                reason = opened_failure.reason if opened_failure is not None else "failed"
                self._failed[event.consolidation_event_id] = reason
        elif isinstance(event, MemoryAdded | MemoryReinforced):
            made_by = self._by_extraction.get(event.extraction_event_id)
            if made_by is None:
                self._early_decisions.append((event, offset))
                return
            kind = "memory" if isinstance(event, MemoryAdded) else "reinforce"
            for index in range(made_by.candidates):
                if derived_id(made_by.event_id, kind, str(index)) == event.event_id:
                    made_by.decisions[index] = (event, offset)
                    break
        elif isinstance(event, MemorySuperseded):
            self._supersessions.append((event, offset))
        elif isinstance(event, MemoryOutdated):
            self._outdatings.append((event, offset))

    async def _projected(self, offset: int) -> None:
        """Wait until the projection has applied the user's event at ``offset``: the user's
        rows record the offsets of the events that changed them, and the projector applies a
        partition in order (a lookup of the user's rows, not a scan of the table)."""
        assert self._memories is not None
        key = (self._memories.topic, self._memories.partition)

        def applied() -> int:
            return self.projection.positions(self.user_id).get(key, 0)

        while await asyncio.to_thread(applied) <= offset:
            await asyncio.sleep(PROJECTION_POLL_S)

    def _outcome(self, status: Literal["searchable", "failed", "pending"]) -> Outcome:
        outcome = Outcome(status, failures=list(self._failed.values()))
        made: set[str] = set()
        for extraction in self._ours():
            for index in sorted(extraction.decisions):
                decision = extraction.decisions[index][0]
                if isinstance(decision, MemoryAdded):
                    outcome.added.append(decision.memory_id)
                    made.add(decision.memory_id)
                elif isinstance(decision, MemoryReinforced):
                    outcome.reinforced.append(decision.memory_id)
        outcome.superseded = [
            event.memory_id
            for event, _ in self._supersessions
            if event.superseded_by in made
        ]
        return outcome

