"""HTTP/1.1 under the gateway seam: framing, caps and keep-alive, read by the client's connection over socket pairs."""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Iterator

import pytest

from mcp_server.upstream import http1
from mcp_server.upstream.exchange import tunnel_request
from mcp_server.upstream.gateway import Gateway, GatewayFailure, GatewayRequest, GatewayResponse, parse_base_url
from tests.gateway_drivers import ClientEnd
from tests.sandbox_gateway import SandboxGateway

MAX_HEAD = 64 * 1024
MAX_BODY = 1024 * 1024


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, ClientEnd]]:
    """(the server's end, the client's connection on the other end) of a connected socket pair."""
    server, client = socket.socketpair()
    server.settimeout(5)
    conn = ClientEnd(client)
    try:
        yield server, conn
    finally:
        server.close()
        conn.end()


def answer(
    pair: tuple[socket.socket, ClientEnd],
    data: bytes,
    *,
    close: bool = False,
    max_body: int = MAX_BODY,
) -> http1.Response:
    server, conn = pair
    server.sendall(data)
    if close:
        server.shutdown(socket.SHUT_WR)
    return conn.read_response(MAX_HEAD, max_body)


def test_a_content_length_body_is_read_whole_and_the_connection_kept(pair) -> None:  # type: ignore[no-untyped-def]
    resp = answer(pair, b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}')
    assert (resp.status, resp.body, resp.keep_alive) == (200, b'{"ok":true}', True)
    assert resp.headers == (("Content-Type", "application/json"), ("Content-Length", "11"))


def test_header_names_keep_their_case_and_values_lose_surrounding_whitespace(pair) -> None:  # type: ignore[no-untyped-def]
    resp = answer(pair, b"HTTP/1.1 402 Payment Required\r\nPAYMENT-REQUIRED:  abc \t\r\nContent-Length: 0\r\n\r\n")
    assert resp.status == 402 and resp.headers[0] == ("PAYMENT-REQUIRED", "abc")


def test_a_chunked_body_is_joined_and_its_trailers_read_past(pair) -> None:  # type: ignore[no-untyped-def]
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    data = head + b"4;ext=1\r\n[1,2\r\n2\r\n,3\r\n1\r\n]\r\n0\r\nX-T: 1\r\n\r\n"
    resp = answer(pair, data)
    assert (resp.body, resp.keep_alive) == (b"[1,2,3]", True)


def test_a_body_without_a_length_ends_with_the_connection_and_is_not_kept(pair) -> None:  # type: ignore[no-untyped-def]
    resp = answer(pair, b"HTTP/1.1 200 OK\r\n\r\n[1,2,3]", close=True)
    assert (resp.body, resp.keep_alive) == (b"[1,2,3]", False)


@pytest.mark.parametrize(
    ("head", "kept"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\n", False),
        (b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\n", False),
        (b"HTTP/1.0 200 OK\r\n", False),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n", True),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n", False),
    ],
    ids=["close", "close-in-a-list", "http/1.0", "http/1.0-keep-alive", "two-framings"],
)
def test_the_answer_decides_whether_the_connection_is_kept(pair, head: bytes, kept: bool) -> None:  # type: ignore[no-untyped-def]
    body = b"2\r\nok\r\n0\r\n\r\n" if b"chunked" in head else b"ok"
    if b"Content-Length" not in head:
        head += b"Content-Length: 2\r\n"
    resp = answer(pair, head + b"\r\n" + body)
    assert resp.body == b"ok" and resp.keep_alive is kept


def test_interim_answers_are_skipped_and_the_final_one_returned(pair) -> None:  # type: ignore[no-untyped-def]
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n"
    resp = answer(pair, interim + b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}")
    assert (resp.status, resp.body) == (201, b"{}")


@pytest.mark.parametrize("status", [204, 304])
def test_statuses_without_a_body_read_none(pair, status: int) -> None:  # type: ignore[no-untyped-def]
    resp = answer(pair, f"HTTP/1.1 {status} X\r\n\r\n".encode())
    assert resp.body == b"" and resp.keep_alive is True


def test_a_redirect_is_returned_as_data_with_its_location(pair) -> None:  # type: ignore[no-untyped-def]
    resp = answer(pair, b"HTTP/1.1 302 Found\r\nLocation: http://elsewhere/\r\nContent-Length: 0\r\n\r\n")
    assert resp.status == 302 and ("Location", "http://elsewhere/") in resp.headers


def test_bare_line_feeds_and_folded_headers_are_read(pair) -> None:  # type: ignore[no-untyped-def]
    resp = answer(pair, b"HTTP/1.1 200 OK\nX-Long: a\n  b\nContent-Length: 2\n\nok")
    assert resp.headers[0] == ("X-Long", "a b") and resp.body == b"ok"


def test_bytes_past_the_answer_mean_the_connection_is_not_kept(pair) -> None:  # type: ignore[no-untyped-def]
    resp = answer(pair, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n")
    assert resp.body == b"ok" and resp.keep_alive is False


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/2 200 OK\r\n\r\n",
        b"ICY 200 OK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 099 Low\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n folded first\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nok\r\n0\r\n\r\n",
    ],
    ids=[
        "http2",
        "not-http",
        "four-digits",
        "letters",
        "below-100",
        "no-colon",
        "fold-first",
        "two-lengths-in-one",
        "two-lengths",
        "negative-length",
        "0x-chunk",
        "signed-chunk",
        "chunk-longer-than-size",
    ],
)
def test_answers_that_are_not_well_formed_http_are_refused(pair, data: bytes) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(http1.ProtocolError):
        answer(pair, data, close=True)


def test_a_repeated_identical_content_length_is_one_length(pair) -> None:  # type: ignore[no-untyped-def]
    resp = answer(pair, b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok")
    assert resp.body == b"ok"


def test_a_head_over_the_cap_is_refused_without_waiting_for_its_end(pair) -> None:  # type: ignore[no-untyped-def]
    server, conn = pair
    server.sendall(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 70_000 + b"\r\n")
    with pytest.raises(http1.HeadTooLarge):
        conn.read_response(MAX_HEAD, MAX_BODY)


def test_a_content_length_over_the_cap_is_refused_before_the_body_is_read(pair) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(http1.BodyTooLarge):
        answer(pair, b"HTTP/1.1 200 OK\r\nContent-Length: 1025\r\n\r\n", max_body=1024)


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + b"a" * 1024 + b"\r\n1\r\na\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n\r\n" + b"a" * 1025,
    ],
    ids=["chunked", "until-close"],
)
def test_a_body_found_over_the_cap_while_reading_is_refused(pair, data: bytes) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(http1.BodyTooLarge):
        answer(pair, data, close=True, max_body=1024)


def test_a_body_exactly_at_the_cap_is_read(pair) -> None:  # type: ignore[no-untyped-def]
    resp = answer(pair, b"HTTP/1.1 200 OK\r\n\r\n" + b"a" * 1024, close=True, max_body=1024)
    assert len(resp.body) == 1024


@pytest.mark.parametrize(
    ("data", "partial"),
    [
        (b"", False),
        (b"HTTP/1.1 200 OK\r\nContent-Le", True),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n[1,2", True),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n[1", True),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n", True),
    ],
    ids=["nothing", "mid-head", "short-body", "mid-chunk", "no-last-chunk"],
)
def test_an_answer_cut_short_is_never_returned(pair, data: bytes, partial: bool) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(http1.Closed) as caught:
        answer(pair, data, close=True)
    assert caught.value.partial is partial
    assert isinstance(caught.value, ConnectionResetError)


def test_a_large_body_arriving_in_pieces_is_read_whole(pair) -> None:  # type: ignore[no-untyped-def]
    server, conn = pair
    body = bytes(range(256)) * 4096  # 1 MiB
    writer = threading.Thread(
        target=lambda: server.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    )
    writer.start()
    try:
        resp = conn.read_response(MAX_HEAD, 2 * len(body))
    finally:
        writer.join(10)
    assert resp.body == body


def test_two_answers_on_one_connection_are_read_in_turn(pair) -> None:  # type: ignore[no-untyped-def]
    server, conn = pair
    server.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na")
    first = conn.read_response(MAX_HEAD, MAX_BODY)
    server.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nb")
    second = conn.read_response(MAX_HEAD, MAX_BODY)
    assert (first.status, first.body, second.status, second.body) == (200, b"a", 404, b"b")


def test_a_request_leaves_as_one_well_formed_message() -> None:
    data = http1.encode_request(
        "POST", "/v1/x?q=a%20b", [("Host", "gw.test"), ("Accept", "application/json")], b'{"a":1}'
    )
    assert data == (
        b'POST /v1/x?q=a%20b HTTP/1.1\r\nHost: gw.test\r\nAccept: application/json\r\nContent-Length: 7\r\n\r\n{"a":1}'
    )
    assert http1.encode_request("GET", "/", [("Host", "h")], None) == b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"


@pytest.mark.parametrize(
    ("method", "target", "fields"),
    [
        ("GET", "/a b", []),
        ("GET", "/a\r\nX-Evil: 1", []),
        ("GET", "", []),
        ("GE T", "/", []),
        ("GET", "/", [("Authorization", "Bearer x\r\nX-Evil: 1")]),
        ("GET", "/", [("X-Payment", "abc\n")]),
        ("GET", "/", [("X-Payment", "a\x00b")]),
        ("GET", "/", [("Bad: Name", "v")]),
    ],
    ids=["space", "crlf-target", "empty", "method", "crlf-value", "lf-value", "nul-value", "colon-name"],
)
def test_a_request_that_could_split_into_two_is_never_sent(
    method: str, target: str, fields: list[tuple[str, str]]
) -> None:
    with pytest.raises(ValueError):
        http1.encode_request(method, target, fields, None)


@pytest.mark.parametrize(
    ("host", "port", "default", "shown"),
    [
        ("gw.test", 80, 80, "gw.test"),
        ("gw.test", 8080, 80, "gw.test:8080"),
        ("::1", 443, 443, "[::1]"),
        ("::1", 8443, 443, "[::1]:8443"),
        ("bücher.example", 443, 443, "xn--bcher-kva.example"),
    ],
)
def test_the_host_field_names_the_port_only_when_it_is_not_the_default(
    host: str, port: int, default: int, shown: str
) -> None:
    assert http1.host_header(host, port, default) == shown


def test_a_tunnel_is_asked_for_with_connect_naming_the_gateway_and_nothing_else() -> None:
    target = parse_base_url("https://relay.fairwins.app")
    assert tunnel_request(target) == b"CONNECT relay.fairwins.app:443 HTTP/1.1\r\nHost: relay.fairwins.app:443\r\n\r\n"


# ---- through the gateway seam -------------------------------------------------------------------


class HangUpServer:
    """Answers each request 200 with keep-alive claimed, then closes anyway (as idle timeouts do)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(10)
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, args=(2,), daemon=True)
        self.thread.start()

    def _serve(self, count: int) -> None:
        for _ in range(count):
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(10)
                data = b""
                while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                    data += chunk
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")

    def close(self) -> None:
        self.listener.close()
        self.thread.join(10)


def test_a_kept_connection_the_gateway_closed_is_replaced_at_once_not_retried_after_a_backoff() -> None:
    server = HangUpServer()
    try:
        gateway = Gateway(f"http://127.0.0.1:{server.port}", timeout=5.0)
        first = gateway.call(GatewayRequest("GET", "/a"))
        second = gateway.call(GatewayRequest("GET", "/b"))
    finally:
        server.close()
    assert isinstance(first, GatewayResponse) and isinstance(second, GatewayResponse)
    assert second.status == 200 and second.attempts == 1  # no backoff, no retry counted
    assert server.connections == 2


def test_an_https_gateway_that_answers_in_plain_http_is_a_tls_failure(sandbox: SandboxGateway) -> None:
    outcome = Gateway(f"https://127.0.0.1:{sandbox.port}", timeout=5.0).call(GatewayRequest("GET", "/status"))
    assert isinstance(outcome, GatewayFailure) and outcome.cause == "tls"


def _fields_a_line_at_a_time(head: bytes) -> tuple[tuple[str, str], ...] | str:
    """The header fields read from the bytes a line at a time (obs-fold joined): what parse_head must equal."""
    fields: list[tuple[str, str]] = []
    for raw in head.split(b"\n")[1:]:
        line = raw[:-1] if raw.endswith(b"\r") else raw
        if line[:1] in (b" ", b"\t"):
            if not fields:
                return "continuation"
            fields[-1] = (fields[-1][0], fields[-1][1] + " " + line.strip(b" \t").decode("latin-1"))
            continue
        name, colon, value = line.partition(b":")
        if not colon or not name.strip(b" \t"):
            return "nameless"
        fields.append((name.strip(b" \t").decode("latin-1"), value.strip(b" \t").decode("latin-1")))
    return tuple(fields)


def test_a_gateway_head_reads_as_its_lines_read_one_at_a_time() -> None:
    rng = random.Random(24)
    pieces = [b"Content-Length", b"X-A", b":", b" ", b"\t", b"\r", b"5", b"a b", b"\xe9\xff", b"", b"\r\n", b"\n"]
    for _ in range(4000):
        head = b"HTTP/1.1 200 OK" + b"".join(rng.choice(pieces) for _ in range(rng.randrange(12)))
        expected = _fields_a_line_at_a_time(head)
        try:
            found: tuple[tuple[str, str], ...] | str = http1.parse_head(head)[1]
        except http1.ProtocolError as exc:
            found = "continuation" if "continuation" in str(exc) else "nameless"
        assert found == expected, head
