"""What lands in site-packages: everything under memstream/, nothing bare at the top."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_installs_only_the_memstream_package_with_its_assets(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("memstream-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.startswith("memstream-")}
    assert top_level == {"memstream"}
    assert "memstream/models/events.py" in names
    # `from memstream import MemoryClient`, and typed (PEP 561).
    assert {"memstream/__init__.py", "memstream/py.typed"} <= set(names)
    assert "memstream/projections/assets/tokenizer.json" in names
    assert "memstream/streams/samples/demo.jsonl" in names
    page = {
        f"memstream/{path.relative_to(ROOT).as_posix()}"
        for path in (ROOT / "streams" / "api" / "static").iterdir()
    }
    assert "memstream/streams/api/static/index.html" in page
    assert page - set(names) == set(), "the memory inspector's files missing from the wheel"
    sources = {
        f"memstream/{path.relative_to(ROOT).as_posix()}"
        for folder in ("models", "projections", "streams")
        for path in (ROOT / folder).rglob("*.py")
    }
    assert sources - set(names) == set(), "modules missing from the wheel (pyproject packages)"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "memstream = memstream.streams.cli.command:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_top_level_package_gives_the_client_without_loading_the_workers_stack() -> None:
    """An application over HTTP imports the client only: no LanceDB, Faust, DuckDB, model."""
    script = (
        "import sys\n"
        "from memstream import AsyncMemoryClient, MemoryClient\n"
        "heavy = ('lancedb', 'faust', 'duckdb', 'onnxruntime', 'matplotlib')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, cwd=ROOT.parent
    )
    assert done.stdout.strip() == "[]"


def test_no_two_test_modules_share_a_name() -> None:
    """pytest imports test modules by their base name (the folders have no __init__): a
    second ``test_x.py`` elsewhere fails the whole run at collection."""
    names = [path.name for path in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({name for name in names if names.count(name) > 1}) == []
