"""Erasure on the real broker, LanceDB, archive and session tables: after `memstream erase`,
no store holds the user's distinctive strings, and a replay brings nothing back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pyarrow.parquet as pq
import pytest
from aiokafka.errors import KafkaConnectionError
from chat import conversation
from harness import archive_caught_up, cli, publish_unchecked, wait_for

from memstream.models.events.chat import MessageAdded
from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import PartitionedMemories
from memstream.streams.archive import archived_topics
from memstream.streams.client import MemoryClient
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.keys.store import keystore_from_settings
from memstream.streams.operations import erasure
from memstream.streams.operations.rebuild_sessions import fold_chat_topic, live_sessions
from memstream.streams.operations.replay import rebuild_memories
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess

SettingsFactory = Callable[..., Settings]
MARKERS = ("Quokkaville", "Zanzibar-7731", "Marguerite Okonkwo-Lindqvist")
ZED = [
    ("user", "I live in Quokkaville and my locker code is Zanzibar-7731."),
    ("assistant", "Noted."),
    ("user", "My sister is called Marguerite Okonkwo-Lindqvist and I prefer tea."),
    ("assistant", "Lovely."),
]
AMY = [("user", "I live in Lisbon and I prefer walking tours."), ("assistant", "Noted.")]


def marker_hits(blob: bytes) -> list[str]:
    return [m for m in MARKERS if m.encode() in blob]


def files_with_markers(directory: Path) -> Iterator[tuple[Path, list[str]]]:
    """Every file under ``directory`` holding a marker: raw bytes, and Parquet read back
    (its pages are compressed, so raw bytes would not show a string)."""
    for path in directory.rglob("*"):
        if not path.is_file():
            continue
        hits = marker_hits(path.read_bytes())
        if path.suffix == ".parquet":
            text = repr(pq.read_table(path).to_pylist()).encode()
            hits = sorted(set(hits) | set(marker_hits(text)))
        if hits:
            yield path, hits


def topics_with_markers(settings: Settings) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for topic in archived_topics(settings):
        blob = b"".join((r.key or b"") + (r.value or b"") for r in asyncio.run(read_topic(settings, topic)))
        if marker_hits(blob):
            found[topic] = marker_hits(blob)
    return found


def test_erasure_leaves_no_trace_of_the_user_in_any_store(
    settings_factory: SettingsFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = settings_factory(web_port=free_port(), max_content_chars=400)
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    oversized = MessageAdded(
        event_id="zed/open/too-long", user_id="zed", session_id="open",
        occurred_at=conversation("zed", "open", [])[0].occurred_at,
        role="user", content=("Quokkaville " * 50),
    )
    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        asyncio.run(publish_events(settings, conversation("zed", "trip", ZED)))
        asyncio.run(publish_events(settings, conversation("amy", "trip", AMY)))
        # An open session (short-term memory) and a dead letter, both holding zed's strings.
        # publish_events refuses the oversized one: sent as another producer would.
        asyncio.run(publish_unchecked(settings, [*conversation("zed", "open", ZED[:1], close=False), oversized]))
        wait_for(lambda: projection.list_memories("zed") and projection.list_memories("amy"), "memories")
        with MemoryClient(settings) as client:
            assert client.search("where do I live? Quokkaville?", user_id="zed")
        wait_for(lambda: any(m.access_count for m in projection.list_memories("zed")), "the access")
        # A replay shadow and a session snapshot: more copies the erasure must find.
        assert cli(settings, monkeypatch, "replay", "--projection", "memories", "--no-swap") == 0
        assert cli(settings, monkeypatch, "replay", "--projection", "sessions") == 0
        wait_for(lambda: archive_caught_up(settings), "the archive to hold the whole log")
        capsys.readouterr()
        before = dict(files_with_markers(settings.data_dir))
        # The search can see a marker where one is: LanceDB keeps contents readable.
        assert any("lancedb" in str(path) for path in before), before
        assert topics_with_markers(settings) == {}  # sealed on the way into the log

        # The broker fails between the key's destruction and the erasure event: the user is
        # told the projections still hold the rows and that running the erasure again ends it.
        publish = erasure.publish_erasure

        async def broker_gone(*args: object, **kwargs: object) -> NoReturn:
            raise KafkaConnectionError("Unable to bootstrap from the broker")

        monkeypatch.setattr(erasure, "publish_erasure", broker_gone)
        assert cli(settings, monkeypatch, "erase", "--user", "zed") == 1
        said = capsys.readouterr().err
        assert "still hold the user's rows" in said and "run the erasure again" in said, said
        assert "Traceback" not in said
        assert projection.list_memories("zed")
        monkeypatch.setattr(erasure, "publish_erasure", publish)

        assert cli(settings, monkeypatch, "erase", "--user", "zed") == 0
        receipt = capsys.readouterr().out
        assert "keys destroyed" in receipt and "archive records blanked" in receipt
        assert "sessions (tombstoned by the session agent)" in receipt
        sessions = asyncio.run(live_sessions(settings))
        assert not any(getattr(v, "user_id", None) == "zed" for v in sessions.values())
        assert projection.list_memories("zed", include_inactive=True) == []
        assert projection.list_memories("amy")
        wait_for(lambda: archive_caught_up(settings), "the archive to hold the erasure events")

    assert dict(files_with_markers(settings.data_dir)) == {}
    assert topics_with_markers(settings) == {}
    assert keystore_from_settings(settings).key_for("zed", create=False) is None
    # A replay after the erasure resurrects nothing.
    rebuilt, _, _ = asyncio.run(rebuild_memories(settings, "memories-after-erasure"))
    assert rebuilt.list_memories("zed", include_inactive=True) == []
    assert rebuilt.list_memories("amy")
    folded = asyncio.run(fold_chat_topic(settings))
    assert not any(getattr(v, "user_id", None) == "zed" for v in folded.values())
    assert dict(files_with_markers(settings.data_dir)) == {}
