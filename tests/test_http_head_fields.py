"""The header section's field-line check, held to the grammar's one regular expression."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_server.transports.http.head import Refusal, _field_lines, parse_head

# field-line = field-name ":" OWS field-value OWS (RFC 9112 §5), each after a CRLF, as one pattern:
# what _field_lines reads in two passes.
FIELD_LINES = re.compile(rb"(?:\r\n[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\x00-\x08\x0a-\x1f\x7f]*)*")

_BYTES = st.sampled_from([bytes((c,)) for c in b'aZ-!~: \t\r\n\x00\x01\x0b\x1f\x7f\x80\xff=/"\\'] + [b"\r\n"])
_LINE = st.tuples(
    st.lists(_BYTES, max_size=6).map(b"".join),
    st.sampled_from([b":", b": ", b"", b" :"]),
    st.lists(_BYTES, max_size=12).map(b"".join),
).map(lambda parts: b"\r\n" + b"".join(parts))


@settings(max_examples=3000, derandomize=True, deadline=None)
@given(st.lists(_LINE, max_size=5).map(b"".join), st.lists(_BYTES, max_size=3).map(b"".join))
def test_field_lines_is_the_grammar(section: bytes, tail: bytes) -> None:
    for fields in (section, section + tail, tail + section):
        assert (_field_lines(fields) is not None) == (FIELD_LINES.fullmatch(fields) is not None), fields


def test_each_control_byte_in_a_value_is_refused_and_htab_taken() -> None:
    token = b"x" * 800
    for byte in [*range(0x20), 0x7F]:
        fields = b"\r\nHost: h\r\nAuthorization: Bearer " + token[:400] + bytes((byte,)) + token[400:]
        assert (_field_lines(fields) is not None) == (byte == 0x09), byte
        head = parse_head(b"GET / HTTP/1.1" + fields)
        assert (getattr(head, "status", None) == 400) == (byte != 0x09), byte


def test_a_bare_lf_or_cr_between_lines_is_refused() -> None:
    for fields in (b"\r\nHost: h\nX: y", b"\r\nHost: h\rX: y", b"\r\nHost: h\r\n", b"\nHost: h", b"\r\n\r\nHost: h"):
        assert _field_lines(fields) is None, fields


@settings(max_examples=3000, derandomize=True, deadline=None)
@given(
    st.lists(_BYTES, max_size=20).map(b"".join),
    st.lists(_LINE, max_size=4).map(b"".join),
    st.lists(_BYTES, max_size=3).map(b"".join),
)
def test_no_head_with_a_bare_lf_is_accepted(line: bytes, section: bytes, tail: bytes) -> None:
    # The reader counts a head's LFs only once parse_head refused it (reader.py): so that no head
    # with a bare LF gets through, parse_head must refuse every one.
    for data in (b"GET / HTTP/1.0" + section + tail, b"GET /" + line + b" HTTP/1.1\r\nHost: h" + section, line):
        if not isinstance(parse_head(data), Refusal):
            assert data.count(b"\n") == data.count(b"\r\n"), data


def test_too_many_lines_is_refused_first_well_formed_or_not() -> None:
    many = b"".join(b"\r\nX-%d: v" % n for n in range(100))
    for fields, status in ((many, None), (many + b"\r\nX: y", 431), (many + b"\r\nbad line", 431), (b"\r\nbad", 400)):
        head = parse_head(b"GET / HTTP/1.0" + fields)
        assert getattr(head, "status", None) == status, (fields[-12:], head)
