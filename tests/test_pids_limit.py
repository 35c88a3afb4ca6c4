"""The HTTP server under a real pids (tasks) limit: a connection that cannot get a thread is refused,
answered, and the server goes on serving.

Each open connection is served by a thread, and a container's or a systemd unit's pids limit counts
threads. Below the connection bound, that limit is what runs out first: `threading.Thread.start`
raises, and the server must answer `503` and carry on, not die or drop the connection silently.
The limit here is the kernel's own: a pids cgroup (v1, or v2 where the controller is enabled) made
for the test, the server process moved into it, its `pids.max` set two threads above what the
server uses when idle. Needs root, as `make test` runs in CI.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.balancer import Gateway, Replica, pick_port, wait_for
from tests.mcp_http import refusal

pytestmark = pytest.mark.linux_tier("makes a pids cgroup under /sys/fs/cgroup, as root, and picks ports from /proc")

V1_PIDS = Path("/sys/fs/cgroup/pids")
V2_ROOT = Path("/sys/fs/cgroup")


def pids_hierarchy() -> Path:
    """Where a pids cgroup can be made: cgroup v1's pids hierarchy, or v2's root with pids enabled."""
    if (V1_PIDS / "cgroup.procs").exists():
        return V1_PIDS
    controllers = V2_ROOT / "cgroup.subtree_control"
    if controllers.exists() and "pids" in controllers.read_text().split():
        return V2_ROOT
    raise AssertionError("this test needs a cgroup pids controller (v1 /sys/fs/cgroup/pids, or v2 with pids enabled)")


@contextmanager
def pids_cgroup() -> Iterator[Path]:
    if os.geteuid() != 0:
        raise AssertionError("this test makes a cgroup: run it as root (CI does)")
    group = pids_hierarchy() / f"fairwins-mcp-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        yield group
    finally:
        # The server has exited by now (the Replica is killed first), so the group is empty.
        deadline = time.monotonic() + 10
        while True:
            try:
                group.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def pids_current(group: Path) -> int:
    return int((group / "pids.current").read_text())


def initialize(conn: http.client.HTTPConnection) -> int:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    conn.request(
        "POST",
        "/mcp",
        json.dumps(body),
        {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )
    response = conn.getresponse()
    response.read()
    return response.status


def call_status(conn: http.client.HTTPConnection) -> int:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_gateway_status"}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    conn.request("POST", "/mcp", json.dumps(body), headers)
    response = conn.getresponse()
    data = json.loads(response.read())
    assert data["result"]["isError"] is False, data
    return response.status


def refused_answer(port: int) -> bytes:
    """Connect and read what the server says before anything is sent: a refused connection is answered at once."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_connection_that_cannot_get_a_thread_is_answered_503_and_the_server_goes_on() -> None:
    gateway = Gateway(delay=0.0)
    try:
        with pids_cgroup() as group:
            port = pick_port()
            server = Replica(port, gateway.url)
            try:
                (group / "cgroup.procs").write_text(str(server.proc.pid))  # every thread of it moves along
                # Warm up every thread the server starts on first use (gateway watchdog, disconnect
                # watcher, log writer), then let that connection's thread go.
                warm = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                assert initialize(warm) == 200 and call_status(warm) == 200
                held = pids_current(group)
                warm.close()
                wait_for(lambda: pids_current(group) < held, "the warm-up connection's thread to end", 10)
                idle = pids_current(group)
                (group / "pids.max").write_text(str(idle + 2))  # room for two connections' threads

                first = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                second = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                assert initialize(first) == 200 and initialize(second) == 200  # both held open, idle
                assert pids_current(group) == idle + 2

                answer = refused_answer(port)
                head, _, body = answer.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 503 "), answer
                assert b"\r\nretry-after: 1" in head.lower() and b"\r\nconnection: close" in head.lower()
                assert refusal(body)[0] == "busy"

                # The two held connections still work, and once one goes, a new one is served.
                assert call_status(first) == 200 and call_status(second) == 200
                first.close()
                wait_for(lambda: pids_current(group) <= idle + 1, "the closed connection's thread to end", 10)
                third = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                assert initialize(third) == 200 and call_status(third) == 200
                third.close()
                second.close()
                assert server.proc.poll() is None
                assert "Traceback" not in server.output
            finally:
                server.kill()
    finally:
        gateway.kill()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([__file__, "-v"]))
