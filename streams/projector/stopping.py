"""Stopping a helper task from the task that owns it, without swallowing a cancellation of
the owner itself."""

from __future__ import annotations

import asyncio


async def stop_task(task: asyncio.Task[object]) -> None:
    """Cancel ``task`` and wait for it to end. Its own ``CancelledError`` is expected and
    kept in; a cancellation of the task that waits goes through: Ctrl-C reaches
    ``asyncio.run`` as such a cancellation, and a stop that swallowed it would let the
    process end as if nothing had been asked of it."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
