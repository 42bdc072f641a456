"""The domain package imports no infrastructure."""

from __future__ import annotations

import ast
from pathlib import Path

import memstream.models

MODELS_DIR = Path(memstream.models.__file__).parent
FORBIDDEN = ("memstream.streams", "memstream.projections", "faust", "aiokafka", "lancedb", "duckdb", "openai")


def test_models_import_nothing_from_streams_projections_or_io_libraries() -> None:
    offenders = []
    for path in MODELS_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith(FORBIDDEN)]
    assert offenders == []
