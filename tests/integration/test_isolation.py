"""Tenant isolation: 100 hostile strings thrown at ids, filters and queries on every read
path (client, CLI, the worker's session pages, analytics) find nothing of other users and
raise no error that shows their data; the worker's pages give nothing without its token."""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from chat import conversation
from harness import open_sessions, wait_for

from memstream.models.settings import Settings
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import PartitionedMemories, SearchFilters
from memstream.streams.cli import main
from memstream.streams.client import MemoryClient
from memstream.streams.kafka.broker import free_port
from memstream.streams.service.chat_events import publish_events
from memstream.streams.worker.process import WorkerProcess, fetch_json

SettingsFactory = Callable[..., Settings]
VICTIMS = {
    "ann": [("user", "I live in Reykjavik and my bank PIN is 4417."), ("assistant", "Noted.")],
    "bob": [("user", "I work at Initech and my badge code is BX-99."), ("assistant", "Noted.")],
}
SECRETS = ("Reykjavik", "4417", "Initech", "BX-99")
TOKEN = "iso-token-5f0c2b7e9d41a8c3"


def hostile_strings() -> list[str]:
    """100 ids an attacker (or a careless caller) might send."""
    ann_digest = hashlib.sha256(b"ann").hexdigest()
    base = [
        "'", '"', "`", "' OR '1'='1", '" OR "1"="1', "ann' --", "ann'; DROP TABLE memories; --",
        "') OR 1=1 --", "1; DELETE FROM memories", "' UNION SELECT * FROM memories --",
        "%", "_", "*", "ann%", "a_n", "%ann%", "[a-z]*", ".*", "ann|bob", "ann OR bob",
        "user_key IS NOT NULL", "user_key = user_key", "1=1", "true", "NULL", "None", "null",
        "\\", "\\'", "\\\\", "ann\\", "../../etc/passwd", "..\\..\\windows", "/", "./ann",
        "ann/../bob", "~", "$HOME", "${user}", "{{user}}", "%s", "%d%n", "{0}", "<script>",
        "аnn",  # Cyrillic а
        "ａｎｎ",  # fullwidth
        "ann\u200b", "\u200bann", "ANN", "Ann", " ann", "ann ", "ann\u0301", "\u202eann",
        "ann\u00a0", "ⓐⓝⓝ", "𝐚𝐧𝐧", "bob\ufeff", "b\u00f6b", "bób", "🙂", "👩‍💻",
        ann_digest, ann_digest.upper(), "sha256:" + ann_digest, "user_key", "memory_key",
        '{"$ne": null}', '{"user_id": "ann"}', "[\"ann\"]", "ann,bob", "ann;bob", "ann\tbob",
        "ann\nbob", "ann\rbob", "a" * 256, "a" * 257, "ann" * 1000, "x" * 10_000, "",
        " ", "\x00", "ann\x00", "\x1f", "ann\x1fbob", "\x7f", "\ud800", "ann\udfff",
        "SELECT", "memories", "*/", "/*", "--", "#", "$1", "?", ":user",
        "' AND 1=(SELECT COUNT(*) FROM memories) --", "'||(SELECT content FROM memories)||'",
        "ann' AND session_key IS NOT NULL --", "0x616e6e", "%61%6e%6e", "&#97;nn",
    ]
    assert len(base) >= 100, len(base)
    return base[:100]


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def attempt(call: Callable[[], Any]) -> tuple[Any, str | None]:
    """Run a read; return (result, None), or (None, the error's text) for a refused id."""
    try:
        return call(), None
    except (ValueError, TypeError, UnicodeError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, broker_address: str, broker_kind: str) -> Any:
    tmp = tmp_path_factory.mktemp("isolation")
    settings = Settings(
        broker=broker_address, broker_kind=broker_kind, data_dir=tmp / "data",  # type: ignore[arg-type]
        topic_prefix=f"iso{int(time.time() * 1000) % 10**9}", partitions=4,
        web_port=free_port(), session_timeout_s=10.0, heartbeat_interval_s=2.0,
        web_token=TOKEN,
    )
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    worker = WorkerProcess(settings, log_path=tmp / "worker.log").start()
    for user, turns in VICTIMS.items():
        asyncio.run(publish_events(settings, conversation(user, "trip", turns)))
        asyncio.run(publish_events(settings, conversation(user, "open", turns[:1], close=False)))
    wait_for(lambda: all(projection.list_memories(u) for u in VICTIMS), "the victims' memories", 90)
    wait_for(
        lambda: len(open_sessions(settings, VICTIMS)) >= len(VICTIMS), "the victims' open sessions", 60
    )
    yield settings, projection
    worker.stop()


def test_the_client_returns_nothing_of_other_users_for_hostile_ids(world: Any) -> None:
    settings, projection = world
    ann_ids = [m.memory_id for m in projection.list_memories("ann")]
    errors = []
    with MemoryClient(settings) as client:
        for hostile in hostile_strings():
            for call in (
                lambda h=hostile: client.search("Reykjavik PIN", user_id=h),
                lambda h=hostile: client.search(h, user_id=h),
                lambda h=hostile: client.get_all(user_id=h, include_inactive=True),
                lambda h=hostile: client.get(ann_ids[0], user_id=h),
                lambda h=hostile: client.history(ann_ids[0], user_id=h),
                lambda h=hostile: client.get(h, user_id=h),
                lambda h=hostile: client.search("x", user_id=h, filters=SearchFilters(session_id=h)),
            ):
                result, error = attempt(call)
                assert result in (None, []), (hostile, result)
                if error is not None:
                    errors.append(error)
            # The victim's own reads with hostile filters and queries stay the victim's.
            hits = client.search(hostile or "?", user_id="ann") if hostile.strip() else []
            assert all("Initech" not in h["memory"] and "BX-99" not in h["memory"] for h in hits)
            only_session = SearchFilters(session_id=hostile)
            result, error = attempt(
                lambda f=only_session: client.search("badge", user_id="ann", filters=f)
            )
            assert not result or all(h["session_id"] == hostile for h in result)
    assert not [e for e in errors if leaks(e)]


def test_the_cli_returns_nothing_of_other_users_for_hostile_ids(
    world: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, projection = world
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    ann_id = projection.list_memories("ann")[0].memory_id
    for hostile in hostile_strings():
        if "\x00" in hostile or "\ud800" in hostile or "\udfff" in hostile:
            continue  # no command line can carry these (the OS refuses NUL, UTF-8 refuses surrogates)
        for argv in (
            ["search", "Reykjavik", "--user", hostile],
            ["memories", "list", "--all", "--user", hostile],
            ["memories", "get", ann_id, "--user", hostile],
            ["memories", "history", ann_id, "--user", hostile],
        ):
            try:
                main(argv)
            except SystemExit:
                pass  # argparse refused the value (e.g. one starting with '-')
            out = capsys.readouterr()
            assert not leaks(out.out + out.err), (hostile, argv, out)


def test_the_workers_session_pages_return_nothing_of_other_users(world: Any) -> None:
    settings, _ = world
    for hostile in hostile_strings():
        if "\ud800" in hostile or "\udfff" in hostile:
            continue  # not encodable in a URL: no HTTP client can send it
        for path in (
            "/sessions/?" + urlencode({"user": hostile}),
            "/session/?" + urlencode({"user": hostile, "session": "open"}),
            "/session/?" + urlencode({"user": "ann", "session": hostile}),
        ):
            try:
                reply = fetch_json(settings, path, timeout_s=10)
            except OSError as exc:  # 404: no such session; 400: a request line over the limit
                assert getattr(exc, "code", None) in (400, 404), (hostile, path, exc)
                body = exc.read().decode() if hasattr(exc, "read") else str(exc)
                assert not leaks(body), (hostile, body)
                continue
            assert reply.get("sessions", []) == [] or hostile == "ann", (hostile, reply)
            assert not leaks(str(reply)), (hostile, path, reply)


def test_reports_and_sql_hold_nothing_of_other_users_for_hostile_ids(world: Any) -> None:
    from memstream.projections.analytics import REPORTS, Scope, run_report, run_sql

    settings, _ = world

    def archived(user: str) -> int:
        query = "SELECT count(*) AS n FROM events"
        return int(run_sql(settings, query, Scope(user_id=user)).column("n")[0].as_py())

    # The worker's archive sink flushes every couple of seconds.
    wait_for(lambda: archived("ann") and archived("bob"), "the archive to hold the victims' events", 60)
    assert run_report(settings, "growth", Scope(user_id="ann")).table.num_rows > 0
    # Every third id (each kind of the list is there): 17 DuckDB connections per id, and the
    # id only ever reaches the SQL as a bound parameter; the client and the CLI get all 100.
    for hostile in hostile_strings()[::3]:
        scope = Scope(user_id=hostile)
        for name in REPORTS:
            result, error = attempt(lambda n=name, s=scope: run_report(settings, n, s))
            if error is not None:
                assert not leaks(error), (hostile, name, error)
                continue
            rows = result.table.to_pylist()
            assert not leaks(repr(rows)), (hostile, name, rows)
            assert all(r.get("user_id") in (None, hostile) for r in rows), (hostile, name)
        for view in ("memories", "memory_history", "accesses", "sessions", "events"):
            table, error = attempt(lambda v=view, s=scope: run_sql(settings, f"SELECT * FROM {v}", s))
            assert error is None or not leaks(error), (hostile, view, error)
            assert table is None or table.num_rows == 0, (hostile, view, table.num_rows)


def raw_get(settings: Settings, path: str, headers: list[tuple[str, bytes]]) -> tuple[int, dict[str, str], str]:
    """GET ``path`` with exactly ``headers`` (raw bytes, repeats allowed): status, headers, body."""
    connection = http.client.HTTPConnection(settings.web_host, settings.web_port, timeout=10)
    try:
        connection.putrequest("GET", path)
        for name, value in headers:
            connection.putheader(name, value)
        connection.endheaders()
        reply = connection.getresponse()
        return reply.status, dict(reply.getheaders()), reply.read().decode(errors="replace")
    finally:
        connection.close()


def bad_credentials() -> list[tuple[str, list[tuple[str, bytes]], str]]:
    """(what, headers, query suffix) of requests that must not pass as the token."""
    token = TOKEN.encode()
    wrong_same_length = bytes(c ^ 1 for c in token)
    return [
        ("no token", [], ""),
        ("a wrong token of the same length", [("Authorization", b"Bearer " + wrong_same_length)], ""),
        ("a shorter token", [("Authorization", b"Bearer " + token[:-1])], ""),
        ("a longer token", [("Authorization", b"Bearer " + token + b"0")], ""),
        ("the token's first byte only", [("Authorization", b"Bearer " + token[:1])], ""),
        ("an empty bearer", [("Authorization", b"Bearer ")], ""),
        ("the token without a scheme", [("Authorization", token)], ""),
        ("the token as Basic", [("Authorization", b"Basic " + token)], ""),
        ("the token in X-Token", [("X-Token", token)], ""),
        ("the token in a cookie", [("Cookie", b"token=" + token)], ""),
        ("the token in the query string", [], "&" + urlencode({"token": TOKEN})),
        ("the token as access_token", [], "&" + urlencode({"access_token": TOKEN})),
        ("a bearer header in the query", [], "&" + urlencode({"Authorization": f"Bearer {TOKEN}"})),
        ("two Authorization headers", [("Authorization", b"Bearer " + token), ("Authorization", b"Bearer x")], ""),
        ("non-UTF-8 bytes", [("Authorization", b"Bearer \xff\xfe" + token[2:])], ""),
    ]


def test_no_page_with_user_data_answers_without_the_one_right_token(world: Any) -> None:
    settings, _ = world
    pages = [
        "/sessions/?" + urlencode({"user": "ann"}),
        "/sessions/?" + urlencode({"user": "bob"}),
        "/session/?" + urlencode({"user": "ann", "session": "open"}),
        "/session/?" + urlencode({"user": "bob", "session": "open", "budget": "50"}),
    ]
    for what, headers, suffix in bad_credentials():
        for page in pages:
            status, reply_headers, body = raw_get(settings, page + suffix, headers)
            assert status == 401, (what, page, status, body)
            assert reply_headers.get("WWW-Authenticate", "").startswith("Bearer"), (what, page)
            assert not leaks(body) and "sessions" not in body and "state" not in body, (what, body)
    # Refused before the user is even looked at: hostile ids get the same 401 and nothing.
    for hostile in hostile_strings():
        if "\ud800" in hostile or "\udfff" in hostile:
            continue  # not encodable in a URL
        for page in (
            "/sessions/?" + urlencode({"user": hostile}),
            "/session/?" + urlencode({"user": hostile, "session": "open"}),
        ):
            status, _, body = raw_get(settings, page, [])
            assert status in (400, 401), (hostile, status)  # 400: a request line over the limit
            assert not leaks(body), (hostile, body)


def test_the_token_reads_the_named_user_only(world: Any) -> None:
    settings, _ = world
    bearer = [("Authorization", f"Bearer {TOKEN}".encode())]
    for user, theirs, others in (("ann", "Reykjavik", "Initech"), ("bob", "Initech", "Reykjavik")):
        status, _, body = raw_get(settings, "/sessions/?" + urlencode({"user": user}), bearer)
        assert status == 200, body
        sessions = json.loads(body)["sessions"]
        assert [s["user_id"] for s in sessions] == [user] and theirs in body and others not in body
        status, _, body = raw_get(settings, f"/session/?user={user}&session=open", bearer)
        assert status == 200 and theirs in body and others not in body, body
        # A closed session is not open: 404, with its close marker only.
        status, _, body = raw_get(settings, f"/session/?user={user}&session=trip", bearer)
        assert status == 404 and not leaks(body), body
    # One user per request: none, an empty one or two are refused before any lookup.
    for page in (
        "/sessions/",
        "/sessions/?user=",
        "/sessions/?user=ann&user=bob",
        "/sessions/?users=ann",
        "/session/?session=open",
        "/session/?user=ann",
        "/session/?user=ann&user=bob&session=open",
        "/session/?user=ann&session=open&session=open",
        "/session/?user=ann&session=open&budget=-1",
        "/session/?user=ann&session=open&budget=lots",
    ):
        status, _, body = raw_get(settings, page, bearer)
        assert status == 400, (page, status, body)
        assert not leaks(body), (page, body)


def test_liveness_and_readiness_answer_anyone_and_hold_no_user_data(world: Any) -> None:
    settings, _ = world
    for page in ("/health/", "/ready/", "/"):
        status, _, body = raw_get(settings, page, [])
        assert status == 200, (page, status, body)
        assert not leaks(body) and "ann" not in body and "bob" not in body, (page, body)
    status, _, body = raw_get(settings, "/ready/", [])
    assert all("detail" not in c for c in json.loads(body)["components"].values())
    # Faust's own pages are off: /table/ would serve the sessions table by key.
    for page in ("/table/", "/table/sessions/", "/table/sessions/ann%1Fopen/", "/router/", "/graph/"):
        status, _, body = raw_get(settings, page, [("Authorization", f"Bearer {TOKEN}".encode())])
        assert status == 404, (page, status, body)
