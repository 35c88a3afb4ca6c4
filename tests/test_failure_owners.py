"""Who owns a failure on the loop (issue 47): a fault at every seam, in every state of a connection, then a collection.

One real server (the shipped dispatcher, the sandbox gateway) on 127.0.0.1:0 takes every case in
turn, as a process takes a port scanner's probes between its members' calls. Each case brings a
connection to one state of its life (accepted, its head arriving, its body arriving, its call
waiting on the gateway, its answer being written to a client that reads slowly, lingering after
a refusal, idle between requests, two pipelined calls behind a half-close), then strikes it: an
OSError from the one socket call armed (tests/seams.py: accept-time setsockopt and getpeername,
recv, send, write_eof's shutdown, close, and the SO_LINGER of a cut-off; the gateway connection's connect, send and
read; accept() itself fails in tests/test_http_loop.py's matrix), or
the client's reset. Then the cyclic collector runs (gc.collect(): issue 47's first finding was
an exception nobody retrieved, reported when the collector freed its task), and the server must
answer /healthz and a member's call, with nothing charged to the loop's handler as ownerless,
and every counter back at idle once the clients have gone.

The enumerated matrix runs every seam that can strike in each state; a property test then
throws random sequences of states, faults and errnos at the same server.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import json
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_server.core.context import RequestContext
from mcp_server.transports.http.connection import Connection
from mcp_server.transports.http.server import McpHTTPServer
from mcp_server.upstream import aio
from tests.mcp_http import MODERN, Raw
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.seams import ERRNOS, GATEWAY_SEAMS, FaultySocket, GatewayDialer, Listener, served
from tests.test_pacing import many_wagers

WAIT: Final = 10.0
MARK: Final = "x-seams-call"  # a header every call here carries, so its requests can be told apart
GATEWAY_DELAY: Final = 0.4  # the waiting state's call: long enough to strike it while it waits
WAGERS: Final = "/v1/member/wagers"
HEALTH: Final = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"


def call(message_id: int = 1, *, pad: int = 0) -> bytes:
    """A member's tools/call get_wagers, as a 2026-07-28 client sends it (`pad`: bytes of extra _meta)."""
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "seams", "version": "1"},
    }
    if pad:
        meta["pad"] = "x" * pad
    params = {"name": "get_wagers", "arguments": {}, "_meta": meta}
    body = json.dumps({"jsonrpc": "2.0", "id": message_id, "method": "tools/call", "params": params}).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        f"Authorization: Bearer {TOKEN_MEMBER_A}\r\nMCP-Protocol-Version: {MODERN}\r\n"
        f"Mcp-Method: tools/call\r\nMcp-Name: get_wagers\r\n{MARK}: 1\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def eventually(probe: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    end = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > end:
            raise AssertionError(f"never: {what}")
        time.sleep(0.005)


def reset(client: Raw) -> None:
    """Close with SO_LINGER 0: the server sees a reset, not an end."""
    try:
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    client.close()


def read_all(client: Raw) -> bytes:
    """Whatever the server sends until it closes (or the client's timeout)."""
    data = client.buffer
    try:
        while chunk := client.sock.recv(65536):
            data += chunk
    except OSError:
        pass
    return data


@dataclass
class Door:
    """The server under test and what strikes it."""

    server: McpHTTPServer
    listener: Listener
    dialer: GatewayDialer
    gateway: SandboxGateway

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def connection(self) -> Any:
        """The one connection the case holds (the checks run on connections of their own, after it)."""
        eventually(lambda: len(self.server._connections) == 1, "the case's connection is served")
        return next(iter(self.server._connections))

    def forget_gateway_connections(self) -> None:
        """Close the gateway connections the server's loop keeps pooled (on its thread, as it does)."""
        loop = self.server.loop
        assert loop is not None

        async def close() -> None:
            aio.close_pools(loop)

        asyncio.run_coroutine_threadsafe(close(), loop).result(WAIT)

    def accepted(self) -> FaultySocket:
        eventually(lambda: self.listener.last is not None, "a connection was accepted")
        last = self.listener.last
        assert last is not None
        return last


@pytest.fixture(scope="module")
def door() -> Iterator[Door]:
    with SandboxGateway() as gateway:
        with served(gateway.url, read_timeout=WAIT, write_timeout=WRITE_TIMEOUT) as (server, listener):
            eventually(lambda: server.loop is not None and server.guard is not None, "the loop runs")
            assert server.loop is not None
            dialer = GatewayDialer(server.loop)
            dialer.install()
            yield Door(server, listener, dialer, gateway)


# ---- the states of a connection's life, each reached from a fresh connection --------------------


def at_accept(door: Door, client: Raw) -> None:
    client.send(HEALTH)


def in_head(door: Door, client: Raw) -> None:
    client.send(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
    eventually(lambda: door.connection().reader.started, "the head began arriving")


def in_body(door: Door, client: Raw) -> None:
    whole = call()
    client.send(whole[: len(whole) - 20])
    eventually(lambda: door.server._inflight == 1, "the head was read and the body is awaited")


def waiting(door: Door, client: Raw) -> None:
    door.gateway.fault(WAGERS, "delay", seconds=GATEWAY_DELAY, times=1)
    seen = len(door.gateway.seen)
    client.send(call())
    eventually(lambda: len(door.gateway.seen) > seen, "the gateway has the call")


def calling(door: Door, client: Raw) -> None:
    client.send(call())  # its gateway connection is what the fault strikes


def writing(door: Door, client: Raw) -> None:
    # The server's sending buffer made small, and many answers asked for and none read: its
    # transport's buffer passes the high mark and the coroutine waits for the client to read.
    socket.socket.setsockopt(door.accepted(), socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    client.send(HEALTH * 4000)
    eventually(lambda: door.connection()._writing_paused, "the answers wait for the client to read")


def writing_large(door: Door, client: Raw) -> None:
    # One answer of megabytes, handed to the socket a slice at a time with a turn of the loop
    # between two (connection.respond): the coroutine waits, between slices, for the client to read.
    door.gateway.fault(WAGERS, "status", status=200, body=many_wagers(20_000), times=1)
    socket.socket.setsockopt(door.accepted(), socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    client.send(call())
    eventually(lambda: door.connection()._writing_paused, "the large answer waits for the client to read")


def lingering(door: Door, client: Raw) -> None:
    # A head the reader refuses, with a body declared: refused, then the sending half closed and
    # the rest read and dropped for a while (RFC 9112 §9.6).
    client.send(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\nBad Header\r\n\r\n" + b"x" * 100)
    eventually(lambda: door.connection().linger, "the refusal lingers")


def idle(door: Door, client: Raw) -> None:
    client.send(HEALTH)
    response = client.response()
    assert response is not None and response.status == 200
    eventually(lambda: door.connection().idle, "the connection waits, idle, for its next request")


def pipelined_half_closed(door: Door, client: Raw) -> None:
    client.send(call(1) + call(2))
    client.sock.shutdown(socket.SHUT_WR)


STATES: Final[dict[str, Callable[[Door, Raw], None]]] = {
    "accept": at_accept,
    "head": in_head,
    "body": in_body,
    "waiting": waiting,
    "calling": calling,
    "writing": writing,
    "writing a large answer": writing_large,
    "lingering": lingering,
    "idle": idle,
    "pipelined+half-close": pipelined_half_closed,
}

# What the client does next in each state, so that the armed call is made: the rest of its
# request, more bytes behind it, reading its answers; then it closes.
NEXT: Final[dict[str, bytes]] = {
    "accept": b"",
    "head": b"Bad Header\r\n\r\n",  # refused (400), closed in stages: a write, then write_eof
    "body": call()[-20:],
    "waiting": HEALTH,
    "calling": b"",
    "writing": b"",
    "writing a large answer": b"",
    "lingering": b"y" * 100,
    "idle": HEALTH,
    "pipelined+half-close": b"",
}

# The seams that strike in each state when the client goes on (accept-time ones are armed before
# the accept; the others once the state is reached).
SEAMS_IN: Final[dict[str, tuple[str, ...]]] = {
    "accept": ("getpeername", "close"),
    "head": ("recv_into", "send", "shutdown", "close"),
    "body": ("recv_into", "send", "close"),
    "waiting": ("recv_into", "send", "close"),
    "writing": ("send", "setsockopt", "close"),
    "writing a large answer": ("send", "setsockopt", "close"),
    "lingering": ("recv_into", "close"),
    "idle": ("recv_into", "send", "close"),
    "pipelined+half-close": ("send", "close"),
}
ARMED_AT_ACCEPT: Final = frozenset({"getpeername"})
# A client that never reads its answer is cut off at the answer's deadline, with a reset (SO_LINGER
# set on the socket first: the setsockopt seam).
WRITE_TIMEOUT: Final = 1.0


def strike(door: Door, state: str, fault: str, code: int) -> None:
    """Bring a fresh connection to `state`, then `fault` ("reset", a client seam, or "gateway:SEAM") with `code`."""
    gateway_seam = fault.removeprefix("gateway:") if fault.startswith("gateway:") else None
    client_seam = gateway_seam is None and fault != "reset"
    # States that go on by themselves (a request sent whole) are armed before the accept.
    early = client_seam and (fault in ARMED_AT_ACCEPT or state in ("accept", "calling", "pipelined+half-close"))
    if early:
        door.listener.arm_next(**{fault: code})
    if gateway_seam == "connect":
        door.forget_gateway_connections()  # so that the call dials one
    if gateway_seam is not None:
        for sock in door.dialer.dialed:
            if sock.fileno() >= 0:
                sock.faults = {gateway_seam: code}  # a pooled connection reused, or
        door.dialer.next = {gateway_seam: code}  # the next one dialed
    door.listener.last = None
    client = Raw(door.port, timeout=WAIT)
    try:
        STATES[state](door, client)
        accepted = door.accepted()
        if client_seam and not early:
            accepted.faults = {fault: code}
        if fault == "reset":
            reset(client)
            return
        if fault == "setsockopt":  # it reads nothing: cut off at the answer's deadline
            eventually(lambda: fault in accepted.struck, "the slow reader was cut off", timeout=WAIT)
        try:
            if NEXT[state]:
                client.send(NEXT[state])
            # Our end comes only once the fault struck (a call still waiting when the client's end
            # arrives is its leaving, and would be cancelled before the armed call is made); a
            # close strikes only once the connection ends, so its end comes first.
            if gateway_seam is not None:
                client.response()  # the call's answer: a tool error naming the gateway's failure
            elif client_seam and fault != "close":
                eventually(lambda: fault in accepted.struck, f"{fault} was called in state {state}")
            client.sock.shutdown(socket.SHUT_WR)  # nothing more: the server answers what it has, then closes
        except OSError:
            pass  # already cut off: what the fault cost
        read_all(client)
    finally:
        client.close()
    if client_seam:
        eventually(lambda: fault in accepted.struck, f"{fault} was called in state {state}", timeout=5)
    elif gateway_seam is not None:
        assert any(gateway_seam in sock.struck for sock in door.dialer.dialed), f"the gateway's {gateway_seam}"


def serves_on(door: Door) -> None:
    """After a collection: /healthz, a member's call, nothing ownerless, and every count back at idle."""
    gc.collect()
    client = Raw(door.port, timeout=WAIT)
    try:
        client.send(HEALTH)
        response = client.response()
        assert response is not None and response.status == 200
        client.send(call(7))
        response = client.response()
        assert response is not None and response.status == 200, response
        answer = json.loads(response.body)
        assert answer["id"] == 7 and answer["result"]["isError"] is False, answer
    finally:
        client.close()
    server = door.server
    assert server.fatal is None and server.guard is not None and server.guard.fatal is None
    assert server.guard.strays == 0, "a failure reached the loop's handler with no owner"
    eventually(lambda: server.admission.connections == 0 and server._inflight == 0, "every count back at idle")
    # A closed connection and every request are freed: nothing (a timer left set, a task, a cycle,
    # a pooled gateway connection's reader registered in a call's context) keeps one, or its bearer.
    eventually(lambda: _held(door) == 0, "every closed connection and every request freed")


def _held(door: Door) -> int:
    """This door's connections and requests still alive after a collection (other tests' in this
    process are not counted: a request of this file's carries its own header)."""
    _forget_captured_failures()
    gc.collect()
    return sum(
        1
        for found in gc.get_objects()
        if (type(found) is Connection and found.server is door.server)
        or (type(found) is RequestContext and found.http_headers is not None and MARK in found.http_headers)
    )


def _forget_captured_failures() -> None:
    """The records pytest keeps for its report, as text: a failure's record holds its traceback, and
    with it every frame it crossed (a transport, its connection). The server's own log writer drops
    each record once it has written it; pytest keeps them to the end of the test."""
    for handler in logging.getLogger().handlers:
        for record in getattr(handler, "records", ()):
            if record.exc_info or record.args:
                record.msg, record.args, record.exc_info = record.getMessage(), (), None


# ---- the matrix --------------------------------------------------------------------------------

CASES: Final = [
    *((state, "reset") for state in STATES if state not in ("accept", "calling")),
    *((state, seam) for state, seams in SEAMS_IN.items() for seam in seams),
    *(("calling", f"gateway:{seam}") for seam in GATEWAY_SEAMS),
]


@pytest.mark.parametrize(("state", "fault"), CASES, ids=[f"{s}-{f}" for s, f in CASES])
def test_a_fault_in_any_state_costs_that_connection_only(door: Door, state: str, fault: str) -> None:
    strike(door, state, fault, errno.EIO)
    serves_on(door)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(CASES), st.sampled_from(ERRNOS)), min_size=1, max_size=4))
def test_any_sequence_of_faults_leaves_the_server_serving(
    door: Door,
    faults: list[tuple[tuple[str, str], int]],
) -> None:
    for (state, fault), code in faults:
        strike(door, state, fault, code)
    serves_on(door)


# ---- the three findings, as they were seen from outside ----------------------------------------


def test_a_port_probe_then_a_burst_of_calls_leaves_the_server_serving(door: Door) -> None:
    # `echo > /dev/tcp/HOST/PORT`: a newline, then close. Its refusal meets a reset, write_eof raised
    # ENOTCONN out of run()'s finally, and the collector's report of it ended the process.
    for _ in range(20):
        probe = socket.create_connection(("127.0.0.1", door.port), timeout=WAIT)
        probe.sendall(b"\n")
        probe.close()
    gc.collect()
    door.gateway.fault(WAGERS, "delay", seconds=0.2, times=50)
    answers: list[int] = []

    def one(i: int) -> None:
        client = Raw(door.port, timeout=WAIT)
        try:
            client.send(call(i))
            response = client.response()
            answers.append(0 if response is None else response.status)
        finally:
            client.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    gc.collect()
    for thread in threads:
        thread.join(WAIT)
    assert answers == [200] * 50
    serves_on(door)


def test_two_pipelined_calls_behind_a_half_close_are_both_answered(door: Door) -> None:
    client = Raw(door.port, timeout=WAIT)
    try:
        client.send(call(1) + call(2))
        client.sock.shutdown(socket.SHUT_WR)
        first, second = client.response(), client.response()
    finally:
        client.close()
    assert first is not None and second is not None
    assert [json.loads(first.body)["id"], json.loads(second.body)["id"]] == [1, 2]
    assert json.loads(second.body)["result"]["isError"] is False
    serves_on(door)


def test_a_call_abandoned_while_it_waits_leaves_nothing_for_the_collector(door: Door) -> None:
    # Its cancellation's exceptions kept their tracebacks, whose frames held the connection, its
    # reader and the request's bytes: a cycle freed only by a collection, which came every ~2,300
    # calls (ops/heap.py), so memory grew with every call abandoned. Now nothing of it is cyclic.
    gc.collect()
    gc.disable()
    try:
        for _ in range(10):
            client = Raw(door.port, timeout=WAIT)
            waiting(door, client)
            reset(client)
        eventually(lambda: door.server.admission.connections == 0, "the abandoned connections closed")
        eventually(lambda: door.server._inflight == 0, "the abandoned calls ended")
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        kept = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    ours = kept & {"Connection", "RequestReader", "Exchange", "frame", "traceback", "coroutine", "Task"}
    assert not ours, f"an abandoned call left cyclic garbage holding {sorted(ours)}"
    assert not any(name.endswith("Error") or name == "Closed" for name in kept), sorted(kept)
