"""TLS to the gateway: the one verifying context, and its failures named.

Imported on the first call to an https:// gateway, never at start. Verification is never
relaxed: the context is the standard library's default (the system's CA certificates, or the
file SSL_CERT_FILE names; certificate and host name checked; TLS 1.2 or later), and nothing in
this package can turn any of that off.
"""

from __future__ import annotations

import os
import ssl
from typing import Final

# The first byte of every TLS record a server can send first: a handshake, or an alert.
_TLS_RECORD_TYPES: Final = frozenset({0x15, 0x16})

# OpenSSL's X509_V_ERR_* codes (openssl/x509_vfy.h), as `SSLCertVerificationError.verify_code`.
_NOT_TRUSTED: Final = frozenset(
    {
        2,  # X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT
        18,  # X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT
        19,  # X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN
        20,  # X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        21,  # X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE
        27,  # X509_V_ERR_CERT_UNTRUSTED
    }
)
_NOT_YET_VALID: Final = 9  # X509_V_ERR_CERT_NOT_YET_VALID
_EXPIRED: Final = 10  # X509_V_ERR_CERT_HAS_EXPIRED
_WRONG_NAME: Final = frozenset({62, 64})  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH

# OpenSSL reason codes (`SSLError.reason`) of a handshake that could not agree, or of bytes that are not TLS.
_HANDSHAKE_REASONS: Final = {
    **dict.fromkeys(
        ("TLSV1_ALERT_PROTOCOL_VERSION", "UNSUPPORTED_PROTOCOL", "NO_PROTOCOLS_AVAILABLE", "VERSION_TOO_LOW"),
        "it offers no TLS version this client accepts (1.2 or later)",
    ),
    **dict.fromkeys(
        ("SSLV3_ALERT_HANDSHAKE_FAILURE", "NO_SHARED_CIPHER", "NO_CIPHERS_AVAILABLE", "NO_SHARED_SIGNATURE_ALGORITHMS"),
        "it refused the handshake, usually for want of a cipher in common",
    ),
    **dict.fromkeys(
        ("WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG", "RECORD_LAYER_FAILURE", "UNKNOWN_PROTOCOL"),
        "what it answered is not TLS; check the port in FAIRWINS_API_URL",
    ),
}

CA_HINT: Final = (
    "behind a corporate proxy or with a private CA, set SSL_CERT_FILE to a file of CA certificates "
    "that includes the one that issued it"
)
PLAIN_HTTP: Final = (
    "it answered in plain HTTP, not TLS (that port serves http://, not https://): "
    "check the scheme and port in FAIRWINS_API_URL"
)


class HandshakeError(ssl.SSLError):
    """The handshake failed; `detail` says why in words a member can act on."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def context() -> ssl.SSLContext:
    """Every https:// gateway's context: the standard library's verifying one."""
    ctx = ssl.create_default_context()
    ctx.minimum_version = max(ctx.minimum_version, ssl.TLSVersion.TLSv1_2)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def look_at_first(first: bytes) -> None:
    """Check a handshake's first bytes: HandshakeError if none or plain HTTP."""
    if not first:
        raise HandshakeError("the TLS handshake failed: it closed the connection without answering")
    # An HTTP server's answer to bytes it cannot parse: a status line, or (from servers that fall
    # back to HTTP/0.9, such as Python's http.server) an HTML error page with no head at all.
    lower = first[:16].lower()
    if first[0] not in _TLS_RECORD_TYPES and (
        b"http/".startswith(lower[:5]) or lower.startswith((b"<!doctype html", b"<html"))
    ):
        raise HandshakeError(PLAIN_HTTP)


def _reason(exc: ssl.SSLError) -> str:
    return (exc.reason or type(exc).__name__).lower().replace("_", " ")


def describe_handshake(exc: ssl.SSLError, host: str) -> str:
    """A failed handshake, in words: what was wrong, and what fixes it."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        code, said = exc.verify_code, exc.verify_message
        if code in _NOT_TRUSTED:
            return f"its TLS certificate is not trusted here ({said}); {_ca_hint()}"
        if code in _WRONG_NAME:
            return (
                f"its TLS certificate is not valid for the name {host} (a host name mismatch): check the host "
                "in FAIRWINS_API_URL, or whether something else answers in the gateway's place"
            )
        if code == _EXPIRED:
            return "its TLS certificate has expired (or this machine's clock is wrong)"
        if code == _NOT_YET_VALID:
            return "its TLS certificate is not valid yet (or this machine's clock is wrong)"
        return f"its TLS certificate could not be verified ({said})"
    why = _HANDSHAKE_REASONS.get(exc.reason or "")
    if why is None and isinstance(exc, ssl.SSLEOFError):
        why = "it closed the connection in the middle of it"
    return f"the TLS handshake failed ({_reason(exc)})" + (f": {why}" if why else "")


def describe(exc: ssl.SSLError) -> str:
    """Any TLS failure in words: the handshake's sentence, or a later failure."""
    if isinstance(exc, HandshakeError):
        return exc.detail
    return f"the TLS connection failed ({_reason(exc)})"


def _ca_hint() -> str:
    # OpenSSL reads SSL_CERT_FILE itself; it is read here only to say what it did.
    named = os.environ.get("SSL_CERT_FILE")
    if not named:
        return CA_HINT
    if not os.path.isfile(named):
        return "SSL_CERT_FILE is set, but to a file that does not exist"
    return "SSL_CERT_FILE is set, but no certificate in it issued this one"
