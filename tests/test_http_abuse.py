"""Hostile HTTP against a real server on 127.0.0.1:0: each abuse answered or dropped as HTTP says; others served.

The server runs with a short read_timeout (1 s), so a client that never finishes its request is
cut off quickly; every wait below is bounded, and the only timing asserted is "cut off within
the read timeout plus slack".
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.server import McpHTTPServer
from tests.mcp_http import Raw, Response, refusal
from tests.sandbox_gateway import SandboxGateway

READ_TIMEOUT = 1.0  # the server's budget for one whole request (line, headers, body)
SLACK = 2.0  # scheduling slack on a loaded CI machine
WAIT = 10.0  # the longest any socket operation here waits
PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


@contextmanager
def running(gateway_url: str | None = None, *, max_body: int = 1024 * 1024) -> Iterator[McpHTTPServer]:
    dispatcher = build_dispatcher(Config(api_url=gateway_url, timeout=5.0))
    policy = gate.Policy(loopback_bind=True, max_body=max_body)
    server = McpHTTPServer(
        ("127.0.0.1", 0), dispatcher, policy, read_timeout=READ_TIMEOUT, idle_timeout=READ_TIMEOUT * 2
    )
    before = set(threading.enumerate())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
        # Whatever a test did, no worker may still be held once its clients are gone.
        assert server.wait_idle(READ_TIMEOUT * 2 + SLACK), (
            f"{server.connection_count} connections still held after the clients left"
        )
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT)
    # Nor any thread of its own (workers, the disconnect watcher) once it is closed.
    for leftover in set(threading.enumerate()) - before:
        leftover.join(WAIT)
        assert not leftover.is_alive(), f"thread {leftover.name} outlived the server"


@pytest.fixture
def server() -> Iterator[McpHTTPServer]:
    with running() as srv:
        yield srv


def request(body: bytes, *, extra: bytes = b"", framing: bytes | None = None) -> bytes:
    if framing is None:
        framing = b"Content-Length: %d\r\n" % len(body)
    return (
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Accept: application/json\r\n" + framing + extra + b"\r\n" + body
    )


def ping(message_id: int = 1) -> bytes:
    return request(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % message_id)


def assert_serving(server: McpHTTPServer, message_id: int = 77) -> None:
    """A fresh client is answered at once: the abuse next door took nothing from it."""
    client = Raw(server.server_address[1])
    try:
        client.send(ping(message_id))
        answer = client.response()
    finally:
        client.close()
    assert answer is not None and answer.status == 200
    assert json.loads(answer.body) == {"jsonrpc": "2.0", "id": message_id, "result": {}}


def refused_and_closed(server: McpHTTPServer, data: bytes, *, half_close: bool = False) -> Response:
    client = Raw(server.server_address[1])
    try:
        client.send(data)
        if half_close:
            client.sock.shutdown(socket.SHUT_WR)
        answer = client.response()
        assert answer is not None, "the server dropped the connection without an answer"
        assert answer.headers.get("connection") == "close", answer
        assert client.closed()
        return answer
    finally:
        client.close()


# ---- the request line -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"POST /mcp HTTP/1.1 trailing\r\n\r\n", 400),
        (b"\x00\xff\xfe\r\n\r\n", 400),
        (b"POST /mcp\r\n\r\n", 400),  # HTTP/0.9 has no POST
        (b"GET /healthz\r\n\r\n", 400),  # nor is it spoken here at all
        (b"GET /healthz HTTP/1.x\r\n\r\n", 400),
        (b"GET /healthz HTTP/2.0\r\nHost: localhost\r\n\r\n", 505),
    ],
)
def test_an_invalid_request_line_is_answered_and_the_connection_closed(
    server: McpHTTPServer, line: bytes, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    answer = refused_and_closed(server, line)
    assert answer.status == status and refusal(answer.body)[0]
    assert_serving(server)
    assert not [r for r in caplog.records if r.levelname == "ERROR"], "an abuse is not a server error"


def test_a_request_line_over_64_kib_is_414_and_the_connection_closed(
    server: McpHTTPServer, caplog: pytest.LogCaptureFixture
) -> None:
    answer = refused_and_closed(server, b"GET /healthz?" + b"a" * (70 * 1024) + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert answer.status == 414
    assert_serving(server)
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


# ---- the header section -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        b"".join(b"X-Big-%d: %s\r\n" % (i, b"v" * 8000) for i in range(9)),  # 72 KB in nine lines
        b"X-One: " + b"v" * (65 * 1024) + b"\r\n",  # one line over the whole budget
        b"".join(b"X-Mid-%02d: %s\r\n" % (i, b"v" * 1000) for i in range(70)),  # 70 KB, under 100 lines
    ],
    ids=["nine-large-lines", "one-huge-line", "seventy-lines"],
)
def test_a_header_section_over_64_kib_is_431_and_the_connection_closed(server: McpHTTPServer, headers: bytes) -> None:
    answer = refused_and_closed(server, request(PING, extra=headers))
    assert answer.status == 431
    assert_serving(server)


def test_ten_thousand_headers_are_431_and_the_connection_closed(server: McpHTTPServer) -> None:
    headers = b"".join(b"X-%d: v\r\n" % i for i in range(10_000))
    answer = refused_and_closed(server, request(PING, extra=headers))
    assert answer.status == 431
    assert_serving(server)


@pytest.mark.parametrize(
    "extra",
    [
        # A bare CR: a proxy sees one header, a lenient parser two (RFC 9112 §2.2: reject or replace).
        b"X-Note: a\rContent-Length: 0\r\n",
        # Whitespace between a field name and its colon (RFC 9112 §5.1: MUST be rejected with 400).
        b"Content-Type : text/plain\r\n",
        b"X-No-Colon-Here\r\n",
        b"X-Nul: a\x00b\r\n",
        b" folded-continuation\r\n",  # obs-fold (RFC 9112 §5.2: reject or replace; rejected here)
    ],
    ids=["bare-cr", "space-before-colon", "no-colon", "nul", "obs-fold"],
)
def test_a_malformed_header_line_is_400_and_its_body_is_never_run_as_a_request(
    server: McpHTTPServer, extra: bytes
) -> None:
    smuggled = ping(666)
    answer = refused_and_closed(server, request(smuggled, extra=extra))
    assert answer.status == 400
    assert b"666" not in answer.body
    assert_serving(server)


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: 5\r\nContent-Length: 5\r\n",
        b"Content-Length: +40\r\n",
        b"Content-Length: 40, 40\r\n",
        b"Content-Length: 0x28\r\n",
        b"Transfer-Encoding: chunked\r\nContent-Length: 40\r\n",
        b"Transfer-Encoding: gzip, chunked\r\n",
        b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
    ],
)
def test_ambiguous_framing_is_400_and_the_connection_closed(server: McpHTTPServer, framing: bytes) -> None:
    answer = refused_and_closed(server, request(PING, framing=framing))
    assert answer.status == 400
    assert_serving(server)


def test_a_content_length_of_absurd_size_is_413_without_reading_it(server: McpHTTPServer) -> None:
    answer = refused_and_closed(server, request(b"", framing=b"Content-Length: 99999999999999999999999999\r\n"))
    assert answer.status == 413


# ---- bodies -------------------------------------------------------------------------------------


def test_a_content_length_shorter_than_the_body_frames_the_rest_as_the_next_request(server: McpHTTPServer) -> None:
    # The server cannot know the client lied: it reads exactly Content-Length bytes, and what
    # follows is the next request on the connection (RFC 9112 §6.3), answered in its turn.
    first = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    client = Raw(server.server_address[1])
    try:
        client.send(request(first, framing=b"Content-Length: 20\r\n") + ping(2))
        truncated = client.response()
        leftover = client.response()
        assert truncated is not None and truncated.status == 400
        assert json.loads(truncated.body)["error"]["code"] == -32700 and json.loads(truncated.body)["id"] is None
        # The rest of the first body is not an HTTP request: refused, and the connection closed.
        assert leftover is not None and leftover.status == 400 and leftover.headers.get("connection") == "close"
        assert client.closed()
    finally:
        client.close()
    assert_serving(server)


def test_a_content_length_longer_than_the_body_is_cut_off_with_408_while_others_are_served(
    server: McpHTTPServer,
) -> None:
    client = Raw(server.server_address[1])
    try:
        started = time.monotonic()
        client.send(request(PING, framing=b"Content-Length: 100\r\n"))
        assert_serving(server)  # while that one waits for 60 bytes that never come
        answer = client.response()
        waited = time.monotonic() - started
        assert answer is not None and answer.status == 408 and answer.headers.get("connection") == "close"
        assert client.closed()
    finally:
        client.close()
    assert waited < READ_TIMEOUT + SLACK


@pytest.mark.parametrize("how", ["half-close", "close"])
def test_a_body_that_stops_halfway_frees_the_worker_and_runs_nothing(
    server: McpHTTPServer, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    body = b'{"jsonrpc":"2.0","id":5,"method":"tools/list"}'
    client = Raw(server.server_address[1])
    try:
        client.send(request(body)[: -len(body) // 2])
        if how == "half-close":
            client.sock.shutdown(socket.SHUT_WR)
            # Nothing of an incomplete request is answered as if it were whole.
            assert client.response() is None
    finally:
        client.close()
    assert server.wait_idle(SLACK), "the worker is still waiting for a body that will never come"
    assert_serving(server)
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_a_slowloris_client_is_cut_off_within_the_read_timeout_while_others_are_served(server: McpHTTPServer) -> None:
    data = ping(3)
    slow = Raw(server.server_address[1])
    cut = threading.Event()
    sent: list[int] = []

    def trickle() -> None:
        # One byte at a time, paced so the whole request needs about 10x the read timeout.
        for i in range(len(data)):
            try:
                slow.sock.send(data[i : i + 1])
            except OSError:
                break
            sent.append(i)
            if cut.wait(READ_TIMEOUT * 10 / len(data)):
                break

    started = time.monotonic()
    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        served = 0
        for n in range(20):
            assert_serving(server, message_id=100 + n)
            served += 1
        answer = slow.response()
        waited = time.monotonic() - started
        cut.set()
        thread.join(WAIT)
    finally:
        cut.set()
        slow.close()
    assert served == 20
    assert answer is None or answer.status == 408
    assert waited < READ_TIMEOUT + SLACK
    assert len(sent) < len(data), "the slow request should never have been read whole"


def test_many_slowloris_clients_are_all_cut_off_and_service_continues(server: McpHTTPServer) -> None:
    clients = [Raw(server.server_address[1]) for _ in range(40)]
    try:
        for client in clients:
            client.send(b"POST /mcp HTTP/1.1\r\nHost: local")
        started = time.monotonic()
        for client in clients:
            answer = client.response()
            assert answer is None or answer.status in (408, 429, 503)  # 429: over the per-peer cap on unfinished heads
            assert client.closed()
        waited = time.monotonic() - started
    finally:
        for client in clients:
            client.close()
    assert waited < READ_TIMEOUT + SLACK
    assert_serving(server)


def test_an_idle_connection_is_closed_quietly(server: McpHTTPServer) -> None:
    client = Raw(server.server_address[1])
    try:
        client.send(ping(1))
        assert client.response() is not None
        # No byte of a next request: closing without a 408 is what keep-alive clients expect.
        assert client.response() is None
    finally:
        client.close()


def test_a_kept_alive_connection_gets_its_whole_idle_limit_after_every_answer(server: McpHTTPServer) -> None:
    # The idle limit counts from the last answer: a client that comes back within it, again and
    # again for longer than the limit in all, is answered each time on the same connection (the
    # connection's one timer, set for an earlier limit, is moved on), and is then closed one
    # idle limit after its last answer, not before.
    idle = READ_TIMEOUT * 2
    client = Raw(server.server_address[1])
    try:
        for n in range(4):
            if n:
                time.sleep(idle * 0.6)
            client.send(ping(n + 1))
            answer = client.response()
            assert answer is not None and answer.status == 200, n
        answered = time.monotonic()
        assert client.response() is None
        waited = time.monotonic() - answered
    finally:
        client.close()
    assert idle * 0.9 <= waited < idle + SLACK


# ---- chunked bodies -----------------------------------------------------------------------------


def chunked(*chunks: bytes, trailer: bytes = b"") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n" + trailer + b"\r\n"


def test_a_chunked_body_is_read_whole_in_any_split(server: McpHTTPServer) -> None:
    pieces = [PING[i : i + 3] for i in range(0, len(PING), 3)]
    client = Raw(server.server_address[1])
    try:
        client.send(request(chunked(*pieces), framing=b"Transfer-Encoding: chunked\r\n"))
        one = client.response()
        extended = b"%x;name=value\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n" % (len(PING), PING)
        client.send(request(extended, framing=b"Transfer-Encoding: chunked\r\n"))
        two = client.response()
    finally:
        client.close()
    assert one is not None and one.status == 200 and json.loads(one.body)["result"] == {}
    assert two is not None and two.status == 200 and json.loads(two.body)["result"] == {}


def test_a_chunked_body_over_the_limit_is_413_and_closed() -> None:
    with running(max_body=1024) as server:
        answer = refused_and_closed(
            server, request(chunked(b"x" * 800, b"x" * 800), framing=b"Transfer-Encoding: chunked\r\n")
        )
        assert answer.status == 413
        huge = b"ffffffffffffffffff\r\n"  # a size no one means: refused before a byte of it is read
        answer = refused_and_closed(server, request(huge, framing=b"Transfer-Encoding: chunked\r\n"))
        assert answer.status in (400, 413)


@pytest.mark.parametrize(
    "body",
    [
        b"zz\r\n{}\r\n0\r\n\r\n",
        b"-5\r\n{}\r\n0\r\n\r\n",
        b"0x2\r\n{}\r\n0\r\n\r\n",
        b"+2\r\n{}\r\n0\r\n\r\n",
        b"\r\n{}\r\n0\r\n\r\n",
        b"2\r\n{}XX0\r\n\r\n",
    ],
    ids=["not-hex", "negative", "0x-prefix", "plus-sign", "empty-size", "no-crlf-after-data"],
)
def test_a_malformed_chunk_is_400_and_closed(server: McpHTTPServer, body: bytes) -> None:
    answer = refused_and_closed(server, request(body, framing=b"Transfer-Encoding: chunked\r\n"))
    assert answer.status == 400
    assert_serving(server)


def test_a_chunked_body_that_stops_midway_runs_nothing(server: McpHTTPServer) -> None:
    client = Raw(server.server_address[1])
    try:
        client.send(request(b"%x\r\n%s" % (len(PING), PING[:10]), framing=b"Transfer-Encoding: chunked\r\n"))
        client.sock.shutdown(socket.SHUT_WR)
        assert client.response() is None
    finally:
        client.close()
    assert_serving(server)


# ---- pipelining and Expect ---------------------------------------------------------------------


def test_pipelined_requests_are_answered_in_order_on_one_connection(server: McpHTTPServer) -> None:
    notification = request(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    refused = request(b"{}", extra=b"").replace(b"application/json\r\nAccept", b"text/plain\r\nAccept")
    tools = request(b'{"jsonrpc":"2.0","id":"two","method":"tools/list"}')
    client = Raw(server.server_address[1])
    try:
        client.send(ping(1) + tools + notification + refused + ping(5))
        answers = [client.response() for _ in range(5)]
    finally:
        client.close()
    assert [a.status if a else None for a in answers] == [200, 200, 202, 415, 200]
    assert json.loads(answers[0].body)["id"] == 1  # type: ignore[union-attr]
    assert json.loads(answers[1].body)["id"] == "two"  # type: ignore[union-attr]
    assert answers[2].body == b""  # type: ignore[union-attr]
    assert json.loads(answers[4].body)["id"] == 5  # type: ignore[union-attr]


def test_a_request_pipelined_behind_a_slow_call_does_not_cancel_it(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "delay", seconds=0.5, times=1)
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_gateway_status","arguments":{}}}'
    with running(sandbox.url) as server:
        client = Raw(server.server_address[1])
        try:
            client.send(request(call) + ping(2))
            first, second = client.response(), client.response()
        finally:
            client.close()
    assert first is not None and json.loads(first.body)["result"]["isError"] is False
    assert second is not None and json.loads(second.body) == {"jsonrpc": "2.0", "id": 2, "result": {}}


def test_expect_100_continue_is_only_promised_when_the_body_is_wanted(server: McpHTTPServer) -> None:
    client = Raw(server.server_address[1])
    try:
        client.send(request(b"", framing=b"Content-Length: %d\r\nExpect: 100-continue\r\n" % (2 * 1024 * 1024)))
        refused = client.response()
        assert refused is not None and refused.status == 413  # no 100 first: the body is not wanted
        assert client.closed()
    finally:
        client.close()
    client = Raw(server.server_address[1])
    try:
        client.send(request(b"", framing=b"Content-Length: %d\r\nExpect: 100-continue\r\n" % len(PING)))
        interim = client.response()
        assert interim is not None and interim.status == 100
        client.send(PING)
        final = client.response()
    finally:
        client.close()
    assert final is not None and final.status == 200 and json.loads(final.body)["result"] == {}
