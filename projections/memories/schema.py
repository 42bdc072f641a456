"""What a row of the memories table holds: its Arrow schema and version, the columns a
reader sees, the text a memory is found by, and the keys (sha256 digests) filters match on.

Isolation by construction: rows are filtered on ``user_key``, the sha256 hex digest of the
user id computed here; memory types are checked against the closed set of :data:`MemoryType`
values.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import get_args

import pyarrow as pa

from memstream.models.beliefs import attribute_gloss
from memstream.models.events.memory import MemoryAdded, MemoryCandidate, MemoryType

#: The memory types a filter may name; anything else is refused before a query is built.
MEMORY_TYPES: frozenset[str] = frozenset(get_args(MemoryType))
_HEX64 = re.compile(r"[0-9a-f]{64}")
_TABLE_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")
_SCHEMA_MODEL_KEY = b"memstream.embedding_model"
_SCHEMA_VERSION_KEY = b"memstream.schema_version"
#: Bumped when the table's columns change; an older table must be rebuilt from the topic.
SCHEMA_VERSION = "9"
#: The live memories table, until a replay swaps another in (see memstream.projections.shadow).
DEFAULT_TABLE = "memories"
#: The columns that make up the projection's view, fingerprinted by ``memstream verify``:
#: everything a reader can see except the vector (derived from content by the embedder) and
#: the source offsets (a restored log may number its records differently).
VIEW_COLUMNS = (
    "memory_id",
    "user_id",
    "agent_id",
    "session_id",
    "memory_type",
    "content",
    "context",
    "importance",
    "tier",
    "created_at",
    "entities",
    "source_event_ids",
    "extraction_event_id",
    "extractor",
    "event_id",
    "status",
    "superseded_by",
    "ended_at",
    "reinforcement_count",
    "last_reinforced_at",
    "learned_at",
    "access_count",
    "last_accessed_at",
    "embedding_model",
    *(CLAIM_COLUMNS := (
        "claim_subject",
        "claim_attribute",
        "claim_value",
        "claim_polarity",
        "claim_cardinality",
        "valid_from",
        "valid_until",
        "stated_until",
        "stated_in",
        "states",
        "ended_claims",
    )),
)


_RECORD_COLUMNS = [
    "memory_id",
    "memory_type",
    "content",
    "importance",
    "created_at",
    "session_id",
    "event_id",
    "source_event_ids",
    "source_topic",
    "source_partition",
    "source_offset",
    "tier",
    "status",
    "superseded_by",
    "reinforcement_count",
    "entities",
    "access_count",
    "last_accessed_at",
    "learned_at",
    "ended_at",
    "extractor",
    "context",
    *CLAIM_COLUMNS,
]


def _digest(text: str) -> str:
    # surrogatepass: a lone surrogate (legal in a decoded JSON string) still maps to one key.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def memory_key(memory_id: str) -> str:
    """The filter key of a memory id (sha256 hex): ids come from clients too."""
    return _digest(memory_id)


# Cached: a replay asks for the keys of every row and change (37,000 digests for 20,000
# memories of 100 users), of a few users and sessions at a time.
@functools.lru_cache(maxsize=4096)
def session_filter_key(session_id: str) -> str:
    """The filter key of a session id (sha256 hex)."""
    return _digest(session_id)


@functools.lru_cache(maxsize=4096)
def user_key(user_id: str) -> str:
    """The filter key of a user: sha256 hex of the id, the only form a filter ever holds.

    Examples
    --------
    >>> len(user_key("x' OR '1'='1"))
    64
    """
    return _digest(user_id)


def memory_schema(dimensions: int, embedding_model: str) -> pa.Schema:
    """The table's Arrow schema for vectors of ``dimensions`` from ``embedding_model``."""

    def required(name: str, type_: pa.DataType) -> pa.Field:
        return pa.field(name, type_, nullable=False)

    return pa.schema(
        [
            required("memory_id", pa.string()),
            required("user_id", pa.string()),
            required("user_key", pa.string()),
            pa.field("agent_id", pa.string(), nullable=True),
            required("session_id", pa.string()),
            required("memory_type", pa.string()),
            required("content", pa.string()),
            # The conversation around the memory, returned with it.
            required("context", pa.string()),
            # What is embedded and indexed for full text: the context when there is one (it
            # holds the content), the content otherwise.
            required("search_text", pa.string()),
            required("importance", pa.float64()),
            required("tier", pa.string()),
            required("created_at", pa.timestamp("us", tz="UTC")),
            required("entities", pa.list_(pa.string())),
            required("source_event_ids", pa.list_(pa.string())),
            required("extraction_event_id", pa.string()),
            pa.field("extractor", pa.string(), nullable=True),
            required("event_id", pa.string()),
            required("source_topic", pa.string()),
            required("source_partition", pa.int32()),
            required("source_offset", pa.int64()),
            required("session_key", pa.string()),
            required("memory_key", pa.string()),
            # The current view: active, or superseded / deleted / expired / forgotten (kept for
            # history).
            required("status", pa.string()),
            pa.field("superseded_by", pa.string(), nullable=True),
            # Event time of the change that took it out of the current view (point-in-time
            # reads: it was believed from created_at until ended_at).
            pa.field("ended_at", pa.timestamp("us", tz="UTC"), nullable=True),
            required("reinforcement_count", pa.int64()),
            pa.field("last_reinforced_at", pa.timestamp("us", tz="UTC"), nullable=True),
            # Event ids of the reinforcements counted: a decision re-published after a crash
            # (same id, later offset) counts once.
            required("reinforced_by", pa.list_(pa.string())),
            # Offset (same topic and partition) of the last change event applied to the row:
            # a re-delivered change at or below it is skipped.
            required("changed_offset", pa.int64()),
            # When memstream learned the memory: the broker timestamp of its event (in the log,
            # so a replay finds the same); short-term TTLs run from it.
            pa.field("learned_at", pa.timestamp("us", tz="UTC"), nullable=True),
            # Use: retrievals counted from the accesses topic, off the read path.
            required("access_count", pa.int64()),
            pa.field("last_accessed_at", pa.timestamp("us", tz="UTC"), nullable=True),
            required("access_offset", pa.int64()),
            required("embedding_model", pa.string()),
            # What a fact or preference asserts (null for other memories): about whom, which
            # attribute (a normalised key), what value, whether it holds, how many values
            # the attribute holds at once.
            pa.field("claim_subject", pa.string(), nullable=True),
            pa.field("claim_attribute", pa.string(), nullable=True),
            pa.field("claim_value", pa.string(), nullable=True),
            pa.field("claim_polarity", pa.bool_(), nullable=True),
            pa.field("claim_cardinality", pa.string(), nullable=True),
            # Validity in event time: a claim from the turn that stated it until the turn that
            # changed it (or the end it stated); a memory stating a claim that ended (an
            # episode, a summary) has the end only, and ``superseded_by`` names what replaced
            # it while its status stays active.
            pa.field("valid_from", pa.timestamp("us", tz="UTC"), nullable=True),
            pa.field("valid_until", pa.timestamp("us", tz="UTC"), nullable=True),
            # The end a claim stated itself ("this week"), whatever ended it since.
            pa.field("stated_until", pa.timestamp("us", tz="UTC"), nullable=True),
            # A claim's: the memories that state it too (its turns' episodes, summaries).
            required("stated_in", pa.list_(pa.string())),
            # An episode's or summary's: the claims it states, and those of them that ended
            # (it no longer holds once all have).
            required("states", pa.list_(pa.string())),
            required("ended_claims", pa.list_(pa.string())),
            required("vector", pa.list_(pa.float32(), dimensions)),
        ],
        metadata={
            _SCHEMA_MODEL_KEY: embedding_model.encode(),
            _SCHEMA_VERSION_KEY: SCHEMA_VERSION.encode(),
        },
    )


def search_text(event: MemoryAdded | MemoryCandidate) -> str:
    """What a memory's words are found by (its full-text index): its own words, its content;
    a claim adds the words a question about its attribute uses
    (:func:`~memstream.models.beliefs.attribute_gloss`). An episode's context is not in it:
    the turns around it are other turns' words, and each of those is found by its own (on
    REALTALK's real chats, BM25 over the turn's own words found more evidence than over its
    context, 0.592 against 0.553 recall@10); the context joins its vector instead
    (:func:`embedded_texts`)."""
    text = event.content
    if event.claim is not None and event.claim.attribute:
        text = f"{text}\n({attribute_gloss(event.claim.attribute)})"
    return text


def embedded_texts(event: MemoryAdded | MemoryCandidate) -> tuple[str, ...]:
    """What a memory's vector is the mean of (:func:`~memstream.projections.embedder.mean_vector`):
    its search text and, when it has one, its context, the conversation it was said in. A
    turn of real chat is often short and means something only beside the turns around it
    ("I named him Steve"), yet its own words say what it is about: on REALTALK the mean of
    both vectors found more evidence than either alone (recall@10 0.630 against 0.617 for
    the turn's own words, 0.602 for its context, each with BM25 over its own words)."""
    text = search_text(event)
    if event.context and event.context != text:
        return (text, event.context)
    return (text,)
