"""`fairwins-mcp check`: the connectivity doctor, against the sandbox gateway and its faults."""

from __future__ import annotations

import datetime as dt
import io
import socket
import subprocess
import sys

import pytest

from mcp_server.setup import doctor
from mcp_server.setup.config import Config, parse_args
from mcp_server.upstream.gateway import Gateway
from tests import catalog
from tests.conftest import ROOT, WAIT, server_env
from tests.sandbox_gateway import (
    ACCOUNT_A,
    TOKEN_EXPIRED,
    TOKEN_MEMBER_A,
    TOKEN_PROFILE_ONLY,
    SandboxGateway,
)

NOW = dt.datetime(2026, 11, 29, 20, 0, tzinfo=dt.UTC)
PUBLIC = list(catalog.PUBLIC)
MEMBER = list(catalog.MEMBER)
# The narrow sample token holds read:profile (and assistant:chat, which no tool needs).
NARROW_WORKS = sorted([*PUBLIC, *(t for t in MEMBER if catalog.SCOPE[t] == "read:profile")])
NARROW_LACKS = [f"{t} ({catalog.SCOPE[t]})" for t in MEMBER if catalog.SCOPE[t] != "read:profile"]


def check(url: str | None, token: str | None = None, now: dt.datetime = NOW) -> tuple[int, list[str]]:
    """The exit status and the report's lines, run in-process."""
    out = io.StringIO()
    config = Config(api_url=url, api_token=token, timeout=2.0)
    code = doctor.run(config, out, gateway=Gateway(url, timeout=2.0), now=now)
    return code, out.getvalue().splitlines()


def line(lines: list[str], mark: str, topic: str) -> str:
    """The one line with this mark and topic (fails the test when there is none or several)."""
    found = [ln for ln in lines if ln.split()[:2] == [mark, topic]]
    assert len(found) == 1, f"expected one {mark} {topic} line in:\n" + "\n".join(lines)
    return found[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_full_token_on_a_live_gateway_passes_and_names_account_expiry_and_scopes(sandbox: SandboxGateway) -> None:
    code, lines = check(sandbox.url, TOKEN_MEMBER_A)
    assert code == 0, "\n".join(lines)
    assert sandbox.url in line(lines, "ok", "gateway") and "2026.11.3-sandbox" in line(lines, "ok", "gateway")
    token = line(lines, "ok", "token")
    assert "fw1.…7f3k" in token and ACCOUNT_A in token and "2027-02-28T00:00:00Z (in 90 days)" in token
    assert line(lines, "ok", "scopes").endswith(", ".join(sorted(set(catalog.SCOPE.values()))))
    assert line(lines, "ok", "tools").endswith(", ".join(sorted(PUBLIC + MEMBER)))
    assert f"all {len(PUBLIC + MEMBER)} will work" in line(lines, "ok", "tools")
    assert not any(ln.startswith(("FAIL", "warn")) for ln in lines)
    assert lines[-1] == "Everything a member needs works."


def test_only_status_and_me_are_asked_and_the_token_goes_only_to_me(sandbox: SandboxGateway) -> None:
    check(sandbox.url, TOKEN_MEMBER_A)
    seen = sandbox.wait_for_requests(2)
    assert [(r.method, r.path) for r in seen] == [("GET", "/status"), ("GET", "/v1/member/me")]
    assert seen[0].header("Authorization") is None
    assert seen[1].header("Authorization") == f"Bearer {TOKEN_MEMBER_A}"


def test_the_token_never_appears_whole(sandbox: SandboxGateway) -> None:
    for token in (TOKEN_MEMBER_A, TOKEN_EXPIRED, TOKEN_PROFILE_ONLY):
        _, lines = check(sandbox.url, token)
        assert token not in "\n".join(lines)
        assert f"fw1.…{token[-4:]}" in "\n".join(lines)


def test_a_narrow_token_fails_and_names_each_tool_it_cannot_serve_with_the_scope_it_lacks(
    sandbox: SandboxGateway,
) -> None:
    code, lines = check(sandbox.url, TOKEN_PROFILE_ONLY)
    assert code == 1
    assert line(lines, "ok", "scopes").endswith("assistant:chat, read:profile")
    assert line(lines, "ok", "tools").endswith(", ".join(NARROW_WORKS))
    assert line(lines, "FAIL", "tools").endswith("the token lacks their scope: " + ", ".join(NARROW_LACKS))


def test_a_refused_token_fails_and_says_where_a_new_one_comes_from(sandbox: SandboxGateway) -> None:
    code, lines = check(sandbox.url, TOKEN_EXPIRED)
    assert code == 1
    assert "refused by the gateway (missing, expired or revoked)" in line(lines, "FAIL", "token")
    assert "Tools > Assistant > API access" in line(lines, "FAIL", "token")
    assert line(lines, "FAIL", "tools").endswith("the token was refused: " + ", ".join(MEMBER))
    assert line(lines, "ok", "tools").endswith(", ".join(PUBLIC))


def test_no_token_fails_keeps_the_public_tools_and_mentions_paying_per_call(sandbox: SandboxGateway) -> None:
    code, lines = check(sandbox.url, None)
    assert code == 1
    assert "FAIRWINS_API_TOKEN is not set" in line(lines, "FAIL", "token")
    assert line(lines, "ok", "tools") == f"ok    tools    {len(PUBLIC)} will work: {', '.join(PUBLIC)}"
    assert line(lines, "FAIL", "tools").endswith("they need a member token: " + ", ".join(MEMBER))
    assert f"{', '.join(catalog.PRICED)} can instead be paid per call (x402)" in line(lines, "note", "tools")
    assert [r.path for r in sandbox.seen] == ["/status"]  # nothing member-only was tried


def test_no_gateway_url_fails_every_tool_and_says_what_to_set() -> None:
    code, lines = check(None, TOKEN_MEMBER_A)
    assert code == 1
    assert "FAIRWINS_API_URL is not set" in line(lines, "FAIL", "gateway")
    assert "not checked: no gateway to ask" in line(lines, "skip", "token")
    assert line(lines, "FAIL", "tools").endswith("no gateway answers: " + ", ".join(sorted(PUBLIC + MEMBER)))


def test_an_unusable_gateway_url_is_named() -> None:
    code, lines = check("ftp://relay.example", None)
    assert code == 1 and "must be an http:// or https:// URL" in line(lines, "FAIL", "gateway")


def test_nothing_listening_is_reported_as_a_refused_connection() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    code, lines = check(url, TOKEN_MEMBER_A)
    assert code == 1
    assert (
        line(lines, "FAIL", "gateway")
        == f"FAIL  gateway  {url} does not answer /status: nothing answered there (connection refused)"
    )


def test_a_web_page_instead_of_the_gateway_is_named_as_such(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "html")
    code, lines = check(sandbox.url, TOKEN_MEMBER_A)
    assert code == 1
    assert "could not be read: it was not JSON (text/html" in line(lines, "FAIL", "gateway")
    assert "is this the gateway's base URL?" in line(lines, "FAIL", "gateway")


def test_a_redirect_is_reported_with_its_target_and_not_followed(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "redirect", status=301, location="https://relay.example/status")
    code, lines = check(sandbox.url, TOKEN_MEMBER_A)
    assert code == 1
    assert "answered 301, a redirect to https://relay.example/status, which is not followed" in line(
        lines, "FAIL", "gateway"
    )
    assert len(sandbox.seen) == 1


def test_a_gateway_error_quotes_what_the_gateway_said(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "status", status=503)
    code, lines = check(sandbox.url, None)
    assert code == 1
    assert "does not answer /status: it answered 503 (“gateway up, dependency down”)" in line(lines, "FAIL", "gateway")


def test_a_token_without_read_profile_cannot_have_its_scopes_listed_and_says_so(sandbox: SandboxGateway) -> None:
    sandbox.fault("/v1/member/me", "status", status=403)
    code, lines = check(sandbox.url, TOKEN_MEMBER_A)
    assert code == 1
    assert "accepted but lacks read:profile" in line(lines, "warn", "token")
    assert line(lines, "FAIL", "tools").endswith("the token lacks their scope: get_profile (read:profile)")
    assert line(lines, "warn", "tools").endswith(
        "cannot be judged without the token's scopes: " + ", ".join(t for t in MEMBER if t != "get_profile")
    )


def test_a_token_that_expires_within_a_week_is_a_warning_not_a_failure(sandbox: SandboxGateway) -> None:
    code, lines = check(sandbox.url, TOKEN_MEMBER_A, now=dt.datetime(2027, 2, 25, tzinfo=dt.UTC))
    assert code == 0
    assert "expires 2027-02-28T00:00:00Z (in 3 days): a member creates one" in line(lines, "warn", "token")


def test_a_token_past_its_stated_expiry_but_accepted_points_at_the_clock(sandbox: SandboxGateway) -> None:
    code, lines = check(sandbox.url, TOKEN_MEMBER_A, now=dt.datetime(2027, 3, 1, tzinfo=dt.UTC))
    assert code == 0
    assert "check the clock" in line(lines, "warn", "token")


# --- the command line ---------------------------------------------------------------------------


def test_check_is_a_subcommand_and_serving_parses_exactly_as_before() -> None:
    assert parse_args([]).command == "serve" and parse_args([]).http is None
    assert parse_args(["--http", "8790"]).command == "serve" and parse_args(["--http", "8790"]).http == 8790
    assert parse_args(["check"]).command == "check"
    with pytest.raises(SystemExit):
        parse_args(["chekc"])


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_server", *args],
        cwd=ROOT,
        env=server_env(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT * 3,
    )


def test_fairwins_mcp_check_prints_the_report_on_stdout_and_exits_0(sandbox: SandboxGateway) -> None:
    done = run_cli("check", FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("fairwins-mcp check (")
    assert done.stdout.endswith("Everything a member needs works.\n")
    assert TOKEN_MEMBER_A not in done.stdout + done.stderr


def test_fairwins_mcp_check_exits_1_when_something_will_not_work(sandbox: SandboxGateway) -> None:
    done = run_cli("check", FAIRWINS_API_URL=sandbox.url)
    assert done.returncode == 1 and "FAIL  token" in done.stdout


def test_fairwins_mcp_check_exits_2_on_a_setting_it_cannot_read() -> None:
    done = run_cli("check", FAIRWINS_MCP_TIMEOUT="soon")
    assert done.returncode == 2 and "FAIRWINS_MCP_TIMEOUT must be a number" in done.stderr and done.stdout == ""


def test_check_is_not_refused_for_an_env_token_the_way_http_serving_is(sandbox: SandboxGateway) -> None:
    # The --http boot refusal protects callers of a server; check serves nobody.
    done = run_cli("check", "--http", "0", FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    assert done.returncode == 0, done.stdout + done.stderr


def test_neither_serving_path_imports_the_doctor() -> None:
    probe = (
        "import sys, mcp_server.setup.cli, mcp_server.setup.server; "
        "print(sorted(m for m in sys.modules if 'doctor' in m))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=WAIT * 3
    )
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
