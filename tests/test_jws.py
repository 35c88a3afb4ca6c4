"""JWKs and JWS signatures held to `cryptography` (OpenSSL): same verdict on every signature drawn.

The server's verifier (mcp_server/wire/jws.py) is written on the standard library; `cryptography`
is a development dependency that checks it. Hypothesis draws the keys (P-256 from any private
scalar; RSA 2048, 2049 and 3072 bits from a pool made once a run, since making an RSA key costs
a hundred checks of one), the messages and the hostile signatures: single bits flipped, arbitrary bytes,
encodings built by hand and raised to the private exponent (the forgery classes that a verifier
which parses what a signature opens to falls for), r and s out of range. The oracle for each is
what `cryptography` says of the same bytes; ES256 signatures are JWS's raw r||s (RFC 7518 §3.4),
handed to `cryptography` as the DER it takes.

Deterministic (derandomized, no example database) and bounded, so CI runs it the same each time.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any, Final

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_server.wire import jws
from mcp_server.wire.jws import EcKey, N, P, Refused, RsaKey, b64url_decode, parse_jwk, verify

# Two of the common size, and 2049 bits, where PSS's encoded message is an octet shorter than the modulus.
RSA_SIZES: Final = (2048, 2048, 2049, 3072)
RsaPrivate = rsa.RSAPrivateKey
EcPrivate = ec.EllipticCurvePrivateKey


def profile(examples: int) -> Callable[[Any], Any]:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ---- keys, JWKs and signatures made by cryptography --------------------------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def uint(value: int, length: int | None = None) -> str:
    return b64(value.to_bytes(length or max(1, (value.bit_length() + 7) // 8), "big"))


@functools.cache
def rsa_pool() -> tuple[RsaPrivate, ...]:
    return tuple(rsa.generate_private_key(65537, size) for size in RSA_SIZES)


@functools.cache
def ec_pool() -> tuple[EcPrivate, ...]:
    return tuple(ec.generate_private_key(ec.SECP256R1()) for _ in range(3))


def rsa_jwk(private: RsaPrivate, alg: str | None = None, kid: str | None = None) -> dict[str, Any]:
    numbers = private.public_key().public_numbers()
    jwk: dict[str, Any] = {"kty": "RSA", "n": uint(numbers.n), "e": uint(numbers.e)}
    if alg is not None:
        jwk["alg"] = alg
    if kid is not None:
        jwk["kid"] = kid
    return jwk


def ec_jwk(private: EcPrivate, kid: str | None = None) -> dict[str, Any]:
    numbers = private.public_key().public_numbers()
    jwk: dict[str, Any] = {"kty": "EC", "crv": "P-256", "x": uint(numbers.x, 32), "y": uint(numbers.y, 32)}
    if kid is not None:
        jwk["kid"] = kid
    return jwk


def rsa_key(private: RsaPrivate, alg: str = "RS256") -> RsaKey:
    key = parse_jwk(rsa_jwk(private, alg))
    assert isinstance(key, RsaKey)
    return key


def ec_key(private: EcPrivate) -> EcKey:
    key = parse_jwk(ec_jwk(private))
    assert isinstance(key, EcKey)
    return key


PSS: Final = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)


def sign(private: RsaPrivate | EcPrivate, alg: str, message: bytes) -> bytes:
    """A JWS signature as `cryptography` makes it (ES256 turned into JWS's raw r||s)."""
    if isinstance(private, ec.EllipticCurvePrivateKey):
        r, s = utils.decode_dss_signature(private.sign(message, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")
    if alg == "PS256":
        return private.sign(message, PSS, hashes.SHA256())
    return private.sign(message, padding.PKCS1v15(), hashes.SHA256())


def oracle(private: RsaPrivate | EcPrivate, alg: str, message: bytes, signature: bytes) -> bool:
    """What `cryptography` says of a JWS signature."""
    try:
        if isinstance(private, ec.EllipticCurvePrivateKey):
            if len(signature) != 64:
                return False  # not JWS's form, whatever DER might say of it
            r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
            der = utils.encode_dss_signature(r, s)
            private.public_key().verify(der, message, ec.ECDSA(hashes.SHA256()))
        elif alg == "PS256":
            private.public_key().verify(signature, message, PSS, hashes.SHA256())
        else:
            private.public_key().verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return False
    return True


def raw_rsa(private: RsaPrivate, encoded: bytes) -> bytes:
    """An encoded message raised to the private exponent: a signature over whatever it encodes."""
    numbers = private.private_numbers()
    n = numbers.public_numbers.n
    c = int.from_bytes(encoded, "big") % n
    # By the Chinese remainder theorem, as a signer does: a quarter of the work of pow(c, d, n).
    m1, m2 = pow(c, numbers.dmp1, numbers.p), pow(c, numbers.dmq1, numbers.q)
    m = m2 + (numbers.iqmp * (m1 - m2) % numbers.p) * numbers.q
    return m.to_bytes((n.bit_length() + 7) // 8, "big")


def opened(private: RsaPrivate, signature: bytes) -> bytes:
    """What a signature opens to under the public exponent (the encoded message)."""
    numbers = private.public_key().public_numbers()
    size = (numbers.n.bit_length() + 7) // 8
    return pow(int.from_bytes(signature, "big"), numbers.e, numbers.n).to_bytes(size, "big")


rsa_privates = st.builds(lambda index: rsa_pool()[index], st.integers(0, len(RSA_SIZES) - 1))
# Signing by hand is Python's pow() with the private exponent: 3072 bits would take most of the time.
small_rsa_privates = st.builds(lambda index: rsa_pool()[index], st.integers(0, RSA_SIZES.index(3072) - 1))
ec_privates = st.integers(1, N - 1).map(lambda d: ec.derive_private_key(d, ec.SECP256R1()))
messages = st.binary(max_size=300)


@st.composite
def signers(draw: st.DrawFn) -> tuple[RsaPrivate | EcPrivate, str]:
    alg = draw(st.sampled_from(jws.ALGORITHMS))
    return (draw(ec_privates) if alg == "ES256" else draw(rsa_privates)), alg


def key_of(private: RsaPrivate | EcPrivate, alg: str) -> jws.PublicKey:
    return ec_key(private) if isinstance(private, ec.EllipticCurvePrivateKey) else rsa_key(private, alg)


# ---- agreement with cryptography -------------------------------------------------------------


@profile(60)
@given(signers(), messages)
def test_every_signature_cryptography_makes_verifies_here(signer: tuple[Any, str], message: bytes) -> None:
    private, alg = signer
    assert verify(key_of(private, alg), alg, message, sign(private, alg, message))


@profile(80)
@given(signers(), messages, st.data())
def test_a_single_bit_flipped_in_message_or_signature_fails_here_exactly_when_it_fails_in_cryptography(
    signer: tuple[Any, str], message: bytes, data: st.DataObject
) -> None:
    private, alg = signer
    key, signature = key_of(private, alg), sign(private, alg, message)
    if message and data.draw(st.booleans(), label="in the message"):
        bit = data.draw(st.integers(0, 8 * len(message) - 1), label="bit")
        message = bytes(b ^ (1 << (bit % 8)) if i == bit // 8 else b for i, b in enumerate(message))
    else:
        bit = data.draw(st.integers(0, 8 * len(signature) - 1), label="bit")
        signature = bytes(b ^ (1 << (bit % 8)) if i == bit // 8 else b for i, b in enumerate(signature))
    assert verify(key, alg, message, signature) == oracle(private, alg, message, signature)


@profile(100)
@given(signers(), messages, st.binary(max_size=600))
def test_arbitrary_bytes_as_a_signature_never_raise_and_agree_with_cryptography(
    signer: tuple[Any, str], message: bytes, signature: bytes
) -> None:
    private, alg = signer
    assert verify(key_of(private, alg), alg, message, signature) == oracle(private, alg, message, signature)


@profile(100)
@given(signers(), messages, st.data())
def test_arbitrary_bytes_of_the_signatures_own_length_agree_with_cryptography(
    signer: tuple[Any, str], message: bytes, data: st.DataObject
) -> None:
    private, alg = signer
    length = len(sign(private, alg, message))
    signature = data.draw(st.binary(min_size=length, max_size=length))
    assert verify(key_of(private, alg), alg, message, signature) == oracle(private, alg, message, signature)


# EMSA-PKCS1-v1_5 for SHA-256, and the encodings a lax parser of it accepts (RFC 8017 §9.2).
DIGEST_INFO: Final = bytes.fromhex("3031300d060960864801650304020105000420")
DIGEST_INFO_NO_NULL: Final = bytes.fromhex("302f300b0609608648016503040201" + "0420")


def pkcs1(size: int, digest: bytes, variant: str, junk: bytes) -> bytes:
    """An EMSA-PKCS1-v1_5 block for `digest`, or one of the near misses forgeries are built from."""
    info = DIGEST_INFO_NO_NULL if variant == "no NULL parameters" else DIGEST_INFO
    if variant == "garbage after the digest":  # Bleichenbacher 2006: the padding shortened to fit it
        body = b"\x00" + info + digest + junk
        return b"\x00\x01" + b"\xff" * (size - 2 - len(body)) + body
    if variant == "garbage in the padding":
        body = b"\x00" + info + digest
        filler = (junk + b"\xff" * size)[: size - 2 - len(body)]
        return b"\x00\x01" + filler + body
    if variant == "block type 2":
        body = b"\x00" + info + digest
        return b"\x00\x02" + b"\xff" * (size - 2 - len(body)) + body
    if variant == "too little padding":
        body = b"\x00" + info + digest
        return (b"\x00\x01" + b"\xff" * 4 + body).rjust(size, b"\x00")
    body = b"\x00" + info + digest
    return b"\x00\x01" + b"\xff" * (size - 2 - len(body)) + body


VARIANTS: Final = (
    "exact",
    "no NULL parameters",
    "garbage after the digest",
    "garbage in the padding",
    "block type 2",
    "too little padding",
)


@profile(40)
@given(small_rsa_privates, messages, st.sampled_from(VARIANTS), st.binary(min_size=1, max_size=40))
def test_hand_built_pkcs1_encodings_raised_to_the_private_exponent_agree_with_cryptography(
    private: RsaPrivate, message: bytes, variant: str, junk: bytes
) -> None:
    size = (private.key_size + 7) // 8
    signature = raw_rsa(private, pkcs1(size, hashlib.sha256(message).digest(), variant, junk))
    ours = verify(rsa_key(private), "RS256", message, signature)
    assert ours == oracle(private, "RS256", message, signature)
    assert ours == (variant == "exact")


@profile(40)
@given(small_rsa_privates, messages, st.sampled_from(jws.ALGORITHMS[:2]), st.data())
def test_a_bit_flipped_in_what_a_signature_opens_to_agrees_with_cryptography(
    private: RsaPrivate, message: bytes, alg: str, data: st.DataObject
) -> None:
    encoded = bytearray(opened(private, sign(private, alg, message)))
    bit = data.draw(st.integers(0, 8 * len(encoded) - 1), label="bit")
    encoded[bit // 8] ^= 1 << (bit % 8)
    signature = raw_rsa(private, bytes(encoded))
    assert verify(rsa_key(private, alg), alg, message, signature) == oracle(private, alg, message, signature)


scalars = st.one_of(
    st.sampled_from([0, 1, N - 1, N, N + 1, P - 1, P, 2**256 - 1]),
    st.integers(0, 2**256 - 1),
)


@profile(80)
@given(ec_privates, messages, scalars, scalars)
def test_any_r_and_s_agree_with_cryptography(private: EcPrivate, message: bytes, r: int, s: int) -> None:
    signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    assert verify(ec_key(private), "ES256", message, signature) == oracle(private, "ES256", message, signature)


@profile(40)
@given(ec_privates, messages)
def test_an_ecdsa_signature_with_s_negated_verifies_as_in_cryptography(private: EcPrivate, message: bytes) -> None:
    # ECDSA signatures are malleable: (r, n - s) is as valid as (r, s). Both sides agree on that;
    # a token's digest may differ from the issuer's, and nothing here relies on it being unique.
    signature = sign(private, "ES256", message)
    s = int.from_bytes(signature[32:], "big")
    negated = signature[:32] + (N - s).to_bytes(32, "big")
    assert verify(ec_key(private), "ES256", message, negated) is oracle(private, "ES256", message, negated) is True


# ---- known edge cases, one by one ------------------------------------------------------------

MESSAGE: Final = b"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0"


def test_rsa_signatures_one_byte_short_or_long_are_refused_even_with_the_right_value() -> None:
    private = rsa_pool()[0]
    signature = sign(private, "RS256", MESSAGE)
    key = rsa_key(private)
    assert verify(key, "RS256", MESSAGE, signature)
    assert not verify(key, "RS256", MESSAGE, b"\x00" + signature)  # the same number, one octet longer
    assert not verify(key, "RS256", MESSAGE, signature[1:])
    assert not verify(key, "RS256", MESSAGE, signature + b"\x00")
    assert not verify(key, "RS256", MESSAGE, b"")


@pytest.mark.parametrize("value", ["n", "n + 1", "all ones", "zero", "one", "n - 1"])
def test_rsa_signature_values_out_of_range_or_trivial_are_refused(value: str) -> None:
    private = rsa_pool()[0]
    n = private.public_key().public_numbers().n
    size = (n.bit_length() + 7) // 8
    number = {"n": n, "n + 1": n + 1, "all ones": 2 ** (8 * size) - 1, "zero": 0, "one": 1, "n - 1": n - 1}[value]
    signature = number.to_bytes(size, "big")
    for alg in ("RS256", "PS256"):
        assert not verify(rsa_key(private, alg), alg, MESSAGE, signature)
        assert not oracle(private, alg, MESSAGE, signature)


@pytest.mark.parametrize("length", [0, 32, 63, 65, 128])
def test_es256_signatures_of_any_length_but_64_are_refused(length: int) -> None:
    private = ec_pool()[0]
    signature = sign(private, "ES256", MESSAGE)
    padded = (signature + signature + signature)[:length]
    assert not verify(ec_key(private), "ES256", MESSAGE, padded)


def test_a_der_encoded_ecdsa_signature_is_refused_where_jws_takes_raw_r_and_s() -> None:
    private = ec_pool()[0]
    der = private.sign(MESSAGE, ec.ECDSA(hashes.SHA256()))
    private.public_key().verify(der, MESSAGE, ec.ECDSA(hashes.SHA256()))  # good DER
    assert not verify(ec_key(private), "ES256", MESSAGE, der)


@pytest.mark.parametrize(("r", "s"), [(0, 1), (1, 0), (0, 0), (N, 1), (1, N), (N, N), (2**256 - 1, 1)])
def test_es256_r_or_s_zero_or_at_least_n_is_refused(r: int, s: int) -> None:
    signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    assert not verify(ec_key(ec_pool()[0]), "ES256", MESSAGE, signature)


def test_a_key_verifies_only_its_own_algorithm() -> None:
    rsa_private, ec_private = rsa_pool()[0], ec_pool()[0]
    rs256 = sign(rsa_private, "RS256", MESSAGE)
    ps256 = sign(rsa_private, "PS256", MESSAGE)
    es256 = sign(ec_private, "ES256", MESSAGE)
    assert not verify(rsa_key(rsa_private), "ES256", MESSAGE, rs256)
    assert not verify(rsa_key(rsa_private), "PS256", MESSAGE, ps256)  # an RS256 key (alg absent)
    assert not verify(rsa_key(rsa_private, "PS256"), "RS256", MESSAGE, rs256)
    assert not verify(ec_key(ec_private), "RS256", MESSAGE, es256)
    for alg in ("none", "HS256", "HS384", "HS512", "EdDSA", "ES384", "", "rs256"):
        assert not verify(rsa_key(rsa_private), alg, MESSAGE, rs256)
        assert not verify(ec_key(ec_private), alg, MESSAGE, es256)


def test_an_hmac_made_with_the_public_key_as_its_secret_verifies_under_no_algorithm() -> None:
    # The classic confusion: an HS256 "signature" keyed with bytes anyone can read.
    private = rsa_pool()[0]
    public = private.public_key()
    secrets = [
        public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
        public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo),
        json.dumps(rsa_jwk(private)).encode(),
    ]
    for secret in secrets:
        mac = hmac.new(secret, MESSAGE, hashlib.sha256).digest()
        for alg in ("HS256", "RS256", "PS256"):
            assert not verify(rsa_key(private, "PS256" if alg == "PS256" else "RS256"), alg, MESSAGE, mac)


# ---- JWKs ------------------------------------------------------------------------------------


def test_an_rsa_jwk_is_read_as_rs256_unless_it_says_ps256() -> None:
    private = rsa_pool()[0]
    assert rsa_key(private).alg == "RS256"
    assert rsa_key(private, "PS256").alg == "PS256"
    key = parse_jwk(rsa_jwk(private, kid="k1"))
    assert isinstance(key, RsaKey) and key.kid == "k1" and key.bits == 2048


def test_a_modulus_with_a_leading_zero_octet_is_the_same_key() -> None:
    private = rsa_pool()[0]
    jwk = rsa_jwk(private)
    jwk["n"] = b64(b"\x00" + private.public_key().public_numbers().n.to_bytes(256, "big"))
    assert parse_jwk(jwk) == rsa_key(private)
    assert verify(rsa_key(private), "RS256", MESSAGE, sign(private, "RS256", MESSAGE))


def small_rsa() -> dict[str, Any]:
    return rsa_jwk(rsa.generate_private_key(65537, 1024))


def refusal(jwk: object) -> str:
    key = parse_jwk(jwk)
    assert isinstance(key, Refused), key
    return key.reason


def test_jwks_that_are_not_usable_public_signing_keys_are_refused_each_with_its_reason() -> None:
    rsa_private, ec_private = rsa_pool()[0], ec_pool()[0]
    good_rsa, good_ec = rsa_jwk(rsa_private), ec_jwk(ec_private)
    numbers = ec_private.public_key().public_numbers()
    cases: list[tuple[object, str]] = [
        ([], "malformed"),
        ("key", "malformed"),
        ({"kty": "oct", "k": b64(b"secret")}, "private_key"),
        ({"kty": "oct"}, "unsupported_kty"),
        ({"kty": "OKP", "crv": "Ed25519", "x": b64(bytes(32))}, "unsupported_kty"),
        ({}, "malformed"),
        ({**good_rsa, "use": "enc"}, "not_for_signing"),
        ({**good_rsa, "key_ops": ["encrypt", "wrapKey"]}, "not_for_signing"),
        ({**good_rsa, "key_ops": "verify"}, "malformed"),
        ({**good_rsa, "kid": 7}, "malformed"),
        ({**good_rsa, "alg": "HS256"}, "unsupported_alg"),
        ({**good_rsa, "alg": "ES256"}, "unsupported_alg"),
        ({**good_rsa, "alg": "RS512"}, "unsupported_alg"),
        ({**good_rsa, "alg": "none"}, "unsupported_alg"),
        ({**good_rsa, "d": good_rsa["n"]}, "private_key"),
        (small_rsa(), "weak_key"),
        ({**good_rsa, "e": uint(1)}, "weak_key"),
        ({**good_rsa, "e": uint(65536)}, "weak_key"),
        ({**good_rsa, "e": uint(2**40 + 1)}, "weak_key"),
        ({**good_rsa, "n": uint(2**2048)}, "weak_key"),  # even
        ({**good_rsa, "n": uint(2**8192 + 1)}, "weak_key"),  # 8193 bits
        ({**good_rsa, "n": ""}, "malformed"),
        ({**good_rsa, "n": good_rsa["n"] + "="}, "malformed"),
        ({**good_rsa, "n": good_rsa["n"].replace("-", "+").replace("_", "/")}, "malformed"),
        ({**good_rsa, "e": 65537}, "malformed"),
        ({**good_ec, "alg": "RS256"}, "unsupported_alg"),
        ({**good_ec, "crv": "P-384"}, "unsupported_crv"),
        ({**good_ec, "crv": "secp256k1"}, "unsupported_crv"),
        ({**good_ec, "y": uint((numbers.y + 1) % P, 32)}, "not_on_curve"),
        ({**good_ec, "x": uint(0, 32), "y": uint(0, 32)}, "not_on_curve"),
        ({**good_ec, "x": uint(P + 1, 32)}, "not_on_curve"),
        ({**good_ec, "x": b64(numbers.x.to_bytes(32, "big")[1:])}, "malformed"),  # 31 octets
        ({**good_ec, "x": b64(b"\x00" + numbers.x.to_bytes(32, "big"))}, "malformed"),  # 33 octets
        ({**good_ec, "d": uint(1, 32)}, "private_key"),
    ]
    for jwk, reason in cases:
        assert refusal(jwk) == reason, jwk


def test_a_point_with_x_at_least_p_is_not_read_as_x_minus_p() -> None:
    # x + p still fits in 32 octets for small x: (x + p, y) names no point, however it reduces.
    x = 3
    while True:
        rhs = (x**3 - 3 * x + jws.B) % P
        y = pow(rhs, (P + 1) // 4, P)  # p ≡ 3 (mod 4): a square root when one exists
        if y * y % P == rhs:
            break
        x += 1
    assert isinstance(parse_jwk({"kty": "EC", "crv": "P-256", "x": uint(x, 32), "y": uint(y, 32)}), EcKey)
    assert refusal({"kty": "EC", "crv": "P-256", "x": uint(x + P, 32), "y": uint(y, 32)}) == "not_on_curve"


jwk_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=20),
    st.sampled_from(["RSA", "EC", "oct", "P-256", "sig", "enc", "RS256", "ES256", "PS256", "AQAB", "", "=="]),
    st.binary(max_size=40).map(b64),
    st.lists(st.sampled_from(["verify", "sign", "encrypt"]), max_size=3),
)
JWK_NAMES: Final = ("kty", "crv", "x", "y", "n", "e", "alg", "use", "kid", "key_ops", "d", "x5c")


@profile(100)
@given(st.dictionaries(st.sampled_from(JWK_NAMES), jwk_values, max_size=8))
def test_any_jwk_shaped_value_is_read_or_refused_without_raising(jwk: dict[str, Any]) -> None:
    key = parse_jwk(jwk)
    assert isinstance(key, RsaKey | EcKey | Refused)


@profile(60)
@given(ec_privates, st.sampled_from(["x", "y"]), st.integers(1, 2**64))
def test_a_p256_point_moved_off_the_curve_is_refused(private: EcPrivate, coordinate: str, shift: int) -> None:
    jwk = ec_jwk(private)
    numbers = private.public_key().public_numbers()
    moved = (getattr(numbers, coordinate) + shift) % P
    other = numbers.y if coordinate == "x" else numbers.x
    jwk[coordinate] = uint(moved, 32)
    x, y = (moved, other) if coordinate == "x" else (other, moved)
    on_curve = (y * y - (x**3 - 3 * x + jws.B)) % P == 0
    assert isinstance(parse_jwk(jwk), EcKey) == on_curve


# ---- base64url -------------------------------------------------------------------------------


@profile(200)
@given(st.binary(max_size=100))
def test_base64url_reads_back_what_it_is_given_and_nothing_else_spells_those_bytes(data: bytes) -> None:
    text = b64(data)
    assert b64url_decode(text) == data
    if len(text) % 4:
        assert b64url_decode(text + "=" * (-len(text) % 4)) is None  # padding refused


@profile(300)
@given(st.text(max_size=40))
def test_any_text_is_read_as_base64url_only_when_it_is_the_one_spelling_of_its_bytes(text: str) -> None:
    data = b64url_decode(text)
    if data is not None:
        assert b64(data) == text


@pytest.mark.parametrize("text", ["QQ=", "QQ==", "QR", "QUI=", "QUJ", "Q", "+/8", "a b", "é", "QQ\n"])
def test_padded_non_canonical_and_foreign_spellings_are_refused(text: str) -> None:
    assert b64url_decode(text) is None
