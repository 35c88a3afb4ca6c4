"""The shared runner: processes, sessions, the HTTP client, the load loop, deadlines and statistics.

Every benchmark in bench/ builds on these (bench.run's cold start, stdio, https and throughput
modules, and bench.slow, bench.load, bench.waiting, bench.batch_memory). What it offers:

    errors        BenchError (a server could not be measured), BenchTimeout (the global limit ran out)
    time          Deadline: the global time limit; every wait is bounded by it
    statistics    percentile (nearest rank), latency_summary (count, p50/p90/p99, max, mean in ms)
    /proc         process_tree, tree_fields, tree_mib, rss_mib, cpu_ms: summed over a process tree
    processes     child_env, spawn, stop, stop_all, StderrDrain, start_http (a server on --http 0)
    the stub      StubProcess: bench.stub_gateway in its own process (--tls, --status-bytes)
    sandbox       plain_env, wait_for_line, start_sandbox_gateway, SANDBOX_TOKEN: tests.sandbox_gateway
    stdio         LineReader, StdioSession, initialize_params, call_template, CALL_WAGERS,
                  LIST_TOOLS, PING, expect_result, expect_ok, expect_tool_ok
    HTTP          HttpConn (raw keep-alive client), mcp_post, direct_get, ok_direct, ok_tool_call
    load          LoadResult, run_load: N closed-loop clients for a time, warm-up not counted
    servers       our_python, our_command, compile_ours, sdk_command, ts_command: the commands
                  for ours, the official Python SDK server and the official TypeScript SDK server
    reporting     progress (a line on stderr), loadavg, rounded (floats for the JSON results)
    constants     REPO, PROTOCOL_VERSION, REQUEST_TIMEOUT_S, START_TIMEOUT_S, SANDBOX_START_TIMEOUT_S,
                  TS_SERVER, TS_SDK_PREFIX

Standard library only; the SDKs are only ever run as separate processes.
"""

from __future__ import annotations

import collections
import json
import math
import os
import re
import selectors
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench.stub_gateway import BENCH_TOKEN, WAGERS_BODY

REPO = Path(__file__).resolve().parent.parent
PROTOCOL_VERSION = "2025-06-18"
URL_LINE = re.compile(rb"http://127\.0\.0\.1:(\d+)/mcp")
REQUEST_TIMEOUT_S = 10.0
START_TIMEOUT_S = 10.0

TS_SERVER = REPO / "bench" / "ts_sdk_server.mjs"
# Where `make bench-compare` installs the pinned SDK (the Makefile's TS_SDK_PREFIX, exported).
TS_SDK_PREFIX = Path(os.environ.get("TS_SDK_PREFIX") or REPO / ".tools" / "ts-sdk")

CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A server could not be measured (did not start, answered wrongly, timed out)."""


class BenchTimeout(BenchError):
    """The global time limit ran out."""


# ---------------------------------------------------------------------------------------------
# time, statistics, /proc


class Deadline:
    """The global time limit; every wait is bounded by it."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def check(self) -> None:
        if self.remaining() <= 0:
            raise BenchTimeout("global time limit reached (--time-limit)")

    def bound(self, seconds: float) -> float:
        """`seconds`, cut to what is left; raises when nothing is."""
        self.check()
        return min(seconds, self.remaining())


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def latency_summary(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)
    ms = [v / 1e6 for v in ordered]
    return {
        "count": len(ms),
        "p50_ms": percentile(ms, 50),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
        "max_ms": ms[-1] if ms else math.nan,
        "mean_ms": statistics.fmean(ms) if ms else math.nan,
    }


def process_tree(pid: int) -> list[int]:
    """`pid` and its live descendants (from /proc/<pid>/task/*/children)."""
    seen: list[int] = []
    todo = [pid]
    while todo and len(seen) < 1000:
        current = todo.pop()
        if current in seen:
            continue
        seen.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{current}/task/{tid}/children") as fh:
                    todo.extend(int(x) for x in fh.read().split())
            except OSError:
                pass
    return seen


def tree_fields(pid: int, name: str, keys: Sequence[str]) -> dict[str, float]:
    """The number on each `key: N` line of /proc/<pid>/`name`, summed over `pid` and its children."""
    total = dict.fromkeys(keys, 0.0)
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/{name}") as fh:
                for line in fh:
                    key, _, value = line.partition(":")
                    if key in total:
                        total[key] += int(value.split()[0])
        except OSError:
            pass
    return total


def tree_mib(pid: int, name: str, key: str) -> float:
    """A `key: N kB` line of /proc/<pid>/`name` (`key` with its colon), summed over `pid` and its children, in MiB."""
    field_name = key.removesuffix(":")
    return tree_fields(pid, name, (field_name,))[field_name] / 1024.0


def rss_mib(pid: int) -> float:
    """Resident memory (VmRSS) of `pid` and its children, in MiB."""
    return tree_mib(pid, "status", "VmRSS:")


def cpu_ms(pid: int) -> float:
    """utime+stime (and reaped children's) of `pid` and its live children, in ms."""
    user, system = cpu_split_ms(pid)
    return user + system


def cpu_split_ms(pid: int) -> tuple[float, float]:
    """`cpu_ms` as (user, system): the interpreter's own work apart from the kernel's on its behalf."""
    user = system = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is field 3 (state): utime, stime, cutime, cstime are fields 14-17.
        user += int(fields[11]) + int(fields[13])
        system += int(fields[12]) + int(fields[14])
    return user * 1000.0 / CLK_TCK, system * 1000.0 / CLK_TCK


# ---------------------------------------------------------------------------------------------
# processes


_LIVE: list[subprocess.Popen[bytes]] = []


def child_env(api_url: str, token: str | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("FAIRWINS_") and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["FAIRWINS_API_URL"] = api_url
    if token is not None:
        env["FAIRWINS_API_TOKEN"] = token
    return env


def spawn(
    cmd: Sequence[str], env: dict[str, str], stderr: IO[bytes] | int, stdout: int = subprocess.PIPE
) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        list(cmd),
        stdin=subprocess.PIPE,
        stdout=stdout,
        stderr=stderr,
        cwd=REPO,
        env=env,
        bufsize=0,
        start_new_session=True,  # its own process group, so its children go with it
    )
    _LIVE.append(proc)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Close stdin, give it 2 s to exit, then SIGTERM its group, then SIGKILL."""
    try:
        if proc.poll() is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
                    try:
                        os.killpg(proc.pid, sig)
                    except (ProcessLookupError, PermissionError):
                        break
                    try:
                        proc.wait(timeout=wait)
                        break
                    except subprocess.TimeoutExpired:
                        continue
        # The group may still hold children of an exited leader.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    finally:
        for stream in (proc.stdout, proc.stderr, proc.stdin):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if proc in _LIVE:
            _LIVE.remove(proc)


def stop_all() -> None:
    """Stop every process `spawn` started that is still running, the last started first."""
    for proc in list(reversed(_LIVE)):
        stop(proc)


def _tail(path: str, limit: int = 1500) -> str:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", "replace").strip()


class StderrDrain:
    """Reads a child's stderr on a thread (so the pipe never fills), keeps the tail, finds the URL."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._fd = stream.fileno()
        self._head = bytearray()  # the first 64 KiB, searched for the URL line
        self._tail: collections.deque[bytes] = collections.deque(maxlen=8)
        self.port: int | None = None
        self.found = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="stderr-drain")
        self._thread.start()

    def _run(self) -> None:
        try:
            while chunk := os.read(self._fd, 1 << 16):
                self._tail.append(chunk)
                if self.port is None and len(self._head) < 1 << 16:
                    self._head += chunk
                    match = URL_LINE.search(self._head)
                    if match:
                        self.port = int(match.group(1))
                        self.found.set()
        except OSError:
            pass
        finally:
            self.found.set()

    def tail(self) -> str:
        return b"".join(self._tail).decode("utf-8", "replace").strip()[-1500:]


def start_http(
    cmd: Sequence[str], env: dict[str, str], deadline: Deadline, stdout: int = subprocess.PIPE
) -> tuple[subprocess.Popen[bytes], StderrDrain]:
    """`cmd --http 0 --host 127.0.0.1`, its stderr drained, once its URL line came or START_TIMEOUT_S
    passed (then `drain.port` is None: the caller says what failed). Stopped if the wait is cut short."""
    proc = spawn([*cmd, "--http", "0", "--host", "127.0.0.1"], env, stderr=subprocess.PIPE, stdout=stdout)
    assert proc.stderr is not None
    drain = StderrDrain(proc.stderr)
    try:
        drain.found.wait(deadline.bound(START_TIMEOUT_S))
    except BaseException:
        stop(proc)
        raise
    return proc, drain


# ---------------------------------------------------------------------------------------------
# the stub


class StubProcess:
    """bench.stub_gateway in its own process, so its CPU is not the load client's."""

    def __init__(self, delay_ms: float, deadline: Deadline, tls: bool = False, status_bytes: int = 0) -> None:
        cmd = [sys.executable, "-m", "bench.stub_gateway", "--port", "0", "--delay-ms", str(delay_ms)]
        if status_bytes:
            cmd += ["--status-bytes", str(status_bytes)]
        self.proc = spawn([*cmd, "--tls"] if tls else cmd, child_env("", None), stderr=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        reader = LineReader(self.proc.stdout.fileno())
        line = reader.readline(time.perf_counter_ns() + int(deadline.bound(START_TIMEOUT_S) * 1e9))
        match = re.search(rb"(https?)://127\.0\.0\.1:(\d+)", line)
        if not match:
            raise BenchError(f"the stub gateway did not start: {line!r}")
        self.port = int(match.group(2))
        self.url = f"{match.group(1).decode()}://127.0.0.1:{self.port}"

    def close(self) -> None:
        stop(self.proc)


# ---------------------------------------------------------------------------------------------
# stdio driver


class LineReader:
    """Newline framing over a raw fd, every read bounded by a deadline (perf_counter_ns)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()
        self.sel = selectors.DefaultSelector()
        self.sel.register(fd, selectors.EVENT_READ)

    def readline(self, until_ns: int) -> bytes:
        searched = 0  # a line of megabytes arrives in many reads: each byte is searched once
        while True:
            i = self.buf.find(b"\n", searched)
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 1]
                searched = 0
                if line.strip():
                    return line
                continue
            searched = len(self.buf)
            left = (until_ns - time.perf_counter_ns()) / 1e9
            if left <= 0:
                raise BenchError("no answer in time")
            if not self.sel.select(left):
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise BenchError("the server closed stdout")
            self.buf += chunk

    def close(self) -> None:
        self.sel.close()


class StdioSession:
    """One server process spoken to over stdin/stdout, one request at a time."""

    def __init__(self, label: str, cmd: Sequence[str], env: dict[str, str]) -> None:
        self.label = label
        self._stderr = tempfile.NamedTemporaryFile(prefix="bench-stderr-", delete=False)
        self.t_spawn_ns = time.perf_counter_ns()
        self.proc = spawn(cmd, env, stderr=self._stderr)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin.fileno()
        self.reader = LineReader(self.proc.stdout.fileno())
        self.next_id = 1

    @property
    def pid(self) -> int:
        return self.proc.pid

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._in, view)
            view = view[n:]

    def notify(self, method: str) -> None:
        self.write(json.dumps({"jsonrpc": "2.0", "method": method}, separators=(",", ":")).encode() + b"\n")

    def request(self, method: str, params: dict[str, Any] | None = None) -> tuple[dict[str, Any], int]:
        """Send one request; return (its response, round trip in ns)."""
        rid = self.next_id
        self.next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        data = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
        t0 = time.perf_counter_ns()
        self.write(data)
        return self.await_answer(rid, t0)

    def request_raw(self, template: bytes) -> tuple[dict[str, Any], int]:
        """Like `request`, from a pre-encoded message with a `%d` where the id goes."""
        rid = self.next_id
        self.next_id += 1
        data = template % rid
        t0 = time.perf_counter_ns()
        self.write(data)
        return self.await_answer(rid, t0)

    def await_answer(self, rid: int, t0: int) -> tuple[dict[str, Any], int]:
        until = t0 + int(REQUEST_TIMEOUT_S * 1e9)
        while True:
            try:
                line = self.reader.readline(until)
            except BenchError as exc:
                raise BenchError(f"{self.label} (stdio): {exc}; stderr: {self.stderr_tail()!r}") from None
            t1 = time.perf_counter_ns()
            try:
                msg = json.loads(line)
            except ValueError:
                raise BenchError(f"{self.label} (stdio): not JSON on stdout: {line[:200]!r}") from None
            # Notifications (progress, log messages) may come first: skip anything that is not ours.
            if isinstance(msg, dict) and msg.get("id") == rid and ("result" in msg or "error" in msg):
                return msg, t1 - t0

    def stderr_tail(self) -> str:
        self._stderr.flush()
        return _tail(self._stderr.name)

    def close(self) -> None:
        try:
            stop(self.proc)
        finally:
            self.reader.close()
            self._stderr.close()
            try:
                os.unlink(self._stderr.name)
            except OSError:
                pass


def initialize_params() -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "fairwins-bench", "version": "1"},
    }


def call_template(name: str) -> bytes:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": {"name": name, "arguments": {}}},
        separators=(",", ":"),
    )
    return body.replace('"id":0', '"id":%d', 1).encode() + b"\n"


CALL_WAGERS = call_template("get_wagers")
LIST_TOOLS = b'{"jsonrpc":"2.0","id":%d,"method":"tools/list"}\n'
PING = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n'


def expect_result(label: str, what: str, msg: dict[str, Any]) -> dict[str, Any]:
    result = msg.get("result")
    if not isinstance(result, dict):
        raise BenchError(f"{label}: {what} answered an error: {json.dumps(msg)[:300]}")
    return result


def expect_ok(label: str, what: str, msg: dict[str, Any]) -> None:
    expect_result(label, what, msg)


def expect_tool_ok(label: str, what: str, msg: dict[str, Any]) -> None:
    result = expect_result(label, what, msg)
    if result.get("isError") or not (result.get("structuredContent") or result.get("content")):
        raise BenchError(f"{label}: {what} was not a successful tool result: {json.dumps(result)[:300]}")


# ---------------------------------------------------------------------------------------------
# HTTP client (raw sockets, keep-alive) and load generator


class HttpConn:
    """A keep-alive HTTP/1.1 connection that sends prepared bytes and reads one response."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock: socket.socket | None = None
        self.buf = bytearray()

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=REQUEST_TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.buf.clear()
        return sock

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def _fill(self, sock: socket.socket) -> None:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed by the server")
        self.buf += chunk

    def _exact(self, sock: socket.socket, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill(sock)
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def _line(self, sock: socket.socket) -> bytes:
        while (i := self.buf.find(b"\r\n")) < 0:
            self._fill(sock)
        line = bytes(self.buf[:i])
        del self.buf[: i + 2]
        return line

    def roundtrip(self, data: bytes) -> tuple[int, bytes]:
        sock = self.sock or self._connect()
        try:
            sock.sendall(data)
            while (end := self.buf.find(b"\r\n\r\n")) < 0:
                self._fill(sock)
            head = bytes(self.buf[:end])
            del self.buf[: end + 4]
            lines = head.split(b"\r\n")
            status = int(lines[0].split(b" ", 2)[1])
            length = -1
            chunked = close = False
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"transfer-encoding":
                    chunked = b"chunked" in value.lower()
                elif name == b"connection":
                    close = value.strip().lower() == b"close"
            if chunked:
                parts = []
                while (size := int(self._line(sock).split(b";")[0], 16)) > 0:
                    parts.append(self._exact(sock, size))
                    self._line(sock)
                while self._line(sock):  # trailers, then the empty line
                    pass
                body = b"".join(parts)
            elif length >= 0:
                body = self._exact(sock, length)
            else:
                while True:
                    try:
                        self._fill(sock)
                    except ConnectionError:
                        break
                body, close = bytes(self.buf), True
                self.buf.clear()
        except BaseException:
            self.close()
            raise
        if close:
            self.close()
        return status, body


def mcp_post(port: int, payload: dict[str, Any], token: str | None = BENCH_TOKEN) -> bytes:
    body = json.dumps(payload, separators=(",", ":")).encode()
    head = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"MCP-Protocol-Version: {PROTOCOL_VERSION}",
    ]
    if token is not None:
        head.append(f"Authorization: Bearer {token}")
    head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def direct_get(port: int) -> bytes:
    return (
        f"GET /v1/member/wagers HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {BENCH_TOKEN}\r\nAccept: application/json\r\n\r\n"
    ).encode()


def ok_direct(status: int, body: bytes) -> bool:
    return status == 200 and body == WAGERS_BODY


def ok_tool_call(status: int, body: bytes) -> bool:
    if status != 200:
        return False
    try:
        msg = json.loads(body)
    except ValueError:
        return False
    result = msg.get("result") if isinstance(msg, dict) else None
    return (
        isinstance(result, dict)
        and not result.get("isError")
        and bool(result.get("structuredContent") or result.get("content"))
    )


@dataclass
class LoadResult:
    clients: int
    count: int = 0
    errors: int = 0
    elapsed_s: float = 0.0
    latencies_ns: list[int] = field(default_factory=list)
    first_error: str = ""
    cpu_ms: float = math.nan

    def summary(self) -> dict[str, Any]:
        lat = latency_summary(self.latencies_ns)
        return {
            "cpu_per_call_ms": self.cpu_ms / self.count if self.count else math.nan,
            "clients": self.clients,
            "requests": self.count,
            "errors": self.errors,
            "first_error": self.first_error,
            "elapsed_s": self.elapsed_s,
            "rps": self.count / self.elapsed_s if self.elapsed_s > 0 else 0.0,
            "p50_ms": lat["p50_ms"],
            "p90_ms": lat["p90_ms"],
            "p99_ms": lat["p99_ms"],
            "max_ms": lat["max_ms"],
        }


def run_load(
    port: int,
    request: bytes,
    ok: Callable[[int, bytes], bool],
    clients: int,
    warmup_s: float,
    duration_s: float,
    deadline: Deadline,
    sample_cpu: Callable[[], float] | None = None,
    max_per_client: int = 1_000_000,
) -> LoadResult:
    """`clients` threads, one keep-alive connection each, closed loop; warm-up not counted."""
    duration_s = deadline.bound(duration_s + warmup_s) - warmup_s
    if duration_s <= 0:
        raise BenchTimeout("global time limit reached (--time-limit)")
    result = LoadResult(clients)
    lock = threading.Lock()
    times: dict[str, int] = {}
    ends: list[int] = []

    def set_times() -> None:
        # Run once, by the last party to arrive: every connection is open by then.
        times["warm_end"] = time.perf_counter_ns() + int(warmup_s * 1e9)
        times["stop"] = times["warm_end"] + int(duration_s * 1e9)

    ready = threading.Barrier(clients + 1, action=set_times, timeout=START_TIMEOUT_S)

    def client() -> None:
        conn = HttpConn(port)
        local: list[int] = []
        errors = 0
        first_error = ""
        last_end = 0
        try:
            try:
                conn._connect()
            except OSError as exc:
                errors, first_error = 1, f"connect: {exc}"
            ready.wait()
            warm_end, stop_at = times["warm_end"], times["stop"]
            for _ in range(max_per_client):
                t0 = time.perf_counter_ns()
                if t0 >= stop_at or errors > 50:
                    break
                try:
                    status, body = conn.roundtrip(request)
                    good = ok(status, body)
                    if not good and not first_error:
                        first_error = f"HTTP {status}: {body[:200]!r}"
                except (OSError, ValueError, IndexError) as exc:
                    good = False
                    if not first_error:
                        first_error = f"{type(exc).__name__}: {exc}"
                t1 = time.perf_counter_ns()
                if t0 >= warm_end:
                    if good:
                        local.append(t1 - t0)
                        last_end = t1
                    else:
                        errors += 1
        finally:
            conn.close()
            with lock:
                result.latencies_ns.extend(local)
                result.errors += errors
                if first_error and not result.first_error:
                    result.first_error = first_error
                ends.append(last_end)

    threads = [threading.Thread(target=client, daemon=True, name=f"load-{i}") for i in range(clients)]
    for t in threads:
        t.start()
    ready.wait()
    if sample_cpu is not None:
        # The server's CPU over the measured window only (requests started in it are counted).
        time.sleep(max(0.0, (times["warm_end"] - time.perf_counter_ns()) / 1e9))
        cpu0 = sample_cpu()
        time.sleep(max(0.0, (times["stop"] - time.perf_counter_ns()) / 1e9))
        result.cpu_ms = sample_cpu() - cpu0
    for t in threads:
        t.join(timeout=max(1.0, deadline.remaining()) + REQUEST_TIMEOUT_S)
    result.count = len(result.latencies_ns)
    end = max(ends, default=0)
    result.elapsed_s = max(0.0, (end - times["warm_end"]) / 1e9)
    return result


# ---------------------------------------------------------------------------------------------
# the sandbox gateway (tests.sandbox_gateway): a realistic delay before every answer


SANDBOX_TOKEN = "fw1.sandbox-member-a-7f3k"  # the sandbox's member A (tests/sandbox_gateway.py)
SANDBOX_START_TIMEOUT_S = 15.0


def plain_env(**extra: str) -> dict[str, str]:
    """This environment without FAIRWINS_* settings, the checkout importable, output unbuffered; plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRWINS_")}
    env["PYTHONPATH"] = str(REPO)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def wait_for_line(stream: IO[bytes], pattern: re.Pattern[bytes], what: str) -> re.Match[bytes]:
    """The first line of `stream` matching `pattern`; exits, quoting what came, if none in SANDBOX_START_TIMEOUT_S."""
    deadline = time.monotonic() + SANDBOX_START_TIMEOUT_S
    seen = []
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        match = pattern.search(line)
        if match:
            return match
    raise SystemExit(f"{what} did not start: {b''.join(seen).decode(errors='replace')[-2000:]}")


def start_sandbox_gateway(delay: float) -> tuple[subprocess.Popen[bytes], str]:
    """tests.sandbox_gateway answering after `delay` seconds, its stdout drained: (the process, its URL)."""
    gateway = subprocess.Popen(
        [sys.executable, "-m", "tests.sandbox_gateway", "--port", "0", "--delay", str(delay)],
        cwd=REPO, env=plain_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    stdout = gateway.stdout
    assert stdout is not None
    try:
        url = wait_for_line(stdout, re.compile(rb"sandbox gateway on (\S+)"), "the sandbox gateway").group(1).decode()
    except BaseException:
        gateway.kill()
        gateway.wait(10)
        raise
    threading.Thread(target=lambda: [None for _ in stdout], daemon=True).start()
    return gateway, url


# ---------------------------------------------------------------------------------------------
# the servers compared: ours, the official Python SDK's, the official TypeScript SDK's


def our_python(ours_python: str | None, compare: str | None) -> str:
    """The interpreter for our server: `ours_python` if given; else the SDK's (`compare`) when it can be run.

    Ours runs stdlib-only, so any 3.11+ interpreter serves; by default the SDK's when comparing,
    because .pth files in one interpreter's site-packages (not in a venv's) change its start time and
    RSS, and the ratio should compare the servers, not the interpreters' site setup."""
    if ours_python:
        return str(Path(ours_python).expanduser())
    if compare:
        candidate = Path(compare).expanduser()
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return sys.executable


def our_command(server_cmd: str | None, python: str) -> list[str]:
    """Our server's command: `server_cmd` split as a shell would, else `python -m mcp_server`."""
    if server_cmd:
        return shlex.split(server_cmd)
    if not (REPO / "mcp_server" / "__main__.py").is_file():
        raise BenchError("mcp_server/__main__.py not found: nothing to run (use --server-cmd)")
    return [python, "-m", "mcp_server"]


def compile_ours(python: str) -> None:
    """Bytecode for mcp_server, as `pip install` writes it for an installed package (and for the SDK).

    A checkout has none for a file just edited, and none at all under PYTHONDONTWRITEBYTECODE: every
    cold start would then time the compiler, not the server.
    """
    subprocess.run(
        [python, "-m", "compileall", "-q", str(REPO / "mcp_server")],
        cwd=REPO,
        capture_output=True,
        timeout=120,
        check=False,
    )


def sdk_command(python: str) -> tuple[list[str], str]:
    """bench.sdk_server under `python` (which must import `mcp`), and the SDK's version."""
    exe = str(Path(python).expanduser())
    probe = subprocess.run(
        [exe, "-c", "import importlib.metadata as m, mcp; print(m.version('mcp'))"],
        capture_output=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:
        raise BenchError(f"--compare {python}: cannot import mcp: {probe.stderr.decode(errors='replace')[-300:]}")
    return [exe, "-m", "bench.sdk_server"], probe.stdout.decode().strip()


def ts_command(node: str) -> tuple[list[str], str]:
    """bench/ts_sdk_server.mjs under `node`, and the SDK's version with Node's."""
    exe = str(Path(node).expanduser())
    manifest = TS_SDK_PREFIX / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
    try:
        version = str(json.loads(manifest.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError) as exc:
        raise BenchError(f"--compare-ts: the TypeScript SDK is not installed in {TS_SDK_PREFIX} ({exc})") from None
    probe = subprocess.run([exe, "--version"], capture_output=True, cwd=REPO, timeout=60, check=False)
    if probe.returncode != 0:
        raise BenchError(f"--compare-ts {node}: cannot run node: {probe.stderr.decode(errors='replace')[-300:]}")
    return [exe, str(TS_SERVER)], f"{version} on Node {probe.stdout.decode().strip()}"


# ---------------------------------------------------------------------------------------------
# reporting


def progress(text: str) -> None:
    """One line on stderr: what the run is doing now (stdout carries the table)."""
    sys.stderr.write(f"bench: {text}\n")
    sys.stderr.flush()


def loadavg() -> float:
    """The 1-minute load average, NaN where /proc/loadavg cannot be read."""
    try:
        with open("/proc/loadavg") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return math.nan


def rounded(obj: Any) -> Any:
    """`obj` with every float rounded to 4 places and NaN as None, for the JSON results."""
    if isinstance(obj, float):
        return None if math.isnan(obj) else round(obj, 4)
    if isinstance(obj, dict):
        return {k: rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [rounded(v) for v in obj]
    return obj
