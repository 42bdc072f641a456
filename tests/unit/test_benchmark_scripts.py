"""Every benchmark script imports: one that moved a helper must not break another that used
it (benchmarks are never run as tests, so nothing else would notice)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("name", sorted(p.stem for p in BENCHMARKS.glob("*.py")))
def test_the_benchmark_module_imports(name: str) -> None:
    importlib.import_module(name)  # benchmarks/ is on pytest's pythonpath
