"""CPU per MB of gateway answer, by the answer's shape: many small markets against the wager list.

    python3 -m bench.shapes                         in this process, from the gateway's bytes to the answer's
    python3 -m bench.shapes --sizes 1 --profile     the same, and cProfile's top functions for each shape
    python3 -m bench.shapes --stdio --http          and end to end: a server against a gateway in this process

In this process (no socket): a gateway transport that hands back one fixed body, the dispatcher
built as the server builds it, and the JSON-RPC answer encoded as the transports write it
(`jsonrpc.encode`, then its pieces). What is timed is this process's CPU (time.process_time)
from the gateway's bytes, as the transport hands them over, to the last byte of the answer. The
median of the calls, over the gateway answer's size in MB (10^6 bytes).

Shapes, each about 0.25, 1, 2 and 4 MB (4 MB is just under the server's 4 MiB response cap):
- markets: `get_prediction_markets`, ordinary markets of about 300 bytes, each with two outcomes,
  valid against the contract (public: no token, so no credential search);
- wagers: `get_wagers`, the stub's wagers of about 170 bytes (bench.stub_gateway), with a random
  member token and with the unlucky one, which shares a piece ("0000") with the wager ids, so the
  answer's bytes might spell it and it is searched (bench.sizes: SHARED_TOKEN).

`--stdio` (`--http`: with `--http 0`, one keep-alive client) runs `python -m mcp_server`
against a gateway served from this process and counts the server process's CPU (utime + stime,
/proc) per call, over windows of calls of at least 20 MB of answers (the lesser of two windows,
after one to warm up). Standard library only.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.runner import (
    REPO,
    Deadline,
    HttpConn,
    StdioSession,
    child_env,
    cpu_ms,
    initialize_params,
    mcp_post,
    start_http,
    stop,
)
from bench.sizes import RANDOM_TOKEN, SHARED_TOKEN
from bench.stub_gateway import wagers

MB = 1_000_000
SIZES = (0.25, 1.0, 2.0, 4.0)
CAP = 4 * 1024 * 1024  # the server's default response cap
SHAPES = ("markets", "wagers random", "wagers unlucky")
_QUESTIONS = (
    "Will the Lakers win the 2027 NBA final?",
    "Will it rain in Lisbon on the first Saturday of December?",
    "Will ETH close above 5,000 USD on 31 December?",
    "Will the league's own table settle the dispute by Friday?",
)


def markets(count: int) -> dict[str, Any]:
    """`count` ordinary markets, each with two outcomes, as /v1/polymarket/{chainId}/markets answers them."""
    rows = [
        {
            "id": f"0x{i:064x}",
            "slug": f"market-{i}-{_QUESTIONS[i % 4][:24].lower().replace(' ', '-')}",
            "question": f"{_QUESTIONS[i % 4]} (#{i})",
            "outcomes": [
                {"name": "Yes", "price": f"0.{(i * 37) % 98 + 1:02d}"},
                {"name": "No", "price": f"0.{99 - (i * 37) % 98:02d}"},
            ],
            "volume": f"{(i * 7919) % 1000000}.{i % 100:02d}",
            "endDate": f"2027-{i % 12 + 1:02d}-{i % 28 + 1:02d}T00:00:00Z",
        }
        for i in range(count)
    ]
    return {"chainId": 137, "q": None, "markets": rows}


def _encoded(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def body(shape: str, size_mb: float) -> bytes:
    """A gateway answer of this shape of about `size_mb` MB (never above the response cap)."""
    make: Callable[[int], Any] = markets if shape == "markets" else wagers
    one = len(_encoded(make(200))) / 200
    count = int(min(size_mb * MB, CAP - 4096) / one)
    data = _encoded(make(count))
    while len(data) > CAP - 1024:
        count -= 50
        data = _encoded(make(count))
    return data


def _tool_and_token(shape: str) -> tuple[str, dict[str, Any], str | None]:
    if shape == "markets":
        return "get_prediction_markets", {"chainId": 137}, None
    return "get_wagers", {}, SHARED_TOKEN if shape.endswith("unlucky") else RANDOM_TOKEN


class _Fixed:
    """A gateway transport that answers every request with one body (no socket)."""

    def __init__(self, data: bytes) -> None:
        from mcp_server.upstream.gateway import GatewayResponse

        self.response = GatewayResponse(200, (("Content-Type", "application/json"),), data)

    async def send(self, *args: Any, **kwargs: Any) -> Any:
        return self.response


def in_process(shape: str, data: bytes) -> Callable[[], bytes]:
    """One tools/call of `shape` answered with `data`, from the gateway's bytes to the answer's bytes."""
    from mcp_server.core.context import RequestContext
    from mcp_server.core.protocol import Dispatcher, Session
    from mcp_server.setup.server import build_catalog
    from mcp_server.upstream.gateway import Gateway
    from mcp_server.wire import jsonrpc
    from mcp_server.wire.jsonrpc import Request

    transport = _Fixed(data)
    dispatcher = Dispatcher(build_catalog(Gateway("http://127.0.0.1:9", timeout=30.0, transport=transport)))
    session = Session(http=False)
    init = Request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
    dispatcher.handle(init, session, RequestContext())
    name, arguments, token = _tool_and_token(shape)
    params = {"name": name, "arguments": arguments}

    def call() -> bytes:
        ctx = RequestContext(bearer=token, bearer_source="header") if token else RequestContext()
        reply = dispatcher.handle(Request(1, "tools/call", params), session, ctx)
        out = b"".join(jsonrpc.pieces(jsonrpc.encode(reply.message)))
        return out

    answer = json.loads(call())
    result = answer.get("result", {})
    if result.get("isError") or "structuredContent" not in result:
        raise SystemExit(f"{shape}: not a successful answer: {str(answer)[:300]}")
    if json.loads(result["content"][0]["text"]) != result["structuredContent"]:
        raise SystemExit(f"{shape}: the text block is not the structured content")
    return call


def cpu_per_call(call: Callable[[], object], repeat: int) -> tuple[float, list[float]]:
    """Median CPU ms of `call` (this process), collected before each, not during."""
    samples = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time_ns()
        call()
        samples.append((time.process_time_ns() - t0) / 1e6)
    return statistics.median(samples), samples


def profile_text(call: Callable[[], object], top: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(3):
        call()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


# ---- end to end: a stdio server against a gateway in this process ---------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        data = self.server.body
        self.wfile.write(
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data
        )

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    body = b"{}"


def stdio(shape: str, data: bytes, calls: int) -> float:
    """Median CPU ms per call of a stdio server (its process) answering `shape` with `data`."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.body = data
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    name, arguments, token = _tool_and_token(shape)
    session = StdioSession(
        "ours", [sys.executable, "-m", "mcp_server"], child_env(f"http://127.0.0.1:{server.server_address[1]}", token)
    )
    try:
        session.request("initialize", initialize_params())
        session.notify("notifications/initialized")
        # /proc counts in clock ticks (10 ms): a window of calls, at least 20 MB of answers.
        windows = []
        for window in range(3):
            count = max(calls, int(20 * MB / len(data)))
            before = cpu_ms(session.pid)
            for _ in range(count):
                message, _ = session.request("tools/call", {"name": name, "arguments": arguments})
                if message.get("result", {}).get("isError") is not False:
                    raise SystemExit(f"{shape} over stdio failed: {str(message)[:300]}")
            if window:  # the first window warms up
                windows.append((cpu_ms(session.pid) - before) / count)
        return min(windows)
    finally:
        session.close()
        server.shutdown()
        server.server_close()


def http(shape: str, data: bytes, calls: int) -> float:
    """CPU ms per call of an HTTP server (its process) answering `shape` with `data`, to one keep-alive client."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.body = data
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    name, arguments, token = _tool_and_token(shape)
    env = child_env(f"http://127.0.0.1:{server.server_address[1]}", None)
    proc, drain = start_http([sys.executable, "-m", "mcp_server"], env, Deadline(60), stdout=subprocess.DEVNULL)
    conn = HttpConn(drain.port or 0)
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    request = mcp_post(drain.port or 0, message, token)
    try:
        if drain.port is None:
            raise SystemExit(f"the HTTP server did not start: {drain.tail()}")
        windows = []
        for window in range(3):
            count = max(calls, int(20 * MB / len(data)))
            before = cpu_ms(proc.pid)
            for _ in range(count):
                status, answer = conn.roundtrip(request)
                if status != 200 or b'"isError":false' not in answer:
                    raise SystemExit(f"{shape} over HTTP failed: {status} {answer[:300]!r}")
            if window:
                windows.append((cpu_ms(proc.pid) - before) / count)
        return min(windows)
    finally:
        conn.close()
        stop(proc)
        server.shutdown()
        server.server_close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.shapes", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=list(SIZES), help="gateway answer sizes, MB")
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--calls", type=int, default=9, help="calls per cell (the median is kept)")
    parser.add_argument("--profile", action="store_true", help="cProfile's top functions for each cell")
    parser.add_argument("--stdio", action="store_true", help="also end to end, over stdio")
    parser.add_argument("--http", action="store_true", help="also end to end, over HTTP (one keep-alive client)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    found: list[dict[str, Any]] = []
    print(
        f"{'shape':16} {'gateway MB':>10} {'answer MB':>10} {'CPU ms':>8} {'ms/MB':>7}"
        + ("  stdio ms/MB" if args.stdio else "")
        + ("  http ms/MB" if args.http else "")
    )
    for shape in args.shapes:
        for size in args.sizes:
            data = body(shape.split()[0], size)
            call = in_process(shape, data)
            out = len(call())
            ms, samples = cpu_per_call(call, args.calls)
            row: dict[str, Any] = {
                "shape": shape,
                "gateway_bytes": len(data),
                "answer_bytes": out,
                "cpu_ms": round(ms, 2),
                "cpu_ms_per_mb": round(ms / (len(data) / MB), 2),
                "samples_ms": [round(s, 2) for s in samples],
            }
            line = f"{shape:16} {len(data) / MB:10.2f} {out / MB:10.2f} {ms:8.1f} {row['cpu_ms_per_mb']:7.1f}"
            if args.stdio:
                e2e = stdio(shape, data, max(3, args.calls // 2))
                row["stdio_cpu_ms"] = round(e2e, 2)
                row["stdio_cpu_ms_per_mb"] = round(e2e / (len(data) / MB), 2)
                line += f"  {row['stdio_cpu_ms_per_mb']:11.1f}"
            if args.http:
                e2e = http(shape, data, max(3, args.calls // 2))
                row["http_cpu_ms"] = round(e2e, 2)
                row["http_cpu_ms_per_mb"] = round(e2e / (len(data) / MB), 2)
                line += f"  {row['http_cpu_ms_per_mb']:10.1f}"
            print(line, flush=True)
            if args.profile:
                print(profile_text(call, 18))
            found.append(row)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out_file:
            json.dump({"rows": found, "python": sys.version.split()[0]}, out_file, indent=2)
            out_file.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
