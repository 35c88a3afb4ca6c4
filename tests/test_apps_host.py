"""The views in a real host: headless Chromium, the official app-bridge, the real server over stdio and HTTP.

Each run starts the server (a stdio subprocess speaking 2025-11-25, or the HTTP transport speaking
2026-07-28 per request), mounts every view the way a host does (a sandboxed frame on another
origin, the spec's restrictive default CSP) and runs its lifecycle. The assertions are on the
frame's DOM, the requests the page made and the messages the bridge saw.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
from collections.abc import Iterator
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_server.fairwins import views
from tests import apps_host, catalog
from tests.apps_host import Report
from tests.conftest import BROWSER, ROOT, client_for
from tests.mcp_http import serving
from tests.samples import VALID_ARGUMENTS
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway, v1_offer

pytestmark = BROWSER

# Elements the page itself creates; anything else in a frame came from data.
PAGE_ELEMENTS: Final = frozenset(
    "html head meta title style body main script h1 h2 p bdi span table caption thead tbody tr th td section div "
    "label input button".split()
)
PAGE_ATTRIBUTES: Final = frozenset(
    {
        "lang",
        "data-view",
        "data-tools",
        "data-theme",
        "charset",
        "name",
        "content",
        "id",
        "aria-live",
        "class",
        "scope",
        "style",
        "aria-hidden",
        "role",
        "for",
        "type",
        "autocomplete",
    }
)
SCREENSHOTS: Final = os.environ.get("FAIRWINS_SCREENSHOTS")
INTENT_ARGS: Final = {
    "intent": "create_wager",
    "chainId": 137,
    "params": {"stake": "25000000", "deadline": "1798675200", "description": "Lakers beat the Celtics on Dec 1"},
}


@pytest.fixture(scope="module")
def chromium() -> str:
    return apps_host.install()


def stdio_plan(api_url: str, token: str | None, cases: list[dict[str, Any]]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRWINS_") and "proxy" not in k.lower()}
    env["FAIRWINS_API_URL"] = api_url
    if token is not None:
        env["FAIRWINS_API_TOKEN"] = token
    return {"transport": "stdio", "command": [sys.executable, "-m", "mcp_server"], "env": env, "cases": cases}


@pytest.fixture
def http_url(sandbox: SandboxGateway) -> Iterator[str]:
    with serving(client_for(sandbox.url).dispatcher) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"


def assert_page_only(view: Report) -> None:
    """No element or attribute that the page did not make; no script ran but the page's own."""
    assert set(view["elements"]) <= PAGE_ELEMENTS, set(view["elements"]) - PAGE_ELEMENTS
    assert {name for _, name, _ in view["attributes"]} <= PAGE_ATTRIBUTES
    assert view["pwned"] is None and view["title"] == "FairWins" and view["scripts"] == 1


def assert_no_network(report: Report) -> None:
    """The frame loaded its own document and asked for nothing else."""
    assert report["viewRequests"] == [report["viewRequests"][0]] and "/view/" in report["viewRequests"][0]
    assert not [line for line in report["console"] if "Content Security Policy" in line]
    assert report["pageErrors"] == []


def assert_lifecycle(report: Report) -> None:
    assert "Waiting for the answer" in report["before"]["textContent"]
    assert report["teardown"] == "answered"
    assert report["sizes"] and all(s["height"] > 0 for s in report["sizes"])
    assert_no_network(report)
    assert_page_only(report["after"])


# ---- the sandbox gateway, over stdio (2025-11-25) ----------------------------------------------


def test_each_view_renders_its_tools_answer_over_stdio(sandbox: SandboxGateway, chromium: str) -> None:
    cases = [
        {"name": "wagers", "tool": "get_wagers", "actions": [{"type": "theme", "theme": "dark", "as": "dark"}]},
        {"name": "wagers-tokyo", "tool": "get_wagers", "locale": "ja-JP", "timeZone": "Asia/Tokyo"},
        {
            "name": "intent",
            "tool": "build_intent",
            "arguments": INTENT_ARGS,
            "clipboardWrite": True,
            "actions": [{"type": "copy", "as": "copied"}],
        },
        {"name": "intent-no-clipboard", "tool": "build_intent", "arguments": INTENT_ARGS},
        {
            "name": "markets",
            "tool": "get_prediction_markets",
            "arguments": {"chainId": 137},
            "actions": [
                {"type": "search", "text": "Fed", "via": "enter", "as": "by-enter"},
                {"type": "search", "text": "Bitcoin", "via": "button", "as": "by-button"},
            ],
        },
        {
            "name": "markets-forms",
            "tool": "get_prediction_markets",
            "arguments": {"chainId": 137},
            "sandbox": "allow-scripts allow-forms",
            "actions": [
                {"type": "keyboard", "as": "tabs", "tabs": 2},
                {"type": "search", "text": "Lakers", "via": "enter", "as": "by-enter"},
            ],
        },
        {
            "name": "markets-no-proxy",
            "tool": "get_prediction_markets",
            "arguments": {"chainId": 137},
            "serverTools": False,
        },
        {"name": "fees", "tool": "get_fees"},
        {"name": "cancelled", "tool": "get_wagers", "cancel": "the member stopped it"},
    ]
    # Every other tool with a view (fairwins/views.py) is drawn too, with its sample's arguments.
    drawn = {case["tool"] for case in cases}
    others = [
        {"name": f"{view.name}-{tool}", "tool": tool, "arguments": VALID_ARGUMENTS.get(tool, {}), "view": view.name}
        for view in views.VIEWS
        for tool in view.tools
        if tool not in drawn
    ]
    cases += others
    reports = apps_host.run(stdio_plan(sandbox.url, TOKEN_MEMBER_A, cases), chromium)
    started = reports["_started"]
    assert started["started"]["capabilities"]["extensions"] == {"io.modelcontextprotocol/ui": {}}
    for case in cases:
        assert_lifecycle(reports[case["name"]])
    for case in others:
        after = reports[case["name"]]["after"]
        assert after["headings"] and "could not answer" not in after["textContent"], (case, after["textContent"])
        assert "unknown, not empty" not in after["textContent"], (case, after["textContent"])

    wagers = reports["wagers"]
    after = wagers["after"]
    assert [h for h in after["headings"]] == [
        "H1 Your wagers",
        "H2 Polygon (chain 137)",
        "H2 Base (chain 8453)",
        "H2 Ethereum (chain 1)",
    ]
    (table,) = after["tables"]
    assert table["headers"] == [["Stake", "col"], ["Deadline", "col"], ["Status", "col"], ["Description", "col"]]
    assert table["rows"] == 3 and table["cells"][0][:3] == ["25.00 USDC", "Dec 1, 2026, 12:00 AM UTC", "open"]
    # Each chain's state verbatim; an unreadable one is an unknown with its reason, never an empty table.
    for state in ("State: read", "State: unreadable", "State: not-configured"):
        assert state in after["textContent"]
    assert "could not be read, so its wagers are not known" in after["textContent"]
    assert "Reason: wager index did not answer within 5 s" in after["textContent"]
    assert "Not configured" in after["textContent"]
    assert after["theme"] == "light" and wagers["dark"]["theme"] == "dark"
    assert after["background"] != wagers["dark"]["background"]

    tokyo = reports["wagers-tokyo"]["after"]["tables"][0]["cells"][0][1]
    assert "2026" in tokyo and "12月1日" in tokyo and "9:00" in tokyo  # 00:00 UTC is 09:00 in Tokyo, in Japanese

    intent = reports["intent"]["after"]
    text = intent["textContent"]
    assert intent["headings"][0] == "H1 What you would sign"
    assert "This server cannot sign and has signed nothing" in text and "sign it in your own wallet" in text
    where, message = intent["tables"]
    assert where["caption"] == "Where" and where["rows"] == 3
    assert (
        "Polygon (chain 137)" in text and "0xfa1e000000000000000000000000000000000137" in text and "CreateWager" in text
    )
    assert message["caption"] == "Message: CreateWager" and message["rows"] == 6
    fields = {cells[0]: cells[2] for cells in message["cells"]}
    assert fields["stake"] == "25 USDC (raw 25000000)"
    assert "Expired at" in text or "Expires in" in text
    assert "/v1/relay/137/intents" in text
    assert intent["buttons"] == ["Copy typed data as JSON"]
    assert "Copied." in reports["intent"]["copied"]["textContent"]
    assert reports["intent-no-clipboard"]["after"]["buttons"] == []
    for report in (reports["intent"], reports["intent-no-clipboard"]):
        assert not any(
            "sign" in b.lower() or "send" in b.lower() or "submit" in b.lower() for b in report["after"]["buttons"]
        )

    markets = reports["markets"]
    assert [h for h in markets["after"]["headings"] if h.startswith("H2")] == [
        "H2 Will ETH close above $5,000 on 2026-12-31?",
        "H2 Will the Fed cut rates in December 2026?",
        "H2 Will Bitcoin trade above $150k before 2027?",
        "H2 Lakers win the 2027 NBA championship?",
    ]
    assert "41% (0.41)" in markets["after"]["textContent"]
    assert markets["after"]["labels"] == [["Search markets", "q", True]]
    for key, q in (("by-enter", "Fed"), ("by-button", "Bitcoin")):
        searched = markets[key]
        assert searched["serverCalls"] == [
            {
                "method": "tools/call",
                "params": {"name": "get_prediction_markets", "arguments": {"chainId": 137, "q": q}},
            }
        ]
        assert_page_only(searched["view"])
    assert "Will the Fed cut rates" in markets["by-enter"]["view"]["textContent"]
    assert reports["markets-forms"]["tabs"] == ["input#q", "button"]  # the search is reachable by keyboard
    assert reports["markets-forms"]["by-enter"]["serverCalls"][0]["params"]["arguments"]["q"] == "Lakers"
    assert reports["markets-no-proxy"]["after"]["labels"] == []  # no serverTools: no search box

    fees = reports["fees"]["after"]
    assert "1.5% (150 bps)" in fees["textContent"] and "State: unreadable" in fees["textContent"]

    cancelled = reports["cancelled"]["after"]["textContent"]
    assert "The call was cancelled" in cancelled and "the member stopped it" in cancelled and "an unknown" in cancelled

    # The member's token is the server's (FAIRWINS_API_TOKEN): no view ever holds it.
    for report in reports.values():
        assert TOKEN_MEMBER_A not in str(report) and "sandbox-member-a" not in str(report)


def test_a_price_is_shown_as_a_price_for_each_priced_tool(sandbox: SandboxGateway, chromium: str) -> None:
    # Every priced tool with a view (fairwins/views.py), with its sample's arguments.
    cases = [
        {
            "name": tool,
            "tool": tool,
            "arguments": INTENT_ARGS if tool == "build_intent" else VALID_ARGUMENTS.get(tool, {}),
        }
        for view in views.VIEWS
        for tool in view.tools
        if tool in catalog.PRICED
    ]
    assert {"get_wagers", "get_fees", "build_intent"} <= {case["tool"] for case in cases}
    # The sandbox prices fees only for a payer; as a gateway may, it quotes one here.
    sandbox.fault("/v1/member/fees", "status", status=402, body=body(v1_offer("/v1/member/fees")))
    reports = apps_host.run(stdio_plan(sandbox.url, None, cases), chromium)
    for case in cases:
        report = reports[case["name"]]
        assert_lifecycle(report)
        text = report["after"]["textContent"]
        assert report["after"]["headings"][0] == "H1 This call has a price"
        assert "This is a price, not an outage" in text
        assert "This server holds no key and cannot pay" in text
        amount = "0.02 USDC" if case["tool"] == "build_intent" else "0.01 USDC"
        offer = report["result"]["structuredContent"]["accepts"][0]
        assert amount in text and offer["network"] in text and offer["payTo"] in text
        if offer["network"] == "eip155:137":
            assert "eip155:137 (Polygon)" in text
        assert "unavailable" not in text.lower() and "outage" not in text.replace("not an outage", "")


def test_an_honest_failure_says_what_the_text_answer_says(sandbox: SandboxGateway, chromium: str) -> None:
    sandbox.fault("/v1/member/wagers", "status", status=503)
    sandbox.fault("/v1/member/fees", "not_json")
    cases = [
        {"name": "unavailable", "tool": "get_wagers"},
        {"name": "unreadable", "tool": "get_fees"},
        {"name": "bad-arguments", "tool": "get_prediction_markets", "arguments": {"chainId": "x"}},
    ]
    reports = apps_host.run(stdio_plan(sandbox.url, TOKEN_MEMBER_A, cases), chromium)
    for case in cases:
        report = reports[case["name"]]
        assert_lifecycle(report)
        result = report["result"]
        assert result["isError"] is True
        sentence = result["content"][0]["text"]
        assert sentence and sentence in report["after"]["textContent"]
        assert "unknown, not empty" in report["after"]["textContent"]

    gone = apps_host.run(
        stdio_plan("http://127.0.0.1:9", TOKEN_MEMBER_A, [{"name": "down", "tool": "get_wagers"}]), chromium
    )["down"]
    assert_lifecycle(gone)
    assert gone["result"]["content"][0]["text"] in gone["after"]["textContent"]
    sandbox.clear_faults()
    missing = apps_host.run(stdio_plan(sandbox.url, None, [{"name": "no-token", "tool": "get_fees"}]), chromium)[
        "no-token"
    ]
    assert_lifecycle(missing)
    assert missing["result"]["structuredContent"]["kind"] == "no_token"
    assert "no member token was given" in missing["after"]["textContent"]


# ---- over HTTP (2026-07-28), and a hostile gateway -----------------------------------------------

# Markup, script, links, CSS, bidi overrides, U+FFFD and half an emoji (a lone surrogate escape,
# which the server passes on as U+FFFD): planted in every string field the gateway writes.
PLANT: Final = (
    '<script>window.__pwned="script"</script>'
    "<img src=x onerror=\"window.__pwned='img'\">"
    "</script><b>bold</b>"
    "<a href=\"javascript:window.__pwned='link'\">click</a>"
    '<a href="https://evil.invalid/">out</a>'
    '<div style="background:url(https://evil.invalid/x.png)">css</div>'
    "\u202egnp.exe\u202c \ufffd end"
)
HALF_EMOJI: Final = '"\\ud83d"'


def planted(tag: str) -> str:
    return f"{tag}:{PLANT}"


def body(value: Any) -> bytes:
    text = json.dumps(value, ensure_ascii=False)
    return text.replace('"HALF"', HALF_EMOJI).encode("utf-8")


def hostile_wagers(n: int = 3) -> dict[str, Any]:
    wager = {
        "id": planted("id"),
        "stake": planted("stake"),
        "asset": planted("asset"),
        "deadline": planted("deadline"),
        "status": planted("status"),
        "description": planted("description"),
    }
    wagers = [dict(wager) for _ in range(n)]
    wagers[0]["description"] = "HALF"
    return {
        "asOf": planted("asOf"),
        "chains": [
            {"chainId": 137, "state": "read", "wagers": wagers},
            {"chainId": 8453, "state": "unreadable", "reason": planted("reason")},
        ],
    }


HOSTILE_MARKETS: Final = {
    "chainId": 137,
    "q": planted("q"),
    "markets": [
        {
            "id": planted("id"),
            "question": planted("question"),
            "outcomes": [{"name": planted("outcome"), "price": planted("price")}, {"name": "HALF", "price": "0.5"}],
            "volume": planted("volume"),
            "endDate": planted("endDate"),
        }
    ],
}
HOSTILE_INTENT: Final = {
    "typedData": {
        "domain": {
            "name": planted("domain"),
            "version": planted("version"),
            "chainId": 137,
            "verifyingContract": planted("contract"),
        },
        "types": {
            "EIP712Domain": [],
            planted("ptype"): [
                {"name": planted("field"), "type": planted("type")},
                {"name": "stake", "type": "uint256"},
            ],
        },
        "primaryType": planted("ptype"),
        "message": {planted("field"): planted("value"), "stake": planted("stake")},
    },
    "expiresAt": planted("expiresAt"),
    "submit": {"relayPath": "/" + planted("relay")},
}
HOSTILE_OFFER: Final = {
    "x402Version": 1,
    "error": planted("error"),
    "accepts": [
        {
            "scheme": planted("scheme"),
            "network": planted("network"),
            "maxAmountRequired": planted("amount"),
            "resource": planted("resource"),
            "description": planted("description"),
            "payTo": planted("payTo"),
            "asset": planted("asset"),
            "extra": {"name": planted("name")},
        }
    ],
}
HOSTILE_FEES: Final = {
    "asOf": "2026-11-29T20:00:00Z",
    "chains": [{"chainId": 137, "state": "read", "rates": {"wagerFeeBps": 150, planted("key"): planted("rate")}}],
}


def assert_literal(view: Report, tags: list[str]) -> None:
    """Each planted string shows as the text it is, whole (bidi controls and all)."""
    for tag in tags:
        assert planted(tag) in view["textContent"], tag
    for _, _, value in view["attributes"]:
        assert "evil.invalid" not in value and "javascript:" not in value and "__pwned" not in value


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_hostile_gateway_data_stays_text(sandbox: SandboxGateway, http_url: str, chromium: str, transport: str) -> None:
    sandbox.fault("/v1/member/wagers", "status", status=200, body=body(hostile_wagers()))
    sandbox.fault("/v1/polymarket/137/markets", "status", status=200, body=body(HOSTILE_MARKETS))
    sandbox.fault("/v1/member/intents/build", "status", status=200, body=body(HOSTILE_INTENT))
    sandbox.fault("/v1/member/fees", "status", status=402, body=body(HOSTILE_OFFER))
    sandbox.fault(
        "/v1/polymarket/1/markets",
        "status",
        status=400,
        body=body({"error": {"code": "bad", "message": planted("message")}}),
    )
    cases = [
        {"name": "wagers", "tool": "get_wagers"},
        {"name": "markets", "tool": "get_prediction_markets", "arguments": {"chainId": 137}},
        {"name": "intent", "tool": "build_intent", "arguments": INTENT_ARGS, "clipboardWrite": True},
        {"name": "price", "tool": "get_fees"},
        {"name": "failure", "tool": "get_prediction_markets", "arguments": {"chainId": 1}},
    ]
    if transport == "http":
        plan = {"transport": "http", "url": http_url, "bearer": TOKEN_MEMBER_A, "cases": cases}
    else:
        plan = stdio_plan(sandbox.url, TOKEN_MEMBER_A, cases)
    reports = apps_host.run(plan, chromium)
    assert reports["_started"]["started"]["capabilities"]["extensions"] == {"io.modelcontextprotocol/ui": {}}
    for case in cases:
        assert_lifecycle(reports[case["name"]])
    assert_literal(
        reports["wagers"]["after"], ["stake", "asset", "status", "description", "reason", "deadline", "asOf"]
    )
    assert "\ufffd" in reports["wagers"]["after"]["textContent"]
    assert_literal(reports["markets"]["after"], ["question", "outcome", "price", "volume", "endDate", "q"])
    assert_literal(
        reports["intent"]["after"], ["domain", "contract", "ptype", "field", "value", "stake", "relay", "expiresAt"]
    )
    assert_literal(reports["price"]["after"], ["network", "payTo", "asset", "amount", "name", "scheme"])
    failure = reports["failure"]
    assert failure["result"]["content"][0]["text"] in failure["after"]["textContent"]
    for report in reports.values():
        assert TOKEN_MEMBER_A not in str(report)


# The markets view draws the sources' own shapes too (issue 48): Polymarket's outcomes and
# outcomePrices as JSON-encoded strings, plain lists with prices beside them, and outcomes it cannot
# read as a list, shown as the text they are.
HOSTILE_RELAYED_MARKETS: Final = {
    "chainId": 137,
    "markets": [
        {
            "question": planted("polymarket"),
            "outcomes": json.dumps([planted("named"), "No"]),
            "outcomePrices": json.dumps(["0.42", planted("priced")]),
        },
        {"question": planted("plain"), "outcomes": [planted("listed"), "No"], "prices": ["0.3", "0.7"]},
        {"question": planted("unparsed"), "outcomes": planted("outcomes")},
    ],
}


def test_the_markets_view_draws_each_sources_shape_and_an_undescribed_answer_as_text(
    sandbox: SandboxGateway, http_url: str, chromium: str
) -> None:
    sandbox.fault("/v1/polymarket/137/markets", "status", status=200, body=body(HOSTILE_RELAYED_MARKETS))
    sandbox.fault("/v1/polymarket/1/markets", "status", status=200, body=body({"markets": [{"id": planted("id")}]}))
    cases = [
        {"name": "markets", "tool": "get_prediction_markets", "arguments": {"chainId": 137}},
        {"name": "undescribed", "tool": "get_prediction_markets", "arguments": {"chainId": 1}},
    ]
    reports = apps_host.run({"transport": "http", "url": http_url, "bearer": TOKEN_MEMBER_A, "cases": cases}, chromium)
    for case in cases:
        assert_lifecycle(reports[case["name"]])
    after = reports["markets"]["after"]
    assert_literal(after, ["polymarket", "named", "priced", "plain", "listed", "unparsed", "outcomes"])
    assert "42% (0.42)" in after["textContent"] and "30% (0.3)" in after["textContent"]
    undescribed = reports["undescribed"]
    sentence, answer = (block["text"] for block in undescribed["result"]["content"])
    assert sentence in undescribed["after"]["textContent"] and answer in undescribed["after"]["textContent"]
    assert "does not describe" in undescribed["after"]["textContent"]


# Pieces a hostile string is drawn from: markup and its near misses, script, URLs, CSS, entities,
# bidi and zero-width controls, combining marks, U+FFFD and astral characters, plus any text.
PIECES: Final = (
    "<",
    ">",
    "</",
    "/>",
    "<script>",
    "</script>",
    "<img src=x onerror=window.__pwned=1>",
    "<svg onload=window.__pwned=2>",
    "<a href='javascript:window.__pwned=3'>",
    "<iframe srcdoc='<script>window.__pwned=4</script>'>",
    "<style>",
    "url(https://evil.invalid/x)",
    "@import 'https://evil.invalid/y';",
    "&lt;",
    "&amp;",
    "&#60;",
    '"',
    "'",
    "`",
    "\u202e",
    "\u202d",
    "\u2066",
    "\u2069",
    "\u200b",
    "\u0301",
    "\ufffd",
    "\U0001f600",
    "${x}",
    "{{x}}",
    "\\",
    "\n",
)
hostile_text = st.lists(
    st.one_of(st.sampled_from(PIECES), st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=8)), max_size=12
).map("".join)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(hostile_text.filter(lambda t: t.strip()), min_size=4, max_size=12))
def test_any_hostile_strings_stay_text(sandbox: SandboxGateway, http_url: str, chromium: str, texts: list[str]) -> None:
    """A property over drawn strings: whatever a wager says, no element, attribute or script comes of it."""
    wagers = [
        {"id": f"w-{i}", "stake": t, "asset": t, "deadline": t, "status": t, "description": t}
        for i, t in enumerate(texts)
    ]
    answer = {"asOf": "2026-11-29T20:00:00Z", "chains": [{"chainId": 137, "state": "read", "wagers": wagers}]}
    sandbox.fault("/v1/member/wagers", "status", status=200, body=body(answer))
    plan = {
        "transport": "http",
        "url": http_url,
        "bearer": TOKEN_MEMBER_A,
        "cases": [{"name": "drawn", "tool": "get_wagers"}],
    }
    report = apps_host.run(plan, chromium)["drawn"]
    assert_lifecycle(report)
    (table,) = report["after"]["tables"]
    assert table["rows"] == len(texts)
    for t in texts:
        assert t in report["after"]["textContent"]


def test_ten_thousand_wagers_render_bounded(sandbox: SandboxGateway, http_url: str, chromium: str) -> None:
    one = {"stake": "1.00", "asset": "USDC", "deadline": "2026-12-01T00:00:00Z", "status": "open"}
    wagers = [{"id": f"w-{i}", **one, "description": f"wager {i}"} for i in range(10_000)]
    wagers[0]["description"] = PLANT
    many = {"asOf": "2026-11-29T20:00:00Z", "chains": [{"chainId": 137, "state": "read", "wagers": wagers}]}
    sandbox.fault("/v1/member/wagers", "status", status=200, body=body(many))
    plan = {
        "transport": "http",
        "url": http_url,
        "bearer": TOKEN_MEMBER_A,
        "cases": [{"name": "many", "tool": "get_wagers"}],
    }
    report = apps_host.run(plan, chromium)["many"]
    assert_lifecycle(report)
    (table,) = report["after"]["tables"]
    assert table["rows"] == 200
    assert "Showing the first 200 of 10000 wagers; 9800 more are in the text answer." in report["after"]["textContent"]


# ---- screenshots: docs/images/ with `make screenshots`, a scratch folder otherwise ------------------


def test_screenshots_of_every_view_in_light_and_dark(
    sandbox: SandboxGateway, chromium: str, tmp_path: pathlib.Path
) -> None:
    folder = str(ROOT / SCREENSHOTS) if SCREENSHOTS else str(tmp_path)
    sandbox.fault("/v1/member/wagers", "status", status=503)

    def shots(name: str, case: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                **case,
                "name": f"{name}-{theme}",
                "theme": theme,
                "screenshot": {"dir": folder, "file": f"view-{name}-{theme}.png"},
            }
            for theme in ("light", "dark")
        ]

    # The first get_wagers call meets the 503 (the failure); the sandbox's fault is for every call, so
    # wagers run against a second gateway below.
    failing = shots("failure", {"tool": "get_wagers"})
    priced = shots("price", {"tool": "build_intent", "arguments": INTENT_ARGS})
    apps_host.run(stdio_plan(sandbox.url, TOKEN_MEMBER_A, failing), chromium)
    apps_host.run(stdio_plan(sandbox.url, None, priced), chromium)
    with SandboxGateway() as fresh:
        cases = (
            shots("wagers", {"tool": "get_wagers"})
            + shots("intent", {"tool": "build_intent", "arguments": INTENT_ARGS, "clipboardWrite": True})
            + shots("markets", {"tool": "get_prediction_markets", "arguments": {"chainId": 137}})
        )
        apps_host.run(stdio_plan(fresh.url, TOKEN_MEMBER_A, cases), chromium)
    names = sorted(p.name for p in pathlib.Path(folder).glob("view-*.png"))
    assert names == sorted(
        f"view-{v}-{t}.png" for v in ("failure", "price", "wagers", "intent", "markets") for t in ("light", "dark")
    )
    for name in names:
        assert (pathlib.Path(folder) / name).read_bytes().startswith(b"\x89PNG")
