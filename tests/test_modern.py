"""MCP 2026-07-28 (the stateless era) beside the handshake era: on the dispatcher, on stdio and over real HTTP.

docs/protocol.md, "Modern rules", "Choosing the era" and "HTTP statuses".
The catalog is the conformance fixture catalog (no gateway needed); the shipped catalog's
sessions are in test_client_sessions.py.
"""

from __future__ import annotations

import base64
import http.client
import json
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import CACHEABLE, MODERN_HTTP_STATUS, REMOVED_IN_MODERN, Dispatcher, Session
from mcp_server.wire.jsonrpc import Request
from mcp_server.wire.versions import (
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_VERSION,
    SUPPORTED_VERSIONS,
)
from tests.conformance.fixtures import STATIC_TEXT, fixture_catalog
from tests.mcp_http import (
    LEGACY,
    MODERN,
    Answer,
    LegacyClient,
    ModernClient,
    modern_headers,
    modern_meta,
    post,
    serving,
)
from tests.stdio_harness import StdioHarness

HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_VERSION = -32020, -32021, -32022
INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND = -32602, -32601, -32002
MISSING_URI = "test://no-such-resource"

# One request per method the fixture catalog serves, with the parameters it needs.
CALLS: dict[str, dict[str, Any]] = {
    "server/discover": {},
    "tools/list": {},
    "tools/call": {"name": "test_simple_text", "arguments": {}},
    "resources/list": {},
    "resources/templates/list": {},
    "resources/read": {"uri": "test://static-text"},
    "prompts/list": {},
    "prompts/get": {"name": "test_simple_prompt"},
    "completion/complete": {
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": ""},
    },
}


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


@pytest.fixture(scope="module")
def dispatcher() -> Dispatcher:
    return Dispatcher(fixture_catalog())


@pytest.fixture(scope="module")
def url(dispatcher: Dispatcher) -> Iterator[str]:
    with serving(dispatcher) as server:
        yield server.url


@pytest.fixture
def modern(url: str) -> ModernClient:
    return ModernClient(url)


@pytest.fixture
def stdio(dispatcher: Dispatcher) -> Iterator[StdioHarness]:
    harness = StdioHarness(dispatcher)
    try:
        yield harness
    finally:
        harness.close()


def raw_modern(url: str, method: str, params: dict[str, Any], *, request_id: int = 7, **headers: str | None) -> Answer:
    """A 2026-07-28 POST whose `_meta` and headers the test controls entirely (None drops a header)."""
    sent: dict[str, str] = {**modern_headers(method, params)}
    for name, value in headers.items():
        key = name.replace("_", "-")
        sent = {k: v for k, v in sent.items() if k.lower() != key.lower()}
        if value is not None:
            sent[key] = value
    return post(url, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, sent)


def assert_error(answer: Answer, status: int, code: int, request_id: int | None = None) -> dict[str, Any]:
    assert answer.status == status, (answer.status, answer.body)
    assert answer.content_type == "application/json"
    error = answer.error
    assert error["code"] == code, error
    if request_id is not None:
        assert answer.response["id"] == request_id
    return error


# ---- the validation ladder (HTTP) ---------------------------------------------------------------


@pytest.mark.parametrize(
    "meta",
    [
        None,
        {META_CAPABILITIES: {}},
        {META_VERSION: MODERN},
        {META_VERSION: MODERN, META_CAPABILITIES: "sampling"},
        {META_VERSION: 20260728, META_CAPABILITIES: {}},
    ],
    ids=["no-meta", "no-version", "no-capabilities", "capabilities-not-object", "version-not-string"],
)
def test_modern_request_with_incomplete_meta_is_invalid_params_with_400(url: str, meta: dict[str, Any] | None) -> None:
    params: dict[str, Any] = {} if meta is None else {"_meta": meta}
    answer = raw_modern(url, "server/discover", params, request_id=101)
    assert_error(answer, 400, INVALID_PARAMS, 101)


def test_client_info_is_optional(url: str) -> None:
    meta = {META_VERSION: MODERN, META_CAPABILITIES: {}}
    answer = raw_modern(url, "server/discover", {"_meta": meta})
    assert answer.status == 200
    assert answer.result["resultType"] == "complete"


def test_header_version_differing_from_body_is_header_mismatch_with_400(url: str) -> None:
    meta = {**modern_meta(), META_VERSION: "v999.0.0"}
    answer = raw_modern(url, "server/discover", {"_meta": meta}, request_id=302)
    assert_error(answer, 400, HEADER_MISMATCH, 302)


def test_unsupported_version_is_32022_naming_supported_and_requested(url: str) -> None:
    meta = {**modern_meta(), META_VERSION: "v999.0.0"}
    answer = raw_modern(url, "server/discover", {"_meta": meta}, request_id=301, MCP_Protocol_Version="v999.0.0")
    error = assert_error(answer, 400, UNSUPPORTED_VERSION, 301)
    assert error["data"] == {"supported": list(SUPPORTED_VERSIONS), "requested": "v999.0.0"}


def test_ladder_checks_meta_before_headers(url: str) -> None:
    meta = {META_VERSION: "v999.0.0"}  # capabilities missing, and the header differs from the body
    answer = raw_modern(url, "server/discover", {"_meta": meta})
    assert_error(answer, 400, INVALID_PARAMS)


def test_ladder_checks_headers_before_the_version(url: str) -> None:
    meta = {**modern_meta(), META_VERSION: "v999.0.0"}
    answer = raw_modern(url, "tools/list", {"_meta": meta}, Mcp_Method=None)
    assert_error(answer, 400, HEADER_MISMATCH)


def test_ladder_errors_map_to_http_statuses_from_one_table() -> None:
    assert MODERN_HTTP_STATUS[INVALID_PARAMS] == 400
    assert MODERN_HTTP_STATUS[HEADER_MISMATCH] == 400
    assert MODERN_HTTP_STATUS[MISSING_CAPABILITY] == 400
    assert MODERN_HTTP_STATUS[UNSUPPORTED_VERSION] == 400
    assert MODERN_HTTP_STATUS[METHOD_NOT_FOUND] == 404


# ---- Mcp-Method and Mcp-Name ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Mcp-Method", None),
        ("Mcp-Method", "prompts/list"),
        ("Mcp-Method", "TOOLS/LIST"),  # header values are case-sensitive
        ("Mcp-Method", b64("prompts/list")),
        ("Mcp-Method", "=?base64?not base64!?="),
    ],
    ids=["missing", "other-method", "other-case", "base64-other-method", "bad-base64"],
)
def test_mcp_method_missing_or_different_is_header_mismatch(url: str, header: str, value: str | None) -> None:
    answer = raw_modern(url, "tools/list", {"_meta": modern_meta()}, **{header.replace("-", "_"): value})  # type: ignore[arg-type]
    assert_error(answer, 400, HEADER_MISMATCH)


@pytest.mark.parametrize("value", ["tools/list", b64("tools/list")], ids=["plain", "base64"])
@pytest.mark.parametrize("name", ["mcp-method", "MCP-METHOD"])
def test_mcp_method_matching_is_served_whatever_the_header_name_case(url: str, name: str, value: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}
    answer = post(url, body, {"MCP-Protocol-Version": MODERN, name: value})
    assert answer.status == 200
    assert answer.result["tools"][0]["name"] == "json_schema_2020_12_tool"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"name": "test_simple_text"}),
        ("resources/read", {"uri": "test://static-text"}),
        ("prompts/get", {"name": "test_simple_prompt"}),
    ],
)
@pytest.mark.parametrize("value", [None, "wrong_name", b64("wrong_name")], ids=["missing", "wrong", "base64-wrong"])
def test_mcp_name_missing_or_different_is_header_mismatch(
    url: str, method: str, params: dict[str, Any], value: str | None
) -> None:
    answer = raw_modern(url, method, {**params, "_meta": modern_meta()}, Mcp_Name=value)
    assert_error(answer, 400, HEADER_MISMATCH)


def test_mcp_name_is_compared_without_surrounding_whitespace(url: str) -> None:
    params = {"name": "test_simple_text", "_meta": modern_meta()}
    answer = raw_modern(url, "tools/call", params, Mcp_Name="  test_simple_text  ")
    assert answer.status == 200
    assert answer.result["content"][0]["type"] == "text"


def test_base64_mcp_name_is_decoded_before_comparing(url: str) -> None:
    # Not header-safe as it stands: base64 is how a client sends it.
    uri = "test://template/café-№1/data"
    answer = raw_modern(url, "resources/read", {"uri": uri, "_meta": modern_meta()}, Mcp_Name=b64(uri))
    assert answer.status == 200
    contents = answer.result["contents"][0]
    assert contents["uri"] == uri
    assert json.loads(contents["text"])["id"] == "café-№1"


def test_routing_headers_are_not_required_on_stdio(stdio: StdioHarness) -> None:
    response, _ = stdio.request("tools/call", {"name": "test_simple_text", "_meta": modern_meta()})
    assert response["result"]["resultType"] == "complete"


# ---- server/discover and result decoration -------------------------------------------------------


def test_discover_names_versions_capabilities_and_instructions(modern: ModernClient) -> None:
    answer = modern.request("server/discover")
    assert answer.status == 200
    result = answer.result
    assert result["supportedVersions"] == list(SUPPORTED_VERSIONS)
    assert MODERN in result["supportedVersions"] and LEGACY in result["supportedVersions"]
    assert set(result["capabilities"]) >= {"tools", "resources", "prompts", "completions"}
    # No listChanged or subscribe: there is no subscriptions/listen stream to deliver them on.
    assert result["capabilities"]["tools"].get("listChanged") is not True
    assert result["capabilities"]["resources"].get("subscribe") is not True
    assert result["instructions"]
    assert result["resultType"] == "complete"
    assert result["ttlMs"] >= 0 and result["cacheScope"] in ("public", "private")
    server_info = result["_meta"][META_SERVER_INFO]
    assert server_info["name"] == "fairwins-mcp" and server_info["version"]


@pytest.mark.parametrize("method", sorted(CALLS))
def test_every_modern_result_is_complete_and_stamped_with_server_info(modern: ModernClient, method: str) -> None:
    result = modern.request(method, CALLS[method]).result
    assert result["resultType"] == "complete"
    assert result["_meta"][META_SERVER_INFO]["name"] == "fairwins-mcp"
    if method in CACHEABLE:
        assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
        assert result["cacheScope"] in ("public", "private")
    else:
        assert "ttlMs" not in result and "cacheScope" not in result


def test_read_result_carries_the_resources_own_caching_hints(modern: ModernClient, dispatcher: Dispatcher) -> None:
    result = modern.request("resources/read", {"uri": "test://static-text"}).result
    resource = next(r for r in dispatcher.catalog.resources if r.uri == "test://static-text")
    assert (result["ttlMs"], result["cacheScope"]) == (resource.ttl_ms, resource.cache_scope)
    assert result["contents"][0]["text"] == STATIC_TEXT


def test_tools_list_order_is_deterministic(modern: ModernClient) -> None:
    names = [[t["name"] for t in modern.request("tools/list").result["tools"]] for _ in range(3)]
    assert names[0] == sorted(names[0]) and names[0] == names[1] == names[2]


def test_empty_cursor_is_a_valid_first_page_in_the_modern_era(modern: ModernClient) -> None:
    assert modern.request("tools/list", {"cursor": ""}).result["tools"]
    assert_error(modern.request("tools/list", {"cursor": "page-2"}), 400, INVALID_PARAMS)


# ---- removed and unknown methods -----------------------------------------------------------------


@pytest.mark.parametrize(
    "method",
    [*sorted(REMOVED_IN_MODERN), "unknown/method", "subscriptions/listen", "tasks/get", "tasks/update", "tasks/cancel"],
)
def test_removed_and_unknown_methods_are_method_not_found_with_404(modern: ModernClient, method: str) -> None:
    # The tasks extension (SEP-2663) is not offered, so its methods are methods this server does not
    # implement: 404 with -32601, as streamable-http says. -32021 would say the client lacks a
    # capability this server needs to serve the request, which no request here does.
    answer = modern.request(method, {"level": "info"} if method == "logging/setLevel" else {})
    assert_error(answer, 404, METHOD_NOT_FOUND)


@pytest.mark.parametrize(
    ("meta", "header", "code"),
    [
        ({META_VERSION: MODERN}, MODERN, INVALID_PARAMS),
        ({META_VERSION: "v999.0.0", META_CAPABILITIES: {}}, MODERN, HEADER_MISMATCH),
        ({META_VERSION: "v999.0.0", META_CAPABILITIES: {}}, "v999.0.0", UNSUPPORTED_VERSION),
    ],
    ids=["meta", "header", "version"],
)
def test_each_rung_earns_its_status_from_the_pure_dispatcher(
    dispatcher: Dispatcher, meta: dict[str, Any], header: str, code: int
) -> None:
    headers = {"mcp-protocol-version": header, "mcp-method": "server/discover"}
    reply = dispatcher.handle(
        Request(9, "server/discover", {"_meta": meta}), Session(http=True), RequestContext(http_headers=headers)
    )
    assert reply.status == 400
    assert isinstance(reply.message, dict) and reply.message["error"]["code"] == code and reply.message["id"] == 9


def test_removed_methods_answer_404_from_the_pure_dispatcher(dispatcher: Dispatcher) -> None:
    for method in sorted(REMOVED_IN_MODERN):
        reply = dispatcher.handle(Request(1, method, {"_meta": modern_meta()}), Session(), RequestContext())
        assert reply.status == 404
        assert isinstance(reply.message, dict) and reply.message["error"]["code"] == METHOD_NOT_FOUND


def test_legacy_unknown_method_stays_in_band(url: str) -> None:
    answer = LegacyClient(url).request("unknown/method")
    assert_error(answer, 200, METHOD_NOT_FOUND)


def test_server_discover_is_not_a_legacy_method(url: str) -> None:
    assert_error(LegacyClient(url).request("server/discover"), 200, METHOD_NOT_FOUND)


# ---- resource not found ---------------------------------------------------------------------------


def test_modern_unknown_resource_is_invalid_params_naming_the_uri(modern: ModernClient) -> None:
    error = assert_error(modern.request("resources/read", {"uri": MISSING_URI}), 400, INVALID_PARAMS)
    assert error["data"] == {"uri": MISSING_URI}


def test_legacy_unknown_resource_is_32002_naming_the_uri(url: str) -> None:
    client = LegacyClient(url)
    client.initialize()
    error = assert_error(client.request("resources/read", {"uri": MISSING_URI}), 200, RESOURCE_NOT_FOUND)
    assert error["data"] == {"uri": MISSING_URI}


def test_stdio_unknown_resource_follows_the_requests_era(stdio: StdioHarness) -> None:
    modern, _ = stdio.request("resources/read", {"uri": MISSING_URI, "_meta": modern_meta()})
    assert modern["error"]["code"] == INVALID_PARAMS and modern["error"]["data"] == {"uri": MISSING_URI}
    legacy, _ = stdio.request("resources/read", {"uri": MISSING_URI})
    assert legacy["error"]["code"] == RESOURCE_NOT_FOUND and legacy["error"]["data"] == {"uri": MISSING_URI}


# ---- log messages only with a log level ------------------------------------------------------------


def _log_call(modern: ModernClient, **meta: Any) -> Answer:
    return modern.request("tools/call", {"name": "test_logging_tool", "arguments": {}}, meta=modern_meta(**meta))


def test_no_log_message_without_a_log_level(modern: ModernClient) -> None:
    answer = _log_call(modern)
    assert answer.status == 200 and answer.content_type == "application/json"
    assert answer.notifications == []
    assert answer.result["content"][0]["text"] == "Logging evaluated"


def test_log_level_in_meta_streams_log_messages_before_the_response(modern: ModernClient) -> None:
    answer = _log_call(modern, **{META_LOG_LEVEL: "info"})
    assert answer.status == 200 and answer.content_type == "text/event-stream"
    assert [m["method"] for m in answer.notifications] == ["notifications/message"]
    assert answer.notifications[0]["params"]["level"] == "info"
    assert "result" in answer.messages[-1]  # the response ends the stream


def test_log_messages_below_the_requested_level_are_not_sent(modern: ModernClient) -> None:
    answer = _log_call(modern, **{META_LOG_LEVEL: "error"})
    assert answer.content_type == "application/json" and answer.notifications == []


def test_unknown_log_level_is_invalid_params(modern: ModernClient) -> None:
    assert_error(_log_call(modern, **{META_LOG_LEVEL: "loud"}), 400, INVALID_PARAMS)


def test_stdio_logs_only_for_requests_that_ask(stdio: StdioHarness) -> None:
    params = {"name": "test_logging_tool", "arguments": {}}
    _, before = stdio.request("tools/call", {**params, "_meta": modern_meta()})
    assert before == []
    _, before = stdio.request("tools/call", {**params, "_meta": modern_meta(**{META_LOG_LEVEL: "debug"})})
    assert [m["method"] for m in before] == ["notifications/message"]


# ---- stdio: the modern era without a handshake -------------------------------------------------------


def test_stdio_serves_modern_requests_statelessly(stdio: StdioHarness) -> None:
    discover, _ = stdio.request("server/discover", {"_meta": modern_meta()})
    assert discover["result"]["supportedVersions"] == list(SUPPORTED_VERSIONS)
    listed, _ = stdio.request("tools/list", {"_meta": modern_meta()})
    assert listed["result"]["resultType"] == "complete" and listed["result"]["ttlMs"] >= 0
    called, _ = stdio.request("tools/call", {"name": "test_simple_text", "_meta": modern_meta()})
    assert called["result"]["_meta"][META_SERVER_INFO]["name"] == "fairwins-mcp"


@pytest.mark.parametrize(
    ("meta", "code"),
    [
        ({META_VERSION: MODERN}, INVALID_PARAMS),
        ({META_CAPABILITIES: {}, META_CLIENT_INFO: {"name": "x", "version": "1"}}, INVALID_PARAMS),
        ({META_VERSION: "v999.0.0", META_CAPABILITIES: {}}, UNSUPPORTED_VERSION),
    ],
    ids=["no-capabilities", "no-version", "unsupported"],
)
def test_stdio_applies_the_ladder(stdio: StdioHarness, meta: dict[str, Any], code: int) -> None:
    response, _ = stdio.request("server/discover", {"_meta": meta})
    assert response["error"]["code"] == code
    if code == UNSUPPORTED_VERSION:
        assert response["error"]["data"] == {"supported": list(SUPPORTED_VERSIONS), "requested": "v999.0.0"}


def test_stdio_removed_methods_with_modern_meta_are_method_not_found(stdio: StdioHarness) -> None:
    for method in sorted(REMOVED_IN_MODERN):
        response, _ = stdio.request(method, {"_meta": modern_meta()})
        assert response["error"]["code"] == METHOD_NOT_FOUND, method


def test_stdio_initialize_pins_the_process_to_legacy(stdio: StdioHarness) -> None:
    before, _ = stdio.request("tools/list", {"_meta": modern_meta()})
    assert before["result"]["resultType"] == "complete"
    init, _ = stdio.request(
        "initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    )
    assert init["result"]["protocolVersion"] == LEGACY
    stdio.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    after, _ = stdio.request("tools/list", {"_meta": modern_meta()})
    assert "resultType" not in after["result"]  # "initialize selects legacy semantics, scoped to the stdio process"
    discover, _ = stdio.request("server/discover", {"_meta": modern_meta()})
    assert discover["error"]["code"] == METHOD_NOT_FOUND
    ping, _ = stdio.request("ping")
    assert ping["result"] == {}


# ---- both eras on one HTTP endpoint; legacy unchanged --------------------------------------------------


def test_legacy_handshake_results_carry_no_modern_fields(url: str) -> None:
    client = LegacyClient(url)
    init = client.initialize("2025-06-18")
    assert init.result["protocolVersion"] == "2025-06-18"
    assert set(init.result) == {"protocolVersion", "capabilities", "serverInfo", "instructions"}
    assert client.request("ping").result == {}
    assert client.request("logging/setLevel", {"level": "info"}).result == {}
    for method in ("tools/list", "resources/read", "prompts/get"):
        result = client.request(method, CALLS[method]).result
        assert not {"resultType", "ttlMs", "cacheScope", "_meta"} & set(result), (method, result)


def test_legacy_initialize_with_an_unknown_version_gets_the_latest_legacy(url: str) -> None:
    assert LegacyClient(url).initialize("2099-01-01").result["protocolVersion"] == LEGACY


def test_both_eras_interleave_on_one_keep_alive_connection(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    def send(body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        conn.request("POST", parts.path, json.dumps(body), {**base, **headers})
        resp = conn.getresponse()
        assert resp.status == 200
        message: dict[str, Any] = json.loads(resp.read())
        return message

    try:
        legacy_params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        init = send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": legacy_params}, {})
        assert init["result"]["protocolVersion"] == LEGACY
        params = {"_meta": modern_meta()}
        discover = send(
            {"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": params},
            modern_headers("server/discover", params),
        )
        assert discover["result"]["resultType"] == "complete"
        legacy = send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, {"MCP-Protocol-Version": LEGACY})
        assert "resultType" not in legacy["result"]
        modern = send(
            {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": params}, modern_headers("tools/list", params)
        )
        assert modern["result"]["tools"] == legacy["result"]["tools"]
    finally:
        conn.close()


def test_modern_meta_under_a_legacy_header_is_a_header_mismatch(url: str) -> None:
    answer = raw_modern(url, "tools/list", {"_meta": modern_meta()}, MCP_Protocol_Version=LEGACY)
    assert_error(answer, 400, HEADER_MISMATCH)


def test_modern_notification_is_accepted_with_202(url: str) -> None:
    params = {"_meta": modern_meta()}
    answer = post(
        url,
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params},
        modern_headers("notifications/cancelled", params),
    )
    assert answer.status == 202 and answer.body == b""


def test_no_session_is_issued_in_either_era(url: str) -> None:
    legacy = LegacyClient(url).request(
        "initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    )
    modern = ModernClient(url).request("server/discover")
    assert "mcp-session-id" not in legacy.headers and "mcp-session-id" not in modern.headers


def _batch(meta: dict[str, Any] | None) -> list[dict[str, Any]]:
    params: dict[str, Any] = {} if meta is None else {"_meta": meta}
    return [{"jsonrpc": "2.0", "id": i, "method": "tools/list", "params": params} for i in (1, 2)]


def test_a_batch_under_the_modern_header_is_invalid_request(url: str) -> None:
    answer = post(url, _batch(modern_meta()), {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    assert_error(answer, 400, -32600)


def test_a_batch_of_modern_requests_without_a_header_is_invalid_request(url: str) -> None:
    # No header: the legacy default would be 2025-03-26, the one revision with batches.
    assert_error(post(url, _batch(modern_meta()), {}), 400, -32600)


def test_a_2025_03_26_batch_is_still_answered_with_an_array(url: str) -> None:
    answer = post(url, _batch(None), {"MCP-Protocol-Version": "2025-03-26"})
    assert answer.status == 200
    assert [m["id"] for m in answer.messages] == [1, 2]
    assert all("resultType" not in m["result"] for m in answer.messages)


def test_stdio_a_modern_call_waiting_on_the_gateway_stays_modern_when_initialize_follows() -> None:
    from mcp_server.setup.config import Config
    from mcp_server.setup.server import build_dispatcher
    from tests.sandbox_gateway import SandboxGateway

    with SandboxGateway() as sandbox:
        sandbox.fault("/status", "delay", seconds=0.5, times=1)
        # One worker, held by a slow call: the modern call waits in the queue while initialize runs.
        harness = StdioHarness(build_dispatcher(Config(api_url=sandbox.url, timeout=5.0)), workers=1)
        try:
            busy = {"name": "get_gateway_status", "arguments": {}}
            harness.send({"jsonrpc": "2.0", "id": "busy", "method": "tools/call", "params": busy})
            sandbox.wait_for_requests(1, timeout=5)
            call = {"name": "get_perps_pairs", "arguments": {}, "_meta": modern_meta()}
            harness.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": call})
            init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            harness.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": init})
            answers = {m["id"]: m for m in (harness.next(), harness.next(), harness.next())}
        finally:
            harness.close()
    assert answers["init"]["result"]["protocolVersion"] == LEGACY
    assert answers["slow"]["result"]["resultType"] == "complete"  # decided when it arrived: modern


@pytest.mark.parametrize(
    ("body_meta", "code"),
    [
        ({"io.modelcontextprotocol/protocolVersion": MODERN}, -32602),  # no clientCapabilities: first rung
        (None, -32020),  # a supported body version under an unsupported header: a mismatch
        ("v999.0.0", -32022),  # both say the same unsupported version
    ],
)
def test_an_unsupported_version_header_keeps_the_ladder_order(url: str, body_meta: Any, code: int) -> None:
    if isinstance(body_meta, dict):
        meta = body_meta
    else:
        meta = modern_meta()
        if body_meta is not None:
            meta["io.modelcontextprotocol/protocolVersion"] = body_meta
    message = {"jsonrpc": "2.0", "id": "v", "method": "tools/list", "params": {"_meta": meta}}
    headers = {**modern_headers("tools/list", {}), "MCP-Protocol-Version": "v999.0.0"}
    answer = post(url, message, headers)
    error = json.loads(answer.body)
    assert answer.status == 400 and error["id"] == "v" and error["error"]["code"] == code
    if code == -32022:
        assert error["error"]["data"]["requested"] == "v999.0.0"
