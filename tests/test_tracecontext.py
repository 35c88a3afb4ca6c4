"""W3C Trace Context values: what is taken, what is dropped, and what goes upstream (no sockets here).

The cases follow the W3C test harness (github.com/w3c/trace-context, test/test.py) case by case.
"""

from __future__ import annotations

import pytest

from mcp_server.ops.tracecontext import (
    MAX_TRACESTATE,
    RANDOM,
    SAMPLED,
    Trace,
    from_carriers,
    parse_traceparent,
    parse_tracestate,
)

TRACE = "12345678901234567890123456789012"
PARENT = "1234567890123456"
VALID = f"00-{TRACE}-{PARENT}-01"


@pytest.mark.parametrize(
    "value",
    [
        VALID,
        f" {VALID}",
        f"\t{VALID}",
        f"{VALID} ",
        f"\t {VALID} \t",
        f"cc-{TRACE}-{PARENT}-01",  # a future version is read as 00
        f"cc-{TRACE}-{PARENT}-01-what-the-future-will-be-like",
    ],
)
def test_a_valid_traceparent_is_read(value: str) -> None:
    parent = parse_traceparent(value)
    assert parent is not None
    assert (parent.trace_id, parent.parent_id, parent.flags) == (TRACE, PARENT, SAMPLED)
    trace = Trace.resume(value, None, "header")
    assert trace is not None
    traceparent, span = trace.outbound()
    assert traceparent == f"00-{TRACE}-{span}-01"  # forwarded as the version this server knows


@pytest.mark.parametrize(
    "value",
    [
        f"{VALID}.",  # version 00 is exactly 55 characters
        f"{VALID}-what-the-future-will-be-like",
        f"cc-{TRACE}-{PARENT}-01.what-the-future-will-be-like",
        f"ff-{TRACE}-{PARENT}-01",  # version 255 is invalid
        f"0x-{TRACE}-{PARENT}-01",
        f"000-{TRACE}-{PARENT}-01",
        f"0-{TRACE}-{PARENT}-01",
        f"00-{'0' * 32}-{PARENT}-01",  # all zeros
        f"00-{TRACE}-{'0' * 16}-01",
        f"00-{TRACE.upper()[:-1]}A-{PARENT}-01",  # upper case is not HEXDIGLC
        f"00-{TRACE[:-1]}.-{PARENT}-01",
        f"00-{TRACE}1-{PARENT}-01",
        f"00-{TRACE[:-1]}-{PARENT}-01",
        f"00-{TRACE}-{PARENT[:-1]}.-01",
        f"00-{TRACE}-{PARENT}1-01",
        f"00-{TRACE}-{PARENT[:-1]}-01",
        f"00-{TRACE}-{PARENT}-.0",
        f"00-{TRACE}-{PARENT}-0A",
        f"00-{TRACE}-{PARENT}-001",
        f"00-{TRACE}-{PARENT}-0",
        f"{VALID},{VALID}",  # two traceparent fields, as a server joins them
        "",
        "00",
        None,
        55,
        ["00"],
        "x" * 100_000,
    ],
)
def test_an_invalid_traceparent_is_refused(value: object) -> None:
    assert parse_traceparent(value) is None


def test_unknown_flags_are_zeroed_and_the_known_ones_kept() -> None:
    parent = parse_traceparent(f"00-{TRACE}-{PARENT}-ff")
    assert parent is not None and parent.flags == SAMPLED | RANDOM


@pytest.mark.parametrize(
    ("value", "forwarded"),
    [
        ("congo=t61rcWkgMzE", "congo=t61rcWkgMzE"),
        ("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
        ("foo=1 \t , \t bar=2, \t baz=3", "foo=1,bar=2,baz=3"),
        ("\t foo=1 \t", "foo=1"),
        ("foo=1,,bar=2, ,", "foo=1,bar=2"),  # empty and blank members are allowed
        ("foo@=1,bar=2", "foo@=1,bar=2"),
        ("foo@@bar=1,bar=2", "foo@@bar=1,bar=2"),
        ("t" * 241 + "@" + "v" * 14 + "=1", "t" * 241 + "@" + "v" * 14 + "=1"),
        ("z" * 256 + "=1", "z" * 256 + "=1"),
        ("foo= leading spaces kept", "foo= leading spaces kept"),
        (",".join(f"k{n:02d}={n:02d}" for n in range(32)), ",".join(f"k{n:02d}={n:02d}" for n in range(32))),
    ],
)
def test_a_valid_tracestate_is_kept(value: str, forwarded: str) -> None:
    assert parse_tracestate(value) == forwarded


def test_every_allowed_character_is_kept() -> None:
    key = "abcdefghijklmnopqrstuvwxyz0123456789_-*/"
    value = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in ",=").rstrip()
    assert parse_tracestate(f"{key}@a-z0-9_-*/={value}") == f"{key}@a-z0-9_-*/={value}"


@pytest.mark.parametrize(
    "value",
    [
        "foo =1",
        "FOO=1",
        "foo.bar=1",
        "@foo=1,bar=2",
        "foo=bar=baz",
        "foo=,bar=3",
        "foo",
        "foo=1,foo=2",  # a key twice
        "z" * 257 + "=1",
        "foo=" + "v" * 257,
        "foo=a\tb",
        "foo=é",
        ",".join(f"k{n:02d}={n:02d}" for n in range(33)),  # 33 members
        "",
        " , ",
        None,
        7,
    ],
)
def test_an_invalid_tracestate_is_dropped_whole(value: object) -> None:
    assert parse_tracestate(value) is None


def test_a_long_tracestate_is_cut_to_whole_entries_long_ones_first() -> None:
    long_entry = "big=" + "x" * 200
    small = [f"k{n:02d}=" + "v" * 40 for n in range(20)]  # 44 characters each
    cut = parse_tracestate(",".join([small[0], long_entry, *small[1:]]))
    assert cut is not None and len(cut) <= MAX_TRACESTATE
    members = cut.split(",")
    assert "big" not in {m.split("=")[0] for m in members}  # over 128 characters: removed first
    assert members == small[: len(members)]  # then from the end, whole entries only
    assert len(members) == (MAX_TRACESTATE + 1) // 45


def test_a_started_trace_is_new_random_and_not_sampled() -> None:
    first, second = Trace.start(), Trace.start()
    assert first.trace_id != second.trace_id and first.span_id != second.span_id
    assert len(first.trace_id) == 32 and len(first.span_id) == 16
    assert first.flags == RANDOM and not first.sampled
    assert (first.source, first.parent_id, first.tracestate) == ("started", None, None)


def test_each_upstream_call_gets_a_span_of_its_own_in_the_same_trace() -> None:
    trace = Trace.resume(VALID, "congo=t61rcWkgMzE", "header")
    assert trace is not None
    (one, span_one), (two, span_two) = trace.outbound(), trace.outbound()
    assert span_one != span_two and PARENT not in (span_one, span_two) and trace.span_id not in (span_one, span_two)
    for header, span in ((one, span_one), (two, span_two)):
        parsed = parse_traceparent(header)
        assert parsed is not None and (parsed.trace_id, parsed.parent_id, parsed.flags) == (TRACE, span, SAMPLED)
    assert trace.tracestate == "congo=t61rcWkgMzE"


def test_meta_wins_over_headers_and_an_invalid_value_falls_through() -> None:
    other = f"00-{'a' * 32}-{'b' * 16}-00"
    from_meta = from_carriers({"traceparent": VALID, "tracestate": "m=1"}, other, "h=1")
    assert (from_meta.trace_id, from_meta.source, from_meta.tracestate) == (TRACE, "meta", "m=1")
    from_header = from_carriers({"traceparent": "garbage", "tracestate": "m=1"}, other, "h=1")
    assert (from_header.trace_id, from_header.source, from_header.tracestate) == ("a" * 32, "header", "h=1")
    started = from_carriers({"tracestate": "m=1"}, "00-bad", "h=1")
    assert started.source == "started" and started.tracestate is None  # no tracestate without a traceparent
    assert started.trace_id not in (TRACE, "a" * 32)


def test_a_tracestate_is_never_read_beside_an_invalid_traceparent() -> None:
    assert Trace.resume("00-bad", "congo=t61rcWkgMzE", "header") is None
    trace = Trace.resume(VALID, "not valid", "header")
    assert trace is not None and trace.tracestate is None  # the traceparent still counts
