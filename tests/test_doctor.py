"""`fairwins-mcp check`: the connectivity doctor, against the sandbox gateway and its faults, and in OAuth mode
against the sandbox authorization server, a real one, and ones that are unreachable or wrong."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mcp_server.setup import doctor
from mcp_server.setup.config import Config, OAuth, parse_args
from mcp_server.upstream.gateway import Gateway
from tests import catalog
from tests.conftest import NODE_TOOLS, ROOT, WAIT, server_env
from tests.oidc import harness as oidc
from tests.sandbox_auth import SandboxAuthServer
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


# --- OAuth mode: the authorization server, as the server will read it -----------------------------

PUBLIC_URL = "http://127.0.0.1:8791/mcp"


def check_oauth(
    gateway_url: str, issuer: str, resource: str = PUBLIC_URL, token: str | None = None
) -> tuple[int, list[str]]:
    out = io.StringIO()
    config = Config(api_url=gateway_url, api_token=token, timeout=2.0, oauth=OAuth(PUBLIC_URL, issuer, resource))
    code = doctor.run(config, out, gateway=Gateway(gateway_url, timeout=2.0), now=NOW)
    return code, out.getvalue().splitlines()


class FakeIssuer:
    """An authorization server that serves what a test gives it: path -> (status, JSON document)."""

    def __init__(self) -> None:
        self.documents: dict[str, tuple[int, object]] = {}
        documents = self.documents

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, document = documents.get(self.path, (404, {"error": "not_found"}))
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def serve(self, metadata: dict[str, object], keys: list[dict[str, object]], at: str) -> None:
        self.documents[at] = (200, {"issuer": self.url, "jwks_uri": self.url + "/jwks", **metadata})
        self.documents["/jwks"] = (200, {"keys": keys})

    def __enter__(self) -> FakeIssuer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(WAIT)


RFC8414 = "/.well-known/oauth-authorization-server"
OIDC = "/.well-known/openid-configuration"


@pytest.fixture(scope="module")
def a_public_key() -> dict[str, object]:
    with SandboxAuthServer() as auth:
        return dict(auth.jwks()["keys"][0])


def test_oauth_mode_names_the_resource_the_issuers_metadata_its_sign_in_and_its_keys(sandbox: SandboxGateway) -> None:
    with SandboxAuthServer(resources=[PUBLIC_URL]) as auth:
        code, lines = check_oauth(sandbox.url, auth.issuer)
        published = auth.jwks()["keys"]
        kid = auth.kid
    assert code == 0, "\n".join(lines)
    assert line(lines, "ok", "resource") == (
        f"ok    resource  {PUBLIC_URL}: tokens must carry it in aud; its metadata is served at "
        "http://127.0.0.1:8791/.well-known/oauth-protected-resource/mcp"
    )
    assert line(lines, "ok", "issuer").endswith(
        f"{auth.issuer}: metadata read from {auth.metadata_url} (RFC 8414); its issuer matches"
    )
    assert line(lines, "ok", "sign-in").endswith(
        "PKCE S256; clients register by dynamic client registration or Client ID Metadata Documents"
    )
    assert line(lines, "ok", "keys").endswith(f"1 key from {auth.jwks_uri}: kid {kid} (RS256)")
    # no key material beyond the kid and the algorithm
    report = "\n".join(lines)
    assert all(str(jwk[part]) not in report for jwk in published for part in ("n", "x", "y") if part in jwk)
    # members sign in: no FAIRWINS_API_TOKEN is asked for, and the member tools wait for a sign-in
    assert line(lines, "skip", "token").endswith(f"none needed: in OAuth mode members sign in at {auth.issuer}")
    assert line(lines, "ok", "tools").endswith(", ".join(PUBLIC))
    assert line(lines, "note", "tools").endswith(f"{len(MEMBER)} need a member's sign-in: " + ", ".join(MEMBER))
    assert lines[-1] == "Everything a member needs works."


def test_a_resource_that_is_a_parent_of_the_public_url_is_named_with_what_it_covers(sandbox: SandboxGateway) -> None:
    with SandboxAuthServer() as auth:
        _, lines = check_oauth(sandbox.url, auth.issuer, resource="http://127.0.0.1:8791/")
    assert line(lines, "ok", "resource") == (
        f"ok    resource  http://127.0.0.1:8791/ (covering {PUBLIC_URL}): tokens must carry it in aud; "
        "its metadata is served at http://127.0.0.1:8791/.well-known/oauth-protected-resource"
    )


def test_an_unreachable_authorization_server_fails_naming_both_places_asked(sandbox: SandboxGateway) -> None:
    issuer = f"http://127.0.0.1:{closed_port()}"
    code, lines = check_oauth(sandbox.url, issuer)
    assert code == 1
    failed = line(lines, "FAIL", "issuer")
    assert failed.startswith(f"FAIL  issuer    {issuer}: its metadata could not be read (")
    assert f"{issuer}{RFC8414}: refused" in failed and f"{issuer}{OIDC}: refused" in failed
    assert failed.endswith("members cannot sign in")
    assert line(lines, "skip", "keys").endswith("not read: no metadata names them")
    assert line(lines, "FAIL", "tools").endswith("members cannot sign in (above): " + ", ".join(MEMBER))
    assert line(lines, "ok", "tools").endswith(", ".join(PUBLIC))  # the public tools need no sign-in


def test_a_server_that_is_no_authorization_server_fails_with_what_it_answered(sandbox: SandboxGateway) -> None:
    code, lines = check_oauth(sandbox.url, sandbox.url)  # the gateway: no metadata there
    assert code == 1
    assert f"{sandbox.url}{RFC8414}: HTTP 404; {sandbox.url}{OIDC}: HTTP 404" in line(lines, "FAIL", "issuer")


def test_metadata_naming_another_issuer_is_not_used_and_the_name_it_gave_is_shown(sandbox: SandboxGateway) -> None:
    with SandboxAuthServer() as auth:
        code, lines = check_oauth(sandbox.url, auth.issuer + "/")  # a trailing slash is another issuer
    assert code == 1
    assert f'{auth.metadata_url} names another issuer ("{auth.issuer}")' in line(lines, "FAIL", "issuer")


def test_openid_connect_discovery_is_named_when_it_is_what_answered(
    sandbox: SandboxGateway, a_public_key: dict[str, object]
) -> None:
    with FakeIssuer() as fake:
        fake.serve({"code_challenge_methods_supported": ["S256"], "registration_endpoint": "x"}, [a_public_key], OIDC)
        code, lines = check_oauth(sandbox.url, fake.url)
    assert code == 0, "\n".join(lines)
    assert line(lines, "ok", "issuer").endswith(
        f"metadata read from {fake.url}{OIDC} (OpenID Connect discovery); its issuer matches"
    )
    assert line(lines, "ok", "sign-in").endswith("PKCE S256; clients register by dynamic client registration")


def test_metadata_without_s256_fails_and_without_a_way_to_register_warns(
    sandbox: SandboxGateway, a_public_key: dict[str, object]
) -> None:
    with FakeIssuer() as fake:
        fake.serve({"code_challenge_methods_supported": ["plain"]}, [a_public_key], RFC8414)
        code, lines = check_oauth(sandbox.url, fake.url)
    assert code == 1
    assert "advertises no PKCE S256" in line(lines, "FAIL", "sign-in")
    assert "only clients registered beforehand can sign in" in line(lines, "warn", "sign-in")
    assert line(lines, "FAIL", "tools").endswith("members cannot sign in (above): " + ", ".join(MEMBER))


def test_resource_indicators_are_reported_only_when_the_metadata_says(
    sandbox: SandboxGateway, a_public_key: dict[str, object]
) -> None:
    base = {"code_challenge_methods_supported": ["S256"], "client_id_metadata_document_supported": True}
    with FakeIssuer() as fake:
        fake.serve({**base, "resource_indicators_supported": True}, [a_public_key], RFC8414)
        _, said_yes = check_oauth(sandbox.url, fake.url)
        fake.serve({**base, "resource_indicators_supported": False}, [a_public_key], RFC8414)
        code, said_no = check_oauth(sandbox.url, fake.url)
    assert line(said_yes, "ok", "sign-in").endswith(
        "PKCE S256; clients register by Client ID Metadata Documents; resource indicators (RFC 8707)"
    )
    assert code == 0
    assert f"its tokens must still carry {PUBLIC_URL} in aud" in line(said_no, "warn", "sign-in")


def test_keys_that_cannot_be_read_fail_naming_the_jwks_uri(sandbox: SandboxGateway) -> None:
    with FakeIssuer() as fake:
        fake.serve({"code_challenge_methods_supported": ["S256"], "registration_endpoint": "x"}, [], RFC8414)
        fake.documents["/jwks"] = (404, {"error": "gone"})
        code, lines = check_oauth(sandbox.url, fake.url)
    assert code == 1
    assert line(lines, "ok", "issuer")  # the metadata was read
    assert line(lines, "FAIL", "keys") == (
        f"FAIL  keys      {fake.url}: its keys ({fake.url}/jwks) could not be read: HTTP 404; "
        "no member's token can be checked"
    )


def test_keys_left_out_are_named_by_kid_and_why_and_a_set_of_none_usable_fails(
    sandbox: SandboxGateway, a_public_key: dict[str, object]
) -> None:
    private = {**a_public_key, "kid": "leaked", "d": "bm90LWEtcmVhbC1rZXk"}
    edwards: dict[str, object] = {
        "kty": "OKP",
        "crv": "Ed25519",
        "kid": "ed",
        "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
    }
    with FakeIssuer() as fake:
        fake.serve({"code_challenge_methods_supported": ["S256"]}, [a_public_key, private, edwards], RFC8414)
        _, lines = check_oauth(sandbox.url, fake.url)
        fake.serve({"code_challenge_methods_supported": ["S256"]}, [private], RFC8414)
        code, none_usable = check_oauth(sandbox.url, fake.url)
    assert line(lines, "ok", "keys").endswith(f"1 key from {fake.url}/jwks: kid {a_public_key['kid']} (RS256)")
    assert line(lines, "warn", "keys").endswith("2 left out: kid leaked (private key), kid ed (unsupported kty)")
    assert "bm90LWEtcmVhbC1rZXk" not in "\n".join(lines) and str(edwards["x"]) not in "\n".join(lines)
    assert code == 1
    assert line(none_usable, "FAIL", "keys").endswith(f"{fake.url}/jwks holds no key this server can verify with")
    assert line(none_usable, "warn", "keys").endswith("1 left out: kid leaked (private key)")


def test_a_member_token_set_in_oauth_mode_is_still_checked_at_the_gateway(sandbox: SandboxGateway) -> None:
    with SandboxAuthServer() as auth:
        code, lines = check_oauth(sandbox.url, auth.issuer, token=TOKEN_MEMBER_A)
    assert code == 0 and "fw1.…7f3k" in line(lines, "ok", "token") and line(lines, "ok", "keys")


@NODE_TOOLS
def test_oauth_mode_reads_a_real_third_party_authorization_server(sandbox: SandboxGateway) -> None:
    with oidc.running([PUBLIC_URL], ["read:wagers", "read:fees"]) as issuer:
        code, lines = check_oauth(sandbox.url, issuer)
    assert code == 0, "\n".join(lines)
    assert line(lines, "ok", "sign-in").endswith("PKCE S256; clients register by dynamic client registration")
    assert re.fullmatch(r".*2 keys from \S+: kid \S+ \(RS256\), kid \S+ \(ES256\)", line(lines, "ok", "keys"))


def test_fairwins_mcp_check_takes_the_oauth_flags_with_http(sandbox: SandboxGateway) -> None:
    with SandboxAuthServer() as auth:
        flags = ["--public-url", PUBLIC_URL, "--authorization-server", auth.issuer]
        done = run_cli("check", "--http", "0", *flags, FAIRWINS_API_URL=sandbox.url)
        without_http = run_cli("check", *flags, FAIRWINS_API_URL=sandbox.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ok    keys      1 key from {auth.jwks_uri}: kid {auth.kid} (RS256)" in done.stdout
    assert done.stderr == ""  # no warning of a connection left open, nothing logged
    # The OAuth flags need --http, for check as for serving (config.py).
    assert without_http.returncode == 2 and "--public-url needs --http" in without_http.stderr
