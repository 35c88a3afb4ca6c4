"""A member call's server CPU with an OAuth access token, beside a `fw1.` bearer (issue 60).

    python3 -m bench.oauth_calls             three rounds of 2,000 calls each way, about a minute
    python3 -m bench.oauth_calls --quick     one round of 300

The sandbox gateway, trusting the sandbox authorization server, both in this process; the
server twice as a process: today's door with member A's `fw1.` token, and OAuth mode with an
RS256 access token the sandbox minted for it. One keep-alive connection sends
`get_wagers` one call after another; the server's CPU (user + system, /proc) over the measured
calls, per call, after a warm-up. The first call of a token pays its signature check; every
later one finds its verdict remembered, as a member's conversation does. Rounds alternate.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import subprocess
import sys
import threading
from typing import Any

from bench.runner import HttpConn, cpu_ms, progress, rounded, spawn, stop, wait_for_line
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


def _server(argv: list[str], gateway: str) -> tuple[subprocess.Popen[bytes], int]:
    """The server as a process, once it logged its URL: (the process, its port); its stderr drained."""
    env = {"PATH": "/usr/bin:/bin", "FAIRWINS_API_URL": gateway}
    proc = spawn([sys.executable, "-m", "mcp_server", *argv], env, stderr=subprocess.PIPE)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rounds, calls = (1, 300) if args.quick else (3, 2000)
    oauth_port = _free_port()
    public = f"http://127.0.0.1:{oauth_port}/mcp"
    with SandboxAuthServer(resources=[public]) as auth, SandboxGateway() as gateway:
        gateway.trust_issuer(auth.issuer, audiences=[public])
        token = auth.mint_access_token(public, lifetime=3600)
        plain, plain_port = _server(["--http", "0"], gateway.url)
        oauth_argv = ["--http", str(oauth_port), "--public-url", public, "--authorization-server", auth.issuer]
        oauth, _ = _server(["--log-format", "text", *oauth_argv], gateway.url)
        results: dict[str, list[float]] = {"fw1 bearer": [], "OAuth access token": []}
        try:
            for n in range(rounds):
                results["fw1 bearer"].append(_measure(plain_port, plain.pid, TOKEN_MEMBER_A, calls))
                results["OAuth access token"].append(_measure(oauth_port, oauth.pid, token, calls))
                progress(f"round {n + 1}: " + ", ".join(f"{k} {v[-1]:.3f} ms" for k, v in results.items()))
        finally:
            stop(plain)
            stop(oauth)
    summary: dict[str, Any] = {
        k: {"ms_per_call": rounded(statistics.median(v)), "runs": rounded(v)} for k, v in results.items()
    }
    base = statistics.median(results["fw1 bearer"])
    summary["ratio"] = rounded(statistics.median(results["OAuth access token"]) / base)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
