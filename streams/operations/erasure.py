"""``memstream erase --user U``: remove a user from every store, and prove it with a receipt.

The log is append-only, so erasure is crypto-shredding plus projection clean-up:

1. a :class:`~memstream.models.events.chat.UserErased` event goes to the chat topic (the session
   agent drops the user's sessions and writes tombstones) and to the memories topic (the
   projector deletes the user's rows and the table versions that still hold them); a replay
   meets the same event, so nothing comes back;
2. the user's key is destroyed, so every sealed copy in the log (chat events published
   through memstream, consolidation spans, extractions, memories, retrievals, dead letters,
   the sessions changelog) is ciphertext nobody can read;
3. the stores outside the worker are cleaned here: other LanceDB tables (replay shadows,
   previous tables, re-extractions) lose the user's rows and old versions; the Parquet
   archive's records of the user are blanked in place (offsets stay, so a restore still
   lines up); session snapshots lose the user's rows.

Which archived records an erasure covers is one rule (:mod:`memstream.models.erasure`):
the user's records that the log held before the ``user_erased`` event, by offset on the
partitions holding it and by broker timestamp elsewhere. The live archive sink and a rebuild
of the archive apply it when they read the event; this module applies it to the files that
are already written, so all three blank the same records.

The receipt counts what was removed where, each number from a count taken before the
erasure event went out and checked afterwards (see :func:`erase`). Plaintext can remain only
where memstream never sealed it: chat events a third-party producer published directly
(until the chat topic's retention), and dead letters of records that arrived before the user
had a key.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from memstream.models.erasure import ErasureMark
from memstream.models.events.chat import UserErased
from memstream.models.events.envelope import CODE_PATTERN
from memstream.models.settings import Settings
from memstream.streams.kafka.topics import Topics

log = logging.getLogger(__name__)

NO_SESSION = "-"


@dataclass
class ErasureReceipt:
    """What an erasure removed, store by store."""

    user_key: str
    erasure_id: str
    started_at: datetime
    removed: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: The notes that say a store still holds something of the user (also in ``notes``).
    left: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Whether every store was checked clean (no note says something is left)."""
        return not self.left

    def still_held(self, note: str) -> None:
        """Note that a store still holds something of the user: the erasure is incomplete."""
        self.notes.append(note)
        self.left.append(note)

    def render(self) -> str:
        """The receipt as printed by ``memstream erase``."""
        stamp = self.started_at.isoformat(timespec="seconds")
        lines = [f"erasure {self.erasure_id} of user sha256:{self.user_key[:16]}… at {stamp}"]
        width = max((len(name) for name in self.removed), default=10)
        lines += [f"  {name:<{width}}  {count}" for name, count in self.removed.items()]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


async def publish_erasure(
    settings: Settings, user_id: str, erasure_id: str, reason: str
) -> ErasureMark:
    """Publish ``UserErased`` to the chat and memories topics; return the erasure as the log
    holds it (the partition and offset of each record, and their broker timestamp).

    Both records carry one timestamp, taken now, so "before the erasure" means the same
    moment on every other topic.
    """
    from memstream.streams.kafka.publisher import KafkaPublisher
    from memstream.streams.keys.store import keystore_from_settings

    topics = Topics.from_settings(settings)
    event = UserErased(
        event_id=f"erase-{erasure_id}",
        user_id=user_id,
        session_id=NO_SESSION,
        occurred_at=datetime.now(UTC),
        erasure_id=erasure_id,
        reason=reason,
    )
    stamp = int(time.time() * 1000)
    mark = ErasureMark(user_id, erasure_id)
    # Not claiming the log: an erasure must reach whatever log holds the user's events.
    publisher = KafkaPublisher(settings, keystore_from_settings(settings), check=False, claim=False)
    try:
        for topic in (topics.chat, topics.memories):
            (sent,) = await publisher.publish(topic, [event], timestamp_ms=stamp)
            # A topic with LogAppendTime answers the broker's time, which is then the one
            # the log holds.
            broker = sent.timestamp_ms
            at = broker if broker is not None and broker >= 0 else stamp
            mark = mark.with_record(sent.topic, sent.partition, sent.offset, at)
    finally:
        await publisher.close()
    return mark


def _wait(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return check()


def erase_lancedb(settings: Settings, user_id: str, *, skip: str | None) -> dict[str, int]:
    """Remove the user from every memory table but those of the projection ``skip`` (the
    projectors', one table per partition), files and older versions included
    (:meth:`MemoryProjection.erase_user`); rows removed per table."""
    from memstream.projections.embedder import embedder_from_settings
    from memstream.projections.memories import (
        EmbeddingModelMismatch,
        MemoryProjection,
        ProjectionOutdated,
        ProjectionStore,
    )

    store = ProjectionStore.from_settings(settings)
    if not store.exists():
        return {}
    embedder = embedder_from_settings(settings)
    db = store.connect()
    removed: dict[str, int] = {}
    names: list[str] = []
    page_token: str | None = None
    while True:  # list_tables() is paginated
        page = db.list_tables(page_token=page_token)
        names += page.tables
        page_token = page.page_token
        if not page_token:
            break
    for name in names:
        if skip is not None and (name == skip or re.fullmatch(rf"{re.escape(skip)}-p\d+", name)):
            continue
        with warnings.catch_warnings():
            # Dropping every older version is the point: they still hold the user's rows.
            warnings.filterwarnings("ignore", message=".*cleanup_older_than.*")
            try:
                removed[name] = MemoryProjection(store, embedder, name).erase_user(user_id)
            except (ProjectionOutdated, EmbeddingModelMismatch):
                # A table of an older memstream or another model: it cannot be opened as a
                # projection, so it is dropped whole rather than kept with the user in it.
                db.drop_table(name)
                removed[f"{name} (dropped: unreadable by this version)"] = -1
    return removed


#: Per archive directory: per file, the offsets of records.
ArchiveRecords = dict[Path, dict[Path, list[int]]]


def archived_records_of(settings: Settings, user_id: str) -> ArchiveRecords:
    """Every record of ``user_id`` that is readable (not blanked) in any archive directory:
    what an erasure published now will blank (the log holds all of them before it)."""
    from memstream.streams.archive import ArchiveErasures, archive_directories

    # An erasure with no position and no time yet covers every record of its user.
    everything = ArchiveErasures(settings)
    everything.add(ErasureMark(user_id, "pending"))
    return {directory: everything.readable(directory) for directory in archive_directories(settings)}


def _blanked(path: Path, offsets: list[int]) -> int:
    """How many of the records at ``offsets`` of the archive file ``path`` are blank."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["offset", "key", "value"])
    table = table.filter(pc.is_in(table.column("offset"), value_set=pa.array(offsets, pa.int64())))
    blank = pc.and_(pc.is_null(table.column("key")), pc.is_null(table.column("value")))
    return int(pc.sum(blank).as_py() or 0)


def erase_archive(
    settings: Settings, mark: ErasureMark, before: ArchiveRecords
) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """Apply the erasure ``mark`` to every archive directory (the live one and replay
    shadows) and count the outcome against ``before`` (:func:`archived_records_of`, taken
    before the erasure was published).

    Returns
    -------
    tuple
        Per directory name: (records of ``before`` now blanked, files holding them); and
        per directory name: records the erasure covers that are still readable (none
        unless a directory could not be rewritten).
    """
    from memstream.streams.archive import ArchiveErasures, archive_directories, blank_erased

    erasures = ArchiveErasures(settings)
    erasures.add(mark)
    outcome: dict[str, tuple[int, int]] = {}
    readable: dict[str, int] = {}
    for directory in archive_directories(settings):
        blank_erased(settings, directory, mark)
        held = before.get(directory, {})
        counts = [_blanked(path, offsets) for path, offsets in held.items() if path.exists()]
        outcome[directory.name] = (sum(counts), sum(1 for count in counts if count))
        left = sum(len(offsets) for offsets in erasures.readable(directory).values())
        if left:
            readable[directory.name] = left
    return outcome, readable


def erase_session_snapshots(settings: Settings, user_id: str) -> int:
    """Drop the user's rows from every session snapshot; return the rows removed."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    base = settings.data_dir / "sessions"
    removed = 0
    if not base.exists():
        return 0
    for path in sorted(base.rglob("*.parquet")):
        table = pq.read_table(path)
        if "user_id" not in table.column_names:
            continue
        mask = pc.fill_null(pc.equal(table.column("user_id"), user_id), False)
        hits = int(pc.sum(mask).as_py() or 0)
        if hits:
            staging = path.with_name(f".{path.name}.erasing")
            pq.write_table(table.filter(pc.invert(mask)), staging)
            os.replace(staging, path)
            removed += hits
    return removed


def _session_user(raw: bytes | None) -> str | None:
    """The user of a sessions-changelog key (a JSON string ``"<user>\x1f<session>"``)."""
    if raw is None:
        return None
    try:
        key = json.loads(raw, strict=False)  # a raw \x1f too, not only \u001f
    except (ValueError, RecursionError):
        return None
    if not isinstance(key, str) or "\x1f" not in key:
        return None
    return key.split("\x1f", 1)[0]


async def sessions_held(settings: Settings, user_id: str) -> set[bytes]:
    """The sessions-table keys of ``user_id`` whose latest changelog record is a value (an
    open session or a closed-session marker), read from the changelog as it stands.

    The values are not opened: this counts what the table holds, whatever key sealed it.
    """
    from memstream.streams.kafka.logreader import read_topic
    from memstream.streams.operations.rebuild_sessions import sessions_changelog_topic

    live: dict[bytes, bool] = {}
    for record in await read_topic(settings, sessions_changelog_topic(settings)):
        if record.key is not None and _session_user(record.key) == user_id:
            live[record.key] = record.value is not None
    return {key for key, held in live.items() if held}


async def _wait_for_sessions(
    settings: Settings, user_id: str, held: set[bytes], receipt: ErasureReceipt, wait_s: float
) -> None:
    """Wait until every session of the user the table ``held`` before the erasure is
    tombstoned in the changelog; count them."""
    deadline = time.monotonic() + wait_s
    left = held & await sessions_held(settings, user_id)
    while left and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        left = held & await sessions_held(settings, user_id)
    if left:
        receipt.still_held(f"the session agent still holds {len(left)} session(s) of the user")
    else:
        receipt.removed["sessions (tombstoned by the session agent)"] = len(held)


def _archive_sink_has(settings: Settings, mark: ErasureMark) -> bool:
    """Whether the live archive holds the erasure's records (the sink applied it when it
    wrote them: see ``memstream.streams.archive``)."""
    from memstream.streams.archive import archive_positions, live_archive_dir

    positions = archive_positions(live_archive_dir(settings))
    return all(positions.get(where, 0) > offset for where, offset in mark.positions.items())


async def erase(
    settings: Settings, user_id: str, *, reason: str = "requested", wait_s: float = 60.0
) -> ErasureReceipt:
    """Erase ``user_id`` everywhere (see the module docstring) and return the receipt.

    Every count in the receipt is of what the store held of the user just before the
    erasure (taken before the key is destroyed and the event published, since either can
    make a worker drop the user's data at once) and checked to be gone afterwards; a store
    that still holds something gets a note instead, and ``memstream erase`` exits 1:

    * memory rows of the live table: counted, then awaited until the projector leaves 0;
      of every other table: the rows :meth:`MemoryProjection.erase_user` removed;
    * sessions: the user's keys with a value in the sessions changelog, then awaited until
      each is tombstoned;
    * archive records: the user's readable records per archive directory, then checked
      blank one by one (whoever blanked them: the live sink or this function);
    * session snapshot rows: the rows removed.

    Raises
    ------
    ValueError
        ``reason`` is not a code (``CODE_PATTERN``): refused before anything is destroyed,
        since the erasure event could not be built afterwards.
    """
    if not re.fullmatch(CODE_PATTERN, reason):
        raise ValueError(
            f"an erasure reason is a short code ({CODE_PATTERN}), not free text: it stays "
            "readable in the log after the user's key is gone"
        )
    from memstream.models.topics import user_partition
    from memstream.projections.embedder import embedder_from_settings
    from memstream.projections.memories import PartitionedMemories, ProjectionStore, user_key
    from memstream.streams.keys.store import keystore_from_settings
    from memstream.streams.projector.memories import live_table
    from memstream.streams.projector.ownership import WriterLock, partition_lock

    receipt = ErasureReceipt(
        user_key=user_key(user_id), erasure_id=uuid.uuid4().hex, started_at=datetime.now(UTC)
    )
    live = live_table(settings)
    # The writer of the user's partition (a worker that owns it) holds its lock. On an object
    # store there is none to ask (the writer may be on any machine): the worker the consumer
    # group assigned the partition to is taken to be running, and to apply the erasure.
    lock = WriterLock(partition_lock(settings, user_partition(user_id, settings.partitions)))
    worker_running = not ProjectionStore.from_settings(settings).locks_apply or (
        not lock.try_acquire()
    )
    try:
        projection = PartitionedMemories.from_settings(
            settings, embedder_from_settings(settings), live
        )
        rows_before = await asyncio.to_thread(projection.count, user_id) if worker_running else 0
        sessions_before = await sessions_held(settings, user_id)
        archived_before = await asyncio.to_thread(archived_records_of, settings, user_id)
        # The key first: from here on no process can read (or project) the user's sealed
        # records, so none can slip in after the erasure event is applied.
        receipt.removed["keys destroyed"] = keystore_from_settings(settings).destroy(user_id)
        try:
            mark = await publish_erasure(settings, user_id, receipt.erasure_id, reason)
        except Exception:
            # The log is unreadable for the user now, but the projections learn of the
            # erasure only from its event: an erasure run again publishes it (the key is
            # destroyed once; destroying it again is a no-op).
            log.warning(
                "erasure of %s: the key is destroyed but the erasure event was not published, "
                "so the memory table and sessions still hold the user's rows: run the erasure "
                "again once the broker answers", user_id,
            )
            raise
        receipt.removed["erasure events published"] = len(mark.positions)
        if not worker_running:
            # No projector writes the live table: clean it here, with every other table.
            tables = await asyncio.to_thread(erase_lancedb, settings, user_id, skip=None)
            receipt.notes.append(
                "no worker was running: the session agent drops the user's sessions when one "
                "starts (until then its changelog copies are ciphertext under the destroyed key)"
            )
        else:
            if await asyncio.to_thread(_wait, lambda: projection.count(user_id) == 0, wait_s):
                receipt.removed[f"memory rows ({live}, by the projector)"] = rows_before
            else:
                receipt.still_held(
                    f"the projector has not applied the erasure to {live} yet "
                    f"({projection.count(user_id)} of {rows_before} rows left)"
                )
            await _wait_for_sessions(settings, user_id, sessions_before, receipt, wait_s)
            tables = await asyncio.to_thread(erase_lancedb, settings, user_id, skip=live)
    finally:
        if not worker_running:
            lock.release()
    for name, count in tables.items():
        receipt.removed[f"memory rows ({name})"] = count
    await _erase_archive(settings, mark, archived_before, receipt, wait_s)
    receipt.removed["session snapshot rows"] = await asyncio.to_thread(
        erase_session_snapshots, settings, user_id
    )
    receipt.notes.append(
        "the log keeps the user's records as ciphertext under a destroyed key; chat events "
        "published by other producers without memstream's client stay plaintext until the "
        "chat topic's retention removes them"
    )
    return receipt


async def _erase_archive(
    settings: Settings,
    mark: ErasureMark,
    before: ArchiveRecords,
    receipt: ErasureReceipt,
    wait_s: float,
) -> None:
    """Blank the user's records in every archive directory and put the counts on the
    receipt. A running sink applies the erasure itself when it reads it (and blanks what it
    still had to write): wait for that, then blank here what is left (the other
    directories; the live one too if the sink is late)."""
    from memstream.streams.projector.ownership import WriterLock

    if not settings.archive_dir.exists():
        return
    sink = WriterLock(settings.archive_dir / ".sink.lock")
    sink_running = not sink.try_acquire()
    try:
        if sink_running and not await asyncio.to_thread(
            _wait, lambda: _archive_sink_has(settings, mark), wait_s
        ):
            receipt.still_held(
                "the archive sink has not archived the erasure event yet: the files written "
                "so far are blanked here, and the sink blanks the user's records it still "
                "writes once it reads the event"
            )
        outcome, readable = await asyncio.to_thread(erase_archive, settings, mark, before)
    finally:
        if not sink_running:
            sink.release()
    for name, (records, files) in outcome.items():
        receipt.removed[f"archive records blanked ({name})"] = records
        receipt.removed[f"archive files rewritten ({name})"] = files
    for name, count in readable.items():
        receipt.still_held(f"{count} archive record(s) of the user in {name} were not applied")


def add_erase_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the arguments of ``memstream erase --user U`` on ``commands`` (the command
    itself runs through the service: :mod:`memstream.streams.cli.memories`)."""
    parser = commands.add_parser(
        "erase", help="Erase a user from every store (crypto-shredding the log) and print the receipt."
    )
    parser.add_argument("--user", required=True)
    parser.add_argument("--reason", default="requested", help="recorded in the event")
    parser.add_argument(
        "--wait", type=float, default=60.0, help="seconds to wait for the worker to apply it"
    )
