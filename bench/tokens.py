"""What checking an OAuth access token costs (issue 60): signatures, a whole verdict, a remembered one.

    python3 -m bench.tokens            best of five runs of each, about ten seconds
    python3 -m bench.tokens --quick    a smoke run in a second or two

In this process, microseconds per call: `jws.verify` for RS256 and PS256 (2048 and 3072 bits)
and ES256 (P-256), with `cryptography` (OpenSSL) on the same signatures beside them for scale;
a whole `judge` of an RFC 9068 access token (parse, key by kid, signature, claims) for RS256
and ES256; and `Validator.check` on a token it has seen (its SHA-256, one lookup), with the
SHA-256 alone beside it; and the redaction every call pays for its own bearer
(`Redactor.might_be_in` on a get_wagers answer that holds none of it, a redactor a call), for a
`fw1.` token and the RS256 access token, by the answer's size. The tokens are minted with
`cryptography`, a development dependency (pyproject.toml); what is measured is the server's
standard-library code.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

from bench.prefilter import wagers
from mcp_server.core.redaction import Redactor
from mcp_server.wire import jws
from mcp_server.wire.access_tokens import KeySet, Policy, Valid, Validator, judge

ISSUER: Final = "https://auth.fairwins.example"
RESOURCE: Final = "https://mcp.fairwins.example/mcp"
NOW: Final = 1_800_000_000
PSS: Final = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
FW1: Final = "fw1.Zq8vKt3RmXp7LwYd2NcBxE5u"  # a member's token, as long as one
WORDS: Final = "Lakers beat the Celtics on Dec 1, café crème"  # a wager's description


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def uint(value: int, length: int | None = None) -> str:
    return b64(value.to_bytes(length or (value.bit_length() + 7) // 8, "big"))


def best(run: Callable[[], object], calls: int, rounds: int) -> float:
    """The fastest of `rounds` runs of `calls` calls, in microseconds per call."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            run()
        times.append((time.perf_counter() - started) / calls)
    return min(times) * 1e6


def claims() -> dict[str, Any]:
    """A token's claims as an authorization server issues them for this resource (about 0.3 KB)."""
    return {
        "iss": ISSUER,
        "aud": RESOURCE,
        "sub": "member-7f3a9c",
        "client_id": "https://claude.ai/oauth/mcp-oauth-client-metadata",
        "iat": NOW - 10,
        "exp": NOW + 3600,
        "jti": "b2f1d6a0c4e8",
        "scope": "wagers:read markets:read intents:build",
    }


def part(value: dict[str, Any]) -> str:
    return b64(json.dumps(value, separators=(",", ":")).encode())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.tokens", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds: a smoke run")
    args = parser.parse_args(argv)
    scale, rounds = (0.1, 2) if args.quick else (1.0, 5)

    def calls(n: int) -> int:
        return max(1, int(n * scale))

    rsa2048 = rsa.generate_private_key(65537, 2048)
    rsa3072 = rsa.generate_private_key(65537, 3072)
    p256 = ec.generate_private_key(ec.SECP256R1())
    message = f"{part({'alg': 'RS256', 'typ': 'at+jwt', 'kid': 'k'})}.{part(claims())}".encode()

    def rsa_jwk(private: rsa.RSAPrivateKey, alg: str, kid: str) -> dict[str, str]:
        numbers = private.public_key().public_numbers()
        return {"kty": "RSA", "n": uint(numbers.n), "e": uint(numbers.e), "alg": alg, "kid": kid}

    p256_numbers = p256.public_key().public_numbers()
    p256_jwk = {"kty": "EC", "crv": "P-256", "x": uint(p256_numbers.x, 32), "y": uint(p256_numbers.y, 32)}
    p256_jwk["kid"] = "ec"

    def es256(data: bytes) -> bytes:
        r, s = utils.decode_dss_signature(p256.sign(data, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")

    print(f"{'signature (' + str(len(message)) + ' B signed)':34s} {'ours µs':>9s} {'OpenSSL µs':>11s}")
    signatures: list[tuple[str, dict[str, str], str, bytes, Callable[[bytes], None]]] = []
    for private, bits in ((rsa2048, 2048), (rsa3072, 3072)):
        public = private.public_key()
        rs = private.sign(message, padding.PKCS1v15(), hashes.SHA256())
        ps = private.sign(message, PSS, hashes.SHA256())
        signatures.append(
            (
                f"RS256, RSA {bits}",
                rsa_jwk(private, "RS256", "r"),
                "RS256",
                rs,
                lambda m, s=rs, k=public: k.verify(s, m, padding.PKCS1v15(), hashes.SHA256()),
            )
        )
        signatures.append(
            (
                f"PS256, RSA {bits}",
                rsa_jwk(private, "PS256", "p"),
                "PS256",
                ps,
                lambda m, s=ps, k=public: k.verify(s, m, PSS, hashes.SHA256()),
            )
        )
    der = p256.sign(message, ec.ECDSA(hashes.SHA256()))
    raw_r, raw_s = utils.decode_dss_signature(der)
    raw = raw_r.to_bytes(32, "big") + raw_s.to_bytes(32, "big")
    signatures.append(
        (
            "ES256, P-256",
            p256_jwk,
            "ES256",
            raw,
            lambda m: p256.public_key().verify(der, m, ec.ECDSA(hashes.SHA256())),
        )
    )
    for name, jwk, alg, signature, theirs in signatures:
        key = jws.parse_jwk(jwk)
        assert not isinstance(key, jws.Refused) and jws.verify(key, alg, message, signature)
        n = calls(200 if alg == "ES256" else 2000)
        ours_us = best(lambda k=key, a=alg, s=signature: jws.verify(k, a, message, s), n, rounds)
        openssl_us = best(lambda t=theirs: t(message), n, rounds)
        print(f"{name:34s} {ours_us:9.1f} {openssl_us:11.1f}")

    keys = KeySet()
    document = json.dumps({"keys": [rsa_jwk(rsa2048, "RS256", "r"), p256_jwk]}).encode()
    assert keys.load(document, NOW).refused is None
    policy = Policy(ISSUER, RESOURCE)
    rs_input = f"{part({'alg': 'RS256', 'typ': 'at+jwt', 'kid': 'r'})}.{part(claims())}"
    rs_token = f"{rs_input}.{b64(rsa2048.sign(rs_input.encode(), padding.PKCS1v15(), hashes.SHA256()))}"
    es_input = f"{part({'alg': 'ES256', 'typ': 'at+jwt', 'kid': 'ec'})}.{part(claims())}"
    es_token = f"{es_input}.{b64(es256(es_input.encode()))}"
    print()
    print(f"{'access token verdict':34s} {'µs':>9s} {'bytes':>11s}")
    for name, token, n in (("judged, RS256 2048", rs_token, 2000), ("judged, ES256", es_token, 200)):
        assert isinstance(judge(token, policy, keys, NOW)[0], Valid)
        print(f"{name:34s} {best(lambda t=token: judge(t, policy, keys, NOW), calls(n), rounds):9.1f} {len(token):11d}")
    validator = Validator(policy, keys)
    assert isinstance(validator.check(rs_token, NOW), Valid)
    hit = best(lambda: validator.check(rs_token, NOW), calls(100_000), rounds)
    print(f"{'remembered (a token seen before)':34s} {hit:9.2f} {len(rs_token):11d}")
    digest = best(lambda: hashlib.sha256(rs_token.encode("ascii")).digest(), calls(100_000), rounds)
    print(f"{'  of which its SHA-256':34s} {digest:9.2f}")
    print()
    print(f"{'redaction of the bearer, per answer':34s} {'fw1. µs':>9s} {'token µs':>11s} {'answer B':>9s}")
    for count in (3, 30, 300, 1500):
        body = json.dumps(wagers(count, WORDS), separators=(",", ":"), ensure_ascii=False).encode()
        costs = []
        for bearer in (FW1, rs_token):
            assert not Redactor(bearer, None).might_be_in(body)

            def redact(bearer: str = bearer, body: bytes = body) -> bool:
                # A redactor a request, as the server makes one: nothing of a bearer is kept between them.
                return Redactor(bearer, None).might_be_in(body)

            costs.append(best(redact, calls(300_000 // count), rounds))
        print(f"{'  get_wagers, ' + str(count) + ' wagers':34s} {costs[0]:9.1f} {costs[1]:11.1f} {len(body):9,d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
