"""The memory projection on an object store, end to end: a worker whose ``memory_store`` is an
``s3://`` location on moto's S3 server (run here) projects a conversation's memories into the
bucket, and a client in another process with the same settings (another machine, as far as
the store can tell) finds them straight from the store. One worker for the module."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness import wait_for
from s3 import SECRET_ACCESS_KEY, S3Server, s3_server

from memstream.models.settings import Settings
from memstream.projections.memories import ProjectionStore, partition_table
from memstream.streams.client import MemoryClient
from memstream.streams.kafka.broker import free_port
from memstream.streams.worker.process import WorkerProcess

OSLO = [
    {"role": "user", "content": "I moved to Oslo last spring and I teach chemistry there."},
    {"role": "assistant", "content": "How do you like Oslo?"},
]


@dataclass
class Stack:
    settings: Settings
    store: ProjectionStore
    worker_log: Path


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, broker_address: str, broker_kind: str
) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("s3")
    with s3_server(tmp / "moto.log") as s3:
        settings = _settings(s3, tmp, broker_address, broker_kind)
        with WorkerProcess(settings, log_path=tmp / "worker.log"):
            yield Stack(settings, ProjectionStore.from_settings(settings), tmp / "worker.log")


def _settings(s3: S3Server, tmp: Path, broker_address: str, broker_kind: str) -> Settings:
    return Settings(
        broker=broker_address, broker_kind=broker_kind,  # type: ignore[arg-type]
        data_dir=tmp / "data", topic_prefix=f"s3{int(time.time() * 1000) % 10**9}",
        partitions=4, web_port=free_port(), session_timeout_s=10.0, heartbeat_interval_s=2.0,
        **s3.settings(f"s3://{s3.bucket()}/memstream"),
    )


def test_a_workers_memories_on_s3_are_found_by_another_process(stack: Stack) -> None:
    # No resident memories: they follow the log and would answer before the store has it.
    reader = stack.settings.model_copy(update={"resident_memory_mb": 0})
    with MemoryClient(reader) as memory:
        memory.add(OSLO, user_id="ann")
        found = wait_for(
            lambda: memory.search("where does the user live", user_id="ann"),
            "ann's Oslo memory, searched from the store",
            until=lambda hits: any("Oslo" in hit["memory"] for hit in hits),
        )
        assert all(hit["memory"] for hit in found)
        assert memory.search("where does the user live", user_id="bob") == []
    # The tables are in the bucket, and nothing of the projection is on the local disk.
    tables = set(stack.store.connect().list_tables().tables)
    assert {partition_table("memories", p) for p in range(4)} & tables
    assert not stack.settings.lancedb_dir.exists()
    assert SECRET_ACCESS_KEY not in stack.worker_log.read_text()
