"""Run by tests/test_sdk_client.py inside .venv-sdk: the official MCP Python SDK client against
fairwins-mcp.

`python tests/sdk/session.py calls MODE SERVER_PYTHON` starts `SERVER_PYTHON -m mcp_server` (or
SERVER_PYTHON with the JSON list in SDK_SERVER_ARGS) over stdio (its environment comes from ours),
lists the tools, makes every call named on stdin (one JSON `[name, arguments]` per line) and prints
one JSON report: what the SDK raised, what each result held, every progress notification, and the
jsonschema verdict on every structuredContent, errors included. `python tests/sdk/session.py format
SNAPSHOT SCHEMA` checks the snapshot's format.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import jsonschema
from jsonschema.validators import Draft7Validator, Draft202012Validator
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult

# Results no server here sends, handed to the SDK's own validation with the schemas it listed: it
# must refuse each one, so its acceptance of the real results is a verdict, not a pass-through.
MISFITS: list[tuple[str, Any]] = [
    ("get_wagers", {"chains": [{"chainId": 137, "state": "maybe"}]}),
    ("get_wagers", {"chains": [{"chainId": 137, "state": "read"}]}),
    ("get_profile", {"accepts": []}),  # an offer, from a tool that is never priced
    ("get_profile", {"kind": "on_fire"}),
    ("build_intent", {"typedData": {}, "expiresAt": "x", "submit": {"relayPath": "/v1/relay/1"}}),
    ("get_perps_pairs", ["BTC-USD"]),
]


async def calls(mode: str, server_python: str, wanted: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    # SDK_SERVER_ARGS (a JSON list) replaces `-m mcp_server`: the platform tier starts the server shaped.
    args = json.loads(os.environ["SDK_SERVER_ARGS"]) if os.environ.get("SDK_SERVER_ARGS") else ["-m", "mcp_server"]
    params = StdioServerParameters(command=server_python, args=args, env=dict(os.environ))
    report: dict[str, Any] = {"calls": [], "schemas": {}}
    # A line the SDK cannot read is dropped and its call never answered: with SDK_CALL_TIMEOUT set,
    # such a call ends in the SDK's own timeout (named in the report) instead of hanging the session.
    wait = float(os.environ["SDK_CALL_TIMEOUT"]) if os.environ.get("SDK_CALL_TIMEOUT") else None
    async with Client(params, mode=mode) as client:  # type: ignore[arg-type]
        report["protocolVersion"] = (
            client.session.protocol_version if hasattr(client.session, "protocol_version") else None
        )
        listed = await client.list_tools()
        for tool in listed.tools:
            schema = tool.output_schema
            report["schemas"][tool.name] = schema
            if schema is not None:
                Draft202012Validator.check_schema(schema)
                Draft7Validator.check_schema(schema)
        for name, arguments in wanted:
            progress: list[list[Any]] = []
            entry: dict[str, Any] = {"name": name, "progress": progress}
            try:
                result = await client.call_tool(
                    name, arguments, read_timeout_seconds=wait, progress_callback=_recorder(progress)
                )
            except Exception as exc:  # what the SDK refused, named
                entry["raised"] = f"{type(exc).__name__}: {exc}"
            else:
                entry["isError"] = result.is_error
                entry["structuredContent"] = result.structured_content
                entry["text"] = " ".join(getattr(block, "text", "") for block in result.content)
                schema = report["schemas"].get(name)
                if schema is not None and result.structured_content is not None:
                    # A strict client (the TypeScript SDK's) validates structuredContent even on errors.
                    problems = [e.message for e in Draft202012Validator(schema).iter_errors(result.structured_content)]
                    entry["jsonschema"] = problems
            report["calls"].append(entry)
        report["misfits"] = []
        for name, content in MISFITS:
            try:
                misfit = CallToolResult(content=[], structured_content=content)
                await client.session.validate_tool_result(name, misfit)
            except RuntimeError as exc:
                report["misfits"].append(f"refused: {exc}")
            else:
                report["misfits"].append(f"accepted: {name} {content}")
    return report


def _recorder(progress: list[list[Any]]) -> Any:
    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append([value, total, message])

    return on_progress


def check_format(snapshot_path: str, schema_path: str) -> dict[str, Any]:
    with open(schema_path, encoding="utf-8") as fh:
        schema = json.load(fh)
    with open(snapshot_path, encoding="utf-8") as fh:
        snapshot = json.load(fh)
    Draft202012Validator.check_schema(schema)
    problems = [e.message for e in Draft202012Validator(schema).iter_errors(snapshot)]
    broken = dict(snapshot, tools=[dict(snapshot["tools"][0], description="x" * 601)])
    return {
        "problems": problems,
        "refuses_a_long_description": not jsonschema.Draft202012Validator(schema).is_valid(broken),
    }


def main() -> int:
    if sys.argv[1] == "format":
        print(json.dumps(check_format(sys.argv[2], sys.argv[3])))
        return 0
    _, _, mode, server_python = sys.argv
    wanted = [tuple(json.loads(line)) for line in sys.stdin if line.strip()]
    print(json.dumps(asyncio.run(calls(mode, server_python, wanted))))  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
