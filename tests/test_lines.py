"""The stdio line framer (mcp_server/wire/lines.py) held to one written definition, whatever the chunk boundaries.

The definition (`reference` below) splits the whole input on b"\\n" at once: each piece longer
than the limit is one refusal, every other piece is stripped and kept unless blank, and the
last piece (no newline after it) counts only at end of input, or when it is already too long.
Hypothesis builds the inputs from the bytes that matter (newlines, CR, blanks, U+2028's UTF-8)
and cuts them anywhere; the framer, fed piece by piece, must give exactly what the definition
gives, and never hold more than the limit of a line not yet ended.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any, Final

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_server.wire.lines import MAX_LINE, Framed, LineFramer, Oversized

STRIPPED: Final = b" \t\r\n"
LIMIT: Final = 8  # small, so that generated lines cross it often


def profile(examples: int) -> Callable[[Any], Any]:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


def reference(data: bytes, limit: int, *, at_end: bool) -> list[Framed]:
    """What the framer must give for `data`: at end of input (`at_end`), or when a stop cuts it off."""
    *ended, tail = data.split(b"\n")
    out: list[Framed] = []
    for piece in ended:
        if len(piece) > limit:
            out.append(Oversized(limit))
        elif piece.strip(STRIPPED):
            out.append(piece.strip(STRIPPED))
    if len(tail) > limit:
        out.append(Oversized(limit))  # refused as soon as it is too long, ended or not
    elif at_end and tail.strip(STRIPPED):
        out.append(tail.strip(STRIPPED))
    return out


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in pairwise(bounds)]


# The bytes framing turns on, and a few it must not: U+2028 and U+0085 in UTF-8 split nothing.
ATOMS: Final = [b"\n", b"\r\n", b"\r", b" ", b"\t", b"x", b"{}", b"\xe2\x80\xa8", b"\xc2\x85", b"y" * LIMIT]
inputs = st.lists(st.sampled_from(ATOMS), max_size=40).map(b"".join)


@profile(600)
@given(data=st.data(), raw=inputs, at_end=st.booleans())
def test_lines_are_the_same_wherever_the_chunks_are_cut(data: st.DataObject, raw: bytes, at_end: bool) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=12))
    framer = LineFramer(LIMIT)
    out: list[Framed] = []
    for chunk in chunks(raw, cuts):
        out += framer.feed(chunk)
        assert framer.held <= LIMIT, "a line not yet ended is held only up to the limit"
    if at_end:
        out += framer.end()
    assert out == reference(raw, LIMIT, at_end=at_end)


@profile(200)
@given(raw=inputs)
def test_one_byte_at_a_time_gives_what_one_piece_gives(raw: bytes) -> None:
    whole, bytewise = LineFramer(LIMIT), LineFramer(LIMIT)
    at_once = whole.feed(raw) + whole.end()
    one_by_one = [item for i in range(len(raw)) for item in bytewise.feed(raw[i : i + 1])] + bytewise.end()
    assert one_by_one == at_once


def test_a_unicode_line_separator_splits_nothing() -> None:
    raw = '{"id":"a\u2028b\u2029c\x85d"}\n'.encode()
    assert LineFramer().feed(raw) == [raw[:-1]]


def test_crlf_endings_blank_lines_and_padding_are_stripped() -> None:
    framer = LineFramer()
    assert framer.feed(b"\n\r\n  \n\t{1}\r\n  {2}  \n{3}") == [b"{1}", b"{2}"]
    assert framer.end() == [b"{3}"]


def test_a_line_of_max_line_bytes_is_kept_and_one_byte_more_is_refused_once() -> None:
    framer = LineFramer()
    assert framer.feed(b"a" * MAX_LINE) == []
    assert framer.feed(b"\n") == [b"a" * MAX_LINE]
    assert framer.feed(b"b" * MAX_LINE) == []
    assert framer.feed(b"b") == [Oversized(MAX_LINE)]
    assert framer.held == 0
    assert framer.feed(b"b" * MAX_LINE) == [], "the rest of an over-long line is skipped, not refused again"
    assert framer.held == 0, "nor kept"
    assert framer.feed(b"b\r\n{next}\n") == [b"{next}"]


def test_an_over_long_line_ended_within_one_piece_is_refused_and_the_next_served() -> None:
    assert LineFramer(LIMIT).feed(b"z" * (LIMIT + 1) + b"\n{ok}\n") == [Oversized(LIMIT), b"{ok}"]


def test_a_line_not_ended_is_given_only_at_end_of_input() -> None:
    framer = LineFramer()
    assert framer.feed(b"{1}\n{2") == [b"{1}"]
    assert framer.held == 2
    assert framer.end() == [b"{2"]
    assert framer.end() == []
