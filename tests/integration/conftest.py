"""Fixtures for the integration tier: one real broker for the whole session.

By default an embedded Tansu broker is started on a free port. Set ``MEMSTREAM_TEST_BROKER``
to ``host:port`` to run against a broker that is already running instead (CI runs the suite
against Apache Kafka this way); ``MEMSTREAM_TEST_BROKER_KIND`` says what it is (``kafka`` by
default, ``tansu`` for an external Tansu).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, cast

import pytest

from memstream.models.settings import Settings
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.worker.process import WorkerProcess

BrokerKind = Literal["tansu", "kafka"]
SettingsFactory = Callable[..., Settings]

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test in this folder as ``integration``."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def broker_kind() -> BrokerKind:
    """What the test broker is: ``tansu`` (embedded, or said so) or ``kafka``."""
    if not os.environ.get("MEMSTREAM_TEST_BROKER"):
        return "tansu"
    kind = os.environ.get("MEMSTREAM_TEST_BROKER_KIND", "kafka")
    if kind not in ("tansu", "kafka"):
        raise pytest.UsageError(f"MEMSTREAM_TEST_BROKER_KIND must be tansu or kafka, not {kind}")
    return cast(BrokerKind, kind)


@pytest.fixture(scope="session")
def broker_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address of the session's broker (embedded Tansu unless told otherwise)."""
    external = os.environ.get("MEMSTREAM_TEST_BROKER")
    if external:
        yield external
        return
    broker = EmbeddedBroker(free_port(), log_dir=tmp_path_factory.mktemp("broker"))
    with broker:
        yield broker.address


@pytest.fixture
def tansu_only(broker_kind: BrokerKind) -> None:
    """Skip a test that checks Tansu's own behaviour when the broker is Apache Kafka."""
    if broker_kind != "tansu":
        pytest.skip("checks a Tansu quirk; the test broker is Apache Kafka")


@pytest.fixture
def settings_factory(
    tmp_path: Path, broker_address: str, broker_kind: BrokerKind
) -> SettingsFactory:
    """Make ``Settings`` for this test: its own topic prefix and data directory.

    Keyword arguments override any field, e.g. ``settings_factory(partitions=1)``.
    """
    # Topics outlive a test on the shared broker: a unique prefix keeps tests apart.
    prefix = f"t{uuid.uuid4().hex[:10]}"

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "broker": broker_address,
            "broker_kind": broker_kind,
            "data_dir": tmp_path / "data",
            "topic_prefix": prefix,
            "partitions": 4,
            "session_timeout_s": 10.0,
            "heartbeat_interval_s": 2.0,
        }
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
def worker_settings(settings_factory: SettingsFactory, tmp_path: Path) -> Iterator[Settings]:
    """Settings of a running worker (its own topics, data directory and web port)."""
    settings = settings_factory(web_port=free_port())
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        yield settings
