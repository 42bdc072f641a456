"""What the benchmark scripts share: progress lines, and a clean stop on SIGTERM.

The scripts run as ``python benchmarks/NAME.py``, so this module is imported as ``runner``.
"""

from __future__ import annotations

import shutil
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any, Protocol


def log(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the table (or the JSON)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Raised in the main thread, so the script's finally blocks stop the broker and the
    # children it started.
    raise SystemExit(128 + signum)


def exit_on_sigterm() -> None:
    """Make SIGTERM end the script like an exception, running its clean-up."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)


class Runnable(Protocol):
    def run(self) -> Any: ...

    def close(self) -> None: ...


def run_to_end(bench: Runnable) -> Any | None:
    """``bench.run()``, then ``bench.close()`` whatever happens (Ctrl-C, SIGTERM, an error);
    None when interrupted."""
    exit_on_sigterm()
    try:
        return bench.run()
    except KeyboardInterrupt:
        log("interrupted; stopping what this run started")
        return None
    finally:
        bench.close()


def release(broker: Any, workdir: Path, *, keep: bool) -> None:
    """Stop ``broker`` (an EmbeddedBroker, or None) and remove ``workdir`` unless ``keep``."""
    if broker is not None:
        broker.stop()
    if keep:
        log(f"kept logs and data in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
