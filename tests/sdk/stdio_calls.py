"""Run by tests/test_stdio.py inside .venv-sdk: the official MCP SDK client driving any stdio server command.

`python tests/sdk/stdio_calls.py MODE COMMAND [ARG...]` starts COMMAND (its environment is ours),
calls each tool named on stdin (one JSON `[name, arguments]` per line) and prints one JSON
report: what each result held, and every line of the server's stdout the SDK could not read as
a JSON-RPC message (the transport hands those to the session's message handler).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def calls(mode: str, argv: list[str], wanted: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    unreadable: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            unreadable.append(f"{type(message).__name__}: {message}"[:300])

    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    report: dict[str, Any] = {"calls": [], "unreadable": unreadable}
    async with Client(params, mode=mode, message_handler=on_message) as client:  # type: ignore[arg-type]
        for name, arguments in wanted:
            result = await client.call_tool(name, arguments)
            report["calls"].append(
                {
                    "name": name,
                    "isError": result.is_error,
                    "structuredContent": result.structured_content,
                    "text": " ".join(getattr(block, "text", "") for block in result.content),
                }
            )
    return report


if __name__ == "__main__":
    wanted = [tuple(json.loads(line)) for line in sys.stdin if line.strip()]
    print(json.dumps(asyncio.run(calls(sys.argv[1], sys.argv[2:], wanted))))  # type: ignore[arg-type]
