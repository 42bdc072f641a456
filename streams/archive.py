"""The durable archive of the event log: every record of every topic, in Parquet files.

The embedded broker keeps its log in memory only, so a broker restart loses every topic. The
archive sink (:func:`run_archive_sink`, worker role ``archive``) copies each record into
Parquet files as it arrives; :func:`restore` republishes them into an empty broker with the
same partitions, offsets, keys, values, headers and timestamps, after which a replay
rebuilds the projections. The same files feed the DuckDB analytics views.

Layout, under the live archive directory (:func:`live_archive_dir`)::

    topic=<topic>/date=<YYYY-MM-DD>/part-<partition:04d>-<first:020d>-<last:020d>.parquet

The directories are Hive-style, so ``read_parquet('<dir>/**/*.parquet', hive_partitioning =
true)`` in DuckDB prunes by topic and day; the day is the UTC date of the broker timestamp
(1970-01-01 for a record without one). A file holds a contiguous run of offsets of one
partition on one day, in offset order, and is written under a temporary name, then renamed:
a crash never leaves half a file, and the file names alone say what is archived
(:func:`archive_positions`), which is where the sink resumes. Every record is kept with its
original bytes, valid event or not, so offsets stay contiguous; the parsed columns
(``event_id``, ``type``, ...) serve queries and are null when the value is not an event.

Besides the memstream topics the archive keeps the changelog of the workers' ``sessions``
table (:func:`archived_topics`), and a snapshot of the offsets the workers' consumer group
has committed (:class:`GroupOffsets`, in ``group_offsets/<group id>.json``). A restore puts
all three back, so a worker started on the restored broker carries on as after a crash: from
those offsets, with its session table recovered from the changelog, instead of consolidating
and extracting every transcript again.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import fcntl
import hashlib
import itertools
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiokafka.errors as kafka_errors
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pydantic_core
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata

from memstream.models.erasure import ErasureLedger, ErasureMark
from memstream.models.fingerprint import Fingerprint, fingerprint
from memstream.models.settings import Settings
from memstream.projections.archive_format import ARCHIVE, SCHEMA, live_archive_dir
from memstream.projections.shadow import live_name
from memstream.streams.runtime.tansu import true_end_offsets
from memstream.streams.runtime.topics import Topics, ensure_topics

__all__ = [
    "ARCHIVE",
    "BLANKED",
    "FINGERPRINT_FIELDS",
    "GROUP_OFFSETS",
    "SCHEMA",
    "ArchiveErasures",
    "ArchiveError",
    "ArchiveFile",
    "ArchivePastLog",
    "Gap",
    "GroupOffsets",
    "RestoreRefused",
    "RestoreReport",
    "archive_directories",
    "archive_files",
    "archive_fingerprint",
    "archive_positions",
    "archived_topics",
    "blank_erased",
    "live_archive_dir",
    "log_shortfalls",
    "read_group_offsets",
    "rebuild_archive",
    "restore",
    "run_archive_sink",
    "worker_group_id",
]

log = logging.getLogger(__name__)

#: The directory of consumer-group offset snapshots inside an archive directory.
GROUP_OFFSETS = "group_offsets"

#: What :func:`archive_fingerprint` covers per record: ``timestamp`` in epoch milliseconds,
#: ``key`` as hex, the value as its sha256 hex.
FINGERPRINT_FIELDS = ("topic", "partition", "offset", "timestamp", "key", "value_sha256")

_FILE_NAME = re.compile(r"part-(\d{4,})-(\d{20})-(\d{20})\.parquet")
_EPOCH_DAY = "1970-01-01"
_STRING_FIELDS = ("event_id", "type", "user_id", "session_id", "agent_id")
#: Records restore sends per partition before it waits for their acknowledgements.
_RESTORE_CHUNK = 2000
#: How long the sink's and restore's admin requests may take.
_ADMIN_TIMEOUT_MS = 10_000
#: The largest record restore sends: any the archive holds (a producer may have written a
#: record of megabytes; the broker took it, so it must take it back).
_RESTORE_REQUEST_BYTES = 64 * 1024 * 1024


class ArchiveError(RuntimeError):
    """The archive and the broker's log do not fit together (or the archive is damaged)."""


class RestoreRefused(ArchiveError):
    """The target log is not empty: republishing the archive onto it would duplicate it."""


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
class ArchivePastLog:
    """A partition whose log ends before offsets the archive already holds.

    ``archived_to`` is the offset after the last archived record; ``log_end`` the offset the
    broker's log would give its next record.
    """

    topic: str
    partition: int
    archived_to: int
    log_end: int

    def explain(self) -> str:
        """The plain-words report of it, with what to do."""
        return (
            f"{self.topic}[{self.partition}]: the archive holds offsets up to "
            f"{self.archived_to - 1}, but the broker's log ends at offset {self.log_end}: the "
            "broker lost its log (the embedded broker keeps it in memory only, so a restart "
            "empties it). This partition is not archived again from 0, which would mix two "
            "different logs. To recover: stop the workers, make sure the broker is empty "
            "(restart it if anything was written to it since), run `memstream restore`, then "
            "`memstream replay --projection all`."
        )


@dataclass(frozen=True)
class Gap:
    """Offsets ``start`` to ``end - 1`` of a partition that the archive does not hold.

    Restore republishes the records around it contiguously, so every record after it gets an
    offset ``shift`` lower than it had in the original log (``shift`` counts this gap and the
    earlier ones of the partition).
    """

    topic: str
    partition: int
    start: int
    end: int
    shift: int

    def explain(self) -> str:
        """The plain-words report of it."""
        return (
            f"{self.topic}[{self.partition}]: offsets {self.start}..{self.end - 1} are missing "
            f"from the archive; restored records from offset {self.end} on are {self.shift} "
            "lower than in the original log"
        )


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


@dataclass(frozen=True)
class RestoreReport:
    """What :func:`restore` republished, and the group offsets it committed.

    ``group_offsets`` holds the offsets committed for the consumer group ``group_id`` per
    (topic, partition), from the archive's snapshot taken at ``group_offsets_taken_at``;
    empty when the archive has none. ``group_offsets_lowered`` holds the snapshot's offsets
    that were past the restored log (records the archive never got), each lowered to its end.
    """

    records: Mapping[str, int]
    partitions: int
    gaps: tuple[Gap, ...]
    elapsed_s: float
    group_id: str = ""
    group_offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)
    group_offsets_taken_at: datetime | None = None
    group_offsets_lowered: Mapping[tuple[str, int], int] = field(default_factory=dict)
    #: Records producers wrote to a new log after the broker lost the old one, kept and
    #: appended after the archive, per topic.
    appended: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Records republished, all topics."""
        return sum(self.records.values())

    def summary(self) -> str:
        """A few lines for a terminal."""
        head = f"restored {self.total} records into {self.partitions} partitions"
        lines = [f"{head} in {self.elapsed_s:.1f} s"]
        lines += [f"  {topic}: {count}" for topic, count in sorted(self.records.items())]
        if self.appended:
            lines.append(
                f"appended after them {sum(self.appended.values())} records that producers "
                "wrote to the broker after it lost its log (none of them is lost):"
            )
            lines += [f"  {topic}: {count}" for topic, count in sorted(self.appended.items())]
        if self.gaps:
            lines.append("the archive has gaps, so these restored offsets shifted:")
            lines += [f"  {gap.explain()}" for gap in self.gaps]
        if self.group_offsets_taken_at is None:
            lines.append(
                f"the archive has no committed offsets of consumer group {self.group_id!r}: "
                "a worker will read its topics from the start (consolidating and extracting "
                "again; decisions see the old memories as duplicates)"
            )
            return "\n".join(lines)
        taken_at = self.group_offsets_taken_at.isoformat(timespec="seconds")
        lines.append(
            f"committed offsets of consumer group {self.group_id!r} as archived at "
            f"{taken_at} ({len(self.group_offsets)} partitions); a worker carries on from them:"
        )
        by_topic: dict[str, list[str]] = {}
        for (topic, partition), offset in sorted(self.group_offsets.items()):
            by_topic.setdefault(topic, []).append(f"[{partition}] {offset}")
        lines += [f"  {topic}: {', '.join(parts)}" for topic, parts in by_topic.items()]
        for (topic, partition), archived in sorted(self.group_offsets_lowered.items()):
            lines.append(
                f"  {topic}[{partition}]: the snapshot had {archived}, past the restored log; "
                f"lowered to {self.group_offsets[(topic, partition)]}"
            )
        return "\n".join(lines)


# --- reading the layout ---------------------------------------------------------------------


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
    ``memstream.streams.tools.rebuild_sessions.sessions_changelog_topic`` gives; not imported from
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


@dataclass(frozen=True)
class _Last:
    """The last archived record of a partition, to check the log still holds that record."""

    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None

    def matches(self, record: ConsumerRecord) -> bool:
        if record.offset != self.offset or _timestamp_ms(record) != self.timestamp:
            return False
        if self.key is None and self.value is None:
            # Blanked by an erasure (or a record with neither): its bytes are gone on
            # purpose, so only its position and time can be compared.
            return True
        return record.key == self.key and record.value == self.value


def _last_archived(
    directory: Path, positions: Mapping[TopicPartition, int]
) -> dict[TopicPartition, _Last]:
    """The last archived record of every partition in ``positions`` with a position > 0."""
    files = {(f.topic, f.partition, f.last): f for f in archive_files(directory)}
    found: dict[TopicPartition, _Last] = {}
    for tp, position in positions.items():
        file = files.get((tp.topic, tp.partition, position - 1))
        if position == 0 or file is None:
            continue
        columns = ["offset", "timestamp", "key", "value"]
        table = pq.ParquetFile(file.path).read(columns=columns)
        table = table.slice(table.num_rows - 1)
        found[tp] = _Last(
            offset=table.column("offset")[0].as_py(),
            timestamp=table.column("timestamp").cast(pa.int64())[0].as_py(),
            key=table.column("key")[0].as_py(),
            value=table.column("value")[0].as_py(),
        )
    return found


# --- erasures -------------------------------------------------------------------------------

#: What blanking a record nulls: the record's key, value and headers and every parsed column
#: that identifies someone. Topic, partition, offset, timestamp and type stay, so offsets stay
#: contiguous and a restore still lines up.
BLANKED = ("key", "value", "event_id", "user_id", "session_id", "agent_id", "headers")

#: The columns that say whose a record is and where it stands in the log.
_OWNER_COLUMNS = ["topic", "partition", "offset", "timestamp", "key", "user_id"]


class ArchiveErasures:
    """The erasures an archive applies, and how it tells whose a record is.

    The rule is :mod:`memstream.models.erasure`'s: a record of an erased user is blanked
    when it precedes the erasure (by offset on a partition holding a ``user_erased`` record
    of it, by broker timestamp elsewhere). The live sink, a rebuild from the log and
    ``memstream erase`` all blank through this class, so they blank the same records.

    A record is the user's when its key is the user id (every memstream topic is keyed by
    user id, dead letters by the original key), its parsed ``user_id`` is, its
    sessions-changelog key names the user (``"<user>\\x1f<session>"``), or it is a dead letter
    whose original event (unsealed) or original key names the user.
    """

    def __init__(self, settings: Settings, ledger: ErasureLedger | None = None) -> None:
        topics = Topics.from_settings(settings)
        self.settings = settings
        self.changelog = archived_topics(settings)[-1]
        self.deadletters = topics.deadletters
        self.ledger = ledger or ErasureLedger(
            (topics.chat, topics.memories), max_bytes=settings.max_event_bytes
        )

    def __bool__(self) -> bool:
        return bool(self.ledger)

    def note(self, record: ConsumerRecord) -> str | None:
        """Take a record read from the log into account; the erased user's id if it is an
        erasure record that makes the archive blank more, else None."""
        return self.ledger.note(
            record.topic,
            record.partition,
            record.offset,
            _timestamp_ms(record),
            record.key,
            record.value,
        )

    def add(self, mark: ErasureMark) -> bool:
        """Apply one erasure known from elsewhere (``memstream erase`` publishing it)."""
        return self.ledger.add(mark)

    def only(self, users: Sequence[str] | frozenset[str] | set[str]) -> ArchiveErasures:
        """The erasures of ``users`` alone."""
        return ArchiveErasures(self.settings, self.ledger.only(users))

    def copy(self) -> ArchiveErasures:
        """An independent copy, for a writer thread while this one keeps growing."""
        return ArchiveErasures(self.settings, self.ledger.copy())

    def load(self, directory: Path) -> int:
        """Take the erasure records archived in ``directory`` into account (a sink or a
        rebuild resuming there); return how many erased users that adds."""
        before = len(self.ledger.users)
        columns = ["partition", "offset", "timestamp", "key", "value"]
        for file in archive_files(directory):
            if file.topic not in self.ledger.topics:
                continue
            # The type column first: few files hold an erasure, and values are large.
            kinds = pq.read_table(file.path, columns=["type"]).column("type")
            wanted = pc.fill_null(pc.equal(kinds, "user_erased"), False)
            if not pc.any(wanted).as_py():
                continue
            table = pq.read_table(file.path, columns=columns).filter(wanted)
            stamps = table.column("timestamp").cast(pa.int64()).to_pylist()
            for partition, offset, stamp, key, value in zip(
                table.column("partition").to_pylist(),
                table.column("offset").to_pylist(),
                stamps,
                table.column("key").to_pylist(),
                table.column("value").to_pylist(),
                strict=True,
            ):
                self.ledger.note(file.topic, partition, offset, stamp, key, value)
        return len(self.ledger.users) - before

    def mask(self, table: pa.Table) -> pa.Array:
        """Which rows of an archive ``table`` an erasure covers (a boolean array)."""
        rows = table.num_rows
        if not self.ledger or rows == 0:
            return pa.array([False] * rows, pa.bool_())
        users = sorted(self.ledger.users)
        raw = pa.array([u.encode("utf-8", "surrogatepass") for u in users], pa.binary())
        topic = table.column("topic")
        # A vectorised first cut; whose a record is, and whether it came before the
        # erasure, is then decided row by row for the few candidates.
        candidate = pc.or_kleene(
            pc.or_kleene(
                pc.is_in(table.column("user_id"), value_set=pa.array(users, pa.string())),
                pc.is_in(table.column("key").cast(pa.binary()), value_set=raw),
            ),
            pc.is_in(topic, value_set=pa.array([self.changelog, self.deadletters])),
        )
        indices = pc.indices_nonzero(pc.fill_null(candidate, False)).to_pylist()
        covered = [False] * rows
        if not indices:
            return pa.array(covered, pa.bool_())
        picked = table.select(_OWNER_COLUMNS).take(indices)
        values: list[bytes | None] = [None] * len(indices)
        if self.deadletters in picked.column("topic").to_pylist():
            values = table.column("value").take(indices).to_pylist()
        for index, topic_name, partition, offset, stamp, key, user_id, value in zip(
            indices,
            picked.column("topic").to_pylist(),
            picked.column("partition").to_pylist(),
            picked.column("offset").to_pylist(),
            picked.column("timestamp").cast(pa.int64()).to_pylist(),
            picked.column("key").to_pylist(),
            picked.column("user_id").to_pylist(),
            values,
            strict=True,
        ):
            owners = self._owners(topic_name, key, user_id, value)
            covered[index] = self.ledger.covers(owners, topic_name, partition, offset, stamp)
        return pa.array(covered, pa.bool_())

    def _owners(
        self, topic: str, key: bytes | None, user_id: str | None, value: bytes | None
    ) -> set[str]:
        owners = {user_id} if user_id is not None else set()
        if key is not None:
            if topic == self.changelog:
                owners |= _changelog_owner(key)
            else:
                owners |= _key_owner(key)
        if topic == self.deadletters and value is not None:
            owners |= _dead_letter_owners(value)
        return owners

    def blank(self, table: pa.Table) -> tuple[pa.Table, int]:
        """``table`` with the rows an erasure covers blanked (:data:`BLANKED` nulled), and
        how many rows that was."""
        mask = self.mask(table)
        hits = int(pc.sum(mask).as_py() or 0)
        if not hits:
            return table, 0
        columns = []
        for name in table.column_names:
            column = table.column(name)
            if name in BLANKED:
                column = pc.if_else(mask, pa.nulls(len(column), column.type), column)
            columns.append(column)
        return pa.Table.from_arrays(columns, schema=table.schema), hits

    def blank_files(self, directory: Path) -> tuple[int, int]:
        """Blank what the erasures cover in the files of the archive ``directory``; return
        (records blanked, files rewritten).

        Each file is rewritten under a temporary name, fsynced and renamed over the old one,
        so a reader sees either version and a crash leaves the old one (blanking again is
        idempotent). Rewrites of one directory are serialised by a lock file in it: the live
        sink and ``memstream erase`` may both apply an erasure there.
        """
        if not self.ledger or not directory.is_dir():
            return 0, 0
        blanked = files = 0
        with _rewrite_lock(directory):
            for file in archive_files(directory):
                wanted = [*_OWNER_COLUMNS, *(["value"] if file.topic == self.deadletters else [])]
                owners = pq.read_table(file.path, columns=wanted)
                if not pc.any(self.mask(_with_empty_values(owners))).as_py():
                    continue
                table, hits = self.blank(pq.read_table(file.path))
                if not hits:
                    continue
                _replace_file(file.path, table)
                blanked += hits
                files += 1
        return blanked, files

    def readable(self, directory: Path) -> dict[Path, list[int]]:
        """The offsets, per file, of the records the erasures cover that are not blanked
        (what an erasure still has to blank; empty once it is applied)."""
        found: dict[Path, list[int]] = {}
        if not self.ledger or not directory.is_dir():
            return found
        for file in archive_files(directory):
            wanted = [*_OWNER_COLUMNS, *(["value"] if file.topic == self.deadletters else [])]
            table = _with_empty_values(pq.read_table(file.path, columns=wanted))
            offsets = table.column("offset").filter(self.mask(table)).to_pylist()
            if offsets:
                found[file.path] = offsets
        return found


def blank_erased(settings: Settings, directory: Path, mark: ErasureMark) -> tuple[int, int]:
    """Apply one erasure to the archive ``directory``; return (records blanked, files
    rewritten). What ``memstream erase`` calls for every archive directory."""
    erasures = ArchiveErasures(settings)
    erasures.add(mark)
    return erasures.blank_files(directory)


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


def _with_empty_values(table: pa.Table) -> pa.Table:
    """``table`` with a null ``value`` column if it was not read (only dead letters need it)."""
    if "value" in table.column_names:
        return table
    return table.append_column("value", pa.nulls(table.num_rows, pa.binary()))


def _key_owner(key: bytes) -> set[str]:
    try:
        return {key.decode("utf-8", "surrogatepass")}
    except UnicodeDecodeError:
        return set()


def _changelog_owner(key: bytes) -> set[str]:
    """The user of a sessions-changelog key: a JSON string ``"<user>\\x1f<session>"``."""
    try:
        text = json.loads(key, strict=False)  # a raw \x1f too, not only \u001f
    except (ValueError, RecursionError):
        return set()
    if not isinstance(text, str) or "\x1f" not in text:
        return set()
    return {text.split("\x1f", 1)[0]}


def _dead_letter_owners(value: bytes) -> set[str]:
    """The users a dead letter names: its original key, and the ``user_id`` of its original
    event when that is readable (not sealed)."""
    try:
        letter = json.loads(value)
    except (ValueError, RecursionError):
        return set()
    if not isinstance(letter, dict):
        return set()
    owners: set[str] = set()
    with contextlib.suppress(binascii.Error, TypeError, ValueError):
        if isinstance(letter.get("key_b64"), str):
            owners |= _key_owner(base64.b64decode(letter["key_b64"], validate=True))
    if letter.get("key_id") is None and isinstance(letter.get("value_b64"), str):
        with contextlib.suppress(binascii.Error, ValueError, RecursionError):
            original = json.loads(base64.b64decode(letter["value_b64"], validate=True))
            if isinstance(original, dict) and isinstance(original.get("user_id"), str):
                owners.add(original["user_id"])
    return owners


@contextlib.contextmanager
def _rewrite_lock(directory: Path) -> Iterator[None]:
    with (directory / ".rewrite.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _replace_file(path: Path, table: pa.Table, suffix: str = "erasing") -> None:
    """Write ``table`` to ``path`` (over the file there, if any): temp name, fsync, rename,
    so the file is whole or as it was."""
    staging = path.with_name(f".{path.name}.{suffix}")
    with staging.open("wb") as handle:
        pq.write_table(table, handle, compression="zstd")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, path)
    _fsync_directory(path.parent)


# --- writing --------------------------------------------------------------------------------


#: The last millisecond of year 9999: later timestamps fit neither Python's datetime nor
#: DuckDB's microsecond timestamps (one such value made every analytics query fail).
_LAST_MS = 253_402_300_799_999


def _timestamp_ms(record: ConsumerRecord) -> int | None:
    """The broker timestamp, None when the record has none (Kafka's -1) or one only a
    producer could have set, past year 9999 (such a record is archived without it)."""
    timestamp = record.timestamp
    if timestamp is None or not 0 <= timestamp <= _LAST_MS:
        return None
    return int(timestamp)


def _day(record: ConsumerRecord) -> str:
    timestamp = _timestamp_ms(record)
    if timestamp is None:
        return _EPOCH_DAY
    return datetime.fromtimestamp(timestamp / 1000, UTC).date().isoformat()


def _text(value: Any) -> str | None:
    """``value`` if it is a string Parquet can store (JSON allows lone surrogates; UTF-8 not)."""
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def _event_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
        # Year 1 at +01:00 has no UTC value: the conversion overflows.
        return parsed.astimezone(UTC) if parsed.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None


def _event_fields(value: bytes | None, max_bytes: int) -> dict[str, Any]:
    """The envelope fields of ``value`` for the query columns; empty when it is not an event.

    Lenient on purpose: an event is any JSON object with a string ``event_id`` and ``type``,
    and each other field is kept when it has the right shape. Full validation is the
    agents' job; the archive must take every record as it is, so nothing a record holds
    can make this raise (the parser bounds depth and number size; anything else that goes
    wrong leaves the columns null).
    """
    if value is None or len(value) > max_bytes:
        return {}
    try:
        return _parsed_fields(value)
    except Exception:  # noqa: BLE001 - a hostile record: archived, columns null
        return {}


def _parsed_fields(value: bytes) -> dict[str, Any]:
    try:
        data = pydantic_core.from_json(value)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    fields: dict[str, Any] = {name: _text(data.get(name)) for name in _STRING_FIELDS}
    if fields["event_id"] is None or fields["type"] is None:
        return {}
    fields["occurred_at"] = _event_time(data.get("occurred_at"))
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and 0 <= version < 2**31:
        fields["schema_version"] = version
    return fields


def _table(records: Sequence[ConsumerRecord], max_event_bytes: int) -> pa.Table:
    parsed = [_event_fields(record.value, max_event_bytes) for record in records]
    columns: dict[str, list[Any]] = {
        "topic": [record.topic for record in records],
        "partition": [record.partition for record in records],
        "offset": [record.offset for record in records],
        "timestamp": [_timestamp_ms(record) for record in records],
        "key": [record.key for record in records],
        "value": [record.value for record in records],
    }
    for name in (*_STRING_FIELDS, "occurred_at", "schema_version"):
        columns[name] = [fields.get(name) for fields in parsed]
    columns["headers"] = [_headers(record) for record in records]
    return pa.Table.from_pydict(columns, schema=SCHEMA)


def _headers(record: ConsumerRecord) -> list[dict[str, Any]]:
    """A record's headers as the archive stores them; a header key Parquet cannot hold as
    text (not UTF-8) is kept with its undecodable bytes replaced, never a failed write."""
    kept = []
    for key, value in record.headers or ():
        text = key if isinstance(key, str) else bytes(key).decode("utf-8", "replace")
        if _text(text) is None:
            text = text.encode("utf-8", "replace").decode("utf-8")
        kept.append({"key": text, "value": None if value is None else bytes(value)})
    return kept


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_file(
    directory: Path,
    day: str,
    records: Sequence[ConsumerRecord],
    max_bytes: int,
    erasures: ArchiveErasures | None = None,
) -> None:
    """Write one file of a contiguous run of one partition on one day: temp name, fsync,
    rename, so the file is either whole or absent. Records ``erasures`` cover are written
    blanked: their bytes never reach the disk."""
    first, last = records[0], records[-1]
    folder = directory / f"topic={first.topic}" / f"date={day}"
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        # The new directory entries must survive a crash too, or the file would vanish.
        for parent in (folder.parent, directory):
            _fsync_directory(parent)
    name = f"part-{first.partition:04d}-{first.offset:020d}-{last.offset:020d}.parquet"
    table = _table(records, max_bytes)
    if erasures:
        table, _ = erasures.blank(table)
    _replace_file(folder / name, table, "tmp")


def _write_partition(
    directory: Path,
    records: Sequence[ConsumerRecord],
    max_event_bytes: int,
    erasures: ArchiveErasures | None = None,
) -> None:
    """Write one partition's records (offset order) as one file per run of one day.

    Runs, not one file per day: a file then always covers a contiguous range, and files are
    written in offset order, so after a crash the files on disk are a prefix of the batch
    and the next start resumes after the last of them.
    """
    for day, run in itertools.groupby(records, key=_day):
        _write_file(directory, day, list(run), max_event_bytes, erasures)


def _write_batch(
    directory: Path,
    batch: Mapping[TopicPartition, Sequence[ConsumerRecord]],
    max_bytes: int,
    erasures: ArchiveErasures | None = None,
    newly_erased: ArchiveErasures | None = None,
) -> None:
    """Write a batch, blanking what ``erasures`` cover; first, when the batch brings
    erasures (``newly_erased``), blank what they cover in the files already written.

    In that order: once the erasure record is on disk its erasure is applied, so a sink
    restarting from the files never has to apply it again.
    """
    if newly_erased:
        newly_erased.blank_files(directory)
    for records in batch.values():
        if records:
            _write_partition(directory, records, max_bytes, erasures)


def _write_group_offsets(directory: Path, snapshot: GroupOffsets) -> None:
    """Replace the group's snapshot file whole: temp name, fsync, rename."""
    path = _group_offsets_path(directory, snapshot.group_id)
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        _fsync_directory(directory)
    staging = path.with_name(f".{path.name}.tmp")
    with staging.open("w", encoding="utf-8") as handle:
        handle.write(snapshot.to_json())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, path)
    _fsync_directory(path.parent)


def _remove_staging(directory: Path) -> None:
    """Delete temporary files a crash left behind (never a finished file)."""
    for stale in directory.glob("topic=*/date=*/.part-*.parquet.tmp"):
        stale.unlink(missing_ok=True)
    if directory.is_dir():
        # Under the rewrite lock: an erasure blanking files right now owns its temp files.
        with _rewrite_lock(directory):
            for stale in directory.glob("topic=*/date=*/.part-*.parquet.erasing"):
                stale.unlink(missing_ok=True)


# --- the broker side ------------------------------------------------------------------------


async def _existing_partitions(
    settings: Settings, topics: Sequence[str]
) -> dict[str, list[int]]:
    """Partitions of those of ``topics`` that exist on the broker.

    Lists every topic instead of asking for these by name: a request by name would make a
    broker with topic auto-creation (Tansu does it) create a missing topic with its default
    partition count, and ``ensure_topics`` would then refuse it.
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.broker, enable_auto_commit=False)
    await consumer.start()
    try:
        existing = await consumer.topics()
        return {
            topic: sorted(consumer.partitions_for_topic(topic) or ())
            for topic in topics
            if topic in existing
        }
    finally:
        await consumer.stop()


async def _log_ends(
    settings: Settings, wanted: Sequence[TopicPartition]
) -> dict[TopicPartition, int]:
    """The exact log end of each of ``wanted``; 0 for a partition that does not exist."""
    existing = await _existing_partitions(settings, sorted({tp.topic for tp in wanted}))
    present = [tp for tp in wanted if tp.partition in existing.get(tp.topic, ())]
    ends = await true_end_offsets(settings.broker, present)
    return {tp: ends.get(tp, 0) for tp in wanted}


async def log_shortfalls(
    settings: Settings, positions: Mapping[tuple[str, int], int]
) -> list[ArchivePastLog]:
    """The partitions whose log on the broker ends before ``positions`` (the log is short).

    Parameters
    ----------
    settings
        The broker to ask.
    positions
        Next offset per (topic, partition) that something derived from the log already has,
        e.g. :func:`archive_positions` of the live archive.

    Returns
    -------
    list of ArchivePastLog
        Empty when the log holds every position; sorted by topic and partition. A missing
        topic counts as an empty log (and is not created by asking).

    Examples
    --------
    >>> shortfalls = await log_shortfalls(settings, archive_positions(directory))  # doctest: +SKIP
    >>> for shortfall in shortfalls:  # doctest: +SKIP
    ...     print(shortfall.explain())
    """
    wanted = [TopicPartition(t, p) for (t, p), position in positions.items() if position > 0]
    ends = await _log_ends(settings, wanted)
    return sorted(
        (
            ArchivePastLog(tp.topic, tp.partition, positions[(tp.topic, tp.partition)], ends[tp])
            for tp in wanted
            if positions[(tp.topic, tp.partition)] > ends[tp]
        ),
        key=lambda s: (s.topic, s.partition),
    )


def _diverged(tp: TopicPartition, last: _Last) -> str:
    return (
        f"{tp.topic}[{tp.partition}]: the record at offset {last.offset} differs from the "
        "archived one: the broker's log was replaced (the embedded broker keeps it in memory "
        "only, so a restart starts a new log, and this one has grown past the archive). This "
        "partition is not archived, which would mix two different logs. To recover, stop the "
        "workers and the broker, start an empty broker, run `memstream restore`, then "
        "`memstream replay --projection all`; records written to the new log are not archived."
    )


# --- the live sink --------------------------------------------------------------------------


async def run_archive_sink(
    settings: Settings,
    stop: asyncio.Event | None = None,
    *,
    log_intact: Callable[[], Awaitable[bool]] | None = None,
) -> None:
    """Archive every record of every archived topic to Parquet until cancelled (or ``stop``).

    A plain consumer with no consumer group: it reads every partition and resumes after the
    last archived offset of each (:func:`archive_positions`), so it needs no committed
    offsets and a crash never loses or doubles a record. A batch is written once
    ``settings.archive_batch_size`` records are buffered or ``settings.archive_flush_s`` after
    the first of them; on ``stop`` the buffer is written first. Between batches it checks the
    live pointer and, when a replay swapped a rebuilt archive in, continues in that one.

    It starts once the memstream topics exist; the sessions changelog, which the worker's
    Faust app creates, is looked for every ``archive_flush_s`` until it exists. As often, it
    reads the offsets the workers' consumer group has committed and, when they changed, keeps
    them as ``group_offsets/<group id>.json`` (:class:`GroupOffsets`) once the archive holds
    every partition up to where its log ended after the read. So the archive always holds
    what the group had processed by then, changelog writes included, and a restore that
    commits those offsets leaves a worker where a crash at that moment would.

    A partition whose log is shorter than the archive, or no longer holds the last archived
    record as archived, means the broker lost its log: it is reported as an error and left
    alone until the sink restarts, never archived again from offset 0 (and no group offsets
    are kept meanwhile: they would be offsets in another log). ``log_intact`` is asked after
    every fetch (:meth:`memstream.streams.runtime.logid.LogWatch.verifier`): once the broker's log
    is not the archived one, nothing more is archived (``memstream restore`` keeps what the
    new log received and appends it after the archive).
    """
    # Imported here: the projector module loads LanceDB, which restore and rebuild never need.
    from memstream.streams.projector.memories import WriterLock

    stop = stop or asyncio.Event()
    lock = WriterLock(settings.archive_dir / ".sink.lock")
    while not lock.try_acquire():
        log.info("archive: another process writes %s; waiting", settings.archive_dir)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=5)
        if stop.is_set():
            return
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker,
        enable_auto_commit=False,
        # Never jump anywhere on its own: an out-of-range position means the log changed.
        auto_offset_reset="none",
    )
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.broker, request_timeout_ms=_ADMIN_TIMEOUT_MS
    )
    try:
        await consumer.start()
        await admin.start()
        topics = archived_topics(settings)
        # The memstream topics are created before the worker starts; the changelog later.
        required, optional = topics[:-1], topics[-1:]
        partitions = await _wait_for_partitions(consumer, required, stop)
        sink = _ArchiveSink(settings, consumer, admin, partitions, optional, log_intact)
        while not stop.is_set():
            await sink.open_live()
            try:
                await sink.run(stop)
            except asyncio.CancelledError:
                # A worker stops its tasks by cancelling them: keep what was read, so a
                # clean stop loses nothing (a crash only means reading it again).
                await sink.flush_unless_swapped()
                raise
    finally:
        await consumer.stop()
        await admin.close()
        lock.release()


async def _wait_for_partitions(
    consumer: AIOKafkaConsumer, topics: Sequence[str], stop: asyncio.Event
) -> list[TopicPartition]:
    """Every partition of ``topics``, once they all exist (the worker creates them)."""
    while not stop.is_set():
        found = {topic: consumer.partitions_for_topic(topic) for topic in topics}
        if all(found.values()):
            return [TopicPartition(t, p) for t in topics for p in sorted(found[t] or ())]
        # An update of all topics: asking for these by name could auto-create them.
        await consumer._client.force_metadata_update()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.5)
    return []


class _ArchiveSink:
    """The sink's state between batches: where each partition stands, and the buffer."""

    def __init__(
        self,
        settings: Settings,
        consumer: AIOKafkaConsumer,
        admin: AIOKafkaAdminClient,
        partitions: list[TopicPartition],
        awaited: Sequence[str],
        log_intact: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.settings = settings
        self.log_intact = log_intact
        self.consumer = consumer
        self.admin = admin
        self.partitions = partitions
        #: Topics to archive once they exist.
        self.awaited = list(awaited)
        self.name = ARCHIVE
        self.directory = settings.archive_dir / ARCHIVE
        #: Next offset to take per partition: archived, or buffered to be.
        self.read_to: dict[TopicPartition, int] = {}
        #: The last archived record of a resumed partition, until the log shows it again.
        self.expected: dict[TopicPartition, _Last] = {}
        #: Partitions not archived until the sink restarts (their log is not the archived one).
        self.lost: set[TopicPartition] = set()
        self.buffer: dict[TopicPartition, list[ConsumerRecord]] = {}
        self.buffered = 0
        self.first_buffered_at: float | None = None
        self.group_id = worker_group_id(settings)
        #: The group offsets snapshot in ``directory``.
        self.group_offsets: GroupOffsets | None = None
        #: Newer group offsets, kept once every partition is archived up to these ends.
        self.pending_group_offsets: tuple[GroupOffsets, dict[TopicPartition, int]] | None = None
        self.group_offsets_failing = False
        #: Every erasure in the archive and the buffer: what the sink blanks as it writes.
        self.erasures = ArchiveErasures(settings)
        #: Users whose erasure the buffer brought: blanked in the written files at the flush.
        self.newly_erased: set[str] = set()

    async def open_live(self) -> None:
        """(Re)start on the live archive directory: positions, log checks, seeks."""
        self.name = live_name(self.settings.archive_dir, ARCHIVE, ARCHIVE)
        self.directory = self.settings.archive_dir / self.name
        await asyncio.to_thread(_remove_staging, self.directory)
        positions = await asyncio.to_thread(archive_positions, self.directory)
        shortfalls = await log_shortfalls(self.settings, positions)
        for shortfall in shortfalls:
            log.error("archive: %s", shortfall.explain())
        short = {TopicPartition(s.topic, s.partition) for s in shortfalls}
        starts = {
            tp: positions.get((tp.topic, tp.partition), 0)
            for tp in self.partitions
            if tp not in short
        }
        self.expected = await asyncio.to_thread(_last_archived, self.directory, starts)
        self.read_to = starts
        self.lost = short & set(self.partitions)
        self.buffer = {}
        self.buffered = 0
        self.first_buffered_at = None
        try:
            self.group_offsets = await asyncio.to_thread(
                read_group_offsets, self.directory, self.group_id
            )
        except ArchiveError as exc:
            log.error("archive: %s; writing a new one", exc)
            self.group_offsets = None
        self.pending_group_offsets = None
        # The erasures already archived keep applying to what is archived from now on (a
        # record of an erased user can arrive on another topic after its erasure record).
        self.erasures = ArchiveErasures(self.settings)
        await asyncio.to_thread(self.erasures.load, self.directory)
        self.newly_erased = set()
        self.consumer.assign(list(starts))
        for tp, position in starts.items():
            # From the last archived record, to check the log still holds it as archived.
            self.consumer.seek(tp, position - 1 if tp in self.expected else position)
        log.info("archive: writing %s from %d partitions", self.directory, len(starts))

    async def run(self, stop: asyncio.Event) -> None:
        """Archive until ``stop`` is set (writing the buffer first), until a replay swaps the
        live archive (dropping the buffer: the new archive has its own positions), or until
        an awaited topic appears (writing the buffer, to start again with it)."""
        wait_s = min(self.settings.archive_flush_s, 0.5)
        next_check = time.monotonic() + self.settings.archive_flush_s
        while not stop.is_set():
            for tp, records in (await self._fetch(wait_s)).items():
                self._take(tp, records)
            self._check_highwaters()
            now = time.monotonic()
            due = self.buffered >= self.settings.archive_batch_size or (
                self.first_buffered_at is not None
                and now - self.first_buffered_at >= self.settings.archive_flush_s
            )
            if (due or now >= next_check) and self._swapped():
                return
            if now >= next_check:
                next_check = now + self.settings.archive_flush_s
                if await self._awaited_topic_appeared():
                    await self._flush()
                    return
                await self._read_group_offsets()
            if due:
                await self._flush()
        await self.flush_unless_swapped()

    async def flush_unless_swapped(self) -> None:
        """Write the buffer, unless a replay swapped the live archive meanwhile (the new one
        has its own positions, which the buffer may not continue)."""
        if not self._swapped():
            await self._flush()

    async def _fetch(self, wait_s: float) -> dict[TopicPartition, list[ConsumerRecord]]:
        room = max(self.settings.archive_batch_size - self.buffered, 1)
        try:
            fetched: dict[TopicPartition, list[ConsumerRecord]] = await self.consumer.getmany(
                timeout_ms=int(wait_s * 1000), max_records=room
            )
        except kafka_errors.OffsetOutOfRangeError as exc:
            # Apache Kafka answers a position past the log end (or below a log start that
            # retention moved) this way; Tansu answers with a smaller high watermark.
            await self._out_of_range(list(dict(exc.args[0])))
            return {}
        if fetched and self.log_intact is not None and not await self.log_intact():
            for tp in list(self.read_to):
                self._lose(tp, "the broker's log is not the archived one (it lost its log)")
            return {}
        return fetched

    async def _out_of_range(self, partitions: list[TopicPartition]) -> None:
        ends = await _log_ends(self.settings, partitions)
        for tp in partitions:
            position = self.read_to[tp]
            if position > ends[tp]:
                self._lose(tp, ArchivePastLog(tp.topic, tp.partition, position, ends[tp]).explain())
            else:
                self._lose(
                    tp,
                    f"{tp.topic}[{tp.partition}]: the broker no longer holds offset {position} "
                    "(its retention deleted it before it was archived), so the archive would "
                    "have a gap here. This partition is not archived until the sink restarts; "
                    "raise the topic's retention, then restart the worker.",
                )

    def _take(self, tp: TopicPartition, records: list[ConsumerRecord]) -> None:
        if tp in self.lost or tp not in self.read_to:
            return
        for record in records:
            last = self.expected.pop(tp, None)
            if last is not None and record.offset == last.offset:
                if not last.matches(record):
                    self._lose(tp, _diverged(tp, last))
                    return
                continue
            if record.offset < self.read_to[tp]:
                continue
            self.buffer.setdefault(tp, []).append(record)
            self.read_to[tp] = record.offset + 1
            self.buffered += 1
            if self.first_buffered_at is None:
                self.first_buffered_at = time.monotonic()
            erased = self.erasures.note(record)
            if erased is not None:
                # Applied at the flush: to the buffered records as they are written, and to
                # the files written before, which may hold the user's earlier records.
                log.info("archive: a user_erased record at %s[%d]@%d", tp.topic, tp.partition, record.offset)
                self.newly_erased.add(erased)

    def _check_highwaters(self) -> None:
        """A log end below what was already read: the broker restarted with an empty log."""
        for tp, position in self.read_to.items():
            highwater = self.consumer.highwater(tp)
            if tp not in self.lost and highwater is not None and highwater < position:
                self._lose(tp, ArchivePastLog(tp.topic, tp.partition, position, highwater).explain())

    def _lose(self, tp: TopicPartition, reason: str) -> None:
        # Records already buffered came from the old log and are still archived.
        log.error("archive: %s", reason)
        self.lost.add(tp)
        self.expected.pop(tp, None)
        self.consumer.pause(tp)

    def _swapped(self) -> bool:
        name = live_name(self.settings.archive_dir, ARCHIVE, ARCHIVE)
        if name == self.name:
            return False
        log.info("archive: a replay swapped in %s; continuing there", name)
        return True

    async def _awaited_topic_appeared(self) -> bool:
        """Whether an awaited topic exists now; its partitions are then added."""
        if not self.awaited:
            return False
        try:
            # Listing every topic: asking for these by name could auto-create them.
            existing = set(await self.admin.list_topics())
            appeared = [topic for topic in self.awaited if topic in existing]
            described = await self.admin.describe_topics(appeared) if appeared else []
        except kafka_errors.KafkaError as exc:
            log.warning("archive: could not list the broker's topics: %r", exc)
            return False
        added = False
        for description in described:
            numbers = sorted(p["partition"] for p in description["partitions"])
            if description["error_code"] or not numbers:
                continue  # still being created
            topic = description["topic"]
            self.awaited.remove(topic)
            self.partitions += [TopicPartition(topic, number) for number in numbers]
            log.info("archive: %s exists now; archiving its %d partitions", topic, len(numbers))
            added = True
        return added

    async def _read_group_offsets(self) -> None:
        """Read the group's committed offsets; when they changed, keep them pending until the
        archive reaches the log ends taken after the read (:meth:`_keep_group_offsets`)."""
        if self.pending_group_offsets is not None or self.lost or not self.read_to:
            return
        taken_at = datetime.now(UTC)
        try:
            # With the partitions named: Tansu cannot answer the "all partitions" form.
            found = await self.admin.list_consumer_group_offsets(
                self.group_id, partitions=list(self.read_to)
            )
            committed = {
                (tp.topic, tp.partition): meta.offset
                for tp, meta in found.items()
                if tp in self.read_to and meta.offset >= 0
            }
            if not committed or (
                self.group_offsets is not None and committed == dict(self.group_offsets.offsets)
            ):
                self._group_offsets_readable()
                return
            ends = await true_end_offsets(self.settings.broker, list(self.read_to))
        except kafka_errors.KafkaError as exc:
            if not self.group_offsets_failing:
                log.warning(
                    "archive: cannot read the committed offsets of group %s (%r); a restore "
                    "of this archive will start workers from older offsets",
                    self.group_id,
                    exc,
                )
            self.group_offsets_failing = True
            return
        self._group_offsets_readable()
        self.pending_group_offsets = (GroupOffsets(self.group_id, taken_at, committed), ends)
        await self._keep_group_offsets()

    def _group_offsets_readable(self) -> None:
        if self.group_offsets_failing:
            log.info("archive: the committed offsets of group %s are readable again", self.group_id)
        self.group_offsets_failing = False

    def _archived_to(self, tp: TopicPartition) -> int:
        buffered = self.buffer.get(tp)
        return buffered[0].offset if buffered else self.read_to[tp]

    async def _keep_group_offsets(self) -> None:
        """Write the pending group offsets once every partition is archived up to the log end
        read after them: then the archive holds all the group had processed by then."""
        if self.pending_group_offsets is None:
            return
        snapshot, ends = self.pending_group_offsets
        if self.lost or any(self._archived_to(tp) < end for tp, end in ends.items()):
            return
        await asyncio.to_thread(_write_group_offsets, self.directory, snapshot)
        self.group_offsets = snapshot
        self.pending_group_offsets = None

    async def _flush(self) -> None:
        if self.buffered:
            batch = dict(sorted(self.buffer.items()))
            newly = self.erasures.only(self.newly_erased) if self.newly_erased else None
            write = asyncio.ensure_future(
                asyncio.to_thread(
                    _write_batch,
                    self.directory,
                    batch,
                    self.settings.max_event_bytes,
                    self.erasures.copy(),
                    newly,
                )
            )
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                # A stop cancels the task, not the thread: let the write land before anything
                # else (the final flush of a clean stop) writes the same files.
                await asyncio.wait({write})
                if write.exception() is None:
                    self._written()
                raise
            self._written()
        await self._keep_group_offsets()

    def _written(self) -> None:
        self.buffer = {}
        self.buffered = 0
        self.first_buffered_at = None
        self.newly_erased = set()


# --- rebuilding from the log ----------------------------------------------------------------


def _until_ms(until: datetime | None) -> int | None:
    """``until`` in epoch milliseconds, rounded down (a naive time is taken as UTC)."""
    if until is None:
        return None
    aware = until if until.tzinfo is not None else until.replace(tzinfo=UTC)
    return (aware - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


async def rebuild_archive(
    settings: Settings,
    target: Path,
    *,
    until: datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Archive every archived topic (:func:`archived_topics`) from offset 0 to its current
    end into ``target``. It keeps no group offsets: the live sink does.

    Erasures apply as the live sink applies them (:class:`ArchiveErasures`): a record of an
    erased user that the log held before the ``user_erased`` event is written blanked, or
    blanked once the rebuild has read the erasure, so the rebuilt archive holds what the
    live one does after ``memstream erase``.

    Parameters
    ----------
    settings
        Broker, topics and ``archive_batch_size`` (records per write).
    target
        A fresh directory (created if missing). If it already holds archive files, the
        rebuild continues after them, once it has checked the log still holds their last
        records.
    until
        Keep only records whose broker timestamp is at or before this time (naive = UTC);
        each partition stops at its first later record. Erasures later in the log still
        apply: what was erased stays erased in a past archive too.
    progress
        Called now and then with (records done, records in all).

    Returns
    -------
    int
        Records written by this call.

    Raises
    ------
    ArchiveError
        If ``target`` holds records the log does not have (another log's archive).
    TimeoutError
        If the broker sends nothing for 30 s while records remain.

    Examples
    --------
    >>> await rebuild_archive(settings, settings.archive_dir / "archive-rebuilt")  # doctest: +SKIP
    1532
    """
    target.mkdir(parents=True, exist_ok=True)
    await asyncio.to_thread(_remove_staging, target)
    positions = await asyncio.to_thread(archive_positions, target)
    shortfalls = await log_shortfalls(settings, positions)
    if shortfalls:
        raise ArchiveError(
            f"{target} already holds records the broker's log does not have:\n"
            + "\n".join(s.explain() for s in shortfalls)
        )
    existing = await _existing_partitions(settings, archived_topics(settings))
    partitions = [TopicPartition(t, p) for t, numbers in existing.items() for p in numbers]
    ends = await true_end_offsets(settings.broker, partitions)
    starts = {tp: positions.get((tp.topic, tp.partition), 0) for tp in partitions}
    erasures = ArchiveErasures(settings)
    await asyncio.to_thread(erasures.load, target)
    reader = _Rebuild(settings, target, starts, ends, _until_ms(until), progress, erasures)
    expected = await asyncio.to_thread(_last_archived, target, reader.read_to)
    written = await reader.run(expected)
    # Records written before the rebuild read their erasure (topics are read side by side,
    # and an earlier, interrupted run may have stopped before this pass): one pass over the
    # files with every erasure the log holds.
    await asyncio.to_thread(erasures.blank_files, target)
    return written


class _Rebuild:
    """One bounded read of every partition into an archive directory."""

    def __init__(
        self,
        settings: Settings,
        target: Path,
        starts: Mapping[TopicPartition, int],
        ends: Mapping[TopicPartition, int],
        until_ms: int | None,
        progress: Callable[[int, int], None] | None,
        erasures: ArchiveErasures,
    ) -> None:
        self.settings = settings
        self.target = target
        self.erasures = erasures
        #: Partitions past ``until``: read on for erasures only.
        self.cut: set[TopicPartition] = set()
        self.starts = dict(starts)
        self.ends = dict(ends)
        self.until_ms = until_ms
        self.progress = progress
        self.read_to = {tp: start for tp, start in starts.items() if start < ends[tp]}
        self.total = sum(self.ends[tp] - start for tp, start in self.read_to.items())
        self.finished: set[TopicPartition] = set()
        self.buffer: dict[TopicPartition, list[ConsumerRecord]] = {}
        self.buffered = 0
        self.written = 0

    def _done(self) -> int:
        return sum(
            (self.ends[tp] if tp in self.finished else position) - self.starts[tp]
            for tp, position in self.read_to.items()
        )

    def _report(self) -> None:
        if self.progress is not None:
            self.progress(self._done(), self.total)

    async def run(self, expected: dict[TopicPartition, _Last]) -> int:
        self._report()
        if not self.read_to:
            return 0
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.broker,
            enable_auto_commit=False,
            auto_offset_reset="none",
        )
        await consumer.start()
        try:
            consumer.assign(list(self.read_to))
            for tp, position in self.read_to.items():
                consumer.seek(tp, position - 1 if tp in expected else position)
            stalled_at = time.monotonic()
            while len(self.finished) < len(self.read_to):
                fetched = await consumer.getmany(
                    timeout_ms=500, max_records=self.settings.archive_batch_size
                )
                if not fetched and time.monotonic() - stalled_at > 30:
                    raise TimeoutError("the broker sent nothing for 30 s while rebuilding")
                if fetched:
                    stalled_at = time.monotonic()
                for tp, records in fetched.items():
                    self._take(tp, records, expected)
                    if tp in self.finished:
                        consumer.pause(tp)
                if self.buffered >= self.settings.archive_batch_size:
                    await self._flush()
                if fetched:
                    self._report()
            await self._flush()
        finally:
            await consumer.stop()
        self._report()
        return self.written

    def _take(
        self,
        tp: TopicPartition,
        records: list[ConsumerRecord],
        expected: dict[TopicPartition, _Last],
    ) -> None:
        if tp in self.finished:
            return
        for record in records:
            last = expected.pop(tp, None)
            if last is not None and record.offset == last.offset:
                if not last.matches(record):
                    raise ArchiveError(
                        f"{self.target} is not an archive of this log: " + _diverged(tp, last)
                    )
                continue
            if record.offset < self.read_to[tp]:
                continue
            timestamp = _timestamp_ms(record)
            if record.offset >= self.ends[tp]:
                self.finished.add(tp)
                return
            if tp in self.cut or (
                self.until_ms is not None and timestamp is not None and timestamp > self.until_ms
            ):
                # Past ``until``: not archived. An erasure later in the log still applies to
                # the archive as it stood then, so the partitions that carry erasures are
                # read on to their end for them.
                if tp.topic not in self.erasures.ledger.topics:
                    self.finished.add(tp)
                    return
                self.cut.add(tp)
                self.erasures.note(record)
                self.read_to[tp] = record.offset + 1
                continue
            self.buffer.setdefault(tp, []).append(record)
            self.read_to[tp] = record.offset + 1
            self.buffered += 1
            self.erasures.note(record)
        if self.read_to[tp] >= self.ends[tp]:
            self.finished.add(tp)

    async def _flush(self) -> None:
        if not self.buffered:
            return
        batch = dict(sorted(self.buffer.items()))
        await asyncio.to_thread(
            _write_batch, self.target, batch, self.settings.max_event_bytes, self.erasures.copy()
        )
        self.written += self.buffered
        self.buffer = {}
        self.buffered = 0


# --- restoring a broker ---------------------------------------------------------------------


async def restore(
    settings: Settings, source: Path, *, progress: Callable[[int, int], None] | None = None
) -> RestoreReport:
    """Republish the archive in ``source`` into the (empty) topics of ``settings.broker``.

    Every record goes to its own topic and partition, in offset order, with its key, value
    bytes, headers and timestamp, acknowledged by the broker (``acks="all"``); so an archive
    that is contiguous from offset 0 gives back the same offsets. The sessions changelog is
    restored with them (created compacted, with the memstream topics' partition count), and
    the archive's snapshot of the workers' consumer group offsets (:class:`GroupOffsets`) is
    committed for that group, each offset moved past the archive's gaps and capped at the
    restored log end. A worker started afterwards then carries on from those offsets with its
    session table recovered, as after a crash; the projections on this machine continue from
    their own positions (elsewhere, rebuild them: ``memstream replay --projection all``).

    Parameters
    ----------
    settings
        The broker to restore into, and the topics (prefix, partition count).
    source
        An archive directory, e.g. :func:`live_archive_dir`.
    progress
        Called now and then with (records restored, records in all).

    Returns
    -------
    RestoreReport
        Records per topic, partitions written, the archive's gaps (a gap means the records
        after it got lower offsets than in the original log), and the committed offsets.

    Raises
    ------
    RestoreRefused
        If any archived topic partition on the broker already holds records (republishing
        onto a live log would duplicate it), or the workers' consumer group has members.
    ArchiveError
        If the archive names topics or partitions ``settings`` do not have, overlaps itself,
        the broker's log does not end where the restore put it, or it refuses the offsets.

    Examples
    --------
    >>> report = await restore(settings, live_archive_dir(settings))  # doctest: +SKIP
    >>> print(report.summary())  # doctest: +SKIP
    restored 1532 records into 20 partitions in 0.4 s
    """
    if not source.is_dir():
        raise ArchiveError(f"no archive at {source}")
    started = time.monotonic()
    files = await asyncio.to_thread(archive_files, source)
    topics = archived_topics(settings)
    foreign = sorted({file.topic for file in files} - set(topics))
    if foreign:
        raise ArchiveError(
            f"the archive holds topics {', '.join(foreign)}, which are not memstream topics "
            f"under the prefix {settings.topic_prefix!r}; set MEMSTREAM_TOPIC_PREFIX to the "
            "archive's"
        )
    beyond = sorted({(f.topic, f.partition) for f in files if f.partition >= settings.partitions})
    if beyond:
        raise ArchiveError(
            f"the archive holds partitions {beyond} but topics have {settings.partitions} "
            "partitions; set MEMSTREAM_PARTITIONS to the archive's"
        )
    group_id = worker_group_id(settings)
    snapshot = await asyncio.to_thread(read_group_offsets, source, group_id)
    await ensure_topics(settings)
    await _ensure_changelog(settings, topics[-1])
    partitions = [TopicPartition(t, p) for t in topics for p in range(settings.partitions)]
    ends = await true_end_offsets(settings.broker, partitions)
    busy = [f"{tp.topic}[{tp.partition}] ({end} records)" for tp, end in ends.items() if end]
    kept_files = sorted(settings.archive_dir.glob("kept-*.parquet"))
    if busy:
        from memstream.streams.runtime.logid import read_log_id

        broker_log = await read_log_id(settings)
        archived_log = await asyncio.to_thread(archived_log_id, files, settings)
        if archived_log is None or broker_log == archived_log:
            if kept_files and broker_log == archived_log:
                # An earlier restore put the archive back and stopped before appending.
                await _refuse_active_group(settings, group_id)
                appended = await _append_kept(settings, kept_files)
                return RestoreReport(
                    records={}, partitions=0, gaps=(), elapsed_s=time.monotonic() - started,
                    group_id=group_id, appended=appended,
                )
            raise RestoreRefused(
                "refusing to restore: these partitions already hold records of the archived "
                f"log, and republishing the archive onto them would duplicate it: "
                f"{', '.join(busy)}. Restore into an empty broker (a fresh embedded broker, or "
                "delete the memstream topics first)."
            )
        # The broker lost the archived log and producers have written to a new one since:
        # keep their records (durably, first), clear the topics, restore, then append them.
        await _refuse_active_group(settings, group_id)
        kept_files = [*kept_files, await _keep_new_log(settings)]
        await _delete_topics(settings, topics)
        await ensure_topics(settings)
        await _ensure_changelog(settings, topics[-1])
    elif snapshot is not None:
        await _refuse_active_group(settings, group_id)
    by_partition: dict[TopicPartition, list[ArchiveFile]] = {}
    for file in files:
        by_partition.setdefault(TopicPartition(file.topic, file.partition), []).append(file)
    counter = _Progress(progress, await asyncio.to_thread(_count_rows, files))
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.broker,
        acks="all",
        linger_ms=5,
        max_batch_size=1 << 20,
        max_request_size=_RESTORE_REQUEST_BYTES,
    )
    await producer.start()
    try:
        results = await asyncio.gather(
            *(_restore_partition(producer, tp, f, counter) for tp, f in by_partition.items())
        )
    finally:
        await producer.stop()
    restored = {tp: count for tp, (count, _) in zip(by_partition, results, strict=True)}
    after = await true_end_offsets(settings.broker, partitions)
    wrong = [
        f"{tp.topic}[{tp.partition}] ends at {after[tp]}, expected {restored.get(tp, 0)}"
        for tp in partitions
        if after[tp] != restored.get(tp, 0)
    ]
    if wrong:
        raise ArchiveError(
            "after the restore the log does not end where expected (did something else "
            f"write to it meanwhile?): {'; '.join(wrong)}"
        )
    records: dict[str, int] = {}
    for tp, count in restored.items():
        records[tp.topic] = records.get(tp.topic, 0) + count
    counter.finish()
    gaps = tuple(gap for _, partition_gaps in results for gap in partition_gaps)
    committed: dict[tuple[str, int], int] = {}
    lowered: dict[tuple[str, int], int] = {}
    if snapshot is not None:
        targets, lowered = _restored_group_offsets(snapshot, after, gaps)
        committed = await _commit_group_offsets(settings, group_id, targets)
    appended = await _append_kept(settings, kept_files) if kept_files else {}
    return RestoreReport(
        records=records,
        partitions=sum(1 for count in restored.values() if count),
        gaps=gaps,
        elapsed_s=time.monotonic() - started,
        group_id=group_id,
        group_offsets=committed,
        group_offsets_taken_at=None if snapshot is None else snapshot.taken_at,
        group_offsets_lowered=lowered,
        appended=appended,
    )


#: Event types on the memories topic that come from outside the workers (a user's delete,
#: an erasure, a forgetting policy run): kept from a new log. The rest of that topic, and
#: the consolidation topic, the dead letters and the changelog, are the workers' own output,
#: which they derive again from the kept chat records.
_KEPT_MEMORY_TYPES = frozenset({"memory_deleted", "memory_forgotten", "user_erased"})


def archived_log_id(files: Sequence[ArchiveFile], settings: Settings) -> str | None:
    """The id of the log the archive holds (its first record of the log's mark topic,
    see :mod:`memstream.streams.runtime.logid`); None for an archive written before logs had one."""
    from memstream.streams.runtime.logid import _parse_mark

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
    from memstream.streams.runtime.logreader import read_topic

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


async def _ensure_changelog(settings: Settings, topic: str) -> None:
    """Create the sessions changelog as the worker's Faust app would: compacted, with the
    partitions ``create_app`` gives the table (those of the chat topic)."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.broker, request_timeout_ms=_ADMIN_TIMEOUT_MS
    )
    await admin.start()
    try:
        new = NewTopic(
            topic, settings.partitions, 1, topic_configs={"cleanup.policy": "compact"}
        )
        response = await admin.create_topics([new])
        for name, error_code, *_ in response.topic_errors:
            error = kafka_errors.for_code(error_code)
            if error is kafka_errors.TopicAlreadyExistsError:
                (description,) = await admin.describe_topics([name])
                found = len(description["partitions"])
                if found != settings.partitions:
                    raise ArchiveError(
                        f"topic {name!r} exists with {found} partitions, but settings ask for "
                        f"{settings.partitions}"
                    )
            elif error is not kafka_errors.NoError:
                raise error(f"creating topic {name!r}")
    finally:
        await admin.close()


async def _refuse_active_group(settings: Settings, group_id: str) -> None:
    """Refuse before republishing anything when the group has members: the broker would
    refuse the offsets of a client outside the group (Tansu as Kafka do)."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.broker, request_timeout_ms=_ADMIN_TIMEOUT_MS
    )
    await admin.start()
    try:
        responses = await admin.describe_consumer_groups([group_id])
    except kafka_errors.KafkaError as exc:
        # Not knowing is no reason to refuse; committing will tell.
        log.warning("restore: could not describe consumer group %s: %r", group_id, exc)
        return
    finally:
        await admin.close()
    # DescribeGroups v0-v3: (error_code, group_id, state, protocol_type, protocol, members...)
    members = sum(len(group[5]) for response in responses for group in response.groups)
    if members:
        raise RestoreRefused(
            f"refusing to restore: consumer group {group_id!r} has {members} member(s) on the "
            "broker (a worker is running against it), so the broker would refuse the group's "
            "archived offsets. Stop the workers, then restore."
        )


def _restored_offset(offset: int, gaps: Sequence[Gap]) -> int:
    """Where original ``offset`` of a partition is after a restore with these ``gaps``.

    An offset inside a gap goes to the first record after it.

    Examples
    --------
    >>> gaps = [Gap("t", 0, 3, 5, 2), Gap("t", 0, 8, 9, 3)]
    >>> [_restored_offset(offset, gaps) for offset in (2, 3, 4, 5, 8, 9, 12)]
    [2, 3, 3, 3, 6, 6, 9]
    """
    restored = offset
    for gap in gaps:
        if offset >= gap.end:
            restored = offset - gap.shift
        elif offset > gap.start:
            return gap.start - (gap.shift - (gap.end - gap.start))
        else:
            break
    return restored


def _restored_group_offsets(
    snapshot: GroupOffsets, ends: Mapping[TopicPartition, int], gaps: Sequence[Gap]
) -> tuple[dict[TopicPartition, int], dict[tuple[str, int], int]]:
    """The snapshot's offsets moved past the ``gaps`` and capped at the restored ``ends``;
    and the snapshot's offsets that the cap lowered, by (topic, partition)."""
    targets: dict[TopicPartition, int] = {}
    lowered: dict[tuple[str, int], int] = {}
    for (topic, partition), offset in sorted(snapshot.offsets.items()):
        tp = TopicPartition(topic, partition)
        if tp not in ends:
            log.warning("restore: ignored the offset of %s[%d], not archived", topic, partition)
            continue
        moved = _restored_offset(offset, [g for g in gaps if (g.topic, g.partition) == tp])
        targets[tp] = min(moved, ends[tp])
        if moved > ends[tp]:
            lowered[(topic, partition)] = offset
            log.warning(
                "restore: %s[%d]: the group had committed %d, past the restored log; "
                "committing its end, %d",
                topic, partition, offset, ends[tp],
            )
    return targets, lowered


async def _commit_group_offsets(
    settings: Settings, group_id: str, offsets: Mapping[TopicPartition, int]
) -> dict[tuple[str, int], int]:
    """Commit ``offsets`` for ``group_id`` as a client outside the group, then read them
    back; return what the broker holds."""
    if not offsets:
        return {}
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker, group_id=group_id, enable_auto_commit=False
    )
    await consumer.start()
    try:
        # Assigned, never subscribed: the client commits without joining the group.
        consumer.assign(list(offsets))
        try:
            await consumer.commit(
                {tp: OffsetAndMetadata(offset, "") for tp, offset in offsets.items()}
            )
        except kafka_errors.CommitFailedError as exc:
            raise ArchiveError(
                f"the records are restored, but the offsets of consumer group {group_id!r} "
                f"were refused ({exc.args[-1]}): a worker joined the group meanwhile. Stop "
                "the workers and restore again into an empty broker."
            ) from exc
    finally:
        await consumer.stop()
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.broker, request_timeout_ms=_ADMIN_TIMEOUT_MS
    )
    await admin.start()
    try:
        found = await admin.list_consumer_group_offsets(group_id, partitions=list(offsets))
    finally:
        await admin.close()
    held = {tp: meta.offset for tp, meta in found.items()}
    wrong = [f"{tp.topic}[{tp.partition}]" for tp, o in offsets.items() if held.get(tp) != o]
    if wrong:
        raise ArchiveError(
            f"the broker does not hold the committed offsets of group {group_id!r} for "
            f"{', '.join(wrong)}"
        )
    return {(tp.topic, tp.partition): offset for tp, offset in sorted(offsets.items())}


def _count_rows(files: Sequence[ArchiveFile]) -> int:
    return sum(pq.read_metadata(file.path).num_rows for file in files)


class _Progress:
    """Shared record count of the partitions restoring at once."""

    def __init__(self, callback: Callable[[int, int], None] | None, total: int) -> None:
        self.callback = callback
        self.total = total
        self.done = 0
        if callback is not None:
            callback(0, total)

    def add(self, count: int) -> None:
        self.done += count
        if self.callback is not None:
            self.callback(self.done, self.total)

    def finish(self) -> None:
        if self.callback is not None and self.done != self.total:
            self.callback(self.done, self.total)


#: offset, timestamp (epoch ms), key, value, headers
_Row = tuple[int, int | None, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def _rows_to_restore(path: Path) -> list[_Row]:
    table = pq.ParquetFile(path).read(columns=["offset", "timestamp", "key", "value", "headers"])
    headers = [
        [(header["key"], header["value"]) for header in row or ()]
        for row in table.column("headers").to_pylist()
    ]
    return list(
        zip(
            table.column("offset").to_pylist(),
            table.column("timestamp").cast(pa.int64()).to_pylist(),
            table.column("key").to_pylist(),
            table.column("value").to_pylist(),
            headers,
            strict=True,
        )
    )


async def _restore_partition(
    producer: AIOKafkaProducer,
    tp: TopicPartition,
    files: Sequence[ArchiveFile],
    counter: _Progress,
) -> tuple[int, list[Gap]]:
    """Republish one partition's files in offset order; return the count and its gaps.

    aiokafka keeps one request in flight per broker and mutes a partition while its batch
    is in flight, so the records of a partition land in the order they are sent; each
    acknowledged offset is still checked against the expected one.
    """
    gaps: list[Gap] = []
    next_archived = 0
    restored = 0
    pending: list[tuple[asyncio.Future[Any], int]] = []

    async def settle() -> None:
        acks = await asyncio.gather(*(future for future, _ in pending))
        for metadata, (_, expected) in zip(acks, pending, strict=True):
            if metadata.offset != expected:
                raise ArchiveError(
                    f"{tp.topic}[{tp.partition}]: a restored record got offset "
                    f"{metadata.offset}, expected {expected}: something else writes to it"
                )
        counter.add(len(pending))
        pending.clear()

    for file in files:
        for offset, timestamp, key, value, headers in await asyncio.to_thread(
            _rows_to_restore, file.path
        ):
            if offset < next_archived:
                raise ArchiveError(
                    f"{tp.topic}[{tp.partition}]: offset {offset} is archived twice "
                    f"(again in {file.path.name}); the archive is damaged"
                )
            if offset > next_archived:
                shift = (gaps[-1].shift if gaps else 0) + offset - next_archived
                gaps.append(Gap(tp.topic, tp.partition, next_archived, offset, shift))
            future = await producer.send(
                tp.topic,
                value,
                key=key,
                partition=tp.partition,
                timestamp_ms=timestamp,
                headers=headers or None,
            )
            pending.append((future, restored))
            restored += 1
            next_archived = offset + 1
            if len(pending) >= _RESTORE_CHUNK:
                await settle()
    await settle()
    return restored, gaps
