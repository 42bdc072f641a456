"""Reading an archive directory: its files and the positions their names give, the topics it
keeps, the snapshots of the workers' committed offsets, and the fingerprint of its records.

Layout, under the live archive directory (:func:`live_archive_dir`)::

    topic=<topic>/date=<YYYY-MM-DD>/part-<partition:04d>-<first:020d>-<last:020d>.parquet
    group_offsets/<group id>.json
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime  # noqa: F401 - UTC: the GroupOffsets doctest uses it
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from memstream.models.fingerprint import Fingerprint, fingerprint
from memstream.models.settings import Settings
from memstream.streams.archive.errors import ArchiveError
from memstream.streams.kafka.topics import Topics

#: The directory of consumer-group offset snapshots inside an archive directory.
GROUP_OFFSETS = "group_offsets"
#: What :func:`archive_fingerprint` covers per record: ``timestamp`` in epoch milliseconds,
#: ``key`` as hex, the value as its sha256 hex.
FINGERPRINT_FIELDS = ("topic", "partition", "offset", "timestamp", "key", "value_sha256")
_FILE_NAME = re.compile(r"part-(\d{4,})-(\d{20})-(\d{20})\.parquet")


@dataclass(frozen=True)
class ArchiveFile:
    """One archive file, as its path names it."""

    topic: str
    partition: int
    first: int
    last: int
    day: str
    path: Path


@dataclass(frozen=True)
class GroupOffsets:
    """The offsets a consumer group had committed, as read from the broker at ``taken_at``.

    ``offsets`` maps (topic, partition) to the committed offset: the next record the group
    reads there. Partitions without a commit are left out.
    """

    group_id: str
    taken_at: datetime
    offsets: Mapping[tuple[str, int], int]

    def to_json(self) -> str:
        """The snapshot file's text.

        Examples
        --------
        >>> at = datetime(2026, 3, 1, tzinfo=UTC)
        >>> GroupOffsets("memstream.worker", at, {("memstream.chat", 0): 7}).to_json()
        ... # doctest: +NORMALIZE_WHITESPACE
        '{"group_id": "memstream.worker", "taken_at": "2026-03-01T00:00:00+00:00",
          "offsets": [{"topic": "memstream.chat", "partition": 0, "offset": 7}]}'
        """
        return json.dumps(
            {
                "group_id": self.group_id,
                "taken_at": self.taken_at.isoformat(),
                "offsets": [
                    {"topic": topic, "partition": partition, "offset": offset}
                    for (topic, partition), offset in sorted(self.offsets.items())
                ],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> GroupOffsets:
        """Read a snapshot file's text; ``ValueError`` if it is not one."""
        try:
            data = json.loads(text)
            return cls(
                group_id=str(data["group_id"]),
                taken_at=datetime.fromisoformat(data["taken_at"]),
                offsets={
                    (str(item["topic"]), int(item["partition"])): int(item["offset"])
                    for item in data["offsets"]
                },
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a group offsets snapshot: {exc!r}") from exc


def worker_group_id(settings: Settings) -> str:
    """The workers' consumer group id, which is also their Faust app id (see ``create_app``).

    Examples
    --------
    >>> worker_group_id(Settings(topic_prefix="memstream", app_id="worker"))
    'memstream.worker'
    """
    return f"{settings.topic_prefix}.{settings.app_id}"


def archived_topics(settings: Settings) -> tuple[str, ...]:
    """Every topic the archive keeps: the memstream topics, then the sessions changelog.

    The changelog is named as Faust names it, ``{app id}-sessions-changelog`` (the name
    ``memstream.streams.operations.rebuild_sessions.sessions_changelog_topic`` gives; not imported from
    there, which would load LanceDB into restore).

    Examples
    --------
    >>> archived_topics(Settings(topic_prefix="memstream"))[-1]
    'memstream.worker-sessions-changelog'
    """
    changelog = f"{worker_group_id(settings)}-sessions-changelog"
    return (*Topics.from_settings(settings).all(), changelog)


def archive_files(directory: Path) -> list[ArchiveFile]:
    """Every archive file under ``directory``, ordered by topic, partition and first offset.

    Examples
    --------
    >>> archive_files(Path("no-such-dir"))
    []
    """
    found = []
    for path in directory.glob("topic=*/date=*/part-*.parquet"):
        match = _FILE_NAME.fullmatch(path.name)
        if match is None:
            continue
        topic = path.parent.parent.name.removeprefix("topic=")
        day = path.parent.name.removeprefix("date=")
        partition, first, last = (int(group) for group in match.groups())
        found.append(ArchiveFile(topic, partition, first, last, day, path))
    return sorted(found, key=lambda f: (f.topic, f.partition, f.first))


def archive_positions(directory: Path) -> dict[tuple[str, int], int]:
    """The next offset to archive per (topic, partition): the last archived offset + 1.

    Taken from file names alone, which a crash can never leave half-written.
    """
    positions: dict[tuple[str, int], int] = {}
    for file in archive_files(directory):
        key = (file.topic, file.partition)
        positions[key] = max(positions.get(key, 0), file.last + 1)
    return positions


def _group_offsets_path(directory: Path, group_id: str) -> Path:
    return directory / GROUP_OFFSETS / f"{group_id}.json"


def read_group_offsets(directory: Path, group_id: str) -> GroupOffsets | None:
    """The snapshot of ``group_id``'s committed offsets in the archive ``directory``, if any.

    Raises
    ------
    ArchiveError
        If the snapshot file is damaged.
    """
    path = _group_offsets_path(directory, group_id)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return GroupOffsets.from_json(text)
    except ValueError as exc:
        raise ArchiveError(f"{path} is damaged: {exc}") from exc


def archive_fingerprint(directory: Path) -> Fingerprint:
    """The order-independent fingerprint of every archived record (projection "analytics").

    Covers :data:`FINGERPRINT_FIELDS`, so two archives of the same log are equal however
    their records were cut into files.
    """
    return fingerprint("analytics", _fingerprint_rows(directory), FINGERPRINT_FIELDS)


def _fingerprint_rows(directory: Path) -> Iterator[dict[str, Any]]:
    columns = ["topic", "partition", "offset", "timestamp", "key", "value"]
    for file in archive_files(directory):
        table = pq.ParquetFile(file.path).read(columns=columns)
        rows = zip(
            table.column("topic").to_pylist(),
            table.column("partition").to_pylist(),
            table.column("offset").to_pylist(),
            table.column("timestamp").cast(pa.int64()).to_pylist(),
            table.column("key").to_pylist(),
            table.column("value").to_pylist(),
            strict=True,
        )
        for topic, partition, offset, timestamp, key, value in rows:
            yield {
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "timestamp": timestamp,
                "key": None if key is None else key.hex(),
                "value_sha256": None if value is None else hashlib.sha256(value).hexdigest(),
            }


def archive_directories(settings: Settings) -> list[Path]:
    """Every archive directory under ``settings.archive_dir``: the live one, the ones a
    replay swapped out and any being built.

    Examples
    --------
    >>> archive_directories(Settings(data_dir=Path("no-such-dir")))
    []
    """
    if not settings.archive_dir.is_dir():
        return []
    return sorted(
        path
        for path in settings.archive_dir.iterdir()
        if path.is_dir() and any(path.glob("topic=*"))
    )
