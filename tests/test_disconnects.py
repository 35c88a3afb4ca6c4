"""A client leaving cancels its call, never otherwise: the connection protocol on a real loop and loopback TCP.

The loop tells the connection of its client's end (or a reset); a call in flight is then
cancelled at once. A client reset before its call began cancels it too; a client whose end came
before its call began, or that sent its next request and then closed its sending end, is still
waiting for answers (a half-close: issue 47). (These were the promises of the threaded server's disconnect watcher; the
protocol object keeps them without a thread.)
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from mcp_server.core.catalog import Catalog
from mcp_server.core.protocol import Dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.connection import Connection
from mcp_server.transports.http.server import McpHTTPServer

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
        if on_loop(loop, lambda: conn._eof):
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
            if on_loop(loop, lambda: conn._lost):
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
            assert on_loop(loop, lambda: conn._eof), "the end is known once the call begins"
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
