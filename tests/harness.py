"""Helpers the integration tests share: the CLI with a test's settings, the archive's progress."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import TopicPartition

from memstream.models.settings import Settings
from memstream.streams.archive import archive_positions, archived_topics, live_archive_dir
from memstream.streams.cli import main
from memstream.streams.tansu import true_end_offsets


def cli(settings: Settings, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    """Run the ``memstream`` command with ``settings`` in its environment."""
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    return main(list(args))


def archive_caught_up(settings: Settings) -> bool:
    """Whether the live archive holds every record now in every archived topic."""
    tps = [TopicPartition(t, p) for t in archived_topics(settings) for p in range(settings.partitions)]
    try:
        ends = asyncio.run(true_end_offsets(settings.broker, tps))
    except Exception:  # noqa: BLE001 - the sessions changelog may not exist yet
        return False
    archived = archive_positions(live_archive_dir(settings))
    return all(archived.get((tp.topic, tp.partition), 0) == end for tp, end in ends.items())
