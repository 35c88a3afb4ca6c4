"""The dispatcher over a small fake Catalog: legacy negotiation, the method table, batches, the error boundary."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_server.core.catalog import Catalog
from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher, Session
from mcp_server.ops import logs
from mcp_server.wire.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    Batch,
    ClientResponse,
    JSONObject,
    McpError,
    Notification,
    Request,
    dumps,
    parse,
)

LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
SECRET_DETAIL = "detail-that-must-stay-off-the-wire-4711"


class EchoTool:
    name = "echo"

    def definition(self) -> JSONObject:
        return {
            "name": self.name,
            "title": "Echo",
            "description": "Echoes its arguments.",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": True},
        }

    def call(self, arguments: JSONObject, ctx: RequestContext) -> JSONObject:
        return {"content": [{"type": "text", "text": json.dumps(arguments)}], "isError": False}


class ExplodingTool(EchoTool):
    name = "explode"

    def definition(self) -> JSONObject:
        return {**super().definition(), "name": self.name}

    def call(self, arguments: JSONObject, ctx: RequestContext) -> JSONObject:
        raise RuntimeError(SECRET_DETAIL)


class StaticResource:
    uri = "test://static"
    ttl_ms = 0
    cache_scope = "public"

    def definition(self) -> JSONObject:
        return {"uri": self.uri, "name": "static", "mimeType": "text/plain"}

    def read(self, ctx: RequestContext) -> list[JSONObject]:
        return [{"uri": self.uri, "mimeType": "text/plain", "text": "static text"}]


class ColourTemplate:
    ttl_ms = 0
    cache_scope = "public"

    def definition(self) -> JSONObject:
        return {"uriTemplate": "test://colour/{name}", "name": "colour"}

    def read(self, uri: str, ctx: RequestContext) -> list[JSONObject] | None:
        prefix = "test://colour/"
        if not uri.startswith(prefix):
            return None
        return [{"uri": uri, "text": uri.removeprefix(prefix)}]

    def complete(self, argument: str, value: str, ctx: RequestContext) -> list[str]:
        return [c for c in ("red", "green", "grey") if c.startswith(value)] if argument == "name" else []


class GreetPrompt:
    name = "greet"

    def definition(self) -> JSONObject:
        return {"name": self.name, "arguments": [{"name": "who", "required": False}]}

    def get(self, arguments: dict[str, str], ctx: RequestContext) -> JSONObject:
        if set(arguments) - {"who"}:
            raise McpError(INVALID_PARAMS, "Invalid params: greet takes only who")
        who = arguments.get("who", "world")
        return {"messages": [{"role": "user", "content": {"type": "text", "text": f"Greet {who}."}}]}

    def complete(self, argument: str, value: str, ctx: RequestContext) -> list[str]:
        return [w for w in ("alice", "albert", "bob") if w.startswith(value)] if argument == "who" else []


def fake_catalog() -> Catalog:
    return Catalog(
        tools=[EchoTool(), ExplodingTool()],
        resources=[StaticResource()],
        templates=[ColourTemplate()],
        prompts=[GreetPrompt()],
        instructions="Fake instructions.",
    )


class Client:
    """One stdio-like legacy session over the dispatcher, speaking in dicts."""

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.dispatcher = Dispatcher(catalog or fake_catalog())
        self.session = Session(http=False)

    def send(self, message: dict[str, Any] | list[Any]) -> Any:
        parsed = parse(json.dumps(message).encode())
        if isinstance(parsed, Batch):
            answer = self.dispatcher.handle_batch(parsed, self.session, RequestContext).message
            return None if answer is None else json.loads(dumps(answer))
        return self.dispatcher.handle(parsed, self.session, RequestContext()).message

    def request(self, method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return self.send(message)

    def initialize(self, version: Any = "2025-11-25") -> Any:
        return self.request(
            "initialize",
            {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
        )


@pytest.fixture
def client() -> Client:
    client = Client()
    client.initialize()
    client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return client


def error_code(message: Any) -> int:
    assert "error" in message and "result" not in message, message
    code: int = message["error"]["code"]
    return code


# ---- initialize --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", LEGACY)
def test_initialize_echoes_every_supported_legacy_version(version: str) -> None:
    answer = Client().initialize(version)
    assert answer["result"]["protocolVersion"] == version


@pytest.mark.parametrize("version", ["2099-01-01", "2024-01-01", "2026-07-28", "", None, 20251125])
def test_initialize_with_an_unsupported_version_answers_2025_11_25_and_never_an_error(version: Any) -> None:
    answer = Client().initialize(version)
    assert "error" not in answer
    assert answer["result"]["protocolVersion"] == "2025-11-25"


def test_initialize_without_params_still_answers_the_latest_version() -> None:
    answer = Client().request("initialize")
    assert answer["result"]["protocolVersion"] == "2025-11-25"


def test_initialize_names_the_server_and_its_capabilities_and_instructions() -> None:
    result = Client().initialize()["result"]
    assert result["serverInfo"]["name"] == "fairwins-mcp"
    assert result["serverInfo"]["title"] and result["serverInfo"]["version"]
    assert set(result["capabilities"]) == {"tools", "resources", "prompts", "completions", "logging"}
    assert result["instructions"] == "Fake instructions."


def test_the_negotiated_version_is_what_later_requests_are_served_under() -> None:
    client = Client()
    client.initialize("2025-03-26")
    assert client.session.version == "2025-03-26"
    assert client.session.pinned_legacy


# ---- ping and the method table -----------------------------------------------------------------


def test_ping_answers_an_empty_object_before_and_after_initialize() -> None:
    client = Client()
    assert client.request("ping", request_id="p1") == {"jsonrpc": "2.0", "id": "p1", "result": {}}
    client.initialize()
    assert client.request("ping", request_id=0) == {"jsonrpc": "2.0", "id": 0, "result": {}}


def test_tools_list_lists_every_tool_sorted_by_name(client: Client) -> None:
    tools = client.request("tools/list")["result"]["tools"]
    assert [t["name"] for t in tools] == ["echo", "explode"]


def test_tools_call_runs_the_tool_with_its_arguments(client: Client) -> None:
    result = client.request("tools/call", {"name": "echo", "arguments": {"a": 1}})["result"]
    assert result["content"][0]["text"] == '{"a": 1}' and result["isError"] is False


def test_tools_call_without_arguments_calls_with_an_empty_object(client: Client) -> None:
    assert client.request("tools/call", {"name": "echo"})["result"]["content"][0]["text"] == "{}"


@pytest.mark.parametrize(
    "params",
    [{"name": "nope"}, {"name": 5}, {}, {"name": "echo", "arguments": [1]}, {"name": "echo", "arguments": "x"}],
)
def test_tools_call_with_an_unknown_tool_or_bad_params_is_invalid_params(client: Client, params: Any) -> None:
    assert error_code(client.request("tools/call", params)) == INVALID_PARAMS


def test_resources_list_and_templates_list(client: Client) -> None:
    assert [r["uri"] for r in client.request("resources/list")["result"]["resources"]] == ["test://static"]
    templates = client.request("resources/templates/list")["result"]["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["test://colour/{name}"]


def test_resources_read_serves_a_resource_and_a_template(client: Client) -> None:
    assert client.request("resources/read", {"uri": "test://static"})["result"]["contents"][0]["text"] == "static text"
    assert client.request("resources/read", {"uri": "test://colour/red"})["result"]["contents"][0]["text"] == "red"


def test_resources_read_of_an_unknown_uri_is_32002_naming_the_uri(client: Client) -> None:
    answer = client.request("resources/read", {"uri": "test://missing"})
    assert error_code(answer) == RESOURCE_NOT_FOUND
    assert answer["error"]["data"] == {"uri": "test://missing"}


def test_resources_read_without_a_uri_is_invalid_params(client: Client) -> None:
    assert error_code(client.request("resources/read", {})) == INVALID_PARAMS


def test_prompts_list_and_get(client: Client) -> None:
    assert [p["name"] for p in client.request("prompts/list")["result"]["prompts"]] == ["greet"]
    result = client.request("prompts/get", {"name": "greet", "arguments": {"who": "Ada"}})["result"]
    assert result["messages"][0]["content"]["text"] == "Greet Ada."


@pytest.mark.parametrize(
    "params",
    [{"name": "nope"}, {"name": "greet", "arguments": {"who": 5}}, {"name": "greet", "arguments": {"x": "y"}}],
)
def test_prompts_get_with_an_unknown_prompt_or_bad_arguments_is_invalid_params(client: Client, params: Any) -> None:
    assert error_code(client.request("prompts/get", params)) == INVALID_PARAMS


def test_completion_complete_for_a_prompt_argument_and_a_template_variable(client: Client) -> None:
    prompt = client.request(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "al"}},
    )["result"]["completion"]
    assert prompt == {"values": ["alice", "albert"], "total": 2, "hasMore": False}
    template = client.request(
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": "test://colour/{name}"}, "argument": {"name": "name", "value": "gr"}},
    )["result"]["completion"]
    assert template["values"] == ["green", "grey"]


def test_completion_complete_for_an_unknown_ref_is_invalid_params(client: Client) -> None:
    answer = client.request(
        "completion/complete", {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "who", "value": ""}}
    )
    assert error_code(answer) == INVALID_PARAMS


def test_logging_set_level_accepts_a_syslog_level_and_refuses_others(client: Client) -> None:
    assert client.request("logging/setLevel", {"level": "warning"})["result"] == {}
    assert client.session.log_level == "warning"
    assert error_code(client.request("logging/setLevel", {"level": "loud"})) == INVALID_PARAMS


@pytest.mark.parametrize("method", ["nope", "tools/lists", "server/discover", "sampling/createMessage", ""])
def test_an_unknown_method_is_32601(client: Client, method: str) -> None:
    assert error_code(client.request(method)) == METHOD_NOT_FOUND


def test_an_unadvertised_capability_has_no_methods() -> None:
    client = Client(Catalog(tools=[EchoTool()]))
    client.initialize()
    assert set(Client(Catalog(tools=[EchoTool()])).initialize()["result"]["capabilities"]) == {"tools", "logging"}
    for method in ("resources/list", "resources/read", "prompts/list", "prompts/get", "completion/complete"):
        assert error_code(client.request(method, {})) == METHOD_NOT_FOUND, method


@pytest.mark.parametrize("method", ["tools/list", "resources/list", "resources/templates/list", "prompts/list"])
@pytest.mark.parametrize("cursor", ["abc", "", "0"])
def test_a_cursor_the_server_never_issued_is_32602(client: Client, method: str, cursor: str) -> None:
    assert error_code(client.request(method, {"cursor": cursor})) == INVALID_PARAMS


@pytest.mark.parametrize("method", ["tools/list", "resources/list", "resources/templates/list", "prompts/list"])
def test_lists_fit_one_page_and_carry_no_next_cursor(client: Client, method: str) -> None:
    assert "nextCursor" not in client.request(method)["result"]


# ---- notifications and client responses ---------------------------------------------------------


@pytest.mark.parametrize(
    "method", ["notifications/initialized", "notifications/cancelled", "notifications/unknown", "tools/call", "ping"]
)
def test_a_notification_is_never_answered(client: Client, method: str) -> None:
    assert client.send({"jsonrpc": "2.0", "method": method, "params": {"name": "explode"}}) is None


def test_a_client_response_is_never_answered(client: Client) -> None:
    reply = client.dispatcher.handle(ClientResponse(9), client.session, RequestContext())
    assert reply.message is None


# ---- batches ------------------------------------------------------------------------------------


def batch_client(version: str) -> Client:
    client = Client()
    client.initialize(version)
    return client


def test_a_batch_under_2025_03_26_is_answered_with_an_array_in_order() -> None:
    answer = batch_client("2025-03-26").send(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": "two", "method": "tools/call", "params": {"name": "echo", "arguments": {}}},
            {"jsonrpc": "2.0", "id": 3, "method": "nope"},
        ]
    )
    assert isinstance(answer, list)
    assert [m["id"] for m in answer] == [1, "two", 3]
    assert answer[0]["result"] == {}
    assert answer[1]["result"]["isError"] is False
    assert answer[2]["error"]["code"] == METHOD_NOT_FOUND


def test_a_batch_of_only_notifications_gets_no_answer() -> None:
    client = batch_client("2025-03-26")
    assert client.send([{"jsonrpc": "2.0", "method": "notifications/initialized"}]) is None


def test_initialize_inside_a_batch_is_refused_while_the_rest_is_answered() -> None:
    client = batch_client("2025-03-26")
    answer = client.send(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        ]
    )
    assert answer[0]["id"] == 1 and answer[0]["error"]["code"] == INVALID_REQUEST
    assert answer[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert client.session.version == "2025-03-26", "a refused initialize must not renegotiate"


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25"])
def test_a_batch_under_any_other_revision_is_refused_with_32600(version: str) -> None:
    answer = batch_client(version).send([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert isinstance(answer, dict)
    assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST


def test_a_batch_before_initialize_is_refused_on_stdio() -> None:
    answer = Client().send([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert isinstance(answer, dict) and answer["error"]["code"] == INVALID_REQUEST


# ---- the exception boundary ---------------------------------------------------------------------


@pytest.fixture
def server_logging(capsys: pytest.CaptureFixture[str]) -> Iterator[pytest.CaptureFixture[str]]:
    """The server's own logging configuration (to stderr), restored afterwards."""
    logger = logging.getLogger("fairwins_mcp")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    logs.configure("info")
    try:
        yield capsys
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


def test_an_exploding_tool_is_32603_with_a_generic_message_and_the_traceback_on_stderr_only(
    client: Client, server_logging: pytest.CaptureFixture[str]
) -> None:
    answer = client.request("tools/call", {"name": "explode", "arguments": {}}, request_id="boom")
    captured = server_logging.readouterr()
    assert answer["id"] == "boom"
    assert answer["error"] == {"code": INTERNAL_ERROR, "message": "Internal error"}
    assert SECRET_DETAIL not in json.dumps(answer)
    assert "Traceback" in captured.err and SECRET_DETAIL in captured.err and "RuntimeError" in captured.err
    assert captured.out == ""


def test_the_server_keeps_serving_after_an_exploding_tool(client: Client, server_logging: Any) -> None:
    client.request("tools/call", {"name": "explode"})
    assert client.request("ping", request_id=2)["result"] == {}


def test_an_invalid_message_is_answered_with_its_error() -> None:
    client = Client()
    answer = client.dispatcher.handle(parse(b"{nope"), client.session, RequestContext()).message
    assert answer == {"jsonrpc": "2.0", "id": None, "error": answer["error"]}
    assert answer["error"]["code"] == -32700


def test_a_notification_handled_by_the_dispatcher_returns_nothing_even_for_a_tool_name() -> None:
    client = Client()
    reply = client.dispatcher.handle(Notification("tools/call", {"name": "explode"}), client.session, RequestContext())
    assert reply.message is None


def test_a_request_id_is_echoed_exactly_in_errors_too(client: Client) -> None:
    assert client.request("nope", request_id="0")["id"] == "0"
    assert client.request("nope", request_id=0)["id"] == 0


GARBAGE_PARAMS: list[dict[str, Any]] = [
    {"name": None, "arguments": None},
    {"name": ["echo"], "arguments": {}},
    {"uri": 5},
    {"uri": ["test://static"]},
    {"ref": 1, "argument": 2},
    {"ref": {"type": "ref/prompt", "name": ["greet"]}, "argument": {"name": "who", "value": ""}},
    {"ref": {"type": "ref/resource", "uri": {}}, "argument": {"name": "name", "value": ""}},
    {"level": None},
    {"level": ["info"]},
    {"cursor": 5},
]
METHODS = [
    "tools/list", "tools/call", "resources/list", "resources/read", "resources/templates/list",
    "prompts/list", "prompts/get", "completion/complete", "logging/setLevel", "ping", "initialize",
]  # fmt: skip


@pytest.mark.parametrize("method", METHODS)
def test_malformed_params_are_a_protocol_error_never_an_internal_error(client: Client, method: str) -> None:
    for params in GARBAGE_PARAMS:
        answer = client.dispatcher.handle(Request(1, method, params), client.session, RequestContext()).message
        assert isinstance(answer, dict) and answer["id"] == 1
        if "error" in answer:
            assert answer["error"]["code"] != INTERNAL_ERROR, (method, params, answer)
