"""Abandoned work returns everything (issue 47): 10,000 calls left at every stage, and the server is as it was.

Clients leave a real server (the shipped dispatcher, the sandbox gateway) at each stage of a
request's life: while its head arrives, while its body arrives, while its call waits on the
gateway (with a 100 KB `_meta`), while its answers are written, while it lingers after a
refusal, idle between requests, and behind a half-close. The collector keeps a serving process's
settings (ops/heap.py: a young generation of 200,000) and is never forced. Afterwards the
requests in flight, the admission's connections, the loop's tasks, the gateway pool and the
descriptors are back at their idle values.

Resident memory is measured on a real process (`fairwins-mcp --http`, as members and operators
run it), not in this one: here the server's loop runs on a thread of its own, whose malloc arena
keeps what it freed, and pytest keeps every log record of a test. The issue's case: 400 calls of
0.9 MB, each abandoned once the gateway has it, used to keep 0.9 MiB each.
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import pytest

from mcp_server.ops import heap
from mcp_server.ops import listener as listening
from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.server import McpHTTPServer
from mcp_server.upstream import aio
from tests.mcp_http import running
from tests.sandbox_gateway import SandboxGateway
from tests.test_failure_owners import HEALTH, WAGERS, call

ROOT: Final = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.linux_tier("reads descriptors and resident memory from /proc/self")

WAIT: Final = 20.0
TOTAL: Final = 10_000
BATCH: Final = 200  # calls left waiting on the gateway at once
PAD: Final = 100_000  # bytes of _meta on each call left waiting
# The gateway's delay for a call that is left waiting: longer than a batch takes to arrive on a
# loaded machine, so that every call of the batch is still waiting when its client leaves.
DELAY: Final = 3.0
# A real process's resident memory may grow this much over 400 abandoned calls of 0.9 MB, one in
# flight at a time: the allocator's slack around the one in flight. Before issue 47, 360 MiB.
RSS_SLACK: Final = 48 * 1024 * 1024
BIG: Final = 900_000
ABANDONED: Final = 400


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=WAIT)


def reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def has_seen(gateway: SandboxGateway, n: int) -> Callable[[], bool]:
    return lambda: len(gateway.seen) >= n


def eventually(probe: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + WAIT
    while not probe():
        if time.monotonic() > end:
            raise AssertionError(f"never: {what}")
        time.sleep(0.01)


@pytest.fixture
def served() -> Iterator[tuple[McpHTTPServer, SandboxGateway]]:
    thresholds = gc.get_threshold()
    gc.set_threshold(heap.YOUNG, heap.MIDDLE, heap.OLD)  # a serving process's, never a forced collection
    try:
        with SandboxGateway() as gateway:
            server = McpHTTPServer(
                ("127.0.0.1", 0),
                build_dispatcher(Config(api_url=gateway.url)),
                gate.Policy(loopback_bind=True, max_body=2 * 1024 * 1024),
                listener=listening.listen("127.0.0.1", 0),
                max_concurrency=BATCH * 2,
                write_timeout=2.0,
            )
            with running(server):
                eventually(lambda: server.loop is not None, "the loop runs")
                yield server, gateway
    finally:
        gc.set_threshold(*thresholds)


def on_loop(server: McpHTTPServer, fn: Callable[[], int]) -> int:
    loop = server.loop
    assert loop is not None

    async def run() -> int:
        return fn()

    return asyncio.run_coroutine_threadsafe(run(), loop).result(WAIT)


def state(server: McpHTTPServer) -> dict[str, int]:
    """What an idle server holds, as counted on its own loop."""
    loop = server.loop
    assert loop is not None

    def pooled() -> int:
        return sum(len(idle) for transport in list(aio._TRANSPORTS) for idle in transport._pools.get(loop, {}).values())

    return {
        "in flight": server._inflight,
        "connections": server.admission.connections,
        "tasks": on_loop(server, lambda: len(asyncio.all_tasks())),
        "pooled gateway connections": on_loop(server, pooled),
    }


# ---- the stages, each abandoning `n` calls ---------------------------------------------------


def in_head(port: int, n: int, gateway: SandboxGateway) -> None:
    for _ in range(n):
        sock = connect(port)
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
        reset(sock)


def in_body(port: int, n: int, gateway: SandboxGateway) -> None:
    whole = call(pad=PAD // 10)
    for _ in range(n):
        sock = connect(port)
        sock.sendall(whole[: len(whole) // 2])
        sock.close()


def waiting(port: int, n: int, gateway: SandboxGateway) -> None:
    whole = call(pad=PAD)
    for start in range(0, n, BATCH):
        batch = min(BATCH, n - start)
        gateway.fault(WAGERS, "delay", seconds=DELAY, times=batch)
        seen = len(gateway.seen)
        socks = [connect(port) for _ in range(batch)]
        for sock in socks:
            sock.sendall(whole)
        eventually(has_seen(gateway, seen + batch), "the gateway has every call of the batch")
        for i, sock in enumerate(socks):
            reset(sock) if i % 2 else sock.close()
        gateway.clear_faults()


def writing(port: int, n: int, gateway: SandboxGateway) -> None:
    for _ in range(n):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(WAIT)
        sock.connect(("127.0.0.1", port))
        sock.sendall(HEALTH * 2000)  # its answers fill every buffer between, none read
        time.sleep(0.005)
        reset(sock)


def lingering(port: int, n: int, gateway: SandboxGateway) -> None:
    for _ in range(n):
        sock = connect(port)
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 9000\r\nBad Header\r\n\r\nxx")
        sock.close()


def idle(port: int, n: int, gateway: SandboxGateway) -> None:
    for _ in range(n):
        sock = connect(port)
        sock.sendall(HEALTH)
        sock.recv(4096)
        sock.close()


def pipelined(port: int, n: int, gateway: SandboxGateway, quiet: Callable[[], bool] | None = None) -> None:
    for i in range(n):
        sock = connect(port)
        sock.sendall(call(1) + call(2))
        sock.shutdown(socket.SHUT_WR)
        # Read the first answer's first byte, then leave, and the next client comes once its calls
        # ended: calls that complete do so one at a time (a crowd of them at once would fill the
        # gateway pool, a cache as large as the calls once at the gateway together: no leak).
        sock.recv(1)
        reset(sock) if i % 2 else sock.close()
        if quiet is not None:
            eventually(quiet, "its calls ended")


STAGES: Final[dict[Callable[[int, int, SandboxGateway], None], int]] = {
    waiting: 4_000,
    in_head: 1_500,
    in_body: 1_500,
    lingering: 1_000,
    idle: 1_000,
    pipelined: 900,
    writing: 100,
}


def test_ten_thousand_calls_abandoned_at_every_stage_leave_the_server_as_it_was(
    served: tuple[McpHTTPServer, SandboxGateway],
) -> None:
    assert sum(STAGES.values()) == TOTAL
    server, gateway = served
    port = int(server.server_address[1])
    for stage in STAGES:  # every path warmed once: what it allocates for good is not history
        stage(port, 2, gateway)
    eventually(lambda: server.admission.connections == 0 and server._inflight == 0, "the warm-up's end")
    time.sleep(0.5)
    idle_state, idle_fds = state(server), descriptors()

    # One stage after another: calls that complete (behind a half-close) then do so one at a time,
    # so the gateway pool's idle value is what one call at a time leaves, and any growth is a leak.
    for stage, n in STAGES.items():
        if stage is pipelined:
            # Quiet means the client's connection ended too: between its two calls nothing is in
            # flight, and a next client then would overlap its second call (a second pooled link).
            pipelined(port, n, gateway, lambda: server.admission.connections == 0 and server._inflight == 0)
        else:
            stage(port, n, gateway)

    eventually(lambda: server.admission.connections == 0 and server._inflight == 0, "every abandoned call ended")

    def back(now: dict[str, int]) -> bool:
        # The pool may have lost an idle connection the gateway closed meanwhile; it may never gain one.
        pool = "pooled gateway connections"
        return now[pool] <= idle_state[pool] and {**now, pool: 0} == {**idle_state, pool: 0}

    try:
        eventually(lambda: back(state(server)), "back at idle")
    except AssertionError:
        raise AssertionError(f"{state(server)} is not {idle_state}") from None
    eventually(lambda: descriptors() <= idle_fds, f"descriptors back at {idle_fds}")
    assert server.guard is not None and server.guard.strays == 0 and server.fatal is None


def test_four_hundred_abandoned_calls_of_a_megabyte_leave_a_real_process_memory_as_it_was(tmp_path: Path) -> None:
    with SandboxGateway() as gateway:
        env = {**os.environ, "FAIRWINS_API_URL": gateway.url}
        env.pop("FAIRWINS_API_TOKEN", None)
        log = (tmp_path / "server.log").open("w+b")
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_server", "--http", "0"], cwd=ROOT, env=env, stdout=log, stderr=log
        )
        try:

            def listening() -> bool:
                log.seek(0)
                return b"listening on" in log.read()

            eventually(listening, "the server listens")
            log.seek(0)
            match = re.search(rb"listening on http://127\.0\.0\.1:(\d+)/mcp", log.read())
            assert match is not None
            port = int(match.group(1))
            whole = call(pad=BIG)
            gateway.fault(WAGERS, "delay", seconds=DELAY, times=3)
            for _ in range(3):  # warmed: the first calls' one-off allocations are not what is measured
                sock = connect(port)
                sock.sendall(whole)
                sock.recv(65536)
                sock.close()
            gateway.clear_faults()
            before = rss(proc.pid)
            gateway.fault(WAGERS, "delay", seconds=DELAY, times=ABANDONED)
            for _ in range(ABANDONED):
                seen = len(gateway.seen)
                sock = connect(port)
                sock.sendall(whole)
                eventually(has_seen(gateway, seen + 1), "the gateway has the call")
                sock.close()
            sock = connect(port)
            sock.sendall(HEALTH)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            sock.close()
            grown = rss(proc.pid) - before
            assert grown < RSS_SLACK, f"{ABANDONED} abandoned calls of 0.9 MB kept {grown / 2**20:.0f} MiB"
            assert proc.poll() is None
        finally:
            proc.terminate()
            proc.wait(WAIT)
            log.close()
