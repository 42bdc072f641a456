"""Consolidation: the extraction agent turns each consolidation request into a recorded
extraction and the memory decisions it makes.

An extraction is recorded as an event (:class:`ExtractionRecorded`, or
:class:`ExtractionFailure` with the raw reply when the extractor gives up), so a replay
reads what the extractor returned and never calls it (or an LLM) again. Every id derives
from the request's, so a re-delivered request publishes the same events again.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from memstream.models.beliefs import KnownClaim
from memstream.models.codec import EventLimits, worker_now
from memstream.models.events.consolidation import ConsolidationRequested
from memstream.models.events.envelope import Event, derived_id
from memstream.models.events.memory import ExtractionFailure, ExtractionRecorded
from memstream.models.extraction import Extractor
from memstream.models.settings import Settings
from memstream.models.topics import CONSOLIDATION_TYPES
from memstream.streams.agents.boundary import RecordBoundary
from memstream.streams.agents.decisions import MemoryDecider
from memstream.streams.agents.decoding import decode_opened
from memstream.streams.agents.ordering import InOrder
from memstream.streams.agents.patterns import PatternLearner, observe_request, with_vectors
from memstream.streams.agents.publishing import Publish
from memstream.streams.kafka.deadletters import DeadLetterSink
from memstream.streams.kafka.logid import LogWatch
from memstream.streams.keys.store import KeyStore
from memstream.streams.llm.extractor import ExtractionFailed
from memstream.streams.observability.metrics import EXTRACTION_SECONDS, Children
from memstream.streams.projector.loop import ProjectorProgress

__all__ = ["ExtractionAgent", "extraction_failure", "record_extraction"]

log = logging.getLogger(__name__)


def record_extraction(
    request: ConsolidationRequested,
    extractor: Extractor,
    known_claims: Sequence[KnownClaim] = (),
) -> ExtractionRecorded:
    """Run ``extractor`` on a consolidation request (with the user's current claims, which
    an LLM extractor shows its model) and record what it returned.

    The id derives from the request's id and the extractor, so a re-delivered request yields
    the same event; replay reads this record and never calls the extractor (or an LLM) again.
    """
    started = time.perf_counter()
    extraction = extractor.extract(request, known_claims)
    latency_ms = (time.perf_counter() - started) * 1000
    return ExtractionRecorded(
        event_id=derived_id(request.event_id, "extraction", extractor.name, extractor.version),
        user_id=request.user_id,
        agent_id=request.agent_id,
        session_id=request.session_id,
        occurred_at=request.occurred_at,
        consolidation_event_id=request.event_id,
        extractor=extractor.name,
        extractor_version=extractor.version,
        model=extraction.model,
        prompt_version=extraction.prompt_version,
        raw_response=extraction.raw_response,
        usage=extraction.usage,
        latency_ms=round(latency_ms, 3),
        candidates=extraction.candidates,
        observed=observe_request(request, extraction.candidates),
    )


def extraction_failure(
    request: ConsolidationRequested,
    extractor: Extractor,
    failure: ExtractionFailed,
    latency_ms: float,
    *,
    retry: bool,
) -> ExtractionFailure:
    """The record of an extractor giving up on ``request`` (the raw reply kept); its id
    derives from the request and the attempt, so a re-delivery repeats it."""
    return ExtractionFailure(
        event_id=derived_id(request.event_id, "failed", str(request.attempt)),
        user_id=request.user_id,
        agent_id=request.agent_id,
        session_id=request.session_id,
        occurred_at=request.occurred_at,
        consolidation_event_id=request.event_id,
        extractor=extractor.name,
        extractor_version=extractor.version,
        model=getattr(extractor, "model", None),
        prompt_version=getattr(extractor, "prompt_version", None),
        reason=failure.reason[:5000],
        raw_response=failure.raw_response,
        attempts=failure.attempts,
        usage=failure.usage,
        latency_ms=round(latency_ms, 3),
        retry_scheduled=retry,
    )


class ExtractionAgent:
    """Turns consolidation requests into recorded extractions and memory events.

    Parameters
    ----------
    settings
        The limits of derived events, the retry delay and attempts per span, how long to
        wait for the projector after an assignment.
    extractor
        What extracts memory candidates from a span (offline, or an LLM).
    memory_decider
        Returns the decider (built on first use, so a worker without this role never loads
        an embedding model).
    keys
        The key store: a request is opened, and what derives from it sealed, with its key.
    publish_memories
        Publishes to the memories topic.
    request_consolidation
        Publishes to the consolidation topic (a failed span's retry goes there).
    letters
        Where a failed extraction's dead letter goes.
    boundary
        The record boundary of the agent (dead letters, retries while a dependency is down).
    order
        Keeps each partition's records in offset order.
    watch
        Stops processing once the broker lost the log.
    progress
        The projector of this worker, waited for after each start or assignment (None: this
        worker runs no projector, nothing to wait for).
    learner
        Learns the user's patterns from each recorded extraction; their events go out
        before the record (None: no patterns learned).

    Examples
    --------
    >>> agent = ExtractionAgent(settings, extractor, memory_decider, ...)  # doctest: +SKIP
    >>> app.agent(consolidation, name="extraction")(agent.extract_requests)  # doctest: +SKIP
    """

    def __init__(
        self,
        settings: Settings,
        extractor: Extractor,
        memory_decider: Callable[[], MemoryDecider],
        *,
        keys: KeyStore,
        publish_memories: Publish,
        request_consolidation: Publish,
        letters: DeadLetterSink,
        boundary: RecordBoundary,
        order: InOrder,
        watch: LogWatch,
        progress: ProjectorProgress | None,
        learner: PatternLearner | None = None,
    ) -> None:
        self.settings = settings
        self.extractor = extractor
        self.memory_decider = memory_decider
        self.keys = keys
        self.publish_memories = publish_memories
        self.request_consolidation = request_consolidation
        self.letters = letters
        self.boundary = boundary
        self.order = order
        self.watch = watch
        self.progress = progress
        self.learner = learner
        self.limits = EventLimits.from_settings(settings, derived=True)
        #: Monotonic times: the last start or partition assignment, and the last one the
        #: decider waited for the projector after.
        self._assigned_at = time.monotonic()
        self._waited_after = float("-inf")
        #: Retries scheduled and not done yet (a reference keeps each task alive).
        self._retries: set[asyncio.Task[None]] = set()
        self._extraction_seconds = Children(EXTRACTION_SECONDS)

    async def extract_requests(self, stream: Any) -> None:
        """Turn consolidation requests into recorded extractions and memory events.

        Requests come in batches (``extraction_batch_size``, or what came within
        ``extraction_batch_wait_s``), acknowledged once the whole batch is published. With
        an extractor that decides without the user's claims (the offline one), a batch is
        extracted first, the texts its decisions will embed are embedded in one call across
        its sessions and users, and its events are published together
        (:meth:`extract_batch`); a model that is shown the user's claims sees them after
        the span before it was decided, so its requests go one at a time (:meth:`extract`).
        """
        async for events in stream.take_events(
            self.settings.extraction_batch_size, within=self.settings.extraction_batch_wait_s
        ):
            await self.watch.wait_intact()
            async with self.order.working():
                messages = [e.message for e in events if await self.order.accept(e.message)]
                if not self.extractor.reads_claims:
                    await self.extract_batch(messages)
                    continue
                for message in messages:
                    await self.boundary.run(message, functools.partial(self.extract, message))

    async def extract_batch(self, messages: Sequence[Any]) -> None:
        """Extract, decide and publish a batch of requests, in order: the same events as one
        request at a time (the vectors embedded together are those each decision would have
        embedded alone). Each request is extracted and decided inside the record boundary on
        its own, so a request at fault is dead-lettered and the others go on; the events of
        the rest are published together, and one by one if that fails for a record's data."""
        extracted: list[tuple[Any, str | None, ExtractionRecorded]] = []
        for message in messages:
            done, found = await self.boundary.run(
                message, functools.partial(self.extracted, message), count=False
            )
            if done and found is None:  # an erased user's, or a failed extraction: handled
                self.boundary.processed([message])
            elif found is not None:
                extracted.append((message, *found))
        if not extracted:
            return
        await self.projection_holds_the_log()
        decider = self.memory_decider()
        try:
            await asyncio.to_thread(decider.prefetch, [recorded for *_, recorded in extracted])
        except Exception:  # each decision embeds what it needs instead
            log.warning("extraction: prefetching a batch's vectors failed; deciding one by one",
                        exc_info=True)
        decided: dict[int, tuple[list[Event], str | None]] = {}
        for message, key_id, recorded in extracted:
            done, decisions = await self.boundary.run(
                message, functools.partial(asyncio.to_thread, decider.decide, recorded),
                count=False,
            )
            if done and decisions is not None:
                learned = await self.learned(recorded)
                decided[id(message)] = ([*learned, recorded, *decisions], key_id)
        await self.boundary.run_batch(
            [message for message, *_ in extracted if id(message) in decided],
            functools.partial(self.publish_decided, decided),
        )

    async def publish_decided(
        self, decided: dict[int, tuple[list[Event], str | None]], messages: Sequence[Any]
    ) -> None:
        """Publish the events decided for ``messages`` (by the message's id), in order,
        each sealed with its span's key; returns once the broker acknowledged them all."""
        events = [event for m in messages for event in decided[id(m)][0]]
        key_ids = [decided[id(m)][1] for m in messages for _ in decided[id(m)][0]]
        await self.publish_learned(events, key_ids)

    def forget_erased(self, message: Any) -> None:
        """An erased user's span: the learner drops what it held of the user (the words of
        their requests), as every projection does."""
        if self.learner is not None and isinstance(message.key, bytes):
            self.learner.forget([message.key.decode("utf-8", "surrogatepass")])

    async def learned(self, recorded: ExtractionRecorded) -> list[Event]:
        """The pattern events ``recorded`` causes (see :class:`PatternLearner`)."""
        if self.learner is None:
            return []
        events = await self.learner.learn(recorded)
        if not events:
            return []
        return await asyncio.to_thread(with_vectors, events, self.memory_decider().embedder)

    async def publish_learned(self, events: list[Event], key_ids: list[str | None]) -> None:
        """Publish ``events``; if that fails, the learner forgets their users' books (it
        counted spans the log does not hold), to fold them again from the log."""
        try:
            await self.publish_memories(events, key_ids)
        except BaseException:
            if self.learner is not None:
                self.learner.forget({event.user_id for event in events})
            raise

    async def extracted(
        self, message: Any
    ) -> tuple[str | None, ExtractionRecorded] | None:
        """The key id and recorded extraction of one consolidation request (an extractor
        that needs no claims: see :meth:`extract_requests`); None once it is handled
        otherwise (an erased user's, skipped; a failed extraction, recorded and retried)."""
        opened = decode_opened(
            message.value,
            message.key,
            CONSOLIDATION_TYPES,
            self.limits,
            self.keys,
            now=worker_now(message),
        )
        if opened is None:
            log.info("extraction: a span of an erased user skipped")
            self.forget_erased(message)
            return None
        request, key_id = opened
        assert isinstance(request, ConsolidationRequested)
        started = time.perf_counter()
        try:
            recorded = await asyncio.to_thread(record_extraction, request, self.extractor)
        except ExtractionFailed as failure:
            latency_s = time.perf_counter() - started
            self._extraction_seconds.get(self.extractor.name, "failed").observe(latency_s)
            await self.extraction_failed(message, request, key_id, failure, latency_s * 1000)
            return None
        self._extraction_seconds.get(self.extractor.name, "recorded").observe(
            recorded.latency_ms / 1000
        )
        return key_id, recorded

    async def extract(self, message: Any) -> None:
        """Extract one consolidation request and publish what it made: the extraction
        record and the memory decisions (their ids derive from the request: idempotent)."""
        opened = decode_opened(
            message.value,
            message.key,
            CONSOLIDATION_TYPES,
            self.limits,
            self.keys,
            now=worker_now(message),
        )
        if opened is None:
            log.info("extraction: a span of an erased user skipped")
            self.forget_erased(message)
            return
        request, key_id = opened
        assert isinstance(request, ConsolidationRequested)
        # Extraction (maybe an LLM) and decisions (embedding, LanceDB lookups) are slow:
        # keep them off the event loop.
        started = time.perf_counter()
        claims: list[KnownClaim] = []
        if self.extractor.name != "offline":
            # A model decides against the user's claims as they stood: wait for the
            # projector first, as the decisions do.
            await self.projection_holds_the_log()
            claims = await asyncio.to_thread(
                self.memory_decider().claims_at, request.user_id, request.occurred_at
            )
        try:
            recorded = await asyncio.to_thread(record_extraction, request, self.extractor, claims)
        except ExtractionFailed as failure:
            latency_s = time.perf_counter() - started
            self._extraction_seconds.get(self.extractor.name, "failed").observe(latency_s)
            await self.extraction_failed(message, request, key_id, failure, latency_s * 1000)
            return
        self._extraction_seconds.get(self.extractor.name, "recorded").observe(
            recorded.latency_ms / 1000
        )
        await self.projection_holds_the_log()
        decisions = await asyncio.to_thread(self.memory_decider().decide, recorded)
        # Sealed with the span's key: if the user was erased meanwhile, none go out.
        events = [*await self.learned(recorded), recorded, *decisions]
        await self.publish_learned(events, [key_id] * len(events))

    async def extraction_failed(
        self,
        message: Any,
        request: ConsolidationRequested,
        key_id: str | None,
        failure: ExtractionFailed,
        latency_ms: float,
    ) -> None:
        """Record the failure (with the raw reply), dead-letter the request, and retry the
        span later while attempts remain: nothing is dropped silently."""
        retry = request.attempt + 1 < self.settings.llm_attempts_per_span
        await self.publish_memories(
            [extraction_failure(request, self.extractor, failure, latency_ms, retry=retry)],
            [key_id],
        )
        # The raw reply (user content) goes only in the dead letter's sealed detail and in the
        # sealed extraction_failed event.
        await self.letters.record(
            "extraction",
            message,
            f"extraction failed: {type(failure).__name__}; raw reply in the extraction_failed event",
            detail=f"{failure}; raw reply: {failure.raw_response[:1500]!r}",
        )
        if retry:
            task = asyncio.create_task(
                self._retry_later(request.model_copy(update={"attempt": request.attempt + 1}), key_id)
            )
            self._retries.add(task)  # keep a reference until it is done
            task.add_done_callback(self._retries.discard)

    async def _retry_later(self, request: ConsolidationRequested, key_id: str | None) -> None:
        await asyncio.sleep(self.settings.llm_retry_delay_s)
        await self.request_consolidation([request], [key_id])

    async def note_assignment(self, sender: Any, *args: Any, **kwargs: Any) -> None:
        """Receiver of partition assignments: the next decision waits for the projector,
        and the pattern books are folded again from the log (another worker may have had
        these users meanwhile)."""
        self._assigned_at = time.monotonic()
        if self.learner is not None:
            self.learner.forget_all()

    async def projection_holds_the_log(self) -> None:
        """Once after each start or assignment: wait until the projector holds every memory
        event now in the log, which a re-delivered request's first decisions may have seen
        (the decider's own recent memories are gone with the process that had them)."""
        moment = self._assigned_at
        if self._waited_after >= moment or self.progress is None:
            return
        if not await self.progress.caught_up_after(moment, self.settings.decision_catch_up_s):
            log.warning(
                "extraction: the projector did not catch up within %.0f s; deciding anyway",
                self.settings.decision_catch_up_s,
            )
        self._waited_after = moment
