"""No token and no payment ever leaves the server except where it must go: the gateway, once.

Every tool, failure, resource and prompt, over the core and both transports (in-process and as
real processes), is driven with canary secrets (tests/secret_canaries.py): member tokens, a
token the gateway refuses, and x402 payments in `_meta` and in HTTP headers. Everything the
server said (results, errors, notifications, HTTP answers and headers, log records, stdout and
stderr) is scanned for them; only a token's redacted form (`fw1.…abcd`) may appear. The whole
run is scanned too, by the hooks conftest.py imports; `test_the_whole_run_so_far_leaked_nothing`
checks what every earlier test module left.
"""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher
from mcp_server.ops import logs
from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.server import McpHTTPServer
from mcp_server.upstream.gateway import GatewayRequest
from mcp_server.wire.versions import META_CAPABILITIES, META_LOG_LEVEL, META_VERSION
from mcp_server.wire.x402 import Payment
from tests.conftest import ROOT, SIGNAL_STOP, McpClient, client_for, run_stdio, server_env
from tests.samples import VALID_ARGUMENTS
from tests.sandbox_gateway import FAULT_KINDS, TOKEN_EXPIRED, TOKEN_MEMBER_A, TOKEN_PROFILE_ONLY, SandboxGateway
from tests.secret_canaries import CANARY_TOKEN, RECORDER, canary_payment, header_value, record_output, secrets

WAIT = 20.0
PAYMENT_META = "x402/payment"
TOKENS = (CANARY_TOKEN, TOKEN_MEMBER_A, TOKEN_PROFILE_ONLY, TOKEN_EXPIRED, None)
MEMBER_PATHS = (
    "/v1/member/wagers",
    "/v1/member/fees",
    "/v1/member/intents/build",
    "/v1/member/me",
    "/v1/member/membership",
)


def assert_clean(texts: list[tuple[str, str]]) -> None:
    leaks = RECORDER.leaks(texts)
    assert not leaks, "\n".join(leaks)


class Collected:
    """What the server said in one test: wire messages, notifications, HTTP heads; plus the log records since."""

    def __init__(self) -> None:
        self.mark = RECORDER.mark()
        self.texts: list[tuple[str, str]] = []

    def add(self, where: str, value: Any) -> None:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        self.texts.append((where, text))

    def check(self) -> None:
        records = RECORDER.since(self.mark)
        assert_clean(self.texts + records)


def everything(mcp: McpClient, out: Collected, token: str | None, sent: list[dict[str, Any]]) -> None:
    """Every method of the server with `token`, and every tool with and without a canary payment."""

    def ask(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        ctx = RequestContext(bearer=token, bearer_source="env" if token else "none", send=sent.append)
        reply = mcp.request(method, params or {}, ctx=ctx)
        out.add(f"{method} with token {token and token[-4:]}", reply)
        return reply

    ask("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    ask("logging/setLevel", {"level": "debug"})
    tools = ask("tools/list")["result"]["tools"]
    for tool in tools:
        name = tool["name"]
        valid = VALID_ARGUMENTS.get(name, {})
        progress = {"progressToken": f"p-{name}"}
        ask("tools/call", {"name": name, "arguments": valid, "_meta": progress})
        # (A secret the client itself writes into an argument or a URI is echoed like any text:
        # that is the client's own input, not the credential the server carries.)
        ask("tools/call", {"name": name, "arguments": {**valid, "unexpected": 1}})
        ask("tools/call", {"name": name, "arguments": {"chainId": "x"}})
        for version in (1, 2):
            ask("tools/call", {"name": name, "arguments": valid, "_meta": {PAYMENT_META: canary_payment(version)}})
        broken = {**canary_payment(2), "x402Version": 3}
        ask("tools/call", {"name": name, "arguments": valid, "_meta": {PAYMENT_META: broken}})
    for resource in ask("resources/list")["result"]["resources"]:
        ask("resources/read", {"uri": resource["uri"]})
    ask("resources/read", {"uri": "fairwins://nothing-here"})
    ask("resources/templates/list")
    for prompt in ask("prompts/list")["result"]["prompts"]:
        ask("prompts/get", {"name": prompt["name"], "arguments": {}})
        ask("prompts/get", {"name": prompt["name"], "arguments": {"chainId": "137"}})
    ask(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "wager-review"}, "argument": {"name": "chainId", "value": ""}},
    )
    modern = {META_VERSION: "2026-07-28", META_CAPABILITIES: {}, META_LOG_LEVEL: "debug", "progressToken": "m"}
    ask("server/discover", {"_meta": modern})
    ask("tools/call", {"name": "get_wagers", "arguments": {}, "_meta": modern})
    ask("tools/call", {"name": "get_fees", "arguments": {}, "_meta": {**modern, PAYMENT_META: canary_payment(2)}})


def test_every_tool_resource_and_prompt_leaks_nothing(sandbox: SandboxGateway) -> None:
    out = Collected()
    sent: list[dict[str, Any]] = []
    for token in TOKENS:
        everything(client_for(sandbox.url), out, token, sent)
    out.add("notifications", sent)
    out.check()
    # The canaries were really used: the gateway received the token and the payments, and so
    # the scan above looked where they could have gone.
    received = [r.header("Authorization") for r in sandbox.seen] + [r.header("PAYMENT-SIGNATURE") for r in sandbox.seen]
    assert f"Bearer {CANARY_TOKEN}" in received and header_value(canary_payment(2)) in received
    assert any(m.get("method") == "notifications/progress" for m in sent)


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_every_gateway_fault_leaks_nothing(sandbox: SandboxGateway, kind: str) -> None:
    by_kind: dict[str, dict[str, Any]] = {
        "trickle": {"interval": 0.05},
        "delay": {"seconds": 1.0},
        "status": {"status": 401},
        "redirect": {"location": "http://localhost:9/steal"},
        "raw": {"head": b"HTTP/1.1 502 Bad\r\nContent-Length: 2\r\n\r\n", "body": b"{}"},
    }
    params = by_kind.get(kind, {})
    out = Collected()
    mcp = client_for(sandbox.url, timeout=0.3)
    for path in MEMBER_PATHS:
        sandbox.fault(path, kind, **params)
    slow = kind in ("delay", "trickle")  # each call waits out its deadline: once per kind of route is enough
    calls: list[tuple[str, dict[str, Any]]] = [("get_wagers", {}), ("build_intent", VALID_ARGUMENTS["build_intent"])]
    if not slow:
        calls += [("get_fees", {}), ("get_profile", {})]
    for name, arguments in calls:
        for token in (CANARY_TOKEN,) if slow else (CANARY_TOKEN, TOKEN_MEMBER_A):
            ctx = RequestContext(bearer=token, bearer_source="env")
            out.add(f"{name} under {kind}", mcp.request("tools/call", {"name": name, "arguments": arguments}, ctx=ctx))
        for version in (2,) if slow else (1, 2):
            meta = {PAYMENT_META: canary_payment(version)}
            reply = mcp.request("tools/call", {"name": name, "arguments": arguments, "_meta": meta})
            out.add(f"paid {name} under {kind}", reply)
    out.check()


def test_a_gateway_that_quotes_the_token_back_is_not_echoed(sandbox: SandboxGateway) -> None:
    # A gateway (or a proxy in front of it) that writes the credential into its error message:
    # the server quotes gateway messages in its sentences, but never the credential it sent.
    out = Collected()
    mcp = client_for(sandbox.url, timeout=0.5)  # a Retry-After of 1 s does not fit: no waiting
    for status in (400, 401, 403, 404, 429, 503):
        for path in MEMBER_PATHS:
            body = {"error": "nope", "message": f"rejected Bearer {CANARY_TOKEN} and {header_value(canary_payment(2))}"}
            sandbox.fault(path, "status", status=status, body=body, times=None)
        for name in ("get_wagers", "get_profile", "build_intent"):
            arguments = VALID_ARGUMENTS.get(name, {})
            ctx = RequestContext(bearer=CANARY_TOKEN, bearer_source="env")
            out.add(f"{name} {status}", mcp.request("tools/call", {"name": name, "arguments": arguments}, ctx=ctx))
            meta = {PAYMENT_META: canary_payment(2)}
            out.add(
                f"paid {name} {status}",
                mcp.request("tools/call", {"name": name, "arguments": arguments, "_meta": meta}),
            )
    out.check()


def test_a_redirect_carries_neither_the_token_nor_a_payment_anywhere(sandbox: SandboxGateway) -> None:
    out = Collected()
    with SandboxGateway() as elsewhere:
        for path in MEMBER_PATHS:
            sandbox.fault(path, "redirect", status=307, location=f"{elsewhere.url}{path}")
        mcp = client_for(sandbox.url)
        for name in ("get_wagers", "get_fees", "build_intent"):
            arguments = VALID_ARGUMENTS.get(name, {})
            ctx = RequestContext(bearer=CANARY_TOKEN, bearer_source="env")
            out.add(name, mcp.request("tools/call", {"name": name, "arguments": arguments}, ctx=ctx))
            meta = {PAYMENT_META: canary_payment(2)}
            out.add(f"paid {name}", mcp.request("tools/call", {"name": name, "arguments": arguments, "_meta": meta}))
        with http_server(sandbox.url) as server:
            headers = {"Authorization": f"Bearer {CANARY_TOKEN}", "X-PAYMENT": header_value(canary_payment(1))}
            _, head, body = post(server, tool_call("get_wagers"), headers)
            out.add("http redirect", body.decode())
        assert elsewhere.seen == [], "a redirect was followed"
    # 307 asks the client to repeat the request, credentials and all, elsewhere: it is reported instead.
    assert all("redirect" in text for where, text in out.texts), out.texts
    out.add("http redirect head", head)
    out.check()


# ---- the HTTP transport ---------------------------------------------------------------------------


@contextmanager
def http_server(gateway_url: str, *, env_bearer: str | None = None) -> Iterator[McpHTTPServer]:
    from tests.mcp_http import serving

    dispatcher: Dispatcher = build_dispatcher(Config(api_url=gateway_url, timeout=2.0))
    policy = gate.Policy(loopback_bind=True, max_body=64 * 1024)
    with serving(dispatcher, policy, env_bearer=env_bearer, read_timeout=5.0) as server:
        yield server


def tool_call(name: str, meta: dict[str, Any] | None = None, message_id: int = 1) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": VALID_ARGUMENTS.get(name, {})}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": message_id, "method": "tools/call", "params": params}


def post(
    server: McpHTTPServer, message: Any, headers: dict[str, str], raw: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=WAIT)
    try:
        body = raw if raw is not None else json.dumps(message).encode()
        base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        conn.request("POST", "/mcp", body=body, headers={**base, **headers})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def test_the_http_transport_leaks_nothing(sandbox: SandboxGateway) -> None:
    out = Collected()
    v1, v2 = header_value(canary_payment(1)), header_value(canary_payment(2))
    cases: list[tuple[str, dict[str, Any] | None, dict[str, str], bytes | None]] = []
    for token in (CANARY_TOKEN, TOKEN_MEMBER_A):
        bearer = {"Authorization": f"Bearer {token}"}
        cases += [
            ("tools/list", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, bearer, None),
            ("wagers", tool_call("get_wagers"), bearer, None),
            ("wagers sse", tool_call("get_wagers", {"progressToken": 1}), bearer, None),
            ("profile", tool_call("get_profile"), bearer, None),
            (
                "status resource",
                {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "fairwins://status"}},
                bearer,
                None,
            ),
            ("basic", tool_call("get_profile"), {"Authorization": f"Basic {token}"}, None),
            ("two words", tool_call("get_profile"), {"Authorization": f"Bearer {token} {token}"}, None),
            ("foreign origin", tool_call("get_profile"), {**bearer, "Origin": "https://evil.example"}, None),
            ("wrong type", tool_call("get_profile"), {**bearer, "Content-Type": "text/plain"}, None),
            ("too large", None, bearer, b'{"pad":"' + token.encode() * 5000 + b'"}'),
            ("parse error", None, bearer, b'{"token":"' + token.encode()),
            ("paid v1 header", tool_call("get_wagers"), {**bearer, "X-PAYMENT": v1}, None),
            ("paid v2 header", tool_call("build_intent"), {"PAYMENT-SIGNATURE": v2}, None),
            ("paid unpriced", tool_call("get_profile"), {"PAYMENT-SIGNATURE": v2}, None),
            ("two payment headers", tool_call("get_fees"), {"X-PAYMENT": v1, "PAYMENT-SIGNATURE": v2}, None),
            (
                "header and meta differ",
                tool_call("get_fees", {PAYMENT_META: canary_payment(1)}),
                {"PAYMENT-SIGNATURE": v2},
                None,
            ),
            ("payment not base64", tool_call("get_fees"), {"X-PAYMENT": f"{v1}!{token}"}, None),
            ("meta payment", tool_call("get_fees", {PAYMENT_META: canary_payment(2)}), bearer, None),
        ]
    with http_server(sandbox.url, env_bearer=TOKEN_PROFILE_ONLY) as server:
        statuses = {}
        for where, message, headers, raw in cases:
            status, head, body = post(server, message, headers, raw)
            statuses[where] = status
            out.add(f"http {where}: status and headers", head)
            out.add(f"http {where}: body", body.decode("utf-8", "replace"))
        status, head, body = post(server, tool_call("get_profile"), {})  # the env token, never echoed either
        out.add("http env token", body.decode())
    assert statuses["basic"] == 400 and statuses["too large"] == 413 and statuses["wagers"] == 200
    assert any(where.startswith("log record fairwins_mcp.access") for where, _ in RECORDER.since(out.mark))
    out.check()


# ---- real processes: stdout and stderr ---------------------------------------------------------------


def test_a_stdio_process_with_a_canary_token_writes_only_its_redacted_form(sandbox: SandboxGateway) -> None:
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
        },
        {"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "debug"}},
    ]
    for n, name in enumerate(("get_wagers", "get_fees", "get_profile", "build_intent", "get_gateway_status")):
        lines.append(tool_call(name, {"progressToken": n}, message_id=10 + n))
        lines.append(tool_call(name, {PAYMENT_META: canary_payment(2)}, message_id=20 + n))
        lines.append(tool_call(name, {PAYMENT_META: {**canary_payment(1), "x402Version": "1"}}, message_id=30 + n))
    lines.append({"jsonrpc": "2.0", "id": 40, "method": "resources/read", "params": {"uri": "fairwins://status"}})
    sandbox.fault("/v1/member/fees", "redirect")
    sandbox.fault("/v1/member/me", "reset_mid_body")
    proc = run_stdio(
        lines, FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=CANARY_TOKEN, FAIRWINS_MCP_LOG_LEVEL="debug"
    )
    assert proc.returncode == 0
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len([a for a in answers if "id" in a]) == len(lines)
    stderr = proc.stderr.decode()
    assert logs.redact(CANARY_TOKEN) in stderr  # the start-up line names the token, redacted
    assert_clean([("stdio stdout", proc.stdout.decode()), ("stdio stderr", stderr)])
    assert any(r.header("Authorization") == f"Bearer {CANARY_TOKEN}" for r in sandbox.seen)


@SIGNAL_STOP
def test_an_http_process_with_a_shared_canary_token_writes_only_its_redacted_form(sandbox: SandboxGateway) -> None:
    env = server_env(FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=CANARY_TOKEN, FAIRWINS_MCP_LOG_LEVEL="debug")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_server", "--http", "0", "--allow-shared-token"],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    head: list[bytes] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + WAIT
        port = 0
        while not port and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, b"".join(head).decode()
            head.append(line)
            if b"listening on " in line:
                port = int(line.split(b"listening on ", 1)[1].split(b"/mcp")[0].rsplit(b":", 1)[1])
        bodies = []
        for headers in (
            {},
            {"Authorization": f"Bearer {TOKEN_MEMBER_A}"},
            {"Authorization": f"Bearer {TOKEN_MEMBER_A}", "X-PAYMENT": header_value(canary_payment(1))},
            {"PAYMENT-SIGNATURE": header_value(canary_payment(2))},
            {"Authorization": f"Token {CANARY_TOKEN}"},
        ):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
            conn.request(
                "POST",
                "/mcp",
                body=json.dumps(tool_call("get_wagers")),
                headers={"Content-Type": "application/json", **headers},
            )
            resp = conn.getresponse()
            bodies.append(json.dumps(resp.getheaders()) + resp.read().decode())
            conn.close()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=WAIT)
    stderr = (b"".join(head) + err).decode()
    record_output("http process stdout", out)
    record_output("http process stderr", stderr)
    assert proc.returncode == 0 and out == b""
    assert logs.redact(CANARY_TOKEN) in stderr
    assert_clean([("http stderr", stderr), *(("http answer", body) for body in bodies)])


# ---- values that could be printed ----------------------------------------------------------------------


def test_no_object_that_holds_a_secret_shows_it_in_its_repr() -> None:
    payment = Payment("PAYMENT-SIGNATURE", header_value(canary_payment(2)))
    shown = [
        repr(Config(api_url="http://x", api_token=CANARY_TOKEN)),
        repr(RequestContext(bearer=CANARY_TOKEN, payment=payment)),
        repr(GatewayRequest("GET", "/v1/member/wagers", bearer=CANARY_TOKEN)),
        repr(GatewayRequest("GET", "/v1/member/wagers", payment=payment)),
        repr(payment),
        logs.redact(CANARY_TOKEN),
    ]
    assert_clean([("repr", text) for text in shown])
    assert logs.redact(CANARY_TOKEN) == "fw1.…Zq7x"


def test_the_scan_finds_a_planted_secret() -> None:
    # The detector itself: each canary, planted in a text, is found; the redacted form is not.
    for name, secret in secrets().items():
        assert RECORDER.leaks([("planted", f"before {secret} after")]), name
    assert not RECORDER.leaks([("redacted", f"token {logs.redact(CANARY_TOKEN)} and {logs.redact(TOKEN_MEMBER_A)}")])


def test_the_whole_run_so_far_leaked_nothing() -> None:
    # Every fairwins_mcp log record and every captured server output of the test modules that ran
    # before this one (the session hook checks the rest when the run ends).
    assert RECORDER.records > 0
    leaks = RECORDER.leaks()
    assert not leaks, "\n".join(leaks)
