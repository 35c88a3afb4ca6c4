"""W3C Trace Context (`traceparent`, `tracestate`): parsed and made.

Sans-I/O: values are validated as they are parsed. They are read from an inbound HTTP request's
headers or from a request's `params._meta` (MCP SEP-414: "When OTel trace context is propagated via
_meta, the keys traceparent, tracestate, and baggage follow W3C Trace Context and W3C Baggage value
formats"). Every parser is total: a value that does not follow
https://www.w3.org/TR/trace-context-2/ is None, never an exception, and an invalid value is
dropped, never forwarded. `baggage` is application data, so it is never read.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

HEX: Final = frozenset("0123456789abcdef")  # HEXDIGLC: upper case is not hex here
SAMPLED: Final = 0x01
RANDOM: Final = 0x02  # Level 2's random-trace-id flag
# "The behavior of other flags ... is not defined and is reserved for future use. Vendors MUST set
# those to zero."
KNOWN_FLAGS: Final = SAMPLED | RANDOM
MAX_MEMBERS: Final = 32
# "Vendors SHOULD propagate at least 512 characters of a combined header": exactly that many are
# kept, cut as the spec says (whole entries, those over 128 characters first, then from the end).
MAX_TRACESTATE: Final = 512
LONG_ENTRY: Final = 128
MAX_INPUT: Final = 8192  # longer inbound values are not parsed at all
_KEY_FIRST: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_KEY_CHARS: Final = _KEY_FIRST | frozenset("_-*/@")


def _hex(text: str, length: int) -> bool:
    return len(text) == length and HEX.issuperset(text)


def _id(text: str, length: int) -> bool:
    # "All bytes as zero ... is considered an invalid value."
    return _hex(text, length) and text != "0" * length


_ZERO_TRACE: Final = "0" * 32
_ZERO_SPAN: Final = "0" * 16


def _random_hex(nbytes: int) -> str:
    # Pseudo-random is what the spec asks ("randomly (or pseudo-randomly) generated"), and it
    # costs no system call: os.urandom's releases the GIL, a hand-off between threads under load.
    # The module's generator is seeded again in a forked worker, so workers never share ids.
    return f"{random.getrandbits(8 * nbytes):0{2 * nbytes}x}"


def _random_id(nbytes: int) -> str:
    while True:
        value = _random_hex(nbytes)
        if value != "0" * (2 * nbytes):  # all zeros is invalid; one chance in 2**64 or more
            return value


def new_span_id() -> str:
    return _random_id(8)


@dataclass(frozen=True, slots=True)
class TraceParent:
    """The fields of a `traceparent` this server understands (version 00)."""

    trace_id: str  # 32 lower-case hex digits, not all zero
    parent_id: str  # 16 lower-case hex digits, not all zero
    flags: int  # only the known bits: the rest are zeroed on the way in


def parse_traceparent(value: object) -> TraceParent | None:
    """A `traceparent` value → its fields, or None when it must be ignored."""
    if not isinstance(value, str) or len(value) > MAX_INPUT:
        return None
    # OWS around a field value is not part of it (RFC 9110 §5.5); inside, nothing is tolerated.
    value = value.strip(" \t")
    version = value[:2]
    # "Version 255 ("ff") is invalid"; a higher version shorter than 55 characters is not parsed.
    if not _hex(version, 2) or version == "ff" or len(value) < 55:
        return None
    if version == "00" and len(value) != 55:
        return None
    # "If a higher version is detected ... Vendors MUST check that the 2 characters are either at
    # the end of the string or followed by a dash."
    if len(value) > 55 and value[55] != "-":
        return None
    if value[2] != "-" or value[35] != "-" or value[52] != "-":
        return None
    trace_id, parent_id, flags = value[3:35], value[36:52], value[53:55]
    if not _id(trace_id, 32) or not _id(parent_id, 16) or not _hex(flags, 2):
        return None
    # A higher version is forwarded as 00 ("Vendors MUST use these fields to construct the new
    # traceparent field according to the highest version of the specification known").
    return TraceParent(trace_id, parent_id, int(flags, 16) & KNOWN_FLAGS)


def _key_ok(key: str) -> bool:
    # key = ( lcalpha / DIGIT ) 0*255 ( keychar )
    return 0 < len(key) <= 256 and key[0] in _KEY_FIRST and _KEY_CHARS.issuperset(key)


def _value_ok(value: str) -> bool:
    # value = 0*255(chr) nblk-chr; nblk-chr = %x21-2B / %x2D-3C / %x3E-7E; chr = %x20 / nblk-chr
    if not 0 < len(value) <= 256 or value[-1] == " ":
        return False
    return all(0x20 <= ord(ch) <= 0x7E and ch not in ",=" for ch in value)


def parse_tracestate(value: object) -> str | None:
    """A `tracestate` → the list to forward (512 characters at most), or None.

    Several header fields arrive joined with commas (RFC 9110 §5.3), which is the same list. None
    when empty, or invalid as a whole: a malformed member, a key present twice, over 32 members.
    """
    if not isinstance(value, str) or len(value) > MAX_INPUT:
        return None
    members: list[str] = []
    keys: set[str] = set()
    for raw in value.split(","):
        # "Spaces and horizontal tabs surrounding list-members are ignored"; empty members are allowed.
        member = raw.strip(" \t")
        if not member:
            continue
        key, eq, val = member.partition("=")
        if not eq or not _key_ok(key) or not _value_ok(val) or key in keys:
            return None
        keys.add(key)
        members.append(f"{key}={val}")
    if not members or len(members) > MAX_MEMBERS:
        return None
    return _truncate(members)


def _truncate(members: list[str]) -> str:
    def size(items: list[str]) -> int:
        return sum(len(m) for m in items) + len(items) - 1

    if size(members) > MAX_TRACESTATE:
        members = [m for m in members if len(m) <= LONG_ENTRY]
    while members and size(members) > MAX_TRACESTATE:
        members.pop()
    return ",".join(members)


class Trace:
    """The trace one MCP request belongs to: the caller's continued, or ours.

    `span_id` is this server's span for the request; each upstream call gets a span of its own.
    A plain class rather than a frozen dataclass: one is made per request, and the first upstream
    span comes from the same random draw as the request's own ids.
    """

    __slots__ = ("_spare", "flags", "parent_id", "source", "span_id", "trace_id", "tracestate")

    def __init__(
        self,
        trace_id: str,
        span_id: str,
        flags: int,
        parent_id: str | None = None,  # the caller's span, when the trace came in
        tracestate: str | None = None,
        source: str = "started",  # "header", "meta" or "started"
        spare: str | None = None,  # an unused span id for the first upstream call
    ) -> None:
        self.trace_id, self.span_id, self.flags = trace_id, span_id, flags
        self.parent_id, self.tracestate, self.source = parent_id, tracestate, source
        self._spare = spare

    def __repr__(self) -> str:
        return f"Trace({self.trace_id}, span {self.span_id}, flags {self.flags:02x}, from {self.source})"

    @classmethod
    def start(cls) -> Trace:
        """A new trace, with the random-trace-id flag set.

        Its trace id is random throughout; the sampled flag is not set ("It should be set to 0 as
        the default option when the trace is initiated by this component").
        """
        raw = _random_hex(32)  # trace id, our span, the first upstream span
        trace_id, span_id, spare = raw[:32], raw[32:48], raw[48:]
        if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN or spare == _ZERO_SPAN:
            trace_id, span_id, spare = _random_id(16), new_span_id(), new_span_id()
        return cls(trace_id, span_id, RANDOM, spare=spare)

    @classmethod
    def resume(cls, traceparent: object, tracestate: object, source: str) -> Trace | None:
        """The caller's trace with a new span of ours; None if traceparent is bad.

        "If the vendor failed to parse traceparent, it MUST NOT attempt to parse tracestate."
        """
        parent = parse_traceparent(traceparent)
        if parent is None:
            return None
        state = parse_tracestate(tracestate)
        return cls(parent.trace_id, new_span_id(), parent.flags, parent.parent_id, state, source, new_span_id())

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)

    def outbound(self) -> tuple[str, str]:
        """(`traceparent`, span id) for one upstream call: same trace, new span."""
        span = self._spare
        if span is None:
            span = new_span_id()
        else:
            self._spare = None
        return f"00-{self.trace_id}-{span}-{self.flags:02x}", span


def from_carriers(meta: object, traceparent: str | None, tracestate: str | None) -> Trace:
    """A request's trace: from valid `_meta`, else valid headers, else new.

    `_meta` wins over headers: it names the client's span for this very message (the OpenTelemetry
    MCP conventions: "Instrumentations SHOULD propagate trace context inside MCP request
    params._meta"), where an HTTP header may come from a proxy or an HTTP library in between.
    """
    if isinstance(meta, dict) and "traceparent" in meta:
        trace = Trace.resume(meta.get("traceparent"), meta.get("tracestate"), "meta")
        if trace is not None:
            return trace
    if traceparent is not None:
        trace = Trace.resume(traceparent, tracestate, "header")
        if trace is not None:
            return trace
    return Trace.start()
