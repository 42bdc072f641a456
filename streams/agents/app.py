"""The composition root: ``create_app(settings)`` builds the Faust app and its agents.

Topics → agents → projections::

    chat ──► session agent ──(sessions table)──► consolidation ──► extraction agent
                                                                        │
    deadletters ◄── anything an agent cannot process                    ▼
                                         LanceDB ◄── memory projector ◄── memories

Processing is at-least-once (Tansu has no transactions), so every step is idempotent: the
session state records the last applied offset, derived events have deterministic ids, and
the projection tracks its source offsets in the rows it writes.

Content is sealed with its user's key everywhere it is durable (:mod:`memstream.streams.runtime.keys`):
every event this app publishes is sealed with the key of the events it comes from, the
sessions table's values too, and dead letters of a user with a key. Events whose key is
destroyed (an erased user) are skipped and counted, never dead-lettered.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Sequence
from typing import Any

import faust

from memstream.models.codec import EventLimits, encode_event, worker_now
from memstream.models.events import (
    ConsolidationRequested,
    Event,
)
from memstream.models.extraction import Extractor, OfflineExtractor
from memstream.models.session import SessionValue, session_key
from memstream.models.settings import Settings
from memstream.models.topics import CONSOLIDATION_TYPES
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import MemoryProjection
from memstream.streams.agents.boundary import (
    BrokerProbe,
    FunctionProbe,
    RecordBoundary,
    StateReport,
    supervise,
)
from memstream.streams.agents.ordering import InOrder, install_commit_guard
from memstream.streams.agents.session_table import (
    IdleTracker,
    SessionStore,
    fold_batch,
    utc_now,
    window_limits,
)
from memstream.streams.agents.steps import (
    MemoryDecider,
    decode_opened,
    extraction_failure,
    record_extraction,
)
from memstream.streams.archive import run_archive_sink
from memstream.streams.llm_extractor import ExtractionFailed, LLMExtractor
from memstream.streams.projector.memories import ProjectorProgress, run_memory_projector
from memstream.streams.runtime.deadletters import DeadLetterSink
from memstream.streams.runtime.health import (
    ComponentReport,
    Components,
    caught_up,
    periodic,
    watch_faust,
    watched_agent,
    watched_task,
)
from memstream.streams.runtime.keys import BatchKeys, keystore_from_settings, seal_event
from memstream.streams.runtime.logid import LogWatch
from memstream.streams.runtime.tansu import faust_settings_for, prepare_for_broker
from memstream.streams.runtime.topics import Topics
from memstream.streams.runtime.web import faust_web_settings, register_pages

log = logging.getLogger(__name__)


def extractor_from_settings(settings: Settings) -> Extractor:
    """The extractor ``settings`` choose: the offline one, or an LLM behind the openai client."""
    if settings.extractor == "llm":
        return LLMExtractor.from_settings(settings)
    return OfflineExtractor()


def component_states(components: Components) -> StateReport:
    """How the boundaries and supervisors report into the readiness registry: a state text
    (``retrying: ...``, ``restarting after ...``; fixed words and type names only), or None
    once the component works again."""

    def report(name: str, state: str | None) -> None:
        if state is None:
            components.running(name)
        elif state.startswith("restarting"):
            components.restarting(name, state)
        else:
            components.retrying(name, state)

    return report


def create_app(
    settings: Settings,
    *,
    extractor: Extractor | None = None,
    components: Components | None = None,
) -> faust.App:
    """Build the memstream Faust app for ``settings``; nothing starts until a worker runs it.

    ``components`` is the registry the agents and tasks report their state into (the
    ``/ready/`` page reads it); a new one by default.

    Examples
    --------
    >>> app = create_app(Settings(topic_prefix="doc"))  # doctest: +SKIP
    >>> app.conf.id
    'doc.worker'
    """
    prepare_for_broker(settings)
    install_commit_guard()
    topics = Topics.from_settings(settings)
    extractor = extractor or extractor_from_settings(settings)
    limits = window_limits(settings)
    event_limits = EventLimits.from_settings(settings)
    derived_limits = EventLimits.from_settings(settings, derived=True)
    app = faust.App(
        f"{settings.topic_prefix}.{settings.app_id}",
        broker=[f"kafka://{address}" for address in settings.broker.split(",")],
        store="memory://",
        datadir=str(settings.faust_dir),
        **faust_web_settings(settings),
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
        # Table keys and values are JSON; the event topics carry raw bytes that we validate
        # ourselves, so a malformed event never reaches Faust's deserialiser.
        key_serializer="json",
        value_serializer="json",
        # A session's state, a span, an extraction: bounded by the window's limits, and
        # allowed up to this size (the broker must accept it too).
        producer_max_request_size=settings.max_record_bytes,
        **faust_settings_for(settings),
    )

    def raw_topic(name: str) -> Any:
        return app.topic(
            name, key_serializer="raw", value_serializer="raw", partitions=settings.partitions
        )

    chat = raw_topic(topics.chat)
    consolidation = raw_topic(topics.consolidation)
    memories = raw_topic(topics.memories)
    deadletters = raw_topic(topics.deadletters)
    sessions = app.Table(
        "sessions", default=None, partitions=settings.partitions, key_type=str, value_type=bytes
    )
    keys = keystore_from_settings(settings)
    store = SessionStore(sessions, settings.session_cache_size, keys)
    idle = IdleTracker(settings.idle_timeout_s, settings.max_session_age_s)

    def sealed(events: Sequence[Event], key_ids: Sequence[str | None]) -> list[Event]:
        """The events sealed with the key of what they derive from (None: the user's
        current key); those whose key is destroyed meanwhile (an erasure) are dropped."""
        kept: list[Event] = []
        looked_up = BatchKeys(keys)  # looked up once per call: fresh after any erasure
        for event, key_id in zip(events, key_ids, strict=True):
            sealed_event = seal_event(event, looked_up, key_id=key_id)
            if sealed_event is None:
                log.info("%s %s dropped: its user was erased", event.type, event.event_id)
                continue
            kept.append(sealed_event)
        return kept

    async def publish(topic: Any, *events: Event, key_id: str | None = None) -> None:
        # Send them all, then wait for the broker's acks: the state change that follows must
        # never get ahead of what it announced.
        ready = await asyncio.to_thread(sealed, events, [key_id] * len(events))
        await send_all(topic, ready)

    async def send_all(topic: Any, events: Sequence[Event]) -> None:
        futures = [
            await topic.send(key=event.user_id.encode(), value=encode_event(event))
            for event in events
        ]
        for future in futures:
            await future

    async def send_letter(key: bytes | None, value: bytes) -> None:
        future = await deadletters.send(key=key, value=value)
        await future

    roles = settings.role_set
    components = components if components is not None else Components()
    report = component_states(components)
    letters = DeadLetterSink(send_letter, keys)
    broker = BrokerProbe(settings.broker)

    def log_lost(reason: str) -> None:
        components.block_all("the broker lost its log: run memstream restore")

    # Once the broker no longer holds the log this worker started on, nothing more is
    # processed (the records stay uncommitted for after `memstream restore`).
    watch = LogWatch(settings, on_lost=log_lost)

    async def seek(tp: Any, offset: int) -> None:
        await app.consumer.seek(tp, offset)

    # Each agent processes its partitions' records in offset order, never past a hole.
    chat_order = InOrder("sessions", seek)
    consolidation_order = InOrder("extraction", seek)

    session_boundary = RecordBoundary("sessions", letters, [broker], report=report)
    chat_log_intact = watch.verifier()

    async def session_agent(stream: Any) -> None:
        """Keep one state per open session; hand transcripts to consolidation.

        Events come in batches; each touched session is written once per batch, after the
        consolidation requests of the batch are acknowledged (so none can be lost). A batch
        that fails for a reason of its data is folded again one record at a time, so only
        the records at fault are dead-lettered (:class:`RecordBoundary`).
        """
        async for events in stream.take_events(
            settings.session_batch_size, within=settings.session_batch_wait_s
        ):
            if not await chat_log_intact():
                await watch.wait_intact()  # blocks: the log was lost; nothing more is folded
            messages = [event.message for event in events if await chat_order.accept(event.message)]
            await session_boundary.run_batch(messages, fold_and_hand_over)

    async def fold_and_hand_over(messages: Sequence[Any]) -> None:
        """Fold chat records into the sessions table and publish the consolidation requests
        they make. Idempotent: a record applied already is recognised by its offset."""
        batch = fold_batch(store, messages, limits, event_limits, keys)
        if batch.erased:
            log.info("sessions: %d event(s) of erased users skipped", batch.erased)
        # A span is sealed with the key of the session it comes from.
        session_keys = [
            batch.key_ids.get(key) or store.key_id(key)
            for key in (session_key(c.user_id, c.session_id) for c in batch.consolidations)
        ]
        await send_all(
            consolidation,
            await asyncio.to_thread(sealed, batch.consolidations, session_keys),
        )
        # Changelog writes are queued, not awaited (see SessionStore.write).
        written: list[tuple[str, SessionValue | None, int, str | None]] = [
            (key, value, partition, batch.key_ids.get(key))
            for key, (value, partition) in batch.writes.items()
        ]
        for key, value, partition, key_id in written:
            await store.write(key, value, partition, key_id)
            if value is not None:
                idle.touch(key, value)
        # Last: if anything above fails, the batch is folded again record by record, and a
        # record dead-lettered here already would be dead-lettered twice.
        for message, fault in batch.dead:
            await session_boundary.dead_letter(message, fault)

    async def close_idle_sessions() -> None:
        """Publish closes for idle and over-age sessions; drop old closed-session markers.

        A scan that fails (the broker is down) is logged and the next one tries again: a
        close is requested once per last event, and only once it went out."""
        if not watch.intact():
            return
        try:
            now = utc_now()
            closes = idle.closes_due(store, now)
            for close in closes:
                log.info("sessions: closing %s/%s (%s)", close.user_id, close.session_id, close.reason)
            await publish(chat, *closes)
            for key, partition in idle.expired_markers(store, settings.closed_retention_s):
                await store.write(key, None, partition)
        except Exception:  # a timer that raises would stop the worker
            idle.requested.clear()  # ask again at the next scan
            log.exception("sessions: the idle scan failed; the next one tries again")

    async def forget_parsed_sessions(sender: Any, *args: Any, **kwargs: Any) -> None:
        # Partitions moved or were recovered: parsed values may be stale; the table is not.
        store.forget_cache()

    if "sessions" in roles:
        app.agent(chat, name="sessions")(watched_agent(components, "sessions", session_agent))
        idle_scan = periodic(app, settings.session_scan_interval_s, close_idle_sessions)
        app.task(watched_task(components, "idle-scan", idle_scan))
        # mode types receivers as sync callables with a keyword-only `signal`; async ones work.
        app.on_partitions_revoked.connect(forget_parsed_sessions)  # type: ignore[arg-type]
        app.on_partitions_assigned.connect(forget_parsed_sessions)  # type: ignore[arg-type]

    @functools.cache
    def memory_decider() -> MemoryDecider:
        # Built on first use, so a worker without the extraction role never loads a model.
        embedder = embedder_from_settings(settings)
        projection = MemoryProjection(settings.lancedb_dir, embedder)
        return MemoryDecider(projection, embedder, settings.long_term_importance)

    progress = ProjectorProgress()
    #: monotonic times: the last start or partition assignment, and the last one the
    #: decider waited for the projector after.
    assigned = {"at": time.monotonic(), "waited": float("-inf")}

    async def note_assignment(sender: Any, *args: Any, **kwargs: Any) -> None:
        assigned["at"] = time.monotonic()

    async def projection_holds_the_log() -> None:
        """Once after each start or assignment: wait until the projector holds every memory
        event now in the log, which a re-delivered request's first decisions may have seen
        (the decider's own recent memories are gone with the process that had them)."""
        moment = assigned["at"]
        if assigned["waited"] >= moment or "projector" not in roles:
            return
        if not await progress.caught_up_after(moment, settings.decision_catch_up_s):
            log.warning(
                "extraction: the projector did not catch up within %.0f s; deciding anyway",
                settings.decision_catch_up_s,
            )
        assigned["waited"] = moment

    retries: set[asyncio.Task[None]] = set()

    async def retry_later(request: ConsolidationRequested, key_id: str | None) -> None:
        await asyncio.sleep(settings.llm_retry_delay_s)
        await publish(consolidation, request, key_id=key_id)

    async def extraction_failed(
        message: Any,
        request: ConsolidationRequested,
        key_id: str | None,
        failure: ExtractionFailed,
        latency_ms: float,
    ) -> None:
        """Record the failure (with the raw reply), dead-letter the request, and retry the
        span later while attempts remain: nothing is dropped silently."""
        retry = request.attempt + 1 < settings.llm_attempts_per_span
        await publish(
            memories,
            extraction_failure(request, extractor, failure, latency_ms, retry=retry),
            key_id=key_id,
        )
        # The raw reply (user content) goes only in the dead letter's sealed detail and in the
        # sealed extraction_failed event.
        await letters.record(
            "extraction",
            message,
            f"extraction failed: {type(failure).__name__}; raw reply in the extraction_failed event",
            detail=f"{failure}; raw reply: {failure.raw_response[:1500]!r}",
        )
        if retry:
            task = asyncio.create_task(
                retry_later(request.model_copy(update={"attempt": request.attempt + 1}), key_id)
            )
            retries.add(task)  # keep a reference until it is done
            task.add_done_callback(retries.discard)

    def decider_store() -> None:
        memory_decider().projection.probe(writable=False)

    extraction_boundary = RecordBoundary(
        "extraction", letters, [broker, FunctionProbe("lancedb", decider_store)], report=report
    )

    async def extraction_agent(stream: Any) -> None:
        """Turn consolidation requests into recorded extractions and memory events."""
        async for event in stream.events():
            message = event.message
            await watch.wait_intact()
            if not await consolidation_order.accept(message):
                continue
            await extraction_boundary.run(message, functools.partial(extract, message))

    async def extract(message: Any) -> None:
        """Extract one consolidation request and publish what it made: the extraction
        record and the memory decisions (their ids derive from the request: idempotent)."""
        opened = decode_opened(
            message.value,
            message.key,
            CONSOLIDATION_TYPES,
            derived_limits,
            keys,
            now=worker_now(message),
        )
        if opened is None:
            log.info("extraction: a span of an erased user skipped")
            return
        request, key_id = opened
        assert isinstance(request, ConsolidationRequested)
        # Extraction (maybe an LLM) and decisions (embedding, LanceDB lookups) are slow:
        # keep them off the event loop.
        started = time.perf_counter()
        try:
            recorded = await asyncio.to_thread(record_extraction, request, extractor)
        except ExtractionFailed as failure:
            latency_ms = (time.perf_counter() - started) * 1000
            await extraction_failed(message, request, key_id, failure, latency_ms)
            return
        await projection_holds_the_log()
        decisions = await asyncio.to_thread(memory_decider().decide, recorded)
        # Sealed with the span's key: if the user was erased meanwhile, none go out.
        await publish(memories, recorded, *decisions, key_id=key_id)

    async def project_memories(health: ComponentReport) -> None:
        """Project memory events into LanceDB (single writer, tracks its own offsets); started
        again after a crash (it resumes from the offsets its rows record)."""
        await supervise(
            "projector",
            lambda: run_memory_projector(
                settings, progress=progress, log_intact=watch.verifier(), report=report
            ),
            report=report,
        )

    async def archive_log(health: ComponentReport) -> None:
        """Copy every topic into the Parquet archive (single writer, resumes from its files);
        started again after a crash."""
        await supervise(
            "archive", lambda: run_archive_sink(settings, log_intact=watch.verifier()), report=report
        )

    async def watch_log() -> None:
        """Stop processing once the broker's log is no longer the one the worker started on."""
        await supervise("log watch", watch.run)

    app.task(watch_log)
    if "extraction" in roles:
        app.agent(consolidation, name="extraction")(
            watched_agent(components, "extraction", extraction_agent)
        )
        app.on_partitions_assigned.connect(note_assignment)  # type: ignore[arg-type]
    if "projector" in roles:
        app.task(watched_task(components, "projector", project_memories))
        components.probe("projector", caught_up(progress))
    if "archive" in roles:
        app.task(watched_task(components, "archive", archive_log))

    watch_faust(components, app)
    register_pages(app, store, settings, chat, components)
    return app
