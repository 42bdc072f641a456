"""The documentation as the tests read it: README.md and the site's pages (docs/, in the order
of mkdocs.yml's nav), and their code blocks, found by a CommonMark parser.

The convention (docs/tests.md, "Code blocks that run"): a ``python`` block is a whole script
and a ``bash`` block a few commands, and both run, unless the line before the block is an HTML
comment ``<!-- not run: why -->``; ``jsonl`` blocks hold events, ``json`` and ``toml`` blocks
documents of their kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<why>.+?)\s*-->\s*$")
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$')
#: Languages whose blocks run (unless marked not run).
RUNNABLE = ("python", "bash")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its text, and why it does not run
    (``None``: it runs, if its language is one that does)."""

    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    not_run: str | None

    @property
    def name(self) -> str:
        """``docs/page.md:12``: how a test names the block."""
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUNNABLE and self.not_run is None


def site_pages() -> list[Path]:
    """The site's pages in the order of mkdocs.yml's nav."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    return [DOCS / page for page in _nav_pages(config["nav"])]


def _nav_pages(entries: Any) -> Iterator[str]:
    for entry in entries:
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, dict):
            for value in entry.values():
                yield from ([value] if isinstance(value, str) else _nav_pages(value))


def documents() -> list[Path]:
    """README.md, then every page of the site (a page that only includes other files,
    ``--8<-- "benchmarks/README.md"``, stands for them)."""
    return [README, *(source for page in site_pages() for source in _sources(page))]


def _sources(page: Path) -> list[Path]:
    lines = page.read_text(encoding="utf-8").split("\n")
    included = [SNIPPET.match(line) for line in lines if line.strip()]
    if included and all(included):
        return [ROOT / match.group(1) for match in included if match]
    return [page]


def code_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of one Markdown file, in order."""
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))
    blocks = []
    for before, token in zip([None, *tokens], tokens, strict=False):
        if token.type != "fence" or token.map is None:
            continue
        marker = (
            NOT_RUN.match(before.content.strip())
            if before is not None and before.type == "html_block"
            and before.map is not None and before.map[1] == token.map[0]
            else None
        )
        blocks.append(
            Block(
                path=path,
                line=token.map[0] + 1,
                language=token.info.split()[0] if token.info.strip() else "",
                code=token.content,
                not_run=marker.group("why") if marker else None,
            )
        )
    return blocks


def all_blocks() -> list[Block]:
    """Every code block of the documentation, README first, then the pages in nav order."""
    return [block for path in documents() for block in code_blocks(path)]
