"""Analytics latency: every ``memstream report`` over 1M memories and 10M access events.

A synthetic data directory is generated in bulk, in the layouts the worker writes:

* the Parquet archive of the log (``archive/archive/topic=.../date=.../part-...parquet``,
  the archive's own columns, one file per partition per day, contiguous offsets), written with
  pyarrow directly; every value is a real memstream event as JSON, built with vectorised
  pyarrow string functions:

  - chat: per session a ``session_started``, four messages, an ``entity_mentioned`` and a
    ``session_closed`` (a session per four memories);
  - memories: an extraction per session (half of them by an "LLM" with token usage), its
    ``memory_added`` events, and supersessions (3 %), reinforcements (5 %), deletions (1 %),
    expiries (2 %), promotions (1 %), failed extractions (1 % of sessions);
  - accesses: ``--accesses`` ``memories_retrieved`` events of ``--per-retrieval`` memories
    each (of one session of the user), skewed towards a minority of memories;
  - dead letters: one per thousand sessions;

* the live LanceDB table in the projection's schema (``memory_schema``) with random unit
  vectors (384 dimensions), statuses and access counts consistent with the log, written in
  100k-row batches (as ``benchmarks/retrieval.py`` does).

Then each report runs as ``memstream report`` runs it (``run_report``: a fresh in-memory DuckDB
connection, the views, the report's SQL, its chart data) over every user, and again scoped to
one user; the table gives the rows out and the seconds of each (the best of ``--repeat``).

Run from the repository root::

    python benchmarks/analytics.py                                  # 1M / 10M (~5 min)
    python benchmarks/analytics.py --memories 100000 --accesses 1000000
    python benchmarks/analytics.py --dir /some/disk --keep          # keep the data
    python benchmarks/analytics.py --reuse /some/disk/memstream-analytics-bench-xyz --repeat 3

The data lives in a temporary directory removed at the end unless ``--keep`` (1M / 10M:
about 2.3 GB, mostly the vectors of the memory table).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from memstream.models.settings import Settings
from memstream.projections.analytics import REPORTS, Scope, run_report
from memstream.projections.archive_format import SCHEMA as ARCHIVE_SCHEMA
from memstream.projections.archive_format import live_archive_dir
from memstream.projections.memories import memory_schema
from memstream.streams.kafka.topics import Topics

NOW = datetime(2026, 11, 20, tzinfo=UTC)
SPAN_DAYS = 90
PARTITIONS = 4
MEMORIES_PER_USER = 1_000
MEMORIES_PER_SESSION = 4
DIMENSIONS = 384
WRITE_BATCH = 100_000
ACCESS_CHUNK = 1_000_000
MODEL = "bench/random-unit-vectors"
TYPES = np.array(["fact", "preference", "episode", "summary", "correction", "entity"])
TYPE_SHARE = [0.35, 0.2, 0.25, 0.1, 0.05, 0.05]
CITIES = np.array(["Lisbon", "Porto", "Berlin", "Kyoto", "Oslo", "Lima", "Austin", "Seoul"])
US_PER_DAY = 86_400 * 1_000_000
NOW_US = int(NOW.timestamp() * 1_000_000)


# --- the archive ------------------------------------------------------------------------------


def iso(us: np.ndarray) -> pa.Array:
    """Microseconds since the epoch as ISO 8601 UTC strings (``...Z``)."""
    text = np.datetime_as_string(us.astype("datetime64[us]"), unit="us")
    return pc.binary_join_element_wise(strings(text), "Z", "")


def strings(values: np.ndarray) -> pa.Array:
    """A numpy string array as one Arrow array (pyarrow chunks large numpy unicode arrays)."""
    array = pa.array(values, pa.string())
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def join(*parts: pa.Array | str) -> pa.Array:
    """Concatenate string arrays and literals element-wise."""
    return pc.binary_join_element_wise(*parts, "")


def text(values: np.ndarray | pa.Array) -> pa.Array:
    """Numbers (or strings) as a string array."""
    array = values if isinstance(values, pa.Array) else pa.array(values)
    return pc.cast(array, pa.string())


def quoted(values: pa.Array) -> pa.Array:
    return join('"', values, '"')


@dataclass
class Events:
    """Rows of one topic before they get partitions and offsets (any order)."""

    time_us: np.ndarray
    user: np.ndarray  # user index
    event_id: pa.Array
    type: pa.Array
    session_id: pa.Array
    value: pa.Array

    @classmethod
    def concat(cls, parts: Sequence[Events]) -> Events:
        return cls(
            np.concatenate([p.time_us for p in parts]),
            np.concatenate([p.user for p in parts]),
            pa.concat_arrays([p.event_id for p in parts]),
            pa.concat_arrays([p.type for p in parts]),
            pa.concat_arrays([p.session_id for p in parts]),
            pa.concat_arrays([p.value for p in parts]),
        )

    def sorted(self) -> Events:
        order = np.argsort(self.time_us, kind="stable")
        take = pa.array(order)
        return Events(
            self.time_us[order], self.user[order], self.event_id.take(take),
            self.type.take(take), self.session_id.take(take), self.value.take(take),
        )


def user_names(count: int) -> pa.Array:
    return pa.array([f"user-{u:05d}" for u in range(count)], pa.string())


class ArchiveWriter:
    """Writes time-ordered events as archive files: partition = user % PARTITIONS, offsets
    contiguous per partition, one file per run of one partition on one UTC day."""

    def __init__(self, directory: Path, users: pa.Array) -> None:
        self.directory = directory
        self.users = users
        self.next_offset: dict[tuple[str, int], int] = {}
        self.files = 0
        self.records = 0

    def write(self, topic: str, events: Events) -> None:
        partition = events.user % PARTITIONS
        for p in range(PARTITIONS):
            rows = np.nonzero(partition == p)[0]
            if rows.size == 0:
                continue
            first = self.next_offset.get((topic, p), 0)
            self.next_offset[(topic, p)] = first + rows.size
            days = events.time_us[rows] // US_PER_DAY
            cuts = np.nonzero(np.diff(days))[0] + 1
            for run in np.split(np.arange(rows.size), cuts):
                self._file(topic, p, first, events, rows[run], run)

    def written(self, topic: str) -> int:
        """Records of ``topic`` written so far."""
        return sum(n for (t, _), n in self.next_offset.items() if t == topic)

    def _file(self, topic: str, partition: int, first: int, events: Events,
              rows: np.ndarray, positions: np.ndarray) -> None:
        take = pa.array(rows)
        n = rows.size
        time_us = events.time_us[rows]
        users = self.users.take(pa.array(events.user[rows]))
        offsets = first + positions
        table = pa.Table.from_arrays(
            [
                pa.array([topic] * n, pa.string()),
                pa.array(np.full(n, partition, np.int32)),
                pa.array(offsets.astype(np.int64)),
                pa.array((time_us // 1000 + 3).astype("datetime64[ms]"),
                         pa.timestamp("ms", tz="UTC")),
                pc.cast(users, pa.binary()),
                pc.cast(events.value.take(take), pa.binary()),
                events.event_id.take(take),
                events.type.take(take),
                users,
                events.session_id.take(take),
                pa.nulls(n, pa.string()),
                pa.array(time_us.astype("datetime64[us]"), pa.timestamp("us", tz="UTC")),
                pa.array(np.full(n, 1, np.int32)),
                pa.array([[] for _ in range(n)], ARCHIVE_SCHEMA.field("headers").type),
            ],
            schema=ARCHIVE_SCHEMA,
        )
        day = datetime.fromtimestamp(int(time_us[0]) / 1e6, UTC).date().isoformat()
        folder = self.directory / f"topic={topic}" / f"date={day}"
        folder.mkdir(parents=True, exist_ok=True)
        last = int(offsets[-1])
        name = f"part-{partition:04d}-{int(offsets[0]):020d}-{last:020d}.parquet"
        pq.write_table(table, folder / name, compression="zstd")
        self.files += 1
        self.records += n


@dataclass
class Plan:
    """Everything the generated log and table agree on."""

    memories: int
    users: int
    sessions: int
    session_user: np.ndarray
    session_start: np.ndarray
    memory_session: np.ndarray
    memory_user: np.ndarray
    memory_type: np.ndarray
    importance: np.ndarray
    created_us: np.ndarray
    content: pa.Array
    entity: np.ndarray  # city index, -1 for none
    status: np.ndarray
    ended_us: np.ndarray
    tier: np.ndarray
    reinforcements: np.ndarray
    superseded_by: np.ndarray  # memory index, -1


def make_plan(memories: int, rng: np.random.Generator) -> Plan:
    users = max(1, memories // MEMORIES_PER_USER)
    sessions = max(1, memories // MEMORIES_PER_SESSION)
    session_user = rng.integers(0, users, sessions)
    session_start = NOW_US - rng.integers(US_PER_DAY, SPAN_DAYS * US_PER_DAY, sessions)
    memory_session = np.arange(memories) // MEMORIES_PER_SESSION % sessions
    memory_user = session_user[memory_session]
    memory_type = rng.choice(len(TYPES), memories, p=TYPE_SHARE)
    importance = np.round(rng.random(memories), 3)
    created_us = session_start[memory_session] + 10 * 60 * 1_000_000
    # 1 % copy an earlier memory's text (exact duplicates), the rest are distinct.
    source = np.arange(memories)
    copies = rng.random(memories) < 0.01
    source[copies] = np.maximum(source[copies] - MEMORIES_PER_SESSION, 0)
    content = join("User said thing ", text(source), " about ", strings(CITIES[source % 8]))
    entity = np.where(rng.random(memories) < 0.4, rng.integers(0, len(CITIES), memories), -1)
    tier = np.where(importance >= 0.8, "long_term", "short_term")
    roll = rng.random(memories)
    status = np.full(memories, "active", dtype=object)
    status[roll < 0.03] = "superseded"
    status[(roll >= 0.03) & (roll < 0.04)] = "deleted"
    expired = (roll >= 0.04) & (roll < 0.06) & (tier == "short_term")
    status[expired] = "expired"
    ended_us = np.where(status != "active",
                        np.minimum(created_us + rng.integers(US_PER_DAY, 10 * US_PER_DAY,
                                                             memories), NOW_US), 0)
    superseded_by = np.where(status == "superseded", np.minimum(np.arange(memories) + 1,
                                                                memories - 1), -1)
    reinforcements = (rng.random(memories) < 0.05).astype(np.int64)
    promoted = (rng.random(memories) < 0.01) & (tier == "short_term") & (status == "active")
    tier = np.where(promoted, "long_term", tier)
    return Plan(memories, users, sessions, session_user, session_start, memory_session,
                memory_user, memory_type, importance, created_us, content, entity, status,
                ended_us, tier, reinforcements, superseded_by)


def envelope(event_id: pa.Array, type_: str, user: pa.Array, session: pa.Array,
             time_us: np.ndarray, rest: pa.Array | str) -> pa.Array:
    """The JSON of an event: envelope fields, then ``rest`` (``,"field":...`` text)."""
    return join('{"event_id":"', event_id, '","type":"', type_, '","schema_version":',
                "2" if type_ == "memory_added" else "1", ',"user_id":"', user,
                '","session_id":"', session, '","occurred_at":"', iso(time_us), '"', rest, "}")


def chat_events(plan: Plan, names: pa.Array) -> Events:
    s = np.arange(plan.sessions)
    session_id = join("s", text(s))
    user = names.take(pa.array(plan.session_user))
    parts = []

    def add(suffix: str, type_: str, minutes: int, rest: pa.Array | str) -> None:
        when = plan.session_start + minutes * 60_000_000
        event_id = join(session_id, suffix)
        parts.append(Events(when, plan.session_user, event_id,
                            pa.array([type_] * plan.sessions, pa.string()), session_id,
                            envelope(event_id, type_, user, session_id, when, rest)))

    add("/start", "session_started", 0, "")
    for i in range(4):
        role = "user" if i % 2 == 0 else "assistant"
        add(f"/m{i}", "message_added", i + 1,
            join(f',"role":"{role}","content":"message {i} of session ', session_id, '"'))
    cities = strings(CITIES[s % len(CITIES)])
    add("/entity", "entity_mentioned", 5, join(',"name":"', cities, '","kind":"place"'))
    add("/close", "session_closed", 6, ',"reason":"explicit"')
    return Events.concat(parts)


def memory_events(plan: Plan, names: pa.Array, rng: np.random.Generator) -> Events:
    parts = []
    s = np.arange(plan.sessions)
    session_id = join("s", text(s))
    user = names.take(pa.array(plan.session_user))
    when = plan.session_start + 10 * 60_000_000
    llm = rng.random(plan.sessions) < 0.5
    prompt = rng.integers(500, 4000, plan.sessions)
    completion = rng.integers(50, 600, plan.sessions)
    latency = np.round(rng.gamma(2.0, 400.0, plan.sessions), 1)
    extraction_id = join("x", text(s))
    model = strings(np.where(llm, ',"model":"gpt-bench","prompt_version":"p'
                              + (s % 3).astype(str) + '"', ""))
    usage = strings(np.where(
        llm, ',"usage":{"prompt_tokens":' + prompt.astype(str) + ',"completion_tokens":'
        + completion.astype(str) + "}", ""))
    extractor = strings(np.where(llm, '"llm","extractor_version":"2"',
                                  '"offline","extractor_version":"1"'))
    rest = join(',"consolidation_event_id":"c', text(s), '","extractor":', extractor, model,
                usage, ',"latency_ms":', text(latency), ',"candidates":[]')
    parts.append(Events(when, plan.session_user, extraction_id,
                        pa.array(["extraction_recorded"] * plan.sessions), session_id,
                        envelope(extraction_id, "extraction_recorded", user, session_id, when,
                                 rest)))
    failed = np.nonzero(rng.random(plan.sessions) < 0.01)[0]
    if failed.size:
        fid = join("xf", text(failed))
        fuser = user.take(pa.array(failed))
        fsession = session_id.take(pa.array(failed))
        fwhen = when[failed] + 1
        rest = join(',"consolidation_event_id":"c', text(failed), '","extractor":"llm",'
                    '"extractor_version":"2","model":"gpt-bench","prompt_version":"p0",'
                    '"reason":"invalid JSON","attempts":3,"latency_ms":2000')
        parts.append(Events(fwhen, plan.session_user[failed], fid,
                            pa.array(["extraction_failed"] * failed.size), fsession,
                            envelope(fid, "extraction_failed", fuser, fsession, fwhen, rest)))

    m = np.arange(plan.memories)
    memory_id = join("m", text(m))
    muser = names.take(pa.array(plan.memory_user))
    msession = join("s", text(plan.memory_session))
    entities = strings(np.where(plan.entity >= 0, '"' + CITIES[np.maximum(plan.entity, 0)]
                                 + '"', ""))
    rest = join(',"extractor":"bench/1","memory_id":"', memory_id, '","memory_type":"',
                strings(TYPES[plan.memory_type]), '","content":"', plan.content,
                '","importance":', text(plan.importance), ',"tier":"',
                strings(np.where(plan.importance >= 0.8, "long_term", "short_term")),
                '","extraction_event_id":"x', text(plan.memory_session), '","entities":[',
                entities, "]")
    event_id = join("add-", memory_id)
    parts.append(Events(plan.created_us, plan.memory_user, event_id,
                        pa.array(["memory_added"] * plan.memories), msession,
                        envelope(event_id, "memory_added", muser, msession, plan.created_us,
                                 rest)))

    def change(mask: np.ndarray, type_: str, prefix: str, times: np.ndarray,
               rest_of: Callable[[np.ndarray], pa.Array]) -> None:
        rows = np.nonzero(mask)[0]
        if rows.size == 0:
            return
        take = pa.array(rows)
        eid = join(prefix, text(rows))
        parts.append(Events(times[rows], plan.memory_user[rows], eid,
                            pa.array([type_] * rows.size), msession.take(take),
                            envelope(eid, type_, muser.take(take), msession.take(take),
                                     times[rows], join(',"memory_id":"m', text(rows), '"',
                                                       rest_of(rows)))))

    change(plan.status == "superseded", "memory_superseded", "sup-", plan.ended_us,
           lambda r: join(',"superseded_by":"m', text(plan.superseded_by[r]),
                          '","reason":"same slot","similarity":0.8'))
    change(plan.status == "deleted", "memory_deleted", "del-", plan.ended_us,
           lambda r: pa.array([',"reason":"requested"'] * r.size))
    change(plan.status == "expired", "memory_expired", "exp-", plan.ended_us,
           lambda r: pa.array([',"reason":"ttl"'] * r.size))
    reinforced_at = np.minimum(plan.created_us + 2 * US_PER_DAY, NOW_US - 1)
    change(plan.reinforcements > 0, "memory_reinforced", "rf-", reinforced_at,
           lambda r: join(',"extraction_event_id":"x', text(plan.memory_session[r]),
                          '","similarity":0.95'))
    promoted = (plan.tier == "long_term") & (plan.importance < 0.8)
    change(promoted, "memory_promoted", "pr-", np.minimum(plan.created_us + US_PER_DAY,
                                                          NOW_US - 1),
           lambda r: pa.array([',"reason":"retrieved 3 times"'] * r.size))
    return Events.concat(parts)


def access_chunks(plan: Plan, names: pa.Array, accesses: int, per: int,
                  rng: np.random.Generator) -> Iterator[tuple[Events, np.ndarray, np.ndarray]]:
    """Retrieval events in time order, a chunk at a time, with the memories each names."""
    # Skewed: memory index = M * u**3 hits the first memories most; shuffled so the skew is
    # not tied to time.
    order = rng.permutation(plan.memories)
    first = order[(plan.memories * rng.random(accesses) ** 3).astype(np.int64)]
    times = plan.created_us[first] + rng.integers(60_000_000, 20 * US_PER_DAY, accesses)
    times = np.minimum(times, NOW_US - 1)
    sort = np.argsort(times, kind="stable")
    first, times = first[sort], times[sort]
    for start in range(0, accesses, ACCESS_CHUNK):
        chunk = slice(start, min(start + ACCESS_CHUNK, accesses))
        head, when = first[chunk], times[chunk]
        n = head.size
        # The others come from the same session: one user's memories only.
        base = head - head % MEMORIES_PER_SESSION
        picked = [head] + [np.minimum(base + (head + k) % MEMORIES_PER_SESSION,
                                      plan.memories - 1) for k in range(1, per)]
        users = plan.memory_user[head]
        eid = join("r", text(np.arange(start, start + n)))
        hits = []
        for k, memory in enumerate(picked):
            score = np.round(rng.random(n), 3)
            hits += [("," if k else ""), '{"memory_id":"m', text(memory), '","score":',
                     text(score), "}"]
        session = join("s", text(plan.memory_session[head]))
        value = envelope(eid, "memories_retrieved", names.take(pa.array(users)), session, when,
                         join(',"query":"what do I like?","memories":[', *hits, "]"))
        yield (Events(when, users, eid, pa.array(["memories_retrieved"] * n), session, value),
               np.stack(picked), when)


def dead_letter_events(plan: Plan, names: pa.Array, topics: Topics) -> Events:
    rows = np.arange(0, plan.sessions, 1000)
    when = plan.session_start[rows] + 3 * 60_000_000
    value = join('{"agent":"sessions","reason":"content: Field required","source_topic":"',
                 topics.chat, '","source_partition":0,"source_offset":', text(rows),
                 ',"key_b64":null,"value_b64":"e30=","dead_at":"', iso(when), '"}')
    return Events(when, plan.session_user[rows], pa.nulls(rows.size, pa.string()),
                  pa.nulls(rows.size, pa.string()), pa.nulls(rows.size, pa.string()), value)


# --- the memory table ---------------------------------------------------------------------------


def sha256_all(values: Sequence[str]) -> pa.Array:
    return pa.array([hashlib.sha256(v.encode()).hexdigest() for v in values], pa.string())


def write_memory_table(plan: Plan, names: pa.Array, access_count: np.ndarray,
                       last_access_us: np.ndarray, db_dir: Path,
                       rng: np.random.Generator) -> None:
    schema = memory_schema(DIMENSIONS, MODEL)
    table = lancedb.connect(db_dir).create_table("memories", schema=schema)
    user_keys = sha256_all(names.to_pylist())
    ts = pa.timestamp("us", tz="UTC")
    for start in range(0, plan.memories, WRITE_BATCH):
        m = np.arange(start, min(start + WRITE_BATCH, plan.memories))
        n = m.size
        take = pa.array(m)
        ids = [f"m{i}" for i in m]
        sessions = [f"s{i}" for i in plan.memory_session[m]]
        vectors = rng.standard_normal((n, DIMENSIONS), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        status = plan.status[m]
        active = status == "active"
        last = last_access_us[m]
        entity = plan.entity[m]
        columns = {
            "memory_id": pa.array(ids, pa.string()),
            "user_id": names.take(pa.array(plan.memory_user[m])),
            "user_key": user_keys.take(pa.array(plan.memory_user[m])),
            "agent_id": pa.nulls(n, pa.string()),
            "session_id": pa.array(sessions, pa.string()),
            "memory_type": strings(TYPES[plan.memory_type[m]]),
            "content": plan.content.take(take),
            "importance": pa.array(plan.importance[m]),
            "tier": strings(plan.tier[m]),
            "created_at": pa.array(plan.created_us[m].astype("datetime64[us]"), ts),
            "entities": pa.array([[str(CITIES[e])] if e >= 0 else [] for e in entity],
                                 pa.list_(pa.string())),
            "source_event_ids": pa.array([[] for _ in range(n)], pa.list_(pa.string())),
            "extraction_event_id": pa.array([f"x{s}" for s in plan.memory_session[m]]),
            "extractor": pa.array(["bench/1"] * n),
            "event_id": pa.array([f"add-{i}" for i in ids]),
            "source_topic": pa.array(["bench.memories"] * n),
            "source_partition": pa.array((plan.memory_user[m] % PARTITIONS).astype(np.int32)),
            "source_offset": pa.array(m.astype(np.int64)),
            "session_key": sha256_all(sessions),
            "memory_key": sha256_all(ids),
            "status": strings(status.astype(str)),
            "superseded_by": pa.array([f"m{s}" if s >= 0 else None
                                       for s in plan.superseded_by[m]], pa.string()),
            "ended_at": pa.array(np.where(active, 0, plan.ended_us[m]).astype("datetime64[us]"),
                                 ts, mask=active),
            "reinforcement_count": pa.array(plan.reinforcements[m]),
            "last_reinforced_at": pa.nulls(n, ts),
            "reinforced_by": pa.array([[f"r{i}" for i in range(k)] for k in plan.reinforcements[m]],
                                      pa.list_(pa.string())),
            "changed_offset": pa.array(np.full(n, -1, np.int64)),
            "learned_at": pa.array(plan.created_us[m].astype("datetime64[us]"), ts),
            "access_count": pa.array(access_count[m].astype(np.int64)),
            "last_accessed_at": pa.array(np.maximum(last, 0).astype("datetime64[us]"), ts,
                                         mask=last < 0),
            "access_offset": pa.array(np.full(n, -1, np.int64)),
            "embedding_model": pa.array([MODEL] * n),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIMENSIONS),
        }
        table.add(pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema))


# --- running ------------------------------------------------------------------------------------


def generate(base: Path, memories: int, accesses: int, per: int, seed: int) -> Settings:
    settings = Settings(data_dir=base / "data", topic_prefix="bench")
    topics = Topics.from_settings(settings)
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    plan = make_plan(memories, rng)
    names = user_names(plan.users)
    writer = ArchiveWriter(live_archive_dir(settings), names)
    writer.write(topics.chat, chat_events(plan, names).sorted())
    writer.write(topics.memories, memory_events(plan, names, rng).sorted())
    writer.write(topics.deadletters, dead_letter_events(plan, names, topics))
    print(f"chat, memories, dead letters: {writer.records:,} records in {writer.files:,} files "
          f"({time.perf_counter() - started:.0f} s)", flush=True)
    access_count = np.zeros(memories, np.int64)
    last_access = np.full(memories, -1, np.int64)
    for events, picked, when in access_chunks(plan, names, accesses, per, rng):
        writer.write(topics.accesses, events)
        for memory in picked:
            np.add.at(access_count, memory, 1)
            np.maximum.at(last_access, memory, when)
        print(f"accesses: {writer.written(topics.accesses):,} events "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    write_memory_table(plan, names, access_count, last_access, settings.lancedb_dir, rng)
    print(f"memory table: {memories:,} rows ({time.perf_counter() - started:.0f} s); "
          f"archive {directory_size(live_archive_dir(settings)) / 1e6:,.0f} MB, table "
          f"{directory_size(settings.lancedb_dir) / 1e6:,.0f} MB", flush=True)
    (base / "COMPLETE").write_text(f"{memories} {accesses} {per} {seed}\n")
    return settings


def directory_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def disk_free(path: Path) -> str:
    out = subprocess.run(["df", "-h", str(path)], capture_output=True, text=True, check=False)
    return out.stdout.strip().splitlines()[-1] if out.stdout else "?"


@dataclass
class Timing:
    report: str
    rows: int
    seconds: float
    scoped_rows: int
    scoped_seconds: float


def best_of(repeat: int, call: Callable[[], int]) -> tuple[int, float]:
    """Rows out and the fastest of ``repeat`` timed calls (other work on the machine only ever
    makes a run slower)."""
    seconds = []
    rows = 0
    for _ in range(repeat):
        started = time.perf_counter()
        rows = call()
        seconds.append(time.perf_counter() - started)
    return rows, min(seconds)


def report_rows(settings: Settings, name: str, user: str | None) -> int:
    """Run one report as ``memstream report`` does; return its rows out."""
    return int(run_report(settings, name, Scope(user_id=user, now=NOW)).table.num_rows)


def measure(settings: Settings, names: Sequence[str], user: str, repeat: int) -> list[Timing]:
    timings = []
    for name in names:
        rows, seconds = best_of(repeat, partial(report_rows, settings, name, None))
        scoped_rows, scoped_seconds = best_of(repeat, partial(report_rows, settings, name, user))
        timings.append(Timing(name, rows, seconds, scoped_rows, scoped_seconds))
        print(f"{name:<13} {rows:>10,} rows {seconds:>7.2f} s   "
              f"user: {scoped_rows:>6,} rows {scoped_seconds:>6.2f} s", flush=True)
    return timings


def main(argv: list[str] | None = None) -> int:
    """Generate (or reuse) the data, time every report, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--accesses", type=int, default=10_000_000,
                        help="memories_retrieved events")
    parser.add_argument("--per-retrieval", type=int, default=3,
                        help="memories each retrieval event names (1-4)")
    parser.add_argument("--reports", default=",".join(REPORTS), help="comma-separated")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--repeat", type=int, default=1, help="runs per report; the best counts")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temporary data")
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    parser.add_argument("--reuse", type=Path, help="a directory a --keep run left")
    args = parser.parse_args(argv)
    if not 1 <= args.per_retrieval <= MEMORIES_PER_SESSION:
        parser.error(f"--per-retrieval must be 1..{MEMORIES_PER_SESSION}")
    names = [n for n in args.reports.split(",") if n]
    unknown = sorted(set(names) - set(REPORTS))
    if unknown:
        parser.error(f"unknown reports {unknown}")

    if args.reuse is not None:
        base = args.reuse
        if not (base / "COMPLETE").exists():
            parser.error(f"{base} holds no complete generated data")
        memories, accesses, per, _ = (int(v) for v in (base / "COMPLETE").read_text().split())
        settings = Settings(data_dir=base / "data", topic_prefix="bench")
    else:
        base = Path(tempfile.mkdtemp(prefix="memstream-analytics-bench-", dir=args.dir))
        memories, accesses, per = args.memories, args.accesses, args.per_retrieval
        print(f"data in {base.name}; df: {disk_free(base)}", flush=True)
    try:
        if args.reuse is None:
            settings = generate(base, memories, accesses, per, args.seed)
        user = f"user-{(max(1, memories // MEMORIES_PER_USER)) // 2:05d}"
        timings = measure(settings, names, user, max(1, args.repeat))
    finally:
        if args.reuse is None and not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        elif args.reuse is None:
            print(f"kept {base}")
    users = max(1, memories // MEMORIES_PER_USER)
    print()
    print(f"{memories:,} memories of {users:,} users, {accesses:,} retrieval events naming "
          f"{per} memories each ({accesses * per:,} access rows); DuckDB {duckdb_version()}")
    header = f"{'report':<13} {'rows out':>10} {'seconds':>8}   {'one user: rows':>14} {'seconds':>8}"
    print(header)
    print("-" * len(header))
    for t in timings:
        print(f"{t.report:<13} {t.rows:>10,} {t.seconds:>8.2f}   {t.scoped_rows:>14,} "
              f"{t.scoped_seconds:>8.2f}")
    print("- Each figure is one run_report call: a fresh in-memory connection, the views, the "
          "memory table read without vectors when the report needs it, the SQL, the chart data"
          f"; the best of {max(1, args.repeat)} run(s).")
    return 0


def duckdb_version() -> str:
    import duckdb

    return str(duckdb.__version__)


if __name__ == "__main__":
    sys.exit(main())
