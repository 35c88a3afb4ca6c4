"""A toy HTTP worker under the real supervisor (mcp_server.ops.workers), for tests of supervision alone.

    python -m tests.worker_fixture --workers 3

prints `port N` on stdout once listening. Each worker answers `GET /pid` with its pid, `GET
/slow?s=SECONDS` after that long, and `GET /exit?code=N` by exiting with N (a crash). On SIGTERM a
worker stops accepting, finishes what it is serving, and returns 0 (or the code given by
`--drain-exit`, to test a worker that fails its drain). It says on stderr why it stopped: `instance`
(the supervisor stopped or died) or `alone` (SIGTERM to that worker only).

Faults, injected through the supervisor's own seams: `--crash-first N` makes the first N workers
started exit 1 at once (a worker whose accept loop could not go on); `--reap-fails N` makes the
supervisor's first N calls to waitpid raise (-1: every call).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
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


def _crashes_first(count: int, marks: str) -> bool:
    """True for the first `count` workers to ask (one directory made per crash: atomic across the forks)."""
    for n in range(count):
        try:
            os.mkdir(os.path.join(marks, str(n)))
        except FileExistsError:
            continue
        return True
    return False


class InjectedReapFailure(OSError):
    """What the fixture's waitpid raises."""


def _failing_waitpid(failures: int) -> Callable[[int, int], tuple[int, int]]:
    calls = [0]

    def waitpid(pid: int, options: int) -> tuple[int, int]:
        calls[0] += 1
        if failures < 0 or calls[0] <= failures:
            raise InjectedReapFailure(f"injected waitpid failure {calls[0]}")
        return os.waitpid(pid, options)

    return waitpid


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.worker_fixture")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--drain-exit", type=int, default=0)
    parser.add_argument("--stop-timeout", type=float, default=10.0)
    parser.add_argument("--crash-first", type=int, default=0)
    parser.add_argument("--reap-fails", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
    sock = listening.listen("127.0.0.1", 0)
    print(f"port {sock.getsockname()[1]}", flush=True)
    marks = tempfile.mkdtemp(prefix="worker-fixture-")
    supervisor_pid = os.getpid()

    def run(inherited: socket.socket, lifeline: workers.Lifeline) -> int:
        if _crashes_first(args.crash_first, marks):
            sys.stderr.write(f"worker {os.getpid()} crashes at its start\n")
            return 1
        return _run(inherited, lifeline, args.drain_exit)

    supervisor = workers.Supervisor(sock, args.workers, run, args.stop_timeout)
    if args.reap_fails:
        supervisor.waitpid = _failing_waitpid(args.reap_fails)
    try:
        return supervisor.serve()
    finally:
        if os.getpid() == supervisor_pid:
            shutil.rmtree(marks, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
