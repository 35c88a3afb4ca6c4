"""Run by tests/test_shared_token.py inside .venv-sdk: the official MCP SDK client over Streamable HTTP.

`python tests/sdk/http_calls.py URL` reads one JSON `[mode, tool, bearer]` per stdin line; for
each it opens a session on URL (sending `Authorization: Bearer <bearer>` on every request when
the bearer is not null), calls the tool with no arguments, and prints one JSON list of what
each result held.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def call(url: str, mode: str, tool: str, bearer: str | None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {bearer}"} if bearer is not None else None
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:  # type: ignore[arg-type]
            result = await client.call_tool(tool, {})
    return {
        "isError": result.is_error,
        "structuredContent": result.structured_content,
        "text": " ".join(getattr(block, "text", "") for block in result.content),
    }


async def main(url: str, wanted: list[list[Any]]) -> list[dict[str, Any]]:
    return [await call(url, mode, tool, bearer) for mode, tool, bearer in wanted]


if __name__ == "__main__":
    lines = [json.loads(line) for line in sys.stdin if line.strip()]
    print(json.dumps(asyncio.run(main(sys.argv[1], lines))))
