"""What lands in site-packages: everything under memstream/, nothing bare at the top; and a
clone imports the same from any folder."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: A line of Python's warnings module ("file:line: Category: message").
WARNING_LINE = re.compile(r"^.*:\d+: (\w*Warning): (.*)$", re.MULTILINE)


def test_wheel_installs_only_the_memstream_package_with_its_assets(tmp_path: Path) -> None:
    # -v: pip shows the build backend's output only when verbose, setuptools' warnings with it.
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert WARNING_LINE.findall(built.stdout + built.stderr) == [], "the build printed warnings"
    (wheel,) = tmp_path.glob("memstream-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.startswith("memstream-")}
    assert top_level == {"memstream"}
    assert "memstream/models/events/envelope.py" in names
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


#: What a user's script does first, and where each part came from.
IMPORTS = (
    "import json, memstream.models.events, memstream.streams\n"
    "from memstream import MemoryClient\n"
    "print(json.dumps({'models': memstream.models.__file__, 'streams': memstream.streams.__file__,"
    " 'MemoryClient': MemoryClient.__module__, 'names': sorted(memstream.__all__)}))\n"
)


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository cloned as ``git clone`` names it, a folder ``memstream``, with the
    working tree's changes not yet committed (what a clone will hold once they are)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git repository")
    clone = tmp_path_factory.mktemp("above") / "memstream"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, capture_output=True)
    changes = subprocess.check_output(["git", "-C", str(ROOT), "diff", "HEAD", "--binary"])
    if changes:
        subprocess.run(["git", "-C", str(clone), "apply"], input=changes, check=True)
    new = subprocess.check_output(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--others", "--exclude-standard"], text=True
    )
    for name in filter(None, new.split("\0")):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, clone / name)
    return clone


@pytest.mark.parametrize("editable", [True, False], ids=["editable", "not-editable"])
def test_a_clone_named_memstream_imports_the_same_from_the_folder_above_and_from_its_root(
    fresh_clone: Path, editable: bool, tmp_path: Path
) -> None:
    environment = tmp_path / "venv"
    venv.create(environment)
    python = environment / "bin" / "python"
    # The dependencies are this interpreter's: its site-packages folders (those its own .pth
    # files added too), as path lines of a .pth (no install; none of their .pth files run).
    # Only those: a folder above a clone that pytest put on sys.path would hide what is tested.
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.check_output([python, "-c", where], text=True).strip())
    dependencies = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    (site / "dependencies.pth").write_text("".join(f"{p}\n" for p in dependencies))
    install = ["-e", str(fresh_clone)] if editable else [str(fresh_clone)]
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", *install],
        check=True,
        capture_output=True,
    )
    names: list[list[str]] = []
    for folder in (fresh_clone.parent, fresh_clone, tmp_path):
        done = subprocess.run(
            [python, "-c", IMPORTS], check=False, cwd=folder, capture_output=True, text=True
        )
        assert done.returncode == 0, f"from {folder}: {done.stderr.strip().splitlines()[-1:]}"
        found = json.loads(done.stdout)
        assert found["MemoryClient"].startswith("memstream.streams.client")
        # One tree: its models/ and streams/ side by side, never the domain of one copy with
        # the client of another.
        assert Path(found["models"]).parents[1] == Path(found["streams"]).parents[1]
        names.append(found["names"])
    assert names[0] == names[1] == names[2], "memstream's names differ by folder"
