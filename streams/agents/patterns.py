"""The pattern learner: a user's recurring behaviour, learned in the extraction path and
recorded as ``pattern`` memories with their evidence (see :mod:`memstream.models.patterns`).

Each span's observation is recorded in its :class:`ExtractionRecorded` (``observed``), so the
counts are a fold of the log: after a start, or when a user's partition is assigned again,
the learner folds the user's recorded observations from the memories topic before learning
from the next span. A span delivered again (at-least-once) counts once, since the book counts
sessions; its pattern events are published *before* its extraction record, so once the record
is in the log the events it caused are too, and a crash never makes the rebuilt book skip
an event the uncrashed run published. Ids derive from the user, the pattern and its evidence.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence

from memstream.models.codec import EventLimits, InvalidEvent, worker_now
from memstream.models.events.consolidation import ConsolidationRequested
from memstream.models.events.envelope import Event, derived_id
from memstream.models.events.memory import (
    ExtractionRecorded,
    MemoryAdded,
    MemoryCandidate,
    MemorySuperseded,
)
from memstream.models.patterns import (
    PatternBook,
    PatternChange,
    SpanObservation,
    corrected_attributes,
    observe_span,
    pattern_changes,
    record,
)
from memstream.models.settings import Settings
from memstream.models.topics import MEMORIES_TOPIC_TYPES, Topics
from memstream.models.vectors import pack_vector
from memstream.projections.embedder import Embedder, embed_groups
from memstream.projections.memories import embedded_texts
from memstream.streams.agents.decoding import decode_opened
from memstream.streams.kafka.logreader import key_partition, read_topic
from memstream.streams.keys.store import KeyStore

__all__ = ["PATTERN_EXTRACTOR", "PatternLearner", "observe_request", "partition_of_user",
           "pattern_events", "recorded_observations", "with_vectors"]

log = logging.getLogger(__name__)

#: The ``extractor`` of a pattern memory: the learner, not a model.
PATTERN_EXTRACTOR = "patterns/1"

#: Loads the observations recorded on the partition of a user, by user, in log order.
HistoryLoader = Callable[[str], Awaitable[dict[str, list[SpanObservation]]]]


def observe_request(
    request: ConsolidationRequested, candidates: Sequence[MemoryCandidate]
) -> SpanObservation:
    """What ``request``'s span shows of the user's habits: the user's requests, the
    session's tools and the corrections its extraction found (pure: the same request and
    candidates give the same observation, so a replay reads it and never observes again)."""
    return observe_span(
        request.session_id,
        request.session_started_at or request.messages[0].occurred_at,
        [(m.event_id, m.content) for m in request.messages if m.role == "user"],
        [(tool.event_id, tool.name) for tool in request.tools],
        corrected_attributes(
            [
                (c.memory_type, c.content, c.claim.attribute if c.claim else None,
                 c.source_event_ids)
                for c in candidates
            ]
        ),
    )


def with_vectors(events: Sequence[Event], embedder: Embedder) -> list[Event]:
    """``events`` with each pattern memory carrying its vector (its texts embedded here,
    once, as the decider embeds every other memory), so no projection embeds it again."""
    added = [i for i, e in enumerate(events) if isinstance(e, MemoryAdded) and e.vector is None]
    found = list(events)
    if not added:
        return found
    groups = [embedded_texts(events[i]) for i in added]  # type: ignore[arg-type]
    for index, vector in zip(added, embed_groups(embedder.embed, groups), strict=True):
        found[index] = events[index].model_copy(
            update={"vector": pack_vector(vector.tolist()), "embedding_model": embedder.model_id}
        )
    return found


def pattern_events(recorded: ExtractionRecorded, changes: Iterable[PatternChange]) -> list[Event]:
    """The events of ``changes`` learned from ``recorded``: a :class:`MemoryAdded` of type
    ``pattern`` for each new version (its evidence as JSON in ``context``, its evidence's
    events as sources) and a :class:`MemorySuperseded` of the version it replaces."""
    events: list[Event] = []
    # The envelope of every event learned from ``recorded``.
    common = {
        "user_id": recorded.user_id,
        "agent_id": recorded.agent_id,
        "session_id": recorded.session_id,
        "occurred_at": recorded.occurred_at,
    }
    for change in changes:
        pattern = change.pattern
        memory_id = pattern.memory_id(recorded.user_id)
        events.append(
            MemoryAdded(
                event_id=derived_id(memory_id, "pattern-added"),
                extractor=PATTERN_EXTRACTOR,
                memory_id=memory_id,
                memory_type="pattern",
                content=pattern.content,
                importance=pattern.importance,
                extraction_event_id=recorded.event_id,
                source_event_ids=pattern.event_ids,
                context=pattern.evidence(),
                **common,
            )
        )
        if change.supersedes is not None:
            old_id = change.supersedes.memory_id(recorded.user_id)
            events.append(
                MemorySuperseded(
                    event_id=derived_id(old_id, "pattern-superseded", memory_id),
                    memory_id=old_id,
                    superseded_by=memory_id,
                    reason="pattern seen in more sessions",
                    similarity=1.0,
                    valid_until=recorded.occurred_at,
                    **common,
                )
            )
    return events


class PatternLearner:
    """Keeps each user's :class:`PatternBook` and turns a recorded extraction into the
    pattern events it causes.

    Parameters
    ----------
    load_history
        The observations recorded on a user's partition of the memories topic, by user
        (:func:`recorded_observations`); read once per partition after a start or
        :meth:`forget_all`, so a restart costs a read of each partition, not one per user.
    partition_of
        The partition a user's records land on (every user of a loaded partition has a
        book, empty for a user new since).
    max_users
        Books held at once; the least recently used is dropped, and its partition read
        again on need.
    """

    def __init__(
        self,
        load_history: HistoryLoader,
        partition_of: Callable[[str], int],
        *,
        max_users: int = 10_000,
    ) -> None:
        self.load_history = load_history
        self.partition_of = partition_of
        self.max_users = max_users
        self._books: OrderedDict[str, PatternBook] = OrderedDict()
        self._loaded: set[int] = set()
        #: Books dropped for room so far.
        self._dropped = 0

    async def book(self, user_id: str) -> PatternBook:
        """The user's book, folded from the log on first need."""
        book = self._books.get(user_id)
        if book is not None:
            self._books.move_to_end(user_id)
            return book
        partition = self.partition_of(user_id)
        if partition in self._loaded:  # read since: a user new to it
            book = PatternBook()
            self._keep(user_id, book)
            return book
        folded: dict[str, PatternBook] = {}
        for other, observations in (await self.load_history(user_id)).items():
            if other in self._books:
                continue  # learned here since the read began: the book holds more
            found = PatternBook()
            for observation in observations:
                found = record(found, observation)
            folded[other] = found
        book = folded.pop(user_id, PatternBook())
        dropped = self._dropped
        for other, found in folded.items():
            self._keep(other, found)
        self._keep(user_id, book)
        # Trusted only if no book was dropped for room meanwhile (it may be of this
        # partition: the next need of it reads the partition again).
        if self._dropped == dropped:
            self._loaded.add(partition)
        return book

    def _keep(self, user_id: str, book: PatternBook) -> None:
        self._books[user_id] = book
        self._books.move_to_end(user_id)
        while len(self._books) > self.max_users:
            dropped, _ = self._books.popitem(last=False)
            # Its book is gone: the partition must be read again before it is trusted.
            self._loaded.discard(self.partition_of(dropped))
            self._dropped += 1

    async def learn(self, recorded: ExtractionRecorded) -> list[Event]:
        """The pattern events ``recorded``'s observation causes (none without one), and the
        user's book updated; publish them before ``recorded`` (see the module's note)."""
        if recorded.observed is None:
            return []
        before = await self.book(recorded.user_id)
        after = record(before, recorded.observed)
        self._keep(recorded.user_id, after)
        return pattern_events(recorded, pattern_changes(before, after))

    def forget(self, user_ids: Iterable[str]) -> None:
        """Drop these users' books (their events were not published, or they were erased):
        their partitions are read again from the log on their next span."""
        for user_id in user_ids:
            self._books.pop(user_id, None)
            self._loaded.discard(self.partition_of(user_id))

    def forget_all(self) -> None:
        """Drop every book (partitions were assigned: another worker may have learned)."""
        self._books.clear()
        self._loaded.clear()


def recorded_observations(settings: Settings, keys: KeyStore | None) -> HistoryLoader:
    """A history loader reading the memories topic: the recorded extractions' observations
    of every user on the partition of the user asked for, in log order."""
    limits = EventLimits.from_settings(settings, derived=True)
    topic = Topics.from_settings(settings).memories

    async def load(user_id: str) -> dict[str, list[SpanObservation]]:
        found: dict[str, list[SpanObservation]] = {}
        key = user_id.encode("utf-8", "surrogatepass")
        for message in await read_topic(settings, topic, key=key):
            try:
                opened = decode_opened(message.value, message.key, MEMORIES_TOPIC_TYPES,
                                       limits, keys, now=worker_now(message))
            except InvalidEvent:  # the projector dead-letters it; nothing to count
                continue
            event = None if opened is None else opened.event
            if isinstance(event, ExtractionRecorded) and event.observed is not None:
                found.setdefault(event.user_id, []).append(event.observed)
        return found

    return load


def partition_of_user(settings: Settings) -> Callable[[str], int]:
    """The partition of the memories topic a user's records land on (the settings'
    partition count, which every memstream topic has: see ``ensure_topics``)."""
    partitions = range(settings.partitions)
    return lambda user_id: key_partition(user_id.encode("utf-8", "surrogatepass"), partitions)
