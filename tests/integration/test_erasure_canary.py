"""The canary test of erasure: a user whose every field of content holds its own canary
string, run through the whole system (worker, consolidation, decisions with a supersession,
a deletion, retrievals, a dead letter, replay shadows, a session snapshot), then erased.

Afterwards no file under the data directory and no record of any topic may hold a canary in
clear (the topics may hold them only as ciphertext under the destroyed key), a replay of
every projection brings none back, no analytics view or report scoped to the user shows
one, the user's memory history is empty, and each number of the erasure receipt equals a
count taken independently before the erasure.
"""

from __future__ import annotations

import asyncio
import json
import re
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from chat import conversation
from harness import archive_caught_up, cli, publish_unchecked, wait_for

from memstream.models.codec import InvalidEvent, decode_event
from memstream.models.events.chat import (
    EntityMentioned,
    MessageAdded,
    ScratchpadUpdated,
    SessionStarted,
    TaskProgress,
    TaskSet,
    ToolCalled,
)
from memstream.models.events.envelope import Event
from memstream.models.events.memory import MemoryDeleted, MemorySuperseded
from memstream.models.settings import Settings
from memstream.projections.analytics import REPORTS, VIEWS, Scope, run_report, run_sql
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import PartitionedMemories
from memstream.streams.archive import (
    archive_directories,
    archive_files,
    archived_topics,
    live_archive_dir,
)
from memstream.streams.client import MemoryClient
from memstream.streams.kafka.broker import free_port
from memstream.streams.kafka.logreader import read_topic
from memstream.streams.kafka.topics import Topics
from memstream.streams.keys.store import key_prefix
from memstream.streams.operations.rebuild_sessions import fold_chat_topic
from memstream.streams.projector.memories import live_table
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess

SettingsFactory = Callable[..., Settings]
USER = "canary-user"
OTHER = "amy"
START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
#: Every canary is ``Zqcanary<field>7``: the field names where a leak came from; the digit
#: keeps a stemmer (the full-text index) from cutting the word.
_CANARY = re.compile(rb"zqcanary([a-z]+)7")


def canary(field: str) -> str:
    return f"Zqcanary{field}7"


def canaries_in(blob: bytes) -> set[str]:
    """The canary fields in ``blob``, matched case-insensitively (indexes lower-case)."""
    return {match.decode() for match in _CANARY.findall(blob.lower())}


# --- the user's life ------------------------------------------------------------------------


def _first_session() -> list[Event]:
    """Messages, a tool call, a task and its progress, the scratchpad, an entity: each with
    a canary; "I live in ..." and "My ... number is" become facts the second session
    supersedes."""
    events = conversation(
        USER, "trip",
        [
            ("user", f"I live in {canary('home')}."),
            ("assistant", f"Noted, {canary('reply')} is lovely."),
            ("user", f"I prefer {canary('pref')} tea over coffee."),
            ("user", f"My {canary('slot')} colour is blue."),
        ],
        start=START, close=False,
    )
    at = START + timedelta(minutes=10)
    common = {"user_id": USER, "session_id": "trip"}
    events += [
        ToolCalled(event_id="cu/trip/tool", occurred_at=at, name="lookup",
                   arguments={"query": canary("toolarg")}, result={"found": canary("toolresult")}, **common),
        TaskSet(event_id="cu/trip/task", occurred_at=at + timedelta(seconds=1), task=f"Plan {canary('task')}", **common),
        TaskProgress(event_id="cu/trip/progress", occurred_at=at + timedelta(seconds=2),
                     progress=f"Booked {canary('progress')}", **common),
        ScratchpadUpdated(event_id="cu/trip/pad", occurred_at=at + timedelta(seconds=3),
                          content=f"Remember {canary('scratchpad')}", **common),
        EntityMentioned(event_id="cu/trip/entity", occurred_at=at + timedelta(seconds=4),
                        name=canary("entity"), kind="place", **common),
    ]
    events += conversation(USER, "trip", [], start=START, first=20)[1:]  # the close
    return events


def _second_session() -> list[Event]:
    """A move (supersedes where the user lives), a new value of a slot named by a canary
    (supersedes it too) and a correction, each with a canary."""
    return conversation(
        USER, "move",
        [
            ("user", f"I moved to {canary('moved')}."),
            ("user", f"My {canary('slot')} colour is bright orange."),
            ("assistant", f"Congratulations on {canary('congrats')}."),
            ("user", f"Actually, my locker code is {canary('correction')}."),
        ],
        start=START + timedelta(days=7),
    )


def _open_session(settings: Settings) -> list[Event]:
    """A session left open (short-term memory) and a message too long to take (a dead
    letter of the user's bytes)."""
    opened = START + timedelta(days=8)
    return [
        SessionStarted(event_id="cu/open/start", user_id=USER, session_id="open", occurred_at=opened),
        MessageAdded(event_id="cu/open/m0", user_id=USER, session_id="open",
                     occurred_at=opened + timedelta(minutes=1), role="user",
                     content=f"Still thinking about {canary('open')}."),
        MessageAdded(event_id="cu/open/too-long", user_id=USER, session_id="open",
                     occurred_at=opened + timedelta(minutes=2), role="user",
                     content=f"{canary('oversized')} " * (settings.max_content_chars // 10)),
    ]


# --- where to look --------------------------------------------------------------------------


def _values(value: Any) -> Iterator[bytes]:
    """Every string and byte string in a decoded value, zlib-compressed bytes opened too (the
    sessions table compresses its values)."""
    if isinstance(value, bytes):
        yield value
        try:
            yield zlib.decompress(value)
        except zlib.error:
            pass
    elif isinstance(value, str):
        yield value.encode("utf-8", "surrogatepass")
    elif isinstance(value, dict):
        for item in value.values():
            yield from _values(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _values(item)


def _table_canaries(table: pa.Table) -> set[str]:
    found: set[str] = set()
    for name in table.column_names:
        if pa.types.is_fixed_size_list(table.schema.field(name).type):
            continue  # vectors: numbers only
        for blob in _values(table.column(name).to_pylist()):
            found |= canaries_in(blob)
    return found


def _zstd_frames(blob: bytes) -> Iterator[bytes]:
    """The decompressed content of every zstd frame in ``blob`` that states its size (the
    frame format of RFC 8878: header, blocks, optional checksum)."""
    codec = pa.Codec("zstd")
    start = blob.find(b"\x28\xb5\x2f\xfd")
    while start >= 0:
        try:
            descriptor = blob[start + 4]
            fcs_flag, single, checksum, dict_flag = descriptor >> 6, descriptor >> 5 & 1, descriptor >> 2 & 1, descriptor & 3
            at = start + 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
            fcs_bytes = (1 if single else 0, 2, 4, 8)[fcs_flag]
            size = int.from_bytes(blob[at : at + fcs_bytes], "little") + (256 if fcs_bytes == 2 else 0)
            at += fcs_bytes
            while True:
                header = int.from_bytes(blob[at : at + 3], "little")
                last, kind, block = header & 1, header >> 1 & 3, header >> 3
                at += 3 + (1 if kind == 1 else block)
                if last or at >= len(blob):
                    break
            at += 4 * checksum
            if fcs_bytes:
                yield codec.decompress(blob[start:at], decompressed_size=size, asbytes=True)
        except (IndexError, ValueError, OSError, pa.ArrowException):
            pass
        start = blob.find(b"\x28\xb5\x2f\xfd", start + 4)


def files_with_canaries(directory: Path) -> dict[str, set[str]]:
    """Every file under ``directory`` holding a canary, by path: its bytes, the zstd frames
    in them, Parquet files decoded (their pages are compressed), and every version of every
    LanceDB table read through LanceDB."""
    found: dict[str, set[str]] = {}
    for path in sorted(directory.rglob("*")):
        if not path.is_file():
            continue
        blob = path.read_bytes()
        hits = canaries_in(blob)
        for frame in _zstd_frames(blob):
            hits |= canaries_in(frame)
        if path.suffix == ".parquet":
            hits |= _table_canaries(pq.read_table(path))
        if hits:
            found[str(path.relative_to(directory))] = hits
    lance_dir = directory / "lancedb"
    if lance_dir.is_dir():
        db = lancedb.connect(lance_dir)
        for name in db.list_tables().tables:
            table = db.open_table(name)
            for version in table.list_versions():
                table.checkout(version["version"])
                hits = _table_canaries(table.to_arrow())
                if hits:
                    found[f"lancedb table {name} version {version['version']}"] = hits
    return found


def _paths_with_canaries(value: Any, path: str = "$") -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths_with_canaries(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths_with_canaries(item, f"{path}[{i}]")
    elif isinstance(value, str) and canaries_in(value.encode("utf-8", "surrogatepass")):
        yield f"{path}={value!r}"


def records_with_canaries(settings: Settings) -> list[str]:
    """Every record of every topic holding a canary in clear: topic, offset, event type and
    the field (JSON path) that holds it."""
    found = []
    for topic in archived_topics(settings):
        for record in asyncio.run(read_topic(settings, topic)):
            blob = (record.key or b"") + (record.value or b"")
            blob += b"".join(value or b"" for _, value in record.headers or ())
            if not canaries_in(blob):
                continue
            try:
                document = json.loads(record.value or b"")
            except ValueError:
                document = None
            fields = list(_paths_with_canaries(document)) or ["(not JSON: raw bytes)"]
            kind = document.get("type") if isinstance(document, dict) else None
            found.append(f"{topic}[{record.partition}]@{record.offset} {kind}: {'; '.join(fields)}")
    return found


def analytics_canaries(settings: Settings, user_id: str) -> dict[str, set[str]]:
    """Canaries in any view or report scoped to ``user_id``."""
    found: dict[str, set[str]] = {}
    scope = Scope(user_id=user_id)
    for view in VIEWS:
        hits = _table_canaries(run_sql(settings, f"SELECT * FROM {view.name}", scope))
        if hits:
            found[f"view {view.name}"] = hits
    for name in REPORTS:
        hits = _table_canaries(run_report(settings, name, scope).table)
        if hits:
            found[f"report {name}"] = hits
    return found


# --- independent counts ---------------------------------------------------------------------


def archive_records_of(directory: Path, settings: Settings, user_id: str) -> tuple[int, int]:
    """The user's readable records in one archive directory, and the files holding them:
    keyed by the user (every topic, dead letters included), naming the user, or a
    sessions-changelog key of the user."""
    changelog = archived_topics(settings)[-1]
    raw = user_id.encode()
    prefixes = [json.dumps(user_id + "\x1f")[:-1].encode(), b'"' + raw + b"\x1f"]
    records = files = 0
    for file in archive_files(directory):
        table = pq.read_table(file.path, columns=["key", "user_id"])
        keys = table.column("key").to_pylist()
        users = table.column("user_id").to_pylist()
        held = 0
        for key, user in zip(keys, users, strict=True):
            in_changelog = file.topic == changelog and key is not None
            if key == raw or user == user_id or (in_changelog and any(key.startswith(p) for p in prefixes)):
                held += 1
        records += held
        files += bool(held)
    return records, files


def independent_counts(settings: Settings, shadow_table: str) -> dict[str, int]:
    """What each store holds of the user, counted by other code than the erasure's."""
    scope = Scope(user_id=USER)
    live_rows = run_sql(settings, "SELECT count(*) AS n FROM memories", scope).column("n")[0].as_py()
    shadow = lancedb.connect(settings.lancedb_dir).open_table(shadow_table).to_arrow()
    shadow_rows = int(pc.sum(pc.equal(shadow.column("user_id"), USER)).as_py() or 0)
    sessions = sum(getattr(v, "user_id", None) == USER for v in asyncio.run(fold_chat_topic(settings)).values())
    snapshot_rows = 0
    for path in (settings.data_dir / "sessions").rglob("*.parquet"):
        snapshot_rows += pq.read_table(path, columns=["user_id"]).column("user_id").to_pylist().count(USER)
    counts = {
        "keys destroyed": len(list(settings.keys_dir.glob(f"{key_prefix(USER)}-*"))),
        "erasure events published": 2,
        f"memory rows ({live_table(settings)}, by the projector)": live_rows,
        f"memory rows ({shadow_table})": shadow_rows,
        "sessions (tombstoned by the session agent)": sessions,
        "session snapshot rows": snapshot_rows,
    }
    for directory in archive_directories(settings):
        records, files = archive_records_of(directory, settings, USER)
        counts[f"archive records blanked ({directory.name})"] = records
        counts[f"archive files rewritten ({directory.name})"] = files
    return counts


def parse_receipt(text: str) -> dict[str, int]:
    """The counts of a printed receipt."""
    counts = {}
    for line in text.splitlines()[1:]:
        match = re.fullmatch(r"  (?!note: )(.+?)\s{2,}(-?\d+)", line)
        if match:
            counts[match.group(1).strip()] = int(match.group(2))
    return counts


# --- the test -------------------------------------------------------------------------------


def test_no_canary_survives_an_erasure_anywhere(
    settings_factory: SettingsFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = settings_factory(web_port=free_port(), max_content_chars=400)
    topics = Topics.from_settings(settings)
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))

    def mine(include_inactive: bool = True) -> list[Any]:
        return projection.list_memories(USER, include_inactive=include_inactive)

    def memory_events(kind: type[Event]) -> list[Event]:
        found = []
        for record in asyncio.run(read_topic(settings, topics.memories)):
            try:
                event = decode_event(record.value or b"")
            except InvalidEvent:
                continue
            if isinstance(event, kind) and event.user_id == USER:
                found.append(event)
        return found

    with WorkerProcess(settings, log_path=tmp_path / "worker.log"):
        asyncio.run(publish_events(settings, _first_session()))
        asyncio.run(publish_events(
            settings, conversation(OTHER, "trip", [("user", "I live in Lisbon."), ("assistant", "Noted.")])
        ))
        wait_for(lambda: any("lives in" in m.content for m in mine()), "the first session's memories")
        # Published once the first memories exist, so the decision sees "lives in" and
        # supersedes it.
        asyncio.run(publish_events(settings, _second_session()))
        wait_for(lambda: sum(m.status == "superseded" for m in mine()) >= 2, "the supersessions")
        # It holds a message over the content limit: a dead letter (publish_events refuses it).
        asyncio.run(publish_unchecked(settings, _open_session(settings)))
        with MemoryClient(settings) as client:
            assert client.search(f"where is {canary('query')}? where do I live?", user_id=USER)
            wait_for(lambda: any(m.access_count for m in mine()), "the retrieval")
            doomed = next(m for m in mine(False) if m.memory_type == "preference")
            client.delete(doomed.memory_id, user_id=USER)
            wait_for(lambda: any(m.status == "deleted" for m in mine()), "the deletion")
            memory_ids = [m.memory_id for m in mine()]
            assert all(client.history(mid, user_id=USER) for mid in memory_ids)
        wait_for(lambda: memory_events(MemorySuperseded) and memory_events(MemoryDeleted), "the changes")
        wait_for(lambda: asyncio.run(read_topic(settings, topics.deadletters)), "the dead letter")
        # More copies the erasure must find: a replay shadow of the memories, a session
        # snapshot, a rebuilt archive beside the live one.
        before_tables = set(lancedb.connect(settings.lancedb_dir).list_tables().tables)
        assert cli(settings, monkeypatch, "replay", "--projection", "memories", "--no-swap") == 0
        (shadow_table,) = set(lancedb.connect(settings.lancedb_dir).list_tables().tables) - before_tables
        assert cli(settings, monkeypatch, "replay", "--projection", "sessions") == 0
        wait_for(lambda: archive_caught_up(settings), "the archive to hold the whole log")
        assert cli(settings, monkeypatch, "replay", "--projection", "analytics", "--no-swap") == 0
        capsys.readouterr()

        # The checks can see a canary where one is.
        before = files_with_canaries(settings.data_dir)
        assert any("lancedb" in path for path in before), before
        # The archive holds the user's records, but every free-text field is sealed, so
        # none of its files holds a canary in clear even before the erasure.
        assert archive_records_of(live_archive_dir(settings), settings, USER)[0] > 0
        assert not any("archive" in path for path in before), before
        assert any(path.startswith("sessions") for path in before), before
        expected = independent_counts(settings, shadow_table)
        assert all(expected.values()), expected  # every store holds something of the user

        assert cli(settings, monkeypatch, "erase", "--user", USER) == 0
        receipt = capsys.readouterr().out
        counted = parse_receipt(receipt)
        for name, count in expected.items():
            assert counted.get(name) == count, (name, count, receipt)
        assert projection.list_memories(OTHER)
        wait_for(lambda: archive_caught_up(settings), "the archive to hold the erasure events")

        # (a) No file of the data directory holds a canary.
        assert files_with_canaries(settings.data_dir) == {}
        topic_leaks_after_erasure = records_with_canaries(settings)

        # (b) A replay of every projection brings nothing back; no view or report shows any.
        assert cli(settings, monkeypatch, "replay", "--projection", "all") == 0
        replayed = capsys.readouterr().out
        assert "analytics: identical to the live archive" in replayed, replayed
        assert files_with_canaries(settings.data_dir) == {}
        assert mine() == []
        assert analytics_canaries(settings, USER) == {}
        assert cli(settings, monkeypatch, "sql", "--user", USER, "--format", "json", "SELECT * FROM events") == 0
        events_out = capsys.readouterr().out
        assert canaries_in(events_out.encode()) == set()
        assert '"user_erased"' in events_out  # the erasure itself stays: ids, no content

        # (c) The erased user's history is empty, on the client and the command line.
        with MemoryClient(settings) as client:
            assert [client.history(mid, user_id=USER) for mid in memory_ids] == [[]] * len(memory_ids)
        assert cli(settings, monkeypatch, "memories", "history", memory_ids[0], "--user", USER, "--json") == 0
        assert json.loads(capsys.readouterr().out) == []

        # A returning user starts afresh: new memories with a history, archived readable,
        # and the live archive still equals its rebuild.
        asyncio.run(publish_events(
            settings, conversation(USER, "back", [("user", "I live in Freshtown."), ("assistant", "Welcome back.")],
                                   start=START + timedelta(days=30))
        ))
        back = wait_for(lambda: mine(), "the returning user's memory", until=lambda found: any("Freshtown" in m.content for m in found))
        with MemoryClient(settings) as client:
            assert all(client.history(m.memory_id, user_id=USER) for m in back)
        wait_for(lambda: archive_caught_up(settings), "the archive to hold the returning user")
        assert archive_records_of(live_archive_dir(settings), settings, USER)[0] > 0
        assert cli(settings, monkeypatch, "verify", "--projection", "analytics") == 0

    topic_leaks_after_replay = records_with_canaries(settings)
    # The topics may hold the canaries only as ciphertext under the destroyed key. Checked
    # last, so a leak here does not hide the checks above.
    leaks = topic_leaks_after_erasure + topic_leaks_after_replay
    assert leaks == [], "canaries in clear in the log:\n" + "\n".join(leaks) + "\n" + receipt
