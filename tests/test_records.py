"""Operators can see what the server does: one record per MCP message, metrics, W3C trace context.

Real parts throughout: the sandbox gateway (which keeps every request it saw, headers included),
the stdio server as a process, the HTTP server on 127.0.0.1:0 in-process and as a process.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

from assistant_contract.answers import FAILURE_KINDS as CONTRACT_FAILURE_KINDS
from mcp_server.core.context import RequestContext
from mcp_server.ops import logs
from mcp_server.ops.metrics import CONTENT_TYPE, ServerMetrics
from mcp_server.ops.records import CLIENT_TEXT, FAILURE_KINDS, Record
from mcp_server.ops.tracecontext import parse_traceparent
from mcp_server.setup.config import Config, ConfigError, from_env, parse_args
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.admission import SLOT_WAIT
from mcp_server.transports.http.server import McpHTTPServer
from mcp_server.wire.jsonrpc import Request
from mcp_server.wire.versions import META_CAPABILITIES, META_CLIENT_INFO, META_VERSION
from tests.conftest import PROMETHEUS, SIGNAL_STOP, McpClient, StdioProcess, client_for, server_env
from tests.mcp_http import serving
from tests.sandbox_gateway import ACCOUNT_A, TOKEN_MEMBER_A, SandboxGateway, SeenRequest
from tests.secret_canaries import CANARY_TOKEN, canary_payment, header_value, record_output
from tests.test_http import run_cli, wait_for_url
from tests.test_metrics import promtool_check

WAIT = 15.0
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"
TRACESTATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
CLIENT = {"name": "Record Test Client", "version": "1.2.3"}
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
# Strings no record may ever hold: an argument value, a gateway body, and a member's own data
# (the sandbox's data for member A). Tokens and payments are watched for by the whole run.
ARGUMENT_CANARY = "ARGUMENT-CANARY-5e1f"
BODY_CANARY = "GATEWAY-BODY-CANARY-77aa"
MEMBER_DATA = (ACCOUNT_A, "Lakers beat the Celtics", "w-a-1", "gold")


def request(rid: int | str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}


def tool_call(rid: int, name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    return request(rid, "tools/call", params)


def initialize(rid: int = 1) -> dict[str, Any]:
    return request(rid, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT})


def modern_meta(**extra: Any) -> dict[str, Any]:
    return {META_VERSION: "2026-07-28", META_CAPABILITIES: {}, META_CLIENT_INFO: CLIENT, **extra}


def access_records(stderr: str) -> list[dict[str, Any]]:
    """The per-message records of a JSON-format process's stderr (every line must be JSON)."""
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    return [line for line in lines if line["logger"] == "fairwins_mcp.access"]


def stdio_run(sandbox: SandboxGateway, messages: list[dict[str, Any] | bytes], *args: str, **env: str) -> str:
    """Run the stdio server as a process over `messages`, then EOF; its stderr once it has exited."""
    argv = [sys.executable, "-m", "mcp_server", *args]
    process = StdioProcess(argv, server_env(FAIRWINS_API_URL=sandbox.url, FAIRWINS_MCP_TIMEOUT="2", **env))
    try:
        for message in messages:
            process.send_raw(message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n")
        process.close_stdin()
        assert process.wait(WAIT) == 0, process.stderr
        return process.stderr
    finally:
        process.kill()


def gateway_trace(seen: SeenRequest) -> tuple[str, str, int]:
    parent = parse_traceparent(seen.header("traceparent"))
    assert parent is not None, seen.headers
    return parent.trace_id, parent.parent_id, parent.flags


# ---- records over stdio ----------------------------------------------------------------------------


def test_stdio_logs_one_json_record_per_message_with_what_was_asked_and_how_it_ended(sandbox: SandboxGateway) -> None:
    messages: list[dict[str, Any] | bytes] = [
        initialize(1),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        tool_call(2, "get_wagers", traceparent=TRACEPARENT, tracestate=TRACESTATE),
        tool_call(3, "get_fees", {"chainId": "not a number"}),
        tool_call(4, "no_such_tool"),
        b"this is not json\n",
        request("six", "ping"),
    ]
    stderr = stdio_run(sandbox, messages, "--log-format", "json", FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    everything = [json.loads(line) for line in stderr.splitlines()]
    assert all(TIME.match(e["time"]) and e["severity"] in ("INFO", "DEBUG") for e in everything)
    records = access_records(stderr)
    assert len(records) == len(messages)  # one per message, notifications and garbage included
    by_id = {r["rpcId"]: r for r in records if "rpcId" in r}

    init = by_id[1]
    assert (init["method"], init["outcome"], init["revision"]) == ("initialize", "result", "2025-11-25")
    assert init["client"] == CLIENT and init["transport"] == "stdio"
    assert [r for r in records if "client" in r] == [init]

    call = by_id[2]
    assert (call["method"], call["tool"], call["outcome"]) == ("tools/call", "get_wagers", "result")
    (upstream,) = call["upstream"]
    assert upstream["status"] == 200 and upstream["attempt"] == 1
    assert 0 < upstream["durationMs"] <= call["durationMs"]
    assert (call["traceId"], call["parentSpanId"], call["traceFrom"]) == (TRACE, PARENT, "meta")
    assert call["logging.googleapis.com/spanId"] == call["spanId"] and call["logging.googleapis.com/trace_sampled"]
    assert call["message"].startswith("tools/call tool=get_wagers outcome=result ")

    invalid = by_id[3]
    assert (invalid["outcome"], invalid["failure"], invalid["tool"]) == ("tool_error", "invalid_arguments", "get_fees")
    assert "upstream" not in invalid
    assert (by_id[4]["outcome"], by_id[4]["errorCode"], by_id[4]["tool"]) == ("error", -32602, "(unknown)")
    (garbage,) = [r for r in records if r.get("errorCode") == -32700]
    assert (garbage["outcome"], garbage["message"]) == ("error", garbage["message"])
    assert garbage["message"].startswith("(unreadable) outcome=error code=-32700 ")
    assert by_id["six"]["method"] == "ping" and by_id["six"]["outcome"] == "result"
    assert [r["method"] for r in records if r.get("outcome") == "accepted"] == ["notifications/initialized"]

    (seen,) = [s for s in sandbox.seen if s.path == "/v1/member/wagers"]
    assert gateway_trace(seen) == (TRACE, upstream["spanId"], 0x01)
    assert upstream["spanId"] not in (PARENT, call["spanId"])  # a span of its own for the upstream call
    assert seen.header_values("tracestate") == [TRACESTATE]


def test_a_modern_stdio_session_names_its_client_once(sandbox: SandboxGateway) -> None:
    messages: list[dict[str, Any] | bytes] = [request(n, "tools/list", {"_meta": modern_meta()}) for n in (1, 2, 3)]
    records = access_records(stdio_run(sandbox, messages, "--log-format", "json"))
    assert [(r["revision"], r["era"]) for r in records] == [("2026-07-28", "modern")] * 3
    assert [r.get("client") for r in records] == [CLIENT, None, None]


def test_the_text_form_is_one_greppable_line_per_message(sandbox: SandboxGateway) -> None:
    stderr = stdio_run(
        sandbox,
        [initialize(1), tool_call(2, "get_wagers"), tool_call(3, "get_profile")],
        FAIRWINS_API_TOKEN=TOKEN_MEMBER_A,
    )
    lines = [line for line in stderr.splitlines() if " INFO fairwins_mcp.access: " in line]
    assert len(lines) == 3, stderr
    assert re.search(
        r" initialize outcome=result ms=\S+ rev=2025-11-25 client=\"Record Test Client/1\.2\.3\" id=1$", lines[0]
    )
    tools = set()
    for line in lines[1:]:  # calls run concurrently: in either order
        match = re.search(
            r" tools/call tool=(\w+) outcome=result ms=[\d.]+ rev=2025-11-25 upstream=200/[\d.]+ms "
            r"id=\d trace=([0-9a-f]{32}) span=[0-9a-f]{16}$",
            line,
        )
        assert match, line
        tools.add(match[1])
        assert match[2] in {gateway_trace(s)[0] for s in sandbox.seen}  # the gateway's log joins on it
    assert tools == {"get_wagers", "get_profile"}


# ---- trace context to the gateway ------------------------------------------------------------------


def call_with(mcp: McpClient, record: Record, name: str = "get_wagers", **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {}}
    if meta:
        params["_meta"] = meta
    ctx = RequestContext(bearer=TOKEN_MEMBER_A, bearer_source="env", record=record)
    return mcp.request("tools/call", params, ctx=ctx)


def test_each_attempt_goes_upstream_with_a_new_span_in_the_callers_trace(sandbox: SandboxGateway) -> None:
    sandbox.fault("/v1/member/wagers", "status", status=503, times=1)
    record = Record("stdio")
    answer = call_with(client_for(sandbox.url), record, traceparent=TRACEPARENT, tracestate=TRACESTATE)
    assert answer["result"]["isError"] is False
    first, second = sandbox.wait_for_requests(2, timeout=WAIT)
    assert [a.status for a in record.attempts or ()] == [503, 200]
    assert [a.number for a in record.attempts or ()] == [1, 2]
    assert [gateway_trace(s) for s in (first, second)] == [(TRACE, a.span_id, 1) for a in record.attempts or ()]
    assert len({PARENT, record.trace.span_id, *(a.span_id for a in record.attempts or ())}) == 4
    assert first.header("tracestate") == second.header("tracestate") == TRACESTATE
    assert "upstream=503/" in str(record) and ",200/" in str(record)


def test_without_a_trace_the_server_starts_one_and_sends_it(sandbox: SandboxGateway) -> None:
    record = Record("stdio")
    call_with(client_for(sandbox.url), record)
    (seen,) = sandbox.wait_for_requests(1, timeout=WAIT)
    trace_id, span, flags = gateway_trace(seen)
    assert (trace_id, record.trace.source) == (record.trace.trace_id, "started")
    assert flags == 0x02 and seen.header("tracestate") is None  # random trace id, not sampled
    assert span == (record.attempts or [])[0].span_id


@pytest.mark.parametrize(
    "bad",
    [
        f"00-{TRACE.upper()}-{PARENT}-01",
        f"ff-{TRACE}-{PARENT}-01",
        f"00-{'0' * 32}-{PARENT}-01",
        f"00-{TRACE}-{PARENT}-01-extra",
        "garbage",
    ],
)
def test_an_invalid_trace_is_dropped_and_never_forwarded(sandbox: SandboxGateway, bad: str) -> None:
    record = Record("stdio")
    call_with(client_for(sandbox.url), record, traceparent=bad, tracestate=TRACESTATE)
    (seen,) = sandbox.wait_for_requests(1, timeout=WAIT)
    assert gateway_trace(seen)[0] == record.trace.trace_id != TRACE
    assert record.trace.source == "started"
    sent = json.dumps(seen.headers)
    assert bad not in sent and "congo" not in sent  # nor the tracestate that came with it


def test_resources_and_prompt_completions_forward_the_trace_too(sandbox: SandboxGateway) -> None:
    mcp = client_for(sandbox.url)
    for method, params in (
        ("resources/read", {"uri": "fairwins://status"}),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "wager-review"}, "argument": {"name": "chainId", "value": ""}},
        ),
    ):
        sandbox.clear_seen()
        record = Record("stdio")
        reply = mcp.request(
            method, {**params, "_meta": {"traceparent": TRACEPARENT}}, ctx=RequestContext(record=record)
        )
        assert "result" in reply, reply
        (seen,) = sandbox.wait_for_requests(1, timeout=WAIT)
        assert gateway_trace(seen) == (TRACE, (record.attempts or [])[0].span_id, 1)


def test_a_record_names_failures_as_the_contract_does_plus_a_price() -> None:
    assert FAILURE_KINDS == set(CONTRACT_FAILURE_KINDS) | {"price", "payment_rejected"}


def test_a_failed_resource_read_names_its_failure_kind(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "status", status=500, body={"message": BODY_CANARY})
    record = Record("stdio")
    reply = client_for(sandbox.url).request(
        "resources/read", {"uri": "fairwins://status"}, ctx=RequestContext(record=record)
    )
    assert reply["error"]["code"] == -32603
    assert (record.outcome, record.code, record.failure, record.name) == (
        "error",
        -32603,
        "gateway_error",
        "fairwins://status",
    )
    assert BODY_CANARY not in str(record) and BODY_CANARY not in json.dumps(record.fields())


# ---- records over HTTP --------------------------------------------------------------------------------


class Collected(logging.Handler):
    """The access records of an in-process server, formatted as --log-format json writes them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logs.JsonFormatter("demo-project"))
        self.lines: list[dict[str, Any]] = []
        self._cond = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._cond:
            self.lines.append(json.loads(self.format(record)))
            self._cond.notify_all()

    def wait(self, n: int) -> list[dict[str, Any]]:
        """The records once there are `n` (a record is written just after its answer is sent)."""
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.lines) >= n, WAIT), self.lines
            return list(self.lines)


@contextmanager
def http_server(
    sandbox: SandboxGateway, *, metrics: bool = True, timeout: float = 2.0, **options: Any
) -> Iterator[tuple[McpHTTPServer, Collected]]:
    dispatcher = build_dispatcher(Config(api_url=sandbox.url, timeout=timeout))
    registry = ServerMetrics((t.name for t in dispatcher.catalog.tools), "0.1.0") if metrics else None
    policy = gate.Policy(loopback_bind=True, max_body=64 * 1024, metrics=metrics)
    collected = Collected()
    logger = logging.getLogger("fairwins_mcp.access")
    logger.addHandler(collected)
    try:
        with serving(dispatcher, policy, metrics=registry, **options) as server:
            yield server, collected
    finally:
        logger.removeHandler(collected)


def post(
    server: McpHTTPServer, body: Any, headers: dict[str, str] | None = None, raw: bytes | None = None
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=WAIT)
    try:
        data = raw if raw is not None else json.dumps(body).encode()
        conn.request("POST", "/mcp", body=data, headers={**JSON_HEADERS, **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def get(server: McpHTTPServer, path: str) -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=WAIT)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type") or "", resp.read().decode()
    finally:
        conn.close()


def test_an_http_record_carries_cloud_loggings_http_request_and_the_header_trace(sandbox: SandboxGateway) -> None:
    with http_server(sandbox) as (server, collected):
        headers = {
            "Authorization": f"Bearer {TOKEN_MEMBER_A}",
            "traceparent": TRACEPARENT,
            "tracestate": TRACESTATE,
            "User-Agent": "record-test/1.0",
        }
        status, body = post(server, tool_call(7, "get_wagers"), headers)
        (record,) = collected.wait(1)
    assert status == 200
    assert record["httpRequest"] == {
        "requestMethod": "POST",
        "requestUrl": "/mcp",
        "status": 200,
        "latency": record["httpRequest"]["latency"],
        "protocol": "HTTP/1.1",
        "requestSize": str(len(json.dumps(tool_call(7, "get_wagers")))),
        "responseSize": str(len(body)),
        "userAgent": "record-test/1.0",
    }
    assert re.fullmatch(r"\d+\.\d{6}s", record["httpRequest"]["latency"])
    assert (record["method"], record["tool"], record["outcome"], record["rpcId"]) == (
        "tools/call",
        "get_wagers",
        "result",
        7,
    )
    assert (record["traceId"], record["traceFrom"], record["parentSpanId"]) == (TRACE, "header", PARENT)
    assert record["logging.googleapis.com/trace"] == f"projects/demo-project/traces/{TRACE}"
    assert record["message"].startswith("POST /mcp 200 tools/call tool=get_wagers outcome=result ")
    (seen,) = sandbox.seen
    assert gateway_trace(seen) == (TRACE, record["upstream"][0]["spanId"], 1)
    assert seen.header("tracestate") == TRACESTATE


def test_a_trace_in_meta_wins_over_the_http_header(sandbox: SandboxGateway) -> None:
    other = f"00-{'a' * 32}-{'b' * 16}-00"
    with http_server(sandbox) as (server, collected):
        post(server, tool_call(1, "get_perps_pairs", traceparent=TRACEPARENT), {"traceparent": other})
        post(server, tool_call(2, "get_perps_pairs"), {"traceparent": other, "tracestate": "h=1"})
        post(server, tool_call(3, "get_perps_pairs"), {"traceparent": other + ", " + other})  # twice: invalid
        records = {r["rpcId"]: r for r in collected.wait(3)}
    assert (records[1]["traceId"], records[1]["traceFrom"]) == (TRACE, "meta")
    assert (records[2]["traceId"], records[2]["traceFrom"]) == ("a" * 32, "header")
    assert records[3]["traceFrom"] == "started" and records[3]["traceId"] not in (TRACE, "a" * 32)
    assert [gateway_trace(s)[0] for s in sandbox.seen] == [TRACE, "a" * 32, records[3]["traceId"]]
    assert [s.header("tracestate") for s in sandbox.seen] == [None, "h=1", None]


def test_each_http_initialize_names_the_client(sandbox: SandboxGateway) -> None:
    with http_server(sandbox) as (server, collected):
        post(server, initialize(1))
        post(server, initialize(2))
        post(server, request(3, "tools/list"), {"MCP-Protocol-Version": "2025-11-25"})
        records = {r["rpcId"]: r for r in collected.wait(3)}
    assert records[1]["client"] == records[2]["client"] == CLIENT
    assert records[1]["revision"] == "2025-11-25" and "client" not in records[3]


def test_a_batch_logs_each_message_then_the_request(sandbox: SandboxGateway) -> None:
    with http_server(sandbox) as (server, collected):
        batch = [request(1, "ping"), request(2, "tools/list"), {"jsonrpc": "2.0", "method": "notifications/x"}]
        status, _ = post(server, batch, {"MCP-Protocol-Version": "2025-03-26"})
        records = collected.wait(4)
    assert status == 200
    assert [r.get("method") for r in records[:3]] == ["ping", "tools/list", "notifications/x"]
    assert records[3]["batch"] == 3 and records[3]["httpRequest"]["status"] == 200 and "method" not in records[3]


def test_refusals_are_logged_with_their_code_and_counted_busy_gate_size_and_timeout(sandbox: SandboxGateway) -> None:
    # Over the bound, a request waits SLOT_WAIT for a slot before it is refused: the call holding
    # the one slot must outlast that wait.
    sandbox.fault("/status", "delay", seconds=SLOT_WAIT + 3, times=1)
    with http_server(sandbox, max_concurrency=1, read_timeout=1.0, timeout=SLOT_WAIT + 5) as (server, collected):
        assert post(server, {}, {"Content-Type": "text/plain"})[0] == 415  # gate
        assert post(server, {}, {"Origin": "https://evil.example"})[0] == 403  # gate
        assert post(server, None, raw=b"x" * (65 * 1024))[0] == 413  # size
        with ThreadPoolExecutor(1) as pool:
            slow = pool.submit(post, server, tool_call(1, "get_gateway_status"))
            sandbox.wait_for_requests(1, timeout=WAIT)
            assert post(server, tool_call(2, "get_perps_pairs"))[0] == 503  # busy
            assert slow.result(timeout=WAIT)[0] == 200
        stalled = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=WAIT)
        stalled.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{"
        )
        assert stalled.recv(1024).startswith(b"HTTP/1.1 408 ")  # timeout
        stalled.close()
        records = collected.wait(6)
        metrics = get(server, "/metrics")[2]
    refused = sorted((r["httpRequest"]["status"], r["refusal"]) for r in records if "method" not in r)
    assert refused == [
        (403, "origin_not_allowed"),
        (408, "request_timeout"),
        (413, "body_too_large"),
        (415, "unsupported_media_type"),
        (503, "busy"),
    ]
    # The text form names it too, right after the status (the body is now a JSON-RPC error).
    assert all(
        f" {r['httpRequest']['status']} refused={r['refusal']} " in r["message"] for r in records if "refusal" in r
    )
    assert all("refusal" not in r for r in records if "method" in r)  # an MCP message's own errors are its code
    for reason, count in (("gate", 2), ("size", 1), ("busy", 1), ("timeout", 1), ("malformed", 0)):
        assert f'fairwins_mcp_http_refusals_total{{reason="{reason}"}} {count}\n' in metrics, reason


def test_a_request_refused_for_its_protocol_version_is_logged_as_the_json_rpc_error_it_got(
    sandbox: SandboxGateway,
) -> None:
    # Refused at the gate over MCP-Protocol-Version, yet answered as a JSON-RPC error once its body
    # is read: its record names the method, the id and the code, as every other such error's does.
    with http_server(sandbox) as (server, collected):
        old_wire = post(server, request(7, "tools/list"), {"MCP-Protocol-Version": "1999-01-01"})
        modern = request(8, "tools/list", {"_meta": {**modern_meta(), META_VERSION: "v999.0.0"}})
        headers = {"MCP-Protocol-Version": "v999.0.0", "Mcp-Method": "tools/list"}
        new_wire = post(server, modern, headers)
        no_body = post(server, None, {"MCP-Protocol-Version": "1999-01-01"}, raw=b"")
        records = collected.wait(3)
        metrics = get(server, "/metrics")[2]
    assert [status for status, _ in (old_wire, new_wire, no_body)] == [400, 400, 400]
    by_id = {r.get("rpcId"): r for r in records}
    for rid in (7, 8):
        record = by_id[rid]
        assert (record["method"], record["outcome"], record["errorCode"]) == ("tools/list", "error", -32022)
        assert record["message"].startswith("POST /mcp 400 tools/list outcome=error code=-32022 "), record
    unread = by_id[None]
    assert (unread["outcome"], unread["errorCode"]) == ("error", -32022)
    assert "refusal" not in unread  # its code says why, as for any JSON-RPC error
    assert 'fairwins_mcp_requests_total{method="tools/list",outcome="error"} 2\n' in metrics
    assert 'fairwins_mcp_http_refusals_total{reason="gate"} 0\n' in metrics


@PROMETHEUS
def test_metrics_are_served_only_when_on_and_count_what_was_done(sandbox: SandboxGateway) -> None:
    with http_server(sandbox, metrics=False) as (server, _):
        assert get(server, "/metrics")[0] == 404
    with http_server(sandbox) as (server, collected):
        for n in range(3):
            post(server, tool_call(n, "get_wagers"), {"Authorization": f"Bearer {TOKEN_MEMBER_A}"})
        post(server, tool_call(8, "get_wagers"))  # no token: priced (402)
        post(server, tool_call(9, "get_profile"))  # no token, never priced: refused before any call
        sandbox.fault("/v1/perps/pairs", "status", status=503, times=1)
        post(server, tool_call(10, "get_perps_pairs"))  # retried once
        collected.wait(6)  # counted as each record is finished, just after its answer was sent
        status, content_type, text = get(server, "/metrics")
    assert status == 200 and content_type == CONTENT_TYPE
    for line in (
        'fairwins_mcp_tool_calls_total{tool="get_wagers",outcome="result"} 3',
        'fairwins_mcp_tool_calls_total{tool="get_wagers",outcome="price"} 1',
        'fairwins_mcp_tool_calls_total{tool="get_profile",outcome="no_token"} 1',
        'fairwins_mcp_tool_calls_total{tool="get_perps_pairs",outcome="result"} 1',
        'fairwins_mcp_requests_total{method="tools/call",outcome="result"} 4',
        'fairwins_mcp_requests_total{method="tools/call",outcome="tool_error"} 2',
        'fairwins_mcp_gateway_responses_total{class="2xx"} 4',
        'fairwins_mcp_gateway_responses_total{class="4xx"} 1',
        'fairwins_mcp_gateway_responses_total{class="5xx"} 1',
        "fairwins_mcp_gateway_retries_total 1",
        "fairwins_mcp_gateway_request_duration_seconds_count 6",
        'fairwins_mcp_request_duration_seconds_count{method="tools/call"} 6',
    ):
        assert line + "\n" in text, line
    in_flight = re.search(r"^fairwins_mcp_requests_in_flight (\d+)$", text, re.M)
    assert in_flight and int(in_flight[1]) >= 1  # the scrape itself
    checked = promtool_check(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_paid_call_is_counted_never_its_payment(sandbox: SandboxGateway) -> None:
    payment = header_value(canary_payment(1))
    with http_server(sandbox) as (server, collected):
        post(server, tool_call(1, "get_wagers"), {"X-PAYMENT": payment})
        post(server, tool_call(2, "get_profile"), {"X-PAYMENT": payment})  # never priced: refused here
        records = {r["rpcId"]: r for r in collected.wait(2)}
        text = get(server, "/metrics")[2]
    assert records[1]["payment"] == "accepted" and records[2]["payment"] == "refused"
    assert records[2]["failure"] == "payment_refused" and "upstream" not in records[2]
    assert 'fairwins_mcp_payments_total{outcome="accepted"} 1\n' in text
    assert 'fairwins_mcp_payments_total{outcome="refused"} 1\n' in text
    assert payment not in json.dumps(records) and payment not in text


# ---- the command line ------------------------------------------------------------------------------


@SIGNAL_STOP
def test_an_http_process_with_metrics_and_json_logs(sandbox: SandboxGateway) -> None:
    proc = run_cli(["--http", "0", "--metrics-on-mcp-port", "--log-format", "json"], {"FAIRWINS_API_URL": sandbox.url})
    lines: list[str] = []
    try:
        port = int(wait_for_url(proc, lines).rsplit(":", 1)[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
        conn.request(
            "POST", "/mcp", json.dumps(tool_call(1, "get_perps_pairs")), {**JSON_HEADERS, "traceparent": TRACEPARENT}
        )
        assert conn.getresponse().read()
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        proc.terminate()
        _, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=WAIT)
    stderr = "".join(lines) + err
    record_output("records: http process stderr", stderr)
    assert proc.returncode == 0
    (call,) = [r for r in access_records(stderr) if r.get("method") == "tools/call"]
    assert call["traceId"] == TRACE and call["httpRequest"]["status"] == 200
    assert 'fairwins_mcp_tool_calls_total{tool="get_perps_pairs",outcome="result"} 1\n' in text


@pytest.mark.parametrize(
    ("argv", "env", "problem"),
    [
        (["--metrics"], {}, "--metrics needs --http"),
        ([], {"FAIRWINS_MCP_LOG_FORMAT": "xml"}, "FAIRWINS_MCP_LOG_FORMAT must be one of text, json"),
    ],
)
def test_settings_that_cannot_be_served_are_refused(argv: list[str], env: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        from_env(env, parse_args(argv))


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], {}, "text"),
        ([], {"K_SERVICE": "fairwins-mcp"}, "json"),  # Cloud Run reads JSON lines as structured entries
        ([], {"FAIRWINS_MCP_LOG_FORMAT": "JSON"}, "json"),
        (["--log-format", "text"], {"FAIRWINS_MCP_LOG_FORMAT": "json", "K_SERVICE": "x"}, "text"),
    ],
)
def test_the_log_format_is_text_unless_asked_or_on_cloud_run(
    argv: list[str], env: dict[str, str], expected: str
) -> None:
    assert from_env(env, parse_args(argv)).log_format == expected


# ---- what no record may hold ------------------------------------------------------------------------


def assert_holds_nothing_private(where: str, text: str) -> None:
    for canary in (ARGUMENT_CANARY, BODY_CANARY, *MEMBER_DATA, CANARY_TOKEN.removeprefix("fw1.")[:-4]):
        assert canary not in text, f"{canary!r} in {where}"


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_no_record_holds_a_token_payment_argument_gateway_body_or_member_data(
    sandbox: SandboxGateway, fmt: str
) -> None:
    sandbox.fault("/v1/news/137/ETH", "status", status=404, body={"message": BODY_CANARY, "account": ACCOUNT_A})
    paid = {"x402/payment": canary_payment(2)}
    messages: list[dict[str, Any] | bytes] = [
        initialize(1),
        tool_call(2, "get_wagers"),  # member data in the answer
        tool_call(3, "get_profile"),
        tool_call(4, "get_membership"),
        tool_call(5, "get_prediction_markets", {"chainId": 137, "q": ARGUMENT_CANARY}),
        tool_call(6, "get_token_news", {"chainId": 137, "asset": "ETH", "slug": ARGUMENT_CANARY}),  # body quoted
        tool_call(7, "get_fees", {"chainId": ARGUMENT_CANARY}),  # invalid: the value is named in the answer
        tool_call(8, "get_wagers", {}, **paid),
        request(9, "prompts/get", {"name": "wager-review", "arguments": {"chainId": ARGUMENT_CANARY}}),
    ]
    args = ("--log-format", fmt)
    stderr = stdio_run(sandbox, messages, *args, FAIRWINS_API_TOKEN=CANARY_TOKEN, FAIRWINS_MCP_LOG_LEVEL="debug")
    record_output(f"records: stdio stderr ({fmt})", stderr)
    assert stderr.count("fairwins_mcp.access") == len(messages)
    assert_holds_nothing_private(f"stdio stderr ({fmt})", stderr)
    members = stdio_run(sandbox, [initialize(1), tool_call(2, "get_wagers")], *args, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    assert_holds_nothing_private(f"stdio stderr of a member ({fmt})", members)
    with http_server(sandbox) as (server, collected):
        post(server, tool_call(1, "get_wagers"), {"Authorization": f"Bearer {TOKEN_MEMBER_A}"})
        post(server, tool_call(2, "get_prediction_markets", {"chainId": 137, "q": ARGUMENT_CANARY}))
        post(server, tool_call(3, "get_wagers"), {"X-PAYMENT": header_value(canary_payment(1))})
        post(server, tool_call(4, "get_wagers"), {"Authorization": f"Bearer {CANARY_TOKEN}"})
        records = collected.wait(4)
    assert_holds_nothing_private("http records", json.dumps(records))


def test_what_a_client_chose_is_cut_short_and_kept_to_one_line() -> None:
    record = Record("stdio")
    record.begin(Request("x" * 500, "ping\nFAKE 2026 INFO forged line", {}))
    record.client = {"name": "n\r\n" + "y" * 500, "version": 3}
    record.reply({"result": {}})
    for text in (str(record), json.dumps(record.fields(), ensure_ascii=False)):
        assert "x" * (CLIENT_TEXT + 1) not in text and "y" * (CLIENT_TEXT + 1) not in text
        assert "x" * CLIENT_TEXT + f"…(+{500 - CLIENT_TEXT})" in text
    assert "\n" not in str(record) and "ping?FAKE" in str(record)


def test_a_record_nobody_logs_is_never_formatted(monkeypatch: pytest.MonkeyPatch) -> None:
    formatted: list[int] = []
    real: Callable[[Record], str] = Record._render
    monkeypatch.setattr(Record, "_render", lambda self: formatted.append(1) or real(self))
    logger = logging.getLogger("fairwins_mcp")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        from mcp_server.ops.records import finish

        record = Record("stdio")
        finish(record)
    finally:
        logger.setLevel(level)
    assert formatted == []


@pytest.mark.posix("--workers: Windows serves from one process and refuses workers")
def test_with_workers_any_scrape_answers_for_every_worker(sandbox: SandboxGateway) -> None:
    proc = run_cli(["--http", "0", "--workers", "2", "--metrics-on-mcp-port"], {"FAIRWINS_API_URL": sandbox.url})
    lines: list[str] = []
    calls = 12
    try:
        port = int(wait_for_url(proc, lines).rsplit(":", 1)[1].split("/")[0])
        for n in range(calls):  # a connection each: either worker may take it
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
            conn.request("POST", "/mcp", json.dumps(tool_call(n, "get_perps_pairs")), JSON_HEADERS)
            assert conn.getresponse().read()
            conn.close()
        counted = 'fairwins_mcp_tool_calls_total{tool="get_perps_pairs",outcome="result"} '
        seen: list[int] = []
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:  # another worker's figures are at most a second old
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
            conn.close()
            seen.append(int(re.search(re.escape(counted) + r"(\d+)", text)[1]))  # type: ignore[index]
            if seen[-1] == calls and len(seen) >= 3:
                break
            time.sleep(0.2)
        assert seen[-1] == calls, seen
        assert seen == sorted(seen)  # a counter never goes back, whichever worker answered
        assert re.search(r'^fairwins_mcp_build_info\{version="[^"]+"\} 1$', text, re.M)  # one version, not summed
        proc.terminate()
        _, err = proc.communicate(timeout=WAIT * 2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=WAIT)
    record_output("records: http workers stderr", "".join(lines) + err)
    assert proc.returncode == 0
