"""The composition root: ``create_app(settings)`` builds the Faust app and its agents, and
``run_worker(settings)`` runs it (``memstream worker``).

Topics → agents → projections::

    chat ──► session agent ──(sessions table)──► consolidation ──► extraction agent
                                                                        │
    deadletters ◄── anything an agent cannot process                    ▼
                                         LanceDB ◄── memory projector ◄── memories

Processing is at-least-once (Tansu has no transactions), so every step is idempotent: the
session state records the last applied offset, derived events have deterministic ids, and
the projection tracks its source offsets in the rows it writes.

Content is sealed with its user's key everywhere it is durable (:mod:`memstream.streams.keys.store`):
every event this app publishes is sealed with the key of the events it comes from, the
sessions table's values too, and dead letters of a user with a key. Events whose key is
destroyed (an erased user) are skipped and counted, never dead-lettered.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import sys
from typing import Any

import faust

from memstream.models.extraction import Extractor, OfflineExtractor
from memstream.models.extraction.parsed_memories import WithParsedMemories
from memstream.models.settings import Settings
from memstream.streams.agents.boundary import (
    BrokerProbe,
    FunctionProbe,
    RecordBoundary,
    StateReport,
    supervise,
)
from memstream.streams.agents.consolidation import ExtractionAgent
from memstream.streams.agents.decisions import MemoryDecider
from memstream.streams.agents.ordering import InOrder, install_commit_guard
from memstream.streams.agents.patterns import (
    PatternLearner,
    partition_of_user,
    recorded_observations,
)
from memstream.streams.agents.publishing import topic_publisher
from memstream.streams.agents.session import SessionAgent
from memstream.streams.agents.session_table import IdleTracker, SessionStore
from memstream.streams.archive import run_archive_sink
from memstream.streams.kafka.deadletters import DeadLetterSink
from memstream.streams.kafka.logid import LogWatch
from memstream.streams.kafka.tansu import faust_settings_for, prepare_for_broker
from memstream.streams.kafka.topics import Topics, ensure_topics
from memstream.streams.llm.extractor import LLMExtractor
from memstream.streams.observability.metrics import CONSUMER_LAG, MeteredEmbedder, faust_lag_source
from memstream.streams.projector.loop import ProjectorProgress
from memstream.streams.projector.memories import run_memory_projector
from memstream.streams.projector.ownership import Ownership
from memstream.streams.service.container import Container
from memstream.streams.worker.health import (
    ComponentReport,
    Components,
    caught_up,
    periodic,
    watch_faust,
    watched_agent,
    watched_task,
)
from memstream.streams.worker.web import check_web_exposure, faust_web_settings, register_pages

log = logging.getLogger(__name__)

#: Seconds between two looks for partitions an idle agent has records left in.
STALL_CHECK_S = 5.0


def extractor_from_settings(settings: Settings) -> Extractor:
    """The extractor ``settings`` choose: the offline one, or an LLM behind the openai client
    with the turns' episodes and the claims the parse reads where the model gives none
    (:class:`~memstream.models.extraction.parsed_memories.WithParsedMemories`)."""
    if settings.extractor == "llm":
        return WithParsedMemories(LLMExtractor.from_settings(settings))
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
    container: Container | None = None,
) -> faust.App:
    """Build the memstream Faust app for ``settings``; nothing starts until a worker runs it.

    ``components`` is the registry the agents and tasks report their state into (the
    ``/ready/`` page reads it); a new one by default. ``container`` holds the parts every
    agent shares (the key store, the embedder, the memory table the decisions read); one
    built from ``settings`` by default.

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
    container = container if container is not None else Container(settings)
    keys = container.key_store
    store = SessionStore(sessions, settings.session_cache_size, keys)
    idle = IdleTracker(settings.idle_timeout_s, settings.max_session_age_s)

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

    request_consolidation = topic_publisher(consolidation, keys)
    # Each agent processes its partitions' records in offset order, never past a hole.
    session_agent = SessionAgent(
        settings,
        store,
        idle,
        keys=keys,
        request_consolidation=request_consolidation,
        publish_chat=topic_publisher(chat, keys),
        boundary=RecordBoundary("sessions", letters, [broker], report=report),
        order=InOrder("sessions", seek, topics.chat),
        watch=watch,
    )
    if "sessions" in roles:
        app.agent(chat, name="sessions")(
            watched_agent(components, "sessions", session_agent.fold_chat)
        )
        idle_scan = periodic(
            app, settings.session_scan_interval_s, session_agent.close_idle_sessions
        )
        app.task(watched_task(components, "idle-scan", idle_scan))
        # mode types receivers as sync callables with a keyword-only `signal`; async ones work.
        app.on_partitions_revoked.connect(session_agent.forget_parsed_sessions)  # type: ignore[arg-type]
        app.on_partitions_assigned.connect(session_agent.forget_parsed_sessions)  # type: ignore[arg-type]

    @functools.cache
    def memory_decider() -> MemoryDecider:
        # Built on first use, so a worker without the extraction role never loads a model.
        return MemoryDecider(
            container.memory_table(),
            MeteredEmbedder(container.embedder(), "decisions"),
            settings.long_term_importance,
        )

    def decider_store() -> None:
        memory_decider().projection.probe(writable=False)

    progress = ProjectorProgress()
    extraction_agent = ExtractionAgent(
        settings,
        extractor,
        memory_decider,
        keys=keys,
        publish_memories=topic_publisher(memories, keys),
        request_consolidation=request_consolidation,
        letters=letters,
        boundary=RecordBoundary(
            "extraction", letters, [broker, FunctionProbe("lancedb", decider_store)], report=report
        ),
        order=InOrder("extraction", seek, topics.consolidation),
        watch=watch,
        progress=progress if "projector" in roles else None,
        learner=PatternLearner(
            recorded_observations(settings, keys), partition_of_user(settings)
        ),
    )

    # The projector writes the partitions whose spans this worker decides (or whose chat it
    # folds): the decisions read tables their own process keeps caught up.
    ownership = Ownership(
        settings.partitions,
        topics.consolidation
        if "extraction" in roles
        else topics.chat
        if "sessions" in roles
        else None,
    )
    app.on_partitions_assigned.connect(ownership.on_assigned)  # type: ignore[arg-type]

    async def project_memories(health: ComponentReport) -> None:
        """Project memory events into LanceDB, the owned partitions' tables (one writer per
        partition; it tracks its own offsets); started again after a crash (it resumes from
        the offsets its rows record)."""
        await supervise(
            "projector",
            lambda: run_memory_projector(
                settings, progress=progress, log_intact=watch.verifier("projector"), report=report,
                keys=keys, ownership=ownership,
            ),
            report=report,
        )

    async def archive_log(health: ComponentReport) -> None:
        """Copy every topic into the Parquet archive (single writer, resumes from its files);
        started again after a crash."""
        await supervise(
            "archive", lambda: run_archive_sink(settings, log_intact=watch.verifier("archive")), report=report
        )

    async def watch_log() -> None:
        """Stop processing once the broker's log is no longer the one the worker started on."""
        await supervise("log watch", watch.run)

    app.task(watch_log)

    guards = [
        agent.order
        for role, agent in (("sessions", session_agent), ("extraction", extraction_agent))
        if role in roles
    ]

    async def resume_stalled() -> None:
        """Read a partition again when its agent idles with records left in it (records
        faust dropped around a rebalance at a partition's tail: ``InOrder.resume_stalled``)."""
        while True:
            await asyncio.sleep(STALL_CHECK_S)
            consumer = getattr(app, "_consumer", None)  # the property would build one
            if consumer is not None:
                for guard in guards:
                    await guard.resume_stalled(consumer.highwater)

    if guards:
        app.task(resume_stalled)
    if "extraction" in roles:
        app.agent(consolidation, name="extraction")(
            watched_agent(components, "extraction", extraction_agent.extract_requests)
        )
        app.on_partitions_assigned.connect(extraction_agent.note_assignment)  # type: ignore[arg-type]
    if "projector" in roles:
        app.task(watched_task(components, "projector", project_memories))
        components.probe("projector", caught_up(progress))
    if "archive" in roles:
        app.task(watched_task(components, "archive", archive_log))

    if settings.serve_in_worker:

        async def serve_api(health: ComponentReport) -> None:
            """The HTTP API inside this worker, over the worker's own container."""
            from memstream.streams.api.auth import KeyFile
            from memstream.streams.api.server import serve_api
            from memstream.streams.service.app import Service

            async with Service(container) as service:
                # Its signals stay the worker's: stopping the app cancels this task.
                await serve_api(service, KeyFile(settings.api_keys_path), own_signals=False)

        app.task(watched_task(components, "api", serve_api))

    watch_faust(components, app)
    register_pages(app, store, settings, chat, components)
    # /metrics reports the agents' lag on the topics they consume (the projector its own).
    consumed = [topics.chat] if "sessions" in roles else []
    if "extraction" in roles:
        consumed.append(topics.consolidation)
    CONSUMER_LAG.track("agents", faust_lag_source(app, consumed))
    return app


def ready_line(settings: Settings) -> str:
    """What ``memstream worker`` says once it consumes: which broker, which topics as which
    consumer group, and where its web port answers.

    Examples
    --------
    >>> print(ready_line(Settings(roles="sessions,extraction")))
    memstream worker: consuming memstream.chat (sessions), memstream.consolidation (extraction) as group memstream.worker on the broker at 127.0.0.1:9092; web port http://127.0.0.1:6066/ (/ready/, /health/, /metrics)
    """
    topics = Topics.from_settings(settings)
    roles = settings.role_set
    consumed = []
    if "sessions" in roles:
        consumed.append(f"{topics.chat} (sessions)")
    if "extraction" in roles:
        consumed.append(f"{topics.consolidation} (extraction)")
    if "projector" in roles:
        consumed.append(f"{topics.memories} and {topics.accesses} (projector)")
    if "archive" in roles:
        consumed.append("every topic (archive)")
    return (
        f"memstream worker: consuming {', '.join(consumed)} as group "
        f"{settings.topic_prefix}.{settings.app_id} on the broker at {settings.broker}; web "
        f"port http://{settings.web_host}:{settings.web_port}/ (/ready/, /health/, /metrics)"
    )


class _SaysWhenReady(faust.Worker):
    """Faust's worker, saying in one line (:func:`ready_line`) once it consumes: after the
    tables recovered, when Faust starts the agents (its own "Ready" is a debug-level line)."""

    def __init__(self, app: faust.App, *, ready: str, **options: Any) -> None:
        super().__init__(app, **options)
        self.ready = ready

    async def on_startup_finished(self) -> None:
        """Faust's start-up end, then the line."""
        await super().on_startup_finished()
        log.info(self.ready)


def run_worker(settings: Settings) -> None:
    """Run the Faust worker for ``settings`` until SIGINT/SIGTERM."""
    from memstream.projections.allocator import tune_allocators
    from memstream.streams.kafka.logid import LogLost, claim_log
    from memstream.streams.observability.logs import configure_logging
    # Before anything touches the broker: a worker that must not start says so at once.
    check_web_exposure(settings)
    if settings.tune_malloc:
        # Before any thread starts: each would get an arena of its own.
        tune_allocators()
    # Before the worker's logging: a broker that does not answer is one line of the
    # command (memstream.streams.cli.command.main), not that line after aiokafka's errors.
    asyncio.run(ensure_topics(settings))
    try:
        # A broker that lost the log this data directory was built from is refused: the
        # worker would otherwise build on an empty log, and its writes would be lost.
        asyncio.run(claim_log(settings))
    except LogLost as exc:
        print(f"memstream worker: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(3) from None
    configure_logging(settings)
    settings.faust_dir.mkdir(parents=True, exist_ok=True)
    # The session agent makes many short-lived objects and holds many long-lived ones (the
    # open sessions): collecting less often cut the fold's cost by a fifth.
    gc.set_threshold(50_000, 20, 20)
    app = create_app(settings)
    # Logging is ours (configure_logging): mode would replace the root handlers with its
    # own coloured ones, and turn print() into log records.
    worker = _SaysWhenReady(
        app,
        ready=ready_line(settings),
        loglevel=settings.log_level,
        quiet=True,
        override_logging=False,
        redirect_stdouts=False,
    )
    # Faust's start-up spinner writes terminal escapes to stdout, terminal or not.
    worker.spinner = None
    worker.execute_from_commandline()
