"""What the door writes in OAuth mode: no access token anywhere, and each sign-in's discovery in the access log.

Issue 60's credential rule: no token in a log, a record, a metric, an answer or an error. The
canaries are real RS256 JWTs of the sandbox authorization server (tests/sandbox_auth.py),
registered with tests/secret_canaries.py as they are minted, so the whole run's scan watches for
them too. Every path a token takes is driven (valid, expired, for another audience, without the
call's scope, tampered, `alg: none`, with the keys out of reach, both doors on, a gateway that
quotes the token back), and everything the server said is searched: each answer's body and
headers (WWW-Authenticate among them), the access records and every other log line as the text
and the JSON formats write them at DEBUG, and GET /metrics. A token's claims and signature are
searched whole and in any 16 characters in a row.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, cast

import pytest

from mcp_server.ops import listener as listening
from mcp_server.ops import logs, records
from mcp_server.transports.http.server import McpHTTPServer
from tests.sandbox_auth import SandboxAuthServer
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.secret_canaries import RECORDER, canary_access_token, fragments_found, record_output, secrets
from tests.test_http import run_cli, wait_for_url
from tests.test_oauth_door import Door_, _refused_tokens, call, forwarded, get, oauth_door, sign_in

WAIT: Final = 10.0
WAGERS: Final = "/v1/member/wagers"
Texts = list[tuple[str, str]]


class _Lines(logging.Handler):
    """Every fairwins_mcp record as one of the server's formatters writes it."""

    def __init__(self, where: str, formatter: logging.Formatter, into: Texts) -> None:
        super().__init__(logging.DEBUG)
        self.where = where
        self.setFormatter(formatter)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append((f"{self.where} {record.name}:{record.levelname}", self.format(record)))


@contextmanager
def written_lines() -> Iterator[Texts]:
    """The log lines of the block, in the text and the JSON format, with every logger at DEBUG."""
    lines: Texts = []
    root = logging.getLogger("fairwins_mcp")
    handlers = [_Lines("text log", logs.TextFormatter(), lines), _Lines("JSON log", logs.JsonFormatter(), lines)]
    level = root.level
    root.setLevel(logging.DEBUG)
    for handler in handlers:
        root.addHandler(handler)
    try:
        yield lines
    finally:
        for handler in handlers:
            root.removeHandler(handler)
        root.setLevel(level)


def canaries(door: Door_) -> dict[str, str]:
    """A token for each way a token can come, each registered as a canary for the whole run."""
    tokens = {
        "valid": door.auth.mint_access_token(door.public),
        "signed in": sign_in(door),
        "without the call's scope": door.auth.mint_access_token(door.public, scopes=["read:fees"]),
    }
    refused = _refused_tokens(door)
    tokens.update({why: refused[why] for why in refused if why not in ("a raw fw1 token", "not a token at all")})
    valid = tokens["valid"]
    padding = base64.urlsafe_b64encode(os.urandom(12_800)).decode()  # past MAX_TOKEN_BYTES with it
    tokens["too long"] = f"{valid}{padding.rstrip('=')}"
    tokens["copied URL-encoded"] = valid.replace(".", "%2E")  # refused as an escaped bearer, 400
    for why, token in tokens.items():
        canary_access_token(token, why)
    return tokens


def said(where: str, status: int, headers: dict[str, str], body: Any) -> Texts:
    """An answer as texts to search: its status line and headers, and its body."""
    return [(f"{where}: headers", json.dumps([status, headers])), (f"{where}: body", json.dumps(body))]


def drive(door: Door_, tokens: dict[str, str]) -> Texts:
    """Every call a token can come with, as a client and as a modern client; everything answered."""
    out: Texts = []
    for why, token in tokens.items():
        for name in ("get_wagers", "get_profile", "get_gateway_status"):
            for modern in (False, True):
                out += said(f"{name} with a token {why}", *call(door.port, name, token, modern=modern))
    out += said("a member call without a token", *call(door.port, "get_wagers"))
    # A gateway (or a proxy in front of it) that writes the bearer it got into its error.
    valid = tokens["valid"]
    message = f"rejected Bearer {valid} ({urllib.parse.quote(valid)})"
    for status in (401, 403, 429, 500):
        door.gateway.fault(WAGERS, "status", status=status, body={"error": "nope", "message": message})
        out += said(f"gateway {status} quoting the token", *call(door.port, "get_wagers", valid))
    door.gateway.clear_faults()
    assert "(credential not shown)" in out[-1][1]  # the gateway's words were quoted, the token in them not
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource", "/metrics"):
        status, headers, body = get(door, path)
        assert status == 200, (path, status)
        out += said(f"GET {path}", status, headers, body.decode())
    return out


def assert_nothing_of(tokens: dict[str, str], texts: Texts) -> None:
    leaks = RECORDER.leaks(texts) + fragments_found(texts, tokens.values())
    assert not leaks, "\n".join(leaks)


def test_no_access_token_is_in_any_answer_header_log_line_record_or_metric() -> None:
    for member_tokens in (False, True):  # OAuth mode, then both doors on
        with written_lines() as lines, oauth_door(member_tokens=member_tokens, metrics=True) as door:
            mark = RECORDER.mark()
            tokens = canaries(door)
            answers = drive(door, tokens)
            if member_tokens:
                answers += said("a member's fw1 token", *call(door.port, "get_wagers", TOKEN_MEMBER_A))
            guard = door.server.guard
            assert guard is not None and guard.strays == 0 and guard.fatal is None
        logged = RECORDER.since(mark)
        assert any(where.startswith("log record fairwins_mcp.access") for where, _ in logged)
        assert_nothing_of(tokens, answers + lines + logged)
        # The canaries went where they could have leaked: the valid ones reached the gateway, and the
        # refusals, the challenges and the metadata reads are in the access log, in both formats.
        assert forwarded(door, tokens["valid"]) and forwarded(door, tokens["signed in"])
        assert not forwarded(door, tokens["expired"]) and not forwarded(door, tokens["alg none"])
        access = [text for where, text in lines if "fairwins_mcp.access" in where]
        for seen in ("POST /mcp 401", "POST /mcp 403", "GET /.well-known/oauth-protected-resource/mcp 200"):
            assert any(seen in text for text in access), seen
        assert any('"status":401' in text for text in access)  # the JSON form's httpRequest
        assert any("Bearer error=" in text for _, text in answers)  # the challenges' headers were searched


def test_no_access_token_is_written_while_the_keys_cannot_be_read() -> None:
    with written_lines() as lines, oauth_door(metrics=True) as door:
        mark = RECORDER.mark()
        tokens = {"while the keys are out of reach": door.auth.mint_access_token(door.public)}
        canary_access_token(tokens["while the keys are out of reach"], "while the keys are out of reach")
        door.auth.stop()
        answers: Texts = []
        for _ in range(2):  # the first fetch fails; the next call waits out the refetch bound
            status, headers, answer = call(door.port, "get_wagers", tokens["while the keys are out of reach"])
            assert status == 503, answer
            answers += said("the 503", status, headers, answer)
        status, headers, body = get(door, "/metrics")
        answers += said("GET /metrics", status, headers, body.decode())
    assert any("could not be read" in text for _, text in lines)  # the outage was logged, and searched
    assert_nothing_of(tokens, answers + lines + RECORDER.since(mark))


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_real_process_in_oauth_mode_writes_no_access_token_at_debug(fmt: str) -> None:
    # As deployed: its own stderr handler, formatters and filters, both doors on and /metrics served.
    sock = listening.listen("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    sock.close()
    public = f"http://127.0.0.1:{port}/mcp"
    with SandboxAuthServer() as auth, SandboxGateway() as gateway:
        gateway.trust_issuer(auth.issuer, audiences=[public])
        argv = ["--http", str(port), "--public-url", public, "--authorization-server", auth.issuer]
        argv += ["--accept-fw1-tokens", "--metrics-on-mcp-port"]
        env = {"FAIRWINS_API_URL": gateway.url, "FAIRWINS_MCP_LOG_LEVEL": "debug", "FAIRWINS_MCP_LOG_FORMAT": fmt}
        proc = run_cli(argv, env)
        log: list[str] = []
        try:
            assert wait_for_url(proc, log) == public, "".join(log)
            # The process's port where an in-process server would be: the helpers read only that.
            door = Door_(cast(McpHTTPServer, _Port(port)), auth, gateway, public, "", [])
            tokens = canaries(door)
            answers = drive(door, tokens)
            answers += said("a member's fw1 token", *call(port, "get_wagers", TOKEN_MEMBER_A))
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=WAIT)
            stderr = "".join(log) + err
            record_output(f"an OAuth-mode server writing {fmt} at debug", out + stderr)
    assert out == "", out
    assert "POST /mcp 401" in stderr or '"status":401' in stderr  # its access log was on, and searched
    assert_nothing_of(tokens, [("stderr", stderr), *answers])


class _Port:
    """Where a server listens, and nothing else of it."""

    def __init__(self, port: int) -> None:
        self.server_address = ("127.0.0.1", port)


# ---- the scan itself -----------------------------------------------------------------------------


def test_the_scans_find_a_planted_access_token_and_pass_its_redacted_form() -> None:
    with SandboxAuthServer(resources=["http://127.0.0.1:1/mcp"]) as auth:
        token = canary_access_token(auth.mint_access_token("http://127.0.0.1:1/mcp"), "planted")
    head, claims, signature = token.split(".")
    assert f"access token planted (…{signature[-8:-4]}), signature" in secrets()
    for planted in (token, claims, signature, f"{token[:100]} {token[100:]}", json.dumps({"t": token})):
        assert RECORDER.leaks([("planted", planted)]) or fragments_found([("planted", planted)], [token]), planted
    for piece in (signature[40:56], claims[7:23], urllib.parse.quote(signature[:30]), signature[:20].upper()):
        assert fragments_found([("planted", f"…{piece}…")], [token]), piece
    # What may be shown: the redacted form, the header (the key's, not the member's), and 15 characters.
    shown = f"{logs.redact(token)} {head} {signature[100:115]}"
    assert not RECORDER.leaks([("shown", shown)]) and not fragments_found([("shown", shown)], [token])


# ---- sign-in discovery in the access log ---------------------------------------------------------------


def test_a_sign_ins_discovery_is_logged_at_info_and_probes_and_scrapes_at_debug() -> None:
    # An operator follows a member's sign-in by the metadata read, as by any MCP request; a health
    # probe or a scrape every few seconds would drown the log.
    def severity(method: str, path: str, status: int) -> int:
        record = records.Record("http")
        record.http = records.HttpFacts(method, path, status)
        return record.severity

    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        assert severity("GET", path, 200) == logging.INFO
        assert severity("HEAD", path, 200) == logging.INFO
    assert severity("GET", "/healthz", 200) == severity("GET", "/metrics", 200) == logging.DEBUG
    assert severity("GET", "/mcp", 405) == logging.INFO
    with written_lines() as lines, oauth_door(metrics=True) as door:
        assert get(door, "/.well-known/oauth-protected-resource/mcp")[0] == 200
        assert get(door, "/healthz")[0] == 200
    access = {text.split(": ", 1)[1].split(" ms=")[0]: where for where, text in lines if where.startswith("text log")}
    assert access["GET /.well-known/oauth-protected-resource/mcp 200"].endswith("fairwins_mcp.access:INFO")
    assert access["GET /healthz 200"].endswith("fairwins_mcp.access:DEBUG")
