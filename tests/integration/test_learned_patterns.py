"""Learned patterns through the real broker and worker: three sessions with the same request
and tool make pattern memories with their evidence; a fourth session supersedes them with new
versions; after a worker restart a fifth still counts the earlier four (the learner's counts
are folded again from the log); a table rebuilt from the log holds the same patterns."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chat import conversation
from harness import wait_for, wait_until_projected

from memstream.models.events.chat import ToolCalled
from memstream.models.events.envelope import Event
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import MemoryRecord, PartitionedMemories
from memstream.projections.shadow import shadow_name
from memstream.streams.kafka.broker import free_port
from memstream.streams.operations.replay import memories_fingerprint, rebuild_memories
from memstream.streams.service.chat_events import publish_events
from memstream.streams.service.patterns import learned_patterns
from memstream.streams.worker.process import WorkerProcess

MONDAY = datetime(2026, 3, 2, 8, 10, tzinfo=UTC)
#: A statement new in each session (a memory of its own: the request repeats word for word).
COUSINS = ("Ana", "Bruno", "Carla", "Duarte", "Eva")


def session(user: str, n: int) -> list[Event]:
    """Session ``n`` of ``user``: a week apart, Monday at 08:10 UTC, the same request and a
    web_search call."""
    start = MONDAY + timedelta(weeks=n)
    events = conversation(
        user, f"s{n}",
        [("user", f"My cousin {COUSINS[n]} works at the library."),
         ("user", "Can you find me vegetarian recipes for dinner?"),
         ("assistant", "Here are three ideas.")],
        start=start,
    )
    tool = ToolCalled(
        event_id=f"{user}/s{n}/tool", user_id=user, session_id=f"s{n}",
        occurred_at=start + timedelta(seconds=90), name="web_search",
        arguments={"query": "vegetarian recipes"}, result="3 results",
    )
    return [*events[:3], tool, *events[3:]]


def patterns_of(projection: PartitionedMemories, user: str, *, inactive: bool = False
                ) -> dict[str, MemoryRecord]:
    return {
        r.content: r
        for r in projection.list_memories(user, include_inactive=inactive)
        if r.memory_type == "pattern"
    }


def wait_for_pattern(projection: PartitionedMemories, user: str, content: str) -> MemoryRecord:
    found = wait_for(
        lambda: patterns_of(projection, user),
        f"the pattern {content!r}",
        120,
        until=lambda seen: content in seen,
        interval_s=0.5,
    )
    return found[content]


def test_repeated_requests_and_tools_become_patterns_that_survive_a_restart(
    settings_factory, tmp_path: Path
) -> None:
    settings: Settings = settings_factory(web_port=free_port())
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    with WorkerProcess(settings, log_path=tmp_path / "worker.log") as worker:
        asyncio.run(publish_events(settings, [e for n in range(2) for e in session("pat", n)]))
        # Two sessions: nothing recurs yet (and another user's sessions count for nobody else).
        asyncio.run(publish_events(settings, session("ray", 0)))
        wait_for(lambda: {r.session_id for r in projection.list_memories("pat")}, "two sessions",
                 120, until=lambda seen: seen >= {"s0", "s1"}, interval_s=0.5)
        assert patterns_of(projection, "pat") == {}

        asyncio.run(publish_events(settings, session("pat", 2)))
        tool = wait_for_pattern(projection, "pat", "uses the tool web_search (3 sessions)")
        evidence = json.loads(tool.context)
        assert evidence["sessions"] == ["s0", "s1", "s2"] and evidence["session_count"] == 3
        assert list(tool.source_event_ids) == evidence["event_ids"] == [
            "pat/s0/tool", "pat/s1/tool", "pat/s2/tool"]
        learned = {
            "uses the tool web_search (3 sessions)",
            "usually asks about vegetarian (3 sessions)",
            "usually asks about recipe (3 sessions)",
            "usually asks about dinner (3 sessions)",
            "active mostly 08:00-10:00 UTC (3 sessions)",
            "most sessions on Mondays (3 sessions)",
        }
        wait_for(lambda: set(patterns_of(projection, "pat")), "six patterns", 60,
                 until=lambda seen: seen >= learned, interval_s=0.5)
        assert set(patterns_of(projection, "pat")) == learned
        assert patterns_of(projection, "ray") == {}

        asyncio.run(publish_events(settings, session("pat", 3)))
        newer = wait_for_pattern(projection, "pat", "uses the tool web_search (4 sessions)")
        old = wait_for(lambda: projection.get("pat", tool.memory_id), "the old version ended",
                       60, until=lambda found: found is not None and found.status != "active",
                       interval_s=0.5)
        assert old.status == "superseded"
        assert old.superseded_by == newer.memory_id
        wait_for(lambda: set(patterns_of(projection, "pat")), "six patterns at 4 sessions", 60,
                 until=lambda seen: seen == {c.replace("(3", "(4") for c in learned},
                 interval_s=0.5)
        assert worker.stop() == 0

    # A new worker knows nothing in memory: its counts come from the log.
    with WorkerProcess(settings, log_path=tmp_path / "worker2.log") as worker:
        asyncio.run(publish_events(settings, session("pat", 4)))
        fifth = wait_for_pattern(projection, "pat", "uses the tool web_search (5 sessions)")
        assert json.loads(fifth.context)["sessions"] == ["s0", "s1", "s2", "s3", "s4"]
        wait_until_projected(settings, projection)
        assert worker.stop() == 0
    everything = patterns_of(projection, "pat", inactive=True)
    assert sum(c.startswith("uses the tool web_search") for c in everything) == 3

    # Replay: a table rebuilt from the log holds the same patterns (now, and as they stood
    # after the fourth session), and the same rows as the live one.
    moments = [None, MONDAY + timedelta(weeks=3, days=1)]
    now = datetime(2026, 6, 1, tzinfo=UTC)
    live = [learned_patterns(projection, "pat", settings, as_of=at, now=now) for at in moments]
    assert [len(found["patterns"]) for found in live] == [6, 6]
    assert {p["session_count"] for p in live[1]["patterns"]} == {4}
    rebuilt, _, _ = asyncio.run(rebuild_memories(settings, shadow_name("memories-patterns")))
    try:
        assert [learned_patterns(rebuilt, "pat", settings, as_of=at, now=now)
                for at in moments] == live
        assert memories_fingerprint(rebuilt) == memories_fingerprint(projection)
    finally:
        rebuilt.drop()
