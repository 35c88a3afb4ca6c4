"""Run by tests/test_relayed_shapes.py inside .venv-sdk: the official MCP Python SDK client over Streamable HTTP.

`python tests/sdk/relayed_calls.py URL` reads one JSON `[tool, arguments]` per stdin line, opens
one session on URL, lists the tools, makes each call and prints one JSON list: what the SDK raised
(its client validates a result's structuredContent against the listed outputSchema and raises
when it does not fit), or what the result held and jsonschema's verdict on its structuredContent.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from jsonschema.validators import Draft202012Validator
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, wanted: list[list[Any]]) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    async with Client(streamable_http_client(url), mode="legacy") as client:  # type: ignore[arg-type]
        schemas = {tool.name: tool.output_schema for tool in (await client.list_tools()).tools}
        for name, arguments in wanted:
            try:
                result = await client.call_tool(name, arguments)
            except Exception as exc:  # what the SDK refused, named
                seen.append({"raised": f"{type(exc).__name__}: {exc}"})
                continue
            schema = schemas.get(name)
            content = result.structured_content
            seen.append(
                {
                    "isError": result.is_error,
                    "structuredContent": content,
                    "text": [getattr(block, "text", "") for block in result.content],
                    "jsonschema": [e.message for e in Draft202012Validator(schema).iter_errors(content)]
                    if schema is not None and content is not None
                    else None,
                }
            )
    return seen


if __name__ == "__main__":
    lines = [json.loads(line) for line in sys.stdin if line.strip()]
    print(json.dumps(asyncio.run(main(sys.argv[1], lines))))
