"""Crash safety on the real broker: SIGKILL the worker at random points while chat events
stream in, and compare everything it ends up with against a run of the same events that
never crashed.

Processing is at-least-once (Tansu has no transactions), so a kill re-delivers whatever the
worker had not committed: chat events, consolidation requests, memory events. Every step must
be idempotent, and every record processed in order, for the crashed run to end where the
uncrashed one does:

- the same memories (no memory lost, none doubled, the same ids, the same view);
- the same open sessions, equal to the fold of the crashed run's own chat topic;
- a live memory table equal to one rebuilt from the crashed run's log;
- every chat message consolidated (or in an open session), every span extracted.

The workload, the waiting and the comparisons are those of ``benchmarks/chaos.py`` (the same
run at a larger scale). Idle closes are wall-clock decisions and would differ between two
runs, so the idle timeout is far longer than the test: every close is an explicit event.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from chaos import (
    IDLE_TIMEOUT_S,
    audit,
    chaos_workload,
    compare,
    open_states,
    publish_at_rate,
    wait_until_done,
)

from memstream.models.events.chat import SessionClosed
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics
from memstream.streams.operations.rebuild_sessions import fold_chat_topic, live_sessions
from memstream.streams.operations.replay import verify_memories
from memstream.streams.worker.process import WorkerProcess

SettingsFactory = Callable[..., Settings]

SEED = 20261102
KILLS = 4
EVENTS = 560
#: Chat events per second of the crashed run: the workload takes about 30 s, under the kills.
RATE = 18.0


@pytest.mark.timeout(420)
def test_kill_9_at_random_points_loses_and_doubles_nothing(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    common = {"max_messages": 6, "idle_timeout_s": IDLE_TIMEOUT_S, "session_scan_interval_s": 60.0}
    crashed = settings_factory(web_port=free_port(), **common)
    reference = crashed.model_copy(update={
        "topic_prefix": f"{crashed.topic_prefix}-ref", "data_dir": tmp_path / "reference",
        "web_port": free_port(),
    })
    events = chaos_workload(EVENTS, users=8, seed=SEED)
    embedder = embedder_from_settings(crashed)

    # The uncrashed run: everything at once, one worker that is never killed.
    with WorkerProcess(reference, log_path=tmp_path / "reference.log") as worker:
        asyncio.run(publish_at_rate(reference, events, None))
        expected = wait_until_done(reference, embedder, 150, worker)

    # The crashed run: the same events over ~30 s, the worker killed under them.
    publisher = threading.Thread(target=lambda: asyncio.run(publish_at_rate(crashed, events, RATE)))
    worker = WorkerProcess(crashed, log_path=tmp_path / "crashed.log")
    worker.start()
    try:
        publisher.start()
        for _ in range(KILLS):
            # From just after it answers (still joining the group: the killed member holds
            # its partitions until its session times out) to well into processing.
            time.sleep(rng.uniform(1.0, 14.0))
            assert not worker.exited(), "the worker died by itself"
            worker.kill()
            worker.start()
        publisher.join()
        found = wait_until_done(crashed, embedder, 180, worker)
    finally:
        worker.stop()

    assert sum(isinstance(e, SessionClosed) for e in events) >= 30 and len(expected) > 100
    recovered = open_states(asyncio.run(live_sessions(crashed)))
    uncrashed = open_states(asyncio.run(live_sessions(reference)))
    folded = open_states(asyncio.run(fold_chat_topic(crashed)))
    assert uncrashed, "some sessions stay open"
    # Every check runs and every failure is reported: which of them fail says where the
    # at-least-once path loses or repeats something.
    problems = []
    difference = compare(found, expected, recovered, uncrashed)
    for name in ("lost", "duplicated", "mismatched", "ids_only_here", "ids_only_there",
                 "sessions_mismatched"):
        if count := getattr(difference, name):
            problems.append(f"{name}: {count}")
    problems += [f"  e.g. {example}" for example in difference.examples[:5]] if problems else []
    if recovered != folded:
        problems.append("the recovered sessions are not the fold of the crashed run's chat topic")
    log = audit(crashed)
    if log.requests_never_extracted or log.messages_never_consolidated:
        problems.append(
            f"never done: {log.requests_never_extracted} consolidation requests not extracted, "
            f"{log.messages_never_consolidated} chat messages not consolidated nor open"
        )
    live, rebuilt = asyncio.run(verify_memories(crashed))
    if live != rebuilt:
        problems.append(f"memories: live {live}, rebuilt from the log {rebuilt}")
    letters = asyncio.run(read_topic(crashed, Topics.from_settings(crashed).deadletters))
    if letters:
        problems.append(f"{len(letters)} dead letters")
    assert not problems, (
        f"after {KILLS} kills (consolidation {log.consolidation_records} records / "
        f"{log.consolidation_ids} ids, memories {log.memory_records} / {log.memory_ids}):\n"
        + "\n".join(problems)
    )
