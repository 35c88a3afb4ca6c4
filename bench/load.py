"""Load: concurrent HTTP clients and a busy stdio client for a fixed time, then SIGTERM in the middle of it.

    python3 -m bench.load --duration 10 --clients 16 --over 64

Everything is a real process on 127.0.0.1: the sandbox gateway (tests.sandbox_gateway, with a
realistic delay before every answer), the server over HTTP (`python3 -m mcp_server --http 0`)
and the server over stdio (`python3 -m mcp_server`). Phases:

  warm-up       --clients HTTP clients for 2 s; the servers' memory is read after it (start)
  below         --clients HTTP clients (<= the server's concurrency bound) and the stdio client,
                for --duration s: every request must be answered 200 with its result
  above         --over HTTP clients (> the bound) for --duration s: every answer is 200, or
                503 with Retry-After; nothing else. Memory is read after it (end)
  sigterm       --clients HTTP clients and the stdio client, SIGTERM to both servers after 1 s:
                every request a server had read is answered, and both exit 0

Exit status 0 when every check holds, 1 otherwise. Standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench.runner import REPO, SANDBOX_TOKEN, plain_env, rss_mib, start_sandbox_gateway, wait_for_line

REQUEST_TIMEOUT = 15.0
STDIO_WINDOW = 8  # requests the stdio client keeps outstanding
# Allowed RSS growth of each server from the end of warm-up to the end of the load: room for the
# stacks and buffers of --over concurrent connections (about 2 MiB is typical), while a leak of a
# few hundred bytes per request over the ~40,000 requests of a default run would exceed it.
MEMORY_BOUND_MIB = 16.0

# What the clients ask: mostly tool calls that wait on the gateway, some that do not.
MIX: tuple[tuple[float, str, dict[str, Any], bool], ...] = (
    (0.35, "tools/call", {"name": "get_gateway_status", "arguments": {}}, False),
    (0.35, "tools/call", {"name": "get_wagers", "arguments": {"chainId": 137}}, True),
    (0.15, "ping", {}, False),
    (0.15, "tools/list", {}, False),
)


# ---- processes ---------------------------------------------------------------------------------------


class StderrCounter:
    """Drains a server's stderr (so it never blocks) and counts its access lines by status."""

    ACCESS = re.compile(rb"POST /mcp (\d{3}) ")

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.statuses: Counter[int] = Counter()
        self.tail: list[bytes] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for line in self.stream:
            match = self.ACCESS.search(line)
            with self.lock:
                if match:
                    self.statuses[int(match.group(1))] += 1
                else:
                    self.tail = [*self.tail[-50:], line]

    def text(self) -> str:
        with self.lock:
            return b"".join(self.tail).decode(errors="replace")


@dataclass
class Servers:
    gateway: subprocess.Popen[bytes]
    http: subprocess.Popen[bytes]
    stdio: subprocess.Popen[bytes]
    port: int
    http_log: StderrCounter
    stdio_log: StderrCounter
    stdio_driver: Any = None

    def stop_all(self) -> None:
        for proc in (self.http, self.stdio, self.gateway):
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def start(delay: float, max_concurrency: int) -> Servers:
    gateway, url = start_sandbox_gateway(delay)
    server_env = plain_env(FAIRWINS_API_URL=url, FAIRWINS_MCP_MAX_CONCURRENCY=str(max_concurrency))
    http = subprocess.Popen(
        [sys.executable, "-m", "mcp_server", "--http", "0"],
        cwd=REPO, env=server_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert http.stderr is not None
    listening = re.compile(rb"listening on http://127\.0\.0\.1:(\d+)/mcp")
    port = int(wait_for_line(http.stderr, listening, "the HTTP server").group(1))
    stdio = subprocess.Popen(
        [sys.executable, "-m", "mcp_server"],
        cwd=REPO, env={**server_env, "FAIRWINS_API_TOKEN": SANDBOX_TOKEN},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert stdio.stderr is not None
    servers = Servers(gateway, http, stdio, port, StderrCounter(http.stderr), StderrCounter(stdio.stderr))
    servers.stdio_driver = StdioDriver(stdio)
    return servers


# ---- clients -------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What one phase's clients saw."""

    latencies: list[float] = field(default_factory=list)  # seconds, answered requests only
    outcomes: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, outcome: str, latency: float | None = None, problem: str | None = None) -> None:
        with self.lock:
            self.outcomes[outcome] += 1
            if latency is not None:
                self.latencies.append(latency)
            if problem is not None and len(self.problems) < 10:
                self.problems.append(problem)


def _pick(rng: random.Random) -> tuple[str, dict[str, Any], bool]:
    roll = rng.random()
    for weight, method, params, member in MIX:
        if roll < weight:
            return method, params, member
        roll -= weight
    return MIX[-1][1], MIX[-1][2], MIX[-1][3]


def _check_answer(method: str, message_id: int, body: bytes) -> str | None:
    """None when `body` is the right answer to the request; else what is wrong with it."""
    try:
        answer = json.loads(body)
    except ValueError:
        return f"not JSON: {body[:120]!r}"
    if not isinstance(answer, dict) or answer.get("id") != message_id:
        return f"wrong id: {body[:120]!r}"
    result = answer.get("result")
    if not isinstance(result, dict):
        return f"an error: {body[:200]!r}"
    if method == "tools/call" and result.get("isError") is not False:
        return f"a tool error: {body[:300]!r}"
    return None


def http_client(
    port: int, stop: threading.Event, tally: Tally, seed: int, shutdown: threading.Event | None = None
) -> None:
    """One client on a keep-alive connection, back to back until `stop`; reconnects after a failure."""
    rng = random.Random(seed)
    ids = itertools.count(1)
    conn: http.client.HTTPConnection | None = None
    while not stop.is_set():
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
        method, params, member = _pick(rng)
        message_id = next(ids)
        body = json.dumps({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params})
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if member:
            headers["Authorization"] = f"Bearer {SANDBOX_TOKEN}"
        started = time.monotonic()
        try:
            conn.request("POST", "/mcp", body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except ConnectionRefusedError:
            # Only once the server stopped listening: the request was never accepted.
            tally.add(
                "refused (not accepted)" if shutdown and shutdown.is_set() else "error", problem="connection refused"
            )
            conn.close()
            conn = None
            if shutdown and shutdown.is_set():
                return
            continue
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            conn = None
            if shutdown and shutdown.is_set():
                # The server closed a connection it had not read a request from (idle keep-alive at
                # exit); whether it read one is what the server's own drain line reports.
                tally.add("closed unread (not accepted)")
                return
            tally.add("error", problem=f"{type(exc).__name__}: {exc}")
            continue
        took = time.monotonic() - started
        if resp.status == 200:
            problem = _check_answer(method, message_id, data)
            tally.add("200" if problem is None else "error", took, problem)
        elif resp.status == 503:
            retry_after = resp.getheader("Retry-After")
            kind = b"shutting_down" if b"shutting_down" in data else b"busy"
            label = f"503 {kind.decode()}" + ("" if retry_after else " WITHOUT Retry-After")
            tally.add(label, took, None if retry_after else "503 without Retry-After")
        else:
            tally.add(f"{resp.status}", took, f"status {resp.status}: {data[:200]!r}")
        if resp.will_close:
            conn.close()
            conn = None
            if shutdown and shutdown.is_set():
                return


class StdioDriver:
    """The busy stdio client: one reader for the process's whole life, STDIO_WINDOW requests outstanding."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.window = threading.Semaphore(STDIO_WINDOW)
        self.lock = threading.Condition()
        self.pending: dict[int, tuple[str, float, Tally]] = {}
        self.ids = itertools.count(1)
        self.sent = 0
        self.answered = 0
        self.other_lines = 0
        self.eof = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
        }
        self._send(0, "initialize", init, Tally())

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                with self.lock:
                    self.other_lines += 1  # stdout must carry MCP messages and nothing else
                continue
            if "method" in message:
                continue  # a notification (progress, log): fine
            with self.lock:
                method, started, tally = self.pending.pop(message.get("id"), ("?", time.monotonic(), Tally()))
                self.answered += 1
                self.lock.notify_all()
            problem = _check_answer(method, message.get("id"), line)
            tally.add("200" if problem is None else "error", time.monotonic() - started, problem)
            self.window.release()
        with self.lock:
            self.eof = True
            self.lock.notify_all()

    def _send(
        self, message_id: int, method: str, message: dict[str, Any], tally: Tally, stop: threading.Event | None = None
    ) -> bool:
        assert self.proc.stdin is not None
        while not self.window.acquire(timeout=0.05):
            if (stop is not None and stop.is_set()) or self.eof:
                return False
        if stop is not None and stop.is_set():
            self.window.release()
            return False
        with self.lock:
            self.pending[message_id] = (method, time.monotonic(), tally)
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            with self.lock:
                self.pending.pop(message_id, None)
            return False  # the server is gone (SIGTERM): what it had read, it answered
        with self.lock:
            self.sent += 1
        return True

    def run(self, stop: threading.Event, tally: Tally, seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            method, params, _member = _pick(rng)
            message_id = next(self.ids)
            message = {"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}
            if not self._send(message_id, method, message, tally, stop):
                break
        with self.lock:  # the answers still on their way, or the end of stdout
            self.lock.wait_for(lambda: not self.pending or self.eof, REQUEST_TIMEOUT)


def run_phase(
    name: str, servers: Servers, clients: int, seconds: float, *, stdio: bool, sigterm_after: float | None = None
) -> tuple[Tally, Tally, dict[str, Any]]:
    http_tally, stdio_tally = Tally(), Tally()
    stop, shutdown = threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=http_client, args=(servers.port, stop, http_tally, n, shutdown), daemon=True)
        for n in range(clients)
    ]
    if stdio:
        # The stdio client stops writing at the signal: what it wrote before must all be answered.
        stdio_stop = shutdown if sigterm_after is not None else stop
        threads.append(
            threading.Thread(target=servers.stdio_driver.run, args=(stdio_stop, stdio_tally, 99), daemon=True)
        )
    started = time.monotonic()
    for thread in threads:
        thread.start()
    extra: dict[str, Any] = {}
    if sigterm_after is None:
        time.sleep(seconds)
        stop.set()
    else:
        time.sleep(sigterm_after)
        shutdown.set()
        servers.http.send_signal(signal.SIGTERM)
        servers.stdio.send_signal(signal.SIGTERM)
        extra["http_exit"] = servers.http.wait(60)
        extra["stdio_exit"] = servers.stdio.wait(60)
        stop.set()
    for thread in threads:
        thread.join(REQUEST_TIMEOUT * 2)
    extra["elapsed"] = time.monotonic() - started
    return http_tally, stdio_tally, extra


# ---- report --------------------------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The value at the rounded index q% of the way along, as bench.load has always reported it
    (bench.runner.percentile is nearest-rank: the two can differ by one sample)."""
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


def describe(label: str, tally: Tally, elapsed: float) -> dict[str, Any]:
    values = sorted(tally.latencies)
    served = sum(tally.outcomes.values())
    row = {
        "phase": label,
        "requests": served,
        "rps": served / elapsed if elapsed else 0.0,
        "outcomes": dict(tally.outcomes),
        "p50_ms": percentile(values, 50) * 1000,
        "p90_ms": percentile(values, 90) * 1000,
        "p99_ms": percentile(values, 99) * 1000,
        "max_ms": (values[-1] * 1000) if values else float("nan"),
        "problems": tally.problems,
    }
    outcomes = ", ".join(f"{k}: {v}" for k, v in sorted(tally.outcomes.items()))
    print(
        f"  {label:<24} {served:>7} req {row['rps']:>8.1f}/s   p50 {row['p50_ms']:>6.1f} ms  p90 {row['p90_ms']:>6.1f}"
        f"  p99 {row['p99_ms']:>6.1f}  max {row['max_ms']:>7.1f}   [{outcomes}]"
    )
    for problem in tally.problems[:3]:
        print(f"      e.g. {problem}")
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each load phase (default 10)")
    parser.add_argument(
        "--clients", type=int, default=16, help="HTTP clients within the concurrency bound (default 16)"
    )
    parser.add_argument("--over", type=int, default=64, help="HTTP clients beyond the bound (default 64)")
    parser.add_argument(
        "--max-concurrency", type=int, default=32, help="the server's bound (FAIRWINS_MCP_MAX_CONCURRENCY)"
    )
    parser.add_argument(
        "--delay", type=float, default=0.02, help="the gateway's delay before every answer (default 0.02 s)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here as JSON")
    args = parser.parse_args(argv)
    if args.clients > args.max_concurrency:
        parser.error("--clients must be within --max-concurrency (that phase must see no 503)")

    print(
        f"bench.load: {args.clients} clients (bound {args.max_concurrency}), then {args.over},"
        f" {args.duration:g} s each;"
        f" gateway delay {args.delay * 1000:.0f} ms; Python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
    )
    servers = start(args.delay, args.max_concurrency)
    failures: list[str] = []
    report: dict[str, Any] = {"args": vars(args) | {"json": str(args.json) if args.json else None}, "phases": []}
    all_http: list[Tally] = []
    try:
        warm, _, _ = run_phase("warm-up", servers, args.clients, 2.0, stdio=True)
        all_http.append(warm)
        memory_start = {"http": rss_mib(servers.http.pid), "stdio": rss_mib(servers.stdio.pid)}

        http_tally, stdio_tally, extra = run_phase("below", servers, args.clients, args.duration, stdio=True)
        all_http.append(http_tally)
        report["phases"].append(describe(f"HTTP x{args.clients}", http_tally, extra["elapsed"]))
        report["phases"].append(describe("stdio (window 8)", stdio_tally, extra["elapsed"]))
        for label, tally in (("HTTP within the bound", http_tally), ("stdio", stdio_tally)):
            bad = sum(v for k, v in tally.outcomes.items() if k != "200")
            if bad:
                failures.append(f"{label}: {bad} requests not answered 200 with their result")
            if not tally.outcomes["200"]:
                failures.append(f"{label}: nothing was served")

        http_tally, _, extra = run_phase("above", servers, args.over, args.duration, stdio=False)
        all_http.append(http_tally)
        report["phases"].append(describe(f"HTTP x{args.over}", http_tally, extra["elapsed"]))
        unexpected = {k: v for k, v in http_tally.outcomes.items() if k not in ("200", "503 busy")}
        if unexpected:
            failures.append(f"beyond the bound: answers other than 200 or 503 with Retry-After: {unexpected}")
        if args.over > args.max_concurrency and not http_tally.outcomes["503 busy"]:
            print("  (no 503 beyond the bound: the clients never had more than the bound in flight at once)")
        memory_end = {"http": rss_mib(servers.http.pid), "stdio": rss_mib(servers.stdio.pid)}
        report["memory_mib"] = {"start": memory_start, "end": memory_end, "bound": MEMORY_BOUND_MIB}
        for which in ("http", "stdio"):
            growth = memory_end[which] - memory_start[which]
            print(
                f"  memory {which:<6} {memory_start[which]:6.1f} MiB after warm-up"
                f" -> {memory_end[which]:6.1f} MiB ({growth:+.1f})"
            )
            if growth > MEMORY_BOUND_MIB:
                failures.append(f"{which} server grew {growth:.1f} MiB (bound {MEMORY_BOUND_MIB:g} MiB)")

        http_tally, stdio_tally, extra = run_phase("sigterm", servers, args.clients, 0, stdio=True, sigterm_after=1.0)
        all_http.append(http_tally)
        servers.http_log.thread.join(10)
        servers.stdio_log.thread.join(10)
        report["phases"].append(describe("HTTP, SIGTERM at 1 s", http_tally, extra["elapsed"]))
        report["phases"].append(describe("stdio, SIGTERM at 1 s", stdio_tally, extra["elapsed"]))
        drained = re.search(r"all (\d+) requests in flight at the signal were answered", servers.http_log.text())
        driver: StdioDriver = servers.stdio_driver
        unanswered = driver.sent - driver.answered
        print(
            f"  shutdown: HTTP exit {extra['http_exit']}, "
            + (
                f"{drained.group(1)} requests in flight at the signal, all answered"
                if drained
                else "drain NOT reported complete"
            )
            + f"; stdio exit {extra['stdio_exit']}, {driver.answered} of {driver.sent} requests answered in all"
            f" ({unanswered} unanswered: at most the one write racing the signal)"
        )
        report["shutdown"] = {
            **extra,
            "http_drained": int(drained.group(1)) if drained else None,
            "stdio_unread": unanswered,
        }
        if extra["http_exit"] != 0 or extra["stdio_exit"] != 0:
            failures.append(f"exit codes after SIGTERM: HTTP {extra['http_exit']}, stdio {extra['stdio_exit']}")
        if not drained:
            failures.append("the HTTP server did not report every request in flight answered")
        # Never "503 shutting_down": a request on an open connection is answered while the server drains.
        allowed = ("200", "503 busy", "refused (not accepted)", "closed unread (not accepted)")
        during = {k: v for k, v in http_tally.outcomes.items() if k not in allowed}
        if during:
            failures.append(f"HTTP during shutdown: {during}")
        if stdio_tally.outcomes["error"] or unanswered > 1 or driver.other_lines:
            failures.append(
                f"stdio during shutdown: {dict(stdio_tally.outcomes)}, {unanswered} unanswered,"
                f" {driver.other_lines} non-JSON lines"
            )
        # Every answer the HTTP server logged reached a client, and every one a client got was logged.
        client_200 = sum(t.outcomes["200"] for t in all_http)
        served_200 = servers.http_log.statuses[200]
        print(f"  HTTP answers: {served_200} logged 200 by the server, {client_200} received 200 by the clients")
        if served_200 != client_200:
            failures.append(f"the server logged {served_200} answers 200, the clients received {client_200}")
        report["http_answers_200"] = {"logged": served_200, "received": client_200}
    finally:
        servers.stop_all()
    report["failures"] = failures
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if failures:
        print("FAIL")
        for failure in failures:
            print(f"  - {failure}")
        return 1
    print(
        "PASS: no errors within the bound; 503 with Retry-After beyond it; memory within bound; clean drain on SIGTERM"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
