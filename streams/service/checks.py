"""The checks every interface's arguments pass before the service reads or writes: ids,
times, queries (one rule each, so the client, the CLI, HTTP and MCP refuse alike)."""

from __future__ import annotations

from datetime import datetime

from memstream.models.events.envelope import utc_instant

__all__ = ["check_as_of", "check_id", "check_query"]


def check_id(name: str, value: object) -> str:
    """``value`` if it is a string (an id from a caller); TypeError otherwise."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    return value


def check_as_of(as_of: datetime | None) -> None:
    """Refuse an ``as_of`` without a time zone or outside the years 1 to 9999 in UTC."""
    if as_of is not None:
        try:
            utc_instant(as_of)
        except ValueError as exc:
            raise ValueError(f"as_of {exc}") from None


def check_query(name: str, value: object) -> str:
    """``value`` if it is text with something in it to look for; every search of every
    interface (the client, the CLI, HTTP, MCP) goes through this one rule.

    Raises
    ------
    ValueError
        ``value`` is empty or only whitespace: it would match nothing, and "no memories
        found" would say something false.
    TypeError
        ``value`` is not a string.

    Examples
    --------
    >>> check_query("query", " where do I live? ")
    ' where do I live? '
    >>> check_query("query", "   ")
    Traceback (most recent call last):
    ValueError: query is empty: say what to look for, e.g. 'where do I live?'
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{name} is empty: say what to look for, e.g. 'where do I live?'")
    return value
