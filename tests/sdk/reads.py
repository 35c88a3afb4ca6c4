"""Run inside .venv-sdk: whether the official MCP Python SDK's reader accepts each message given.

`python tests/sdk/reads.py` reads one message per stdin line (as our server wrote it: ASCII
JSON) and prints one JSON list, a verdict per line: "read", or the SDK's refusal. This is the
reader its stdio and Streamable HTTP transports run on every line and body they receive
(`jsonrpc_message_adapter.validate_json`, pydantic-core's JSON parser).
"""

from __future__ import annotations

import json
import sys

from mcp import types


def verdict(line: str) -> str:
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:  # the SDK's refusal, named
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    return "read"


if __name__ == "__main__":
    print(json.dumps([verdict(line.rstrip("\n")) for line in sys.stdin]))
