"""The worker's allocator tuning takes effect on glibc (this test runs on Linux/glibc)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import pyarrow as pa
from memstream.projections.allocator import tune_allocators
before = pa.default_memory_pool().backend_name
tuned = tune_allocators()
print(before, tuned, pa.default_memory_pool().backend_name)
"""


def test_tuning_moves_pyarrow_to_malloc_and_glibc_accepts_it() -> None:
    # In a child process: the tuning is for a whole process, not for this test run.
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[1:] == ["True", "system"]
    assert out[0] != "system"  # the bundled allocator was the default
