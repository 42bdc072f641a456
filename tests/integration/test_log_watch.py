"""The log watch's checks on the real broker: a reader of the log that starts again (the
archive sink when a topic appears, the projector on every rebalance) keeps one mark
consumer, instead of leaving one unclosed per start ("Unclosed AIOKafkaConsumer" errors in
the worker's log)."""

from __future__ import annotations

import gc
import warnings
from typing import Any

from memstream.streams.runtime.logid import LogWatch, claim_log


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
