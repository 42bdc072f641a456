"""An S3-compatible object store that runs here, for the tests of the memory projection on an
object store: moto's S3 server (``moto_server``, from the dev extras) in a child process on a
free port, and a bucket in it per test (``S3Server.bucket``).

moto answers as AWS S3 does where it matters to LanceDB: a PUT with ``If-None-Match: *`` on
an existing key fails (412), which is how Lance commits a table version only once.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from harness import child_process
from pydantic import SecretStr

from memstream.projections.memories import ObjectStoreOptions, ProjectionStore
from memstream.streams.kafka.broker import free_port

#: moto takes any credentials; these only have to be the same everywhere.
ACCESS_KEY_ID = "memstream-test"
SECRET_ACCESS_KEY = "memstream-test-secret"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    """A running moto S3 server (``endpoint``: ``http://127.0.0.1:PORT``)."""

    endpoint: str

    def bucket(self) -> str:
        """A new, empty bucket."""
        name = f"memstream-{uuid.uuid4().hex[:12]}"
        boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION,
            aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY,
        ).create_bucket(Bucket=name)
        return name

    def options(self) -> ObjectStoreOptions:
        """How to reach this server."""
        return ObjectStoreOptions(
            endpoint=self.endpoint, region=REGION, allow_http=True,
            access_key_id=SecretStr(ACCESS_KEY_ID),
            secret_access_key=SecretStr(SECRET_ACCESS_KEY),
        )

    def store(self, location: str, *, pointer_check_s: float = 0.0) -> ProjectionStore:
        """A projection store at ``location`` (``s3://bucket/prefix``) on this server."""
        return ProjectionStore(
            location=location, options=self.options(), pointer_check_s=pointer_check_s
        )

    def settings(self, location: str) -> dict[str, Any]:
        """The ``memory_store*`` settings of ``location`` on this server."""
        return {
            "memory_store": location,
            "memory_store_endpoint": self.endpoint,
            "memory_store_region": REGION,
            "memory_store_allow_http": True,
            "memory_store_access_key_id": ACCESS_KEY_ID,
            "memory_store_secret_access_key": SECRET_ACCESS_KEY,
            "memory_store_read_lag_s": 0.5,
        }


@contextmanager
def s3_server(log_path: Path) -> Iterator[S3Server]:
    """moto's S3 server in a child process (its request log in ``log_path``) until the block
    ends."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with child_process(command, os.environ, log_path) as process:
        deadline = time.monotonic() + 30
        while not _answers(endpoint):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto_server did not start: {log_path.read_text()}")
            time.sleep(0.1)
        yield S3Server(endpoint)


def _answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # it answered
    except OSError:
        return False
