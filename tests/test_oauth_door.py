"""The hosted door in OAuth mode (issue 60): where to sign in, the challenge, every token checked first.

A real server in OAuth mode, the sandbox authorization server (tests/sandbox_auth.py) and the
sandbox gateway that trusts it, all on 127.0.0.1:0. A sign-in is a whole flow (registration,
PKCE, consent, token) done as a client does it; the refused tokens are made with the sandbox's
own key or a key of the test's.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import hmac
import http.client
import json
import logging
import secrets
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from mcp_server.ops import listener as listening
from mcp_server.ops.metrics import ServerMetrics
from mcp_server.setup.config import Config, OAuth
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.door import Door
from mcp_server.transports.http.server import McpHTTPServer
from mcp_server.wire.versions import META_CAPABILITIES, META_VERSION
from tests.conftest import NODE_TOOLS
from tests.mcp_http import serving
from tests.oidc import harness as oidc
from tests.sandbox_auth import SandboxAuthServer, consent, pkce
from tests.sandbox_gateway import ACCOUNT_A, TOKEN_MEMBER_A, SandboxGateway
from tests.test_sdk_oauth import oauth_server

WAIT = 10.0
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@dataclass
class Door_:
    server: McpHTTPServer
    auth: SandboxAuthServer
    gateway: SandboxGateway
    public: str
    metadata_url: str
    logged: list[str]

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


class _Collected(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__()
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(self.format(record))


@contextmanager
def oauth_door(*, member_tokens: bool = False, metrics: bool = False) -> Iterator[Door_]:
    """A server in OAuth mode on 127.0.0.1:0 (GET /metrics on its port with `metrics`), its issuer and gateway."""
    sock = listening.listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    public = f"http://127.0.0.1:{port}/mcp"
    metadata_url = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"
    logged: list[str] = []
    handler = _Collected(logged)
    loggers = [logging.getLogger(name) for name in ("fairwins_mcp", "fairwins_mcp.access", "fairwins_mcp.http")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        with SandboxAuthServer(resources=[public]) as auth, SandboxGateway() as gateway:
            gateway.trust_issuer(auth.issuer, audiences=[public])
            oauth = OAuth(public, auth.issuer, public)
            dispatcher = build_dispatcher(Config(api_url=gateway.url, timeout=5.0, oauth=oauth))
            scopes = dispatcher.member_scopes()
            door = Door(public, metadata_url, auth.issuer, scopes, timeout=5.0, member_tokens=member_tokens)
            registry = ServerMetrics((t.name for t in dispatcher.catalog.tools), "test") if metrics else None
            policy = gate.Policy(
                loopback_bind=True, max_body=1024 * 1024, resource_metadata=door.metadata_paths, metrics=metrics
            )
            with serving(dispatcher, policy, listener=sock, door=door, metrics=registry) as server:
                yield Door_(server, auth, gateway, public, metadata_url, logged)
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


@pytest.fixture(scope="module")
def door() -> Iterator[Door_]:
    with oauth_door() as made:
        yield made


def call(
    port: int, name: str, token: str | None = None, *, modern: bool = False, **more: str
) -> tuple[int, dict[str, str], Any]:
    params: dict[str, Any] = {"name": name, "arguments": {"chainId": 137} if name in ("get_wagers", "get_fees") else {}}
    headers = dict(JSON_HEADERS)
    if modern:
        params["_meta"] = {META_VERSION: "2026-07-28", META_CAPABILITIES: {}}
        headers.update({"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name})
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    headers.update(more)
    return post(port, {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}, headers)


def post(port: int, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request("POST", "/mcp", body=json.dumps(body).encode(), headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, _answer(raw)
    finally:
        conn.close()


def _answer(raw: bytes) -> Any:
    text = raw.decode()
    if text.startswith("event:") or text.startswith("data:"):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return json.loads(text)


def get(door: Door_, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", door.port, timeout=WAIT)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def sign_in(door: Door_, scope: str = "read:wagers read:fees") -> str:
    """A whole authorization-code flow as an OAuth client runs it: registered, consented, exchanged."""
    redirect = "http://127.0.0.1:1/callback"
    registration = json.dumps(
        {"redirect_uris": [redirect], "token_endpoint_auth_method": "none", "client_name": "test client"}
    ).encode()
    request = urllib.request.Request(
        door.auth.registration_endpoint, registration, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=WAIT) as answer:
        client_id = json.load(answer)["client_id"]
    verifier, challenge = pkce()
    query = urllib.parse.urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": door.public,
            "scope": scope,
            "state": "s1",
        }
    )
    back = consent(f"{door.auth.authorization_endpoint}?{query}", "A")
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(back).query)["code"][0]
    form = urllib.parse.urlencode(
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": door.public,
        }
    ).encode()
    with urllib.request.urlopen(urllib.request.Request(door.auth.token_endpoint, form), timeout=WAIT) as answer:
        token: str = json.load(answer)["access_token"]
    return token


def forwarded(door: Door_, token: str) -> bool:
    """Whether any gateway request carried `token`, in whatever header."""
    return any(token in value for seen in door.gateway.seen for _, value in seen.headers)


# ---- where to sign in ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])
def test_the_resource_metadata_is_at_both_paths_and_any_page_may_read_it(door: Door_, path: str) -> None:
    status, headers, body = get(door, path, Origin="https://claude.ai")
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert headers["access-control-allow-origin"] == "*"
    assert json.loads(body) == {
        "resource": door.public,
        "authorization_servers": [door.auth.issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["build:intents", "read:fees", "read:membership", "read:profile", "read:wagers"],
        "resource_name": "FairWins",
    }


def test_each_tool_says_whether_it_needs_a_sign_in_for_chatgpt(door: Door_) -> None:
    # OpenAI Apps' per-tool securitySchemes, in _meta (which every other client passes by).
    status, _, answer = post(door.port, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, JSON_HEADERS)
    assert status == 200
    schemes = {t["name"]: t["_meta"]["securitySchemes"] for t in answer["result"]["tools"]}
    assert schemes["get_wagers"] == [{"type": "oauth2", "scopes": ["read:wagers"]}]
    assert schemes["build_intent"] == [{"type": "oauth2", "scopes": ["build:intents"]}]
    assert schemes["get_perps_pairs"] == [{"type": "noauth"}]
    plain = build_dispatcher(Config(api_url=door.gateway.url))
    assert all("_meta" not in t for t in plain._tool_list)  # without OAuth mode: nothing to sign in to


# ---- lazy sign-in ----------------------------------------------------------------------------------


def test_without_a_token_the_lists_and_public_tools_answer(door: Door_) -> None:
    status, _, answer = post(door.port, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, JSON_HEADERS)
    assert status == 200 and {t["name"] for t in answer["result"]["tools"]} >= {"get_wagers", "get_gateway_status"}
    status, _, answer = call(door.port, "get_gateway_status")
    assert status == 200 and answer["result"].get("isError") is not True


@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
def test_a_member_call_without_a_token_is_challenged_before_the_gateway(door: Door_, modern: bool) -> None:
    before = len(door.gateway.seen)
    status, headers, answer = call(door.port, "get_wagers", modern=modern)
    assert status == 401
    assert headers["www-authenticate"] == f'Bearer resource_metadata="{door.metadata_url}", scope="read:wagers"'
    assert answer["id"] == 7 and "sign in to FairWins" in answer["error"]["message"]
    assert len(door.gateway.seen) == before  # nothing reached the gateway


# ---- a member signed in -----------------------------------------------------------------------------


def test_a_signed_in_member_reads_their_wagers_and_the_gateway_saw_exactly_the_token_issued(door: Door_) -> None:
    token = sign_in(door)
    assert token in door.auth.access_tokens()
    status, _, answer = call(door.port, "get_wagers", token)
    assert status == 200, answer
    result = answer["result"]
    assert result.get("isError") is not True, result
    seen = [s for s in door.gateway.seen if s.path == "/v1/member/wagers"][-1]
    assert seen.header_values("Authorization") == [f"Bearer {token}"]
    assert token not in "\n".join(door.logged)  # nor in any log line or record
    assert token not in json.dumps(answer)


def test_a_token_without_the_calls_scope_gets_403_naming_it(door: Door_) -> None:
    token = door.auth.mint_access_token(door.public, scopes=["read:fees"])
    status, headers, answer = call(door.port, "get_wagers", token)
    assert status == 403
    assert headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", resource_metadata="{door.metadata_url}", scope="read:wagers"'
    )
    assert "read:wagers missing" in answer["error"]["message"]
    assert not forwarded(door, token)


# ---- refused, never forwarded ------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    head, payload, _ = token.split(".")
    pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
    return json.loads(base64.urlsafe_b64decode(pad(head))), json.loads(base64.urlsafe_b64decode(pad(payload)))


def _signed(door: Door_, header: dict[str, Any], claims: dict[str, Any]) -> str:
    """A token signed with the sandbox's own current key: only what the test changed is wrong."""
    key = door.auth._keys[-1].private
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}".encode()
    return f"{signing_input.decode()}.{_b64(key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256()))}"


def _refused_tokens(door: Door_) -> dict[str, str]:
    good = door.auth.mint_access_token(door.public)
    header, claims = _parts(good)
    other_key = SandboxAuthServer()  # never started: a key of another authorization server
    try:
        foreign = other_key.mint_access_token(door.public)
    finally:
        other_key._server.server_close()
    jwk = door.auth.jwks()["keys"][-1]
    hs_input = f"{_b64(json.dumps({**header, 'alg': 'HS256'}).encode())}.{good.split('.')[1]}".encode()
    hs_key = json.dumps(jwk).encode()
    unsigned_input = f"{_b64(json.dumps({'alg': 'none', 'typ': 'at+jwt'}).encode())}.{good.split('.')[1]}"
    tampered_claims = {**claims, "sub": "0x000000000000000000000000000000000000b0b0"}
    return {
        "another audience": door.auth.mint_access_token("http://127.0.0.1:1/mcp"),
        "expired": door.auth.mint_access_token(door.public, issued_at=1_000_000, lifetime=300),
        "another issuer": _signed(door, header, {**claims, "iss": "http://127.0.0.1:2"}),
        "another issuer's key": foreign,
        "alg none": unsigned_input + ".",
        "HS256 with the public key": f"{hs_input.decode()}.{_b64(hmac.new(hs_key, hs_input, hashlib.sha256).digest())}",
        "unknown kid": _signed(door, {**header, "kid": "no-such-key"}, claims),
        "tampered payload": f"{good.split('.')[0]}.{_b64(json.dumps(tampered_claims).encode())}.{good.split('.')[2]}",
        "a raw fw1 token": TOKEN_MEMBER_A,
        "not a token at all": secrets.token_urlsafe(24),
    }


def test_every_token_not_issued_for_this_server_is_refused_401_and_never_forwarded(door: Door_) -> None:
    for why, token in _refused_tokens(door).items():
        for name in ("get_wagers", "get_gateway_status"):  # a token is judged whatever the call needs
            status, headers, answer = call(door.port, name, token)
            assert status == 401, (why, name, answer)
            assert headers["www-authenticate"].startswith('Bearer error="invalid_token", resource_metadata='), why
            assert "Nothing was sent to the gateway" in answer["error"]["message"]
        assert not forwarded(door, token), why
        assert token not in "\n".join(door.logged), why


def test_a_paid_call_without_a_token_keeps_its_x402_path(door: Door_) -> None:
    # Neither token nor payment is the sign-in challenge (above); a payment alone is carried as today.
    status, headers, _ = call(door.port, "get_wagers", **{"X-PAYMENT": "e30"})
    assert status != 401 and "www-authenticate" not in headers


def test_a_member_not_of_this_sandbox_is_its_gateways_to_refuse(door: Door_) -> None:
    # The door judges the token; whose account it names is the gateway's to know.
    token = door.auth.mint_access_token(door.public, subject=ACCOUNT_A)
    assert call(door.port, "get_wagers", token)[0] == 200


# ---- the real process, against a third-party authorization server -------------------------------------


@NODE_TOOLS
def test_the_real_process_takes_node_oidc_providers_tokens_unchanged() -> None:
    with oauth_server("node-oidc-provider", "test_oauth_door") as setup:
        port = urllib.parse.urlsplit(setup.public).port
        assert port is not None
        status, headers, _ = call(port, "get_wagers")
        assert status == 401
        assert headers["www-authenticate"] == f'Bearer resource_metadata="{setup.metadata_url}", scope="read:wagers"'
        token = oidc.access_token(setup.issuer, setup.public, ["read:wagers"])
        status, _, answer = call(port, "get_wagers", token)
        assert status == 200 and answer["result"].get("isError") is not True, answer
        seen = [s for s in setup.gateway.seen if s.path == "/v1/member/wagers"]
        assert [s.header_values("Authorization") for s in seen] == [[f"Bearer {token}"]]
    assert token not in "".join(setup.log)


def test_with_both_doors_a_members_fw1_token_goes_on_and_an_access_token_is_still_judged() -> None:
    with oauth_door(member_tokens=True) as door:
        status, _, answer = call(door.port, "get_wagers", TOKEN_MEMBER_A)
        assert status == 200 and answer["result"].get("isError") is not True, answer
        seen = [s for s in door.gateway.seen if s.path == "/v1/member/wagers"][-1]
        assert seen.header_values("Authorization") == [f"Bearer {TOKEN_MEMBER_A}"]
        forged = door.auth.mint_access_token("http://127.0.0.1:1/mcp")
        assert call(door.port, "get_wagers", forged)[0] == 401
        assert not forwarded(door, forged)


def test_an_authorization_server_out_of_reach_costs_a_503_naming_it_and_nothing_else() -> None:
    # The door's one outbound seam (upstream/issuer.py): its failure is the call's, owned, and
    # leaves nothing behind for the collector; the server goes on serving the public calls.
    with oauth_door() as door:
        token = door.auth.mint_access_token(door.public)
        door.auth.stop()
        for _ in range(3):  # the first fetch fails; the next calls wait out the refetch bound
            status, headers, answer = call(door.port, "get_wagers", token)
            assert status == 503 and "www-authenticate" not in headers
            assert f"The authorization server ({door.auth.issuer}) could not be asked" in answer["error"]["message"]
            assert call(door.port, "get_gateway_status")[0] == 200
        assert not forwarded(door, token)
        gc.collect()
        guard = door.server.guard
        assert guard is not None and guard.strays == 0 and guard.fatal is None
        assert token not in "\n".join(door.logged)


def test_an_access_token_the_gateway_refuses_tells_the_member_to_sign_in_again(door: Door_) -> None:
    # The door let it through (signed for this server, in time); the gateway knows no such member.
    # A member who signed in holds no fw1 token: the way on is the client's sign-in, not the app's page.
    token = door.auth.mint_access_token(door.public, subject="0x000000000000000000000000000000000000dead")
    status, _, answer = call(door.port, "get_wagers", token)
    assert status == 200 and answer["result"]["isError"] is True, answer
    text = answer["result"]["content"][0]["text"]
    assert "the gateway refused the access token (HTTP 401" in text and "signs in to FairWins again" in text, text
    assert "API access" not in text


def test_a_members_fw1_token_refused_at_both_doors_keeps_the_apps_way_to_a_new_one() -> None:
    with oauth_door(member_tokens=True) as door:
        status, _, answer = call(door.port, "get_wagers", "fw1.not-a-token-this-gateway-knows")
        assert status == 200 and answer["result"]["isError"] is True, answer
        text = answer["result"]["content"][0]["text"]
        assert "refused the member token" in text and "Tools > Assistant > API access" in text, text
