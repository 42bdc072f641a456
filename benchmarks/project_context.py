"""What a project's history costs a turn's context: ``context()`` against
``context(project=...)`` on one user with about 2,000 memories.

The user holds ``--memories`` memories (real texts and vectors from ``memory_tables.py``'s
pool, carried in the events) and the task memories of ``--projects`` projects, each with
``--states`` task states over as many sessions (made by the extraction's own
``task_candidate``, as a worker makes them). They are projected into a LanceDB table in a
temporary directory, then :meth:`MemoryService.context` answers the same questions three
ways, alternated question by question: with no project, with ``project=`` one of the user's
projects, and with no project but a message that names one (found as words); then the project
step alone (``project_context``: one read of the user's memories, and the history when a
project is named or asked), which every ``context()`` now pays. Median and p95 milliseconds
are printed, with the tokens of the context (of the section, for the step).

The service runs in process over the table (no broker: its access events go to an in-memory
publisher, as in the unit tests), with resident memories off, so every answer reads the
table as ``memstream serve`` does before it holds the user.

Run from the repository root::

    python benchmarks/project_context.py                  # 2,000 memories, 200 questions
    python benchmarks/project_context.py --memories 5000 --queries 300
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from memory_tables import NOW, asks, build_pool, user_id

from memstream.models.events.consolidation import TaskChange
from memstream.models.events.memory import MemoryAdded
from memstream.models.extraction.tasks import task_candidate
from memstream.models.session import estimate_tokens
from memstream.models.settings import Settings
from memstream.models.vectors import pack_vector
from memstream.projections.embedder import MiniLMOnnxEmbedder
from memstream.projections.memories import MemoryProjection, SourcePosition
from memstream.streams.kafka.publisher import EventLimits
from memstream.streams.keys.store import FileKeyStore
from memstream.streams.service.app import Service
from memstream.streams.service.container import Container
from memstream.streams.service.projects import project_context

# The tests' in-memory publisher: the access events of the contexts go nowhere.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fakes import InMemoryPublisher

WRITE_BATCH = 256  # the projector's batch (projection_batch_size)
BUDGET = Settings().memory_context_tokens
PROGRESS = ["schema copied", "tests written", "data copied", "reviewed", "cutover open"]


def memory_events(memories: int, seed: int, model_id: str) -> list[MemoryAdded]:
    """``memories`` memories of one user, each with its vector, 20 to a session."""
    pool = build_pool(memories, seed)
    user = user_id(0)
    return [
        MemoryAdded(
            event_id=f"e{i}", user_id=user, session_id=f"s{i // 20}", memory_id=f"m{i:06d}",
            occurred_at=NOW - timedelta(hours=len(pool.texts) - i), extractor="bench/1",
            memory_type=pool.types[i].as_py(), content=pool.texts[i].as_py(),
            importance=float(pool.importance[i]), extraction_event_id=f"x{i}",
            vector=pack_vector(pool.vectors[i].tolist()), embedding_model=model_id,
        )
        for i in range(len(pool.texts))
    ]


def task_events(projects: int, states: int, seed: int) -> list[MemoryAdded]:
    """The task memories of ``projects`` projects, ``states`` states each, one session a
    state (the projection embeds them)."""
    rng = random.Random(seed)
    user = user_id(0)
    found = []
    for p in range(projects):
        for s in range(states):
            at = NOW - timedelta(days=states - s, hours=p)
            progress = None if s == 0 else rng.choice(PROGRESS)
            candidate = task_candidate(TaskChange(
                event_id=f"t{p}-{s}", task=f"Task {s % 2} of project{p}", project=f"project{p}",
                progress=progress, percent=None if s == 0 else 10.0 * s, occurred_at=at,
            ))
            found.append(MemoryAdded(
                event_id=f"te{p}-{s}", user_id=user, session_id=f"p{p}-{s}",
                memory_id=f"t{p:03d}{s:03d}", occurred_at=at, extractor="bench/1",
                memory_type="task", content=candidate.content, context=candidate.context,
                importance=candidate.importance, extraction_event_id=f"tx{p}-{s}",
                entities=candidate.entities, source_event_ids=candidate.source_event_ids,
            ))
    return found


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def measure(service: Service, questions: list[str], projects: int) -> dict[str, list[float]]:
    """Milliseconds of each way of asking, alternated question by question."""
    user = user_id(0)
    times: dict[str, list[float]] = {
        "context()": [], "context(project=)": [], "named": [], "step, none named": [],
        "step, project=": [],
    }
    tokens: dict[str, list[float]] = {name: [] for name in times}
    memories = service.memories
    for n, question in enumerate(questions):
        project = f"project{n % projects}"
        ways = {
            "context()": memories.context(question, user_id=user),
            "context(project=)": memories.context(question, user_id=user, project=project),
            "named": memories.context(f"{question} (about {project})", user_id=user),
        }
        for name, call in ways.items():
            started = time.perf_counter()
            found = await call
            times[name].append((time.perf_counter() - started) * 1000)
            tokens[name].append(found["tokens"])
        # The project step alone (what every context now adds): no project named, and one.
        projection = await memories._projection()
        for name, asked in (("step, none named", None), ("step, project=", project)):
            started = time.perf_counter()
            section = project_context(projection, user, asked, [question], None, BUDGET,
                                      estimate_tokens)
            times[name].append((time.perf_counter() - started) * 1000)
            tokens[name].append(estimate_tokens(section))
    return {**times, **{f"{name} tokens": values for name, values in tokens.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--projects", type=int, default=10)
    parser.add_argument("--states", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    embedder = MiniLMOnnxEmbedder(threads=1)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), resident_memory_mb=0)
        events = memory_events(args.memories, args.seed, embedder.model_id)
        events += task_events(args.projects, args.states, args.seed)
        projection = MemoryProjection(Path(tmp) / "memories", embedder)
        for start in range(0, len(events), WRITE_BATCH):
            chunk = events[start : start + WRITE_BATCH]
            projection.apply([(e, SourcePosition("memstream.memories", 0, start + i))
                              for i, e in enumerate(chunk)])
        projection.refresh_indexes()
        keys = FileKeyStore(settings.keys_dir)
        publisher = InMemoryPublisher(keys, EventLimits.from_settings(settings))
        service = Service(Container(settings, keys=keys, projection=projection,
                                    publisher=publisher))
        questions = [q for _, q in asks(1, args.queries, args.seed)]
        asyncio.run(measure(service, questions[:5], args.projects))  # warm the caches
        found = asyncio.run(measure(service, questions, args.projects))
        rows = projection.count(user_id(0))
    print(f"one user, {rows} memories ({args.projects} projects x {args.states} task states), "
          f"{args.queries} questions each way, alternated")
    print(f"{'context':<20} {'median ms':>10} {'p95 ms':>8} {'tokens (median)':>16}")
    for name in ("context()", "context(project=)", "named", "step, none named",
                 "step, project="):
        ms = found[name]
        print(f"{name:<20} {statistics.median(ms):>10.1f} {percentile(ms, 0.95):>8.1f} "
              f"{statistics.median(found[f'{name} tokens']):>16.0f}")


if __name__ == "__main__":
    main()
