"""x402 payments, carried and never made: prices and receipts in words.

This server holds no key. It shows the gateway's price exactly as offered, forwards a payment
somebody else signed (docs/payments.md), and restates the gateway's receipt. A payment is a bearer
instrument until it expires, so its value appears in no sentence, log line or result built here.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, MutableMapping
from typing import Any, Final

from mcp_server.core import steps
from mcp_server.core.catalog import text_content
from mcp_server.core.context import RequestContext
from mcp_server.core.steps import Steps
from mcp_server.fairwins.outcomes import clean, error_result, read_json
from mcp_server.upstream.gateway import GatewayFailure, GatewayResponse, Outcome
from mcp_server.wire.jsonrpc import JSONObject, too_deep
from mcp_server.wire.x402 import MAX_HEADER_BYTES, decode_header_json

log = logging.getLogger("fairwins_mcp.payments")

RESPONSE_META_KEY: Final = "x402/payment-response"
OFFER_HEADER: Final = "PAYMENT-REQUIRED"
# v2 first: reference clients read PAYMENT-RESPONSE, then X-PAYMENT-RESPONSE.
RECEIPT_HEADERS: Final = ("PAYMENT-RESPONSE", "X-PAYMENT-RESPONSE")
# The headers whose base64 this server decodes into a result: an echo there is not in the raw bytes.
DECODED_HEADERS: Final = (OFFER_HEADER, *RECEIPT_HEADERS)
MAX_DESCRIBED = 5  # accepts[] entries restated in words; the rest are in the offer itself

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


# ---- reading what the gateway sent -----------------------------------------------------------


def read_offer(resp: GatewayResponse) -> JSONObject | None:
    """The x402 offer of a 402 or 412, verbatim: its header's, else a v1 body."""
    header = resp.header(OFFER_HEADER)
    if header is not None:
        offer = decode_header_json(header)
        if isinstance(offer, dict) and isinstance(offer.get("accepts"), list) and _readable(offer):
            return offer
    body, problem = read_json(resp)
    if problem is None and isinstance(body, dict) and type(body.get("x402Version")) is int:
        if body["x402Version"] == 1 and isinstance(body.get("accepts"), list):
            return body
    return None


def copy_receipts(resp: GatewayResponse, response_headers: MutableMapping[str, str]) -> Any | None:
    """Copy the gateway's receipt headers onto ours; the first decoded or None."""
    decoded: Any | None = None
    for name in RECEIPT_HEADERS:
        raw = resp.header(name)
        if raw is None:
            continue
        if len(raw) <= MAX_HEADER_BYTES and _HEADER_SAFE.fullmatch(raw):
            response_headers[name] = raw  # the gateway's exact value, under the same name
        if decoded is None:
            decoded = decode_header_json(raw)
    return decoded if _readable(decoded) else None


def _readable(value: Any) -> bool:
    """Whether a value decoded from a header nests no deeper than clients read."""
    try:
        return value is None or not too_deep(json.dumps(value))
    except RecursionError:  # nested near the parser's own limit: far deeper than any client reads
        return False


def has_receipt(resp: GatewayResponse) -> bool:
    return any(resp.header(name) is not None for name in RECEIPT_HEADERS)


# ---- sentences -------------------------------------------------------------------------------


def _quoted(value: object, limit: int = 100) -> str | None:
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        return None
    text = clean(value, limit)
    return text or None


# The chain each network name of an offer stands for: x402 v1's names, and v2's CAIP-2 ids.
CHAIN_OF_NETWORK: Final = {
    "polygon": 137,
    "base": 8453,
    "eip155:1": 1,
    "eip155:137": 137,
    "eip155:8453": 8453,
}
# The assets whose decimals this server knows, by (chain, contract address in lower case): Circle's
# USDC on each chain. Any other asset, or a known address on another network, is stated in atomic
# units alone: decimals are never guessed.
KNOWN_ASSETS: Final = {
    (1, "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"): ("USDC", 6),
    (137, "0x3c499c542cef5e3811e1192ce70d8cc03d5c3359"): ("USDC", 6),
    (8453, "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913"): ("USDC", 6),
}
_ATOMIC: Final = re.compile(r"[0-9]{1,78}")  # a uint256 in decimal, as x402 writes an amount


def in_words(amount: object, asset: object, network: object) -> str | None:
    """An atomic amount of a known asset as a person reads it ("0.01 USDC")."""
    if isinstance(amount, int) and not isinstance(amount, bool):
        amount = str(amount)
    chain = CHAIN_OF_NETWORK.get(network) if isinstance(network, str) else None
    known = KNOWN_ASSETS.get((chain, asset.lower())) if chain is not None and isinstance(asset, str) else None
    if known is None or not isinstance(amount, str) or not _ATOMIC.fullmatch(amount):
        return None
    symbol, decimals = known
    digits = amount.rjust(decimals + 1, "0")
    whole, fraction = digits[:-decimals].lstrip("0") or "0", digits[-decimals:].rstrip("0")
    return f"{whole}.{fraction} {symbol}" if fraction else f"{whole} {symbol}"


def _option(entry: object) -> str:
    if not isinstance(entry, dict):
        return "an option this server cannot read (see the offer)"
    raw_amount = entry.get("amount", entry.get("maxAmountRequired"))
    amount = _quoted(raw_amount)
    scheme = _quoted(entry.get("scheme"), 40)
    asset = _quoted(entry.get("asset"))
    network = _quoted(entry.get("network"), 60)
    pay_to = _quoted(entry.get("payTo"))
    # "upto" settles at most this much (docs/payments.md, x402's offers); "exact" settles exactly it.
    most = "up to " if scheme == "upto" else ""
    where = f"asset {asset or '(not stated)'} on network {network or '(not stated)'}"
    worded = in_words(raw_amount, entry.get("asset"), entry.get("network"))
    if amount is None:
        cost = f"an amount the offer does not state of {where}"
    elif worded is not None:
        cost = f"{most}{worded} ({amount} atomic units of {where})"
    else:
        cost = f"{most}{amount} atomic units of {where}"
    return f"{cost}, paid to {pay_to or '(not stated)'} (x402 scheme {scheme or '(not stated)'})"


def price_sentence(offer: JSONObject, tool: str) -> str:
    """What the call costs, as the offer states it (in words where known)."""
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
    """The x402 tool result of a 402 or 412: the offer verbatim; None if none."""
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
            text_content(json.dumps(offer, ensure_ascii=False, separators=(",", ":"))),
            text_content(f"{lead}{words} {HOW_TO_PAY}"),
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
    """The result when x402 settlement fails: the reason, the answer withheld."""
    reason = _quoted(receipt.get("errorReason"), 120) or "no reason given"
    message = _quoted(receipt.get("errorMessage"), 200)
    network = _quoted(receipt.get("network"), 60)
    text = f"The payment did not settle: the gateway reports “{reason}”"
    if message:
        text += f" (“{message}”)"
    if network:
        text += f" on network {network}"
    text += ". The call's answer is withheld, as x402 requires when settlement fails. This server did not retry it."
    return {"content": [text_content(text)], "isError": True, "_meta": {RESPONSE_META_KEY: receipt}}


def refused(reason: str) -> JSONObject:
    """The refusal of payments that could not be told apart or read."""
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
        result["content"].append(text_content(receipt_sentence(receipt)))
    elif raw_present:
        result["content"].append(text_content(UNREADABLE_RECEIPT))
    return result


def paid_result(
    outcome: Outcome,
    tool: str,
    response_headers: MutableMapping[str, str],
    answer: Callable[[GatewayResponse], JSONObject],
    failure: Callable[[Outcome], str],
) -> JSONObject:
    """The result of a call that carried a payment, sent at most once.

    `answer` renders a 2xx the way an unpaid call would; `failure` is the sentence for anything
    else.
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
            result["content"].append(text_content(NO_RECEIPT))
        return _with_receipt(result, receipt, raw_present)
    if outcome.status in (402, 412) and not raw_present:
        # A fresh offer after a payment: the gateway did not accept it (x402 verification failed).
        price = price_result(outcome, tool, NOT_ACCEPTED)
        if price is not None:
            return price
    if raw_present:
        return _with_receipt(error_result(failure(outcome)), receipt, raw_present)
    # Sent, and neither a receipt nor a fresh offer says what became of it. A bare 402 or a 5xx
    # may follow a settlement; x402 gateways settle only after a successful answer (docs/payments.md,
    # what the code relies on in x402), but a 4xx is the gateway's word, not a receipt, and the
    # payment stays signed until it expires: the caller must not pay twice on a guess.
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
    """`guarded_steps` for a call that never waits (a test's)."""

    def once() -> Steps[JSONObject]:
        return call()
        yield  # a generator: unreachable, by design

    return steps.run(guarded_steps(once(), ctx))


def guarded_steps(call: Steps[JSONObject], ctx: RequestContext) -> Steps[JSONObject]:
    """A paid call's steps; its result always says what became of the payment.

    Whatever escapes the call (an exception nothing anticipated) and whatever it returns, the
    result names the payment's fate: not sent, or sent with an outcome this server cannot know
    (so: do not resubmit). One wrapper, so no later change to the paths inside can lose the words.
    """
    try:
        result = yield from call
    except Exception:
        log.exception("unexpected failure in a paid call")
        fate = UNKNOWN_OUTCOME if ctx.payment_sent else NOT_SENT
        return error_result(f"{INTERNAL_FAILURE} {fate}")
    content = result.get("content")
    blocks = content if isinstance(content, list) else []
    text = " ".join(b.get("text", "") for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))
    if not any(words in text for words in PAYMENT_WORDS):
        blocks.append(text_content(UNKNOWN_OUTCOME if ctx.payment_sent else NOT_SENT))
        result["content"] = blocks
    return result
