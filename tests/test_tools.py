"""The served tools against the sandbox gateway: definitions, credentials, paths, honest results and failures."""

from __future__ import annotations

import http.client
import json
import re
import socket
import urllib.parse
from collections.abc import Callable
from typing import Any

import pytest

from mcp_server.fairwins.snapshot import load
from tests import catalog
from tests.conftest import McpClient, client_for
from tests.outputs import failure_facts
from tests.samples import VALID_ARGUMENTS
from tests.sandbox_gateway import (
    TOKEN_EXPIRED,
    TOKEN_MEMBER_A,
    TOKEN_MEMBER_B,
    TOKEN_PROFILE_ONLY,
    SandboxGateway,
)

SNAPSHOT = load()
UNKNOWN = SNAPSHOT.wording["unknown"]
TOKEN_PLACE = "Tools > Assistant > API access"
SERVED = {t["name"]: t for t in SNAPSHOT.tools if t["exec"]["kind"] != "local"}

BUILD_ARGS = {"intent": "create_wager", "chainId": 137, "params": {"stake": "5", "description": "test"}}


def _gateway_call(name: str) -> tuple[dict[str, Any], str, str]:
    """A tool's sample arguments (tests/samples.py), and the method and target the gateway must see for them.

    A member tool calls its route; a public tool its path, each `{name}` segment filled from the
    arguments (or the schema's default), the other arguments as the query.
    """
    arguments = VALID_ARGUMENTS.get(name, {})
    execution = SERVED[name]["exec"] if name in SERVED else {"kind": "route", "route": "member.intents.build"}
    if execution["kind"] == "route":
        route = SNAPSHOT.routes[execution["route"]]
        query = {} if route["method"] == "POST" else arguments
        return arguments, route["method"], route["path"] + (f"?{urllib.parse.urlencode(query)}" if query else "")
    properties = SERVED[name]["inputSchema"]["properties"]
    given = {k: properties[k]["default"] for k in properties if "default" in properties[k]} | arguments
    segments = re.findall(r"{(\w+)}", execution["path"])
    path = re.sub(r"{(\w+)}", lambda m: urllib.parse.quote(str(given[m[1]]), safe=""), execution["path"])
    query = {k: v for k, v in given.items() if k not in segments}
    return arguments, "GET", path + (f"?{urllib.parse.urlencode(query)}" if query else "")


# tool → (arguments, method, target the gateway must see), for every tool served
MEMBER_CALLS: dict[str, tuple[dict[str, Any], str, str]] = {name: _gateway_call(name) for name in catalog.MEMBER}
PUBLIC_CALLS: dict[str, tuple[dict[str, Any], str, str]] = {name: _gateway_call(name) for name in catalog.PUBLIC}


def _path(target: str) -> str:
    return target.partition("?")[0]


def direct(sandbox: SandboxGateway, method: str, path: str, token: str | None = None, body: bytes | None = None) -> Any:
    """What the gateway itself answers, asked without the server in between."""
    conn = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=5)
    try:
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=headers)
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def texts(result: dict[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"] if block["type"] == "text"]


def assert_honest_failure(result: dict[str, Any], *expected: str) -> str:
    """isError with one sentence naming the failure, and nothing that could pass for data."""
    assert result["isError"] is True, result
    failure_facts(result)  # the failure as data, and nothing that could pass for an answer
    text = " ".join(texts(result))
    for part in expected:
        assert part in text, f"{part!r} not in {text!r}"
    assert text.startswith("Could not read") or text.startswith("Invalid arguments"), text
    for block in texts(result):
        assert block.strip() not in ("", "[]", "{}", "0", "null"), "a failure must never read as an empty result"
    return text


# ---- definitions --------------------------------------------------------------------------------


def test_tools_list_serves_every_non_local_snapshot_entry_plus_build_intent(mcp: McpClient) -> None:
    names = [t["name"] for t in mcp.request("tools/list")["result"]["tools"]]
    assert names == sorted([*SERVED, "build_intent"])


@pytest.mark.parametrize("name", sorted(SERVED))
def test_each_snapshot_tool_is_served_exactly_as_the_snapshot_defines_it(mcp: McpClient, name: str) -> None:
    served = {t["name"]: t for t in mcp.request("tools/list")["result"]["tools"]}[name]
    entry = SERVED[name]
    for key in ("name", "title", "description", "inputSchema"):
        assert served[key] == entry[key], key
    assert "auth" not in served and "exec" not in served, "the contract's private fields stay private"


def test_build_intent_is_served_and_says_it_cannot_and_will_not_sign(mcp: McpClient) -> None:
    tools = {t["name"]: t for t in mcp.request("tools/list")["result"]["tools"]}
    description = tools["build_intent"]["description"]
    assert "cannot and will not sign" in description
    assert tools["build_intent"]["inputSchema"]["required"] == ["intent", "chainId", "params"]


def test_find_in_app_runs_in_the_app_so_calling_it_here_is_an_unknown_tool(mcp: McpClient) -> None:
    answer = mcp.request("tools/call", {"name": "find_in_app", "arguments": {"query": "fees"}})
    assert answer["error"]["code"] == -32602
    assert "find_in_app" in answer["error"]["message"]


def test_every_tool_is_annotated_read_only_open_world_and_idempotent_when_it_reads(mcp: McpClient) -> None:
    for tool in mcp.request("tools/list")["result"]["tools"]:
        annotations = tool["annotations"]
        assert annotations["readOnlyHint"] is True, tool["name"]
        assert annotations["openWorldHint"] is True, tool["name"]
        assert annotations["destructiveHint"] is False, tool["name"]
        reads = tool["name"] != "build_intent"
        assert annotations["idempotentHint"] is reads, tool["name"]


def test_every_tool_has_a_valid_name_a_title_and_an_object_schema(mcp: McpClient) -> None:
    for tool in mcp.request("tools/list")["result"]["tools"]:
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", tool["name"])
        assert tool["title"] and tool["description"]
        assert tool["inputSchema"]["type"] == "object"


# ---- arguments ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("get_wagers", {"chainId": "137"}, "`chainId` must be an integer"),
        ("get_wagers", {"chainId": 0}, "`chainId` must be at least 1"),
        ("get_wagers", {"chain": 137}, "`chain` is not an accepted argument"),
        ("get_token_news", {"chainId": 137, "asset": "USDC"}, "`slug` is required"),
        ("get_token_news", {"chainId": 137, "asset": "USDC", "slug": "usd coin"}, "`slug` must match the pattern"),
        ("get_token_news", {"chainId": 137, "asset": "USDC", "slug": "usd-coin\n"}, "`slug` must match the pattern"),
        ("get_prediction_markets", {"q": ""}, "`q` must be at least 1 characters long"),
        ("build_intent", {**BUILD_ARGS, "intent": "transfer"}, "`intent` must be one of"),
        ("build_intent", {"intent": "create_wager", "chainId": 137}, "`params` is required"),
    ],
)
def test_arguments_that_fail_the_schema_are_a_tool_error_naming_the_field_and_nothing_is_sent(
    mcp: McpClient, sandbox: SandboxGateway, name: str, arguments: dict[str, Any], field: str
) -> None:
    result = mcp.call_tool(name, arguments, bearer=TOKEN_MEMBER_A)
    assert_honest_failure(result, field, "Nothing was sent to the gateway")
    assert sandbox.seen == []


# ---- paths, queries and bodies ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("asset", "segment"),
    [
        ("../../v1/member/me", "..%2F..%2Fv1%2Fmember%2Fme"),
        ("a?b#c", "a%3Fb%23c"),
        ("x y", "x%20y"),
        ("%2F", "%252F"),
        ("café", "caf%C3%A9"),
    ],
)
def test_a_path_argument_is_percent_encoded_as_one_segment_and_reaches_only_its_route(
    mcp: McpClient, sandbox: SandboxGateway, asset: str, segment: str
) -> None:
    result = mcp.call_tool(
        "get_token_news", {"chainId": 137, "asset": asset, "slug": "usd-coin"}, bearer=TOKEN_MEMBER_A
    )
    assert [(s.method, s.path) for s in sandbox.seen] == [("GET", f"/v1/news/137/{segment}")]
    assert sandbox.seen[0].header("Authorization") is None
    assert result["isError"] is False, result
    assert result["structuredContent"]["asset"] == asset


@pytest.mark.parametrize("asset", ["..", "."])
def test_a_dot_segment_argument_never_reaches_the_gateway_as_a_dot_segment(
    mcp: McpClient, sandbox: SandboxGateway, asset: str
) -> None:
    # "/v1/news/137/.." is "/v1/news/" to any proxy or framework that normalises paths (RFC 3986
    # §5.2.4): an argument would reach another route. Refused or encoded, never sent as is.
    mcp.call_tool("get_token_news", {"chainId": 137, "asset": asset, "slug": "usd-coin"})
    for seen in sandbox.seen:
        assert asset not in seen.path.split("/"), seen.path


def test_arguments_not_in_the_path_travel_as_one_query_value_each(mcp: McpClient, sandbox: SandboxGateway) -> None:
    result = mcp.call_tool("get_prediction_markets", {"q": "ETH&chainId=1#x"})
    assert result["isError"] is False
    seen = sandbox.seen[0]
    assert seen.path == "/v1/polymarket/137/markets", "chainId defaults to 137"
    assert urllib.parse.parse_qs(seen.query) == {"q": ["ETH&chainId=1#x"]}


def test_get_wagers_sends_its_chain_as_a_query_value(mcp: McpClient, sandbox: SandboxGateway) -> None:
    result = mcp.call_tool("get_wagers", {"chainId": 137}, bearer=TOKEN_MEMBER_A)
    assert result["isError"] is False
    assert (sandbox.seen[0].path, sandbox.seen[0].query) == ("/v1/member/wagers", "chainId=137")
    assert [c["chainId"] for c in result["structuredContent"]["chains"]] == [137]


def test_build_intent_posts_its_arguments_as_json_and_says_nothing_was_signed(
    mcp: McpClient, sandbox: SandboxGateway
) -> None:
    result = mcp.call_tool("build_intent", BUILD_ARGS, bearer=TOKEN_MEMBER_A)
    assert result["isError"] is False, result
    seen = sandbox.seen[0]
    assert (seen.method, seen.path) == ("POST", "/v1/member/intents/build")
    assert json.loads(seen.body) == BUILD_ARGS
    assert seen.header("Content-Type") == "application/json"
    assert result["structuredContent"]["typedData"]["primaryType"] == "CreateWager"
    assert "Nothing was signed or submitted" in texts(result)[-1]


# ---- credentials --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MEMBER_CALLS))
def test_a_member_tool_sends_the_member_token_as_a_bearer(mcp: McpClient, sandbox: SandboxGateway, name: str) -> None:
    arguments, method, target = MEMBER_CALLS[name]
    result = mcp.call_tool(name, arguments, bearer=TOKEN_MEMBER_B)
    assert result["isError"] is False, result
    assert [(s.method, s.path) for s in sandbox.seen] == [(method, _path(target))]
    assert sandbox.seen[0].header_values("Authorization") == [f"Bearer {TOKEN_MEMBER_B}"]


@pytest.mark.parametrize("name", sorted(PUBLIC_CALLS))
def test_a_public_tool_sends_no_token_even_when_one_is_held_and_says_so(
    mcp: McpClient, sandbox: SandboxGateway, name: str
) -> None:
    arguments, method, target = PUBLIC_CALLS[name]
    result = mcp.call_tool(name, arguments, bearer=TOKEN_MEMBER_A)
    assert result["isError"] is False, result
    assert [(s.method, s.path) for s in sandbox.seen] == [(method, _path(target))]
    assert sandbox.seen[0].header("Authorization") is None
    assert "This public read needed no token." in texts(result)[-1]


@pytest.mark.parametrize("name", catalog.UNPRICED_MEMBER)
def test_an_unpriced_member_tool_without_a_token_says_where_tokens_are_made_and_sends_nothing(
    mcp: McpClient, sandbox: SandboxGateway, name: str
) -> None:
    result = mcp.call_tool(name, MEMBER_CALLS[name][0])
    assert_honest_failure(result, "no member token was given", TOKEN_PLACE, UNKNOWN)
    assert sandbox.seen == []


def test_a_priced_member_tool_without_a_token_that_the_gateway_refuses_says_where_tokens_are_made(
    mcp: McpClient, sandbox: SandboxGateway
) -> None:
    # member.fees can be priced but the sandbox offers no price for it: a plain 401.
    result = mcp.call_tool("get_fees")
    assert_honest_failure(result, "no member token was given", TOKEN_PLACE)
    assert sandbox.seen[0].header("Authorization") is None


# ---- honest results -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MEMBER_CALLS))
def test_a_member_result_is_the_gateway_json_verbatim_as_structured_content_and_text(
    mcp: McpClient, sandbox: SandboxGateway, name: str
) -> None:
    arguments, method, path = MEMBER_CALLS[name]
    result = mcp.call_tool(name, arguments, bearer=TOKEN_MEMBER_A)
    body = json.dumps(arguments).encode() if method == "POST" else None
    expected = direct(sandbox, method, path, TOKEN_MEMBER_A, body)
    assert result["isError"] is False
    assert result["structuredContent"] == expected
    assert json.loads(texts(result)[0]) == expected


@pytest.mark.parametrize("name", sorted(PUBLIC_CALLS))
def test_a_public_result_is_the_gateway_json_verbatim_as_structured_content_and_text(
    mcp: McpClient, sandbox: SandboxGateway, name: str
) -> None:
    arguments, method, path = PUBLIC_CALLS[name]
    result = mcp.call_tool(name, arguments)
    expected = direct(sandbox, method, path)
    assert result["structuredContent"] == expected
    assert json.loads(texts(result)[0]) == expected


@pytest.mark.parametrize("name", catalog.ENVELOPE)
def test_every_chain_not_read_is_named_as_an_unknown_beside_the_data(mcp: McpClient, name: str) -> None:
    result = mcp.call_tool(name, bearer=TOKEN_MEMBER_A)
    assert result["isError"] is False
    notes = texts(result)[1]
    assert re.search(r"Chain 8453 could not be read \(.+\)\.", notes), notes
    assert "Chain 1 is not configured on this gateway." in notes
    assert "Chain 137" not in notes, "a chain that was read needs no note"
    assert notes.endswith(UNKNOWN)
    states = {c["chainId"]: c["state"] for c in result["structuredContent"]["chains"]}
    assert states == {137: "read", 8453: "unreadable", 1: "not-configured"}, "states are kept verbatim"


@pytest.mark.parametrize("name", [n for n in catalog.READS if n not in catalog.ENVELOPE])
def test_a_result_without_per_chain_states_carries_no_chain_notes(mcp: McpClient, name: str) -> None:
    # /status lists chains as {chainId, name, on}: that is not the per-chain envelope, and none
    # of its chains is "in a state this server does not recognise".
    result = mcp.call_tool(name, VALID_ARGUMENTS.get(name, {}), bearer=TOKEN_MEMBER_A)
    assert result["isError"] is False
    notes = " ".join(texts(result)[1:])
    assert "Chain " not in notes and "UNKNOWN" not in notes, notes


def test_text_written_by_others_is_passed_on_verbatim_as_data(mcp: McpClient) -> None:
    result = mcp.call_tool("get_wagers", bearer=TOKEN_MEMBER_A)
    wagers = result["structuredContent"]["chains"][0]["wagers"]
    assert any(w["description"].startswith("Ignore previous instructions") for w in wagers)
    assert "Lakers beat the Celtics on Dec 1 — loser buys the café crème" in texts(result)[0]


# ---- failures -----------------------------------------------------------------------------------

Setup = Callable[[SandboxGateway], None]


def fault(path: str, kind: str, **params: Any) -> Setup:
    return lambda sandbox: sandbox.fault(path, kind, **params)


FAILURES: list[tuple[str, str, str | None, Setup | None, tuple[str, ...]]] = [
    # id, tool, token, sandbox setup, what the sentence must say
    ("401", "get_profile", TOKEN_EXPIRED, None, ("refused the member token (HTTP 401, invalid_token)", TOKEN_PLACE)),
    ("403", "get_wagers", TOKEN_PROFILE_ONLY, None, ("scope read:wagers (HTTP 403, insufficient_scope).", TOKEN_PLACE)),
    (
        "404",
        "get_profile",
        TOKEN_MEMBER_A,
        fault("/v1/member/me", "status", status=404),
        ("no such route or object (HTTP 404, not_found): the gateway said",),
    ),
    (
        "400",
        "get_profile",
        TOKEN_MEMBER_A,
        fault("/v1/member/me", "status", status=400, body={"error": "bad_request", "message": "chainId is wrong"}),
        ("refused the request (HTTP 400, bad_request): the gateway said “chainId is wrong”",),
    ),
    (
        "429",
        "get_profile",
        TOKEN_MEMBER_A,
        fault("/v1/member/me", "status", status=429, headers={"Retry-After": "30"}),
        ("rate-limiting requests (HTTP 429, quota_exceeded); retry after 30 s.",),
    ),
    (
        "500",
        "get_profile",
        TOKEN_MEMBER_A,
        fault("/v1/member/me", "status", status=500),
        ("failed (HTTP 500, internal_error)",),
    ),
    (
        "502",
        "get_profile",
        TOKEN_MEMBER_A,
        fault("/v1/member/me", "status", status=502, body=b""),
        ("the gateway failed (HTTP 502).",),
    ),
    (
        "503",
        "get_profile",
        TOKEN_MEMBER_A,
        fault("/v1/member/me", "status", status=503),
        ("a service behind it is down (HTTP 503, unavailable): the gateway said “gateway up, dependency down”",),
    ),
    (
        "html",
        "get_perps_pairs",
        None,
        fault("/v1/perps/pairs", "html"),
        ("could not be read (HTTP 200): it was not JSON (text/html",),
    ),
    ("not-json", "get_perps_pairs", None, fault("/v1/perps/pairs", "not_json"), ("not JSON",)),
    ("empty", "get_perps_pairs", None, fault("/v1/perps/pairs", "empty"), ("it was empty",)),
    ("invalid-utf8", "get_perps_pairs", None, fault("/v1/perps/pairs", "invalid_utf8"), ("not valid UTF-8",)),
    ("deep-json", "get_perps_pairs", None, fault("/v1/perps/pairs", "deep_json"), ("nested too deeply",)),
    (
        "redirect",
        "get_profile",
        TOKEN_MEMBER_A,
        fault("/v1/member/me", "redirect"),
        ("redirect (HTTP 302), which is not followed",),
    ),
    ("reset", "get_perps_pairs", None, fault("/v1/perps/pairs", "reset_before"), ("connection was reset",)),
]


@pytest.mark.parametrize(
    ("tool", "token", "setup", "expected"), [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES]
)
def test_a_gateway_failure_is_a_tool_error_with_a_sentence_naming_it(
    mcp: McpClient,
    sandbox: SandboxGateway,
    tool: str,
    token: str | None,
    setup: Setup | None,
    expected: tuple[str, ...],
) -> None:
    if setup is not None:
        setup(sandbox)
    result = mcp.call_tool(tool, bearer=token)
    assert_honest_failure(result, *expected, UNKNOWN)
    facts = failure_facts(result)
    status = re.search(r"\(HTTP (\d{3})(?:, ([\w.:-]+))?\)", " ".join(texts(result)))
    # The same facts as data: the status and code the sentence names, or none when nothing answered.
    assert (facts.get("status"), facts.get("code")) == ((int(status[1]), status[2]) if status else (None, None)), facts


@pytest.mark.parametrize(("timeout", "said"), [(1.0, "1 s"), (0.5, "0.5 s")])
def test_a_timeout_names_the_limit_and_ends_within_it(sandbox: SandboxGateway, timeout: float, said: str) -> None:
    # FAIRWINS_MCP_TIMEOUT takes fractions (0.1 to 300): 0.5 s must not be reported as "0 s".
    sandbox.fault("/v1/member/me", "delay", seconds=3)
    result = client_for(sandbox.url, timeout=timeout).call_tool("get_profile", bearer=TOKEN_MEMBER_A)
    assert_honest_failure(result, f"could not be reached: it did not answer within {said}.", UNKNOWN)


def test_an_answer_over_the_size_cap_is_refused_naming_the_cap(sandbox: SandboxGateway) -> None:
    sandbox.fault("/v1/perps/pairs", "large", size=1024 * 1024)
    result = client_for(sandbox.url, max_body=64 * 1024).call_tool("get_perps_pairs")
    assert_honest_failure(result, "over the 64 KiB limit", UNKNOWN)


def test_a_refused_connection_is_named() -> None:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        result = client_for(f"http://127.0.0.1:{bound.getsockname()[1]}").call_tool("get_perps_pairs")
    assert_honest_failure(result, "could not be reached: the connection was refused", UNKNOWN)


def test_a_name_resolution_failure_is_named() -> None:
    result = client_for("https://fairwins-gateway.invalid").call_tool("get_perps_pairs")
    assert_honest_failure(result, "could not be reached: its host name did not resolve", UNKNOWN)


@pytest.mark.parametrize("name", sorted([*SERVED, "build_intent"]))
def test_with_no_base_url_every_tool_fails_naming_the_missing_setting(name: str) -> None:
    arguments = {**PUBLIC_CALLS, **MEMBER_CALLS}[name][0]
    result = client_for(None).call_tool(name, arguments, bearer=TOKEN_MEMBER_A)
    assert_honest_failure(result, "FAIRWINS_API_URL is not set", UNKNOWN)


def test_with_no_base_url_the_server_still_starts_and_lists_everything() -> None:
    client = client_for(None)
    assert client.request("initialize", {"protocolVersion": "2025-11-25"})["result"]["serverInfo"]["name"]
    assert len(client.request("tools/list")["result"]["tools"]) == len(SERVED) + 1
    assert len(client.request("resources/list")["result"]["resources"]) == 3
    assert len(client.request("prompts/list")["result"]["prompts"]) == 2


def test_two_calls_in_a_row_on_one_thread_both_succeed(mcp: McpClient) -> None:
    # One worker thread serves many calls over its kept-alive connection.
    first = mcp.call_tool("get_perps_pairs")
    second = mcp.call_tool("get_gateway_status")
    assert first["isError"] is False, first
    assert second["isError"] is False, second
