"""Access-token verdicts: each refusal the issue lists, the claims, the key set's rotation, the cache.

Tokens are minted here with `cryptography` (tests/test_jws.py's keys and signers) for an issuer
and a resource of the tests' own; time is a number handed in, so nothing sleeps. Property tests
(hypothesis) hold that no token, valid with one character changed, or any text at all, raises or
comes back with a reason outside the closed list, which is what keeps every part of a token out
of the reasons.
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import hmac
import json
import typing
from typing import Any, Final

import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import given
from hypothesis import strategies as st

from mcp_server.wire import access_tokens
from mcp_server.wire.access_tokens import (
    MAX_JWKS_BYTES,
    MAX_KEYS,
    MAX_TOKEN_BYTES,
    Invalid,
    KeySet,
    Policy,
    Valid,
    Validator,
    VerdictCache,
    judge,
)
from mcp_server.wire.jws import b64url_decode
from tests.test_jws import b64, ec_jwk, ec_pool, profile, rsa_jwk, rsa_pool, sign

ISSUER: Final = "https://auth.fairwins.example"
RESOURCE: Final = "https://mcp.fairwins.example/mcp"
NOW: Final = 1_800_000_000
POLICY: Final = Policy(ISSUER, RESOURCE)
REASONS: Final = frozenset(typing.get_args(access_tokens.Reason))


def claims(**changes: Any) -> dict[str, Any]:
    """An access token's claims as RFC 9068 §2.2 lists them, valid at NOW; a change of None drops one."""
    base: dict[str, Any] = {
        "iss": ISSUER,
        "aud": RESOURCE,
        "sub": "member-7",
        "client_id": "https://claude.ai/oauth/mcp-oauth-client-metadata",
        "iat": NOW - 10,
        "exp": NOW + 300,
        "jti": "a8f1c",
        "scope": "wagers:read markets:read",
    }
    base.update(changes)
    return {name: value for name, value in base.items() if value is not None}


def encode(value: Any) -> str:
    return b64(json.dumps(value, separators=(",", ":")).encode())


def mint(
    payload: dict[str, Any] | None = None,
    *,
    key: int = 0,
    alg: str = "RS256",
    kid: str | None = "rsa-0",
    typ: str | None = "at+jwt",
    header: dict[str, Any] | None = None,
) -> str:
    """A compact JWS signed by one of the test keys (RSA pool by index, or ES256 with the EC pool)."""
    head: dict[str, Any] = {"alg": alg}
    if typ is not None:
        head["typ"] = typ
    if kid is not None:
        head["kid"] = kid
    head.update(header or {})
    signing_input = f"{encode(head)}.{encode(claims() if payload is None else payload)}"
    private = ec_pool()[key] if alg == "ES256" else rsa_pool()[key]
    return f"{signing_input}.{b64(sign(private, alg, signing_input.encode()))}"


def jwks(*jwk: dict[str, Any]) -> bytes:
    return json.dumps({"keys": list(jwk)}).encode()


def standard_jwks() -> bytes:
    return jwks(
        rsa_jwk(rsa_pool()[0], kid="rsa-0"),
        rsa_jwk(rsa_pool()[1], alg="PS256", kid="ps-1"),
        ec_jwk(ec_pool()[0], kid="ec-0"),
    )


def key_set(document: bytes | None = None) -> KeySet:
    keys = KeySet()
    loaded = keys.load(standard_jwks() if document is None else document, NOW)
    assert loaded.refused is None
    return keys


def verdict(token: str, policy: Policy = POLICY, keys: KeySet | None = None, now: float = NOW) -> Valid | Invalid:
    result, _ = judge(token, policy, key_set() if keys is None else keys, now)
    return result


def reason(token: str, **kwargs: Any) -> str:
    result = verdict(token, **kwargs)
    assert isinstance(result, Invalid), result
    return result.reason


# ---- what is accepted ------------------------------------------------------------------------


@pytest.mark.parametrize(("alg", "key", "kid"), [("RS256", 0, "rsa-0"), ("PS256", 1, "ps-1"), ("ES256", 0, "ec-0")])
def test_a_token_signed_by_a_key_of_the_set_for_this_resource_is_valid(alg: str, key: int, kid: str) -> None:
    result = verdict(mint(alg=alg, key=key, kid=kid))
    assert result == Valid("member-7", frozenset({"wagers:read", "markets:read"}), NOW + 300, {})
    assert isinstance(result, Valid) and result.claims["client_id"].startswith("https://claude.ai/")
    assert result.missing(["wagers:read"]) == ()
    assert result.missing(["wagers:read", "intents:build", "x"]) == ("intents:build", "x")


@pytest.mark.parametrize("typ", ["at+jwt", "application/at+jwt", "AT+JWT", "Application/At+JWT", "JWT", "jwt"])
def test_access_token_types_and_plain_jwt_are_accepted(typ: str) -> None:
    assert isinstance(verdict(mint(typ=typ)), Valid)


@pytest.mark.parametrize("typ", [None, "", "JOSE", "dpop+jwt", "logout+jwt", "secevent+jwt", "at+jwt "])
def test_other_types_and_a_missing_one_are_refused(typ: str | None) -> None:
    assert reason(mint(typ=typ)) == "wrong_type"


def test_plain_jwt_can_be_refused_by_the_policy() -> None:
    strict = Policy(ISSUER, RESOURCE, plain_jwt=False)
    assert reason(mint(typ="JWT"), policy=strict) == "wrong_type"
    assert isinstance(verdict(mint(typ="at+jwt"), policy=strict), Valid)


def test_an_audience_list_holding_the_resource_is_accepted() -> None:
    assert isinstance(verdict(mint(claims(aud=["https://gateway.fairwins.example", RESOURCE]))), Valid)


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ({"scope": "a b  c"}, {"a", "b", "c"}),
        ({"scope": ""}, set()),
        ({"scope": None}, set()),
        ({"scope": None, "scp": ["a", "b"]}, {"a", "b"}),
        ({"scope": None, "scp": "a b"}, {"a", "b"}),  # Microsoft Entra's spelling
        ({"scope": "a", "scp": ["b"]}, {"a"}),  # RFC 9068's claim wins: never the union
    ],
)
def test_scopes_come_from_scope_or_else_scp(scope: dict[str, Any], expected: set[str]) -> None:
    result = verdict(mint(claims(**scope)))
    assert isinstance(result, Valid) and result.scopes == expected


def test_a_token_without_a_kid_is_verified_by_the_only_key_of_a_set_of_one() -> None:
    token = mint(kid=None)
    assert isinstance(verdict(token, keys=key_set(jwks(rsa_jwk(rsa_pool()[0])))), Valid)
    assert isinstance(verdict(token, keys=key_set(jwks(rsa_jwk(rsa_pool()[0], kid="rsa-0")))), Valid)
    assert reason(token) == "unknown_key"  # three keys: no guessing which


# ---- the refusals of issue 60 ----------------------------------------------------------------


def test_a_token_for_another_audience_is_refused() -> None:
    assert reason(mint(claims(aud="https://other.example/mcp"))) == "wrong_audience"
    assert reason(mint(claims(aud=["https://other.example/mcp"]))) == "wrong_audience"
    assert reason(mint(claims(aud=[]))) == "wrong_audience"
    assert reason(mint(claims(aud=None))) == "wrong_audience"
    assert reason(mint(claims(aud=RESOURCE + "/"))) == "wrong_audience"  # compared exactly
    assert reason(mint(claims(aud="https://mcp.fairwins.example"))) == "wrong_audience"
    assert reason(mint(claims(aud=7))) == "bad_claim"
    assert reason(mint(claims(aud=[RESOURCE, 7]))) == "bad_claim"


def test_an_expired_token_is_refused_after_the_skew() -> None:
    token = mint(claims(exp=NOW))
    assert isinstance(verdict(token, now=NOW - 1), Valid)
    assert isinstance(verdict(token, now=NOW + 59), Valid)
    assert reason(token, now=NOW + 60) == "expired"
    assert reason(token, policy=Policy(ISSUER, RESOURCE, skew=0), now=NOW) == "expired"


def test_a_token_from_another_issuer_is_refused() -> None:
    assert reason(mint(claims(iss="https://evil.example"))) == "wrong_issuer"
    assert reason(mint(claims(iss=ISSUER + "/"))) == "wrong_issuer"
    assert reason(mint(claims(iss=None))) == "wrong_issuer"
    assert reason(mint(claims(iss=[ISSUER]))) == "wrong_issuer"


def test_alg_none_with_an_empty_signature_is_refused() -> None:
    for alg in ("none", "None", "NONE"):
        token = f"{encode({'alg': alg, 'typ': 'at+jwt', 'kid': 'rsa-0'})}.{encode(claims())}."
        assert reason(token) == "alg_not_allowed"
    token = f"{encode({'alg': 'none', 'typ': 'at+jwt'})}.{encode(claims())}."
    assert reason(token, keys=key_set(jwks(rsa_jwk(rsa_pool()[0])))) == "alg_not_allowed"


def test_hs256_signed_with_the_public_key_is_refused() -> None:
    public = rsa_pool()[0].public_key()
    secrets = [
        public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
        public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.PKCS1),
        json.dumps(rsa_jwk(rsa_pool()[0], kid="rsa-0")).encode(),
        public.public_numbers().n.to_bytes(256, "big"),
    ]
    for secret in secrets:
        for alg, digest in (("HS256", hashlib.sha256), ("HS384", hashlib.sha384), ("HS512", hashlib.sha512)):
            signing_input = f"{encode({'alg': alg, 'typ': 'at+jwt', 'kid': 'rsa-0'})}.{encode(claims())}"
            mac = hmac.new(secret, signing_input.encode(), digest).digest()
            assert reason(f"{signing_input}.{b64(mac)}") == "alg_not_allowed"


def test_an_unknown_kid_is_refused() -> None:
    assert reason(mint(kid="rsa-9")) == "unknown_key"
    assert reason(mint(kid="")) == "unknown_key"
    assert reason(mint(), keys=KeySet()) == "unknown_key"  # nothing loaded yet


def test_a_tampered_payload_is_refused() -> None:
    header, _, signature = mint().split(".")
    for changed in (claims(scope="wagers:read intents:build"), claims(sub="member-8"), claims(exp=NOW + 10**6)):
        assert reason(f"{header}.{encode(changed)}.{signature}") == "bad_signature"


def test_a_tampered_header_or_signature_is_refused() -> None:
    header, payload, signature = mint().split(".")
    assert reason(f"{encode({'alg': 'RS256', 'typ': 'JWT', 'kid': 'rsa-0'})}.{payload}.{signature}") == "bad_signature"
    raw = b64url_decode(signature)
    assert raw is not None
    assert reason(f"{header}.{payload}.{b64(bytes([raw[0] ^ 1]) + raw[1:])}") == "bad_signature"
    assert reason(f"{header}.{payload}.{b64(raw[:-1])}") == "bad_signature"


def test_a_key_of_the_wrong_type_for_the_header_is_refused() -> None:
    # The kid names an RSA key; the header says ES256 (and the token is a good ES256 one).
    assert reason(mint(alg="ES256", kid="rsa-0")) == "alg_not_allowed"
    assert reason(mint(alg="RS256", kid="ec-0")) == "alg_not_allowed"
    assert reason(mint(alg="RS256", key=1, kid="ps-1")) == "alg_not_allowed"  # a PS256 key
    assert reason(mint(alg="PS256", key=0, kid="rsa-0")) == "alg_not_allowed"  # an RS256 key
    for alg in ("RS384", "ES384", "EdDSA", "HS256", "", 7, None, ["RS256"]):
        header = encode({"alg": alg, "typ": "at+jwt", "kid": "rsa-0"})
        assert reason(f"{header}.{encode(claims())}.{mint().split('.')[2]}") == "alg_not_allowed"


def test_a_kid_shared_by_two_keys_picks_the_one_of_the_headers_algorithm() -> None:
    # RFC 7517 §4.5 allows one kid for keys of different types meant as alternatives.
    keys = key_set(jwks(rsa_jwk(rsa_pool()[0], kid="k"), ec_jwk(ec_pool()[0], kid="k")))
    assert isinstance(verdict(mint(alg="RS256", kid="k"), keys=keys), Valid)
    assert isinstance(verdict(mint(alg="ES256", kid="k"), keys=keys), Valid)
    assert reason(mint(alg="PS256", key=0, kid="k"), keys=keys) == "alg_not_allowed"


# ---- the other claims ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nbf", "iat"])
def test_a_token_not_yet_valid_beyond_the_skew_is_refused(name: str) -> None:
    assert isinstance(verdict(mint(claims(**{name: NOW + 60}))), Valid)
    assert reason(mint(claims(**{name: NOW + 61}))) == "not_yet_valid"


@pytest.mark.parametrize(
    "changes",
    [
        {"exp": None},
        {"exp": "1800000300"},
        {"exp": True},
        {"exp": [NOW + 300]},
        {"exp": 10**30},
        {"nbf": "yesterday"},
        {"iat": None, "nbf": False},
        {"sub": None},
        {"sub": ""},
        {"sub": 7},
        {"scope": 7},
        {"scope": None, "scp": [1, 2]},
        {"scope": {"a": 1}},
    ],
)
def test_missing_or_mistyped_claims_are_refused(changes: dict[str, Any]) -> None:
    assert reason(mint(claims(**changes))) == "bad_claim"


def test_fractional_dates_are_read_as_numbers() -> None:
    result = verdict(mint(claims(exp=NOW + 0.5, iat=NOW - 0.5, nbf=NOW + 0.25)))
    assert isinstance(result, Valid) and result.expires_at == NOW + 0.5


# ---- malformed tokens ------------------------------------------------------------------------


def test_tokens_not_made_of_three_strict_base64url_json_objects_are_malformed() -> None:
    header, payload, signature = mint().split(".")
    raw_header = json.dumps({"alg": "RS256", "typ": "at+jwt", "kid": "rsa-0"}).encode()
    twice = b'{"alg":"RS256","alg":"RS256","typ":"at+jwt","kid":"rsa-0"}'
    marked = codecs.BOM_UTF8 + raw_header
    cases = [
        "",
        "abc",
        f"{header}.{payload}",
        f"{header}.{payload}.{signature}.",
        f"{header}.{payload}.{signature}.{signature}.{signature}",  # a JWE's five parts
        f"{header}=.{payload}.{signature}",
        f"{header}.{payload}.{signature}==",
        f"{header}.{payload}.{signature.replace('-', '+').replace('_', '/')}"
        if "-" in signature or "_" in signature
        else f"{header}.{payload}.+{signature[1:]}",
        f"{header}.{payload}.{signature[:-1]}",  # a length no base64 has, or spare bits set
        f" {header}.{payload}.{signature}",
        f"{header}.{payload}.{signature}\n",
        f"{header}.{payload}.{signature}é",
        f"{b64(b'not json')}.{payload}.{signature}",
        f"{b64(b'[1]')}.{payload}.{signature}",
        f"{b64(b'1')}.{payload}.{signature}",
        f"{b64(marked)}.{payload}.{signature}",  # a byte-order mark
        f"{b64(raw_header.decode().encode('utf-16'))}.{payload}.{signature}",
        f"{b64(twice)}.{payload}.{signature}",  # a name twice
        f"{encode({'alg': 'RS256', 'typ': 'at+jwt', 'kid': 7})}.{payload}.{signature}",
        f"{encode({'alg': 'RS256', 'typ': 'at+jwt', 'kid': 'rsa-0', 'crit': ['exp']})}.{payload}.{signature}",
    ]
    for token in cases:
        assert reason(token) == "malformed", token


def test_signed_payloads_that_are_not_json_objects_are_malformed() -> None:
    for payload in (b"[]", b'"sub"', b"not json", b'{"exp": NaN}', b'{"exp": 1e999}', b'{"sub": "\\ud800"}'):
        head = encode({"alg": "RS256", "typ": "at+jwt", "kid": "rsa-0"})
        signing_input = f"{head}.{b64(payload)}"
        token = f"{signing_input}.{b64(sign(rsa_pool()[0], 'RS256', signing_input.encode()))}"
        assert reason(token) == "malformed", payload
    head = encode({"alg": "RS256", "typ": "at+jwt", "kid": "rsa-0"})
    duplicated = b'{"iss":"%s","aud":"%s","sub":"a","sub":"b","exp":%d}' % (ISSUER.encode(), RESOURCE.encode(), NOW)
    signing_input = f"{head}.{b64(duplicated)}"
    token = f"{signing_input}.{b64(sign(rsa_pool()[0], 'RS256', signing_input.encode()))}"
    assert reason(token) == "malformed"


def test_an_oversized_token_is_refused_unread() -> None:
    token = mint(claims(padding="x" * MAX_TOKEN_BYTES))
    assert reason(token) == "oversized"
    # The longest token that fits, by its payload's padding: 4 characters of base64 for 3 octets.
    length = (MAX_TOKEN_BYTES - len(mint(claims(padding="")))) * 3 // 4
    while len(fits := mint(claims(padding="x" * length))) > MAX_TOKEN_BYTES:
        length -= 1
    assert len(fits) > MAX_TOKEN_BYTES - 4 and isinstance(verdict(fits), Valid)
    assert len(longer := mint(claims(padding="x" * (length + 3)))) > MAX_TOKEN_BYTES
    assert reason(longer) == "oversized"


def test_a_deeply_nested_header_is_malformed_not_an_exception() -> None:
    nested = b'{"a":' * 1500 + b"1" + b"}" * 1500
    assert reason(f"{b64(b'[' * 10000)}.{b64(b'{}')}.") == "malformed"
    assert reason(f"{b64(nested)}.{b64(b'{}')}.") == "malformed"


# ---- the key set -----------------------------------------------------------------------------


def test_a_rotated_key_set_verifies_the_new_kid_and_no_longer_the_old() -> None:
    keys = key_set(jwks(rsa_jwk(rsa_pool()[0], kid="2026-01")))
    old, new = mint(kid="2026-01"), mint(key=2, kid="2026-02")
    assert isinstance(verdict(old, keys=keys), Valid)
    assert reason(new, keys=keys) == "unknown_key"
    assert keys.claim_refetch(NOW)
    loaded = keys.load(jwks(rsa_jwk(rsa_pool()[2], kid="2026-02")), NOW)
    assert loaded.kids == ("2026-02",) and loaded.refused is None
    assert isinstance(verdict(new, keys=keys), Valid)
    assert reason(old, keys=keys) == "unknown_key"


def test_refetches_for_unknown_kids_are_allowed_at_most_once_per_interval() -> None:
    keys = KeySet(refetch_interval=30.0)
    assert keys.claim_refetch(NOW)
    assert not keys.claim_refetch(NOW)
    assert not keys.claim_refetch(NOW + 29.9)
    assert keys.claim_refetch(NOW + 30)
    assert not keys.claim_refetch(NOW + 45)
    assert keys.claim_refetch(NOW + 60)
    assert keys.claim_refetch(NOW - 3600)  # the clock went back: a fetch, and the interval counts from there
    assert not keys.claim_refetch(NOW - 3590)


def test_a_key_set_is_stale_until_loaded_and_again_after_its_maximum_age() -> None:
    keys = KeySet(max_age=3600.0)
    assert keys.stale(NOW)
    keys.load(standard_jwks(), NOW)
    assert not keys.stale(NOW + 3599)
    assert keys.stale(NOW + 3600)


def test_a_document_that_is_not_a_key_set_keeps_the_keys_before_it() -> None:
    keys = key_set()
    for document in (b"<html>", b"[]", b'{"keys": {}}', b"\xff", b" " * (MAX_JWKS_BYTES + 1)):
        assert keys.load(document, NOW).refused is not None
        assert isinstance(verdict(mint(), keys=keys), Valid)
    many = jwks(*[rsa_jwk(rsa_pool()[0], kid=f"k{i}") for i in range(MAX_KEYS + 1)])
    assert keys.load(many, NOW).refused == f"more than {MAX_KEYS} keys"


def test_a_key_set_uses_the_keys_it_can_and_says_why_it_left_the_others() -> None:
    keys = KeySet()
    loaded = keys.load(
        jwks(
            {"kty": "oct", "kid": "shared", "k": b64(b"secret")},
            {**rsa_jwk(rsa_pool()[0], kid="enc"), "use": "enc"},
            {"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": b64(bytes(32))},
            "not a key",
            rsa_jwk(rsa_pool()[0], kid="rsa-0"),
        ),
        NOW,
    )
    assert loaded.kids == ("rsa-0",)
    assert loaded.skipped == (
        ("shared", "private_key"),
        ("enc", "not_for_signing"),
        ("ed", "unsupported_kty"),
        (None, "malformed"),
    )
    assert isinstance(verdict(mint(), keys=keys), Valid)
    assert isinstance(verdict(mint(kid=None), keys=keys), Valid)  # the keys left out do not count


# ---- remembered verdicts ---------------------------------------------------------------------


def test_a_token_seen_before_is_answered_from_the_cache() -> None:
    validator = Validator(POLICY, key_set())
    token = mint()
    first = validator.check(token, NOW)
    assert isinstance(first, Valid) and len(validator.cache) == 1
    assert validator.check(token, NOW + 1) is first


def test_a_remembered_verdict_is_never_served_at_or_past_exp() -> None:
    validator = Validator(POLICY, key_set())
    token = mint(claims(exp=NOW + 10))
    assert isinstance(validator.check(token, NOW), Valid)
    assert len(validator.cache) == 1
    # At exp the cache lets go; within the skew the token is judged again and valid, not remembered.
    again = validator.check(token, NOW + 10)
    assert isinstance(again, Valid) and len(validator.cache) == 0
    assert validator.check(token, NOW + 70) == Invalid("expired")
    assert len(validator.cache) == 0


def test_a_verdict_is_not_remembered_for_a_token_already_past_exp() -> None:
    validator = Validator(POLICY, key_set())
    assert isinstance(validator.check(mint(claims(exp=NOW - 5)), NOW), Valid)  # within the skew
    assert len(validator.cache) == 0


def test_only_valid_verdicts_are_remembered() -> None:
    validator = Validator(POLICY, key_set())
    for token in (mint(kid="rsa-9"), mint(claims(aud="x")), mint().replace(".", "x", 1)):
        assert isinstance(validator.check(token, NOW), Invalid)
    assert len(validator.cache) == 0


def test_the_cache_is_bounded_and_lets_the_least_recently_used_go() -> None:
    validator = Validator(POLICY, key_set(), VerdictCache(capacity=3))
    tokens = [mint(claims(jti=str(i))) for i in range(4)]
    for token in tokens[:3]:
        validator.check(token, NOW)
    validator.check(tokens[0], NOW)  # used again: the least recently used is now tokens[1]
    validator.check(tokens[3], NOW)
    assert len(validator.cache) == 3
    remembered = {digest for digest in validator.cache._entries}
    assert remembered == {hashlib.sha256(tokens[i].encode()).digest() for i in (0, 2, 3)}


def test_a_remembered_verdict_is_dropped_once_its_key_leaves_the_set() -> None:
    keys = key_set()
    validator = Validator(POLICY, keys)
    token = mint()
    assert isinstance(validator.check(token, NOW), Valid)
    keys.load(jwks(ec_jwk(ec_pool()[0], kid="ec-0")), NOW)  # rsa-0 withdrawn
    assert validator.check(token, NOW + 1) == Invalid("unknown_key")
    assert len(validator.cache) == 0


def test_a_reloaded_set_holding_the_same_key_keeps_what_was_remembered() -> None:
    keys = key_set()
    validator = Validator(POLICY, keys)
    token = mint()
    first = validator.check(token, NOW)
    keys.load(standard_jwks(), NOW + 30)
    assert validator.check(token, NOW + 31) is first


def test_the_cache_holds_the_tokens_digest_and_verdict_never_the_token() -> None:
    validator = Validator(POLICY, key_set())
    token = mint()
    validator.check(token, NOW)
    ((digest, entry),) = validator.cache._entries.items()
    assert digest == hashlib.sha256(token.encode()).digest()
    held = repr(digest) + repr(entry) + repr(dict(entry.verdict.claims))
    for part in token.split("."):
        assert part not in held
    assert token.split(".")[2][:16] not in held


# ---- properties ------------------------------------------------------------------------------

TOKEN_CHARACTERS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ é\x00"


@profile(120)
@given(st.data())
def test_any_one_character_changed_in_a_valid_token_makes_it_invalid(data: st.DataObject) -> None:
    token = data.draw(st.sampled_from(valid_tokens()), label="token")
    index = data.draw(st.integers(0, len(token) - 1), label="at")
    character = data.draw(st.sampled_from(TOKEN_CHARACTERS).filter(lambda c: c != token[index]), label="to")
    changed = token[:index] + character + token[index + 1 :]
    result = verdict(changed)
    assert isinstance(result, Invalid) and result.reason in REASONS


@profile(200)
@given(st.text(TOKEN_CHARACTERS, max_size=300))
def test_any_text_as_a_token_gets_a_reason_from_the_closed_list(token: str) -> None:
    result = Validator(POLICY, key_set()).check(token, NOW)
    assert isinstance(result, Invalid) and result.reason in REASONS


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
HEADER_NAMES: Final = ("alg", "typ", "kid", "crit", "jku", "jwk", "x5u", "cty", "b64")
CLAIM_NAMES: Final = ("iss", "aud", "exp", "nbf", "iat", "sub", "scope", "scp", "jti")


@profile(60)
@given(
    st.dictionaries(st.sampled_from(HEADER_NAMES), json_values | st.sampled_from(["RS256", "at+jwt", "rsa-0"])),
    st.dictionaries(st.sampled_from(CLAIM_NAMES), json_values | st.sampled_from([ISSUER, RESOURCE, NOW])),
    st.binary(max_size=300),
)
def test_any_header_and_claims_with_any_signature_never_raise(
    header: dict[str, Any], payload: dict[str, Any], signature: bytes
) -> None:
    result = verdict(f"{encode(header)}.{encode(payload)}.{b64(signature)}")
    assert isinstance(result, Invalid) and result.reason in REASONS


@profile(40)
@given(st.dictionaries(st.sampled_from(CLAIM_NAMES), json_values | st.sampled_from([ISSUER, RESOURCE, NOW])))
def test_any_signed_claims_are_judged_without_raising(payload: dict[str, Any]) -> None:
    result = verdict(mint(claims() | payload))
    assert isinstance(result, Valid) or result.reason in REASONS


@functools.cache
def valid_tokens() -> list[str]:
    return [mint(), mint(alg="ES256", kid="ec-0"), mint(alg="PS256", key=1, kid="ps-1")]
