"""The log watch's checks on the real broker: a reader of the log that starts again (the
archive sink when a topic appears, the projector on every rebalance) keeps one mark
consumer, instead of leaving one unclosed per start ("Unclosed AIOKafkaConsumer" errors in
the worker's log)."""

from __future__ import annotations

import contextlib
import gc
import warnings
from pathlib import Path
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError
from harness import wait_for_async

from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.kafka.logid import LogWatch, MarkReader, claim_log
from memstream.streams.kafka.topics import ensure_topics


async def test_a_reader_started_again_keeps_one_mark_consumer(settings_factory: Any) -> None:
    settings = settings_factory()
    await claim_log(settings)
    watch = LogWatch(settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(3):  # the archive sink started three times
            assert await watch.verifier("archive")()
        assert await watch.verifier("projector")()
        gc.collect()
    unclosed = [w for w in caught if "Unclosed AIOKafkaConsumer" in str(w.message)]
    assert unclosed == []
    # Each reader still answers with its one consumer.
    assert await watch.verifier("archive")() and await watch.verifier("projector")()
    for reader in watch._readers.values():
        await reader.close()


async def test_the_mark_reader_closes_quietly_after_its_broker_went_away(
    settings_factory: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # What `memstream serve` does on Ctrl-C after the broker went away: its publisher's
    # mark reader closes while its fetches fail. aiokafka let a fetch's cancellation out.
    broker = EmbeddedBroker(free_port(), log_dir=tmp_path).start()
    settings = settings_factory(broker=broker.address)
    try:
        await ensure_topics(settings)
        await claim_log(settings)
        reader = MarkReader(settings)
        assert await reader.read() is not None
    finally:
        broker.stop()
    # Fetches again, from a broker that is gone: it answers nothing, or says that the broker
    # does not answer; either way its consumer's fetches go on failing until it closes.
    with contextlib.suppress(KafkaConnectionError):
        await reader.read(timeout_s=1)
    # aiokafka reports the gone broker from its fetcher or from its metadata update,
    # whichever runs first.
    failures = ("Failed fetch", "Unable connect", "Unable to update metadata")
    await wait_for_async(
        lambda: any(f in r.getMessage() for r in caplog.records for f in failures),
        "a fetch to fail",
        30,
    )
    await reader.close()
