"""What a payment costs the server, whoever sends it (issue 31, finding 5): CPU per call by payment size.

    python3 -m bench.payments            every case, about a minute
    python3 -m bench.payments --quick    a smoke run in seconds

The server runs as its own process over HTTP (`python -m mcp_server --http 0`), against a
gateway double in this process that answers `get_wagers` either with a small x402 v1 offer
(`402`, about 0.7 KB: the payment was refused) or with a paid answer of about 100 KB and an
`X-PAYMENT-RESPONSE` receipt (which sends the answer down the exact path: every string searched
for the payment). The caller sends an `X-PAYMENT` header: an ordinary EVM `exact` payment (about 0.6 KB),
and padded to the largest the server takes (16 KiB, MAX_PAYMENT_BYTES) and to 63 KB (under the
64 KiB head limit; since issue 31 refused at the door with a 400), with one long base64 string
(like a signed Solana transaction) or with many of 1 KB.

CPU per call is the server process's own (utime + stime from /proc, bench.runner.cpu_ms) over a
window of calls, the best of three windows; each window runs until it has taken 1 s or 200
calls (at least one). Standard library only.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from bench.runner import Deadline, child_env, cpu_ms, start_http, stop

WAGERS: Final = "/v1/member/wagers"
PAY_TO: Final = "0x" + "5a" * 20
PAYER: Final = "0x" + "7b" * 20
OFFER: Final = {
    "x402Version": 1,
    "error": "X-PAYMENT is invalid",
    "accepts": [
        {
            "scheme": "exact",
            "network": "polygon",
            "maxAmountRequired": "20000",
            "resource": "https://gateway.example" + WAGERS,
            "description": "Your wagers",
            "mimeType": "application/json",
            "payTo": PAY_TO,
            "maxTimeoutSeconds": 60,
            "asset": "0x" + "3c" * 20,
            "extra": {"name": "USD Coin", "version": "2"},
        }
    ],
}
RECEIPT: Final = base64.b64encode(
    json.dumps({"success": True, "transaction": "0x" + "ab" * 32, "network": "polygon", "payer": PAYER}).encode()
).decode()


def wagers(count: int) -> bytes:
    items = [
        {
            "id": f"w-{100000 + i}",
            "stake": f"{i % 500}.{i % 100:02d}",
            "asset": "USDC",
            "deadline": f"2026-12-{i % 28 + 1:02d}T00:00:00Z",
            "status": "open",
            "description": "text written by the counterparty, about a game",
        }
        for i in range(count)
    ]
    value = {"asOf": "2026-11-29T20:00:00Z", "chains": [{"chainId": 137, "state": "read", "wagers": items}]}
    return json.dumps(value, separators=(",", ":")).encode()


PAID_ANSWER: Final = wagers(560)  # about 100 KB


def payment(size: int, one: bool = False) -> str:
    """An x402 v1 `exact` payment as its header carries it, padded to about `size` characters.

    The padding is base64, like a signed Solana transaction: one long string (`one`), or strings
    of 1,000 characters.
    """
    payload: dict[str, Any] = {
        "signature": "0x" + "5c1d0e9f" * 16 + "1b",
        "authorization": {
            "from": PAYER,
            "to": PAY_TO,
            "value": "20000",
            "validAfter": "1764440000",
            "validBefore": "1764440300",
            "nonce": "0x" + "cd" * 32,
        },
    }

    def header() -> str:
        value = {"x402Version": 1, "scheme": "exact", "network": "polygon", "payload": payload}
        return base64.b64encode(json.dumps(value, separators=(",", ":")).encode()).decode()

    if size <= len(header()) + 1400:
        return header()
    room = (size - len(header())) * 3 // 4
    blob = base64.b64encode(bytes((i * 7) % 256 for i in range(room * 3 // 4))).decode()
    if one:
        payload["transaction"] = blob[: room - 40]
    else:
        payload["transactions"] = [blob[i : i + 1000] for i in range(0, room - 40 * (room // 1000 + 1), 1000)]
        while len(header()) > size:
            payload["transactions"].pop()
    return header()


class Gateway(BaseHTTPRequestHandler):
    mode = "402"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if Gateway.mode == "402":
            body, status, extra = json.dumps(OFFER).encode(), 402, {}
        else:
            body, status, extra = PAID_ANSWER, 200, {"X-PAYMENT-RESPONSE": RECEIPT}
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def call(conn: http.client.HTTPConnection, header: str) -> int:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}}
    headers = {"Content-Type": "application/json", "Accept": "application/json", "X-PAYMENT": header}
    conn.request("POST", "/mcp", body=json.dumps(body), headers=headers)
    resp = conn.getresponse()
    resp.read()
    return resp.status


def measure(pid: int, port: int, header: str, window_s: float, windows: int) -> tuple[float, int, int]:
    """(best CPU ms per call, calls in that window, the HTTP status)."""
    best, calls, status = float("inf"), 0, 0
    for _ in range(windows):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        status = call(conn, header)  # a connection and a first call outside the window
        before, started, n = cpu_ms(pid), time.monotonic(), 0
        while n < 200 and (n == 0 or time.monotonic() - started < window_s):
            status = call(conn, header)
            n += 1
        spent = (cpu_ms(pid) - before) / n
        conn.close()
        if spent < best:
            best, calls = spent, n
    return best, calls, status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one short window per case")
    parser.add_argument("--skip-slow", action="store_true", help="leave out 63 KB against the paid answer")
    args = parser.parse_args(argv)
    window_s, windows = (0.2, 1) if args.quick else (1.0, 3)
    gateway = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=gateway.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{gateway.server_address[1]}"
    proc, drain = start_http([sys.executable, "-m", "mcp_server"], child_env(url, None), Deadline(60))
    try:
        if drain.port is None:
            print("the server did not start", file=sys.stderr)
            return 1
        sizes = {"ordinary (0.6 KB)": payment(600)}
        for name, size in (("16 KiB", 16 * 1024), ("63 KB", 63_000)):
            sizes[f"{name}, one long string"] = payment(size, one=True)
            sizes[f"{name}, 1 KB strings"] = payment(size)
        rows = []
        for mode, answer in (("402", "small 402 offer"), ("paid", "paid 100 KB answer + receipt")):
            Gateway.mode = mode
            for name, header in sizes.items():
                if args.skip_slow and mode == "paid" and name.startswith("63 KB"):
                    continue
                ms, n, status = measure(proc.pid, drain.port, header, window_s, windows)
                rows.append((answer, name, len(header), status, ms, n))
                print(
                    f"{answer:30s} {name:24s} {len(header):>7,d} B  HTTP {status}  {ms:9.2f} ms CPU/call  ({n} calls)"
                )
                sys.stdout.flush()
    finally:
        stop(proc)
        gateway.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
