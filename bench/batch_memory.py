"""Memory under one large 2025-03-26 batch: the server's peak resident set while it answers it.

    python3 -m bench.batch_memory                              the default shapes
    python3 -m bench.batch_memory --items 300 --answer-mib 1   one shape

The stub gateway answers /status with a large JSON body; our server (`python3 -m mcp_server
--http 0`, or --server-cmd) gets one POST of N `get_gateway_status` calls in one batch. Reported:
resident memory before, the peak while answering (VmHWM: the kernel's high-water mark, so nothing
between samples is missed), the answer's status and size, and the wall time. One fresh server
process per shape, so each peak is that batch's alone. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.runner import (
    REPO,
    BenchError,
    Deadline,
    HttpConn,
    StubProcess,
    child_env,
    rss_mib,
    start_http,
    stop,
    stop_all,
)

MIB = 1024 * 1024
SHAPES = ((300, 1), (64, 1), (64, 4))  # (items, MiB per gateway answer); the first is the issue's


def peak_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM), in MiB."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def batch_request(port: int, items: int) -> bytes:
    params = {"name": "get_gateway_status", "arguments": {}}
    batch = [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params} for i in range(items)]
    body = json.dumps(batch, separators=(",", ":")).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json\r\nMCP-Protocol-Version: 2025-03-26\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def measure(server_cmd: list[str], items: int, answer_mib: float, deadline: Deadline) -> dict[str, Any]:
    stub = StubProcess(0.0, deadline, status_bytes=int(answer_mib * MIB))
    try:
        env = child_env(stub.url, None)
        env["FAIRWINS_MCP_TIMEOUT"] = "120"  # the batch's deadline is the gateway timeout: let it finish
        proc, drain = start_http(server_cmd, env, deadline)
        try:
            if drain.port is None:
                raise BenchError(f"the server did not start: {drain.tail()!r}")
            conn = HttpConn(drain.port)
            try:
                conn.roundtrip(batch_request(drain.port, 1))  # warm: every module the batch needs is loaded
                before = rss_mib(proc.pid)
                started = time.perf_counter()
                status, body = conn.roundtrip(batch_request(drain.port, items))
                took = time.perf_counter() - started
            finally:
                conn.close()
            peak = peak_mib(proc.pid)
        finally:
            stop(proc)
    finally:
        stub.close()
    answers = json.loads(body)
    errors = sum(1 for m in answers if isinstance(m, dict) and "error" in m) if isinstance(answers, list) else 1
    return {
        "items": items,
        "answer_mib": answer_mib,
        "rss_before_mib": round(before, 1),
        "peak_mib": round(peak, 1),
        "status": status,
        "answer_bytes": len(body),
        "items_answered_with_an_error": errors,
        "seconds": round(took, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.batch_memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, help="calls in the batch (default: every shape in SHAPES)")
    parser.add_argument("--answer-mib", type=float, default=1.0, help="MiB of each gateway answer (with --items)")
    parser.add_argument("--server-cmd", default=f"{sys.executable} -m mcp_server", help="our server's command")
    args = parser.parse_args(argv)
    shapes = [(args.items, args.answer_mib)] if args.items else list(SHAPES)
    deadline = Deadline(900)
    print(f"batch memory: {shlex.join(shlex.split(args.server_cmd))} in {REPO}")
    columns = ("items", "MiB/answer", "RSS before", "peak RSS", "status", "answer", "errors", "s")
    print(" ".join(f"{c:>{w}}" for c, w in zip(columns, (5, 10, 10, 9, 6, 10, 6, 6), strict=True)))
    try:
        for items, answer_mib in shapes:
            r = measure(shlex.split(args.server_cmd), items, answer_mib, deadline)
            print(
                f"{r['items']:>5} {r['answer_mib']:>10g} {r['rss_before_mib']:>10.1f} {r['peak_mib']:>9.1f} "
                f"{r['status']:>6} {r['answer_bytes'] / MIB:>8.1f}Mi {r['items_answered_with_an_error']:>6} "
                f"{r['seconds']:>6.2f}"
            )
    finally:
        stop_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
