"""x402 payments over Streamable HTTP: a real server on 127.0.0.1:0 in front of the sandbox gateway.

Headers in, headers out: a payment header is carried byte-for-byte, a receipt comes back on the
same POST (answered as JSON, never SSE), and nothing of the payment reaches a body or a log.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mcp_server.fairwins import payments
from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http.server import McpHTTPServer
from mcp_server.wire import x402
from tests import catalog
from tests.conftest import ROOT, WAIT, server_env
from tests.mcp_http import Raw, refusal, serving
from tests.samples import VALID_ARGUMENTS
from tests.sandbox_gateway import PAYER_ACCOUNT, TOKEN_MEMBER_A, V1_OFFER, V2_OFFER, SandboxGateway
from tests.test_payments import (
    BUILD,
    CANARY,
    INTENT,
    WAGERS,
    assert_no_secret,
    b64,
    gateway_receipt,
    unb64,
    v1_payment,
    v2_payment,
)

ACCEPT_BOTH = "application/json, text/event-stream"


@contextmanager
def mcp_server(gateway_url: str, *, timeout: float = 5.0) -> Iterator[McpHTTPServer]:
    dispatcher = build_dispatcher(Config(api_url=gateway_url, timeout=timeout))
    with serving(dispatcher) as server:
        yield server


@pytest.fixture
def server(sandbox: SandboxGateway) -> Iterator[McpHTTPServer]:
    with mcp_server(sandbox.url) as running:
        yield running


class Answer:
    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status, self.raw_headers, self.body = status, headers, body

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.raw_headers if k.lower() == name.lower()), None)

    def header_names(self) -> set[str]:
        return {k.lower() for k, _ in self.raw_headers}

    @property
    def message(self) -> dict[str, Any]:
        """The JSON-RPC answer, from a JSON body or from the last event of an SSE stream."""
        if (self.header("Content-Type") or "").startswith("text/event-stream"):
            events = [line[6:] for line in self.body.decode().splitlines() if line.startswith("data: ")]
            message: dict[str, Any] = json.loads(events[-1])
            return message
        message = json.loads(self.body)
        return message

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.message, self.message
        result: dict[str, Any] = self.message["result"]
        return result


def post(
    server: McpHTTPServer | int,
    message: Any,
    headers: list[tuple[str, str]] | None = None,
    *,
    accept: str = ACCEPT_BOTH,
) -> Answer:
    """One POST /mcp (to a server, or a port) with `headers` sent exactly as given (repeats included)."""
    port = server if isinstance(server, int) else server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        body = json.dumps(message).encode()
        conn.putrequest("POST", "/mcp")
        for name, value in [
            ("Content-Type", "application/json"),
            ("Accept", accept),
            ("Content-Length", str(len(body))),
            *(headers or []),
        ]:
            conn.putheader(name, value)
        conn.endheaders(body)
        resp = conn.getresponse()
        return Answer(resp.status, resp.getheaders(), resp.read())
    finally:
        conn.close()


def tools_call(
    name: str, arguments: dict[str, Any] | None = None, *, meta: dict[str, Any] | None = None, request_id: int = 1
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def words(result: dict[str, Any]) -> str:
    return " ".join(block["text"] for block in result["content"])


def attempts(sandbox: SandboxGateway, server: McpHTTPServer, path: str) -> int:
    """Upstream requests to `path`, counted after a later free call reached the gateway."""
    assert post(server, tools_call("get_gateway_status", request_id=99)).result["isError"] is False
    return sum(1 for request in sandbox.seen if request.path == path)


def payment_headers_seen(sandbox: SandboxGateway) -> list[tuple[str, str]]:
    return [
        (k, v)
        for request in sandbox.seen
        for k, v in request.headers
        if k.lower() in ("x-payment", "payment-signature")
    ]


# ---- carrying ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "payment", "tool", "path", "receipt_name"),
    [
        ("X-PAYMENT", v1_payment(), "get_wagers", WAGERS, "X-PAYMENT-RESPONSE"),
        ("PAYMENT-SIGNATURE", v2_payment(), "build_intent", BUILD, "PAYMENT-RESPONSE"),
    ],
)
def test_a_payment_header_is_forwarded_byte_for_byte_and_the_receipt_comes_back_on_the_same_post(
    sandbox: SandboxGateway, server: McpHTTPServer, name: str, payment: Any, tool: str, path: str, receipt_name: str
) -> None:
    # Bytes a re-encoder would change (indentation, key order): they must arrive exactly so.
    value = base64.b64encode(json.dumps(payment, indent=2, sort_keys=True).encode()).decode()
    arguments = INTENT if tool == "build_intent" else {}
    answer = post(server, tools_call(tool, arguments), [("Authorization", f"Bearer {TOKEN_MEMBER_A}"), (name, value)])
    assert answer.status == 200
    assert answer.header("Content-Type") == "application/json"  # JSON, although SSE was acceptable
    (seen,) = [request for request in sandbox.seen if request.path == path]
    assert [(k, v) for k, v in seen.headers if k.lower() in ("x-payment", "payment-signature")] == [(name, value)]
    assert seen.header("Authorization") is None
    assert seen.header("Accept") == "application/json" and "Mozilla" not in (seen.header("User-Agent") or "")

    expected_name, expected_raw = gateway_receipt(
        sandbox, "POST" if tool == "build_intent" else "GET", path, name, value
    )
    assert expected_name == receipt_name
    assert answer.header(receipt_name) == expected_raw  # the gateway's bytes, under the same name
    receipt = answer.result["_meta"][payments.RESPONSE_META_KEY]
    assert receipt == unb64(expected_raw) and receipt["payer"] == PAYER_ACCOUNT
    assert "broadcast, not confirmed" in words(answer.result)


def test_a_meta_payment_over_http_is_answered_as_json_with_its_receipt_header_even_when_progress_was_asked(
    sandbox: SandboxGateway, server: McpHTTPServer
) -> None:
    meta = {"progressToken": "p-1", x402.PAYMENT_META_KEY: v2_payment()}
    answer = post(server, tools_call("build_intent", INTENT, meta=meta))
    assert answer.status == 200 and answer.header("Content-Type") == "application/json"
    assert answer.result["isError"] is False
    raw = answer.header("PAYMENT-RESPONSE")
    assert raw is not None and unb64(raw) == answer.result["_meta"][payments.RESPONSE_META_KEY]
    assert payment_headers_seen(sandbox) == [("PAYMENT-SIGNATURE", b64(v2_payment()))]


def test_a_paid_call_in_the_2026_era_keeps_the_receipt_beside_the_server_info(
    sandbox: SandboxGateway, server: McpHTTPServer
) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        x402.PAYMENT_META_KEY: v1_payment(),
    }
    headers = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "get_wagers")]
    answer = post(server, tools_call("get_wagers", meta=meta), headers)
    result = answer.result
    assert result["resultType"] == "complete"
    assert result["_meta"][payments.RESPONSE_META_KEY]["success"] is True
    assert "io.modelcontextprotocol/serverInfo" in result["_meta"]
    assert answer.header("X-PAYMENT-RESPONSE") is not None


def test_a_price_over_http_is_the_offer_verbatim(server: McpHTTPServer) -> None:
    for tool, arguments, offer in (("get_wagers", {}, V1_OFFER), ("build_intent", INTENT, V2_OFFER)):
        result = post(server, tools_call(tool, arguments)).result
        assert result["isError"] is True
        assert result["structuredContent"] == offer and json.loads(result["content"][0]["text"]) == offer


# ---- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "meta"),
    [
        ([("X-PAYMENT", b64(v1_payment())), ("PAYMENT-SIGNATURE", b64(v2_payment()))], None),
        (
            [("PAYMENT-SIGNATURE", b64(v2_payment(resource={"url": "elsewhere"})))],
            {x402.PAYMENT_META_KEY: v2_payment()},
        ),
        ([("X-PAYMENT", b64(v1_payment()))], {x402.PAYMENT_META_KEY: v2_payment()}),
    ],
    ids=["two-headers", "header-and-different-meta", "v1-header-and-v2-meta"],
)
def test_two_different_payments_on_one_post_are_refused_and_nothing_is_forwarded(
    sandbox: SandboxGateway, server: McpHTTPServer, headers: list[tuple[str, str]], meta: dict[str, Any] | None
) -> None:
    answer = post(server, tools_call("build_intent", INTENT, meta=meta), headers)
    result = answer.result
    assert result["isError"] is True and "Nothing was sent" in words(result)
    assert attempts(sandbox, server, BUILD) == 0
    assert not {"x-payment-response", "payment-response"} & answer.header_names()
    assert_no_secret(answer.body.decode(), b64(v1_payment()), b64(v2_payment()))


def test_a_payment_header_sent_twice_is_refused_and_nothing_is_forwarded(
    sandbox: SandboxGateway, server: McpHTTPServer
) -> None:
    other = b64(v1_payment() | {"network": "base"})
    answer = post(server, tools_call("get_wagers"), [("X-PAYMENT", b64(v1_payment())), ("X-PAYMENT", other)])
    assert answer.status == 400 and refusal(answer.body)[0] == "duplicate_header"
    assert payment_headers_seen(sandbox) == []


@pytest.mark.parametrize(
    ("first", "second"),
    [("X-PAYMENT", "X-PAYMENT"), ("x-payment", "X-Payment"), ("PAYMENT-SIGNATURE", "payment-signature")],
)
def test_a_payment_header_sent_twice_is_refused_at_the_head_on_the_wire(
    sandbox: SandboxGateway, server: McpHTTPServer, first: str, second: str
) -> None:
    # The head refuses it before any route or the payments layer reads it: the payments layer's
    # own check (a comma in the value) is a second guard, and must not be the only one.
    body = json.dumps(tools_call("get_wagers")).encode()
    client = Raw(server.server_address[1])
    try:
        client.send(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n"
            b"%s: %s\r\n%s: %s\r\n\r\n%s"
            % (len(body), first.encode(), b64(v1_payment()).encode(), second.encode(), b64(v2_payment()).encode(), body)
        )
        answer = client.response()
        assert answer is not None and answer.status == 400
        code, sentence = refusal(answer.body)
        assert code == "duplicate_header" and first.lower() in sentence
        assert client.response() is None, "a refused head must close the connection"
    finally:
        client.close()
    assert attempts(sandbox, server, WAGERS) == 0 and payment_headers_seen(sandbox) == []
    assert_no_secret(answer.body.decode(), b64(v1_payment()), b64(v2_payment()))


def test_a_payment_header_on_a_batch_is_never_spent_twice(sandbox: SandboxGateway, server: McpHTTPServer) -> None:
    batch = [tools_call("get_wagers", request_id=1), tools_call("get_wagers", request_id=2)]
    post(server, batch, [("MCP-Protocol-Version", "2025-03-26"), ("X-PAYMENT", b64(v1_payment()))])
    assert len(payment_headers_seen(sandbox)) <= 1


@pytest.mark.parametrize("tool", [name for name in catalog.SERVED if name not in catalog.PRICED])
def test_a_payment_header_on_a_call_never_priced_is_refused_and_sent_nowhere(
    sandbox: SandboxGateway, server: McpHTTPServer, tool: str
) -> None:
    answer = post(
        server,
        tools_call(tool, VALID_ARGUMENTS.get(tool)),
        [("Authorization", f"Bearer {TOKEN_MEMBER_A}"), ("X-PAYMENT", b64(v1_payment()))],
    )
    assert answer.result["isError"] is True and "sent nowhere" in words(answer.result)
    assert sandbox.seen == []


def test_a_payment_header_that_is_not_base64_is_refused_and_never_forwarded(
    sandbox: SandboxGateway, server: McpHTTPServer
) -> None:
    answer = post(server, tools_call("get_wagers"), [("X-PAYMENT", f"{CANARY}!")])
    assert answer.result["isError"] is True and "not standard base64" in words(answer.result)
    assert sandbox.seen == []
    assert CANARY not in answer.body.decode()


# ---- exactly once ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        {"kind": "status", "status": 502},
        {"kind": "bare_402"},
        {"kind": "reset_mid_body"},
        {"kind": "delay", "seconds": 60},
    ],
    ids=["502", "bare-402", "reset", "timeout"],
)
def test_a_paid_post_reaches_the_gateway_once_and_an_unknown_outcome_says_do_not_resubmit(
    sandbox: SandboxGateway, fault: dict[str, Any]
) -> None:
    params = dict(fault)
    sandbox.fault(WAGERS, params.pop("kind"), **params)
    with mcp_server(sandbox.url, timeout=0.5) as server:
        answer = post(server, tools_call("get_wagers"), [("X-PAYMENT", b64(v1_payment()))])
        assert answer.status == 200 and answer.header("Content-Type") == "application/json"
        assert "outcome is unknown" in words(answer.result) and "Do not resubmit this payment" in words(answer.result)
        assert attempts(sandbox, server, WAGERS) == 1
        assert_no_secret(answer.body.decode(), b64(v1_payment()))


def test_a_settlement_failure_over_http_withholds_the_answer_and_still_returns_the_receipt(
    sandbox: SandboxGateway, server: McpHTTPServer
) -> None:
    sandbox.fault(BUILD, "settlement_failed", reason="insufficient_funds")
    answer = post(server, tools_call("build_intent", INTENT), [("PAYMENT-SIGNATURE", b64(v2_payment()))])
    result = answer.result
    # No MCP-Protocol-Version header: 2025-03-26, which has no structuredContent to carry the facts in.
    assert "structuredContent" not in result and len(result["content"]) == 1
    assert "insufficient_funds" in words(result)
    raw = answer.header("PAYMENT-RESPONSE")
    assert raw is not None and unb64(raw)["success"] is False
    assert attempts(sandbox, server, BUILD) == 1


# ---- sizes ----------------------------------------------------------------------------------------


def test_a_payment_header_of_nearly_16_kib_is_accepted_and_forwarded_intact(
    sandbox: SandboxGateway, server: McpHTTPServer
) -> None:
    value = b64(v2_payment(extensions={"pad": "z" * 11_000}))
    assert 15_000 < len(value) <= 16 * 1024
    answer = post(server, tools_call("build_intent", INTENT), [("PAYMENT-SIGNATURE", value)])
    assert answer.result["isError"] is False
    assert payment_headers_seen(sandbox) == [("PAYMENT-SIGNATURE", value)]


@pytest.mark.parametrize("pad", [12_500, 44_000], ids=["just-over-16-kib", "nearly-64-kib"])
def test_a_payment_header_over_16_kib_is_a_400_naming_the_limit_and_nothing_is_forwarded(
    sandbox: SandboxGateway, server: McpHTTPServer, pad: int
) -> None:
    # 16 KiB: four times what the largest x402 scheme writes (wire/x402.py, MAX_PAYMENT_BYTES).
    value = b64(v2_payment(extensions={"pad": "z" * pad}))
    assert 16 * 1024 < len(value) < 64 * 1024
    answer = post(server, tools_call("build_intent", INTENT), [("PAYMENT-SIGNATURE", value)])
    assert answer.status == 400
    code, sentence = refusal(answer.body, 1)  # its body was read: the refusal answers its id
    assert code == "payment_too_large"
    assert sentence == (
        f"The PAYMENT-SIGNATURE header is {len(value):,} bytes, over the 16 KiB any x402 payment takes; "
        "nothing was sent to the gateway"
    )
    assert sandbox.seen == []
    assert CANARY not in answer.body.decode()


def test_a_payment_header_over_64_kib_is_refused_with_the_head_limit_and_nothing_is_forwarded(
    sandbox: SandboxGateway, server: McpHTTPServer
) -> None:
    value = b64(v2_payment(extensions={"pad": "z" * 50_000}))
    assert len(value) > 64 * 1024
    answer = post(server, tools_call("build_intent", INTENT), [("PAYMENT-SIGNATURE", value)])
    assert answer.status == 431  # Request Header Fields Too Large: the head's own limit comes first
    assert sandbox.seen == []
    assert CANARY not in answer.body.decode()
    assert "64 KiB" in refusal(answer.body)[1]


def test_an_offer_of_nearly_64_kib_of_headers_reaches_the_caller_whole(
    sandbox: SandboxGateway, server: McpHTTPServer
) -> None:
    offer = {**V2_OFFER, "extensions": {"signed-offers": {"info": ["x" * 1000] * 43}}}
    sandbox.fault(WAGERS, "status", status=402, body={}, headers={"PAYMENT-REQUIRED": b64(offer)})
    assert post(server, tools_call("get_wagers")).result["structuredContent"] == offer


# ---- secrets ----------------------------------------------------------------------------------------


def test_no_payment_value_reaches_an_http_answer_or_a_log_line(
    sandbox: SandboxGateway, server: McpHTTPServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bodies = []
    for fault in (None, "bare_402", "settlement_failed"):
        sandbox.clear_faults()
        if fault:
            sandbox.fault(BUILD, fault)
        for headers, meta in (
            ([("PAYMENT-SIGNATURE", b64(v2_payment()))], None),
            ([], {x402.PAYMENT_META_KEY: v2_payment()}),
        ):
            answer = post(server, tools_call("build_intent", INTENT, meta=meta), headers)
            bodies.append(answer.body.decode() + json.dumps(answer.raw_headers))
    answer = post(server, tools_call("get_profile"), [("X-PAYMENT", b64(v1_payment()))])
    bodies.append(answer.body.decode() + json.dumps(answer.raw_headers))
    assert_no_secret("".join(bodies) + caplog.text, b64(v2_payment()), b64(v1_payment()))


def test_the_http_server_process_writes_no_payment_to_stderr(sandbox: SandboxGateway) -> None:
    env = server_env(FAIRWINS_API_URL=sandbox.url, FAIRWINS_MCP_LOG_LEVEL="debug")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_server", "--http", "0"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    lines: list[str] = []
    url_found = threading.Event()
    port: list[int] = []

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace")
            lines.append(line)
            match = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", line)
            if match and not port:
                port.append(int(match.group(1)))
                url_found.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert url_found.wait(WAIT), "".join(lines)
        answer = post(port[0], tools_call("get_wagers"), [("X-PAYMENT", b64(v1_payment()))])
        assert answer.result["isError"] is False and answer.header("X-PAYMENT-RESPONSE") is not None
        answer = post(port[0], tools_call("get_wagers", meta={x402.PAYMENT_META_KEY: {"x402Version": 5, "s": CANARY}}))
        assert "error" in answer.message
    finally:
        proc.terminate()
        proc.wait(WAIT)
        reader.join(WAIT)
    assert_no_secret("".join(lines), b64(v1_payment()))
