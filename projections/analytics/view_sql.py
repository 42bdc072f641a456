"""The SQL of the views: each view's SELECT over the connection's ``_memories``,
``_entity_nodes``, ``_entity_edges``, ``_records``, ``_duplicates`` and ``_params``, and the SELECT of ``_records`` over the archive."""

from __future__ import annotations

from memstream.models.topics import Topics
from memstream.projections.analytics.literals import _literal
from memstream.projections.memories import VIEW_COLUMNS

#: Memory events of ``memory_history``.
_HISTORY_TYPES = (
    "memory_added",
    "memory_reinforced",
    "memory_superseded",
    "memory_outdated",
    "memory_deleted",
    "memory_promoted",
    "memory_expired",
    "memory_forgotten",
)


def _original_text(doc: str) -> str:
    """The original event inside a dead letter (its ``value_b64``) as text; null when the
    bytes are not UTF-8."""
    return f"try(decode(try(from_base64(try(json_extract_string({doc}, '$.value_b64'))))))"


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
        '"threshold": "DOUBLE", "change": "VARCHAR", "decided_by": "VARCHAR", '
        '"valid_until": "TIMESTAMPTZ", "claim_memory_id": "VARCHAR", '
        '"encryption": {"fields": ["VARCHAR"]}}'
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
        "entity_nodes": f"""
            SELECT n.* FROM _entity_nodes n, _params p
            WHERE {since.format(column="n.last_seen")}""",
        "entity_edges": f"""
            SELECT g.* FROM _entity_edges g, _params p
            WHERE {since.format(column="g.valid_from")}""",
        "memory_history": f"""
            WITH {_first_delivery(f"topic = {memories} AND type IN ({history_types})", dedupe)},
            t AS (SELECT e.*, {history} AS f FROM e)
            SELECT t."partition", t."offset", t."timestamp" AS learned_at, t.event_id, t.type,
                t.user_id, t.session_id, t.agent_id, t.occurred_at, f.memory_id, f.memory_type,
                CASE WHEN NOT {_sealed("content")} THEN f.content END AS content, f.importance, f.tier, f.extractor, f.extraction_event_id,
                f.source_event_ids, CASE WHEN NOT {_sealed("entities")} THEN f.entities END AS entities,
                f.superseded_by, f.change, f.decided_by, f.valid_until, f.claim_memory_id,
                CASE WHEN NOT {_sealed("reason")} THEN f.reason END AS reason,
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
