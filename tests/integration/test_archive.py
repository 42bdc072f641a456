"""The Parquet archive of the log: the sink, a rebuild from the log, and a restore into a
fresh broker, all on the real broker."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata
from chat import conversation
from harness import wait_for_async

from memstream.models.codec import encode_event
from memstream.models.events.chat import UserErased
from memstream.models.settings import Settings
from memstream.projections.shadow import shadow_name, swap_in
from memstream.streams.archive import (
    GROUP_OFFSETS,
    GroupOffsets,
    RestoreRefused,
    archive_files,
    archive_fingerprint,
    archive_positions,
    archived_topics,
    live_archive_dir,
    log_shortfalls,
    read_group_offsets,
    rebuild_archive,
    restore,
    run_archive_sink,
    worker_group_id,
)
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.kafka.deadletters import DeadLetter
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.progress import committed_offsets, group_client
from memstream.streams.kafka.tansu import true_end_offsets
from memstream.streams.kafka.topics import Topics, ensure_topics

SettingsFactory = Callable[..., Settings]

#: Broker timestamps the producer sets: two sessions on one day, one on the next.
DAY_ONE = datetime(2026, 3, 1, 22, 0, tzinfo=UTC)
DAY_TWO = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
MALFORMED = b'{"event_id": "broken", "type": '


@dataclass(frozen=True)
class Sent:
    """One record to produce."""

    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: datetime
    partition: int | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


def _chat_records(settings: Settings, users: list[str], when: datetime) -> list[Sent]:
    topics = Topics.from_settings(settings)
    records = []
    for user in users:
        for i, event in enumerate(
            conversation(
                user, f"s-{when:%d}", [("user", f"hi from {user}"), ("assistant", "hi")], start=when
            )
        ):
            stamp = when + timedelta(seconds=i)
            records.append(Sent(topics.chat, user.encode(), encode_event(event), stamp))
    return records


def _first_log(settings: Settings) -> list[Sent]:
    """Valid events on two days, a malformed record, a dead letter with headers."""
    topics = Topics.from_settings(settings)
    return [
        *_chat_records(settings, ["ann", "bob", "cy"], DAY_ONE),
        Sent(topics.chat, b"ann", MALFORMED, DAY_ONE + timedelta(hours=1)),
        Sent(topics.memories, b"bob", b'{"event_id": "m1", "type": "memory_added"}', DAY_ONE),
        Sent(
            topics.deadletters,
            b"ann",
            b'{"reason": "invalid event"}',
            DAY_ONE,
            headers=(("agent", b"sessions"), ("empty", b"")),
        ),
    ]


def _second_log(settings: Settings) -> list[Sent]:
    return _chat_records(settings, ["ann", "dee"], DAY_TWO)


async def _produce(settings: Settings, records: list[Sent]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.broker, acks="all")
    await producer.start()
    try:
        futures = [
            await producer.send(
                r.topic,
                r.value,
                key=r.key,
                partition=r.partition,
                timestamp_ms=int(r.timestamp.timestamp() * 1000),
                headers=list(r.headers) or None,
            )
            for r in records
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def _log_ends(settings: Settings) -> dict[tuple[str, int], int]:
    tps = [
        TopicPartition(topic, p)
        for topic in Topics.from_settings(settings).all()
        for p in range(settings.partitions)
    ]
    ends = await true_end_offsets(settings.broker, tps)
    return {(tp.topic, tp.partition): end for tp, end in ends.items() if end}


@contextlib.asynccontextmanager
async def _sink(settings: Settings) -> AsyncIterator[asyncio.Task[None]]:
    """Run the archive sink for the body of the ``async with``, then stop it cleanly."""
    stop = asyncio.Event()
    task = asyncio.create_task(run_archive_sink(settings, stop))
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def _until_archived(
    settings: Settings, sink: asyncio.Task[None], wanted: dict[tuple[str, int], int]
) -> None:
    """Wait until the live archive holds ``wanted`` positions (some partitions may be more)."""
    directory = live_archive_dir(settings)

    def positions() -> dict[tuple[str, int], int]:
        if sink.done():
            sink.result()  # raises what stopped it
            raise AssertionError("the sink stopped on its own")
        return archive_positions(directory)

    await wait_for_async(
        positions,
        f"the archive to hold {wanted}",
        30,
        until=lambda held: all(held.get(key, 0) >= end for key, end in wanted.items()),
        interval_s=0.1,
    )


def _archived_rows(directory: Path) -> list[tuple[object, ...]]:
    """What a DuckDB user sees: every archived record, by the Hive-partitioned layout."""
    return duckdb.sql(
        f"""
        SELECT topic, partition, "offset", epoch_ms(timestamp), key, value
        FROM read_parquet('{directory}/**/*.parquet', hive_partitioning = true)
        ORDER BY topic, partition, "offset"
        """
    ).fetchall()


async def _log_rows(settings: Settings) -> list[tuple[object, ...]]:
    rows = []
    for topic in sorted(Topics.from_settings(settings).all()):
        for r in await read_topic(settings, topic):
            rows.append((r.topic, r.partition, r.offset, r.timestamp, r.key, r.value))
    return sorted(rows, key=lambda row: (row[0], row[1], row[2]))


async def test_sink_archives_every_record_and_resumes_without_duplicates(
    settings_factory: SettingsFactory,
) -> None:
    settings = settings_factory(partitions=2, archive_flush_s=0.2, archive_batch_size=7)
    await ensure_topics(settings)
    await _produce(settings, _first_log(settings))
    async with _sink(settings) as sink:
        await _until_archived(settings, sink, await _log_ends(settings))

    # Stopped and started again: it continues after its files, never from the start.
    await _produce(settings, _second_log(settings))
    async with _sink(settings) as sink:
        await _until_archived(settings, sink, await _log_ends(settings))

    directory = live_archive_dir(settings)
    assert _archived_rows(directory) == await _log_rows(settings)

    topics = Topics.from_settings(settings)
    days = duckdb.sql(
        f"""
        SELECT DISTINCT topic, CAST(date AS VARCHAR)
        FROM read_parquet('{directory}/**/*.parquet', hive_partitioning = true)
        WHERE topic = '{topics.chat}' ORDER BY 2
        """
    ).fetchall()
    assert days == [(topics.chat, "2026-03-01"), (topics.chat, "2026-03-02")]

    parsed = duckdb.sql(
        f"""
        SELECT value, event_id, type, user_id, session_id, occurred_at, schema_version, headers
        FROM read_parquet('{directory}/**/*.parquet', hive_partitioning = true)
        """
    ).fetchall()
    by_value = {row[0]: row[1:] for row in parsed}
    # The malformed record is archived with its bytes, its parsed columns empty.
    assert by_value[MALFORMED][:6] == (None, None, None, None, None, None)
    message = next(row for row in parsed if row[1] == "ann/s-01/m0")
    assert message[2:5] == ("message_added", "ann", "s-01")
    assert message[5] == DAY_ONE + timedelta(minutes=1)
    assert message[6] == 1
    letter = by_value[b'{"reason": "invalid event"}']
    assert letter[0] is None
    assert letter[-1] == [{"key": "agent", "value": b"sessions"}, {"key": "empty", "value": b""}]


async def test_rebuild_fingerprints_like_the_sink_and_stops_at_until(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    settings = settings_factory(partitions=2, archive_flush_s=0.2)
    await ensure_topics(settings)
    await _produce(settings, _first_log(settings) + _second_log(settings))
    async with _sink(settings) as sink:
        await _until_archived(settings, sink, await _log_ends(settings))

    calls: list[tuple[int, int]] = []
    rebuilt = tmp_path / "rebuilt"
    written = await rebuild_archive(
        settings, rebuilt, progress=lambda done, total: calls.append((done, total))
    )
    assert written == len(await _log_rows(settings))
    assert archive_fingerprint(rebuilt) == archive_fingerprint(live_archive_dir(settings))
    assert calls[-1] == (written, written)
    # Resumable: a second run over a complete rebuild finds nothing left to write.
    assert await rebuild_archive(settings, rebuilt) == 0
    assert archive_fingerprint(rebuilt) == archive_fingerprint(live_archive_dir(settings))

    until = DAY_ONE + timedelta(hours=2)
    cut = tmp_path / "until"
    await rebuild_archive(settings, cut, until=until)
    expected = [row for row in await _log_rows(settings) if row[3] <= until.timestamp() * 1000]
    assert _archived_rows(cut) == expected
    assert 0 < len(expected) < written


async def test_sink_continues_in_an_archive_a_replay_swapped_in(
    settings_factory: SettingsFactory,
) -> None:
    settings = settings_factory(partitions=2, archive_flush_s=0.2)
    await ensure_topics(settings)
    await _produce(settings, _first_log(settings))
    first = live_archive_dir(settings)
    async with _sink(settings) as sink:
        await _until_archived(settings, sink, await _log_ends(settings))
        # A replay rebuilds the archive beside the live one and swaps it in.
        name = shadow_name("archive")
        await rebuild_archive(settings, settings.archive_dir / name)
        swap_in(settings.archive_dir, "archive", name)
        await _produce(settings, _second_log(settings))
        await _until_archived(settings, sink, await _log_ends(settings))

    assert live_archive_dir(settings) != first
    assert _archived_rows(live_archive_dir(settings)) == await _log_rows(settings)


async def test_restore_into_a_fresh_broker_reproduces_the_log(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    settings = settings_factory(partitions=2)
    await ensure_topics(settings)
    await _produce(settings, _first_log(settings) + _second_log(settings))
    archive = tmp_path / "archive"
    await rebuild_archive(settings, archive)

    with EmbeddedBroker(free_port(), log_dir=tmp_path / "broker-b") as fresh:
        restored_settings = settings.model_copy(update={"broker": fresh.address})
        # The fresh broker's log is shorter than the archive: every archived partition.
        shortfalls = await log_shortfalls(restored_settings, archive_positions(archive))
        original_ends = await _log_ends(settings)
        assert {(s.topic, s.partition, s.archived_to, s.log_end) for s in shortfalls} == {
            (topic, partition, end, 0) for (topic, partition), end in original_ends.items()
        }
        assert "lost its log" in shortfalls[0].explain()
        assert "memstream restore" in shortfalls[0].explain()

        report = await restore(restored_settings, archive)

        assert report.gaps == ()
        assert report.total == len(await _log_rows(settings))
        for topic in Topics.from_settings(settings).all():
            original = await read_topic(settings, topic)
            copy = await read_topic(restored_settings, topic)
            assert [
                (r.partition, r.offset, r.key, r.value, r.timestamp, tuple(r.headers))
                for r in copy
            ] == [
                (r.partition, r.offset, r.key, r.value, r.timestamp, tuple(r.headers))
                for r in original
            ]
        assert await log_shortfalls(restored_settings, archive_positions(archive)) == []

        # A second restore would duplicate the log: refused, and the log is unchanged.
        with pytest.raises(RestoreRefused, match="already hold records"):
            await restore(restored_settings, archive)
        assert report.total == len(await _log_rows(restored_settings))


async def test_sink_does_not_archive_a_lost_log_again(
    settings_factory: SettingsFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_factory(partitions=2, archive_flush_s=0.2)
    topics = Topics.from_settings(settings)
    await ensure_topics(settings)
    archived = {0: 3, 1: 2}  # records per chat partition in the archive
    await _produce(
        settings,
        [
            Sent(topics.chat, b"x", f"old-{p}-{i}".encode(), DAY_ONE, partition=p)
            for p, count in archived.items()
            for i in range(count)
        ],
    )
    await rebuild_archive(settings, live_archive_dir(settings))
    chat_files_before = [
        f for f in archive_files(live_archive_dir(settings)) if f.topic == topics.chat
    ]
    assert archive_positions(live_archive_dir(settings)) == {
        (topics.chat, 0): 3, (topics.chat, 1): 2
    }

    with EmbeddedBroker(free_port(), log_dir=tmp_path / "broker-b") as fresh:
        # The broker restarted with an empty log and new records came in: chat[0] holds
        # fewer records than the archive, chat[1] more, and different ones.
        settings_b = settings.model_copy(update={"broker": fresh.address})
        await ensure_topics(settings_b)
        stamp = DAY_TWO
        await _produce(settings_b, [Sent(topics.chat, b"x", b"new-0", stamp, partition=0)])
        await _produce(
            settings_b,
            [
                Sent(topics.chat, b"x", f"new-{i}".encode(), stamp, partition=1)
                for i in range(archived[1] + 2)
            ],
        )
        await _produce(settings_b, [Sent(topics.consolidation, b"x", b"c", stamp, partition=0)])

        with caplog.at_level(logging.ERROR, logger="memstream.streams.archive"):
            async with _sink(settings_b) as sink:
                # A partition the archive never had is archived as usual...
                await _until_archived(settings_b, sink, {(topics.consolidation, 0): 1})

    # ...but neither chat partition is touched, and the user is told why and what to do.
    chat_files_after = [
        f for f in archive_files(live_archive_dir(settings)) if f.topic == topics.chat
    ]
    assert chat_files_after == chat_files_before
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    short = next(m for m in errors if f"{topics.chat}[0]" in m)
    assert "lost its log" in short and "memstream restore" in short
    replaced = next(m for m in errors if f"{topics.chat}[1]" in m)
    assert "replaced" in replaced and "memstream restore" in replaced


async def _commit(settings: Settings, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for the workers' group, as a client outside the group."""
    consumer = group_client(settings)
    await consumer.start()
    try:
        tps = {TopicPartition(topic, partition): o for (topic, partition), o in offsets.items()}
        consumer.assign(list(tps))
        await consumer.commit({tp: OffsetAndMetadata(o, "") for tp, o in tps.items()})
    finally:
        await consumer.stop()


async def _snapshot_of(settings: Settings, wanted: dict[tuple[str, int], int]) -> GroupOffsets:
    """Wait until the live archive's group offsets snapshot equals ``wanted``."""
    snapshot = await wait_for_async(
        lambda: read_group_offsets(live_archive_dir(settings), worker_group_id(settings)),
        f"the group offsets snapshot to be {wanted}",
        30,
        until=lambda found: found is not None and found.offsets == wanted,
        interval_s=0.1,
    )
    assert snapshot is not None
    return snapshot


async def test_sink_archives_the_changelog_once_it_exists_and_the_group_offsets(
    settings_factory: SettingsFactory,
) -> None:
    settings = settings_factory(partitions=2, archive_flush_s=0.2)
    topics = Topics.from_settings(settings)
    changelog = archived_topics(settings)[-1]
    await ensure_topics(settings)
    await _produce(settings, _first_log(settings))
    async with _sink(settings) as sink:
        await _until_archived(settings, sink, await _log_ends(settings))
        # No group offsets yet: nothing to keep.
        assert read_group_offsets(live_archive_dir(settings), worker_group_id(settings)) is None

        # The worker creates the changelog after the sink started, and commits offsets.
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.broker)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(changelog, settings.partitions, 1)])
        finally:
            await admin.close()
        await _produce(
            settings,
            [
                Sent(changelog, f"k{i}".encode(), b"state", DAY_TWO, partition=i % 2)
                for i in range(3)
            ],
        )
        ends = await _log_ends(settings)
        await _until_archived(settings, sink, {(changelog, 0): 2, (changelog, 1): 1})
        chat = {key: end for key, end in ends.items() if key[0] == topics.chat}
        await _commit(settings, chat)
        first = await _snapshot_of(settings, chat)

        # A later commit replaces the snapshot.
        await _commit(settings, {(topics.chat, 0): 1})
        second = await _snapshot_of(settings, {**chat, (topics.chat, 0): 1})

    assert first.group_id == worker_group_id(settings)
    assert first.taken_at <= second.taken_at
    assert {(f.topic, f.partition) for f in archive_files(live_archive_dir(settings))} >= {
        (changelog, 0),
        (changelog, 1),
    }
    # The snapshot is no archive file: queries over the layout see the records only.
    changelog_rows: list[tuple[object, ...]] = [
        (r.topic, r.partition, r.offset, r.timestamp, r.key, r.value)
        for r in await read_topic(settings, changelog)
    ]
    assert _archived_rows(live_archive_dir(settings)) == sorted(
        await _log_rows(settings) + changelog_rows, key=lambda row: (row[0], row[1], row[2])
    )


async def test_restore_commits_the_archived_group_offsets_past_gaps_and_capped(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    settings = settings_factory(partitions=2, archive_batch_size=2)
    topics = Topics.from_settings(settings)
    await ensure_topics(settings)
    await _produce(
        settings,
        [
            Sent(topics.chat, b"x", f"r{p}-{i}".encode(), DAY_ONE, partition=p)
            for p, count in ((0, 7), (1, 3))
            for i in range(count)
        ],
    )
    archive = tmp_path / "archive"
    await rebuild_archive(settings, archive)
    # A file lost from the middle of chat[0]: restored records after it shift down.
    lost = [f for f in archive_files(archive) if (f.topic, f.partition) == (topics.chat, 0)][1]
    lost.path.unlink()
    size = lost.last - lost.first + 1
    group = worker_group_id(settings)
    taken_at = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    archived = {(topics.chat, 0): lost.last + 2, (topics.chat, 1): 3 + 5}
    (archive / GROUP_OFFSETS).mkdir()
    (archive / GROUP_OFFSETS / f"{group}.json").write_text(
        GroupOffsets(group, taken_at, archived).to_json()
    )

    with EmbeddedBroker(free_port(), log_dir=tmp_path / "broker-b") as fresh:
        restored_settings = settings.model_copy(update={"broker": fresh.address})
        report = await restore(restored_settings, archive)
        expected = {(topics.chat, 0): lost.last + 2 - size, (topics.chat, 1): 3}
        assert [(g.start, g.end, g.shift) for g in report.gaps] == [
            (lost.first, lost.last + 1, size)
        ]
        assert report.group_id == group
        assert report.group_offsets == expected
        assert report.group_offsets_taken_at == taken_at
        assert report.group_offsets_lowered == {(topics.chat, 1): 8}
        assert "lowered to 3" in report.summary()
        assert await committed_offsets(restored_settings, list(archived)) == expected


async def test_restore_refuses_while_a_worker_is_in_the_group(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    settings = settings_factory(partitions=2)
    topics = Topics.from_settings(settings)
    await ensure_topics(settings)
    await _produce(settings, _first_log(settings))
    archive = tmp_path / "archive"
    await rebuild_archive(settings, archive)
    group = worker_group_id(settings)
    (archive / GROUP_OFFSETS).mkdir()
    (archive / GROUP_OFFSETS / f"{group}.json").write_text(
        GroupOffsets(group, DAY_TWO, {(topics.chat, 0): 1}).to_json()
    )

    with EmbeddedBroker(free_port(), log_dir=tmp_path / "broker-b") as fresh:
        restored_settings = settings.model_copy(update={"broker": fresh.address})
        await ensure_topics(restored_settings)
        member = AIOKafkaConsumer(
            topics.chat,
            bootstrap_servers=fresh.address,
            group_id=group,
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
        )
        await member.start()
        try:

            async def assigned() -> set[TopicPartition]:
                if not member.assignment():
                    await member.getmany(timeout_ms=200)  # the pause between two looks
                return member.assignment()

            await wait_for_async(assigned, "the member to join", 12, interval_s=0)
            with pytest.raises(RestoreRefused, match="has 1 member"):
                await restore(restored_settings, archive)
        finally:
            await member.stop()
        # Refused before republishing anything.
        assert await _log_ends(restored_settings) == {}


# --- erasures -------------------------------------------------------------------------------

#: When the erasure of ann is published; her earlier records are covered, later ones kept.
ERASED_AT = DAY_ONE + timedelta(hours=3)


@dataclass(frozen=True)
class Case:
    """A record of the erasure test and whether the erasure covers it."""

    sent: Sent
    covered: bool


def _event(event_id: str, user: str, kind: str = "anything") -> bytes:
    return json.dumps({"event_id": event_id, "type": kind, "user_id": user}).encode()


def _erasure(user: str, erasure_id: str) -> bytes:
    return encode_event(
        UserErased(
            event_id=f"erase-{erasure_id}", user_id=user, session_id="-",
            occurred_at=ERASED_AT, erasure_id=erasure_id,
        )
    )


def _before_erasure(settings: Settings) -> list[Case]:
    """Ann's and bob's records on every topic, all before ann's erasure."""
    topics = Topics.from_settings(settings)
    changelog = archived_topics(settings)[-1]
    t = DAY_ONE
    letter = DeadLetter.of(
        agent="sessions", reason="invalid", topic=topics.chat, partition=0, offset=0,
        key=b"ann", value=_event("d1", "ann"),
    )
    # A wrong-key dead letter: its key is another user's, its original event is ann's.
    misfiled = DeadLetter.of(
        agent="sessions", reason="wrong key", topic=topics.chat, partition=0, offset=1,
        key=b"zoe", value=_event("d2", "ann"),
    )
    return [
        Case(Sent(topics.chat, b"ann", _event("a1", "ann", "message_added"), t), True),
        Case(Sent(topics.chat, b"bob", _event("b1", "bob", "message_added"), t), False),
        Case(Sent(topics.consolidation, b"ann", _event("a2", "ann"), t + timedelta(seconds=1)), True),
        Case(Sent(topics.memories, b"ann", _event("a3", "ann"), t + timedelta(seconds=2)), True),
        Case(Sent(changelog, json.dumps("ann\x1fs1").encode(), b"state", t), True),
        Case(Sent(changelog, json.dumps("bob\x1fs1").encode(), b"state", t), False),
        Case(Sent(topics.deadletters, b"ann", letter.model_dump_json().encode(), t), True),
        # The last dead letter until the sink restarts: it resumes after a blanked record.
        Case(Sent(topics.deadletters, b"zoe", misfiled.model_dump_json().encode(), t), True),
        Case(Sent(topics.accesses, b"ann", _event("a4", "ann"), t + timedelta(seconds=3)), True),
    ]


def _around_erasure(settings: Settings) -> list[Case]:
    """Records the sink reads with the erasure: buffered together, then flushed."""
    topics = Topics.from_settings(settings)
    changelog = archived_topics(settings)[-1]
    after = ERASED_AT + timedelta(seconds=1)
    return [
        # Before the erasure on its own partition, though stamped after it: offsets decide.
        Case(Sent(topics.memories, b"ann", _event("a5", "ann"), after), True),
        Case(Sent(topics.accesses, b"ann", _event("a6", "ann"), ERASED_AT - timedelta(seconds=9)), True),
        Case(Sent(topics.chat, b"ann", _erasure("ann", "e1"), ERASED_AT), False),
        Case(Sent(topics.memories, b"ann", _erasure("ann", "e1"), ERASED_AT), False),
        # A returning user starts afresh: after the erasure on the chat partition (offsets
        # decide, even with an earlier stamp), and after its time elsewhere.
        Case(Sent(topics.chat, b"ann", _event("a7", "ann", "message_added"), ERASED_AT - timedelta(seconds=5)), False),
        Case(Sent(topics.consolidation, b"ann", _event("a8", "ann"), after), False),
        Case(Sent(changelog, json.dumps("ann\x1fs1").encode(), None, after), False),
        # A tie with the erasure's time is covered: an erasure errs on the side of removal.
        Case(Sent(topics.accesses, b"ann", _event("a9", "ann"), ERASED_AT), True),
        Case(Sent(topics.accesses, b"bob", _event("b2", "bob"), ERASED_AT - timedelta(seconds=1)), False),
        # An erasure of bob keyed by ann: the agents dead-letter it, so it erases nobody.
        Case(Sent(topics.chat, b"ann", _erasure("bob", "forged"), ERASED_AT), False),
    ]


async def _create_changelog(settings: Settings) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.broker)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(archived_topics(settings)[-1], settings.partitions, 1)])
    finally:
        await admin.close()


def _archived_by_position(directory: Path) -> dict[tuple[str, int], tuple[object, ...]]:
    rows = duckdb.sql(
        f"""
        SELECT topic, "offset", key, value, user_id, event_id
        FROM read_parquet('{directory}/**/*.parquet', hive_partitioning = true)
        """
    ).fetchall()
    return {(row[0], row[1]): row[2:] for row in rows}


async def _check_blanked(settings: Settings, directory: Path, cases: list[Case]) -> None:
    """Every covered record is blank in ``directory``, every other one is as it was sent."""
    logged = {
        (r.topic, r.key, r.value, r.timestamp): r.offset
        for topic in archived_topics(settings)
        for r in await read_topic(settings, topic)
    }
    archived = _archived_by_position(directory)
    for case in cases:
        sent = case.sent
        offset = logged[(sent.topic, sent.key, sent.value, int(sent.timestamp.timestamp() * 1000))]
        key, value, user_id, event_id = archived[(sent.topic, offset)]
        if case.covered:
            assert (key, value, user_id, event_id) == (None, None, None, None), case
        else:
            assert (key, value) == (sent.key, sent.value), case


async def test_the_sink_and_a_rebuild_blank_an_erased_users_earlier_records_alike(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    settings = settings_factory(partitions=1, archive_flush_s=3.0, archive_batch_size=1000)
    await ensure_topics(settings)
    await _create_changelog(settings)
    before, around = _before_erasure(settings), _around_erasure(settings)
    async with _sink(settings) as sink:
        await _produce(settings, [case.sent for case in before])
        await _until_archived(settings, sink, await _log_ends(settings))
        # The erasure arrives with records of ann the sink buffers beside it: the sink
        # blanks those as it writes them, and the files it wrote before.
        await _produce(settings, [case.sent for case in around])
        await _until_archived(settings, sink, await _log_ends(settings))
    live = live_archive_dir(settings)
    await _check_blanked(settings, live, before + around)

    # A rebuild from the log blanks the same records: the two archives are identical.
    rebuilt = tmp_path / "rebuilt"
    await rebuild_archive(settings, rebuilt)
    await _check_blanked(settings, rebuilt, before + around)
    assert archive_fingerprint(rebuilt) == archive_fingerprint(live)
    # So is a past archive from before the erasure: what was erased stays erased.
    cut = tmp_path / "until"
    await rebuild_archive(settings, cut, until=DAY_ONE + timedelta(hours=1))
    await _check_blanked(settings, cut, before)
    assert sum(archive_positions(cut).values()) == len(before)

    # Restarted, the sink resumes after a blanked last record (not a lost log) and keeps
    # applying the archived erasure to what it archives from then on.
    topics = Topics.from_settings(settings)
    late = [
        Case(Sent(topics.deadletters, b"ann", _event("a10", "ann"), ERASED_AT - timedelta(minutes=1)), True),
        Case(Sent(topics.accesses, b"bob", _event("b3", "bob"), ERASED_AT), False),
    ]
    async with _sink(settings) as sink:
        await _produce(settings, [case.sent for case in late])
        await _until_archived(settings, sink, await _log_ends(settings))
    await _check_blanked(settings, live, before + around + late)
    verified = tmp_path / "verify"
    await rebuild_archive(settings, verified)
    assert archive_fingerprint(verified) == archive_fingerprint(live)
