"""Redaction by value: the bearer and payment a call forwarded never come back, whatever the gateway echoes.

The sandbox gateway's `echo` fault writes the credential it received back into every place the
server reads gateway text from (an error message, the data of a 2xx, a per-chain reason, a scope,
a content type, an x402 offer, a receipt), in every form a gateway, a proxy or a logging library
might use: as received, in another case, in part, JSON-escaped, \\u-escaped, URL-encoded, and for
a payment decoded, pretty-printed and re-encoded. The pattern rules (`fw1.…`, `eyJ…`) miss most
of these; the server must not. Driven through the dispatcher, a stdio process and a real HTTP
server; everything the server said is searched for every piece of the secret, with its case and
encodings undone.
"""

from __future__ import annotations

import base64
import http.client
import json
import subprocess
import sys
from collections.abc import Iterable
from typing import Any, Final

import pytest

from mcp_server import payments
from mcp_server.config import Config
from mcp_server.context import Payment, RequestContext
from mcp_server.server import build_dispatcher
from tests.conftest import ROOT, WAIT, client_for, server_env
from tests.mcp_http import serving
from tests.sandbox_gateway import ECHO_FORMS, ECHO_PLACES, SandboxGateway
from tests.secret_canaries import (
    CANARY_TOKEN,
    COLON_TOKEN,
    OPAQUE_TOKEN,
    PAYMENT_SIGNATURE,
    UPPER_TOKEN,
    canary_payment,
    folded,
    header_value,
    pretty_header_value,
    record_output,
)

WAGERS: Final = "/v1/member/wagers"
BUILD: Final = "/v1/member/intents/build"
INTENT: Final = {"intent": "create_wager", "chainId": 137, "params": {"stake": "1.00"}}
WINDOW: Final = 10  # a piece of a secret this long, anywhere, is a leak
BEARERS: Final = {"colon": COLON_TOKEN, "upper": UPPER_TOKEN, "opaque": OPAQUE_TOKEN, "canary": CANARY_TOKEN}
BEARER_FORMS: Final = sorted(set(ECHO_FORMS) - {"decoded", "pretty", "pretty_base64", "signature", "nonce"})


def _window(encoded: str, secret: bytes) -> str:
    """The stretch of base64 `encoded` that encodes only bytes of `secret`."""
    raw = base64.b64decode(encoded)
    start = raw.index(secret)
    first, last = -(-start // 3), (start + len(secret)) // 3
    return encoded[first * 4 : last * 4]


def bearer_secret(token: str) -> list[str]:
    """What of a bearer must never be seen: all but the `fw1.` prefix and the last four characters."""
    return [token[4:-4] if token.lower().startswith("fw1.") else token[:-4]]


def payment_secret(header: str, payload: dict[str, Any]) -> list[str]:
    """What of a payment must never be seen: its signature and nonce, as text and inside each base64 form."""
    signature = PAYMENT_SIGNATURE.encode()
    nonce = payload["payload"]["authorization"]["nonce"]
    found = [PAYMENT_SIGNATURE[2:], nonce[2:]]
    for encoded in (header, header_value(payload), pretty_header_value(payload)):
        found += [_window(encoded, signature), _window(encoded, nonce.encode())]
    return found


def exposed(texts: Iterable[str], secret: list[str]) -> list[str]:
    """Every piece of `secret` (WINDOW characters or more) found in `texts`, case and encodings undone."""
    pieces = {s.casefold()[i : i + WINDOW] for s in secret for i in range(len(s) - WINDOW + 1)}
    found = []
    for text in texts:
        plain = folded(text)
        for piece in pieces:
            if piece in plain:
                at = plain.index(piece)
                found.append(f"{piece!r} in …{plain[max(at - 60, 0) : at + 60]}…")
    return found


def test_the_detector_finds_every_echo_form_it_is_given() -> None:
    # A check that cannot fail proves nothing: each form the gateway can write is found when quoted raw.
    payload = canary_payment(1)
    for form, write in ECHO_FORMS.items():
        assert exposed([f"said {write(COLON_TOKEN, None)}"], bearer_secret(COLON_TOKEN)), form
        header = pretty_header_value(payload)
        assert exposed([f"said {write(header, payload)}"], payment_secret(header, payload)), form


def said(message: dict[str, Any], sent: list[dict[str, Any]], headers: dict[str, str]) -> list[str]:
    return [json.dumps(message, ensure_ascii=False), json.dumps(sent, ensure_ascii=False), json.dumps(headers)]


# ---- through the dispatcher ---------------------------------------------------------------------------


@pytest.mark.parametrize("into", sorted(ECHO_PLACES))
@pytest.mark.parametrize("who", sorted(BEARERS))
def test_a_bearer_echoed_in_any_form_into_any_place_never_comes_back(
    sandbox: SandboxGateway, who: str, into: str
) -> None:
    token = BEARERS[who]
    mcp = client_for(sandbox.url)
    texts: list[str] = []
    for form in BEARER_FORMS:
        sandbox.fault(WAGERS, "echo", form=form, into=into, times=1)
        sent: list[dict[str, Any]] = []
        ctx = RequestContext(bearer=token, bearer_source="header", send=sent.append)
        message = mcp.request("tools/call", {"name": "get_wagers", "arguments": {}}, ctx=ctx)
        assert "result" in message, message  # an honest answer, whatever was echoed
        texts += said(message, sent, ctx.response_headers)
    assert sandbox.seen and all(r.header("Authorization") == f"Bearer {token}" for r in sandbox.seen)
    leaks = exposed(texts, bearer_secret(token))
    assert not leaks, "\n".join(leaks[:10])


PAYMENTS: Final = {
    "v1 in _meta": ("get_wagers", WAGERS, 1, False),
    "v2 in _meta": ("build_intent", BUILD, 2, False),
    "v1 pretty header": ("get_wagers", WAGERS, 1, True),
}


@pytest.mark.parametrize("into", sorted(ECHO_PLACES))
@pytest.mark.parametrize("how", sorted(PAYMENTS))
def test_a_payment_echoed_in_any_form_into_any_place_never_comes_back(
    sandbox: SandboxGateway, how: str, into: str
) -> None:
    tool, path, version, as_header = PAYMENTS[how]
    payload = canary_payment(version)
    header = pretty_header_value(payload) if as_header else header_value(payload)
    mcp = client_for(sandbox.url)
    texts: list[str] = []
    for form in sorted(ECHO_FORMS):
        sandbox.fault(path, "echo", form=form, into=into, times=1)
        sent: list[dict[str, Any]] = []
        params: dict[str, Any] = {"name": tool, "arguments": INTENT if tool == "build_intent" else {}}
        ctx = RequestContext(send=sent.append)
        if as_header:
            ctx.payment = Payment("X-PAYMENT", header, "header")  # as the HTTP transport hands it over
        else:
            params["_meta"] = {payments.PAYMENT_META_KEY: payload}
        message = mcp.request("tools/call", params, ctx=ctx)
        assert "result" in message, message
        texts += said(message, sent, ctx.response_headers)
    assert all(header in (r.header("X-PAYMENT"), r.header("PAYMENT-SIGNATURE")) for r in sandbox.seen)
    leaks = exposed(texts, payment_secret(header, payload))
    assert not leaks, "\n".join(leaks[:10])


def test_the_quoted_sentence_keeps_the_gateway_words_around_the_credential(sandbox: SandboxGateway) -> None:
    sandbox.fault(WAGERS, "echo", form="exact", into="message", status=400)
    ctx = RequestContext(bearer=COLON_TOKEN, bearer_source="header")
    text = client_for(sandbox.url).request("tools/call", {"name": "get_wagers", "arguments": {}}, ctx=ctx)
    sentence = text["result"]["content"][0]["text"]
    assert "the gateway said “rejected " in sentence and "(as received)”" in sentence
    assert "fw1.…w3Pz" in sentence  # the whole bearer, shown as its redacted form


def test_data_the_gateway_echoes_the_bearer_into_keeps_everything_else(sandbox: SandboxGateway) -> None:
    sandbox.fault(WAGERS, "echo", form="exact", into="data")
    ctx = RequestContext(bearer=OPAQUE_TOKEN, bearer_source="header")
    result = client_for(sandbox.url).request("tools/call", {"name": "get_wagers", "arguments": {}}, ctx=ctx)["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["chains"] == [] and result["structuredContent"]["asOf"]
    assert OPAQUE_TOKEN not in result["structuredContent"]["echo"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


# ---- a stdio process ----------------------------------------------------------------------------------


def test_a_stdio_process_never_writes_back_an_echoed_bearer_or_payment(sandbox: SandboxGateway) -> None:
    lines: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
        },
        {"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "debug"}},
    ]
    forms = ["exact", "upper", "after_colon", "json_in_text", "url", "middle"]
    for n, form in enumerate(forms):
        for into in ("message", "data", "state", "offer"):
            sandbox.fault(WAGERS, "echo", form=form, into=into, times=1)
            lines.append(
                {
                    "jsonrpc": "2.0",
                    "id": 10 + n * 10 + len(lines),
                    "method": "tools/call",
                    "params": {"name": "get_wagers", "arguments": {}, "_meta": {"progressToken": n}},
                }
            )
    paid_forms = ["decoded", "pretty", "pretty_base64", "signature", "exact", "upper"]
    for form in paid_forms:
        sandbox.fault(BUILD, "echo", form=form, into="receipt", times=1)
        meta = {payments.PAYMENT_META_KEY: canary_payment(2)}
        lines.append(
            {
                "jsonrpc": "2.0",
                "id": 1000 + len(lines),
                "method": "tools/call",
                "params": {"name": "build_intent", "arguments": INTENT, "_meta": meta},
            }
        )
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_server"],
        input=b"".join(json.dumps(line).encode() + b"\n" for line in lines),
        cwd=ROOT,
        env=server_env(FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=COLON_TOKEN, FAIRWINS_MCP_LOG_LEVEL="debug"),
        capture_output=True,
        timeout=WAIT * 3,
    )
    record_output("stdio process stdout", proc.stdout)
    record_output("stdio process stderr", proc.stderr)
    assert proc.returncode == 0, proc.stderr.decode()
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len([a for a in answers if "result" in a]) == len(lines)
    texts = [proc.stdout.decode(), proc.stderr.decode()]
    leaks = exposed(texts, bearer_secret(COLON_TOKEN)) + exposed(
        texts, payment_secret(header_value(canary_payment(2)), canary_payment(2))
    )
    assert not leaks, "\n".join(leaks[:10])


# ---- a real HTTP server --------------------------------------------------------------------------------


def test_an_http_server_never_writes_back_an_echoed_credential_in_a_body_or_a_header(sandbox: SandboxGateway) -> None:
    payload = canary_payment(1)
    pretty = pretty_header_value(payload)
    cases: list[tuple[dict[str, str], str, str]] = []
    for form in ("exact", "upper", "lower", "after_colon", "url", "unicode_escaped", "base64_prefix"):
        for into in ("message", "data", "scope", "content_type"):
            cases.append(({"Authorization": f"Bearer {UPPER_TOKEN}"}, form, into))
            cases.append(({"Authorization": f"Bearer {OPAQUE_TOKEN}"}, form, into))
    for form in sorted(ECHO_FORMS):
        for into in ("receipt", "settlement", "offer", "message"):
            cases.append(({"X-PAYMENT": pretty}, form, into))
    texts: list[str] = []
    dispatcher = build_dispatcher(Config(api_url=sandbox.url, timeout=2.0))
    with serving(dispatcher) as server:
        for headers, form, into in cases:
            sandbox.fault(WAGERS, "echo", form=form, into=into, times=1)
            conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=WAIT)
            try:
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "get_wagers", "arguments": {}},
                }
                sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers}
                conn.request("POST", "/mcp", body=json.dumps(body), headers=sent)
                resp = conn.getresponse()
                raw = resp.read()
                assert resp.status == 200, raw
                texts += [json.dumps(resp.getheaders()), raw.decode()]
            finally:
                conn.close()
    assert {r.header("X-PAYMENT") for r in sandbox.seen} >= {pretty}
    leaks = (
        exposed(texts, bearer_secret(UPPER_TOKEN))
        + exposed(texts, bearer_secret(OPAQUE_TOKEN))
        + exposed(texts, payment_secret(pretty, payload))
    )
    assert not leaks, "\n".join(leaks[:10])
