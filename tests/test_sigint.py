"""SIGINT stops the server as cleanly as SIGTERM: what was read is answered, the exit is 0, and no traceback.

Claude Code stops a stdio server with SIGINT (its `claude mcp list` health check does), and a
terminal's Ctrl-C sends it too. Every test here runs the real server as a process and sends it a
real signal: at idle, with a gateway call held in flight, with a burst of lines still unread,
while it is still starting, over HTTP; and then the real Claude Code CLI does it.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import IO, Any, Final

import pytest

from tests.conftest import NODE_TOOLS, ROOT, SIGNAL_STOP, StdioProcess, server_env
from tests.hosts import tool
from tests.sandbox_gateway import SandboxGateway
from tests.secret_canaries import record_output
from tests.test_http import run_cli, wait_for_url
from tests.test_install import QUIET_CLAUDE, connected, scratch_env

pytestmark = SIGNAL_STOP

WAIT: Final = 30.0  # a cold interpreter on a loaded machine
SIGNALS: Final = [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM")]
INITIALIZE: Final = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "sigint-test", "version": "1"},
    },
}
STATUS_CALL: Final = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "get_gateway_status", "arguments": {}},
}


def assert_quiet(stderr: str) -> None:
    """Nothing alarming: no traceback, no KeyboardInterrupt, no line above INFO."""
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert not re.search(r" (WARNING|ERROR|CRITICAL) ", stderr), stderr


class Lines:
    """A stream's lines as they arrive, read on a thread of their own; a test waits for one with a timeout."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._ended = False
        self._cond = threading.Condition()

    def read(self, stream: IO[bytes] | IO[str], also: list[bytes] | None = None) -> None:
        try:
            for line in stream:
                with self._cond:
                    if isinstance(line, bytes):
                        if also is not None:
                            also.append(line)
                        line = line.decode("utf-8", "replace")
                    self.lines.append(line)
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._ended = True
                self._cond.notify_all()

    def wait_for(self, text: str, timeout: float = WAIT) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._ended or any(text in line for line in self.lines), timeout)
            assert any(text in line for line in self.lines), f"no {text!r} on stderr:\n{self.text}"

    @property
    def text(self) -> str:
        with self._cond:
            return "".join(self.lines)


class WatchedProcess(StdioProcess):
    """conftest's stdio process, whose stderr a test can wait on."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.watch = Lines()
        super().__init__(argv, env)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.watch.read(self.proc.stderr, also=self._stderr)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)


class HeldGateway:
    """A relay to the sandbox gateway that holds every connection until `release` is set.

    A gateway call stays in flight for as long as the test needs, with no timing guessed: the call
    has left the server when `arrived` is set, and gets the sandbox's real answer once released.
    """

    def __init__(self, target: SandboxGateway) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.arrived = threading.Event()
        self.release = threading.Event()
        self._sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            self._sockets.append(conn)
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        with suppress(OSError):
            first = conn.recv(65536)
            self.arrived.set()
            if not first or not self.release.wait(WAIT):
                return
            upstream = socket.create_connection(("127.0.0.1", self.target.port), timeout=WAIT)
            self._sockets.append(upstream)
            upstream.sendall(first)
            threading.Thread(target=_pipe, args=(upstream, conn), daemon=True).start()
            _pipe(conn, upstream)

    def close(self) -> None:
        self.release.set()
        for sock in self._sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@contextmanager
def held(sandbox: SandboxGateway) -> Iterator[HeldGateway]:
    gateway = HeldGateway(sandbox)
    try:
        yield gateway
    finally:
        gateway.close()


@pytest.fixture
def stdio_server() -> Iterator[Any]:
    started: list[WatchedProcess] = []

    def start(url: str) -> WatchedProcess:
        env = server_env(FAIRWINS_API_URL=url, FAIRWINS_MCP_TIMEOUT="60")
        process = WatchedProcess([sys.executable, "-m", "mcp_server"], env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def stopped_cleanly(process: WatchedProcess, sig: int) -> None:
    """The process closed stdout with nothing more to say, exited 0, and said so quietly."""
    assert process.rest() == []
    assert process.wait(WAIT) == 0, process.watch.text
    stderr = process.watch.text
    assert_quiet(stderr)
    name = signal.Signals(sig).name
    assert f"stopping on {name}: every request already read is answered" in stderr
    assert f"stopped: every request read before {name} was answered" in stderr


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_stop_signal_at_idle_ends_stdio_with_0_and_no_traceback(
    sig: int, sandbox: SandboxGateway, stdio_server: Any
) -> None:
    process = stdio_server(sandbox.url)
    process.send(INITIALIZE)
    assert "result" in process.response_to(1, WAIT)
    process.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert process.response_to(2, WAIT)["result"]["tools"]
    process.proc.send_signal(sig)
    stopped_cleanly(process, sig)


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_stop_signal_with_a_call_in_flight_answers_it_then_exits_0(
    sig: int, sandbox: SandboxGateway, stdio_server: Any
) -> None:
    with held(sandbox) as gateway:
        process = stdio_server(gateway.url)
        process.send(INITIALIZE)
        assert "result" in process.response_to(1, WAIT)
        process.send(STATUS_CALL)
        assert gateway.arrived.wait(WAIT)  # the call is at the gateway, held there
        process.proc.send_signal(sig)
        process.watch.wait_for("stopping on ")  # the signal is handled while the call is still held
        gateway.release.set()
        answer = process.response_to(2, WAIT)
        assert answer["result"]["isError"] is False, answer
        stopped_cleanly(process, sig)


@pytest.mark.parametrize("attempt", range(3))  # where the signal lands is a race: run it a few times
def test_every_line_written_before_sigint_is_answered(attempt: int, stdio_server: Any) -> None:
    process = stdio_server("http://127.0.0.1:9")  # no gateway call is made
    process.send({"jsonrpc": "2.0", "id": 0, "method": "ping"})
    assert process.response_to(0, WAIT) == {"jsonrpc": "2.0", "id": 0, "result": {}}  # up and reading
    burst = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping" if n % 2 else "tools/list"}).encode() + b"\n"
        for n in range(1, 1001)
    )
    process.send_raw(burst)  # about 45 KB: fits the pipe, so it is all written before the signal
    process.proc.send_signal(signal.SIGINT)
    answered = sorted(m["id"] for m in process.rest())
    assert answered == list(range(1, 1001))
    assert process.wait(WAIT) == 0
    assert_quiet(process.watch.text)


# Run as the server's own main, with an audit hook that sends SIGINT while the server is still
# starting (as it imports mcp_server.setup.server, before the stdio transport exists).
STOPPED_WHILE_STARTING: Final = """
import os, signal, sys
fired = []
def stop_while_starting(event, args):
    if event == "import" and args[0] == "mcp_server.setup.server" and not fired:
        fired.append(True)
        os.kill(os.getpid(), signal.SIGINT)
sys.addaudithook(stop_while_starting)
from mcp_server.setup.cli import main
raise SystemExit(main())
"""


def test_sigint_while_starting_waits_until_stdio_serves_then_answers_what_was_written(sandbox: SandboxGateway) -> None:
    read_end, write_end = os.pipe()
    # Written before the process starts, and stdin left open: only the signal can end it.
    os.write(write_end, json.dumps(INITIALIZE).encode() + b"\n" + json.dumps(STATUS_CALL).encode() + b"\n")
    try:
        done = subprocess.run(
            [sys.executable, "-c", STOPPED_WHILE_STARTING],
            cwd=ROOT,
            env=server_env(FAIRWINS_API_URL=sandbox.url),
            stdin=read_end,
            capture_output=True,
            timeout=WAIT,
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    stderr = done.stderr.decode()
    record_output("stdio process stopped while starting", done.stdout + done.stderr)
    assert done.returncode == 0, stderr
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
    assert sorted(answers) == [1, 2] and answers[2]["result"]["isError"] is False
    assert_quiet(stderr)
    assert "stopping on SIGINT" in stderr


def test_sigint_drains_an_http_server_with_a_call_in_flight_and_exits_0(sandbox: SandboxGateway) -> None:
    with held(sandbox) as gateway:
        proc = run_cli(["--http", "0"], {"FAIRWINS_API_URL": gateway.url, "FAIRWINS_MCP_TIMEOUT": "60"})
        head: list[str] = []
        try:
            url = wait_for_url(proc, head)
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            assert proc.stderr is not None
            watch = Lines()
            reader = threading.Thread(target=watch.read, args=(proc.stderr,), daemon=True)
            reader.start()
            answers: list[tuple[int, bytes]] = []

            def call() -> None:
                with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
                    body = json.dumps(STATUS_CALL).encode()
                    sock.sendall(
                        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        b"Accept: application/json, text/event-stream\r\nConnection: close\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                    )
                    chunks = []
                    while chunk := sock.recv(65536):
                        chunks.append(chunk)
                    reply = b"".join(chunks)
                    answers.append((int(reply.split(b" ", 2)[1]), reply.split(b"\r\n\r\n", 1)[1]))

            caller = threading.Thread(target=call)
            caller.start()
            assert gateway.arrived.wait(WAIT)
            proc.send_signal(signal.SIGINT)
            watch.wait_for("stopping: no new connections")  # draining, the call still held
            gateway.release.set()
            caller.join(WAIT)
            assert proc.wait(WAIT) == 0, watch.text
            reader.join(WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(WAIT)
    stderr = "".join(head) + watch.text
    record_output("http process stopped by SIGINT", stderr)
    ((status, body),) = answers
    assert status == 200 and json.loads(body)["result"]["isError"] is False
    assert_quiet(stderr)
    assert "stopped: all 1 requests in flight at the signal were answered" in stderr


def wait_gone(pid: int) -> None:
    """Until process `pid` (not our child) has ended, waited on as an event (a pidfd), with a timeout."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already gone
    try:
        readable, _, _ = select.select([fd], [], [], WAIT)
        assert readable, f"process {pid} still running {WAIT} s after Claude Code was done with it"
    finally:
        os.close(fd)


@NODE_TOOLS
def test_claude_code_stops_the_stdio_server_with_sigint_and_it_leaves_quietly(
    tmp_path: pathlib.Path, sandbox: SandboxGateway
) -> None:
    home, project = tmp_path / "home", tmp_path / "home" / "project"
    project.mkdir(parents=True)
    pid_file, log_file = tmp_path / "server.pid", tmp_path / "server.log"
    # The server exactly as Claude Code starts it, its stderr kept in a file (Claude Code keeps none
    # without --debug); `exec`, so the signal Claude Code sends reaches the server itself.
    pid, python, log = (shlex.quote(str(x)) for x in (pid_file, sys.executable, log_file))
    script = f"echo $$ > {pid}; exec {python} -m mcp_server 2>> {log}"
    entry = {"type": "stdio", "command": "/bin/sh", "args": ["-c", script], "env": {"FAIRWINS_API_URL": sandbox.url}}
    env = scratch_env(home, **QUIET_CLAUDE)
    (claude,) = tool("claude-code")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [claude, *args], cwd=project, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
        )
        record_output(f"claude {' '.join(args[:2])}", done.stdout + done.stderr)
        return done

    added = run("mcp", "add-json", "fairwins", json.dumps(entry))
    assert added.returncode == 0, added.stdout + added.stderr
    listing = run("mcp", "list")  # the health check: starts the server, initializes, lists, stops it
    assert listing.returncode == 0 and connected(listing.stdout), listing.stdout + listing.stderr
    wait_gone(int(pid_file.read_text()))
    stderr = log_file.read_text()
    record_output("stdio server run by claude mcp list", stderr)
    assert "tools/list outcome=result" in stderr  # it was asked, and answered
    assert_quiet(stderr)
    assert "stopping on SIGINT" in stderr and "stopped: every request read before SIGINT was answered" in stderr
