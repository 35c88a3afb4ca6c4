"""Small beside big: 2 KB calls' latency and throughput alone, then beside a stream of 4 MB answers, on one core.

    python3 -m bench.fairness                       16 small connections, 2 big ones, 8 s each way
    python3 -m bench.fairness --seconds 4 --big 2 --size 4

The server (`python -m mcp_server --http 0`) runs pinned to CPU 0 (`taskset`); the gateway (its
own process, serving `get_wagers`' two-wager answer and a `get_prediction_markets` answer of
--size MB built as bench.shapes builds it), the big load (its own process: --big keep-alive
connections asking for the markets, one after another) and this process (the small load: --small
keep-alive connections on one asyncio loop, each asking for the wagers, one after another) run
pinned to CPU 1. First the small load alone, then beside the big one. Reported: the small calls'
p50 and p99 (ms, wall clock) and calls a second, the ratios beside / alone, and the big answers
a second. Wall-clock figures: run it on a quiet machine (issue 50 asks: p99 within 2× of alone,
throughput at least 70 % of alone). Standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.runner import REPO, Deadline, HttpConn, child_env, mcp_post, percentile, start_http
from bench.shapes import body
from bench.stub_gateway import WAGERS_BODY

TOKEN = "fw1.bench-fairness-0000"
SERVER_CPU, LOAD_CPU = "0", "1"


class _Gateway(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    big = b"{}"

    def do_GET(self) -> None:
        data = self.big if self.path.startswith("/v1/polymarket/") else WAGERS_BODY
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        self.wfile.write(head.encode() + data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve_gateway(size_mb: float) -> int:
    _Gateway.big = body("markets", size_mb)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    server.daemon_threads = True
    sys.stdout.write(f"{server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()
    return 0


def big_load(port: int, connections: int) -> int:
    """--big connections asking for the markets until stdin closes; the count on stdout at the end."""
    import threading

    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_prediction_markets"}}
    request = mcp_post(port, message, None)
    done = threading.Event()
    counts = [0] * connections

    def one(index: int) -> None:
        conn = HttpConn(port)
        while not done.is_set():
            status, _ = conn.roundtrip(request)
            if status == 200:
                counts[index] += 1
        conn.close()

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(connections)]
    for thread in threads:
        thread.start()
    for _ in sys.stdin:  # each line asks for the count of answers so far, so the window's are counted alone
        sys.stdout.write(f"{sum(counts)}\n")
        sys.stdout.flush()
    done.set()
    return 0


async def small_load(port: int, connections: int, seconds: float) -> list[float]:
    """Latencies (ms) of the wagers calls answered within `seconds`, from `connections` keep-alive clients."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers"}}
    request = mcp_post(port, message, TOKEN)
    until = time.perf_counter() + seconds
    latencies: list[float] = []

    async def one() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.perf_counter() < until:
            t0 = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            answer = await reader.readexactly(length)
            if not head.startswith(b"HTTP/1.1 200") or b'"isError":false' not in answer:
                raise RuntimeError(f"a small call failed: {head[:60]!r} {answer[:200]!r}")
            latencies.append((time.perf_counter() - t0) * 1000)
        writer.close()

    await asyncio.gather(*(one() for _ in range(connections)))
    return latencies


PERCENTILES = (50.0, 75.0, 90.0, 95.0, 99.0, 99.9)  # what bench.charts draws


def summary(latencies: list[float], seconds: float) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "calls_per_s": round(len(ordered) / seconds, 1),
        "p50_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(percentile(ordered, 99), 2),
        "percentiles_ms": {f"{p:g}": round(percentile(ordered, p), 2) for p in PERCENTILES},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.fairness", description=__doc__.split("\n")[0])
    parser.add_argument("--small", type=int, default=16, help="connections making the 2 KB calls")
    parser.add_argument("--big", type=int, default=2, help="connections asking for the large answers")
    parser.add_argument("--size", type=float, default=4.0, help="the large answer, MB")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--serve-gateway", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--big-load", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_gateway:
        return serve_gateway(args.size)
    if args.big_load is not None:
        return big_load(args.big_load, args.big)
    if sys.platform == "linux":
        os.sched_setaffinity(0, {int(LOAD_CPU)})
    here = [sys.executable, "-m", "bench.fairness", "--size", str(args.size)]
    gateway = subprocess.Popen(
        ["taskset", "-c", LOAD_CPU, *here, "--serve-gateway"], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    procs: list[subprocess.Popen[Any]] = [gateway]
    try:
        assert gateway.stdout is not None
        gateway_port = int(gateway.stdout.readline())
        env = child_env(f"http://127.0.0.1:{gateway_port}", None)
        server, drain = start_http(
            ["taskset", "-c", SERVER_CPU, sys.executable, "-m", "mcp_server"], env, Deadline(60), subprocess.DEVNULL
        )
        procs.append(server)
        if drain.port is None:
            raise SystemExit(f"the server did not listen: {drain.tail()}")
        port = drain.port
        asyncio.run(small_load(port, args.small, 1.0))  # warm: connections to the gateway, the verdicts
        alone = summary(asyncio.run(small_load(port, args.small, args.seconds)), args.seconds)
        big = subprocess.Popen(
            ["taskset", "-c", LOAD_CPU, *here, "--big", str(args.big), "--big-load", str(port)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(big)
        time.sleep(1.0)  # the first large answers under way
        assert big.stdin is not None and big.stdout is not None

        def answered() -> int:
            assert big.stdin is not None and big.stdout is not None
            big.stdin.write("\n")
            big.stdin.flush()
            return int(big.stdout.readline())

        before = answered()
        beside = summary(asyncio.run(small_load(port, args.small, args.seconds)), args.seconds)
        big_count = answered() - before
        big.communicate(timeout=120)
        found = {
            "alone": alone,
            "beside": beside,
            "p99_ratio": round(beside["p99_ms"] / alone["p99_ms"], 2),
            "throughput_ratio": round(beside["calls_per_s"] / alone["calls_per_s"], 2),
            "large_answers_per_s": round(big_count / args.seconds, 2),
            "loadavg": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        }
        print(json.dumps(found, indent=2))
        if args.json:
            with open(args.json, "w", encoding="utf-8") as out:
                json.dump(found, out, indent=2)
                out.write("\n")
        return 0
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()


if __name__ == "__main__":
    raise SystemExit(main())
