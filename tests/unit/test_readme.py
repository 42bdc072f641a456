"""README is where users look up a setting: every one must be there, under its variable."""

from __future__ import annotations

from pathlib import Path

from memstream.models.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_listed_under_its_variable() -> None:
    text = README.read_text()
    missing = [
        f"MEMSTREAM_{name.upper()}" for name in Settings.model_fields
        if f"`MEMSTREAM_{name.upper()}`" not in text
    ]
    assert missing == []
