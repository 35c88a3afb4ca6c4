"""A request head by RFC 9112, strictly: bytes in, `Head` or `Refusal` out.

A `Head` carries its body framing.

Pure and total: no I/O, nothing raised for any input. The framing of the body (none, a length, or
chunked) is decided here, once, before any route sees the request: a head whose framing two
parsers could read differently is refused whole, because that disagreement is how a request is
smuggled past a proxy (RFC 9112 §11.2). Every refusal carries the status to answer with and
always closes the connection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

MAX_HEAD_BYTES: Final = 64 * 1024  # request line and header section together
MAX_FIELDS: Final = 100
# Repeated, these would be ambiguous (smuggling, two credentials, two payments, two versions).
SINGLE_FIELDS: Final = frozenset(
    {
        "host",
        "origin",
        "content-length",
        "transfer-encoding",
        "authorization",
        "content-type",
        "expect",
        "x-payment",
        "payment-signature",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
    }
)
TOO_LARGE: Final = 1 << 62  # a Content-Length with more digits than any body this server reads

TOKEN: Final = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# request-line = method SP request-target SP HTTP-version (RFC 9112 §3), one space each, and
# HTTP-version = "HTTP" "/" DIGIT "." DIGIT (§2.3): "HTTP/1.10" and "HTTP/01.1" are not versions.
REQUEST_LINE: Final = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([\x21-\x7e]+) HTTP/([0-9])\.([0-9])")
# field-value: no control character but HTAB; obs-text (0x80-0xFF) is allowed (RFC 9110 §5.5).
BAD_VALUE: Final = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
# The header section (each line after a CRLF) when every line is a field-line as above, read in
# two passes in C (`_field_lines`): each line's shape, and that its only control bytes are HTAB and
# the CRLFs between lines. Then one more finds the names and values.
FIELD_SHAPES: Final = re.compile(rb"(?:\r\n[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\r]*)*")
_NOT_CONTROL: Final = bytes(c for c in range(256) if BAD_VALUE.fullmatch(bytes((c,))) is None)  # HTAB included
FIELD: Final = re.compile(r"\r\n([^:]+):([^\r]*)")
DIGITS: Final = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request cannot be read, its status, and the code for the body.

    The short code goes in the answer's body.
    """

    status: int
    error: str
    message: str


@dataclass(frozen=True, slots=True)
class Head:
    """One request's line and headers, and its body framing.

    The framing is decided here and nowhere else.
    """

    method: str
    target: str  # as sent
    path: str  # without the query
    minor: int  # HTTP/1.<minor>: 0 or 1 (1.2 to 1.9 are read as 1.1, RFC 9110 §2.5)
    headers: dict[str, str]  # lower-cased names; a repeated field's values joined with ", "
    length: int  # the body's Content-Length (0 when there is none); TOO_LARGE when absurd
    chunked: bool  # Transfer-Encoding: chunked (length is then 0)
    host: str | None  # the authority of an absolute-form target, else the Host header
    keep_alive: bool  # HTTP/1.1 without "Connection: close"; HTTP/1.0 is never kept alive here
    expect_continue: bool  # "Expect: 100-continue" on an HTTP/1.1 request

    @property
    def has_body(self) -> bool:
        return self.chunked or self.length > 0


def refuse_line(line: bytes) -> Refusal | None:
    """The refusal a complete request line earns, or None when well formed.

    Checked before the rest of the head arrives.
    """
    return _refused_line(REQUEST_LINE.fullmatch(line))


def _refused_line(match: re.Match[bytes] | None) -> Refusal | None:
    if match is None:
        return Refusal(400, "bad_request", "Bad request line: expected METHOD /path HTTP/1.1")
    major = match.group(3)
    if major != b"1":
        return Refusal(505, "http_version_not_supported", "Only HTTP/1.1 (and 1.0) is spoken on this port")
    target = match.group(2)
    if not (target.startswith(b"/") or target == b"*" or target[:7].lower() == b"http://" or _is_https(target)):
        return Refusal(400, "bad_request_target", "The request target must be a path (origin-form) or an absolute URL")
    return None


def _is_https(target: bytes) -> bool:
    return target[:8].lower() == b"https://"


def parse_head(data: bytes) -> Head | Refusal:
    """A whole head: the request line and header lines, CRLF-separated.

    Without the final empty line.
    """
    cut = data.find(b"\r\n")
    line, fields = (data, b"") if cut < 0 else (data[:cut], data[cut:])
    match = REQUEST_LINE.fullmatch(line)
    refused = _refused_line(match)
    if refused is not None:
        return refused
    assert match is not None  # _refused_line accepted it
    method, target = match.group(1, 2)
    minor = 0 if match.group(4) == b"0" else 1
    lines = _field_lines(fields)
    if lines is None or lines > MAX_FIELDS:
        # Too many lines is refused first, well formed or not; a well-formed section's were counted.
        if (fields.count(b"\r\n") if lines is None else lines) > MAX_FIELDS:
            return Refusal(431, "headers_too_large", f"Over {MAX_FIELDS} header fields")
        return _bad_field(fields)
    headers: dict[str, str] = {}
    for name, value in FIELD.findall(fields.decode("latin-1")):
        key, text = name.lower(), value.strip(" \t")
        if key in headers:
            if key in SINGLE_FIELDS:
                return Refusal(400, "duplicate_header", f"The {key} header must appear once")
            headers[key] = f"{headers[key]}, {text}"
        else:
            headers[key] = text
    return _framed(method.decode("ascii"), target.decode("ascii"), minor, headers)


def _field_lines(fields: bytes) -> int | None:
    """How many field-lines a header section is; None if a line is none.

    Each line follows a CRLF.

    `[^\\r]*` takes a value in sre's fastest loop, where a class of the control bytes takes one test
    a byte for each of its ranges (an access token makes a value of 800 bytes, on every call). A
    value it takes holds no CR, and its other control bytes are caught in the bytes left once all
    others are deleted: a well-formed section leaves exactly one CRLF a line.
    """
    if FIELD_SHAPES.fullmatch(fields) is None:
        return None
    controls = fields.translate(None, _NOT_CONTROL)
    lines = len(controls) // 2
    return lines if controls == b"\r\n" * lines else None


def _bad_field(fields: bytes) -> Refusal:
    """The refusal of a header section holding a line that is no field-line.

    The first refusal a reading line by line meets (a repeated field before the bad line is what is
    refused).
    """
    headers: set[str] = set()
    for raw in fields.split(b"\r\n")[1:]:
        name, colon, value = raw.partition(b":")
        # field-line = field-name ":" OWS field-value OWS (RFC 9112 §5): no space before the colon
        # (§5.1: MUST be rejected), no obs-fold (§5.2), no bare CR or LF, no control character.
        if not colon or TOKEN.fullmatch(name) is None or BAD_VALUE.search(value) is not None:
            return Refusal(400, "bad_header", "Refused: a header line is malformed (RFC 9112 §5)")
        key = name.decode("ascii").lower()
        if key in headers and key in SINGLE_FIELDS:
            return Refusal(400, "duplicate_header", f"The {key} header must appear once")
        headers.add(key)
    # Not reached while the two readings agree (the differential test holds them to it).
    return Refusal(400, "bad_header", "Refused: a header line is malformed (RFC 9112 §5)")


def _framed(method: str, target: str, minor: int, headers: dict[str, str]) -> Head | Refusal:
    """The request's head once its target and framing are read, or why not."""
    addressed = _addressed(target, headers.get("host"))
    if isinstance(addressed, Refusal):
        return addressed
    host, path = addressed
    if minor == 1 and host is None:
        # "A server MUST respond with a 400 (Bad Request) status code to any HTTP/1.1 request
        # message that lacks a Host header field" (RFC 9112 §3.2).
        return Refusal(400, "missing_host", "An HTTP/1.1 request must carry a Host header")
    framing = _body(minor, headers)
    if isinstance(framing, Refusal):
        return framing
    length, chunked = framing
    connection = headers.get("connection")
    keep_alive = minor == 1 and (
        connection is None or "close" not in {token.strip().lower() for token in connection.split(",")}
    )
    expect = headers.get("expect")
    # "A server that receives a 100-continue expectation in an HTTP/1.0 request MUST ignore
    # that expectation" (RFC 9110 §10.1.1).
    expect_continue = minor == 1 and expect is not None and expect.lower() == "100-continue"
    query = path.find("?")
    return Head(
        method=method,
        target=target,
        path=path if query < 0 else path[:query],
        minor=minor,
        headers=headers,
        length=length,
        chunked=chunked,
        host=host,
        keep_alive=keep_alive,
        expect_continue=expect_continue,
    )


def _addressed(target: str, host: str | None) -> tuple[str | None, str] | Refusal:
    """The request's host and path.

    From an absolute-form target, else the Host header's and the target.
    """
    if target.startswith("/") or target == "*":
        return host, target
    # absolute-form: "the origin server MUST ignore the received Host header field (if
    # any) and instead use the host information of the request-target" (RFC 9112 §3.2.2).
    rest = target.split("://", 1)[1]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    host, path = rest[:cut], rest[cut:] or "/"
    if not host or "@" in host:
        return Refusal(400, "bad_request_target", "An absolute request target must name a host, and no user")
    return host, path


def _body(minor: int, headers: dict[str, str]) -> tuple[int, bool] | Refusal:
    """How the body is framed, (Content-Length, chunked), or why it is refused."""
    encoding = headers.get("transfer-encoding")
    raw_length = headers.get("content-length")
    if encoding is not None:
        if minor == 0:
            # "A server or client that receives an HTTP/1.0 message containing a Transfer-Encoding
            # header field MUST treat the message as if the framing is faulty" (RFC 9112 §6.1).
            return Refusal(400, "bad_framing", "Transfer-Encoding is not HTTP/1.0: the framing is faulty")
        if raw_length is not None:
            # Both framings at once is how requests are smuggled past a proxy (RFC 9112 §6.3).
            return Refusal(400, "bad_framing", "Use either Content-Length or Transfer-Encoding: chunked")
        if encoding.lower() != "chunked":
            return Refusal(400, "bad_framing", "The only transfer coding read here is chunked, alone")
        return 0, True
    if raw_length is None:
        return 0, False
    length = content_length(raw_length)
    if length is None:
        return Refusal(400, "bad_content_length", "Content-Length must be a non-negative integer (ASCII digits)")
    return length, False


def content_length(value: str) -> int | None:
    """Content-Length = 1*DIGIT, ASCII only; None if not.

    str.isdigit() also accepts "²", which int() refuses.
    """
    if DIGITS.fullmatch(value) is None:
        return None
    digits = value.lstrip("0") or "0"
    # int() refuses strings over sys.int_max_str_digits; no body has nineteen digits of length.
    return int(digits) if len(digits) < 19 else TOO_LARGE
