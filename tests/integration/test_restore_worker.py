"""A worker on a restored broker carries on as after a crash, on the real broker.

The embedded broker keeps its log in memory: a restart loses the topics, the sessions
changelog and the consumer group's offsets. The archive keeps all three; after ``restore``
into a fresh broker, a worker with the same data directory must neither consolidate nor
extract the old transcripts again, and must hold the open sessions it held before.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition
from aiokafka.partitioner import DefaultPartitioner
from chat import conversation
from harness import open_sessions as open_sessions_of
from harness import wait_for

from memstream.models.codec import decode_event
from memstream.models.events.chat import MessageAdded
from memstream.models.events.consolidation import ConsolidationRequested
from memstream.models.events.envelope import Event
from memstream.models.session import session_key
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import PartitionedMemories
from memstream.streams.archive import (
    archive_positions,
    archived_topics,
    live_archive_dir,
    read_group_offsets,
    restore,
    worker_group_id,
)
from memstream.streams.kafka.broker import EmbeddedBroker, free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.progress import committed_offsets, group_caught_up
from memstream.streams.kafka.tansu import true_end_offsets
from memstream.streams.kafka.topics import Topics
from memstream.streams.operations.rebuild_sessions import sessions_changelog_topic
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess

SettingsFactory = Callable[..., Settings]
Position = tuple[str, int]

#: The open session's user shares a partition with ``SAME``, and ``OTHER`` is on the other
#: one: an extraction agent that read the consolidation topic from offset 0 again would
#: extract SAME's span again before it reaches the open session's, so the test can tell.
OPEN, SAME, OTHER = "ann", "bob", "gus"
TRIP = [
    ("user", "I'm planning a trip to Lisbon in March."),
    ("assistant", "Lovely. What do you enjoy?"),
    ("user", "I love seafood and I prefer walking tours over bus tours."),
]
WORK = [
    ("user", "I live in Berlin and I work at Siemens as a data engineer."),
    ("assistant", "Nice. How can I help?"),
    ("user", "I prefer type hints everywhere and small functions."),
]
OPEN_TURNS = [
    ("user", "My budget is about 1500 euros and my sister Clara is joining."),
    ("assistant", "Great, that opens up Chiado."),
    ("user", "I hate early flights, never book anything before 9am."),
]


def log_ends(settings: Settings) -> dict[Position, int]:
    """The end of every partition of every archived topic (the changelog included)."""
    tps = [
        TopicPartition(topic, p)
        for topic in archived_topics(settings)
        for p in range(settings.partitions)
    ]
    ends = asyncio.run(true_end_offsets(settings.broker, tps))
    return {(tp.topic, tp.partition): end for tp, end in ends.items()}


def events_since(settings: Settings, topic: str, ends: dict[Position, int]) -> list[Event]:
    """The events of ``topic`` at or after ``ends`` (per partition), in log order."""
    return [
        decode_event(r.value)
        for r in asyncio.run(read_topic(settings, topic))
        if r.offset >= ends.get((r.topic, r.partition), 0)
    ]


def open_sessions(settings: Settings) -> dict[str, Any]:
    return open_sessions_of(settings, (OPEN, SAME, OTHER))


def archive_is_complete(settings: Settings) -> bool:
    """The archive holds every record, and the group's offsets at the end of what its
    agents read (everything was processed before the snapshot)."""
    ends = log_ends(settings)
    archived = archive_positions(live_archive_dir(settings))
    snapshot = read_group_offsets(live_archive_dir(settings), worker_group_id(settings))
    topics = Topics.from_settings(settings)
    consumed = {
        key: end for key, end in ends.items() if key[0] in (topics.chat, topics.consolidation)
    }
    return (
        all(archived.get(key, 0) == end for key, end in ends.items())
        and snapshot is not None
        and all(snapshot.offsets.get(key, 0) == end for key, end in consumed.items())
    )


def test_the_archive_names_the_changelog_and_group_as_the_worker_does(
    settings_factory: SettingsFactory,
) -> None:
    settings = settings_factory(app_id="w1")
    assert archived_topics(settings)[-1] == sessions_changelog_topic(settings)
    assert worker_group_id(settings) == f"{settings.topic_prefix}.w1"


def test_a_worker_on_a_restored_broker_carries_on_from_its_committed_offsets(
    settings_factory: SettingsFactory, tmp_path: Path
) -> None:
    settings = settings_factory(web_port=free_port(), partitions=2, archive_flush_s=0.5)
    topics = Topics.from_settings(settings)
    partition = DefaultPartitioner()
    assert (
        partition(OPEN.encode(), [0, 1], [0, 1])
        == partition(SAME.encode(), [0, 1], [0, 1])
        != partition(OTHER.encode(), [0, 1], [0, 1])
    ), "the users no longer fall on the partitions this test relies on"
    left_open = conversation(OPEN, "open", OPEN_TURNS, close=False)
    closing = conversation(OPEN, "open", OPEN_TURNS)[-1:]
    closed_keys = {(SAME, "trip"), (OTHER, "work")}
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))

    def memories_of(keys: set[tuple[str, str]]) -> bool:
        return all(
            any(m.session_id == session for m in projection.list_memories(user))
            for user, session in keys
        )

    with WorkerProcess(settings, log_path=tmp_path / "worker-a.log"):
        asyncio.run(
            publish_events(
                settings,
                conversation(SAME, "trip", TRIP) + left_open + conversation(OTHER, "work", WORK),
            )
        )
        wait_for(lambda: memories_of(closed_keys), "the closed sessions' memories")
        wait_for(lambda: archive_is_complete(settings), "the archive to hold everything")
        sessions_before = open_sessions(settings)
    assert list(sessions_before) == [session_key(OPEN, "open")]
    assert sessions_before[session_key(OPEN, "open")]["message_count"] == len(OPEN_TURNS)
    ends_before = log_ends(settings)
    # The sessions changelog has records, so the archive holds it too.
    assert sum(e for (t, _), e in ends_before.items() if t == archived_topics(settings)[-1])

    def memory_rows(user: str) -> set[tuple[str, str, str]]:
        return {(m.memory_id, m.content, m.status) for m in projection.list_memories(user)}

    rows_before = {user: memory_rows(user) for user in (SAME, OTHER)}
    snapshot = read_group_offsets(live_archive_dir(settings), worker_group_id(settings))
    assert snapshot is not None

    with EmbeddedBroker(free_port(), log_dir=tmp_path / "broker-b") as fresh:
        # Broker B is always the embedded one, whatever broker A is (CI runs Kafka).
        restored = settings.model_copy(update={"broker": fresh.address, "broker_kind": "tansu"})
        report = asyncio.run(restore(restored, live_archive_dir(settings)))

        assert report.gaps == ()
        assert log_ends(restored) == ends_before
        assert report.group_offsets == snapshot.offsets
        assert report.group_offsets_lowered == {}
        assert f"consumer group {worker_group_id(settings)!r}" in report.summary()
        # A later consumer of the group sees the offsets (the Faust worker is one).
        assert asyncio.run(committed_offsets(restored, list(ends_before))) == snapshot.offsets

        with WorkerProcess(restored, log_path=tmp_path / "worker-b.log"):
            # The session table is back from the restored changelog...
            wait_for(
                lambda: open_sessions(restored) == sessions_before, "the open session's state"
            )
            assert log_ends(restored) == ends_before  # ...and recovering wrote nothing.

            asyncio.run(publish_events(restored, closing))
            wait_for(lambda: memories_of({(OPEN, "open")}), "the open session's memories")
            # The closing is the marker: once the group has committed it and what it led
            # to, whatever the restored worker consolidated again is in the log as well.
            wait_for(lambda: group_caught_up(restored, [topics.chat, topics.consolidation]),
                     "the restored worker to commit the whole log")
            new_requests = events_since(restored, topics.consolidation, ends_before)
            new_memory_events = events_since(restored, topics.memories, ends_before)
            wait_for(
                lambda: all(
                    archive_positions(live_archive_dir(restored)).get(key, 0) >= end
                    for key, end in log_ends(restored).items()
                ),
                "the archive to continue on the restored log",
            )
            assert open_sessions(restored) == {}

    # Closing the open session consolidated its messages exactly once...
    assert len(new_requests) == 1
    (request,) = new_requests
    assert isinstance(request, ConsolidationRequested)
    assert (request.user_id, request.session_id) == (OPEN, "open")
    sent = [e.event_id for e in left_open if isinstance(e, MessageAdded)]
    assert [m.event_id for m in request.messages] == sent
    # ...and the only new memory events came from it: no old span was extracted again,
    # although OPEN's span came after SAME's in their shared consolidation partition.
    assert new_memory_events
    assert {(e.user_id, e.session_id) for e in new_memory_events} == {(OPEN, "open")}
    assert Counter(type(e).__name__ for e in new_memory_events)["ExtractionRecorded"] == 1
    assert {user: memory_rows(user) for user in (SAME, OTHER)} == rows_before
    worker_b_log = (tmp_path / "worker-b.log").read_text(errors="replace")
    assert "lost its log" not in worker_b_log and "log was replaced" not in worker_b_log
