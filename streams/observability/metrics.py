"""Prometheus metrics of the worker and of memstream serve, served on their /metrics pages.

Every metric lives in prometheus-client's default registry, with the process's own
(``process_*``: CPU, memory, open files; ``python_gc_*``). The worker serves them on its web
port (:mod:`memstream.streams.worker.web`), ``memstream serve`` on its HTTP port
(:mod:`memstream.streams.api.observability`); each process exposes the metrics it moves.

=============================================  ============================  ===============
metric                                         labels                        moved by
=============================================  ============================  ===============
``memstream_events_processed_total``           agent, topic                  a record through
                                                                             an agent's
                                                                             boundary
``memstream_dead_letters_total``               agent, reason                 a dead letter
                                                                             sent
``memstream_consumer_lag``                     consumer, topic, partition    read at scrape
``memstream_llm_tokens_total``                 model, kind                   an LLM reply
``memstream_extraction_seconds``               extractor, outcome            an extraction
``memstream_projector_rows_written_total``     kind                          a projector write
``memstream_embedded_texts_total``             stage                         an embedder call
``memstream_embedding_seconds``                stage                         an embedder call
``memstream_http_requests_total``              method, route, status         an HTTP request
``memstream_http_request_duration_seconds``    method, route                 an HTTP request
=============================================  ============================  ===============

Labels are bounded by construction: agents, topics, partitions, extractors and the LLM model
come from the code and the settings; a dead letter's reason is its class
(:func:`reason_class`), never its text; a route is the API's path template, never the
requested path. On the hot path a metric costs a dictionary look-up and an addition: the
labelled children are looked up once per label set and kept (:class:`Children`), and the
consumer lag is computed only when /metrics is read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from memstream.projections.embedder import Embedder, Vectors

__all__ = [
    "CONSUMER_LAG",
    "DEAD_LETTERS",
    "EMBEDDED_TEXTS",
    "EMBEDDING_SECONDS",
    "EVENTS_PROCESSED",
    "EXTRACTION_SECONDS",
    "HTTP_REQUESTS",
    "HTTP_SECONDS",
    "LLM_TOKENS",
    "PROJECTOR_ROWS",
    "Children",
    "ConsumerLag",
    "MeteredEmbedder",
    "exposition",
    "reason_class",
]

log = logging.getLogger(__name__)

M = TypeVar("M", Counter, Histogram)

# No ``*_created`` series beside each counter and histogram: they double the page, and a
# counter's reset shows in its rate anyway.
disable_created_metrics()

EVENTS_PROCESSED = Counter(
    "memstream_events_processed",
    "Records an agent processed (decoded, applied, what they made published), by agent and "
    "source topic; records it dead-lettered are counted in memstream_dead_letters_total.",
    ["agent", "topic"],
)
DEAD_LETTERS = Counter(
    "memstream_dead_letters",
    "Records sent to the dead-letter topic, by agent and reason class (invalid_event, "
    "unprocessable, extraction_failed, other).",
    ["agent", "reason"],
)
LLM_TOKENS = Counter(
    "memstream_llm_tokens",
    "Tokens the LLM extractor's calls spent (kind: prompt or completion), failed attempts "
    "included.",
    ["model", "kind"],
)
EXTRACTION_SECONDS = Histogram(
    "memstream_extraction_seconds",
    "Time to extract one consolidation span (extractor: offline or llm; outcome: recorded or "
    "failed), retries of the LLM included.",
    ["extractor", "outcome"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
PROJECTOR_ROWS = Counter(
    "memstream_projector_rows_written",
    "Rows the memory projector wrote to LanceDB (kind: memories, or accesses: retrieval "
    "counts).",
    ["kind"],
)
PROJECTOR_PARTITIONS = Gauge(
    "memstream_projector_partitions",
    "The partitions whose memory tables this worker's projector writes now (1 each; the "
    "others are absent): where a rebalance moved them.",
    ["partition"],
)
EMBEDDED_TEXTS = Counter(
    "memstream_embedded_texts",
    "Texts the worker embedded, by stage (decisions: an extraction's candidates, compared "
    "with the user's memories; projection: new memories' search texts, written to LanceDB).",
    ["stage"],
)
EMBEDDING_SECONDS = Histogram(
    "memstream_embedding_seconds",
    "Time of one embedder call (a batch of texts), by stage (decisions, projection).",
    ["stage"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
HTTP_REQUESTS = Counter(
    "memstream_http_requests",
    "HTTP requests memstream serve answered, by method, route template and status.",
    ["method", "route", "status"],
)
HTTP_SECONDS = Histogram(
    "memstream_http_request_duration_seconds",
    "Time from a request's arrival to the end of its response, by method and route template.",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


class Children(Generic[M]):
    """The labelled children of one metric, each looked up once (prometheus-client's
    ``labels()`` takes a lock and checks the labels on every call).

    Examples
    --------
    >>> processed = Children(EVENTS_PROCESSED)
    >>> processed.get("sessions", "memstream.chat").inc()
    """

    def __init__(self, metric: M) -> None:
        self.metric: M = metric
        self._children: dict[tuple[str, ...], M] = {}

    def get(self, *labels: str) -> M:
        """The child of ``labels`` (in the metric's label order)."""
        child = self._children.get(labels)
        if child is None:
            child = self._children[labels] = self.metric.labels(*labels)
        return child


class MeteredEmbedder:
    """An :class:`~memstream.projections.embedder.Embedder` whose calls are counted as
    ``stage``: texts in ``memstream_embedded_texts_total``, each call's time in
    ``memstream_embedding_seconds`` (two look-ups and a clock read per call, not per text).

    Examples
    --------
    >>> embedder = MeteredEmbedder(embedder_from_settings(settings), "decisions")  # doctest: +SKIP
    >>> embedder.embed(["I live in Oslo"]).shape  # doctest: +SKIP
    (1, 384)
    """

    def __init__(self, embedder: Embedder, stage: str) -> None:
        self.embedder = embedder
        self.stage = stage
        self._texts = EMBEDDED_TEXTS.labels(stage)
        self._seconds = EMBEDDING_SECONDS.labels(stage)

    @property
    def model_id(self) -> str:
        """The wrapped embedder's model id."""
        return self.embedder.model_id

    @property
    def dimensions(self) -> int:
        """The wrapped embedder's vector length."""
        return self.embedder.dimensions

    def embed(self, texts: Sequence[str]) -> Vectors:
        """The wrapped embedder's vectors of ``texts``, the call counted."""
        started = time.perf_counter()
        vectors = self.embedder.embed(texts)
        self._seconds.observe(time.perf_counter() - started)
        self._texts.inc(len(texts))
        return vectors


def reason_class(reason: str) -> str:
    """The class of a dead letter's reason, a label of bounded values: ``invalid_event`` (it
    did not decode or validate), ``unprocessable`` (applying it raised), ``extraction_failed``
    (the extractor gave up on it), else ``other``.

    Examples
    --------
    >>> reason_class("invalid event: not JSON"), reason_class("cannot be processed: KeyError")
    ('invalid_event', 'unprocessable')
    """
    if reason.startswith("invalid event"):
        return "invalid_event"
    if reason.startswith("cannot be processed"):
        return "unprocessable"
    if reason.startswith("extraction failed"):
        return "extraction_failed"
    return "other"


#: One partition's position: (topic, partition, log end offset, consumer's position), either
#: offset None when not known yet.
LagRow = tuple[str, int, int | None, int | None]
LagSource = Callable[[], Iterable[LagRow]]


class ConsumerLag:
    """``memstream_consumer_lag{consumer, topic, partition}``: records in the log the consumer
    has not processed yet, computed when /metrics is read from the positions each tracked
    consumer reports (nothing on the hot path).

    The log end is the high watermark of the consumer's latest fetch (``highwater(tp)``), not
    a ListOffsets request: Tansu answers ListOffsets with too small an end offset
    (:mod:`memstream.streams.kafka.tansu`). A partition whose end or position is not known
    yet (nothing fetched since the assignment) is left out.
    """

    def __init__(self) -> None:
        self._sources: dict[str, LagSource] = {}

    def track(self, consumer: str, source: LagSource) -> None:
        """Report ``source``'s partitions as ``consumer`` (replacing an earlier source of
        that name)."""
        self._sources[consumer] = source

    def forget(self, consumer: str, source: LagSource | None = None) -> None:
        """Stop reporting ``consumer`` (only if its source is still ``source``, when given)."""
        if source is None or self._sources.get(consumer) is source:
            self._sources.pop(consumer, None)

    def collect(self) -> Iterator[Metric]:
        """The lag of every partition of every tracked consumer."""
        family = self._family()
        for consumer, source in list(self._sources.items()):
            try:
                rows = list(source())
            except Exception as exc:  # noqa: BLE001 - a consumer not started yet, or stopping
                log.debug("consumer lag of %s not known: %r", consumer, exc)
                continue
            for topic, partition, end, position in rows:
                if end is not None and position is not None:
                    family.add_metric([consumer, topic, str(partition)], max(end - position, 0))
        yield family

    def describe(self) -> Iterator[Metric]:
        """The metric's name and type, without reading any consumer (for registration)."""
        yield self._family()

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "memstream_consumer_lag",
            "Records in a partition the consumer has not processed: the high watermark of its "
            "latest fetch minus its committed offset (agents) or its position (projector).",
            labels=["consumer", "topic", "partition"],
        )


CONSUMER_LAG = ConsumerLag()
REGISTRY.register(CONSUMER_LAG)


def faust_lag_source(app: Any, topics: Iterable[str]) -> LagSource:
    """The positions of a Faust app's consumer on ``topics`` (its agents' source topics, not
    its tables' changelogs): the committed offset of each assigned partition, else the
    offset after the last one read."""
    wanted = frozenset(topics)

    def rows() -> Iterator[LagRow]:
        # The app's private attribute: reading the ``consumer`` property would build a
        # consumer for an app that was never started.
        consumer = getattr(app, "_consumer", None)
        if consumer is None:
            return
        committed = consumer._committed_offset
        read = consumer._read_offset
        for tp in consumer.assignment():
            if tp.topic not in wanted:
                continue
            try:
                end = consumer.highwater(tp)
            except Exception:  # noqa: BLE001 - revoked meanwhile: left out
                end = None
            position = committed.get(tp)
            if position is None:
                last = read.get(tp)
                position = None if last is None else last + 1
            yield tp.topic, tp.partition, end, position

    return rows


def exposition() -> tuple[bytes, str]:
    """Every metric of this process in Prometheus' text format, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
