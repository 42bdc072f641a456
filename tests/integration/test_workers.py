"""Three workers on one data directory, one killed with SIGKILL mid-ingest: its partitions move
to the others, searches of its users keep answering, and in the end every memory exists
exactly once, in its user's partition's table, and equals a one-worker run of the same events.

The scenario is ``benchmarks/workers.py``'s (which prints the times: docs/scaling.md);
this asserts its outcome, never its times.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from dialogues import generate
from workers import chat_events, differences, duplicates, kill_one_mid_ingest, misplaced, one_worker

from memstream.streams.kafka.broker import free_port


def test_three_workers_one_killed_mid_ingest_end_with_one_worker_s_memories(
    settings_factory: Any, tmp_path: Path
) -> None:
    dialogues = generate(9, 4, 10, seed=7)
    base = settings_factory(partitions=6)
    reference = base.model_copy(update={
        "topic_prefix": f"{base.topic_prefix}one", "data_dir": tmp_path / "one", "web_port": free_port(),
    })
    many = base.model_copy(update={"topic_prefix": f"{base.topic_prefix}many", "data_dir": tmp_path / "many"})
    workers = [many.model_copy(update={"web_port": free_port()}) for _ in range(3)]

    one = one_worker(reference, chat_events(dialogues), tmp_path, timeout_s=300)
    run = kill_one_mid_ingest(workers, dialogues, tmp_path, timeout_s=300)

    assert one.rows and not duplicates(one.rows)
    # The victim owned some partitions and users; the survivors write every partition now.
    assert run.victim_partitions and run.victim_users and run.survivors_took_over
    # Its users' searches kept answering, straight from the shared tables, and their
    # memories grew again after the kill (the survivors projected the rest of the history).
    assert run.searches > 0 and run.failed_searches == 0
    assert not math.isnan(run.resumed_s)
    # Exactly once, each in its user's partition's table, equal to the one-worker run.
    assert duplicates(run.rows) == {}
    assert misplaced(run.rows, many.partitions) == []
    assert differences(run.rows, one.rows) == []
    victims = {row["user_id"] for row in run.rows} & set(run.victim_users)
    assert victims == set(run.victim_users)
