"""``memstream erase --user U``: remove a user from every store, and prove it with a receipt.

The log is append-only, so erasure is crypto-shredding plus projection clean-up:

1. a :class:`~memstream.models.events.UserErased` event goes to the chat topic (the session
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

The receipt counts what was removed where. Plaintext can remain only where memstream never
sealed it: chat events a third-party producer published directly (until the chat topic's
retention), and dead letters of records that arrived before the user had a key.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memstream.models.codec import encode_event
from memstream.models.events import UserErased
from memstream.models.settings import Settings
from memstream.streams.topics import Topics

if TYPE_CHECKING:
    import pyarrow as pa

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

    def render(self) -> str:
        """The receipt as printed by ``memstream erase``."""
        stamp = self.started_at.isoformat(timespec="seconds")
        lines = [f"erasure {self.erasure_id} of user sha256:{self.user_key[:16]}… at {stamp}"]
        width = max((len(name) for name in self.removed), default=10)
        lines += [f"  {name:<{width}}  {count}" for name, count in self.removed.items()]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


async def publish_erasure(settings: Settings, user_id: str, erasure_id: str, reason: str) -> int:
    """Publish ``UserErased`` to the chat and memories topics; return the events sent."""
    from aiokafka import AIOKafkaProducer

    topics = Topics.from_settings(settings)
    event = UserErased(
        event_id=f"erase-{erasure_id}",
        user_id=user_id,
        session_id=NO_SESSION,
        occurred_at=datetime.now(UTC),
        erasure_id=erasure_id,
        reason=reason,
    )
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    await producer.start()
    try:
        for topic in (topics.chat, topics.memories):
            await producer.send_and_wait(topic, key=user_id.encode(), value=encode_event(event))
    finally:
        await producer.stop()
    return 2


def _wait(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return check()


def erase_lancedb(settings: Settings, user_id: str, *, skip: str | None) -> dict[str, int]:
    """Remove the user from every memory table but ``skip`` (the projector's), files and
    older versions included (:meth:`MemoryProjection.erase_user`); rows removed per table."""
    import lancedb

    from memstream.projections.embedder import embedder_from_settings
    from memstream.projections.memories import (
        EmbeddingModelMismatch,
        MemoryProjection,
        ProjectionOutdated,
    )

    directory = settings.lancedb_dir
    if not directory.exists():
        return {}
    embedder = embedder_from_settings(settings)
    db = lancedb.connect(directory)
    removed: dict[str, int] = {}
    for name in db.list_tables().tables:
        if name == skip:
            continue
        with warnings.catch_warnings():
            # Dropping every older version is the point: they still hold the user's rows.
            warnings.filterwarnings("ignore", message=".*cleanup_older_than.*")
            try:
                removed[name] = MemoryProjection(directory, embedder, name).erase_user(user_id)
            except (ProjectionOutdated, EmbeddingModelMismatch):
                # A table of an older memstream or another model: it cannot be opened as a
                # projection, so it is dropped whole rather than kept with the user in it.
                db.drop_table(name)
                removed[f"{name} (dropped: unreadable by this version)"] = -1
    return removed


def _user_rows(table: pa.Table, user_id: str) -> pa.Array:
    """A mask of the archived records that belong to ``user_id``: by the parsed user id, by
    the record key (every memstream topic is keyed by user id), or by a sessions-changelog
    key (a JSON string of ``"<user>\x1f<session>"``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    raw = user_id.encode("utf-8", "surrogatepass")
    keys = table.column("key").cast(pa.binary())
    masks = [
        pc.equal(table.column("user_id"), user_id),
        pc.equal(keys, pa.scalar(raw, pa.binary())),
    ]
    for prefix in (b'"' + raw + b"\\u001f", b'"' + raw + b"\x1f"):
        masks.append(pc.equal(pc.binary_slice(keys, 0, len(prefix)), pa.scalar(prefix, pa.binary())))
    mask = masks[0]
    for other in masks[1:]:
        mask = pc.or_kleene(mask, other)
    return pc.fill_null(mask, False)


BLANKED = ("key", "value", "event_id", "user_id", "session_id", "agent_id", "headers")


def erase_archive(settings: Settings, user_id: str) -> tuple[int, int]:
    """Blank the user's records in every archive file (every archive directory: the live
    one and replay shadows); return (records blanked, files rewritten).

    A blanked record keeps its topic, partition, offset, timestamp and type, so offsets stay
    contiguous and a restore still lines up; its key, value and identifying columns are
    null.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    blanked = files = 0
    if not settings.archive_dir.exists():
        return 0, 0
    for path in sorted(settings.archive_dir.rglob("*.parquet")):
        table = pq.read_table(path)
        if "key" not in table.column_names or table.num_rows == 0:
            continue
        mask = _user_rows(table, user_id)
        hits = int(pc.sum(mask).as_py() or 0)
        if not hits:
            continue
        columns = []
        for name in table.column_names:
            column = table.column(name)
            if name in BLANKED:
                column = pc.if_else(mask, pa.nulls(len(column), column.type), column)
            columns.append(column)
        rewritten = pa.Table.from_arrays(columns, schema=table.schema)
        staging = path.with_name(f".{path.name}.erasing")
        pq.write_table(rewritten, staging, compression="zstd")
        with staging.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(staging, path)
        blanked += hits
        files += 1
    return blanked, files


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


async def _wait_for_sessions(
    settings: Settings, user_id: str, receipt: ErasureReceipt, wait_s: float
) -> None:
    """Wait until the workers' session tables hold nothing of the user; count what went."""
    from memstream.streams.session_replay import live_sessions

    def mine(values: dict[str, object]) -> int:
        return sum(getattr(v, "user_id", None) == user_id for v in values.values())

    held = mine(dict(await live_sessions(settings)))
    deadline = time.monotonic() + wait_s
    left = held
    while left and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        left = mine(dict(await live_sessions(settings)))
    if left:
        receipt.notes.append(f"the session agent still holds {left} session(s) of the user")
    else:
        receipt.removed["sessions (tombstoned by the session agent)"] = held


async def erase(
    settings: Settings, user_id: str, *, reason: str = "requested", wait_s: float = 60.0
) -> ErasureReceipt:
    """Erase ``user_id`` everywhere (see the module docstring) and return the receipt."""
    from memstream.projections.embedder import embedder_from_settings
    from memstream.projections.memories import MemoryProjection, user_key
    from memstream.streams.keys import keystore_from_settings
    from memstream.streams.projector import WriterLock, live_table

    receipt = ErasureReceipt(
        user_key=user_key(user_id), erasure_id=uuid.uuid4().hex, started_at=datetime.now(UTC)
    )
    # The key first: from here on no process can read (or project) the user's sealed
    # records, so none can slip in after the erasure event is applied.
    receipt.removed["keys destroyed"] = keystore_from_settings(settings).destroy(user_id)
    receipt.removed["erasure events published"] = await publish_erasure(
        settings, user_id, receipt.erasure_id, reason
    )

    live = live_table(settings)
    lock = WriterLock(settings.lancedb_dir / ".projector.lock")
    worker_running = not lock.try_acquire()
    if not worker_running:
        # No projector writes the live table: clean it here, with every other table.
        try:
            tables = await asyncio.to_thread(erase_lancedb, settings, user_id, skip=None)
        finally:
            lock.release()
        receipt.notes.append(
            "no worker was running: the session agent drops the user's sessions when one "
            "starts (until then its changelog copies are ciphertext under the destroyed key)"
        )
    else:
        projection = MemoryProjection(settings.lancedb_dir, embedder_from_settings(settings), live)
        before = await asyncio.to_thread(projection.count, user_id)
        if await asyncio.to_thread(_wait, lambda: projection.count(user_id) == 0, wait_s):
            receipt.removed[f"memory rows ({live}, by the projector)"] = before
        else:
            receipt.notes.append(
                f"the projector has not applied the erasure to {live} yet ({before} rows)"
            )
        await _wait_for_sessions(settings, user_id, receipt, wait_s)
        tables = await asyncio.to_thread(erase_lancedb, settings, user_id, skip=live)
    for name, count in tables.items():
        receipt.removed[f"memory rows ({name})"] = count
    blanked, files = await asyncio.to_thread(erase_archive, settings, user_id)
    receipt.removed["archive records blanked"] = blanked
    receipt.removed["archive files rewritten"] = files
    receipt.removed["session snapshot rows"] = await asyncio.to_thread(
        erase_session_snapshots, settings, user_id
    )
    receipt.notes.append(
        "the log keeps the user's records as ciphertext under a destroyed key; chat events "
        "published by other producers without memstream's client stay plaintext until the "
        "chat topic's retention removes them"
    )
    return receipt


def cmd_erase(args: argparse.Namespace) -> int:
    """Erase a user from every store (crypto-shredding the log) and print the receipt."""
    from memstream.streams.cli import settings_from_args

    settings = settings_from_args(args)
    receipt = asyncio.run(erase(settings, args.user, reason=args.reason, wait_s=args.wait))
    print(receipt.render())
    return 0 if not any("not applied" in n or "still holds" in n for n in receipt.notes) else 1


def add_erase_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``memstream erase --user U`` on ``commands``."""
    parser = commands.add_parser("erase", help=cmd_erase.__doc__)
    parser.add_argument("--user", required=True)
    parser.add_argument("--reason", default="requested", help="recorded in the event")
    parser.add_argument(
        "--wait", type=float, default=60.0, help="seconds to wait for the worker to apply it"
    )
    parser.set_defaults(run=cmd_erase)
