"""One framing for every request (issue 12): every path and method, a real server on 127.0.0.1:0.

A request's framing is decided once, from its head, before any route runs: a declared body is read
and dropped (within the POST /mcp limits) or the connection is closed after the answer, so no
byte of a body is ever read as a request. Every refusal is an answer: a 4xx naming the problem,
never a traceback, a silent close or an ERROR log line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.server import McpHTTPServer
from tests.mcp_http import Raw, Response, refusal, serving

PING = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}'
MIB = 1024 * 1024


@contextmanager
def running(**options: Any) -> Iterator[McpHTTPServer]:
    policy = gate.Policy(loopback_bind=True, max_body=MIB)
    with serving(build_dispatcher(Config()), policy, read_timeout=5.0, idle_timeout=5.0, **options) as server:
        yield server


@pytest.fixture
def server() -> Iterator[McpHTTPServer]:
    with running() as srv:
        yield srv


@pytest.fixture(autouse=True)
def no_error_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Client input never makes the server log an ERROR (a traceback is a bug, not an answer)."""
    with caplog.at_level(logging.DEBUG, logger="fairwins_mcp"):
        yield
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, f"client input logged an error: {errors[0].getMessage()}"


def ping(message_id: int) -> bytes:
    body = PING % message_id
    return (
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def exchange(server: McpHTTPServer, data: bytes, count: int = 1, *, head: bool = False) -> list[Response | None]:
    """Send `data` on one connection and read `count` answers (None for each one the connection closed before)."""
    client = Raw(server.server_address[1])
    try:
        client.send(data)
        answers = [client.response(head=head and i == 0) for i in range(count)]
    finally:
        client.close()
    return answers


def answered_ping(answer: Response | None, message_id: int) -> bool:
    return answer is not None and answer.status == 200 and json.loads(answer.body).get("id") == message_id


def refused_and_closed(server: McpHTTPServer, data: bytes, status: int) -> Response:
    client = Raw(server.server_address[1])
    try:
        client.send(data)
        answer = client.response()
        assert answer is not None, "the server dropped the connection without an answer"
        assert answer.status == status, (answer.status, answer.body)
        assert answer.headers.get("connection") == "close", answer
        assert refusal(answer.body)[0], answer.body
        assert client.closed()
        return answer
    finally:
        client.close()


# ---- the desync: a body no route wanted, read as the next request ---------------------------------

SMUGGLED = ping(666)  # a whole request, hidden in a body

ROUTES = [
    ("GET", "/healthz", 200),
    ("HEAD", "/healthz", 200),
    ("OPTIONS", "/mcp", 204),
    ("GET", "/mcp", 405),
    ("DELETE", "/mcp", 405),
    ("PUT", "/mcp", 405),
    ("POST", "/healthz", 405),
    ("POST", "/elsewhere", 404),
    ("GET", "/", 404),
]


def in_a_body(framing: str, data: bytes) -> tuple[bytes, bytes]:
    """(the framing header line, the body) carrying `data` as a Content-Length or a chunked body."""
    if framing == "length":
        return b"Content-Length: %d\r\n" % len(data), data
    return b"Transfer-Encoding: chunked\r\n", b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)


@pytest.mark.parametrize("framing", ["length", "chunked"])
@pytest.mark.parametrize(("method", "path", "status"), ROUTES)
def test_a_body_on_any_route_is_dropped_never_run_as_a_request(
    server: McpHTTPServer, method: str, path: str, status: int, framing: str
) -> None:
    header, body = in_a_body(framing, SMUGGLED)
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n".encode() + header + b"\r\n"
    first, second = exchange(server, head + body + ping(2), 2, head=method == "HEAD")
    assert first is not None and first.status == status
    assert b"666" not in first.body
    # The connection stayed in step: the next answer is the next request's, not the smuggled one's.
    assert answered_ping(second, 2), second


@pytest.mark.parametrize(("method", "path", "_status"), ROUTES)
def test_a_body_over_the_limit_on_any_route_closes_the_connection_after_the_answer(
    server: McpHTTPServer, method: str, path: str, _status: int
) -> None:
    # Not read (it is over what POST /mcp may send): the answer says Connection: close, and
    # nothing after it on the connection is ever read as a request.
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {2 * MIB}\r\n\r\n".encode()
    client = Raw(server.server_address[1])
    try:
        client.send(head + SMUGGLED)
        answer = client.response(head=method == "HEAD")
        assert answer is not None and answer.headers.get("connection") == "close"
        assert b"666" not in answer.body
        assert client.closed()
    finally:
        client.close()


@pytest.mark.parametrize(("method", "path", "_status"), [*ROUTES, ("POST", "/mcp", 0)])
@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: 41\r\nTransfer-Encoding: chunked\r\n",
        b"Transfer-Encoding: chunked\r\nContent-Length: 41\r\n",
        b"Content-Length: 41\r\nContent-Length: 41\r\n",
        b"Content-Length: 41, 41\r\n",
        b"Content-Length: +41\r\n",
        b"Content-Length: \xc2\xb2\r\n",  # a superscript two: str.isdigit() says yes, int() says no
        b"Content-Length: \xd9\xa4\r\n",  # an Arabic-Indic four
        b"Transfer-Encoding: gzip, chunked\r\n",
        b"Transfer-Encoding: chunked, gzip\r\n",
        b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        b"Transfer-Encoding: \x0bchunked\r\n",
    ],
    ids=[
        "cl-then-te",
        "te-then-cl",
        "two-cl",
        "cl-list",
        "cl-plus",
        "cl-superscript-two",
        "cl-arabic-four",
        "te-gzip-chunked",
        "te-chunked-gzip",
        "two-te",
        "te-vertical-tab",
    ],
)
def test_ambiguous_framing_is_400_and_closed_on_every_route(
    server: McpHTTPServer, method: str, path: str, _status: int, framing: bytes
) -> None:
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n".encode() + framing + b"\r\n"
    refused_and_closed(server, head + SMUGGLED, 400)


# ---- hostile values: each has a rule, and the rule answers -----------------------------------------


@pytest.mark.parametrize("origin", ["http://[::1", "http://]", "http://[::1]:99999", "http://[zz::1]", "http://a b"])
def test_an_origin_the_url_parser_rejects_is_403_with_an_answer(server: McpHTTPServer, origin: str) -> None:
    body = PING % 5
    data = (
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nOrigin: %s\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (origin.encode(), len(body), body)
    )
    (answer,) = exchange(server, data)
    assert answer is not None and answer.status == 403
    assert refusal(answer.body)[0] == "origin_not_allowed"


@pytest.mark.parametrize("version", [b"HTTP/1.10", b"HTTP/01.1", b"HTTP/1.1.1", b"HTTP/1", b"http/1.1", b"HTTP/1.1 "])
def test_an_odd_version_is_400(server: McpHTTPServer, version: bytes) -> None:
    refused_and_closed(server, b"GET /healthz " + version + b"\r\nHost: localhost\r\n\r\n", 400)


@pytest.mark.parametrize("version", [b"HTTP/2.0", b"HTTP/3.0", b"HTTP/0.9"])
def test_a_version_this_port_does_not_speak_is_505(server: McpHTTPServer, version: bytes) -> None:
    refused_and_closed(server, b"GET /healthz " + version + b"\r\nHost: localhost\r\n\r\n", 505)


def test_http_1_0_with_transfer_encoding_is_faulty_framing_400_and_closed(server: McpHTTPServer) -> None:
    # RFC 9112 §6.1: "A server or client that receives an HTTP/1.0 message containing a
    # Transfer-Encoding header field MUST treat the message as if the framing is faulty ... and
    # close the connection after processing the message."
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(SMUGGLED), SMUGGLED)
    refused_and_closed(server, b"POST /mcp HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n" + body, 400)


def test_http_1_0_is_served_and_closed_unless_it_asks_for_keep_alive(server: McpHTTPServer) -> None:
    body = PING % 8
    data = (
        b"POST /mcp HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (
            len(body),
            body,
        )
    )
    client = Raw(server.server_address[1])
    try:
        client.send(data)
        answer = client.response()
        assert answered_ping(answer, 8)
        assert client.closed()
    finally:
        client.close()


def test_one_empty_line_before_the_request_line_is_ignored(server: McpHTTPServer) -> None:
    # RFC 9112 §2.2: "a server that is expecting to receive and parse a request-line SHOULD
    # ignore at least one empty line (CRLF) received prior to the request-line."
    first, second = exchange(server, ping(1) + b"\r\n" + ping(2), 2)
    assert answered_ping(first, 1) and answered_ping(second, 2)


def test_more_than_one_empty_line_before_the_request_line_is_400(server: McpHTTPServer) -> None:
    refused_and_closed(server, b"\r\n\r\n" + ping(1), 400)


@pytest.mark.parametrize(
    "line",
    [
        b"GET  /healthz HTTP/1.1",  # two spaces
        b"GET /healthz  HTTP/1.1",
        b" GET /healthz HTTP/1.1",
        b"GET\t/healthz HTTP/1.1",
        b"GET /health\x7fz HTTP/1.1",
        b"GET /h\xc3\xa9 HTTP/1.1",  # a request target is ASCII
        b"GET healthz HTTP/1.1",  # neither origin-form nor absolute-form
    ],
)
def test_a_request_line_off_the_grammar_is_400(server: McpHTTPServer, line: bytes) -> None:
    refused_and_closed(server, line + b"\r\nHost: localhost\r\n\r\n", 400)


def test_a_bare_lf_line_ending_is_400(server: McpHTTPServer) -> None:
    refused_and_closed(server, b"GET /healthz HTTP/1.1\nHost: localhost\n\n", 400)


def chunked_ping(size_line: bytes, message_id: int = 9) -> bytes:
    body = PING % message_id
    return (
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + size_line % len(body) + b"\r\n" + body + b"\r\n0\r\n\r\n"
    )


@pytest.mark.parametrize(
    "size_line", [b"%x;name=value", b"%x;name", b'%x;name="quoted; \\"value\\""', b"%x ; a=1 ; b", b"%X"]
)
def test_chunk_extensions_by_the_grammar_are_ignored(server: McpHTTPServer, size_line: bytes) -> None:
    (answer,) = exchange(server, chunked_ping(size_line))
    assert answered_ping(answer, 9), answer


@pytest.mark.parametrize(
    "size_line",
    [
        b"%x;",
        b"%x;=value",
        b"%x;name=",
        b'%x;name="unterminated',
        b"%x;na me=v",
        b"%x;name=\x01",
        b"%x;" + b"a" * 2000,
        b"%x\n",
        b"0x%x",
    ],
    ids=["empty", "no-name", "no-value", "open-quote", "space-in-name", "control", "too-long", "bare-lf", "0x"],
)
def test_chunk_extensions_off_the_grammar_are_400(server: McpHTTPServer, size_line: bytes) -> None:
    refused_and_closed(server, chunked_ping(size_line), 400)


# ---- trailers: read to their end, never the start of the next request ---------------------------


def chunked_ping_with_trailers(trailers: bytes, message_id: int) -> bytes:
    body = PING % message_id
    return (
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n%s\r\n" % (len(body), body, trailers)
    )


@pytest.mark.parametrize(
    "trailers",
    [b"", b"X-Trailer: t\r\n", b"X-One: 1\r\nX-Two:\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"],
    ids=["none", "one", "framing-names"],
)
def test_a_request_pipelined_after_trailers_is_answered_in_step(server: McpHTTPServer, trailers: bytes) -> None:
    # Trailer fields are read past, never acted on (a framing name in them frames nothing), and
    # the next request on the connection starts where they end.
    first, second, third = exchange(
        server, chunked_ping_with_trailers(trailers, 9) + chunked_ping_with_trailers(trailers, 10) + ping(11), 3
    )
    assert answered_ping(first, 9), first
    assert answered_ping(second, 10), second
    assert answered_ping(third, 11), third


@pytest.mark.parametrize(
    "trailers",
    [
        b"Bad Trailer\r\n",
        b"X-T: a\x01b\r\n",
        b"POST /mcp HTTP/1.1\r\n",
        b"".join(b"X-T%d: %s\r\n" % (i, b"v" * 1000) for i in range(70)),
    ],
    ids=["space-in-name", "control", "a-request-line", "over-64-kib"],
)
def test_trailers_off_the_grammar_or_over_64_kib_are_400_and_closed(server: McpHTTPServer, trailers: bytes) -> None:
    answer = refused_and_closed(server, chunked_ping_with_trailers(trailers, 9) + ping(10), 400)
    assert refusal(answer.body)[0] == "bad_framing"


# ---- reads: one receive buffer serves every connection on the loop ----------------------------------


def test_requests_larger_than_one_read_sent_interleaved_from_many_connections_are_each_answered_as_sent(
    server: McpHTTPServer,
) -> None:
    # The loop reads every socket into one buffer (upstream/receiving.py). Bodies of a few reads
    # each, sent in pieces that alternate between connections, must each reach their own
    # request whole: a byte kept by reference instead of copied would be overwritten by the next
    # connection's read, and the request would fail to parse or answer with another's id.
    port = server.server_address[1]
    clients = [Raw(port) for _ in range(6)]
    try:
        wires = []
        for i, _ in enumerate(clients):
            body = b'{"jsonrpc":"2.0","id":%d,"method":"ping"%s}' % (100 + i, b" " * (150_000 + 7_919 * i))
            wires.append(
                b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b"Accept: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
        piece = 40_000
        for start in range(0, max(len(w) for w in wires), piece):
            for client, wire in zip(clients, wires, strict=True):
                if start < len(wire):
                    client.send(wire[start : start + piece])
        for i, client in enumerate(clients):
            answer = client.response()
            assert answered_ping(answer, 100 + i), answer
    finally:
        for client in clients:
            client.close()
