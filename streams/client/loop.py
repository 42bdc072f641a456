"""An event loop on a thread of its own (:class:`LoopThread`): how the synchronous client and
the synchronous agent run their async halves, from plain code or from code already inside a
running loop (a notebook, a web handler)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """A daemon thread running one event loop; :meth:`run` hands it a coroutine and waits.

    Ctrl-C while waiting cancels the coroutine and lets it unwind on its loop before the
    ``KeyboardInterrupt`` goes on. :meth:`stop` ends the thread; a stopped loop runs nothing.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self.stopped = False

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and return its result (or raise its error).

        Raises
        ------
        RuntimeError
            The loop was stopped.
        """
        if self.stopped:
            coroutine.close()
            raise RuntimeError(f"{self.name} is closed")
        task = asyncio.run_coroutine_threadsafe(_spawn(coroutine), self._loop).result()
        finished = threading.Event()
        self._loop.call_soon_threadsafe(task.add_done_callback, lambda _: finished.set())
        try:
            finished.wait()
        except KeyboardInterrupt:
            self._loop.call_soon_threadsafe(task.cancel)
            finished.wait()
            raise
        return task.result()

    def stop(self) -> None:
        """Stop the loop and join the thread; idempotent."""
        if self.stopped:
            return
        self.stopped = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


async def _spawn(coroutine: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """``coroutine`` as a task of the running loop."""
    return asyncio.ensure_future(coroutine)
