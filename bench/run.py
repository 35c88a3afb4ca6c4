"""The benchmark: cold start, memory, stdio latency, HTTP throughput and CPU per call, against a stub.

    python3 -m bench.run                                 our server only
    python3 -m bench.run --compare .venv-bench/bin/python  side by side with the official Python SDK
    python3 -m bench.run --compare .venv-bench/bin/python --compare-ts .tools/node22/.../bin/node
                                                         ... and the official TypeScript SDK
    python3 -m bench.run --quick --no-compare            a smoke run in seconds

Everything runs on 127.0.0.1: a gateway stub (bench.stub_gateway, its own process), our server
(`python3 -m mcp_server`, or --server-cmd), with --compare bench.sdk_server under the given
interpreter, and with --compare-ts bench/ts_sdk_server.mjs under the given Node. The direct GET
to the stub is measured with the same client as the floor. One table on stdout (with PASS/MISS
per target), the full figures as JSON (--json).

Standard library only; the SDKs are only ever run as separate processes.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import platform
import re
import selectors
import shlex
import signal
import socket
import ssl
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
from bench.stub_gateway import CA_FILE as TLS_CA_FILE

REPO = Path(__file__).resolve().parent.parent
DEFAULT_JSON = REPO / "bench" / "results" / "latest.json"
PROTOCOL_VERSION = "2025-06-18"
HTTP_LEVELS = (1, 8, 32)
URL_LINE = re.compile(rb"http://127\.0\.0\.1:(\d+)/mcp")
REQUEST_TIMEOUT_S = 10.0
START_TIMEOUT_S = 10.0

TS_SERVER = REPO / "bench" / "ts_sdk_server.mjs"
TS_SDK_PREFIX = REPO / ".tools" / "ts-sdk"  # where `make bench-compare` installs the pinned SDK

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


def _process_tree(pid: int) -> list[int]:
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


def tree_mib(pid: int, name: str, key: str) -> float:
    """A `key: N kB` line of /proc/<pid>/`name`, summed over `pid` and its children, in MiB."""
    total_kib = 0
    for p in _process_tree(pid):
        try:
            with open(f"/proc/{p}/{name}") as fh:
                for line in fh:
                    if line.startswith(key):
                        total_kib += int(line.split()[1])
                        break
        except OSError:
            pass
    return total_kib / 1024.0


def rss_mib(pid: int) -> float:
    """Resident memory (VmRSS) of `pid` and its children, in MiB."""
    return tree_mib(pid, "status", "VmRSS:")


def cpu_ms(pid: int) -> float:
    """utime+stime (and reaped children's) of `pid` and its live children, in ms."""
    ticks = 0
    for p in _process_tree(pid):
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is field 3 (state): utime, stime, cutime, cstime are fields 14-17.
        ticks += sum(int(x) for x in fields[11:15])
    return ticks * 1000.0 / CLK_TCK


# ---------------------------------------------------------------------------------------------
# processes


_LIVE: list[subprocess.Popen[bytes]] = []


def _child_env(api_url: str, token: str | None) -> dict[str, str]:
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


# ---------------------------------------------------------------------------------------------
# the stub


class StubProcess:
    """bench.stub_gateway in its own process, so its CPU is not the load client's."""

    def __init__(self, delay_ms: float, deadline: Deadline, tls: bool = False) -> None:
        cmd = [sys.executable, "-m", "bench.stub_gateway", "--port", "0", "--delay-ms", str(delay_ms)]
        self.proc = spawn([*cmd, "--tls"] if tls else cmd, _child_env("", None), stderr=subprocess.DEVNULL)
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
        return self._await(rid, t0)

    def request_raw(self, template: bytes) -> tuple[dict[str, Any], int]:
        """Like `request`, from a pre-encoded message with a `%d` where the id goes."""
        rid = self.next_id
        self.next_id += 1
        data = template % rid
        t0 = time.perf_counter_ns()
        self.write(data)
        return self._await(rid, t0)

    def _await(self, rid: int, t0: int) -> tuple[dict[str, Any], int]:
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


def _initialize_params() -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "fairwins-bench", "version": "1"},
    }


def _call_template(name: str) -> bytes:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": {"name": name, "arguments": {}}},
        separators=(",", ":"),
    )
    return body.replace('"id":0', '"id":%d', 1).encode() + b"\n"


CALL_WAGERS = _call_template("get_wagers")
LIST_TOOLS = b'{"jsonrpc":"2.0","id":%d,"method":"tools/list"}\n'
PING = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n'


def _expect_result(label: str, what: str, msg: dict[str, Any]) -> dict[str, Any]:
    result = msg.get("result")
    if not isinstance(result, dict):
        raise BenchError(f"{label}: {what} answered an error: {json.dumps(msg)[:300]}")
    return result


def _expect_ok(label: str, what: str, msg: dict[str, Any]) -> None:
    _expect_result(label, what, msg)


def _expect_tool_ok(label: str, what: str, msg: dict[str, Any]) -> None:
    result = _expect_result(label, what, msg)
    if result.get("isError") or not (result.get("structuredContent") or result.get("content")):
        raise BenchError(f"{label}: {what} was not a successful tool result: {json.dumps(result)[:300]}")


def interpreter_startup(python: str, runs: int, deadline: Deadline) -> dict[str, Any]:
    """The floor under any Python server's cold start: spawn → exit of `python -c pass`, and its RSS."""
    samples: list[float] = []
    rss = math.nan
    code = "print(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])"
    for i in range(runs + 1):
        deadline.check()
        t0 = time.perf_counter_ns()
        done = subprocess.run(
            [python, "-c", code], cwd=REPO, capture_output=True, check=False, timeout=deadline.bound(START_TIMEOUT_S)
        )
        if i > 0:
            samples.append((time.perf_counter_ns() - t0) / 1e6)
        try:
            rss = int(done.stdout) / 1024.0
        except ValueError:
            pass
    return {"python_startup_ms": statistics.median(samples), "python_startup_ms_all": samples, "python_rss_mib": rss}


def cold_start_once(label: str, cmd: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """One spawn: (ms to `initialize` answered, ms to the first tools/call result)."""
    session = StdioSession(label, cmd, env)
    try:
        # Written at once: the pipe holds it until the server reads.
        session.write(
            json.dumps(
                {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": _initialize_params()},
                separators=(",", ":"),
            ).encode()
            + b"\n"
        )
        msg, _ = session._await(0, session.t_spawn_ns)
        t_init = time.perf_counter_ns()
        _expect_result(label, "initialize", msg)
        session.notify("notifications/initialized")
        msg, _ = session.request_raw(CALL_WAGERS)
        t_first = time.perf_counter_ns()
        _expect_tool_ok(label, "first tools/call get_wagers", msg)
        return (t_init - session.t_spawn_ns) / 1e6, (t_first - session.t_spawn_ns) / 1e6
    finally:
        session.close()


def measure_cold_starts(
    servers: list[tuple[str, list[str], dict[str, Any]]],
    env: dict[str, str],
    runs: int,
    deadline: Deadline,
    errors: list[str],
) -> None:
    """Cold starts, the servers taking turns (so background load falls on both alike);
    one unmeasured warm-up round first. Medians go into each server's dict."""
    samples: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label, _, _ in servers}
    failed: set[str] = set()
    for i in range(runs + 1):
        for label, cmd, _ in servers:
            if label in failed:
                continue
            deadline.check()
            try:
                init_ms, first_ms = cold_start_once(label, cmd, env)
            except BenchTimeout:
                raise
            except BenchError as exc:
                failed.add(label)
                errors.append(f"{label}: cold start: {exc}")
                continue
            if i > 0:
                samples[label][0].append(init_ms)
                samples[label][1].append(first_ms)
    for label, _, out in servers:
        init_all, first_all = samples[label]
        if label not in failed and init_all:
            out["cold_init_ms"] = statistics.median(init_all)
            out["cold_first_result_ms"] = statistics.median(first_all)
            out["cold_init_ms_all"] = init_all
            out["cold_first_result_ms_all"] = first_all
            # The first call alone: a connection to open (and, over https, ssl to load and a handshake).
            out["cold_first_call_ms"] = statistics.median(f - i for i, f in zip(init_all, first_all, strict=True))


def measure_stdio(
    label: str, cmd: Sequence[str], env: dict[str, str], calls: int, warmup: int, deadline: Deadline
) -> dict[str, Any]:
    """One long-lived session: RSS after start, N timed calls of each kind, CPU over the tools/call run."""
    session = StdioSession(label, cmd, env)
    out: dict[str, Any] = {}
    try:
        msg, _ = session.request("initialize", _initialize_params())
        _expect_result(label, "initialize", msg)
        session.notify("notifications/initialized")
        msg, _ = session.request_raw(PING)
        _expect_result(label, "ping", msg)
        out["rss_start_mib"] = rss_mib(session.pid)

        msg, _ = session.request_raw(LIST_TOOLS)
        names = {t.get("name") for t in _expect_result(label, "tools/list", msg).get("tools", [])}
        missing = {"get_wagers", "get_gateway_status"} - names
        if missing:
            raise BenchError(f"{label}: tools/list lacks {sorted(missing)}")
        msg, _ = session.request_raw(_call_template("get_gateway_status"))
        _expect_tool_ok(label, "tools/call get_gateway_status", msg)

        for template in (CALL_WAGERS, LIST_TOOLS, PING):
            for _ in range(warmup):
                msg, _ = session.request_raw(template)
            deadline.check()
        _expect_tool_ok(label, "tools/call get_wagers", session.request_raw(CALL_WAGERS)[0])

        def timed(template: bytes, check: Callable[[dict[str, Any]], None]) -> list[int]:
            samples: list[int] = []
            for i in range(calls):
                msg, ns = session.request_raw(template)
                if i % 100 == 0:
                    check(msg)
                    deadline.check()
                samples.append(ns)
            return samples

        cpu0 = cpu_ms(session.pid)
        call_ns = timed(CALL_WAGERS, lambda m: _expect_tool_ok(label, "tools/call get_wagers", m))
        cpu1 = cpu_ms(session.pid)
        out["rss_after_mib"] = rss_mib(session.pid)
        out["cpu_per_call_ms"] = (cpu1 - cpu0) / calls
        list_ns = timed(LIST_TOOLS, lambda m: _expect_ok(label, "tools/list", m))
        ping_ns = timed(PING, lambda m: _expect_ok(label, "ping", m))
        for key, samples in (("call", call_ns), ("list", list_ns), ("ping", ping_ns)):
            summary = latency_summary(samples)
            out[f"stdio_{key}_p50_ms"] = summary["p50_ms"]
            out[f"stdio_{key}_p99_ms"] = summary["p99_ms"]
            out[f"stdio_{key}"] = summary
        out["rss_end_mib"] = rss_mib(session.pid)
    finally:
        session.close()
    return out


def tls_trust_file() -> str:
    """A CA file with this machine's CA certificates and the test CA: the stub is trusted, and
    loading the file costs what loading a member's system CAs costs (most of a first https call)."""
    system = ssl.get_default_verify_paths().cafile
    with tempfile.NamedTemporaryFile("w", prefix="bench-cas-", suffix=".pem", delete=False) as out:
        if system:
            out.write(Path(system).read_text(encoding="ascii", errors="replace") + "\n")
        out.write(TLS_CA_FILE.read_text(encoding="ascii"))
    return out.name


def measure_https(
    cmd: Sequence[str], env: dict[str, str], calls: int, warmup: int, cold_runs: int, deadline: Deadline
) -> dict[str, Any]:
    """Our server over stdio against the stub served over TLS: the first call (ssl loaded, a
    handshake) after cold starts, then tools/call on the kept-alive TLS connection."""
    cold: dict[str, Any] = {}
    errors: list[str] = []
    measure_cold_starts([("ours (https)", list(cmd), cold)], env, cold_runs, deadline, errors)
    if errors:
        raise BenchError("; ".join(errors))
    stdio = measure_stdio("ours (https)", cmd, env, calls, warmup, deadline)
    return {
        "https_cold_first_call_ms": cold["cold_first_call_ms"],
        "https_cold_first_call_ms_all": [
            f - i for i, f in zip(cold["cold_init_ms_all"], cold["cold_first_result_ms_all"], strict=True)
        ],
        "https_stdio_call_p50_ms": stdio["stdio_call_p50_ms"],
        "https_stdio_call_p99_ms": stdio["stdio_call_p99_ms"],
        "https_cpu_per_call_ms": stdio["cpu_per_call_ms"],
        "https_stdio_call": stdio["stdio_call"],
    }


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


def sequential_direct(port: int, calls: int, warmup: int, deadline: Deadline) -> dict[str, Any]:
    """The floor for stdio: the same GET, made directly to the stub, one at a time."""
    conn = HttpConn(port)
    request = direct_get(port)
    samples: list[int] = []
    try:
        for i in range(warmup + calls):
            if i % 100 == 0:
                deadline.check()
            t0 = time.perf_counter_ns()
            status, body = conn.roundtrip(request)
            t1 = time.perf_counter_ns()
            if not ok_direct(status, body):
                raise BenchError(f"stub: unexpected answer HTTP {status}: {body[:200]!r}")
            if i >= warmup:
                samples.append(t1 - t0)
    finally:
        conn.close()
    summary = latency_summary(samples)
    return {"direct_p50_ms": summary["p50_ms"], "direct_p99_ms": summary["p99_ms"], "direct_sequential": summary}


def measure_http(
    label: str,
    cmd: Sequence[str],
    env: dict[str, str],
    warmup_s: float,
    duration_s: float,
    deadline: Deadline,
) -> dict[str, Any]:
    """The server on --http 0: throughput and latency at 1, 8, 32 clients; CPU per call at each."""
    assert isinstance(cmd, list)
    full = [*cmd, "--http", "0", "--host", "127.0.0.1"]
    proc = spawn(full, env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert proc.stderr is not None
    drain = StderrDrain(proc.stderr)
    out: dict[str, Any] = {}
    try:
        drain.found.wait(deadline.bound(START_TIMEOUT_S))
        if drain.port is None:
            raise BenchError(
                f"{label} (HTTP): no 'http://127.0.0.1:<port>/mcp' line on stderr "
                f"(exit code {proc.poll()}); stderr: {drain.tail()!r}"
            )
        port = drain.port
        # Ready when a tools/call answers well (the line may come just before accept starts).
        conn = HttpConn(port)
        probe = mcp_post(
            port, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}}
        )
        until = time.monotonic() + deadline.bound(START_TIMEOUT_S)
        last = ""
        try:
            while True:
                try:
                    status, body = conn.roundtrip(probe)
                    last = "" if ok_tool_call(status, body) else f"HTTP {status}: {body[:300]!r}"
                    break
                except OSError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                    if time.monotonic() > until or proc.poll() is not None:
                        break
                    time.sleep(0.02)
        finally:
            conn.close()
        if last:
            raise BenchError(f"{label} (HTTP): tools/call get_wagers did not succeed: {last}; stderr: {drain.tail()!r}")
        out["http_rss_start_mib"] = rss_mib(proc.pid)
        request = mcp_post(
            port, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}}
        )
        for clients in HTTP_LEVELS:
            pid = proc.pid
            load = run_load(
                port,
                request,
                ok_tool_call,
                clients,
                warmup_s,
                duration_s,
                deadline,
                sample_cpu=lambda pid=pid: cpu_ms(pid),
            )
            summary = load.summary()
            out[f"http_{clients}"] = summary
            out[f"http_{clients}_rps"] = summary["rps"]
            out[f"http_{clients}_p50_ms"] = summary["p50_ms"]
            out[f"http_{clients}_p99_ms"] = summary["p99_ms"]
            out[f"http_{clients}_cpu_per_call_ms"] = summary["cpu_per_call_ms"]
            out[f"http_{clients}_errors"] = summary["errors"]
            if proc.poll() is not None:
                raise BenchError(
                    f"{label} (HTTP): the server exited during the {clients}-client run; stderr: {drain.tail()!r}"
                )
        out["http_rss_end_mib"] = rss_mib(proc.pid)
    finally:
        stop(proc)
    return out


def measure_direct_http(port: int, warmup_s: float, duration_s: float, deadline: Deadline) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for clients in HTTP_LEVELS:
        summary = run_load(port, direct_get(port), ok_direct, clients, warmup_s, duration_s, deadline).summary()
        out[f"direct_{clients}"] = summary
        out[f"direct_{clients}_rps"] = summary["rps"]
        out[f"direct_{clients}_p50_ms"] = summary["p50_ms"]
        out[f"direct_{clients}_p99_ms"] = summary["p99_ms"]
    return out


# ---------------------------------------------------------------------------------------------
# the table


@dataclass(frozen=True)
class Target:
    id: str
    text: str
    metric: str
    kind: str  # "ratio_le" | "ratio_ge" | "abs_le" | "abs_ge"
    bound: float
    against: str = "sdk"  # the server a ratio is taken against: "sdk" (Python) or "ts"


TARGETS = (
    Target("cold_start", "≤ 1/8 SDK", "cold_init_ms", "ratio_le", 1 / 8),
    Target("memory", "≤ 1/3 SDK", "rss_after_mib", "ratio_le", 1 / 3),
    Target("stdio_overhead", "≤ 0.30 ms", "stdio_call_overhead_p50_ms", "abs_le", 0.30),
    Target("cpu_per_call", "≤ 1/3 SDK", "cpu_per_call_ms", "ratio_le", 1 / 3),
    Target("http8_vs_sdk", "≥ 3.5× SDK", "http_8_rps", "ratio_ge", 3.5),
    Target("http8_vs_ts", "≥ 1.5× TS SDK", "http_8_rps", "ratio_ge", 1.5, against="ts"),
)


@dataclass(frozen=True)
class Row:
    label: str
    metric: str
    fmt: str
    floor: str = ""  # the direct-to-stub metric shown beside it
    target: str = ""  # a Target.id
    ts: bool = True  # show the TypeScript SDK figure, when there is one
    ratio: bool = True  # show ours/SDK and ours/TS


def _rows(calls: int, cold_runs: int) -> list[Row]:
    rows = [
        Row(
            f"cold start → initialize, ms (median of {cold_runs})",
            "cold_init_ms",
            "{:.1f}",
            floor="python_startup_ms",
            target="cold_start",
        ),
        Row("cold start → first tool result, ms", "cold_first_result_ms", "{:.1f}"),
        Row("RSS after start, MiB", "rss_start_mib", "{:.1f}", floor="python_rss_mib"),
        Row(f"RSS after {calls} calls, MiB", "rss_after_mib", "{:.1f}", target="memory"),
        Row("stdio tools/call p50, ms", "stdio_call_p50_ms", "{:.3f}", floor="direct_p50_ms"),
        Row("stdio tools/call p99, ms", "stdio_call_p99_ms", "{:.3f}", floor="direct_p99_ms"),
        Row(
            "stdio tools/call p50 over direct GET, ms", "stdio_call_overhead_p50_ms", "{:.3f}", target="stdio_overhead"
        ),
        Row("stdio tools/list p50, ms", "stdio_list_p50_ms", "{:.3f}"),
        Row("stdio tools/list p99, ms", "stdio_list_p99_ms", "{:.3f}"),
        Row("stdio ping p50, ms", "stdio_ping_p50_ms", "{:.3f}"),
        Row("stdio ping p99, ms", "stdio_ping_p99_ms", "{:.3f}"),
        Row("server CPU per tools/call (stdio), ms", "cpu_per_call_ms", "{:.3f}", target="cpu_per_call"),
        Row("first tools/call after initialize (new connection), ms", "cold_first_call_ms", "{:.1f}"),
        Row("  the same over https (ssl, system CAs, handshake), ms", "https_cold_first_call_ms", "{:.1f}", ts=False),
        Row("stdio tools/call p50 over https (kept-alive TLS), ms", "https_stdio_call_p50_ms", "{:.3f}", ts=False),
        Row("stdio tools/call p99 over https (kept-alive TLS), ms", "https_stdio_call_p99_ms", "{:.3f}", ts=False),
        Row("server CPU per tools/call over https (stdio), ms", "https_cpu_per_call_ms", "{:.3f}", ts=False),
    ]
    for c in HTTP_LEVELS:
        noun = "client" if c == 1 else "clients"
        rows.append(
            Row(
                f"HTTP {c} {noun}, req/s",
                f"http_{c}_rps",
                "{:,.0f}",
                floor=f"direct_{c}_rps",
                target="http8_vs_sdk" if c == 8 else "",
            )
        )
        if c == 8:
            # The same figure again: one row per target, so each has its own PASS/MISS.
            rows.append(Row("HTTP 8 clients, req/s (vs TS SDK)", "http_8_rps", "{:,.0f}", target="http8_vs_ts"))
        rows.append(Row(f"HTTP {c} {noun}, p50 ms", f"http_{c}_p50_ms", "{:.3f}", floor=f"direct_{c}_p50_ms"))
        rows.append(Row(f"HTTP {c} {noun}, p99 ms", f"http_{c}_p99_ms", "{:.3f}", floor=f"direct_{c}_p99_ms"))
        rows.append(Row(f"HTTP {c} {noun}, server CPU per call, ms", f"http_{c}_cpu_per_call_ms", "{:.3f}"))
    return rows


def _num(d: dict[str, Any] | None, key: str) -> float | None:
    if not d:
        return None
    v = d.get(key)
    if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
        return float(v)
    return None


def evaluate(
    target: Target, ours: dict[str, Any] | None, sdk: dict[str, Any] | None, ts: dict[str, Any] | None
) -> dict[str, Any]:
    mine = _num(ours, target.metric)
    theirs = _num(ts if target.against == "ts" else sdk, target.metric)
    value: float | None
    if target.kind.startswith("ratio"):
        value = mine / theirs if mine is not None and theirs else None
    else:
        value = mine
    if value is None:
        verdict = "n/a"
    elif target.kind.endswith("_le"):
        verdict = "PASS" if value <= target.bound else "MISS"
    else:
        verdict = "PASS" if value >= target.bound else "MISS"
    return {
        "id": target.id,
        "target": target.text,
        "metric": target.metric,
        "kind": target.kind,
        "bound": target.bound,
        "value": value,
        "result": verdict,
    }


def render_table(
    rows: list[Row],
    ours: dict[str, Any] | None,
    sdk: dict[str, Any] | None,
    ts: dict[str, Any] | None,
    floor: dict[str, Any],
    verdicts: dict[str, dict[str, Any]],
) -> str:
    def cell(d: dict[str, Any] | None, key: str, fmt: str) -> str:
        v = _num(d, key)
        return "—" if v is None else fmt.format(v)

    def ratio(row: Row, other: dict[str, Any] | None) -> str:
        mine, theirs = _num(ours, row.metric), _num(other, row.metric)
        return f"{mine / theirs:.2f}" if row.ratio and mine is not None and theirs else "—"

    header = [
        "metric",
        "ours",
        "SDK" if sdk is not None else "SDK (off)",
        "TS SDK" if ts is not None else "TS SDK (off)",
        "direct",
        "ours/SDK",
        "ours/TS",
        "target",
        "result",
    ]
    body: list[list[str]] = []
    for row in rows:
        verdict = verdicts.get(row.target, {}) if row.target else {}
        body.append(
            [
                row.label,
                cell(ours, row.metric, row.fmt),
                cell(sdk, row.metric, row.fmt),
                cell(ts, row.metric, row.fmt),
                cell(floor, row.floor, row.fmt) if row.floor else "",
                ratio(row, sdk),
                ratio(row, ts),
                verdict.get("target", ""),
                verdict.get("result", ""),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    right = {1, 2, 3, 4, 5, 6}

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), sep, *(line(r) for r in body)])


# ---------------------------------------------------------------------------------------------
# main


def _round(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) else round(obj, 4)
    if isinstance(obj, dict):
        return {k: _round(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_round(v) for v in obj]
    return obj


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python3 -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small N, short runs: a smoke run in seconds")
    parser.add_argument(
        "--calls", type=int, default=None, metavar="N", help="timed stdio calls per kind (default 2000; quick 200)"
    )
    parser.add_argument(
        "--duration", type=float, default=None, metavar="S", help="seconds per HTTP load level (default 3; quick 0.5)"
    )
    parser.add_argument(
        "--cold-starts", type=int, default=None, metavar="R", help="measured cold starts (default 10; quick 3)"
    )
    parser.add_argument(
        "--compare", metavar="PYTHON", default=None, help="interpreter with `mcp` installed: run the SDK server too"
    )
    parser.add_argument(
        "--compare-ts",
        metavar="NODE",
        default=None,
        help="Node 22 binary: run bench/ts_sdk_server.mjs (the official TypeScript SDK, from .tools/ts-sdk) too",
    )
    parser.add_argument(
        "--http-only", action="store_true", help="skip cold starts and stdio: only the HTTP load (for repeated runs)"
    )
    parser.add_argument(
        "--no-compare", action="store_true", help="our server only, even with --compare or --compare-ts"
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        default=str(DEFAULT_JSON),
        help=f"where to write the results (default {DEFAULT_JSON.relative_to(REPO)})",
    )
    parser.add_argument(
        "--server-cmd",
        metavar="CMD",
        default=None,
        help="command for our server (default: PYTHON -m mcp_server); --http 0 --host 127.0.0.1 is appended for HTTP",
    )
    parser.add_argument(
        "--ours-python",
        metavar="PYTHON",
        default=None,
        help="interpreter for our server (default: the --compare one when comparing, so both "
        "servers start under the same interpreter and site setup; else this one)",
    )
    parser.add_argument(
        "--delay-ms", type=float, default=0.0, metavar="MS", help="fixed delay the stub adds to every answer"
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="S",
        help="global limit for the whole run (default 900; quick 60)",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 when any target is MISS")
    args = parser.parse_args(argv)
    quick = args.quick
    args.calls = args.calls if args.calls is not None else (200 if quick else 2000)
    args.duration = args.duration if args.duration is not None else (0.5 if quick else 3.0)
    args.cold_starts = args.cold_starts if args.cold_starts is not None else (3 if quick else 10)
    args.time_limit = args.time_limit if args.time_limit is not None else (60.0 if quick else 900.0)
    args.warmup_calls = 20 if quick else 200
    args.warmup_s = 0.2 if quick else 0.5
    if args.calls < 1 or args.duration <= 0 or args.cold_starts < 1 or args.time_limit <= 0:
        parser.error("--calls, --duration, --cold-starts and --time-limit must be positive")
    if args.no_compare:
        args.compare = args.compare_ts = None
    return args


def _our_python(args: argparse.Namespace) -> str:
    """Ours runs stdlib-only, so any 3.11+ interpreter serves; by default the SDK's when comparing,
    because .pth files in one interpreter's site-packages (not in a venv's) change its start time and
    RSS, and the ratio should compare the servers, not the interpreters' site setup."""
    if args.ours_python:
        return str(Path(args.ours_python).expanduser())
    if args.compare:
        candidate = Path(args.compare).expanduser()
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return sys.executable


def _our_cmd(args: argparse.Namespace) -> list[str]:
    if args.server_cmd:
        return shlex.split(args.server_cmd)
    if not (REPO / "mcp_server" / "__main__.py").is_file():
        raise BenchError("mcp_server/__main__.py not found: nothing to run (use --server-cmd)")
    return [_our_python(args), "-m", "mcp_server"]


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


def _sdk_cmd(python: str) -> tuple[list[str], str]:
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


def _ts_cmd(node: str) -> tuple[list[str], str]:
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


def _progress(text: str) -> None:
    sys.stderr.write(f"bench: {text}\n")
    sys.stderr.flush()


def _loadavg() -> float:
    try:
        with open("/proc/loadavg") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return math.nan


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    deadline = Deadline(args.time_limit)
    started = time.time()
    load_before = _loadavg()
    errors: list[str] = []
    ours: dict[str, Any] | None = None
    sdk: dict[str, Any] | None = None
    ts: dict[str, Any] | None = None
    floor: dict[str, Any] = {}
    sdk_version = ts_version = ""
    timed_out = False
    stub: StubProcess | None = None
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        our_cmd: list[str] | None = None
        sdk_cmd: list[str] | None = None
        ts_cmd: list[str] | None = None
        try:
            our_cmd = _our_cmd(args)
            if not args.server_cmd:
                compile_ours(our_cmd[0])
        except BenchError as exc:
            errors.append(f"ours: {exc}")
        if args.compare:
            try:
                sdk_cmd, sdk_version = _sdk_cmd(args.compare)
            except (BenchError, OSError, subprocess.SubprocessError) as exc:
                errors.append(f"sdk: {exc}")
        if args.compare_ts:
            try:
                ts_cmd, ts_version = _ts_cmd(args.compare_ts)
            except (BenchError, OSError, subprocess.SubprocessError) as exc:
                errors.append(f"ts: {exc}")
        _progress(f"stub gateway (delay {args.delay_ms:g} ms)")
        stub = StubProcess(args.delay_ms, deadline)
        _progress(f"direct GET floor: {args.calls} sequential, then {', '.join(map(str, HTTP_LEVELS))} clients")
        _progress("interpreter start-up (the cold-start floor)")
        floor.update(interpreter_startup(_our_python(args), args.cold_starts, deadline))
        if sdk_cmd is not None and sdk_cmd[0] != _our_python(args):
            sdk_floor = interpreter_startup(sdk_cmd[0], args.cold_starts, deadline)
            floor["sdk_python_startup_ms"] = sdk_floor["python_startup_ms"]
            floor["sdk_python_rss_mib"] = sdk_floor["python_rss_mib"]
        floor.update(sequential_direct(stub.port, args.calls, args.warmup_calls, deadline))
        floor.update(measure_direct_http(stub.port, args.warmup_s, args.duration, deadline))
        servers: list[tuple[str, list[str], dict[str, Any]]] = []
        if our_cmd is not None:
            ours = {"cmd": our_cmd}
            servers.append(("ours", our_cmd, ours))
        if sdk_cmd is not None:
            sdk = {"cmd": sdk_cmd}
            servers.append(("sdk", sdk_cmd, sdk))
        if ts_cmd is not None:
            ts = {"cmd": ts_cmd}
            servers.append(("ts", ts_cmd, ts))
        stdio_env = _child_env(stub.url, BENCH_TOKEN)
        http_env = _child_env(stub.url, None)  # HTTP mode refuses to boot with an env token
        names = ", ".join(label for label, _, _ in servers) or "no server"
        if not args.http_only:
            _progress(f"cold starts of {names}, taking turns ({args.cold_starts} + 1 warm-up each)")
            measure_cold_starts(servers, stdio_env, args.cold_starts, deadline, errors)
        # Each later phase on its own: what one measured survives another's failure.
        for label, cmd, out in servers if not args.http_only else []:
            _progress(f"{label}: stdio, {args.calls} calls per kind")
            try:
                out.update(measure_stdio(label, cmd, stdio_env, args.calls, args.warmup_calls, deadline))
                out["stdio_call_overhead_p50_ms"] = out["stdio_call_p50_ms"] - floor["direct_p50_ms"]
            except BenchTimeout:
                raise
            except BenchError as exc:
                errors.append(str(exc))  # it names the server already
        if ours is not None and our_cmd is not None and not args.http_only:  # https is a stdio run
            _progress(f"ours over https: {args.cold_starts} + 1 cold starts, {args.calls} calls per kind")
            tls_stub = StubProcess(args.delay_ms, deadline, tls=True)
            trust = tls_trust_file()
            try:
                https_env = {**_child_env(tls_stub.url, BENCH_TOKEN), "SSL_CERT_FILE": trust}
                ours.update(
                    measure_https(our_cmd, https_env, args.calls, args.warmup_calls, args.cold_starts, deadline)
                )
            except BenchTimeout:
                raise
            except BenchError as exc:
                errors.append(f"ours (https): {exc}")
            finally:
                tls_stub.close()
                os.unlink(trust)
        for label, cmd, out in servers:
            _progress(f"{label}: HTTP at {', '.join(map(str, HTTP_LEVELS))} clients, {args.duration:g} s each")
            try:
                out.update(measure_http(label, cmd, http_env, args.warmup_s, args.duration, deadline))
            except BenchTimeout:
                raise
            except BenchError as exc:
                errors.append(str(exc))  # it names the server already
    except BenchTimeout as exc:
        errors.append(str(exc))
        timed_out = True
    except BenchError as exc:
        errors.append(str(exc))
    except KeyboardInterrupt:
        errors.append("interrupted")
        timed_out = True
    finally:
        if stub is not None:
            stub.close()
        stop_all()
        signal.signal(signal.SIGTERM, previous)

    rows = _rows(args.calls, args.cold_starts)
    verdicts = {t.id: evaluate(t, ours, sdk, ts) for t in TARGETS}
    for name, server in (("ours", ours), ("sdk", sdk), ("ts", ts)):
        if server:
            for c in HTTP_LEVELS:
                n = server.get(f"http_{c}_errors") or 0
                if n:
                    first = server.get(f"http_{c}", {}).get("first_error", "")
                    errors.append(f"{name} (HTTP): {n} failed requests at {c} client(s): {first}")

    report = {
        "schema": 1,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_s": time.time() - started,
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_1m_before": load_before,
            "loadavg_1m_after": _loadavg(),
        },
        "config": {
            "quick": args.quick,
            "calls": args.calls,
            "warmup_calls": args.warmup_calls,
            "cold_starts": args.cold_starts,
            "http_levels": list(HTTP_LEVELS),
            "http_duration_s": args.duration,
            "http_warmup_s": args.warmup_s,
            "stub_delay_ms": args.delay_ms,
            "protocol_version": PROTOCOL_VERSION,
            "compare": args.compare,
            "compare_ts": args.compare_ts,
            "http_only": args.http_only,
            "sdk_version": sdk_version or None,
            "ts_sdk_version": ts_version or None,
        },
        "direct": floor,
        "ours": ours,
        "sdk": sdk,
        "ts": ts,
        "ratios_ours_over_sdk": {
            row.metric: (_num(ours, row.metric) or 0.0) / v
            for row in rows
            if (v := _num(sdk, row.metric)) and _num(ours, row.metric) is not None
        },
        "targets": list(verdicts.values()),
        "errors": errors,
    }

    title = (
        f"fairwins-mcp bench: N={args.calls}, cold starts={args.cold_starts}, HTTP {args.duration:g} s per level, "
        f"stub delay {args.delay_ms:g} ms, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        + (f", SDK mcp {sdk_version}" if sdk_version else "")
        + (f", TS SDK {ts_version}" if ts_version else "")
    )
    print(title)
    print(f"ours: {' '.join(ours['cmd']) if ours else '—'}")
    if sdk:
        print(f"SDK:  {' '.join(sdk['cmd'])}")
    if ts:
        print(f"TS:   {' '.join(ts['cmd'])}")
    print(
        "ours/SDK, ours/TS: ratios of ours to the official Python and TypeScript SDK servers; direct: the floor "
        "(the same GET made straight to the stub; for cold start and RSS, ours' interpreter running `-c pass`)"
    )
    if load_before >= (os.cpu_count() or 1) / 2:
        print(
            f"note: the machine was busy when the run began (1-min load average {load_before:.2f} on "
            f"{os.cpu_count()} CPUs): absolute figures are noisy; the ratios less so"
        )
    if "sdk_python_startup_ms" in floor:
        print(
            f"note: the interpreters differ: ours starts in {floor['python_startup_ms']:.1f} ms / "
            f"{floor['python_rss_mib']:.1f} MiB, the SDK's in {floor['sdk_python_startup_ms']:.1f} ms / "
            f"{floor['sdk_python_rss_mib']:.1f} MiB before any server code runs"
        )
    print()
    print(render_table(rows, ours, sdk, ts, floor, verdicts))
    if errors:
        print()
        for e in errors:
            print(f"error: {e}")

    path = Path(args.json)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_round(report), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"\nresults: {path}")
    except OSError as exc:
        print(f"\ncould not write {path}: {exc}", file=sys.stderr)
        return 1

    if timed_out:
        return 3
    if errors:
        return 1
    if args.strict and any(v["result"] == "MISS" for v in verdicts.values()):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
