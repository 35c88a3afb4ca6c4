"""x402 payments (docs/payments.md): prices shown verbatim, payments carried once, receipts restated, secrets kept.

Pure functions first, then the real dispatcher over the sandbox gateway on a real socket, then the
stdio server as a subprocess. Every payment here carries CANARY, which must never come back.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import sys
import urllib.parse
from typing import Any

import pytest

from mcp_server.core.context import RequestContext
from mcp_server.fairwins import payments
from mcp_server.upstream.gateway import GatewayFailure, GatewayResponse, Outcome
from mcp_server.wire import x402
from mcp_server.wire.jsonrpc import INVALID_PARAMS, JSONObject, McpError
from mcp_server.wire.x402 import Payment
from tests import catalog
from tests.conftest import WAIT, McpClient, StdioProcess, client_for
from tests.outputs import failure_facts
from tests.samples import VALID_ARGUMENTS
from tests.sandbox_gateway import (
    PAY_TO,
    PAYER_ACCOUNT,
    TOKEN_MEMBER_A,
    USDC_BASE,
    USDC_POLYGON,
    V1_OFFER,
    V2_OFFER,
    SandboxGateway,
    v2_offer,
)

CANARY = "CANARY-5e0c9a1f-must-never-come-back"
WAGERS = "/v1/member/wagers"
FEES = "/v1/member/fees"
BUILD = "/v1/member/intents/build"
INTENT = {"intent": "create_wager", "chainId": 137, "params": {"stake": "1.00"}}
OFFER_2: dict[str, Any] = V2_OFFER


def v2_payment(**extra: Any) -> dict[str, Any]:
    """An x402 v2 PaymentPayload as an x402 client builds it (the signature is the canary)."""
    return {
        "x402Version": 2,
        "resource": OFFER_2["resource"],
        "accepted": OFFER_2["accepts"][0],
        "payload": {
            "signature": f"0x{CANARY}",
            "authorization": {
                "from": PAYER_ACCOUNT,
                "to": PAY_TO,
                "value": "20000",
                "validAfter": "1764440000",
                "validBefore": "1764440300",
                "nonce": f"0x{CANARY}-nonce",
            },
        },
        "extensions": {"memo": "café ☕", "note": None},
        **extra,
    }


def v1_payment() -> dict[str, Any]:
    return {
        "x402Version": 1,
        "scheme": "exact",
        "network": "polygon",
        "payload": {
            "signature": f"0x{CANARY}",
            "authorization": {
                "from": PAYER_ACCOUNT,
                "to": PAY_TO,
                "value": "10000",
                "validAfter": "1764440000",
                "validBefore": "1764440060",
                "nonce": f"0x{CANARY}-nonce",
            },
        },
    }


def b64(value: Any) -> str:
    """What x402 puts in a header: standard base64 of compact UTF-8 JSON."""
    return base64.b64encode(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")).decode()


def unb64(value: str) -> Any:
    return json.loads(base64.b64decode(value, validate=True))


def call(
    mcp: McpClient,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    payment: Any = None,
    ctx: RequestContext | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole JSON-RPC response to a tools/call, with `payment` in params._meta when given."""
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    extra = dict(meta or {})
    if payment is not None:
        extra[x402.PAYMENT_META_KEY] = payment
    if extra:
        params["_meta"] = extra
    return mcp.request("tools/call", params, ctx=ctx)


def result_of(message: dict[str, Any]) -> dict[str, Any]:
    assert "result" in message, f"a JSON-RPC error instead of a result: {message}"
    result: dict[str, Any] = message["result"]
    return result


def words(result: dict[str, Any]) -> str:
    return " ".join(block["text"] for block in result["content"])


def seen_on(sandbox: SandboxGateway, path: str) -> list[Any]:
    return [request for request in sandbox.seen if request.path == path]


def attempts_after(sandbox: SandboxGateway, mcp: McpClient, path: str) -> int:
    """How often `path` was asked, counted once a later free call has reached the gateway.

    Gateway calls are synchronous, so every attempt of the paid call left before it returned; the
    marker call after it makes sure the gateway has also recorded them all.
    """
    assert result_of(call(mcp, "get_gateway_status"))["isError"] is False
    return len(seen_on(sandbox, path))


def gateway_receipt(sandbox: SandboxGateway, method: str, path: str, header: str, value: str) -> tuple[str, str]:
    """The receipt header the gateway itself sends for this payment, asked directly (name, exact value)."""
    parts = urllib.parse.urlsplit(sandbox.url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=WAIT)
    try:
        body = json.dumps(INTENT).encode() if method == "POST" else None
        conn.request(method, path, body=body, headers={header: value, "Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        for name in payments.RECEIPT_HEADERS:
            raw = resp.getheader(name)
            if raw is not None:
                return name, raw
        raise AssertionError(f"the gateway sent no receipt ({resp.status})")
    finally:
        conn.close()


def assert_no_secret(text: str, *secrets: str) -> None:
    for secret in (CANARY, *secrets):
        assert secret not in text


# ---- pure: where a payment comes from -------------------------------------------------------


def test_a_meta_payment_of_version_2_is_forwarded_as_base64_compact_json_under_payment_signature() -> None:
    payment = x402.from_meta(v2_payment())
    assert payment.header == "PAYMENT-SIGNATURE"
    assert payment.value == b64(v2_payment())  # compact, UTF-8 kept (no \\u escapes), standard padded base64
    assert unb64(payment.value) == v2_payment()
    assert payment.source == "meta"


def test_a_meta_payment_of_version_1_is_forwarded_under_x_payment() -> None:
    payment = x402.from_meta(v1_payment())
    assert (payment.header, payment.value) == ("X-PAYMENT", b64(v1_payment()))


@pytest.mark.parametrize(
    "value",
    [
        "a string",
        b64(v2_payment()),  # base64 belongs in a header, not in _meta
        [v2_payment()],
        None,
        {"payload": {"signature": CANARY}},
        {"x402Version": 3, "payload": CANARY},
        {"x402Version": "2", "payload": CANARY},
        {"x402Version": True, "payload": CANARY},
        {"x402Version": 2.0, "payload": CANARY},
    ],
)
def test_a_meta_payment_that_is_not_an_object_of_version_1_or_2_is_invalid_params_without_echo(value: Any) -> None:
    with pytest.raises(McpError) as caught:
        x402.from_meta(value)
    assert caught.value.code == INVALID_PARAMS
    assert "x402/payment" in caught.value.message
    assert_no_secret(json.dumps(caught.value.to_error()))


def test_a_meta_payment_with_a_number_json_cannot_carry_is_invalid_params() -> None:
    with pytest.raises(McpError) as caught:
        x402.from_meta(v2_payment(extensions={"n": float("inf")}))
    assert caught.value.code == INVALID_PARAMS


def test_a_meta_payment_over_16_kib_once_encoded_is_refused_by_name() -> None:
    # 16 KiB: four times what the largest x402 scheme writes (wire/x402.py, MAX_PAYMENT_BYTES).
    with pytest.raises(McpError) as caught:
        x402.from_meta(v2_payment(extensions={"pad": "x" * 12_500}))
    assert caught.value.code == INVALID_PARAMS
    assert "16 KiB any x402 payment takes" in caught.value.message
    assert x402.from_meta(v2_payment(extensions={"pad": "x" * 11_000})).value  # under it: carried


def test_no_payment_header_is_no_payment() -> None:
    assert x402.from_http_headers({"authorization": "Bearer x", "accept": "application/json"}) == (None, None)


@pytest.mark.parametrize(
    ("name", "forwarded"), [("x-payment", "X-PAYMENT"), ("payment-signature", "PAYMENT-SIGNATURE")]
)
def test_a_payment_header_is_carried_byte_for_byte_under_its_own_name(name: str, forwarded: str) -> None:
    value = b64(v2_payment())
    payment, problem = x402.from_http_headers({"host": "localhost", name: value})
    assert problem is None and payment is not None
    assert (payment.header, payment.value, payment.source) == (forwarded, value, "header")


def test_an_unpadded_payment_header_is_carried_unpadded() -> None:
    value = b64(v2_payment()).rstrip("=")
    payment, _ = x402.from_http_headers({"x-payment": value})
    assert payment is not None and payment.value == value  # never "fixed"


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"x-payment": b64(v1_payment()), "payment-signature": b64(v2_payment())}, "two payment headers"),
        ({"x-payment": b64(v1_payment()) + ", " + b64(v1_payment())}, "more than one X-PAYMENT"),
        ({"payment-signature": b64(v2_payment()).replace("+", "-").replace("/", "_") + "-_"}, "not standard base64"),
        ({"x-payment": f"{CANARY}\r\nAuthorization: Bearer stolen"}, "not standard base64"),
        ({"payment-signature": ""}, "not standard base64"),
        ({"payment-signature": "A" * (16 * 1024 + 4)}, "16 KiB any x402 payment takes"),
    ],
)
def test_payment_headers_that_cannot_be_carried_are_refused_with_a_reason_that_quotes_no_value(
    headers: dict[str, str], reason: str
) -> None:
    payment, problem = x402.from_http_headers(headers)
    assert payment is None
    assert problem is not None and reason in problem
    assert_no_secret(problem, *(value for value in headers.values() if value))


def test_a_payment_header_of_16_kib_is_carried() -> None:
    value = "A" * (16 * 1024)
    payment, problem = x402.from_http_headers({"x-payment": value})
    assert problem is None and payment is not None and payment.value == value


def test_the_same_payment_in_a_header_and_in_meta_is_one_payment_and_the_header_bytes_win() -> None:
    # Different bytes (key order, spacing), same JSON: what a client sending both ways produces.
    loose = base64.b64encode(json.dumps(v2_payment(), sort_keys=True, indent=1).encode()).decode()
    header = Payment("PAYMENT-SIGNATURE", loose, "header")
    merged, problem = x402.merge(header, x402.from_meta(v2_payment()))
    assert problem is None and merged == header


def test_two_different_payments_are_refused_and_neither_is_kept() -> None:
    header = Payment("PAYMENT-SIGNATURE", b64(v2_payment(resource={"url": "elsewhere"})), "header")
    merged, problem = x402.merge(header, x402.from_meta(v2_payment()))
    assert merged is None and problem is not None and "two different payments" in problem
    other_version = Payment("X-PAYMENT", b64(v1_payment()), "header")
    assert x402.merge(other_version, x402.from_meta(v2_payment()))[0] is None


def test_a_payment_never_shows_its_value_in_its_repr() -> None:
    payment = x402.from_meta(v2_payment())
    assert payment.value not in repr(payment) and CANARY not in repr(payment)


# ---- pure: offers and paid outcomes -----------------------------------------------------------


def response(status: int, headers: tuple[tuple[str, str], ...] = (), body: Any = b"") -> GatewayResponse:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return GatewayResponse(status, (("Content-Type", "application/json"), *headers), raw)


def test_an_offer_is_read_from_payment_required_before_the_body() -> None:
    resp = response(402, (("PAYMENT-REQUIRED", b64(V2_OFFER)),), V1_OFFER)
    assert payments.read_offer(resp) == V2_OFFER


def test_a_v1_offer_is_read_from_the_body_only_when_it_says_version_1() -> None:
    assert payments.read_offer(response(402, (), V1_OFFER)) == V1_OFFER
    assert payments.read_offer(response(402, (), {**V1_OFFER, "x402Version": 2})) is None
    assert payments.read_offer(response(402, (), {"error": "payment_required", "message": "pay"})) is None


@pytest.mark.parametrize("header", ["not base64 at all!", b64("a string"), b64({"x402Version": 2}), "e30"])
def test_an_unreadable_payment_required_header_is_no_offer(header: str) -> None:
    assert payments.read_offer(response(402, (("PAYMENT-REQUIRED", header),), {})) is None


def test_the_price_states_atomic_amounts_asset_network_and_recipient_and_known_usdc_in_words() -> None:
    text = payments.price_sentence(V2_OFFER, "build_intent")
    for fact in ("20000 atomic units", USDC_POLYGON, USDC_BASE, "eip155:137", "eip155:8453", PAY_TO, "exact"):
        assert fact in text
    # Issue 62: the amount in words beside the atomic units, where the asset is USDC on its own chain.
    assert text.count("costs 0.02 USDC (20000 atomic units of asset") == 1
    assert text.count("or 0.02 USDC (20000 atomic units of asset") == 1
    assert "$" not in text


def test_an_asset_this_server_does_not_know_is_stated_in_atomic_units_alone() -> None:
    usdc = {"scheme": "exact", "amount": "20000", "payTo": PAY_TO}
    for unknown in (
        {**usdc, "network": "eip155:137", "asset": "0x0000000000000000000000000000000000000bad"},
        {**usdc, "network": "eip155:10", "asset": USDC_POLYGON},  # USDC's Polygon address on another chain
        {**usdc, "network": "eip155:8453", "asset": USDC_POLYGON},
        {**usdc, "network": "eip155:137", "asset": USDC_POLYGON, "amount": "0.02"},  # not atomic
    ):
        text = payments.price_sentence({"x402Version": 2, "accepts": [unknown]}, "get_fees")
        assert f"costs {unknown['amount']} atomic units of asset {unknown['asset']}" in text
        assert "USDC" not in text


@pytest.mark.parametrize(
    ("amount", "network", "asset", "words"),
    [
        ("10000", "polygon", USDC_POLYGON, "0.01 USDC"),
        ("10000", "eip155:137", USDC_POLYGON.lower(), "0.01 USDC"),
        ("1", "base", USDC_BASE, "0.000001 USDC"),
        ("1500000", "eip155:8453", USDC_BASE.upper().replace("0X", "0x"), "1.5 USDC"),
        ("1000000", "eip155:1", "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48", "1 USDC"),
        ("0", "polygon", USDC_POLYGON, "0 USDC"),
        (10000, "polygon", USDC_POLYGON, "0.01 USDC"),
        ("123456789012345678901234567890", "polygon", USDC_POLYGON, "123456789012345678901234.56789 USDC"),
        ("-10000", "polygon", USDC_POLYGON, None),
        ("1e4", "polygon", USDC_POLYGON, None),
        (True, "polygon", USDC_POLYGON, None),
        ("10000", "ethereum", "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48", None),
        ("10000", None, USDC_POLYGON, None),
    ],
)
def test_an_amount_in_words_is_exact_for_known_usdc_and_none_otherwise(
    amount: object, network: object, asset: object, words: str | None
) -> None:
    assert payments.in_words(amount, asset, network) == words


def test_an_upto_price_is_stated_as_a_maximum() -> None:
    option: dict[str, Any] = {"scheme": "upto", "amount": "500", "network": "n", "asset": "a", "payTo": "p"}
    assert "up to 500 atomic units" in payments.price_sentence({"x402Version": 2, "accepts": [option]}, "get_fees")
    usdc = {**option, "network": "eip155:137", "asset": USDC_POLYGON}
    words = payments.price_sentence({"x402Version": 2, "accepts": [usdc]}, "get_fees")
    assert "costs up to 0.0005 USDC (500 atomic units of asset" in words


def _answer(resp: GatewayResponse) -> JSONObject:
    return {
        "content": [{"type": "text", "text": resp.body.decode()}],
        "structuredContent": json.loads(resp.body),
        "isError": False,
    }


def _failure(outcome: Outcome) -> str:
    return "Could not read it."


def paid(outcome: Outcome) -> tuple[JSONObject, dict[str, str]]:
    headers: dict[str, str] = {}
    return payments.paid_result(outcome, "get_wagers", headers, _answer, _failure), headers


@pytest.mark.parametrize(
    "outcome",
    [
        GatewayFailure("timeout", "it did not answer in time", True),
        GatewayFailure("reset", "the connection was reset", True),
        GatewayFailure("unreadable", "a header line was over the 64 KiB limit", True),
        GatewayResponse(502, (), b'{"error":"bad_gateway"}'),
        GatewayResponse(500, (), b""),
        GatewayResponse(504, (), b""),
        GatewayResponse(402, (), b""),
        GatewayResponse(402, (), b"{}"),
    ],
    ids=["timeout", "reset", "unreadable", "502", "500", "504", "bare-402", "402-empty-object"],
)
def test_a_paid_call_whose_outcome_cannot_be_known_says_so_and_forbids_resubmitting(outcome: Outcome) -> None:
    result, headers = paid(outcome)
    assert result["isError"] is True and "structuredContent" not in result
    assert "outcome is unknown" in words(result) and "Do not resubmit this payment" in words(result)
    assert headers == {}


@pytest.mark.parametrize("cause", ["refused", "dns", "not_configured"])
def test_a_paid_call_that_never_left_says_the_payment_was_sent_nowhere(cause: str) -> None:
    result, _ = paid(GatewayFailure(cause, "no", False, 1))
    assert "was not sent anywhere" in words(result) and "unknown" not in words(result)


def test_a_paid_answer_without_a_receipt_keeps_the_answer_and_says_settlement_is_unknown() -> None:
    result, headers = paid(response(200, (), {"ok": True}))
    assert result["structuredContent"] == {"ok": True}
    assert "no payment receipt" in words(result) and "Do not resubmit" in words(result)
    assert headers == {} and "_meta" not in result


def test_an_unreadable_receipt_is_still_copied_but_not_invented() -> None:
    result, headers = paid(response(200, (("PAYMENT-RESPONSE", "bm90IGpzb24="),), {"ok": True}))
    assert headers == {"PAYMENT-RESPONSE": "bm90IGpzb24="}
    assert "_meta" not in result and "could not be read" in words(result)


def test_a_receipt_that_could_break_a_header_is_not_copied() -> None:
    result, headers = paid(response(200, (("X-PAYMENT-RESPONSE", "a\x00b"),), {"ok": True}))
    assert headers == {} and "could not be read" in words(result)


def test_a_fresh_offer_after_a_payment_says_the_payment_was_not_accepted_and_shows_the_price() -> None:
    result, _ = paid(response(402, (), {**V1_OFFER, "error": "invalid_payment"}))
    assert result["structuredContent"] == {**V1_OFFER, "error": "invalid_payment"}
    assert words(result).startswith(result["content"][0]["text"] + " The gateway did not accept the payment")


# ---- the dispatcher over the sandbox gateway: prices -----------------------------------------


def test_a_v1_price_for_wagers_is_the_offer_verbatim_plus_a_sentence(mcp: McpClient) -> None:
    result = result_of(call(mcp, "get_wagers"))
    assert result["isError"] is True
    assert result["structuredContent"] == V1_OFFER  # nulls and unknown keys included
    assert json.loads(result["content"][0]["text"]) == V1_OFFER
    sentence = result["content"][1]["text"]
    for fact in ("0.01 USDC (10000 atomic units", USDC_POLYGON, "network polygon", PAY_TO):
        assert fact in sentence
    assert "price, not an outage" in sentence
    assert "holds no key and cannot pay" in sentence
    assert 'params._meta["x402/payment"]' in sentence and "X-PAYMENT" in sentence


def test_a_v2_price_for_build_intent_is_the_decoded_header_verbatim(mcp: McpClient) -> None:
    result = result_of(call(mcp, "build_intent", INTENT))
    assert result["structuredContent"] == V2_OFFER
    assert result["structuredContent"]["extensions"]["fairwins-sandbox"]["info"]["note"] is None
    assert json.loads(result["content"][0]["text"]) == V2_OFFER
    assert "20000 atomic units" in result["content"][1]["text"] and "eip155:8453" in result["content"][1]["text"]


def test_a_v2_price_for_fees_is_surfaced_too(sandbox: SandboxGateway, mcp: McpClient) -> None:
    offer = v2_offer(FEES)
    sandbox.fault(FEES, "status", status=402, body={}, headers={"PAYMENT-REQUIRED": b64(offer)})
    result = result_of(call(mcp, "get_fees"))
    assert result["structuredContent"] == offer and "10000 atomic units" in words(result)


@pytest.mark.parametrize(
    "fault",
    [
        {"kind": "bare_402"},
        {"kind": "status", "status": 402, "body": {"error": "payment_required", "message": "pay up"}},
        {"kind": "status", "status": 402, "body": {}, "headers": {"PAYMENT-REQUIRED": "%%%not-base64%%%"}},
        {"kind": "status", "status": 402, "body": b"<html>Pay</html>"},
    ],
    ids=["bare", "json-no-offer", "garbled-header", "html"],
)
def test_a_402_without_a_readable_offer_is_an_honest_error_naming_the_status(
    sandbox: SandboxGateway, mcp: McpClient, fault: dict[str, Any]
) -> None:
    params = dict(fault)
    sandbox.fault(WAGERS, params.pop("kind"), **params)
    result = result_of(call(mcp, "get_wagers"))
    assert failure_facts(result, "refused_request")["status"] == 402
    assert "(HTTP 402" in words(result) and "no price" in words(result)
    assert "atomic units" not in words(result)


def test_a_412_with_an_offer_says_a_one_time_approval_is_needed_with_the_offer(
    sandbox: SandboxGateway, mcp: McpClient
) -> None:
    sandbox.fault(BUILD, "approval_412")
    result = result_of(call(mcp, "build_intent", INTENT))
    assert result["isError"] is True
    assert result["structuredContent"] == v2_offer(BUILD, "permit2_allowance_required", transfer_method="permit2")
    assert "one-time approval" in words(result) and "412" in words(result)


def test_a_member_with_a_token_is_served_not_priced(mcp: McpClient) -> None:
    result = mcp.call_tool("get_wagers", bearer=TOKEN_MEMBER_A)
    assert result["isError"] is False and "x402Version" not in result["structuredContent"]


# ---- the dispatcher over the sandbox gateway: carrying a payment ------------------------------


def test_a_meta_payment_reaches_the_gateway_once_as_exact_base64_with_no_authorization(
    sandbox: SandboxGateway, mcp: McpClient
) -> None:
    ctx = RequestContext(bearer=TOKEN_MEMBER_A, bearer_source="env")
    result = result_of(call(mcp, "build_intent", INTENT, payment=v2_payment(), ctx=ctx))
    assert result["isError"] is False and "typedData" in result["structuredContent"]
    (seen,) = seen_on(sandbox, BUILD)
    assert seen.header_values("PAYMENT-SIGNATURE") == [b64(v2_payment())]
    assert seen.header("X-PAYMENT") is None
    assert seen.header("Authorization") is None  # the payment replaces the member's token
    assert seen.header("Accept") == "application/json"
    assert (seen.header("User-Agent") or "").startswith("fairwins-mcp/") and "Mozilla" not in (
        seen.header("User-Agent") or ""
    )
    assert json.loads(seen.body) == INTENT  # the same request that was priced, plus the payment


def test_a_paid_answer_carries_the_receipt_decoded_in_meta_in_words_and_byte_for_byte_in_headers(
    sandbox: SandboxGateway, mcp: McpClient
) -> None:
    ctx = RequestContext()
    result = result_of(call(mcp, "build_intent", INTENT, payment=v2_payment(), ctx=ctx))
    name, raw = gateway_receipt(sandbox, "POST", BUILD, "PAYMENT-SIGNATURE", b64(v2_payment()))
    assert name == "PAYMENT-RESPONSE"
    assert ctx.response_headers == {"PAYMENT-RESPONSE": raw}
    receipt = unb64(raw)
    assert result["_meta"][payments.RESPONSE_META_KEY] == receipt
    text = result["content"][-1]["text"]
    for fact in (receipt["transaction"], "eip155:137", PAYER_ACCOUNT, "broadcast, not confirmed"):
        assert fact in text


def test_a_v1_meta_payment_goes_out_as_x_payment_and_its_receipt_comes_back_as_x_payment_response(
    sandbox: SandboxGateway, mcp: McpClient
) -> None:
    ctx = RequestContext()
    result = result_of(call(mcp, "get_wagers", payment=v1_payment(), ctx=ctx))
    assert result["isError"] is False
    (seen,) = seen_on(sandbox, WAGERS)
    assert seen.header_values("X-PAYMENT") == [b64(v1_payment())] and seen.header("PAYMENT-SIGNATURE") is None
    name, raw = gateway_receipt(sandbox, "GET", WAGERS, "X-PAYMENT", b64(v1_payment()))
    assert ctx.response_headers == {name: raw} and name == "X-PAYMENT-RESPONSE"
    assert result["_meta"][payments.RESPONSE_META_KEY] == unb64(raw)


@pytest.mark.parametrize(
    ("name", "path", "tool"), [("X-PAYMENT", WAGERS, "get_wagers"), ("PAYMENT-SIGNATURE", BUILD, "build_intent")]
)
def test_a_header_payment_is_forwarded_byte_for_byte_under_the_same_name(
    sandbox: SandboxGateway, mcp: McpClient, name: str, path: str, tool: str
) -> None:
    # Unusual but valid bytes: key order and spacing a re-encoder would change.
    body = v1_payment() if name == "X-PAYMENT" else v2_payment()
    value = base64.b64encode(json.dumps(body, indent=2, sort_keys=True).encode()).decode()
    payment, _ = x402.from_http_headers({name.lower(): value})
    ctx = RequestContext(bearer=TOKEN_MEMBER_A, bearer_source="header", payment=payment)
    result = result_of(call(mcp, tool, INTENT if tool == "build_intent" else {}, ctx=ctx))
    assert result["isError"] is False
    (seen,) = seen_on(sandbox, path)
    assert [(k, v) for k, v in seen.headers if k.lower() in ("x-payment", "payment-signature")] == [(name, value)]
    assert seen.header("Authorization") is None


def test_the_same_payment_in_a_header_and_in_meta_is_sent_once_with_the_header_bytes(
    sandbox: SandboxGateway, mcp: McpClient
) -> None:
    value = base64.b64encode(json.dumps(v2_payment(), indent=1).encode()).decode()
    ctx = RequestContext(payment=Payment("PAYMENT-SIGNATURE", value, "header"))
    assert result_of(call(mcp, "build_intent", INTENT, payment=v2_payment(), ctx=ctx))["isError"] is False
    (seen,) = seen_on(sandbox, BUILD)
    assert seen.header_values("PAYMENT-SIGNATURE") == [value]


@pytest.mark.parametrize(
    "ctx",
    [
        RequestContext(payment=Payment("PAYMENT-SIGNATURE", b64(v2_payment(resource={"url": "other"})), "header")),
        RequestContext(payment=Payment("X-PAYMENT", b64(v1_payment()), "header")),
        RequestContext(payment_conflict="the request carried two payment headers (X-PAYMENT and PAYMENT-SIGNATURE)"),
    ],
    ids=["different-header-payment", "other-version-header", "transport-conflict"],
)
def test_two_different_payments_on_one_call_are_refused_and_nothing_is_forwarded(
    sandbox: SandboxGateway, mcp: McpClient, ctx: RequestContext
) -> None:
    result = result_of(call(mcp, "build_intent", INTENT, payment=v2_payment(), ctx=ctx))
    assert result["isError"] is True and "refused" in words(result) and "Nothing was sent" in words(result)
    assert attempts_after(sandbox, mcp, BUILD) == 0
    assert ctx.response_headers == {}
    assert_no_secret(json.dumps(result))


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [(tool, VALID_ARGUMENTS.get(tool, {})) for tool in catalog.SERVED if tool not in catalog.PRICED],
)
@pytest.mark.parametrize("carried", ["meta", "header"])
def test_a_payment_for_a_call_that_is_never_priced_is_refused_and_sent_nowhere(
    sandbox: SandboxGateway, mcp: McpClient, tool: str, arguments: dict[str, Any], carried: str
) -> None:
    ctx = RequestContext(bearer=TOKEN_MEMBER_A, bearer_source="env")
    if carried == "header":
        ctx.payment = x402.from_http_headers({"x-payment": b64(v1_payment())})[0]
    result = result_of(call(mcp, tool, arguments, payment=v2_payment() if carried == "meta" else None, ctx=ctx))
    assert result["isError"] is True
    assert "sent nowhere" in words(result) and tool in words(result)
    assert sandbox.seen == []  # not even the call itself was made
    assert_no_secret(json.dumps(result), b64(v1_payment()), b64(v2_payment()))


def test_a_malformed_meta_payment_is_invalid_params_and_nothing_is_sent(
    sandbox: SandboxGateway, mcp: McpClient
) -> None:
    message = call(mcp, "get_wagers", payment={"x402Version": 7, "payload": {"signature": CANARY}})
    assert message["error"]["code"] == INVALID_PARAMS
    assert_no_secret(json.dumps(message))
    assert attempts_after(sandbox, mcp, WAGERS) == 0


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get_wagers", {"X-PAYMENT": b64(v1_payment())}),
        ("get_wagers", {"x402/payment": v1_payment()}),
        ("get_fees", {"_meta": {"x402/payment": v2_payment()}}),
    ],
)
def test_a_tool_argument_cannot_carry_a_payment(
    sandbox: SandboxGateway, mcp: McpClient, tool: str, arguments: dict[str, Any]
) -> None:
    result = result_of(call(mcp, tool, arguments))
    assert result["isError"] is True and "Nothing was sent" in words(result)
    assert sandbox.seen == []


def test_a_payment_inside_build_intent_params_travels_as_data_never_as_a_payment(
    sandbox: SandboxGateway, mcp: McpClient
) -> None:
    arguments = {**INTENT, "params": {"x402/payment": v2_payment(), "X-PAYMENT": b64(v1_payment())}}
    result = result_of(call(mcp, "build_intent", arguments))
    assert result["structuredContent"] == V2_OFFER  # still priced: nothing paid
    (seen,) = seen_on(sandbox, BUILD)
    assert seen.header("X-PAYMENT") is None and seen.header("PAYMENT-SIGNATURE") is None


def test_a_paid_call_sends_no_progress_or_log_notifications(sandbox: SandboxGateway, mcp: McpClient) -> None:
    sent: list[JSONObject] = []
    mcp.request("logging/setLevel", {"level": "debug"})
    ctx = RequestContext(send=sent.append)
    result = result_of(call(mcp, "get_wagers", payment=v1_payment(), ctx=ctx, meta={"progressToken": "p1"}))
    assert result["isError"] is False and sent == []
    # The same call unpaid does report progress: the silence above is the payment's doing.
    ctx = RequestContext(send=sent.append, bearer=TOKEN_MEMBER_A)
    call(mcp, "get_wagers", ctx=ctx, meta={"progressToken": "p2"})
    assert [m["method"] for m in sent] == ["notifications/progress"] * 2


# ---- exactly once ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        {"kind": "status", "status": 502},
        {"kind": "status", "status": 503},
        {"kind": "reset_mid_body"},
        {"kind": "reset_before"},
        {"kind": "bare_402"},
        {"kind": "delay", "seconds": 60},
    ],
    ids=["502", "503", "reset-mid-body", "reset-before-answer", "bare-402", "timeout"],
)
def test_a_paid_request_is_sent_exactly_once_and_an_unknown_outcome_says_do_not_resubmit(
    sandbox: SandboxGateway, fault: dict[str, Any]
) -> None:
    mcp = client_for(sandbox.url, timeout=0.5)
    params = dict(fault)
    sandbox.fault(WAGERS, params.pop("kind"), **params)  # every attempt, not just the first
    result = result_of(call(mcp, "get_wagers", payment=v1_payment()))
    failure_facts(result)
    assert "outcome is unknown" in words(result) and "Do not resubmit this payment" in words(result)
    assert attempts_after(sandbox, mcp, WAGERS) == 1
    assert_no_secret(json.dumps(result), b64(v1_payment()))


def test_the_same_faults_unpaid_are_retried_which_is_what_makes_the_single_attempt_a_choice(
    sandbox: SandboxGateway,
) -> None:
    mcp = client_for(sandbox.url)
    sandbox.fault(WAGERS, "reset_before")
    mcp.call_tool("get_wagers", bearer=TOKEN_MEMBER_A)
    assert attempts_after(sandbox, mcp, WAGERS) == 3


def test_a_fresh_offer_after_a_payment_is_one_attempt_and_shows_the_new_price(
    sandbox: SandboxGateway, mcp: McpClient
) -> None:
    # The sandbox answers a payment it cannot read with a fresh offer, as an x402 server does.
    ctx = RequestContext(payment=Payment("X-PAYMENT", b64({"x402Version": 2, "canary": CANARY}), "header"))
    result = result_of(call(mcp, "get_wagers", ctx=ctx))
    assert result["structuredContent"]["accepts"] == V1_OFFER["accepts"]
    assert "did not accept the payment" in words(result)
    assert attempts_after(sandbox, mcp, WAGERS) == 1


@pytest.mark.parametrize(("tool", "path", "version"), [("build_intent", BUILD, 2), ("get_wagers", WAGERS, 1)])
def test_a_settlement_failure_is_an_error_with_the_reason_and_no_tool_content(
    sandbox: SandboxGateway, mcp: McpClient, tool: str, path: str, version: int
) -> None:
    sandbox.fault(path, "settlement_failed", reason="insufficient_funds")
    ctx = RequestContext()
    payment = v2_payment() if version == 2 else v1_payment()
    result = result_of(call(mcp, tool, INTENT if version == 2 else {}, payment=payment, ctx=ctx))
    assert failure_facts(result, "settlement_failed")["status"] == 402 and len(result["content"]) == 1
    assert "insufficient_funds" in words(result) and "did not settle" in words(result)
    assert "typedData" not in words(result) and "chains" not in words(result)
    receipt = result["_meta"][payments.RESPONSE_META_KEY]
    assert receipt["success"] is False
    ((name, raw),) = ctx.response_headers.items()
    assert name == ("PAYMENT-RESPONSE" if version == 2 else "X-PAYMENT-RESPONSE") and unb64(raw) == receipt
    assert attempts_after(sandbox, mcp, path) == 1


# ---- sizes -------------------------------------------------------------------------------------


def test_an_offer_of_nearly_64_kib_of_headers_is_shown_whole(sandbox: SandboxGateway, mcp: McpClient) -> None:
    offer = {**V2_OFFER, "extensions": {"signed-offers": {"info": ["x" * 1000] * 43}}}
    header = b64(offer)
    assert 58_000 < len(header) < 62_000
    sandbox.fault(WAGERS, "status", status=402, body={}, headers={"PAYMENT-REQUIRED": header})
    result = result_of(call(mcp, "get_wagers"))
    assert result["structuredContent"] == offer


@pytest.mark.parametrize("split", [False, True], ids=["one-long-header", "headers-over-budget-together"])
def test_offer_headers_over_64_kib_are_refused_with_a_clear_error(
    sandbox: SandboxGateway, mcp: McpClient, split: bool
) -> None:
    offer = {**V2_OFFER, "extensions": {"pad": "x" * 52_000}}
    headers = {"PAYMENT-REQUIRED": b64(offer)}
    if split:
        headers = {"PAYMENT-REQUIRED": b64(V2_OFFER), "X-Padding": "p" * 34_000, "X-Padding-2": "q" * 34_000}
    sandbox.fault(WAGERS, "status", status=402, body={}, headers=headers)
    result = result_of(call(mcp, "get_wagers"))
    failure_facts(result, "unreadable_answer")
    assert "64 KiB" in words(result) and "atomic units" not in words(result)


def test_a_payment_header_of_nearly_16_kib_reaches_the_gateway_intact(sandbox: SandboxGateway, mcp: McpClient) -> None:
    big = v2_payment(extensions={"pad": "z" * 11_000})
    value = b64(big)
    assert 15_000 < len(value) <= 16 * 1024
    payment, problem = x402.from_http_headers({"payment-signature": value})
    assert problem is None
    result = result_of(call(mcp, "build_intent", INTENT, ctx=RequestContext(payment=payment)))
    assert result["isError"] is False
    (seen,) = seen_on(sandbox, BUILD)
    assert seen.header("PAYMENT-SIGNATURE") == value


# ---- secrets ------------------------------------------------------------------------------------


def test_no_payment_value_reaches_a_log_line_a_result_or_an_error(
    sandbox: SandboxGateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    mcp = client_for(sandbox.url, timeout=0.5)
    mcp.request("logging/setLevel", {"level": "debug"})
    sent: list[JSONObject] = []
    replies = []
    faults: tuple[dict[str, Any], ...] = (
        {},
        {"kind": "status", "status": 502},
        {"kind": "delay", "seconds": 60},
        {"kind": "settlement_failed"},
    )
    for fault in faults:
        sandbox.clear_faults()
        if fault:
            params = dict(fault)
            sandbox.fault(BUILD, params.pop("kind"), **params)
        replies.append(call(mcp, "build_intent", INTENT, payment=v2_payment(), ctx=RequestContext(send=sent.append)))
    replies.append(call(mcp, "get_profile", payment=v2_payment()))
    replies.append(call(mcp, "get_wagers", payment={"x402Version": 9, "signature": CANARY}))
    replies.append(
        call(
            mcp, "get_wagers", payment=v1_payment(), ctx=RequestContext(payment=Payment("X-PAYMENT", "QUJD", "header"))
        )
    )
    everything = json.dumps(replies, ensure_ascii=False) + json.dumps(sent) + caplog.text
    assert_no_secret(everything, b64(v2_payment()), b64(v1_payment()))
    assert len(replies) == 7


# ---- stdio, as a subprocess -------------------------------------------------------------------


def stdio_call(
    process: StdioProcess, request_id: int, name: str, arguments: dict[str, Any], payment: Any = None
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if payment is not None:
        params["_meta"] = {x402.PAYMENT_META_KEY: payment}
    process.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
    return result_of(process.response_to(request_id))


def start_stdio(stdio_process: Any, sandbox: SandboxGateway, **env: str) -> StdioProcess:
    process: StdioProcess = stdio_process(
        [sys.executable, "-m", "mcp_server"],
        FAIRWINS_API_URL=sandbox.url,
        FAIRWINS_MCP_TIMEOUT="1",
        FAIRWINS_MCP_LOG_LEVEL="debug",
        **env,
    )
    process.send(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    assert "result" in process.response_to(0)
    return process


def test_over_stdio_a_price_then_a_paid_call_with_its_receipt_then_the_end_without_a_trace(
    stdio_process: Any, sandbox: SandboxGateway
) -> None:
    process = start_stdio(stdio_process, sandbox)
    price = stdio_call(process, 1, "get_wagers", {})
    assert price["isError"] is True and price["structuredContent"] == V1_OFFER
    assert json.loads(price["content"][0]["text"]) == V1_OFFER

    paid_result = stdio_call(process, 2, "build_intent", INTENT, v2_payment())
    assert paid_result["isError"] is False
    seen = seen_on(sandbox, BUILD)[-1]
    assert seen.header_values("PAYMENT-SIGNATURE") == [b64(v2_payment())] and seen.header("Authorization") is None
    receipt = paid_result["_meta"][payments.RESPONSE_META_KEY]
    assert receipt["payer"] == PAYER_ACCOUNT and "broadcast, not confirmed" in words(paid_result)
    _, raw = gateway_receipt(sandbox, "POST", BUILD, "PAYMENT-SIGNATURE", b64(v2_payment()))
    assert receipt == unb64(raw)

    process.close_stdin()
    assert process.wait() == 0
    assert_no_secret(b"".join(process.lines).decode() + process.stderr, b64(v2_payment()))


def test_over_stdio_a_paid_call_that_fails_is_sent_once_and_reported_unknown(
    stdio_process: Any, sandbox: SandboxGateway
) -> None:
    process = start_stdio(stdio_process, sandbox)
    sandbox.fault(WAGERS, "status", status=502)
    result = stdio_call(process, 1, "get_wagers", {}, v1_payment())
    assert "outcome is unknown" in words(result) and "Do not resubmit this payment" in words(result)
    assert stdio_call(process, 2, "get_gateway_status", {})["isError"] is False  # the marker call
    assert len(seen_on(sandbox, WAGERS)) == 1
    refused = stdio_call(process, 3, "get_membership", {}, v1_payment())
    assert "sent nowhere" in words(refused) and not any(r.path == "/v1/member/membership" for r in sandbox.seen)
    process.close_stdin()
    assert process.wait() == 0
    assert_no_secret(b"".join(process.lines).decode() + process.stderr, b64(v1_payment()))


def test_over_stdio_no_environment_variable_can_carry_a_payment(stdio_process: Any, sandbox: SandboxGateway) -> None:
    planted = {
        "X_PAYMENT": b64(v1_payment()),
        "PAYMENT_SIGNATURE": b64(v2_payment()),
        "FAIRWINS_PAYMENT": b64(v1_payment()),
        "FAIRWINS_X402_PAYMENT": b64(v2_payment()),
        "X402_PAYMENT": b64(v1_payment()),
    }
    process = start_stdio(stdio_process, sandbox, **planted)
    assert stdio_call(process, 1, "get_wagers", {})["structuredContent"] == V1_OFFER
    assert stdio_call(process, 2, "build_intent", INTENT)["structuredContent"] == V2_OFFER
    for seen in sandbox.seen:
        assert not any(k.lower() in ("x-payment", "payment-signature", "authorization") for k, _ in seen.headers)
    process.close_stdin()
    assert process.wait() == 0
