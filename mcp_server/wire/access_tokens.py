"""JWT access tokens (RFC 9068) judged to a verdict, without I/O.

A token is held to an issuer, a resource and a key set.

The server is an OAuth resource server (docs/security.md): every token is checked here before
anything reaches the gateway. Everything is a value: the caller fetches the key set and hands
its bytes to `KeySet.load`, passes the time in, and maps the verdict to HTTP (an `Invalid` is
401 `invalid_token`; a `Valid` that lacks a call's scopes is 403 `insufficient_scope`). No
reason, refusal or repr here holds the token or any part of it.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from mcp_server.wire.jsonrpc import lone_surrogate
from mcp_server.wire.jws import ALGORITHMS, KeyRefusal, PublicKey, Refused, b64url_decode, parse_jwk, verify

# A bearer header of 16 KiB is several times the largest access token seen in practice (a few
# hundred bytes of claims, an RS256 signature of 342 characters, an RSA-8192 one of 1,366): past
# it a token is refused unread, so what a caller can make the decoder and the hash do is bounded.
MAX_TOKEN_BYTES: Final = 16 * 1024
# How far clocks may disagree (RFC 7519 §4.1.4: "Implementers MAY provide for some small leeway,
# usually no more than a few minutes, to account for clock skew").
DEFAULT_SKEW: Final = 60.0
# RFC 9068 §4: "Resource servers MUST verify that the typ header value is at+jwt or
# application/at+jwt". Plain JWT is accepted too, by default: Keycloak, Microsoft Entra and
# Auth0's default profile stamp their access tokens `JWT`. A missing `typ` is refused. Media type
# names are case-insensitive (RFC 7515 §4.1.9).
AT_JWT_TYPES: Final = frozenset({"at+jwt", "application/at+jwt"})
PLAIN_JWT_TYPES: Final = frozenset({"jwt", "application/jwt"})
# A JWK Set larger than this is not read: a few dozen keys with their certificate chains fit.
MAX_JWKS_BYTES: Final = 256 * 1024
MAX_KEYS: Final = 100
# An unknown `kid` may mean the authorization server rotated its keys: fetch again, but no more
# often than this, so tokens with made-up kids cannot turn the server into a fetching loop.
REFETCH_INTERVAL: Final = 30.0
# A key set older than this is `stale`: the caller fetches it again, so a key the authorization
# server withdrew stops verifying within the hour, whether or not a token names an unknown kid.
MAX_KEYSET_AGE: Final = 3600.0
CACHE_ENTRIES: Final = 4096

Reason = Literal[
    "oversized",  # longer than MAX_TOKEN_BYTES
    "malformed",  # not three strict base64url parts of UTF-8 JSON objects
    "wrong_type",  # a header `typ` that is not an access token's
    "alg_not_allowed",  # `none`, HS*, any other algorithm, or one the key does not verify
    "unknown_key",  # no key in the set for the header's `kid`
    "bad_signature",
    "bad_claim",  # `exp` or `sub` missing, or a claim of the wrong type
    "wrong_issuer",
    "wrong_audience",
    "expired",
    "not_yet_valid",  # `nbf` or `iat` in the future, beyond the skew
]


@dataclass(frozen=True, slots=True)
class Valid:
    """A token that passed every check.

    Who it speaks for, what it allows, until when.
    """

    subject: str
    scopes: frozenset[str]
    expires_at: float
    claims: Mapping[str, Any] = field(repr=False, compare=False)

    def missing(self, needed: Iterable[str]) -> tuple[str, ...]:
        """The scopes of `needed` this token does not carry, in the order given.

        Any of them makes the call a 403.
        """
        return tuple(scope for scope in needed if scope not in self.scopes)


@dataclass(frozen=True, slots=True)
class Invalid:
    """A token refused, and a reason that names the check.

    The reason is short, and never holds the token.
    """

    reason: Reason


Verdict = Valid | Invalid


@dataclass(frozen=True, slots=True)
class Policy:
    """What a token must say to be accepted here.

    Its issuer and this resource, and how far the clocks may disagree.
    """

    issuer: str
    resource: str  # compared exactly: the configuration spells it as the tokens' `aud` does
    skew: float = DEFAULT_SKEW
    plain_jwt: bool = True  # accept `typ: JWT` beside RFC 9068's `at+jwt`

    def accepts_type(self, typ: object) -> bool:
        """Whether a header's `typ` names an access token.

        Or, when `plain_jwt` allows it, a plain JWT.
        """
        if not isinstance(typ, str):
            return False
        typ = typ.lower()
        return typ in AT_JWT_TYPES or (self.plain_jwt and typ in PLAIN_JWT_TYPES)


# ---- JSON, as JOSE reads it ------------------------------------------------------------------


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # RFC 7515 §4 and RFC 7519 §4: names MUST be unique; a parser either rejects duplicates or
    # keeps the last. Rejected here, so no two readers of one token can see two different claims.
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("a name given twice")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(name)  # NaN, Infinity and -Infinity are not JSON


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(text)
    return number


_DECODER: Final = json.JSONDecoder(object_pairs_hook=_unique, parse_constant=_no_constant, parse_float=_finite)


def _json_object(part: str) -> dict[str, Any] | None:
    """One base64url part → the JSON object it encodes, or None.

    The JSON is UTF-8 (RFC 7515 §5.2).
    """
    data = b64url_decode(part)
    if data is None:
        return None
    try:
        value = _DECODER.decode(data.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    if not isinstance(value, dict) or lone_surrogate(value) is not None:
        return None
    return value


# NumericDates are compared as floats: past 2**53 seconds (285 million years) one is not a date.
_LAST_DATE: Final = float(2**53)


def _number(value: object) -> float | None:
    """A NumericDate (RFC 7519 §2) as a float, or None.

    A JSON number, not a boolean, within a float's exact range.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not -_LAST_DATE <= value <= _LAST_DATE:
        return None
    return float(value)


# ---- the key set -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Loaded:
    """What one JWK Set document gave.

    The keys now in use, those left out and why, or why none.
    """

    kids: tuple[str | None, ...] = ()
    skipped: tuple[tuple[str | None, KeyRefusal], ...] = ()
    refused: str | None = None  # the document was not read; the keys before it stay


@dataclass(frozen=True, slots=True)
class _Keys:
    by_kid: Mapping[str, tuple[PublicKey, ...]]
    every: tuple[PublicKey, ...]
    members: frozenset[PublicKey]


_NO_KEYS: Final = _Keys(MappingProxyType({}), (), frozenset())


class KeySet:
    """The authorization server's signing keys as last fetched.

    It also says when to fetch them again.

    Sans-I/O: the caller fetches `jwks_uri` through the outbound seam and calls `load` with the
    bytes; `claim_refetch` says whether a fetch may start now (on an unknown `kid`, or when
    `stale`), at most once every `refetch_interval` seconds, and counts the one it allows.
    """

    __slots__ = ("_keys", "_last_attempt", "_loaded_at", "_lock", "max_age", "refetch_interval")

    def __init__(self, refetch_interval: float = REFETCH_INTERVAL, max_age: float = MAX_KEYSET_AGE) -> None:
        self.refetch_interval = refetch_interval
        self.max_age = max_age
        self._lock = threading.Lock()
        self._keys = _NO_KEYS  # replaced whole, never changed: readers need no lock
        self._loaded_at: float | None = None
        self._last_attempt: float | None = None

    def load(self, document: bytes, now: float) -> Loaded:
        """A fetched JWK Set (RFC 7517 §5) → the keys used from now on.

        A document that is not read keeps the old keys.
        """
        listed = _jwk_array(document)
        if isinstance(listed, str):
            return Loaded(refused=listed)
        kids: list[str | None] = []
        skipped: list[tuple[str | None, KeyRefusal]] = []
        keys: list[PublicKey] = []
        by_kid: dict[str, list[PublicKey]] = {}
        for jwk in listed:
            key = parse_jwk(jwk)
            if isinstance(key, Refused):
                kid = jwk.get("kid") if isinstance(jwk, dict) else None
                skipped.append((kid if isinstance(kid, str) else None, key.reason))
                continue
            keys.append(key)
            kids.append(key.kid)
            if key.kid is not None:
                by_kid.setdefault(key.kid, []).append(key)
        fresh = _Keys(
            MappingProxyType({kid: tuple(found) for kid, found in by_kid.items()}), tuple(keys), frozenset(keys)
        )
        with self._lock:
            self._keys = fresh
            self._loaded_at = now
        return Loaded(tuple(kids), tuple(skipped))

    def candidates(self, kid: str | None) -> tuple[PublicKey, ...]:
        """The keys a token with this `kid` may be verified with.

        Without a `kid`, the set's only key (none when it holds several).
        """
        keys = self._keys
        if kid is None:
            # RFC 7515 §4.1.4 lets a JWS omit `kid`; then the set must leave no choice.
            return keys.every if len(keys.every) == 1 else ()
        return keys.by_kid.get(kid, ())

    def holds(self, key: PublicKey) -> bool:
        """Whether `key` is still in the set.

        A remembered verdict is only as good as its key.
        """
        return key in self._keys.members

    def stale(self, now: float) -> bool:
        """Whether the keys were never loaded, or are older than `max_age`."""
        loaded_at = self._loaded_at
        return loaded_at is None or now - loaded_at >= self.max_age

    def claim_refetch(self, now: float) -> bool:
        """Whether the caller may fetch the key set now.

        True counts as the attempt, fetched or not.
        """
        with self._lock:
            if self._last_attempt is not None and 0 <= now - self._last_attempt < self.refetch_interval:
                return False
            self._last_attempt = now
            return True


def _jwk_array(document: bytes) -> list[object] | str:
    """A JWK Set's bytes → its `keys` array, or why the document is not read."""
    if len(document) > MAX_JWKS_BYTES:
        return f"larger than {MAX_JWKS_BYTES:,} bytes"
    try:
        value = _DECODER.decode(document.decode("utf-8"))
    except (ValueError, RecursionError):
        return "not strict JSON (UTF-8, each name once)"
    keys = value.get("keys") if isinstance(value, dict) else None
    if not isinstance(keys, list):
        return "not a JWK Set (no `keys` array)"
    if len(keys) > MAX_KEYS:
        return f"more than {MAX_KEYS} keys"
    return keys


# ---- the verdict -----------------------------------------------------------------------------


def _unread(token: str) -> Invalid | None:
    """Why a token is refused unread; None to read on.

    Checked before anything is made of it: before it is hashed, split or decoded.
    """
    if len(token) > MAX_TOKEN_BYTES:
        return Invalid("oversized")
    if not token.isascii():
        return Invalid("malformed")
    return None


def judge(token: str, policy: Policy, keys: KeySet, now: float) -> tuple[Verdict, PublicKey | None]:
    """A compact JWS access token → its verdict and the key that verified it.

    The key is None unless the verdict is Valid.
    """
    unread = _unread(token)
    if unread is not None:
        return unread, None
    # RFC 7515 §7.1: three base64url parts; five would be a JWE, which is not read here.
    parts = token.split(".")
    if len(parts) != 3:
        return Invalid("malformed"), None
    encoded_header, encoded_payload, encoded_signature = parts
    header = _json_object(encoded_header)
    if header is None:
        return Invalid("malformed"), None
    alg, kid = header.get("alg"), header.get("kid")
    if alg not in ALGORITHMS:
        return Invalid("alg_not_allowed"), None  # none, HS256 (a public key is no shared secret), …
    if not isinstance(kid, str | None):
        return Invalid("malformed"), None
    if "crit" in header:
        # RFC 7515 §4.1.11: extensions the recipient does not understand make the JWS invalid, and
        # none are understood here.
        return Invalid("malformed"), None
    if not policy.accepts_type(header.get("typ")):
        return Invalid("wrong_type"), None
    candidates = keys.candidates(kid)
    if not candidates:
        return Invalid("unknown_key"), None
    # The key decides the algorithm: the header's `alg` only has to agree with one of them.
    key = next((candidate for candidate in candidates if candidate.alg == alg), None)
    if key is None:
        return Invalid("alg_not_allowed"), None
    signature = b64url_decode(encoded_signature)
    if signature is None:
        return Invalid("malformed"), None
    # The payload is read only once its signature holds: what the decoder meets is the issuer's.
    if not verify(key, alg, f"{encoded_header}.{encoded_payload}".encode("ascii"), signature):
        return Invalid("bad_signature"), None
    claims = _json_object(encoded_payload)
    if claims is None:
        return Invalid("malformed"), None
    verdict = _claims_verdict(claims, policy, now)
    return verdict, key if isinstance(verdict, Valid) else None


def _claims_verdict(claims: dict[str, Any], policy: Policy, now: float) -> Verdict:
    """The claims of a verified token → its verdict.

    By the checks of RFC 9068 §4 and RFC 7519 §4.1.
    """
    if claims.get("iss") != policy.issuer:
        return Invalid("wrong_issuer")
    audience = claims.get("aud")
    if isinstance(audience, str):
        audience = [audience]
    if not isinstance(audience, list) or not all(isinstance(each, str) for each in audience):
        return Invalid("wrong_audience" if audience is None else "bad_claim")
    if policy.resource not in audience:
        return Invalid("wrong_audience")
    expires_at = _number(claims.get("exp"))
    if expires_at is None:
        return Invalid("bad_claim")
    if now >= expires_at + policy.skew:
        return Invalid("expired")
    for name in ("nbf", "iat"):
        if name in claims:
            moment = _number(claims[name])
            if moment is None:
                return Invalid("bad_claim")
            if moment > now + policy.skew:
                return Invalid("not_yet_valid")
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        return Invalid("bad_claim")
    scopes = _scopes(claims)
    if scopes is None:
        return Invalid("bad_claim")
    return Valid(subject, scopes, expires_at, MappingProxyType(claims))


def _scopes(claims: Mapping[str, Any]) -> frozenset[str] | None:
    """The scopes the claims grant; None when the claim is malformed.

    From `scope` (RFC 9068 §2.2.3: space-separated), else `scp` (a list, or Entra's string); with
    neither, none.
    """
    value = claims.get("scope", claims.get("scp"))
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(scope for scope in value.split(" ") if scope)
    if isinstance(value, list) and all(isinstance(scope, str) for scope in value):
        return frozenset(value)
    return None


# ---- remembered verdicts ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Remembered:
    verdict: Valid
    key: PublicKey


class VerdictCache:
    """Valid verdicts remembered by the SHA-256 of their token.

    Bounded, least recently used out, none past `exp`.

    Holds no token: only its digest, the verdict (subject, scopes, expiry, claims) and the key
    that verified it, so a verdict whose key has left the key set is not served.
    """

    __slots__ = ("_entries", "_lock", "capacity")

    def __init__(self, capacity: int = CACHE_ENTRIES) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, _Remembered] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, digest: bytes, now: float, keys: KeySet) -> Valid | None:
        with self._lock:
            entry = self._entries.get(digest)
            if entry is None:
                return None
            # Never served at or past `exp`, skew or not, nor once its key is gone from the set.
            if now >= entry.verdict.expires_at or not keys.holds(entry.key):
                del self._entries[digest]
                return None
            self._entries.move_to_end(digest)
            return entry.verdict

    def put(self, digest: bytes, verdict: Valid, key: PublicKey, now: float) -> None:
        if now >= verdict.expires_at or self.capacity <= 0:
            return
        with self._lock:
            self._entries[digest] = _Remembered(verdict, key)
            self._entries.move_to_end(digest)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)


class Validator:
    """Access tokens judged for one resource.

    It holds the policy, the key set, and the verdicts remembered.
    """

    __slots__ = ("cache", "keys", "policy")

    def __init__(self, policy: Policy, keys: KeySet, cache: VerdictCache | None = None) -> None:
        self.policy = policy
        self.keys = keys
        self.cache = VerdictCache() if cache is None else cache

    def remembered(self, token: str, now: float) -> Valid | None:
        """The verdict kept for `token` while it holds, or None.

        No signature checked: a hash and a lookup.
        """
        if _unread(token) is not None:
            return None
        return self.cache.get(hashlib.sha256(token.encode("ascii")).digest(), now, self.keys)

    def check(self, token: str, now: float) -> Verdict:
        """The token's verdict at `now` (seconds since the epoch).

        Remembered, or judged (and remembered when valid).
        """
        unread = _unread(token)
        if unread is not None:
            return unread  # before hashing: what a refused token costs does not grow with it
        digest = hashlib.sha256(token.encode("ascii")).digest()
        remembered = self.cache.get(digest, now, self.keys)
        if remembered is not None:
            return remembered
        verdict, key = judge(token, self.policy, self.keys, now)
        if isinstance(verdict, Valid) and key is not None:
            self.cache.put(digest, verdict, key, now)
        return verdict
