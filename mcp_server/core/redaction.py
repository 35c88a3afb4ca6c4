"""Redaction by value: the exact bearer and payment one request carries, kept out of what it returns and logs.

The pattern rules in outcomes.clean (`fw1.…`, `eyJ…`) recognise credentials by their look; a
gateway (or a proxy, or a logging library in front of it) that writes back what it received can
change that look. This module matches the values themselves:

- the bearer, and every run of 8 or more of its characters;
- a payment's whole header value, the long strings inside its `payload` (signatures, nonces,
  signed transactions: the parts that spend it) and every run of 8 or more of their characters,
  also as the base64 of the header as sent and of the payment's JSON, compact or pretty-printed;
- in any ASCII case, and through %XX (URL), `\\/` and `\\uXXXX` (JSON) escapes.

Each match is replaced by the bearer's redacted form (`fw1.…abcd`) when it is the whole bearer,
else by MARK. Public parts of a payment (addresses, amounts, the offer it accepted) are not
secret and stay readable. A piece shorter than 8 characters is not recognised.

A request binds its context for as long as it is handled (logs.bind_request), so the log filter and
the sentences built from gateway text (`scrub`) find the values without every function passing them.

A whole gateway answer is first given `might_be_in`, on its raw bytes: a test at C speed with no
false negatives (whatever `scrub` would find in any string of it, the test suspects), so an
answer that cannot spell a credential is passed on without being walked (tools.py).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from mcp_server.ops import logs
from mcp_server.wire.x402 import Payment

MIN_RUN: Final = 8
MARK: Final = "(credential not shown)"
_ANCHOR: Final = MIN_RUN // 2  # any run of MIN_RUN - 1 or more holds a whole aligned anchor
MAX_CANDIDATES: Final = 100_000  # places a piece occurs in one text, each searched around
_LONG_LEAF: Final = 16  # shorter strings in a payload are amounts and timestamps, not secrets
_ADDRESS: Final = re.compile(r"0x[0-9a-fA-F]{40}")  # an EVM address: public, also in the offer and receipt
_ESCAPE: Final = re.compile(r"%([0-9A-Fa-f]{2})|\\/|\\u([0-9A-Fa-f]{4})")
_ASCII_LOWER: Final = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def _fold(text: str) -> str:
    """Letters in lower case with the length unchanged (a few letters lengthen in lower case: then ASCII only)."""
    folded = text.lower()
    return folded if len(folded) == len(text) else text.translate(_ASCII_LOWER)


def _written(piece: str) -> set[str]:
    """The ways an escaping writer spells `piece` (folded): %XX, `\\/`, `\\uXXXX`."""
    forms: set[str] = set()
    if not piece.isalnum():
        forms.add("".join(ch if ch.isalnum() else "".join(f"%{b:02x}" for b in ch.encode()) for ch in piece))
        forms.add(piece.replace("/", "\\/"))
        forms.add(piece.replace("/", "\\\\/"))  # \\/ inside a string, as JSON text writes it again
        forms.add("".join(ch if ch.isalnum() else f"\\u{ord(ch):04x}" for ch in piece))
        forms.add(piece.replace("\\", "\\\\").replace('"', '\\"'))  # JSON's own escapes
    return forms


@dataclass(frozen=True, slots=True)
class _Needle:
    folded: str
    min_run: int  # MIN_RUN, or the whole length for values only secret whole
    whole: str | None  # what replaces a match of the whole needle (None: MARK)


class _View:
    """Text with its escapes decoded and ASCII folded, and the way back to the text's own positions."""

    def __init__(self, text: str) -> None:
        self.text = text
        if "%" not in text and "\\" not in text:
            self.folded = _fold(text)
            self._starts: list[int] | None = None
            return
        parts: list[str] = []
        self._starts = []  # where each piece starts in the view
        self._raw: list[tuple[int, int, bool]] = []  # (raw start, raw length, decoded escape)
        at = view = 0
        for match in _ESCAPE.finditer(text):
            if match.start() > at:
                parts.append(text[at : match.start()])
                self._starts.append(view)
                self._raw.append((at, match.start() - at, False))
                view += match.start() - at
            hex2, hex4 = match.group(1), match.group(2)
            parts.append(chr(int(hex2 or hex4, 16)) if hex2 or hex4 else "/")
            self._starts.append(view)
            self._raw.append((match.start(), match.end() - match.start(), True))
            view += 1
            at = match.end()
        if at < len(text):
            parts.append(text[at:])
            self._starts.append(view)
            self._raw.append((at, len(text) - at, False))
        self.folded = _fold("".join(parts))

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The text's own [start, end) for the view's [start, end)."""
        if self._starts is None:
            return start, end
        return self._raw_at(start, False), self._raw_at(end - 1, True)

    def _raw_at(self, index: int, after: bool) -> int:
        piece = bisect.bisect_right(self._starts or [], index) - 1
        raw_start, raw_length, escape = self._raw[piece]
        if escape:
            return raw_start + raw_length if after else raw_start
        offset = index - (self._starts or [])[piece]
        return raw_start + offset + (1 if after else 0)


class Redactor:
    """The values one request carries, and where they show in a text."""

    def __init__(self, bearer: str | None, payment: Payment | None) -> None:
        needles: list[_Needle] = []
        if bearer is not None and len(bearer) >= MIN_RUN:
            needles.append(_Needle(_fold(bearer), MIN_RUN, logs.redact(bearer)))
        if payment is not None:
            needles += _payment_needles(payment.value)
        self._needles = needles
        self._shortest = min((needle.min_run for needle in needles), default=0)
        self._escaped: tuple[set[str], tuple[bytes, ...]] | None = None
        # For raw bytes (might_be_in): each needle as ASCII bytes with its probes, None when a
        # needle is not ASCII (bytes.lower() folds ASCII only; the exact search is then used).
        self._bytes: list[tuple[bytes, int]] | None = None
        if all(needle.folded.isascii() for needle in needles):
            self._bytes = [(needle.folded.encode("ascii"), needle.min_run) for needle in needles]
        self._short: list[tuple[bytes, list[tuple[int, bytes]]]] | None = None  # probes for short texts
        # No more places a text of n characters can be searched at than n times this (_runs):
        # under MAX_CANDIDATES, what scrub finds is what might_be_in looks for.
        self._anchor_bound = sum(len(needle.folded) // _ANCHOR + 2 for needle in needles)

    @functools.cached_property
    def _letters(self) -> frozenset[int]:
        return frozenset(c for folded, _ in self._bytes or () for c in folded)

    @functools.cached_property
    def _plain(self) -> bool:
        """Needles of letters, digits and the like: a JSON escape that writes a quote, a backslash or a
        control character cannot hide a piece of one (_views)."""
        return not any(c in b'"\\' or c < 0x20 for c in self._letters)

    @functools.cached_property
    def _anchors(self) -> list[tuple[int, int, str]]:
        """(needle, offset, folded piece): worked out for the first text `scrub` searches, if any."""
        anchors = []
        for index, needle in enumerate(self._needles):
            size = _ANCHOR if needle.min_run == MIN_RUN else needle.min_run
            offsets = range(0, len(needle.folded) - size + 1, size)
            for offset in {*offsets, len(needle.folded) - size}:
                anchors.append((index, offset, needle.folded[offset : offset + size]))
        return anchors

    @functools.cached_property
    def _probes(self) -> set[str]:
        """A text holding none of these, as they are or escaped, holds no needle: most texts stop here."""
        return {piece for _, _, piece in self._anchors}

    def _escaped_probes(self) -> tuple[set[str], tuple[bytes, ...]]:
        """The pieces as an escaping writer spells them, as text and as bytes.

        Every such spelling holds a `%` or a `\\`, so only a text holding one needs them: they are
        worked out for the first such text of the request, not for every request.
        """
        if self._escaped is None:
            forms = {form for piece in self._probes for form in _written(piece)} - self._probes
            self._escaped = (forms, tuple(form.encode() for form in forms))
        return self._escaped

    def __bool__(self) -> bool:
        return bool(self._needles)

    def scrub(self, text: str) -> str:
        """`text` with every match replaced (the same object when there is none)."""
        # Decoding escapes only shortens a text: one shorter than a run that counts holds none.
        if not self._needles or len(text) < self._shortest:
            return text
        if len(text) * self._anchor_bound < MAX_CANDIDATES and self._bytes is not None:
            # A text too short to exhaust the search's budget: the raw bytes' test settles it.
            if not self.might_be_in(text.encode("utf-8", "surrogatepass")):
                return text
        return self.scrub_exact(text)

    def scrub_exact(self, text: str) -> str:
        """`scrub` by the search alone, without the raw bytes' test first (what that test is held to)."""
        if not self._needles or len(text) < self._shortest or not self._might_hold(_fold(text)):
            return text
        view = _View(text)
        found = self._runs(view.folded)
        if found is None:
            return MARK  # pieces of a credential everywhere: the whole text is one
        if not found:
            return text
        out: list[str] = []
        at = 0
        for start, end, replacement in found:
            raw_start, raw_end = view.span(start, end)
            out.append(text[at:raw_start])
            out.append(replacement)
            at = raw_end
        out.append(text[at:])
        return "".join(out)

    def holds(self, text: str) -> bool:
        return self.scrub(text) is not text

    def scrub_value(self, value: Any) -> Any:
        """A JSON value with every string and key scrubbed; `value` itself when nothing matched.

        One pass over its JSON text first, so a value holding nothing is never walked.
        """
        if not self._needles:
            return value
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (RecursionError, TypeError, ValueError):
            text = None  # too deep to write out here: walked instead
        if text is not None and not self._might_hold(_fold(text)):
            return value
        return self._walk(value)

    def might_be_in(self, data: bytes) -> bool:
        """False only when raw bytes (a gateway body or header) cannot spell any needle, decoded or not.

        The test a whole answer gets before it is passed on as the gateway wrote it, so it must
        see what `scrub` would see in any string of it, at C speed. It searches the bytes in
        lower case, with their escapes decoded as `scrub` decodes them when they hold any
        (`_views`). In each, a run of a needle long enough to count holds one of the needle's
        4-byte probes, placed at most 5 apart (`_probes`), and each probe is one `bytes.find`;
        only where a probe is found are the runs through it compared (`startswith`). A run
        holding a byte the text lacks cannot be there, so no probe stands for it (one `memchr`
        per byte of the needles tells). The cost is a few passes in C, whatever the text, and a
        token sharing short pieces with ordinary text costs no more than another.
        """
        if not self._needles:
            return False
        if self._bytes is None:
            return True  # a needle outside ASCII: the exact search decides
        return any(self._spelled_in(view) for view in _views(data, self._plain))

    def _probes_for(self, absent: frozenset[int]) -> list[tuple[bytes, list[tuple[int, bytes]]]]:
        return [probe for needle, min_run in self._bytes or () for probe in _probes(needle, min_run, absent)]

    def _spelled_in(self, view: bytes) -> bool:
        large = len(view) > _LARGE
        if large:
            absent = frozenset(c for c in self._letters if view.find(c) < 0)
            probes = self._probes_for(absent)
        else:  # a short text: every probe is a short search, and the same for every text
            if self._short is None:
                self._short = self._probes_for(frozenset())
            probes = self._short
        for probe, runs in probes:
            if large:
                # re's literal search is twice bytes.find's speed on long texts (compiled
                # patterns are cached by re; a short text is not worth a compile).
                found = re.compile(re.escape(probe)).search(view)
                if found is None:
                    continue
                at = found.start()
            else:
                at = view.find(probe)
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

    def _might_hold(self, folded: str) -> bool:
        if any(probe in folded for probe in self._probes):
            return True
        escaped = "%" in folded or "\\u" in folded or "\\/" in folded
        return escaped and any(probe in folded for probe in self._escaped_probes()[0])

    def _walk(self, value: Any) -> Any:
        """A scrubbed copy, built without recursion: JSON may be nested as deep as the parser allows."""
        top: list[Any] = [None]
        stack: list[tuple[Any, Any, Any]] = [(value, top, 0)]  # (item, its new container, its key there)
        while stack:
            item, parent, key = stack.pop()
            if isinstance(item, dict):
                copy: dict[Any, Any] = {}
                parent[key] = copy
                for name, sub in item.items():
                    name = self.scrub(name) if isinstance(name, str) else name
                    copy[name] = None  # the key's place, in order; its value is filled in below
                    stack.append((sub, copy, name))
            elif isinstance(item, list):
                parent[key] = items = [None] * len(item)
                stack.extend((sub, items, i) for i, sub in enumerate(item))
            else:
                parent[key] = self.scrub(item) if isinstance(item, str) else item
        return top[0]

    def _runs(self, folded: str) -> list[tuple[int, int, str]] | None:
        """Merged [start, end) runs of `folded` that match a needle, each with its replacement.

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


def _extend(text: str, at: int, needle: str, offset: int, size: int) -> tuple[int, int, bool]:
    """The longest run around `text[at:at+size] == needle[offset:offset+size]`; whether it is the whole needle."""
    back = _agree(min(at, offset), lambda n: text[at - n : at] == needle[offset - n : offset])
    ahead = _agree(
        min(len(text) - at - size, len(needle) - offset - size),
        lambda n: text[at + size : at + size + n] == needle[offset + size : offset + size + n],
    )
    return at - back, at + size + ahead, offset - back == 0 and offset + size + ahead == len(needle)


def _agree(limit: int, same: Callable[[int], bool]) -> int:
    """The largest n <= limit with same(n), where same holds for every n up to some point (binary search)."""
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
_JSON_ESCAPE: Final = re.compile(rb'\\(?:u([0-9A-Fa-f]{4})|(["\\/bfnrt]))')
_TEXT_ESCAPE: Final = re.compile(rb"%([0-9A-Fa-f]{2})|\\/|\\u([0-9A-Fa-f]{4})")
_JSON_CHARS: Final = {
    b'"': b'"',
    b"\\": b"\\",
    b"/": b"/",
    b"b": b"\b",
    b"f": b"\f",
    b"n": b"\n",
    b"r": b"\r",
    b"t": b"\t",
}
_KELVIN: Final = "\u212a".encode()  # the one character outside ASCII whose lower case is in it ("k")


def _ascii_of(code: int) -> bytes:
    """A decoded character as ASCII needles see it: itself, "k" for the Kelvin sign, else a byte in no needle."""
    if code < 0x80:
        return bytes((code,))
    return b"k" if code == 0x212A else b"\x80"


def _views(data: bytes, plain: bool) -> list[bytes]:
    """`data` in lower case as `scrub` reads the strings in it: with their escapes decoded, when it holds any.

    A string of a JSON answer reaches `scrub` JSON-decoded, then with its %XX, `\\/` and
    `\\uXXXX` decoded (`_View`); the answer's text as it is, with only those decoded. Decoded
    across the whole text, a run inside one string stays a run: no escape spans a quote. JSON's
    own escapes need a view of their own only where one hides a backslash (`\\\\u0066` is an
    "f" once decoded twice) or a needle holds what they write (`plain`: none does).
    """
    views = [data]
    if b"%" in data or b"\\" in data:
        views = [_TEXT_ESCAPE.sub(_text_char, data)]
        if b"\\\\" in data or not plain:
            views.append(_TEXT_ESCAPE.sub(_text_char, _JSON_ESCAPE.sub(_json_char, data)))
    folded = [view.lower() for view in views]
    if data.isascii():
        return folded
    return [view.replace(_KELVIN, b"k") for view in folded]


def _text_char(match: re.Match[bytes]) -> bytes:
    code = match.group(1) or match.group(2)
    return _ascii_of(int(code, 16)) if code else b"/"


def _json_char(match: re.Match[bytes]) -> bytes:
    code = match.group(1)
    return _ascii_of(int(code, 16)) if code else _JSON_CHARS[match.group(2)]


def _probes(needle: bytes, min_run: int, absent: frozenset[int]) -> list[tuple[bytes, list[tuple[int, bytes]]]]:
    """The probes to look for, each with the runs through it: (bytes before the probe, run).

    Runs of `min_run` bytes holding a byte the text lacks cannot be in it; the others lie in
    stretches of the needle made of bytes the text has, and in a stretch with a probe of 4
    starting every `min_run - 3` bytes (5 for MIN_RUN; one probe for a needle secret only
    whole), each run holds a whole probe.
    """
    size = min(_PROBE, min_run)
    found: list[tuple[bytes, list[tuple[int, bytes]]]] = []
    start = 0
    for end in [i for i, c in enumerate(needle) if c in absent] + [len(needle)]:
        if end - start >= min_run:
            last = end - size
            for offset in range(min(start + size, last), last + 1, min_run - size + 1):
                first = max(start, offset + size - min_run)
                runs = [(offset - s, needle[s : s + min_run]) for s in range(first, min(offset, end - min_run) + 1)]
                found.append((needle[offset : offset + size], runs))
        start = end + 1
    return found


def _payment_needles(header: str) -> list[_Needle]:
    """A payment header's value whole, and the parts that spend it, in every form they are written."""
    needles = [_Needle(_fold(header), len(header), None)]
    try:
        raw = base64.b64decode(header + "=" * (-len(header) % 4), validate=True)
        decoded = json.loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return needles  # not base64 JSON: nothing inside to tell public from secret
    leaves = _secret_leaves(decoded.get("payload") if isinstance(decoded, dict) else None)
    forms = [(header, raw)]
    for indent in (None, 2, 4):
        text = json.dumps(decoded, indent=indent, separators=(",", ":") if indent is None else None)
        forms.append((base64.b64encode(text.encode("utf-8")).decode("ascii"), text.encode("utf-8")))
    for leaf in leaves:
        needles.append(_Needle(_fold(leaf), MIN_RUN, None))
        written = json.dumps(leaf)[1:-1].encode("utf-8")
        for encoded, plain in forms:
            window = _base64_window(encoded, plain, written)
            if len(window) >= MIN_RUN:
                needles.append(_Needle(_fold(window), MIN_RUN, None))
    return needles


def _secret_leaves(payload: Any) -> list[str]:
    """The long strings inside a payment's payload that are not public addresses."""
    found: list[str] = []
    stack = [payload]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) >= _LONG_LEAF and not _ADDRESS.fullmatch(item):
                found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _base64_window(encoded: str, plain: bytes, secret: bytes) -> str:
    """The stretch of `encoded` (base64 of `plain`) that encodes only bytes of `secret`."""
    start = plain.find(secret)
    if start < 0:
        return ""
    first, last = -(-start // 3), (start + len(secret)) // 3
    return encoded[first * 4 : last * 4]


@functools.lru_cache(maxsize=1)
def for_operator_token(token: str | None) -> Redactor:
    """The redactor of FAIRWINS_API_TOKEN, built once: configuration keeps that token for the process's life.

    Never used for a caller's own bearer, which nothing here keeps past its request.
    """
    return Redactor(token, None)


# ---- the request being handled ---------------------------------------------------------------------


def current() -> Redactor | None:
    """The redactor of the request this thread is handling; None outside one, or when it carries nothing."""
    found = logs.request_scrubber()
    return found if isinstance(found, Redactor) else None


def scrub(text: str) -> str:
    """`text` without the values of the request being handled (unchanged outside a request)."""
    redactor = current()
    return text if redactor is None else redactor.scrub(text)
