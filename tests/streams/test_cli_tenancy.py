"""``--tenant T --user U`` on the command line is the user an API key of tenant T calls U:
the same stored id the HTTP API makes, for any text given, or one line saying what is wrong."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstream.streams.api.auth import ApiKey, Refused
from memstream.streams.cli import main
from memstream.streams.cli.command import build_parser
from memstream.streams.cli.serving import stored_user

#: Tenants of the allowed form, and text that is not.
TENANTS = st.one_of(st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,63}", fullmatch=True), st.text())
USERS = st.text(max_size=300)
#: The command's parser, built once (it imports every command's module).
PARSER = build_parser()


def api_user_id(tenant: str, user: str) -> str | None:
    """The stored id the HTTP API makes of ``user`` for a key of ``tenant`` (None: refused)."""
    try:
        return ApiKey(tenant).user_id(user)
    except (Refused, ValueError):
        return None


@given(tenant=TENANTS, user=USERS)
def test_the_command_line_names_the_user_the_http_api_does(tenant: str, user: str) -> None:
    args = PARSER.parse_args(["memories", "get", "m-1", f"--tenant={tenant}", f"--user={user}"])
    expected = api_user_id(tenant, user)
    try:
        stored_user(args)
    except ValueError as exc:
        assert expected is None, f"the API takes {user!r} of {tenant!r}, the command refused"
        assert "\n" not in str(exc) and str(exc).startswith(("--tenant", "--user"))
    else:
        assert args.user == expected


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["search", "q", "--tenant", "Acme", "--user", "ann"], "--tenant must be"),
        (["search", "q", "--tenant", "acme", "--user", ""], "--user: user_id must not be empty"),
        (["report", "growth", "--tenant", "acme"], "--tenant names a tenant's user"),
    ],
)
def test_a_bad_tenant_or_user_is_one_line_and_exit_status_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err
