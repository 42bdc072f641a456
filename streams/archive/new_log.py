"""Restoring onto a broker that lost the archived log and took new records since: the log id
an archive holds, keeping what producers wrote to the new log (durably, beside the archive),
deleting the topics, and appending the kept records after the restored log."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from aiokafka import AIOKafkaProducer, ConsumerRecord
from aiokafka.admin import AIOKafkaAdminClient

from memstream.models.settings import Settings
from memstream.streams.archive.broker_log import _ADMIN_TIMEOUT_MS, _RESTORE_REQUEST_BYTES
from memstream.streams.archive.durable import _replace_file
from memstream.streams.archive.errors import ArchiveError
from memstream.streams.archive.layout import ArchiveFile
from memstream.streams.archive.rows import _event_fields, _table
from memstream.streams.kafka.topics import Topics

log = logging.getLogger(__name__)

#: Event types on the memories topic that come from outside the workers (a user's delete,
#: an erasure, a forgetting policy run): kept from a new log. The rest of that topic, and
#: the consolidation topic, the dead letters and the changelog, are the workers' own output,
#: which they derive again from the kept chat records.
_KEPT_MEMORY_TYPES = frozenset({"memory_deleted", "memory_forgotten", "user_erased"})


def archived_log_id(files: Sequence[ArchiveFile], settings: Settings) -> str | None:
    """The id of the log the archive holds (its first record of the log's mark topic,
    see :mod:`memstream.streams.kafka.logid`); None for an archive written before logs had one."""
    from memstream.streams.kafka.logid import _parse_mark

    topic = Topics.from_settings(settings).log
    first = sorted((f for f in files if f.topic == topic and f.partition == 0), key=lambda f: f.first)
    if not first or first[0].first != 0:
        return None
    table = pq.ParquetFile(first[0].path).read(columns=["offset", "value"])
    if table.num_rows == 0:
        return None
    return _parse_mark(table.column("value")[0].as_py())


async def _keep_new_log(settings: Settings) -> Path:
    """Write what producers put on the new log (chat, accesses, and the memories topic's
    deletions and erasures) to ``kept-<time>.parquet`` beside the archive, fsynced; return
    the file."""
    from memstream.streams.kafka.logreader import read_topic

    topics = Topics.from_settings(settings)
    records: list[ConsumerRecord] = []
    for topic in (topics.chat, topics.accesses, topics.memories):
        for record in await read_topic(settings, topic):
            if topic == topics.memories:
                kind = _event_fields(record.value, settings.max_record_bytes).get("type")
                if kind not in _KEPT_MEMORY_TYPES:
                    continue
            records.append(record)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    path = settings.archive_dir / f"kept-{stamp}.parquet"
    settings.archive_dir.mkdir(parents=True, exist_ok=True)
    _replace_file(path, _table(records, settings.max_record_bytes), "tmp")
    log.warning("restore: kept %d records of the new log in %s", len(records), path)
    return path


async def _delete_topics(settings: Settings, topics: Sequence[str]) -> None:
    """Delete ``topics`` (those that exist) and wait until the broker no longer lists them."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.broker, request_timeout_ms=_ADMIN_TIMEOUT_MS)
    await admin.start()
    try:
        existing = [topic for topic in topics if topic in set(await admin.list_topics())]
        if existing:
            await admin.delete_topics(existing)
        deadline = time.monotonic() + 30
        while set(existing) & set(await admin.list_topics()):
            if time.monotonic() > deadline:
                raise ArchiveError(f"the broker did not delete {existing} within 30 s")
            await asyncio.sleep(0.2)
    finally:
        await admin.close()


async def _append_kept(settings: Settings, paths: Sequence[Path]) -> dict[str, int]:
    """Publish the kept records of ``paths`` after the restored log (same keys, so the same
    partitions; timestamps and headers as they were); delete each file once acknowledged."""
    appended: dict[str, int] = {}
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.broker, acks="all", max_request_size=_RESTORE_REQUEST_BYTES
    )
    await producer.start()
    try:
        for path in paths:
            table = await asyncio.to_thread(pq.read_table, path)
            rows = table.to_pydict()
            timestamps = table.column("timestamp").cast(pa.int64()).to_pylist()
            futures = []
            for index, topic in enumerate(rows["topic"]):
                headers = [(h["key"], h["value"] or b"") for h in rows["headers"][index] or ()]
                futures.append(
                    await producer.send(
                        topic,
                        rows["value"][index],
                        key=rows["key"][index],
                        timestamp_ms=timestamps[index],
                        headers=headers or None,
                    )
                )
                appended[topic] = appended.get(topic, 0) + 1
            await asyncio.gather(*futures)
            path.unlink()
            log.info("restore: appended the kept records of %s", path.name)
    finally:
        await producer.stop()
    return appended
