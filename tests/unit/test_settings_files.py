"""Settings from files: arguments over the environment over ``.env`` over the TOML file over
the defaults, and a file that is wrong stops memstream with a message that says which and
where, never a value it holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pydantic import ValidationError

from memstream.models.settings import Settings, SettingsFileError
from memstream.streams.cli import main


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory, and no MEMSTREAM_* variable from the test's environment."""
    monkeypatch.chdir(tmp_path)
    for name in Settings.model_fields:
        monkeypatch.delenv(f"MEMSTREAM_{name.upper()}", raising=False)
    return tmp_path


def test_each_source_wins_over_the_ones_after_it(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (workdir / "memstream.toml").write_text(
        'broker = "toml:1"\npartitions = 5\napi_port = 8001\nlog_level = "debug"\nmax_messages = 7\n'
    )
    (workdir / ".env").write_text(
        "# shared with docker compose: its own lines are not memstream's\n"
        "COMPOSE_PROJECT_NAME=memstream\n"
        "MEMSTREAM_BROKER=dotenv:2\nMEMSTREAM_PARTITIONS=6\nMEMSTREAM_API_PORT=8002\n"
    )
    monkeypatch.setenv("MEMSTREAM_BROKER", "env:3")
    monkeypatch.setenv("MEMSTREAM_PARTITIONS", "8")
    settings = Settings(broker="arg:4")
    assert (settings.broker, settings.partitions, settings.api_port, settings.log_level) == (
        "arg:4", 8, 8002, "debug"
    )
    assert settings.max_messages == 7 and settings.max_tokens == Settings.model_fields["max_tokens"].default
    assert settings.log_format == "json"  # the default


def test_the_config_file_variable_names_the_toml_file_in_the_environment_or_in_dotenv(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "memstream.toml").write_text('broker = "default-file:1"\n')
    (workdir / "prod.toml").write_text('broker = "named-file:1"\n')
    (workdir / "other.toml").write_text('broker = "dotenv-named:1"\n')
    assert Settings().broker == "default-file:1"
    (workdir / ".env").write_text("MEMSTREAM_CONFIG_FILE=other.toml\n")
    assert Settings().broker == "dotenv-named:1"
    monkeypatch.setenv("MEMSTREAM_CONFIG_FILE", str(workdir / "prod.toml"))
    assert Settings().broker == "named-file:1"
    # Handed to a child process with the rest (the worker the demo and tests start).
    assert Settings().to_env()["MEMSTREAM_CONFIG_FILE"] == str(workdir / "prod.toml")


def test_a_named_file_that_is_missing_is_an_error_the_default_one_is_not(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Settings().broker == "127.0.0.1:9092"
    monkeypatch.setenv("MEMSTREAM_CONFIG_FILE", "nowhere.toml")
    with pytest.raises(SettingsFileError, match="MEMSTREAM_CONFIG_FILE names 'nowhere.toml'"):
        Settings()


def test_a_file_that_is_not_toml_names_the_file_and_the_place_not_the_value(workdir: Path) -> None:
    (workdir / "memstream.toml").write_text('broker = "ok:1"\nweb_token = s3cret-not-quoted-value\n')
    with pytest.raises(SettingsFileError) as refused:
        Settings()
    message = str(refused.value)
    assert "memstream.toml" in message and "line 2" in message
    assert "s3cret" not in message


def test_an_unknown_setting_in_a_file_is_refused(workdir: Path) -> None:
    (workdir / "memstream.toml").write_text('brokr = "typo:1"\n')
    with pytest.raises(ValidationError, match="brokr"):
        Settings()
    (workdir / "memstream.toml").unlink()
    (workdir / ".env").write_text("MEMSTREAM_BROKR=typo:1\n")
    with pytest.raises(ValidationError, match="brokr"):
        Settings()


def test_the_command_says_what_is_wrong_and_exits_2_without_quoting_values(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "memstream.toml").write_text(
        'partitions = 0\nweb_tokn = "s3cret-typo-token-value"\nlog_format = "xml"\n'
    )
    assert main(["schema", "--out", str(workdir / "schemas")]) == 2
    err = capsys.readouterr().err
    assert "MEMSTREAM_PARTITIONS" in err and "MEMSTREAM_WEB_TOKN" in err and "MEMSTREAM_LOG_FORMAT" in err
    assert "s3cret" not in err and "xml" not in err
    assert not (workdir / "schemas").exists()
    (workdir / "memstream.toml").write_text("partitions = [\n")
    assert main(["schema", "--out", str(workdir / "schemas")]) == 2
    assert "memstream.toml" in capsys.readouterr().err


@given(text=st.text(max_size=200))
@hypothesis_settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_file_gives_settings_or_one_of_the_two_clear_errors(workdir: Path, text: str) -> None:
    (workdir / "memstream.toml").write_text(text, encoding="utf-8")
    try:
        Settings()
    except (SettingsFileError, ValidationError):
        pass
