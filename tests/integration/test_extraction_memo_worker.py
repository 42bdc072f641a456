"""The extraction memo on the real broker: each extraction's entry is in the changelog,
sealed, on the request's partition, and the worker's sweep tombstones it after the retention."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from chat import conversation
from harness import wait_for

from memstream.models.codec import decode_event
from memstream.streams.broker import free_port
from memstream.streams.extraction_memo import extractions_changelog_topic, memo_header
from memstream.streams.logreader import read_topic
from memstream.streams.publish import publish_events
from memstream.streams.topics import Topics
from memstream.streams.worker import WorkerProcess

TURNS = [("user", "I live in Quenderby and I prefer night trains."), ("assistant", "Noted.")]


def test_entries_are_sealed_on_the_request_partition_and_tombstoned_after_the_retention(
    settings_factory, tmp_path: Path
) -> None:
    settings = settings_factory(web_port=free_port(), extraction_memo_s=3)
    changelog = extractions_changelog_topic(settings)
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        asyncio.run(publish_events(settings, conversation("ann", "s", TURNS)))
        (request,) = wait_for(
            lambda: asyncio.run(read_topic(settings, Topics.from_settings(settings).consolidation)),
            "the consolidation request",
        )
        records = wait_for(
            lambda: [r for r in asyncio.run(read_topic(settings, changelog)) if r.value is None],
            "the entry's tombstone",
            timeout_s=60,
        )
        history = asyncio.run(read_topic(settings, changelog))
    written = [r for r in history if r.value is not None]
    assert len(written) == 1 and len(records) == 1
    (entry,) = written
    # Keyed by the request's event id (in the clear envelope of the sealed request).
    assert json.loads(entry.key) == json.loads(records[0].key) == decode_event(request.value).event_id
    assert entry.partition == records[0].partition == request.partition
    assert memo_header(entry.value).partition == request.partition
    assert b"Quenderby" not in entry.value  # sealed with the span's key
    assert history.index(entry) < history.index(records[0])
