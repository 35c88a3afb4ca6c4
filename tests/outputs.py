"""What a tool result carries as structuredContent, checked with the server's own schema code.

`conftest.py` runs `problem` on every tools/call result the suite sees; tests that look at a
failure use `failure_facts`: a failure's structuredContent is the failure facts and nothing else.
"""

from __future__ import annotations

from typing import Any, Final

from mcp_server.core import schema
from mcp_server.setup.server import build_catalog
from mcp_server.upstream.gateway import Gateway
from mcp_server.wire.jsonrpc import Verbatim

# Every shipped tool's outputSchema, as tools/list serves it.
SHIPPED: Final[dict[str, dict[str, Any]]] = {
    t.name: t.definition()["outputSchema"] for t in build_catalog(Gateway(None)).tools
}
FACTS: Final = frozenset({"kind", "status", "code", "field", "expected"})


def problem(output_schema: dict[str, Any] | None, result: object) -> str | None:
    """Why `result` (a CallToolResult) breaks its tool's outputSchema, or None."""
    if output_schema is None or not isinstance(result, dict):
        return None
    if "structuredContent" not in result:
        # MCP: a tool with an outputSchema "MUST provide structured results"; an error need not.
        return None if result.get("isError") is True else "a result without structuredContent"
    structured = result["structuredContent"]
    if isinstance(structured, Verbatim):  # the gateway's own bytes, as they will be sent
        structured = structured.value()
    return schema.check(structured, output_schema)


def failure_facts(result: dict[str, Any], kind: str | None = None) -> dict[str, Any]:
    """The facts an error result carries (kind, and status and code when the gateway answered)."""
    assert result["isError"] is True, result
    facts: dict[str, Any] = result["structuredContent"]
    assert set(facts) <= FACTS and "kind" in facts, f"a failure carries its facts and no data: {facts}"
    if kind is not None:
        assert facts["kind"] == kind, facts
    return facts


def keywords(node: Any) -> set[str]:
    """Every keyword used anywhere in a schema (property names are names, not keywords)."""
    if not isinstance(node, dict):
        return set()
    found = set(node)
    for name, value in node.items():
        if name == "properties":
            for sub in value.values():
                found |= keywords(sub)
        elif name in ("items", "additionalProperties"):
            found |= keywords(value)
        elif name == "anyOf":
            for sub in value:
                found |= keywords(sub)
    return found
