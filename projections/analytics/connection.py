"""Opening the views (:func:`open_views`): one in-memory DuckDB connection with the sources,
the parameters and the wanted views defined; scoped to one user, it holds only copies of that
user's rows and is locked."""

from __future__ import annotations

import duckdb

from memstream.models.settings import Settings
from memstream.models.topics import Topics
from memstream.projections.analytics.graph_views import (
    EDGE_SCHEMA,
    GRAPH_VIEWS,
    NODE_SCHEMA,
    graph_tables,
)
from memstream.projections.analytics.literals import _literal
from memstream.projections.analytics.scope import ReportOptions, Scope, _aware
from memstream.projections.analytics.sources import (
    _archive_source,
    _empty_archive,
    _memory_arrow_schema,
    _memory_rows,
)
from memstream.projections.analytics.view_sql import _records_sql, _view_sql
from memstream.projections.analytics.views import _VIEW_TOPICS, _VIEWS_BY_NAME


def _storable(text: str) -> bool:
    """Whether ``text`` can be a stored id (UTF-8 encodable: no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
    needs_graph = readable and bool(wanted & GRAPH_VIEWS)
    needs_memories = readable and ("memories" in wanted or needs_graph)
    needs_archive = readable and any(_VIEWS_BY_NAME[v].archive for v in wanted)

    memories = (
        _memory_rows(settings, user_id) if needs_memories else _memory_arrow_schema().empty_table()
    )
    con.register("_memories_arrow", memories)
    # Each user's entity graph, by the code that serves the graph verb (at ``now``, if set).
    nodes, edges = (
        graph_tables(memories, scope.now) if needs_graph
        else (NODE_SCHEMA.empty_table(), EDGE_SCHEMA.empty_table())
    )
    con.register("_entity_nodes_arrow", nodes)
    con.register("_entity_edges_arrow", edges)
    source = _archive_source(settings, con) if needs_archive else _empty_archive(con)
    records = _records_sql(source, _literal(topics.deadletters))
    if scoped:
        # Copies of the user's rows only, selected with parameters; the unfiltered sources
        # are dropped from the connection below.
        con.execute("CREATE TEMP TABLE _memories AS SELECT * FROM _memories_arrow")
        con.execute("CREATE TEMP TABLE _entity_nodes AS SELECT * FROM _entity_nodes_arrow")
        con.execute("CREATE TEMP TABLE _entity_edges AS SELECT * FROM _entity_edges_arrow")
        con.execute(
            f"CREATE TEMP TABLE _records AS {_owned_records(records, topics, wanted)}",
            [user_id if readable else None],
        )
    else:
        con.execute("CREATE TEMP VIEW _memories AS SELECT * FROM _memories_arrow")
        con.execute("CREATE TEMP VIEW _entity_nodes AS SELECT * FROM _entity_nodes_arrow")
        con.execute("CREATE TEMP VIEW _entity_edges AS SELECT * FROM _entity_edges_arrow")
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
        for name in ("_memories_arrow", "_entity_nodes_arrow", "_entity_edges_arrow"):
            con.unregister(name)
        if source == "_archive_empty":
            con.unregister("_archive_empty")
        # Nothing outside the copies above can be read any more, and that cannot be undone.
        con.execute("SET python_enable_replacements = false")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
