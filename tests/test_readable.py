"""Every message the server writes is one the official SDKs read (issue 31, finding 4 and 6).

The official MCP Python SDK reads each line and body with pydantic-core's JSON parser, which
refuses two things Python's json module accepts: a lone UTF-16 surrogate escape (`\\ud83c`, half
an emoji, as a JavaScript gateway writes a description cut inside one), and nesting deeper than
201 levels (its recursion limit of 200). Such a message is dropped and its call never answered.
So a lone surrogate in anything the gateway wrote is written as U+FFFD, and a gateway value
nested deeper than jsonrpc.MAX_DEPTH is refused as unreadable: on the fast and the exact path,
in answers, offers and errors. Shown from outside: a real server process, the official client.
"""

from __future__ import annotations

import base64
import json
import random
import re
import subprocess
import sys
from typing import Any, Final

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mcp_server.core.answers import _Search
from mcp_server.fairwins import payments
from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.upstream.gateway import GatewayResponse
from mcp_server.wire import jsonrpc
from mcp_server.wire.jsonrpc import ENVELOPE_DEPTH, MAX_DEPTH, READABLE_DEPTH, too_deep, well_formed
from tests.conftest import ROOT, client_for, server_env
from tests.mcp_http import parse_sse, post, serving
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.test_answers import BIG, WAGERS, envelope
from tests.test_sdk_client import SDK_PYTHON, sdk

PAIRS: Final = "/v1/perps/pairs"
CUT: Final = "\\ud83c"  # the first half of 🎉 (\ud83c\udf89), as JSON text
LOW: Final = "\\udf89"  # its second half alone


def sdk_calls(gateway: SandboxGateway, calls: list[tuple[str, dict[str, Any]]], **env: str) -> list[dict[str, Any]]:
    """Each call made by the official SDK client on a real stdio server; a call it could not read times out."""
    stdin = "".join(json.dumps([name, arguments]) + "\n" for name, arguments in calls)
    report = sdk(
        "calls",
        "legacy",
        sys.executable,
        stdin=stdin,
        env=server_env(FAIRWINS_API_URL=gateway.url, SDK_CALL_TIMEOUT="15", **env),
    )
    done: list[dict[str, Any]] = report["calls"]
    return done


def sdk_reads(lines: list[bytes]) -> list[str]:
    """The official SDK's reader on each message line: "read", or why not."""
    done = subprocess.run(
        [str(SDK_PYTHON), str(ROOT / "tests" / "sdk" / "reads.py")],
        input=b"".join(line + b"\n" for line in lines),
        capture_output=True,
        timeout=60,
        check=True,
    )
    verdicts: list[str] = json.loads(done.stdout)
    return verdicts


def wagers_text(count: int, description: str) -> str:
    """A wagers answer whose first wager's description is `description` (JSON text, escapes kept)."""
    text = json.dumps(envelope(count), separators=(",", ":"))
    return text.replace("text written by the counterparty", description, 1)


# ---- a lone surrogate ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        wagers_text(3, f"Lakers {CUT} tonight"),
        wagers_text(BIG, f"Lakers {CUT} tonight"),  # read in pieces, passed on as written
        wagers_text(3, f"Lakers {LOW} tonight"),
        wagers_text(3, f"Lakers \\\\{CUT[1:]} {CUT}\\\\ {CUT}{CUT}{LOW}"),  # escaped backslashes beside them
        '{"asOf":"x",' + wagers_text(3, f"Lakers {CUT} tonight")[1:],  # a repeated name: the exact path
    ],
    ids=["small", "large", "low-half", "beside-backslashes", "exact-path"],
)
def test_the_sdk_reads_a_wager_description_cut_inside_an_emoji(body: str) -> None:
    with SandboxGateway() as gateway:
        gateway.fault(WAGERS, "status", status=200, body=body.encode())
        (call,) = sdk_calls(gateway, [("get_wagers", {})], FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    assert "raised" not in call, call["raised"]
    assert call["isError"] is False and call["jsonschema"] == []
    described = call["structuredContent"]["chains"][0]["wagers"][0]["description"]
    assert described.startswith("Lakers \ufffd") or described.startswith("Lakers \\")
    assert "\ufffd" in described and not any("\ud800" <= ch <= "\udfff" for ch in described)
    assert json.loads(call["text"].split(" Chain 8453")[0]) == call["structuredContent"]


def test_the_sdk_reads_an_offer_and_an_error_quoting_half_an_emoji() -> None:
    offer = {"x402Version": 1, "error": f"pay {CUT}", "accepts": [{"scheme": "exact", "extra": {"n": f"{CUT}"}}]}
    with SandboxGateway() as gateway:
        gateway.fault(WAGERS, "status", status=402, body=json.dumps(offer).replace("\\\\", "\\"))
        gateway.fault(PAIRS, "status", status=503, body=f'{{"error":"unavailable","message":"down {CUT}"}}')
        price, failure = sdk_calls(gateway, [("get_wagers", {}), ("get_perps_pairs", {})])
    assert "raised" not in price, price["raised"]
    assert price["isError"] is True and price["structuredContent"]["error"] == "pay \ufffd"
    assert "raised" not in failure, failure["raised"]
    assert failure["isError"] is True and "the gateway said “down”" in failure["text"]  # outcomes.clean: no Cs


# ---- nesting ---------------------------------------------------------------------------------------


def nested(depth: int) -> str:
    """A JSON value `depth` levels deep."""
    return "[" * (depth - 1) + "{}" + "]" * (depth - 1)


def test_an_answer_nested_deeper_than_the_sdk_reads_is_refused_as_unreadable() -> None:
    deep = '{"asOf":"x","pairs":[{"name":"BTC-USD","extra":' + nested(250) + "}]}"
    big = wagers_text(BIG, "x").replace('"status":"open"', '"status":"open","extra":' + nested(250), 1)
    with SandboxGateway() as gateway:
        gateway.fault(PAIRS, "status", status=200, body=deep.encode())
        gateway.fault(WAGERS, "status", status=200, body=big.encode())
        pairs, wagers = sdk_calls(gateway, [("get_perps_pairs", {}), ("get_wagers", {})], FAIRWINS_API_TOKEN="fw1.x")
    for call in (pairs, wagers):
        assert "raised" not in call, call["raised"]
        assert call["isError"] is True and call["structuredContent"]["kind"] == "unreadable_answer"
        assert "nested too deeply to read" in call["text"]


def test_an_answer_as_deep_as_the_bound_is_passed_on_and_the_sdk_reads_it() -> None:
    # {"pairs": [{"extra": X}]} is three levels around X.
    deepest = '{"pairs":[{"extra":' + nested(MAX_DEPTH - 3) + "}]}"
    with SandboxGateway() as gateway:
        gateway.fault(PAIRS, "status", status=200, body=deepest.encode(), times=1)
        gateway.fault(PAIRS, "status", status=200, body=deepest.replace("{}", "[{}]").encode(), times=1)
        fits, over = sdk_calls(gateway, [("get_perps_pairs", {}), ("get_perps_pairs", {})])
    assert "raised" not in fits and fits["isError"] is False
    assert "raised" not in over and over["isError"] is True and "nested too deeply" in over["text"]


def test_an_offer_nested_deeper_than_the_sdk_reads_is_no_price_shown() -> None:
    offer = '{"x402Version":1,"accepts":[{"scheme":"exact","extra":' + nested(250) + "}]}"
    with SandboxGateway() as gateway:
        gateway.fault(WAGERS, "status", status=402, body=offer.encode())
        (call,) = sdk_calls(gateway, [("get_wagers", {})])
    assert "raised" not in call, call["raised"]
    assert call["isError"] is True and "sent no price this server can show" in call["text"]


def test_the_sdk_reader_is_the_bound_this_server_keeps() -> None:
    """The figure itself: the SDK's reader reads a message 201 levels deep and refuses one 202 deep."""
    message = '{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"a":%s}}}'
    verdicts = sdk_reads([(message % nested(d - 3)).encode() for d in (READABLE_DEPTH, READABLE_DEPTH + 1)])
    assert verdicts[0] == "read" and "recursion limit exceeded" in verdicts[1]
    assert MAX_DEPTH + ENVELOPE_DEPTH == READABLE_DEPTH == 201


# ---- the two definitions, against their oracles -----------------------------------------------------

# Text as a gateway might hold it: any character, lone surrogates (either half) and whole pairs,
# and what spells an escape without being one: a backslash, "\\ud83c" as six characters, quotes.
_CHARACTERS: Final = st.one_of(
    st.characters(),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    st.sampled_from(["\\", '"', "\U0001f389", "\\ud83c", "\\\\ud83c", "u", "}, {", "[", "{", "]", "}", "\n"]),
)
_TEXT: Final = st.lists(_CHARACTERS, max_size=12).map("".join)
_VALUES: Final = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), _TEXT),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=12,
)


def mended(value: Any) -> Any:
    """`value` as a UTF-16 reader takes it: each half of a pair that has no other half is U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, list):
        return [mended(item) for item in value]
    if isinstance(value, dict):
        return {mended(k): mended(v) for k, v in value.items()}
    return value


@settings(max_examples=400, deadline=None)
@given(value=_VALUES, ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
def test_well_formed_writes_exactly_each_lone_surrogate_as_u_fffd(value: Any, ascii_only: bool, indent: Any) -> None:
    written = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    # A raw surrogate is no UTF-8 text: no gateway body holds one (it is decoded strictly first).
    assume(ascii_only or not any("\ud800" <= ch <= "\udfff" for ch in written))
    assert jsonrpc.loads(well_formed(written)) == mended(value)
    if "\\ud" not in written.lower():
        assert well_formed(written) is written  # nothing to mend: the text itself, not a copy


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ('"\\uD83C\\uDF89 \\uD83C x"', "\U0001f389 \ufffd x"),  # upper-case hex, as some writers spell it
        ('"\\udf89\\ud83c"', "\ufffd\ufffd"),  # both halves, the wrong way round
        ('"\\\\ud83c \\\\\\ud83c"', "\\ud83c \\\ufffd"),  # an escaped backslash, then text; then a real one
        ('"\\u0041\\ud83c\\""', 'A\ufffd"'),
    ],
)
def test_well_formed_reads_escapes_as_json_does(written: str, read: str) -> None:
    assert jsonrpc.loads(well_formed(written)) == read


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


_NESTED: Final = st.recursive(
    st.one_of(st.none(), st.integers(), _TEXT),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(value=_NESTED, ascii_only=st.booleans(), indent=st.sampled_from([None, 1]), limit=st.integers(0, 12))
def test_too_deep_counts_the_levels_of_arrays_and_objects_and_never_a_bracket_in_a_string(
    value: Any, ascii_only: bool, indent: Any, limit: int
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert too_deep(text, limit) == (depth(value) > limit)
    assert too_deep(text.encode("utf-8", "surrogatepass"), limit) == (depth(value) > limit)


def test_too_deep_is_exact_at_the_bound_and_for_towers_of_every_shape() -> None:
    for levels in (MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1):
        for text in (nested(levels), "[" + ",".join([nested(levels)] * 50) + "]", '{"a":' + nested(levels - 1) + "}"):
            here = depth(json.loads(text))
            assert too_deep(text) == (here > MAX_DEPTH), here
    assert not too_deep('["' + "[" * 100_000 + '"]')  # brackets in a string are text


def test_the_chunked_readers_search_scans_each_character_once_and_finds_what_a_search_would() -> None:
    rng = random.Random(5)
    pattern = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*\{")
    for _ in range(300):
        text = "".join(rng.choice(["}, {", "}", " ", "x" * rng.randrange(50), "},{"]) for _ in range(rng.randrange(60)))
        search = _Search(pattern, text)
        at = 0
        for _ in range(40):
            at += rng.randrange(8)
            found = search.after(at)
            expected = pattern.search(text, at)
            assert (found and found.span()) == (expected and expected.span())
        # Overlaps are a match's own few characters, once per search that found one.
        assert search.scanned <= len(text) + 40 * 8


# ---- the fast and the exact path alike, through the dispatcher ---------------------------------------


@pytest.mark.parametrize("path", ["fast", "exact"])
@pytest.mark.parametrize("count", [3, BIG])
def test_both_paths_write_half_an_emoji_as_u_fffd_and_refuse_an_answer_past_the_bound(
    sandbox: SandboxGateway, path: str, count: int
) -> None:
    def body(description: str, extra: str = "") -> bytes:
        text = wagers_text(count, description).replace('"status":"open"', '"status":"open"' + extra, 1)
        return (text if path == "fast" else '{"asOf":"x",' + text[1:]).encode()  # a repeated name: exact

    sandbox.fault(WAGERS, "status", status=200, body=body(f"cut {LOW}{CUT} \\\\{CUT[1:]}"), times=1)
    sandbox.fault(WAGERS, "status", status=200, body=body("x", ',"extra":' + nested(MAX_DEPTH - 5)), times=1)
    sandbox.fault(WAGERS, "status", status=200, body=body("x", ',"extra":' + nested(MAX_DEPTH - 4)), times=1)
    mcp = client_for(sandbox.url)
    halves, deepest, deeper = (mcp.call_tool("get_wagers", bearer=TOKEN_MEMBER_A) for _ in range(3))
    wagers = halves["structuredContent"]["chains"][0]["wagers"]
    assert wagers[0]["description"] == "cut \ufffd\ufffd \\ud83c"
    assert json.loads(halves["content"][0]["text"]) == halves["structuredContent"]
    json.dumps(json.loads(jsonrpc.dumps(halves)), ensure_ascii=False).encode()  # raises at a lone surrogate
    assert deepest["isError"] is False  # {"chains":[{"wagers":[{"extra": X}]}]}: five levels around X
    assert (
        deeper["isError"] is True and "nested too deeply to read (more than 197 levels" in deeper["content"][0]["text"]
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
def test_over_http_every_body_and_event_is_one_the_sdk_reader_reads(sandbox: SandboxGateway, streamed: bool) -> None:
    sandbox.fault(WAGERS, "status", status=200, body=wagers_text(BIG, f"cut {CUT} here").encode(), times=1)
    deep = '{"pairs":[{"extra":' + nested(250) + "}]}"
    sandbox.fault(PAIRS, "status", status=200, body=deep.encode(), times=1)
    offer = {"x402Version": 1, "error": f"pay {CUT}", "accepts": [{"scheme": "exact"}]}
    sandbox.fault(WAGERS, "status", status=402, body=json.dumps(offer).replace("\\\\", "\\"), times=1)
    bodies: list[bytes] = []
    with serving(build_dispatcher(Config(api_url=sandbox.url, timeout=5.0))) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        for n, (name, bearer) in enumerate(
            [("get_wagers", TOKEN_MEMBER_A), ("get_perps_pairs", None), ("get_wagers", None)]
        ):
            params: dict[str, Any] = {"name": name, "arguments": {}}
            if streamed:
                params["_meta"] = {"progressToken": "p"}
            call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
            answer = post(url, call, {"Authorization": f"Bearer {bearer}"} if bearer else {})
            assert answer.status == 200
            if streamed:
                assert parse_sse(answer.body)
                events = answer.body.replace(b"\r\n", b"\n").split(b"\n\n")
                bodies += [
                    line[5:].strip() for event in events for line in event.split(b"\n") if line.startswith(b"data:")
                ]
            else:
                bodies.append(answer.body)
    assert sdk_reads(bodies) == ["read"] * len(bodies)


# ---- offers and receipts from x402 headers ------------------------------------------------------


def _header(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_an_offer_or_a_receipt_header_nested_past_the_bound_is_not_shown_and_half_an_emoji_is_u_fffd() -> None:
    deep = '{"x402Version":2,"accepts":[{"scheme":"exact","extra":' + nested(MAX_DEPTH) + "}]}"
    fits = '{"x402Version":2,"error":"pay ' + CUT + '","accepts":[{"scheme":"exact","extra":' + nested(10) + "}]}"
    assert payments.read_offer(GatewayResponse(402, (("PAYMENT-REQUIRED", _header(deep)),), b"{}")) is None
    offer = payments.read_offer(GatewayResponse(402, (("PAYMENT-REQUIRED", _header(fits)),), b"{}"))
    assert offer is not None and json.loads(jsonrpc.dumps(offer))["error"] == "pay \ufffd"
    receipt = '{"success":true,"transaction":"0xabc","extra":' + nested(MAX_DEPTH) + "}"
    headers: dict[str, str] = {}
    response = GatewayResponse(200, (("PAYMENT-RESPONSE", _header(receipt)),), b"{}")
    assert payments.copy_receipts(response, headers) is None  # unreadable: the paid call says so
    shallow = '{"success":true,"transaction":"0xabc","extra":' + nested(10) + "}"
    readable = GatewayResponse(200, (("PAYMENT-RESPONSE", _header(shallow)),), b"{}")
    assert payments.copy_receipts(readable, {}) == json.loads(shallow)
