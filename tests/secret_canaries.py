"""The whole test run watches for secrets: every fairwins_mcp log record and every server output a helper reads.

Secrets are canaries: the sandbox's member tokens, a canary token the sandbox does not know,
canary x402 payments (a v1 and a v2 payload, as `params._meta` carries them and as the base64
header value the gateway receives), and the OAuth access tokens a test registers as it mints them
(`canary_access_token`: real signed JWTs of the sandbox authorization server). None may appear in
any log record, captured process output, error or result of the run, except a token's redacted
form (`fw1.…abcd`, which holds none of the secret part searched for). tests/test_secrets.py and
tests/test_oauth_secrets.py drive every path with them; this module's hooks, imported by
conftest.py, record the whole session and fail it if anything leaked. The
MCP Apps views are watched too: every report of the browser test host (what each view's DOM held
and the results it was handed) is recorded as an output (tests/apps_host.py).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import traceback
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any, Final

import pytest

from tests.sandbox_gateway import (
    PAY_TO,
    PAYER_ACCOUNT,
    TOKEN_EXPIRED,
    TOKEN_MEMBER_A,
    TOKEN_MEMBER_B,
    TOKEN_PROFILE_ONLY,
    V2_OFFER,
)

CANARY_TOKEN: Final = "fw1.canary-token-0d9f7c1e5b2a-Zq7x"  # unknown to the sandbox: a refused token
# Bearers the pattern rules (`fw1.…`) never recognised, for a gateway that writes them back
# (tests/test_redaction.py): a secret after a colon, upper case, and one not starting with fw1.
COLON_TOKEN: Final = "fw1.ab:SECRETcolon7Hq2Lx9Vd4Rm-w3Pz"
UPPER_TOKEN: Final = "FW1.UPPERCANARY5TZ8KP3WQ6NY-J4XB"
OPAQUE_TOKEN: Final = "opaque_canary_3Gm9Xr2Bv7Lc-Q8dF"
ECHO_TOKENS: Final = (COLON_TOKEN, UPPER_TOKEN, OPAQUE_TOKEN)
PAYMENT_SIGNATURE: Final = "0xPAYMENTCANARY5c1d0e9f" + "ab" * 40


def canary_payment(version: int) -> dict[str, Any]:
    """An x402 PaymentPayload as a client signs it; its signature and nonce are the canaries."""
    authorization = {
        "from": PAYER_ACCOUNT,
        "to": PAY_TO,
        "value": "20000",
        "validAfter": "1764440000",
        "validBefore": "1764440300",
        "nonce": "0xNONCECANARY" + "cd" * 26,
    }
    payload = {"signature": PAYMENT_SIGNATURE, "authorization": authorization}
    if version == 1:
        return {"x402Version": 1, "scheme": "exact", "network": "polygon", "payload": payload}
    offer: dict[str, Any] = V2_OFFER
    return {"x402Version": 2, "resource": offer["resource"], "accepted": offer["accepts"][0], "payload": payload}


def header_value(payload: dict[str, Any]) -> str:
    """What goes upstream: standard base64 of compact UTF-8 JSON (docs/payments.md)."""
    return base64.b64encode(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()).decode()


def pretty_header_value(payload: dict[str, Any]) -> str:
    """A payment header some clients send: base64 of pretty-printed JSON (`ewog…`), forwarded as it is."""
    return base64.b64encode(json.dumps(payload, indent=2).encode()).decode()


def _secret_part_of_token(token: str) -> str:
    # Everything the redacted form `fw1.…abcd` leaves out.
    return token.removeprefix("fw1.")[:-4]


def _base64_window(encoded: str, raw: bytes, secret: bytes) -> str:
    """The stretch of `encoded` that encodes only bytes of `secret` (whole 3-byte groups inside it)."""
    start = raw.index(secret)
    first = -(-start // 3)
    last = (start + len(secret)) // 3
    return encoded[first * 4 : last * 4]


# OAuth access tokens registered during the run: name → the secret parts of one token.
_ACCESS_TOKENS: Final[dict[str, str]] = {}
_ACCESS_LOCK: Final = threading.Lock()
FRAGMENT: Final = 16  # characters: the shortest run of an access token's secret parts a leak may be
_BASE64URL_RUN: Final = re.compile(rf"[A-Za-z0-9_-]{{{FRAGMENT},}}")


def access_token_parts(token: str) -> dict[str, str]:
    """The parts of a compact JWS that are the member's: its claims and its signature, as they are encoded.

    The header is left out: it names the algorithm and the key, the same for every token of that key.
    """
    parts = token.split(".")
    found = {}
    if len(parts) >= 2 and parts[1]:
        found["claims"] = parts[1]
    if len(parts) >= 3 and parts[2]:
        found["signature"] = parts[2][:-4]  # all but what a redacted form (`…abcd`) may show
    return found


def canary_access_token(token: str, name: str) -> str:
    """`token`, watched for by the rest of the run (its claims and its signature, anywhere); returned."""
    with _ACCESS_LOCK:
        for part, value in access_token_parts(token).items():
            _ACCESS_TOKENS.setdefault(value, f"access token {name} (…{value[-4:]}), {part}")
    return token


def fragments_found(texts: Iterable[tuple[str, str]], tokens: Iterable[str], width: int = FRAGMENT) -> list[str]:
    """Each place where `width` or more characters in a row of a token's secret parts appear.

    Stricter than `Recorder.leaks` (which looks for whole parts): a line cut short, or a part split
    across two fields, is found too. Every window of the parts goes in one set, and each run of
    base64url characters in a text (as it is, and with its case and encodings undone) is looked up
    a window at a time.
    """
    windows: dict[str, str] = {}
    for token in tokens:
        for part, value in access_token_parts(token).items():
            for at in range(len(value) - width + 1):
                windows.setdefault(value[at : at + width], f"access token …{token[-4:]}, {part}")
    folded_windows = {window.casefold(): name for window, name in windows.items()}
    found = []
    for where, text in texts:
        for wanted, seen in ((windows, text), (folded_windows, folded(text))):
            hit = _first_window(seen, wanted, width)
            if hit is not None:
                name, at = hit
                found.append(f"{name} ({width}+ characters) in {where}: …{seen[max(at - 80, 0) :][:200]}…")
                break
    return found


def _first_window(text: str, wanted: dict[str, str], width: int) -> tuple[str, int] | None:
    """The name of the first window of `wanted` inside a base64url run of `text`, and where it starts."""
    for run in _BASE64URL_RUN.finditer(text):
        chars = run.group()
        for at in range(len(chars) - width + 1):
            name = wanted.get(chars[at : at + width])
            if name is not None:
                return name, run.start() + at
    return None


def secrets() -> dict[str, str]:
    """Name → a string that must never be found. Each is specific enough never to occur by chance."""
    found = {
        f"token {t[-4:]}": _secret_part_of_token(t)
        for t in (TOKEN_MEMBER_A, TOKEN_MEMBER_B, TOKEN_PROFILE_ONLY, TOKEN_EXPIRED)
    }
    found["canary token"] = _secret_part_of_token(CANARY_TOKEN)
    for token in ECHO_TOKENS:
        found[f"echo token {token[-4:]}"] = _secret_part_of_token(token)
    found["echo token after its colon"] = COLON_TOKEN.partition(":")[2][:-4]
    found["payment signature"] = PAYMENT_SIGNATURE[2:]
    found["payment nonce"] = "NONCECANARY" + "cd" * 26
    for version in (1, 2):
        encoded = header_value(canary_payment(version))
        raw = base64.b64decode(encoded)
        found[f"v{version} payment header"] = encoded
        found[f"v{version} payment header, signature part"] = _base64_window(encoded, raw, PAYMENT_SIGNATURE.encode())
        pretty = pretty_header_value(canary_payment(version))
        found[f"v{version} pretty payment header, signature part"] = _base64_window(
            pretty, base64.b64decode(pretty), PAYMENT_SIGNATURE.encode()
        )
    with _ACCESS_LOCK:
        found.update({name: value for value, name in _ACCESS_TOKENS.items()})
    return found


_UNICODE_ESCAPE: Final = re.compile(r"\\u([0-9a-fA-F]{4})")


def folded(text: str) -> str:
    """`text` with the encodings a secret could hide behind undone, in one case: %XX, \\/ and \\uXXXX.

    Undone until nothing changes (at most three times): a JSON text quoted inside JSON escapes twice.
    """
    for _ in range(3):
        before = text
        text = text.replace("\\/", "/")
        if "%" in text:
            text = urllib.parse.unquote(text)
        if "\\u" in text:
            text = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
        if text == before:
            break
    return text.casefold()


class Recorder:
    """Everything the server said during the run: log records (as formatted text) and process outputs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.texts: list[tuple[str, str]] = []  # (where, text)
        self.records = 0

    def add(self, where: str, text: str) -> None:
        with self._lock:
            self.texts.append((where, text))

    def mark(self) -> int:
        with self._lock:
            return len(self.texts)

    def since(self, mark: int) -> list[tuple[str, str]]:
        with self._lock:
            return list(self.texts[mark:])

    def leaks(self, texts: Iterable[tuple[str, str]] | None = None) -> list[str]:
        """Each secret found in a text as it is, or once its case and encodings are undone."""
        wanted = {name: (secret, secret.casefold()) for name, secret in secrets().items()}
        found = []
        for where, text in self.texts if texts is None else texts:
            plain = folded(text)
            for name, (secret, secret_folded) in wanted.items():
                if secret in text:
                    found.append(f"{name} in {where}: …{text[max(text.index(secret) - 80, 0) :][:200]}…")
                elif secret_folded in plain:
                    at = plain.index(secret_folded)
                    found.append(f"{name} (case or encoding changed) in {where}: …{plain[max(at - 80, 0) :][:200]}…")
        return found


RECORDER: Final = Recorder()
_previous_factory: Callable[..., logging.LogRecord] | None = None
_previous_level: int | None = None


def record_output(where: str, text: str | bytes) -> None:
    """For helpers that read a server's stdout or stderr: hand it over to be scanned."""
    RECORDER.add(where, text.decode("utf-8", "replace") if isinstance(text, bytes) else text)


def _factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
    assert _previous_factory is not None
    record = _previous_factory(*args, **kwargs)
    if record.name == "fairwins_mcp" or record.name.startswith("fairwins_mcp."):
        # Formatted at once, before any filter scrubs it and while exc_info is at hand: a secret
        # that only a scrubbing filter keeps out of stderr is still a secret the code logged.
        try:
            text = record.getMessage()
        except Exception as exc:  # a bad format string is the test's concern elsewhere
            text = f"{record.msg!r} {record.args!r} ({exc})"
        if record.exc_info and record.exc_info[1] is not None:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info))
        RECORDER.records += 1
        RECORDER.add(f"log record {record.name}:{record.levelname}", text)
    return record


def pytest_configure(config: pytest.Config) -> None:
    global _previous_factory, _previous_level
    _previous_factory = logging.getLogRecordFactory()
    logging.setLogRecordFactory(_factory)
    logger = logging.getLogger("fairwins_mcp")
    _previous_level = logger.level
    logger.setLevel(logging.DEBUG)  # every record is made, so every record is seen


def pytest_unconfigure(config: pytest.Config) -> None:
    if _previous_factory is not None:
        logging.setLogRecordFactory(_previous_factory)
    if _previous_level is not None:
        logging.getLogger("fairwins_mcp").setLevel(_previous_level)


# Under pytest-xdist (make test) each worker scans what its own tests made and hands its findings
# to the controller (xdist's workeroutput), which fails the run and prints the one summary: a
# worker's own exit status would not fail it.
_FROM_WORKERS: Final[dict[str, Any]] = {"leaks": [], "records": 0, "outputs": 0}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    leaks = RECORDER.leaks()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller decides
        workeroutput["fairwins_secrets"] = {
            "leaks": leaks,
            "records": RECORDER.records,
            "outputs": len(RECORDER.texts) - RECORDER.records,
        }
        return
    leaks += _FROM_WORKERS["leaks"]
    if leaks:
        session.config._fairwins_leaks = leaks  # type: ignore[attr-defined]
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """An xdist worker is done: what its scan found, and what it scanned."""
    found = getattr(node, "workeroutput", {}).get("fairwins_secrets")
    if found is None:
        if error is None:  # a worker that finished must have reported; one that crashed fails anyway
            _FROM_WORKERS["leaks"].append(f"xdist worker {getattr(node, 'gateway', node)} reported no secret scan")
        return
    _FROM_WORKERS["leaks"] += found["leaks"]
    _FROM_WORKERS["records"] += found["records"]
    _FROM_WORKERS["outputs"] += found["outputs"]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if getattr(config, "workeroutput", None) is not None:
        return
    leaks: list[str] = getattr(config, "_fairwins_leaks", [])
    records = RECORDER.records + _FROM_WORKERS["records"]
    outputs = len(RECORDER.texts) - RECORDER.records + _FROM_WORKERS["outputs"]
    scanned = f"{records} log records and {outputs} server outputs"
    if leaks:
        terminalreporter.section("secrets leaked", sep="!", red=True)
        for leak in leaks:
            terminalreporter.line(leak, red=True)
        terminalreporter.line(f"{len(leaks)} leaks in {scanned}", red=True)
    elif records or outputs:
        terminalreporter.line(f"secrets: {scanned} scanned, no token or payment found")
