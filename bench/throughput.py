"""HTTP throughput: req/s, p50/p99 and server CPU per call at 1, 8 and 32 clients, beside the stub's own floor.

Each server on --http 0; closed-loop clients on keep-alive connections, a warm-up not counted.
"""

from __future__ import annotations

import functools
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from bench.runner import (
    START_TIMEOUT_S,
    BenchError,
    Deadline,
    HttpConn,
    cpu_ms,
    direct_get,
    mcp_post,
    ok_direct,
    ok_tool_call,
    rss_mib,
    run_load,
    start_http,
    stop,
)

HTTP_LEVELS = (1, 8, 32)


def measure_http(
    label: str,
    cmd: Sequence[str],
    env: dict[str, str],
    warmup_s: float,
    duration_s: float,
    deadline: Deadline,
) -> dict[str, Any]:
    """The server on --http 0: throughput and latency at 1, 8, 32 clients; CPU per call at each."""
    proc, drain = start_http(cmd, env, deadline, stdout=subprocess.DEVNULL)
    out: dict[str, Any] = {}
    try:
        if drain.port is None:
            raise BenchError(
                f"{label} (HTTP): no 'http://127.0.0.1:<port>/mcp' line on stderr "
                f"(exit code {proc.poll()}); stderr: {drain.tail()!r}"
            )
        port = drain.port
        # Ready when a tools/call answers well (the line may come just before accept starts).
        conn = HttpConn(port)
        probe = mcp_post(
            port, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}}
        )
        until = time.monotonic() + deadline.bound(START_TIMEOUT_S)
        last = ""
        try:
            while True:
                try:
                    status, body = conn.roundtrip(probe)
                    last = "" if ok_tool_call(status, body) else f"HTTP {status}: {body[:300]!r}"
                    break
                except OSError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                    if time.monotonic() > until or proc.poll() is not None:
                        break
                    time.sleep(0.02)
        finally:
            conn.close()
        if last:
            raise BenchError(f"{label} (HTTP): tools/call get_wagers did not succeed: {last}; stderr: {drain.tail()!r}")
        out["http_rss_start_mib"] = rss_mib(proc.pid)
        request = mcp_post(
            port, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}}
        )
        for clients in HTTP_LEVELS:
            load = run_load(
                port,
                request,
                ok_tool_call,
                clients,
                warmup_s,
                duration_s,
                deadline,
                sample_cpu=functools.partial(cpu_ms, proc.pid),
            )
            summary = load.summary()
            out[f"http_{clients}"] = summary
            out[f"http_{clients}_rps"] = summary["rps"]
            out[f"http_{clients}_p50_ms"] = summary["p50_ms"]
            out[f"http_{clients}_p99_ms"] = summary["p99_ms"]
            out[f"http_{clients}_cpu_per_call_ms"] = summary["cpu_per_call_ms"]
            out[f"http_{clients}_errors"] = summary["errors"]
            if proc.poll() is not None:
                raise BenchError(
                    f"{label} (HTTP): the server exited during the {clients}-client run; stderr: {drain.tail()!r}"
                )
        out["http_rss_end_mib"] = rss_mib(proc.pid)
    finally:
        stop(proc)
    return out


def measure_direct_http(port: int, warmup_s: float, duration_s: float, deadline: Deadline) -> dict[str, Any]:
    """The floor for HTTP: the tool's GET sent straight to the stub, at the same client counts."""
    out: dict[str, Any] = {}
    for clients in HTTP_LEVELS:
        summary = run_load(port, direct_get(port), ok_direct, clients, warmup_s, duration_s, deadline).summary()
        out[f"direct_{clients}"] = summary
        out[f"direct_{clients}_rps"] = summary["rps"]
        out[f"direct_{clients}_p50_ms"] = summary["p50_ms"]
        out[f"direct_{clients}_p99_ms"] = summary["p99_ms"]
    return out
