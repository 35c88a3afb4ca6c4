"""A minimal, fast FairWins gateway stub on loopback: fixed JSON for the two benchmarked reads.

`GET /v1/member/wagers?chainId=N` answers N wagers on one read chain (plus an unreadable and a
not-configured chain), each about 170 bytes: the size knob of bench.sizes. Without chainId it
answers the two-wager envelope below.

With --tls it serves https:// with the test certificate (tests/tls/gateway.pem, for 127.0.0.1);
a client trusts it with SSL_CERT_FILE=tests/tls/ca.pem.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CERTS = Path(__file__).resolve().parent.parent / "tests" / "tls"
CA_FILE = CERTS / "ca.pem"

BENCH_TOKEN = "fw1.bench-token-0000"

# Shapes as docs/gateway.md describes them; fixed, so every run reads the same bytes.
STATUS = {
    "status": "ok",
    "version": "bench-stub",
    "chains": [
        {"chainId": 137, "enabled": True},
        {"chainId": 8453, "enabled": True},
        {"chainId": 1, "enabled": False},
    ],
    "rails": {"member": True, "x402": True},
    "prices": {"read": "0.001", "build": "0.005"},
}

WAGERS = {
    "asOf": "2026-11-29T20:00:00Z",
    "chains": [
        {
            "chainId": 137,
            "state": "read",
            "wagers": [
                {
                    "id": "w-1",
                    "stake": "25.00",
                    "asset": "USDC",
                    "deadline": "2026-12-01T00:00:00Z",
                    "status": "open",
                    "description": "text written by the counterparty",
                },
                {
                    "id": "w-2",
                    "stake": "10.00",
                    "asset": "USDC",
                    "deadline": "2026-12-03T12:00:00Z",
                    "status": "accepted",
                    "description": "another counterparty's words",
                },
            ],
        },
        {"chainId": 8453, "state": "unreadable", "reason": "wager index did not answer within 5 s"},
        {"chainId": 1, "state": "not-configured"},
    ],
}


_STATUSES = ("open", "accepted", "settled", "disputed")
_ASSETS = ("USDC", "USDT", "DAI", "WETH")
_SAID = (
    "text written by the counterparty",
    "Lakers win the final by more than 5 points",
    "rain in Lisbon on the first Saturday of December",
    "the loser buys dinner; settled by the league's own table",
)


def wagers(count: int, chain_id: int | None = None) -> dict[str, object]:
    """the per-chain envelope of docs/gateway.md with `count` wagers on one read chain, the same every time.

    Ids count up from w-100000, as an active member's do: ordinary text a token may share pieces with.
    """
    rows = [
        {
            "id": f"w-{100000 + i}",
            "stake": f"{(i * 37) % 500 + 1}.{(i * 13) % 100:02d}",
            "asset": _ASSETS[i % 4],
            "deadline": f"2026-12-{i % 28 + 1:02d}T{i % 24:02d}:00:00Z",
            "status": _STATUSES[i % 4],
            "description": f"{_SAID[i % 4]} (#{i})",
        }
        for i in range(count)
    ]
    return {
        "asOf": "2026-11-29T20:00:00Z",
        "chains": [
            {"chainId": chain_id or 137, "state": "read", "wagers": rows},
            {"chainId": 8453, "state": "unreadable", "reason": "wager index did not answer within 5 s"},
            {"chainId": 1, "state": "not-configured"},
        ],
    }


def _body(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


STATUS_BODY = _body(STATUS)
WAGERS_BODY = _body(WAGERS)
UNAUTHORIZED_BODY = _body({"error": "invalid_token", "message": "missing, expired or revoked token"})
NOT_FOUND_BODY = _body({"error": "not_found", "message": "no such route"})


def _response(status: str, body: bytes) -> bytes:
    # Status line, headers and body in one write: split writes meet Nagle and delayed ACK
    # and cost ~40 ms per answer on loopback.
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


STATUS_RESPONSE = _response("200 OK", STATUS_BODY)
WAGERS_RESPONSE = _response("200 OK", WAGERS_BODY)
UNAUTHORIZED_RESPONSE = _response("401 Unauthorized", UNAUTHORIZED_BODY)
NOT_FOUND_RESPONSE = _response("404 Not Found", NOT_FOUND_BODY)


def large_status(size: int) -> bytes:
    """A /status answer of `size` bytes of valid JSON (for bench.batch_memory: large gateway answers)."""
    head, tail = b'{"status":"ok","version":"bench-stub","pad":"', b'"}'
    return _response("200 OK", head + b"x" * max(size - len(head) - len(tail), 0) + tail)


@functools.lru_cache(maxsize=16)
def sized_wagers_response(count: int) -> bytes:
    """The answer to `?chainId=count`: `count` wagers (built once per count, then served as bytes)."""
    return _response("200 OK", _body(wagers(count, count)))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        delay = self.server.delay_s
        if delay > 0:
            time.sleep(delay)
        path, _, query = self.path.partition("?")
        if path == "/status":
            response = self.server.status_response
        elif path == "/v1/member/wagers":
            auth = self.headers.get("Authorization", "")
            ok = auth.startswith("Bearer fw1.") and len(auth) > len("Bearer fw1.")
            count = re.fullmatch(r"chainId=(\d{1,6})", query)
            if not ok:
                response = UNAUTHORIZED_RESPONSE
            elif count is not None:
                response = sized_wagers_response(int(count.group(1)))
            else:
                response = WAGERS_RESPONSE
        else:
            response = NOT_FOUND_RESPONSE
        self.wfile.write(response)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # a crowd of clients makes the server open as many connections here at once
    delay_s = 0.0
    status_response = STATUS_RESPONSE
    tls: ssl.SSLContext | None = None
    handshakes = 0

    def finish_request(self, request: socket.socket | tuple[bytes, socket.socket], client_address: object) -> None:
        if self.tls is not None and isinstance(request, socket.socket):
            # On the connection's own thread, so one slow handshake holds up no other client.
            request = self.tls.wrap_socket(request, server_side=True)
            self.handshakes += 1
        super().finish_request(request, client_address)


class StubGateway:
    """The stub served from a background thread; `url` is its base, `close()` stops it."""

    def __init__(self, port: int = 0, delay_s: float = 0.0, status_bytes: int = 0, tls: bool = False) -> None:
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.delay_s = delay_s
        if status_bytes:
            self._server.status_response = large_status(status_bytes)
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(CERTS / "gateway.pem", CERTS / "leaf.key")
            context.set_alpn_protocols(["http/1.1"])
            self._server.tls = context
        self.port: int = self._server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="stub-gateway", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.stub_gateway", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="fixed delay before every answer")
    parser.add_argument("--status-bytes", type=int, default=0, help="answer /status with this many bytes of JSON")
    parser.add_argument("--tls", action="store_true", help="serve https:// with the test certificate (tests/tls/)")
    args = parser.parse_args(argv)
    stub = StubGateway(args.port, args.delay_ms / 1000.0, args.status_bytes, tls=args.tls)
    # One line on stdout, so a parent process learns the port.
    sys.stdout.write(f"stub gateway listening on {stub.url}\n")
    sys.stdout.flush()
    try:
        # Until stdin closes (the parent went away) or Ctrl-C.
        while sys.stdin.buffer.read(65536):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        stub.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
