"""A mem0-like client for one application: writes are events, reads come from projections.

``add`` and ``delete`` publish events on the topics (chat events, ``MemoryDeleted``) and return
once the broker has acknowledged them; the worker consolidates and its projector writes
LanceDB. Nothing here writes LanceDB, so every change stays in the log and replays.
Reads (``search``, ``get``, ``get_all``) come from the LanceDB projection and see a change
once the worker has projected it, usually within a second or two; ``history`` reads the
memories topic itself.

Every call names one user (``user_id`` is a required keyword) and only ever returns that
user's data: the projection filters on a digest of the id computed in code, and ``history``
keeps only events keyed by and belonging to that user.

What the client publishes is sealed with the user's key (chat content, retrieval queries,
deletion reasons; :mod:`memstream.streams.runtime.keys`), created on the user's first write; a
deletion is sealed with the key the user has, never a new one (a user without a key was
erased, and has no memories left to delete). **The client and the
workers must share the key store** (``MEMSTREAM_DATA_DIR/keys`` on one machine, a shared
directory, or a KMS behind :class:`~memstream.streams.runtime.keys.KeyStore`, passed as ``keys``):
a worker that cannot find a user's key skips the user's events as erased.

Examples
--------
>>> with MemoryClient() as memory:  # doctest: +SKIP
...     memory.add("I live in Oslo and I prefer tea.", user_id="ann")
...     memory.search("where do I live", user_id="ann")
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self, TypedDict, TypeVar, cast, get_args

from aiokafka import AIOKafkaProducer

from memstream.models.codec import EventLimits, InvalidEvent, decode_event, encode_event
from memstream.models.crypto import SealError
from memstream.models.erasure import ErasureLedger
from memstream.models.events import (
    Event,
    MemoriesRetrieved,
    MemoryAdded,
    MemoryDeleted,
    MemoryExpired,
    MemoryForgotten,
    MemoryPromoted,
    MemoryReinforced,
    MemorySuperseded,
    Role,
    derived_id,
)
from memstream.models.settings import Settings
from memstream.projections.memories import (
    MemoryHit,
    MemoryIndex,
    MemoryProjection,
    MemoryRecord,
    SearchFilters,
)
from memstream.projections.retrieval import MAX_CANDIDATES, RankedMemory, Retriever
from memstream.streams.runtime.keys import (
    BatchKeys,
    KeyStore,
    keystore_from_settings,
    open_event,
    seal_event,
    seal_with_existing_keys,
)
from memstream.streams.runtime.logid import MarkReader, claim_log
from memstream.streams.runtime.logreader import read_topic
from memstream.streams.runtime.topics import Topics, ensure_topics
from memstream.streams.tools.publish import (
    Message,
    chat_events_for_add,
    check_encoded_size,
    check_publishable,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

_ROLES: frozenset[str] = frozenset(get_args(Role))
#: How long ``close()`` waits for access events still being published in the background.
ACCESS_FLUSH_TIMEOUT_S = 10.0


class AddResult(TypedDict):
    """What :meth:`AsyncMemoryClient.add` published."""

    session_id: str
    event_ids: list[str]


class MemoryHitDict(TypedDict):
    """A search hit, as a plain dict.

    ``score`` (0..1) is the rank score: mostly ``relevance``, which weighs ``similarity``
    (cosine of query and memory, 0..1) and ``words`` (the BM25 match of the query's words,
    saturated to 0..1) equally; importance, recency and use move it by a few hundredths at
    most with the default weights. ``context`` is the conversation around the memory (the
    day, who said what; "" when none), and ``source_event_ids`` cites every turn it shows.
    """

    memory_id: str
    memory: str
    type: str
    score: float
    relevance: float
    similarity: float
    words: float
    importance: float
    created_at: str
    session_id: str
    source_event_ids: list[str]
    context: str


class MemoryDict(TypedDict):
    """One memory as the projection holds it, as a plain dict."""

    memory_id: str
    memory: str
    type: str
    importance: float
    created_at: str
    session_id: str
    source_event_ids: list[str]
    status: str
    superseded_by: str | None
    tier: str
    entities: list[str]
    reinforcement_count: int
    access_count: int


class HistoryEntry(TypedDict):
    """One step in a memory's life: an event of the memories topic."""

    event_id: str
    type: str
    occurred_at: str
    memory_id: str
    source_event_ids: list[str]
    #: Type-specific fields: content, reason, superseded_by, supersedes, similarity...
    details: dict[str, Any]
    partition: int
    offset: int


# --- pure helpers ----------------------------------------------------------------------


def normalise_messages(
    messages: str | Sequence[Message] | Sequence[dict[str, Any]],
) -> list[Message]:
    """mem0's message forms as a list of ``{"role", "content"[, "name"]}`` dicts.

    A string is one user message. Raises ``ValueError`` for an empty list, a missing role or
    content, or an unknown role, and ``TypeError`` for non-text content.

    Examples
    --------
    >>> normalise_messages("I like tea")
    [{'role': 'user', 'content': 'I like tea'}]
    """
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, dict):
        messages = [messages]
    normalised: list[Message] = []
    for number, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TypeError(f"message {number} is {type(message).__name__}, not a dict")
        entry = cast(dict[str, Any], message)
        role, content = entry.get("role"), entry.get("content")
        if role not in _ROLES:
            raise ValueError(
                f"message {number}: role must be one of {sorted(_ROLES)}, not {role!r}"
            )
        if not isinstance(content, str):
            raise TypeError(f"message {number}: content must be text, not {type(content).__name__}")
        out: Message = {"role": role, "content": content}
        if entry.get("name") is not None:
            out["name"] = str(entry["name"])
        normalised.append(out)
    if not normalised:
        raise ValueError("add() needs at least one message")
    return normalised


def hit_dict(hit: MemoryHit) -> MemoryHitDict:
    """A projection hit as a plain dict (times as ISO 8601 strings)."""
    return {
        "memory_id": hit.memory_id,
        "memory": hit.content,
        "type": hit.memory_type,
        "score": hit.score,
        "relevance": hit.score,
        "similarity": hit.similarity,
        "words": hit.words,
        "importance": hit.importance,
        "created_at": hit.created_at.isoformat(),
        "session_id": hit.session_id,
        "source_event_ids": list(hit.source_event_ids),
        "context": hit.context,
    }


def ranked_dict(item: RankedMemory) -> MemoryHitDict:
    """A retrieval's ranked memory as a search hit; ``score`` is the composite rank score."""
    return {**hit_dict(item.memory), "score": item.rank_score}


def memory_dict(record: MemoryRecord) -> MemoryDict:
    """A projection record as a plain dict (times as ISO 8601 strings)."""
    return {
        "memory_id": record.memory_id,
        "memory": record.content,
        "type": record.memory_type,
        "importance": record.importance,
        "created_at": record.created_at.isoformat(),
        "session_id": record.session_id,
        "source_event_ids": list(record.source_event_ids),
        "status": record.status,
        "superseded_by": record.superseded_by,
        "tier": record.tier,
        "entities": list(record.entities),
        "reinforcement_count": record.reinforcement_count,
        "access_count": record.access_count,
    }


def _broker_ms(timestamp: int | None) -> int | None:
    """A record's broker timestamp, None when it has none (Kafka's -1)."""
    return timestamp if timestamp is not None and timestamp >= 0 else None


def history_entry(event: Event, memory_id: str, partition: int, offset: int) -> HistoryEntry | None:
    """The step ``event`` is in the life of ``memory_id``; None if it is not about it.

    A supersession appears in the life of both memories: as ``superseded_by`` in the old
    one's, as ``supersedes`` in the new one's.
    """
    details: dict[str, Any]
    sources: tuple[str, ...] = ()
    if isinstance(event, MemorySuperseded) and event.superseded_by == memory_id:
        details = {
            "supersedes": event.memory_id,
            "reason": event.reason,
            "similarity": event.similarity,
        }
    elif getattr(event, "memory_id", None) != memory_id:
        return None
    elif isinstance(event, MemoryAdded):
        details = {
            "content": event.content,
            "memory_type": event.memory_type,
            "importance": event.importance,
            "tier": event.tier,
            "extraction_event_id": event.extraction_event_id,
        }
        sources = event.source_event_ids
    elif isinstance(event, MemoryReinforced):
        details = {"similarity": event.similarity, "extraction_event_id": event.extraction_event_id}
        sources = event.source_event_ids
    elif isinstance(event, MemorySuperseded):
        details = {
            "superseded_by": event.superseded_by,
            "reason": event.reason,
            "similarity": event.similarity,
        }
    elif isinstance(event, MemoryDeleted | MemoryPromoted | MemoryExpired):
        details = {"reason": event.reason}
    elif isinstance(event, MemoryForgotten):
        details = {
            "policy": event.policy,
            "score": event.score,
            "threshold": event.threshold,
            "reason": event.reason,
        }
    else:
        return None
    return {
        "event_id": event.event_id,
        "type": event.type,
        "occurred_at": event.occurred_at.isoformat(),
        "memory_id": memory_id,
        "source_event_ids": list(sources),
        "details": details,
        "partition": partition,
        "offset": offset,
    }


def _settings_from_env() -> Settings:
    """Settings from the ``MEMSTREAM_*`` environment (defaults elsewhere)."""
    # Passed as a dict: the fields all have defaults, which mypy cannot see without a plugin.
    overrides: dict[str, Any] = {}
    return Settings(**overrides)


def _check_id(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    return value


# --- the async client ------------------------------------------------------------------


class AsyncMemoryClient:
    """mem0-like memory operations for asyncio code; writes are events on the topics.

    One aiokafka producer, started on the first write, serves every call; use the client on
    one event loop and close it (``async with`` does) to flush and stop it. LanceDB reads run
    in worker threads so they never block the loop.

    Parameters
    ----------
    settings
        Broker, topics and data directory; read from ``MEMSTREAM_*`` variables when None.
    projection
        The memory index to read (any :class:`~memstream.projections.memories.MemoryIndex`);
        by default the LanceDB projection in ``settings.lancedb_dir``, opened (with its
        embedder) on the first read.
    keys
        The per-user content keys; by default ``settings.keys_dir``. It must be the key
        store the workers use (see the module docstring).

    Examples
    --------
    >>> async with AsyncMemoryClient() as memory:  # doctest: +SKIP
    ...     await memory.add([{"role": "user", "content": "I live in Oslo"}], user_id="ann")
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        projection: MemoryIndex | None = None,
        keys: KeyStore | None = None,
    ) -> None:
        self.settings = settings or _settings_from_env()
        self.keys = keys if keys is not None else keystore_from_settings(self.settings)
        self.topics = Topics.from_settings(self.settings)
        self._projection = projection
        self._projection_lock = threading.Lock()
        self._producer: AIOKafkaProducer | None = None
        self._producer_lock: asyncio.Lock | None = None
        #: Reads the broker's log mark before every write (see memstream.streams.runtime.logid).
        self._marks: MarkReader | None = None
        self._background: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Wait (bounded) for background access events, then stop the producer."""
        if self._background:
            _, pending = await asyncio.wait(set(self._background), timeout=ACCESS_FLUSH_TIMEOUT_S)
            for task in pending:
                task.cancel()
        if self._producer is not None:
            producer, self._producer = self._producer, None
            await producer.stop()
        if self._marks is not None:
            marks, self._marks = self._marks, None
            await marks.close()

    # --- writes -----------------------------------------------------------------------

    async def add(
        self,
        messages: str | Sequence[Message] | Sequence[dict[str, Any]],
        *,
        user_id: str,
        session_id: str | None = None,
        agent_id: str | None = None,
        close: bool = True,
        event_ids: Sequence[str] | None = None,
        occurred_at: datetime | None = None,
    ) -> AddResult:
        """Publish a conversation as chat events; the worker turns it into memories.

        Publishes ``session_started`` when no ``session_id`` is given (one is generated), one
        ``message_added`` per message and, unless ``close=False``, a ``session_closed`` so
        the worker consolidates the session now. Event ids are uuid4s, or deterministic when
        ``event_ids`` (one per message) are given, so a retried call repeats the same events.
        Returns after the broker acknowledged every event; memories appear once the worker
        has consolidated and projected them.

        Raises
        ------
        ValueError
            Malformed messages or ids, or an event over ``settings.max_event_bytes``
            (checked before anything is published).
        TypeError
            Content that is not text.
        """
        _check_id("user_id", user_id)
        session_id, events = chat_events_for_add(
            normalise_messages(messages),
            user_id=user_id,
            session_id=session_id,
            agent_id=agent_id,
            close=close,
            event_ids=event_ids,
            occurred_at=occurred_at,
        )
        await self._publish(self.topics.chat, events)
        return {"session_id": session_id, "event_ids": [event.event_id for event in events]}

    async def delete(self, memory_id: str, *, user_id: str, reason: str = "requested") -> str:
        """Publish a ``MemoryDeleted`` for one of the user's memories; return its event id.

        The delete id is deterministic (user, memory), so a retry repeats the same event.
        The memory leaves search and ``get_all`` once the projector has applied it.

        Raises
        ------
        KeyError
            The memory is unknown, or belongs to another user (the two are not told apart).
            Ownership is checked in the projection, so a memory still on its way there
            (published, not yet projected) is unknown too. Also when the user has no key:
            the user was erased (the projection drops the memory as it applies that).
        """
        record = await self._get_record(memory_id, user_id=user_id)
        if record is None:
            raise KeyError(memory_id)
        sealed = await asyncio.to_thread(
            self._sealed_deletions, [self._deletion(record, user_id, reason)]
        )
        if not sealed:
            raise KeyError(memory_id)
        await self._publish(self.topics.memories, sealed)
        return sealed[0].event_id

    async def delete_all(self, *, user_id: str, reason: str = "requested") -> list[str]:
        """Publish a ``MemoryDeleted`` for each active memory of the user; return the ids
        (none for a user without a key: erased)."""
        projection = await self._projection_ready()
        records = await asyncio.to_thread(projection.list_memories, _check_id("user_id", user_id))
        events = await asyncio.to_thread(
            self._sealed_deletions, [self._deletion(record, user_id, reason) for record in records]
        )
        await self._publish(self.topics.memories, events)
        return [event.event_id for event in events]

    def _sealed_deletions(self, events: Sequence[MemoryDeleted]) -> list[MemoryDeleted]:
        """The deletions sealed with their user's current key, never a new one (see
        :func:`~memstream.streams.runtime.keys.seal_with_existing_keys`)."""
        return seal_with_existing_keys(events, self.keys, "client")

    def _deletion(self, record: MemoryRecord, user_id: str, reason: str) -> MemoryDeleted:
        return MemoryDeleted(
            event_id=derived_id("client-delete", user_id, record.memory_id),
            user_id=user_id,
            session_id=record.session_id,
            occurred_at=datetime.now(UTC),
            memory_id=record.memory_id,
            reason=reason,
        )

    # --- reads ------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 5,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
    ) -> list[MemoryHitDict]:
        """The user's active memories most relevant to ``query``, best first, as plain dicts.

        Ranked by :meth:`~memstream.projections.retrieval.Retriever.search`: the same memories
        as the projection's hybrid search of ``limit``, ordered by the rank score (relevance,
        with importance, recency and use breaking near-ties), every type competing for the
        places. ``score`` is that rank score on 0..1; ``relevance``, ``similarity`` and
        ``words`` are its parts (see :class:`MemoryHitDict`). An episode's ``context`` is the
        conversation it came from. The retrieval's access event, naming the memories
        returned, goes to the accesses topic in the background and never delays the answer.

        ``as_of`` answers from what memstream believed at that time: memories recorded by
        then (event time) and not superseded or expired by then, ranked with recency as of
        then. Deleted memories stay out. A point-in-time search is not counted as use (it
        publishes no access event).

        Raises
        ------
        ValueError
            ``limit`` outside 1 to 200, or an unknown memory type in ``filters``.
        """
        if as_of is not None and as_of.tzinfo is None:
            raise ValueError("as_of needs a timezone")
        if not 1 <= limit <= MAX_CANDIDATES:
            raise ValueError(f"limit must be between 1 and {MAX_CANDIDATES}")
        _check_id("user_id", user_id)
        projection = await self._projection_ready()
        if as_of is None:
            retriever = Retriever(projection, self.settings)
        else:
            filters = replace(filters or SearchFilters(), as_of=as_of)
            retriever = Retriever(projection, self.settings, clock=lambda: as_of)
        items = await asyncio.to_thread(
            retriever.search, user_id, query, limit=limit, filters=filters
        )
        event = retriever.access_event(user_id, query, items)
        if event is not None and as_of is None:
            self._publish_in_background(event)
        return [ranked_dict(item) for item in items]

    async def get(self, memory_id: str, *, user_id: str) -> MemoryDict | None:
        """One of the user's memories (active or not); None if unknown or another user's."""
        record = await self._get_record(memory_id, user_id=user_id)
        return memory_dict(record) if record is not None else None

    async def get_all(self, *, user_id: str, include_inactive: bool = False) -> list[MemoryDict]:
        """The user's memories, newest first: active ones, or every status when asked."""
        projection = await self._projection_ready()
        records = await asyncio.to_thread(
            projection.list_memories,
            _check_id("user_id", user_id),
            include_inactive=include_inactive,
        )
        return [memory_dict(record) for record in records]

    async def history(self, memory_id: str, *, user_id: str) -> list[HistoryEntry]:
        """The life of one of the user's memories from the memories topic, in log order.

        Its add, reinforcements, supersession (either side), promotion, expiry, forgetting
        and deletion, each with event type, event time and source events. Only events keyed
        by the user and carrying the user's id count, so another user's memory id yields an
        empty list. Sealed events are opened with the user's key; once the user is erased
        they are left out: every event of the user before the user's latest ``user_erased``
        event (by offset on its partition, by broker time elsewhere; see
        :mod:`memstream.models.erasure`), sealed or not, so the history of an erased user is
        empty while a returning user's new memories have theirs. Reads the whole topic: cost
        grows with the log.
        """
        _check_id("memory_id", memory_id)
        try:
            key = _check_id("user_id", user_id).encode()
        except UnicodeEncodeError:
            return []  # no event can carry such a user id: nothing was ever published for it
        records = [
            r
            for r in await read_topic(self.settings, self.topics.memories)
            if r.key == key and r.value is not None
        ]
        # Unsealed events (reinforcements, supersessions, deletions, events of producers
        # that do not seal) still open after the key is destroyed: the erasure itself must
        # end them.
        erasures = ErasureLedger([self.topics.memories], max_bytes=self.settings.max_event_bytes)
        for record in records:
            erasures.note(
                record.topic, record.partition, record.offset, _broker_ms(record.timestamp),
                record.key, record.value,
            )
        entries: list[HistoryEntry] = []
        for record in records:
            if erasures.covers(
                (user_id,), record.topic, record.partition, record.offset,
                _broker_ms(record.timestamp),
            ):
                continue
            try:
                event = decode_event(record.value, max_bytes=self.settings.max_event_bytes)
            except InvalidEvent:
                continue  # dead-lettered by the projector; not part of any memory's life
            if event.user_id != user_id:
                continue
            try:
                opened = open_event(event, self.keys)
            except SealError:
                continue  # altered in the log: dead-lettered by the projector
            if opened is None:
                continue  # the user was erased: nothing of it can be read
            entry = history_entry(opened, memory_id, record.partition, record.offset)
            if entry is not None:
                entries.append(entry)
        return entries

    async def _get_record(self, memory_id: str, *, user_id: str) -> MemoryRecord | None:
        projection = await self._projection_ready()
        return await asyncio.to_thread(
            projection.get, _check_id("user_id", user_id), _check_id("memory_id", memory_id)
        )

    async def _projection_ready(self) -> MemoryIndex:
        if self._projection is None:
            self._projection = await asyncio.to_thread(self._open_projection)
        return self._projection

    def _open_projection(self) -> MemoryIndex:
        from memstream.projections.embedder import embedder_from_settings

        with self._projection_lock:
            if self._projection is None:
                embedder = embedder_from_settings(self.settings)
                self._projection = MemoryProjection(self.settings.lancedb_dir, embedder)
            return self._projection

    # --- publishing -------------------------------------------------------------------

    async def _publish(self, topic: str, events: Sequence[Event]) -> None:
        """Seal the events' content with their users' keys, send them keyed by user id and
        wait for every ack; first refuses what a worker would (times outside the window,
        content and sizes over the limits), so nothing of a bad call is sent."""
        limits = EventLimits.from_settings(self.settings)
        check_publishable(events, limits)
        if any(type(event).content_fields for event in events):
            events = await asyncio.to_thread(self._sealed, events)
        encoded = [(event.user_id.encode(), encode_event(event)) for event in events]
        for (_, value), event in zip(encoded, events, strict=True):
            check_encoded_size(event, value, limits)
        if not encoded:
            return
        producer = await self._producer_ready()
        if self._marks is not None:
            # A broker that lost the log (the embedded one after a restart) would acknowledge
            # the write and the recovery would replace its log: refuse it instead.
            await self._marks.check()
        futures = [await producer.send(topic, key=key, value=value) for key, value in encoded]
        await asyncio.gather(*futures)

    def _sealed(self, events: Sequence[Event]) -> list[Event]:
        keys = BatchKeys(self.keys)  # one look-up per user, not per event
        sealed = []
        for event in events:
            # Without a key id the user's current key seals it (created on first use): never None.
            found = seal_event(event, keys)
            assert found is not None
            sealed.append(found)
        return sealed

    async def _producer_ready(self) -> AIOKafkaProducer:
        if self._producer_lock is None:
            self._producer_lock = asyncio.Lock()
        async with self._producer_lock:
            if self._producer is None:
                await ensure_topics(self.settings)
                await claim_log(self.settings)
                self._marks = MarkReader(self.settings)
                producer = AIOKafkaProducer(
                    bootstrap_servers=self.settings.broker, acks="all", linger_ms=5
                )
                await producer.start()
                self._producer = producer
        return self._producer

    def _publish_in_background(self, event: MemoriesRetrieved) -> None:
        async def publish() -> None:
            try:
                await self._publish(self.topics.accesses, [event])
            except Exception:
                # Access counts only steer promotion; losing one must not fail a read.
                log.warning("client: access event %s not published", event.event_id, exc_info=True)

        task = asyncio.get_running_loop().create_task(publish())
        self._background.add(task)
        task.add_done_callback(self._background.discard)


# --- the sync client -------------------------------------------------------------------


class MemoryClient:
    """The synchronous client: :class:`AsyncMemoryClient` on its own event loop thread.

    The loop runs in a daemon thread the client owns, so calls work the same from plain
    scripts and from code already inside a running loop (a notebook, a web handler): each
    call is handed to that loop and waited for. One producer serves every call. Close the
    client (``with`` does) to flush background access events and stop the thread.

    Examples
    --------
    >>> with MemoryClient() as memory:  # doctest: +SKIP
    ...     result = memory.add("I prefer window seats.", user_id="ann")
    ...     memory.get_all(user_id="ann")
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        projection: MemoryIndex | None = None,
        keys: KeyStore | None = None,
    ) -> None:
        self._client = AsyncMemoryClient(settings, projection=projection, keys=keys)
        self.settings = self._client.settings
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="memstream-client", daemon=True
        )
        self._thread.start()
        self._closed = False

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Flush, stop the producer and the loop thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._client.close(), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coroutine.close()
            raise RuntimeError("the client is closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def add(
        self,
        messages: str | Sequence[Message] | Sequence[dict[str, Any]],
        *,
        user_id: str,
        session_id: str | None = None,
        agent_id: str | None = None,
        close: bool = True,
        event_ids: Sequence[str] | None = None,
        occurred_at: datetime | None = None,
    ) -> AddResult:
        """Publish a conversation as chat events (see :meth:`AsyncMemoryClient.add`)."""
        return self._run(
            self._client.add(
                messages,
                user_id=user_id,
                session_id=session_id,
                agent_id=agent_id,
                close=close,
                event_ids=event_ids,
                occurred_at=occurred_at,
            )
        )

    def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 5,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
    ) -> list[MemoryHitDict]:
        """The user's most relevant memories, now or ``as_of`` a past time (see
        :meth:`AsyncMemoryClient.search`)."""
        return self._run(
            self._client.search(query, user_id=user_id, limit=limit, filters=filters, as_of=as_of)
        )

    def get(self, memory_id: str, *, user_id: str) -> MemoryDict | None:
        """One of the user's memories; None if unknown or another user's."""
        return self._run(self._client.get(memory_id, user_id=user_id))

    def get_all(self, *, user_id: str, include_inactive: bool = False) -> list[MemoryDict]:
        """The user's memories, newest first (see :meth:`AsyncMemoryClient.get_all`)."""
        return self._run(self._client.get_all(user_id=user_id, include_inactive=include_inactive))

    def history(self, memory_id: str, *, user_id: str) -> list[HistoryEntry]:
        """The life of one of the user's memories, in log order (see the async client)."""
        return self._run(self._client.history(memory_id, user_id=user_id))

    def delete(self, memory_id: str, *, user_id: str, reason: str = "requested") -> str:
        """Publish a ``MemoryDeleted``; ``KeyError`` if the memory is not the user's."""
        return self._run(self._client.delete(memory_id, user_id=user_id, reason=reason))

    def delete_all(self, *, user_id: str, reason: str = "requested") -> list[str]:
        """Publish a ``MemoryDeleted`` per active memory of the user; return the event ids."""
        return self._run(self._client.delete_all(user_id=user_id, reason=reason))
