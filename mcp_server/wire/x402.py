"""x402 payments as they arrive: read, checked, compared, kept untouched.

They come from an HTTP header or `params._meta`. A payment is somebody else's signed instrument
(docs/payments.md). Every layer that carries one uses these values: the transports read it from a
header, the dispatcher from `_meta`, the gateway seam forwards it byte for byte, redaction keeps it
out of what is written. Nothing here makes one.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_server.wire.jsonrpc import INVALID_PARAMS, McpError, loads, lone_surrogate

PAYMENT_META_KEY: Final = "x402/payment"
# x402 picks the payment header by the payload's x402Version (docs/payments.md, headers by version).
HEADER_BY_VERSION: Final[Mapping[int, str]] = {1: "X-PAYMENT", 2: "PAYMENT-SIGNATURE"}
# Inbound header (lower-cased, as transports hand them over) → the name it is forwarded under.
INBOUND_HEADERS: Final[Mapping[str, str]] = {"x-payment": "X-PAYMENT", "payment-signature": "PAYMENT-SIGNATURE"}
MAX_HEADER_BYTES: Final = 64 * 1024  # offers and receipts from the gateway can be tens of KB
# A payment as any x402 scheme writes it, with room to spare: the `exact` EVM scheme (an EIP-3009
# authorization and its 65-byte signature) is about 0.6 KB of base64 for v1 and 1.5 KB for v2,
# which repeats the accepted offer and the resource; the `exact` SVM scheme carries a serialized
# Solana transaction, at most 1,232 bytes (the packet size Solana accepts), so about 1.6 KB of
# base64 inside, 3 to 4 KB with its envelope (coinbase/x402: specs/schemes/exact/scheme_exact_evm.md,
# scheme_exact_svm.md). 16 KiB is four times the largest. Past it a payment is refused unread:
# what is made of it (redaction's needles) is bounded, and an anonymous caller's payment costs
# the same as any other.
MAX_PAYMENT_BYTES: Final = 16 * 1024
# Standard base64 (RFC 4648, padded or not). TS x402 servers reject anything else, base64url included.
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]+={0,2}")


@dataclass(frozen=True, slots=True)
class Payment:
    """An x402 payment somebody else made, carried upstream untouched.

    `header` is the upstream header name, `value` its exact bytes as text. repr hides the value:
    a payment is a bearer instrument until it expires.
    """

    header: str
    value: str = field(repr=False)
    source: str = "meta"  # "meta" (params._meta) or "header" (an inbound HTTP header)


# ---- where a payment comes from --------------------------------------------------------------


def from_http_headers(headers: Mapping[str, str]) -> tuple[Payment | None, str | None]:
    """An inbound X-PAYMENT or PAYMENT-SIGNATURE → the payment to forward.

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
    if len(value) > MAX_PAYMENT_BYTES:
        return None, oversized(name, len(value))
    if "," in value:
        # A transport that folds repeated headers joins them with commas: two payments.
        return None, f"the request carried more than one {name} header"
    if not _BASE64.fullmatch(value):
        # Never forwarded as it is: x402 headers are standard base64 of JSON, and anything else
        # (a control character above all) must not reach an upstream header.
        return None, f"the {name} header is not standard base64, as x402 payment headers are"
    return Payment(name, value, "header"), None


def oversized(name: str, size: int) -> str | None:
    """Why a payment header of `size` bytes is refused unread, or None."""
    if size <= MAX_PAYMENT_BYTES:
        return None
    return f"the {name} header is {size:,} bytes, over the {MAX_PAYMENT_BYTES // 1024} KiB any x402 payment takes"


def from_meta(value: object) -> Payment:
    """`params._meta["x402/payment"]`, a PaymentPayload → base64 of its JSON.

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
    # Compact JSON, every key kept; signatures cover typed data, not bytes (docs/payments.md,
    # translating _meta to a header).
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a number like 1e999 parses to inf, which JSON cannot carry back out
        raise McpError(INVALID_PARAMS, f"Invalid params: {where} holds a number JSON cannot represent") from None
    encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
    if len(encoded) > MAX_PAYMENT_BYTES:
        raise McpError(
            INVALID_PARAMS,
            f"Invalid params: {where} is {len(encoded):,} bytes once encoded, over the "
            f"{MAX_PAYMENT_BYTES // 1024} KiB any x402 payment takes; nothing was sent",
        )
    return Payment(HEADER_BY_VERSION[version], encoded, "meta")


def _canonical(payment: Payment) -> str | None:
    decoded = decode_header_json(payment.value)
    return None if decoded is None else json.dumps(decoded, sort_keys=True, separators=(",", ":"))


def same_payment(a: Payment, b: Payment) -> bool:
    """Whether two payments are one: the same header, and bytes or JSON."""
    if a.header.lower() != b.header.lower():
        return False
    if a.value == b.value:
        return True
    canonical = _canonical(a)
    return canonical is not None and canonical == _canonical(b)


def merge(carried: Payment | None, supplied: Payment) -> tuple[Payment | None, str | None]:
    """The transport's payment and `_meta`'s → the one to forward, or why none."""
    if carried is None:
        return supplied, None
    if same_payment(carried, supplied):
        # Some clients send both (docs/payments.md, carrying a payment in MCP). The header's bytes are the payer's own.
        return (carried if carried.source == "header" else supplied), None
    return (
        None,
        f'the request carried two different payments (one in params._meta["{PAYMENT_META_KEY}"], one in a header)',
    )


def decode_header_json(value: str) -> Any | None:
    """Base64 JSON of an x402 header → the value; None if not, or too large."""
    if len(value) > MAX_HEADER_BYTES or not _BASE64.fullmatch(value):
        return None
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        return loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
