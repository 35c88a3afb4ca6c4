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

import json
import random
import re
import subprocess
import sys
from typing import Any, Final

import pytest

from mcp_server.core.answers import _Search
from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
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

PIECES: Final = ["a", "\\", '"', "\ud83c", "\udf89", "\U0001f389", "u", "d", "8", "\n", "é", "\\ud83c", "}, {"]


@pytest.mark.parametrize("seed", range(4))
def test_well_formed_writes_exactly_each_lone_surrogate_as_u_fffd(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(3000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(14)))
        written = json.dumps({"k": text, text: [text]}, ensure_ascii=rng.random() < 0.8)
        if not written.isascii() and any("\ud800" <= ch <= "\udfff" for ch in written):
            continue  # a raw surrogate is no UTF-8 text: no gateway body holds one (it is decoded strictly)
        # As a UTF-16 reader takes it: each half of a pair that has no other half is U+FFFD.
        wanted = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        assert jsonrpc.loads(well_formed(written)) == {"k": wanted, wanted: [wanted]}, written
    text = json.dumps("no escape here: café")
    assert well_formed(text) is text  # nothing to mend: the text itself, not a copy


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


def _nest(rng: random.Random, level: int = 0) -> Any:
    roll = rng.random()
    if level > 9 or roll < 0.3:
        return rng.choice(['[{"', "}]", "x", "\\", 1, '\\"]', ""])
    if roll < 0.65:
        return [_nest(rng, level + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(["a", "[", '{"', "\\"]) + str(i): _nest(rng, level + 1) for i in range(rng.randrange(3))}


@pytest.mark.parametrize("seed", range(4))
def test_too_deep_counts_the_levels_of_arrays_and_objects_and_never_a_bracket_in_a_string(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(600):
        value = _nest(rng)
        text = json.dumps(value, indent=rng.choice([None, 1]), ensure_ascii=rng.random() < 0.5)
        levels = depth(value)
        for limit in range(11):
            assert too_deep(text, limit) == (levels > limit), (text, limit)
            assert too_deep(text.encode(), limit) == (levels > limit)


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
