"""Hypothesis strategies for records nobody can be trusted not to send.

Not a list of known bad kinds: records are generated at every level a producer controls,

- **bytes**: anything, invalid UTF-8, a BOM, NULs, truncated JSON, huge padding;
- **JSON text**: values nested to any depth, integers of thousands of digits, ``NaN`` /
  ``Infinity`` / ``1e999``, lone-surrogate escapes, duplicate keys, non-object documents;
- **mutations of valid events** of every type of every topic: any field replaced by any
  JSON value, removed, or joined by unknown ones; times from year 1 to 9999 and beyond, with
  any offset, naive, malformed; ids at and past their length limits; the type of another
  topic; sealed-looking ``encryption`` blocks (junk, or copied from another user's event);
- **envelopes**: no key, another user's key, a key that is not UTF-8 or is huge; headers,
  their keys any bytes (not only UTF-8).

``record_of(topic)`` draws (key, value, headers) for a topic; :func:`is_rejected` says
whether the worker's decoder refuses it, the same check the consumers make.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Self

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from memstream.models.codec import EventLimits, InvalidEvent
from memstream.streams.agents.decoding import decode_opened
from memstream.streams.keys.store import KeyStore

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
USERS = ("ann", "bob", "cy")

# --- raw JSON text, rendered by hand so it can say what json.dumps never would ------------


def _render(value: Any) -> str:
    """JSON text of ``value``; ``Raw`` pieces go in as they are (NaN, huge numbers, ...)."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{_render(k)}:{_render(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_render(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return json.dumps(value, ensure_ascii=False)


class Raw:
    """A piece of JSON text inserted verbatim."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Raw({self.text[:40]!r})"


odd_numbers = st.one_of(
    st.integers(min_value=300, max_value=6000).map(lambda n: Raw("9" * n)),
    st.integers(min_value=300, max_value=6000).map(lambda n: Raw("-" + "1" * n)),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e-999", "0.0e+99999", "-0"]).map(Raw),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
odd_strings = st.one_of(
    st.text(max_size=50),
    st.sampled_from(
        ["\\ud800", "\\udfff", "\\ud83d", "\\u0000", "\\x", "\\", "\\uZZZZ", "\\ud83d\\ude00"]
    ).map(lambda s: Raw(f'"a{s}b"')),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=20),
    st.sampled_from(["\u202e", "\ufeff", "\x00", "\u2028", "\U0010ffff", "e\u0301", "İ", "ß"]),
)


def deep(depth: int, leaf: str = "1") -> Raw:
    """A value nested ``depth`` levels deep, alternating arrays and objects."""
    opening = "".join('{"a":' if i % 2 else "[" for i in range(depth))
    closing = "".join("}" if i % 2 else "]" for i in reversed(range(depth)))
    return Raw(opening + leaf + closing)


json_values: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.booleans(), odd_numbers, odd_strings),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=10), children, max_size=4),
    ),
    max_leaves=12,
) | st.integers(min_value=40, max_value=20_000).map(deep)

odd_times = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59), timezones=st.just(UTC)).map(
        lambda d: d.isoformat()
    ),
    st.sampled_from(
        [
            "0001-01-01T00:00:00+01:00",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59-05:00",
            "9999-12-31T23:59:59Z",
            "1999-12-31T23:59:59Z",
            "1970-01-01T00:00:00Z",
            "2026-11-02T09:00:00",  # naive
            "2026-11-02T24:00:00Z",
            "2026-11-02T23:59:60Z",
            "2026-02-30T00:00:00Z",
            "2026-11-02T09:00:00+24:00",
            "2026-11-02T09:00:00.1234567890123Z",
            "+12026-11-02T09:00:00Z",
            "2026-11-02",
            "",
            "yesterday",
            "2126-01-01T00:00:00Z",
        ]
    ),
    st.integers(min_value=2, max_value=3650).map(lambda days: (datetime.now(UTC) + timedelta(days=days)).isoformat()),
)

#: Every fixed offset a zone can have: whole minutes strictly within a day either way.
any_offset = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
#: Zoned times anywhere in the calendar, in any offset; often within a day of its two ends,
#: where an offset can carry a time out of the years 1 to 9999 in UTC.
zoned_times = st.one_of(
    st.datetimes(timezones=any_offset),
    st.datetimes(max_value=datetime(1, 1, 2), timezones=any_offset),
    st.datetimes(min_value=datetime(9999, 12, 30), timezones=any_offset),
)

hostile_bytes = st.one_of(
    st.binary(max_size=200),
    st.binary(max_size=50).map(lambda b: b"\xef\xbb\xbf" + b),
    st.binary(min_size=1, max_size=20).map(lambda b: b"{" + b),
    st.just(b""),
    st.integers(min_value=1, max_value=3).map(lambda n: b" " * (n * 700_000) + b"{}"),
)


# --- valid events of every topic, to mutate -----------------------------------------------


def _envelope(kind: str, user: str, index: int) -> dict[str, Any]:
    return {
        "event_id": f"fz-{kind}-{index}",
        "type": kind,
        "user_id": user,
        "session_id": f"fuzz-{index % 3}",
        "occurred_at": (NOW + timedelta(seconds=index)).isoformat(),
    }


def valid_payload(kind: str, user: str = "ann", index: int = 0) -> dict[str, Any]:
    """A valid event of ``kind`` as a JSON dict: the base that mutations start from."""
    base = _envelope(kind, user, index)
    extra: dict[str, dict[str, Any]] = {
        "session_started": {"metadata": {"app": "fuzz"}},
        "message_added": {"role": "user", "content": "I live in Porto and I work at Bosch."},
        "tool_called": {"name": "search", "arguments": {"q": "hotels"}, "result": ["a", 1]},
        "task_set": {"task": "plan the trip"},
        "task_progress": {"progress": "booked", "percent": 50},
        "scratchpad_updated": {"content": "remember the budget"},
        "entity_mentioned": {"name": "Lisbon", "kind": "place"},
        "session_closed": {},
        "user_erased": {"erasure_id": f"er-{index}"},
        "consolidation_requested": {
            "reason": "session_closed",
            "messages": [
                {
                    "event_id": f"m-{index}",
                    "role": "user",
                    "content": "I prefer aisle seats.",
                    "occurred_at": NOW.isoformat(),
                }
            ],
        },
        "extraction_recorded": {
            "consolidation_event_id": "c-1",
            "extractor": "offline",
            "extractor_version": "1",
            "candidates": [{"memory_type": "fact", "content": "User lives in Porto", "importance": 0.6}],
        },
        "extraction_failed": {
            "consolidation_event_id": "c-1",
            "extractor": "llm",
            "extractor_version": "1",
            "reason": "bad reply",
        },
        "memory_added": {
            "schema_version": 2,
            "extractor": "offline/1",
            "memory_id": f"mem-{index}",
            "memory_type": "fact",
            "content": "User lives in Porto",
            "importance": 0.6,
            "extraction_event_id": "x-1",
        },
        "memory_reinforced": {"memory_id": "mem-0", "extraction_event_id": "x", "similarity": 0.95},
        "memory_superseded": {"memory_id": "mem-0", "superseded_by": "mem-1", "reason": "moved", "similarity": 0.8},
        "memory_deleted": {"memory_id": "mem-0"},
        "memory_promoted": {"memory_id": "mem-0", "reason": "retrieved 3 times"},
        "memory_expired": {"memory_id": "mem-0"},
        "memory_forgotten": {"memory_id": "mem-0", "policy": "decay", "score": 0.05, "threshold": 0.1, "reason": "decayed"},
        "memories_retrieved": {"query": "where do I live", "memories": [{"memory_id": "mem-0", "score": 0.5}]},
    }
    return {**base, **extra[kind]}


TOPIC_TYPES: dict[str, tuple[str, ...]] = {
    "chat": (
        "session_started", "message_added", "tool_called", "task_set", "task_progress",
        "scratchpad_updated", "entity_mentioned", "session_closed",
    ),
    "consolidation": ("consolidation_requested",),
    "memories": (
        "extraction_recorded", "extraction_failed", "memory_added", "memory_reinforced",
        "memory_superseded", "memory_deleted", "memory_promoted", "memory_expired",
        "memory_forgotten",
    ),
    "accesses": ("memories_retrieved",),
}
ALL_TYPES = tuple(t for types in TOPIC_TYPES.values() for t in types) + ("user_erased", "telepathy")


@st.composite
def mutation(draw: st.DrawFn, payload: dict[str, Any]) -> dict[str, Any]:
    """One change a producer might make to a valid payload."""
    out = dict(payload)
    fields = sorted(out)
    choice = draw(st.integers(min_value=0, max_value=9))
    field = draw(st.sampled_from(fields))
    if choice == 0:
        out[field] = draw(json_values)
    elif choice == 1:
        out.pop(field)
    elif choice == 2:
        out[draw(st.text(min_size=1, max_size=12))] = draw(json_values)
    elif choice == 3:
        out["occurred_at"] = draw(odd_times)
    elif choice == 4:
        out["type"] = draw(st.sampled_from(ALL_TYPES))
    elif choice == 5:
        text_fields = [f for f in fields if isinstance(out[f], str)]
        target = draw(st.sampled_from(text_fields)) if text_fields else field
        size = draw(st.sampled_from([0, 255, 256, 257, 513, 20_001, 100_001]))
        out[target] = draw(st.sampled_from(["x", "é", "\u0001", "😀"])) * size
    elif choice == 6:
        ciphertext = draw(st.binary(min_size=0, max_size=64))
        out["encryption"] = {
            "scheme": draw(st.sampled_from(["aes-256-gcm", "rot13"])),
            "key_id": draw(st.sampled_from(["49915e0d7d4b402e3017d010-00000000", "../../etc/passwd", "k"])),
            "fields": draw(st.lists(st.sampled_from(["content", "messages", "query", "name", "x"]), max_size=3)),
            "ciphertext": base64.b64encode(ciphertext).decode(),
        }
    elif choice == 7:
        out["schema_version"] = draw(st.sampled_from([0, 1, 2, 3, -1, 2**40, "1", None]))
    elif choice == 8:
        nested = [k for k in fields if isinstance(out[k], list | dict)]
        if nested:
            target = draw(st.sampled_from(nested))
            out[target] = [draw(json_values)] if isinstance(out[target], list) else {"k": draw(json_values)}
        else:
            out[field] = draw(json_values)
    else:
        out["user_id"] = draw(st.sampled_from(["", "bob", "a" * 257, "ann\x1fs", "\x00", "ann "]))
    return out


@st.composite
def hostile_value(draw: st.DrawFn, topic: str) -> bytes:
    """The value of one record on ``topic``: bytes, JSON text, or a mutated valid event."""
    kind = draw(st.integers(min_value=0, max_value=9))
    if kind == 0:
        return draw(hostile_bytes)
    if kind == 1:
        return _render(draw(json_values)).encode("utf-8", "surrogatepass")
    event_type = draw(st.sampled_from(TOPIC_TYPES[topic]))
    payload = valid_payload(event_type, draw(st.sampled_from(USERS)), draw(st.integers(0, 10**6)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        payload = draw(mutation(payload))
    text = _render(payload)
    if draw(st.booleans()) and len(text) > 2:
        # Cut anywhere, or with a duplicate key at the end.
        text = text[: draw(st.integers(min_value=1, max_value=len(text) - 1))] if draw(st.booleans()) else (
            text[:-1] + ',"type":"message_added"}'
        )
    return text.encode("utf-8", "surrogatepass")


@st.composite
def record_key(draw: st.DrawFn, value: bytes) -> bytes | None:
    """A record key: usually the event's user (as a producer keys it), or not."""
    try:
        user = json.loads(value).get("user_id")
    except (ValueError, AttributeError, RecursionError):
        user = None
    right = user.encode("utf-8", "surrogatepass") if isinstance(user, str) else b"ann"
    return draw(
        st.sampled_from([right, right, right, None, b"bob", b"\xff\xfe", b"k" * 5000, b""])
    )


class RawHeaderKey(str):
    """A header key sent as these bytes, which need not be UTF-8 (librdkafka lets a producer
    send any): aiokafka's pure-Python batch builder writes what ``encode`` returns."""

    raw: bytes

    def __new__(cls, raw: bytes) -> Self:
        made = super().__new__(cls, raw.decode("utf-8", "replace"))
        made.raw = raw
        return made

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return self.raw


headers = st.lists(
    st.tuples(
        st.one_of(st.text(min_size=1, max_size=10), st.binary(min_size=1, max_size=8).map(RawHeaderKey)),
        st.one_of(st.none(), st.binary(max_size=20)),
    ),
    max_size=3,
)


@st.composite
def record_of(draw: st.DrawFn, topic: str) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    """(key, value, headers) of one hostile record on ``topic``; sometimes a tombstone."""
    if draw(st.integers(min_value=0, max_value=40)) == 0:
        return b"ann", None, []  # a tombstone (aiokafka cannot send one without a key)
    value = draw(hostile_value(topic))
    return draw(record_key(value)), value, draw(headers)


def is_rejected(
    topic_kind: str,
    key: bytes | None,
    value: bytes | None,
    limits: EventLimits,
    now: datetime | None = None,
    keys: KeyStore | None = None,
) -> bool:
    """Whether a consumer of ``topic_kind`` refuses the record at decoding (it is then
    dead-lettered), by the same check the consumers make: decoded, and opened with ``keys``
    (a seal naming another user's key is refused)."""
    allowed = TOPIC_TYPES[topic_kind] + ("user_erased",) * (topic_kind in ("chat", "memories"))
    try:
        decode_opened(value, key, allowed, limits, keys, now=now or datetime.now(UTC))
    except InvalidEvent:
        return True
    return False


def never_raises(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with its exceptions turned into a failing assertion that names them."""

    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            raise AssertionError(f"{function.__name__} raised {type(exc).__name__}: {exc!r:.300}") from exc

    return run


def draw_many(strategy: st.SearchStrategy[Any], count: int, seed_value: int) -> list[Any]:
    """``count`` values of ``strategy``, as Hypothesis explores it (its first examples are
    the simplest, then ever more varied ones), reproducibly for ``seed_value``: for a test
    too slow to run once per example (a real broker), which runs once on all of them."""
    drawn: list[Any] = []

    @settings(
        max_examples=count,
        phases=[Phase.generate],
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @seed(seed_value)
    @given(strategy)
    def collect(value: Any) -> None:
        drawn.append(value)

    collect()
    return drawn
