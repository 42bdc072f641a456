"""A memory's vector as it travels in the log: float32, little-endian, base64 (:func:`pack_vector`,
:func:`unpack_vector`), so the one embedding the decider made is the one every projection
holds, bit for bit, and a replay never embeds again.

384 dimensions (the bundled model) are 2,048 characters; JSON numbers would be three times
that and lose the exact float32 values on the way.
"""

from __future__ import annotations

import base64
import binascii
import math
import sys
from array import array
from collections.abc import Iterable

#: What a packed vector may hold: base64 text, at most this many characters (16k dimensions).
PACKED_PATTERN = r"^[A-Za-z0-9+/]*={0,2}$"
MAX_PACKED_CHARS = 87_384


def pack_vector(values: Iterable[float]) -> str:
    """``values`` as float32 little-endian, base64.

    Examples
    --------
    >>> pack_vector([1.0, -0.5])
    'AACAPwAAAL8='
    >>> list(unpack_vector(pack_vector([1.0, -0.5])))
    [1.0, -0.5]
    """
    floats = array("f", values)
    if sys.byteorder == "big":
        floats.byteswap()
    return base64.b64encode(floats.tobytes()).decode("ascii")


def unpack_vector(packed: str) -> array[float]:
    """The float32 values of a packed vector.

    Raises
    ------
    ValueError
        Not base64, not a whole number of float32 values, empty, or a value that is not
        finite.
    """
    try:
        raw = base64.b64decode(packed, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a packed vector is not base64") from None
    if not raw or len(raw) % 4:
        raise ValueError(f"a packed vector of {len(raw)} bytes is not float32 values")
    floats = array("f")
    floats.frombytes(raw)
    if sys.byteorder == "big":
        floats.byteswap()
    # One C-level pass: a NaN or an infinity makes the float64 sum non-finite, and float32
    # values (at most 3.4e38 each, 16k of them) cannot add up to an overflow in float64.
    # sum() over math.fsum: the same answer here, in 60 % of the time (one replay unpacks
    # every memory's vector).
    finite = math.isfinite(sum(floats))
    if not finite:
        raise ValueError("a packed vector holds a value that is not finite")
    return floats
