"""Real parts for the hosted-door tests: server replicas, a sandbox gateway, constant load (nginx: tests/nginx.py).

Everything is a real process on 127.0.0.1. A replica keeps its port across a restart (nginx names
it in its config), so replica ports are picked at run time from below the kernel's ephemeral
range, where no outgoing connection can hold one, and a restart waits while the port is still
taken by the previous process's last moments.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from tests.conftest import ROOT, server_env
from tests.secret_canaries import record_output

if TYPE_CHECKING:
    from tests.nginx import Nginx

TOKEN: Final = "fw1.sandbox-member-a-7f3k"  # the sandbox's member A
START_TIMEOUT: Final = 30.0  # generous: CI machines are loaded
STOP_TIMEOUT: Final = 60.0
REQUEST_TIMEOUT: Final = 30.0
RESTART_GAP: Final = 2.0  # seconds a replica stays down between its stop and its start
BACK_IN_ROTATION: Final = (
    60.0  # nginx keeps a replica that refused a connection out for fail_timeout (10 s); ample margin
)


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


def distinct_ports(n: int) -> list[int]:
    """`n` different ports from pick_port."""
    ports: list[int] = []
    while len(ports) < n:
        port = pick_port()
        if port not in ports:
            ports.append(port)
    return ports


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
            code = json.loads(body)["error"]["data"]["error"]  # a refusal: a JSON-RPC error naming its code
        except (ValueError, TypeError, KeyError):
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


def summary(load: Load, **extra: Any) -> str:
    return json.dumps({"ok": load.ok, "failures": dict(load.failures), "samples": load.samples[:5], **extra}, indent=1)


def restart_in_turn(
    replicas: list[Replica],
    args: Sequence[tuple[str, ...]],
    gateway_url: str,
    lb: Nginx,
    progress: Callable[[], int],
    *,
    until_loaded: int = 1,
) -> list[str]:
    """A deploy: each replica sent SIGTERM, down for a while, started again and back in nginx's rotation.

    Each must exit 0; `progress` (calls completed so far) must move while each one is away.
    Returns each replica's log from its last stop; `replicas` holds the new processes afterwards.
    `until_loaded`: how many times a replica may be stopped in all, while a stop meets no call in
    flight. Whether a call is in flight at the signal is up to nginx's choice of replica in that
    instant; a stop that met none tested no drain, so a test asking for one stops it again.
    """
    logs: list[str] = []
    for i in range(len(replicas)):
        for attempt in range(until_loaded):
            log = _restart(replicas, i, args[i], gateway_url, lb, progress)
            if sum(drained_counts(log)) > 0:
                break
            print(f"replica {i}: no call in flight at stop {attempt + 1} of {until_loaded}")
        logs.append(log)
    return logs


def _restart(
    replicas: list[Replica], i: int, args: tuple[str, ...], gateway_url: str, lb: Nginx, progress: Callable[[], int]
) -> str:
    """Replica i stopped (its log returned), down for RESTART_GAP, started again and back in rotation."""
    replica = replicas[i]
    before = progress()
    replica.signal(signal.SIGTERM)
    code = replica.wait(STOP_TIMEOUT)
    replica.kill()
    assert code == 0, replica.output[-3000:]
    # Down for a while, as in a real deploy: nginx meets refused connections, retries them
    # elsewhere (nothing was sent) and keeps this replica out for fail_timeout.
    time.sleep(RESTART_GAP)
    restarted = time.time()
    replicas[i] = start_replica(replica.port, gateway_url, args)
    address = f"127.0.0.1:{replica.port}"

    def back() -> bool:
        return any(
            e.at >= restarted and e.upstreams[-1] == address and e.upstream_statuses[-1] == "200"
            for e in lb.access_log()
        )

    wait_for(back, f"nginx to route to the restarted {address} again", BACK_IN_ROTATION)
    assert progress() > before, "the load stalled during the restart"
    return replica.output


def drained_counts(log: str) -> list[int]:
    """Requests in flight at each SIGTERM a replica's log reports, all answered (one per process)."""
    return [int(n) for n in re.findall(r"all (\d+) requests in flight at the signal were answered", log)]
