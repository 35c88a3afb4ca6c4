"""A gateway answer read once and never held whole.

A fast path with no say of its own: it vouches for an answer (JSON that `jsonrpc.loads` accepts,
fitting the outputSchema, no name repeated in an object it walks) or doubts it, and a doubted
answer is read the exact way (outcomes.read_json and the checker), which words every failure. So
it only has to be sound.

The schema decides what is streamed. An array under `items` is read a chunk of items at a time,
each chunk decoded by the C scanner, checked in bulk (schema.compile_bulk, else one by one with
schema.compile_verdict), then dropped. An object holding such an array is walked name by name, its
other values kept: the skeleton the notes on a chain's state are made from. What is kept at once:
the text, one chunk's values and the skeleton; never the parsed answer.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final, Protocol

from mcp_server.core.schema import CHECKED, Verdict, compile_bulk, compile_verdict
from mcp_server.wire.jsonrpc import SCAN, SCAN_STRING, SPACE
from mcp_server.wire.pause import pause

CHUNK: Final = 64 * 1024  # characters of an array decoded at once
BATCH: Final = 512  # items checked at once when an array is read one item at a time
SMALL: Final = 8 * 1024  # characters up to which an answer is decoded whole (faster there)
STREAMED: Final = "(read and checked in pieces)"  # stands in the skeleton for an array not kept

_WS: Final = " \t\n\r"
_NEXT_OBJECT: Final = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*\{")
_LAST_OBJECT: Final = re.compile(r"\}[ \t\n\r]*\]")
_VALUE_KEYWORDS: Final = frozenset({"enum", "const"})  # these compare a whole value: never streamed
_ARRAY_KEYWORDS: Final = frozenset({"type", "items", "minItems", "maxItems"})


class _Search:
    """The first match of a pattern at or after a forward-moving position.

    Each character is scanned once. A search that found nothing says so for every later start; one
    that found a match answers every start up to it. So a long last item is not scanned again for
    each item before it.
    """

    def __init__(self, pattern: re.Pattern[str], text: str) -> None:
        self.pattern = pattern
        self.text = text
        self.start = -1  # where the last search began: nothing matches from there up to `found`
        self.found: re.Match[str] | None = None  # what it found (None: nothing up to the end)
        self.scanned = 0  # characters searched so far (at most the text's length)

    def after(self, at: int) -> re.Match[str] | None:
        if self.start >= 0 and at >= self.start and (self.found is None or at <= self.found.start()):
            return self.found
        self.start = max(at, self.start)  # starts only move forward
        self.found = self.pattern.search(self.text, at)
        self.scanned += (self.found.end() if self.found else len(self.text)) - at
        return self.found


class _Doubt(Exception):
    """The fast reading cannot vouch for this answer; the exact one decides."""


class _Plan(Protocol):
    def read(self, s: str, i: int) -> tuple[Any, int]:
        """The value starting at s[i], not whitespace: (what is kept, its end)."""


def _skip(s: str, i: int) -> int:
    return SPACE.match(s, i).end() if s[i] in _WS else i  # type: ignore[union-attr]


def _after_item(s: str, i: int) -> tuple[int, bool]:
    """Past the "," or "]" after an array's item: (where, whether it was "]")."""
    i = _skip(s, i)
    if s[i] == ",":
        return _skip(s, i + 1), False
    if s[i] != "]":
        raise _Doubt
    return i + 1, True


class _Whole:
    """A value decoded whole by the C scanner, checked when `fits` is given."""

    def __init__(self, fits: Verdict | None) -> None:
        self.fits = fits

    def read(self, s: str, i: int) -> tuple[Any, int]:
        value, end = SCAN(s, i)
        if self.fits is not None and not self.fits(value):
            raise _Doubt
        return value, end


class _Container:
    """A plan for arrays or objects; a value of another kind is checked whole."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema

    @functools.cached_property
    def fits(self) -> Verdict:
        """The schema's verdict, compiled when the first such value comes (rare)."""
        return compile_verdict(self.schema)

    def _other(self, s: str, i: int) -> tuple[Any, int]:
        return _Whole(self.fits).read(s, i)


class _Array(_Container):
    """An array read a chunk of items at a time, else item by item."""

    def __init__(self, schema: dict[str, Any], items: dict[str, Any], plan: _Plan, chunk: int) -> None:
        super().__init__(schema)
        self.chunk = chunk
        self.low: int | None = schema.get("minItems")
        self.high: int | None = schema.get("maxItems")
        self.walked = plan if not isinstance(plan, _Whole) else None
        self.keep = False  # set for the root's `kept` properties (Reader)
        checks = bool(CHECKED & items.keys())
        self.bulk = compile_bulk(items) if checks else None
        self.each = compile_verdict(items) if checks else None

    def read(self, s: str, i: int) -> tuple[Any, int]:
        if s[i] != "[":
            return self._other(s, i)
        i = _skip(s, i + 1)
        kept: list[Any] = []
        count = 0
        if s[i] == "]":
            i += 1
        elif self.walked is not None and self.keep:
            ended = False
            while not ended:
                value, i = self.walked.read(s, i)
                kept.append(value)
                i, ended = _after_item(s, i)
            count = len(kept)
        else:
            count, i = self._items(s, i, kept)
        if (self.low is not None and count < self.low) or (self.high is not None and count > self.high):
            raise _Doubt
        return (kept if self.keep else STREAMED), i

    def _items(self, s: str, i: int, kept: list[Any]) -> tuple[int, int]:
        """Items decoded whole, a chunk at a time: (how many, the end).

        Chunks are taken where the array is of objects; where one cannot be had (an item longer than
        a chunk, no boundary found), an item of a walked plan is walked (so a long one is never held
        whole), any other decoded whole.
        """
        count = 0
        batch: list[Any] = []
        walked = self.walked
        single_until = i  # after a chunk that would not decode, item by item past where it ended
        following, ending = _Search(_NEXT_OBJECT, s), _Search(_LAST_OBJECT, s)
        while True:
            if i >= single_until and s[i] == "{":
                if batch:  # the items read one by one so far, before a chunk
                    count += self._check(batch, kept)
                    batch = []
                    pause()
                # A chunk ends at a "}, {" between two items, or is the rest of the array ("}]").
                # Either found inside a string or deeper in an item, the "[...]" made of the
                # chunk cannot decode (a string or a bracket is left open): so a chunk that
                # decodes holds exactly whole items. The braces counted pick the candidate.
                boundary, last, looked = self._boundary(s, i, following, ending)
                if boundary is not None:
                    end_of_chunk = boundary.start() + 1
                    piece = "[" + s[i:end_of_chunk] + "]"
                    try:
                        values, end = SCAN(piece, 0)
                    except (ValueError, StopIteration):
                        values, end = None, 0
                    del piece
                    if values is not None and end == end_of_chunk - i + 2:
                        count += self._check(values, kept)
                        pause()  # a chunk decoded and checked: a paced thread may wait here
                        i = boundary.end() - (1 if not last else 0)
                        if last:
                            return count, i
                        continue
                    single_until = boundary.end()  # each character is tried in a chunk once at most
                else:
                    single_until = looked  # no item ends where looked: one by one past there
            if walked is not None:
                _, i = walked.read(s, i)  # checked as it is walked
                count += 1
                if not count % BATCH:
                    pause()
            else:
                value, i = SCAN(s, i)
                batch.append(value)
                if len(batch) >= BATCH:
                    count += self._check(batch, kept)
                    batch = []
                    pause()
            i, ended = _after_item(s, i)
            if ended:
                return count + self._check(batch, kept), i

    def _boundary(self, s: str, i: int, following: _Search, ending: _Search) -> tuple[re.Match[str] | None, bool, int]:
        """Where the chunk from s[i] (an item's "{") ends, or None.

        Returns (its "}, {" or "}]", whether it is "}]", how far looked): the first candidate a
        chunk's length on ("}, {"), else the array's end ("}]"), within two chunks' length, at which
        the braces since s[i] balance: that is between two items, unless a string holds brackets
        (then the decode says no). A "}, {" between the objects of an inner array is passed over.
        """
        at, reach = i + self.chunk, i + 2 * self.chunk
        # The braces are counted whatever the plan: items read whole may hold arrays of objects too
        # (a relayed market's outcomes, typed but open), and a chunk cut between two of those
        # would not decode, the array then read item by item.
        depth, counted, last = 0, i, False
        while True:
            found = None if last else following.after(at)
            if found is None:
                last = True
                found = ending.after(counted)
            if found is None or found.end() > reach:
                return None, False, counted
            close = found.start() + 1
            # Every item is an object, so within one its own "{" is open: braces alone tell.
            depth += s.count("{", counted, close) - s.count("}", counted, close)
            if depth < 0 and not last:  # the array ended before this "}, {": its "}]" from s[i] on
                depth, counted, last = 0, i, True
                continue
            counted = close
            if depth == 0:
                return found, last, counted
            at = max(at, close)  # a "}, {" is looked for a chunk's length on, never nearer

    def _check(self, values: list[Any], kept: list[Any]) -> int:
        """How many `values` there are, once checked (and kept, if kept)."""
        if self.keep:
            kept += values
        if self.bulk is not None and not self.bulk(values):
            assert self.each is not None
            if not all(map(self.each, values)):
                raise _Doubt
        return len(values)


class _Object(_Container):
    """An object walked name by name: streamed properties read as they come."""

    def __init__(self, schema: dict[str, Any], fields: dict[str, _Plan]) -> None:
        super().__init__(schema)
        self.fields = fields
        properties = schema.get("properties", {})
        # The object as kept (streamed values replaced) is checked against the schema with those
        # properties' own schemas taken as satisfied: they were checked while read.
        taken = {name: ({} if name in fields else sub) for name, sub in properties.items()}
        self.shallow = compile_verdict({**schema, "properties": taken})

    def read(self, s: str, i: int) -> tuple[Any, int]:
        if s[i] != "{":
            return self._other(s, i)
        # Whitespace is looked at before it is skipped: a gateway's compact JSON has none.
        kept: dict[str, Any] = {}
        fields, space, scan, string = self.fields, SPACE.match, SCAN, SCAN_STRING
        i += 1
        if s[i] in _WS:
            i = space(s, i).end()  # type: ignore[union-attr]
        if s[i] == "}":
            i += 1
        else:
            while True:
                if s[i] != '"':
                    raise _Doubt
                name, i = string(s, i + 1, True)
                if s[i] != ":":
                    i = space(s, i).end()  # type: ignore[union-attr]
                    if s[i] != ":":
                        raise _Doubt
                i += 1
                if s[i] in _WS:
                    i = space(s, i).end()  # type: ignore[union-attr]
                plan = fields.get(name)
                value, i = scan(s, i) if plan is None else plan.read(s, i)
                if name in kept:
                    raise _Doubt  # a repeated name: which one a client keeps is the client's choice
                kept[name] = value
                if s[i] in _WS:
                    i = space(s, i).end()  # type: ignore[union-attr]
                if s[i] == ",":
                    i += 1
                    if s[i] in _WS:
                        i = space(s, i).end()  # type: ignore[union-attr]
                elif s[i] == "}":
                    i += 1
                    break
                else:
                    raise _Doubt
        if not self.shallow(kept):
            raise _Doubt
        return kept, i


def _allows(schema: dict[str, Any], name: str) -> bool:
    wanted = schema.get("type", name)
    return name in (wanted if isinstance(wanted, list) else [wanted])


def _plan(schema: dict[str, Any], chunk: int, root: bool = False) -> _Plan:
    """How to read a value of `schema`: streamed where it holds checked arrays."""
    plan = (
        _object_plan(schema, chunk)
        or _array_plan(schema, chunk)
        or (_first_branch_plan(schema, chunk) if root else None)
    )
    return plan if plan is not None else _Whole(compile_verdict(schema) if root else None)


def _object_plan(schema: dict[str, Any], chunk: int) -> _Object | None:
    """An object walked field by field, if some property (not anyOf's) streams."""
    if not _allows(schema, "object") or _VALUE_KEYWORDS & schema.keys():
        return None
    branches = schema.get("anyOf", [])
    named = {n for b in branches if isinstance(b, dict) for n in b.get("properties", {})}
    fields: dict[str, _Plan] = {}
    for name, sub in schema.get("properties", {}).items():
        if name not in named and isinstance(sub, dict):
            plan = _plan(sub, chunk)
            if not isinstance(plan, _Whole):
                fields[name] = plan
    return _Object(schema, fields) if fields else None


def _array_plan(schema: dict[str, Any], chunk: int) -> _Array | None:
    """An array read in chunks, if it checks nothing but its items and size."""
    items = schema.get("items")
    if _allows(schema, "array") and isinstance(items, dict) and not (CHECKED & schema.keys()) - _ARRAY_KEYWORDS:
        return _Array(schema, items, _plan(items, chunk), chunk)
    return None


def _first_branch_plan(schema: dict[str, Any], chunk: int) -> _Plan | None:
    """The plan of an answer's first anyOf branch, with the answer's `type`.

    Stricter than the schema (its first branch alone, the answer the tool exists for), so what it
    vouches for fits; an answer of another branch is doubted, and the exact reading accepts it.
    """
    branches = schema.get("anyOf")
    own = {k: v for k, v in schema.items() if k in CHECKED and k != "anyOf"}
    if not (isinstance(branches, list) and branches and isinstance(branches[0], dict) and own.keys() <= {"type"}):
        return None
    first = branches[0]
    if "type" in own and first.get("type", own["type"]) != own["type"]:
        return None
    plan = _plan({**first, **own}, chunk)
    return None if isinstance(plan, _Whole) else plan


class Reader:
    """Reads one tool's answers, vouching for each or doubting it.

    `kept` names the answer's properties whose items stay in the skeleton (as kept by their own
    plan: a walked object without its streamed arrays, else whole): what the result's notes read.
    `chunk` and `small` are CHUNK and SMALL, smaller in tests.
    """

    def __init__(
        self, schema: dict[str, Any], kept: tuple[str, ...] = (), chunk: int = CHUNK, small: int = SMALL
    ) -> None:
        self._plan = _plan(schema, chunk, root=True)
        self._whole = _Whole(compile_verdict(schema))
        self._small = small
        fields = self._plan.fields if isinstance(self._plan, _Object) else {}
        for name in kept:
            array = fields.get(name)
            if isinstance(array, _Array):
                array.keep = True

    def read(self, text: str) -> tuple[bool, Any]:
        """(True, the answer less its streamed arrays), or (False, None) in doubt."""
        try:
            if not text or text[0] == "\ufeff":
                return False, None  # empty, or a byte order mark: the exact reading words it
            i = _skip(text, 0)
            # A short answer costs least decoded whole and checked whole; memory is no concern there.
            plan = self._whole if len(text) <= self._small else self._plan
            value, i = plan.read(text, i)
            if i < len(text):
                i = SPACE.match(text, i).end()  # type: ignore[union-attr]
            return (True, value) if i == len(text) else (False, None)
        except (_Doubt, ValueError, StopIteration, IndexError, RecursionError):
            return False, None
