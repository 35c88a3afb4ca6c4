"""The HTTP server under a real pids (tasks) limit: connections cost no thread, so a limit met at idle refuses nobody.

A container's or a systemd unit's pids limit counts threads. The threaded server served each
connection on a thread of its own, so that limit ran out below the connection bound and a
connection had to be refused 503. On the event loop a connection is a protocol object and a
waiting call a suspended coroutine: with `pids.max` set to exactly what the server uses when idle
(no room for one more thread), connections are still accepted and served, and the count does not
move. The limit is the kernel's own: a pids cgroup (v1, or v2 where the controller is enabled)
made for the test, the server process moved into it. Needs root, as `make test` runs in CI.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.balancer import Gateway, Replica, pick_port

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


CONNECTIONS = 64  # far past what a limit with no room for one more thread would have let in one thread each


def test_connections_need_no_thread_so_a_pids_limit_met_at_idle_refuses_none() -> None:
    gateway = Gateway(delay=0.0)
    try:
        with pids_cgroup() as group:
            port = pick_port()
            server = Replica(port, gateway.url)
            try:
                (group / "cgroup.procs").write_text(str(server.proc.pid))  # every thread of it moves along
                # Warm up whatever the server starts on first use (the log writer, the watchdog).
                warm = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                assert initialize(warm) == 200 and call_status(warm) == 200
                warm.close()
                idle = pids_current(group)
                (group / "pids.max").write_text(str(idle))  # not one thread more

                held = [http.client.HTTPConnection("127.0.0.1", port, timeout=10) for _ in range(CONNECTIONS)]
                try:
                    assert all(initialize(conn) == 200 for conn in held)  # all open at once, keep-alive
                    assert all(call_status(conn) == 200 for conn in held)  # each call went to the gateway
                    assert pids_current(group) == idle
                finally:
                    for conn in held:
                        conn.close()
                fresh = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                assert initialize(fresh) == 200 and call_status(fresh) == 200
                fresh.close()
                assert server.proc.poll() is None
                assert "Traceback" not in server.output
            finally:
                server.kill()
    finally:
        gateway.kill()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([__file__, "-v"]))
