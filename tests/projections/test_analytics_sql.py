"""Analytics without a broker: empty sources, the decay SQL against the Python formula on a
real LanceDB projection, the read-only guard, the output formats and the analytics page's view table."""

from __future__ import annotations

import csv
import io
import json
import math
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memstream.models.codec import encode_event
from memstream.models.crypto import seal
from memstream.models.events.chat import EntityMentioned
from memstream.models.events.memory import (
    ExtractionFailure,
    MemoriesRetrieved,
    MemoryAdded,
    MemorySuperseded,
    RetrievedMemory,
)
from memstream.models.forgetting import decay_candidates
from memstream.models.ranking import decay_score
from memstream.models.settings import Settings
from memstream.projections.analytics import (
    REPORTS,
    VIEWS,
    NotReadOnly,
    PlotSpec,
    Report,
    ReportResult,
    Scope,
    check_read_only,
    open_views,
    render_plot,
    render_table,
    run_report,
    run_sql,
    write_output,
)
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import PartitionedMemories, SourcePosition
from memstream.streams.keys.store import key_prefix

ANALYTICS_PAGE = Path(__file__).parents[2] / "docs" / "analytics.md"
NOW = datetime(2026, 11, 20, tzinfo=UTC)
TYPES = ("preference", "fact", "summary", "episode", "correction", "entity")


@pytest.fixture(scope="module")
def minilm() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(threads=1)


def test_missing_sources_give_every_view_empty_with_its_columns(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "nothing-here")
    for scope in (Scope(), Scope(user_id="alice"), Scope(since=NOW)):
        con = open_views(settings, scope)
        try:
            for view in VIEWS:
                described = [r[0] for r in con.execute(f"DESCRIBE {view.name}").fetchall()]
                assert tuple(described) == view.column_names, view.name
                assert con.execute(f"SELECT count(*) FROM {view.name}").fetchall() == [(0,)]
        finally:
            con.close()
        for name in REPORTS:
            result = run_report(settings, name, scope)
            assert result.table.num_rows == 0, name
    assert not (tmp_path / "nothing-here").exists()  # reading never creates anything


def reference_decay(importance: float, created_at: datetime, access_count: int,
                    now: datetime, settings: Settings) -> float:
    """The decay score of the issue, written independently of the SQL (and of
    ``retrieval.decay_score``, checked as well)."""
    age_days = max((now - created_at).total_seconds(), 0.0) / 86_400
    recency = 0.5 ** (age_days / settings.recency_half_life_days)
    use = min(math.log(1 + access_count) / math.log(1 + settings.decay_use_saturation), 1.0)
    total = settings.weight_importance + settings.weight_recency + settings.weight_use
    return (settings.weight_importance * importance + settings.weight_recency * recency
            + settings.weight_use * use) / total


def test_decay_sql_equals_the_python_formula(tmp_path: Path, minilm: MiniLMOnnxEmbedder) -> None:
    rng = random.Random(7)
    settings = Settings(
        data_dir=tmp_path / "data",
        partitions=1,  # the events below all come from partition 0
        weight_importance=0.3,
        weight_recency=0.25,
        weight_use=0.45,
        recency_half_life_days=12.5,
        decay_use_saturation=5,
        forget_threshold=0.3,
        forget_min_age_days=20,
        forget_keep_types="correction,summary",
    )
    projection = PartitionedMemories.from_settings(settings, minilm)
    memories = []
    for i in range(60):
        memory_type = TYPES[i % len(TYPES)]
        memories.append(MemoryAdded(
            event_id=f"add-{i}",
            user_id=f"user-{i % 3}",
            session_id="s",
            # Some after NOW: their age is floored at 0.
            occurred_at=NOW - timedelta(seconds=rng.uniform(-5 * 86_400, 400 * 86_400)),
            extractor="test/1",
            memory_id=f"m{i:02d}",
            memory_type=memory_type,  # type: ignore[arg-type]
            content=f"memory number {i} about {memory_type}",
            importance=round(rng.random(), 3),
            extraction_event_id="x",
        ))
    projection.apply([(e, SourcePosition("memories", 0, i)) for i, e in enumerate(memories)])
    accesses = []
    for i, memory in enumerate(memories):
        for _ in range(rng.choice([0, 0, 1, 2, 3, 7, 20])):
            accesses.append(MemoriesRetrieved(
                event_id=f"r{len(accesses)}",
                user_id=memory.user_id,
                session_id="s",
                occurred_at=NOW - timedelta(days=1),
                query="q",
                memories=(RetrievedMemory(memory_id=memory.memory_id, score=1.0),),
            ))
    projection.apply_accesses(
        [(e, SourcePosition("accesses", 0, i)) for i, e in enumerate(accesses)]
    )

    found = run_report(settings, "decay", Scope(now=NOW)).table.to_pylist()
    assert len(found) == 60
    assert sum(r["access_count"] for r in found) == len(accesses)
    by_id = {m.memory_id: m for m in memories}
    for row in found:
        memory = by_id[row["memory_id"]]
        expected = reference_decay(
            memory.importance, memory.occurred_at, row["access_count"], NOW, settings
        )
        assert row["decay_score"] == pytest.approx(expected, rel=1e-12, abs=1e-15)
        # ...and the projection's own function, which `memstream forget` uses.
        assert row["decay_score"] == pytest.approx(
            decay_score(memory.importance, memory.occurred_at, row["access_count"], NOW,
                        settings), rel=1e-12, abs=1e-15)
        age = max((NOW - memory.occurred_at).total_seconds(), 0) / 86_400
        assert row["forgettable"] == (
            expected < 0.3 and age >= 20 and memory.memory_type not in ("correction", "summary")
        )
    assert any(r["forgettable"] for r in found) and not all(r["forgettable"] for r in found)
    # The memories the report marks are the ones `memstream forget --policy decay` forgets.
    records = [
        (user, record)
        for user in ("user-0", "user-1", "user-2")
        for record in projection.list_memories(user, include_inactive=True)
    ]
    assert {c.memory.memory_id for c in decay_candidates(records, settings, NOW)} == {
        r["memory_id"] for r in found if r["forgettable"]
    }
    scores = [r["decay_score"] for r in found]
    assert scores == sorted(scores)

    # Scoped: one user's memories only, the same scores.
    mine = run_report(settings, "decay", Scope(user_id="user-1", now=NOW)).table.to_pylist()
    assert {r["user_id"] for r in mine} == {"user-1"}
    assert mine == [r for r in found if r["user_id"] == "user-1"]

    # The archive is missing: its views are empty, the memories view is not.
    assert run_sql(settings, "SELECT count(*) AS n FROM memories").to_pylist() == [{"n": 60}]
    assert run_sql(settings, "SELECT count(*) AS n FROM events").to_pylist() == [{"n": 0}]


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM memories",
        "UPDATE memories SET content = ''",
        "DROP VIEW memories",
        "ATTACH 'x.duckdb' AS x",
        "DETACH x",
        "COPY (SELECT 1) TO 'x.csv'",
        "EXPORT DATABASE 'x'",
        "INSTALL lance",
        "LOAD lance",
        "SELECT 1; SELECT 2",
        "SELECT 1;; DELETE FROM memories",
        "WITH d AS (DELETE FROM memories RETURNING *) SELECT * FROM d",
        "SELECT * FROM (WITH d AS (UPDATE _params SET limit_n = 1 RETURNING *) SELECT * FROM d)",
        "CALL pragma_version()",
        "SET threads = 1",
        "CHECKPOINT",
        "VACUUM",
        "",
        "SELEC 1",
    ],
)
def test_only_one_read_only_select_is_accepted(query: str) -> None:
    with pytest.raises(NotReadOnly):
        check_read_only(query)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT 1",
        "  select * from memories -- a comment; DELETE FROM memories",
        "WITH a AS (SELECT 1 AS x) SELECT x FROM a",
        (
            "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) "
            "SELECT * FROM t"
        ),
        "FROM memories",
        "SELECT 'DELETE FROM memories' AS text",
        "(SELECT 1) UNION ALL (SELECT 2)",
        "SELECT 1;",
    ],
)
def test_read_only_selects_are_accepted(query: str) -> None:
    assert check_read_only(query)


def sample_table() -> pa.Table:
    return pa.table({
        "user": pa.array(["o'hara, \"ünï\"", None, "line\nbreak"]),
        "n": pa.array([1, None, -3], pa.int64()),
        "rate": pa.array([0.1, None, 1 / 3]),
        "ok": pa.array([True, False, None]),
        "at": pa.array([NOW, None, NOW - timedelta(microseconds=1)],
                       pa.timestamp("us", tz="UTC")),
        "tags": pa.array([["a", "b,c"], [], None], pa.list_(pa.string())),
    })


def test_csv_and_json_keep_every_value(tmp_path: Path) -> None:
    table = sample_table()
    write_output(table, "csv", tmp_path / "out.csv")
    with (tmp_path / "out.csv").open(encoding="utf-8", newline="") as handle:
        read = list(csv.DictReader(handle))
    assert read == [
        {"user": "o'hara, \"ünï\"", "n": "1", "rate": "0.1", "ok": "true",
         "at": "2026-11-20T00:00:00.000000+00:00", "tags": '["a", "b,c"]'},
        {"user": "", "n": "", "rate": "", "ok": "false", "at": "", "tags": "[]"},
        {"user": "line\nbreak", "n": "-3", "rate": repr(1 / 3), "ok": "", "at":
         "2026-11-19T23:59:59.999999+00:00", "tags": ""},
    ]
    out = io.StringIO()
    write_output(table, "json", stream=out)
    assert json.loads(out.getvalue()) == [
        {"user": "o'hara, \"ünï\"", "n": 1, "rate": 0.1, "ok": True,
         "at": "2026-11-20T00:00:00+00:00", "tags": ["a", "b,c"]},
        {"user": None, "n": None, "rate": None, "ok": False, "at": None, "tags": []},
        {"user": "line\nbreak", "n": -3, "rate": 1 / 3, "ok": None,
         "at": "2026-11-19T23:59:59.999999+00:00", "tags": None},
    ]
    with pytest.raises(ValueError, match="output file"):
        write_output(table, "parquet")


def test_columns_of_one_name_all_stay() -> None:
    table = pa.table([pa.array([1]), pa.array([2]), pa.array([3])], names=["a", "a", "a_2"])
    out = io.StringIO()
    write_output(table, "csv", stream=out)
    assert out.getvalue() == "a,a,a_2\n1,2,3\n"
    out = io.StringIO()
    write_output(table, "json", stream=out)
    assert json.loads(out.getvalue()) == [{"a": 1, "a_2": 2, "a_2_2": 3}]
    assert render_table(table).splitlines()[2].split() == ["1", "2", "3"]


def test_text_table_is_aligned_and_counted() -> None:
    text = render_table(sample_table())
    lines = text.splitlines()
    assert lines[0].split() == ["user", "n", "rate", "ok", "at", "tags"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert "line break" in lines[4]  # a cell stays on its line
    assert lines[-1] == "(3 rows)"


def test_plot_labels_are_plain_text(tmp_path: Path) -> None:
    spec = PlotSpec("bar", "SELECT 1", "who", ("n",), "t", "n")
    report = Report("x", "x", "SELECT 1", frozenset(), spec)
    chart = pa.table({"who": ["$\\frac{1}{0}$", "a$b", "ünï"], "n": [1, 2, None]})
    path = tmp_path / "labels.png"
    render_plot(ReportResult(report, chart, chart, Scope(user_id="$x$")), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_view_and_column_is_on_the_analytics_page() -> None:
    section = ANALYTICS_PAGE.read_text(encoding="utf-8")
    for view in VIEWS:
        line = next((ln for ln in section.splitlines() if ln.startswith(f"| `{view.name}`")),
                    None)
        assert line is not None, f"the analytics page has no row for view {view.name}"
        for column in view.column_names:
            assert column in line, f"the analytics page's row of {view.name} misses {column}"
    for name in REPORTS:
        assert f"`{name}`" in section, f"the analytics page does not describe report {name}"


def write_archive(settings: Settings, topic: str, records: list[dict[str, Any]]) -> None:
    """One archive file of ``records`` (offsets from 0) in the archive's layout and columns."""
    from memstream.projections.archive_format import SCHEMA, live_archive_dir

    folder = live_archive_dir(settings) / f"topic={topic}" / "date=2026-11-01"
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "topic": topic,
            "partition": 0,
            "offset": offset,
            "timestamp": NOW,
            "key": None,
            "value": None,
            "event_id": None,
            "type": None,
            "user_id": None,
            "session_id": None,
            "agent_id": None,
            "occurred_at": None,
            "schema_version": None,
            "headers": [],
        }
        | record
        for offset, record in enumerate(records)
    ]
    last = len(rows) - 1
    pq.write_table(
        pa.Table.from_pylist(rows, schema=SCHEMA),
        folder / f"part-0000-{0:020d}-{last:020d}.parquet",
    )


def event_columns(value: dict[str, Any]) -> dict[str, Any]:
    """The parsed columns the archive sink stores beside an event's bytes."""
    return {
        "key": value["user_id"].encode(),
        "value": json.dumps(value).encode(),
        "event_id": value["event_id"],
        "type": value["type"],
        "user_id": value["user_id"],
        "session_id": value["session_id"],
        "occurred_at": NOW,
        "schema_version": value.get("schema_version", 1),
    }


def test_sealed_free_text_is_null_in_the_views_and_older_plain_text_still_shows(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path / "data", topic_prefix="odd")
    key = bytes(range(32))
    key_id = f"{key_prefix('ann')}-00000001"
    envelope: dict[str, Any] = {
        "user_id": "ann", "session_id": "s", "occurred_at": datetime(2026, 11, 1, tzinfo=UTC)
    }
    superseded = MemorySuperseded(
        event_id="sup", memory_id="m1", superseded_by="m2", reason="User lives in Oslo",
        similarity=0.9, **envelope,
    )
    failed = ExtractionFailure(
        event_id="fail", consolidation_event_id="c", extractor="llm", extractor_version="2",
        reason="not JSON: 'I live in Oslo'", raw_response="I live in Oslo", **envelope,
    )
    mention = EntityMentioned(event_id="men", name="Oslo", kind="home town", **envelope)

    def columns(event: Any) -> dict[str, Any]:
        return event_columns(json.loads(encode_event(event)))

    # An entity_mentioned sealed before its kind became content: the kind is plain text.
    older = seal(mention.model_copy(update={"event_id": "men-old"}), key, key_id)
    older_payload = json.loads(encode_event(older))
    older_payload["kind"] = "place"
    write_archive(settings, "odd.memories", [
        columns(seal(superseded, key, key_id)),
        columns(seal(failed, key, key_id)),
        columns(superseded.model_copy(update={"event_id": "sup-plain", "memory_id": "m0",
                                              "reason": "same slot"})),
    ])
    write_archive(settings, "odd.chat", [
        columns(seal(mention, key, key_id)),
        event_columns({**older_payload, "encryption": {**older_payload["encryption"],
                                                       "fields": ["name"]}}),
    ])
    history = run_sql(settings, "SELECT event_id, reason, sealed FROM memory_history "
                                "ORDER BY event_id").to_pylist()
    assert history == [
        {"event_id": "sup", "reason": None, "sealed": True},
        {"event_id": "sup-plain", "reason": "same slot", "sealed": False},
    ]
    (extraction,) = run_sql(settings, "SELECT reason, ok, sealed FROM extractions").to_pylist()
    assert extraction == {"reason": None, "ok": False, "sealed": True}
    mentions = run_sql(settings, "SELECT event_id, name, kind FROM entity_mentions "
                                 "ORDER BY event_id").to_pylist()
    assert mentions == [
        {"event_id": "men", "name": None, "kind": None},
        {"event_id": "men-old", "name": None, "kind": "place"},
    ]
    # Nothing sealed is counted as an entity named "[encrypted]".
    assert run_report(settings, "entities", Scope(now=NOW)).table.num_rows == 0
    archived = [
        value
        for path in settings.archive_dir.rglob("*.parquet")
        for value in pq.read_table(path).column("value").to_pylist()
    ]
    assert len(archived) == 5 and not any(b"Oslo" in value for value in archived)


def test_unreadable_sealed_and_blanked_records_break_nothing(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", topic_prefix="odd")
    envelope = {"user_id": "ann", "session_id": "s", "occurred_at": "2026-11-01T00:00:00Z"}
    sealed = {
        **envelope, "event_id": "sealed", "type": "memory_added", "schema_version": 2,
        "extractor": "x/1", "memory_id": "m1", "memory_type": "fact", "content": "[encrypted]",
        "importance": 0.5, "extraction_event_id": "x",
        "encryption": {"scheme": "aes-256-gcm", "key_id": "k", "fields": ["content"],
                       "ciphertext": "AAAA"},
    }
    utf16 = {**sealed, "event_id": "utf16", "memory_id": "m2"}
    utf16.pop("encryption")
    write_archive(settings, "odd.memories", [
        event_columns(sealed),
        {"key": b"ann", "value": b"\xff\xfe{ not utf-8"},  # not an event: no user
        # Python reads UTF-16 JSON (the sink parsed it); DuckDB cannot: its fields are null.
        event_columns(utf16) | {"value": json.dumps(utf16).encode("utf-16")},
        {"type": "memory_added"},  # blanked by `memstream erase`
        event_columns({**sealed, "event_id": "surrogate", "memory_id": "m3"})
        | {"value": json.dumps({**sealed, "content": "\ud800", "event_id": "surrogate"})
           .encode()},
        event_columns({**envelope, "event_id": "x", "type": "extraction_recorded",
                       "consolidation_event_id": "c", "extractor": "llm",
                       "extractor_version": "2", "candidates": [],
                       "encryption": {"scheme": "aes-256-gcm", "key_id": "k",
                                      "fields": ["raw_response", "candidates"]}}),
    ])
    letter = {
        "agent": "projector", "reason": "bad", "source_topic": "odd.chat",
        "source_partition": 0, "source_offset": 1, "key_b64": "Ym9i",
        "value_b64": "AG1zLWFlczI1NmdjbQA=", "dead_at": "2026-11-01T00:00:00Z", "key_id": "k",
    }
    write_archive(settings, "odd.deadletters", [
        {"key": b"bob", "value": json.dumps(letter).encode()},
        {"key": b"\xff", "value": b"\x00\x01"},  # neither a dead letter nor UTF-8
    ])
    write_archive(settings, "odd.accesses", [
        event_columns({**envelope, "event_id": "r", "type": "memories_retrieved",
                       "query": "q", "memories": "not a list"}),
    ])

    history = run_sql(settings, "SELECT event_id, memory_id, content, sealed FROM "
                                "memory_history ORDER BY event_id").to_pylist()
    assert history[0] == {"event_id": "sealed", "memory_id": "m1", "content": None,
                          "sealed": True}
    assert {r["event_id"] for r in history} == {"sealed", "utf16", "surrogate"}
    assert next(r for r in history if r["event_id"] == "utf16")["memory_id"] is None
    (extraction,) = run_sql(settings, "SELECT candidates, sealed FROM extractions").to_pylist()
    assert extraction == {"candidates": None, "sealed": True}
    letters = run_sql(settings, "SELECT user_id, event_id, sealed, agent FROM dead_letters "
                                "ORDER BY agent NULLS LAST").to_pylist()
    assert letters == [
        {"user_id": "bob", "event_id": None, "sealed": True, "agent": "projector"},
        {"user_id": None, "event_id": None, "sealed": False, "agent": None},
    ]
    assert run_sql(settings, "SELECT count(*) AS n FROM accesses").to_pylist() == [{"n": 0}]
    (counts,) = run_sql(
        settings, "SELECT count(*) AS n, count(payload) AS parsed FROM events"
    ).to_pylist()
    # Every record is there; the unreadable ones without a payload (DuckDB may or may not
    # accept the lone surrogate escape).
    assert counts["n"] == 9 and counts["parsed"] in (4, 5)
    for user in (None, "ann", "bob"):
        for name in REPORTS:
            run_report(settings, name, Scope(user_id=user, now=NOW))
    assert run_sql(settings, "SELECT count(*) AS n FROM events", Scope(user_id="bob")
                   ).to_pylist() == [{"n": 1}]


def test_the_patterns_report_lists_each_users_current_patterns_with_evidence_and_decay(
    tmp_path: Path, minilm: MiniLMOnnxEmbedder
) -> None:
    settings = Settings(data_dir=tmp_path / "data", partitions=1)
    projection = PartitionedMemories.from_settings(settings, minilm)

    def learned(memory_id: str, user: str, key: str, sessions: int, days_ago: int) -> MemoryAdded:
        kind, _, value = key.partition(":")
        evidence = {"pattern": key, "kind": kind, "session_count": sessions,
                    "sessions_seen": sessions + 1,
                    "sessions": [f"s{n}" for n in range(sessions)],
                    "event_ids": [f"e{n}" for n in range(sessions)]}
        return MemoryAdded(
            event_id=f"add-{memory_id}", user_id=user, session_id="s", extractor="patterns/1",
            occurred_at=NOW - timedelta(days=days_ago), memory_id=memory_id,
            memory_type="pattern", content=f"uses the tool {value} ({sessions} sessions)",
            importance=0.5, extraction_event_id="x", context=json.dumps(evidence),
            source_event_ids=tuple(evidence["event_ids"]),
        )

    events: list[MemoryAdded | MemorySuperseded] = [
        learned("p1", "ann", "tool:calc", 3, 40),
        learned("p2", "ann", "tool:calc", 4, 10),
        MemorySuperseded(event_id="sup", user_id="ann", session_id="s", memory_id="p1",
                         superseded_by="p2", reason="pattern seen in more sessions",
                         similarity=1.0, occurred_at=NOW - timedelta(days=10)),
        learned("p3", "ann", "tool:web_search", 5, 2),
        learned("p4", "bob", "tool:calc", 3, 1),
    ]
    projection.apply([(e, SourcePosition("memories", 0, i)) for i, e in enumerate(events)])

    rows = run_report(settings, "patterns", Scope(now=NOW)).table.to_pylist()
    assert [(r["user_id"], r["pattern"], r["sessions"], r["sessions_seen"], r["evidence_events"])
            for r in rows] == [
        ("ann", "tool:web_search", 5, 6, 5),
        ("ann", "tool:calc", 4, 5, 4),  # the superseded version at 3 sessions is not listed
        ("bob", "tool:calc", 3, 4, 3),
    ]
    for row in rows:
        memory = next(e for e in events if getattr(e, "memory_id", None) == row["memory_id"])
        assert isinstance(memory, MemoryAdded)
        assert row["decay_score"] == pytest.approx(
            decay_score(0.5, memory.occurred_at, 0, NOW, settings), rel=1e-12)
    mine = run_report(settings, "patterns", Scope(user_id="bob", now=NOW)).table.to_pylist()
    assert [r["memory_id"] for r in mine] == ["p4"]
