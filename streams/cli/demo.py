"""``memstream demo``: the whole path once, on a bundled sample of three users.

The demo runs on a broker, a worker and a data directory of its own (a free port, a
temporary directory), whatever the settings name: the sample users never reach the user's
own broker or memory, even while the user's broker and worker run.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import lancedb

from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import MemoryIndex, PartitionedMemories
from memstream.projections.retrieval import Retriever
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.service.chat_events import publish_events, read_events
from memstream.streams.service.timelines import timeline
from memstream.streams.worker.process import WorkerProcess


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


def wait_for_full_text_index(settings: Settings, timeout_s: float) -> bool:
    """Wait until the worker's projector has built the full-text index of every memory table
    and folded every row into it (it does so every ``index_refresh_interval_s``). Searched
    earlier, a memory matches by meaning only, and the demo's scores would depend on how
    fast the machine is."""
    db = lancedb.connect(settings.lancedb_dir)  # the demo's own: a local directory
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(_fully_indexed(db.open_table(name)) for name in db.list_tables().tables):
            return True
        time.sleep(0.5)
    return False


def _fully_indexed(table: Any) -> bool:
    """Whether ``table`` has its full-text index, and every row is in it."""
    for index in table.list_indices():
        if list(index.columns) == ["search_text"]:
            return bool(table.index_stats(index.name).num_unindexed_rows == 0)
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


def demo_settings(settings: Settings, broker: str, data_dir: Path) -> Settings:
    """``settings`` moved onto the demo's own broker, data directory and worker port: nothing
    of the user's (their broker, data directory, object store, key file) is named any more."""
    return settings.model_copy(
        update={
            "broker": broker,
            "broker_kind": "tansu",
            "data_dir": data_dir,
            "memory_store": "",
            "api_keys_file": None,
            "web_host": "127.0.0.1",
            "web_port": free_port(),
            "serve_in_worker": False,
        }
    )


def importance_legend(settings: Settings) -> str:
    """What the number before each listed memory is."""
    return (
        "importance (the number before each memory): 0-1, how much a memory matters on its "
        "own, set when it was extracted; from "
        f"{settings.long_term_importance:.2f} on it goes straight to long-term memory"
    )


def score_digits(scores: Sequence[float], most: int = 4) -> int:
    """How many decimals tell ``scores`` apart (2 at least, ``most`` at most): scores that
    differ must not print the same.

    Examples
    --------
    >>> score_digits([0.2131, 0.2094, 0.2078])
    3
    >>> score_digits([0.31, 0.22])
    2
    """
    digits = 2
    while digits < most:
        printed = {f"{score:.{digits}f}" for score in scores}
        if len(printed) == len(set(scores)):
            break
        digits += 1
    return digits


def run_demo(settings: Settings, timeout_s: float = 120.0) -> int:
    """Publish the sample, let the worker consolidate it, print memories and searches.

    Starts an embedded broker on a free port and a worker over a temporary data directory,
    and stops and removes them at the end (see the module docstring): ``settings`` give the
    rest (the extractor, the embedder, the ranking).
    """
    with ExitStack() as started:
        data_dir = Path(started.enter_context(tempfile.TemporaryDirectory(prefix="memstream-demo-")))
        broker = started.enter_context(EmbeddedBroker(free_port()))
        print(f"started the embedded broker on {broker.address} (memory storage: a restart loses the log)")
        settings = demo_settings(settings, broker.address, data_dir)
        print(
            f"starting a worker over {data_dir} (a temporary directory: your own broker and "
            "data directory are not touched) ..."
        )
        started.enter_context(WorkerProcess(settings, log_path=data_dir / "worker.log"))

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
        if not wait_for_full_text_index(settings, timeout_s):
            print("note: the full-text index is not complete yet: scores match by meaning only")
        print(f"memories are in {projection.store} (removed when the demo ends)\n")
        print(f"{importance_legend(settings)}\n")
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
            ranked = retriever.search(search["user"], search["query"], limit=5)
            digits = score_digits([item.rank_score for item in ranked])
            print(f"search --user {search['user']} {search['query']!r}")
            for item in ranked:
                print(f"   {item.rank_score:.{digits}f} [{item.memory.memory_type}] "
                      f"{item.memory.content}"
                      + stale_mark(item.stale, item.memory.valid_until or item.memory.ended_at))
            print()
        print_changed_facts(projection)
    print("stopped the broker and worker the demo started, and removed its data directory")
    return 0
