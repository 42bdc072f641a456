"""Guards for the Tansu quirks that memstream.streams.kafka.tansu works around.

Tests marked with the ``tansu_only`` fixture check Tansu's behaviour itself. They are meant
to fail the day Tansu changes, which tells us a workaround can go. The recovery test checks
the outcome that matters (exact faust tables after restarts) on any broker.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition
from harness import wait_for, wait_for_async

from memstream.models.settings import Settings
from memstream.streams.kafka import tansu
from memstream.streams.kafka.tansu import (
    install_tansu_workarounds,
    prepare_for_broker,
    true_end_offsets,
    workarounds_installed,
)

SettingsFactory = Callable[..., Settings]


async def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, replication_factor=1)])
    finally:
        await admin.close()


async def _produce_one_batch(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    """Send ``values`` to partition 0 as one produce batch; return their offsets."""
    # A long linger and a flush: every record goes out in the same batch.
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=500)
    await producer.start()
    try:
        futures = [await producer.send(topic, value, partition=0) for value in values]
        await producer.flush()
        return [(await future).offset for future in futures]
    finally:
        await producer.stop()


# --- the patches themselves ------------------------------------------------------------------


def test_install_is_idempotent_and_guarded_by_version(monkeypatch: pytest.MonkeyPatch) -> None:
    assert install_tansu_workarounds() is True
    assert install_tansu_workarounds() is True
    assert workarounds_installed()

    monkeypatch.setattr(tansu, "version", lambda name: "0.16.0")
    with pytest.raises(RuntimeError, match=r"faust-streaming 0\.15\.x, aiokafka 0\.14\.x"):
        install_tansu_workarounds()


def test_prepare_for_broker_leaves_apache_kafka_alone(settings_factory: SettingsFactory) -> None:
    assert prepare_for_broker(settings_factory(broker_kind="kafka")) is False
    assert prepare_for_broker(settings_factory(broker_kind="tansu")) is True


# --- (a) offsets -----------------------------------------------------------------------------


async def test_list_offsets_lags_the_fetch_high_watermark(
    tansu_only: None, settings_factory: SettingsFactory
) -> None:
    """ListOffsets(LATEST) answers ``base offset of the newest batch + 1`` on Tansu.

    When this fails because ``end_offsets()`` equals the high watermark, Tansu has fixed
    ListOffsets: drop the ``_highwaters`` patch in memstream.streams.kafka.tansu (and this test).
    """
    settings = settings_factory()
    topic = f"{settings.topic_prefix}.offsets"
    await _create_topic(settings.broker, topic, partitions=2)  # partition 1 stays empty
    first = await _produce_one_batch(settings.broker, topic, [f"a{i}".encode() for i in range(10)])
    assert first == list(range(10))

    written, empty = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.broker, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([written, empty])
        listed = await consumer.end_offsets([written, empty])
        consumer.seek(written, 9)
        last = await consumer.getmany(written, timeout_ms=5000)
        highwater = consumer.highwater(written)
    finally:
        await consumer.stop()

    assert [record.value for record in last[written]] == [b"a9"], "last record not readable"
    assert highwater == 10
    assert listed[written] < highwater, (
        f"Tansu's ListOffsets now returns the true end offset ({listed[written]}): the "
        "faust _highwaters patch in memstream.streams.kafka.tansu can be dropped"
    )
    assert listed[empty] == 0

    assert await true_end_offsets(settings.broker, [written, empty]) == {written: 10, empty: 0}
    second = await _produce_one_batch(settings.broker, topic, [f"b{i}".encode() for i in range(5)])
    assert second == list(range(10, 15))
    assert await true_end_offsets(settings.broker, [written]) == {written: 15}


# --- (b) group timing ------------------------------------------------------------------------


async def _delivery_after_a_quiet_spell(bootstrap: str, topic: str, wait_ms: int) -> float:
    """Seconds from a record's acknowledged produce to a waiting consumer receiving it, the
    consumer fetching with ``wait_ms``, the worst of three."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=wait_ms
    )
    await producer.start()
    await consumer.start()
    try:
        await producer.send_and_wait(topic, b"first", partition=0)
        await consumer.getone()
        worst = 0.0
        for _ in range(3):
            await asyncio.sleep(0.3)  # the consumer is inside a fetch that found nothing
            sent = time.monotonic()
            await producer.send_and_wait(topic, b"next", partition=0)
            await consumer.getone()
            worst = max(worst, time.monotonic() - sent)
        return worst
    finally:
        await consumer.stop()
        await producer.stop()


@pytest.mark.usefixtures("tansu_only")
async def test_a_fetch_is_held_for_its_whole_max_wait(broker_address: str) -> None:
    # The quirk behind MEMSTREAM_FETCH_MAX_WAIT_MS: a record that arrives while a fetch
    # waits is delivered when the wait ends, not at once (Apache Kafka answers at once), on a
    # topic of several partitions like memstream's (one of a single partition is answered
    # early). Fails the day Tansu answers early: the setting can go back to faust's default.
    topic = f"quirk-fetch-{time.monotonic_ns()}"
    await _create_topic(broker_address, topic, 4)
    held = await _delivery_after_a_quiet_spell(broker_address, topic, 3000)
    short = await _delivery_after_a_quiet_spell(broker_address, topic, 100)
    assert held > 1.5 and short < 1.0, (held, short)


def test_the_worker_consumer_fetches_with_the_setting(settings_factory: SettingsFactory) -> None:
    settings = settings_factory(broker_kind="tansu", fetch_max_wait_ms=75)
    assert prepare_for_broker(settings) and workarounds_installed()
    thread = object.__new__(tansu.faust_aiokafka.AIOKafkaConsumerThread)
    made = []
    original = tansu._create_worker_consumer
    try:
        tansu._create_worker_consumer = (  # type: ignore[assignment]
            lambda self, transport: made.append(1) or SimpleNamespace(_fetch_max_wait_ms=1500)
        )
        consumer = thread._create_worker_consumer(None)  # type: ignore[arg-type]
    finally:
        tansu._create_worker_consumer = original
    assert made and consumer._fetch_max_wait_ms == 75


async def _join(bootstrap: str, topic: str, group: str) -> tuple[float, AIOKafkaConsumer]:
    """Start a group member; return the seconds until it held partitions, and the member."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        session_timeout_ms=10_000,
        heartbeat_interval_ms=2_000,
        auto_offset_reset="earliest",
    )
    started = time.monotonic()
    await consumer.start()

    async def assigned() -> set[TopicPartition]:
        if not consumer.assignment():
            await consumer.getmany(timeout_ms=100)  # the pause between two looks
        return consumer.assignment()

    try:
        await wait_for_async(assigned, "the member to get partitions", 30, interval_s=0)
    except AssertionError:
        await consumer.stop()
        pytest.fail("the member got no partitions within 30 s")
    return time.monotonic() - started, consumer


async def test_group_joins_and_rejoins_within_a_session_timeout(
    tansu_only: None, settings_factory: SettingsFactory
) -> None:
    """With a 10 s session, Tansu answers JoinGroup after ~5 s.

    The rejoin right after a clean stop is only that fast because the LeaveGroup patch lets
    the generation-0 member leave; without it the new member waits ~18 s.
    """
    install_tansu_workarounds()
    settings = settings_factory()
    topic, group = f"{settings.topic_prefix}.group", f"{settings.topic_prefix}.group"
    await _create_topic(settings.broker, topic, partitions=4)

    first_join, first = await _join(settings.broker, topic, group)
    generation = first._coordinator.generation
    await first.stop()
    rejoin, second = await _join(settings.broker, topic, group)
    await second.stop()

    assert first_join < 8.0, f"first join took {first_join:.1f} s"
    assert rejoin < 8.0, f"rejoin after a clean stop took {rejoin:.1f} s: LeaveGroup patch broken?"
    assert generation == 0, (
        f"Tansu's first group generation is now {generation}: aiokafka sends LeaveGroup "
        "itself, and the _maybe_leave_group patch in memstream.streams.kafka.tansu can be dropped"
    )


# --- (c) no idempotent producer --------------------------------------------------------------


async def test_idempotent_producer_cannot_start(
    tansu_only: None, settings_factory: SettingsFactory
) -> None:
    """InitProducerId fails, which is why faust_settings_for forces at_least_once."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings_factory().broker, enable_idempotence=True
    )
    try:
        await asyncio.wait_for(producer.start(), 20)
    except KafkaError:
        pass
    else:
        pytest.fail(
            "an idempotent producer started: Tansu now supports InitProducerId, so "
            "exactly_once may work; revisit processing_guarantee in faust_settings_for"
        )
    finally:
        await producer.stop()


# --- (d) faust table recovery ----------------------------------------------------------------

# A faust worker that counts events per key into a Table (memory store: every start recovers
# the table from its changelog), and writes the table to STATE once recovery is over.
_COUNTER_WORKER = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path

    import faust

    from memstream.models.settings import Settings
    from memstream.streams.kafka.tansu import faust_settings_for, prepare_for_broker

    settings = Settings()
    STATE = Path(os.environ["COUNTER_STATE"])
    prepare_for_broker(settings)
    settings.faust_dir.mkdir(parents=True, exist_ok=True)
    app = faust.App(
        f"{settings.topic_prefix}.counter",
        broker=f"kafka://{settings.broker}",
        store="memory://",
        datadir=str(settings.faust_dir),
        topic_partitions=settings.partitions,
        # Batch the changelog too: the loss needed multi-record batches.
        producer_linger=0.05,
        **faust_settings_for(settings),
    )
    events = app.topic(os.environ["COUNTER_TOPIC"], key_serializer="raw", value_serializer="raw")
    counts = app.Table("counts", default=int, partitions=settings.partitions)

    @app.agent(events)
    async def count(stream):
        async for event in stream.events():
            key = event.key.decode()
            counts[key] += 1

    @app.timer(0.2)
    async def write_state():
        if app.rebalancing or not app.tables.recovery.completed.is_set():
            return
        tmp = STATE.with_suffix(".tmp")
        tmp.write_text(json.dumps(dict(counts.items())))
        os.replace(tmp, STATE)

    if __name__ == "__main__":
        app.main()
    """
)


def _settings_env(settings: Settings) -> dict[str, str]:
    return {
        "MEMSTREAM_BROKER": settings.broker,
        "MEMSTREAM_BROKER_KIND": settings.broker_kind,
        "MEMSTREAM_TOPIC_PREFIX": settings.topic_prefix,
        "MEMSTREAM_PARTITIONS": str(settings.partitions),
        "MEMSTREAM_SESSION_TIMEOUT_S": str(settings.session_timeout_s),
        "MEMSTREAM_HEARTBEAT_INTERVAL_S": str(settings.heartbeat_interval_s),
        "MEMSTREAM_DATA_DIR": str(settings.data_dir),
    }


def _wait_for_state(
    state: Path,
    worker: subprocess.Popen[bytes],
    log: Path,
    done: str,
    ok: Callable[[dict[str, int]], bool],
    timeout: float,
) -> dict[str, int]:
    """Poll the worker's state file until ``ok(state)`` holds; fail with the log if not."""
    last: dict[str, int] = {}

    def counts() -> dict[str, int] | None:
        nonlocal last
        if worker.poll() is not None:
            raise AssertionError(f"the worker exited with {worker.poll()}")
        if not state.exists():
            return None
        last = json.loads(state.read_text())
        return last

    try:
        return wait_for(
            counts, f"the worker to have {done}", timeout, until=lambda c: c is not None and ok(c), interval_s=0.1
        )
    except AssertionError:
        tail = log.read_text(errors="replace")[-3000:]
        pytest.fail(f"worker never {done} (last state {last}, exit {worker.poll()}):\n{tail}")


async def _produce_events(bootstrap: str, topic: str, keys: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    await producer.start()
    try:
        for key in keys:
            await producer.send(topic, b"1", key=key)
        await producer.flush()
    finally:
        await producer.stop()


def test_faust_table_recovers_exactly_after_restarts(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    """Count 500 batched events per round, stop cleanly, restart: the table must be exact.

    Without the highwater patch this fails on Tansu, usually at the first restart: recovery
    stops at the ListOffsets answer and loses the rest of the last changelog batch.
    """
    # A 6 s session keeps each join at ~3 s on Tansu; a 2-core CI box still heartbeats in time.
    settings = settings_factory(session_timeout_s=6.0, heartbeat_interval_s=1.5)
    topic = f"{settings.topic_prefix}.events"
    asyncio.run(_create_topic(settings.broker, topic, settings.partitions))
    script = tmp_path / "counter_worker.py"
    script.write_text(_COUNTER_WORKER)
    state = tmp_path / "state.json"
    env = {**os.environ, **_settings_env(settings), "COUNTER_STATE": str(state)}
    env["COUNTER_TOPIC"] = topic

    keys = [f"k{i}".encode() for i in range(5)]
    expected: Counter[str] = Counter()
    restarts, per_round = 3, 500
    for round_number in range(restarts + 1):
        state.unlink(missing_ok=True)
        log = tmp_path / f"worker-{round_number}.log"
        with log.open("wb") as log_file:
            worker = subprocess.Popen(
                [sys.executable, str(script), "worker", "--without-web", "-l", "warn"],
                cwd=tmp_path,
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        try:
            recovered = _wait_for_state(
                state, worker, log, "finished recovery", lambda c: True, timeout=45
            )
            assert recovered == dict(expected), f"round {round_number}: recovered table differs"

            batch = [keys[i % len(keys)] for i in range(per_round)]
            asyncio.run(_produce_events(settings.broker, topic, batch))
            expected.update(key.decode() for key in batch)
            _wait_for_state(
                state, worker, log, "counted every event", lambda c: c == expected, timeout=30
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
                pytest.fail(f"round {round_number}: worker ignored SIGTERM for 30 s")
    assert sum(expected.values()) == (restarts + 1) * per_round
