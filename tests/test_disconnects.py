"""The disconnect watcher on real loopback TCP sockets: a call is cancelled when its client leaves, never otherwise.

A connection is attached once and its calls are watched without a system call each; these tests
hold that cheaper path to the same promises as the per-call one: a client that closed before its
call began, or while it runs, cancels it; a client that sent its next request and then closed its
sending end is still waiting for answers, until nothing of it is left to read.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from mcp_server.transports.http import disconnects
from mcp_server.transports.http.disconnects import DisconnectWatcher

WAIT = 3.0  # seconds a cancellation may take to be noticed, on a loaded machine
QUIET = 0.3  # seconds in which a cancellation that must not come would have come


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


@contextmanager
def call(watcher: DisconnectWatcher, served: socket.socket) -> Iterator[threading.Event]:
    """A call in flight on `served`: the event is set if the watcher cancels it; unwatched at the end."""
    cancelled = threading.Event()
    unwatch = watcher.watch(served, cancelled.set)
    try:
        yield cancelled
    finally:
        unwatch()


def close_and_wait_until_seen(watcher: DisconnectWatcher, served: socket.socket, client: socket.socket) -> None:
    """Close `client`; return once the watcher's thread has handled its end, whether a call was watched or not."""
    client.close()
    served.settimeout(WAIT)
    # The end has reached the server's socket, and so its registration: it is queued for the watcher.
    assert served.recv(1, socket.MSG_PEEK) == b""
    # The watcher is told of ends in the order they came (epoll's ready list is first in, first out):
    # once a later end has cancelled its call, the watcher's thread has handled this one too.
    with pair() as (marker_served, marker_client):
        watcher.attach(marker_served)
        with call(watcher, marker_served) as marker:
            marker_client.close()
            assert marker.wait(WAIT), "the watcher never handled a later end"
        watcher.detach(marker_served)


@pytest.fixture(params=["epoll", "selector", "windows"])
def watcher(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[DisconnectWatcher]:
    """Every way the watcher works: epoll (Linux), a selector (macOS), and a selector with the peek
    Windows makes, which has no MSG_DONTWAIT (the platform's own choices, taken on Linux)."""
    if request.param in ("selector", "windows"):
        monkeypatch.setattr(disconnects, "_open_epoll", lambda: None)
    if request.param == "windows":
        monkeypatch.setattr(disconnects, "_DONTWAIT", 0)
        monkeypatch.setattr(disconnects, "_peek_returns_at_once", disconnects._peek_after_select)
    w = DisconnectWatcher()
    yield w
    w.close()


@pytest.mark.parametrize("attached", [True, False], ids=["attached", "per-call"])
@pytest.mark.parametrize("leaving", ["close", "reset"])
def test_a_client_leaving_during_a_call_cancels_it(watcher: DisconnectWatcher, attached: bool, leaving: str) -> None:
    with pair() as (served, client):
        if attached:
            watcher.attach(served)
        with call(watcher, served) as fired:
            assert not fired.wait(QUIET)
            if leaving == "reset":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            client.close()
            assert fired.wait(WAIT)
        watcher.detach(served)


def test_a_client_gone_before_its_call_began_cancels_it(watcher: DisconnectWatcher) -> None:
    # Its end was reported (once: the registration is edge-triggered) while no call was watched.
    with pair() as (served, client):
        watcher.attach(served)
        close_and_wait_until_seen(watcher, served, client)  # with nothing to cancel
        with call(watcher, served) as fired:
            assert fired.wait(WAIT), "the call of a client already gone must be cancelled"


def test_requests_arriving_never_cancel_a_call(watcher: DisconnectWatcher) -> None:
    with pair() as (served, client):
        watcher.attach(served)
        with call(watcher, served) as fired:
            client.sendall(b"POST /mcp HTTP/1.1\r\n")  # the next request, pipelined during the call
            assert not fired.wait(QUIET)
        assert served.recv(100) == b"POST /mcp HTTP/1.1\r\n"
        with call(watcher, served) as fired:
            client.sendall(b"Host: x\r\n\r\n")
            assert not fired.wait(QUIET)


def test_a_half_closed_client_with_a_request_pending_waits_for_its_answers(watcher: DisconnectWatcher) -> None:
    # It sent its next request and closed its sending end: the call in flight goes on, and so does
    # the pending request's, until nothing of the client is left to read.
    with pair() as (served, client):
        watcher.attach(served)
        with call(watcher, served) as fired:
            client.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
            client.shutdown(socket.SHUT_WR)
            assert not fired.wait(QUIET)
        assert served.recv(100) == b"GET /healthz HTTP/1.1\r\n\r\n"
        with call(watcher, served) as fired:
            assert fired.wait(WAIT), "nothing more can come from it: its next call is cancelled"


def test_an_unwatched_call_is_never_cancelled(watcher: DisconnectWatcher) -> None:
    with pair() as (served, client):
        watcher.attach(served)
        with call(watcher, served) as fired:
            pass  # the call ended before its client left
        client.close()
        assert not fired.wait(QUIET)
        watcher.detach(served)


def test_a_descriptor_reused_by_a_new_connection_starts_clean(watcher: DisconnectWatcher) -> None:
    # The first connection's end was seen; the next one given the same descriptor must not inherit it.
    with pair() as (served, client):
        watcher.attach(served)
        close_and_wait_until_seen(watcher, served, client)
        fd = served.fileno()
        watcher.detach(served)
    with pair() as (served, client):
        assert served.fileno() == fd  # the lowest free descriptor is given again
        watcher.attach(served)
        with call(watcher, served) as fired:
            assert not fired.wait(QUIET)
        watcher.detach(served)
