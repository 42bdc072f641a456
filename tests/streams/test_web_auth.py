"""Who may read the worker's pages: the token check and the refusal to start exposed."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from memstream.models.settings import Settings
from memstream.streams.worker.web import (
    UnsafeWebExposure,
    bearer_token_matches,
    check_web_exposure,
    is_loopback,
)

TOKEN = "correct-horse-battery-staple-42"


def request(*headers: tuple[str, str]) -> Any:
    return make_mocked_request("GET", "/sessions/?user=ann", headers=CIMultiDict(headers))


@pytest.mark.parametrize(
    "headers",
    [
        (),
        (("Authorization", f"Bearer {TOKEN}x"),),  # longer
        (("Authorization", f"Bearer {TOKEN[:-1]}"),),  # shorter
        (("Authorization", f"Bearer {TOKEN.upper()}"),),
        (("Authorization", "Bearer "),),
        (("Authorization", "Bearer"),),
        (("Authorization", TOKEN),),  # no scheme
        (("Authorization", f"Basic {TOKEN}"),),
        (("Authorization", f"Token {TOKEN}"),),
        (("Authorization", f"Bearer  {TOKEN}"),),  # two spaces
        (("Authorization", f"Bearer {TOKEN} "),),
        (("X-Token", TOKEN),),  # the wrong header
        (("X-Authorization", f"Bearer {TOKEN}"),),
        (("Authorization", f"Bearer {TOKEN}"), ("Authorization", "Bearer other")),  # two
        (("Authorization", "Bearer é" + TOKEN[1:]),),  # same length in characters, not bytes
    ],
)
def test_anything_but_the_one_right_bearer_header_is_refused(headers: tuple[Any, ...]) -> None:
    settings = Settings(web_token=TOKEN)
    assert not bearer_token_matches(request(*headers), settings)


def test_the_right_token_is_accepted_with_the_scheme_in_any_case() -> None:
    settings = Settings(web_token=TOKEN)
    assert bearer_token_matches(request(("Authorization", f"Bearer {TOKEN}")), settings)
    assert bearer_token_matches(request(("authorization", f"bearer {TOKEN}")), settings)


def test_no_token_set_means_no_check() -> None:
    assert bearer_token_matches(request(), Settings())


def test_an_empty_token_variable_means_no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTREAM_WEB_TOKEN", "")
    assert Settings().web_token is None


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
def test_loopback_without_a_token_is_the_development_default(host: str) -> None:
    assert is_loopback(host)
    check_web_exposure(Settings(web_host=host))


@pytest.mark.parametrize("host", ["0.0.0.0", "", "::", "10.0.0.5", "worker-1.internal", "127.0.0.1.nip.io"])
def test_a_worker_reachable_from_elsewhere_without_a_token_refuses_to_start(host: str) -> None:
    with pytest.raises(UnsafeWebExposure, match="MEMSTREAM_WEB_TOKEN is not set"):
        check_web_exposure(Settings(web_host=host))
    check_web_exposure(Settings(web_host=host, web_token=TOKEN))


@pytest.mark.parametrize("weak", ["short", "has a space in it ok?", "ünïcödé-tökén-lönger-thän-16"])
def test_a_weak_token_is_refused_and_never_shown(weak: str) -> None:
    with pytest.raises(UnsafeWebExposure) as refused:
        check_web_exposure(Settings(web_host="0.0.0.0", web_token=weak))
    assert weak not in str(refused.value)


def test_the_token_is_not_in_the_settings_repr() -> None:
    settings = Settings(web_token=TOKEN)
    assert TOKEN not in repr(settings) and TOKEN not in str(settings.model_dump())
    assert settings.to_env()["MEMSTREAM_WEB_TOKEN"] == TOKEN  # a child worker needs it
