"""Shadow targets and atomic swaps: how a replay replaces a live projection.

A replay builds a projection under a new name (a LanceDB table, or a directory) while the
live one keeps serving; once the new one is verified, one pointer file is replaced with
``os.replace`` (atomic on POSIX), so every reader sees either the old target or the new one,
never a half-built one. Readers and writers resolve the live name through
:func:`live_name` when they open a projection, and writers look again between batches.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def _pointer(base: Path, projection: str) -> Path:
    return base / f"{projection}.CURRENT"


def pointer_target(text: str | None, default: str, where: object) -> str:
    """The target a pointer's ``text`` names (``default`` without a pointer, None); raises
    ``ValueError`` naming ``where`` for a name that is not one.

    Examples
    --------
    >>> pointer_target("memories-20261102T090000000000\\n", "memories", "memories.CURRENT")
    'memories-20261102T090000000000'
    >>> pointer_target(None, "memories", "memories.CURRENT")
    'memories'
    """
    if text is None:
        return default
    name = text.strip()
    if not _NAME.fullmatch(name):
        raise ValueError(f"{where} names an invalid target {name!r}")
    return name


def target_name(name: str) -> str:
    """``name``, if it can be a pointer's target; raises ``ValueError`` otherwise."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"invalid target name {name!r}")
    return name


def live_name(base: Path, projection: str, default: str) -> str:
    """The name of the live target of ``projection`` under ``base`` (``default`` until a
    replay has swapped one in)."""
    pointer = _pointer(base, projection)
    try:
        text: str | None = pointer.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    return pointer_target(text, default, pointer)


def swap_in(base: Path, projection: str, name: str) -> str | None:
    """Make ``name`` the live target of ``projection``; return the previous live name
    (None if there was no pointer yet)."""
    target_name(name)
    base.mkdir(parents=True, exist_ok=True)
    pointer = _pointer(base, projection)
    try:
        previous: str | None = pointer.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        previous = None
    staging = pointer.with_suffix(".CURRENT.tmp")
    staging.write_text(name + "\n", encoding="utf-8")
    with staging.open("rb") as handle:
        os.fsync(handle.fileno())
    os.replace(staging, pointer)
    return previous


def shadow_name(projection: str, now: datetime | None = None) -> str:
    """A fresh, sortable name for a shadow target of ``projection``."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%f")
    return f"{projection}-{stamp}"
