"""The request head as this server reads it: size-capped, and refused whole when it is malformed.

http.server reads a request's line and headers with readline(); `HeadReader` sits under it so the
whole head stays within MAX_HEADER_BYTES and every header line is checked against RFC 9112 before
anything trusts it. The patterns are also what the handler uses for request lines and chunk sizes.
"""

from __future__ import annotations

import http.client
import re
from typing import Any, BinaryIO, Final

MAX_HEADER_BYTES: Final = 64 * 1024

# field-line = field-name ":" OWS field-value OWS (RFC 9112 §5): a token, the colon at once, and a
# value without control characters other than HTAB. Anything else is refused, never repaired.
FIELD_LINE: Final = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\x00-\x08\x0a-\x1f\x7f]*\r?\n")
CONTROL: Final = re.compile(rb"[\x00-\x1f\x7f]")
TOKEN: Final = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
CHUNK_SIZE: Final = re.compile(rb"([0-9A-Fa-f]{1,15})(?:[ \t]*;[^\r\n]*)?\r?\n")


class HeadReader:
    """Wraps the request stream: the request line and headers together stay within a budget, and
    every header line must be well formed.

    http.server reads the head with readline(); raising LineTooLong here makes it answer 431
    before an oversized header section is ever held in memory. Lines that parsers disagree about
    (a bare CR, a space before the colon, obs-fold, control characters) are how a request is
    smuggled past a proxy: such a head is marked `malformed` and refused whole.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.remaining: int | None = None  # None: not reading a head (between requests, or in a body)
        self.seen_request_line = False
        self.malformed: str | None = None

    def start(self) -> None:
        self.remaining = MAX_HEADER_BYTES
        self.seen_request_line = False
        self.malformed = None

    def readline(self, limit: int = -1) -> bytes:
        if self.remaining is None:
            return self.raw.readline(limit)
        # Never hold more than the budget in memory, whatever limit the caller asked for.
        cap = self.remaining + 1 if limit < 0 else min(limit, self.remaining + 1)
        line = self.raw.readline(cap)
        self.remaining -= len(line)
        if self.remaining < 0:
            self.remaining = None
            raise http.client.LineTooLong("header section" if self.seen_request_line else "request line")
        if not self.seen_request_line:
            self.seen_request_line = True
            if CONTROL.search(line.rstrip(b"\r\n")):
                self.malformed = "the request line carries a control character"
        elif line in (b"\r\n", b"\n", b""):
            self.remaining = None  # the head ended; what follows is a body, not headers
        elif self.malformed is None and not FIELD_LINE.fullmatch(line):
            self.malformed = "a header line is malformed (RFC 9112 §5)"
        return line

    def read(self, n: int = -1) -> bytes:
        return self.raw.read(n)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)
