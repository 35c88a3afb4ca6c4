"""The comparison server: the official MCP Python SDK serving the same two tools against the same stub.

Benchmark-only. It imports `mcp` (installed into the git-ignored `.venv-bench` by
`make bench-compare`), so it is never imported by the project or its tests.

    python -m bench.sdk_server                     stdio (token from FAIRWINS_API_TOKEN)
    python -m bench.sdk_server --http 0 --host 127.0.0.1
                                                   streamable HTTP, stateless, JSON answers;
                                                   prints http://HOST:PORT/mcp on stderr

Written the way the SDK's documentation suggests (MCPServer, decorated async tools, one
shared async HTTP client with keep-alive), with the same work per call as ours: one GET,
bearer from the request's Authorization header (HTTP) or the environment (stdio), the
gateway JSON returned as structuredContent and as text, a non-2xx answer as isError.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Annotated, Any

import anyio
import httpx2 as httpx
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=True)

server = MCPServer(
    "fairwins-sdk-bench",
    instructions="Benchmark twin of fairwins-mcp: reads the FairWins gateway; never signs, never pays.",
    log_level="WARNING",
)

_client: httpx.AsyncClient | None = None


def _http() -> httpx.AsyncClient:
    global _client
    if _client is None:
        base = os.environ.get("FAIRWINS_API_URL", "").rstrip("/")
        _client = httpx.AsyncClient(base_url=base, timeout=10.0, follow_redirects=False, trust_env=False)
    return _client


def _bearer(ctx: Context) -> str | None:
    headers = ctx.headers
    if headers is not None:
        value = headers.get("authorization", "")
        if value.lower().startswith("bearer "):
            return value[7:].strip()
    return os.environ.get("FAIRWINS_API_TOKEN") or None


async def _read(path: str, params: dict[str, Any] | None, token: str | None, what: str) -> CallToolResult:
    if not os.environ.get("FAIRWINS_API_URL"):
        return _failure(f"Could not read {what}: FAIRWINS_API_URL is not set.")
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        response = await _http().get(path, params=params, headers=headers)
    except httpx.HTTPError as exc:
        return _failure(f"Could not read {what}: the gateway did not answer ({type(exc).__name__}).")
    if response.status_code != 200:
        return _failure(f"Could not read {what}: the gateway answered HTTP {response.status_code}.")
    try:
        data = response.json()
    except ValueError:
        return _failure(f"Could not read {what}: the gateway's answer was not JSON.")
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _failure(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


@server.tool(
    name="get_gateway_status",
    title="Gateway status",
    description="Read the FairWins gateway's public status: health, version, chains and rails on, prices.",
    annotations=_READ_ONLY,
)
async def get_gateway_status(ctx: Context) -> CallToolResult:
    return await _read("/status", None, None, "the gateway status")


@server.tool(
    name="get_wagers",
    title="Your wagers",
    description=(
        "Read the member's wagers per chain. Each chain is read, unreadable or not-configured; "
        "an unreadable chain is UNKNOWN, never an empty result."
    ),
    annotations=_READ_ONLY,
)
async def get_wagers(
    ctx: Context,
    chainId: Annotated[int | None, Field(gt=0, description="Only this chain")] = None,
) -> CallToolResult:
    token = _bearer(ctx)
    if token is None:
        return _failure("Could not read your wagers: no API token (set FAIRWINS_API_TOKEN).")
    params = None if chainId is None else {"chainId": str(chainId)}
    return await _read("/v1/member/wagers", params, token, "your wagers")


async def _serve_http(host: str, port: int) -> None:
    import uvicorn

    # Bind first, so the port is known before uvicorn starts (port 0 → any free port).
    # proto=IPPROTO_TCP as uvicorn's own bind gets it: asyncio sets TCP_NODELAY on accepted
    # sockets only then; without it every keep-alive answer waits ~40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    bound = sock.getsockname()[1]
    app = server.streamable_http_app(stateless_http=True, json_response=True, host=host)
    config = uvicorn.Config(app, host=host, port=bound, log_level="warning", access_log=False)
    instance = uvicorn.Server(config)
    sys.stderr.write(f"fairwins-sdk-bench listening on http://{host}:{bound}/mcp\n")
    sys.stderr.flush()
    await instance.serve(sockets=[sock])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sdk_server", description="SDK comparison server")
    parser.add_argument("--http", type=int, default=None, metavar="PORT", help="serve streamable HTTP on PORT")
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    if args.http is None:
        server.run("stdio")
    else:
        anyio.run(_serve_http, args.host, args.http)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
