"""The sandbox authorization server, driven as an OAuth client drives it, and the gateway taking its tokens.

A client registers (RFC 7591) or names its metadata document (a Client ID Metadata Document this
test serves itself), sends the member to the consent page, redeems the code with its PKCE
verifier, refreshes, and reads a member route of the sandbox gateway with the access token. The
tokens are checked with `cryptography` against the published JWK Set; the gateway checks them
with its own standard-library verifier.
"""

from __future__ import annotations

import base64
import hashlib
import html
import http.client
import json
import os
import re
import selectors
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.conftest import SIGNAL_STOP
from tests.sandbox_auth import (
    ACCESS_TOKEN_TTL,
    MEMBERS,
    SCOPES,
    SandboxAuthServer,
    consent,
    pkce,
    pkce_challenge,
)
from tests.sandbox_gateway import ACCOUNT_A, ACCOUNT_B, ALL_SCOPES, TOKEN_EXPIRED, TOKEN_MEMBER_A, SandboxGateway

TIMEOUT = 5.0
REPO = Path(__file__).resolve().parent.parent
RESOURCE = "http://127.0.0.1:8790/mcp"  # the MCP server a client signs in for; never contacted here
CALLBACK = "http://127.0.0.1:53682/callback"  # the client's loopback redirect; never contacted here


# --- a client's HTTP ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")

    @property
    def shown(self) -> str:
        """The text as a browser shows it: HTML escapes undone."""
        return html.unescape(self.text)


def fetch(
    method: str,
    url: str,
    *,
    form: Mapping[str, str] | None = None,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """One request, redirects not followed."""
    parts = urlsplit(url)
    sent = dict(headers or {})
    data: bytes | None = None
    if form is not None:
        data = urlencode(form).encode("ascii")
        sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
    elif body is not None:
        data = json.dumps(body).encode("utf-8")
        sent.setdefault("Content-Type", "application/json")
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=TIMEOUT)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request(method, target, body=data, headers=sent)
        answer = connection.getresponse()
        return Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read())
    finally:
        connection.close()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def verified(auth: SandboxAuthServer, token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of `token`, its signature checked by `cryptography` with the published key."""
    keys = fetch("GET", auth.jwks_uri).json()["keys"]
    head, claims, signature = token.split(".")
    header = json.loads(b64url_decode(head))
    jwk = next(key for key in keys if key["kid"] == header["kid"])
    public = rsa.RSAPublicNumbers(
        int.from_bytes(b64url_decode(jwk["e"]), "big"), int.from_bytes(b64url_decode(jwk["n"]), "big")
    ).public_key()
    public.verify(b64url_decode(signature), f"{head}.{claims}".encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
    return header, json.loads(b64url_decode(claims))


def query_of(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def register(auth: SandboxAuthServer, **metadata: Any) -> dict[str, Any]:
    answer = fetch(
        "POST",
        auth.registration_endpoint,
        body={
            "redirect_uris": [CALLBACK],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "client_name": "Test client",
            **metadata,
        },
    )
    assert answer.status == 201, answer.body
    registered: dict[str, Any] = answer.json()
    return registered


def authorization_url(
    auth: SandboxAuthServer,
    client_id: str,
    challenge: str,
    *,
    redirect_uri: str | None = CALLBACK,
    resource: str | None = RESOURCE,
    scope: str | None = "read:wagers read:profile",
    state: str = "state-1",
    method: str | None = "S256",
) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": challenge,
        "code_challenge_method": method,
        "resource": resource,
        "scope": scope,
        "state": state,
    }
    return auth.authorization_endpoint + "?" + urlencode({k: v for k, v in params.items() if v is not None})


@dataclass(frozen=True)
class SignIn:
    client_id: str
    code: str
    verifier: str


def sign_in(auth: SandboxAuthServer, client_id: str, *, member: str = "A", **options: Any) -> SignIn:
    """Send the member to the consent page, approve, and take the code from the redirect."""
    verifier, challenge = pkce()
    location = consent(authorization_url(auth, client_id, challenge, **options), member)
    answer = query_of(location)
    assert "code" in answer, location
    return SignIn(client_id, answer["code"], verifier)


def redeem(auth: SandboxAuthServer, signed: SignIn, **extra: str) -> Response:
    form = {
        "grant_type": "authorization_code",
        "code": signed.code,
        "redirect_uri": CALLBACK,
        "client_id": signed.client_id,
        "code_verifier": signed.verifier,
        "resource": RESOURCE,
        **extra,
    }
    return fetch("POST", auth.token_endpoint, form={k: v for k, v in form.items() if v})


def refresh(auth: SandboxAuthServer, client_id: str, token: str, **extra: str) -> Response:
    form = {"grant_type": "refresh_token", "refresh_token": token, "client_id": client_id, **extra}
    return fetch("POST", auth.token_endpoint, form=form)


def oauth_error(answer: Response, status: int, error: str) -> str:
    assert answer.status == status, answer.body
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["cache-control"] == "no-store"
    value = answer.json()
    assert value["error"] == error, value
    description: str = value["error_description"]
    return description


def member_read(gateway: SandboxGateway, token: str, path: str = "/v1/member/wagers") -> Response:
    return fetch("GET", gateway.url + path, headers={"Authorization": f"Bearer {token}"})


# --- the servers -------------------------------------------------------------------------------


class _QuickServer(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        # As the sandboxes do: HTTPServer.server_bind's host name lookup can stall without DNS.
        socketserver.TCPServer.server_bind(self)


class Documents:
    """Client ID Metadata Documents served on 127.0.0.1:0, as a client publishes its own."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, bytes]] = {}
        self.fetched: list[str] = []
        documents = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                documents.fetched.append(self.path)
                status, body = documents.answers.get(self.path, (404, b"{}"))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if status in (301, 302):
                    self.send_header("Location", "/elsewhere.json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = _QuickServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def publish(self, path: str, document: object, status: int = 200) -> str:
        body = document if isinstance(document, bytes) else json.dumps(document).encode("utf-8")
        self.answers[path] = (status, body)
        return self.url + path

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def auth() -> Iterator[SandboxAuthServer]:
    with SandboxAuthServer() as server:
        yield server


@pytest.fixture(scope="module")
def gateway(auth: SandboxAuthServer) -> Iterator[SandboxGateway]:
    with SandboxGateway() as server:
        server.trust_issuer(auth.issuer)
        yield server


@pytest.fixture(scope="module")
def documents() -> Iterator[Documents]:
    served = Documents()
    try:
        yield served
    finally:
        served.close()


@pytest.fixture
def client_id(auth: SandboxAuthServer) -> str:
    registered: str = register(auth)["client_id"]
    return registered


# --- metadata and keys -------------------------------------------------------------------------


def test_metadata_is_served_at_both_well_known_paths_with_what_an_mcp_client_needs(auth: SandboxAuthServer) -> None:
    oauth = fetch("GET", auth.metadata_url)
    oidc = fetch("GET", auth.issuer + "/.well-known/openid-configuration")
    assert oauth.status == oidc.status == 200
    assert oauth.json() == oidc.json()
    assert oauth.headers["access-control-allow-origin"] == "*"  # browser-based clients read it
    metadata = oauth.json()
    assert metadata["issuer"] == auth.issuer == auth.url  # RFC 8414 §3.3: the URL it was fetched from
    for name, path in (
        ("authorization_endpoint", "/authorize"),
        ("token_endpoint", "/token"),
        ("registration_endpoint", "/register"),
        ("jwks_uri", "/jwks"),
    ):
        assert metadata[name] == auth.issuer + path
    assert metadata["response_types_supported"] == ["code"]
    assert metadata["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert "none" in metadata["token_endpoint_auth_methods_supported"]
    assert metadata["client_id_metadata_document_supported"] is True
    # The contract's member scopes, exactly as the snapshot lists them, and never offline_access.
    snapshot = json.loads((REPO / "toolDefs.snapshot.json").read_text(encoding="utf-8"))
    assert metadata["scopes_supported"] == snapshot["scopes"] == list(ALL_SCOPES)


def test_jwks_publishes_the_signing_key_as_rs256_with_its_thumbprint_as_kid(auth: SandboxAuthServer) -> None:
    answer = fetch("GET", auth.jwks_uri)
    assert answer.status == 200
    (key,) = answer.json()["keys"]
    assert key["kty"] == "RSA" and key["alg"] == "RS256" and key["use"] == "sig" and key["kid"] == auth.kid
    assert len(b64url_decode(key["n"])) == 256  # RSA 2048
    assert not {"d", "p", "q", "dp", "dq", "qi"} & key.keys()
    canonical = json.dumps({"e": key["e"], "kty": "RSA", "n": key["n"]}, separators=(",", ":")).encode()
    assert key["kid"] == b64url(hashlib.sha256(canonical).digest())  # RFC 7638


def test_cors_preflight_is_answered_for_browser_clients(auth: SandboxAuthServer) -> None:
    answer = fetch("OPTIONS", auth.token_endpoint, headers={"Origin": "http://localhost:6274"})
    assert answer.status == 204
    assert answer.headers["access-control-allow-origin"] == "*"
    assert "POST" in answer.headers["access-control-allow-methods"]


# --- the whole flow ----------------------------------------------------------------------------


def test_registered_client_signs_in_and_reads_the_members_wagers_with_exactly_the_token_issued(
    auth: SandboxAuthServer, gateway: SandboxGateway
) -> None:
    registered = register(auth)
    assert registered["token_endpoint_auth_method"] == "none" and "client_secret" not in registered
    assert registered["redirect_uris"] == [CALLBACK]
    client_id = registered["client_id"]

    verifier, challenge = pkce()
    url = authorization_url(auth, client_id, challenge, state="xyz-123")
    page = fetch("GET", url)
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["x-frame-options"] == "DENY"
    for shown in ("Test client", client_id, RESOURCE, "read:wagers", "read:profile", "wallet", ACCOUNT_A, ACCOUNT_B):
        assert shown in page.text
    assert "read:fees" not in page.text  # only the scopes asked for
    assert re.search(r'<input type="radio" name="member" value="A" checked>', page.text)
    assert re.search(r'<input type="radio" name="member" value="B">', page.text)
    request_id = re.search(r'name="request" value="([^"]+)"', page.text)
    assert request_id

    # The consent form, posted as a browser (or a headless client) posts it.
    answer = fetch(
        "POST", auth.authorization_endpoint, form={"request": request_id.group(1), "member": "A", "decision": "approve"}
    )
    assert answer.status == 303
    location = answer.headers["location"]
    assert location.startswith(CALLBACK + "?")
    back = query_of(location)
    assert back["state"] == "xyz-123" and back["iss"] == auth.issuer and back["code"]

    before = int(time.time())
    tokens = redeem(auth, SignIn(client_id, back["code"], verifier))
    assert tokens.status == 200, tokens.body
    assert tokens.headers["cache-control"] == "no-store"
    granted = tokens.json()
    assert granted["token_type"] == "Bearer"
    assert granted["expires_in"] == ACCESS_TOKEN_TTL == 300
    assert granted["scope"] == "read:profile read:wagers"
    assert granted["refresh_token"]

    header, claims = verified(auth, granted["access_token"])
    assert header == {"alg": "RS256", "typ": "at+jwt", "kid": auth.kid}
    assert claims.keys() == {"iss", "sub", "aud", "client_id", "scope", "iat", "exp", "jti"}
    assert claims["iss"] == auth.issuer and claims["sub"] == ACCOUNT_A and claims["aud"] == RESOURCE
    assert claims["client_id"] == client_id and claims["scope"] == "read:profile read:wagers"
    assert before <= claims["iat"] <= time.time() and claims["exp"] == claims["iat"] + 300

    # What was issued is recorded, and the gateway saw exactly that token, as member A's.
    issued = [item for item in auth.issued if item.family == auth.issued[-1].family]
    assert [item.kind for item in issued] == ["code", "access_token", "refresh_token"]
    assert issued[1].value == granted["access_token"] and issued[1].jti == claims["jti"]
    assert issued[2].value == granted["refresh_token"]
    gateway.clear_seen()
    wagers = member_read(gateway, granted["access_token"])
    assert wagers.status == 200, wagers.body
    assert [w["id"] for w in wagers.json()["chains"][0]["wagers"]] == ["w-a-1", "w-a-2", "w-a-3"]
    (seen,) = gateway.seen
    assert seen.header("Authorization") == f"Bearer {auth.access_tokens()[-1]}" == f"Bearer {granted['access_token']}"
    me = member_read(gateway, granted["access_token"], "/v1/member/me").json()
    assert me["account"] == ACCOUNT_A and me["scopes"] == ["read:profile", "read:wagers"]
    assert me["tokenId"] == claims["jti"]


def test_member_b_approving_gets_member_bs_data(
    auth: SandboxAuthServer, gateway: SandboxGateway, client_id: str
) -> None:
    granted = redeem(auth, sign_in(auth, client_id, member="B")).json()
    assert verified(auth, granted["access_token"])[1]["sub"] == ACCOUNT_B == MEMBERS["B"]
    wagers = member_read(gateway, granted["access_token"]).json()
    assert [w["id"] for w in wagers["chains"][0]["wagers"]] == ["w-b-1", "w-b-2"]


def test_no_scope_asked_means_every_member_scope_and_offline_access_is_taken_without_a_scope(
    auth: SandboxAuthServer, client_id: str
) -> None:
    everything = redeem(auth, sign_in(auth, client_id, scope=None)).json()
    assert everything["scope"] == " ".join(SCOPES)
    offline = redeem(auth, sign_in(auth, client_id, scope="read:fees offline_access")).json()
    assert offline["scope"] == "read:fees" and offline["refresh_token"]


def test_a_client_metadata_document_client_signs_in_without_registering(
    auth: SandboxAuthServer, gateway: SandboxGateway, documents: Documents
) -> None:
    url = documents.url + "/clients/doc-client.json"
    documents.publish(
        "/clients/doc-client.json",
        {
            "client_id": url,
            "client_name": "Document <b>client</b>",
            "redirect_uris": [CALLBACK],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
        },
    )
    verifier, challenge = pkce()
    page = fetch("GET", authorization_url(auth, url, challenge))
    assert page.status == 200, page.body
    assert "Document &lt;b&gt;client&lt;/b&gt;" in page.text and "<b>client" not in page.text
    assert "metadata document" in page.text and url in page.text
    assert documents.fetched[-1] == "/clients/doc-client.json"

    location = consent(authorization_url(auth, url, challenge), "A")
    granted = redeem(auth, SignIn(url, query_of(location)["code"], verifier))
    assert granted.status == 200, granted.body
    assert verified(auth, granted.json()["access_token"])[1]["client_id"] == url
    assert member_read(gateway, granted.json()["access_token"]).status == 200
    assert refresh(auth, url, granted.json()["refresh_token"]).status == 200


@pytest.mark.parametrize(
    ("document", "status", "reason"),
    [
        ({"client_id": "https://elsewhere.example/client.json", "redirect_uris": [CALLBACK]}, 200, "another client_id"),
        ({"client_id": "{url}", "redirect_uris": ["http://127.0.0.1:1/other"]}, 200, "is not one of the client's"),
        (
            {"client_id": "{url}", "redirect_uris": [CALLBACK], "client_secret": "s"},
            200,
            "must not hold a client secret",
        ),
        (
            {"client_id": "{url}", "redirect_uris": [CALLBACK], "token_endpoint_auth_method": "client_secret_post"},
            200,
            "public",
        ),
        ({"client_id": "{url}"}, 200, "must list redirect_uris"),
        ({"client_id": "{url}", "redirect_uris": [CALLBACK]}, 404, "answered 404"),
        ({"client_id": "{url}", "redirect_uris": [CALLBACK]}, 302, "answered 302"),
        ({"client_id": "{url}", "redirect_uris": [CALLBACK], "padding": "x" * 6000}, 200, "larger than 5120 bytes"),
        (b"not json", 200, "not a JSON object"),
    ],
    ids=[
        "other-client-id",
        "redirect-not-listed",
        "secret",
        "secret-method",
        "no-redirects",
        "404",
        "redirect",
        "too-large",
        "not-json",
    ],
)
def test_a_client_metadata_document_that_does_not_hold_is_refused_on_a_page_never_redirected(
    auth: SandboxAuthServer, documents: Documents, document: Any, status: int, reason: str
) -> None:
    path = f"/refused/{hashlib.sha256(reason.encode()).hexdigest()[:12]}.json"
    url = documents.url + path
    if isinstance(document, dict):
        document = {k: (url if v == "{url}" else v) for k, v in document.items()}
    documents.publish(path, document, status)
    page = fetch("GET", authorization_url(auth, url, pkce()[1]))
    assert page.status == 400 and "location" not in page.headers
    assert reason in page.shown, page.text


@pytest.mark.parametrize(
    ("client_id", "reason"),
    [
        ("http://client.example/client.json", "must be https"),
        ("https://client.example", "must have a path"),
        ("https://client.example/a/../client.json", "dot segments"),
        ("https://user:pw@client.example/client.json", "user name or password"),
        ("unregistered-client", "no client is registered"),
    ],
)
def test_a_client_id_that_cannot_be_a_client_is_refused_without_a_fetch(
    auth: SandboxAuthServer, client_id: str, reason: str
) -> None:
    page = fetch("GET", authorization_url(auth, client_id, pkce()[1]))
    assert page.status == 400 and "location" not in page.headers
    assert reason in page.shown


# --- registration --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"redirect_uris": []}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://client.example/callback"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://client.example/callback#frag"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["myapp://callback"]}, "invalid_redirect_uri"),
        ({"token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"),
        ({"grant_types": ["implicit"]}, "invalid_client_metadata"),
        ({"response_types": ["token"]}, "invalid_client_metadata"),
    ],
)
def test_registration_refuses_what_this_server_cannot_serve(
    auth: SandboxAuthServer, metadata: dict[str, Any], error: str
) -> None:
    body = {"redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none", **metadata}
    answer = fetch("POST", auth.registration_endpoint, body=body)
    oauth_error(answer, 400, error)


def test_registration_without_redirect_uris_is_refused(auth: SandboxAuthServer) -> None:
    oauth_error(fetch("POST", auth.registration_endpoint, body={"client_name": "x"}), 400, "invalid_redirect_uri")


def test_a_confidential_client_authenticates_with_its_secret_by_basic_or_post(
    auth: SandboxAuthServer,
) -> None:
    registered = fetch(
        "POST",
        auth.registration_endpoint,
        body={"redirect_uris": [CALLBACK], "grant_types": ["authorization_code", "refresh_token"]},
    ).json()
    # RFC 7591 §2: the default method is client_secret_basic, so a secret is issued.
    assert registered["token_endpoint_auth_method"] == "client_secret_basic"
    client_id, secret = registered["client_id"], registered["client_secret"]
    assert registered["client_secret_expires_at"] == 0

    signed = sign_in(auth, client_id)
    basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    form = {
        "grant_type": "authorization_code",
        "code": signed.code,
        "redirect_uri": CALLBACK,
        "code_verifier": signed.verifier,
    }
    wrong = base64.b64encode(f"{client_id}:not-the-secret".encode()).decode()
    refused = fetch("POST", auth.token_endpoint, form=form, headers={"Authorization": f"Basic {wrong}"})
    oauth_error(refused, 401, "invalid_client")
    assert refused.headers["www-authenticate"].startswith("Basic")
    granted = fetch("POST", auth.token_endpoint, form=form, headers={"Authorization": f"Basic {basic}"})
    assert granted.status == 200, granted.body
    posted = refresh(auth, client_id, granted.json()["refresh_token"], client_secret=secret)
    assert posted.status == 200, posted.body
    oauth_error(refresh(auth, client_id, posted.json()["refresh_token"]), 401, "invalid_client")


# --- the authorization request -----------------------------------------------------------------


def test_plain_pkce_and_a_missing_challenge_are_refused_back_to_the_client_with_its_state(
    auth: SandboxAuthServer, client_id: str
) -> None:
    verifier = "v" * 43
    for url in (
        authorization_url(auth, client_id, verifier, method="plain"),
        authorization_url(auth, client_id, verifier, method=None),  # OAuth 2.1: absent means plain
        authorization_url(auth, client_id, "", method="S256"),
        authorization_url(auth, client_id, "not-a-challenge", method="S256"),
    ):
        answer = fetch("GET", url)
        assert answer.status == 303
        back = query_of(answer.headers["location"])
        assert back["error"] == "invalid_request" and back["state"] == "state-1" and back["iss"] == auth.issuer
        assert "code" not in back


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"resource": None}, "invalid_target"),
        ({"resource": "https://mcp.example/mcp#fragment"}, "invalid_target"),
        ({"resource": "not-a-uri"}, "invalid_target"),
        ({"scope": "read:wagers write:everything"}, "invalid_scope"),
    ],
)
def test_a_bad_resource_or_scope_is_refused_back_to_the_client(
    auth: SandboxAuthServer, client_id: str, options: dict[str, Any], error: str
) -> None:
    answer = fetch("GET", authorization_url(auth, client_id, pkce()[1], **options))
    assert answer.status == 303
    assert query_of(answer.headers["location"])["error"] == error


def test_a_redirect_uri_not_registered_is_refused_on_a_page_and_loopback_ports_may_differ(
    auth: SandboxAuthServer, client_id: str
) -> None:
    page = fetch("GET", authorization_url(auth, client_id, pkce()[1], redirect_uri="http://127.0.0.1:53682/other"))
    assert page.status == 400 and "location" not in page.headers
    assert "is not one of the client's redirect URIs" in page.shown
    # RFC 8252 §7.3: a native client's loopback listener gets whatever port is free.
    other_port = "http://127.0.0.1:40000/callback"
    location = consent(authorization_url(auth, client_id, pkce()[1], redirect_uri=other_port))
    assert location.startswith(other_port + "?code=")


def test_a_server_limited_to_its_resources_refuses_any_other() -> None:
    with SandboxAuthServer(resources=[RESOURCE]) as limited:
        registered = register(limited)["client_id"]
        answer = fetch("GET", authorization_url(limited, registered, pkce()[1], resource="https://other.example/mcp"))
        assert query_of(answer.headers["location"])["error"] == "invalid_target"
        assert fetch("GET", authorization_url(limited, registered, pkce()[1])).status == 200


def test_denying_returns_access_denied_and_a_consent_page_answers_once(auth: SandboxAuthServer, client_id: str) -> None:
    url = authorization_url(auth, client_id, pkce()[1], state="deny-me")
    back = query_of(consent(url, approve=False))
    assert back == {"error": "access_denied", "state": "deny-me", "iss": auth.issuer}

    page = fetch("GET", url).text
    request_id = re.search(r'name="request" value="([^"]+)"', page)
    assert request_id
    form = {"request": request_id.group(1), "member": "A", "decision": "approve"}
    assert fetch("POST", auth.authorization_endpoint, form=form).status == 303
    again = fetch("POST", auth.authorization_endpoint, form=form)
    assert again.status == 400 and "already answered" in again.text
    unknown_member = fetch("GET", url).text
    request_id = re.search(r'name="request" value="([^"]+)"', unknown_member)
    assert request_id
    refused = fetch("POST", auth.authorization_endpoint, form={**form, "request": request_id.group(1), "member": "C"})
    assert refused.status == 400 and "member must be one of A, B" in refused.text


# --- the token endpoint --------------------------------------------------------------------------


def test_a_wrong_or_missing_code_verifier_is_refused(auth: SandboxAuthServer, client_id: str) -> None:
    signed = sign_in(auth, client_id)
    assert "code_verifier" in oauth_error(redeem(auth, signed, code_verifier=pkce()[0]), 400, "invalid_grant")
    # The code was spent by that attempt: a verifier that matches comes too late.
    oauth_error(redeem(auth, signed), 400, "invalid_grant")
    oauth_error(redeem(auth, SignIn(client_id, sign_in(auth, client_id).code, "")), 400, "invalid_request")


def test_a_plain_challenge_sent_as_s256_does_not_redeem_with_its_verifier(
    auth: SandboxAuthServer, client_id: str
) -> None:
    # The plain method's challenge is the verifier itself: labelled S256, it still needs S256 to hold.
    verifier = pkce()[0][:43]
    assert pkce_challenge(verifier) != verifier
    code = query_of(consent(authorization_url(auth, client_id, verifier)))["code"]
    oauth_error(redeem(auth, SignIn(client_id, code, verifier)), 400, "invalid_grant")


def test_the_resource_must_be_the_one_authorized(auth: SandboxAuthServer, client_id: str) -> None:
    signed = sign_in(auth, client_id)
    description = oauth_error(redeem(auth, signed, resource="https://other.example/mcp"), 400, "invalid_target")
    assert RESOURCE in description
    signed = sign_in(auth, client_id)
    granted = redeem(auth, signed, resource="").json()  # RFC 8707: naming it again is optional
    assert verified(auth, granted["access_token"])[1]["aud"] == RESOURCE
    oauth_error(
        refresh(auth, client_id, granted["refresh_token"], resource="https://other.example/mcp"), 400, "invalid_target"
    )


def test_a_code_is_bound_to_its_client_and_redirect_uri_and_used_once(auth: SandboxAuthServer, client_id: str) -> None:
    other = register(auth)["client_id"]
    signed = sign_in(auth, client_id)
    oauth_error(redeem(auth, SignIn(other, signed.code, signed.verifier)), 400, "invalid_grant")
    signed = sign_in(auth, client_id)
    oauth_error(redeem(auth, signed, redirect_uri="http://127.0.0.1:53682/other"), 400, "invalid_grant")

    signed = sign_in(auth, client_id)
    first = redeem(auth, signed)
    assert first.status == 200
    # RFC 6749 §4.1.2: a code used twice revokes what was issued from it.
    assert "already used" in oauth_error(redeem(auth, signed), 400, "invalid_grant")
    assert next(item.family for item in auth.issued if item.value == signed.code) in auth.revoked_families
    oauth_error(refresh(auth, client_id, first.json()["refresh_token"]), 400, "invalid_grant")


def test_refresh_tokens_rotate_and_a_spent_one_revokes_its_whole_family(
    auth: SandboxAuthServer, gateway: SandboxGateway, client_id: str
) -> None:
    granted = redeem(auth, sign_in(auth, client_id)).json()
    first_refresh = granted["refresh_token"]
    renewed = refresh(auth, client_id, first_refresh)
    assert renewed.status == 200, renewed.body
    second = renewed.json()
    assert second["refresh_token"] != first_refresh and second["access_token"] != granted["access_token"]
    assert member_read(gateway, second["access_token"]).status == 200

    narrower = refresh(auth, client_id, second["refresh_token"], scope="read:wagers").json()
    assert narrower["scope"] == "read:wagers"
    assert verified(auth, narrower["access_token"])[1]["scope"] == "read:wagers"
    wider = refresh(auth, client_id, narrower["refresh_token"], scope="read:wagers read:fees")
    oauth_error(wider, 400, "invalid_scope")

    # The first refresh token, presented again: someone else holds a copy. Every token of the
    # grant stops refreshing, the newest included.
    family = next(item.family for item in auth.issued if item.value == first_refresh)
    assert "already used" in oauth_error(refresh(auth, client_id, first_refresh), 400, "invalid_grant")
    assert family in auth.revoked_families
    assert "revoked" in oauth_error(refresh(auth, client_id, narrower["refresh_token"]), 400, "invalid_grant")


def test_token_endpoint_errors_are_rfc_6749_json(auth: SandboxAuthServer, client_id: str) -> None:
    token = auth.token_endpoint
    oauth_error(
        fetch("POST", token, form={"grant_type": "password", "client_id": client_id}), 400, "unsupported_grant_type"
    )
    oauth_error(fetch("POST", token, form={"grant_type": "authorization_code"}), 401, "invalid_client")
    oauth_error(
        fetch("POST", token, form={"grant_type": "refresh_token", "client_id": "nobody"}), 401, "invalid_client"
    )
    oauth_error(fetch("POST", token, form={"client_id": client_id}), 400, "invalid_request")
    oauth_error(fetch("POST", token, body={"grant_type": "authorization_code"}), 400, "invalid_request")
    oauth_error(
        fetch("POST", token, form={"grant_type": "authorization_code", "client_id": client_id, "code": "made-up"}),
        400,
        "invalid_grant",
    )
    public_with_secret = {
        "grant_type": "refresh_token",
        "client_id": client_id,
        "client_secret": "s",
        "refresh_token": "r",
    }
    oauth_error(fetch("POST", token, form=public_with_secret), 401, "invalid_client")


# --- the gateway ---------------------------------------------------------------------------------


def tampered(token: str, **claims: Any) -> str:
    head, body, signature = token.split(".")
    changed = {**json.loads(b64url_decode(body)), **claims}
    return f"{head}.{b64url(json.dumps(changed).encode())}.{signature}"


def test_the_gateway_refuses_a_tampered_expired_or_foreign_token_and_keeps_its_fw1_tokens(
    auth: SandboxAuthServer, gateway: SandboxGateway
) -> None:
    good = auth.mint_access_token(RESOURCE)
    assert member_read(gateway, good).status == 200
    head, body, signature = good.split(".")

    def refused(token: str) -> str:
        answer = member_read(gateway, token)
        assert answer.status == 401, answer.body
        assert answer.headers["www-authenticate"].startswith("Bearer")
        message: str = answer.json()["message"]
        return message

    assert "signature" in refused(tampered(good, sub=ACCOUNT_B))
    assert "signature" in refused(tampered(good, scope="read:wagers assistant:chat"))
    flipped = b64url_decode(signature)
    assert "signature" in refused(f"{head}.{body}.{b64url(bytes([flipped[0] ^ 1]) + flipped[1:])}")
    assert "signature" in refused(f"{head}.{body}.{b64url(b'')}")
    none = b64url(json.dumps({"alg": "none", "typ": "at+jwt", "kid": auth.kid}).encode())
    assert "RS256" in refused(f"{none}.{body}.")
    plain = b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": auth.kid}).encode())
    assert "at+jwt" in refused(f"{plain}.{body}.{signature}")
    unknown = b64url(json.dumps({"alg": "RS256", "typ": "at+jwt", "kid": "no-such-key"}).encode())
    assert "kid" in refused(f"{unknown}.{body}.{signature}")

    expired = auth.mint_access_token(RESOURCE, issued_at=time.time() - 3600)
    assert "expired at" in refused(expired)
    stranger = auth.mint_access_token(RESOURCE, subject="0x0000000000000000000000000000000000000bad")
    assert "not a member" in refused(stranger)
    with SandboxAuthServer() as untrusted:
        assert refused(untrusted.mint_access_token(RESOURCE)) == "the token is unknown or revoked"

    # The fw1. door is as it was, beside the trusted issuer.
    assert member_read(gateway, TOKEN_MEMBER_A).status == 200
    assert "expired" in refused(TOKEN_EXPIRED)
    assert refused("fw1.not-a-token") == "the token is unknown or revoked"


def test_the_gateway_answers_403_for_a_scope_the_token_lacks(auth: SandboxAuthServer, gateway: SandboxGateway) -> None:
    narrow = auth.mint_access_token(RESOURCE, scopes=["read:profile"])
    assert member_read(gateway, narrow, "/v1/member/me").status == 200
    answer = member_read(gateway, narrow)
    assert answer.status == 403 and answer.json()["scope"] == "read:wagers"


def test_a_gateway_given_audiences_refuses_a_token_for_another() -> None:
    with SandboxAuthServer() as issuer, SandboxGateway() as strict:
        strict.trust_issuer(issuer.issuer, audiences=[RESOURCE])
        assert member_read(strict, issuer.mint_access_token(RESOURCE)).status == 200
        answer = member_read(strict, issuer.mint_access_token("https://other.example/mcp"))
        assert answer.status == 401 and "another audience" in answer.json()["message"]


def test_rotated_keys_verify_through_the_overlap_then_leave_the_key_set() -> None:
    now = [1_900_000_000.0]
    with SandboxAuthServer(clock=lambda: now[0], access_token_ttl=10**9) as issuer, SandboxGateway() as gw:
        gw.trust_issuer(issuer.issuer)
        old_kid = issuer.kid
        old = issuer.mint_access_token(RESOURCE)
        assert member_read(gw, old).status == 200
        new_kid = issuer.rotate_keys(overlap=60)
        assert new_kid != old_kid == verified(issuer, old)[0]["kid"]
        assert [k["kid"] for k in fetch("GET", issuer.jwks_uri).json()["keys"]] == [new_kid, old_kid]
        new = issuer.mint_access_token(RESOURCE)
        assert verified(issuer, new)[0]["kid"] == new_kid
        # The gateway had only the old key: the new kid makes it read the set again.
        assert member_read(gw, new).status == 200
        assert member_read(gw, old).status == 200
        now[0] += 61
        assert [k["kid"] for k in fetch("GET", issuer.jwks_uri).json()["keys"]] == [new_kid]
        with pytest.raises(ValueError):
            issuer.retire_key(new_kid)
        third = issuer.rotate_keys()
        issuer.retire_key(new_kid)
        assert [k["kid"] for k in issuer.jwks()["keys"]] == [third]


# --- the command lines -------------------------------------------------------------------------


def read_until(process: subprocess.Popen[bytes], marker: bytes) -> str:
    assert process.stdout is not None
    output = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + TIMEOUT * 2
        while marker not in output:
            assert selector.select(deadline - time.monotonic()), f"no banner: {output!r}"
            chunk = os.read(process.stdout.fileno(), 4096)
            assert chunk, f"exited early: {output!r}"
            output += chunk
    return output.decode()


def spawn(module: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@SIGNAL_STOP
def test_both_command_lines_sign_a_member_in_and_exit_0_on_sigterm() -> None:
    processes = [spawn("tests.sandbox_auth", "--port", "0")]
    auth_process = processes[0]
    try:
        banner = read_until(auth_process, b"rotated on every use")
        match = re.match(r"sandbox authorization server on (http://127\.0\.0\.1:\d+)\n", banner)
        assert match, banner
        issuer = match.group(1)
        gateway_process = spawn("tests.sandbox_gateway", "--port", "0", "--trust-issuer", issuer)
        processes.append(gateway_process)
        banner = read_until(gateway_process, TOKEN_EXPIRED.encode())
        assert f"trusts the access tokens of {issuer}" in banner
        gateway_url = re.match(r"sandbox gateway on (http://127\.0\.0\.1:\d+)\n", banner)
        assert gateway_url, banner

        metadata = fetch("GET", issuer + "/.well-known/oauth-authorization-server").json()
        client_id = fetch(
            "POST",
            metadata["registration_endpoint"],
            body={"redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none"},
        ).json()["client_id"]
        verifier, challenge = pkce()
        url = (
            metadata["authorization_endpoint"]
            + "?"
            + urlencode(
                {
                    "response_type": "code",
                    "client_id": client_id,
                    "redirect_uri": CALLBACK,
                    "code_challenge": challenge,
                    "code_challenge_method": "S256",
                    "resource": RESOURCE,
                    "scope": "read:wagers",
                }
            )
        )
        code = query_of(consent(url, "B"))["code"]
        granted = fetch(
            "POST",
            metadata["token_endpoint"],
            form={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": CALLBACK,
                "client_id": client_id,
                "code_verifier": verifier,
            },
        ).json()
        wagers = fetch(
            "GET",
            gateway_url.group(1) + "/v1/member/wagers",
            headers={"Authorization": f"Bearer {granted['access_token']}"},
        )
        assert wagers.status == 200 and wagers.json()["chains"][0]["wagers"][0]["id"] == "w-b-1"
    finally:
        for process in processes:
            process.terminate()
        codes = [process.wait(TIMEOUT) for process in processes]
        for process in processes:
            assert process.stdout is not None and process.stderr is not None
            process.stdout.close()
            process.stderr.close()
    assert codes == [0] * len(processes)
