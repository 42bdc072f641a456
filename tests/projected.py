"""A unit test's memory projection of a hand-written log, and the service over it: the setup
the tests of the reading verbs (profile, projects, graph and entity) share."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fakes import FakeEmbedder, InMemoryPublisher, unit_settings

from memstream.models.events.memory import MemoryAdded, MemoryChange
from memstream.projections.memories import MemoryProjection, SourcePosition
from memstream.streams.kafka.publisher import EventLimits
from memstream.streams.keys.store import FileKeyStore
from memstream.streams.service.app import Service
from memstream.streams.service.container import Container

TOPIC = "t.memories"


def projected(
    path: Path, events: Sequence[MemoryAdded | MemoryChange], batch: int
) -> MemoryProjection:
    """A LanceDB projection of ``events``, applied ``batch`` at a time in log order."""
    projection = MemoryProjection(path, FakeEmbedder())
    positioned = [(event, SourcePosition(TOPIC, 0, n)) for n, event in enumerate(events)]
    for start in range(0, len(positioned), batch):
        projection.apply(positioned[start : start + batch])
    return projection


def service_over(tmp_path: Path, events: Sequence[MemoryAdded | MemoryChange]) -> Service:
    """The service over a real LanceDB projection of ``events``, applied as a live projector
    does (one event at a time)."""
    settings = unit_settings(tmp_path)
    keys = FileKeyStore(settings.keys_dir)
    publisher = InMemoryPublisher(keys, EventLimits.from_settings(settings))
    projection = projected(tmp_path / "live", events, batch=1)
    return Service(Container(settings, keys=keys, projection=projection, publisher=publisher))
