"""HTTP/1.1 for the gateway client, sans-I/O: bytes out, answers in.

Only what the gateway seam needs, so the gateway is reached without http.client or email:
Content-Length, chunked and read-to-close bodies, interim 1xx answers skipped, a cap on the head
and on the body, keep-alive as the answer allows. HTTP status is data; a broken exchange is an
exception naming what broke. The bytes are carried by upstream/aio.py.
"""

from __future__ import annotations

import re
import select
import sys
from collections.abc import Generator
from typing import Final, TypeVar

MAX_LINE: Final = 4096  # a chunk-size or trailer line
_HEX: Final = b"0123456789abcdefABCDEF"
_OWS: Final = b" \t"
_NO_BODY: Final = frozenset({204, 304})
T = TypeVar("T")


class ProtocolError(Exception):
    """The peer's bytes are not a well-formed HTTP/1.1 answer."""


class HeadTooLarge(ProtocolError):
    """The status line and header fields together are over the cap."""


class BodyTooLarge(Exception):
    """The body is over the cap, by its Content-Length or found while reading."""


class Closed(ConnectionResetError):
    """The connection ended before the answer was whole (`partial`: part came)."""

    def __init__(self, partial: bool) -> None:
        super().__init__("the connection closed in the middle of the answer" if partial else "the connection closed")
        self.partial = partial


class TunnelRefused(OSError):
    """The proxy refused CONNECT (not 2xx): no tunnel, nothing sent through it."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the proxy refused the tunnel ({status})")
        self.status = status


class Response:
    """One final answer: status, header fields (latin-1 text) and whole body."""

    __slots__ = ("body", "headers", "keep_alive", "status")

    def __init__(self, status: int, headers: tuple[tuple[str, str], ...], body: bytes, keep_alive: bool) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive  # the connection may carry the next request


def host_header(host: str, port: int, default_port: int) -> str:
    """The Host field: an IPv6 literal in brackets, a port only if not default."""
    if not host.isascii():
        host = host.encode("idna").decode("ascii")
    shown = f"[{host}]" if ":" in host else host
    return shown if port == default_port else f"{shown}:{port}"


_UNSAFE_TARGET: Final = re.compile(r"[\x00- \x7f]")
_UNSAFE_NAME: Final = re.compile(r"[\r\n\x00: ]")


def encode_request(method: str, target: str, fields: list[tuple[str, str]], body: bytes | None) -> bytes:
    """The request as bytes; ValueError for anything that could split it.

    A CR, LF or NUL inside a field would let a value start a header (or a request) of its own,
    and a space or control character in the target would end the request line early.
    """
    if not method.isalpha() or not target or _UNSAFE_TARGET.search(target):
        raise ValueError("the request line would not be a single well-formed line")
    lines = [f"{method} {target} HTTP/1.1"]
    for name, value in fields:
        # Three C scans, not a re search: a bearer here is an access token of 800 bytes, on every call.
        if not name or "\r" in value or "\n" in value or "\x00" in value or _UNSAFE_NAME.search(name):
            raise ValueError(f"the {name!r} header would not be a single well-formed field")
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body if body else head


# What the parser needs next: nothing is asked (None), and it is sent the next bytes read, or b""
# at the end of the stream (upstream/aio.py waits for them on its loop).
Reading = Generator[None, bytes, T]


class Parser:
    """The answer's rules as generators fed bytes, keeping bytes read past one."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def response(self, max_head: int, max_body: int) -> Reading[Response]:
        """One final answer, 1xx skipped; keep_alive False if bytes follow it."""
        status, headers, http11 = yield from self.head(max_head)
        while 100 <= status < 200 and status != 101:
            status, headers, http11 = yield from self.head(max_head)  # "100 Continue" and other interim answers
        coding: str | None = None
        length: int | None = None
        tokens: set[str] = set()
        for name, value in headers:
            lower = name.lower()
            if lower == "transfer-encoding":
                coding = value if coding is None else f"{coding}, {value}"
            elif lower == "content-length":
                length = _content_length(value, length)
            elif lower == "connection":
                tokens.update(t.strip().lower() for t in value.split(","))
        keep = "close" not in tokens and (http11 or "keep-alive" in tokens)
        if status in _NO_BODY or status < 200:
            body = b""
            keep = keep and status != 101
        elif coding is not None:
            # Transfer-Encoding wins over a Content-Length beside it, and such an answer's
            # connection is not reused; a final coding other than chunked ends with the connection.
            if coding.rsplit(",", 1)[-1].strip().lower() == "chunked":
                body = yield from self._chunked(max_head, max_body)
                keep = keep and length is None
            else:
                body = yield from self._until_close(max_body)
                keep = False
        elif length is not None:
            if length > max_body:
                raise BodyTooLarge(f"{length} bytes announced")
            body = yield from self._exact(length)
        else:
            body = yield from self._until_close(max_body)
            keep = False
        if self._buf:
            keep = False  # bytes past the answer: the connection is out of step, never reused
        return Response(status, headers, body, keep)

    def _fill(self, partial: bool) -> Reading[None]:
        chunk = yield
        if not chunk:
            raise Closed(partial)
        self._buf += chunk

    def head(self, max_head: int) -> Reading[tuple[int, tuple[tuple[str, str], ...], bool]]:
        """The next head: (status, header fields, keep-alive by HTTP/1.1 default)."""
        buf = self._buf
        while True:
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                skip = 4
                break
            end = buf.find(b"\n\n")  # bare LF line ends, which some servers still send
            if end >= 0:
                skip = 2
                break
            if len(buf) > max_head:
                raise HeadTooLarge(f"over {max_head} bytes")
            yield from self._fill(partial=bool(buf))
        if end > max_head:
            raise HeadTooLarge(f"over {max_head} bytes")
        head = bytes(buf[:end])
        del buf[: end + skip]
        return parse_head(head)

    def _line(self, limit: int) -> Reading[bytes]:
        buf = self._buf
        while (end := buf.find(b"\n")) < 0:
            if len(buf) > limit:
                raise ProtocolError("a chunk line is too long")
            yield from self._fill(partial=True)
        line = bytes(buf[:end])
        del buf[: end + 1]
        return line[:-1] if line.endswith(b"\r") else line

    def _exact(self, n: int) -> Reading[bytes]:
        buf = self._buf
        if len(buf) >= n:
            data = bytes(buf[:n])
            del buf[:n]
            return data
        # A large body arrives in many reads: kept as they came and joined once, not grown and
        # copied read after read (a 4 MB answer is read on the event loop).
        parts = [bytes(buf)]
        have = len(buf)
        buf.clear()
        while have < n:
            chunk = yield
            if not chunk:
                raise Closed(partial=True)
            parts.append(chunk)
            have += len(chunk)
        if have > n:
            last = parts[-1]
            keep = len(last) - (have - n)
            parts[-1] = last[:keep]
            buf += last[keep:]  # the start of whatever follows: never part of this answer
        return b"".join(parts)

    def _chunked(self, max_head: int, max_body: int) -> Reading[bytes]:
        parts: list[bytes] = []
        total = 0
        while True:
            size_text = (yield from self._line(MAX_LINE)).split(b";", 1)[0].strip(_OWS)
            # chunk-size = 1*HEXDIG: no sign, no 0x, no underscores (int() would take them all).
            if not size_text or len(size_text) > 15 or size_text.strip(_HEX):
                raise ProtocolError("a chunk size is not hexadecimal")
            size = int(size_text, 16)
            if size == 0:
                break
            total += size
            if total > max_body:
                raise BodyTooLarge(f"over {max_body} bytes")
            parts.append((yield from self._exact(size)))
            if (yield from self._line(MAX_LINE)):
                raise ProtocolError("a chunk is longer than its size")
        trailers = 0
        while line := (yield from self._line(MAX_LINE)):  # trailer fields are read past, never used
            trailers += len(line)
            if trailers > max_head:
                raise HeadTooLarge("trailers")
        return b"".join(parts)

    def _until_close(self, max_body: int) -> Reading[bytes]:
        buf = self._buf
        while len(buf) <= max_body:
            chunk = yield
            if not chunk:
                body = bytes(buf)
                buf.clear()
                return body
            buf += chunk
        raise BodyTooLarge(f"over {max_body} bytes")


def quiet(buffered: int, held: bool, fd: int) -> bool:
    """Whether nothing has arrived on a connection past its last answer.

    No byte, no end, no error; it never waits. The rule of the gateway's pool (upstream/aio.py),
    asked of a kept-alive connection as its answer ends and again before it carries another request.
    Bytes past an answer answer no request of ours (a duplicated answer, a 408 written before an
    idle close): read as the answer to the next request, they would hand one caller another's data.
    An end means the next request would go nowhere. Such a connection is dropped, as urllib3 and
    Go's net/http drop it, before anything is written on it. What arrived may be anywhere: read by
    the parser past the answer (`buffered`), held in memory by the stream beside it (`held`: TLS
    records, decrypted or not; what the loop has delivered), or still in the kernel (`fd`).
    """
    return not buffered and not held and not readable(fd)


def readable(fd: int) -> bool:
    """Whether a read on socket `fd` would return at once, without waiting.

    Bytes, an end or an error: one system call (poll, or select on Windows) asks the kernel.
    """
    if fd < 0:
        return True  # closed: no more use than a connection with something waiting on it
    if sys.platform != "win32":  # poll: no limit on descriptor numbers, where select() has one
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))  # POLLHUP and POLLERR are reported whether asked for or not
    ready, _, failed = select.select([fd], [], [fd], 0)
    return bool(ready or failed)


def parse_head(head: bytes) -> tuple[int, tuple[tuple[str, str], ...], bool]:
    """A head → (status, fields, keep-alive by default); ProtocolError if bad."""
    end = head.find(b"\n")
    status_line = (head if end < 0 else head[:end]).rstrip(b"\r")
    version, _, rest = status_line.partition(b" ")
    code = rest[:3]
    if (
        version not in (b"HTTP/1.1", b"HTTP/1.0")
        or len(code) != 3
        or not code.isdigit()
        or rest[3:4] not in (b"", b" ")
    ):
        raise ProtocolError("not an HTTP/1.1 status line")
    status = int(code)
    if status < 100:
        raise ProtocolError("not an HTTP status")
    fields: list[tuple[str, str]] = []
    # The header lines decoded once, as latin-1 (every byte a character): the same text, a line at a time.
    for raw in head[end + 1 :].decode("latin-1").split("\n") if end >= 0 else ():
        line = raw[:-1] if raw.endswith("\r") else raw
        if line[:1] in (" ", "\t"):
            if not fields:
                raise ProtocolError("a continuation line before any header")
            name, value = fields[-1]  # obs-fold: replaced by a space (RFC 9112 §5.2)
            fields[-1] = (name, value + " " + line.strip(" \t"))
            continue
        name, colon, value = line.partition(":")
        name = name.strip(" \t")
        if not colon or not name:
            raise ProtocolError("a header line without a name")
        fields.append((name, value.strip(" \t")))
    return status, tuple(fields), version == b"HTTP/1.1"


def _content_length(value: str, previous: int | None) -> int:
    # "Content-Length: 5, 5" (a list of one repeated value) is one length; anything else is two
    # framings, and choosing one would be guessing (RFC 9112 §6.3).
    values = {v.strip() for v in value.split(",")}
    if len(values) != 1:
        raise ProtocolError("conflicting Content-Length values")
    text = values.pop()
    if not text.isdigit() or not text.isascii():
        raise ProtocolError("a Content-Length that is not a number")
    # More digits than any body could have is too large, as the cap would find: int() alone
    # would refuse past 4,300 of them with a ValueError that names nothing.
    length = int(text) if len(text.lstrip("0")) <= 18 else 10**18
    if previous is not None and previous != length:
        raise ProtocolError("conflicting Content-Length values")
    return length
