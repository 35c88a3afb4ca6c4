"""Run by tests/test_refusal_bodies.py inside .venv-sdk: what the official MCP SDK client shows for a refusal.

`python tests/sdk/http_refusals.py URL` reads one JSON `[mode, tool, headers]` per stdin line; for
each it opens a session on URL sending `headers` on every request and calls the tool with no
arguments. It prints one JSON list: for each line, the error the SDK raised (the code, message
and data a member's client would show), or the result when there was none.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


def _mcp_error(exc: BaseException) -> MCPError | None:
    if isinstance(exc, MCPError):
        return exc
    for inner in exc.exceptions if isinstance(exc, BaseExceptionGroup) else ():
        found = _mcp_error(inner)
        if found is not None:
            return found
    return None


async def call(url: str, mode: str, tool: str, headers: dict[str, str]) -> dict[str, Any]:
    try:
        async with create_mcp_http_client(headers=headers) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:  # type: ignore[arg-type]
                result = await client.call_tool(tool, {})
    except BaseException as exc:  # the SDK raises its error inside the session's task group
        found = _mcp_error(exc)
        if found is not None:
            return {"code": found.error.code, "message": found.error.message, "data": found.error.data}
        return {"raised": f"{type(exc).__name__}: {exc!r}"}
    return {"isError": result.is_error, "text": " ".join(getattr(block, "text", "") for block in result.content)}


async def main(url: str, wanted: list[list[Any]]) -> list[dict[str, Any]]:
    return [await call(url, mode, tool, headers) for mode, tool, headers in wanted]


if __name__ == "__main__":
    lines = [json.loads(line) for line in sys.stdin if line.strip()]
    print(json.dumps(asyncio.run(main(sys.argv[1], lines))))
