"""The slow-gateway table: many clients against a gateway that answers in 200 ms, ours beside the official SDKs.

    python3 -m bench.slow                                    ours only
    python3 -m bench.slow --compare .venv-bench/bin/python   beside the official Python SDK server
    python3 -m bench.slow --compare-ts .tools/node22/.../node  beside the official TypeScript SDK server
    python3 -m bench.slow --ours-workers 1 2                 ours with one worker, then with two

A request here costs the server little CPU and waits 200 ms on the stub gateway (bench.stub_gateway
--delay-ms 200, its own process), so what a server does with waiting requests decides the table:
refuse them, queue them, or hold them all. Each server is started at its defaults (`--http 0`),
then loaded by 32, 128 and 256 keep-alive clients, each for --duration s; every request counts,
from the first (no warm-up hides a refusal). Per level: throughput, p50/p99 and errors, and the
server's peak resident memory. Targets (issue 13), at once: 0 errors at every level for ours;
at 256 clients, throughput ≥ 3× the Python SDK's and p99 ≤ ½ of it. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.runner import (  # one harness for both tables
    REPO,
    START_TIMEOUT_S,
    BenchError,
    Deadline,
    HttpConn,
    StderrDrain,
    StubProcess,
    child_env,
    compile_ours,
    loadavg,
    mcp_post,
    ok_tool_call,
    our_python,
    rounded,
    rss_mib,
    run_load,
    sdk_command,
    start_http,
    stop,
    stop_all,
    tree_mib,
    ts_command,
)

LEVELS = (32, 128, 256)
DEFAULT_JSON = REPO / "bench" / "results" / "slow.json"
CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}}


@dataclass
class Server:
    label: str
    cmd: list[str]
    levels: dict[int, dict[str, Any]] = field(default_factory=dict)
    error: str = ""


def pss_mib(pid: int) -> float:
    """Proportional set size of `pid` and its children, in MiB: memory shared by workers forked from one
    supervisor counts once, where a sum of RSS would count it in every worker."""
    return tree_mib(pid, "smaps_rollup", "Pss:")


class PeakMemory:
    """The largest memory (PSS, and RSS summed) of a process tree, sampled every 50 ms while a level runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self.peak_rss = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, pss_mib(self.pid))
            self.peak_rss = max(self.peak_rss, rss_mib(self.pid))

    def close(self) -> float:
        self._stop.set()
        self._thread.join(1)
        return self.peak


def wait_ready(label: str, port: int, proc: subprocess.Popen[bytes], drain: StderrDrain, deadline: Deadline) -> None:
    conn = HttpConn(port)
    until = time.monotonic() + deadline.bound(START_TIMEOUT_S)
    last = ""
    try:
        while time.monotonic() < until and proc.poll() is None:
            try:
                status, body = conn.roundtrip(mcp_post(port, CALL))
                if ok_tool_call(status, body):
                    return
                last = f"HTTP {status}: {body[:300]!r}"
            except OSError as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.05)
    finally:
        conn.close()
    raise BenchError(f"{label}: never answered a tools/call: {last}; stderr: {drain.tail()!r}")


def measure(server: Server, env: dict[str, str], levels: Sequence[int], duration: float, deadline: Deadline) -> None:
    proc, drain = start_http(server.cmd, env, deadline)
    try:
        if drain.port is None:
            raise BenchError(f"{server.label}: no URL on stderr (exit code {proc.poll()}); stderr: {drain.tail()!r}")
        port = drain.port
        wait_ready(server.label, port, proc, drain, deadline)
        request = mcp_post(port, CALL)
        for clients in levels:
            peak = PeakMemory(proc.pid)
            load = run_load(port, request, ok_tool_call, clients, 0.0, duration, deadline)
            summary = load.summary()
            summary["peak_pss_mib"] = peak.close()
            summary["peak_rss_sum_mib"] = peak.peak_rss
            summary["errors"] = load.errors  # every request counted: there was no warm-up
            server.levels[clients] = summary
            if proc.poll() is not None:
                raise BenchError(f"{server.label}: exited during the {clients}-client run; stderr: {drain.tail()!r}")
    finally:
        stop(proc)


def _cell(level: dict[str, Any] | None, key: str, fmt: str) -> str:
    if not level:
        return "—"
    value = level.get(key)
    if not isinstance(value, (int, float)) or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return fmt.format(value)


def render(servers: list[Server], levels: Sequence[int]) -> str:
    header = ["clients", "server", "req/s", "p50 ms", "p99 ms", "errors", "peak PSS MiB"]
    rows = []
    for clients in levels:
        for server in servers:
            level = server.levels.get(clients)
            rows.append(
                [
                    str(clients),
                    server.label,
                    _cell(level, "rps", "{:,.0f}"),
                    _cell(level, "p50_ms", "{:,.1f}"),
                    _cell(level, "p99_ms", "{:,.1f}"),
                    _cell(level, "errors", "{:,}"),
                    _cell(level, "peak_pss_mib", "{:.0f}"),
                ]
            )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = (c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        return "  ".join(padded)

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def verdicts(ours: Server | None, sdk: Server | None, levels: Sequence[int]) -> list[dict[str, Any]]:
    """The issue's three targets, each PASS, MISS or n/a (when a server was not measured)."""
    found: list[dict[str, Any]] = []
    if ours is None:
        return found
    errors = [ours.levels.get(c, {}).get("errors") for c in levels]
    measured = all(isinstance(e, int) for e in errors)
    found.append(
        {
            "target": f"{ours.label}: 0 errors at every level",
            "value": sum(e or 0 for e in errors),
            "result": ("PASS" if not any(errors) else "MISS") if measured else "n/a",
        }
    )
    top = max(levels)
    mine, theirs = ours.levels.get(top, {}), (sdk.levels.get(top, {}) if sdk else {})
    for key, text, bound, better in (
        ("rps", f"{ours.label}: req/s at {top} clients ≥ 3× Python SDK", 3.0, "ge"),
        ("p99_ms", f"{ours.label}: p99 at {top} clients ≤ ½ Python SDK", 0.5, "le"),
    ):
        a, b = mine.get(key), theirs.get(key)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0:
            ratio = a / b
            ok = ratio >= bound if better == "ge" else ratio <= bound
            found.append({"target": text, "value": round(ratio, 2), "result": "PASS" if ok else "MISS"})
        else:
            found.append({"target": text, "value": None, "result": "n/a"})
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.slow", description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", metavar="PYTHON", help="interpreter with `mcp` installed: the Python SDK too")
    parser.add_argument("--compare-ts", metavar="NODE", help="Node 22 binary: the TypeScript SDK server too")
    parser.add_argument("--ours-workers", nargs="+", default=["default"], help="ours with these --workers values")
    parser.add_argument("--levels", type=int, nargs="+", default=list(LEVELS))
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per level (default 10)")
    parser.add_argument("--delay-ms", type=float, default=200.0)
    parser.add_argument("--time-limit", type=float, default=1200.0)
    parser.add_argument("--json", default=str(DEFAULT_JSON))
    args = parser.parse_args(argv)
    deadline = Deadline(args.time_limit)
    python = our_python(None, args.compare)
    compile_ours(python)
    servers: list[Server] = []
    for workers in args.ours_workers:
        cmd = [python, "-m", "mcp_server"] + ([] if workers == "default" else ["--workers", workers])
        servers.append(Server("ours" if workers == "default" else f"ours --workers {workers}", cmd))
    sdk: Server | None = None
    errors: list[str] = []
    sdk_version = ""
    if args.compare:
        try:
            sdk_cmd, sdk_version = sdk_command(args.compare)
            sdk = Server(f"Python SDK {sdk_version}", sdk_cmd)
            servers.append(sdk)
        except (BenchError, OSError, subprocess.SubprocessError) as exc:
            errors.append(f"Python SDK: {exc}")
    if args.compare_ts:
        try:
            ts_cmd, ts_version = ts_command(args.compare_ts)
            servers.append(Server(f"TypeScript SDK {ts_version.split(' on ')[0]}", ts_cmd))
        except (BenchError, OSError, subprocess.SubprocessError) as exc:
            errors.append(f"TypeScript SDK: {exc}")
    load_before = loadavg()
    stub = StubProcess(args.delay_ms, deadline)
    env = child_env(stub.url, None)
    try:
        for server in servers:
            sys.stderr.write(f"bench.slow: {server.label}: {', '.join(map(str, args.levels))} clients\n")
            try:
                measure(server, env, args.levels, args.duration, deadline)
            except BenchError as exc:
                server.error = str(exc)
                errors.append(str(exc))
    finally:
        stub.close()
        stop_all()
    ours = servers[0] if servers and servers[0].label == "ours" else None
    found = verdicts(ours, sdk, args.levels)
    print(
        f"slow gateway: stub delay {args.delay_ms:g} ms, {args.duration:g} s per level, {os.cpu_count()} CPUs, "
        f"load average {load_before:.2f} at the start"
    )
    print()
    print(render(servers, args.levels))
    print()
    for v in found:
        print(f"{v['result']:<4}  {v['target']} ({v['value']})")
    for e in errors:
        print(f"error: {e}")
    report = {
        "delay_ms": args.delay_ms,
        "duration_s": args.duration,
        "levels": args.levels,
        "loadavg_1m_before": load_before,
        "servers": {s.label: {"cmd": s.cmd, "levels": s.levels, "error": s.error} for s in servers},
        "targets": found,
        "errors": errors,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rounded(report), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nresults: {path}")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
