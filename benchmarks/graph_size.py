"""The entity graph of one user with many memories: how long ``graph``, ``entity`` and the
SQL report ``graph`` take as the user's memories grow.

    python benchmarks/graph_size.py [--sizes 1000,10000] [--repeat 3]

For each size it writes one user's memories (and a few of another user, who must not count)
through the real write path of the memory projection (LanceDB, one partition; each event
carries a random unit vector, as a decided memory carries its own, so nothing is embedded):
60 % episodes naming one to three entities of a pool of people, places and organisations
that grows with the user (about one entity per 25 memories), 40 % facts with claims (the
user's home, a relative's name, someone's employer), each new home superseding the one
before as the decider does. It then times, best of ``--repeat``:

* ``read``: the user's rows from LanceDB (``list_memories``, every status);
* ``build``: the graph from those rows (:func:`graph_of_records`), in Python;
* ``graph``: the verb as the service runs it (read + build, its default limit of entities);
* ``entity``: one entity with its neighbours, facts and edges (read + build, default limit);
* ``sql``: the ``graph`` report for the user (DuckDB connection, the rows, the graph, the SQL).

It prints one row per size: memories, nodes and edges (of the whole graph), and the seconds
of each.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from runner import log

from memstream.models.events.memory import Claim, MemoryAdded, MemoryChange, MemorySuperseded
from memstream.models.settings import Settings
from memstream.models.topics import Topics
from memstream.models.vectors import pack_vector
from memstream.projections.analytics import Scope, run_report
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.entity_graph import entity, entity_graph, graph_of_records
from memstream.projections.memories import PartitionedMemories, SourcePosition

USER = "heavy-user"
START = datetime(2024, 1, 1, tzinfo=UTC)
FIRST = ["Clara", "Maria", "Jonas", "Aiko", "Omar", "Lena", "Pablo", "Nina", "Priya", "Felix"]
LAST = ["Novak", "Silva", "Berg", "Tanaka", "Haddad", "Costa", "Moreau", "Kowalski"]
CITIES = ["Munich", "Berlin", "Lisbon", "Porto", "Vienna", "Oslo", "Kyoto", "Toronto", "Madrid"]
COMPANIES = ["Siemens", "Bosch", "Acme", "Spotify", "Zalando", "Airbus", "Philips", "Canva"]
RELATIONS = ["sister", "brother", "friend", "manager", "cousin", "neighbour"]


def entity_pool(size: int, rng: random.Random) -> list[str]:
    """``size`` distinct entity names: people, then places and organisations with a number."""
    people = [f"{f} {last}" for f in FIRST for last in LAST]
    places = [f"{c} {n}" if n else c for n in range(size) for c in CITIES]
    organisations = [f"{c} {n}" if n else c for n in range(size) for c in COMPANIES]
    pool = people[: size // 2] + places[: size // 4] + organisations[: size - size // 2 - size // 4]
    rng.shuffle(pool)
    return pool


def user_log(
    user: str, memories: int, seed: int, model_id: str
) -> list[MemoryAdded | MemoryChange]:
    """The memories topic of ``user``: ``memories`` memories, one every 105 minutes of event
    time, each with a random vector of ``model_id``."""
    rng = random.Random(seed)
    vectors = np.random.default_rng(seed)
    names = entity_pool(max(memories // 25, 20), rng)
    events: list[MemoryAdded | MemoryChange] = []
    last_home: str | None = None
    for i in range(memories):
        at = START + timedelta(minutes=105 * i)
        memory_id = f"{user}-m{i}"
        vector = vectors.normal(size=384).astype(np.float32)
        common: dict[str, Any] = {
            "event_id": f"add-{memory_id}", "user_id": user, "session_id": f"{user}-s{i // 20}",
            "occurred_at": at, "memory_id": memory_id, "importance": 0.6,
            "extraction_event_id": f"x-{i // 20}", "extractor": "bench/1",
            "source_event_ids": (f"turn-{memory_id}",),
            "vector": pack_vector(vector / np.linalg.norm(vector)),
            "embedding_model": model_id,
        }
        kind = rng.random()
        if kind < 0.6:
            named = rng.sample(names, rng.randint(1, 3))
            events.append(MemoryAdded(
                **common, memory_type="episode", entities=tuple(named),
                content=f"Spent the afternoon with {' and '.join(named)}",
            ))
            continue
        if kind < 0.75:
            home = rng.choice([n for n in names if n.split()[0] in CITIES] or CITIES)
            subject, attribute, value, content = "User", "home", home, f"User lives in {home}"
        elif kind < 0.9:
            relation, person = rng.choice(RELATIONS), rng.choice(names)
            subject, attribute, value = "User", relation, person
            content = f"User's {relation} is {person}"
        else:
            person, employer = rng.choice(names), rng.choice(COMPANIES)
            subject, attribute, value = person, "employer", employer
            content = f"{person} works at {employer}"
        events.append(MemoryAdded(
            **common, memory_type="fact", content=content, entities=(value,),
            claim=Claim(subject=subject, attribute=attribute, value=value, valid_from=at),
        ))
        if attribute == "home":
            if last_home is not None:
                events.append(MemorySuperseded(
                    event_id=f"sup-{last_home}", user_id=user, session_id=common["session_id"],
                    occurred_at=at, memory_id=last_home, superseded_by=memory_id,
                    reason="moved", similarity=0.8, change="updated", decided_by="rules",
                    valid_until=at,
                ))
            last_home = memory_id
    return events


def best(repeat: int, action: Callable[[], Any]) -> tuple[float, Any]:
    """The fastest of ``repeat`` runs of ``action`` (seconds), and its result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - started)
    return min(times), result


def measure(size: int, repeat: int, workdir: Path, embedder: MiniLMOnnxEmbedder) -> dict[str, Any]:
    settings = Settings(data_dir=workdir / f"size-{size}", partitions=1)
    projection = PartitionedMemories.from_settings(settings, embedder)
    topic = Topics.from_settings(settings).memories
    model = embedder.model_id
    events = user_log(USER, size, size, model) + user_log("other-user", 50, 1, model)
    started = time.perf_counter()
    for start in range(0, len(events), 2_000):
        batch = events[start : start + 2_000]
        projection.apply([(e, SourcePosition(topic, 0, start + n)) for n, e in enumerate(batch)])
    log(f"{size:,} memories written in {time.perf_counter() - started:.1f} s")
    read, rows = best(repeat, lambda: projection.list_memories(USER, include_inactive=True))
    build, built = best(repeat, lambda: graph_of_records(rows))
    whole, graph = best(repeat, lambda: entity_graph(projection, USER))
    assert graph == built
    busiest = max(graph["nodes"][1:], key=lambda n: (len(n["memory_ids"]), n["name"]))
    one, _ = best(repeat, lambda: entity(projection, USER, busiest["name"]))
    sql, report = best(repeat, lambda: run_report(settings, "graph", Scope(user_id=USER)))
    (row,) = report.table.to_pylist()
    assert row["entities"] == graph["total_nodes"]  # the report's graph is whole
    return {
        "memories": len(rows), "nodes": graph["total_nodes"], "edges": graph["total_edges"],
        "read": read, "build": build, "graph": whole, "entity": one, "sql": sql,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="memories of the user, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    embedder = MiniLMOnnxEmbedder(threads=1)  # for the table's model id; nothing is embedded
    results = []
    with tempfile.TemporaryDirectory(prefix="graph-size-") as directory:
        for size in sizes:
            results.append(measure(size, args.repeat, Path(directory), embedder))
    print("| memories | nodes | edges | read s | build s | graph s | entity s | report graph s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['memories']:,} | {r['nodes']:,} | {r['edges']:,} | {r['read']:.2f} | "
              f"{r['build']:.2f} | {r['graph']:.2f} | {r['entity']:.2f} | {r['sql']:.2f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
