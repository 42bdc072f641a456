"""Order-independent fingerprints of a projection's current view (``memstream verify``).

A projection rebuilt from the log must hold the same view as the live one, whatever order
its rows were written or are read in. Each row is reduced to a canonical JSON line of the
fields that make up the view; the fingerprint is the sha256 of the sorted row digests, with
the row count beside it, so two views are equal exactly when their fingerprints are.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class Fingerprint:
    """The digest of a view and the number of rows in it."""

    projection: str
    rows: int
    digest: str

    def __str__(self) -> str:
        return f"{self.projection}: {self.rows} rows, sha256 {self.digest[:16]}"


def _canonical(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def row_digest(row: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The sha256 hex of ``fields`` of ``row`` as canonical JSON (times in UTC, floats
    rounded to 9 places so a float32 round trip cannot split two equal views)."""
    line = json.dumps([_canonical(row.get(name)) for name in fields], ensure_ascii=False)
    return hashlib.sha256(line.encode("utf-8", "surrogatepass")).hexdigest()


def fingerprint(projection: str, rows: Iterable[Mapping[str, Any]], fields: Sequence[str]) -> Fingerprint:
    """The order-independent fingerprint of ``rows`` over ``fields``.

    Examples
    --------
    >>> a = fingerprint("m", [{"id": 1}, {"id": 2}], ["id"])
    >>> b = fingerprint("m", [{"id": 2}, {"id": 1}], ["id"])
    >>> a == b
    True
    """
    digests = sorted(row_digest(row, fields) for row in rows)
    total = hashlib.sha256()
    for digest in digests:
        total.update(digest.encode())
    return Fingerprint(projection, len(digests), total.hexdigest())
