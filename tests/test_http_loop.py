"""The HTTP core on its event loop (issues 34 and 35): it serves, exits, or stops when told, and no client holds it.

- Whatever accepting one connection raises (EINVAL from TCP_NODELAY on a reset socket as macOS
  raises it, OSError from setblocking or getpeername, ENOBUFS or ECONNABORTED from accept) costs
  that connection only, on the MCP listener and on the metrics listener: a later request and
  /healthz are answered.
- A selector that raises ends the loop, and `serve` ends the process with a non-zero exit: never
  a process alive and deaf.
- An answer's write has one deadline for the whole answer: a client that reads a few bytes at a
  time is cut off at that deadline, not after slices x 30 s.
- No thread per connection or per waiting call: 200 calls waiting on a slow gateway leave the
  thread count where it was.
- A stop signal is acted on within a second, whatever the connections.

Faults are injected through the listening socket the server is given (a test double around a
real socket), never by patching the server's code.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import pathlib
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest

from mcp_server.core.catalog import Catalog
from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher
from mcp_server.ops import listener as listening
from mcp_server.ops.metrics import ServerMetrics
from mcp_server.transports.http import gate
from mcp_server.transports.http import loop as loops
from mcp_server.transports.http.server import FATAL_EXIT, McpHTTPServer, metrics_server
from mcp_server.wire.jsonrpc import JSONObject
from tests.accept_faults import FaultyListener
from tests.conftest import SIGNAL_STOP, rounds
from tests.mcp_http import Raw, running
from tests.sandbox_gateway import SandboxGateway

WAIT = 10.0
ROOT = pathlib.Path(__file__).resolve().parent.parent
HEALTH = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
SCRAPE = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n"


def post(message: JSONObject) -> bytes:
    body = json.dumps(message).encode()
    return (
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


PING = post({"jsonrpc": "2.0", "id": 1, "method": "ping"})


class BigTool:
    """A tool whose answer is large: what a slow reader is handed."""

    name = "big"

    def __init__(self, size: int) -> None:
        self.size = size

    def definition(self) -> JSONObject:
        return {"name": self.name, "description": "A large answer.", "inputSchema": {"type": "object"}}

    def call(self, arguments: JSONObject, ctx: RequestContext) -> JSONObject:
        return {"content": [{"type": "text", "text": "x" * self.size}], "isError": False}


def dispatcher(*tools: Any) -> Dispatcher:
    return Dispatcher(Catalog(tools=list(tools)))


ACCEPT_FAULTS = {
    "EINVAL from TCP_NODELAY (macOS, reset socket)": ("fault", "nodelay"),
    "OSError from setblocking": ("fault", "setblocking"),
    "OSError from getpeername": ("fault", "getpeername"),
    "ENOBUFS from accept": ("accept", errno.ENOBUFS),
    "ECONNABORTED from accept": ("accept", errno.ECONNABORTED),
    "EMFILE from accept": ("accept", errno.EMFILE),
}


def arm(listener: FaultyListener, fault: tuple[str, Any]) -> None:
    kind, value = fault
    if kind == "fault":
        listener.fault = value
    else:
        listener.accept_error = value


def answered(port: int, request: bytes) -> int:
    """The status of the answer to `request` on a new connection (a connection that hangs fails the test)."""
    client = Raw(port, timeout=WAIT)
    try:
        client.send(request)
        response = client.response()
        assert response is not None, "the connection closed unanswered"
        return response.status
    finally:
        client.close()


def struck(port: int) -> None:
    """The connection the fault strikes: whatever happens to it, it must not hang."""
    try:
        client = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    except OSError:
        return
    try:
        client.sendall(HEALTH)
        client.recv(4096)
    except OSError:
        pass
    finally:
        client.close()


@pytest.mark.parametrize("fault", list(ACCEPT_FAULTS.values()), ids=list(ACCEPT_FAULTS))
def test_a_fault_accepting_one_connection_costs_that_connection_only(fault: tuple[str, Any]) -> None:
    listener = FaultyListener(listening.listen("127.0.0.1", 0))
    server = McpHTTPServer(
        ("127.0.0.1", 0),
        dispatcher(),
        gate.Policy(loopback_bind=True),
        listener=listener,  # type: ignore[arg-type]
    )
    with running(server):
        port = server.server_address[1]
        arm(listener, fault)
        struck(port)
        assert answered(port, HEALTH) == 200
        assert answered(port, PING) == 200
        assert server.fatal is None


@pytest.mark.parametrize("fault", list(ACCEPT_FAULTS.values()), ids=list(ACCEPT_FAULTS))
def test_a_fault_accepting_a_scraper_costs_that_scrape_only(fault: tuple[str, Any]) -> None:
    listener = FaultyListener(listening.listen("127.0.0.1", 0))
    registry = ServerMetrics([], "test")
    scrapes = metrics_server(dispatcher(), registry, listener=listener)  # type: ignore[arg-type]
    with running(scrapes):
        port = scrapes.server_address[1]
        arm(listener, fault)
        struck(port)
        assert answered(port, SCRAPE) == 200
        assert answered(port, SCRAPE) == 200


def test_a_listening_socket_that_cannot_accept_any_more_ends_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    # EBADF from accept: the listener itself is gone. The loop ends (fatal), never serving deafly on,
    # and says why once.
    listener = FaultyListener(listening.listen("127.0.0.1", 0))
    server = McpHTTPServer(
        ("127.0.0.1", 0),
        dispatcher(),
        gate.Policy(loopback_bind=True),
        listener=listener,  # type: ignore[arg-type]
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        listener.accept_error = errno.EBADF
        struck(server.server_address[1])
        thread.join(WAIT)
        assert not thread.is_alive(), "the loop went on with a listener that cannot accept"
        assert isinstance(server.fatal, OSError) and server.fatal.errno == errno.EBADF
        critical = [r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL]
        assert len(critical) == 1 and critical[0].startswith("the listening socket can no longer accept"), critical
    finally:
        server.server_close()


class RaisingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """A selector that fails once armed, as a selector whose descriptor broke under it does."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = threading.Event()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if self.armed.is_set():
            raise OSError(errno.EBADF, "the selector broke")
        # Never wait long, so that arming is seen at once.
        return super().select(0.05 if timeout is None else min(timeout, 0.05))  # type: ignore[no-any-return]


def test_a_selector_that_raises_ends_serve_forever_with_the_reason() -> None:
    selector = RaisingSelector()
    server = McpHTTPServer(("127.0.0.1", 0), dispatcher(), gate.Policy(loopback_bind=True))
    thread = threading.Thread(target=lambda: server.serve_forever(selector=selector), daemon=True)
    thread.start()
    try:
        assert answered(server.server_address[1], HEALTH) == 200
        selector.armed.set()
        thread.join(WAIT)
        assert not thread.is_alive()
        assert isinstance(server.fatal, OSError)
    finally:
        server.server_close()


SELECTOR_SCRIPT = """
import selectors, sys, threading, urllib.request
from mcp_server.core.catalog import Catalog
from mcp_server.core.protocol import Dispatcher
from mcp_server.ops import listener
from mcp_server.transports.http.server import serve

class Raising(selectors.DefaultSelector):
    armed = False
    def select(self, timeout=None):
        if self.armed:
            raise OSError(9, "the selector broke")
        return super().select(0.05 if timeout is None else min(timeout, 0.05))

selector = Raising()
sock = listener.listen("127.0.0.1", 0)
port = sock.getsockname()[1]

def probe():
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
        sys.stderr.write(f"healthz {answer.status}\\n")
    selector.armed = True

threading.Thread(target=probe, daemon=True).start()
serve(Dispatcher(Catalog()), host="127.0.0.1", port=port, allowed_origins=(), env_bearer=None,
      max_concurrency=8, max_body=1 << 20, grace=1.0, listener=sock, selector=selector)
sys.stderr.write("serve returned\\n")
"""


def test_a_process_whose_loop_cannot_go_on_exits_non_zero_at_once() -> None:
    proc = subprocess.run([sys.executable, "-c", SELECTOR_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert "healthz 200" in proc.stderr, proc.stderr
    assert proc.returncode == FATAL_EXIT, proc.stderr
    assert "serve returned" not in proc.stderr  # gone at once, not after a drain
    assert "event loop" in proc.stderr


# ---- an answer's write: one deadline for the whole answer ---------------------------------------


def test_a_client_that_reads_just_fast_enough_is_cut_off_at_the_answers_deadline() -> None:
    size = 8 * 1024 * 1024
    deadline = 1.0
    server = McpHTTPServer(
        ("127.0.0.1", 0),
        dispatcher(BigTool(size)),
        gate.Policy(loopback_bind=True),
        write_timeout=deadline,
    )
    with running(server):
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.settimeout(WAIT)
        client.connect(server.server_address[:2])
        client.sendall(post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "big"}}))
        started = time.monotonic()
        received = 0
        ended = False
        # 2 KB each 50 ms: always reading, never fast enough for 8 MiB within the deadline.
        pace = threading.Event()  # never set: its wait is the interval between reads
        while time.monotonic() - started < deadline + WAIT:
            readable, _, _ = select.select([client], [], [], WAIT)
            if not readable:
                break
            try:
                chunk = client.recv(2048)
            except ConnectionResetError:
                ended = True
                break
            if not chunk:
                ended = True
                break
            received += len(chunk)
            pace.wait(0.05)
        took = time.monotonic() - started
        client.close()
        assert ended, "the server never cut off a client that reads too slowly"
        assert received < size, "the whole answer arrived: the reader was not slow enough to test anything"
        assert took < deadline + 5.0, f"cut off after {took:.1f} s, the deadline was {deadline} s"
        assert answered(server.server_address[1], HEALTH) == 200


# ---- no thread per connection or per waiting call -----------------------------------------------


def ours() -> int:
    """Threads of this process that are not the sandbox gateway's own."""
    return sum(1 for t in threading.enumerate() if not t.name.startswith("sandbox-gateway"))


def test_two_hundred_calls_waiting_on_a_slow_gateway_hold_no_thread_each(sandbox: SandboxGateway) -> None:
    from mcp_server.setup.server import build_catalog
    from mcp_server.upstream.gateway import Gateway

    calls = 200
    sandbox.fault("/status", "delay", seconds=3.0)
    server = McpHTTPServer(
        ("127.0.0.1", 0),
        Dispatcher(build_catalog(Gateway(sandbox.url, timeout=WAIT))),
        gate.Policy(loopback_bind=True),
    )
    message = post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_gateway_status"}})
    with running(server), ExitStack() as stack:
        before = ours()
        clients = [stack.enter_context(connected(server.server_address[1])) for _ in range(calls)]
        for client in clients:
            client.send(message)
        sandbox.wait_for_requests(calls, timeout=WAIT)
        during = ours()
        assert server._inflight == calls
        assert during <= before + 2, f"{during - before} more threads while {calls} calls wait"
        statuses = [client.response() for client in clients]
        assert all(r is not None and r.status == 200 for r in statuses)


@contextmanager
def connected(port: int) -> Iterator[Raw]:
    client = Raw(port, timeout=WAIT)
    try:
        yield client
    finally:
        client.close()


# ---- a stop signal, whatever the load -----------------------------------------------------------


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mcp_server", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def line_with(proc: subprocess.Popen[str], needle: str, timeout: float) -> tuple[str, float]:
    """The first stderr line holding `needle`, and when it was read (time.monotonic())."""
    assert proc.stderr is not None
    found: list[tuple[str, float]] = []
    done = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:  # read to the end once found, so the server never blocks on its log
            if needle in line and not found:
                found.append((line, time.monotonic()))
                done.set()
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(timeout) and found, f"no line with {needle!r}"
    return found[0]


RUNS = 20  # issue 34: twenty signals of each kind, each into a crowd, each acted on within a second (the first
# rounds in `make test`, the rest in `make test-soak`)


def crowd_then_signal(
    sandbox: SandboxGateway, proc: subprocess.Popen[str], port: int, signalled: int, signum: int, seen_before: int
) -> None:
    """300 connections (half with a call waiting on the gateway), then `signum` to `signalled`:
    'stopping' within a second, and every waiting call answered."""
    crowd = 300
    message = post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_gateway_status"}})
    with ExitStack() as stack:
        clients = [stack.enter_context(connected(port)) for _ in range(crowd)]
        for client in clients[: crowd // 2]:
            client.send(message)  # half wait on the gateway, half sit idle
        sandbox.wait_for_requests(seen_before + crowd // 2, timeout=WAIT)
        sent = time.monotonic()
        os.kill(signalled, signum)
        _, seen = line_with(proc, "stopping", WAIT)
        assert seen - sent < 1.0, f"'stopping' logged {seen - sent:.2f} s after the signal"
        for client in clients[: crowd // 2]:
            response = client.response()
            assert response is not None and response.status == 200


def listening_port(proc: subprocess.Popen[str]) -> int:
    assert proc.stderr is not None
    line = proc.stderr.readline()
    while "listening on" not in line:
        assert line, "the server ended before it listened"
        line = proc.stderr.readline()
    return int(line.split("/mcp")[0].rsplit(":", 1)[1])


@SIGNAL_STOP
@pytest.mark.parametrize("run", rounds(RUNS))
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_into_a_crowd_is_acted_on_within_a_second_and_the_drain_exits_0(
    sandbox: SandboxGateway, signum: int, run: int
) -> None:
    sandbox.fault("/status", "delay", seconds=1.0)
    proc = run_cli(["--http", "0"], {"FAIRWINS_API_URL": sandbox.url})
    try:
        port = listening_port(proc)
        crowd_then_signal(sandbox, proc, port, proc.pid, signum, 0)
        assert proc.wait(WAIT * 2) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)


@SIGNAL_STOP
def test_sigterm_to_one_worker_in_a_crowd_is_acted_on_within_a_second(sandbox: SandboxGateway) -> None:
    # The worker's side of --workers: its own loop takes the signal. (The supervisor's is ops/workers.py's.)
    sandbox.fault("/status", "delay", seconds=1.0)
    proc = run_cli(["--http", "0", "--workers", "2"], {"FAIRWINS_API_URL": sandbox.url})
    try:
        assert proc.stderr is not None
        port, workers = 0, []
        while not port or len(workers) < 2:
            line = proc.stderr.readline()
            assert line, "the server ended before its workers served"
            if "listening on" in line:
                port = int(line.split("/mcp")[0].rsplit(":", 1)[1])
            elif " serving" in line and "worker " in line:
                workers.append(int(line.split("worker ", 1)[1].split()[0]))
        worker = workers[0]
        crowd_then_signal(sandbox, proc, port, worker, signal.SIGTERM, 0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT * 3) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)


@SIGNAL_STOP
def test_a_stop_signal_is_heard_when_a_burst_has_filled_the_loops_self_pipe() -> None:
    # Each call_soon_threadsafe writes a byte to the loop's self-pipe, and a burst of them in one
    # turn (a crowd's calls cancelled together) fills it before the loop reads it again. A stop
    # signal whose only trace is a byte written there is lost, and the server serves on.
    loop = loops.new_loop()
    heard: list[int] = []
    quiet = loops.on_stop_signals(loop, heard.append, (signal.SIGTERM,))
    try:

        def burst() -> None:
            for _ in range(200_000):
                loop.call_soon_threadsafe(_nothing)
            os.kill(os.getpid(), signal.SIGTERM)  # this turn still running: the self-pipe is full

        loop.call_soon(burst)
        deadline = time.monotonic() + WAIT
        while not heard and time.monotonic() < deadline:
            loop.run_until_complete(asyncio.sleep(0.05))
    finally:
        quiet()
        loop.close()
    assert heard == [signal.SIGTERM]


def _nothing() -> None:
    return None


def test_a_wait_is_not_cut_short_by_the_timer_an_earlier_wait_left_set() -> None:
    # A connection keeps one timer: a wait woken early leaves it set for its own limit, and a
    # later wait with a later limit keeps it. When it fires, that later wait must go on to its own
    # limit (a body still arriving within the read timeout is not cut off at the idle limit).
    import asyncio

    from mcp_server.transports.http.connection import Connection

    async def waits() -> None:
        loop = asyncio.get_running_loop()
        conn = Connection(None, "127.0.0.1:1", "main", loop)  # type: ignore[arg-type]  # a wait uses no server
        start = time.monotonic()
        loop.call_later(0.01, conn.wake)
        assert await conn._wait(start + 0.5) is True  # woken: its timer, for 0.5, stays set
        loop.call_later(0.8, conn.wake)  # after that timer fires
        assert await conn._wait(start + 5.0) is True
        assert time.monotonic() - start >= 0.8
        begun = time.monotonic()
        assert await conn._wait(begun + 0.2) is False  # nobody wakes it: it ends at its limit
        assert time.monotonic() - begun >= 0.2

    asyncio.run(waits())
