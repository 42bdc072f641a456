"""The browser the page tests drive: Debian's chromium (apt-get install chromium), which
Playwright launches; it never downloads a browser of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--no-first-run",
]


def needs_chromium(what: str) -> pytest.MarkDecorator:
    """The mark that skips ``what``'s tests, saying how to install chromium, where it is missing."""
    return pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{what} needs Debian's chromium: apt-get install chromium"
    )
