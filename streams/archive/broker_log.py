"""The broker's side of the archive: which partitions exist, where their logs end, and
whether a log still is the archived one (not shorter than the archive, and holding its last
archived record as archived)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from memstream.models.settings import Settings
from memstream.streams.archive.layout import archive_files
from memstream.streams.archive.rows import _timestamp_ms
from memstream.streams.kafka.tansu import true_end_offsets

#: How long the sink's and restore's admin requests may take.
_ADMIN_TIMEOUT_MS = 10_000
#: The largest record restore sends: any the archive holds (a producer may have written a
#: record of megabytes; the broker took it, so it must take it back).
_RESTORE_REQUEST_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ArchivePastLog:
    """A partition whose log ends before offsets the archive already holds.

    ``archived_to`` is the offset after the last archived record; ``log_end`` the offset the
    broker's log would give its next record.
    """

    topic: str
    partition: int
    archived_to: int
    log_end: int

    def explain(self) -> str:
        """The plain-words report of it, with what to do."""
        return (
            f"{self.topic}[{self.partition}]: the archive holds offsets up to "
            f"{self.archived_to - 1}, but the broker's log ends at offset {self.log_end}: the "
            "broker lost its log (the embedded broker keeps it in memory only, so a restart "
            "empties it). This partition is not archived again from 0, which would mix two "
            "different logs. To recover: stop the workers, make sure the broker is empty "
            "(restart it if anything was written to it since), run `memstream restore`, then "
            "`memstream replay --projection all`."
        )


async def _existing_partitions(
    settings: Settings, topics: Sequence[str]
) -> dict[str, list[int]]:
    """Partitions of those of ``topics`` that exist on the broker.

    Lists every topic instead of asking for these by name: a request by name would make a
    broker with topic auto-creation (Tansu does it) create a missing topic with its default
    partition count, and ``ensure_topics`` would then refuse it.
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.broker, enable_auto_commit=False)
    try:
        await consumer.start()  # stopped below even when it fails: no leak
        existing = await consumer.topics()
        return {
            topic: sorted(consumer.partitions_for_topic(topic) or ())
            for topic in topics
            if topic in existing
        }
    finally:
        await consumer.stop()


async def _log_ends(
    settings: Settings, wanted: Sequence[TopicPartition]
) -> dict[TopicPartition, int]:
    """The exact log end of each of ``wanted``; 0 for a partition that does not exist."""
    existing = await _existing_partitions(settings, sorted({tp.topic for tp in wanted}))
    present = [tp for tp in wanted if tp.partition in existing.get(tp.topic, ())]
    ends = await true_end_offsets(settings.broker, present)
    return {tp: ends.get(tp, 0) for tp in wanted}


async def log_shortfalls(
    settings: Settings, positions: Mapping[tuple[str, int], int]
) -> list[ArchivePastLog]:
    """The partitions whose log on the broker ends before ``positions`` (the log is short).

    Parameters
    ----------
    settings
        The broker to ask.
    positions
        Next offset per (topic, partition) that something derived from the log already has,
        e.g. :func:`archive_positions` of the live archive.

    Returns
    -------
    list of ArchivePastLog
        Empty when the log holds every position; sorted by topic and partition. A missing
        topic counts as an empty log (and is not created by asking).

    Examples
    --------
    >>> shortfalls = await log_shortfalls(settings, archive_positions(directory))  # doctest: +SKIP
    >>> for shortfall in shortfalls:  # doctest: +SKIP
    ...     print(shortfall.explain())
    """
    wanted = [TopicPartition(t, p) for (t, p), position in positions.items() if position > 0]
    ends = await _log_ends(settings, wanted)
    return sorted(
        (
            ArchivePastLog(tp.topic, tp.partition, positions[(tp.topic, tp.partition)], ends[tp])
            for tp in wanted
            if positions[(tp.topic, tp.partition)] > ends[tp]
        ),
        key=lambda s: (s.topic, s.partition),
    )


@dataclass(frozen=True)
class _Last:
    """The last archived record of a partition, to check the log still holds that record."""

    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None

    def matches(self, record: ConsumerRecord) -> bool:
        if record.offset != self.offset or _timestamp_ms(record) != self.timestamp:
            return False
        if self.key is None and self.value is None:
            # Blanked by an erasure (or a record with neither): its bytes are gone on
            # purpose, so only its position and time can be compared.
            return True
        return record.key == self.key and record.value == self.value


def _last_archived(
    directory: Path, positions: Mapping[TopicPartition, int]
) -> dict[TopicPartition, _Last]:
    """The last archived record of every partition in ``positions`` with a position > 0."""
    files = {(f.topic, f.partition, f.last): f for f in archive_files(directory)}
    found: dict[TopicPartition, _Last] = {}
    for tp, position in positions.items():
        file = files.get((tp.topic, tp.partition, position - 1))
        if position == 0 or file is None:
            continue
        columns = ["offset", "timestamp", "key", "value"]
        table = pq.ParquetFile(file.path).read(columns=columns)
        table = table.slice(table.num_rows - 1)
        found[tp] = _Last(
            offset=table.column("offset")[0].as_py(),
            timestamp=table.column("timestamp").cast(pa.int64())[0].as_py(),
            key=table.column("key")[0].as_py(),
            value=table.column("value")[0].as_py(),
        )
    return found


def _diverged(tp: TopicPartition, last: _Last) -> str:
    return (
        f"{tp.topic}[{tp.partition}]: the record at offset {last.offset} differs from the "
        "archived one: the broker's log was replaced (the embedded broker keeps it in memory "
        "only, so a restart starts a new log, and this one has grown past the archive). This "
        "partition is not archived, which would mix two different logs. To recover, stop the "
        "workers and the broker, start an empty broker, run `memstream restore`, then "
        "`memstream replay --projection all`; records written to the new log are not archived."
    )
