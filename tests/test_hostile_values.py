"""Hostile values from either side end as honest answers: never a traceback, never -32603.

From the gateway: any `Retry-After` (huge, non-ASCII digits, negative, fractional, a date long
past or far ahead, garbage), odd lengths and numbers, and every way a paid call can end, which
always keeps its words about the payment. From the client: lone UTF-16 surrogates anywhere in a
request's params and over-long integer strings, refused with -32602 naming the argument before
anything reaches the gateway. Pure functions first, then the dispatcher over the sandbox gateway,
then the stdio server as a process and the HTTP server on a real socket.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_server.core.catalog import Catalog
from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher
from mcp_server.fairwins import payments
from mcp_server.fairwins.outcomes import Wording, describe_failure
from mcp_server.fairwins.snapshot import load
from mcp_server.fairwins.tools import GatewayTool
from mcp_server.setup.config import Config, ConfigError, from_env, parse_args
from mcp_server.setup.server import build_catalog, build_dispatcher
from mcp_server.upstream.gateway import Gateway, GatewayFailure, GatewayRequest, GatewayResponse, Target
from mcp_server.upstream.retry_after import retry_after_seconds
from mcp_server.wire import x402
from mcp_server.wire.jsonrpc import Invalid, JSONObject, McpError, loads, lone_surrogate, parse
from tests.conftest import WAIT, McpClient, client_for, run_stdio
from tests.mcp_http import LegacyClient, ModernClient, modern_meta, serving
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.secret_canaries import canary_payment

WAGERS = "/v1/member/wagers"
NOW = 1_795_982_400.0  # 2026-11-29T20:00:00Z
DO_NOT_RESUBMIT = "Do not resubmit this payment"
INTENT = {"intent": "create_wager", "chainId": 137, "params": {"stake": "1.00"}}

# ---- Retry-After, pure ---------------------------------------------------------------------------

HOSTILE_RETRY_AFTER = [
    "9" * 400,  # float() makes it inf; inf // 60 is nan
    "9" * 5000,  # over Python's int() digit limit
    "²",  # str.isdigit() says yes, int() and float() say no
    "¹²³",
    "١٢",  # Arabic-Indic digits
    "１２",  # fullwidth digits
    "-5",
    "+5",
    "1.5",
    "1e9",
    "0x10",
    "5 6",
    "",
    "   ",
    "soon",
    "Mon, 01 Jan 0001 00:00:00 -0000",
    "Fri, 31 Dec 9999 23:59:59 GMT",
    "Sat, 31 Dec 99999 23:59:59 GMT",
    "Sun, 30 Feb 2026 00:00:00 GMT",
    "Sun, 29 Nov 2026 25:61:61 GMT",
    "Sun, 29 Nov 2026 20:00:10 PST",
    "Sunday, 29-Nov-26 20:00:10 GMT",
    "Sun Nov 29 20:00:10 2026",
    "\x00\x01",
    "Ù¡",  # UTF-8 bytes of "١" read as latin-1, as the gateway client reads header bytes
]


@pytest.mark.parametrize("value", HOSTILE_RETRY_AFTER, ids=lambda v: repr(v)[:24])
def test_any_retry_after_is_read_or_ignored_never_raised(value: str) -> None:
    seconds = retry_after_seconds(value, now=NOW)
    assert seconds is None or (math.isfinite(seconds) and seconds >= 0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        (" 0 ", 0.0),
        ("007", 7.0),
        ("\t30", 30.0),
        ("9" * 400, None),
        ("²", None),
        ("١٢", None),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("Sun, 29 Nov 2026 20:00:10 GMT", 10.0),  # IMF-fixdate
        ("Sunday, 29-Nov-26 20:00:10 GMT", 10.0),  # RFC 850
        ("Sun Nov 29 20:00:10 2026", 10.0),  # asctime
        ("Sun Nov  1 20:00:00 2026", 0.0),  # asctime's padded day, in the past
        ("Sun, 29 Nov 2026 19:00:00 GMT", 0.0),  # in the past: no wait
        ("Mon, 01 Jan 0001 00:00:00 GMT", 0.0),
        ("Fri, 31 Dec 9999 23:59:59 GMT", 253402300799.0 - NOW),
        ("Sun, 30 Feb 2026 00:00:00 GMT", None),
        ("Sun, 29 Nov 2026 20:00:10 PST", None),  # RFC 9110: an HTTP-date is always GMT
    ],
)
def test_retry_after_reads_delay_seconds_and_the_three_http_date_forms(value: str, expected: float | None) -> None:
    assert retry_after_seconds(value, now=NOW) == (None if expected is None else pytest.approx(expected))


# ---- Retry-After through the sandbox ---------------------------------------------------------------


def words(result: dict[str, Any]) -> str:
    return " ".join(block["text"] for block in result["content"] if block.get("type") == "text")


def answered(message: dict[str, Any]) -> dict[str, Any]:
    assert "result" in message, f"a JSON-RPC error instead of a result: {message}"
    result: dict[str, Any] = message["result"]
    return result


def paid_call(mcp: McpClient, name: str = "get_wagers", arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {x402.PAYMENT_META_KEY: canary_payment(1 if name == "get_wagers" else 2)}
    return mcp.request("tools/call", {"name": name, "arguments": arguments or {}, "_meta": meta})


@pytest.mark.parametrize("value", HOSTILE_RETRY_AFTER, ids=lambda v: repr(v)[:24])
def test_a_429_with_any_retry_after_is_an_honest_rate_limit_paid_or_not(sandbox: SandboxGateway, value: str) -> None:
    mcp = client_for(sandbox.url, timeout=1.0)
    raw = value.encode("latin-1", "replace")
    head = b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: " + raw
    body = b'{"error":"quota_exceeded","message":"slow down"}'
    head += b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    sandbox.fault(WAGERS, "raw", head=head, body=body)  # every attempt of the GET, retries included
    unpaid = answered(mcp.request("tools/call", {"name": "get_wagers", "arguments": {}}, bearer=TOKEN_MEMBER_A))
    assert unpaid["isError"] is True and "rate-limiting" in words(unpaid)
    paid = answered(paid_call(mcp))
    assert paid["isError"] is True and "rate-limiting" in words(paid)
    assert DO_NOT_RESUBMIT in words(paid)


@pytest.mark.parametrize("value", ["²", "9" * 400, "١", "-1", "Fri, 31 Dec 9999 23:59:59 GMT"], ids=repr)
@pytest.mark.parametrize("status", [429, 503])
def test_a_retried_get_reads_any_retry_after_and_ends_within_its_deadline(
    sandbox: SandboxGateway, value: str, status: int
) -> None:
    sandbox.fault(WAGERS, "status", status=status, headers={"Retry-After": value}, times=1)
    result = answered(
        client_for(sandbox.url, timeout=1.0).request(
            "tools/call", {"name": "get_wagers", "arguments": {}}, bearer=TOKEN_MEMBER_A
        )
    )
    # Either the retry (after a backoff of our own) was answered, or the 429/503 is reported.
    assert result["isError"] is False or "rate-limiting" in words(result) or "service behind it" in words(result)


def test_a_retry_after_of_days_is_stated_in_days(sandbox: SandboxGateway) -> None:
    sandbox.fault(WAGERS, "status", status=429, headers={"Retry-After": str(400 * 86400)})
    text = words(client_for(sandbox.url, timeout=1.0).call_tool("get_wagers", bearer=TOKEN_MEMBER_A))
    assert "retry after 400 d" in text


# ---- odd numbers from the gateway --------------------------------------------------------------------


def test_a_content_length_of_five_thousand_digits_is_an_answer_too_large_not_a_connection_failure(
    sandbox: SandboxGateway,
) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n"
    sandbox.fault(WAGERS, "raw", head=head, body=b"{}")
    text = words(client_for(sandbox.url).call_tool("get_wagers", bearer=TOKEN_MEMBER_A))
    assert "over the 4 MiB limit" in text and "connection failed" not in text


def test_a_json_number_of_five_thousand_digits_is_named_as_such(sandbox: SandboxGateway) -> None:
    sandbox.fault(WAGERS, "status", status=200, body=b'{"chains":[],"n":' + b"7" * 5000 + b"}")
    text = words(client_for(sandbox.url).call_tool("get_wagers", bearer=TOKEN_MEMBER_A))
    assert "could not be read" in text and "a number over 4300 digits long" in text


# ---- a paid call on every path it can end by -----------------------------------------------------------

# Words that settle what happened to the payment; any other failure must say "do not resubmit".
SETTLED = ("Paid per request", "did not settle", "did not accept the payment", "was not sent anywhere")


def honest_about_the_payment(result: dict[str, Any]) -> str:
    text = words(result)
    if result["isError"] is True:
        assert DO_NOT_RESUBMIT in text or any(phrase in text for phrase in SETTLED), text
    else:
        assert "Paid per request" in text or DO_NOT_RESUBMIT in text, text
    return text


def _raw(status: bytes, *headers: bytes, body: bytes = b"{}") -> dict[str, Any]:
    head = b"HTTP/1.1 " + status + b"\r\n" + b"".join(h + b"\r\n" for h in headers)
    head += b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    return {"kind": "raw", "head": head, "body": body}


PAID_PATHS: dict[str, dict[str, Any]] = {
    **{
        f"status {s}": {"kind": "status", "status": s}
        for s in (200, 201, 204, 301, 400, 401, 403, 404, 409, 418, 429, 500, 502, 503, 504, 599)
    },
    "429 odd retry-after": {"kind": "status", "status": 429, "headers": {"Retry-After": "²"}},
    "503 huge retry-after": {"kind": "status", "status": 503, "headers": {"Retry-After": "9" * 400}},
    "redirect": {"kind": "redirect"},
    "html": {"kind": "html"},
    "empty": {"kind": "empty"},
    "not json": {"kind": "not_json"},
    "invalid utf-8": {"kind": "invalid_utf8"},
    "deep json": {"kind": "deep_json"},
    "too large": {"kind": "large", "size": 5 * 1024 * 1024},
    "reset before": {"kind": "reset_before"},
    "reset mid body": {"kind": "reset_mid_body"},
    "timeout": {"kind": "delay", "seconds": 3.0},
    "bare 402": {"kind": "bare_402"},
    "402 empty object": {"kind": "status", "status": 402, "body": {}},
    "settlement failed": {"kind": "settlement_failed"},
    "approval 412": {"kind": "approval_412"},
    "receipt not base64": _raw(b"200 OK", b"Content-Type: application/json", b"PAYMENT-RESPONSE: !!not base64!!"),
    "receipt not latin-1 text": _raw(b"200 OK", b"Content-Type: application/json", b"X-PAYMENT-RESPONSE: \xd9\xa1"),
    "receipt a list": _raw(b"200 OK", b"Content-Type: application/json", b"PAYMENT-RESPONSE: WzEsMl0="),
    "receipt over 64 KiB": _raw(b"200 OK", b"PAYMENT-RESPONSE: " + b"QUFB" * 17000),
    "receipt on a 500": _raw(b"500 Oops", b"PAYMENT-RESPONSE: eyJzdWNjZXNzIjp0cnVlfQ=="),
    "content-length of 5000 digits": _raw(b"200 OK", b"Content-Length: " + b"9" * 5000),
    "status line garbage": {"kind": "raw", "head": b"HTTP/1.1 2x0 What\r\n\r\n", "body": b""},
    "json number of 5000 digits": {"kind": "status", "status": 200, "body": b'{"n":' + b"1" * 5000 + b"}"},
    "echo into an error": {"kind": "echo", "form": "pretty", "into": "message"},
}


@pytest.mark.parametrize("path", sorted(PAID_PATHS))
@pytest.mark.parametrize("tool", ["get_wagers", "build_intent"])
def test_a_paid_call_keeps_its_words_about_the_payment_on_every_path(
    sandbox: SandboxGateway, path: str, tool: str
) -> None:
    spec = dict(PAID_PATHS[path])
    kind = spec.pop("kind")
    route = WAGERS if tool == "get_wagers" else "/v1/member/intents/build"
    sandbox.fault(route, kind, **spec)
    mcp = client_for(sandbox.url, timeout=1.0)
    result = answered(paid_call(mcp, tool, INTENT if tool == "build_intent" else None))
    honest_about_the_payment(result)
    assert len([r for r in sandbox.seen if r.path == route]) == 1  # sent exactly once, whatever happened


class ExplodingTransport:
    """The gateway seam's transport failing in a way nothing anticipated (a bug, not a network fault)."""

    def __init__(self, after_sending: bool) -> None:
        self.after_sending = after_sending
        self.sent: list[GatewayRequest] = []

    async def send(self, target: Target, request: GatewayRequest, *rest: object) -> GatewayResponse:
        if self.after_sending:
            self.sent.append(request)
        raise RuntimeError("an unanticipated failure inside the seam")


@pytest.mark.parametrize("after_sending", [True, False])
def test_an_unexpected_exception_in_a_paid_call_still_says_what_became_of_the_payment(after_sending: bool) -> None:
    transport = ExplodingTransport(after_sending)
    gateway = Gateway("http://127.0.0.1:9", transport=transport)
    mcp = McpClient(Dispatcher(build_catalog(gateway)))
    result = answered(paid_call(mcp))
    assert result["isError"] is True
    # The seam may have written the request before it failed: the payment may have left.
    assert DO_NOT_RESUBMIT in words(result) and "outcome is unknown" in words(result)


class BuggyRenderer(GatewayTool):
    """The real tool with a bug in how it renders a 2xx: what an unanticipated exception looks like."""

    def _answer(self, resp: GatewayResponse, ctx: RequestContext | None = None) -> JSONObject:
        raise KeyError("a renderer bug")


def test_an_unexpected_exception_while_rendering_a_paid_answer_still_keeps_the_words(
    sandbox: SandboxGateway,
) -> None:
    catalog = build_catalog(Gateway(sandbox.url, timeout=1.0))
    real = next(t for t in catalog.tools if t.name == "get_wagers")
    assert isinstance(real, GatewayTool)
    buggy = BuggyRenderer(real.entry, load(), real.gateway, real.wording)
    tools = [buggy if t.name == "get_wagers" else t for t in catalog.tools]
    result = answered(paid_call(McpClient(Dispatcher(Catalog(tools=tools, payments=payments)))))
    assert result["isError"] is True and DO_NOT_RESUBMIT in words(result)
    assert len(sandbox.seen) == 1


# ---- lone surrogates and over-long integer strings: -32602, nothing sent -------------------------------

SURROGATE_CASES: dict[str, tuple[str, dict[str, Any], str]] = {
    "a search argument": ("get_prediction_markets", {"q": "ETH \ud800"}, "arguments.q"),
    "a path argument": ("get_token_news", {"chainId": 137, "asset": "\udfff"}, "arguments.asset"),
    "a nested body argument": (
        "build_intent",
        {**INTENT, "params": {"stake": "1", "memo": ["ok", "\udbff"]}},
        "arguments.params.memo[1]",
    ),
    "an argument's name": ("get_wagers", {"\ud83d": 1}, "arguments"),
}


def rejected_as_invalid_params(message: dict[str, Any], *named: str) -> str:
    assert "error" in message, message
    assert message["error"]["code"] == -32602, message
    text: str = message["error"]["message"]
    for name in named:
        assert name in text, text
    return text


@pytest.mark.parametrize("case", sorted(SURROGATE_CASES))
def test_a_lone_surrogate_in_an_argument_is_invalid_params_naming_it_and_nothing_is_sent(
    sandbox: SandboxGateway, case: str
) -> None:
    tool, arguments, named = SURROGATE_CASES[case]
    message = client_for(sandbox.url).request(
        "tools/call", {"name": tool, "arguments": arguments}, bearer=TOKEN_MEMBER_A
    )
    text = rejected_as_invalid_params(message, named, "surrogate")
    assert "could not be reached" not in text
    assert sandbox.seen == []


@pytest.mark.parametrize("where", ["signature", "nonce", "key", "extension"])
def test_a_lone_surrogate_in_a_meta_payment_is_invalid_params_and_the_payment_goes_nowhere(
    sandbox: SandboxGateway, where: str
) -> None:
    payment = canary_payment(2)
    if where == "signature":
        payment["payload"]["signature"] += "\ud800"
    elif where == "nonce":
        payment["payload"]["authorization"]["nonce"] = "\udc00"
    elif where == "key":
        payment["payload"]["\ud800"] = 1
    else:
        payment["extensions"] = {"memo": "caf\udce9"}
    message = client_for(sandbox.url).request(
        "tools/call", {"name": "get_fees", "arguments": {}, "_meta": {x402.PAYMENT_META_KEY: payment}}
    )
    rejected_as_invalid_params(message, '_meta["x402/payment"]', "surrogate")
    assert sandbox.seen == []


def test_a_lone_surrogate_in_a_meta_payment_is_refused_by_from_meta_itself() -> None:
    payment = {**canary_payment(1), "extensions": {"memo": "\ud800"}}
    with pytest.raises(McpError) as raised:
        x402.from_meta(payment)
    assert raised.value.code == -32602 and "surrogate" in raised.value.message


@pytest.mark.parametrize(
    ("method", "params", "named"),
    [
        ("prompts/get", {"name": "wager-review", "arguments": {"chainId": "\ud800"}}, "chainId"),
        ("resources/read", {"uri": "fairwins://status\ud800"}, "uri"),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "wager-review"}, "argument": {"name": "chainId", "value": "\ud800"}},
            "argument.value",
        ),
    ],
)
def test_a_lone_surrogate_anywhere_in_params_is_invalid_params(
    sandbox: SandboxGateway, method: str, params: dict[str, Any], named: str
) -> None:
    rejected_as_invalid_params(client_for(sandbox.url).request(method, params), named)
    assert sandbox.seen == []


def test_a_surrogate_pair_is_text_and_is_served(sandbox: SandboxGateway) -> None:
    result = answered(
        client_for(sandbox.url).request("tools/call", {"name": "get_prediction_markets", "arguments": {"q": "😀"}})
    )
    assert result["isError"] is False


@pytest.mark.parametrize("digits", [17, 4300, 4301, 100_000])
def test_an_over_long_chain_id_for_wager_review_is_invalid_params_naming_it(digits: int) -> None:
    mcp = client_for(None)
    message = mcp.request("prompts/get", {"name": "wager-review", "arguments": {"chainId": "1" * digits}})
    rejected_as_invalid_params(message, "chainId")


# ---- the same values over stdio and HTTP ----------------------------------------------------------------

HOSTILE_LINES: list[tuple[dict[str, Any], str]] = [
    (
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "get_prediction_markets", "arguments": {"q": "\ud800"}},
        },
        "arguments.q",
    ),
    (
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "get_fees",
                "arguments": {},
                "_meta": {"x402/payment": {**canary_payment(2), "extensions": {"m": "\udfff"}}},
            },
        },
        '_meta["x402/payment"]',
    ),
    (
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "prompts/get",
            "params": {"name": "wager-review", "arguments": {"chainId": "9" * 4301}},
        },
        "chainId",
    ),
]


def test_hostile_values_over_stdio_are_invalid_params_and_the_server_goes_on(sandbox: SandboxGateway) -> None:
    lines = [json.dumps(message).encode() + b"\n" for message, _ in HOSTILE_LINES]  # \ud800 as a JSON escape
    lines.append(
        b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get_gateway_status","arguments":{}}}\n'
    )
    proc = run_stdio(lines, FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    assert proc.returncode == 0, proc.stderr.decode()
    answers = {m["id"]: m for m in map(json.loads, proc.stdout.splitlines())}
    for message, named in HOSTILE_LINES:
        rejected_as_invalid_params(answers[message["id"]], named)
    assert answers[9]["result"]["isError"] is False
    assert b"Traceback" not in proc.stderr
    assert [r.path for r in sandbox.seen] == ["/status"]


@pytest.fixture
def http_url(sandbox: SandboxGateway) -> Iterator[str]:
    with serving(build_dispatcher(Config(api_url=sandbox.url, timeout=2.0))) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"


def test_hostile_values_over_http_are_invalid_params_in_both_eras(sandbox: SandboxGateway, http_url: str) -> None:
    legacy = LegacyClient(http_url, bearer=TOKEN_MEMBER_A)
    legacy.initialize()
    modern = ModernClient(http_url, bearer=TOKEN_MEMBER_A)
    for message, named in HOSTILE_LINES:
        answer = legacy.request(message["method"], message["params"])
        assert answer.status == 200  # legacy errors travel in-band
        rejected_as_invalid_params(answer.response, named)
        params = dict(message["params"])
        answer = modern.request(message["method"], params, meta={**params.pop("_meta", {}), **modern_meta()})
        assert answer.status == 400
        rejected_as_invalid_params(answer.response, named)
    assert [r.path for r in sandbox.seen] == []


def test_a_member_token_that_is_not_printable_ascii_is_refused_at_start() -> None:
    for token in ("fw1.caf\u00e9-token-1234", "fw1.euro\u20ac-token-1234", "fw1.\udcff-from-bytes-1234"):
        proc = run_stdio([], timeout=WAIT, FAIRWINS_API_URL="http://127.0.0.1:9", FAIRWINS_API_TOKEN=token)
        assert proc.returncode == 2, proc.stderr
        assert b"FAIRWINS_API_TOKEN" in proc.stderr and b"ASCII" in proc.stderr
        assert token.encode("utf-8", "surrogateescape") not in proc.stderr


def test_lone_surrogate_names_the_path_of_the_first_one_and_walks_any_depth() -> None:
    assert lone_surrogate({"a": ["x", {"b c": "\ud800"}]}) == 'a[1]["b c"]'
    assert lone_surrogate({"a": {"\udfff": 1}}) == "a key of a"
    assert lone_surrogate({"\udfff": 1}) == "a key"
    assert lone_surrogate(loads('{"x": "\\ud83d\\ude00 fine", "y": "\\u00e9"}')) is None  # a pair is one character
    assert lone_surrogate({"p": "\ud800"}, ("_meta", "x402/payment")) == '_meta["x402/payment"].p'
    deep: Any = "\udc00"
    for _ in range(5000):  # deeper than the interpreter's recursion limit
        deep = [deep]
    assert lone_surrogate(deep) == "[0]" * 5000


_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=()), max_size=6)
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=25,
)


def _any_lone_surrogate(value: Any) -> bool:
    """The plain recursive reading of what lone_surrogate looks for, to hold its fast first pass to."""
    if isinstance(value, str):
        return any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    if isinstance(value, list):
        return any(_any_lone_surrogate(item) for item in value)
    if isinstance(value, dict):
        return any(_any_lone_surrogate(key) or _any_lone_surrogate(item) for key, item in value.items())
    return False


@settings(max_examples=400, deadline=None)
@given(_JSONISH)
def test_lone_surrogate_finds_one_exactly_when_a_string_or_key_holds_one(value: Any) -> None:
    # Its first pass keeps no paths (it runs on every call's arguments); whatever it lets through
    # early must hold none, and whatever it finds must be named.
    found = lone_surrogate(value)
    assert (found is not None) == _any_lone_surrogate(value)


def test_a_request_the_seam_cannot_write_says_nothing_was_sent_never_a_connection_failure(
    sandbox: SandboxGateway,
) -> None:
    # What the dispatcher and the configuration refuse first, met by the seam alone: a token no
    # HTTP header can carry. (The contract's sentence kinds leave "unreachable" as the nearest:
    # the detail says why, and that nothing left.)
    outcome = Gateway(sandbox.url).call(GatewayRequest("GET", "/v1/member/me", bearer="fw1.\u20ac-not-latin-1"))
    assert isinstance(outcome, GatewayFailure) and outcome.cause == "unsendable" and outcome.sent is False
    text = describe_failure(outcome, "your profile", Wording.from_snapshot(load().wording))
    assert "this server could not write the request as HTTP, so nothing was sent" in text
    assert "connection failed" not in text
    assert sandbox.seen == []


@pytest.mark.parametrize("value", ["١٢", "１２", "1e400", "nan", "9" * 5000])
def test_a_numeric_setting_outside_ascii_digits_or_range_is_refused_by_name(value: str) -> None:
    with pytest.raises(ConfigError, match="FAIRWINS_MCP_TIMEOUT"):
        from_env({"FAIRWINS_MCP_TIMEOUT": value})


@pytest.mark.parametrize("value", ["٨٠٨٠", "+80", "65536", "9" * 5000, "-1"])
def test_a_port_outside_ascii_digits_or_range_is_refused(value: str) -> None:
    with pytest.raises(SystemExit) as raised:
        parse_args(["--http", value])
    assert raised.value.code == 2


def test_a_json_number_over_the_digit_limit_from_a_client_is_a_parse_error_naming_it() -> None:
    message = parse(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"chainId":' + b"9" * 5000 + b"}}")
    assert isinstance(message, Invalid) and message.error["code"] == -32700
    assert message.error["message"] == "Parse error: a number over 4300 digits long"


@pytest.mark.parametrize("sent", [True, False])
def test_the_guard_adds_the_payment_words_to_a_result_that_lacks_them(sent: bool) -> None:
    ctx = RequestContext(payment_sent=sent)
    result = payments.guarded(
        lambda: {"content": [{"type": "text", "text": "Could not read it."}], "isError": True}, ctx
    )
    assert result["content"][-1]["text"] == (payments.UNKNOWN_OUTCOME if sent else payments.NOT_SENT)
    kept = {"content": [{"type": "text", "text": f"Could not read it. {payments.UNKNOWN_OUTCOME}"}], "isError": True}
    assert payments.guarded(lambda: kept, ctx)["content"] == kept["content"]  # words present: nothing added
