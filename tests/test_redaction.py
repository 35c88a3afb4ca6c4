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
import io
import json
import logging
import urllib.parse
from collections.abc import Iterable
from typing import Any, Final

import pytest

from mcp_server.core.catalog import Catalog
from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher
from mcp_server.core.redaction import MAX_CANDIDATES, Redactor
from mcp_server.ops import logs
from mcp_server.ops.logs import RequestFilter, request_bound
from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.wire import x402
from mcp_server.wire.jsonrpc import JSONObject
from mcp_server.wire.x402 import Payment
from tests.conftest import WAIT, client_for, run_stdio
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
            params["_meta"] = {x402.PAYMENT_META_KEY: payload}
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
        meta = {x402.PAYMENT_META_KEY: canary_payment(2)}
        lines.append(
            {
                "jsonrpc": "2.0",
                "id": 1000 + len(lines),
                "method": "tools/call",
                "params": {"name": "build_intent", "arguments": INTENT, "_meta": meta},
            }
        )
    proc = run_stdio(
        lines, FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=COLON_TOKEN, FAIRWINS_MCP_LOG_LEVEL="debug"
    )
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


def test_one_connection_whose_bearer_changes_has_each_requests_own_bearer_scrubbed(sandbox: SandboxGateway) -> None:
    # A proxy may carry many members on one kept-alive connection: each request's echo is searched
    # for that request's own bearer and payment, whatever came before it on the connection. No
    # redactor is kept from one request to the next (docs/security.md: a token is never cached);
    # one kept by anything less than the exact values fails here.
    payload = canary_payment(3)
    pretty = pretty_header_value(payload)
    turns = [
        {"Authorization": f"Bearer {UPPER_TOKEN}"},
        {"Authorization": f"Bearer {UPPER_TOKEN}"},
        {"Authorization": f"Bearer {OPAQUE_TOKEN}"},
        {"Authorization": f"Bearer {OPAQUE_TOKEN}", "X-PAYMENT": pretty},
        {"Authorization": f"Bearer {OPAQUE_TOKEN}"},
        {"Authorization": f"Bearer {UPPER_TOKEN}"},
    ]
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}}
    )
    dispatcher = build_dispatcher(Config(api_url=sandbox.url, timeout=2.0))
    with serving(dispatcher) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=WAIT)
        try:
            for turn, headers in enumerate(turns):
                into = "receipt" if "X-PAYMENT" in headers else "message"
                sandbox.fault(WAGERS, "echo", form="upper" if turn % 2 else "exact", into=into, times=1)
                conn.request("POST", "/mcp", body=body, headers={"Content-Type": "application/json", **headers})
                resp = conn.getresponse()
                raw = resp.read()
                assert resp.status == 200, raw
                texts = [json.dumps(resp.getheaders()), raw.decode()]
                bearer = headers["Authorization"].removeprefix("Bearer ")
                leaks = exposed(texts, bearer_secret(bearer))
                if "X-PAYMENT" not in headers:
                    assert sandbox.seen[-1].header("Authorization") == f"Bearer {bearer}"
                else:  # a payment replaces the bearer for its call (docs/payments.md)
                    assert sandbox.seen[-1].header("X-PAYMENT") == pretty
                    assert sandbox.seen[-1].header("Authorization") is None
                    leaks += exposed(texts, payment_secret(pretty, payload))
                assert not leaks, f"turn {turn}: " + "\n".join(leaks[:10])
                # The echo was found and replaced by this request's own bearer's redacted form.
                shown = "(credential not shown)" if "X-PAYMENT" in headers else f"\\u2026{bearer[-4:]}"
                assert shown in raw.decode(), raw
        finally:
            conn.close()


# Every 4-character piece of it holds a character URL-escaping changes: escaped, no piece shows as it is.
DENSE_TOKEN: Final = "a/b+c/d+e/f+g/h+i/j+k/l+m/n+o/p+"


@pytest.mark.parametrize("form", ["url", "url_lower"])
@pytest.mark.parametrize(
    ("bearer", "shown"), [(COLON_TOKEN, "fw1.…w3Pz"), (DENSE_TOKEN, "…o/p+")], ids=["colon", "dense"]
)
def test_a_url_escaped_bearer_echoed_by_the_gateway_reaches_a_real_client_as_its_redacted_form(
    sandbox: SandboxGateway, form: str, bearer: str, shown: str
) -> None:
    # Read off the socket by an HTTP client: the gateway's own words stay, and where it wrote the
    # bearer (%3A, %2F, %2B) the client reads the whole bearer's redacted form, not pieces of it.
    sandbox.fault(WAGERS, "echo", form=form, into="message", times=1)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {bearer}",
    }
    with serving(build_dispatcher(Config(api_url=sandbox.url, timeout=2.0))) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=WAIT)
        try:
            conn.request("POST", "/mcp", body=json.dumps(body), headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
    assert resp.status == 200, raw
    (block,) = json.loads(raw)["result"]["content"]
    assert f"rejected {shown} (as received)" in block["text"], block["text"]
    assert sandbox.seen[-1].header("Authorization") == f"Bearer {bearer}"  # it did go out, and came back
    assert not exposed([raw.decode()], bearer_secret(bearer))


class QuotingLibrary:
    """A tool whose library fails quoting the URL it called, the bearer URL-escaped in its query."""

    name = "quoting_library"

    def definition(self) -> JSONObject:
        return {"name": self.name, "inputSchema": {"type": "object"}}

    def call(self, arguments: JSONObject, ctx: RequestContext) -> JSONObject:
        assert ctx.bearer is not None
        raise ValueError(f"GET /v1/member/wagers?access_token={urllib.parse.quote(ctx.bearer, safe='')} failed")


def test_a_url_escaped_bearer_in_a_log_line_of_a_real_http_request_is_written_redacted() -> None:
    # The log side: the dispatcher logs the unexpected failure with its traceback while the
    # request is handled; the filter the stderr handler carries writes the bearer redacted.
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    handler.addFilter(RequestFilter())
    logger = logging.getLogger("fairwins_mcp")
    logger.addHandler(handler)
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "quoting_library", "arguments": {}}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {FRESH_TOKEN}",
    }
    try:
        with serving(Dispatcher(Catalog(tools=[QuotingLibrary()]))) as server:
            conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=WAIT)
            try:
                conn.request("POST", "/mcp", body=json.dumps(body), headers=headers)
                raw = conn.getresponse().read()
            finally:
                conn.close()
    finally:
        logger.removeHandler(handler)
    assert json.loads(raw)["error"] == {"code": -32603, "message": "Internal error"}
    written = stream.getvalue()
    assert "unexpected failure handling tools/call" in written
    assert "ValueError: GET /v1/member/wagers?access_token=fw1.…x7Vq failed" in written, written
    assert not exposed([written], bearer_secret(FRESH_TOKEN))


# ---- the redactor itself, pure ----------------------------------------------------------------------------

FRESH_TOKEN: Final = "fw1.unit-only-token:S3cr3tPart9x7Vq"  # in no canary list: the filter test logs it on purpose


def redactor(bearer: str | None = None, payment: Payment | None = None) -> Redactor:
    return Redactor(bearer, payment)


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        (FRESH_TOKEN, "fw1.…x7Vq"),
        (FRESH_TOKEN.upper(), "fw1.…x7Vq"),
        (FRESH_TOKEN.partition(":")[2], "(credential not shown)"),
        (urllib.parse.quote(FRESH_TOKEN, safe=""), "fw1.…x7Vq"),
        (json.dumps({"t": FRESH_TOKEN}).replace("/", "\\/").replace(":", "\\u003a"), "fw1.…x7Vq"),
    ],
    ids=["exact", "upper", "after the colon", "url-encoded", "json-escaped"],
)
def test_a_bearer_is_found_whatever_its_case_or_encoding_and_only_it_is_replaced(written: str, kept: str) -> None:
    text = f"the gateway refused {written} because it is revoked"
    scrubbed = redactor(FRESH_TOKEN).scrub(text)
    assert scrubbed.startswith("the gateway refused ") and scrubbed.endswith(" because it is revoked")
    assert kept in scrubbed
    assert not exposed([scrubbed], bearer_secret(FRESH_TOKEN))


def test_pieces_shorter_than_eight_characters_and_unrelated_text_are_left_alone() -> None:
    scrub = redactor(FRESH_TOKEN).scrub
    text = "S3cr3tP is seven; unit-on is seven too; nothing else here"
    assert scrub(text) is text
    assert scrub("unit-only") == "(credential not shown)"


def test_the_public_parts_of_a_payment_stay_readable_and_its_spending_parts_do_not() -> None:
    payload = canary_payment(2)
    scrub = redactor(payment=Payment("PAYMENT-SIGNATURE", header_value(payload))).scrub_value
    offer = {
        "accepts": [payload["accepted"]],
        "resource": payload["resource"],
        "payer": payload["payload"]["authorization"]["from"],
    }
    assert scrub(offer) is offer  # payTo, asset, amounts, the payer's address: public, untouched
    echoed = {"error": f"bad signature {PAYMENT_SIGNATURE}", "nonce": payload["payload"]["authorization"]["nonce"]}
    scrubbed = scrub(echoed)
    assert scrubbed == {"error": "bad signature (credential not shown)", "nonce": "(credential not shown)"}


def test_a_payment_header_is_found_whole_and_in_every_base64_form_of_its_json() -> None:
    payload = canary_payment(1)
    header = pretty_header_value(payload)
    scrub = redactor(payment=Payment("X-PAYMENT", header, "header")).scrub
    for written in (
        header,
        header.lower(),
        header_value(payload),
        base64.b64encode(json.dumps(payload, indent=4).encode()).decode(),
    ):
        assert not exposed([scrub(f"got {written} then")], payment_secret(header, payload)), written[:40]


def test_a_value_holding_nothing_is_returned_as_it_is_and_keys_are_scrubbed_too() -> None:
    scrub = redactor(FRESH_TOKEN).scrub_value
    value = {"a": [1, "two", {"three": None}]}
    assert scrub(value) is value
    assert scrub({FRESH_TOKEN: 1}) == {"fw1.…x7Vq": 1}


def test_a_log_record_made_while_a_request_is_handled_is_scrubbed_traceback_and_all() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(RequestFilter())
    logger = logging.getLogger("redaction-filter-test")  # not fairwins_mcp: the canary recorder stays out of it
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with request_bound(RequestContext(bearer=FRESH_TOKEN)):
            try:
                raise ValueError(f"a library that quotes its request: Authorization: Bearer {FRESH_TOKEN}")
            except ValueError:
                logger.exception("calling with %s failed", FRESH_TOKEN.upper())
        logger.error("outside a request: %s", "nothing to scrub")
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue()
    assert "ValueError: a library that quotes its request: Authorization: Bearer fw1.…x7Vq" in written
    assert "Traceback (most recent call last)" in written and "outside a request: nothing to scrub" in written
    assert not exposed([written], bearer_secret(FRESH_TOKEN))


def test_the_configured_stderr_handler_carries_the_filter() -> None:
    root = logging.getLogger("fairwins_mcp")
    saved = (list(root.handlers), root.level, root.propagate)
    try:
        logs.configure("info")
        assert any(isinstance(f, RequestFilter) for f in root.handlers[0].filters)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        root.propagate = saved[2]


def test_a_text_made_of_pieces_of_the_credential_is_withheld_whole_not_searched_forever() -> None:
    piece = FRESH_TOKEN[4:8]  # one aligned piece, repeated past the search's budget
    assert redactor(FRESH_TOKEN).scrub(piece * (MAX_CANDIDATES + 1)) == "(credential not shown)"
    assert redactor(FRESH_TOKEN).scrub(piece * 1000) == piece * 1000  # under the budget: searched, nothing found


@pytest.mark.parametrize("status", [200, 400])
def test_a_body_that_spells_the_bearer_in_json_escapes_alone_is_still_searched(
    sandbox: SandboxGateway, status: int
) -> None:
    # Every character \u-escaped: the raw bytes hold no piece of the token, the decoded JSON all of it.
    spelled = "".join(f"\\u{ord(ch):04X}" for ch in OPAQUE_TOKEN).encode()
    sandbox.fault(WAGERS, "status", status=status, body=b'{"chains":[],"message":"took ' + spelled + b'"}')
    ctx = RequestContext(bearer=OPAQUE_TOKEN, bearer_source="header")
    message = client_for(sandbox.url).request("tools/call", {"name": "get_wagers", "arguments": {}}, ctx=ctx)
    assert "result" in message
    leaks = exposed([json.dumps(message, ensure_ascii=False)], bearer_secret(OPAQUE_TOKEN))
    assert not leaks, leaks
