"""JSON Web Keys and JWS signatures (RS256, PS256, ES256), verified.

Verification only: nothing here holds a private key or makes a signature. Every function is
total over hostile input: bytes and decoded JSON in, a key, a refusal or a bool out, never an
exception. The algorithm is the key's (`PublicKey.alg`); a signature checked under any other
algorithm is refused, so a token's header can never choose how it is verified (RFC 8725 §3.1).
`none` and the HMAC algorithms are never a key's: a public key is not a shared secret.

The arithmetic is public-key only, on public values, so it need not run in constant time; the
one comparison that decides a signature still uses `hmac.compare_digest`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

Algorithm = Literal["RS256", "PS256", "ES256"]
ALGORITHMS: Final[tuple[Algorithm, ...]] = ("RS256", "PS256", "ES256")

# Why a JWK is not used, short and machine-readable (never the key's own values).
KeyRefusal = Literal[
    "malformed",  # not an object, a member of the wrong type, a value not strict base64url
    "unsupported_kty",  # a key type other than RSA and EC (oct above all: a shared secret)
    "unsupported_alg",  # an `alg` this module does not verify, or one the key type cannot have
    "unsupported_crv",  # an EC curve other than P-256
    "not_for_signing",  # `use` other than "sig", or `key_ops` without "verify"
    "private_key",  # private members published: the key set is not one to trust
    "weak_key",  # an RSA modulus under 2048 bits or an exponent out of range
    "not_on_curve",  # an EC point that is not a point of P-256
]


@dataclass(frozen=True, slots=True)
class Refused:
    """A JWK that is not used, and why."""

    reason: KeyRefusal


# ---- base64url (RFC 7515 §2: no padding, no other characters) --------------------------------

_B64URL: Final = re.compile(r"[A-Za-z0-9_-]*")
_ALPHABET: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
# The bits the last character carries past the data, by the length's remainder mod 4: non-zero
# bits there make a second spelling of the same bytes, and a token has exactly one.
_SPARE_BITS: Final[Mapping[int, int]] = {0: 0, 2: 0x0F, 3: 0x03}


def b64url_decode(text: str) -> bytes | None:
    """Strict base64url without padding → its bytes; None for other spellings."""
    remainder = len(text) % 4
    if remainder == 1 or not _B64URL.fullmatch(text):
        return None
    if remainder and _ALPHABET.index(text[-1]) & _SPARE_BITS[remainder]:
        return None
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# ---- keys ------------------------------------------------------------------------------------

# RFC 7518 §3.3: "A key of size 2048 bits or larger MUST be used with these algorithms." The upper
# bound keeps one verification's cost bounded (pow() grows with the square of the size).
MIN_RSA_BITS: Final = 2048
MAX_RSA_BITS: Final = 8192
MAX_RSA_EXPONENT_BITS: Final = 32  # 65537 in practice; a larger one only makes pow() slower
# Members only a private JWK has (RFC 7518 §6.2.2, §6.3.2, §6.4.1).
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})

# P-256 (FIPS 186-4 D.1.2.3; SEC 2 secp256r1): y² = x³ - 3x + b over GF(p), a group of prime order n.
P: Final = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
B: Final = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
N: Final = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
GX: Final = 0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296
GY: Final = 0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5
_COORDINATE_BYTES: Final = 32  # RFC 7518 §6.2.1.2: "MUST be the full size of a coordinate"


@dataclass(frozen=True, slots=True)
class RsaKey:
    """An RSA public key and the one algorithm it verifies (RS256 or PS256)."""

    n: int = field(repr=False)
    e: int
    alg: Literal["RS256", "PS256"]
    kid: str | None

    @property
    def bits(self) -> int:
        return self.n.bit_length()


@dataclass(frozen=True, slots=True)
class EcKey:
    """A P-256 public key, which verifies ES256 and nothing else."""

    x: int = field(repr=False)
    y: int = field(repr=False)
    kid: str | None
    # The odd multiples Q, 3Q, …, 15Q in affine form, made once when the key is read: the part of
    # a verification that depends on the key alone.
    multiples: tuple[tuple[int, int], ...] = field(repr=False, compare=False)
    alg: Literal["ES256"] = "ES256"


PublicKey = RsaKey | EcKey


def parse_jwk(jwk: object) -> PublicKey | Refused:
    """A decoded JWK (RFC 7517) → its public key, or why it is not used."""
    if not isinstance(jwk, dict):
        return Refused("malformed")
    if _PRIVATE_MEMBERS & jwk.keys():
        return Refused("private_key")
    kid, alg, use, ops = jwk.get("kid"), jwk.get("alg"), jwk.get("use"), jwk.get("key_ops")
    if not isinstance(kid, str | None) or not isinstance(alg, str | None) or not isinstance(use, str | None):
        return Refused("malformed")
    if use is not None and use != "sig":
        return Refused("not_for_signing")
    if ops is not None:
        if not isinstance(ops, list) or not all(isinstance(op, str) for op in ops):
            return Refused("malformed")
        if "verify" not in ops:
            return Refused("not_for_signing")
    kty = jwk.get("kty")
    if kty == "RSA":
        return _rsa_key(jwk, kid, alg)
    if kty == "EC":
        return _ec_key(jwk, kid, alg)
    return Refused("unsupported_kty" if isinstance(kty, str) else "malformed")


def _unsigned(value: object, size: int | None = None) -> int | None:
    """A JWK's Base64urlUInt (RFC 7518 §2) → its value (of `size` octets)."""
    if not isinstance(value, str) or not value:
        return None
    data = b64url_decode(value)
    if data is None or (size is not None and len(data) != size):
        return None
    return int.from_bytes(data, "big")


def _rsa_key(jwk: Mapping[str, object], kid: str | None, alg: str | None) -> RsaKey | Refused:
    if alg is None:
        alg = "RS256"
    if alg not in ("RS256", "PS256"):
        return Refused("unsupported_alg")
    n, e = _unsigned(jwk.get("n")), _unsigned(jwk.get("e"))
    if n is None or e is None:
        return Refused("malformed")
    # A modulus is odd (a product of odd primes); an exponent is odd, at least 3, below n.
    if not MIN_RSA_BITS <= n.bit_length() <= MAX_RSA_BITS or n % 2 == 0:
        return Refused("weak_key")
    if e < 3 or e % 2 == 0 or e.bit_length() > MAX_RSA_EXPONENT_BITS:
        return Refused("weak_key")
    return RsaKey(n, e, "RS256" if alg == "RS256" else "PS256", kid)


def _ec_key(jwk: Mapping[str, object], kid: str | None, alg: str | None) -> EcKey | Refused:
    crv = jwk.get("crv")
    if crv != "P-256":
        return Refused("unsupported_crv" if isinstance(crv, str) else "malformed")
    if alg is not None and alg != "ES256":
        return Refused("unsupported_alg")
    x, y = _unsigned(jwk.get("x"), _COORDINATE_BYTES), _unsigned(jwk.get("y"), _COORDINATE_BYTES)
    if x is None or y is None:
        return Refused("malformed")
    # The point at infinity has no affine coordinates, and (0, 0) is not on the curve (b ≠ 0). The
    # cofactor is 1, so a point on the curve is in the group of order n.
    if x >= P or y >= P or (y * y - (x * x * x - 3 * x + B)) % P:
        return Refused("not_on_curve")
    return EcKey(x, y, kid, _odd_multiples(x, y))


# ---- RS256 and PS256 (RFC 8017 §8.2.2 and §8.1.2) --------------------------------------------

# EMSA-PKCS1-v1_5's DigestInfo for SHA-256, DER (RFC 8017 §9.2, note 1).
_SHA256_DIGEST_INFO: Final = bytes.fromhex("3031300d060960864801650304020105000420")
_HASH_BYTES: Final = 32


def _rsa_representative(key: RsaKey, signature: bytes) -> int | None:
    """RSAVP1 (RFC 8017 §5.2.2) on a signature of exactly k octets, or None."""
    if len(signature) != (key.n.bit_length() + 7) // 8:
        return None
    s = int.from_bytes(signature, "big")
    if s >= key.n:
        return None
    return pow(s, key.e, key.n)


def _verify_rs256(key: RsaKey, message: bytes, signature: bytes) -> bool:
    m = _rsa_representative(key, signature)
    if m is None:
        return False
    size = len(signature)
    digest = hashlib.sha256(message).digest()
    # The whole expected encoding, compared byte for byte (RFC 8017 §8.2.2 step 3-4). Never parse
    # the DigestInfo out of what the signature opens to: a parser that skips or trusts a length is
    # how Bleichenbacher's 2006 forgery with e = 3 works.
    padding = size - 3 - len(_SHA256_DIGEST_INFO) - _HASH_BYTES
    if padding < 8:
        return False
    expected = b"\x00\x01" + b"\xff" * padding + b"\x00" + _SHA256_DIGEST_INFO + digest
    return hmac.compare_digest(m.to_bytes(size, "big"), expected)


def _mgf1(seed: bytes, length: int) -> bytes:
    """MGF1 with SHA-256 (RFC 8017 §B.2.1)."""
    out = b"".join(hashlib.sha256(seed + counter.to_bytes(4, "big")).digest() for counter in range((length + 31) // 32))
    return out[:length]


def _verify_ps256(key: RsaKey, message: bytes, signature: bytes) -> bool:
    m = _rsa_representative(key, signature)
    if m is None:
        return False
    # EMSA-PSS-VERIFY (RFC 8017 §9.1.2), SHA-256 and MGF1-SHA-256, a salt as long as the hash
    # (RFC 7518 §3.5: "The size of the salt value is the same size as the hash function output").
    em_bits = key.n.bit_length() - 1
    em_len = (em_bits + 7) // 8
    if m.bit_length() > em_bits or em_len < 2 * _HASH_BYTES + 2:
        return False
    em = m.to_bytes(em_len, "big")
    if em[-1] != 0xBC:
        return False
    db_len = em_len - _HASH_BYTES - 1
    masked, h = em[:db_len], em[db_len:-1]
    db = int.from_bytes(masked, "big") ^ int.from_bytes(_mgf1(h, db_len), "big")
    db &= (1 << (8 * db_len - (8 * em_len - em_bits))) - 1  # the leftmost bits, cleared (step 9)
    ones_at = _HASH_BYTES  # DB = PS (zeros) || 0x01 || salt: the 0x01 sits just before the salt
    if db >> (8 * ones_at) != 1:
        return False
    salt = (db & ((1 << (8 * _HASH_BYTES)) - 1)).to_bytes(_HASH_BYTES, "big")
    expected = hashlib.sha256(b"\x00" * 8 + hashlib.sha256(message).digest() + salt).digest()
    return hmac.compare_digest(h, expected)


# ---- ES256 (FIPS 186-4 §6.4.2, on P-256; RFC 7518 §3.4 for the signature's form) --------------

# Jacobian coordinates (X, Y, Z) stand for the affine point (X/Z², Y/Z³), so adding and doubling
# need no inversion; Z = 0 is the point at infinity.
Jacobian = tuple[int, int, int]
_INFINITY: Final[Jacobian] = (1, 1, 0)
_WINDOW: Final = 5  # wNAF width: digits are odd, |d| < 16, so 8 precomputed points per base


def _double(point: Jacobian) -> Jacobian:
    """2·point on P-256 (a = -3): the Explicit-Formulas DB's "dbl-2001-b"."""
    x, y, z = point
    if not z or not y:
        return _INFINITY
    delta = z * z % P
    gamma = y * y % P
    beta = x * gamma % P
    alpha = 3 * (x - delta) * (x + delta) % P
    x3 = (alpha * alpha - 8 * beta) % P
    z3 = 2 * y * z % P
    y3 = (alpha * (4 * beta - x3) - 8 * gamma * gamma) % P
    return x3, y3, z3


def _add_affine(point: Jacobian, x2: int, y2: int) -> Jacobian:
    """point + (x2, y2), the second affine: mixed addition, "madd-2004-hmv"."""
    x1, y1, z1 = point
    if not z1:
        return x2, y2, 1
    z1z1 = z1 * z1 % P
    h = (x2 * z1z1 - x1) % P
    r = (y2 * z1 * z1z1 - y1) % P
    if not h:
        return _double(point) if not r else _INFINITY
    hh = h * h % P
    hhh = h * hh % P
    v = x1 * hh % P
    x3 = (r * r - hhh - 2 * v) % P
    y3 = (r * (v - x3) - y1 * hhh) % P
    return x3, y3, z1 * h % P


def _to_affine(points: list[Jacobian]) -> tuple[tuple[int, int], ...]:
    """Jacobian points (none at infinity) → affine, one inversion for all."""
    products = [1]
    for _, _, z in points:
        products.append(products[-1] * z % P)
    inverse = pow(products[-1], -1, P)
    out: list[tuple[int, int]] = [(0, 0)] * len(points)
    for index in range(len(points) - 1, -1, -1):
        x, y, z = points[index]
        z_inverse = inverse * products[index] % P
        inverse = inverse * z % P
        z2 = z_inverse * z_inverse % P
        out[index] = (x * z2 % P, y * z2 * z_inverse % P)
    return tuple(out)


def _odd_multiples(x: int, y: int) -> tuple[tuple[int, int], ...]:
    """(x, y)·1, 3, 5, …, 15 in affine form, the table a width-5 wNAF reads."""
    (twice_x, twice_y) = _to_affine([_double((x, y, 1))])[0]
    points: list[Jacobian] = [(x, y, 1)]
    for _ in range(1, 1 << (_WINDOW - 2)):
        points.append(_add_affine(points[-1], twice_x, twice_y))
    return _to_affine(points)


def _wnaf(k: int) -> list[int]:
    """k's width-5 non-adjacent form, least significant digit first."""
    digits: list[int] = []
    while k:
        if k & 1:
            digit = k & ((1 << _WINDOW) - 1)
            if digit >= 1 << (_WINDOW - 1):
                digit -= 1 << _WINDOW
            k -= digit
        else:
            digit = 0
        digits.append(digit)
        k >>= 1
    return digits


_G_MULTIPLES: Final = _odd_multiples(GX, GY)


def _twin_multiply(u1: int, u2: int, q_multiples: tuple[tuple[int, int], ...]) -> Jacobian:
    """u1·G + u2·Q in one pass of doublings (Shamir's trick, over their wNAF)."""
    first, second = _wnaf(u1), _wnaf(u2)
    length = max(len(first), len(second))
    first += [0] * (length - len(first))
    second += [0] * (length - len(second))
    point = _INFINITY
    for index in range(length - 1, -1, -1):
        point = _double(point)
        for digit, table in ((first[index], _G_MULTIPLES), (second[index], q_multiples)):
            if digit > 0:
                x, y = table[digit >> 1]
                point = _add_affine(point, x, y)
            elif digit < 0:
                x, y = table[-digit >> 1]
                point = _add_affine(point, x, P - y)
    return point


def _verify_es256(key: EcKey, message: bytes, signature: bytes) -> bool:
    # RFC 7518 §3.4: the signature is R and S as 32-octet big-endian integers, concatenated: 64
    # octets exactly. A DER-encoded signature (70-72 octets) is another form, not this one.
    if len(signature) != 2 * _COORDINATE_BYTES:
        return False
    r = int.from_bytes(signature[:_COORDINATE_BYTES], "big")
    s = int.from_bytes(signature[_COORDINATE_BYTES:], "big")
    if not (0 < r < N and 0 < s < N):
        return False
    e = int.from_bytes(hashlib.sha256(message).digest(), "big")  # 256 bits: no truncation for P-256
    w = pow(s, -1, N)
    x, _, z = _twin_multiply(e * w % N, r * w % N, key.multiples)
    if not z:
        return False
    z_inverse = pow(z, -1, P)
    return x * z_inverse * z_inverse % P % N == r


# ---- the one entry point ---------------------------------------------------------------------


def verify(key: PublicKey, alg: str, signing_input: bytes, signature: bytes) -> bool:
    """Whether `signature` is `key`'s over `signing_input` under its `alg`."""
    if alg != key.alg:
        return False
    if isinstance(key, EcKey):
        return _verify_es256(key, signing_input, signature)
    if key.alg == "PS256":
        return _verify_ps256(key, signing_input, signature)
    return _verify_rs256(key, signing_input, signature)
