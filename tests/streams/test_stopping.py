"""Stopping a helper task: Ctrl-C reaches ``asyncio.run`` as a cancellation of its main
task, and must not be swallowed by that task's stop of its helpers (``memstream serve``
exited 0 without its "stopped (Ctrl-C)" line when Ctrl-C came during the follower's stop)."""

from __future__ import annotations

import asyncio

import pytest

from memstream.streams.projector.stopping import stop_task


async def _slow_to_stop() -> None:
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await asyncio.sleep(0.05)  # cleanup that takes a while, as closing a consumer does
        raise


async def test_a_helper_is_stopped_and_its_cancellation_kept_in() -> None:
    helper = asyncio.create_task(_slow_to_stop())
    await asyncio.sleep(0)
    await stop_task(helper)
    assert helper.cancelled()


async def test_an_owner_cancelled_while_it_stops_a_helper_stays_cancelled() -> None:
    helper = asyncio.create_task(_slow_to_stop())
    await asyncio.sleep(0)
    owner = asyncio.create_task(stop_task(helper))
    await asyncio.sleep(0.01)  # the owner waits for the helper's cleanup
    owner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await owner
    assert owner.cancelled()
