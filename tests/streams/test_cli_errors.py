"""What the ``memstream`` command says when a user got something wrong: one line on stderr
that says what happened and what to do, a non-zero exit, never a traceback (``--debug``
shows it instead). No broker runs here: the settings point at a port nothing listens on."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import memory_added, unit_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstream.models.settings import Settings
from memstream.models.topics import user_partition
from memstream.projections.embedder import embedder_from_settings
from memstream.projections.memories import PartitionedMemories, SourcePosition
from memstream.streams.cli import main


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


#: Bytes that are not UTF-8 (and hold no NUL, which no argument or line can).
not_utf8 = st.binary(min_size=1, max_size=40).filter(
    lambda data: b"\x00" not in data and not _is_utf8(data)
)


@pytest.fixture
def no_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Settings, exported as a user would, whose broker and worker nowhere answer; returns
    the data directory."""
    for name, value in unit_settings(tmp_path / "data").to_env().items():
        monkeypatch.setenv(name, value)
    # A settings file of its own: none of the working directory's.
    (tmp_path / "memstream.toml").write_text("")
    monkeypatch.setenv("MEMSTREAM_CONFIG_FILE", str(tmp_path / "memstream.toml"))
    return tmp_path / "data"


def run(argv: list[str]) -> tuple[int, str, str]:
    """``memstream argv`` in this process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exit_:  # argparse's usage errors
            status = int(exit_.code or 0)
    return status, out.getvalue(), err.getvalue()


def assert_one_line(err: str, *words: str) -> None:
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    for word in words:
        assert word in err, err


@pytest.mark.parametrize(
    "argv",
    [
        ["publish", "--user", "ann", "--session", "s", "--text", "I live in Oslo"],
        ["replay"],
        ["verify"],
        ["memories", "history", "m-1", "--user", "ann"],
        ["dlq", "list"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_a_command_that_needs_the_broker_says_in_one_line_that_none_answers(
    no_broker: Path, argv: list[str]
) -> None:
    status, _, err = run(argv)
    assert status != 0
    assert_one_line(err, "cannot reach the broker at 127.0.0.1:", "memstream broker")


def test_the_real_command_says_one_line_and_debug_shows_the_traceback(no_broker: Path) -> None:
    argv = [sys.executable, "-m", "memstream.streams.cli"]
    quick = ["publish", "--user", "ann", "--session", "s", "--text", "hi"]
    plain = subprocess.run(
        [*argv, *quick], check=False, capture_output=True, text=True, timeout=120
    )
    assert plain.returncode == 1
    assert_one_line(plain.stderr, "cannot reach the broker")
    debug = subprocess.run(
        [*argv, "--debug", *quick], check=False, capture_output=True, text=True, timeout=120
    )
    assert debug.returncode != 0
    assert "Traceback" in debug.stderr and "KafkaConnectionError" in debug.stderr


def test_a_missing_jsonl_file_is_one_line_naming_it(no_broker: Path, tmp_path: Path) -> None:
    missing = tmp_path / "chat.jsonl"
    status, _, err = run(["publish", str(missing)])
    assert status == 2
    assert_one_line(err, str(missing), "No such file", "check the path")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=not_utf8.filter(lambda data: b"\n" not in data and b"\r" not in data))
def test_a_jsonl_line_that_is_not_utf8_is_one_bad_line(
    no_broker: Path, tmp_path: Path, line: bytes
) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_bytes(line + b"\n")
    status, out, err = run(["publish", str(path)])
    assert status == 1
    assert_one_line(err, "line 1: not UTF-8 text", "save the file as UTF-8")
    assert "published 0 event(s); 1 line(s) rejected" in out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# A value starting with "-" is an option to argparse ("expected one argument"), not a text.
@given(text=not_utf8.filter(lambda data: not data.startswith(b"-")))
def test_an_argument_that_is_not_utf8_is_refused_in_one_line_without_echoing_it(
    no_broker: Path, text: bytes
) -> None:
    # What Python makes of argv bytes that are not UTF-8: lone surrogates (PEP 383).
    argument = os.fsdecode(text)
    status, _, err = run(["publish", "--user", "ann", "--session", "s", "--text", argument])
    assert status == 2
    assert_one_line(err, "argument --text: not UTF-8 text", "UTF-8")
    err.encode("utf-8")  # nothing of the argument came back raw


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=not_utf8.filter(lambda data: b"\n" not in data and b'"' not in data))
def test_a_settings_file_that_is_not_utf8_is_one_line(
    no_broker: Path, tmp_path: Path, value: bytes
) -> None:
    (tmp_path / "memstream.toml").write_bytes(b'log_level = "' + value + b'"\n')
    status, _, err = run(["schema", "--out", str(tmp_path / "schemas")])
    assert status == 2
    assert_one_line(err, "not UTF-8", "save it as UTF-8")


def test_a_search_without_a_broker_answers_and_says_in_one_line_it_was_not_counted(
    no_broker: Path,
) -> None:
    settings = Settings()  # as the command sees them
    projection = PartitionedMemories.from_settings(settings, embedder_from_settings(settings))
    partition = user_partition("ann", settings.partitions)
    seeded = memory_added("m-1", "ann", "Ann lives in Oslo")
    projection.apply([(seeded, SourcePosition(f"{settings.topic_prefix}.memories", partition, 0))])
    status, out, err = run(["search", "--user", "ann", "where does Ann live"])
    assert "Ann lives in Oslo" in out
    assert status == 1  # answered, but not counted as use
    assert_one_line(err, "1 access event(s) not published", "cannot reach the broker")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["profile", "--user", "ann", "--as-of", "yesterday"], ["--as-of", "not an ISO 8601 time"]),
        (["profile", "--user", "ann", "--subject", ""], ["error: subject", "'User'"]),
        (["profile", "--subject", "User"], ["--user"]),
        (["graph", "--user", "ann", "--as-of", "yesterday"], ["--as-of", "not an ISO 8601 time"]),
        (["entity", "--user", "ann", ""], ["error: name", "'Ana'"]),
        (["entity", "Ana"], ["--user"]),
        (["graph", "--user", "ann", "--limit", "many"], ["--limit", "invalid int value"]),
        (["graph", "--user", "ann", "--limit", "0"], ["error: limit", "between 1 and 2000"]),
        (["entity", "--user", "ann", "Ana", "--limit", "1001"], ["error: limit", "1000"]),
        (["projects", "--user", "ann", "--as-of", "soon"], ["--as-of", "not an ISO 8601 time"]),
        (["projects", "--user", "ann", "--project", " "], ["error: project", "'atlas'"]),
        (["projects", "--user", "ann", "--project", "x" * 201], ["error: project", "'atlas'"]),
        (["projects", "--project", "atlas"], ["--user"]),
    ],
    ids=["as-of", "subject", "no user", "graph as-of", "entity name", "entity no user",
         "graph limit word", "graph limit 0", "entity limit",
         "projects as-of", "projects blank", "projects long", "projects no user"],
)
def test_a_profile_asked_wrong_is_one_line(
    no_broker: Path, argv: list[str], words: list[str]
) -> None:
    status, out, err = run(argv)
    assert status == 2 and out == ""
    assert_one_line(err, *words)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["patterns", "--user", "ann", "--as-of", "yesterday"], ["--as-of", "not an ISO 8601 time"]),
        (["patterns", "--json"], ["--user"]),
    ],
    ids=["as-of", "no user"],
)
def test_patterns_asked_wrong_is_one_line(
    no_broker: Path, argv: list[str], words: list[str]
) -> None:
    status, out, err = run(argv)
    assert status == 2 and out == ""
    assert_one_line(err, *words)
