"""Code-made SQL literals: topic and type names put into the views' and reports' SQL text.

A user's id or text never becomes a literal; it is always a parameter.
"""

from __future__ import annotations

import re

#: What a code-made literal may hold (topic names from settings, type names): nothing to quote.
_LITERAL = re.compile(r"[A-Za-z0-9._-]{1,249}")


def _literal(text: str) -> str:
    """``text`` as a SQL string literal; only for code-made names that need no quoting."""
    if not _LITERAL.fullmatch(text):
        raise ValueError(f"refusing to put {text!r} into SQL")
    return f"'{text}'"
