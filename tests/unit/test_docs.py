"""README is where users look things up: every setting under its variable, every module in
the layout, and no file or module it names that is gone."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from memstream.models.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"
#: Files of a web page (the memory inspector's), listed in the layout like modules.
PAGE_SUFFIXES = (".js", ".html", ".css")


def test_every_setting_is_listed_under_its_variable() -> None:
    text = README.read_text()
    missing = [
        f"MEMSTREAM_{name.upper()}" for name in Settings.model_fields
        if f"`MEMSTREAM_{name.upper()}`" not in text
    ]
    assert missing == []


def _layout_block(text: str) -> str:
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```\n", 2)[1]


def test_the_layout_lists_every_module_and_nothing_that_is_gone() -> None:
    root = README.parent
    listed = {line.split()[0] for line in _layout_block(README.read_text()).splitlines() if line}
    modules = {
        f"{path.parent.relative_to(root).as_posix()}/" if path.name == "__init__.py"
        else path.relative_to(root).as_posix()
        for folder in ("models", "projections", "streams")
        for path in (root / folder).rglob("*.py")
        if path.name != "__main__.py"
    }
    # The memory inspector's page is code too: each of its files, and their folder.
    page = {
        path.relative_to(root)
        for folder in ("models", "projections", "streams")
        for suffix in PAGE_SUFFIXES
        for path in (root / folder).rglob(f"*{suffix}")
    }
    modules |= {path.as_posix() for path in page} | {f"{path.parent.as_posix()}/" for path in page}
    assert sorted(modules - listed) == [] and sorted(listed - modules) == []


def test_every_file_and_module_the_readme_names_exists() -> None:
    text = README.read_text()
    root = README.parent
    paths = set(re.findall(r"(?<![\w/.])((?:models|streams|projections|benchmarks|tests)/[\w/]+\.py)", text))
    assert sorted(p for p in paths if not (root / p).exists()) == []
    unknown = [
        dotted
        for dotted in sorted(set(re.findall(r"memstream\.(?:models|streams|projections)(?:\.\w+)+", text)))
        if not _resolves(dotted)
    ]
    assert unknown == []


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module, or an attribute of the longest importable prefix."""
    parts = dotted.split(".")
    for split in range(len(parts), 2, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False
