"""Re-extraction: consolidation re-run with another extractor, into a versioned memory table.

A replay never calls an extractor; this is the other mode, for comparing extractors or prompt
versions. It reads the consolidation topic (the transcript spans the session agent cut from
the chat events, each once), runs the chosen extractor and the same memory decisions on each
span, and records everything it decides as events on a topic of its own,
``<prefix>.memories.<label>``, projected into the table ``memories-<label>``. The live topic
and table are not touched, so the two versions can be searched side by side
(``memstream search --table memories-<label>``), and the new version is itself a log that a
replay can rebuild without calling the extractor again.

Spans are opened with their users' keys (an erased user's spans are skipped), and what is
published is sealed with the span's key, like the worker's own extractions.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from aiokafka import ConsumerRecord
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from memstream.models.codec import InvalidEvent, decode_event
from memstream.models.crypto import SealError
from memstream.models.events.consolidation import ConsolidationRequested
from memstream.models.events.envelope import Event
from memstream.models.events.memory import ExtractionFailure, MemoryAdded, MemoryChange
from memstream.models.extraction import Extractor
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import PartitionedMemories, SourcePosition
from memstream.streams.agents.consolidation import extraction_failure, record_extraction
from memstream.streams.agents.decisions import MemoryDecider
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.publisher import KafkaPublisher
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.sealing import open_event
from memstream.streams.keys.store import KeyStore, keystore_from_settings
from memstream.streams.llm.extractor import ExtractionFailed

log = logging.getLogger(__name__)

_LABEL = re.compile(r"[A-Za-z0-9_-]{1,64}")


class LabelInUse(ValueError):
    """A re-extraction with this label exists already: versions are never overwritten."""


@dataclass(frozen=True)
class Reextraction:
    """What a re-extraction produced."""

    label: str
    table: str
    topic: str
    spans: int
    failed: int
    added: int
    changes: int
    elapsed_s: float


def default_label(extractor: Extractor) -> str:
    """``<name>-<version>`` of the extractor, made safe for a table name."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"{extractor.name}-{extractor.version}")[:64]


async def reextract(
    settings: Settings,
    extractor: Extractor,
    label: str,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Reextraction:
    """Run ``extractor`` over every recorded consolidation span into ``memories-<label>``.

    Raises
    ------
    ValueError
        ``label`` has characters a table or topic name cannot hold.
    LabelInUse
        The table ``memories-<label>`` exists already.
    """
    if not _LABEL.fullmatch(label):
        raise ValueError(f"a label is 1-64 letters, digits, '-' or '_', not {label!r}")
    started = time.perf_counter()
    topics = Topics.from_settings(settings)
    topic = f"{topics.memories}.{label}"
    table = f"memories-{label}"
    embedder = await asyncio.to_thread(embedder_from_settings, settings)
    projection = PartitionedMemories.from_settings(settings, embedder, table)
    if projection.exists():
        raise LabelInUse(f"table {table!r} exists: choose another --label")
    keys = keystore_from_settings(settings)
    spans = _spans(await read_topic(settings, topics.consolidation, timeout_s=600), keys)
    await _create_topic(settings, topic)
    decider = MemoryDecider(projection, embedder, settings.long_term_importance)
    # The table's own topic is made here; the log of the spans is only read.
    publisher = KafkaPublisher(settings, keys, check=False, claim=False)
    failed = added = changes = 0
    try:
        for done, (request, key_id) in enumerate(spans, start=1):
            events = await asyncio.to_thread(_decisions, extractor, decider, request)
            positioned: list[tuple[MemoryAdded | MemoryChange, SourcePosition]] = []
            for event in events:
                # Sealed with the span's key, or not at all: its user was erased meanwhile.
                sent = await publisher.publish(topic, [event], key_id=key_id)
                if not sent:
                    log.info("reextract: the user of span %s was erased", request.event_id)
                    positioned = []  # nothing of an erased user enters the table
                    break
                position = SourcePosition(
                    topic, sent[0].partition, sent[0].offset,
                    timestamp=_timestamp(sent[0].timestamp_ms),
                )
                if isinstance(event, MemoryAdded | MemoryChange):
                    positioned.append((event, position))
                failed += isinstance(event, ExtractionFailure)
                added += isinstance(event, MemoryAdded)
                changes += isinstance(event, MemoryChange)
            if positioned:
                # Applied before the next span is decided, so decisions see earlier ones.
                await asyncio.to_thread(projection.apply, positioned)
            if progress is not None:
                progress(done, len(spans))
    finally:
        await publisher.close()
    await asyncio.to_thread(projection.refresh_indexes)
    return Reextraction(
        label=label,
        table=table,
        topic=topic,
        spans=len(spans),
        failed=failed,
        added=added,
        changes=changes,
        elapsed_s=time.perf_counter() - started,
    )


def _spans(
    records: list[ConsumerRecord], keys: KeyStore
) -> list[tuple[ConsolidationRequested, str | None]]:
    """Each consolidation span once, in log order (retries repeat a span's event id), opened,
    with the id of the key it was sealed with; spans of erased users are left out."""
    seen: set[str] = set()
    spans = []
    for record in records:
        try:
            event = decode_event(record.value)
        except InvalidEvent:
            continue  # dead-lettered when it was first read
        if not isinstance(event, ConsolidationRequested) or event.event_id in seen:
            continue
        key_id = event.encryption.key_id if event.encryption is not None else None
        try:
            opened = open_event(event, keys)
        except SealError:
            continue  # altered in the log: dead-lettered when it was first read
        if opened is None:
            continue  # the user was erased
        seen.add(event.event_id)
        spans.append((opened, key_id))
    return spans


def _decisions(
    extractor: Extractor, decider: MemoryDecider, request: ConsolidationRequested
) -> list[Event]:
    """The recorded extraction and the memory decisions of one span (or its failure)."""
    started = time.perf_counter()
    try:
        recorded = record_extraction(request, extractor)
    except ExtractionFailed as failure:
        latency_ms = (time.perf_counter() - started) * 1000
        return [extraction_failure(request, extractor, failure, latency_ms, retry=False)]
    return [recorded, *decider.decide(recorded)]


def _timestamp(milliseconds: int | None) -> datetime | None:
    if milliseconds is None or milliseconds < 0:
        return None
    return datetime.fromtimestamp(milliseconds / 1000, UTC)


async def _create_topic(settings: Settings, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.broker)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, settings.partitions, replication_factor=1)])
    finally:
        await admin.close()
