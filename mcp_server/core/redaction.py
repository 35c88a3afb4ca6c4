"""Redaction by value of the bearer and payment a request carries.

Their exact values are kept out of what the request returns and what it logs.

The pattern rules in outcomes.clean (`fw1.…`, `eyJ…`) recognise credentials by their look; a
gateway (or a proxy, or a logging library in front of it) that writes back what it received can
change that look. This module matches the values themselves, by one definition (docs/security.md):

  A text spells a credential when, decoded to a fixpoint and folded, it holds a run of MIN_RUN (8)
  or more characters of it. Decoding is rounds of one left-to-right pass over the UTF-8 text: `%XX`
  becomes its byte, `\\uXXXX` its character, `\\"`, `\\\\`, `\\/`, `\\b`, `\\f`, `\\n`, `\\r`,
  `\\t` theirs; rounds repeat until nothing changes, so an escape spelled by escapes (`\\u0025` for
  `%`, `%5C` for `\\`, `\\u0033` for a hex digit, `\\\\/` doubled) is decoded through. Folding
  lowers ASCII letters and reads the Kelvin sign as `k` (the one character outside ASCII whose
  str.lower is ASCII); nothing else (U+0130, `ſ`, ligatures, `ı`) is folded. A text is also read
  with one round of JSON's escapes first (the view of a client that parses it as JSON), and a text
  still changing after MAX_ROUNDS rounds counts as spelling it.

The bearer is searched for as written, so it must have no other reading: a bearer holding an
escape the decoding would decode is refused where it enters (`escape_in`), never sent.

Out of reach: pieces shorter than MIN_RUN; other encodings (base64 of the bearer, HTML entities,
look-alike characters, a hash).

What is searched for: the bearer, any run of 8 or more of its characters; a payment's whole
header value, and, within bounds (MAX_PAYMENT_NEEDLES, MAX_PAYMENT_NEEDLE_BYTES), the long
strings of its `payload` that spend it and the stretches of its base64 forms that encode them.
A match is replaced by the bearer's redacted form (`fw1.…abcd`) when it is the whole bearer, else
by MARK, over the whole stretch of the original text that decodes to it; the result is checked
again by the definition, and withheld whole (MARK) if it still spells anything.

A whole gateway answer is first given `might_be_in`, on its raw bytes: sound against the
definition (whatever a client reads of the answer that spells a credential, it suspects), at C
speed, and exact at the cost of one search when the bytes hold no `%` and no `\\`; so an answer
that cannot spell a credential is passed on without being walked (tools.py).

A request binds its context for as long as it is handled (logs.bind_request), so the log filter and
the sentences built from gateway text (`scrub`) find the values without every function passing
them.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import json
import re
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, NamedTuple

from mcp_server.ops import logs
from mcp_server.wire.jsonrpc import Verbatim, dumps_in_slices
from mcp_server.wire.x402 import Payment

MIN_RUN: Final = 8
MARK: Final = "(credential not shown)"
MAX_ROUNDS: Final = 16  # rounds of decoding; a text still changing after them counts as spelling a credential
_ANCHOR: Final = MIN_RUN // 2  # any run of MIN_RUN - 1 or more holds a whole aligned anchor
MAX_CANDIDATES: Final = 100_000  # places a piece occurs in one text, each searched around
_RESCRUBS: Final = 3  # scrubs of a scrubbed text that still spells a credential, before it is withheld whole
_LONG_LEAF: Final = 16  # shorter strings in a payload are amounts and timestamps, not secrets
_ADDRESS: Final = re.compile(r"0x[0-9a-fA-F]{40}")  # an EVM address: public, also in the offer and receipt
# A payment's needles, bounded whatever the payment holds: at most this many, and at most this many
# bytes of them searched for runs of MIN_RUN (the rest are recognised whole, one probe each). An
# EVM `exact` payment (signature, nonce and their base64 stretches) takes about 1.3 KB of it.
MAX_PAYMENT_NEEDLES: Final = 24
MAX_PAYMENT_NEEDLE_BYTES: Final = 2048

# ---- the definition: decoding ------------------------------------------------------------------------

_ESCAPE: Final = re.compile(rb'%(?P<pct>[0-9A-Fa-f]{2})|\\(?:u(?P<uni>[0-9A-Fa-f]{4})|(?P<one>["\\/bfnrt]))')
_JSON_ESCAPE: Final = re.compile(rb'\\(?:u(?P<uni>[0-9A-Fa-f]{4})|(?P<one>["\\/bfnrt]))')
_ONE: Final = {b'"': b'"', b"\\": b"\\", b"/": b"/", b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t"}
_BYTE: Final = [bytes((i,)) for i in range(256)]
_KELVIN: Final = "\u212a".encode()  # the one character outside ASCII whose lower case is in it ("k")


def _char(match: re.Match[bytes]) -> bytes:
    """The bytes one escape stands for.

    A byte for `%XX`, a character's UTF-8 for `\\uXXXX`, JSON's for the rest.
    """
    escape = match.group()
    known = _KNOWN.get(escape)
    if known is not None:
        return known
    code = int(escape[2:], 16)  # a \\uXXXX not yet seen: every %XX and 2-character escape is known
    char = _BYTE[code] if code < 0x80 else chr(code).encode("utf-8", "surrogatepass")  # a lone surrogate stays one
    if len(_KNOWN) < _KNOWN_MAX:
        _KNOWN[escape] = char
    return char


_KNOWN_MAX: Final = 16_384
_HEX_DIGITS: Final = [bytes((c,)) for c in b"0123456789abcdefABCDEF"]
_KNOWN: Final[dict[bytes, bytes]] = {b"\\" + key: value for key, value in _ONE.items()}
_KNOWN.update({b"%" + high + low: _BYTE[int(high + low, 16)] for high in _HEX_DIGITS for low in _HEX_DIGITS})


def _one_round(data: bytes, pattern: re.Pattern[bytes]) -> bytes:
    """`pattern.sub(_char, data)`, with JSON's escaped quotes replaced in C.

    Escaped quotes are the most of any JSON text's escapes.

    Where no backslash follows another, every backslash starts an escape and none borrows from
    its neighbours: each `\\"` is one, whatever surrounds it, and replacing them all first is the
    same round.
    """
    if b'\\"' in data and b"\\\\" not in data:
        data = data.replace(b'\\"', b'"')
    return pattern.sub(_char, data)


def _settle(data: bytes) -> bytes | None:
    """`data` decoded round after round until nothing changes.

    None while it still changes after MAX_ROUNDS.
    """
    for _ in range(MAX_ROUNDS + 1):
        if b"%" not in data and b"\\" not in data:
            return data
        decoded = _one_round(data, _ESCAPE)
        if len(decoded) == len(data):  # every escape shortens the text: the same length is no change
            return data
        data = decoded
    return None


def escape_in(token: str) -> str | None:
    """The first escape the definition would decode in `token`, or None.

    Such as `%2F`, `\\u002f` or `\\/`.

    The definition reads a text decoded and looks there for the bearer as written: a bearer that
    itself holds an escape has a decoded reading too, and an echo of it (the gateway's, a proxy's,
    a log's) reads as that, so no search finds it. Such a bearer is refused where it enters, never
    sent (RFC 6750's b64token holds no `%` and no `\\`); a `%` or `\\` that starts no escape is
    taken, and every reading of it is the bearer as written. The definition reads case folded, so
    a bearer is refused too when its lower case holds an escape (`\\B` in a bearer that a writer
    lower-cases is JSON's `\\b`); what is named is the bearer's own spelling of it.
    """
    raw = token.encode("utf-8", "surrogatepass")
    if b"%" not in raw and b"\\" not in raw:
        return None  # every escape starts with one, in either case: an access token's 800 bytes in C, not twice in re
    found = _ESCAPE.search(raw) or _ESCAPE.search(raw.lower())  # bytes.lower(): ASCII only, same places
    return None if found is None else raw[found.start() : found.end()].decode("utf-8", "surrogatepass")


def _fold(data: bytes) -> bytes:
    folded = data.lower()  # ASCII letters only
    return folded if folded.isascii() else folded.replace(_KELVIN, b"k")


def decoded(data: bytes, readings: int = 2) -> list[bytes] | None:
    """The text (UTF-8) as the definition reads it: decoded and folded.

    Decoded to a fixpoint; None when it does not settle.

    One view per reading: the text as it is, then with one round of JSON's escapes first (a
    client that parses it as JSON reads its strings so), then two (JSON text inside its strings).
    A text with no `%` and no `\\` is its own decoding: one view, folded.
    """
    if b"%" not in data and b"\\" not in data:
        return [_fold(data)]
    views: list[bytes] = []
    for reading in range(readings):
        if reading:
            data = _one_round(data, _JSON_ESCAPE)
        settled = _settle(data)
        if settled is None:
            return None
        views.append(_fold(settled))
        if b"%" not in data or b"\\" not in data:
            # No `\`: JSON's escapes change nothing. No `%`: a round of JSON's escapes is the
            # first round of decoding. Either way every further view is this one.
            break
    return views


def _fold_value(value: str) -> bytes:
    return _fold(value.encode("utf-8", "surrogatepass"))


class _Tracked:
    """The definition's decoding again, keeping where each byte came from.

    So a match found in a view is traced back to the text it came from.

    Only for a text in which a match was found (the rare case): each escape costs a Python call.
    `starts[i]` is where the view's byte i starts in the text's UTF-8, and `starts[-1]` its end;
    the bytes of the view from i to j came from the text's bytes from starts[i] to starts[j].
    """

    def __init__(self, data: bytes, json_rounds: int) -> None:
        self.data = data
        view, starts = data, list(range(len(data) + 1))
        for _ in range(json_rounds):
            view, starts = _round(view, starts, _JSON_ESCAPE, _char)
        settled = False
        for _ in range(MAX_ROUNDS + 1):
            if b"%" not in view and b"\\" not in view:
                settled = True
                break
            decoded, moved = _round(view, starts, _ESCAPE, _char)
            if len(decoded) == len(view):
                settled = True
                break
            view, starts = decoded, moved
        view = view.lower()
        if not view.isascii():
            view, starts = _round(view, starts, _KELVIN_BYTES, lambda match: b"k")
        self.view: bytes | None = view if settled else None
        self.starts = starts


_KELVIN_BYTES: Final = re.compile(re.escape(_KELVIN))


def _round(
    data: bytes, starts: list[int], pattern: re.Pattern[bytes], char: Callable[[re.Match[bytes]], bytes]
) -> tuple[bytes, list[int]]:
    """One round of `pattern.sub(char, data)`, tracking each byte's origin.

    The result, and where each of its bytes came from (taken from `starts`).
    """
    out: list[bytes] = []
    moved: list[int] = []
    at = 0
    for match in pattern.finditer(data):
        start, end = match.span()
        out.append(data[at:start])
        moved += starts[at:start]
        piece = char(match)
        out.append(piece)
        moved += [starts[start]] * len(piece)
        at = end
    out.append(data[at:])
    moved += starts[at:]  # the end of the text included
    return b"".join(out), moved


class _Needle(NamedTuple):  # a tuple: made once a request, and a frozen dataclass is slow to make
    folded: bytes
    min_run: int  # MIN_RUN, or the whole length for values only secret whole
    whole: str | None  # what replaces a match of the whole needle (None: MARK)


class Redactor:
    """The values one request carries, and where they show in a text."""

    def __init__(self, bearer: str | None, payment: Payment | None) -> None:
        needles: list[_Needle] = []
        if bearer is not None and len(bearer) >= MIN_RUN:
            needles.append(_Needle(_fold_value(bearer), MIN_RUN, logs.redact(bearer)))
        if payment is not None:
            needles += _payment_needles(payment.value)
        self._needles = needles
        joined = b"".join([needle.folded for needle in needles])
        self._ascii = joined.isascii()
        # Characters fewer than this cannot decode to a run (every character is a byte or more).
        self._shortest = min([needle.min_run for needle in needles], default=0) if self._ascii else 1
        # For raw bytes (might_be_in): each needle with its probes, None when a needle is not
        # ASCII or holds a backslash (the exact search is then used for every text).
        self._bytes: list[tuple[bytes, int]] | None = None
        if self._ascii and b"\\" not in joined:
            self._bytes = [(needle.folded, needle.min_run) for needle in needles]
        self._short: list[_Probe] | None = None  # probes for short texts
        # _grams, worked out on first use: a plain attribute, not functools.cached_property, which
        # on Python 3.11 takes a lock shared by every redactor at each first use (one a request).
        self._sampling: _Grams | None = None
        self._sampled = False
        # No more places a text of n characters can be searched at than n times this (_runs):
        # under MAX_CANDIDATES, what scrub finds is what might_be_in looks for.
        self._anchor_bound = sum([len(needle.folded) // _ANCHOR + 2 for needle in needles])

    @functools.cached_property
    def _letters(self) -> frozenset[int]:
        return frozenset(c for folded, _ in self._bytes or () for c in folded)

    @functools.cached_property
    def _mark(self) -> str:
        """The marker that replaces a match: MARK, unless it spells a needle.

        MARK spells one when a bearer is made of its words; then a character alone.
        """
        return MARK if self._runs(_fold_value(MARK)) == [] else "…"

    @functools.cached_property
    def _anchors(self) -> list[tuple[int, int, bytes]]:
        """The pieces `_runs` looks for: (needle, offset, folded piece).

        Worked out for the first text `scrub` searches, if any.
        """
        anchors = []
        for index, needle in enumerate(self._needles):
            size = _ANCHOR if needle.min_run == MIN_RUN else needle.min_run
            offsets = range(0, len(needle.folded) - size + 1, size)
            for offset in {*offsets, len(needle.folded) - size}:
                anchors.append((index, offset, needle.folded[offset : offset + size]))
        return anchors

    def __bool__(self) -> bool:
        return bool(self._needles)

    def scrub(self, text: str) -> str:
        """`text` with every match replaced (the same object when there is none)."""
        if not self._needles or len(text) < self._shortest:
            return text
        if len(text) * self._anchor_bound < MAX_CANDIDATES and self._bytes is not None:
            # A text too short to exhaust the search's budget: the raw bytes' test settles it.
            if not self.might_be_in(text.encode("utf-8", "surrogatepass")):
                return text
        return self.scrub_exact(text)

    def scrub_exact(self, text: str) -> str:
        """`scrub` by the search alone, without the raw bytes' test first.

        What that test is held to.

        The replaced text is held to the definition again: scrubbed once more if replacing made a
        new match (a marker next to what decodes with it), and withheld whole if that does not end
        it.
        """
        if not self._needles or len(text) < self._shortest:
            return text
        current = text
        for _ in range(_RESCRUBS + 1):
            replaced = self._replace(current)
            if replaced is current:
                return text if current is text else current
            if replaced is None:
                return self._mark
            current = replaced
        return self._mark

    def _replace(self, text: str) -> str | None:
        """`text` with the stretches that decode to a match replaced.

        `text` itself when there is none; None when it is withheld whole.
        """
        data = text.encode("utf-8", "surrogatepass")
        views = decoded(data)
        if views is None:
            return None  # escapes nested deeper than MAX_ROUNDS: counted as a match, withheld whole
        spans: list[tuple[int, int, str]] = []
        for reading, view in enumerate(views):
            found = self._runs(view)
            if found is None:
                return None  # pieces of a credential everywhere: the whole text is one
            if not found:
                continue
            # Where no escape was decoded and no Kelvin sign folded, the view is the text's own bytes.
            plain = b"%" not in data and b"\\" not in data and _KELVIN not in data
            tracked = None if plain else _Tracked(data, reading)
            if tracked is not None and tracked.view != view:
                return None  # never: the two decodings are one definition; withheld if they part
            for start, end, replacement in found:
                if tracked is not None:
                    start, end = tracked.starts[start], tracked.starts[end]
                spans.append((start, end, replacement))
        if not spans:
            return text
        return _splice(text, data, spans)

    def holds(self, text: str) -> bool:
        return self.scrub(text) is not text

    def scrub_value(self, value: Any) -> Any:
        """A JSON value with every string and key scrubbed.

        `value` itself when nothing matched.

        Its JSON text is read first, by the definition, as the strings in it are (and as a string
        holding JSON text is read once more): a value in which nothing can match is never walked.
        A jsonrpc.Verbatim in it must be `held` (text already held to the definition), and is left
        as it is: one that is not is refused (ValueError), never passed on unsearched.
        """
        if not self._needles:
            return value
        try:
            text = dumps_in_slices(value, ensure_ascii=False, default=_held)  # a slice at a time
        except (RecursionError, TypeError, ValueError):
            text = None  # too deep to write out here: walked instead
        if text is not None and self._bytes is not None:
            views = decoded(text.encode("utf-8", "surrogatepass"), readings=3)
            if views is not None and not any(self._spelled_in(view) for view in views):
                return value
        return self._walk(value)

    def might_be_in(self, data: bytes) -> bool:
        """Whether raw bytes (a gateway body or header) might spell a needle.

        False only when, by the definition, they cannot.

        The test a whole answer gets before it is passed on as the gateway wrote it, so it must
        see what a client reads in it: the answer's text (the text block), read as it is, and the
        strings in it (structuredContent, and the text block read as JSON), read with one round
        of JSON's escapes first (`decoded`, two views). Bytes with no `%` and no `\\` are one view,
        folded, and the search is exact. In each view, a run of a needle long enough to count
        holds one of the needle's 4-byte probes, placed at most 5 apart (`_probes`), and each
        probe is one `bytes.find`; only where a probe is found are the runs through it compared
        (`startswith`). A run holding a byte the text lacks cannot be there, so no probe stands
        for it (one `memchr` per byte of the needles tells). The cost is a few passes in C,
        whatever the text, and a token sharing short pieces with ordinary text costs no more.
        """
        if not self._needles:
            return False
        if self._bytes is None:
            return True  # a needle outside ASCII, or holding a backslash: the exact search decides
        views = decoded(data)
        if views is None:
            return True
        if len(views) == 1:  # bytes with no escape: one view, the usual case
            return self._spelled_in(views[0])
        return any(self._spelled_in(view) for view in views)

    def _probes_for(self, absent: frozenset[int]) -> list[_Probe]:
        return [probe for needle, min_run in self._bytes or () for probe in _probes(needle, min_run, absent)]

    @property
    def _grams(self) -> _Grams | None:
        if not self._sampled:
            self._sampling, self._sampled = self._make_grams(), True
        return self._sampling

    def _make_grams(self) -> _Grams | None:
        """The needles as 4-byte windows (`_Grams`); None where probes are cheaper.

        Worked out for a redactor with many probes (a payment's, a long bearer's: an OAuth access
        token of 800 bytes has 160): each probe is a pass over the text, so their number times
        the text's length is what the probes would cost. Counted from the needles' lengths alone
        (`_layout`).
        """
        needles = self._bytes or ()
        if sum(len(_layout(len(needle), min_run)) for needle, min_run in needles) <= _MANY_PROBES:
            return None
        if any(min_run < MIN_RUN for _, min_run in needles):
            return None
        whole = [needle for needle, min_run in needles if min_run == len(needle)]
        return _Grams(whole, [needle for needle, min_run in needles if min_run != len(needle)])

    def _sampled_in(self, view: bytes, grams: _Grams) -> bool:
        """`_spelled_in` by 4-byte windows.

        A few passes, however many and long the needles.

        A needle secret only whole is one search. A run of MIN_RUN bytes of another holds a whole
        4-byte window of it starting every _STEP bytes of one side, and some window of the other:
        so either the needles' windows every _STEP bytes are looked for among the text's windows
        at every byte, or the other way round, whichever side has fewer (the needles are the
        same length for every text; a long bearer is 800 bytes, a member's answer 1 KB). Of the
        text, only its stretches of a needle's bytes of MIN_RUN or more can hold a run, and an
        answer is mostly other bytes (words, numbers, JSON): where a text is no more than a few
        times the needles' length, its stretches are found by a translate and a split, and only
        they are windowed. Windows are integers read by `struct`, a few C calls each side, and matched
        by one set operation; only the windows both share are looked at, where each occurs in
        the needle and in the text, and the run through them compared. Past MAX_CANDIDATES
        comparisons, the text is suspected. Where the stretches are short (a member's small
        answer: a few ids, dates and long words), their windows every _STEP bytes are looked for
        in the needles themselves, one `bytes.find` each, and nothing is made of the needles:
        a few dozen passes in C cost less than the needles' windows as integers and a set.
        """
        if any(needle in view for needle in grams.whole):
            return True
        if not grams.runs:
            return False
        text = view
        if grams.stretch is not None and len(view) <= _STRETCHED * grams.size:
            pieces = {piece for piece in view.translate(grams.stretch).split() if len(piece) >= MIN_RUN}
            if not pieces:
                return False
            if sum(map(len, pieces)) <= _FOUND * _STEP:
                windows = {
                    piece[at : at + _PROBE] for piece in pieces for at in range(0, len(piece) - _PROBE + 1, _STEP)
                }
                # find, not `in`: bytes.__contains__ first tries its argument as an int, and formats
                # (then clears) a TypeError for every bytes it is given.
                found = {gram for gram in windows for needle in grams.runs if needle.find(gram) >= 0}
                return self._run_through(view, grams, found)
            # A byte no needle holds between two stretches: a window across one is none of theirs.
            text = b"\n".join(pieces)
        if len(text) < grams.size:
            numbers = grams.sampled().intersection(_every_window(text))
        else:
            numbers = _sampled_windows(text).intersection(grams.every())
        return self._run_through(view, grams, [number.to_bytes(_PROBE, "little") for number in numbers])

    @staticmethod
    def _run_through(view: bytes, grams: _Grams, common: Iterable[bytes]) -> bool:
        """Whether a run of MIN_RUN of a needle goes through one of the 4-byte `common` windows.

        Each found where it occurs in a needle and in `view`, and the run around it compared.
        Past MAX_CANDIDATES comparisons, the text is suspected.
        """
        budget = MAX_CANDIDATES
        for gram in common:
            for needle in grams.runs:
                offset = needle.find(gram)
                while offset >= 0:
                    at = view.find(gram)
                    while at >= 0:
                        budget -= 1
                        if budget < 0:
                            return True
                        start, end, _ = _extend(view, at, needle, offset, _PROBE)
                        if end - start >= MIN_RUN:
                            return True
                        at = view.find(gram, at + 1)
                    offset = needle.find(gram, offset + 1)
        return False

    def _spelled_in(self, view: bytes) -> bool:
        grams = self._grams
        if grams is not None:
            return self._sampled_in(view, grams)
        large = len(view) > _LARGE
        if large:
            absent = frozenset(c for c in self._letters if view.find(c) < 0)
            probes = self._probes_for(absent)
        else:  # a short text: every probe is a short search, and the same for every text
            if self._short is None:
                self._short = self._probes_for(frozenset())
            probes = self._short
        for probe, needle, offset, starts, min_run in probes:
            if large:
                # re's literal search is twice bytes.find's speed on long texts (compiled
                # patterns are cached by re; a short text is not worth a compile).
                found = re.compile(re.escape(probe)).search(view)
                if found is None:
                    continue
                at = found.start()
            else:
                at = view.find(probe)
                if at < 0:
                    continue
            runs = _runs(needle, offset, starts, min_run)
            tried = 0
            while at >= 0:
                if any(at >= back and view.startswith(run, at - back) for back, run in runs):
                    return True
                tried += 1
                if tried == _PROBE_HITS:
                    # A probe ordinary text is full of: the runs it stands for, looked for whole.
                    if any(run in view for _, run in runs):
                        return True
                    break
                at = view.find(probe, at + 1)
        return False

    def _walk(self, value: Any) -> Any:
        """A scrubbed copy of `value`, built without recursion.

        `value` itself when no string changes. No recursion: JSON nests deep.

        Which strings change is found in bulk: the strings (names and values) are searched
        joined by line breaks, as one text, and the halves of a group that might spell a needle
        searched again, down to the strings themselves, each then scrubbed. A line break ends
        every escape, so each string decodes in the group's text as it does alone, and whatever
        one of them spells, the group's text spells (`might_be_in` is sound: it suspects whatever
        `scrub` would change, for a string short enough; a longer one is scrubbed on its own). So
        a large answer costs a few passes in C and two walks, not a search per string.
        """
        strings = _strings(value)
        if self._bytes is None:
            changed = {text: self.scrub(text) for text in set(strings)}
        else:
            distinct = list(dict.fromkeys(strings))
            # A string long enough to exhaust the search's budget may be changed where the raw
            # bytes' test finds nothing (withheld whole): scrubbed on its own.
            bound = self._anchor_bound
            changed = {text: self.scrub(text) for text in distinct if len(text) * bound >= MAX_CANDIDATES}
            groups = [[text for text in distinct if len(text) * bound < MAX_CANDIDATES]]
            while groups:
                group = groups.pop()
                if not group or not self.might_be_in("\n".join(group).encode("utf-8", "surrogatepass")):
                    continue
                if len(group) == 1:
                    changed[group[0]] = self.scrub(group[0])
                else:
                    half = len(group) // 2
                    groups += [group[:half], group[half:]]
        changed = {text: scrubbed for text, scrubbed in changed.items() if scrubbed is not text}
        if not changed:
            return value
        replace = changed.get
        top: list[Any] = [None]
        stack: list[tuple[Any, Any, Any]] = [(value, top, 0)]  # (item, its new container, its key there)
        while stack:
            item, parent, key = stack.pop()
            if isinstance(item, dict):
                copy: dict[Any, Any] = {}
                parent[key] = copy
                for name, sub in item.items():
                    name = replace(name, name) if isinstance(name, str) else name
                    copy[name] = None  # the key's place, in order; its value is filled in below
                    stack.append((sub, copy, name))
            elif isinstance(item, list):
                parent[key] = items = [None] * len(item)
                stack.extend((sub, items, i) for i, sub in enumerate(item))
            else:
                parent[key] = replace(item, item) if isinstance(item, str) else item
        return top[0]

    def _runs(self, folded: bytes) -> list[tuple[int, int, str]] | None:
        """The runs of `folded` that match a needle, merged, as [start, end).

        Each with its replacement.

        None when the pieces occur more than MAX_CANDIDATES times: a text built of pieces of a
        credential is withheld whole rather than searched at a cost its writer chooses.
        """
        budget = MAX_CANDIDATES
        hits: list[tuple[int, int, str]] = []
        tried: set[tuple[int, int]] = set()  # (needle, where it would start): one extension each
        runs: dict[int, list[tuple[int, int]]] = {}  # needle → runs found, sorted
        for index, offset, piece in self._anchors:
            needle = self._needles[index]
            found = runs.setdefault(index, [])
            at = folded.find(piece)
            while at >= 0:
                # A piece inside a run already found adds nothing: an echo repeated a thousand
                # times costs a thousand extensions, not one per piece of each.
                budget -= 1
                if budget < 0:
                    return None
                inside = bisect.bisect_right(found, (at, len(folded))) - 1
                if (inside < 0 or found[inside][1] < at + len(piece)) and (index, at - offset) not in tried:
                    tried.add((index, at - offset))
                    start, end, whole = _extend(folded, at, needle.folded, offset, len(piece))
                    if end - start >= needle.min_run:
                        hits.append((start, end, needle.whole if whole and needle.whole else MARK))
                        bisect.insort(found, (start, end))
                at = folded.find(piece, at + 1)
        hits.sort()
        merged: list[tuple[int, int, str]] = []
        for start, end, replacement in hits:
            if merged and start < merged[-1][1]:
                last_start, last_end, _ = merged[-1]
                if end > last_end:  # overlapping pieces of different values: one mark for all
                    merged[-1] = (last_start, end, MARK)
                continue
            merged.append((start, end, replacement))
        return merged


def _held(value: Any) -> None:
    """`scrub_value`'s JSON `default`: passes a held Verbatim, refuses others.

    Held means held to the request's credentials where it was made (outcomes.success_result), and
    left as it is; any other is for the caller to read back first (tools._without_credentials).
    """
    if isinstance(value, Verbatim) and value.held:
        return None
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable here")


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value, names and values, without recursion."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found += [name for name in item if isinstance(name, str)]
            stack += item.values()
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str):
            found.append(item)
        elif isinstance(item, Verbatim) and not item.held:
            raise ValueError("a verbatim value not held to the credentials: read it back first")
    return found


def _splice(text: str, data: bytes, spans: list[tuple[int, int, str]]) -> str:
    """`text` with each [start, end) of its UTF-8 `data` replaced.

    Overlapping stretches are one MARK.
    """
    if not data.isascii():
        # Byte offsets to character offsets, widened to whole characters.
        chars = [0] * (len(data) + 1)
        at = 0
        for index, ch in enumerate(text):
            width = len(ch.encode("utf-8", "surrogatepass"))
            chars[at : at + width] = [index] * width
            at += width
        chars[at] = len(text)

        def start_of(offset: int) -> int:
            return chars[offset]

        def end_of(offset: int) -> int:
            while 0 < offset < len(data) and data[offset] & 0xC0 == 0x80:
                offset += 1
            return chars[offset]

        spans = [(start_of(start), end_of(end), replacement) for start, end, replacement in spans]
    spans.sort()
    out: list[str] = []
    at = 0
    last: tuple[int, int, str] | None = None
    merged: list[tuple[int, int, str]] = []
    for start, end, replacement in spans:
        if last is not None and start < last[1]:
            last = (last[0], max(last[1], end), MARK if end > last[1] or replacement != last[2] else last[2])
            merged[-1] = last
            continue
        last = (start, end, replacement)
        merged.append(last)
    for start, end, replacement in merged:
        out.append(text[at:start])
        out.append(replacement)
        at = end
    out.append(text[at:])
    return "".join(out)


def _extend(text: bytes, at: int, needle: bytes, offset: int, size: int) -> tuple[int, int, bool]:
    """The longest run of `needle` in `text` around a piece both share.

    Around `text[at:at+size] == needle[offset:offset+size]`: the run's [start, end) in `text`, and
    whether it is the whole needle.
    """
    back = _agree(min(at, offset), lambda n: text[at - n : at] == needle[offset - n : offset])
    ahead = _agree(
        min(len(text) - at - size, len(needle) - offset - size),
        lambda n: text[at + size : at + size + n] == needle[offset + size : offset + size + n],
    )
    return at - back, at + size + ahead, offset - back == 0 and offset + size + ahead == len(needle)


def _agree(limit: int, same: Callable[[int], bool]) -> int:
    """The largest n <= limit with same(n), by binary search.

    `same` holds for every n up to some point.
    """
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if same(middle):
            low = middle
        else:
            high = middle - 1
    return low


# ---- raw bytes --------------------------------------------------------------------------------------

_PROBE: Final = 4  # a run of MIN_RUN bytes holds a whole probe of 4 when probes start at most 5 apart
_PROBE_HITS: Final = 256  # places a probe is looked at closely, before its runs are looked for whole
_LARGE: Final = 64 * 1024  # bytes from which a probe is looked for with re
_STEP: Final = MIN_RUN - _PROBE + 1  # a run of MIN_RUN holds a whole window of 4 starting at a multiple of 5
_MANY_PROBES: Final = 48  # probes past which one pass over a text's windows costs less (_sampled_in)
_FOUND: Final = 64  # windows of a text's stretches up to which each is looked for in the needles (_sampled_in)


# A probe: its 4 bytes, then what its runs are worked out from when it is found (most never are):
# the needle, where the probe sits in it, and where the runs through it start.
_Probe = tuple[bytes, bytes, int, range, int]


def _probes(needle: bytes, min_run: int, absent: frozenset[int]) -> list[_Probe]:
    """The probes to look for, each with where the runs through it start.

    The starts are for `_runs`.

    Runs of `min_run` bytes holding a byte the text lacks cannot be in it; the others lie in
    stretches of the needle made of bytes the text has, and in a stretch with a probe of 4
    starting every `min_run - 3` bytes (5 for MIN_RUN; one probe for a needle secret only
    whole), each run holds a whole probe.
    """
    size = min(_PROBE, min_run)
    places: Sequence[tuple[int, range]]
    if not absent:  # the whole needle is one stretch: where its probes sit depends on its length alone
        places = _layout(len(needle), min_run)
    else:
        stretches: list[tuple[int, range]] = []
        start = 0
        for end in [*(i for i, c in enumerate(needle) if c in absent), len(needle)]:
            stretches += _places(start, end, size, min_run)
            start = end + 1
        places = stretches
    return [(needle[offset : offset + size], needle, offset, starts, min_run) for offset, starts in places]


def _places(start: int, end: int, size: int, min_run: int) -> list[tuple[int, range]]:
    """The probes of a needle's stretch from `start` to `end`.

    Each probe's offset, and where the runs through it start.
    """
    if end - start < min_run:
        return []
    last = end - size
    return [
        (offset, range(max(start, offset + size - min_run), min(offset, end - min_run) + 1))
        for offset in range(min(start + size, last), last + 1, min_run - size + 1)
    ]


_CHUNK: Final = 64  # sampled windows read by one struct call
_SAMPLED_CHUNK: Final = struct.Struct("<" + ("I" + "x" * (_STEP - _PROBE)) * _CHUNK)  # a window, the bytes to the next


@functools.lru_cache(maxsize=_CHUNK)
def _sampled_tail(count: int) -> struct.Struct:
    """A struct reading `count` windows, each _STEP bytes after the one before.

    One for each count up to _CHUNK: the last windows of a text.
    """
    return struct.Struct("<" + ("I" + "x" * (_STEP - _PROBE)) * (count - 1) + "I")


def _sampled_windows(view: bytes) -> set[int]:
    """The 4-byte windows of `view` starting every _STEP bytes, as integers.

    A struct call for each _CHUNK of them, not a tuple each.
    """
    if len(view) < _PROBE:
        return set()
    count = (len(view) - _PROBE) // _STEP + 1
    chunks, tail = divmod(count, _CHUNK)
    if tail == 0:  # the last window of the last chunk has no bytes after it
        chunks, tail = chunks - 1, _CHUNK
    whole = chunks * _CHUNK * _STEP
    found: set[int] = set()
    found.update(*_SAMPLED_CHUNK.iter_unpack(memoryview(view)[:whole]))
    found.update(_sampled_tail(tail).unpack_from(view, whole))
    return found


def _every_window(needle: bytes) -> tuple[int, ...]:
    """The 4-byte windows of `needle` at every offset, as integers.

    Four C calls, one per alignment.

    A tuple, not a set: the other side's windows are the set, and looking these up in it (one C
    loop, `set.intersection`) costs less than making a set of them.
    """
    found: tuple[int, ...] = ()
    for start in range(min(_PROBE, len(needle) - _PROBE + 1)):
        found += struct.unpack_from(f"<{(len(needle) - start) // _PROBE}I", needle, start)
    return found


# The bytes a long needle is made of when it is a token or a payment's base64 or hex, folded: an
# access token's (base64url and dots), then every base64 form's. A run of a needle lies in a
# stretch of MIN_RUN or more of its bytes; these are found with one of the classes that hold them
# all, the narrowest: its table turns every other byte into a space, and `split` cuts there (one
# pass each in C, where a `re` class tried at every byte of a short word costs twice as much).
_CLASSES: Final = [b"-._0123456789abcdefghijklmnopqrstuvwxyz", b"+-./0123456789=_abcdefghijklmnopqrstuvwxyz"]
_STRETCHES: Final = [(letters, bytes(c if c in letters else 0x20 for c in range(256))) for letters in _CLASSES]
_STRETCHED: Final = 16  # a text up to this many times the needles' length is searched in its stretches


class _Grams:
    """A redactor's needles as 4-byte windows, made for one request.

    For `Redactor._sampled_in`. `whole`: the needles secret only whole; `runs`: the others,
    `size` bytes together, made of the bytes of one class: `stretch`, its table (None when no
    class holds them).
    Their windows are worked out the first time a text needs them, every window (`every`) or
    every _STEP bytes (`sampled`).
    """

    __slots__ = ("_every", "_sampled", "runs", "size", "stretch", "whole")

    def __init__(self, whole: list[bytes], runs: list[bytes]) -> None:
        self.whole = whole
        self.runs = runs
        self.size = sum(len(needle) for needle in runs)
        joined = b"".join(runs)
        self.stretch = next((table for letters, table in _STRETCHES if not joined.translate(None, letters)), None)
        self._every: tuple[int, ...] | None = None
        self._sampled: set[int] | None = None

    def every(self) -> tuple[int, ...]:
        if self._every is None:
            self._every = sum(map(_every_window, self.runs), ())
        return self._every

    def sampled(self) -> set[int]:
        if self._sampled is None:
            sets = [_sampled_windows(needle) for needle in self.runs]
            self._sampled = sets[0].union(*sets[1:]) if sets else set()
        return self._sampled


@functools.lru_cache(maxsize=64)
def _layout(length: int, min_run: int) -> tuple[tuple[int, range], ...]:
    """`_places` for a whole needle of `length` bytes.

    The same for every bearer of that length (and nothing of any: a length and offsets are all it
    holds), so worked out once, not once a request.
    """
    return tuple(_places(0, length, min(_PROBE, min_run), min_run))


def _runs(needle: bytes, offset: int, starts: range, min_run: int) -> list[tuple[int, bytes]]:
    """The runs through a probe found at `offset` of `needle`.

    Each as (bytes before the probe, run).
    """
    return [(offset - s, needle[s : s + min_run]) for s in starts]


def _payment_needles(header: str) -> list[_Needle]:
    """A payment header's needles: the value and the parts that spend it.

    The value whole, and the parts in the forms they are written, within bounds.

    In order: the header whole (at most x402.MAX_PAYMENT_BYTES); then each long string of the
    payload, in the order written (an EVM signature before its nonce), each followed by the
    stretches of the base64 forms that encode it. While MAX_PAYMENT_NEEDLE_BYTES last, a needle
    is searched for runs of MIN_RUN; past them it is recognised whole (one probe); past
    MAX_PAYMENT_NEEDLES, not at all. So the search costs the same for any payment a caller sends.
    """
    needles = [_Needle(_fold_value(header), len(header), None)]
    try:
        raw = base64.b64decode(header + "=" * (-len(header) % 4), validate=True)
        decoded = json.loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError, RecursionError):
        return needles  # not base64 JSON: nothing inside to tell public from secret
    leaves = _secret_leaves(decoded.get("payload") if isinstance(decoded, dict) else None)
    forms = [(header, raw)]
    for indent in (None, 2, 4):
        text = json.dumps(decoded, indent=indent, separators=(",", ":") if indent is None else None)
        forms.append((base64.b64encode(text.encode("utf-8")).decode("ascii"), text.encode("utf-8")))
    budget = MAX_PAYMENT_NEEDLE_BYTES

    def add(value: str) -> None:
        nonlocal budget
        folded = _fold_value(value)
        if len(needles) >= MAX_PAYMENT_NEEDLES or len(folded) < MIN_RUN or not folded.isascii():
            return  # secrets of every x402 scheme are hex or base64: ASCII
        if len(folded) <= budget:
            needles.append(_Needle(folded, MIN_RUN, None))
            budget -= len(folded)
        else:
            needles.append(_Needle(folded, len(folded), None))

    for leaf in leaves:
        if len(needles) >= MAX_PAYMENT_NEEDLES:
            break
        add(leaf)
        written = json.dumps(leaf)[1:-1].encode("utf-8")
        for encoded, plain in forms:
            add(_base64_window(encoded, plain, written))
    return needles


def _secret_leaves(payload: Any) -> list[str]:
    """The long strings in a payment's payload, public addresses left out.

    In the order written.
    """
    found: list[str] = []
    stack = [payload]
    while stack and len(found) < MAX_PAYMENT_NEEDLES:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) >= _LONG_LEAF and not _ADDRESS.fullmatch(item):
                found.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(item.values()))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return found


def _base64_window(encoded: str, plain: bytes, secret: bytes) -> str:
    """The stretch of `encoded` that encodes only bytes of `secret`.

    `encoded` is the base64 of `plain`; empty when `plain` does not hold `secret`.
    """
    start = plain.find(secret)
    if start < 0:
        return ""
    first, last = -(-start // 3), (start + len(secret)) // 3
    return encoded[first * 4 : last * 4]


@functools.lru_cache(maxsize=1)
def for_operator_token(token: str | None) -> Redactor:
    """The redactor of FAIRWINS_API_TOKEN, built once.

    Configuration keeps that token for the process's life.

    Never used for a caller's own bearer, which nothing here keeps past its request.
    """
    return Redactor(token, None)


# ---- the request being handled ---------------------------------------------------------------------


def current() -> Redactor | None:
    """The redactor of the request being handled.

    None outside one, or when it carries nothing.
    """
    found = logs.request_scrubber()
    return found if isinstance(found, Redactor) else None


def scrub(text: str) -> str:
    """`text` without the values of the request being handled.

    Unchanged outside a request.
    """
    redactor = current()
    return text if redactor is None else redactor.scrub(text)
