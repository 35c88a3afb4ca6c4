"""Sans-I/O request reading, as h11: bytes in (`feed`), events out.

Events, in order, for each request on a connection: its `Head` (or a `Refusal`), then `Data` for
every piece of its body, then `END`. `NEED_DATA` is a value, not an exception: feed more bytes
and ask again. Nothing here touches a socket; the connection owns the I/O and the clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from mcp_server.transports.http.head import BAD_VALUE, MAX_HEAD_BYTES, TOKEN, Head, Refusal, parse_head, refuse_line

MAX_CHUNK_LINE: Final = 1024  # a chunk-size line with its extensions
COMPACT_AT: Final = 256 * 1024  # consumed bytes kept in the buffer before it is compacted

# chunk = chunk-size [ chunk-ext ] CRLF (RFC 9112 §7.1): the size is hex digits and nothing else
# (no sign, no 0x, no underscores), and every extension follows the grammar, names and values
# tokens or quoted strings; extensions are then ignored ("A recipient MUST ignore unrecognized
# chunk extensions", §7.1.1). A size line two parsers read differently is a smuggled request.
_TOKEN: Final = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED: Final = rb'"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*"'
_EXTENSION: Final = rb"[ \t]*;[ \t]*" + _TOKEN + rb"(?:[ \t]*=[ \t]*(?:" + _TOKEN + rb"|" + _QUOTED + rb"))?"
CHUNK_LINE: Final = re.compile(rb"([0-9A-Fa-f]{1,16})(?:" + _EXTENSION + rb")*")


class NeedData:
    """No event yet: feed more bytes."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


class EndOfBody:
    """The body (maybe empty) was read whole; the next request may follow."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "END"


NEED_DATA: Final = NeedData()
END: Final = EndOfBody()


@dataclass(frozen=True, slots=True)
class Data:
    data: bytes


Event = Head | Data | EndOfBody | Refusal | NeedData

_HEAD, _LENGTH, _SIZE, _CHUNK, _CHUNK_END, _TRAILER, _DONE, _ERROR = range(8)


class RequestReader:
    """One connection's requests in turn; call `next_request()` after each END."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0  # the first byte not yet consumed
        self._scan = 0  # where the search for the end of the head resumes
        self._lf_scan = 0  # where the search for a bare LF in an unfinished head resumes
        self._blank = False  # the one empty line allowed before a request line was skipped
        self._line_checked = False
        self._state = _HEAD
        self._left = 0  # bytes left of a Content-Length body, or of the current chunk
        self._total = 0  # chunked: body bytes declared so far
        self._trailers = 0
        self._refusal: Refusal | None = None
        # The most body the caller will take: a chunked body declaring more is refused (413)
        # before its data is waited for. A Content-Length body the caller checks itself.
        self.body_limit = 1 << 62

    # ---- bytes in ---------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        buf = self._buf
        if self._pos and self._pos == len(buf):
            buf.clear()
            self._pos = self._scan = self._lf_scan = 0
        elif self._pos >= COMPACT_AT:
            del buf[: self._pos]
            self._scan = max(self._scan - self._pos, 0)
            self._lf_scan = max(self._lf_scan - self._pos, 0)
            self._pos = 0
        buf += data

    @property
    def started(self) -> bool:
        """Some of the next request has arrived (a head byte, or the empty line)."""
        return self._state == _HEAD and (self._blank or len(self._buf) > self._pos)

    @property
    def in_head(self) -> bool:
        """Bytes of a head are here but the head is not whole yet."""
        return self._state == _HEAD and len(self._buf) > self._pos

    @property
    def body_done(self) -> bool:
        """The request was read to its body's end; the next bytes are the next's."""
        return self._state == _DONE

    @property
    def pending(self) -> int:
        """Bytes received, not yet consumed: a pipelined request, or body."""
        return len(self._buf) - self._pos

    def next_request(self) -> None:
        """After END: the next bytes are the next request's."""
        if self._state != _DONE:
            raise RuntimeError("next_request() before the body's end")
        del self._buf[: self._pos]
        self._pos = self._scan = self._lf_scan = 0
        self._blank = self._line_checked = False
        self._state = _HEAD
        self._total = self._trailers = 0
        self.body_limit = 1 << 62

    # ---- events out ---------------------------------------------------------------------------

    def next_event(self) -> Event:
        state = self._state
        if state == _HEAD:
            return self._head()
        if state == _LENGTH:
            return self._data(_DONE)
        if state == _DONE:
            return END
        if state == _ERROR:
            assert self._refusal is not None
            return self._refusal
        return self._chunked()

    def _refuse(self, status: int, error: str, message: str) -> Refusal:
        self._state = _ERROR
        self._refusal = Refusal(status, error, message)
        return self._refusal

    def _head(self) -> Event:
        buf, pos = self._buf, self._pos
        while buf.startswith(b"\r\n", pos):
            # "a server that is expecting to receive and parse a request-line SHOULD ignore at
            # least one empty line (CRLF) received prior to the request-line" (RFC 9112 §2.2):
            # one, and only one, so empty lines cannot keep a connection waiting forever.
            if self._blank:
                return self._refuse(400, "bad_request", "More than one empty line before the request line")
            self._blank = True
            pos = self._pos = pos + 2
            self._scan = self._lf_scan = pos
        end = buf.find(b"\r\n\r\n", max(self._scan, pos))
        if end < 0:
            return self._unfinished(pos)
        if end - pos > MAX_HEAD_BYTES:
            return self._too_large(pos)
        data = bytes(buf[pos:end])
        head = parse_head(data)
        if isinstance(head, Refusal):
            # parse_head accepts no bare LF (the request line's pattern and the field lines' control
            # bytes refuse one): only a refused head is counted, to name a bare LF first.
            if data.count(b"\n") != data.count(b"\r\n"):
                return self._refuse(400, "bad_header", "Refused: a bare LF ends a line (lines end with CRLF)")
            self._pos = end + 4
            self._state, self._refusal = _ERROR, head
            return head
        self._pos = end + 4
        if head.chunked:
            self._state = _SIZE
        elif head.length:
            self._state, self._left = _LENGTH, head.length
        else:
            self._state = _DONE
        return head

    def _unfinished(self, pos: int) -> Event:
        buf = self._buf
        # A bare LF is refused as soon as it arrives, not when a CRLFCRLF that will never come does.
        lf = buf.find(b"\n", max(self._lf_scan, pos))
        while lf >= 0:
            if lf == pos or buf[lf - 1] != 0x0D:
                return self._refuse(400, "bad_header", "Refused: a bare LF ends a line (lines end with CRLF)")
            lf = buf.find(b"\n", lf + 1)
        self._lf_scan = len(buf)
        if not self._line_checked:
            eol = buf.find(b"\r\n", pos)
            if eol >= 0:
                # The request line is whole: a line that is no request is refused now, not at the read timeout.
                refused = refuse_line(bytes(buf[pos:eol]))
                if refused is not None:
                    self._state, self._refusal = _ERROR, refused
                    return refused
                self._line_checked = True
        if len(buf) - pos > MAX_HEAD_BYTES:
            return self._too_large(pos)
        self._scan = max(pos, len(buf) - 3)
        return NEED_DATA

    def _too_large(self, pos: int) -> Refusal:
        eol = self._buf.find(b"\r\n", pos, pos + MAX_HEAD_BYTES + 2)
        if eol < 0:
            return self._refuse(414, "too_large", f"The request line is over the {MAX_HEAD_BYTES // 1024} KiB limit")
        return self._refuse(
            431,
            "headers_too_large",
            f"The request line and headers are over the {MAX_HEAD_BYTES // 1024} KiB limit (or over 100 headers)",
        )

    def _data(self, after: int) -> Event:
        if self._left == 0:
            self._state = after
            return self.next_event()
        available = len(self._buf) - self._pos
        if available <= 0:
            return NEED_DATA
        n = min(available, self._left)
        start = self._pos
        self._pos += n
        self._left -= n
        if self._left == 0:
            self._state = after
        return Data(bytes(self._buf[start : start + n]))

    def _line(self) -> bytes | Refusal | None:
        """The next CRLF-ended line of a chunked body, bare; None if not here."""
        buf, pos = self._buf, self._pos
        lf = buf.find(b"\n", pos, pos + MAX_HEAD_BYTES + 1)
        if lf < 0:
            return None if len(buf) - pos <= MAX_HEAD_BYTES else self._refuse(400, "bad_framing", "A line is too long")
        if lf == pos or buf[lf - 1] != 0x0D:
            return self._refuse(400, "bad_framing", "The chunked body is malformed (a bare LF)")
        self._pos = lf + 1
        return bytes(buf[pos : lf - 1])

    def _chunked(self) -> Event:
        """A chunked body's next event: each state in turn until one has one."""
        while True:
            state = self._state
            if state == _CHUNK:
                return self._data(_CHUNK_END)
            if state == _CHUNK_END:
                event = self._chunk_end()
            elif state == _SIZE:
                event = self._chunk_size()
            else:
                event = self._trailer()
            if event is not None:
                return event

    def _chunk_end(self) -> Event | None:
        """The CRLF after a chunk's data."""
        ending = self._buf[self._pos : self._pos + 2]
        if ending != b"\r\n":
            if len(ending) < 2 and b"\r\n".startswith(ending):
                return NEED_DATA
            return self._refuse(400, "bad_framing", "The chunked body is malformed (no CRLF after a chunk)")
        self._pos += 2
        self._state = _SIZE
        return None

    def _chunk_size(self) -> Event | None:
        """A chunk-size line: the next chunk's size, or the last chunk's zero."""
        if self._buf.find(b"\n", self._pos, self._pos + MAX_CHUNK_LINE + 1) < 0:
            if len(self._buf) - self._pos > MAX_CHUNK_LINE:
                return self._refuse(400, "bad_framing", "A chunk-size line is over 1 KiB")
            return NEED_DATA
        line = self._line()
        if line is None or isinstance(line, Refusal):
            return NEED_DATA if line is None else line
        match = CHUNK_LINE.fullmatch(line)
        if match is None:
            return self._refuse(400, "bad_framing", "The chunked body is malformed (a chunk-size line)")
        size = int(match.group(1), 16)
        if size == 0:
            self._state = _TRAILER
            return None
        self._total += size
        if self._total > self.body_limit:
            return self._refuse(413, "body_too_large", "The body is over the size limit")
        self._state, self._left = _CHUNK, size
        return None

    def _trailer(self) -> Event | None:
        """A trailer line, checked and ignored; END after the empty one."""
        line = self._line()
        if line is None or isinstance(line, Refusal):
            return NEED_DATA if line is None else line
        if not line:
            self._state = _DONE
            return END
        self._trailers += len(line) + 2
        name, colon, value = line.partition(b":")
        if not colon or TOKEN.fullmatch(name) is None or BAD_VALUE.search(value) is not None:
            return self._refuse(400, "bad_framing", "The chunked body is malformed (a trailer line)")
        if self._trailers > MAX_HEAD_BYTES:
            return self._refuse(400, "bad_framing", "The trailers are over 64 KiB")
        return None
