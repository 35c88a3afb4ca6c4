"""Sans-I/O line framing for stdio: bytes in, whole lines out.

"Messages are delimited by newlines, and MUST NOT contain embedded newlines" (MCP, stdio
transport). So a line ends at the byte b"\\n" and nowhere else: never `str.splitlines()`, which
also splits on U+2028, U+2029 and U+0085, characters a JSON string may carry raw. Nothing here
reads a pipe; the transport owns the I/O and decides when to stop feeding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MAX_LINE: Final = 4 * 1024 * 1024  # a line's bytes before its b"\n" (a "\r" counted), at most
_STRIPPED: Final = b" \t\r\n"  # what a line may carry around its message: CRLF endings, padding


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than `limit` bytes: refused once, its bytes never kept."""

    limit: int


Framed = bytes | Oversized


class LineFramer:
    """Whole lines from bytes fed in any pieces, whatever their boundaries.

    Each line comes out stripped of spaces, tabs and CR/LF at both ends; a blank line is no line.
    A line whose bytes before its newline exceed `max_line` comes out once as `Oversized` as soon
    as that is known, and the rest of it is dropped as it arrives: what is held never exceeds
    `max_line` bytes plus the piece being fed.
    """

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        # Bytes of `_buffer` already searched for b"\n" without finding one: a long line fed in
        # many small pieces is searched once, not once per piece.
        self._scanned = 0
        self._skipping = False  # inside an over-long line, already refused: drop up to its newline

    @property
    def held(self) -> int:
        """Bytes kept of a line not yet ended (none of an over-long one)."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Framed]:
        """Take `data`; return the lines it completed, in order, or `Oversized`."""
        out: list[Framed] = []
        start = 0
        if self._skipping:
            end = data.find(b"\n")
            if end < 0:
                return out
            self._skipping = False
            start = end + 1
        buffer = self._buffer
        buffer += memoryview(data)[start:]
        begin, scan = 0, self._scanned
        while (end := buffer.find(b"\n", scan)) >= 0:
            self._emit(out, begin, end)
            begin = scan = end + 1
        del buffer[:begin]
        if len(buffer) > self.max_line:
            # Over the limit with no newline yet: refused now, and nothing more of it is kept.
            out.append(Oversized(self.max_line))
            buffer.clear()
            self._skipping = True
        self._scanned = len(buffer)
        return out

    def end(self) -> list[Framed]:
        """End of input: the last line, when no newline ended it.

        A stop never asks for it: a line not ended is no request.
        """
        out: list[Framed] = []
        if self._buffer:
            self._emit(out, 0, len(self._buffer))
        self._buffer.clear()
        self._scanned = 0
        self._skipping = False
        return out

    def _emit(self, out: list[Framed], begin: int, end: int) -> None:
        if end - begin > self.max_line:
            out.append(Oversized(self.max_line))
            return
        line = bytes(self._buffer[begin:end]).strip(_STRIPPED)
        if line:
            out.append(line)
