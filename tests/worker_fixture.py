"""A toy HTTP worker under the real supervisor (mcp_server.ops.workers), for tests of supervision alone.

    python -m tests.worker_fixture --workers 3

prints `port N` on stdout once listening. Each worker answers `GET /pid` with its pid, `GET
/slow?s=SECONDS` after that long, and `GET /exit?code=N` by exiting with N (a crash). On SIGTERM a
worker stops accepting, finishes what it is serving, and returns 0 (or the code given by
`--drain-exit`, to test a worker that fails its drain). It says on stderr why it stopped: `instance`
(the supervisor stopped or died) or `alone` (SIGTERM to that worker only).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from mcp_server.ops import listener as listening
from mcp_server.ops import workers


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/exit":
            os._exit(int(query["code"][0]))
        if url.path == "/slow":
            sys.stderr.write(f"slow request in worker {os.getpid()}\n")
            sys.stderr.flush()
            time.sleep(float(query["s"][0]))
        body = f"{os.getpid()}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # a drain waits for every request being served
    block_on_close = True


def _run(listener: socket.socket, lifeline: workers.Lifeline, drain_exit: int) -> int:
    server = _Server(listener.getsockname()[:2], _Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = listener
    why: list[str] = []
    stop = threading.Event()

    def stopping(reason: str) -> None:
        why.append(reason)
        stop.set()

    signal.signal(signal.SIGTERM, lambda *_: stopping("alone"))
    lifeline.watch(lambda: stopping("instance"))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    while not stop.wait(3600):
        pass
    sys.stderr.write(f"worker {os.getpid()} stops: {why[0]}\n")
    sys.stderr.flush()
    server.shutdown()
    thread.join()
    server.server_close()  # joins the request threads
    return drain_exit


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.worker_fixture")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--drain-exit", type=int, default=0)
    parser.add_argument("--stop-timeout", type=float, default=10.0)
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
    sock = listening.listen("127.0.0.1", 0)
    print(f"port {sock.getsockname()[1]}", flush=True)
    return workers.supervise(
        sock,
        args.workers,
        lambda inherited, lifeline: _run(inherited, lifeline, args.drain_exit),
        stop_timeout=args.stop_timeout,
    )


if __name__ == "__main__":
    raise SystemExit(main())
