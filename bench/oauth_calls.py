"""A member call's server CPU with an OAuth access token, beside a `fw1.` bearer (issue 60).

    python3 -m bench.oauth_calls             five rounds of 2,000 calls each way, about a minute
    python3 -m bench.oauth_calls --quick     one round of 300
    python3 -m bench.oauth_calls --code /work/wt/before --code .    two checkouts' servers, alternating

The sandbox gateway, trusting the sandbox authorization server, both in this process; the
server twice as a process: today's door with member A's `fw1.` token, and OAuth mode with an
RS256 access token the sandbox minted for it. One keep-alive connection sends
`get_wagers` one call after another; the server's CPU (user + system, /proc) over the measured
calls, per call, after a warm-up. The first call of a token pays its signature check; every
later one finds its verdict remembered, as a member's conversation does. Rounds alternate, and
so do the checkouts given with `--code` (each a directory holding `mcp_server`, run with
`python -P` so that its code, not this one's, is imported): the ratio of each round's two calls
is what is compared, its median and its spread over the rounds, and for two checkouts the
difference of their ratios round by round.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
from typing import Any

from bench.runner import REPO, HttpConn, cpu_ms, progress, rounded, spawn, stop, wait_for_line
from tests.sandbox_auth import SandboxAuthServer
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway

CALL = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "get_wagers", "arguments": {"chainId": 137}},
    },
    separators=(",", ":"),
).encode()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _request(port: int, token: str) -> bytes:
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Length: {len(CALL)}\r\n\r\n"
    )
    return head.encode() + CALL


def _server(argv: list[str], gateway: str, code: str) -> tuple[subprocess.Popen[bytes], int]:
    """Checkout `code`'s server as a process, once it logged its URL: (the process, its port); stderr drained."""
    env = {"PATH": "/usr/bin:/bin", "FAIRWINS_API_URL": gateway, "PYTHONPATH": code}
    proc = spawn([sys.executable, "-P", "-m", "mcp_server", *argv], env, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    port = int(wait_for_line(proc.stderr, re.compile(rb"listening on http://127\.0\.0\.1:(\d+)/mcp"), "it").group(1))
    stream = proc.stderr
    threading.Thread(target=lambda: [None for _ in stream], daemon=True).start()
    return proc, port


def _measure(port: int, pid: int, token: str, calls: int) -> float:
    """Server CPU ms per call over `calls` calls, after a warm-up of a tenth of them."""
    conn = HttpConn(port)
    request = _request(port, token)
    try:
        for _ in range(max(calls // 10, 20)):
            status, body = conn.roundtrip(request)
            if status != 200 or b'"isError":true' in body:
                raise RuntimeError(f"the call failed: {status} {body[:200]!r}")
        before = cpu_ms(pid)
        for _ in range(calls):
            conn.roundtrip(request)
        return (cpu_ms(pid) - before) / calls
    finally:
        conn.close()


class _Pair:
    """One checkout's two servers: the door with a `fw1.` token, and OAuth mode with an access token."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.oauth_port = _free_port()
        self.public = f"http://127.0.0.1:{self.oauth_port}/mcp"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.fw1: list[float] = []
        self.oauth: list[float] = []

    def start(self, auth: SandboxAuthServer, gateway: SandboxGateway) -> None:
        self.token = auth.mint_access_token(self.public, lifetime=3600)
        plain, self.plain_port = _server(["--http", "0"], gateway.url, self.code)
        self.procs.append(plain)
        oauth_argv = [
            "--http",
            str(self.oauth_port),
            "--public-url",
            self.public,
            "--authorization-server",
            auth.issuer,
        ]
        oauth, _ = _server(["--log-format", "text", *oauth_argv], gateway.url, self.code)
        self.procs.append(oauth)

    def round(self, calls: int) -> None:
        self.fw1.append(_measure(self.plain_port, self.procs[0].pid, TOKEN_MEMBER_A, calls))
        self.oauth.append(_measure(self.oauth_port, self.procs[1].pid, self.token, calls))

    def summary(self) -> dict[str, Any]:
        ratios = [oauth / fw1 for fw1, oauth in zip(self.fw1, self.oauth, strict=True)]
        return {
            "fw1 bearer": {"ms_per_call": rounded(statistics.median(self.fw1)), "runs": rounded(self.fw1)},
            "OAuth access token": {"ms_per_call": rounded(statistics.median(self.oauth)), "runs": rounded(self.oauth)},
            "ratio": rounded(statistics.median(self.oauth) / statistics.median(self.fw1)),
            "round ratios": {
                "median": rounded(statistics.median(ratios)),
                "spread": rounded([min(ratios), max(ratios)]),
            },
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000, help="calls measured each way, each round")
    parser.add_argument("--code", action="append", help="a checkout whose server is measured (default: this one)")
    args = parser.parse_args(argv)
    rounds, calls = (1, 300) if args.quick else (args.rounds, args.calls)
    codes = [os.path.abspath(code) for code in args.code or [str(REPO)]]
    pairs = [_Pair(code) for code in codes]
    with SandboxAuthServer(resources=[pair.public for pair in pairs]) as auth, SandboxGateway() as gateway:
        gateway.trust_issuer(auth.issuer, audiences=[pair.public for pair in pairs])
        try:
            for pair in pairs:
                pair.start(auth, gateway)
            for n in range(rounds):
                for pair in pairs if n % 2 == 0 else reversed(pairs):
                    pair.round(calls)
                    progress(
                        f"round {n + 1}, {pair.code}: fw1 bearer {pair.fw1[-1]:.3f} ms, "
                        f"OAuth access token {pair.oauth[-1]:.3f} ms ({pair.oauth[-1] / pair.fw1[-1]:.3f}x)"
                    )
        finally:
            for pair in pairs:
                for proc in pair.procs:
                    stop(proc)
    summary: dict[str, Any] = {pair.code: pair.summary() for pair in pairs}
    if len(pairs) == 2:
        # Each round's two ratios were measured side by side, under the same load: their difference
        # resolves a change the load moves each ratio by more than.
        first, second = ([oauth / fw1 for fw1, oauth in zip(pair.fw1, pair.oauth, strict=True)] for pair in pairs)
        differences = [after - before for before, after in zip(first, second, strict=True)]
        summary["paired"] = {
            "second minus first, median": rounded(statistics.median(differences)),
            "rounds the second is lower": sum(difference < 0 for difference in differences),
        }
    print(json.dumps(summary if len(pairs) > 1 else summary[codes[0]], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
