"""The named reports (:data:`REPORTS`): SQL over the views, the views each reads, and its
default chart (:class:`PlotSpec`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from memstream.models.events.memory import MemoryType
from memstream.projections.analytics.literals import _literal

#: The memory types, in the order the ``yield`` report gives them a column each.
_MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)
#: Statuses left out of the content-based reports (duplicates, entities): the memory is gone,
#: at the user's request or by a forgetting policy.
_ERASED = ("deleted", "forgotten")


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
        "graph",
        "Each user's entity graph: entities, relations (current, ended), co-mentions, and "
        "the --limit most connected entities (by edges, then name).",
        """
        WITH ends AS (
            SELECT user_id, source_key AS entity_key, * EXCLUDE (user_id) FROM entity_edges
            UNION ALL
            SELECT user_id, target_key, * EXCLUDE (user_id) FROM entity_edges
        ), degree AS (
            SELECT n.user_id, n.name, count(e.entity_key) AS edges
            FROM entity_nodes n
            LEFT JOIN ends e ON e.user_id = n.user_id AND e.entity_key = n.entity_key
            GROUP BY n.user_id, n.entity_key, n.name
        ), ranked AS (
            SELECT d.*, row_number() OVER (
                PARTITION BY d.user_id ORDER BY d.edges DESC, d.name) AS place
            FROM degree d WHERE d.edges > 0
        ), top AS (
            SELECT r.user_id, list(r.name || ' (' || r.edges || ')' ORDER BY r.place)
                AS most_connected
            FROM ranked r, _params p WHERE r.place <= p.limit_n GROUP BY r.user_id
        ), nodes AS (
            SELECT user_id, count(*) AS entities FROM entity_nodes GROUP BY user_id
        ), edges AS (
            SELECT user_id, count(*) FILTER (WHERE kind = 'claim') AS relations,
                count(*) FILTER (WHERE kind = 'claim' AND holds) AS current_relations,
                count(*) FILTER (WHERE kind = 'claim' AND ended) AS ended_relations,
                count(*) FILTER (WHERE kind = 'co-mention') AS co_mentions
            FROM entity_edges GROUP BY user_id
        )
        SELECT n.user_id, n.entities, coalesce(e.relations, 0) AS relations,
            coalesce(e.current_relations, 0) AS current_relations,
            coalesce(e.ended_relations, 0) AS ended_relations,
            coalesce(e.co_mentions, 0) AS co_mentions,
            coalesce(t.most_connected, []) AS most_connected
        FROM nodes n LEFT JOIN edges e ON e.user_id = n.user_id
        LEFT JOIN top t ON t.user_id = n.user_id
        ORDER BY n.user_id""",
        frozenset({"entity_nodes", "entity_edges"}),
        PlotSpec(
            "bar",
            "SELECT user_id, entities, relations FROM result ORDER BY entities DESC, user_id "
            "LIMIT 30",
            "user_id",
            ("entities", "relations"),
            "Entities and relations per user (top 30)",
            "count",
        ),
        options=("limit",),
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
    Report(
        "patterns",
        "Each user's learned patterns (tools, corrections, requests, hours, weekday) that "
        "hold now: the sessions that show them out of those counted, their evidence events "
        "and their decay score (as the decay report scores it).",
        """
        WITH m AS (
            SELECT m.*, p.*,
                greatest(epoch_us(p.now) - epoch_us(m.created_at), 0) / 86400e6 AS age_days
            FROM memories m, _params p
            WHERE m.memory_type = 'pattern' AND m.status = 'active'
        ), s AS (
            SELECT *, pow(0.5, age_days / half_life_days) AS recency,
                least(ln(1 + greatest(access_count, 0)) / ln(1 + use_saturation), 1.0)
                    AS use_score,
                json_extract_string(context, '$.kind') AS kind,
                json_extract_string(context, '$.pattern') AS pattern,
                CAST(json_extract(context, '$.session_count') AS BIGINT) AS sessions,
                CAST(json_extract(context, '$.sessions_seen') AS BIGINT) AS sessions_seen
            FROM m
        )
        SELECT user_id, kind, pattern, content, sessions, sessions_seen,
            CAST(len(source_event_ids) AS BIGINT) AS evidence_events, importance,
            created_at AS learned_at, age_days, access_count,
            CASE WHEN w_importance + w_recency + w_use > 0
                THEN (w_importance * importance + w_recency * recency + w_use * use_score)
                    / (w_importance + w_recency + w_use)
                ELSE 0.0 END AS decay_score,
            memory_id
        FROM s ORDER BY user_id, kind, sessions DESC, pattern, memory_id""",
        frozenset({"memories"}),
        PlotSpec(
            "bar",
            "SELECT kind, count(*) AS patterns FROM result GROUP BY kind ORDER BY kind",
            "kind",
            ("patterns",),
            "Learned patterns by kind",
            "patterns that hold now",
        ),
    ),
)

#: Every named report, by name.
REPORTS: Mapping[str, Report] = {report.name: report for report in _REPORT_LIST}
