"""The sessions projection rebuilt from the log, and checked against the running workers.

Three views of short-term memory must agree:

- the **fold**: the chat topic from its start, folded the way the session agent folds it
  (:func:`fold_chat_topic`, used by ``memstream replay --projection sessions``);
- the **live** table: what the workers hold, read back from the sessions table's changelog
  (:func:`live_sessions`; no worker needs to run);
- the **snapshot**: a Parquet read model of the open sessions for analytics
  (:func:`write_sessions_snapshot`, swapped in with :func:`memstream.projections.shadow.swap_in`).

:func:`sessions_fingerprint` reduces either of the first two to an order-independent digest,
so ``memstream verify`` compares them without caring which worker wrote what, or when.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from memstream.models.codec import EventLimits
from memstream.models.crypto import SealError
from memstream.models.fingerprint import Fingerprint, fingerprint
from memstream.models.session import SessionState, SessionValue
from memstream.models.settings import Settings
from memstream.streams.agents.session_table import fold_batch, open_session_value, window_limits
from memstream.streams.kafka.logreader import topic_partitions
from memstream.streams.kafka.tansu import true_end_offsets
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.store import keystore_from_settings

__all__ = [
    "PROJECTION",
    "SNAPSHOT_FILE",
    "fold_chat_topic",
    "live_sessions",
    "rebuild_sessions",
    "sessions_changelog_topic",
    "sessions_fingerprint",
    "write_sessions_snapshot",
]

log = logging.getLogger(__name__)

#: The projection's name in fingerprints, replay and shadow pointers.
PROJECTION = "sessions"
#: The snapshot file inside a snapshot directory.
SNAPSHOT_FILE = "sessions.parquet"
#: The name of the Faust table the session agent keeps (see ``create_app``).
_TABLE = "sessions"

#: ``progress(done, total)``: records read (or passed over) so far, and records to read.
Progress = Callable[[int, int], None]

#: Every field of an open session, plus its table key: the view ``memstream verify`` checks.
#:
#: Nothing here depends on when or where the fold ran, so nothing is left out or normalised:
#: times are event times (``last_event_at`` is the latest ``occurred_at``, and a timer close
#: is itself an event in the log); token counts come from ``WindowLimits.count_tokens``, the
#: same counter in a replay unless the configuration changed, which is then a real difference
#: (the window would evict elsewhere); the per-message serialisation cache is a private
#: attribute that ``model_dump`` leaves out; ``partition``/``last_offset`` are positions in
#: the log both sides read, and keep the check strict (a worker that applied a different
#: event last is caught). Values come out of ``model_dump(mode="json")`` on both sides, and a
#: value survives the changelog's ``dump_session``/``load_session`` round trip unchanged,
#: UTC offsets and dict order included, so equal states give equal rows.
_VIEW_FIELDS: tuple[str, ...] = ("key", *SessionState.model_fields)


def sessions_changelog_topic(settings: Settings) -> str:
    """The changelog topic of the workers' sessions table.

    Faust names a table's changelog ``{app id}-{table}-changelog``, and ``create_app`` gives
    the app the id ``{topic prefix}.{app id}``.

    Examples
    --------
    >>> sessions_changelog_topic(Settings(topic_prefix="memstream", app_id="worker"))
    'memstream.worker-sessions-changelog'
    """
    return f"{settings.topic_prefix}.{settings.app_id}-{_TABLE}-changelog"


async def fold_chat_topic(
    settings: Settings,
    *,
    until: datetime | None = None,
    progress: Progress | None = None,
) -> dict[str, SessionValue]:
    """Fold the chat topic, from its start to its end as it stands now, into session values.

    Records are folded with the session agent's own batch fold
    (:func:`memstream.streams.agents.session_table.fold_batch`): the same decoding and checks
    (``decode_checked``, the same :class:`EventLimits`), the same :class:`WindowLimits` and the same
    offsets and partitions, so an event the worker dead-letters or skips changes nothing
    here either. Partitions are read one after the other, a batch at a time. Sealed events
    are opened with the key store of ``settings``; an erased user's events no longer open,
    and the ``user_erased`` event drops what was folded of the user before it.

    Parameters
    ----------
    settings
        Broker, topic prefix and short-term memory bounds.
    until
        Stop each partition at its first record with a broker timestamp later than this
        (timezone-aware).
    progress
        Called as ``progress(done, total)`` after every batch read.

    Returns
    -------
    dict
        Table key -> value: open sessions and the markers closed sessions leave.

    Examples
    --------
    >>> values = await fold_chat_topic(Settings())  # doctest: +SKIP
    >>> sessions_fingerprint(values) == sessions_fingerprint(await live_sessions(Settings()))
    ... # doctest: +SKIP
    True
    """
    limits = window_limits(settings)
    event_limits = EventLimits.from_settings(settings)
    keys = keystore_from_settings(settings)
    folded = _FoldedSessions()
    chat = Topics.from_settings(settings).chat
    reader = _read_partitions(settings, chat, until=until, progress=progress)
    read = invalid = skipped = erased = 0
    async with aclosing(reader) as batches:
        async for records in batches:
            batch = fold_batch(folded, records, limits, event_limits, keys)
            for key, (value, _) in batch.writes.items():
                if value is None:
                    folded.values.pop(key, None)
                else:
                    folded.values[key] = value
            read += len(records)
            invalid += len(batch.dead)
            skipped += batch.skipped
            erased += batch.erased
    log.info(
        "sessions replay: %d chat records folded, %d invalid (the worker dead-letters them), "
        "%d changed nothing, %d of erased users",
        read,
        invalid,
        skipped,
        erased,
    )
    return folded.values


async def live_sessions(settings: Settings) -> dict[str, SessionValue]:
    """What the workers' sessions table holds, read from its changelog topic.

    The last value of each key wins and a tombstone (a deleted closed-session marker, an
    erased user's session) removes the key, exactly as a worker recovering the table would;
    values are opened with the key store of ``settings`` and decoded with
    :func:`~memstream.models.session.load_session`, and a value whose key is destroyed reads
    as no session. Works with no worker running; before any worker ran there is no
    changelog and the result is empty.

    Returns
    -------
    dict
        Table key -> value: open sessions and the closed-session markers still kept.
    """
    values: dict[str, SessionValue] = {}
    keys = keystore_from_settings(settings)
    reader = _read_partitions(settings, sessions_changelog_topic(settings))
    async with aclosing(reader) as batches:
        async for records in batches:
            for record in records:
                key = _table_key(record.key)
                value = None
                if record.value is not None:
                    try:
                        value, _ = open_session_value(key, record.value, keys)
                    except SealError:
                        log.exception("sessions changelog: the value of %r does not open", key)
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
    return values


def sessions_fingerprint(values: Mapping[str, SessionValue]) -> Fingerprint:
    """The order-independent fingerprint of the open sessions in ``values``.

    Closed-session markers are left out: a worker drops them on a wall-clock timer, so
    whether one is still held says when the worker last scanned, not what the log holds.

    Examples
    --------
    >>> sessions_fingerprint({}).rows
    0
    """
    rows = (
        {"key": key, **value.model_dump(mode="json")}
        for key, value in values.items()
        if isinstance(value, SessionState)
    )
    return fingerprint(PROJECTION, rows, _VIEW_FIELDS)


_SNAPSHOT_SCHEMA = pa.schema(
    [
        ("user_id", pa.string()),
        ("session_id", pa.string()),
        ("agent_id", pa.string()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("last_event_at", pa.timestamp("us", tz="UTC")),
        ("duration_seconds", pa.float64()),
        ("turn_count", pa.int64()),
        # Every message the session has had, and those still in the window.
        ("message_count", pa.int64()),
        ("window_messages", pa.int64()),
        ("window_tokens", pa.int64()),
        ("evicted_chunks", pa.int64()),
        ("task", pa.string()),
        ("task_progress", pa.string()),
        ("progress_percent", pa.float64()),
        ("entities", pa.list_(pa.string())),
        ("tool_calls", pa.int64()),
        ("partition", pa.int32()),
        ("last_offset", pa.int64()),
        ("last_event_id", pa.string()),
        ("state_json", pa.string()),
    ]
)


def write_sessions_snapshot(values: Mapping[str, SessionValue], target: Path) -> int:
    """Write the open sessions in ``values`` to ``target/sessions.parquet``; return the rows.

    One row per open session, ordered by user and session, with the figures analytics asks
    about and ``state_json``, the whole state. The file is written beside its final name
    and moved into place with ``os.replace``, so a reader sees the old file or the new one.

    Examples
    --------
    >>> write_sessions_snapshot({}, Path("snapshot"))  # doctest: +SKIP
    0
    >>> import duckdb  # doctest: +SKIP
    >>> duckdb.sql("select sum(turn_count) from 'snapshot/sessions.parquet'")  # doctest: +SKIP
    """
    states = sorted(
        (value for value in values.values() if isinstance(value, SessionState)),
        key=lambda state: (state.user_id, state.session_id),
    )
    table = pa.Table.from_pylist([_snapshot_row(state) for state in states], _SNAPSHOT_SCHEMA)
    target.mkdir(parents=True, exist_ok=True)
    final = target / SNAPSHOT_FILE
    staging = target / f".{SNAPSHOT_FILE}.{os.getpid()}.tmp"
    try:
        pq.write_table(table, staging)
        with staging.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(staging, final)
    finally:
        staging.unlink(missing_ok=True)
    return table.num_rows


async def rebuild_sessions(
    settings: Settings,
    target: Path,
    *,
    until: datetime | None = None,
    progress: Progress | None = None,
) -> Fingerprint:
    """Fold the chat topic, write its snapshot under ``target``, return its fingerprint.

    ``until`` and ``progress`` are those of :func:`fold_chat_topic`. Compare the result
    with ``sessions_fingerprint(await live_sessions(settings))`` before swapping the
    snapshot in.
    """
    values = await fold_chat_topic(settings, until=until, progress=progress)
    write_sessions_snapshot(values, target)
    return sessions_fingerprint(values)


class _FoldedSessions:
    """The session values of a replay: what the fold reads of a session store."""

    def __init__(self) -> None:
        self.values: dict[str, SessionValue] = {}

    def get(self, key: str) -> SessionValue | None:
        return self.values.get(key)

    def session_keys(self) -> list[str]:
        return list(self.values)


def _snapshot_row(state: SessionState) -> dict[str, Any]:
    return {
        "user_id": state.user_id,
        "session_id": state.session_id,
        "agent_id": state.agent_id,
        "started_at": state.started_at,
        "last_event_at": state.last_event_at,
        "duration_seconds": state.duration_seconds,
        "turn_count": state.turn_count,
        "message_count": state.message_count,
        "window_messages": len(state.messages),
        "window_tokens": state.window_tokens,
        "evicted_chunks": state.evicted_chunks,
        "task": state.task,
        "task_progress": state.task_progress,
        "progress_percent": state.progress_percent,
        "entities": list(state.entities),
        "tool_calls": len(state.tool_calls),
        "partition": state.partition,
        "last_offset": state.last_offset,
        "last_event_id": state.last_event_id,
        "state_json": state.model_dump_json(),
    }


def _table_key(raw: bytes | None) -> str:
    """A sessions-table key from its changelog bytes (the table's keys are JSON strings)."""
    if raw is None:
        raise ValueError("a sessions changelog record without a key")
    key = json.loads(raw)
    if isinstance(key, str):
        return key
    raise ValueError(f"a sessions changelog key is not a JSON string: {raw!r}")


def _broker_ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError("until needs a timezone")
    return int(moment.timestamp() * 1000)


async def _read_partitions(
    settings: Settings,
    topic: str,
    *,
    until: datetime | None = None,
    progress: Progress | None = None,
    stall_timeout_s: float = 30.0,
) -> AsyncGenerator[list[ConsumerRecord], None]:
    """Batches of ``topic``'s records, partition by partition, each up to the end offset it
    had when the read began (from a Fetch high watermark, exact on Tansu too).

    With ``until``, a partition stops at its first record whose broker timestamp is later.
    Raises ``TimeoutError`` when a partition yields nothing for ``stall_timeout_s`` short
    of its end. A topic that does not exist yields nothing.
    """
    until_ms = None if until is None else _broker_ms(until)
    loop = asyncio.get_running_loop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.broker, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:  # stopped below even when the start fails: no leak
        await consumer.start()
        tps = await topic_partitions(consumer, topic)
        if not tps:
            return
        ends = await true_end_offsets(settings.broker, tps)
        # A compacted or retention-trimmed partition starts above 0.
        starts: dict[TopicPartition, int] = await consumer.beginning_offsets(tps)
        total = sum(max(0, ends[tp] - starts[tp]) for tp in tps)
        finished = 0
        for tp in tps:
            start, end = starts[tp], ends[tp]
            position = start
            consumer.assign([tp])
            consumer.seek(tp, start)
            last_read = loop.time()
            while position < end:
                fetched = (await consumer.getmany(tp, timeout_ms=500)).get(tp, [])
                if not fetched:
                    if loop.time() - last_read > stall_timeout_s:
                        raise TimeoutError(
                            f"{topic}[{tp.partition}]: nothing past offset {position} in "
                            f"{stall_timeout_s:.0f} s, though it ends at {end}"
                        )
                    continue
                last_read = loop.time()
                # Records appended since the read began are left for the next one.
                records = [record for record in fetched if record.offset < end]
                cut = None if until_ms is None else _first_later(records, until_ms)
                if cut is not None:
                    records = records[:cut]
                if records:
                    yield records
                if cut is not None:
                    break
                position = fetched[-1].offset + 1
                if progress is not None:
                    progress(finished + min(position, end) - start, total)
            finished += max(0, end - start)
            if progress is not None:
                progress(finished, total)
    finally:
        await consumer.stop()


def _first_later(records: list[ConsumerRecord], until_ms: int) -> int | None:
    """Index of the first record stamped later than ``until_ms`` (an unstamped one is kept)."""
    for index, record in enumerate(records):
        if record.timestamp is not None and record.timestamp > until_ms:
            return index
    return None
