"""A client leaving lets its request go, never otherwise: the connection on a real loop and loopback TCP.

The loop tells the connection of its client's end (or a reset); a request waiting (for a call
slot, then its call) is then let go at once: its wait for a slot ends and its call is cancelled.
A reset before the request was whole lets it go too. An end that came with the request (read
before it was whole, or still in the kernel behind its last bytes), or behind a request sent
before the last was answered (a client that pipelined), is a half-close, and the client waits
for its answers (issue 47). An end that comes while a request waits, with nothing of the
client's unread, is its leaving: a client that gave up while its call was queued costs no slot
and no gateway call (issue 59). (The first tests hold the promises of the threaded server's
disconnect watcher, which the protocol object keeps without a thread; the last ones hold the
queue on a real server.)
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from mcp_server.core.catalog import Catalog
from mcp_server.core.protocol import Dispatcher
from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.admission import SLOT_WAIT
from mcp_server.transports.http.connection import Connection
from mcp_server.transports.http.server import McpHTTPServer
from tests.mcp_http import Raw, serving
from tests.sandbox_gateway import SandboxGateway
from tests.test_failure_owners import WAGERS
from tests.test_failure_owners import call as wagers_call
from tests.test_records import Collected

WAIT = 10.0  # seconds a cancellation may take to be noticed, on a loaded machine (a bound, never a delay)
QUIET = 0.3  # seconds in which a cancellation that must not come would have come


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running on a thread of its own, as the server's runs."""
    running = asyncio.new_event_loop()
    thread = threading.Thread(target=running.run_forever, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        running.call_soon_threadsafe(running.stop)
        thread.join(WAIT)
        running.close()


@pytest.fixture
def host() -> Iterator[McpHTTPServer]:
    server = McpHTTPServer(("127.0.0.1", 0), Dispatcher(Catalog(tools=[])), gate.Policy(loopback_bind=True))
    try:
        yield server
    finally:
        server.server_close()


@contextmanager
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(server side, client side) of one real TCP connection on 127.0.0.1."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname(), timeout=5)
        served, _ = listener.accept()
    try:
        yield served, client
    finally:
        served.close()
        client.close()


def on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> object:
    async def run() -> object:
        return fn()

    return asyncio.run_coroutine_threadsafe(run(), loop).result(WAIT)


def served_by(loop: asyncio.AbstractEventLoop, host: McpHTTPServer, served: socket.socket) -> Connection:
    conn = Connection(host, "127.0.0.1", "main", loop)
    asyncio.run_coroutine_threadsafe(loop.connect_accepted_socket(lambda: conn, served), loop).result(WAIT)
    conn._sock = served  # as run() keeps it, for the peek at an end still in the kernel
    return conn


@contextmanager
def call(loop: asyncio.AbstractEventLoop, conn: Connection) -> Iterator[threading.Event]:
    """A call in flight on `conn`: the event is set if the client's leaving cancels it; unwatched at the end."""
    cancelled = threading.Event()
    unwatch = on_loop(loop, lambda: conn.watch(cancelled.set))
    try:
        yield cancelled
    finally:
        assert callable(unwatch)
        on_loop(loop, unwatch)


def take(loop: asyncio.AbstractEventLoop, conn: Connection) -> bytes:
    """What the reader would take of the bytes read so far."""

    async def recv() -> bytes:
        return await conn._recv(asyncio.get_running_loop().time() + WAIT)

    return asyncio.run_coroutine_threadsafe(recv(), loop).result(WAIT)


def seen_end(loop: asyncio.AbstractEventLoop, conn: Connection) -> None:
    """Wait until the loop has told the connection of its client's end."""
    for _ in range(int(WAIT / 0.01)):
        if on_loop(loop, lambda: conn.life.ended):
            return
        threading.Event().wait(0.01)
    raise AssertionError("the client's end never reached the connection")


@pytest.mark.parametrize("leaving", ["close", "reset"])
def test_a_client_leaving_during_a_call_cancels_it(
    loop: asyncio.AbstractEventLoop, host: McpHTTPServer, leaving: str
) -> None:
    with pair() as (served, client):
        conn = served_by(loop, host, served)
        with call(loop, conn) as fired:
            assert not fired.wait(QUIET)
            if leaving == "reset":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            client.close()
            assert fired.wait(WAIT)


def test_a_client_reset_before_its_call_began_cancels_it(loop: asyncio.AbstractEventLoop, host: McpHTTPServer) -> None:
    with pair() as (served, client):
        conn = served_by(loop, host, served)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        client.close()
        for _ in range(int(WAIT / 0.01)):
            if on_loop(loop, lambda: conn.life.lost):
                break
            threading.Event().wait(0.01)
        with call(loop, conn) as fired:
            assert fired.wait(WAIT), "the call of a client already gone must be cancelled"


@pytest.mark.parametrize("told", [True, False], ids=["end-read", "end-in-kernel"])
def test_an_end_that_came_before_the_call_began_is_a_half_close_and_the_call_goes_on(
    loop: asyncio.AbstractEventLoop, host: McpHTTPServer, told: bool
) -> None:
    # `nc -N`, `socat`: the request, then the end, then the wait for the answer. Whether the loop
    # has read the end before the call begins (told) or it still sits in the kernel behind the
    # request's last bytes, the end came first: issue 47, the call is not cancelled.
    with pair() as (served, client):
        conn = served_by(loop, host, served)
        if not told:
            on_loop(loop, lambda: conn.transport.pause_reading() if conn.transport else None)
        client.shutdown(socket.SHUT_WR)
        if told:
            seen_end(loop, conn)
        else:
            threading.Event().wait(0.05)  # the end reaches the server's kernel
        with call(loop, conn) as fired:
            assert on_loop(loop, lambda: conn.life.ended), "the end is known once the call begins"
            if not told:
                on_loop(loop, lambda: conn.transport.resume_reading() if conn.transport else None)
            assert not fired.wait(QUIET)


def test_requests_arriving_never_cancel_a_call(loop: asyncio.AbstractEventLoop, host: McpHTTPServer) -> None:
    with pair() as (served, client):
        conn = served_by(loop, host, served)
        with call(loop, conn) as fired:
            client.sendall(b"POST /mcp HTTP/1.1\r\n")  # the next request, pipelined during the call
            assert not fired.wait(QUIET)
        assert take(loop, conn) == b"POST /mcp HTTP/1.1\r\n"
        with call(loop, conn) as fired:
            client.sendall(b"Host: x\r\n\r\n")
            assert not fired.wait(QUIET)


def test_a_half_closed_client_with_a_request_pending_waits_for_its_answers(
    loop: asyncio.AbstractEventLoop, host: McpHTTPServer
) -> None:
    # It sent its next request and closed its sending end: the call in flight goes on, and so does
    # the pending request's, until nothing of the client is left to read.
    with pair() as (served, client):
        conn = served_by(loop, host, served)
        with call(loop, conn) as fired:
            client.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
            client.shutdown(socket.SHUT_WR)
            seen_end(loop, conn)
            assert not fired.wait(QUIET)
        assert take(loop, conn) == b"GET /healthz HTTP/1.1\r\n\r\n"
        with call(loop, conn) as fired:
            # Its end came before this call began: it waits for this answer too (issue 47).
            assert not fired.wait(QUIET)


def test_a_client_that_pipelined_is_waiting_even_when_its_end_comes_after_its_last_call_began(
    loop: asyncio.AbstractEventLoop, host: McpHTTPServer
) -> None:
    # Its second request came with its first: a batch. Its end, arriving late (a loaded client),
    # after the second call began, still says only that it sends no more (issue 47).
    with pair() as (served, client):
        conn = served_by(loop, host, served)
        client.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
        for _ in range(int(WAIT / 0.01)):
            if on_loop(loop, lambda: bool(conn._buf)):
                break
            threading.Event().wait(0.01)
        with call(loop, conn) as fired:  # the first call, with the next request already here
            assert not fired.wait(QUIET)
        assert take(loop, conn) == b"GET /healthz HTTP/1.1\r\n\r\n"
        with call(loop, conn) as fired:  # the second call begins; then the end comes
            client.shutdown(socket.SHUT_WR)
            seen_end(loop, conn)
            assert not fired.wait(QUIET)


def test_an_unwatched_call_is_never_cancelled(loop: asyncio.AbstractEventLoop, host: McpHTTPServer) -> None:
    with pair() as (served, client):
        conn = served_by(loop, host, served)
        with call(loop, conn) as fired:
            pass  # the call ended before its client left
        client.close()
        seen_end(loop, conn)
        assert not fired.wait(QUIET)


def test_a_cancel_callback_that_raises_costs_that_call_only(
    loop: asyncio.AbstractEventLoop, host: McpHTTPServer
) -> None:
    # Issue 34: the watcher's thread ended on such an exception, and no departure cancelled a call
    # again. Here the failure is logged, and the next connection's leaving still cancels its call.
    def fails() -> None:
        raise RuntimeError("a cancel callback that fails")

    with pair() as (served, client):
        conn = served_by(loop, host, served)
        on_loop(loop, lambda: conn.watch(fails))
        client.close()
        seen_end(loop, conn)
    with pair() as (served, client):
        conn = served_by(loop, host, served)
        with call(loop, conn) as fired:
            client.close()
            assert fired.wait(WAIT)


# ---- a real server: the clients of requests waiting for a call slot ------------------------------


@contextmanager
def one_slot(gateway: SandboxGateway) -> Iterator[tuple[McpHTTPServer, Collected]]:
    """A real server with one call slot in front of `gateway`, and its access records."""
    collected = Collected()
    access = logging.getLogger("fairwins_mcp.access")
    access.addHandler(collected)
    try:
        dispatcher = build_dispatcher(Config(api_url=gateway.url, timeout=WAIT))
        with serving(dispatcher, gate.Policy(loopback_bind=True, max_body=64 * 1024), max_concurrency=1) as server:
            yield server, collected
    finally:
        access.removeHandler(collected)


def eventually(probe: Callable[[], bool], what: str) -> None:
    for _ in range(int(WAIT / 0.01)):
        if probe():
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"never: {what}")


@pytest.mark.parametrize("leaving", ["close", "reset"])
def test_clients_that_leave_while_queued_free_their_places_and_cost_no_gateway_call(leaving: str) -> None:
    # One slot, held by a call the gateway answers in a third of the slot wait; six clients ask
    # behind it and give up (a plain close, as a client's own timeout does, or a reset); a seventh
    # asks then. Had each given-up call still run once the slot freed, the seventh would wait six
    # gateway calls, past the slot wait, and be refused (503).
    with SandboxGateway() as gateway, one_slot(gateway) as (server, collected):
        gateway.fault(WAGERS, "delay", seconds=SLOT_WAIT / 3)
        port = int(server.server_address[1])
        holder = Raw(port)
        holder.send(wagers_call(1))
        gateway.wait_for_requests(1, timeout=WAIT)
        quitters = [Raw(port) for _ in range(6)]
        for n, quitter in enumerate(quitters, 2):
            quitter.send(wagers_call(n))
        eventually(lambda: server._inflight == 7, "every call is read, and six wait for the slot")
        for quitter in quitters:
            if leaving == "reset":
                quitter.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            quitter.close()
        eventually(lambda: server._inflight == 1, "the six are let go while the slot is still held")
        last = Raw(port)
        last.send(wagers_call(9))
        answers = [holder.response(), last.response()]
        holder.close()
        last.close()
        records = collected.wait(8)
    assert [a.status if a else None for a in answers] == [200, 200]
    assert len(gateway.seen) == 2, [r.path for r in gateway.seen]  # the six never reached it
    left = [r for r in records if r.get("rpcId") in range(2, 8)]
    assert sorted(r["rpcId"] for r in left) == [2, 3, 4, 5, 6, 7]
    for r in left:  # logged as a call whose client left: nothing of it ran
        assert (r["httpRequest"]["status"], r["method"], r["outcome"]) == (499, "tools/call", "cancelled")


@pytest.mark.linux_tier("TCP_CORK, Linux's, puts the client's end on its request's last segment")
def test_pipelined_calls_and_a_request_with_its_end_are_answered_while_queued() -> None:
    # The users of a half-close, queued behind a held slot: a batch script that sent two calls
    # and its end at once, and `nc -N`, whose end rides on its request's last segment (TCP_CORK
    # holds the request until shutdown adds the FIN to it). Their end came with their requests:
    # every call they sent is answered.
    with SandboxGateway() as gateway, one_slot(gateway) as (server, _):
        gateway.fault(WAGERS, "delay", seconds=SLOT_WAIT / 4, times=1)
        port = int(server.server_address[1])
        holder = Raw(port)
        holder.send(wagers_call(1))
        gateway.wait_for_requests(1, timeout=WAIT)
        batch = Raw(port)
        batch.send(wagers_call(2) + wagers_call(3))
        batch.sock.shutdown(socket.SHUT_WR)
        netcat = Raw(port)
        netcat.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        netcat.send(wagers_call(4))
        netcat.sock.shutdown(socket.SHUT_WR)
        answers = [holder.response(), batch.response(), batch.response(), netcat.response()]
        for client in (holder, batch, netcat):
            client.close()
    assert [a.status if a else None for a in answers] == [200] * 4
    assert [json.loads(a.body)["id"] for a in answers if a] == [1, 2, 3, 4]
    assert len(gateway.seen) == 4
