"""A sandbox OAuth 2.1 authorization server, standing in for FairWins's.

Issue 60: the hosted MCP server is an OAuth resource server and mints nothing; FairWins runs the
authorization server, where a member's consent is a wallet signature in the FairWins app. This
stands in for it on loopback, with what the MCP authorization specification asks of one:

- metadata (RFC 8414 at /.well-known/oauth-authorization-server; the same document at OpenID
  Connect's discovery path, which some clients try first);
- clients by dynamic registration (RFC 7591, loopback http or https redirect URIs) or by Client
  ID Metadata Document (an https URL as `client_id`, fetched; http too on loopback, for tests);
- the authorization code grant with PKCE, S256 only, and one `resource` (RFC 8707) per request,
  which becomes the access token's audience;
- a consent page naming the client, the resource and the scopes, on which the sandbox's members
  A and B (tests/sandbox_gateway.py) approve: the wallet signature's stand-in;
- RS256 JWT access tokens (RFC 9068), 300 s by default, and refresh tokens rotated on every use
  (a spent one presented again revokes its whole family);
- its signing keys as a JWK Set, rotated on demand (`rotate_keys`).

Everything it issues is recorded (`issued`), so a test can say the gateway saw exactly the token
issued. It signs with `cryptography`, a development dependency: the server stays stdlib-only.

    with SandboxAuthServer() as auth, SandboxGateway() as gateway:
        gateway.trust_issuer(auth.issuer)        # its access tokens are a member's there
        redirect = consent(authorization_url, member="A")   # what a browser's approval does

    python -m tests.sandbox_auth --port 8788     # the demo
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import hashlib
import hmac
import html
import ipaddress
import json
import re
import secrets
import signal
import socket
import socketserver
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Final, Literal
from urllib.parse import parse_qs, unquote_plus, urlencode, urlsplit

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from assistant_contract import ROUTES, SCOPE_MEANINGS
from tests.sandbox_gateway import ACCOUNT_A, ACCOUNT_B, ALL_SCOPES

__all__ = [
    "ACCESS_TOKEN_TTL",
    "AUTH_METHODS",
    "CODE_TTL",
    "MEMBERS",
    "REFRESH_TOKEN_TTL",
    "SCOPES",
    "Client",
    "Issued",
    "SandboxAuthServer",
    "consent",
    "main",
    "pkce",
    "pkce_challenge",
]

Json = dict[str, object]
Headers = tuple[tuple[str, str], ...]

# Short, as RFC 9068 access tokens should be: a token that leaks is good for five minutes, and a
# client renews it with its refresh token. Configurable per server (`access_token_ttl`).
ACCESS_TOKEN_TTL: Final = 300
REFRESH_TOKEN_TTL: Final = 24 * 3600
# RFC 6749 §4.1.2: "A maximum authorization code lifetime of 10 minutes is RECOMMENDED"; a client
# redeems it within a second of the redirect.
CODE_TTL: Final = 60
CONSENT_TTL: Final = 600  # how long a consent page's request waits for the member's answer

# The sandbox gateway's members, by the label the consent form sends.
MEMBERS: Final[Mapping[str, str]] = {"A": ACCOUNT_A, "B": ACCOUNT_B}
# The contract's member scopes, as the gateway reads them. Never `offline_access`: a refresh token
# comes with every grant to a client registered for the refresh_token grant.
SCOPES: Final = ALL_SCOPES
# Public clients (`none`) are what MCP clients are; a registered client may take a secret.
AUTH_METHODS: Final = ("none", "client_secret_post", "client_secret_basic")
GRANT_TYPES: Final = ("authorization_code", "refresh_token")

MAX_BODY: Final = 64 * 1024
# draft-ietf-oauth-client-id-metadata-document asks a server to bound the document it fetches, and
# names 5 kilobytes as a size that holds any real one.
MAX_METADATA_DOCUMENT: Final = 5 * 1024
FETCH_TIMEOUT: Final = 5.0
_LOOPBACK_NAMES: Final = frozenset({"localhost"})
_VERIFIER: Final = re.compile(r"[A-Za-z0-9\-._~]{43,128}")  # RFC 7636 §4.1
_CHALLENGE: Final = re.compile(r"[A-Za-z0-9\-_]{43}")  # BASE64URL(SHA256(verifier)), unpadded


# --- small pieces --------------------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def pkce_challenge(verifier: str) -> str:
    """The S256 code challenge of `verifier` (RFC 7636 §4.2)."""
    return _b64url(hashlib.sha256(verifier.encode("ascii")).digest())


def pkce() -> tuple[str, str]:
    """A fresh PKCE pair: (code_verifier, its S256 code_challenge)."""
    verifier = secrets.token_urlsafe(48)  # 64 characters of the unreserved set
    return verifier, pkce_challenge(verifier)


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _redirect_uri_problem(uri: object) -> str | None:
    """Why `uri` cannot be a redirect URI here (https anywhere, http on loopback), or None."""
    if not isinstance(uri, str) or not uri:
        return "a redirect URI must be a non-empty string"
    parts = urlsplit(uri)
    if parts.fragment or "#" in uri:
        return f"{uri} has a fragment (RFC 6749 §3.1.2)"
    try:
        host = parts.hostname
        _ = parts.port  # raises ValueError on a port that is not a number
    except ValueError:
        return f"{uri} has an invalid port"
    if parts.scheme == "https" and host:
        return None
    if parts.scheme == "http" and _is_loopback(host):
        return None
    return f"{uri} is neither https nor http on a loopback address"


def _redirect_matches(registered: str, given: str) -> bool:
    """Is `given` the registered redirect URI (RFC 8252 §7.3: a loopback one on any port)?"""
    if registered == given:
        return True
    a, b = urlsplit(registered), urlsplit(given)
    if a.scheme != "http" or b.scheme != "http" or not _is_loopback(a.hostname):
        return False
    return (a.hostname, a.path, a.query) == (b.hostname, b.path, b.query) and a.username == b.username


def _client_id_url_problem(url: str) -> str | None:
    """Why `url` cannot be a Client ID Metadata Document URL, or None."""
    parts = urlsplit(url)
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        return "a client_id URL must be https (http only on a loopback address)"
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "a client_id URL must be an absolute https URL"
    # draft-ietf-oauth-client-id-metadata-document §3: a path, no dot segments, no fragment,
    # no user information.
    if parts.path in ("", "/"):
        return "a client_id URL must have a path"
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        return "a client_id URL must not have dot segments"
    if parts.fragment or "#" in url:
        return "a client_id URL must not have a fragment"
    if parts.username is not None or parts.password is not None:
        return "a client_id URL must not hold a user name or password"
    return None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a redirect answer then reaches us as an HTTPError of its own status


# Environment proxies off, redirects never followed: a sandbox fetch goes where it was told.
_OPENER: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())


class _OAuthError(Exception):
    """An RFC 6749 error: its code, its description and the HTTP status it is answered with."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status


class _PageError(Exception):
    """An authorization request that must not be redirected (RFC 6749 §4.1.2.1): an HTML page says why."""


# --- what the server holds -----------------------------------------------------------------------


@dataclass(frozen=True)
class Client:
    """One client: registered (RFC 7591) or known by its metadata document (client_id is its URL)."""

    client_id: str
    redirect_uris: tuple[str, ...]
    auth_method: str  # one of AUTH_METHODS
    grant_types: tuple[str, ...]
    name: str | None = None
    secret: str | None = None
    document: bool = False  # a Client ID Metadata Document

    @property
    def refreshes(self) -> bool:
        return "refresh_token" in self.grant_types


@dataclass(frozen=True)
class Issued:
    """One credential the sandbox issued, as a test compares it with what the gateway saw."""

    kind: Literal["code", "access_token", "refresh_token"]
    value: str
    client_id: str
    subject: str  # the member's account
    scope: str
    resource: str
    family: str  # the grant it belongs to: one authorization code and what was refreshed from it
    issued_at: int
    expires_at: int
    jti: str | None = None  # an access token's
    kid: str | None = None  # the key that signed an access token


@dataclass(frozen=True)
class _Pending:
    """An authorization request shown on a consent page, waiting for the member's answer."""

    id: str
    client: Client
    redirect_uri: str
    redirect_uri_given: bool
    state: str | None
    challenge: str
    resource: str
    scopes: tuple[str, ...]
    expires_at: float


@dataclass
class _Code:
    client_id: str
    redirect_uri: str
    redirect_uri_given: bool
    challenge: str
    resource: str
    scopes: tuple[str, ...]
    subject: str
    family: str
    expires_at: float
    used: bool = False


@dataclass
class _Refresh:
    client_id: str
    resource: str
    scopes: tuple[str, ...]
    subject: str
    family: str
    expires_at: float
    spent: bool = False


@dataclass
class _Key:
    kid: str
    private: rsa.RSAPrivateKey
    jwk: Json
    retire_at: float | None = None  # set when a newer key took over: then it only verifies


def _new_key() -> _Key:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = private.public_key().public_numbers()
    n = _b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big"))
    e = _b64url(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big"))
    # RFC 7638: the key's thumbprint is its kid, so the same key always has the same name.
    thumbprint = _b64url(hashlib.sha256(_dumps({"e": e, "kty": "RSA", "n": n})).digest())
    return _Key(thumbprint, private, {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": thumbprint, "n": n, "e": e})


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: Headers = ()
    body: bytes = b""


_CORS: Final[Headers] = (("Access-Control-Allow-Origin", "*"),)
# RFC 6749 §5.1: a token answer carries Cache-Control: no-store (and Pragma: no-cache, §5.1's
# example), so no cache between keeps a token.
_NO_STORE: Final[Headers] = (("Cache-Control", "no-store"), ("Pragma", "no-cache"))


def _json(status: int, value: object, headers: Headers = ()) -> _Answer:
    return _Answer(status, (("Content-Type", "application/json"), *_CORS, *headers), _dumps(value))


def _oauth_error(error: _OAuthError, headers: Headers = ()) -> _Answer:
    return _json(error.status, {"error": error.error, "error_description": error.description}, (*_NO_STORE, *headers))


_PAGE_HEADERS: Final[Headers] = (
    ("Content-Type", "text/html; charset=utf-8"),
    ("Cache-Control", "no-store"),
    # The page is never framed, so no other site can lay it under a click.
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"),
)
_STYLE: Final = (
    "body{font-family:system-ui,sans-serif;max-width:42rem;margin:2rem auto;padding:0 1rem;line-height:1.5}"
    "code{overflow-wrap:anywhere}.note{border-left:4px solid #c80;padding:.5rem 1rem;background:#fff8e6}"
    "fieldset{margin:1rem 0}button{font-size:1rem;margin-right:.5rem}"
)


def _page(status: int, title: str, body: str) -> _Answer:
    text = (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head>\n<body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )
    return _Answer(status, _PAGE_HEADERS, text.encode("utf-8"))


def _refused_page(reason: str) -> _Answer:
    return _page(
        400,
        "FairWins sandbox: this sign-in cannot go on",
        f'<p id="error">{html.escape(reason)}</p>\n<p>Nothing was sent back to the application.</p>',
    )


def _scope_lines(scopes: Sequence[str]) -> str:
    """Each scope with its meaning and the gateway routes it opens (from the contract)."""
    lines = []
    for scope in scopes:
        routes = ", ".join(f"{r['method']} {r['path']}" for r in ROUTES.values() if r["scope"] == scope)
        lines.append(
            f'<li><code class="scope">{html.escape(scope)}</code>: {html.escape(SCOPE_MEANINGS.get(scope, scope))}'
            f" <small>({html.escape(routes)})</small></li>"
        )
    return "\n".join(lines)


def _consent_page(pending: _Pending) -> _Answer:
    client = pending.client
    name = client.name or client.client_id
    how = (
        "described by its metadata document at this URL"
        if client.document
        else "registered by the client itself, which chose the name above"
    )
    members = "\n".join(
        f'<label><input type="radio" name="member" value="{label}"{" checked" if label == "A" else ""}>'
        f" Member {label} <code>{account}</code></label><br>"
        for label, account in MEMBERS.items()
    )
    body = f"""<p class="note"><strong>Sandbox.</strong> In FairWins, this approval is a signature with
the member's wallet, in the FairWins app, over the application, the resource and the scopes shown
here. This page stands in for that signature: no wallet is asked and nothing is signed.</p>
<p><strong id="client-name">{html.escape(name)}</strong> asks to act for a FairWins member.</p>
<dl>
<dt>Application</dt><dd><code id="client-id">{html.escape(client.client_id)}</code> : {how}</dd>
<dt>Resource: the only server its tokens are good for</dt>
<dd><code id="resource">{html.escape(pending.resource)}</code></dd>
<dt>Scopes</dt><dd><ul id="scopes">
{_scope_lines(pending.scopes)}
</ul></dd>
<dt>On approval, the browser goes back to</dt>
<dd><code id="redirect-uri">{html.escape(pending.redirect_uri)}</code></dd>
</dl>
<form method="post" action="/authorize">
<input type="hidden" name="request" value="{html.escape(pending.id)}">
<fieldset><legend>Approve as</legend>
{members}
</fieldset>
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>"""
    return _page(200, "FairWins sandbox: approve access", body)


def _redirect(uri: str, params: Mapping[str, str | None]) -> _Answer:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    separator = "&" if urlsplit(uri).query else "?"
    # 303: the browser follows with a GET, never re-posting the consent form to the client.
    return _Answer(303, (("Location", f"{uri}{separator}{query}"), ("Cache-Control", "no-store")))


def _one(params: Mapping[str, list[str]], name: str, *, required: bool = False) -> str | None:
    """The one value of `name` (RFC 6749 §3.1: "MUST NOT be included more than once")."""
    values = params.get(name, [])
    if len(values) > 1:
        raise _OAuthError("invalid_request", f"{name} is given more than once")
    if not values or values[0] == "":
        if required:
            raise _OAuthError("invalid_request", f"{name} is required")
        return None
    return values[0]


def _scopes_of(text: str | None) -> tuple[str, ...]:
    """The requested scopes in the contract's order; none asked: every member scope."""
    if text is None:
        return SCOPES
    asked = [s for s in text.split(" ") if s]
    # offline_access asks for a refresh token (OpenID Connect): every grant has one here, so it
    # is granted by leaving it out of the access token.
    unknown = [s for s in asked if s not in SCOPES and s != "offline_access"]
    if unknown:
        raise _OAuthError("invalid_scope", f"unknown scope {unknown[0]!r}; the scopes are {' '.join(SCOPES)}")
    wanted = set(asked)
    return tuple(s for s in SCOPES if s in wanted)


def _resource_problem(resource: str) -> str | None:
    parts = urlsplit(resource)
    # RFC 8707 §2: "MUST be an absolute URI ... MUST NOT include a fragment component".
    if parts.scheme not in ("https", "http") or not parts.netloc:
        return "resource must be an absolute http(s) URI"
    if parts.fragment or "#" in resource:
        return "resource must not have a fragment"
    return None


# --- the server ----------------------------------------------------------------------------------


class SandboxAuthServer:
    """A sandbox OAuth 2.1 authorization server on a real socket, served from daemon threads."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        access_token_ttl: int = ACCESS_TOKEN_TTL,
        refresh_token_ttl: int = REFRESH_TOKEN_TTL,
        resources: Sequence[str] = (),
        clock: Callable[[], float] = time.time,
        verbose: bool = False,
    ) -> None:
        """`resources`: the only audiences it issues for (empty: any http(s) URI); `clock`: its time."""
        self.access_token_ttl = access_token_ttl
        self.refresh_token_ttl = refresh_token_ttl
        self.resources = tuple(resources)
        self.clock = clock
        self.verbose = verbose
        self.issued: list[Issued] = []
        self.revoked_families: set[str] = set()
        self.clients: dict[str, Client] = {}
        self._lock = threading.Condition()  # guards everything above and below
        self._pending: dict[str, _Pending] = {}
        self._codes: dict[str, _Code] = {}
        self._refresh: dict[str, _Refresh] = {}
        self._keys: list[_Key] = [_new_key()]  # the last one signs
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._server = _Server((host, port), family, self)
        self.port: int = int(self._server.server_address[1])
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        self.url: str = f"http://{shown}:{self.port}"
        self._thread: threading.Thread | None = None

    # addresses

    @property
    def issuer(self) -> str:
        return self.url

    @property
    def metadata_url(self) -> str:
        return self.url + "/.well-known/oauth-authorization-server"

    @property
    def authorization_endpoint(self) -> str:
        return self.url + "/authorize"

    @property
    def token_endpoint(self) -> str:
        return self.url + "/token"

    @property
    def registration_endpoint(self) -> str:
        return self.url + "/register"

    @property
    def jwks_uri(self) -> str:
        return self.url + "/jwks"

    # lifecycle

    def start(self) -> SandboxAuthServer:
        if self._thread is not None:
            raise RuntimeError("a SandboxAuthServer starts once")
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name=f"sandbox-auth-{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5.0)
        self._server.server_close()

    def __enter__(self) -> SandboxAuthServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # keys

    @property
    def kid(self) -> str:
        """The kid of the key that signs now."""
        with self._lock:
            return self._keys[-1].kid

    def rotate_keys(self, overlap: float | None = None) -> str:
        """Sign with a new key from now on; the old one stays in the JWK Set `overlap` seconds more.

        By default the overlap is the access token lifetime: no token the old key signed outlives it.
        """
        key = _new_key()
        with self._lock:
            now = self.clock()
            for old in self._keys:
                if old.retire_at is None:
                    old.retire_at = now + (self.access_token_ttl if overlap is None else overlap)
            self._keys.append(key)
        return key.kid

    def retire_key(self, kid: str) -> None:
        """Take the key `kid` out of the JWK Set now (never the one that signs)."""
        with self._lock:
            if self._keys[-1].kid == kid:
                raise ValueError("the signing key cannot be retired: rotate_keys() first")
            self._keys = [key for key in self._keys if key.kid != kid]

    def jwks(self) -> dict[str, list[Json]]:
        """The JWK Set it publishes: the signing key and the rotated ones still overlapping."""
        with self._lock:
            now = self.clock()
            self._keys = [key for key in self._keys if key.retire_at is None or key.retire_at > now]
            return {"keys": [dict(key.jwk) for key in reversed(self._keys)]}

    def metadata(self) -> Json:
        """Its authorization server metadata (RFC 8414 §2)."""
        return {
            "issuer": self.issuer,
            "authorization_endpoint": self.authorization_endpoint,
            "token_endpoint": self.token_endpoint,
            "registration_endpoint": self.registration_endpoint,
            "jwks_uri": self.jwks_uri,
            "scopes_supported": list(SCOPES),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": list(GRANT_TYPES),
            "token_endpoint_auth_methods_supported": list(AUTH_METHODS),
            "code_challenge_methods_supported": ["S256"],
            "client_id_metadata_document_supported": True,
            # RFC 9207: the redirect names its issuer, so a client talking to two servers can tell.
            "authorization_response_iss_parameter_supported": True,
        }

    # tokens

    def mint_access_token(
        self,
        resource: str,
        *,
        subject: str = ACCOUNT_A,
        scopes: Sequence[str] = SCOPES,
        client_id: str = "sandbox-minted",
        issued_at: float | None = None,
        lifetime: float | None = None,
        family: str = "minted",
    ) -> str:
        """An access token signed by the current key, outside any flow (an expired one, for a test)."""
        with self._lock:
            return self._access_token(
                client_id,
                subject,
                tuple(scopes),
                resource,
                family,
                issued_at=issued_at,
                lifetime=lifetime,
            )

    def access_tokens(self) -> list[str]:
        """Every access token issued, in order."""
        with self._lock:
            return [item.value for item in self.issued if item.kind == "access_token"]

    def wait_for_issued(self, kind: str, n: int, timeout: float = 5.0) -> list[Issued]:
        """Block until at least `n` credentials of `kind` were issued; those. TimeoutError otherwise."""
        with self._lock:
            if not self._lock.wait_for(lambda: len([i for i in self.issued if i.kind == kind]) >= n, timeout):
                raise TimeoutError(f"fewer than {n} {kind} issued within {timeout} s")
            return [item for item in self.issued if item.kind == kind]

    def _record(self, item: Issued) -> None:
        self.issued.append(item)
        self._lock.notify_all()

    def _access_token(
        self,
        client_id: str,
        subject: str,
        scopes: tuple[str, ...],
        resource: str,
        family: str,
        *,
        issued_at: float | None = None,
        lifetime: float | None = None,
    ) -> str:
        key = self._keys[-1]
        iat = int(self.clock() if issued_at is None else issued_at)
        exp = iat + int(self.access_token_ttl if lifetime is None else lifetime)
        jti = secrets.token_urlsafe(16)
        scope = " ".join(scopes)
        header = {"alg": "RS256", "typ": "at+jwt", "kid": key.kid}
        # RFC 9068 §2.2: iss, exp, aud, sub, client_id, iat and jti; scope as §2.2.3 spells it.
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "aud": resource,
            "client_id": client_id,
            "scope": scope,
            "iat": iat,
            "exp": exp,
            "jti": jti,
        }
        signing_input = f"{_b64url(_dumps(header))}.{_b64url(_dumps(claims))}".encode("ascii")
        signature = key.private.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        token = f"{signing_input.decode('ascii')}.{_b64url(signature)}"
        self._record(Issued("access_token", token, client_id, subject, scope, resource, family, iat, exp, jti, key.kid))
        return token

    def _grant(self, client: Client, subject: str, scopes: tuple[str, ...], resource: str, family: str) -> Json:
        """The token endpoint's answer (RFC 6749 §5.1): an access token, and a refresh token if the client refreshes."""
        access = self._access_token(client.client_id, subject, scopes, resource, family)
        answer: Json = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.access_token_ttl,
            "scope": " ".join(scopes),
        }
        if client.refreshes:
            value = secrets.token_urlsafe(32)
            now = int(self.clock())
            expires_at = now + self.refresh_token_ttl
            self._refresh[value] = _Refresh(client.client_id, resource, scopes, subject, family, expires_at)
            self._record(
                Issued(
                    "refresh_token",
                    value,
                    client.client_id,
                    subject,
                    " ".join(scopes),
                    resource,
                    family,
                    now,
                    expires_at,
                )
            )
            answer["refresh_token"] = value
        return answer

    def _revoke(self, family: str) -> None:
        # RFC 9700 §4.14.2: a refresh token used twice means one copy is in other hands; every
        # token of its grant stops working, the legitimate client's too.
        self.revoked_families.add(family)
        for refresh in self._refresh.values():
            if refresh.family == family:
                refresh.spent = True

    # the endpoints (no sockets: a request's parts in, an answer out)

    def handle(self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes) -> _Answer:
        """The answer to one request; `headers` keyed in lower case."""
        if method == "OPTIONS":
            # CORS preflight: a browser-based client (the Inspector) reads the metadata and calls
            # the registration and token endpoints from a page of another origin.
            return _Answer(
                204,
                (
                    *_CORS,
                    ("Access-Control-Allow-Methods", "GET, POST, OPTIONS"),
                    ("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version"),
                    ("Access-Control-Max-Age", "600"),
                ),
            )
        routes: dict[tuple[str, str], Callable[[], _Answer]] = {
            ("GET", "/.well-known/oauth-authorization-server"): lambda: _json(200, self.metadata()),
            ("GET", "/.well-known/openid-configuration"): lambda: _json(200, self.metadata()),
            ("GET", "/jwks"): lambda: _json(200, self.jwks(), (("Cache-Control", "max-age=60"),)),
            ("POST", "/register"): lambda: self._register(body),
            ("GET", "/authorize"): lambda: self._authorize(parse_qs(query, keep_blank_values=True)),
            ("POST", "/authorize"): lambda: self._decide(parse_qs(body.decode("utf-8", "replace"))),
            ("POST", "/token"): lambda: self._token(headers, body),
        }
        route = routes.get((method, path))
        if route is not None:
            return route()
        if any(p == path for _, p in routes):
            return _json(405, {"error": "invalid_request", "error_description": f"{method} is not served at {path}"})
        return _json(404, {"error": "not_found", "error_description": f"nothing is served at {path}"})

    # registration (RFC 7591)

    def _register(self, body: bytes) -> _Answer:
        try:
            metadata = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            metadata = None
        if not isinstance(metadata, dict):
            return _json(
                400, {"error": "invalid_client_metadata", "error_description": "the body must be a JSON object"}
            )
        try:
            client, answer = self._registered(metadata)
        except _OAuthError as exc:
            return _oauth_error(exc)
        with self._lock:
            self.clients[client.client_id] = client
        return _json(201, answer, _NO_STORE)

    def _registered(self, metadata: dict[str, object]) -> tuple[Client, Json]:
        uris = metadata.get("redirect_uris")
        if not isinstance(uris, list) or not uris:
            raise _OAuthError("invalid_redirect_uri", "redirect_uris is required: a non-empty list")
        for uri in uris:
            problem = _redirect_uri_problem(uri)
            if problem is not None:
                raise _OAuthError("invalid_redirect_uri", problem)
        grant_types = metadata.get("grant_types", ["authorization_code"])
        if not isinstance(grant_types, list) or not all(g in GRANT_TYPES for g in grant_types):
            raise _OAuthError("invalid_client_metadata", f"grant_types must be among {', '.join(GRANT_TYPES)}")
        response_types = metadata.get("response_types", ["code"])
        if response_types != ["code"]:
            raise _OAuthError("invalid_client_metadata", 'response_types must be ["code"]')
        # RFC 7591 §2: a client that names no method has client_secret_basic.
        method = metadata.get("token_endpoint_auth_method", "client_secret_basic")
        if method not in AUTH_METHODS:
            raise _OAuthError(
                "invalid_client_metadata", f"token_endpoint_auth_method must be one of {', '.join(AUTH_METHODS)}"
            )
        name = metadata.get("client_name")
        if name is not None and not isinstance(name, str):
            raise _OAuthError("invalid_client_metadata", "client_name must be a string")
        client = Client(
            client_id="sandbox-client-" + secrets.token_urlsafe(12),
            redirect_uris=tuple(str(uri) for uri in uris),
            auth_method=str(method),
            grant_types=tuple(str(g) for g in grant_types),
            name=name,
            secret=None if method == "none" else secrets.token_urlsafe(32),
        )
        # RFC 7591 §3.2.1: the answer holds every registered field, the defaults included.
        answer: Json = {
            **metadata,
            "client_id": client.client_id,
            "client_id_issued_at": int(self.clock()),
            "redirect_uris": list(client.redirect_uris),
            "grant_types": list(client.grant_types),
            "response_types": ["code"],
            "token_endpoint_auth_method": client.auth_method,
        }
        if client.secret is not None:
            answer["client_secret"] = client.secret
            answer["client_secret_expires_at"] = 0  # never
        return client, answer

    # Client ID Metadata Documents

    def _document_client(self, client_id: str) -> Client:
        """The client a metadata document at URL `client_id` describes, fetched now."""
        problem = _client_id_url_problem(client_id)
        if problem is not None:
            raise _PageError(problem)
        request = urllib.request.Request(client_id, headers={"Accept": "application/json"})
        try:
            with _OPENER.open(request, timeout=FETCH_TIMEOUT) as answer:
                status = answer.status
                raw = answer.read(MAX_METADATA_DOCUMENT + 1)
        except urllib.error.HTTPError as exc:
            raise _PageError(f"the client's metadata document answered {exc.code}, not 200") from None
        except (OSError, ValueError) as exc:
            raise _PageError(f"the client's metadata document could not be fetched: {exc}") from None
        if status != 200:
            raise _PageError(f"the client's metadata document answered {status}, not 200")
        if len(raw) > MAX_METADATA_DOCUMENT:
            raise _PageError(f"the client's metadata document is larger than {MAX_METADATA_DOCUMENT} bytes")
        try:
            document = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            document = None
        if not isinstance(document, dict):
            raise _PageError("the client's metadata document is not a JSON object")
        # draft-ietf-oauth-client-id-metadata-document: the document's client_id is its own URL,
        # compared as a plain string.
        if document.get("client_id") != client_id:
            raise _PageError("the client's metadata document names another client_id than its own URL")
        if "client_secret" in document or "client_secret_expires_at" in document:
            raise _PageError("a client's metadata document must not hold a client secret")
        method = document.get("token_endpoint_auth_method", "none")
        if method != "none":
            raise _PageError("a client known by its metadata document is public: token_endpoint_auth_method none")
        uris = document.get("redirect_uris")
        if not isinstance(uris, list) or not uris or any(_redirect_uri_problem(uri) for uri in uris):
            raise _PageError("the client's metadata document must list redirect_uris (https, or http on loopback)")
        grant_types = document.get("grant_types", ["authorization_code"])
        if not isinstance(grant_types, list):
            raise _PageError("the client's metadata document's grant_types must be a list")
        name = document.get("client_name")
        client = Client(
            client_id=client_id,
            redirect_uris=tuple(str(uri) for uri in uris),
            auth_method="none",
            grant_types=tuple(str(g) for g in grant_types if g in GRANT_TYPES),
            name=name if isinstance(name, str) else None,
            document=True,
        )
        with self._lock:
            self.clients[client_id] = client
        return client

    # the authorization endpoint

    def _authorize(self, params: Mapping[str, list[str]]) -> _Answer:
        # RFC 6749 §4.1.2.1: until the client and its redirect URI are known good, nothing is
        # redirected; the member is told on a page instead.
        try:
            client_id = _one(params, "client_id", required=True)
            assert client_id is not None
            if client_id.startswith(("https://", "http://")):
                client = self._document_client(client_id)
            else:
                with self._lock:
                    known = self.clients.get(client_id)
                if known is None:
                    raise _PageError(f"no client is registered as {client_id}")
                client = known
            given = _one(params, "redirect_uri")
            if given is None:
                if len(client.redirect_uris) != 1:
                    raise _PageError("redirect_uri is required: the client has more than one")
                redirect_uri = client.redirect_uris[0]
            elif any(_redirect_matches(uri, given) for uri in client.redirect_uris):
                redirect_uri = given
            else:
                raise _PageError(f"{given} is not one of the client's redirect URIs")
        except _PageError as exc:
            return _refused_page(str(exc))
        except _OAuthError as exc:
            return _refused_page(exc.description)
        states = params.get("state", [])
        state = states[0] if states else None
        try:
            pending = self._pending_request(client, redirect_uri, given is not None, state, params)
        except _OAuthError as exc:
            return _redirect(
                redirect_uri,
                {"error": exc.error, "error_description": exc.description, "state": state, "iss": self.issuer},
            )
        with self._lock:
            self._pending[pending.id] = pending
        return _consent_page(pending)

    def _pending_request(
        self, client: Client, redirect_uri: str, given: bool, state: str | None, params: Mapping[str, list[str]]
    ) -> _Pending:
        if len(params.get("state", [])) > 1:
            raise _OAuthError("invalid_request", "state is given more than once")
        response_type = _one(params, "response_type", required=True)
        if response_type != "code":
            raise _OAuthError("unsupported_response_type", "response_type must be code")
        challenge = _one(params, "code_challenge")
        if challenge is None:
            raise _OAuthError("invalid_request", "code_challenge is required (PKCE, S256)")
        # OAuth 2.1 §4.1.1: a missing method means plain, which this server never accepts.
        if _one(params, "code_challenge_method") != "S256":
            raise _OAuthError("invalid_request", "code_challenge_method must be S256; plain is not supported")
        if not _CHALLENGE.fullmatch(challenge):
            raise _OAuthError("invalid_request", "code_challenge is not an S256 challenge (43 base64url characters)")
        resources = params.get("resource", [])
        if len(resources) != 1 or not resources[0]:
            raise _OAuthError("invalid_target", "exactly one resource is required (RFC 8707): the MCP server's URL")
        resource = resources[0]
        problem = _resource_problem(resource)
        if problem is None and self.resources and resource not in self.resources:
            problem = f"{resource} is not a resource of this server"
        if problem is not None:
            raise _OAuthError("invalid_target", problem)
        scopes = _scopes_of(_one(params, "scope"))
        if not scopes:
            raise _OAuthError("invalid_scope", "no member scope is requested")
        return _Pending(
            secrets.token_urlsafe(24),
            client,
            redirect_uri,
            given,
            state,
            challenge,
            resource,
            scopes,
            self.clock() + CONSENT_TTL,
        )

    def _decide(self, form: Mapping[str, list[str]]) -> _Answer:
        """The consent form posted: the member's approval (or refusal) becomes the redirect."""
        request_id = form.get("request", [""])[0]
        with self._lock:
            pending = self._pending.pop(request_id, None)
        if pending is None or pending.expires_at <= self.clock():
            return _refused_page("this approval page has expired or was already answered: start the sign-in again")
        answer = {"state": pending.state, "iss": self.issuer}
        if form.get("decision", [""])[0] != "approve":
            return _redirect(pending.redirect_uri, {"error": "access_denied", **answer})
        label = form.get("member", [""])[0]
        subject = MEMBERS.get(label)
        if subject is None:
            return _refused_page(f"member must be one of {', '.join(MEMBERS)}")
        code = secrets.token_urlsafe(32)
        now = self.clock()
        with self._lock:
            self._codes[code] = _Code(
                pending.client.client_id,
                pending.redirect_uri,
                pending.redirect_uri_given,
                pending.challenge,
                pending.resource,
                pending.scopes,
                subject,
                family=secrets.token_urlsafe(12),
                expires_at=now + CODE_TTL,
            )
            self._record(
                Issued(
                    "code",
                    code,
                    pending.client.client_id,
                    subject,
                    " ".join(pending.scopes),
                    pending.resource,
                    self._codes[code].family,
                    int(now),
                    int(now + CODE_TTL),
                )
            )
        return _redirect(pending.redirect_uri, {"code": code, **answer})

    # the token endpoint

    def _token(self, headers: Mapping[str, str], body: bytes) -> _Answer:
        if headers.get("content-type", "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
            return _oauth_error(_OAuthError("invalid_request", "the body must be application/x-www-form-urlencoded"))
        try:
            params = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            return _oauth_error(_OAuthError("invalid_request", "the body is not UTF-8"))
        basic = headers.get("authorization", "").lower().startswith("basic ")
        try:
            client = self._token_client(headers, params)
            grant_type = _one(params, "grant_type", required=True)
            with self._lock:
                if grant_type == "authorization_code":
                    return _json(200, self._redeem(client, params), _NO_STORE)
                if grant_type == "refresh_token":
                    return _json(200, self._refreshed(client, params), _NO_STORE)
            raise _OAuthError("unsupported_grant_type", f"grant_type must be one of {', '.join(GRANT_TYPES)}")
        except _OAuthError as exc:
            # RFC 6749 §5.2: a client that tried Basic is answered with its challenge.
            challenge = (("WWW-Authenticate", 'Basic realm="fairwins-sandbox"'),) if exc.status == 401 and basic else ()
            return _oauth_error(exc, challenge)

    def _token_client(self, headers: Mapping[str, str], params: Mapping[str, list[str]]) -> Client:
        """The client the token request authenticates as (RFC 6749 §2.3), or invalid_client."""
        authorization = headers.get("authorization")
        body_id = _one(params, "client_id")
        body_secret = _one(params, "client_secret")
        if authorization is not None:
            scheme, _, credentials = authorization.partition(" ")
            if scheme.lower() != "basic":
                raise _OAuthError("invalid_client", "the token endpoint takes Basic client authentication", 401)
            if body_secret is not None:
                raise _OAuthError(
                    "invalid_request", "send the client secret one way, not in both the header and the body"
                )
            try:
                decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise _OAuthError("invalid_client", "the Basic credentials are not base64", 401) from None
            # RFC 6749 §2.3.1: the id and secret are form-urlencoded before they are joined.
            raw_id, colon, raw_secret = decoded.partition(":")
            if not colon:
                raise _OAuthError("invalid_client", "the Basic credentials hold no secret", 401)
            client_id = unquote_plus(raw_id)
            secret: str | None = unquote_plus(raw_secret)
            if body_id is not None and body_id != client_id:
                raise _OAuthError("invalid_request", "client_id differs between the header and the body")
        elif body_id is not None:
            client_id, secret = body_id, body_secret  # client_secret_post, or a public client
        else:
            raise _OAuthError("invalid_client", "client_id is required", 401)
        with self._lock:
            client = self.clients.get(client_id)
        if client is None:
            raise _OAuthError("invalid_client", "the client is unknown", 401)
        if client.secret is None:
            if secret is not None:
                raise _OAuthError("invalid_client", "the client is public: it has no secret to send", 401)
            return client
        # Either way of sending the secret is taken, whichever the client registered, as most
        # servers do: the secret is what authenticates it.
        if secret is None or not hmac.compare_digest(secret.encode(), client.secret.encode()):
            raise _OAuthError("invalid_client", "the client's secret is wrong or missing", 401)
        return client

    def _redeem(self, client: Client, params: Mapping[str, list[str]]) -> Json:
        value = _one(params, "code", required=True)
        assert value is not None
        code = self._codes.get(value)
        if code is None or code.client_id != client.client_id:
            raise _OAuthError("invalid_grant", "the authorization code is unknown, or was issued to another client")
        if code.used:
            # RFC 6749 §4.1.2: a code used twice "SHOULD revoke (when possible) all tokens
            # previously issued based on that authorization code".
            self._revoke(code.family)
            raise _OAuthError("invalid_grant", "the authorization code was already used: its tokens are revoked")
        code.used = True
        if code.expires_at <= self.clock():
            raise _OAuthError("invalid_grant", "the authorization code has expired")
        redirect_uri = _one(params, "redirect_uri")
        if code.redirect_uri_given and redirect_uri != code.redirect_uri:
            raise _OAuthError("invalid_grant", "redirect_uri differs from the authorization request's")
        verifier = _one(params, "code_verifier")
        if verifier is None:
            raise _OAuthError("invalid_request", "code_verifier is required (PKCE)")
        if not _VERIFIER.fullmatch(verifier):
            raise _OAuthError("invalid_grant", "code_verifier must be 43 to 128 unreserved characters")
        if not hmac.compare_digest(pkce_challenge(verifier), code.challenge):
            raise _OAuthError("invalid_grant", "code_verifier does not match the code_challenge")
        self._same_resource(params, code.resource)
        return self._grant(client, code.subject, code.scopes, code.resource, code.family)

    def _refreshed(self, client: Client, params: Mapping[str, list[str]]) -> Json:
        value = _one(params, "refresh_token", required=True)
        assert value is not None
        refresh = self._refresh.get(value)
        if refresh is None or refresh.client_id != client.client_id:
            raise _OAuthError("invalid_grant", "the refresh token is unknown, or was issued to another client")
        if refresh.family in self.revoked_families:
            raise _OAuthError("invalid_grant", "the refresh token was revoked")
        if refresh.spent:
            self._revoke(refresh.family)
            raise _OAuthError(
                "invalid_grant", "the refresh token was already used: every token of its grant is revoked"
            )
        if refresh.expires_at <= self.clock():
            raise _OAuthError("invalid_grant", "the refresh token has expired")
        self._same_resource(params, refresh.resource)
        scopes = refresh.scopes
        asked = _one(params, "scope")
        if asked is not None:
            narrower = _scopes_of(asked)
            if not set(narrower) <= set(refresh.scopes):
                raise _OAuthError("invalid_scope", "a refresh cannot add scopes the member did not approve")
            scopes = narrower
        # Rotation (OAuth 2.1, the refresh token grant): the old one is spent, a new one comes with
        # the answer.
        refresh.spent = True
        return self._grant(client, refresh.subject, scopes, refresh.resource, refresh.family)

    @staticmethod
    def _same_resource(params: Mapping[str, list[str]], authorized: str) -> None:
        resources = params.get("resource", [])
        if len(resources) > 1:
            raise _OAuthError("invalid_target", "one resource per token request")
        # RFC 8707 §2.2: a token request may name the resource again; it must be the one granted.
        if resources and resources[0] != authorized:
            raise _OAuthError("invalid_target", f"resource must be {authorized}, the one the member approved")


# --- HTTP ----------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FairWinsSandboxAuth/1.0"
    sys_version = ""
    server: _Server

    def version_string(self) -> str:
        return self.server_version

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_OPTIONS(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length_text = self.headers.get("Content-Length", "0")
        length = int(length_text) if length_text.isdigit() else -1
        if self.headers.get("Transfer-Encoding") is not None or not 0 <= length <= MAX_BODY:
            self.close_connection = True
            self._send(
                _json(413, {"error": "invalid_request", "error_description": "send a Content-Length up to 64 KiB"})
            )
            return
        body = self.rfile.read(length)
        path, _, query = self.path.partition("?")
        headers = {name.lower(): value for name, value in self.headers.items()}
        self._send(self.server.auth.handle(self.command, path, query, headers, body))

    def _send(self, answer: _Answer) -> None:
        self.send_response(answer.status)
        for name, value in answer.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)

    def log_message(self, format: str, *args: object) -> None:
        # The request line only: codes and tokens travel in bodies and Location headers, never here.
        if self.server.auth.verbose:
            sys.stderr.write(f"sandbox auth: {self.address_string()} {format % args}\n")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], family: socket.AddressFamily, auth: SandboxAuthServer) -> None:
        self.address_family = family
        self.auth = auth
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks the host name up (socket.getfqdn), which can stall where
        # there is no DNS; the sandbox never needs the name.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: object) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client that went away
        super().handle_error(request, client_address)


# --- a headless member ---------------------------------------------------------------------------

_REQUEST_FIELD: Final = re.compile(r'<input type="hidden" name="request" value="([^"]+)">')


def consent(authorization_url: str, member: str = "A", *, approve: bool = True, timeout: float = 5.0) -> str:
    """What a member's browser does with `authorization_url`: open the consent page, answer it.

    Returns the redirect the answer produced (the client's redirect URI with `code` and `state`,
    or with `error`), without following it. Raises RuntimeError with the page's text when the
    server refused the request on a page instead.
    """
    try:
        with _OPENER.open(authorization_url, timeout=timeout) as answer:
            page = answer.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        if exc.code in (302, 303) and exc.headers.get("Location"):
            return str(exc.headers["Location"])  # refused with a redirect: no page to answer
        raise RuntimeError(f"the consent page answered {exc.code}: {exc.read().decode('utf-8', 'replace')}") from None
    match = _REQUEST_FIELD.search(page)
    if match is None:
        raise RuntimeError("no consent form on the page")
    form = urlencode(
        {"request": html.unescape(match.group(1)), "member": member, "decision": "approve" if approve else "deny"}
    ).encode("ascii")
    parts = urlsplit(authorization_url)
    post = urllib.request.Request(
        f"{parts.scheme}://{parts.netloc}/authorize",
        data=form,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        method="POST",
    )
    try:
        with _OPENER.open(post, timeout=timeout) as answer:
            raise RuntimeError(f"the consent answered {answer.status}, not a redirect: {answer.read()!r}")
    except urllib.error.HTTPError as exc:
        location = exc.headers.get("Location")
        if exc.code == 303 and location:
            return str(location)
        raise RuntimeError(f"the consent answered {exc.code}: {exc.read().decode('utf-8', 'replace')}") from None


# --- command line --------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.sandbox_auth",
        description="Serve the sandbox authorization server until SIGINT or SIGTERM.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8788, help="0 picks a free port")
    parser.add_argument(
        "--access-token-ttl", type=int, default=ACCESS_TOKEN_TTL, help="access token lifetime in seconds"
    )
    parser.add_argument(
        "--resource",
        action="append",
        default=[],
        metavar="URL",
        help="issue tokens only for this resource (repeatable; default: any http(s) URI)",
    )
    parser.add_argument("--verbose", action="store_true", help="log each request line to stderr")
    args = parser.parse_args(argv)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        auth = SandboxAuthServer(
            args.host,
            args.port,
            access_token_ttl=args.access_token_ttl,
            resources=args.resource,
            verbose=args.verbose,
        )
    except OSError as exc:
        print(f"sandbox auth: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    with auth:
        print(f"sandbox authorization server on {auth.url}")
        print(f"  metadata      {auth.metadata_url}")
        print(f"  keys          {auth.jwks_uri} (kid {auth.kid})")
        for label, account in MEMBERS.items():
            print(f"  member {label}      {account} (approve as {label} on the consent page)")
        print(f"  access tokens RS256 JWTs for {auth.access_token_ttl} s; refresh tokens rotated on every use")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
