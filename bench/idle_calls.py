"""Why a call costs more CPU on an idle server than on a busy one: the work, or the machine.

    python3 -m bench.idle_calls              both parts, about three minutes
    python3 -m bench.idle_calls --no-valgrind    the machine's part alone, seconds

Needs valgrind (Debian's package) for the instruction counts, and the Node 22 and wrk the crowd
uses (`make bench-crowd` installs them).

The crowd (bench.crowd) finds ours costing about twice the CPU per call at 64 connections that
it costs at 1,000. Two measures tell whether the server does more work per call when it is idle
or the same work runs slower:

- Instructions per call (callgrind, which counts and does not time): ours behind the 200 ms
  gateway double with a few connections, where each call runs alone between idle waits, and
  with many, where the server never waits. Equal counts mean equal work.
- The machine's wake cost: the same Python work (the double's wagers answer decoded, wrapped as
  a tool result and encoded, as a call does) timed back to back and after an idle gap, on the
  server's CPU. A core that comes back from idle runs the same instructions slower (cold caches
  and predictors, a virtual CPU handed back by its host); the figure says how much slower here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import crowd
from bench.runner import REPO, Deadline, child_env, start_http, stop

FEW, MANY = 2, 300  # connections: each call alone (about 10 a second) / a server that never waits
GAPS_S = (0.0, 0.0005, 0.003, 0.02)
MAX_IDLE_RATIO = 1.2  # the criterion: an idle server's instructions per call against a busy one's


def wagers_work(body: bytes) -> Callable[[], None]:
    """A call's Python work, roughly: the gateway's answer decoded, wrapped, encoded."""

    def work() -> None:
        for _ in range(4):
            value = json.loads(body)
            text = json.dumps(value)
            result = {"content": [{"type": "text", "text": text}], "structuredContent": value}
            json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()

    return work


def wake_cost(work: Callable[[], None], rounds: int, cpu: int) -> dict[str, float]:
    """CPU ms per run of `work`, by the idle gap before each run; pinned to `cpu`."""
    os.sched_setaffinity(0, {cpu})
    work()
    found: dict[str, list[float]] = {f"{gap * 1000:g}": [] for gap in GAPS_S}
    for _ in range(3):  # the gaps interleaved, so a change of the machine's load falls on all
        for gap in GAPS_S:
            total = 0.0
            for _ in range(rounds):
                if gap:
                    time.sleep(gap)
                start = time.thread_time()
                work()
                total += time.thread_time() - start
            found[f"{gap * 1000:g}"].append(total / rounds * 1000)
    return {gap: statistics.median(values) for gap, values in found.items()}


def instructions(connections: int, body_file: str, warmup: float, window: float) -> dict[str, Any]:
    """Ours under callgrind behind the 200 ms double: instructions per answered call."""
    double = crowd.Double(str(crowd.NODE), body_file, 200.0)
    out = Path(tempfile.mkdtemp(prefix="idle-calls-")) / "callgrind.out"
    env = child_env(double.url, None)
    env["FAIRWINS_MCP_MAX_CONCURRENCY"] = "4096"
    cmd = [
        "taskset", "-c", crowd.SERVER_CPUS, "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
        sys.executable, "-m", "mcp_server", *crowd.OURS_FLAGS,
    ]  # fmt: skip
    try:
        proc, drain = start_http(cmd, env, Deadline(300))
        try:
            drain.found.wait(120)
            if drain.port is None:
                raise SystemExit(f"ours under valgrind did not start: {drain.tail()!r}")
            for _ in range(3):
                crowd.call_once(drain.port)
            load = crowd.Load(f"http://127.0.0.1:{drain.port}/mcp", connections, warmup, window, 60, 1)
            crowd.sleep_until(load.opens)
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True)
            crowd.sleep_until(load.closes)
            subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
            result = load.result()
        finally:
            stop(proc)
    finally:
        double.close()
    counted = 0
    for dump in out.parent.iterdir():  # one dump a thread: every thread's instructions count
        for line in dump.read_text(errors="replace").splitlines():
            if line.startswith("summary:"):
                counted += int(line.split()[1])
    answered = int(result["in_window"])
    return {
        "connections": connections,
        "answered": answered,
        "failed": result["failed"],
        "instructions_per_call": counted / answered if answered else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.idle_calls", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300, help="runs of the work per gap and pass (default 300)")
    parser.add_argument("--window", type=float, default=20.0, help="seconds counted under callgrind (default 20)")
    parser.add_argument("--no-valgrind", action="store_true", help="the machine's wake cost alone")
    parser.add_argument("--json", default=str(REPO / "bench" / "results" / "idle_calls.json"))
    args = parser.parse_args(argv)
    body = crowd.sandbox_wagers_body()
    report: dict[str, Any] = {"loadavg": crowd.full_loadavg()}
    cost = wake_cost(wagers_work(body), args.rounds, int(crowd.SERVER_CPUS))
    report["wake_cost_ms"] = cost
    print("the same Python work, CPU ms a run, by the idle gap before it:")
    for gap, ms in cost.items():
        print(f"  gap {gap:>4} ms: {ms:.3f}  ({ms / cost['0']:.2f}x back to back)")
    if not args.no_valgrind:
        if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
            sys.stderr.write("bench.idle_calls: valgrind is not installed (or pass --no-valgrind)\n")
            return 2
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
            handle.write(body)
        try:
            cells = [instructions(n, handle.name, 8.0, args.window) for n in (FEW, MANY)]
        finally:
            os.unlink(handle.name)
        report["instructions"] = cells
        for cell in cells:
            print(
                f"ours, {cell['connections']} connections: {cell['answered']} calls counted, "
                f"{cell['instructions_per_call'] / 1000:,.0f} k instructions a call"
            )
        ratio = cells[0]["instructions_per_call"] / cells[1]["instructions_per_call"]
        verdict = "PASS" if ratio <= MAX_IDLE_RATIO and not any(c["failed"] for c in cells) else "FAIL"
        report["criterion"] = {"idle_over_busy": ratio, "result": verdict}
        print(f"{verdict}  instructions a call, idle ≤ {MAX_IDLE_RATIO}× busy ({ratio:.3f})")
    report["loadavg_after"] = crowd.full_loadavg()
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0 if report.get("criterion", {}).get("result", "PASS") == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
