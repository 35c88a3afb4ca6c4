"""The member's credential never leaves in any spelling (issue 31): the spellings that broke it, from outside.

"The credential is in this text" has one definition (docs/security.md, redaction.py): decode
the text to a fixpoint (JSON escapes, `\\u` spelling `%`, `\\` or a hex digit included; `\\/`;
`%XX` of any byte), fold the case, and look for a run of MIN_RUN characters of the bearer.
`reference_decoded` below is that definition written the slow, obvious way, independently of
the server's code: it is the oracle every test here holds the server to.

What a client reads of a result: every key and string of the message, and each text block read
again as JSON (its keys and strings). Each spelling is echoed by a gateway double into an
answer, and read back through a real server process (stdio and HTTP) and the official SDK client.
"""

from __future__ import annotations

import base64
import json
import re
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any, Final

from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from tests.conftest import WAIT, run_stdio, server_env
from tests.mcp_http import post, serving
from tests.sandbox_gateway import SandboxGateway, v1_offer
from tests.test_answers import BIG, _strings, envelope
from tests.test_sdk_client import sdk

MIN_RUN: Final = 8
WAGERS: Final = "/v1/member/wagers"
WAGERS_CALL: Final = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers"}}


def server_url(server: Any) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/mcp"


# A slash or a plus every few characters: no run of 8 survives URL encoding, and `\/` splits it.
BEARER: Final = "fw1.Qa/Zb+Xc/Wd+Ve/Uf+Tg/Sh+Ri/Pj"

# ---- the definition, written independently ------------------------------------------------------

_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_SIMPLE: Final = {ord('"'): b'"', ord("\\"): b"\\", ord("/"): b"/", ord("b"): b"\b", ord("f"): b"\f"}
_SIMPLE.update({ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t"})


def _decode_once(data: bytes) -> bytes:
    """One pass, left to right: `%XX` → its byte, `\\uXXXX` → its character (UTF-8), `\\"`, `\\\\`, `\\/`… → theirs."""
    out = bytearray()
    i = 0
    while i < len(data):
        c = data[i]
        if c == ord("%") and i + 3 <= len(data) and all(b in _HEX for b in data[i + 1 : i + 3]):
            out.append(int(data[i + 1 : i + 3], 16))
            i += 3
            continue
        if c == ord("\\") and i + 1 < len(data):
            nxt = data[i + 1]
            if nxt == ord("u") and i + 6 <= len(data) and all(b in _HEX for b in data[i + 2 : i + 6]):
                out += chr(int(data[i + 2 : i + 6], 16)).encode("utf-8", "surrogatepass")
                i += 6
                continue
            if nxt in _SIMPLE:
                out += _SIMPLE[nxt]
                i += 2
                continue
        out.append(c)
        i += 1
    return bytes(out)


def reference_decoded(text: str) -> bytes:
    """The text as the definition reads it: decoded until nothing changes, ASCII letters and the Kelvin sign folded."""
    data = text.encode("utf-8", "surrogatepass")
    while True:
        decoded = _decode_once(data)
        if decoded == data:
            break
        data = decoded
    return data.lower().replace("\u212a".encode(), b"k")


def reference_holds(text: str, bearer: str) -> bool:
    """Whether `text` spells a run of MIN_RUN characters of `bearer` (printable ASCII) under the definition."""
    decoded = reference_decoded(text)
    folded = bearer.lower().encode()
    return any(folded[i : i + MIN_RUN] in decoded for i in range(len(folded) - MIN_RUN + 1))


def client_reads(message: Any) -> list[str]:
    """Every text a client reads of a message: its keys and strings, and each text block read again as JSON."""
    texts = list(_strings(message))
    result = message.get("result") if isinstance(message, dict) else None
    for block in result.get("content", []) if isinstance(result, dict) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            try:
                texts += _strings(json.loads(block["text"]))
            except ValueError:
                pass
    return texts


def leaks(message: Any, bearer: str = BEARER) -> list[str]:
    return [text[:160] for text in client_reads(message) if reference_holds(text, bearer)]


def test_the_reference_finds_the_bearer_in_each_spelling_and_nothing_in_its_pieces() -> None:
    for name, spell in SPELLINGS.items():
        text = json.loads('"' + spell(BEARER) + '"')
        assert reference_holds(text, BEARER) or reference_holds(spell(BEARER), BEARER), name
    assert not reference_holds("fw1.Qa/ and +Xc/Wd+ and Zb+Xc/W", BEARER)  # runs of 7 at most
    assert reference_holds("FW1.QA%2FZB", BEARER) and reference_holds("%5Cu0066w1.Qa/Z", BEARER)


# ---- the spellings --------------------------------------------------------------------------------
# Each returns JSON string content (what goes between the quotes of a gateway's JSON string).


def _url(bearer: str) -> str:
    return urllib.parse.quote(bearer, safe="")


def _inner_json(text: str) -> str:
    """JSON text holding `text` (already JSON string content), as a string inside the answer: escaped once more."""
    return json.dumps('{"t":"' + text + '"}')[1:-1]


SPELLINGS: Final[dict[str, Callable[[str], str]]] = {
    # finding 1: the URL-encoded bearer, `%` or a hex digit written as a JSON escape
    "percent-as-u0025": lambda b: _url(b).replace("%", "\\u0025"),
    "hex-digit-as-u003x": lambda b: re.sub(
        r"%([0-9A-F])([0-9A-F])", lambda m: "%" + "".join(f"\\u{ord(c):04x}" for c in m.groups()), _url(b)
    ),
    # finding 2: every byte URL-encoded; every character \u-escaped in JSON nested in a string
    "every-byte-percent": lambda b: "".join(f"%{x:02X}" for x in b.encode()),
    "every-char-u-nested": lambda b: _inner_json("".join(f"\\u{ord(c):04x}" for c in b)),
    # finding 3: nested JSON with `\/` (as PHP writes it), or `\u002f`
    "php-slashes-nested": lambda b: _inner_json(b.replace("/", "\\/")),
    "u002f-nested": lambda b: _inner_json(b.replace("/", "\\u002f")),
}


def _body(spelled: str, large: bool = False) -> bytes:
    if large:
        text = json.dumps(envelope(BIG), separators=(",", ":")).replace("w-101400", "w-101400 SPOT", 1)
    else:
        text = '{"chains":[],"message":"took SPOT"}'
    return text.replace("SPOT", spelled).encode()


def _offer(spelled: str) -> bytes:
    return json.dumps(v1_offer(WAGERS, error="refused SPOT")).replace("SPOT", spelled).encode()


CASES: Final = [(name, kind) for name in SPELLINGS for kind in ("small", "large", "offer")]


def _fault(gateway: SandboxGateway, name: str, kind: str) -> None:
    spelled = SPELLINGS[name](BEARER)
    if kind == "offer":
        gateway.fault(WAGERS, "status", status=402, body=_offer(spelled), times=1)
    else:
        gateway.fault(WAGERS, "status", status=200, body=_body(spelled, kind == "large"), times=1)


# ---- through a real server process --------------------------------------------------------------


def test_a_stdio_process_never_writes_back_the_bearer_in_any_spelling(sandbox: SandboxGateway) -> None:
    lines: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
        }
    ]
    for n, (name, kind) in enumerate(CASES):
        _fault(sandbox, name, kind)
        call = {"name": "get_wagers", "arguments": {}}
        lines.append({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call", "params": call})
    proc = run_stdio(lines, FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=BEARER)
    assert proc.returncode == 0, proc.stderr.decode()
    answers = {m["id"]: m for m in map(json.loads, proc.stdout.splitlines())}
    assert all(r.header("Authorization") == f"Bearer {BEARER}" for r in sandbox.seen)
    found = {f"{name} {kind}": leaks(answers[n + 1]) for n, (name, kind) in enumerate(CASES)}
    assert all("result" in answers[n + 1] for n in range(len(CASES)))
    assert not sorted(case for case, texts in found.items() if texts), found
    assert not reference_holds(proc.stderr.decode(), BEARER)


def test_what_a_view_reads_holds_no_spelling_of_the_bearer(sandbox: SandboxGateway) -> None:
    """A client declaring MCP Apps: each ui:// view it reads, and each result a view is handed, as a client reads it."""
    from mcp_server.core.apps import UI_EXTENSION, UI_MIME_TYPE
    from mcp_server.fairwins.views import VIEWS

    caps = {"extensions": {UI_EXTENSION: {"mimeTypes": [UI_MIME_TYPE]}}}
    init = {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "t", "version": "0"}}
    lines: list[dict[str, Any]] = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}]
    reads = [
        {"jsonrpc": "2.0", "id": f"view-{v.name}", "method": "resources/read", "params": {"uri": v.uri}} for v in VIEWS
    ]
    lines += reads
    for n, (name, kind) in enumerate(CASES):
        _fault(sandbox, name, kind)
        lines.append(
            {"jsonrpc": "2.0", "id": n + 1, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}}
        )
    proc = run_stdio(lines, FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=BEARER)
    assert proc.returncode == 0, proc.stderr.decode()
    answers = {m["id"]: m for m in map(json.loads, proc.stdout.splitlines())}
    assert answers[0]["result"]["capabilities"]["extensions"] == {UI_EXTENSION: {}}
    for read in reads:
        (contents,) = answers[read["id"]]["result"]["contents"]
        assert contents["mimeType"] == UI_MIME_TYPE and not leaks(answers[read["id"]])
    found = {f"{name} {kind}": leaks(answers[n + 1]) for n, (name, kind) in enumerate(CASES)}
    assert not sorted(case for case, texts in found.items() if texts), found


def test_an_http_server_never_writes_back_the_bearer_in_any_spelling(sandbox: SandboxGateway) -> None:
    found: dict[str, list[str]] = {}
    with serving(build_dispatcher(Config(api_url=sandbox.url, timeout=5.0))) as server:
        for name, kind in CASES:
            _fault(sandbox, name, kind)
            answer = post(server_url(server), WAGERS_CALL, {"Authorization": f"Bearer {BEARER}"}, timeout=WAIT)
            assert answer.status == 200, answer.body
            message = answer.response
            assert "result" in message, message
            texts = leaks(message) + [h for h in map(str, answer.headers.items()) if reference_holds(h, BEARER)]
            if texts:
                found[f"{name} {kind}"] = texts
    assert not sorted(found), found


def test_the_official_sdk_client_reads_no_spelling_of_the_bearer() -> None:
    names = sorted(SPELLINGS)
    with SandboxGateway() as gateway:
        for name in names:
            _fault(gateway, name, "small")
        report = sdk(
            "calls",
            "legacy",
            sys.executable,
            stdin="".join(json.dumps(["get_wagers", {}]) + "\n" for _ in names),
            env=server_env(FAIRWINS_API_URL=gateway.url, FAIRWINS_API_TOKEN=BEARER),
        )
    assert len(report["calls"]) == len(names)
    found = {
        name: [
            t[:120]
            for t in [call.get("text", ""), *_strings(call.get("structuredContent"))]
            if reference_holds(t, BEARER)
        ]
        for name, call in zip(names, report["calls"], strict=True)
    }
    assert not sorted(name for name, texts in found.items() if texts), found


# ---- finding 5: a payment's size and what is made of it ----------------------------------------------


def _payment_header(size: int) -> str:
    """A v1 payment whose signed transaction is `size` characters of base64: one long secret string."""
    blob = base64.b64encode(bytes(range(256)) * (size // 340 + 1)).decode()[:size]
    payload = {"x402Version": 1, "scheme": "exact", "network": "solana", "payload": {"transaction": blob}}
    return base64.b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()


def test_an_x_payment_header_over_what_any_x402_scheme_writes_is_refused_with_a_400(sandbox: SandboxGateway) -> None:
    header = _payment_header(46_000)  # about 63 KB once encoded: under the 64 KiB head limit
    assert 60_000 < len(header) < 64_000
    with serving(build_dispatcher(Config(api_url=sandbox.url, timeout=5.0))) as server:
        answer = post(server_url(server), WAGERS_CALL, {"X-PAYMENT": header}, timeout=WAIT)
    assert answer.status == 400, answer.body[:300]
    assert b"X-PAYMENT" in answer.body and b"KiB" in answer.body
    assert not sandbox.seen  # nothing went upstream


def test_the_needles_made_from_one_payment_are_bounded_in_number_and_size() -> None:
    from mcp_server.core import redaction
    from mcp_server.wire.x402 import MAX_PAYMENT_BYTES

    header = _payment_header(MAX_PAYMENT_BYTES * 3 // 4 - 200)
    assert len(header) <= MAX_PAYMENT_BYTES
    needles = redaction._payment_needles(header)
    assert len(needles) <= redaction.MAX_PAYMENT_NEEDLES
    searched_for_runs = [n for n in needles if n.min_run == redaction.MIN_RUN]
    assert sum(len(n.folded) for n in searched_for_runs) <= redaction.MAX_PAYMENT_NEEDLE_BYTES
    assert all(n.min_run == len(n.folded) for n in needles if n not in searched_for_runs)  # whole: one probe


def test_a_payment_over_16_kib_in_meta_over_stdio_is_invalid_params_and_nothing_is_sent(
    sandbox: SandboxGateway,
) -> None:
    payload = json.loads(base64.b64decode(_payment_header(13_000)))
    call = {"name": "get_wagers", "arguments": {}, "_meta": {"x402/payment": payload}}
    lines: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
        },
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
    ]
    proc = run_stdio(lines, FAIRWINS_API_URL=sandbox.url)
    answer = json.loads(proc.stdout.splitlines()[1])
    assert answer["error"]["code"] == -32602
    assert "over the 16 KiB any x402 payment takes; nothing was sent" in answer["error"]["message"]
    assert not sandbox.seen


def test_escapes_nested_past_the_rounds_the_definition_decodes_count_as_the_credential() -> None:
    from mcp_server.core.redaction import MAX_ROUNDS, Redactor, decoded

    def nest(text: str, levels: int) -> str:
        for _ in range(levels):
            text = text.replace("%", "%25")
        return text

    spelled = "".join(f"%{ord(c):02X}" for c in BEARER)
    redactor = Redactor(BEARER, None)
    within = f"took {nest(spelled, MAX_ROUNDS - 1)} then"  # MAX_ROUNDS rounds: decoded through
    assert reference_holds(within, BEARER) and decoded(within.encode()) is not None
    assert redactor.might_be_in(within.encode()) and not reference_holds(redactor.scrub(within), BEARER)
    assert redactor.scrub(within).startswith("took ") and redactor.scrub(within).endswith(" then")
    past = f"took {nest('%41', MAX_ROUNDS)} then"  # MAX_ROUNDS + 1 rounds: still changing, counted as a match
    assert decoded(past.encode()) is None
    assert redactor.might_be_in(past.encode()) and redactor.scrub(past) == "(credential not shown)"
