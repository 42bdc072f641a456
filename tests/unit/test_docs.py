"""The documentation is where users look things up (README.md for the first hour, docs/ for
the rest): the site builds with no broken link or anchor and loads nothing from elsewhere,
every setting is listed under its variable, every module in the layout, no file or module a
page names is gone, and every code block is what it says it is (a script that compiles, events
that validate, JSON, TOML, ``memstream`` command lines the command accepts). The blocks that
run are run by tests/integration/test_docs_examples.py."""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from docs_pages import (
    DOCS,
    README,
    ROOT,
    RUNNABLE,
    Block,
    all_blocks,
    code_blocks,
    documents,
)
from markdown.extensions.toc import slugify
from markdown_it import MarkdownIt

from memstream.models.codec import decode_event
from memstream.models.settings import Settings
from memstream.streams.cli.command import build_parser

#: Files of a web page (the memory inspector's), listed in the layout like modules.
PAGE_SUFFIXES = (".js", ".html", ".css")
#: The most lines README.md may have: what a newcomer needs in the first hour, no more.
README_MAX_LINES = 400
BLOCKS = all_blocks()
#: The folders whose files a page may name, and a dotted name of memstream's modules.
FOLDERS = "models|streams|projections|benchmarks|tests"
MODULE = r"memstream\.(?:models|streams|projections)(?:\.\w+)+"
#: What a page loads: scripts, images, stylesheets and icons.
LOADED = r'<(?:script|img)[^>]*\ssrc="([^"]+)"|<link[^>]*\shref="([^"]+)"'


def blocks_in(*languages: str) -> list[Block]:
    return [block for block in BLOCKS if block.language in languages]


def test_the_site_builds_strictly_and_loads_nothing_from_elsewhere(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    # Every script, stylesheet, font and image comes with the site: it reads offline.
    loaded = {
        url
        for page in site.rglob("*.html")
        for found in re.findall(LOADED, page.read_text())
        for url in found
        if url
    }
    assert sorted(url for url in loaded if urlsplit(url).scheme or url.startswith("//")) == []


def test_readme_is_a_first_hour_read_and_its_links_lead_somewhere() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    for command in ("make demo", "make test", "make docs"):
        assert command in text
    broken = []
    for href in _links(text):
        target, _, anchor = href.partition("#")
        if urlsplit(href).scheme or not target:
            continue
        path = (README.parent / target).resolve()
        if not path.exists() or (anchor and anchor not in _anchors(path)):
            broken.append(href)
    assert broken == []


def _links(markdown: str) -> list[str]:
    found = []
    for token in MarkdownIt("commonmark").parse(markdown):
        for child in token.children or []:
            if child.type == "link_open":
                found.append(str(child.attrs["href"]))
    return found


def _anchors(page: Path) -> set[str]:
    """The ids the site gives the headings of ``page`` (toc's slugify of their text)."""
    tokens = MarkdownIt("commonmark").parse(page.read_text())
    return {
        slugify(re.sub(r"[`*]", "", tokens[i + 1].content), "-")
        for i, token in enumerate(tokens)
        if token.type == "heading_open"
    }


def test_every_setting_is_listed_under_its_variable() -> None:
    text = (DOCS / "settings.md").read_text()
    missing = [
        f"MEMSTREAM_{name.upper()}" for name in Settings.model_fields
        if f"`MEMSTREAM_{name.upper()}`" not in text
    ]
    assert missing == []


def _layout_block() -> str:
    """The listing of docs/layout.md: the one place that names every module."""
    listing = next(block for block in code_blocks(DOCS / "layout.md") if block.language == "text")
    return listing.code


def test_the_layout_lists_every_module_and_nothing_that_is_gone() -> None:
    listed = {line.split()[0] for line in _layout_block().splitlines() if line}
    modules = {
        f"{path.parent.relative_to(ROOT).as_posix()}/" if path.name == "__init__.py"
        else path.relative_to(ROOT).as_posix()
        for folder in ("models", "projections", "streams")
        for path in (ROOT / folder).rglob("*.py")
        if path.name != "__main__.py"
    }
    # The memory inspector's page is code too: each of its files, and their folder.
    page = {
        path.relative_to(ROOT)
        for folder in ("models", "projections", "streams")
        for suffix in PAGE_SUFFIXES
        for path in (ROOT / folder).rglob(f"*{suffix}")
    }
    modules |= {path.as_posix() for path in page} | {f"{path.parent.as_posix()}/" for path in page}
    assert sorted(modules - listed) == [] and sorted(listed - modules) == []


@pytest.mark.parametrize("path", documents(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_file_and_module_the_docs_name_exists(path: Path) -> None:
    text = path.read_text()
    paths = set(re.findall(rf"(?<![\w/.])((?:{FOLDERS})/[\w/]+\.py)", text))
    # A placeholder in capitals (benchmarks/NAME.py) names no file.
    gone = [p for p in paths if not (ROOT / p).exists() and not Path(p).stem.isupper()]
    assert sorted(gone) == []
    unknown = [
        dotted
        for dotted in sorted(set(re.findall(MODULE, text)))
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


@pytest.mark.parametrize("block", blocks_in("python"), ids=lambda block: block.name)
def test_every_python_block_is_a_script_that_compiles(block: Block) -> None:
    # A whole script: an await outside a coroutine, or a name it never defines, does not run.
    compile(block.code, block.name, "exec")


@pytest.mark.parametrize("block", blocks_in("jsonl"), ids=lambda block: block.name)
def test_every_jsonl_line_is_one_valid_event(block: Block) -> None:
    lines = block.code.splitlines()
    assert lines and all(line.strip() for line in lines)
    for line in lines:
        decode_event(line)  # raises InvalidEvent with the reason


@pytest.mark.parametrize("block", blocks_in("json", "toml"), ids=lambda block: block.name)
def test_every_json_and_toml_block_parses(block: Block) -> None:
    if block.language == "json":
        json.loads(block.code)
    else:
        tomllib.loads(block.code)


@pytest.mark.parametrize("block", blocks_in("bash"), ids=lambda block: block.name)
def test_every_memstream_command_line_in_the_docs_is_one_the_command_accepts(
    block: Block, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = build_parser()
    for argv in _memstream_commands(block.code):
        try:
            parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"memstream {shlex.join(argv)}: {capsys.readouterr().err.strip()}")


def _memstream_commands(script: str) -> list[list[str]]:
    """The arguments of each ``memstream`` command of a shell script (comments left out; a
    command ends at a pipe, ``&&``, ``;`` or a redirection)."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if "memstream" not in words:
            continue
        rest = words[words.index("memstream") + 1:]
        ends = [i for i, word in enumerate(rest) if word in {"|", "||", "&&", ";", "&", ">", ">>"}]
        commands.append(rest[: ends[0]] if ends else rest)
    return commands


def test_a_block_that_does_not_run_is_one_that_would() -> None:
    # The marker says why a script or a command is not run; elsewhere it would mean nothing.
    misplaced = [block.name for block in BLOCKS if block.not_run and block.language not in RUNNABLE]
    assert misplaced == []
