"""The archive's errors."""

from __future__ import annotations


class ArchiveError(RuntimeError):
    """The archive and the broker's log do not fit together (or the archive is damaged)."""


class RestoreRefused(ArchiveError):
    """The target log is not empty: republishing the archive onto it would duplicate it."""
