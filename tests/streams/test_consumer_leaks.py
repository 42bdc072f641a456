"""A consumer whose start or first reads fail is stopped, not leaked: aiokafka warns about
an unclosed consumer when it is collected, and a leaked one keeps its connections."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from memstream.models.settings import Settings
from memstream.streams.kafka.broker import free_port
from memstream.streams.keys.store import keystore_from_settings
from memstream.streams.service.waiting import ConsolidationWatch


def test_a_wait_that_cannot_reach_the_broker_leaves_no_consumer_open(tmp_path: Path) -> None:
    settings = Settings(broker=f"127.0.0.1:{free_port()}", data_dir=tmp_path)
    watch = ConsolidationWatch(settings, keystore_from_settings(settings), None, "ann")  # type: ignore[arg-type]
    unclosed: list[str] = []

    async def open_it() -> None:
        # aiokafka reports a consumer collected unclosed to the loop's exception handler.
        asyncio.get_running_loop().set_exception_handler(
            lambda _loop, context: unclosed.append(context.get("message", ""))
        )
        with pytest.raises(Exception):  # noqa: B017 - whatever aiokafka raises for no broker
            async with watch:
                pass
        gc.collect()
        await asyncio.sleep(0)

    asyncio.run(open_it())
    assert not [m for m in unclosed if "Unclosed" in m]
