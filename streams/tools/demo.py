"""``memstream demo``: the whole path once, on a bundled sample of three users."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from contextlib import ExitStack
from datetime import datetime
from importlib import resources

from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import MemoryIndex, PartitionedMemories
from memstream.projections.retrieval import Retriever
from memstream.streams.runtime.broker import EmbeddedBroker, broker_reachable
from memstream.streams.runtime.worker import WorkerProcess, worker_healthy
from memstream.streams.service.timelines import timeline
from memstream.streams.tools.publish import publish_events, read_events


def sample_lines() -> list[str]:
    """The bundled sample conversations, as JSONL lines of chat events."""
    text = resources.files("memstream.streams").joinpath("samples/demo.jsonl").read_text()
    return text.splitlines()


def sample_searches() -> list[dict[str, str]]:
    """The searches the demo runs over the sample."""
    text = resources.files("memstream.streams").joinpath("samples/demo_searches.json").read_text()
    searches: list[dict[str, str]] = json.loads(text)
    return searches


def wait_for_sessions(
    projection: MemoryIndex, sessions: dict[str, set[str]], timeout_s: float
) -> bool:
    """Wait until every sample session has memories in the projection."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = all(
            expected <= {record.session_id for record in projection.list_memories(user)}
            for user, expected in sessions.items()
        )
        if done:
            return True
        time.sleep(0.5)
    return False


#: The facts of the sample that change, and how a user would ask for their history.
CHANGED_FACTS = (("alice", "budget"), ("bob", "where I live"))


def stale_mark(stale: bool, until: datetime | None) -> str:
    """What a demo line says of a memory that no longer holds."""
    if not stale:
        return ""
    return f"  (no longer holds since {until:%Y-%m-%d})" if until else "  (no longer holds)"


def print_changed_facts(projection: MemoryIndex) -> None:
    """The timelines of the sample's facts that changed: each value and when it held."""
    print("facts that changed (memstream timeline): each value, from when until when\n")
    for user, about in CHANGED_FACTS:
        found = timeline(projection, user, about)
        print(f"timeline --user {user} {about!r}: {found['subject']}'s {found['attribute']}")
        for entry in found["entries"]:
            until = (entry["valid_until"] or "now")[:10]
            print(f"   {entry['valid_from'][:10]} .. {until:<10}  {entry['value']:<12}"
                  f"  ({entry['statement']})")
        print()


def run_demo(settings: Settings, timeout_s: float = 120.0) -> int:
    """Publish the sample, let the worker consolidate it, print memories and searches.

    Starts the embedded broker and a worker when none is running, and stops what it started.
    """
    with ExitStack() as started:
        started_any = False
        if not asyncio.run(broker_reachable(settings.broker, timeout_s=2.0)):
            broker = EmbeddedBroker(settings.broker_port, host=settings.broker_host)
            started.enter_context(broker)
            started_any = True
            # A fresh embedded broker holds an empty log, so the demo projects into a
            # directory of its own, emptied first, and leaves yours alone.
            settings = settings.model_copy(update={"data_dir": settings.data_dir / "demo"})
            shutil.rmtree(settings.data_dir, ignore_errors=True)
            print(f"started the embedded broker on {broker.address} (memory storage: a restart loses the log)")
        else:
            print(f"using the broker at {settings.broker}")
        if not worker_healthy(settings):
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            worker = WorkerProcess(settings, log_path=settings.data_dir / "worker.log")
            print("starting a worker (log: worker.log in the data directory) ...")
            started.enter_context(worker)
            started_any = True
        else:
            print(f"using the worker on port {settings.web_port}")

        events, errors = read_events(sample_lines(), settings.max_event_bytes)
        assert not errors, errors
        published = asyncio.run(publish_events(settings, events))
        sessions: dict[str, set[str]] = {}
        for event in events:
            sessions.setdefault(event.user_id, set()).add(event.session_id)
        print(f"published {published} chat events: {len(sessions)} users, "
              f"{sum(map(len, sessions.values()))} sessions")

        projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
        if not wait_for_sessions(projection, sessions, timeout_s):
            print(f"error: memories did not appear within {timeout_s:.0f} s")
            return 1
        print(f"memories are in {projection.store}\n")
        for user in sorted(sessions):
            records = projection.list_memories(user)
            print(f"== {user}: {len(records)} memories")
            for record in sorted(records, key=lambda r: (r.memory_type, -r.importance)):
                if record.memory_type != "episode":
                    print(f"   [{record.memory_type:10}] {record.importance:.2f}  {record.content}")
            episodes = sum(record.memory_type == "episode" for record in records)
            print(f"   + {episodes} episodic memories (the user's own turns)\n")
        retriever = Retriever(projection, settings)
        print("scores: 0-1, how well a memory matches (see memstream search --explain)\n")
        for search in sample_searches():
            ranked = retriever.search(search["user"], search["query"], limit=3)
            print(f"search --user {search['user']} {search['query']!r}")
            for item in ranked:
                print(f"   {item.rank_score:.2f} [{item.memory.memory_type}] {item.memory.content}"
                      + stale_mark(item.stale, item.memory.valid_until or item.memory.ended_at))
            print()
        print_changed_facts(projection)
    print("stopped the broker and worker the demo started" if started_any else "done")
    return 0
