"""Cold start: spawn to `initialize` answered and to the first tool result, beside the interpreter's own start-up.

The servers take turns, so background load falls on each alike; one unmeasured warm-up round first.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from bench.runner import (
    CALL_WAGERS,
    REPO,
    START_TIMEOUT_S,
    BenchError,
    BenchTimeout,
    Deadline,
    StdioSession,
    expect_result,
    expect_tool_ok,
    initialize_params,
)


def interpreter_startup(python: str, runs: int, deadline: Deadline) -> dict[str, Any]:
    """The floor under any Python server's cold start: spawn → exit of `python -c pass`, and its RSS."""
    samples: list[float] = []
    rss = math.nan
    code = "print(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])"
    for i in range(runs + 1):
        deadline.check()
        t0 = time.perf_counter_ns()
        done = subprocess.run(
            [python, "-c", code], cwd=REPO, capture_output=True, check=False, timeout=deadline.bound(START_TIMEOUT_S)
        )
        if i > 0:
            samples.append((time.perf_counter_ns() - t0) / 1e6)
        try:
            rss = int(done.stdout) / 1024.0
        except ValueError:
            pass
    return {"python_startup_ms": statistics.median(samples), "python_startup_ms_all": samples, "python_rss_mib": rss}


def cold_start_once(label: str, cmd: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """One spawn: (ms to `initialize` answered, ms to the first tools/call result)."""
    session = StdioSession(label, cmd, env)
    try:
        # Written at once: the pipe holds it until the server reads.
        session.write(
            json.dumps(
                {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize_params()},
                separators=(",", ":"),
            ).encode()
            + b"\n"
        )
        msg, _ = session.await_answer(0, session.t_spawn_ns)
        t_init = time.perf_counter_ns()
        expect_result(label, "initialize", msg)
        session.notify("notifications/initialized")
        msg, _ = session.request_raw(CALL_WAGERS)
        t_first = time.perf_counter_ns()
        expect_tool_ok(label, "first tools/call get_wagers", msg)
        return (t_init - session.t_spawn_ns) / 1e6, (t_first - session.t_spawn_ns) / 1e6
    finally:
        session.close()


def measure_cold_starts(
    servers: list[tuple[str, list[str], dict[str, Any]]],
    env: dict[str, str],
    runs: int,
    deadline: Deadline,
    errors: list[str],
) -> None:
    """Cold starts, the servers taking turns (so background load falls on both alike);
    one unmeasured warm-up round first. Medians go into each server's dict."""
    samples: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label, _, _ in servers}
    failed: set[str] = set()
    for i in range(runs + 1):
        for label, cmd, _ in servers:
            if label in failed:
                continue
            deadline.check()
            try:
                init_ms, first_ms = cold_start_once(label, cmd, env)
            except BenchTimeout:
                raise
            except BenchError as exc:
                failed.add(label)
                errors.append(f"{label}: cold start: {exc}")
                continue
            if i > 0:
                samples[label][0].append(init_ms)
                samples[label][1].append(first_ms)
    for label, _, out in servers:
        init_all, first_all = samples[label]
        if label not in failed and init_all:
            out["cold_init_ms"] = statistics.median(init_all)
            out["cold_first_result_ms"] = statistics.median(first_all)
            out["cold_init_ms_all"] = init_all
            out["cold_first_result_ms_all"] = first_all
            # The first call alone: a connection to open (and, over https, ssl to load and a handshake).
            out["cold_first_call_ms"] = statistics.median(f - i for i, f in zip(init_all, first_all, strict=True))
