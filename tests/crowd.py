"""A crowd of MCP clients and a slow gateway, each a process of its own, for tests of what a server does under load.

    python -m tests.crowd gateway --delay 0.2
    python -m tests.crowd clients --port PORT --connections 1000

`gateway` answers every request as the sandbox gateway would (tests/sandbox_gateway.py, its pure
`_answer_for`), each after `--delay` seconds, on one asyncio loop: a thousand calls waiting at
once cost it no thread. It prints `port N` once listening.

`clients` opens `--connections` keep-alive connections to `POST /mcp` and keeps one
`tools/call` in flight on each: the next call leaves as the answer arrives (the second once
every client had its first answer, so that the whole crowd presses at once). A connection the
server closes (`Connection: close`, as a drain answers) is opened again; one the server refuses
ends that client. It prints `up N` once every connection has had its first answer, and at the
end (every client ended, or SIGTERM) one line `sent S answered A unanswered U failed F refused R`.
Unanswered counts calls sent on an open connection that never got their answer; failed, answers
that were not a tool's result (a refusal, an error).

Each is a process of its own so that the test's process does nothing but read the server's log
and keep time, with the interpreter lock to itself.
"""

from __future__ import annotations

import argparse
import asyncio
import http
import itertools
import json
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.balancer import CALL_HEADERS
from tests.sandbox_gateway import SeenRequest, _answer_for

MAX_HEAD = 64 * 1024


def raise_descriptor_limit(wanted: int) -> None:
    """Lift this process's soft RLIMIT_NOFILE to `wanted` (or the hard limit): a crowd needs a descriptor per client."""
    if sys.platform == "win32":
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, dict[str, str]]:
    """The first line and the headers (names lower-cased) of one HTTP message."""
    raw = await reader.readuntil(b"\r\n\r\n")
    first, *lines = raw.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return first, headers


# ---- the gateway ----------------------------------------------------------------------------


async def _gateway(delay: float) -> None:
    answers: dict[tuple[str, str, str], bytes] = {}

    async def answer(first: str, headers: dict[str, str], body: bytes) -> bytes:
        method, target, _ = first.split(" ", 2)
        path, _, query = target.partition("?")
        key = (method, target, headers.get("authorization", ""))
        cached = answers.get(key)
        if cached is None:
            seen = SeenRequest(method, path, query, tuple(headers.items()), body)
            made = _answer_for(seen)
            head = [f"HTTP/1.1 {made.status} {http.HTTPStatus(made.status).phrase}"]
            head += [f"{name}: {value}" for name, value in made.headers]
            head.append(f"Content-Length: {len(made.body)}")
            cached = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + made.body
            answers[key] = cached
        return cached

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                first, headers = await _read_head(reader)
                length = int(headers.get("content-length", "0") or 0)
                body = await reader.readexactly(length) if length else b""
                await asyncio.sleep(delay)
                writer.write(await answer(first, headers, body))
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=4096, limit=MAX_HEAD)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


# ---- the clients ----------------------------------------------------------------------------


@dataclass
class Tally:
    sent: int = 0
    answered: int = 0
    unanswered: int = 0
    failed: int = 0  # answered, but not with a tool's result
    examples: list[str] = field(default_factory=list)  # the first few failed answers
    refused: int = 0
    up: int = 0


def _call(rid: int) -> bytes:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}}
    ).encode()
    head = ["POST /mcp HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}"]
    head += [f"{name}: {value}" for name, value in CALL_HEADERS.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


async def _client(port: int, ids: itertools.count[int], tally: Tally, first: asyncio.Event, everyone: int) -> None:
    answered_once = False
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=MAX_HEAD)
        except OSError:
            tally.refused += 1  # the server stopped accepting: this client is done
            return
        outstanding = False
        try:
            while True:
                writer.write(_call(next(ids)))
                tally.sent += 1
                outstanding = True
                status, headers = await _read_head(reader)
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                outstanding = False
                tally.answered += 1
                if not status.startswith("HTTP/1.1 200 ") or b'"isError":false' not in body.replace(b" ", b""):
                    tally.failed += 1
                    if len(tally.examples) < 3:
                        tally.examples.append(f"{status} {body[:300]!r}")
                if not answered_once:
                    answered_once = True
                    tally.up += 1
                    if tally.up == everyone:
                        first.set()
                    # The crowd gathers before it presses: the next calls wait until every client is
                    # connected and answered, then leave together (and the crowd is up sooner).
                    await first.wait()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError) as exc:
            if outstanding:
                tally.unanswered += 1
                if len(tally.examples) < 6:
                    tally.examples.append(f"unanswered: {exc!r}")
        finally:
            writer.close()


async def _clients(port: int, connections: int) -> None:
    tally = Tally()
    ids = itertools.count(1)
    everyone_up = asyncio.Event()
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(_client(port, ids, tally, everyone_up, connections)) for _ in range(connections)]
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def announce() -> None:
        await everyone_up.wait()
        print(f"up {tally.up}", flush=True)

    announcing = loop.create_task(announce())
    ended = loop.create_task(asyncio.wait(tasks))
    stopped = loop.create_task(stop.wait())
    await asyncio.wait([ended, stopped], return_when=asyncio.FIRST_COMPLETED)
    for task in (*tasks, announcing, ended, stopped):
        task.cancel()
    print(
        f"sent {tally.sent} answered {tally.answered} unanswered {tally.unanswered} failed {tally.failed} "
        f"refused {tally.refused}",
        flush=True,
    )
    for example in tally.examples:
        print(f"example {example}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.crowd")
    commands = parser.add_subparsers(dest="command", required=True)
    gateway = commands.add_parser("gateway")
    gateway.add_argument("--delay", type=float, default=0.2)
    clients = commands.add_parser("clients")
    clients.add_argument("--port", type=int, required=True)
    clients.add_argument("--connections", type=int, default=1000)
    args = parser.parse_args(argv)
    raise_descriptor_limit(2 * args.connections + 64 if args.command == "clients" else 8192)
    if args.command == "gateway":
        asyncio.run(_gateway(args.delay))
    else:
        asyncio.run(_clients(args.port, args.connections))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
