"""docker-compose.yml and the Dockerfile, read without a Docker engine (none runs here):
every MEMSTREAM_* variable a service sets is a setting, with a value memstream accepts, and
the services fit together (one writer of the shared data directory, distinct ports, the
broker address Kafka advertises to the containers)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from memstream.models.settings import Settings
from memstream.streams.worker.web import check_web_exposure

ROOT = Path(__file__).resolve().parents[2]
#: What an interpolation from .env stands for in these checks: a token as memstream wants.
TOKEN = "t0ken-from-dotenv-5f3c9a1b2d4e"
_INTERPOLATION = re.compile(r"\$\{(\w+)(?::([-?])([^}]*))?\}")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(document, dict)
    return document


def interpolated(value: object) -> str:
    """``value`` as compose would pass it: ``${VAR:-default}`` gives its default, a required
    ``${VAR:?...}`` the test token."""

    def fill(match: re.Match[str]) -> str:
        return match.group(3) if match.group(2) == "-" else TOKEN

    return _INTERPOLATION.sub(fill, str(value))


def memstream_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in compose["services"].items() if "build" in s}


def settings_of(service: dict[str, Any]) -> Settings:
    """The settings a service's memstream would read from its environment."""
    values = {
        key.removeprefix("MEMSTREAM_").lower(): interpolated(value)
        for key, value in service["environment"].items()
        if key.startswith("MEMSTREAM_")
    }
    return Settings(**values)


def test_every_memstream_variable_is_a_setting_with_an_accepted_value(compose: dict[str, Any]) -> None:
    services = memstream_services(compose)
    assert set(services) == {"worker-1", "worker-2", "worker-3", "api"}
    for name, service in services.items():
        unknown = [
            key for key in service["environment"]
            if key.startswith("MEMSTREAM_")
            and key.removeprefix("MEMSTREAM_").lower() not in Settings.model_fields
        ]
        assert unknown == [], name
        settings = settings_of(service)  # raises if a value is refused
        assert (settings.broker_kind, settings.broker) == ("kafka", "kafka:29092"), name


def test_the_workers_start_exposed_with_a_token_and_listen_on_distinct_ports(compose: dict[str, Any]) -> None:
    services = memstream_services(compose)
    workers = {name: s for name, s in services.items() if s["command"] == ["worker"]}
    assert set(workers) == {"worker-1", "worker-2", "worker-3"}
    ports = set()
    for name, service in workers.items():
        settings = settings_of(service)
        check_web_exposure(settings)  # a worker that would refuse to start raises here
        assert settings.web_host == name  # the name the other worker reaches it by
        assert f"{settings.web_port}:{settings.web_port}" in service["ports"]
        ports.add(settings.web_port)
    assert len(ports) == 3
    # The archive sink is the one single writer of the shared data directory; every worker
    # projects the memory tables of the partitions it is assigned.
    assert [n for n, s in workers.items() if "archive" in settings_of(s).role_set] == ["worker-1"]
    assert all({"sessions", "extraction", "projector"} <= settings_of(s).role_set for s in workers.values())
    # Enough partitions for every worker, the same in Kafka's default as in memstream's.
    partitions = {settings_of(s).partitions for s in services.values()}
    kafka = compose["services"]["kafka"]["environment"]
    assert partitions == {int(kafka["KAFKA_NUM_PARTITIONS"])} and min(partitions) >= len(workers)
    assert all(s["volumes"] == ["memstream-data:/data"] for s in services.values())


def test_the_api_is_published_on_its_port(compose: dict[str, Any]) -> None:
    api = compose["services"]["api"]
    settings = settings_of(api)
    assert api["command"] == ["serve"]
    assert settings.api_host == "0.0.0.0" and f"{settings.api_port}:{settings.api_port}" in api["ports"]
    assert settings.metrics_token is None  # unless .env sets one


def test_the_containers_use_the_listener_kafka_advertises_to_them(compose: dict[str, Any]) -> None:
    kafka = compose["services"]["kafka"]["environment"]
    advertised = dict(
        listener.split("://", 1)[::-1] for listener in kafka["KAFKA_ADVERTISED_LISTENERS"].split(",")
    )
    assert advertised["kafka:29092"] == "INTERNAL"
    assert advertised["localhost:9092"] == "EXTERNAL"  # for memstream run on the machine itself
    # Records as large as the workers send.
    assert int(kafka["KAFKA_MESSAGE_MAX_BYTES"]) >= Settings().max_record_bytes


def test_the_image_installs_the_project_on_python_311_slim() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim$", dockerfile, re.MULTILINE)
    assert re.search(r"^RUN pip install \.", dockerfile, re.MULTILINE)
    assert 'ENTRYPOINT ["memstream"]' in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".env", ".venv", ".memstream"} <= set(ignored)  # no secret or local state in the image
    # Every folder pyproject installs a package from is copied in before the install.
    folders = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ].values())
    copied = set(re.findall(r"^COPY (\S+) \./\1$", dockerfile, re.MULTILINE))
    assert folders <= copied, sorted(folders - copied)
