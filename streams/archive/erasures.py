"""Erasures in the archive: which records an erasure covers, and blanking them in a table
about to be written or in the files already written."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from aiokafka import ConsumerRecord

from memstream.models.erasure import ErasureLedger, ErasureMark
from memstream.models.settings import Settings
from memstream.streams.archive.durable import _replace_file, _rewrite_lock
from memstream.streams.archive.layout import archive_files, archived_topics
from memstream.streams.archive.rows import _timestamp_ms
from memstream.streams.kafka.topics import Topics

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
