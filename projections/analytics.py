"""Analytics: DuckDB SQL over the memory projection and the Parquet archive of the log.

Every call opens **one in-memory DuckDB connection** (never a ``.duckdb`` file), defines the
documented views (:data:`VIEWS`) over two sources, runs one report or one query, and closes:

* the live LanceDB memory table, read as Arrow without its vectors (LanceDB directly, no
  embedder, no model load; DuckDB's ``lance`` extension would need a download);
* the Parquet archive of every topic (:func:`memstream.projections.archive_format.live_archive_dir`), read
  with ``read_parquet('<dir>/**/*.parquet', hive_partitioning = true, union_by_name = true)``;
  the event fields are parsed from each record's ``value`` with DuckDB's own JSON functions.

A missing or empty table or archive gives the same views, empty, with the same columns.

**Tenant scoping by construction.** With ``Scope(user_id=U)`` every view holds only U's rows,
and no id ever becomes SQL text: memory rows are selected by the SHA-256 digest of U computed
here (as the projection does) and checked again in pyarrow; archive records are copied into a
temporary table by a prepared statement (``WHERE user_id = $1``); then the unfiltered
sources are dropped, file access is switched off and DuckDB's configuration is locked, so an
ad-hoc query cannot read the archive files or the table around the views. ``since`` and
``now`` are parameters too (a one-row ``_params`` table).

Examples
--------
>>> result = run_report(Settings(), "access", Scope(user_id="alice"))  # doctest: +SKIP
>>> result.table.column_names  # doctest: +SKIP
['user_id', 'memory_type', 'memories', 'retrieved', 'accesses', 'hit_rate']
>>> run_sql(Settings(), "SELECT count(*) AS n FROM memories").to_pylist()  # doctest: +SKIP
[{'n': 1532}]
"""

from __future__ import annotations

import csv
import json
import math
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import IO, Any, Literal, get_args

import duckdb
import lancedb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from memstream.models.events import MemoryType
from memstream.models.settings import Settings
from memstream.models.topics import Topics
from memstream.projections.archive_format import SCHEMA as ARCHIVE_SCHEMA
from memstream.projections.archive_format import live_archive_dir
from memstream.projections.memories import DEFAULT_TABLE, VIEW_COLUMNS, memory_schema, user_key
from memstream.projections.shadow import live_name

__all__ = [
    "FORMATS",
    "REPORTS",
    "VIEWS",
    "NotReadOnly",
    "PlotSpec",
    "Report",
    "ReportOptions",
    "ReportResult",
    "Scope",
    "View",
    "check_read_only",
    "open_views",
    "render_plot",
    "render_table",
    "run_report",
    "run_sql",
    "write_output",
]

OutputFormat = Literal["table", "csv", "json", "parquet"]
FORMATS: tuple[str, ...] = get_args(OutputFormat)

#: The memory types, in the order the ``yield`` report gives them a column each.
_MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)
#: Statuses left out of the content-based reports (duplicates, entities): the memory is gone,
#: at the user's request or by a forgetting policy.
_ERASED = ("deleted", "forgotten")
#: Memory events of ``memory_history``.
_HISTORY_TYPES = (
    "memory_added",
    "memory_reinforced",
    "memory_superseded",
    "memory_deleted",
    "memory_promoted",
    "memory_expired",
    "memory_forgotten",
)
#: What a code-made literal may hold (topic names from settings, type names): nothing to quote.
_LITERAL = re.compile(r"[A-Za-z0-9._-]{1,249}")
#: Parse-tree node types of a read-only query (``json_serialize_sql``); DuckDB also parses
#: data-modifying CTEs (``WITH d AS (DELETE ... RETURNING *) SELECT ...``) as a SELECT.
_READ_ONLY_NODES = frozenset(
    {"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"}
)
#: Width at which a cell of the text table is cut.
_CELL_CHARS = 60


class NotReadOnly(ValueError):
    """An ad-hoc query that is not one read-only SELECT (or WITH ... SELECT) statement."""


# --- scope and options ------------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """Whose rows and which times the views hold.

    Attributes
    ----------
    user_id
        Only this user's rows in every view (None: every user's). Never SQL text.
    since
        Only rows whose event time is at or after this (see each view's ``since`` column).
    now
        The time age-based figures (decay, junk) are computed at; None: the current time.
    """

    user_id: str | None = None
    since: datetime | None = None
    now: datetime | None = None

    def resolved_now(self) -> datetime:
        """``now``, or the current time (UTC)."""
        return _aware(self.now) if self.now is not None else datetime.now(UTC)


@dataclass(frozen=True)
class ReportOptions:
    """Knobs some reports take: ``days`` (junk window), ``limit`` (rows per ranking)."""

    days: int = 7
    limit: int = 10

    def __post_init__(self) -> None:
        if self.days < 0 or self.limit < 1:
            raise ValueError("days must be >= 0 and limit >= 1")


# --- views ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class View:
    """One documented view: its name, what a row is, its columns and how ``since`` applies."""

    name: str
    description: str
    columns: tuple[tuple[str, str], ...]
    since: str
    #: Reads the archive (True) or only the memory projection (False).
    archive: bool = True

    @property
    def column_names(self) -> tuple[str, ...]:
        """The view's column names, in order."""
        return tuple(name for name, _ in self.columns)


_MEMORY_COLUMN_DOCS: Mapping[str, str] = {
    "memory_id": "the memory's id",
    "user_id": "whose memory it is",
    "agent_id": "the agent of the event that added it, if any",
    "session_id": "the session it was extracted from",
    "memory_type": "preference, fact, summary, episode, correction or entity",
    "content": "the memory's text",
    "context": "the conversation around it (day, neighbouring turns, speakers); empty if none",
    "importance": "0..1, from the extractor",
    "tier": "short_term or long_term",
    "created_at": "event time of the memory (its memory_added event)",
    "entities": "entities the extractor named (list)",
    "source_event_ids": "chat events it was extracted from (list)",
    "extraction_event_id": "the extraction_recorded event that proposed it",
    "extractor": "extractor name/version",
    "event_id": "its memory_added event",
    "status": "active, superseded, deleted, expired or forgotten",
    "superseded_by": "the memory that replaced it",
    "ended_at": "event time it left the current view",
    "reinforcement_count": "times a near-duplicate reinforced it",
    "last_reinforced_at": "event time of the last reinforcement",
    "learned_at": "broker time of its memory_added event",
    "access_count": "retrievals counted by the projector",
    "last_accessed_at": "event time of the last retrieval",
    "embedding_model": "model of its vector (the vector itself is left out)",
}

VIEWS: tuple[View, ...] = (
    View(
        "memories",
        "The current view of every memory, every status (the live LanceDB table, no vectors).",
        tuple((name, _MEMORY_COLUMN_DOCS.get(name, "see the memory projection")) for name in VIEW_COLUMNS),
        since="created_at",
        archive=False,
    ),
    View(
        "memory_history",
        "One row per memory event of the memories topic (added, reinforced, superseded, "
        "deleted, promoted, expired, forgotten), once per event id.",
        (
            ("partition", "partition of the memories topic"),
            ("offset", "offset of the event"),
            ("learned_at", "broker time of the event"),
            ("event_id", "the event's id"),
            ("type", "memory_added, memory_reinforced, ... memory_forgotten"),
            ("user_id", "whose memory"),
            ("session_id", "session of the event"),
            ("agent_id", "agent of the event, if any"),
            ("occurred_at", "event time"),
            ("memory_id", "the memory the event is about"),
            ("memory_type", "memory_added: the memory's type"),
            ("content", "memory_added: the text (null when sealed)"),
            ("importance", "memory_added: 0..1"),
            ("tier", "memory_added: short_term or long_term"),
            ("extractor", "memory_added: extractor name/version"),
            ("extraction_event_id", "memory_added, memory_reinforced: the extraction"),
            ("source_event_ids", "chat events behind it (list)"),
            ("entities", "memory_added: entities (list)"),
            ("superseded_by", "memory_superseded: the new memory"),
            ("reason", "superseded, deleted, promoted, expired, forgotten: why (null when sealed)"),
            ("similarity", "reinforced, superseded: cosine similarity to the candidate"),
            ("policy", "memory_forgotten: the forgetting policy (decay)"),
            ("score", "memory_forgotten: the decay score the policy saw"),
            ("threshold", "memory_forgotten: the threshold it was under"),
            ("sealed", "content encrypted with the user's key (content, entities, reason: null)"),
        ),
        since="occurred_at",
    ),
    View(
        "accesses",
        "One row per memory a retrieval returned (memories_retrieved events of the accesses "
        "topic, once per event id).",
        (
            ("event_id", "the retrieval event"),
            ("user_id", "who retrieved"),
            ("session_id", "session of the retrieval"),
            ("agent_id", "agent of the retrieval, if any"),
            ("occurred_at", "event time of the retrieval"),
            ("rank", "position of the memory in the retrieval, from 1"),
            ("memory_id", "the memory returned"),
            ("score", "its rank score"),
        ),
        since="occurred_at",
    ),
    View(
        "sessions",
        "One row per user and session, folded from the chat topic's events.",
        (
            ("user_id", "whose session"),
            ("session_id", "the session"),
            ("started_at", "session_started event time (else the first event's)"),
            ("last_event_at", "event time of the last chat event"),
            ("events", "chat events"),
            ("messages", "message_added events"),
            ("user_messages", "message_added events with role user"),
            ("tool_calls", "tool_called events"),
            ("entity_mentions", "entity_mentioned events"),
            ("closed", "a session_closed event was recorded"),
            ("closed_at", "event time of the last session_closed"),
            ("close_reason", "explicit, idle or max_age (the last close)"),
        ),
        since="started_at",
    ),
    View(
        "extractions",
        "One row per extraction (extraction_recorded and extraction_failed events).",
        (
            ("event_id", "the extraction event"),
            ("user_id", "whose transcript"),
            ("session_id", "its session"),
            ("agent_id", "agent, if any"),
            ("occurred_at", "event time"),
            ("consolidation_event_id", "the consolidation request it answered"),
            ("extractor", "extractor name"),
            ("extractor_version", "extractor version"),
            ("model", "LLM model (null for the offline extractor)"),
            ("prompt_version", "prompt version, if any"),
            ("prompt_tokens", "LLM prompt tokens (0 without usage)"),
            ("completion_tokens", "LLM completion tokens (0 without usage)"),
            ("latency_ms", "extraction latency"),
            ("candidates", "candidates returned (null when failed or sealed)"),
            ("ok", "true for extraction_recorded, false for extraction_failed"),
            ("reason", "why it failed (null when sealed)"),
            ("attempts", "failed: attempts made"),
            ("retry_scheduled", "failed: the span will be tried again"),
            ("sealed", "its content is encrypted with the user's key"),
        ),
        since="occurred_at",
    ),
    View(
        "entity_mentions",
        "One row per entity_mentioned chat event (once per event id).",
        (
            ("event_id", "the event"),
            ("user_id", "who mentioned it"),
            ("session_id", "in which session"),
            ("occurred_at", "event time"),
            ("name", "the entity (null when sealed)"),
            ("kind", "its kind, if given (null when sealed)"),
        ),
        since="occurred_at",
    ),
    View(
        "dead_letters",
        "One row per record of the dead-letter topic: an event an agent gave up on.",
        (
            ("partition", "partition of the dead-letter topic"),
            ("offset", "offset of the dead letter"),
            ("dead_at", "when the agent gave up"),
            ("agent", "the agent (sessions, extraction, projector, ...)"),
            ("reason", "why"),
            ("source_topic", "topic of the original record"),
            ("source_partition", "its partition"),
            ("source_offset", "its offset"),
            ("key", "the original key (text)"),
            ("user_id", "user_id of the original event, else its key"),
            ("event_id", "event_id of the original event, if readable"),
            ("type", "type of the original event, if readable"),
            ("sealed", "the original bytes are encrypted with the user's key"),
        ),
        since="dead_at",
    ),
    View(
        "events",
        "Every archived record of every topic, with its envelope fields and JSON payload.",
        (
            ("topic", "the topic"),
            ("partition", "partition"),
            ("offset", "offset"),
            ("timestamp", "broker time"),
            ("date", "UTC day of the broker time (the archive's directory)"),
            ("key", "the record key (text)"),
            ("event_id", "envelope: event id (null when the value is not an event)"),
            ("type", "envelope: event type"),
            ("user_id", "envelope: user id (for a dead letter, its original event's)"),
            ("session_id", "envelope: session"),
            ("agent_id", "envelope: agent"),
            ("occurred_at", "envelope: event time"),
            ("schema_version", "envelope: schema version"),
            ("payload", "the value as JSON (null when it is not JSON)"),
        ),
        since="occurred_at (the broker time for a record without one)",
    ),
)

_VIEWS_BY_NAME: Mapping[str, View] = {view.name: view for view in VIEWS}
#: The topic (a ``Topics`` property) of each view that folds events of one topic.
_VIEW_TOPICS: Mapping[str, str] = {
    "memory_history": "memories",
    "extractions": "memories",
    "accesses": "accesses",
    "sessions": "chat",
    "entity_mentions": "chat",
}


def _original_text(doc: str) -> str:
    """The original event inside a dead letter (its ``value_b64``) as text; null when the
    bytes are not UTF-8."""
    return f"try(decode(try(from_base64(try(json_extract_string({doc}, '$.value_b64'))))))"


def _literal(text: str) -> str:
    """``text`` as a SQL string literal; only for code-made names that need no quoting."""
    if not _LITERAL.fullmatch(text):
        raise ValueError(f"refusing to put {text!r} into SQL")
    return f"'{text}'"


def _path_literal(path: Path) -> str:
    """A directory glob as a SQL string literal (paths come from settings, not from users)."""
    return "'" + str(path).replace("'", "''") + "'"


def _parsed(schema: str) -> str:
    """``doc`` (the value's text) parsed into a struct of ``schema`` (json_transform's form);
    null when the text is not JSON. One parse per record."""
    return f"try(json_transform(doc, '{schema}'))"


def _sealed(name: str) -> str:
    """Whether field ``name`` of the parsed event ``f`` holds a placeholder: its content is
    encrypted with the user's key (``encryption.fields``)."""
    return f"coalesce(list_contains(f.encryption.fields, {_literal(name)}), false)"


def _first_delivery(where: str, dedupe: bool) -> str:
    """A CTE ``e``: the records ``where`` selects, each event once per user.

    At-least-once delivery can put an event into the log twice (derived events have
    deterministic ids); with ``dedupe`` only the first record by (partition, offset) of each
    event id listed in ``_duplicates`` is kept. Records without a user id are left out: not
    an event, or blanked by ``memstream erase``.
    """
    selected = f"SELECT * FROM _records WHERE user_id IS NOT NULL AND {where}"
    if not dedupe:
        return f"e AS ({selected})"
    return f"""
        e AS (
            SELECT s.* FROM ({selected}) s
            LEFT JOIN _duplicates d
                ON d.topic = s.topic AND d.user_id = s.user_id AND d.event_id = s.event_id
            WHERE d.keep IS NULL OR row(s."partition", s."offset") = d.keep
        )"""


def _view_sql(topics: Topics, dedupe: bool) -> dict[str, str]:
    """The SELECT of each view, over ``_memories``, ``_records``, ``_duplicates`` and
    ``_params``; ``dedupe``: the log holds events delivered more than once."""
    chat, memories = _literal(topics.chat), _literal(topics.memories)
    accesses, deadletters = _literal(topics.accesses), _literal(topics.deadletters)
    history_types = ", ".join(_literal(t) for t in _HISTORY_TYPES)
    since = "(p.since IS NULL OR {column} >= p.since)"
    memory_columns = ", ".join(f"m.{c}" for c in VIEW_COLUMNS)
    history = _parsed(
        '{"memory_id": "VARCHAR", "memory_type": "VARCHAR", "content": "VARCHAR", '
        '"importance": "DOUBLE", "tier": "VARCHAR", "extractor": "VARCHAR", '
        '"extraction_event_id": "VARCHAR", "source_event_ids": ["VARCHAR"], '
        '"entities": ["VARCHAR"], "superseded_by": "VARCHAR", "reason": "VARCHAR", '
        '"similarity": "DOUBLE", "policy": "VARCHAR", "score": "DOUBLE", '
        '"threshold": "DOUBLE", "encryption": {"fields": ["VARCHAR"]}}'
    )
    extraction = _parsed(
        '{"consolidation_event_id": "VARCHAR", "extractor": "VARCHAR", '
        '"extractor_version": "VARCHAR", "model": "VARCHAR", "prompt_version": "VARCHAR", '
        '"usage": {"prompt_tokens": "BIGINT", "completion_tokens": "BIGINT"}, '
        '"latency_ms": "DOUBLE", "candidates": ["JSON"], "reason": "VARCHAR", '
        '"attempts": "BIGINT", "retry_scheduled": "BOOLEAN", '
        '"encryption": {"fields": ["VARCHAR"]}}'
    )
    letter = _parsed(
        '{"agent": "VARCHAR", "reason": "VARCHAR", "source_topic": "VARCHAR", '
        '"source_partition": "INTEGER", "source_offset": "BIGINT", "dead_at": "TIMESTAMPTZ", '
        '"key_id": "VARCHAR"}'
    )
    return {
        "memories": f"""
            SELECT {memory_columns} FROM _memories m, _params p
            WHERE {since.format(column="m.created_at")}""",
        "memory_history": f"""
            WITH {_first_delivery(f"topic = {memories} AND type IN ({history_types})", dedupe)},
            t AS (SELECT e.*, {history} AS f FROM e)
            SELECT t."partition", t."offset", t."timestamp" AS learned_at, t.event_id, t.type,
                t.user_id, t.session_id, t.agent_id, t.occurred_at, f.memory_id, f.memory_type,
                CASE WHEN NOT {_sealed("content")} THEN f.content END AS content, f.importance, f.tier, f.extractor, f.extraction_event_id,
                f.source_event_ids, CASE WHEN NOT {_sealed("entities")} THEN f.entities END AS entities,
                f.superseded_by, CASE WHEN NOT {_sealed("reason")} THEN f.reason END AS reason,
                f.similarity, f.policy, f.score, f.threshold, f.encryption IS NOT NULL AS sealed
            FROM t, _params p WHERE {since.format(column="t.occurred_at")}""",
        "accesses": f"""
            WITH {_first_delivery(f"topic = {accesses} AND type = 'memories_retrieved'", dedupe)},
            t AS (
                SELECT event_id, user_id, session_id, agent_id, occurred_at,
                    {_parsed('{"memories": [{"memory_id": "VARCHAR", "score": "DOUBLE"}]}')}
                        .memories AS hits
                FROM e
            ), u AS (
                SELECT event_id, user_id, session_id, agent_id, occurred_at,
                    generate_subscripts(hits, 1) AS rank, unnest(hits) AS hit
                FROM t, _params p WHERE {since.format(column="occurred_at")}
            )
            SELECT event_id, user_id, session_id, agent_id, occurred_at,
                CAST(rank AS BIGINT) AS rank, hit.memory_id AS memory_id, hit.score AS score
            FROM u""",
        "sessions": f"""
            WITH {_first_delivery(
                f"topic = {chat} AND type IS NOT NULL AND session_id IS NOT NULL", dedupe)},
            t AS (
                SELECT user_id, session_id, type, occurred_at,
                    {_parsed('{"role": "VARCHAR", "reason": "VARCHAR"}')} AS f
                FROM e
            ), s AS (
                SELECT user_id, session_id,
                    coalesce(min(occurred_at) FILTER (WHERE type = 'session_started'),
                             min(occurred_at)) AS started_at,
                    max(occurred_at) AS last_event_at,
                    count(*) AS events,
                    count(*) FILTER (WHERE type = 'message_added') AS messages,
                    count(*) FILTER (WHERE type = 'message_added' AND f.role = 'user')
                        AS user_messages,
                    count(*) FILTER (WHERE type = 'tool_called') AS tool_calls,
                    count(*) FILTER (WHERE type = 'entity_mentioned') AS entity_mentions,
                    bool_or(type = 'session_closed') AS closed,
                    max(occurred_at) FILTER (WHERE type = 'session_closed') AS closed_at,
                    arg_max(f.reason, occurred_at) FILTER (WHERE type = 'session_closed')
                        AS close_reason
                FROM t GROUP BY user_id, session_id
            )
            SELECT s.* FROM s, _params p WHERE {since.format(column="s.started_at")}""",
        "extractions": f"""
            WITH {_first_delivery(
                f"topic = {memories} AND type IN ('extraction_recorded', 'extraction_failed')",
                dedupe,
            )},
            t AS (SELECT e.*, {extraction} AS f FROM e)
            SELECT t.event_id, t.user_id, t.session_id, t.agent_id, t.occurred_at,
                f.consolidation_event_id, f.extractor, f.extractor_version, f.model,
                f.prompt_version, coalesce(f.usage.prompt_tokens, 0) AS prompt_tokens,
                coalesce(f.usage.completion_tokens, 0) AS completion_tokens,
                coalesce(f.latency_ms, 0) AS latency_ms,
                CASE WHEN t.type = 'extraction_recorded' AND NOT {_sealed("candidates")}
                     THEN CAST(coalesce(len(f.candidates), 0) AS BIGINT) END AS candidates,
                t.type = 'extraction_recorded' AS ok,
                CASE WHEN NOT {_sealed("reason")} THEN f.reason END AS reason, f.attempts,
                f.retry_scheduled, f.encryption IS NOT NULL AS sealed
            FROM t, _params p WHERE {since.format(column="t.occurred_at")}""",
        "entity_mentions": f"""
            WITH {_first_delivery(f"topic = {chat} AND type = 'entity_mentioned'", dedupe)},
            t AS (
                SELECT event_id, user_id, session_id, occurred_at,
                    {_parsed('{"name": "VARCHAR", "kind": "VARCHAR", '
                             '"encryption": {"fields": ["VARCHAR"]}}')} AS f
                FROM e
            )
            SELECT event_id, user_id, session_id, occurred_at,
                CASE WHEN NOT {_sealed("name")} THEN f.name END AS name,
                CASE WHEN NOT {_sealed("kind")} THEN f.kind END AS kind
            FROM t, _params p
            WHERE f.name IS NOT NULL AND {since.format(column="occurred_at")}""",
        "dead_letters": f"""
            WITH t AS (
                SELECT "partition", "offset", key, owner, {letter} AS f,
                    {_original_text('doc')} AS original
                FROM _records WHERE topic = {deadletters}
            )
            SELECT "partition", "offset", f.dead_at, f.agent, f.reason, f.source_topic,
                f.source_partition, f.source_offset, try(decode(key)) AS key,
                owner AS user_id, try(json_extract_string(original, '$.event_id')) AS event_id,
                try(json_extract_string(original, '$.type')) AS type,
                f.key_id IS NOT NULL AS sealed
            FROM t, _params p WHERE {since.format(column="f.dead_at")}""",
        "events": f"""
            SELECT r.topic, r."partition", r."offset", r."timestamp", r.date,
                try(decode(r.key)) AS key, r.event_id, r.type, r.owner AS user_id,
                r.session_id, r.agent_id, r.occurred_at, r.schema_version,
                try(CAST(r.doc AS JSON)) AS payload
            FROM _records r, _params p
            WHERE {since.format(column='coalesce(r.occurred_at, r."timestamp")')}""",
    }


def _records_sql(source: str, deadletters: str) -> str:
    """The archive's records with the value as text (``doc``) and the user they belong to
    (``owner``: the event's user_id; for a dead letter, its original event's, else its key).

    ``try``: a value need not be UTF-8 or JSON (the archive keeps every record as it came).
    """
    return f"""
        SELECT r.*, CASE
            WHEN r.user_id IS NOT NULL THEN r.user_id
            WHEN r.topic = {deadletters} THEN coalesce(
                try(json_extract_string({_original_text('r.doc')}, '$.user_id')),
                try(decode(r.key)))
        END AS owner
        FROM (
            SELECT topic, "partition", "offset", "timestamp", date, key, event_id, type,
                user_id, session_id, agent_id, occurred_at, schema_version,
                try(decode(value)) AS doc
            FROM {source}
        ) r"""


# --- reports ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlotSpec:
    """The default chart of a report: ``sql`` over the report's rows (table ``result``)
    gives the x column and one or more y series."""

    kind: Literal["bar", "line"]
    sql: str
    x: str
    y: tuple[str, ...]
    title: str
    ylabel: str


@dataclass(frozen=True)
class Report:
    """A named report: SQL over the views, the views it reads, and its default chart."""

    name: str
    description: str
    sql: str
    views: frozenset[str]
    plot: PlotSpec
    #: Which of ``ReportOptions`` it uses (for ``--list`` and the CLI's help).
    options: tuple[str, ...] = ()


def _type_columns() -> str:
    return ",\n".join(
        f"count(*) FILTER (WHERE memory_type = {_literal(t)}) AS {t}" for t in _MEMORY_TYPES
    )


_ERASED_SQL = ", ".join(_literal(s) for s in _ERASED)

_REPORT_LIST: tuple[Report, ...] = (
    Report(
        "access",
        "Retrievals and hit rate per user and memory type (hit rate: share of the memories "
        "retrieved at least once).",
        """
        WITH a AS (SELECT user_id, memory_id, count(*) AS accesses FROM accesses GROUP BY ALL)
        SELECT m.user_id, m.memory_type, count(*) AS memories,
            count(a.memory_id) AS retrieved,
            CAST(coalesce(sum(a.accesses), 0) AS BIGINT) AS accesses,
            count(a.memory_id) / count(*) AS hit_rate
        FROM memories m LEFT JOIN a ON a.user_id = m.user_id AND a.memory_id = m.memory_id
        GROUP BY m.user_id, m.memory_type ORDER BY m.user_id, m.memory_type""",
        frozenset({"memories", "accesses"}),
        PlotSpec(
            "bar",
            "SELECT memory_type, sum(retrieved) / sum(memories) AS hit_rate FROM result "
            "GROUP BY memory_type ORDER BY memory_type",
            "memory_type",
            ("hit_rate",),
            "Hit rate per memory type",
            "share retrieved at least once",
        ),
    ),
    Report(
        "most-used",
        "The active memories retrieved most often (top --limit by access count).",
        """
        SELECT m.user_id, m.memory_id, m.memory_type, m.content, m.access_count,
            m.last_accessed_at, m.created_at
        FROM memories m, _params p WHERE m.status = 'active'
        QUALIFY row_number() OVER (ORDER BY m.access_count DESC, m.memory_id) <= p.limit_n
        ORDER BY m.access_count DESC, m.memory_id""",
        frozenset({"memories"}),
        PlotSpec(
            "bar",
            "SELECT memory_id, access_count FROM result",
            "memory_id",
            ("access_count",),
            "Most-used memories",
            "retrievals",
        ),
        options=("limit",),
    ),
    Report(
        "least-used",
        "The active memories retrieved least often (bottom --limit by access count).",
        """
        SELECT m.user_id, m.memory_id, m.memory_type, m.content, m.access_count,
            m.last_accessed_at, m.created_at
        FROM memories m, _params p WHERE m.status = 'active'
        QUALIFY row_number() OVER (ORDER BY m.access_count, m.memory_id) <= p.limit_n
        ORDER BY m.access_count, m.memory_id""",
        frozenset({"memories"}),
        PlotSpec(
            "bar",
            "SELECT memory_id, access_count FROM result",
            "memory_id",
            ("access_count",),
            "Least-used memories",
            "retrievals",
        ),
        options=("limit",),
    ),
    Report(
        "decay",
        "Each memory's decay score (importance, recency, use, weighted as in the rank), "
        "whether it is under MEMSTREAM_FORGET_THRESHOLD and eligible for forgetting.",
        """
        WITH m AS (
            SELECT m.*, p.*,
                greatest(epoch_us(p.now) - epoch_us(m.created_at), 0) / 86400e6 AS age_days
            FROM memories m, _params p
        ), s AS (
            SELECT *, pow(0.5, age_days / half_life_days) AS recency,
                least(ln(1 + greatest(access_count, 0)) / ln(1 + use_saturation), 1.0)
                    AS use_score
            FROM m
        )
        SELECT user_id, memory_id, memory_type, status, tier, importance, created_at,
            age_days, access_count, recency, use_score,
            CASE WHEN w_importance + w_recency + w_use > 0
                THEN (w_importance * importance + w_recency * recency + w_use * use_score)
                    / (w_importance + w_recency + w_use)
                ELSE 0.0 END AS decay_score,
            decay_score < forget_threshold AS below_threshold,
            status = 'active' AND below_threshold AND age_days >= forget_min_age_days
                AND NOT list_contains(forget_keep_types, memory_type) AS forgettable
        FROM s ORDER BY decay_score, memory_id""",
        frozenset({"memories"}),
        PlotSpec(
            "bar",
            "SELECT printf('%.1f', least(floor(decay_score * 10), 9) / 10) AS score_from, "
            "count(*) AS memories FROM result WHERE status = 'active' AND decay_score "
            "IS NOT NULL GROUP BY score_from ORDER BY score_from",
            "score_from",
            ("memories",),
            "Active memories by decay score (buckets of 0.1)",
            "memories",
        ),
    ),
    Report(
        "growth",
        "Memories added per user per day (event time, UTC), with each user's running total.",
        """
        SELECT user_id, CAST(created_at AS DATE) AS day, count(*) AS added,
            CAST(sum(count(*)) OVER (PARTITION BY user_id ORDER BY CAST(created_at AS DATE))
                AS BIGINT) AS total
        FROM memories GROUP BY user_id, day ORDER BY user_id, day""",
        frozenset({"memories"}),
        PlotSpec(
            "line",
            "SELECT day, CAST(sum(added) AS BIGINT) AS added, "
            "CAST(sum(sum(added)) OVER (ORDER BY day) AS BIGINT) AS total "
            "FROM result GROUP BY day ORDER BY day",
            "day",
            ("total",),
            "Memories added, running total (event time, UTC)",
            "memories",
        ),
    ),
    Report(
        "yield",
        "Extraction yield: memories per session, by type, beside the session's messages.",
        f"""
        WITH m AS (
            SELECT user_id, session_id, count(*) AS memories, {_type_columns()}
            FROM memories GROUP BY user_id, session_id
        )
        SELECT coalesce(s.user_id, m.user_id) AS user_id,
            coalesce(s.session_id, m.session_id) AS session_id, s.started_at,
            coalesce(s.messages, 0) AS messages, coalesce(m.memories, 0) AS memories,
            {", ".join(f"coalesce(m.{t}, 0) AS {t}" for t in _MEMORY_TYPES)}
        FROM sessions s FULL JOIN m ON s.user_id = m.user_id AND s.session_id = m.session_id
        ORDER BY user_id, session_id""",
        frozenset({"memories", "sessions"}),
        PlotSpec(
            "bar",
            "UNPIVOT (SELECT "
            + ", ".join(f"avg({t}) AS {t}" for t in _MEMORY_TYPES)
            + " FROM result) ON COLUMNS(*) INTO NAME memory_type VALUE per_session",
            "memory_type",
            ("per_session",),
            "Memories per session, by type",
            "memories per session",
        ),
    ),
    Report(
        "junk",
        "Junk rate: memories at least --days old that no retrieval returned within --days of "
        "their creation, per user and type.",
        """
        WITH first_use AS (
            -- Retrieved within the window if and only if the first retrieval is.
            SELECT user_id, memory_id, min(occurred_at) AS first_at
            FROM accesses GROUP BY user_id, memory_id
        ), judged AS (
            SELECT m.user_id, m.memory_type,
                f.first_at IS NULL OR f.first_at > m.created_at + to_days(p.junk_days) AS junk
            FROM memories m
            CROSS JOIN _params p
            LEFT JOIN first_use f ON f.user_id = m.user_id AND f.memory_id = m.memory_id
            WHERE m.created_at <= p.now - to_days(p.junk_days)
        )
        SELECT user_id, memory_type, count(*) AS memories,
            count(*) FILTER (WHERE junk) AS junk,
            count(*) FILTER (WHERE junk) / count(*) AS junk_rate
        FROM judged GROUP BY user_id, memory_type ORDER BY user_id, memory_type""",
        frozenset({"memories", "accesses"}),
        PlotSpec(
            "bar",
            "SELECT memory_type, sum(junk) / sum(memories) AS junk_rate FROM result "
            "GROUP BY memory_type ORDER BY memory_type",
            "memory_type",
            ("junk_rate",),
            "Junk rate per memory type",
            "share never retrieved",
        ),
        options=("days",),
    ),
    Report(
        "duplicates",
        "Exact duplicates (same normalised content) and near-duplicates (reinforcements) "
        "per user, with the share of candidates that repeated a known memory.",
        f"""
        WITH m AS (
            SELECT user_id, lower(trim(regexp_replace(content, '\\s+', ' ', 'g'))) AS normalised
            FROM memories WHERE status NOT IN ({_ERASED_SQL})
        ), g AS (
            SELECT user_id, normalised, count(*) AS n FROM m GROUP BY user_id, normalised
        ), exact AS (
            SELECT user_id, CAST(sum(n) AS BIGINT) AS memories,
                count(*) FILTER (WHERE n > 1) AS exact_groups,
                CAST(coalesce(sum(n - 1) FILTER (WHERE n > 1), 0) AS BIGINT) AS exact_duplicates
            FROM g GROUP BY user_id
        ), near AS (
            SELECT user_id, count(*) AS near_duplicates,
                count(DISTINCT memory_id) AS reinforced_memories
            FROM memory_history WHERE type = 'memory_reinforced' GROUP BY user_id
        )
        SELECT coalesce(x.user_id, n.user_id) AS user_id, coalesce(x.memories, 0) AS memories,
            coalesce(x.exact_groups, 0) AS exact_groups,
            coalesce(x.exact_duplicates, 0) AS exact_duplicates,
            coalesce(n.near_duplicates, 0) AS near_duplicates,
            coalesce(n.reinforced_memories, 0) AS reinforced_memories,
            (coalesce(x.exact_duplicates, 0) + coalesce(n.near_duplicates, 0))
                / nullif(coalesce(x.memories, 0) + coalesce(n.near_duplicates, 0), 0)
                AS duplicate_rate
        FROM exact x FULL JOIN near n ON x.user_id = n.user_id ORDER BY user_id""",
        frozenset({"memories", "memory_history"}),
        PlotSpec(
            "bar",
            "SELECT user_id, duplicate_rate FROM result "
            "ORDER BY duplicate_rate DESC NULLS LAST, user_id LIMIT 30",
            "user_id",
            ("duplicate_rate",),
            "Duplicate rate per user (top 30)",
            "share of candidates repeating a memory",
        ),
    ),
    Report(
        "supersession",
        "Supersession rate per user and type: memories superseded / memories added.",
        """
        WITH added AS (
            SELECT user_id, memory_id, min(memory_type) AS memory_type
            FROM memory_history WHERE type = 'memory_added' GROUP BY user_id, memory_id
        ), superseded AS (
            SELECT DISTINCT user_id, memory_id
            FROM memory_history WHERE type = 'memory_superseded'
        )
        SELECT a.user_id, a.memory_type, count(*) AS added, count(s.memory_id) AS superseded,
            count(s.memory_id) / count(*) AS supersession_rate
        FROM added a
        LEFT JOIN superseded s ON s.user_id = a.user_id AND s.memory_id = a.memory_id
        GROUP BY a.user_id, a.memory_type ORDER BY a.user_id, a.memory_type""",
        frozenset({"memory_history"}),
        PlotSpec(
            "bar",
            "SELECT memory_type, sum(superseded) / sum(added) AS supersession_rate FROM result "
            "GROUP BY memory_type ORDER BY memory_type",
            "memory_type",
            ("supersession_rate",),
            "Supersession rate per memory type",
            "superseded / added",
        ),
    ),
    Report(
        "failures",
        "Extraction failures per extractor and model, and dead letters per agent and "
        "source topic.",
        """
        SELECT 'extraction' AS source, extractor || '/' || extractor_version AS extractor, model,
            CAST(NULL AS VARCHAR) AS agent, CAST(NULL AS VARCHAR) AS source_topic,
            count(*) AS events, count(*) FILTER (WHERE NOT ok) AS failures,
            count(*) FILTER (WHERE NOT ok) / count(*) AS failure_rate,
            max(occurred_at) FILTER (WHERE NOT ok) AS last_failure_at
        FROM extractions GROUP BY ALL
        UNION ALL
        SELECT 'dead_letter', NULL, NULL, agent, source_topic, NULL, count(*), NULL,
            max(dead_at)
        FROM dead_letters GROUP BY agent, source_topic
        ORDER BY source, extractor, model, agent, source_topic""",
        frozenset({"extractions", "dead_letters"}),
        PlotSpec(
            "bar",
            "SELECT CASE WHEN source = 'dead_letter' "
            "THEN 'dead letters: ' || coalesce(agent, '-') || ' (' || coalesce(source_topic, '-') "
            "|| ')' ELSE extractor || ' ' || coalesce(model, '-') END AS what, failures "
            "FROM result",
            "what",
            ("failures",),
            "Extraction failures and dead letters",
            "failures",
        ),
    ),
    Report(
        "llm-cost",
        "LLM calls of extraction per user, session, prompt version and model: tokens, latency "
        "(avg, p95) and cost at MEMSTREAM_LLM_PRICE_*_PER_MTOK.",
        """
        SELECT e.user_id, e.session_id, e.prompt_version, e.model, count(*) AS calls,
            count(*) FILTER (WHERE NOT e.ok) AS failed_calls,
            CAST(sum(e.prompt_tokens) AS BIGINT) AS prompt_tokens,
            CAST(sum(e.completion_tokens) AS BIGINT) AS completion_tokens,
            CAST(sum(e.prompt_tokens + e.completion_tokens) AS BIGINT) AS total_tokens,
            avg(e.latency_ms) AS avg_latency_ms,
            quantile_cont(e.latency_ms, 0.95) AS p95_latency_ms,
            (sum(e.prompt_tokens) * any_value(p.price_prompt)
                + sum(e.completion_tokens) * any_value(p.price_completion)) / 1e6 AS cost
        FROM extractions e, _params p WHERE e.model IS NOT NULL
        GROUP BY e.user_id, e.session_id, e.prompt_version, e.model
        ORDER BY e.user_id, e.session_id, e.prompt_version, e.model""",
        frozenset({"extractions"}),
        PlotSpec(
            "bar",
            "SELECT coalesce(prompt_version, '-') AS prompt_version, "
            "CAST(sum(total_tokens) AS BIGINT) AS tokens FROM result "
            "GROUP BY 1 ORDER BY 1",
            "prompt_version",
            ("tokens",),
            "LLM tokens per prompt version",
            "tokens",
        ),
    ),
    Report(
        "entities",
        "Top --limit entities per user: named in memories and mentioned in chat.",
        f"""
        WITH named AS (
            SELECT user_id, unnest(entities) AS entity, 1 AS in_memories, 0 AS mentions
            FROM memories WHERE status NOT IN ({_ERASED_SQL})
            UNION ALL
            SELECT user_id, name, 0, 1 FROM entity_mentions
        ), g AS (
            SELECT user_id, lower(trim(entity)) AS entity_key, min(entity) AS entity,
                CAST(sum(in_memories) AS BIGINT) AS in_memories,
                CAST(sum(mentions) AS BIGINT) AS mentions
            FROM named WHERE trim(entity) <> '' GROUP BY user_id, entity_key
        )
        SELECT g.user_id, g.entity, g.in_memories, g.mentions,
            g.in_memories + g.mentions AS total
        FROM g, _params p
        QUALIFY row_number() OVER (
            PARTITION BY g.user_id ORDER BY g.in_memories + g.mentions DESC, g.entity
        ) <= p.limit_n
        ORDER BY g.user_id, total DESC, g.entity""",
        frozenset({"memories", "entity_mentions"}),
        PlotSpec(
            "bar",
            "SELECT entity, CAST(sum(total) AS BIGINT) AS total FROM result "
            "GROUP BY entity ORDER BY total DESC, entity LIMIT 20",
            "entity",
            ("total",),
            "Top entities",
            "memories + mentions",
        ),
        options=("limit",),
    ),
)

#: Every named report, by name.
REPORTS: Mapping[str, Report] = {report.name: report for report in _REPORT_LIST}


# --- opening the views ------------------------------------------------------------------------


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _storable(text: str) -> bool:
    """Whether ``text`` can be a stored id (UTF-8 encodable: no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _memory_arrow_schema() -> pa.Schema:
    """The ``memories`` view's columns with the projection's types (all nullable)."""
    full = memory_schema(1, "analytics")
    return pa.schema([full.field(name).with_nullable(True) for name in VIEW_COLUMNS])


def _memory_rows(settings: Settings, user_id: str | None) -> pa.Table:
    """The live memory table's rows (every status, no vectors), one user's when given.

    The table is opened with LanceDB itself: no embedder, no model load. The user's rows are
    selected by the digest of the id (code-made SQL, as in the projection), then checked
    once more by equality in pyarrow.
    """
    schema = _memory_arrow_schema()
    name = live_name(settings.lancedb_dir, "memories", DEFAULT_TABLE)
    if not settings.lancedb_dir.is_dir():
        return schema.empty_table()
    try:
        table = lancedb.connect(settings.lancedb_dir).open_table(name)
    except (ValueError, FileNotFoundError):
        return schema.empty_table()
    present = [c for c in VIEW_COLUMNS if c in table.schema.names]
    query = table.search()
    if user_id is not None:
        key = user_key(user_id)
        if not re.fullmatch(r"[0-9a-f]{64}", key):
            raise AssertionError("user_key is not a sha256 hex digest")
        query = query.where(f"user_key = '{key}'")
    rows: pa.Table = query.select(present).limit(None).to_arrow()
    if user_id is not None:
        rows = rows.filter(pc.equal(rows.column("user_id"), pa.scalar(user_id, pa.string())))
    columns = [
        rows.column(f.name).cast(f.type) if f.name in present else pa.nulls(rows.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _archive_source(settings: Settings, con: duckdb.DuckDBPyConnection) -> str:
    """The FROM clause of the archive: ``read_parquet`` of its files, or an empty table of
    the archive's columns when there are none."""
    directory = live_archive_dir(settings)
    if any(directory.glob("topic=*/date=*/*.parquet")):
        glob = _path_literal(directory / "**" / "*.parquet")
        # hive_types: the directory names must not be guessed into numbers.
        return (
            f"read_parquet({glob}, hive_partitioning = true, union_by_name = true, "
            "hive_types = {'topic': VARCHAR, 'date': DATE})"
        )
    return _empty_archive(con)


def _find_duplicates(con: duckdb.DuckDBPyConnection, topics: Topics, wanted: frozenset[str]) -> int:
    """Fill ``_duplicates`` with the events recorded more than once in the topics the wanted
    views fold, each with the (partition, offset) of its first record; return how many.

    Usually there are none, and the views then need no de-duplicating join. Candidates are
    found on a 64-bit hash of (topic, user, event id), the cheap part; only when some hash
    repeats are the ids themselves compared.
    """
    read = sorted({getattr(topics, _VIEW_TOPICS[v]) for v in wanted if v in _VIEW_TOPICS})
    in_topics = ", ".join(_literal(t) for t in read) if read else "NULL"
    events = f"""
        FROM _records
        WHERE topic IN ({in_topics}) AND user_id IS NOT NULL AND event_id IS NOT NULL"""
    ((candidates,),) = con.execute(
        f"""SELECT count(*) FROM (
            SELECT hash(topic, user_id, event_id) AS h {events} GROUP BY h HAVING count(*) > 1
        )"""
    ).fetchall()
    con.execute(
        f"""
        CREATE TEMP TABLE _duplicates AS
        SELECT topic, user_id, event_id, min(row("partition", "offset")) AS keep
        {events} AND {"true" if candidates else "false"}
        GROUP BY topic, user_id, event_id HAVING count(*) > 1
        """
    )
    ((found,),) = con.execute("SELECT count(*) FROM _duplicates").fetchall()
    return int(found)


def _owned_records(records: str, topics: Topics, wanted: frozenset[str]) -> str:
    """The SELECT of one user's archive records (the user id is parameter ``$1``), from the
    topics the wanted views read.

    Two scans, so the common one is a plain ``user_id = $1`` the Parquet reader filters on
    before it reads values; dead letters (no envelope) are matched on their derived owner.
    """
    if "events" in wanted:
        read = set(topics.all()) | {"*"}
    else:
        read = {getattr(topics, _VIEW_TOPICS[v]) for v in wanted if v in _VIEW_TOPICS}
        if "dead_letters" in wanted:
            read.add(topics.deadletters)
    if "*" in read:
        where_topic = ""
    else:
        listed = ", ".join(_literal(t) for t in sorted(read)) or "NULL"
        where_topic = f" AND topic IN ({listed})"
    owned = f"SELECT * FROM ({records}) WHERE user_id = $1{where_topic}"
    if topics.deadletters not in read:
        return owned
    return (
        f"{owned} UNION ALL SELECT * FROM ({records}) WHERE user_id IS NULL "
        f"AND topic = {_literal(topics.deadletters)} AND owner = $1"
    )


def _empty_archive(con: duckdb.DuckDBPyConnection) -> str:
    """Register an empty table of the archive's columns (and its ``date`` directory)."""
    con.register("_archive_empty", ARCHIVE_SCHEMA.append(pa.field("date", pa.date32())).empty_table())
    return "_archive_empty"


def open_views(
    settings: Settings,
    scope: Scope = Scope(),
    *,
    views: frozenset[str] | None = None,
    options: ReportOptions = ReportOptions(),
) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection with the views of :data:`VIEWS` defined.

    Parameters
    ----------
    settings
        Where the LanceDB table and the archive are, the topic names, the decay and price
        settings the reports use.
    scope
        Whose rows (``user_id``) and which times (``since``; ``now`` for ages).
    views
        The views the caller will read: only these are defined, and sources none of them
        reads are left empty (a report on the archive alone never loads the memory table).
        None: all of them.
    options
        ``days`` and ``limit`` of the reports, in ``_params``.

    The caller closes the connection.
    """
    wanted = frozenset(_VIEWS_BY_NAME) if views is None else views
    if wanted - set(_VIEWS_BY_NAME):
        raise ValueError(f"unknown views {sorted(wanted - set(_VIEWS_BY_NAME))}")
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False})
    try:
        _define(con, settings, scope, wanted, options)
    except BaseException:
        con.close()
        raise
    return con


def _define(
    con: duckdb.DuckDBPyConnection,
    settings: Settings,
    scope: Scope,
    wanted: frozenset[str],
    options: ReportOptions,
) -> None:
    con.execute("SET TimeZone = 'UTC'")
    # Every view over the archive binds read_parquet again (its files' schemas).
    con.execute("SET parquet_metadata_cache = true")
    topics = Topics.from_settings(settings)
    user_id = scope.user_id
    scoped = user_id is not None
    # An id that cannot be stored (a lone surrogate from a shell) owns nothing: empty views.
    readable = user_id is None or _storable(user_id)
    needs_memories = readable and "memories" in wanted
    needs_archive = readable and any(_VIEWS_BY_NAME[v].archive for v in wanted)

    memories = (
        _memory_rows(settings, user_id) if needs_memories else _memory_arrow_schema().empty_table()
    )
    con.register("_memories_arrow", memories)
    source = _archive_source(settings, con) if needs_archive else _empty_archive(con)
    records = _records_sql(source, _literal(topics.deadletters))
    if scoped:
        # Copies of the user's rows only, selected with parameters; the unfiltered sources
        # are dropped from the connection below.
        con.execute("CREATE TEMP TABLE _memories AS SELECT * FROM _memories_arrow")
        con.execute(
            f"CREATE TEMP TABLE _records AS {_owned_records(records, topics, wanted)}",
            [user_id if readable else None],
        )
    else:
        con.execute("CREATE TEMP VIEW _memories AS SELECT * FROM _memories_arrow")
        con.execute(f"CREATE TEMP VIEW _records AS {records}")
    con.execute(
        """
        CREATE TEMP TABLE _params AS SELECT
            CAST($now AS TIMESTAMPTZ) AS now, CAST($since AS TIMESTAMPTZ) AS since,
            CAST($half_life AS DOUBLE) AS half_life_days,
            CAST($w_importance AS DOUBLE) AS w_importance,
            CAST($w_recency AS DOUBLE) AS w_recency, CAST($w_use AS DOUBLE) AS w_use,
            CAST($saturation AS DOUBLE) AS use_saturation,
            CAST($threshold AS DOUBLE) AS forget_threshold,
            CAST($min_age AS DOUBLE) AS forget_min_age_days,
            CAST($keep_types AS VARCHAR[]) AS forget_keep_types,
            CAST($price_prompt AS DOUBLE) AS price_prompt,
            CAST($price_completion AS DOUBLE) AS price_completion,
            CAST($days AS INTEGER) AS junk_days, CAST($limit_n AS BIGINT) AS limit_n
        """,
        {
            "now": scope.resolved_now(),
            "since": None if scope.since is None else _aware(scope.since),
            "half_life": settings.recency_half_life_days,
            "w_importance": settings.weight_importance,
            "w_recency": settings.weight_recency,
            "w_use": settings.weight_use,
            "saturation": settings.decay_use_saturation,
            "threshold": settings.forget_threshold,
            "min_age": settings.forget_min_age_days,
            "keep_types": [t for t in settings.forget_keep_types.split(",") if t],
            "price_prompt": settings.llm_price_prompt_per_mtok,
            "price_completion": settings.llm_price_completion_per_mtok,
            "days": options.days,
            "limit_n": options.limit,
        },
    )
    duplicates = _find_duplicates(con, topics, wanted)
    # Only the wanted views: each definition binds the archive's files again.
    for name, select in _view_sql(topics, dedupe=duplicates > 0).items():
        if name in wanted:
            con.execute(f"CREATE TEMP VIEW {name} AS {select}")
    if scoped:
        con.unregister("_memories_arrow")
        if source == "_archive_empty":
            con.unregister("_archive_empty")
        # Nothing outside the copies above can be read any more, and that cannot be undone.
        con.execute("SET python_enable_replacements = false")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")


# --- running ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportResult:
    """A report's rows and the data of its default chart."""

    report: Report
    table: pa.Table
    chart: pa.Table
    scope: Scope = field(default_factory=Scope)


def _arrow(relation: duckdb.DuckDBPyRelation) -> pa.Table:
    """A relation's rows as Arrow (``to_arrow_table`` in DuckDB 1.4+, ``arrow`` before)."""
    convert = getattr(relation, "to_arrow_table", None) or relation.arrow
    table = convert()
    if isinstance(table, pa.RecordBatchReader):
        table = table.read_all()
    assert isinstance(table, pa.Table)
    return table


def run_report(
    settings: Settings,
    name: str,
    scope: Scope = Scope(),
    options: ReportOptions = ReportOptions(),
) -> ReportResult:
    """Run the named report on one fresh connection; return its rows and chart data.

    Raises
    ------
    KeyError
        If there is no report of that name (see :data:`REPORTS`).
    """
    report = REPORTS[name]
    con = open_views(settings, scope, views=report.views, options=options)
    try:
        table = _arrow(con.sql(report.sql))
        con.register("result", table)
        chart = _arrow(con.sql(report.plot.sql))
    finally:
        con.close()
    return ReportResult(report, table, chart, scope)


def check_read_only(query: str, con: duckdb.DuckDBPyConnection | None = None) -> str:
    """The one statement of ``query`` if it is a read-only SELECT (or WITH ... SELECT).

    Checked with DuckDB's own parser, never by matching text: exactly one statement, of type
    SELECT, and no data-modifying node anywhere in its parse tree (DuckDB parses
    ``WITH d AS (DELETE ... RETURNING *) SELECT ...`` as a SELECT). The parse tree comes from
    ``json_serialize_sql`` on ``con`` (a throwaway connection when None).

    Raises
    ------
    NotReadOnly
        With the reason.

    Examples
    --------
    >>> check_read_only("SELECT 1")
    'SELECT 1'
    >>> check_read_only("DELETE FROM memories")
    Traceback (most recent call last):
    ...
    memstream.projections.analytics.NotReadOnly: only a SELECT (or WITH ... SELECT) statement is allowed, not DELETE
    """
    statement = _single_select(query)
    if con is not None:
        _refuse_modifying_nodes(con, statement)
        return statement
    parser = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False})
    try:
        _refuse_modifying_nodes(parser, statement)
    finally:
        parser.close()
    return statement


def _single_select(query: str) -> str:
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise NotReadOnly(f"not valid SQL: {exc}") from None
    if len(statements) != 1:
        raise NotReadOnly(f"exactly one statement is allowed, not {len(statements)}")
    statement = statements[0]
    if statement.type != duckdb.StatementType.SELECT:
        raise NotReadOnly(
            "only a SELECT (or WITH ... SELECT) statement is allowed, "
            f"not {statement.type.name}"
        )
    return str(statement.query)


def _refuse_modifying_nodes(con: duckdb.DuckDBPyConnection, statement: str) -> None:
    # fetchall, not fetchone: DuckDB 2 refuses other work while a result is unfinished.
    (row,) = con.execute("SELECT json_serialize_sql($1)", [statement]).fetchall()
    tree = json.loads(row[0])
    if tree.get("error"):
        raise NotReadOnly(f"not a plain SELECT: {tree.get('error_message', 'unparsable')}")
    for node_type in _node_types(tree):
        if node_type.endswith("_NODE") and node_type not in _READ_ONLY_NODES:
            raise NotReadOnly(f"the query modifies data ({node_type.removesuffix('_NODE')})")


def _node_types(tree: Any) -> Iterator[str]:
    """Every ``type`` value in a serialized parse tree."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            node_type = item.get("type")
            if isinstance(node_type, str):
                yield node_type
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def run_sql(settings: Settings, query: str, scope: Scope = Scope()) -> pa.Table:
    """Run one read-only ad-hoc query over the views, on one fresh connection.

    Raises
    ------
    NotReadOnly
        If ``query`` is not a single read-only SELECT / WITH statement.
    duckdb.Error
        If DuckDB cannot run it (unknown column, a file read while scoped to a user, ...).
    """
    statement = _single_select(query)  # before anything is opened
    con = open_views(settings, scope)
    try:
        _refuse_modifying_nodes(con, statement)
        return _arrow(con.sql(statement))
    finally:
        con.close()


# --- output -----------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, list):
        return ", ".join(_cell(item) for item in value)
    text = " ".join(str(value).split())
    return text if len(text) <= _CELL_CHARS else text[: _CELL_CHARS - 1] + "…"


def _rows(table: pa.Table) -> Iterator[tuple[Any, ...]]:
    """The rows as tuples: by position, so two columns of one name both stay."""
    return zip(*(column.to_pylist() for column in table.columns), strict=True)


def render_table(table: pa.Table) -> str:
    """The rows as an aligned text table, with a row count; numbers right-aligned."""
    names = table.column_names
    rows = [[_cell(v) for v in row] for row in _rows(table)]
    widths = [max([len(n), *(len(r[i]) for r in rows)]) for i, n in enumerate(names)]
    numeric = [
        pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in table.schema
    ]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if right else c.ljust(w)
            for c, w, right in zip(cells, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out = [line(names), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    out.append(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})")
    return "\n".join(out)


def _unique_names(names: Sequence[str]) -> list[str]:
    """Column names as JSON keys: a repeated name gets ``_2``, ``_3``... (an ad-hoc query
    may select two columns of one name)."""
    used: set[str] = set()
    unique = []
    for name in names:
        candidate, n = name, 1
        while candidate in used:
            n += 1
            candidate = f"{name}_{n}"
        used.add(candidate)
        unique.append(candidate)
    return unique


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def _csv_strings(column: pa.ChunkedArray) -> list[str]:
    """A column as CSV cells: empty for null (and NaN, infinity), ISO 8601 times, ``true`` /
    ``false``, shortest round-trip floats, lists and structs as JSON."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        if kind.tz is None:
            text = pc.strftime(column, format="%Y-%m-%dT%H:%M:%S")
        else:
            text = pc.replace_substring_regex(
                pc.strftime(column, format="%Y-%m-%dT%H:%M:%S%z"),
                pattern=r"([+-]\d\d)(\d\d)$",
                replacement=r"\1:\2",
            )
    elif pa.types.is_floating(kind):
        text = pc.if_else(pc.is_finite(column), pc.cast(column, pa.string()), None)
    elif (
        pa.types.is_integer(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_date(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
    ):
        text = pc.cast(column, pa.string())
    else:
        return [_csv_value(value) for value in column.to_pylist()]
    return list(pc.fill_null(text, "").to_pylist())


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if not math.isfinite(value) else repr(value)
    if isinstance(value, list | dict):
        return json.dumps(_json_value(value), ensure_ascii=False)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return str(value)


def write_output(
    table: pa.Table, fmt: OutputFormat, out: Path | None = None, stream: IO[str] | None = None
) -> None:
    """Write the rows as ``fmt`` to ``out`` (a file) or ``stream`` (stdout by default).

    ``table``: aligned text; ``csv``: a header line, empty cells for nulls, lists as JSON,
    times in ISO 8601; ``json``: an array of objects; ``parquet``: the Arrow table as is
    (needs ``out``).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    if fmt == "parquet":
        if out is None:
            raise ValueError("the parquet format needs an output file")
        pq.write_table(table, out)
        return
    if out is None:
        _write_text(table, fmt, stream or sys.stdout)
        return
    with out.open("w", encoding="utf-8", newline="") as handle:
        _write_text(table, fmt, handle)


def _write_text(table: pa.Table, fmt: OutputFormat, target: IO[str]) -> None:
    if fmt == "table":
        target.write(render_table(table) + "\n")
    elif fmt == "json":
        names = _unique_names(table.column_names)
        rows = [
            {name: _json_value(v) for name, v in zip(names, row, strict=True)}
            for row in _rows(table)
        ]
        json.dump(rows, target, ensure_ascii=False, indent=1)
        target.write("\n")
    else:
        writer = csv.writer(target, lineterminator="\n")
        writer.writerow(table.column_names)
        # Column by column, vectorised: a million-row report is written in seconds.
        writer.writerows(zip(*(_csv_strings(column) for column in table.columns), strict=True))


def _label(value: Any) -> str:
    # Matplotlib reads $...$ as math: a user id must stay plain text.
    return _cell(value).replace("$", r"\$")[:40]


def render_plot(result: ReportResult, path: Path) -> None:
    """Draw the report's default chart (matplotlib, Agg backend) into the PNG ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    spec, chart = result.report.plot, result.chart
    figure = Figure(figsize=(9, 5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    title = spec.title
    if result.scope.user_id is not None:
        title += f" - user {_label(result.scope.user_id)}"
    axes.set_title(title)
    axes.set_ylabel(spec.ylabel)
    if chart.num_rows == 0:
        axes.text(0.5, 0.5, "no data", ha="center", va="center", transform=axes.transAxes)
        axes.set_xticks([])
    elif spec.kind == "line":
        xs = chart.column(spec.x).to_pylist()
        for name in spec.y:
            axes.plot(xs, chart.column(name).to_pylist(), marker="o", label=name)
        axes.legend()
        figure.autofmt_xdate()
    else:
        labels = [_label(v) for v in chart.column(spec.x).to_pylist()]
        positions = range(len(labels))
        width = 0.8 / len(spec.y)
        for i, name in enumerate(spec.y):
            values = [v if v is not None else 0 for v in chart.column(name).to_pylist()]
            axes.bar([p + i * width for p in positions], values, width=width, label=name)
        axes.set_xticks([p + width * (len(spec.y) - 1) / 2 for p in positions])
        crowded = len(labels) > 6
        axes.set_xticklabels(
            labels, rotation=45 if crowded else 0, ha="right" if crowded else "center"
        )
        if len(spec.y) > 1:
            axes.legend()
    axes.set_xlabel(spec.x)
    figure.tight_layout()
    figure.savefig(path, format="png")
