"""The floor of bench.crowd: the least an MCP door on asyncio can do per call, to price ours against.

    python -m bench.floor_proxy --http 0 --host 127.0.0.1      (FAIRWINS_API_URL: the gateway)

Per POST: read the head and Content-Length body, json.loads it, one GET /v1/member/wagers on a
pooled keep-alive connection to the gateway (the caller's bearer forwarded), json.loads the answer
and write one JSON-RPC result holding it as structuredContent and as text. No checks, no limits,
no scrub, no records: nothing ours owes an operator. Benchmark-only; standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from urllib.parse import urlsplit

POOL: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []


async def read_message(reader: asyncio.StreamReader) -> tuple[bytes, dict[bytes, bytes], bytes]:
    """One HTTP/1.1 message: its first line, its headers (names lower-cased) and its Content-Length body."""
    head = await reader.readuntil(b"\r\n\r\n")
    first, *lines = head[:-4].split(b"\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get(b"content-length", b"0")))
    return first, headers, body


async def gateway_get(host: str, port: int, path: bytes, bearer: bytes) -> bytes:
    reader, writer = POOL.pop() if POOL else await asyncio.open_connection(host, port)
    writer.write(b"GET %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n" % (path, host.encode()))
    writer.write(b"Authorization: %s\r\n\r\n" % bearer if bearer else b"\r\n")
    _, headers, body = await read_message(reader)
    if headers.get(b"connection", b"").lower() != b"close":
        POOL.append((reader, writer))
    else:
        writer.close()
    return body


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, port: int) -> None:
    try:
        while True:
            _, headers, body = await read_message(reader)
            call = json.loads(body)
            data = json.loads(await gateway_get(host, port, b"/v1/member/wagers", headers.get(b"authorization", b"")))
            result = {"content": [{"type": "text", "text": json.dumps(data)}], "structuredContent": data}
            answer = json.dumps({"jsonrpc": "2.0", "id": call.get("id"), "result": result}).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(answer)
            )
            writer.write(answer)
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.floor_proxy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    gateway = urlsplit(os.environ["FAIRWINS_API_URL"])
    ghost, gport = gateway.hostname or "127.0.0.1", gateway.port or 80
    server = await asyncio.start_server(lambda r, w: serve(r, w, ghost, gport), args.host, args.http, backlog=65535)
    bound = server.sockets[0].getsockname()[1]
    sys.stderr.write(f"floor proxy on http://{args.host}:{bound}/mcp\n")
    sys.stderr.flush()
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
