"""Streamable HTTP against a real server on 127.0.0.1:0, over the sandbox gateway."""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate, routes
from mcp_server.transports.http.admission import SLOT_WAIT
from mcp_server.transports.http.server import McpHTTPServer
from tests.conftest import SIGNAL_STOP
from tests.mcp_http import refusal, serving
from tests.sandbox_gateway import ACCOUNT_A, ACCOUNT_B, TOKEN_MEMBER_A, TOKEN_MEMBER_B, SandboxGateway
from tests.secret_canaries import record_output

ROOT = pathlib.Path(__file__).resolve().parent.parent
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture
def sandbox() -> Iterator[SandboxGateway]:
    with SandboxGateway() as gw:
        yield gw


@contextmanager
def running(
    gateway_url: str,
    *,
    env_bearer: str | None = None,
    max_concurrency: int = 32,
    read_timeout: float = 30.0,
    origins: tuple[str, ...] = (),
    timeout: float = 5.0,
) -> Iterator[McpHTTPServer]:
    dispatcher = build_dispatcher(Config(api_url=gateway_url, timeout=timeout))
    policy = gate.Policy(loopback_bind=True, allowed_origins=frozenset(origins), max_body=1024 * 1024)
    with serving(
        dispatcher, policy, env_bearer=env_bearer, max_concurrency=max_concurrency, read_timeout=read_timeout
    ) as server:
        yield server


def connect(server: McpHTTPServer) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)


def post(
    conn: http.client.HTTPConnection, message: Any, headers: dict[str, str] | None = None, raw: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    body = raw if raw is not None else json.dumps(message).encode()
    conn.request("POST", "/mcp", body=body, headers={**JSON_HEADERS, **(headers or {})})
    resp = conn.getresponse()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()


def call(
    name: str, arguments: dict[str, Any] | None = None, id: int = 1, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


def sse_events(body: bytes) -> list[dict[str, Any]]:
    events = []
    for block in body.decode().split("\n\n"):
        lines = block.strip().splitlines()
        if not lines:
            continue
        assert lines[0] == "event: message", block
        events.append(json.loads("".join(line.removeprefix("data: ") for line in lines[1:])))
    return events


def test_tools_list_over_post_is_json(sandbox: SandboxGateway) -> None:
    with running(sandbox.url) as server:
        status, headers, body = post(connect(server), {"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
    assert status == 200 and headers["content-type"] == "application/json"
    reply = json.loads(body)
    assert reply["id"] == 7 and "get_wagers" in [t["name"] for t in reply["result"]["tools"]]


def test_healthz_needs_no_credential_and_names_the_version(sandbox: SandboxGateway) -> None:
    with running(sandbox.url) as server:
        conn = connect(server)
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        health = json.loads(resp.read())
    assert resp.status == 200 and health["status"] == "ok" and health["version"]


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_on_mcp_are_405_allow_post(sandbox: SandboxGateway, method: str) -> None:
    with running(sandbox.url) as server:
        conn = connect(server)
        conn.request(method, "/mcp")
        resp = conn.getresponse()
        resp.read()
    assert resp.status == 405 and resp.getheader("Allow") == "POST"


def test_notifications_and_client_responses_are_202_with_no_body(sandbox: SandboxGateway) -> None:
    with running(sandbox.url) as server:
        conn = connect(server)
        first = post(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        second = post(conn, {"jsonrpc": "2.0", "id": 3, "result": {}})
    assert first[0] == second[0] == 202
    assert first[2] == second[2] == b""


def test_other_paths_are_404(sandbox: SandboxGateway) -> None:
    with running(sandbox.url) as server:
        conn = connect(server)
        conn.request("POST", "/other", body=b"{}", headers=JSON_HEADERS)
        resp = conn.getresponse()
        resp.read()
    assert resp.status == 404


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        ({"Content-Type": "text/plain"}, b"{}", 415),
        ({"Accept": "text/html"}, b"{}", 406),
        ({}, b"x" * (1024 * 1024 + 1), 413),
    ],
)
def test_refusals_keep_the_keep_alive_connection_in_step(
    sandbox: SandboxGateway, headers: dict[str, str], body: bytes, status: int
) -> None:
    with running(sandbox.url) as server:
        conn = connect(server)
        refused = post(conn, None, headers, raw=body)
        assert refused[0] == status
        if status == 413:
            conn = connect(server)  # an oversized body is not drained: that connection is closed
        ok = post(conn, {"jsonrpc": "2.0", "id": 9, "method": "ping"})
    assert ok[0] == 200 and json.loads(ok[2]) == {"jsonrpc": "2.0", "id": 9, "result": {}}


def test_malformed_json_is_400_with_parse_error(sandbox: SandboxGateway) -> None:
    with running(sandbox.url) as server:
        status, _, body = post(connect(server), None, raw=b'{"jsonrpc": "2.0", "id": 1,')
    assert status == 400
    assert json.loads(body)["error"]["code"] == -32700 and json.loads(body)["id"] is None


def test_progress_token_turns_the_answer_into_sse_frames(sandbox: SandboxGateway) -> None:
    with running(sandbox.url) as server:
        status, headers, body = post(connect(server), call("get_gateway_status", meta={"progressToken": "tok-1"}, id=4))
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = sse_events(body)
    assert events[0]["method"] == "notifications/progress"
    assert events[0]["params"]["progressToken"] == "tok-1"
    assert events[0]["params"]["message"] == "Reading the gateway's status…"
    assert events[-1]["id"] == 4 and events[-1]["result"]["isError"] is False
    assert all("method" in e for e in events[:-1])


def test_without_progress_the_same_call_is_plain_json(sandbox: SandboxGateway) -> None:
    with running(sandbox.url) as server:
        status, headers, body = post(connect(server), call("get_gateway_status"))
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(body)["result"]["structuredContent"]


def test_allowed_origin_gets_cors_headers_and_a_preflight(sandbox: SandboxGateway) -> None:
    origin = "https://app.fairwins.example"
    with running(sandbox.url, origins=(origin,)) as server:
        conn = connect(server)
        conn.request("OPTIONS", "/mcp", headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
        pre = conn.getresponse()
        pre.read()
        status, headers, _ = post(conn, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"Origin": origin})
    assert pre.status == 204 and pre.getheader("Access-Control-Allow-Origin") == origin
    assert "PAYMENT-SIGNATURE" in (pre.getheader("Access-Control-Allow-Headers") or "")
    assert status == 200 and headers["access-control-allow-origin"] == origin
    assert "PAYMENT-RESPONSE" in headers["access-control-expose-headers"]


def test_foreign_origin_and_rebinding_host_are_refused(sandbox: SandboxGateway) -> None:
    with running(sandbox.url) as server:
        foreign = post(
            connect(server), None, {"Origin": "https://evil.example", "Content-Type": "text/plain"}, raw=b"{}"
        )
        rebound = post(
            connect(server), {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"Host": "evil.example:80"}
        )
    assert foreign[0] == 403 and refusal(foreign[2])[0] == "origin_not_allowed"
    assert rebound[0] == 403 and b"get_wagers" not in rebound[2]


def test_a_request_header_token_wins_over_the_env_token_per_request(sandbox: SandboxGateway) -> None:
    with running(sandbox.url, env_bearer=TOKEN_MEMBER_B) as server:

        def profile(token: str | None) -> str:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            _, _, body = post(connect(server), call("get_profile"), headers)
            return str(json.loads(body)["result"]["structuredContent"]["account"])

        with ThreadPoolExecutor(8) as pool:
            asked = [TOKEN_MEMBER_A, TOKEN_MEMBER_B] * 8
            accounts = list(pool.map(profile, asked))
        fallback = profile(None)
    assert accounts == [ACCOUNT_A if t == TOKEN_MEMBER_A else ACCOUNT_B for t in asked]
    assert fallback == ACCOUNT_B
    sent = [r.header("Authorization") for r in sandbox.seen if r.path == "/v1/member/me"]
    assert sent.count(f"Bearer {TOKEN_MEMBER_A}") == 8 and sent.count(f"Bearer {TOKEN_MEMBER_B}") == 9


def test_a_non_bearer_authorization_is_refused_not_ignored(sandbox: SandboxGateway) -> None:
    with running(sandbox.url, env_bearer=TOKEN_MEMBER_B) as server:
        status, _, body = post(connect(server), call("get_profile"), {"Authorization": "Basic dXNlcjpwdw=="})
    assert status == 400 and refusal(body, 1)[0] == "bad_authorization"
    assert not [r for r in sandbox.seen if r.path == "/v1/member/me"]


def test_a_bearer_that_is_not_visible_ascii_is_refused_and_nothing_is_sent(sandbox: SandboxGateway) -> None:
    with running(sandbox.url) as server:
        for token in ("fw1.caf\u00e9-1234", "fw1.tab\there"):
            headers = {"Authorization": "Bearer " + token}
            status, _, body = post(connect(server), call("get_profile"), headers)
            assert status == 400 and refusal(body, 1)[0] == "bad_authorization", token
    assert not [r for r in sandbox.seen if r.path == "/v1/member/me"]


def test_a_bearer_is_taken_exactly_when_each_of_its_characters_is_visible_ascii() -> None:
    # Every character a header may carry (read as Latin-1), inside a token: only 0x21-0x7E pass.
    for code in range(256):
        token = f"fw1.a{chr(code)}b"
        taken = routes._credential(None, {"authorization": f"Bearer {token}"})  # type: ignore[arg-type]
        assert (taken is not None) == (0x21 <= code <= 0x7E), hex(code)
        assert taken is None or taken == (token, "header")


def test_beyond_the_concurrency_bound_the_answer_is_503_with_retry_after(sandbox: SandboxGateway) -> None:
    # Longer than a request over the bound waits for a slot: the slot stays taken past the wait.
    sandbox.fault("/status", "delay", seconds=SLOT_WAIT + 3, times=1)
    with running(sandbox.url, max_concurrency=1) as server:
        with ThreadPoolExecutor(1) as pool:
            slow = pool.submit(post, connect(server), call("get_gateway_status"))
            sandbox.wait_for_requests(1, timeout=5)
            status, headers, _ = post(connect(server), call("get_perps_pairs"))
            assert slow.result(timeout=10)[0] == 200
    assert status == 503 and headers["retry-after"] == "1"


def test_a_client_that_never_finishes_its_headers_is_cut_off_while_others_are_served(sandbox: SandboxGateway) -> None:
    with running(sandbox.url, read_timeout=1.0) as server:
        stalled = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10)
        stalled.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Len")
        ok = post(connect(server), {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        started = time.monotonic()
        received = b""
        while chunk := stalled.recv(1024):  # until the server closes it
            received += chunk
        waited = time.monotonic() - started
        stalled.close()
    assert ok[0] == 200
    assert received == b"" or received.startswith(b"HTTP/1.1 408 "), received
    assert waited < 5


def test_a_batch_is_answered_as_a_batch_under_2025_03_26_only(sandbox: SandboxGateway) -> None:
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    with running(sandbox.url) as server:
        ok = post(connect(server), batch, {"MCP-Protocol-Version": "2025-03-26"})
        refused = post(connect(server), batch, {"MCP-Protocol-Version": "2025-06-18"})
    assert ok[0] == 200 and [r["id"] for r in json.loads(ok[2])] == [1, 2]
    assert refused[0] == 400 and json.loads(refused[2])["error"]["code"] == -32600


def test_closing_the_sse_stream_cancels_the_call(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "delay", seconds=3.0, times=1)
    with running(sandbox.url) as server:
        sock = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10)
        body = json.dumps(call("get_gateway_status", meta={"progressToken": 1})).encode()
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Accept: text/event-stream\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        first = sock.recv(4096)
        assert b"text/event-stream" in first
        sandbox.wait_for_requests(1, timeout=5)
        started = time.monotonic()
        sock.close()
        while server._inflight and time.monotonic() - started < 5:
            time.sleep(0.01)
        assert server._inflight == 0
        assert time.monotonic() - started < 2.5, "the gateway wait should stop when the client leaves"


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    full_env = {**{k: v for k, v in os.environ.items() if not k.startswith("FAIRWINS")}, **env}
    return subprocess.Popen(
        [sys.executable, "-m", "mcp_server", *args],
        cwd=ROOT,
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_url(proc: subprocess.Popen[str], lines: list[str]) -> str:
    assert proc.stderr is not None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if "listening on " in line:
            return line.split("listening on ", 1)[1].split()[0]
    raise AssertionError("no listening line: " + "".join(lines))


def test_the_env_token_with_http_refuses_to_boot() -> None:
    proc = run_cli(["--http", "0"], {"FAIRWINS_API_TOKEN": "fw1.canary-shared-token-0000"})
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "--allow-shared-token" in err and err.count("\n") == 1
    assert "canary" not in err


@SIGNAL_STOP
def test_port_zero_logs_the_url_and_sigterm_drains_in_flight_calls(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "delay", seconds=1.0, times=1)
    proc = run_cli(["--http", "0"], {"FAIRWINS_API_URL": sandbox.url})
    lines: list[str] = []
    try:
        url = wait_for_url(proc, lines)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        canary = "fw1.canary-header-token-9z9z"
        conn.request(
            "POST",
            "/mcp",
            body=json.dumps(call("get_gateway_status")),
            headers={**JSON_HEADERS, "Authorization": f"Bearer {canary}"},
        )
        sandbox.wait_for_requests(1, timeout=5)
        proc.send_signal(signal.SIGTERM)
        resp = conn.getresponse()
        answer = json.loads(resp.read())
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert resp.status == 200 and answer["result"]["isError"] is False
    assert proc.returncode == 0
    log = "".join(lines) + err
    assert "POST /mcp 200" in log  # one access line per request
    assert canary not in log and "canary" not in log
    assert out == ""
    record_output("test_http: --http 0 subprocess stderr", log)


def test_dockerfile_matches_the_cli() -> None:
    text = (ROOT / "Dockerfile").read_text()
    cmd_line = next(line for line in text.splitlines() if line.startswith("CMD "))
    shell, flag, script = json.loads(cmd_line.removeprefix("CMD "))
    assert (shell, flag) == ("sh", "-c")
    # The shell is there only to read PORT (Cloud Run sets it), then gives PID 1 to the server.
    port = re.search(r"^ENV .*\bPORT=(\d+)", text, re.MULTILINE)
    assert port is not None
    argv = [port.group(1) if word == "$PORT" else word for word in shlex.split(script)]
    assert argv[:2] == ["exec", "fairwins-mcp"]
    from mcp_server.setup.config import argument_parser

    args = argument_parser().parse_args(argv[2:])
    assert args.http == 8790 and args.host == "0.0.0.0"
    assert "EXPOSE 8790" in text
    assert "/healthz" in next(line for line in text.splitlines() if line.startswith("HEALTHCHECK"))
    assert any(line.startswith("USER ") and "root" not in line for line in text.splitlines())
    assert text.splitlines()[0].startswith("FROM python:3.") and "-slim" in text.splitlines()[0]
    assert "--no-index" in text  # installed without the network
