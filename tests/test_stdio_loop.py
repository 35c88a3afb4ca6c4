"""stdio on the event loop: slow calls wait as generators, not threads; a client that stops reading meets a deadline."""

from __future__ import annotations

import gc
import json
import logging
import os
import pathlib
import random
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO, Final

import pytest

from mcp_server.core.protocol import Dispatcher
from mcp_server.setup.server import build_catalog
from mcp_server.transports import stdio
from mcp_server.transports.stdio import EXIT_WIRE_BROKEN, StdioServer
from mcp_server.upstream.gateway import Gateway
from tests.conftest import PROCFS, ROOT, SIGNAL_STOP, WAIT, StdioProcess
from tests.sandbox_gateway import SandboxGateway
from tests.test_platforms import SHAPE, VERSIONS, interpreter
from tests.test_stdio import _stdio_log

SLOW_CALLS: Final = 8
INITIALIZE: Final = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


def _call(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "get_perps_pairs"}}


def _threads(pid: int) -> list[str]:
    """The names of a process's threads, from /proc."""
    tasks = pathlib.Path(f"/proc/{pid}/task")
    return sorted((task / "comm").read_text().strip() for task in tasks.iterdir())


def _slow_calls_at_the_gateway(
    sandbox: SandboxGateway, stdio_process: Callable[..., StdioProcess], seconds: float
) -> StdioProcess:
    """A stdio server with SLOW_CALLS calls sent, each held at the gateway for `seconds`."""
    sandbox.fault("/v1/perps/pairs", "delay", seconds=seconds, times=SLOW_CALLS)
    process = stdio_process(FAIRWINS_API_URL=sandbox.url, FAIRWINS_MCP_TIMEOUT="20")
    process.send(INITIALIZE)
    assert "result" in process.response_to("init")
    for n in range(SLOW_CALLS):
        process.send(_call(n))
    sandbox.wait_for_requests(SLOW_CALLS, timeout=WAIT)  # all of them are at the gateway, held there
    return process


@PROCFS
def test_eight_slow_calls_wait_on_the_gateway_with_at_most_two_threads_in_the_server(
    sandbox: SandboxGateway, stdio_process: Callable[..., StdioProcess]
) -> None:
    """A call waiting on the gateway is a suspended generator: the main thread and the log writer, no pool."""
    process = _slow_calls_at_the_gateway(sandbox, stdio_process, seconds=3)
    during = _threads(process.proc.pid)
    process.close_stdin()
    answers = process.rest()
    assert sorted(m["id"] for m in answers) == list(range(SLOW_CALLS))
    assert all(m["result"]["isError"] is False for m in answers), answers
    assert process.wait() == 0
    assert len(during) <= 2, during


@SIGNAL_STOP
def test_sigterm_answers_every_request_read_with_slow_calls_in_flight_then_exits_0(
    sandbox: SandboxGateway, stdio_process: Callable[..., StdioProcess]
) -> None:
    process = _slow_calls_at_the_gateway(sandbox, stdio_process, seconds=1)
    burst = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping" if n % 2 else "tools/list"}).encode() + b"\n"
        for n in range(SLOW_CALLS, 500)
    )
    process.send_raw(burst)  # fits the pipe: all written before the signal
    process.proc.send_signal(signal.SIGTERM)
    answered = sorted(m["id"] for m in process.rest())
    assert answered == list(range(500))
    assert process.wait() == 0
    assert "stopped: every request read before SIGTERM was answered" in process.stderr


class _Unwatched:
    """A pipe's write end that shows no descriptor: the loop cannot watch it, so a thread writes it, as on Windows."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, data: bytes | memoryview) -> int:
        return os.write(self.fd, data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@contextmanager
def _stdout(kind: str) -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """A stdout the test reads only when asked: a pipe, one only a thread can write, or a socket pair (as Node
    gives its child processes)."""
    wire: Any
    if kind in ("pipe", "unwatched pipe"):
        out_read, out_write = os.pipe()
        wire = open(out_write, "wb") if kind == "pipe" else _Unwatched(out_write)
        reader = open(out_read, "rb")
    else:
        ours, theirs = socket.socketpair()
        wire = theirs.makefile("wb")
        reader = ours.makefile("rb")
        theirs.close()  # the file objects keep the sockets open
        ours.close()
    try:
        yield wire, reader
    finally:
        wire.close()
        reader.close()


@pytest.mark.posix("a pipe or a socket pair stands in for stdout; on Windows its thread's road is the only one")
@pytest.mark.parametrize("kind", ["pipe", "socketpair", "unwatched pipe"])
def test_a_client_that_stops_reading_stdout_meets_the_answer_deadline_and_the_server_stops(kind: str) -> None:
    """The answers outgrow what stdout holds and the client reads none: within the deadline the wire is given up.

    On the loop's road (a pipe, a socket pair) and on the writer thread's (a stdout the loop cannot
    watch), the same deadline: the loop's timer.

    run() returns EXIT_WIRE_BROKEN with stdin still open (nothing hangs in a write), says why in its
    log, and what reached stdout is whole lines but perhaps the last: a line cut where the client
    stopped taking bytes, after which nothing more is written.
    """
    dispatcher = Dispatcher(build_catalog(Gateway("http://127.0.0.1:9")))
    in_read, in_write = os.pipe()
    requests = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list"}).encode() + b"\n" for n in range(400)
    )
    with _stdout(kind) as (wire, client), _stdio_log() as log, open(in_read, "rb") as reader:
        server = StdioServer(dispatcher, wire, write_timeout=0.5)
        codes: list[int] = []
        thread = threading.Thread(target=lambda: codes.append(server.run(reader)), daemon=True)
        thread.start()
        writer = threading.Thread(target=_write_all, args=(in_write, requests), daemon=True)
        writer.start()
        thread.join(WAIT)
        assert not thread.is_alive(), "run() is stuck: the deadline did not hold"
        assert codes == [EXIT_WIRE_BROKEN]
        wire.close()  # the test's copy: stdout's end for the read below
        written = client.read()
        os.close(in_write)
        writer.join(WAIT)
    assert any("did not read its answers within 0.5 s" in message for message in log.messages), log.messages
    *whole, last = written.split(b"\n")
    answered = [json.loads(raw)["id"] for raw in whole]
    assert answered == list(range(len(answered))) and len(answered) < 400
    assert last == b"" or not last.endswith(b"}")  # a cut line, or none


@pytest.mark.posix("a pipe stands in for stdout; on Windows its thread's road is the only one")
@pytest.mark.parametrize("kind", ["pipe", "unwatched pipe"])
@pytest.mark.parametrize("how", ["stops reading", "closes stdout"])
def test_a_stdout_that_fails_with_calls_in_flight_leaves_nothing_for_the_collector(
    how: str, kind: str, sandbox: SandboxGateway
) -> None:
    """The wire given up (the deadline) or gone (EPIPE) while calls wait on the gateway: then a collection.

    Nothing unraisable, no task left pending, no error logged: each failure had an owner.
    """
    sandbox.fault("/v1/perps/pairs", "delay", seconds=1, times=SLOW_CALLS)
    dispatcher = Dispatcher(build_catalog(Gateway(sandbox.url, timeout=20.0)))
    calls = b"".join(json.dumps(_call(n)).encode() + b"\n" for n in range(SLOW_CALLS))
    lists = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list"}).encode() + b"\n" for n in range(SLOW_CALLS, 400)
    )
    unraisable: list[Any] = []
    errors = _Errors()
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    root = logging.getLogger("fairwins_mcp")
    root.addHandler(errors)
    asyncio_log = logging.getLogger("asyncio")
    asyncio_log.addHandler(errors)
    try:
        in_read, in_write = os.pipe()
        with _stdout(kind) as (wire, client), open(in_read, "rb") as reader:
            if how == "closes stdout":
                client.close()
            server = StdioServer(dispatcher, wire, write_timeout=0.5)
            codes: list[int] = []
            thread = threading.Thread(target=lambda: codes.append(server.run(reader)), daemon=True)
            thread.start()
            writer = threading.Thread(target=_write_all, args=(in_write, calls + lists), daemon=True)
            writer.start()
            if how == "closes stdout":
                writer.join(WAIT)
                os.close(in_write)  # the end of input: served to it, the answers dropped
            thread.join(WAIT)
            assert not thread.is_alive(), "run() is stuck"
            if how == "stops reading":
                os.close(in_write)
                writer.join(WAIT)
        assert codes == ([EXIT_WIRE_BROKEN] if how == "stops reading" else [0])
        gc.collect()
        gc.collect()
    finally:
        sys.unraisablehook = hook
        root.removeHandler(errors)
        asyncio_log.removeHandler(errors)
    assert unraisable == []
    assert errors.messages == []


class _Errors(logging.Handler):
    """The error records logged meanwhile (a failure nobody owned, a task destroyed while pending)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _write_all(fd: int, data: bytes) -> None:
    """The client's writes: a server that stopped reading leaves this blocked, which the test ends by closing fd."""
    try:
        os.write(fd, data)
    except OSError:
        pass


@pytest.mark.parametrize(
    ("kind", "out"),
    [("regular file", "pipe"), ("socketpair", "pipe"), ("pipe", "pipe"), ("pipe", "unwatched pipe")],
)
def test_every_kind_of_stdin_is_served_to_its_end(kind: str, out: str, tmp_path: pathlib.Path) -> None:
    """A regular file (`< requests.jsonl`, which the loop cannot watch: a thread reads it), a socket pair (as Node
    gives its child processes) and a pipe: every line answered, in order, then 0 at the end of input; and so on a
    stdout only a thread can write, every 30th answer a tools/list of tens of kilobytes."""
    data = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list" if n % 30 == 0 else "ping"}).encode() + b"\n"
        for n in range(300)
    )
    with _stdin(kind, data, tmp_path) as reader, _stdout(out) as (wire, client):
        server = StdioServer(Dispatcher(build_catalog(Gateway("http://127.0.0.1:9"))), wire)
        codes: list[int] = []
        thread = threading.Thread(target=lambda: codes.append(server.run(reader)), daemon=True)
        thread.start()
        answers: list[int] = []
        buffered = b""
        while len(answers) < 300:
            chunk = os.read(client.fileno(), 65536)
            assert chunk, "stdout ended early"
            buffered += chunk
            *whole, buffered = buffered.split(b"\n")
            answers += [json.loads(raw)["id"] for raw in whole]
        thread.join(WAIT)
        assert not thread.is_alive() and codes == [0]
    assert answers == list(range(300))


@contextmanager
def _stdin(kind: str, data: bytes, tmp_path: pathlib.Path) -> Iterator[BinaryIO]:
    """A stdin holding `data` then its end, of the kind asked for."""
    if kind == "regular file":
        path = tmp_path / "requests.jsonl"
        path.write_bytes(data)
        with open(path, "rb") as reader:
            yield reader
        return
    if kind == "pipe":
        read_fd, write_fd = os.pipe()
        writer = threading.Thread(target=_write_and_close, args=(write_fd, data), daemon=True)
        writer.start()
        with open(read_fd, "rb") as reader:
            yield reader
        writer.join(WAIT)
        return
    ours, theirs = socket.socketpair()
    writer = threading.Thread(target=_send_and_close, args=(ours, data), daemon=True)
    writer.start()
    try:
        with theirs.makefile("rb") as reader:
            yield reader
    finally:
        theirs.close()
        writer.join(WAIT)


def _write_and_close(fd: int, data: bytes) -> None:
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _send_and_close(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
    finally:
        sock.close()


def test_a_lines_writes_are_its_bytes_and_end_in_order_small_pieces_joined_large_ones_sliced() -> None:
    from mcp_server.transports.http.flow import WRITE_SLICE

    sizes = [0, 1, 5, 100, WRITE_SLICE - 1, WRITE_SLICE, WRITE_SLICE + 7, 3 * WRITE_SLICE + 1]
    rng = random.Random(61)
    for _ in range(300):
        parts: list[bytes | memoryview | str] = []
        for _ in range(rng.randint(0, 12)):
            size = rng.choice(sizes)
            data = (b"abcdefghij" * (size // 10 + 1))[:size]
            parts.append(rng.choice([data, memoryview(data), data.decode()]))
        writes = list(stdio._slices(parts))
        whole = b"".join(p.encode() if isinstance(p, str) else bytes(p) for p in parts) + b"\n"
        assert b"".join(bytes(w) for w in writes) == whole
        assert all(0 < len(w) <= WRITE_SLICE for w in writes)
    # A small answer is one system call, not one a piece.
    assert list(stdio._slices([b'{"jsonrpc":"2.0","id":1,', '"result":{}', b"}"])) == [
        b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    ]


# A server under Windows' shape of the standard library (tests/platforms), where stdout is never watched by the loop.
STOPS_READING: Final = """
import sys
from mcp_server.core.protocol import Dispatcher
from mcp_server.ops import logs
from mcp_server.setup.server import build_catalog
from mcp_server.transports import stdio
from mcp_server.upstream.gateway import Gateway

logs.configure("info")
wire = stdio.claim_stdout()
server = stdio.StdioServer(Dispatcher(build_catalog(Gateway("http://127.0.0.1:9"))), wire, write_timeout=0.5)
sys.exit(server.run(sys.stdin.buffer))
"""


@pytest.mark.linux_tier("shapes Linux's standard library into Windows' (tests/platforms/)")
@pytest.mark.parametrize("version", VERSIONS)
def test_a_windows_server_whose_client_stops_reading_stdout_exits_1_at_the_deadline(
    version: str, tmp_path: pathlib.Path
) -> None:
    """Its writer thread blocks in a write to a pipe nobody reads; the loop's deadline ends the process with 1.

    The answers the pipe took before are there, whole and in order, and the thread, still blocked in
    its write, holds nothing back: no hang, no traceback, no fatal error at the interpreter's exit.
    """
    script = tmp_path / "stops_reading.py"
    script.write_text(STOPS_READING)
    python, extra = interpreter(version)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRWINS_", "PYTHON"))}
    env.update(extra, PYTHONPATH=str(ROOT))
    pings = b"".join(json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping"}).encode() + b"\n" for n in range(50))
    lists = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list"}).encode() + b"\n" for n in range(50, 400)
    )
    with open(tmp_path / "stderr", "w+b") as stderr:
        proc = subprocess.Popen(
            [python, str(SHAPE), "win32", str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(pings + lists)  # fits stdin's pipe; stdin stays open: the exit is the deadline's
            proc.stdin.flush()
            code = proc.wait(WAIT)
            written = proc.stdout.read()
        finally:
            proc.kill()
            proc.wait(WAIT)
            proc.stdin.close()
            proc.stdout.close()
        stderr.seek(0)
        logged = stderr.read().decode("utf-8", "replace")
    assert code == EXIT_WIRE_BROKEN, logged
    assert "did not read its answers within 0.5 s" in logged, logged
    assert "Traceback" not in logged and "Fatal Python error" not in logged, logged
    *whole, last = written.split(b"\n")
    answered = [json.loads(raw)["id"] for raw in whole]
    assert answered == list(range(len(answered))) and 50 <= len(answered) < 400, answered
    assert last == b"" or not last.endswith(b"}")
