"""Dependencies point one way: models <- projections <- streams, and no module imports
itself back through others.

Every import counts, at module level or inside a function: a lazy import is still a
dependency, and a cycle through one only hides until the day it runs first.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import memstream.models
import memstream.projections
import memstream.streams

PACKAGES = {
    "models": Path(memstream.models.__file__).parent,
    "projections": Path(memstream.projections.__file__).parent,
    "streams": Path(memstream.streams.__file__).parent,
}
#: What each package may not import: memstream's outer layers, and for the domain the
#: libraries that do I/O.
FORBIDDEN = {
    "models": (
        "memstream.streams", "memstream.projections", "faust", "aiokafka", "lancedb", "duckdb",
        "openai", "pyarrow",
    ),
    "projections": ("memstream.streams", "faust", "aiokafka"),
    "streams": (),
}


def modules() -> dict[str, Path]:
    """Every memstream module, by dotted name."""
    found = {}
    for package, directory in PACKAGES.items():
        for path in directory.rglob("*.py"):
            parts = path.relative_to(directory).with_suffix("").parts
            name = ".".join(("memstream", package, *parts)).removesuffix(".__init__")
            found[name] = path
    return found


def imports(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, wherever the import statement is."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def graph() -> dict[str, set[str]]:
    """memstream module -> the memstream modules it imports."""
    names = modules()
    return {
        name: {target for target in imports(path) if target in names and target != name}
        for name, path in names.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_package_imports_only_inward() -> None:
    offenders = []
    for name, path in modules().items():
        package = name.split(".")[1]
        offenders += [
            f"{name}: {target}"
            for target in imports(path)
            if target.startswith(FORBIDDEN[package])
        ]
    assert offenders == []


def test_no_module_imports_itself_back() -> None:
    assert cycles(graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    # The check itself: a -> b -> c -> a is one component, d alone is none.
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert cycles(edges) == [["a", "b", "c"]]


def test_every_module_is_seen() -> None:
    names = modules()
    # The graph covers the three packages, and the modules the layers rest on.
    assert {name.split(".")[1] for name in names} == set(PACKAGES)
    assert {"memstream.models.ranking", "memstream.models.lifecycle", "memstream.models.topics",
            "memstream.projections.archive_format"} <= set(names)
