"""Real parts for the hosted-door tests: server replicas, a stock nginx in front, a sandbox gateway, constant load.

Everything is a real process on 127.0.0.1. nginx (Debian's nginx-light, installed by the
Makefile when missing) runs from a temporary directory with a stock reverse-proxy config; its
access log records which replica answered each request, which is how a test knows a restarted
replica is back in rotation. Ports nginx must name in its config are picked at run time from
below the kernel's ephemeral range (so no outgoing connection can hold one) and re-picked when
taken.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tests.conftest import ROOT, server_env
from tests.secret_canaries import record_output

TOKEN: Final = "fw1.sandbox-member-a-7f3k"  # the sandbox's member A
START_TIMEOUT: Final = 30.0  # generous: CI machines are loaded
STOP_TIMEOUT: Final = 60.0
REQUEST_TIMEOUT: Final = 30.0
NGINX_CANDIDATES: Final = ("nginx", "/usr/sbin/nginx")


def nginx_binary() -> str:
    """The nginx executable; the Makefile installs it (tests/tools/apt.sh), so a missing one fails loudly."""
    for name in NGINX_CANDIDATES:
        found = shutil.which(name) or (name if os.access(name, os.X_OK) else None)
        if found:
            return found
    raise AssertionError("nginx is not installed: run `make test` (it installs Debian's nginx-light) or apt.sh")


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def pick_port() -> int:
    """A free TCP port on 127.0.0.1 below the ephemeral range, where no outgoing connection can take it."""
    high = min(_ephemeral_low(), 65536) - 1
    low = max(10000, high - 20000)
    for _ in range(200):
        port = random.randint(low, high)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port found below the ephemeral range")


def wait_for(probe: Callable[[], bool], what: str, timeout: float) -> None:
    """Until `probe()` holds, asked every 50 ms; AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.05)


class Process:
    """A child process whose stderr is drained on a thread, kept, and handed to the secret scan at the end."""

    def __init__(self, label: str, argv: list[str], env: dict[str, str], *, scan: bool = True) -> None:
        self.label = label
        self.scan = scan
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        self._lines: list[bytes] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self._lines.append(line)

    @property
    def output(self) -> str:
        with self._lock:
            return b"".join(self._lines).decode("utf-8", "replace")

    def wait_output(self, pattern: str, timeout: float = START_TIMEOUT) -> re.Match[str]:
        found: list[re.Match[str]] = []

        def probe() -> bool:
            match = re.search(pattern, self.output)
            if match:
                found.append(match)
                return True
            if self.proc.poll() is not None:
                self._reader.join(5)
                match = re.search(pattern, self.output)
                if match:
                    found.append(match)
                    return True
                raise ExitedEarly(f"{self.label} exited with {self.proc.returncode}:\n{self.output[-3000:]}")
            return False

        wait_for(probe, f"{self.label} to print {pattern!r}; output:\n{self.output[-3000:]}", timeout)
        return found[0]

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float = STOP_TIMEOUT) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT)
        self._reader.join(5)
        if self.scan:
            record_output(self.label, self.output)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class ExitedEarly(AssertionError):
    """A process exited before it printed what was waited for."""


class Gateway(Process):
    """The sandbox gateway as its own process (its CPU is not the load's), answering after `delay` s."""

    def __init__(self, delay: float) -> None:
        argv = [sys.executable, "-m", "tests.sandbox_gateway", "--port", "0", "--delay", str(delay)]
        # Not scanned for secrets: the sandbox prints its own sample tokens when it starts.
        super().__init__("sandbox gateway", argv, server_env(), scan=False)
        self.url = self.wait_output(r"sandbox gateway on (http://\S+)").group(1)


class Replica(Process):
    """`python -m mcp_server --http PORT` against the gateway; `extra` adds flags, `env` settings."""

    def __init__(self, port: int, gateway_url: str, extra: tuple[str, ...] = (), env: dict[str, str] | None = None):
        self.port = port
        argv = [sys.executable, "-m", "mcp_server", "--http", str(port), *extra]
        super().__init__(f"replica :{port}", argv, server_env(FAIRWINS_API_URL=gateway_url, **(env or {})))
        self.wait_output(rf"listening on http://127\.0\.0\.1:{port}/mcp")

    def healthy(self) -> bool:
        try:
            return get(self.port, "/healthz", timeout=2)[0] == 200
        except OSError:
            return False


def start_replica(
    port: int, gateway_url: str, extra: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Replica:
    """A replica on `port`, retried while the port is still taken (by the previous replica's last moments)."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            return Replica(port, gateway_url, extra, env)
        except ExitedEarly as exc:
            if "in use" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def get(port: int, path: str, timeout: float = REQUEST_TIMEOUT) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


NGINX_CONF: Final = """\
# A stock reverse proxy: three replicas, pooled keep-alive connections to them, nginx's default
# proxy_next_upstream (which never retries a POST once it was sent) and default passive health
# (max_fails=1, fail_timeout=10s).
worker_processes 2;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format lb '$msec $status $request_method $upstream_addr $upstream_status $request_time';
    access_log {dir}/access.log lb;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    upstream mcp {{
{servers}
        keepalive 32;
        keepalive_timeout {keepalive_timeout};
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
        }}
    }}
}}
"""


@dataclass(frozen=True)
class Logged:
    """One access-log line: when, the status nginx answered, and each upstream tried with its status."""

    at: float
    status: int
    method: str
    upstreams: tuple[str, ...]
    upstream_statuses: tuple[str, ...]


class Nginx(Process):
    """nginx in its own temp dir on a free port, in front of `upstreams` (ports on 127.0.0.1)."""

    def __init__(self, upstreams: list[int], keepalive_timeout: str, workdir: Path) -> None:
        self.dir = workdir
        (workdir / "tmp").mkdir(parents=True, exist_ok=True)
        for attempt in range(10):
            self.port = pick_port()
            conf = NGINX_CONF.format(
                dir=workdir,
                port=self.port,
                servers="\n".join(f"        server 127.0.0.1:{p};" for p in upstreams),
                keepalive_timeout=keepalive_timeout,
            )
            (workdir / "nginx.conf").write_text(conf)
            argv = [nginx_binary(), "-p", str(workdir), "-c", str(workdir / "nginx.conf"), "-g", "daemon off;"]
            super().__init__("nginx", argv, dict(os.environ))
            try:
                wait_for(self._answers, "nginx to listen", START_TIMEOUT)
                return
            except AssertionError:
                self.kill()
                if attempt == 9 or "in use" not in self.error_log():
                    raise AssertionError(f"nginx did not start:\n{self.error_log()}\n{self.output}") from None

    def _answers(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError("nginx exited")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def error_log(self) -> str:
        try:
            return (self.dir / "error.log").read_text(errors="replace")
        except OSError:
            return ""

    def access_log(self) -> list[Logged]:
        entries = []
        try:
            text = (self.dir / "access.log").read_text(errors="replace")
        except OSError:
            return []
        for line in text.splitlines():
            # "1700000000.123 200 POST 127.0.0.1:1, 127.0.0.1:2 502, 200 0.050"
            match = re.fullmatch(r"(\S+) (\d+) (\S+) (.*?) ((?:\S+, )*\S+) (\S+)", line)
            if not match:
                continue
            at, status, method, addrs, statuses, _ = match.groups()
            entries.append(
                Logged(
                    float(at),
                    int(status),
                    method,
                    tuple(a.strip() for a in addrs.replace(" : ", ", ").split(",")),
                    tuple(s.strip() for s in statuses.replace(" : ", ", ").split(",")),
                )
            )
        return entries

    def stop(self) -> None:
        self.signal(signal.SIGQUIT)  # graceful: finish what is in flight
        try:
            self.wait(STOP_TIMEOUT)
        finally:
            self.kill()


# ---- load ----------------------------------------------------------------------------------------


def call_body(rid: int) -> bytes:
    message = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}}
    return json.dumps(message).encode()


CALL_HEADERS: Final = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
    "Authorization": f"Bearer {TOKEN}",
}


def judge(status: int, body: bytes, rid: int) -> str | None:
    """None when `body` is the successful answer to request `rid`; otherwise the kind of failure."""
    if status != 200:
        try:
            code = json.loads(body).get("error", "")
        except (ValueError, AttributeError):
            code = ""
        return f"http {status} {code}".strip() if isinstance(code, str) else f"http {status}"
    try:
        message = json.loads(body)
    except ValueError:
        return "200 with a body that is not JSON"
    result = message.get("result") if isinstance(message, dict) else None
    if not isinstance(result, dict) or message.get("id") != rid:
        return "200 without the result"
    if result.get("isError"):
        return "tool error"
    return None


@dataclass
class Load:
    """`clients` members, each on its own keep-alive connection, calling a tool back to back until stopped."""

    port: int
    clients: int
    ok: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    per_member: Counter[int] = field(default_factory=Counter)  # calls completed, answered or failed
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Load:
        for i in range(self.clients):
            thread = threading.Thread(target=self._member, args=(i,), name=f"member-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(REQUEST_TIMEOUT + 5)

    @property
    def total(self) -> int:
        with self._lock:
            return self.ok + sum(self.failures.values())

    @property
    def members_heard(self) -> int:
        """Members whose first call has completed (so every one of them is connected and calling)."""
        with self._lock:
            return len(self.per_member)

    def _member(self, index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
        rid = index * 1_000_000
        while not self._stop.is_set():
            rid += 1
            started = time.monotonic()
            failure: str | None
            try:
                conn.request("POST", "/mcp", body=call_body(rid), headers=CALL_HEADERS)
                resp = conn.getresponse()
                body = resp.read()
                failure = judge(resp.status, body, rid)
                if resp.will_close:
                    conn.close()
            except (OSError, http.client.HTTPException) as exc:
                failure = f"connection: {type(exc).__name__}"
                body = str(exc).encode()
                conn.close()
            took = time.monotonic() - started
            with self._lock:
                self.per_member[index] += 1
                if failure is None:
                    self.ok += 1
                    self.latencies.append(took)
                else:
                    self.failures[failure] += 1
                    if len(self.samples) < 20:
                        self.samples.append(f"{failure}: {body[:300]!r}")
        conn.close()


@contextmanager
def nginx_in_front(upstreams: list[int], keepalive_timeout: str) -> Iterator[Nginx]:
    with tempfile.TemporaryDirectory(prefix="fairwins-nginx-") as workdir:
        proxy = Nginx(upstreams, keepalive_timeout, Path(workdir))
        try:
            yield proxy
        finally:
            proxy.stop()


def summary(load: Load, **extra: Any) -> str:
    return json.dumps({"ok": load.ok, "failures": dict(load.failures), "samples": load.samples[:5], **extra}, indent=1)
