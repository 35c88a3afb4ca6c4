"""What tools answer as data: outputSchema per revision, answers held to it, failure facts, progress."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_server.core.catalog import Catalog
from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher
from mcp_server.fairwins.snapshot import load
from mcp_server.fairwins.tools import BUILD_INTENT
from mcp_server.wire.jsonrpc import JSONObject
from tests import conftest
from tests.conftest import McpClient, client_for
from tests.outputs import failure_facts, problem
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway

SNAP = load()
TARGETS = {t["name"]: t["exec"].get("route") or t["exec"].get("path") for t in [*SNAP.tools, BUILD_INTENT]}
WITHOUT = ("2024-11-05", "2025-03-26")
WITH = ("2025-06-18", "2025-11-25")


def at(client: McpClient, version: str) -> McpClient:
    answer = client.request("initialize", {"protocolVersion": version, "capabilities": {}})
    assert answer["result"]["protocolVersion"] == version
    return client


@pytest.mark.parametrize("version", WITH)
def test_every_served_tool_lists_the_contracts_output_schema(sandbox: SandboxGateway, version: str) -> None:
    tools = at(client_for(sandbox.url), version).request("tools/list")["result"]["tools"]
    assert tools
    for tool in tools:
        assert tool["outputSchema"] == SNAP.output_schemas[TARGETS[tool["name"]]], tool["name"]
        assert tool["outputSchema"]["type"] == "object"


@pytest.mark.parametrize("version", WITHOUT)
def test_revisions_before_2025_06_18_are_listed_no_output_schema(sandbox: SandboxGateway, version: str) -> None:
    tools = at(client_for(sandbox.url), version).request("tools/list")["result"]["tools"]
    assert tools and all("outputSchema" not in t for t in tools)


@pytest.mark.parametrize("version", WITH)
def test_a_failure_carries_its_facts_as_data_where_the_revision_has_structured_content(
    sandbox: SandboxGateway, version: str
) -> None:
    sandbox.fault("/v1/member/wagers", "status", status=503)
    result = at(client_for(sandbox.url), version).call_tool("get_wagers", bearer=TOKEN_MEMBER_A)
    assert failure_facts(result) == {"kind": "unavailable", "status": 503, "code": "unavailable"}
    assert "(HTTP 503, unavailable)" in result["content"][0]["text"]


@pytest.mark.parametrize("version", WITHOUT)
def test_a_failure_under_an_older_revision_is_the_sentence_alone(sandbox: SandboxGateway, version: str) -> None:
    sandbox.fault("/v1/member/wagers", "status", status=503)
    result = at(client_for(sandbox.url), version).call_tool("get_wagers", bearer=TOKEN_MEMBER_A)
    assert result["isError"] is True and "structuredContent" not in result
    assert "(HTTP 503, unavailable)" in result["content"][0]["text"]


@pytest.mark.parametrize(
    ("tool", "kind", "arguments"),
    [("get_wagers", "invalid_arguments", {"chainId": 0}), ("get_membership", "no_token", {})],
)
def test_failures_before_any_gateway_call_carry_their_kind_and_no_status(
    mcp: McpClient, tool: str, kind: str, arguments: dict[str, Any]
) -> None:
    assert failure_facts(mcp.call_tool(tool, arguments), kind) == {"kind": kind}


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"asOf": "2026-11-29T20:00:00Z", "chains": [{"chainId": 137, "state": "maybe"}]}, "`chains[0].state`"),
        ({"asOf": "2026-11-29T20:00:00Z", "chains": [{"chainId": 137, "state": "read"}]}, "`chains[0].wagers`"),
        ({"asOf": "2026-11-29T20:00:00Z"}, "`chains` is required"),
        ([{"chainId": 137}], "the answer must be an object"),
    ],
    ids=["a-fourth-state", "read-without-its-data", "no-chains", "a-list"],
)
def test_an_answer_that_breaks_the_contracts_shape_is_refused_as_undescribed_never_as_unreadable(
    mcp: McpClient, sandbox: SandboxGateway, body: object, said: str
) -> None:
    sandbox.fault("/v1/member/wagers", "status", status=200, body=body)
    result = mcp.call_tool("get_wagers", bearer=TOKEN_MEMBER_A)
    facts = failure_facts(result, "undescribed_answer")
    assert facts["status"] == 200 and facts["expected"]
    assert (f"`{facts['field']}`" if "field" in facts else "the answer") in said
    sentence, answer = (block["text"] for block in result["content"])
    assert sentence.startswith(
        "The gateway answered with your wagers (HTTP 200), but in a shape this server's contract does not describe: "
    )
    assert said in sentence and "could not be read" not in sentence and "UNKNOWN" not in sentence
    assert json.loads(answer) == body  # the member keeps the gateway's text; structuredContent keeps the facts


def test_an_answer_with_fields_the_gateway_added_is_passed_on_verbatim(mcp: McpClient, sandbox: SandboxGateway) -> None:
    body = {"chains": [{"chainId": 137, "state": "read", "wagers": [], "cursor": "c1"}], "nextPage": None}
    sandbox.fault("/v1/member/wagers", "status", status=200, body=body)
    result = mcp.call_tool("get_wagers", bearer=TOKEN_MEMBER_A)
    assert result["isError"] is False and result["structuredContent"] == body


def progress_of(mcp: McpClient, tool: str, arguments: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    sent: list[JSONObject] = []
    ctx = RequestContext(send=sent.append, bearer=TOKEN_MEMBER_A, bearer_source="env")
    params = {"name": tool, "arguments": arguments or {}, "_meta": {"progressToken": "p"}}
    assert "result" in mcp.request("tools/call", params, ctx=ctx)
    progress = [n["params"] for n in sent if n["method"] == "notifications/progress"]
    return [(p["progress"], p.get("total"), p["message"]) for p in progress]


def test_progress_counts_gateway_requests_out_of_a_real_total(mcp: McpClient) -> None:
    assert progress_of(mcp, "get_wagers") == [(0, 1, "Reading your wagers…"), (1, 1, "The gateway answered.")]


def test_a_retry_adds_a_request_to_the_total_and_every_value_increases(mcp: McpClient, sandbox: SandboxGateway) -> None:
    sandbox.fault("/v1/member/wagers", "status", status=503, headers={"Retry-After": "0"}, times=1)
    steps = progress_of(mcp, "get_wagers")
    assert [(p, t) for p, t, _ in steps] == [(0, 1), (1, 2), (2, 2)]
    assert steps[1][2].startswith("Retrying in ") and steps[1][2].endswith(": it answered 503…")
    assert steps[2][2] == "The gateway answered."


def test_a_call_that_never_reached_the_gateway_still_ends_at_its_total() -> None:
    steps = progress_of(client_for("http://127.0.0.1:9"), "get_perps_pairs")
    assert steps[0][:2] == (0, 1) and steps[-1] == (steps[-1][1], steps[-1][1], "The gateway did not answer.")


class Misfit:
    """A tool whose structuredContent breaks its own outputSchema, to prove the suite-wide watch sees it."""

    name = "misfit"

    def definition(self) -> JSONObject:
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        return {"name": self.name, "inputSchema": {"type": "object"}, "outputSchema": schema}

    def call(self, arguments: JSONObject, ctx: RequestContext) -> JSONObject:
        return {"content": [], "structuredContent": {"n": "one"}, "isError": False}


def test_the_suite_wide_watch_records_a_result_that_breaks_its_output_schema() -> None:
    client = McpClient(Dispatcher(Catalog(tools=[Misfit()])))
    assert client.call_tool("misfit")["structuredContent"] == {"n": "one"}
    recorded, conftest._MISFITS[:] = list(conftest._MISFITS), []  # seen, and cleared so this test passes
    assert len(recorded) == 1 and "`n` must be an integer" in recorded[0]
    assert problem(Misfit().definition()["outputSchema"], {"content": [], "isError": False}) is not None
