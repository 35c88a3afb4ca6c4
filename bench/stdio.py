"""Stdio round trips: p50/p99 of tools/call, tools/list and ping, RSS and CPU per call, and the direct-GET floor.

One long-lived session per server, one request at a time; the floor is the same GET the tool
makes, sent straight to the stub with the same client.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.runner import (
    CALL_WAGERS,
    LIST_TOOLS,
    PING,
    BenchError,
    Deadline,
    HttpConn,
    StdioSession,
    call_template,
    cpu_ms,
    direct_get,
    expect_ok,
    expect_result,
    expect_tool_ok,
    initialize_params,
    latency_summary,
    ok_direct,
    rss_mib,
)


def measure_stdio(
    label: str, cmd: Sequence[str], env: dict[str, str], calls: int, warmup: int, deadline: Deadline
) -> dict[str, Any]:
    """One long-lived session: RSS after start, N timed calls of each kind, CPU over the tools/call run."""
    session = StdioSession(label, cmd, env)
    out: dict[str, Any] = {}
    try:
        msg, _ = session.request("initialize", initialize_params())
        expect_result(label, "initialize", msg)
        session.notify("notifications/initialized")
        msg, _ = session.request_raw(PING)
        expect_result(label, "ping", msg)
        out["rss_start_mib"] = rss_mib(session.pid)

        msg, _ = session.request_raw(LIST_TOOLS)
        names = {t.get("name") for t in expect_result(label, "tools/list", msg).get("tools", [])}
        missing = {"get_wagers", "get_gateway_status"} - names
        if missing:
            raise BenchError(f"{label}: tools/list lacks {sorted(missing)}")
        msg, _ = session.request_raw(call_template("get_gateway_status"))
        expect_tool_ok(label, "tools/call get_gateway_status", msg)

        for template in (CALL_WAGERS, LIST_TOOLS, PING):
            for _ in range(warmup):
                msg, _ = session.request_raw(template)
            deadline.check()
        expect_tool_ok(label, "tools/call get_wagers", session.request_raw(CALL_WAGERS)[0])

        def timed(template: bytes, check: Callable[[dict[str, Any]], None]) -> list[int]:
            samples: list[int] = []
            for i in range(calls):
                msg, ns = session.request_raw(template)
                if i % 100 == 0:
                    check(msg)
                    deadline.check()
                samples.append(ns)
            return samples

        cpu0 = cpu_ms(session.pid)
        call_ns = timed(CALL_WAGERS, lambda m: expect_tool_ok(label, "tools/call get_wagers", m))
        cpu1 = cpu_ms(session.pid)
        out["rss_after_mib"] = rss_mib(session.pid)
        out["cpu_per_call_ms"] = (cpu1 - cpu0) / calls
        list_ns = timed(LIST_TOOLS, lambda m: expect_ok(label, "tools/list", m))
        ping_ns = timed(PING, lambda m: expect_ok(label, "ping", m))
        for key, samples in (("call", call_ns), ("list", list_ns), ("ping", ping_ns)):
            summary = latency_summary(samples)
            out[f"stdio_{key}_p50_ms"] = summary["p50_ms"]
            out[f"stdio_{key}_p99_ms"] = summary["p99_ms"]
            out[f"stdio_{key}"] = summary
        out["rss_end_mib"] = rss_mib(session.pid)
    finally:
        session.close()
    return out


def sequential_direct(port: int, calls: int, warmup: int, deadline: Deadline) -> dict[str, Any]:
    """The floor for stdio: the same GET, made directly to the stub, one at a time."""
    conn = HttpConn(port)
    request = direct_get(port)
    samples: list[int] = []
    try:
        for i in range(warmup + calls):
            if i % 100 == 0:
                deadline.check()
            t0 = time.perf_counter_ns()
            status, body = conn.roundtrip(request)
            t1 = time.perf_counter_ns()
            if not ok_direct(status, body):
                raise BenchError(f"stub: unexpected answer HTTP {status}: {body[:200]!r}")
            if i >= warmup:
                samples.append(t1 - t0)
    finally:
        conn.close()
    summary = latency_summary(samples)
    return {"direct_p50_ms": summary["p50_ms"], "direct_p99_ms": summary["p99_ms"], "direct_sequential": summary}
