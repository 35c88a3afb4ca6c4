"""The node-oidc-provider harness (tests/oidc/): a real third-party authorization server, signed in to headlessly.

Issue 60's OAuth tests stand on it: what it serves, the RFC 9068 JWT access tokens it issues for
an RFC 8707 resource (RS256 and ES256, verified against its JWKS), and what it refuses (no PKCE, a
resource it does not serve). Node 22 and the pinned oidc-provider come from `make test-setup`; a
test here fails, saying so, when they are missing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from assistant_contract import ALL_SCOPES
from tests.conftest import NODE_TOOLS
from tests.oidc import harness
from tests.oidc.harness import Jwt, OAuthError
from tests.sandbox_gateway import ACCOUNT_A

pytestmark = NODE_TOOLS

RESOURCE = "http://127.0.0.1:8790/mcp"  # a resource identifier only: nothing listens there
SECOND = "http://127.0.0.1:8791/mcp"
ELSEWHERE = "https://elsewhere.example/mcp"
SCOPES = ALL_SCOPES  # the contract's, as the MCP server derives its scopes_supported from them
ASKED = ("read:wagers", "read:fees")


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with harness.running([RESOURCE, SECOND], SCOPES) as url:
        yield url


@pytest.fixture(scope="module")
def metadata(issuer: str) -> dict[str, Any]:
    return harness.discover(issuer)


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _rs256_stdlib(key: dict[str, Any], jwt: Jwt) -> bool:
    """RSASSA-PKCS1-v1_5 with SHA-256 (RFC 8017 §8.2.2), on integers: the check without any library."""
    n, e = int.from_bytes(_b64(key["n"]), "big"), int.from_bytes(_b64(key["e"]), "big")
    size = (n.bit_length() + 7) // 8
    if len(jwt.signature) != size:
        return False
    encoded = pow(int.from_bytes(jwt.signature, "big"), e, n).to_bytes(size, "big")
    digest_info = bytes.fromhex("3031300d060960864801650304020105000420") + hashlib.sha256(jwt.signing_input).digest()
    return encoded == b"\x00\x01" + b"\xff" * (size - 3 - len(digest_info)) + b"\x00" + digest_info


def _verifies(key: dict[str, Any], jwt: Jwt) -> bool:
    """What `cryptography` (OpenSSL; a dev dependency) says of the JWS signature under the JWK.

    Without `cryptography` (a .venv made before it joined the dev tools), an RSA key is checked on
    the standard library alone; an EC key then fails the test, saying how to install it.
    """
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils
    except ImportError as error:
        if key["kty"] == "RSA":
            return _rs256_stdlib(key, jwt)
        raise AssertionError(f"`cryptography` is missing ({error}): `make test-setup` installs the dev tools") from None
    try:
        if key["kty"] == "RSA":
            numbers = rsa.RSAPublicNumbers(int.from_bytes(_b64(key["e"]), "big"), int.from_bytes(_b64(key["n"]), "big"))
            numbers.public_key().verify(jwt.signature, jwt.signing_input, padding.PKCS1v15(), hashes.SHA256())
        else:
            x, y = (int.from_bytes(_b64(key[c]), "big") for c in ("x", "y"))
            public = ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
            r, s = int.from_bytes(jwt.signature[:32], "big"), int.from_bytes(jwt.signature[32:], "big")
            public.verify(utils.encode_dss_signature(r, s), jwt.signing_input, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def _key_for(metadata: dict[str, Any], jwt: Jwt) -> dict[str, Any]:
    keys = {key["kid"]: key for key in harness.jwks(metadata)}
    assert jwt.header["kid"] in keys, f"kid {jwt.header['kid']} is not in the JWKS ({sorted(keys)})"
    return keys[jwt.header["kid"]]


def _tampered(jwt: Jwt) -> Jwt:
    return Jwt(jwt.header, jwt.claims, jwt.signing_input[:-1] + b"A", jwt.signature)


def _assert_access_token(jwt: Jwt, *, issuer: str, client_id: str) -> None:
    assert jwt.header["typ"] == "at+jwt"
    claims = jwt.claims
    assert claims["iss"] == issuer
    assert claims["aud"] == RESOURCE, "the audience is exactly the resource asked for, one string"
    assert set(claims["scope"].split()) == set(ASKED)
    assert claims["sub"] == ACCOUNT_A
    assert claims["client_id"] == client_id
    assert claims["exp"] - claims["iat"] == 600
    assert abs(claims["iat"] - time.time()) < 60
    assert claims["jti"]


def test_discovery_names_the_endpoints_of_the_flow(issuer: str, metadata: dict[str, Any]) -> None:
    for name in ("authorization_endpoint", "token_endpoint", "registration_endpoint", "jwks_uri"):
        assert metadata[name].startswith(f"{issuer}/"), f"{name}: {metadata.get(name)}"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["response_types_supported"] == ["code"]
    assert "none" in metadata["token_endpoint_auth_methods_supported"]
    assert {"authorization_code", "refresh_token"} <= set(metadata["grant_types_supported"])
    assert metadata["authorization_response_iss_parameter_supported"] is True
    # OpenID Connect discovery (the other document a client may read) says the same.
    status, _, body = harness.send(harness.browser(), f"{issuer}/.well-known/openid-configuration")
    assert status == 200 and json.loads(body) == metadata


def test_the_jwks_holds_an_rsa_and_a_p256_key_and_no_private_part(metadata: dict[str, Any]) -> None:
    keys = harness.jwks(metadata)
    assert sorted((key["kty"], key["alg"]) for key in keys) == [("EC", "ES256"), ("RSA", "RS256")]
    for key in keys:
        assert not {"d", "p", "q", "dp", "dq", "qi"} & set(key), f"a private part is served: {sorted(key)}"


def test_a_headless_sign_in_yields_an_rs256_jwt_for_the_resource(issuer: str, metadata: dict[str, Any]) -> None:
    tokens = harness.sign_in(issuer, RESOURCE, ASKED)
    assert tokens.token_type == "Bearer" and tokens.expires_in == 600
    assert set(tokens.scope.split()) == set(ASKED)
    jwt = harness.decode_jwt(tokens.access_token)
    assert jwt.header["alg"] == "RS256"
    _assert_access_token(jwt, issuer=issuer, client_id=tokens.client_id)
    key = _key_for(metadata, jwt)
    assert key["kty"] == "RSA"
    assert _rs256_stdlib(key, jwt) and _verifies(key, jwt)
    assert not _rs256_stdlib(key, _tampered(jwt)) and not _verifies(key, _tampered(jwt))
    assert harness.access_token(issuer, RESOURCE, ASKED) != tokens.access_token


def test_refresh_rotates_the_refresh_token_and_keeps_the_audience(issuer: str, metadata: dict[str, Any]) -> None:
    tokens = harness.sign_in(issuer, RESOURCE, ASKED)
    assert tokens.refresh_token, "a client registered with the refresh_token grant gets one, offline_access or not"
    renewed = harness.refresh(metadata, tokens, resource=RESOURCE)
    assert renewed.refresh_token and renewed.refresh_token != tokens.refresh_token
    jwt = harness.decode_jwt(renewed.access_token)
    _assert_access_token(jwt, issuer=issuer, client_id=tokens.client_id)
    with pytest.raises(OAuthError) as refused:
        harness.refresh(metadata, tokens, resource=RESOURCE)  # the rotated-out one
    assert refused.value.error == "invalid_grant"


def test_es256_tokens_from_the_second_key() -> None:
    with harness.running([RESOURCE], SCOPES, alg="ES256") as issuer:
        metadata = harness.discover(issuer)
        tokens = harness.sign_in(issuer, RESOURCE, ASKED)
        jwt = harness.decode_jwt(tokens.access_token)
        assert jwt.header["alg"] == "ES256" and len(jwt.signature) == 64
        _assert_access_token(jwt, issuer=issuer, client_id=tokens.client_id)
        key = _key_for(metadata, jwt)
        assert key["kty"] == "EC" and key["crv"] == "P-256"
        assert _verifies(key, jwt) and not _verifies(key, _tampered(jwt))


def _authorize(metadata: dict[str, Any], issuer: str, **changes: Any) -> str:
    """A fresh client's authorization request, with `changes`, through the consent: the redirect back."""
    client_id = harness.register(metadata)
    request: dict[str, Any] = {"resource": RESOURCE, "scopes": ASKED, "challenge": harness.pkce()[1], "state": "s1"}
    return harness.approve(harness.authorization_url(metadata, client_id, **(request | changes)))


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"challenge": None}, "invalid_request"),  # no PKCE
        ({"challenge": "x" * 43, "method": "plain"}, "invalid_request"),  # PKCE, but not S256
        ({"resource": ELSEWHERE}, "invalid_target"),  # a resource it does not serve
        ({"resource": RESOURCE + "/"}, "invalid_target"),  # nor one spelled otherwise: matched exactly
    ],
    ids=["no-pkce", "plain-pkce", "other-resource", "resource-with-slash"],
)
def test_the_authorization_endpoint_refuses(
    issuer: str, metadata: dict[str, Any], changes: dict[str, Any], error: str
) -> None:
    with pytest.raises(OAuthError) as refused:
        harness.code_from(_authorize(metadata, issuer, **changes), state="s1", issuer=issuer)
    assert refused.value.error == error, refused.value


@pytest.mark.parametrize(
    ("verifier", "resource", "error"),
    [(False, RESOURCE, "invalid_grant"), (True, SECOND, "invalid_target")],
    ids=["no-verifier", "another-resource"],
)
def test_the_token_endpoint_refuses(
    issuer: str, metadata: dict[str, Any], verifier: bool, resource: str, error: str
) -> None:
    client_id = harness.register(metadata)
    good, challenge = harness.pkce()
    url = harness.authorization_url(
        metadata, client_id, resource=RESOURCE, scopes=ASKED, challenge=challenge, state="s2"
    )
    code = harness.code_from(harness.approve(url), state="s2", issuer=issuer)
    with pytest.raises(OAuthError) as refused:
        harness.exchange(metadata, client_id, code, good if verifier else None, resource=resource)
    assert refused.value.error == error, refused.value


def test_one_press_of_the_consent_pages_button_signs_in_and_grants(issuer: str, metadata: dict[str, Any]) -> None:
    client_id = harness.register(metadata, client_name="A <b>client</b>")
    state = "s3"
    url = harness.authorization_url(
        metadata, client_id, resource=RESOURCE, scopes=ASKED, challenge=harness.pkce()[1], state=state
    )
    browser = harness.browser()
    status, headers, _ = harness.send(browser, url)
    assert status == 303 and "/interaction/" in headers["Location"]
    page_url = urllib.parse.urljoin(url, headers["Location"])
    status, headers, body = harness.send(browser, page_url)
    page = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert page.count("<button") == 1 and page.count("<form") == 1
    assert "A &#60;b&#62;client&#60;/b&#62;" in page, "the client's name is escaped"
    for word in (RESOURCE, ACCOUNT_A, *ASKED):
        assert f"<code>{word}</code>" in page
    # The button, as a browser presses it: the provider resumes the request and redirects with a code.
    status, headers, _ = harness.send(browser, page_url, b"")
    assert status == 303 and headers["Location"].startswith(f"{issuer}/auth/")
    status, headers, _ = harness.send(browser, headers["Location"])
    assert status == 303 and headers["Location"].startswith(f"{harness.REDIRECT_URI}?")
    assert harness.code_from(headers["Location"], state=state, issuer=issuer)


def test_a_client_may_register_the_resources_scopes(issuer: str, metadata: dict[str, Any]) -> None:
    client_id = harness.register(metadata, scope=" ".join(ASKED))
    assert set(metadata["scopes_supported"]) == {"openid", "offline_access", *SCOPES}
    verifier, challenge = harness.pkce()
    url = harness.authorization_url(
        metadata, client_id, resource=RESOURCE, scopes=ASKED, challenge=challenge, state="s4"
    )
    code = harness.code_from(harness.approve(url), state="s4", issuer=issuer)
    tokens = harness.exchange(metadata, client_id, code, verifier, resource=RESOURCE)
    _assert_access_token(harness.decode_jwt(tokens.access_token), issuer=issuer, client_id=client_id)
    with pytest.raises(OAuthError) as refused:
        harness.register(metadata, scope="read:wagers write:everything")
    assert refused.value.error == "invalid_client_metadata"


def test_missing_tools_fail_saying_what_installs_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    assert harness.missing() is None
    monkeypatch.setattr(harness, "MODULES", tmp_path)
    assert "`make test-setup` installs it" in (harness.missing() or "")
    monkeypatch.setattr(harness, "NODE", tmp_path / "node")
    problem = harness.missing() or ""
    assert "Node 22" in problem and "`make test-setup`" in problem
    with pytest.raises(AssertionError, match="make test-setup"), harness.running([RESOURCE], SCOPES):
        pass


def test_a_browser_client_may_register_and_redeem_from_its_own_origin(metadata: dict[str, Any]) -> None:
    origin = "http://localhost:6274"  # the MCP Inspector's, whose OAuth flow runs in its page
    browser = harness.browser()
    preflight = urllib.request.Request(
        metadata["registration_endpoint"],
        method="OPTIONS",
        headers={"Origin": origin, "Access-Control-Request-Method": "POST"},
    )
    with browser.open(preflight, timeout=harness.HTTP_WAIT) as answer:
        assert answer.status == 204 and answer.headers["Access-Control-Allow-Origin"] == origin
    client_id = harness.register(metadata, f"{origin}/oauth/callback")
    form = {"grant_type": "authorization_code", "code": "unknown", "client_id": client_id, "code_verifier": "v" * 43}
    for sender, allowed in ((origin, origin), ("http://elsewhere.example", None)):
        data = urllib.parse.urlencode(form).encode()
        status, headers, _ = harness.send(browser, metadata["token_endpoint"], data, {"Origin": sender})
        assert status == 400 and headers["Access-Control-Allow-Origin"] == allowed, sender
