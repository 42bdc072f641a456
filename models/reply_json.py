"""Finding the JSON object in a model's reply: what chat models wrap around it (code fences,
prose, ``<think>`` blocks, trailing commas) and what a token limit cuts off. Used by
:mod:`memstream.models.llm_reply`, which validates what is found.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

log = logging.getLogger(__name__)


class ReplyInvalid(ValueError):
    """A reply that could not be parsed or validated; its message is fed back to the model."""


_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")
#: Start positions tried when scanning prose for an embedded object.
_MAX_SCAN_STARTS = 50


def parse_json_reply(text: str) -> dict[str, Any]:
    """The JSON object in a model's reply, tolerating what chat models wrap around it.

    Tries, in order: the whole text; each ``` fenced block; the span from the first ``{``
    to the last ``}``; each of those with trailing commas removed; an object cut off
    before its end, read up to its last complete value (:func:`close_cut_off_object`); then
    the first object that decodes at any ``{``. Reasoning blocks (``<think>...</think>``)
    are ignored.

    Raises
    ------
    ReplyInvalid
        When no JSON object can be found.

    Examples
    --------
    >>> parse_json_reply('Sure!\\n```json\\n{"facts": [1, 2,],}\\n```\\nHope that helps.')
    {'facts': [1, 2]}
    """
    text = _THINK_RE.sub("", text).strip()
    if not text:
        raise ReplyInvalid("the reply is empty")
    pieces = [text, *(block.strip() for block in _FENCE_RE.findall(text))]
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        pieces.append(text[first : last + 1])
    error = "no JSON object found"
    for piece in dict.fromkeys(pieces):
        for candidate in (piece, _TRAILING_COMMA_RE.sub(r"\1", piece)):
            try:
                value = json.loads(candidate)
            except json.JSONDecodeError as exc:
                error = f"not valid JSON ({exc})"
                continue
            if isinstance(value, dict):
                return value
            error = f"expected a JSON object, got {type(value).__name__}"
    closed = close_cut_off_object(text)
    if closed is not None:
        return closed
    decoder = json.JSONDecoder()
    starts = [i for i, char in enumerate(text) if char == "{"][:_MAX_SCAN_STARTS]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise ReplyInvalid(error)


def close_cut_off_object(text: str) -> dict[str, Any] | None:
    """The object that starts at the first ``{`` of ``text`` and is cut off before its end
    (a reply that ran out of tokens), read up to its last complete value and closed; None
    when it is not such an object.

    A small model that repeats an item until the token limit still wrote the items before
    the loop (Qwen2.5 1.5B, at temperature 0, repeated "User has a pet" until the limit):
    those are kept rather than the whole reply retried, which would loop again.

    Examples
    --------
    >>> close_cut_off_object('{"facts": [{"content": "a"}, {"content": "b"}, {"cont')
    {'facts': [{'content': 'a'}, {'content': 'b'}]}
    """
    start = text.find("{")
    if start < 0:
        return None
    closers: list[str] = []
    in_string = escaped = False
    ends: list[tuple[int, str]] = []  # after each complete value: (end, what closes it)
    for at in range(start, len(text)):
        char = text[at]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
        elif char in "}]":
            if not closers or closers.pop() != char or not closers:
                return None  # not nested as JSON, or the object ended: not cut off
            ends.append((at + 1, "".join(reversed(closers))))
    for end, closing in reversed(ends[-_MAX_SCAN_STARTS:]):
        candidate = _TRAILING_COMMA_RE.sub(r"\1", text[start:end] + closing)
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            log.info("llm extractor: a reply cut off was read up to its last complete value")
            return value
    return None
