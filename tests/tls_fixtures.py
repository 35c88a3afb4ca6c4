"""The TLS fixtures (tests/tls/, made by tests/tls/make_certs.sh): server contexts for the sandbox gateway.

The client side is never built here: tests trust the test CA the way a member trusts a private
one, through SSL_CERT_FILE, so the server's own context (mcp_server.upstream.tls) is what is tested.
"""

from __future__ import annotations

import ssl
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Final

CERTS: Final = Path(__file__).resolve().parent / "tls"
CA_FILE: Final = CERTS / "ca.pem"
LEAF_KEY: Final = CERTS / "leaf.key"
# Leaf certificates, all for localhost, relay.fairwins.test, 127.0.0.1 and ::1 unless named otherwise.
GATEWAY: Final = "gateway"  # issued by the test CA, valid 2020–2126
WRONG_HOST: Final = "wrong-host"  # issued by the test CA for elsewhere.fairwins.test only
EXPIRED: Final = "expired"  # issued by the test CA, valid 2000–2001
NOT_YET_VALID: Final = "not-yet-valid"  # issued by the test CA, valid 2125–2126
UNTRUSTED: Final = "untrusted"  # issued by another CA, whose certificate comes with it
SELF_SIGNED: Final = "self-signed"
LEAVES: Final = (GATEWAY, WRONG_HOST, EXPIRED, NOT_YET_VALID, UNTRUSTED, SELF_SIGNED)
# The name the certificates carry that is not loopback (a proxied gateway is reached by name).
GATEWAY_NAME: Final = "relay.fairwins.test"


def server_context(leaf: str = GATEWAY, configure: Callable[[ssl.SSLContext], None] | None = None) -> ssl.SSLContext:
    """A server context presenting `leaf`; `configure` may narrow it further (versions, ciphers)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(CERTS / f"{leaf}.pem", LEAF_KEY)
    context.set_alpn_protocols(["http/1.1"])  # as the gateway's front end answers
    if configure is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # TLS 1.0 and 1.1 are offered on purpose
            configure(context)
    return context


def old_versions_only(context: ssl.SSLContext) -> None:
    """A server that speaks TLS 1.0 and 1.1 only, as old gateways and middleboxes did."""
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    context.minimum_version = ssl.TLSVersion.TLSv1
    context.maximum_version = ssl.TLSVersion.TLSv1_1


def no_shared_cipher(context: ssl.SSLContext) -> None:
    """A TLS 1.2 server whose only cipher suite (CBC with SHA-1) the default client does not offer."""
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers("ECDHE-ECDSA-AES128-SHA")
