"""x402 payments, carried and never made: where a payment comes from, how a price and a receipt read.

This server holds no key. It shows the gateway's price exactly as offered, forwards a payment
somebody else signed (PAYMENTS.md), and restates the gateway's receipt. A payment is a bearer
instrument until it expires, so its value appears in no sentence, log line or result built here.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, Final

from .context import Payment, RequestContext
from .gateway import GatewayFailure, GatewayResponse, Outcome
from .jsonrpc import INVALID_PARAMS, JSONObject, McpError, loads, lone_surrogate
from .outcomes import clean, error_result, read_json, text_block

log = logging.getLogger("fairwins_mcp.payments")

PAYMENT_META_KEY: Final = "x402/payment"
RESPONSE_META_KEY: Final = "x402/payment-response"
OFFER_HEADER: Final = "PAYMENT-REQUIRED"
# x402 picks the payment header by the payload's x402Version (research/x402.md §1.1).
HEADER_BY_VERSION: Final[Mapping[int, str]] = {1: "X-PAYMENT", 2: "PAYMENT-SIGNATURE"}
# Inbound header (lower-cased, as transports hand them over) → the name it is forwarded under.
INBOUND_HEADERS: Final[Mapping[str, str]] = {"x-payment": "X-PAYMENT", "payment-signature": "PAYMENT-SIGNATURE"}
# v2 first: reference clients read PAYMENT-RESPONSE, then X-PAYMENT-RESPONSE.
RECEIPT_HEADERS: Final = ("PAYMENT-RESPONSE", "X-PAYMENT-RESPONSE")
# The headers whose base64 this server decodes into a result: an echo there is not in the raw bytes.
DECODED_HEADERS: Final = (OFFER_HEADER, *RECEIPT_HEADERS)
MAX_HEADER_BYTES: Final = 64 * 1024  # offers, receipts and payments can be tens of KB
MAX_DESCRIBED = 5  # accepts[] entries restated in words; the rest are in the offer itself

# Standard base64 (RFC 4648, padded or not). TS x402 servers reject anything else, base64url included.
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]+={0,2}")
# What may be copied into one of our own response headers: visible ASCII and single spaces.
_HEADER_SAFE: Final = re.compile(r"[\x21-\x7e]+(?: [\x21-\x7e]+)*")

NOT_SENT: Final = "The payment was not sent anywhere: nothing was paid."
UNKNOWN_OUTCOME: Final = (
    "The payment was sent to the gateway, and its outcome is unknown: it may or may not have "
    "settled. Do not resubmit this payment; this server did not retry it and never will. Check "
    "the payer's account before paying again."
)
NO_RECEIPT: Final = (
    "The gateway returned the answer but no payment receipt, so whether the payment settled is "
    "unknown. Do not resubmit this payment."
)
NOT_ACCEPTED: Final = (
    "The gateway did not accept the payment and answered with its price again (by x402, it did not settle it). "
)
UNREADABLE_RECEIPT: Final = (
    "The gateway's payment receipt could not be read, so whether the payment settled is unknown. "
    "Do not resubmit this payment."
)
HOW_TO_PAY: Final = (
    "This server holds no key and cannot pay. To pay, the caller's own x402 client signs a payment "
    'for one of these offers and repeats this same call with it in params._meta["x402/payment"] '
    "(or, over HTTP, in an X-PAYMENT header for x402 version 1 or PAYMENT-SIGNATURE for version 2); "
    "this server forwards it to the gateway once, unchanged, and returns the gateway's receipt. "
    "A member's own token with the right scope is served without payment."
)


# ---- where a payment comes from --------------------------------------------------------------


def from_http_headers(headers: Mapping[str, str]) -> tuple[Payment | None, str | None]:
    """An inbound `X-PAYMENT` / `PAYMENT-SIGNATURE` header → the payment to forward byte-for-byte.

    `headers` has lower-cased names and values exactly as received. Returns (payment, None),
    (None, None) when no payment header came, or (None, why) when the payment must be refused.
    """
    found = [
        (INBOUND_HEADERS[name.lower()], value) for name, value in headers.items() if name.lower() in INBOUND_HEADERS
    ]
    if not found:
        return None, None
    if len(found) > 1:
        return None, "the request carried two payment headers (X-PAYMENT and PAYMENT-SIGNATURE)"
    name, value = found[0]
    if len(value) > MAX_HEADER_BYTES:
        return None, f"the {name} header is over the {MAX_HEADER_BYTES // 1024} KiB limit"
    if "," in value:
        # A transport that folds repeated headers joins them with commas: two payments.
        return None, f"the request carried more than one {name} header"
    if not _BASE64.fullmatch(value):
        # Never forwarded as it is: x402 headers are standard base64 of JSON, and anything else
        # (a control character above all) must not reach an upstream header.
        return None, f"the {name} header is not standard base64, as x402 payment headers are"
    return Payment(name, value, "header"), None


def from_meta(value: object) -> Payment:
    """`params._meta["x402/payment"]` (a PaymentPayload object) → base64 of its compact JSON.

    Raises McpError(-32602) for anything that is not a JSON object with x402Version 1 or 2. The
    message never quotes the value.
    """
    where = f'_meta["{PAYMENT_META_KEY}"]'
    if not isinstance(value, dict):
        raise McpError(INVALID_PARAMS, f"Invalid params: {where} must be a JSON object (an x402 payment payload)")
    version = value.get("x402Version")
    if type(version) is not int or version not in HEADER_BY_VERSION:
        raise McpError(INVALID_PARAMS, f"Invalid params: {where}.x402Version must be the number 1 or 2")
    # The dispatcher refuses these first (protocol._require_text); this function stands on its own too.
    inside = lone_surrogate(value, ("_meta", PAYMENT_META_KEY))
    if inside is not None:
        raise McpError(INVALID_PARAMS, f"Invalid params: {inside} holds a lone UTF-16 surrogate, which is not text")
    # research/x402.md §5.2: compact JSON, every key kept; signatures cover typed data, not bytes.
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a number like 1e999 parses to inf, which JSON cannot carry back out
        raise McpError(INVALID_PARAMS, f"Invalid params: {where} holds a number JSON cannot represent") from None
    encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
    if len(encoded) > MAX_HEADER_BYTES:
        raise McpError(
            INVALID_PARAMS, f"Invalid params: {where} is over the {MAX_HEADER_BYTES // 1024} KiB limit once encoded"
        )
    return Payment(HEADER_BY_VERSION[version], encoded, "meta")


def _canonical(payment: Payment) -> str | None:
    decoded = decode_header_json(payment.value)
    return None if decoded is None else json.dumps(decoded, sort_keys=True, separators=(",", ":"))


def same_payment(a: Payment, b: Payment) -> bool:
    """One payment, whichever way it arrived: same header, and the same bytes or the same JSON."""
    if a.header.lower() != b.header.lower():
        return False
    if a.value == b.value:
        return True
    canonical = _canonical(a)
    return canonical is not None and canonical == _canonical(b)


def merge(carried: Payment | None, supplied: Payment) -> tuple[Payment | None, str | None]:
    """The transport's payment and the one in `_meta` → the one to forward, or why neither is."""
    if carried is None:
        return supplied, None
    if same_payment(carried, supplied):
        # Some clients send both (research/x402.md §4.3). The header's bytes are the payer's own.
        return (carried if carried.source == "header" else supplied), None
    return (
        None,
        f'the request carried two different payments (one in params._meta["{PAYMENT_META_KEY}"], one in a header)',
    )


# ---- reading what the gateway sent -----------------------------------------------------------


def decode_header_json(value: str) -> Any | None:
    """Base64 JSON of an x402 header → the value; None when it is not that (or is too large)."""
    if len(value) > MAX_HEADER_BYTES or not _BASE64.fullmatch(value):
        return None
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        return loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def read_offer(resp: GatewayResponse) -> JSONObject | None:
    """The x402 offer of a 402/412, verbatim: the PAYMENT-REQUIRED header first, else a v1 body."""
    header = resp.header(OFFER_HEADER)
    if header is not None:
        offer = decode_header_json(header)
        if isinstance(offer, dict) and isinstance(offer.get("accepts"), list):
            return offer
    body, problem = read_json(resp)
    if problem is None and isinstance(body, dict) and type(body.get("x402Version")) is int:
        if body["x402Version"] == 1 and isinstance(body.get("accepts"), list):
            return body
    return None


def copy_receipts(resp: GatewayResponse, response_headers: MutableMapping[str, str]) -> Any | None:
    """Copy the gateway's receipt header(s) onto our answer's headers; the decoded first one, or None."""
    decoded: Any | None = None
    for name in RECEIPT_HEADERS:
        raw = resp.header(name)
        if raw is None:
            continue
        if len(raw) <= MAX_HEADER_BYTES and _HEADER_SAFE.fullmatch(raw):
            response_headers[name] = raw  # the gateway's exact value, under the same name
        if decoded is None:
            decoded = decode_header_json(raw)
    return decoded


def has_receipt(resp: GatewayResponse) -> bool:
    return any(resp.header(name) is not None for name in RECEIPT_HEADERS)


# ---- sentences -------------------------------------------------------------------------------


def _quoted(value: object, limit: int = 100) -> str | None:
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        return None
    text = clean(value, limit)
    return text or None


def _option(entry: object) -> str:
    if not isinstance(entry, dict):
        return "an option this server cannot read (see the offer)"
    amount = _quoted(entry.get("amount", entry.get("maxAmountRequired")))
    scheme = _quoted(entry.get("scheme"), 40)
    asset = _quoted(entry.get("asset"))
    network = _quoted(entry.get("network"), 60)
    pay_to = _quoted(entry.get("payTo"))
    if amount is None:
        cost = "an amount the offer does not state"
    else:
        # "upto" settles at most this much (research/x402.md §5.4); "exact" settles exactly it.
        cost = f"{'up to ' if scheme == 'upto' else ''}{amount} atomic units"
    return (
        f"{cost} of asset {asset or '(not stated)'} on network {network or '(not stated)'}, "
        f"paid to {pay_to or '(not stated)'} (x402 scheme {scheme or '(not stated)'})"
    )


def price_sentence(offer: JSONObject, tool: str) -> str:
    """What the call costs, as the offer states it: atomic amounts, no invented decimals or dollars."""
    accepts = offer.get("accepts")
    entries = accepts if isinstance(accepts, list) else []
    if not entries:
        costs = f"{tool} has a price, but the offer lists no way to pay it."
    else:
        options = [_option(entry) for entry in entries[:MAX_DESCRIBED]]
        costs = f"This is a price, not an outage: {tool} costs " + "; or ".join(options)
        if len(entries) > MAX_DESCRIBED:
            costs += f"; or one of {len(entries) - MAX_DESCRIBED} more options in the offer"
        costs += "."
    said = _quoted(offer.get("error"), 200)
    if said:
        costs += f" The gateway says: “{said}”."
    return costs


def price_result(resp: GatewayResponse, tool: str, lead: str = "") -> JSONObject | None:
    """A 402 or 412 carrying an offer → the x402 MCP tool result (isError, the offer verbatim); else None."""
    offer = read_offer(resp)
    if offer is None:
        return None
    words = price_sentence(offer, tool)
    if resp.status == 412:
        words = (
            "Before paying, the payer's wallet must make a one-time approval of the token named in the "
            f"offer (the gateway answered 412: approval required); this server cannot make it. {words}"
        )
    # x402 MCP transport: structuredContent is the offer, content[0] the same object as JSON text.
    return {
        "content": [
            text_block(json.dumps(offer, ensure_ascii=False, separators=(",", ":"))),
            text_block(f"{lead}{words} {HOW_TO_PAY}"),
        ],
        "structuredContent": offer,
        "isError": True,
    }


def receipt_sentence(receipt: JSONObject) -> str:
    transaction = _quoted(receipt.get("transaction")) or "(not stated)"
    network = _quoted(receipt.get("network"), 60) or "(not stated)"
    payer = _quoted(receipt.get("payer")) or "(not stated)"
    return (
        f"Paid per request: the gateway reports transaction {transaction} on network {network}, "
        f"payer {payer}. The transaction was broadcast, not confirmed: check it on that network "
        "before treating the payment as final."
    )


def settlement_failed_result(receipt: JSONObject) -> JSONObject:
    """x402: when settlement fails the tool's answer is withheld; the reason is all there is."""
    reason = _quoted(receipt.get("errorReason"), 120) or "no reason given"
    message = _quoted(receipt.get("errorMessage"), 200)
    network = _quoted(receipt.get("network"), 60)
    text = f"The payment did not settle: the gateway reports “{reason}”"
    if message:
        text += f" (“{message}”)"
    if network:
        text += f" on network {network}"
    text += ". The call's answer is withheld, as x402 requires when settlement fails. This server did not retry it."
    return {"content": [text_block(text)], "isError": True, "_meta": {RESPONSE_META_KEY: receipt}}


def refused(reason: str) -> JSONObject:
    """Payments that could not be told apart or read: refused, and nothing went upstream."""
    return error_result(f"The payment was refused: {reason}. Nothing was sent to the gateway, and nothing was paid.")


def refused_unpriced(tool: str) -> JSONObject:
    return error_result(
        f"The payment was refused: {tool} is never paid per request (only get_wagers, get_fees and "
        "build_intent can be), so the payment was sent nowhere and the call was not made. A payment "
        "is a signed authorisation until it expires: keep it private."
    )


# ---- a paid call's result ---------------------------------------------------------------------


def _with_receipt(result: JSONObject, receipt: Any | None, raw_present: bool) -> JSONObject:
    if isinstance(receipt, dict):
        result["_meta"] = {**result.get("_meta", {}), RESPONSE_META_KEY: receipt}
        result["content"].append(text_block(receipt_sentence(receipt)))
    elif raw_present:
        result["content"].append(text_block(UNREADABLE_RECEIPT))
    return result


def paid_result(
    outcome: Outcome,
    tool: str,
    response_headers: MutableMapping[str, str],
    answer: Callable[[GatewayResponse], JSONObject],
    failure: Callable[[Outcome], str],
) -> JSONObject:
    """The result of a call that carried a payment, which was sent at most once (gateway.py).

    `answer` renders a 2xx the way an unpaid call would; `failure` is the sentence for anything else.
    """
    if isinstance(outcome, GatewayFailure):
        return error_result(f"{failure(outcome)} {UNKNOWN_OUTCOME if outcome.sent else NOT_SENT}")
    receipt = copy_receipts(outcome, response_headers)
    raw_present = has_receipt(outcome)
    if isinstance(receipt, dict) and receipt.get("success") is False:
        return settlement_failed_result(receipt)
    if 200 <= outcome.status < 300:
        result = answer(outcome)
        if not raw_present:
            result["content"].append(text_block(NO_RECEIPT))
        return _with_receipt(result, receipt, raw_present)
    if outcome.status in (402, 412) and not raw_present:
        # A fresh offer after a payment: the gateway did not accept it (x402 verification failed).
        price = price_result(outcome, tool, NOT_ACCEPTED)
        if price is not None:
            return price
    if raw_present:
        return _with_receipt(error_result(failure(outcome)), receipt, raw_present)
    # Sent, and neither a receipt nor a fresh offer says what became of it. A bare 402 or a 5xx
    # may follow a settlement; x402 gateways settle only after a successful answer (research/x402.md
    # §3), but a 4xx is the gateway's word, not a receipt, and the payment stays signed until it
    # expires: the caller must not pay twice on a guess.
    return error_result(f"{failure(outcome)} {UNKNOWN_OUTCOME}")


# Every sentence that says what became of a payment; a paid call's result carries one of them.
PAYMENT_WORDS: Final = (
    UNKNOWN_OUTCOME,
    NOT_SENT,
    NO_RECEIPT,
    UNREADABLE_RECEIPT,
    NOT_ACCEPTED.strip(),
    "Paid per request: ",
    "The payment did not settle",
    "The payment was refused",
)
INTERNAL_FAILURE: Final = "This server failed while handling the paid call (an internal error, logged on its side)."


def guarded(call: Callable[[], JSONObject], ctx: RequestContext) -> JSONObject:
    """Run a paid call so that its result always says what became of the payment.

    Whatever escapes the call (an exception nothing anticipated) and whatever it returns, the
    result names the payment's fate: not sent, or sent with an outcome this server cannot know
    (so: do not resubmit). One wrapper, so no later change to the paths inside can lose the words.
    """
    try:
        result = call()
    except Exception:
        log.exception("unexpected failure in a paid call")
        fate = UNKNOWN_OUTCOME if ctx.payment_sent else NOT_SENT
        return error_result(f"{INTERNAL_FAILURE} {fate}")
    content = result.get("content")
    blocks = content if isinstance(content, list) else []
    text = " ".join(b.get("text", "") for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))
    if not any(words in text for words in PAYMENT_WORDS):
        blocks.append(text_block(UNKNOWN_OUTCOME if ctx.payment_sent else NOT_SENT))
        result["content"] = blocks
    return result
