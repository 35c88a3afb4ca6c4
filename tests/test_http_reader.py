"""The request head parser and the sans-I/O reader, without sockets: every framing rule as bytes in, events out.

Each rule is checked whole and fed a byte at a time: the reader must reach the same events
however the bytes arrive, because a network splits them anywhere.
"""

from __future__ import annotations

import random

import pytest

from mcp_server.transports.http.admission import BUSY, HEADS_FULL, PEER_FULL, Admission, Limits
from mcp_server.transports.http.head import (
    MAX_HEAD_BYTES,
    SINGLE_FIELDS,
    TOO_LARGE,
    Head,
    Refusal,
    content_length,
    parse_head,
)
from mcp_server.transports.http.reader import END, NEED_DATA, Data, Event, RequestReader

GET = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"


def events(data: bytes, *, step: int | None = None, limit: int | None = None) -> list[Event]:
    """Every event of one request, feeding `data` whole (step None) or `step` bytes at a time."""
    reader = RequestReader()
    if limit is not None:
        reader.body_limit = limit
    chunks = [data] if step is None else [data[i : i + step] for i in range(0, len(data), step)]
    out: list[Event] = []
    for chunk in chunks:
        reader.feed(chunk)
        while True:
            event = reader.next_event()
            if event is NEED_DATA:
                break
            out.append(event)
            if event is END or isinstance(event, Refusal):
                return out
    out.append(NEED_DATA)
    return out


def summary(found: list[Event]) -> list[object]:
    """Events with the body's data joined, so any split reads the same."""
    body = b"".join(e.data for e in found if isinstance(e, Data))
    kinds: list[object] = [e for e in found if not isinstance(e, Data)]
    return [kinds[0], body, *kinds[1:]] if body else kinds


def same_however_split(data: bytes, limit: int | None = None) -> list[object]:
    whole = summary(events(data, limit=limit))
    for step in (1, 2, 7):
        assert summary(events(data, step=step, limit=limit)) == whole, step
    return whole


# ---- heads -------------------------------------------------------------------------------------------


def test_a_plain_get_is_a_head_with_no_body() -> None:
    head, end = same_however_split(GET)
    assert isinstance(head, Head) and end is END
    assert (head.method, head.path, head.minor, head.host) == ("GET", "/healthz", 1, "localhost")
    assert head.keep_alive and not head.has_body


def test_field_names_are_lower_cased_values_trimmed_and_repeats_joined() -> None:
    head = parse_head(b"GET /x?y=1 HTTP/1.1\r\nHost: h\r\nAccept:  a/b \t\r\nACCEPT: c/d\r\nX-Empty:")
    assert isinstance(head, Head)
    assert head.path == "/x" and head.target == "/x?y=1"
    assert head.headers == {"host": "h", "accept": "a/b, c/d", "x-empty": ""}


def test_an_absolute_form_target_names_the_host() -> None:
    # RFC 9112 §3.2.2: the target's authority wins over any Host header.
    head = parse_head(b"GET http://localhost:8790/healthz?x HTTP/1.1\r\nHost: elsewhere.example")
    assert isinstance(head, Head) and head.host == "localhost:8790" and head.path == "/healthz"


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"GET /healthz HTTP/1.10\r\nHost: h", 400),
        (b"GET /healthz HTTP/01.1\r\nHost: h", 400),
        (b"GET /healthz HTTP/2.0\r\nHost: h", 505),
        (b"GET /healthz HTTP/0.9\r\nHost: h", 505),
        (b"GET /healthz\r\nHost: h", 400),
        (b"GET  /healthz HTTP/1.1\r\nHost: h", 400),
        (b"G(T /healthz HTTP/1.1\r\nHost: h", 400),
        (b"GET healthz HTTP/1.1\r\nHost: h", 400),
        (b"GET http:///x HTTP/1.1\r\nHost: h", 400),
        (b"GET http://user@h/x HTTP/1.1\r\nHost: h", 400),
        (b"GET /healthz HTTP/1.1", 400),  # HTTP/1.1 without Host (RFC 9112 §3.2)
        (b"GET /x HTTP/1.1\r\nHost: h\r\nHost: h", 400),
        (b"GET /x HTTP/1.1\r\nHost: h\r\nX : y", 400),
        (b"GET /x HTTP/1.1\r\nHost: h\r\n folded", 400),
        (b"GET /x HTTP/1.1\r\nHost: h\r\nX: a\rb", 400),
        (b"GET /x HTTP/1.1\r\nHost: h\r\nX: a\x00b", 400),
        (b"GET /x HTTP/1.1\r\nHost: h\r\nNo-Colon", 400),
        (b"GET /x HTTP/1.1\r\nHost: h\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(101)), 431),
    ],
)
def test_a_head_off_the_grammar_is_refused_with_its_status(data: bytes, status: int) -> None:
    refused = parse_head(data)
    assert isinstance(refused, Refusal) and refused.status == status, refused


def test_http_1_0_needs_no_host_is_never_kept_alive_and_ignores_expect() -> None:
    head = parse_head(b"POST /mcp HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\nContent-Length: 2")
    assert isinstance(head, Head) and head.minor == 0 and not head.keep_alive and not head.expect_continue


def test_http_1_x_above_1_is_read_as_1_1() -> None:
    head = parse_head(b"GET /x HTTP/1.7\r\nHost: h")
    assert isinstance(head, Head) and head.minor == 1


# ---- framing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: 5\r\nTransfer-Encoding: chunked",
        b"Transfer-Encoding: chunked\r\nContent-Length: 5",
        b"Content-Length: 5\r\nContent-Length: 5",
        b"Content-Length: 5, 5",
        b"Content-Length: +5",
        b"Content-Length: -5",
        b"Content-Length: 0x5",
        b"Content-Length: 5.0",
        b"Content-Length: \xc2\xb2",
        b"Content-Length: \xd9\xa5",
        b"Content-Length: ",
        b"Transfer-Encoding: gzip, chunked",
        b"Transfer-Encoding: chunked, gzip",
        b"Transfer-Encoding: identity",
        b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
    ],
)
def test_ambiguous_framing_is_refused_400(framing: bytes) -> None:
    refused = parse_head(b"POST /mcp HTTP/1.1\r\nHost: h\r\n" + framing)
    assert isinstance(refused, Refusal) and refused.status == 400, refused


def test_transfer_encoding_on_http_1_0_is_faulty_framing() -> None:
    refused = parse_head(b"POST /mcp HTTP/1.0\r\nTransfer-Encoding: chunked")
    assert isinstance(refused, Refusal) and refused.status == 400


@pytest.mark.parametrize(("value", "length"), [("0", 0), ("007", 7), ("1048576", 1048576), ("9" * 5000, TOO_LARGE)])
def test_content_length_is_ascii_digits_and_never_raises(value: str, length: int) -> None:
    assert content_length(value) == length


@pytest.mark.parametrize("value", ["²", "٤", "", " 1", "1 ", "1_000", "+1", "١٢"])
def test_content_length_refuses_anything_but_ascii_digits(value: str) -> None:
    assert content_length(value) is None


def test_a_content_length_body_is_read_to_its_end_and_the_next_request_left_alone() -> None:
    data = b"POST /mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello" + GET
    reader = RequestReader()
    reader.feed(data)
    head = reader.next_event()
    assert isinstance(head, Head) and head.length == 5
    assert reader.next_event() == Data(b"hello")
    assert reader.next_event() is END and reader.body_done
    reader.next_request()
    following = reader.next_event()
    assert isinstance(following, Head) and following.path == "/healthz"


def chunked(body: bytes) -> bytes:
    return b"POST /mcp HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + body


@pytest.mark.parametrize(
    "body",
    [
        b"5\r\nhello\r\n0\r\n\r\n",
        b"2\r\nhe\r\n3\r\nllo\r\n0\r\n\r\n",
        b"5;name=value\r\nhello\r\n0\r\n\r\n",
        b'5;a="q\\"uoted";b\r\nhello\r\n0;last\r\nTrailer: t\r\n\r\n',
        b"00005 ; a = 1\r\nhello\r\n000\r\n\r\n",
    ],
)
def test_a_chunked_body_reads_the_same_in_any_split(body: bytes) -> None:
    head, data, end = same_however_split(chunked(body))
    assert isinstance(head, Head) and head.chunked and data == b"hello" and end is END


@pytest.mark.parametrize(
    "body",
    [
        b"zz\r\nhello\r\n0\r\n\r\n",
        b"-5\r\nhello\r\n0\r\n\r\n",
        b"0x5\r\nhello\r\n0\r\n\r\n",
        b"\r\nhello\r\n0\r\n\r\n",
        b"5\nhello\r\n0\r\n\r\n",
        b"5\r\nhelloXX0\r\n\r\n",
        b"5;\r\nhello\r\n0\r\n\r\n",
        b"5;=v\r\nhello\r\n0\r\n\r\n",
        b"5;n=\r\nhello\r\n0\r\n\r\n",
        b'5;n="open\r\nhello\r\n0\r\n\r\n',
        b"5;n=\x01\r\nhello\r\n0\r\n\r\n",
        b"5;" + b"n" * 2000 + b"\r\nhello\r\n0\r\n\r\n",
        b"5\r\nhello\r\n0\r\nBad Trailer\r\n\r\n",
        b"11111111111111111\r\n",
    ],
)
def test_a_malformed_chunked_body_is_refused_400_in_any_split(body: bytes) -> None:
    found = same_however_split(chunked(body))
    assert isinstance(found[-1], Refusal) and found[-1].status == 400, found


@pytest.mark.parametrize("trailers", [b"", b"Trailer: t\r\n", b"X-One: 1\r\nX-Two:\r\nContent-Length: 99\r\n"])
def test_trailers_are_read_to_their_end_and_the_next_request_starts_after_them(trailers: bytes) -> None:
    data = chunked(b"5\r\nhello\r\n0\r\n" + trailers + b"\r\n") + GET
    for step in (None, 1, 3):
        reader = RequestReader()
        found: list[Event] = []
        chunks = [data] if step is None else [data[i : i + step] for i in range(0, len(data), step)]
        for chunk in chunks:
            reader.feed(chunk)
            while not found or not isinstance(found[-1], Refusal):
                event = reader.next_event()
                if event is NEED_DATA:
                    break
                found.append(event)
                if event is END:
                    reader.next_request()
        assert b"".join(e.data for e in found if isinstance(e, Data)) == b"hello"
        first, end, following, last = [e for e in found if not isinstance(e, Data)]
        assert isinstance(first, Head) and first.chunked and end is END and last is END, (step, found)
        assert isinstance(following, Head) and following.method == "GET" and following.path == "/healthz"


def test_trailers_over_64_kib_in_all_are_refused_though_each_line_is_short() -> None:
    trailers = b"".join(b"X-T%d: %s\r\n" % (i, b"v" * 1000) for i in range(70))
    found = events(chunked(b"5\r\nhello\r\n0\r\n" + trailers + b"\r\n"))
    assert isinstance(found[-1], Refusal) and found[-1].status == 400 and "64 KiB" in found[-1].message
    under = b"".join(b"X-T%d: %s\r\n" % (i, b"v" * 1000) for i in range(60))
    assert events(chunked(b"5\r\nhello\r\n0\r\n" + under + b"\r\n"))[-1] is END


def test_a_chunk_declaring_more_than_the_limit_is_refused_before_its_data_arrives() -> None:
    found = events(chunked(b"ffff\r\n"), limit=1024)
    assert isinstance(found[-1], Refusal) and found[-1].status == 413


# ---- the head's edges ----------------------------------------------------------------------------


def test_one_empty_line_before_the_request_line_is_skipped_a_second_refused() -> None:
    head, end = same_however_split(b"\r\n" + GET)
    assert isinstance(head, Head) and end is END
    refused = same_however_split(b"\r\n\r\n" + GET)[-1]
    assert isinstance(refused, Refusal) and refused.status == 400


def test_a_bare_lf_is_refused_as_soon_as_it_arrives() -> None:
    reader = RequestReader()
    reader.feed(b"GET /healthz HTTP/1.1\nHo")  # no CRLFCRLF yet, and there may never be one
    refused = reader.next_event()
    assert isinstance(refused, Refusal) and refused.status == 400


def test_a_request_line_that_is_no_request_is_refused_before_the_head_ends() -> None:
    reader = RequestReader()
    reader.feed(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 TLS?\r\n")  # a TLS hello on the HTTP port
    refused = reader.next_event()
    assert isinstance(refused, Refusal) and refused.status == 400


def test_a_head_over_64_kib_is_431_and_a_request_line_over_it_414() -> None:
    long_line = b"GET /" + b"a" * MAX_HEAD_BYTES + b" HTTP/1.1\r\n"
    refused = events(long_line)[-1]
    assert isinstance(refused, Refusal) and refused.status == 414
    big_headers = b"GET / HTTP/1.1\r\nHost: h\r\n" + b"X: " + b"v" * MAX_HEAD_BYTES + b"\r\n\r\n"
    refused = events(big_headers, step=4096)[-1]
    assert isinstance(refused, Refusal) and refused.status == 431


def test_a_trickled_head_is_not_read_again_from_the_start_for_every_byte() -> None:
    # 60 KiB a byte at a time: quadratic rescanning would take minutes; this takes well under a second.
    data = b"GET / HTTP/1.1\r\nHost: h\r\nX: " + b"v" * (60 * 1024) + b"\r\n\r\n"
    head, end = events(data, step=1)
    assert isinstance(head, Head) and end is END


def test_random_bytes_are_always_an_event_never_an_exception() -> None:
    rng = random.Random(12)
    alphabet = b'GETPOST /:\r\n\t HTTP/1.1 Host: h Content-Length: 0123 Transfer-Encoding: chunked ;="\\\x00\xff'
    for _ in range(3000):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        found = events(data, step=rng.randint(1, 16))
        assert found, data


def _line_by_line(data: bytes) -> dict[str, str] | Refusal:
    """The header fields as RFC 9112 §5 reads them a line at a time: what parse_head's two passes must equal."""
    fields: dict[str, str] = {}
    for raw in data.split(b"\r\n")[1:]:
        name, colon, value = raw.partition(b":")
        if not colon or not name or any(c not in TOKEN_BYTES for c in name) or any(c in CONTROL for c in value):
            return Refusal(400, "bad_header", "Refused: a header line is malformed (RFC 9112 §5)")
        key, text = name.decode().lower(), value.strip(b" \t").decode("latin-1")
        if key in fields and key in SINGLE_FIELDS:
            return Refusal(400, "duplicate_header", f"The {key} header must appear once")
        fields[key] = f"{fields[key]}, {text}" if key in fields else text
    return fields


TOKEN_BYTES = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
CONTROL = frozenset([*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F])


def test_header_fields_are_read_as_a_line_at_a_time_reads_them() -> None:
    # Lines made of the bytes that matter at a field line's edges: a repeated single field before
    # or after a malformed line, values of spaces only, controls, obs-text and obs-fold.
    rng = random.Random(35)
    names = [b"Host", b"host", b"X-A", b"Accept", b"Content-Type", b"x a", b"", b"\xe9", b"Expect"]
    values = [b"", b" ", b"v", b" \tv w\t ", b"a\x00b", b"a\rb", b"\x7f", b"\xff\x80", b"a:b", b" \t"]
    for _ in range(4000):
        lines = []
        for _ in range(rng.randint(0, 6)):
            line = rng.choice(names) + rng.choice([b":", b":", b" :", b""]) + rng.choice(values)
            lines.append(rng.choice([b" ", b"\t"]) + line if rng.random() < 0.05 else line)
        data = b"\r\n".join([b"GET / HTTP/1.0", *lines])
        found = parse_head(data)
        expected = _line_by_line(data)
        if isinstance(expected, Refusal):
            assert found == expected, data
        else:
            assert isinstance(found, Head) and found.headers == expected, data


def test_in_head_and_started_tell_an_unfinished_head_from_an_idle_connection() -> None:
    reader = RequestReader()
    assert not reader.started and not reader.in_head
    reader.feed(b"\r\n")
    assert reader.next_event() is NEED_DATA and reader.started and not reader.in_head
    reader.feed(b"GET / HT")
    assert reader.next_event() is NEED_DATA and reader.in_head


# ---- admission -------------------------------------------------------------------------------------


def test_admission_caps_each_peer_and_keeps_a_reserve_for_health_checks() -> None:
    admission = Admission(Limits(max_connections=4, max_peer_connections=2, max_peer_heads=1, health_reserve=1))
    assert admission.connect("a") == "main" and admission.connect("a") == "main"
    assert admission.connect("a") is PEER_FULL
    assert admission.connect("b") == "main" and admission.connect("c") == "main"
    assert admission.connect("d") == "reserve"
    assert admission.connect("e") is BUSY
    assert admission.head_started("b") and not admission.head_started("b")
    admission.head_done("b")
    assert admission.head_started("b")
    admission.disconnect("a", "main")
    assert admission.connect("e") == "main"
    assert admission.connections == 5
    assert HEADS_FULL.status == PEER_FULL.status == 429 and BUSY.status == 503


def test_admission_without_per_peer_caps_lets_one_peer_take_every_slot() -> None:
    admission = Admission(Limits(max_connections=3, max_peer_connections=0, max_peer_heads=0, health_reserve=0))
    assert [admission.connect("proxy") for _ in range(3)] == ["main"] * 3
    assert all(admission.head_started("proxy") for _ in range(10))
    assert admission.connect("proxy") is BUSY
