"""The archive sink's flush when the worker stops in the middle of it."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka import ConsumerRecord, TopicPartition

from memstream.models.settings import Settings
from memstream.streams import archive
from memstream.streams.archive import archive_files, archive_positions
from memstream.streams.archive import sink as archive_sink
from memstream.streams.archive.sink import _ArchiveSink


def record(topic: str, offset: int) -> ConsumerRecord:
    return ConsumerRecord(
        topic=topic, partition=0, offset=offset, timestamp=1_764_000_000_000 + offset,
        timestamp_type=0, key=b"alice", value=b'{"x": 1}', checksum=None,
        serialized_key_size=5, serialized_value_size=8, headers=(),
    )


def test_a_stop_during_a_flush_writes_the_batch_once_and_the_final_flush_does_not_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(data_dir=tmp_path, topic_prefix="t")
    real_write = archive_sink._write_batch
    calls: list[int] = []
    writing = threading.Event()

    def slow_write(*args: Any) -> None:
        calls.append(1)
        writing.set()
        time.sleep(0.3)  # a slow write: the thread goes on after its task is cancelled
        real_write(*args)

    monkeypatch.setattr(archive_sink, "_write_batch", slow_write)
    tp = TopicPartition("t.deadletters", 0)
    sink = _ArchiveSink(settings, None, None, [tp], [])  # type: ignore[arg-type]
    sink.name = archive.ARCHIVE
    sink.buffer = {tp: [record(tp.topic, 0), record(tp.topic, 1)]}
    sink.buffered = 2

    async def stop_mid_flush() -> None:
        flush = asyncio.create_task(sink._flush())
        assert await asyncio.to_thread(writing.wait, 10), "the flush never started writing"
        flush.cancel()  # mid-write
        with pytest.raises(asyncio.CancelledError):
            await flush
        # What run_archive_sink does on a cancellation: flush what is left.
        await sink.flush_unless_swapped()

    asyncio.run(stop_mid_flush())
    assert calls == [1], "the batch is written once, not again by the final flush"
    assert archive_positions(sink.directory) == {(tp.topic, 0): 2}
    assert len(archive_files(sink.directory)) == 1
