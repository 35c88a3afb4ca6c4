"""What a request waiting on the gateway costs the server: memory and CPU per request at N concurrent.

    python3 -m bench.waiting --concurrency 256 1024 [--workers 2]

For each N: a fresh sandbox gateway answering after --delay seconds and a fresh server (bound
raised to N), warmed up; then N connections each send one `tools/call get_wagers` at once. Once
N requests wait at the gateway (counted from the kernel's socket table), the server's resident and
virtual memory and threads are read and its CPU is sampled for one second; the answers are then
read and checked; then N connections are opened and left idle after one ping each. Reports the
growth per waiting request and per idle connection. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from bench.runner import (
    REPO,
    SANDBOX_TOKEN,
    cpu_ms,
    plain_env,
    start_sandbox_gateway,
    tree_fields,
    wait_for_line,
)

TIMEOUT_S = 15.0  # to connect, and for an answer that does not wait on the gateway


def _drain(stream: IO[bytes] | None) -> None:
    if stream is not None:
        threading.Thread(target=lambda: [None for _ in stream], daemon=True).start()


def status(pid: int) -> dict[str, float]:
    """VmRSS and VmSize (KiB) and Threads, summed over the process tree."""
    return tree_fields(pid, "status", ("VmRSS", "VmSize", "Threads"))


def established_to(port: int) -> int:
    """ESTABLISHED sockets whose local port is `port` (the gateway's side of each connection to it)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                next(fh)
                for line in fh:
                    fields = line.split()
                    if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                        count += 1
        except OSError:
            pass
    return count


def request_bytes(port: int, rid: int, method: str = "tools/call") -> bytes:
    params = {"name": "get_wagers", "arguments": {}} if method == "tools/call" else {}
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        f"Authorization: Bearer {SANDBOX_TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@dataclass
class Pending:
    sock: socket.socket
    out: bytes
    buf: bytes = b""
    status: int = 0
    done: bool = False


def complete(buf: bytes) -> int | None:
    """The status of a whole Content-Length response in `buf`, or None while more must come."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = buf[:end].decode("latin-1")
    match = re.search(r"(?im)^content-length:\s*(\d+)", head)
    if match and len(buf) - end - 4 < int(match.group(1)):
        return None
    return int(head.split(" ", 2)[1])


class Crowd:
    """N connections, each sending one request at once and reading its answer, on one selector thread."""

    def __init__(self, port: int, n: int, method: str = "tools/call", keep_open: bool = False) -> None:
        self.sel = selectors.DefaultSelector()
        self.pending: list[Pending] = []
        self.keep_open = keep_open
        for i in range(n):
            sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
            sock.setblocking(False)
            item = Pending(sock, request_bytes(port, i + 1, method))
            self.pending.append(item)
            self.sel.register(sock, selectors.EVENT_WRITE | selectors.EVENT_READ, item)

    def run(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        left = len(self.pending)
        while left and time.monotonic() < deadline:
            for key, events in self.sel.select(0.5):
                item: Pending = key.data
                if events & selectors.EVENT_WRITE and item.out:
                    sent = item.sock.send(item.out)
                    item.out = item.out[sent:]
                    if not item.out:
                        self.sel.modify(item.sock, selectors.EVENT_READ, item)
                if events & selectors.EVENT_READ:
                    try:
                        chunk = item.sock.recv(65536)
                    except ConnectionError:
                        chunk = b""
                    item.buf += chunk
                    code = complete(item.buf)
                    if code is not None or not chunk:
                        item.status, item.done = code or 0, True
                        self.sel.unregister(item.sock)
                        if not self.keep_open:
                            item.sock.close()
                        left -= 1

    def statuses(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for item in self.pending:
            counts[item.status] = counts.get(item.status, 0) + 1
        return counts


def measure(n: int, delay: float, workers: int) -> dict[str, Any]:
    gateway, url = start_sandbox_gateway(delay)
    server: subprocess.Popen[bytes] | None = None
    try:
        gateway_port = int(url.rsplit(":", 1)[1])
        argv = [sys.executable, "-m", "mcp_server", "--http", "0"]
        if workers > 1:
            argv += ["--workers", str(workers)]
        env = plain_env(FAIRWINS_API_URL=url, FAIRWINS_MCP_MAX_CONCURRENCY=str(max(n, 1)), FAIRWINS_MCP_TIMEOUT="60")
        server = subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert server.stderr is not None
        port = int(wait_for_line(server.stderr, re.compile(rb"http://127\.0\.0\.1:(\d+)/mcp"), "the server").group(1))
        _drain(server.stderr)
        warm = Crowd(port, 8)  # every code path loaded once before the baseline
        warm.run(TIMEOUT_S + delay)
        time.sleep(0.5)
        idle = status(server.pid)
        cpu0 = cpu_ms(server.pid) / 1000
        t0 = time.monotonic()
        crowd = Crowd(port, n)
        runner = threading.Thread(target=crowd.run, args=(delay * 4 + 60,), daemon=True)
        runner.start()
        deadline = time.monotonic() + delay
        while established_to(gateway_port) < n:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"only {established_to(gateway_port)} of {n} requests reached the gateway within {delay} s; "
                    "raise --delay"
                )
            time.sleep(0.01)
        admitted_s = time.monotonic() - t0
        cpu1 = cpu_ms(server.pid) / 1000
        time.sleep(0.2)
        waiting = status(server.pid)
        cpu2 = cpu_ms(server.pid) / 1000
        time.sleep(1.0)
        cpu3 = cpu_ms(server.pid) / 1000
        runner.join(delay * 4 + 60)
        codes = crowd.statuses()
        time.sleep(0.5)
        before_idle = status(server.pid)
        idlers = Crowd(port, n, method="ping", keep_open=True)  # answered at once, then left open and idle
        idlers.run(TIMEOUT_S)
        time.sleep(0.5)
        idle_open = status(server.pid)
        for item in idlers.pending:
            item.sock.close()
        return {
            "concurrent": n,
            "workers": workers,
            "admitted_in_s": round(admitted_s, 3),
            "rss_idle_mib": round(idle["VmRSS"] / 1024, 1),
            "rss_waiting_mib": round(waiting["VmRSS"] / 1024, 1),
            "rss_per_waiting_kib": round((waiting["VmRSS"] - idle["VmRSS"]) / n, 1),
            "vm_per_waiting_kib": round((waiting["VmSize"] - idle["VmSize"]) / n, 1),
            "threads_idle": int(idle["Threads"]),
            "threads_waiting": int(waiting["Threads"]),
            "cpu_ms_per_admitted_request": round((cpu1 - cpu0) * 1000 / n, 3),
            "cpu_ms_per_waiting_request_per_s": round((cpu3 - cpu2) * 1000 / n, 4),
            "statuses": codes,
            "rss_per_idle_connection_kib": round((idle_open["VmRSS"] - before_idle["VmRSS"]) / n, 1),
            "threads_with_idle_connections": int(idle_open["Threads"]),
            "idle_statuses": idlers.statuses(),
        }
    finally:
        for proc in (server, gateway):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.waiting", description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--delay", type=float, default=8.0, help="seconds the gateway takes to answer")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    failed = False
    for n in args.concurrency:
        row = measure(n, args.delay, args.workers)
        print(json.dumps(row))
        failed |= row["statuses"] != {200: n}
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
