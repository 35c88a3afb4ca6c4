"""The JSON Schema subset the tool table uses, with messages naming fields.

`_read` reads a schema's `CHECKED` keywords once (annotations such as title, description and
default are ignored) for three readers: `compile_schema` words the first misfit,
`compile_verdict` is generated Python that only says whether a value fits, and `compile_bulk`
vouches for a whole list at once with the C built-ins (a gateway answer's thousand wagers) or
leaves it to the verdict.
"""

from __future__ import annotations

import functools
import operator
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain, compress, repeat
from typing import Any, Final


@functools.lru_cache(maxsize=64)
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(_end_anchors(source))


def _end_anchors(source: str) -> str:
    """`$` outside a character class becomes `\\Z`.

    JSON Schema patterns are ECMA-262, where `$` (no m flag) matches only at the end of the input;
    Python's `$` also matches before a final newline, so "usd-coin\\n" would pass `^[a-z-]+$`.
    """
    out: list[str] = []
    i, in_class = 0, False
    while i < len(source):
        ch = source[i]
        if ch == "\\":
            out.append(source[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            # As Python reads it: a "]" first in the class (after an optional "^") is a literal.
            start = i + 2 if source[i + 1 : i + 2] == "^" else i + 1
            if source[start : start + 1] == "]":
                out.append(source[i : start + 1])
                i = start + 1
                continue
        elif ch == "$":
            out.append("\\Z")
            i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _same(a: Any, b: Any) -> bool:
    """JSON equality for enum and const: true is not 1 (Python says it is)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    return bool(a == b)


# ---- the subset, read once --------------------------------------------------------------------

# What the readers check; anything else in a schema is an annotation they ignore (answers.py
# streams only what these keywords allow).
CHECKED: Final = frozenset(
    "type properties required additionalProperties enum const minimum maximum exclusiveMinimum "
    "exclusiveMaximum minLength maxLength pattern items minItems maxItems anyOf".split()
)
# Each type's test, as source for the verdict; the checker's are compiled from the same lines. JSON's
# true is not 1, and 2.0 is an integer.
_TYPE_TESTS: dict[str, str] = {
    "string": "isinstance({v}, str)",
    "integer": "isinstance({v}, int) and not isinstance({v}, bool) or isinstance({v}, float) and {v}.is_integer()",
    "number": "isinstance({v}, (int, float)) and not isinstance({v}, bool)",
    "boolean": "isinstance({v}, bool)",
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "null": "{v} is None",
}
# Each bound: its keyword, the comparison a value out of bounds meets (as a function and as
# source for the verdict), and what a value within must be.
_BOUNDS: list[tuple[str, Callable[[Any, Any], bool], str, str]] = [
    ("minimum", operator.lt, "<", "at least"),
    ("maximum", operator.gt, ">", "at most"),
    ("exclusiveMinimum", operator.le, "<=", "greater than"),
    ("exclusiveMaximum", operator.ge, ">=", "less than"),
]
_ABSENT: Final = object()


@dataclass(frozen=True, slots=True, eq=False)
class _Node:
    """One schema's checked keywords, read once for the three readers."""

    checked: frozenset[str]  # the keywords of CHECKED it has
    types: tuple[str, ...] | None  # `type`'s names; None: any type
    enum: tuple[Any, ...] | None
    const: Any  # _ABSENT: no const
    bounds: tuple[tuple[Any, Callable[[Any, Any], bool], str, str], ...]  # limit, out, sign, words
    min_length: int | None
    max_length: int | None
    pattern: str | None
    min_items: int | None
    max_items: int | None
    items: _Node | None
    properties: dict[str, _Node]
    required: tuple[str, ...]
    extra: bool | _Node  # additionalProperties: open (True), closed (False), or a schema
    any_of: tuple[_Node, ...]

    @property
    def text(self) -> bool:
        return self.min_length is not None or self.max_length is not None or self.pattern is not None


def _read(schema: dict[str, Any]) -> _Node:
    """`schema` and every schema inside it, read in one walk."""
    wanted = schema.get("type")
    extra = schema.get("additionalProperties", True)
    items, branches = schema.get("items"), schema.get("anyOf")
    return _Node(
        checked=CHECKED & schema.keys(),
        types=None if wanted is None else tuple(wanted) if isinstance(wanted, list) else (wanted,),
        enum=tuple(schema["enum"]) if "enum" in schema else None,
        const=schema.get("const", _ABSENT),
        bounds=tuple((schema[key], out, sign, words) for key, out, sign, words in _BOUNDS if key in schema),
        min_length=schema.get("minLength"),
        max_length=schema.get("maxLength"),
        pattern=schema.get("pattern"),
        min_items=schema.get("minItems"),
        max_items=schema.get("maxItems"),
        items=_read(items) if isinstance(items, dict) else None,
        properties={name: _read(sub) for name, sub in schema.get("properties", {}).items()},
        required=tuple(schema.get("required", ())),
        extra=_read(extra) if isinstance(extra, dict) else extra is not False,
        any_of=tuple(_read(branch) for branch in branches) if isinstance(branches, list) else (),
    )


# ---- the checker, which words a misfit ---------------------------------------------------------

Checker = Callable[[Any, str], str | None]  # (value, its path) -> the first complaint, or None


_TYPE_PREDICATES: dict[str, Callable[[Any], bool]] = {
    name: eval(f"lambda v: {test.format(v='v')}") for name, test in _TYPE_TESTS.items()
}


def _type_test(name: str) -> Callable[[Any], bool]:
    return _TYPE_PREDICATES.get(name, _any_type)


def _any_type(value: Any) -> bool:
    return True


def _where(path: str) -> str:
    return f"`{path}`" if path else "the arguments"


def check(value: Any, schema: dict[str, Any], path: str = "") -> str | None:
    """None if `value` fits `schema`, else a sentence naming the first misfit."""
    return compile_schema(schema)(value, path)


def compile_schema(schema: dict[str, Any]) -> Checker:
    """`check` for one schema, its keywords read once (so it must not change)."""
    return _checker(_read(schema))


def _checker(node: _Node) -> Checker:
    own = _compile_own(node)
    if not node.any_of:
        return own
    alternatives = [_checker(branch) for branch in node.any_of]
    # A union of types (a string, or a list): the branches' own types, each tested on its own.
    typed = [branch.types or None for branch in node.any_of]
    names = list(dict.fromkeys(n for names in typed if names is not None for n in names))
    union = None if any(t is None for t in typed) else _must_be(names)
    tests = [[_type_test(n) for n in t] if t is not None else [] for t in typed]

    def any_of(value: Any, path: str) -> str | None:
        problem = own(value, path)
        if problem is not None:
            return problem
        # The first branch that fits ends the search; when none does, the complaint of the first
        # branch whose type the value has, or, when it has none of them, the types it may have.
        first: str | None = None
        for alternative, test in zip(alternatives, tests, strict=True):
            complaint = alternative(value, path)
            if complaint is None:
                return None
            if first is None and (union is None or any(t(value) for t in test)):
                first = complaint
        return first or f"{_where(path)} {union}"

    return any_of


def _must_be(names: list[str] | tuple[str, ...]) -> str:
    """The "must be" phrase for types: "must be a string, an array or null"."""
    words = [n if n == "null" else ("an " if n[0] in "aeiou" else "a ") + n for n in names]
    return "must be " + (f"{', '.join(words[:-1])} or {words[-1]}" if len(words) > 1 else words[0])


def _compile_own(node: _Node) -> Checker:
    """Every keyword but anyOf, in the order their complaints take precedence."""
    steps: list[Checker] = []
    if node.types is not None:
        tests = [_type_test(n) for n in node.types]
        must = _must_be(node.types)

        def of_type(value: Any, path: str) -> str | None:
            for test in tests:
                if test(value):
                    return None
            return f"{_where(path)} {must}"

        steps.append(of_type)
    if node.enum is not None:
        options = node.enum
        one_of = f"must be one of {', '.join(repr(v) for v in options)}"
        texts = frozenset(options) if all(isinstance(o, str) for o in options) else None

        def in_enum(value: Any, path: str) -> str | None:
            if texts is not None:
                ok = isinstance(value, str) and value in texts
            else:
                ok = any(_same(value, option) for option in options)
            return None if ok else f"{_where(path)} {one_of}"

        steps.append(in_enum)
    if node.const is not _ABSENT:
        constant = node.const

        def is_const(value: Any, path: str) -> str | None:
            return None if _same(value, constant) else f"{_where(path)} must be {constant!r}"

        steps.append(is_const)
    bounds = [(limit, out, f"must be {words} {limit}") for limit, out, _, words in node.bounds]
    if bounds:

        def in_bounds(value: Any, path: str) -> str | None:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                for limit, out, must in bounds:
                    if out(value, limit):
                        return f"{_where(path)} {must}"
            return None

        steps.append(in_bounds)
    for made in (_compile_text(node), _compile_list(node), _compile_object(node)):
        if made is not None:
            steps.append(made)
    if not steps:
        return _anything
    if len(steps) == 1:
        return steps[0]

    def own(value: Any, path: str) -> str | None:
        for step in steps:
            problem = step(value, path)
            if problem is not None:
                return problem
        return None

    return own


def _anything(value: Any, path: str) -> str | None:
    return None


def _sizes(low: int | None, high: int | None, fewer: str, more: str) -> Callable[[int], str | None]:
    """The complaint a length earns against min/max bounds, or None."""
    too_few = fewer.format(low)
    too_many = more.format(high)

    def complaint(size: int) -> str | None:
        if low is not None and size < low:
            return too_few
        if high is not None and size > high:
            return too_many
        return None

    return complaint


def _compile_text(node: _Node) -> Checker | None:
    if not node.text:
        return None
    low, high, source = node.min_length, node.max_length, node.pattern
    pattern = _pattern(source) if source is not None else None
    sizes = _sizes(low, high, "must be at least {} characters long", "must be at most {} characters long")

    def text(value: Any, path: str) -> str | None:
        if isinstance(value, str):
            if (size := sizes(len(value))) is not None:
                return f"{_where(path)} {size}"
            if pattern is not None and not pattern.search(value):
                return f"{_where(path)} must match the pattern {source}"
        return None

    return text


def _compile_list(node: _Node) -> Checker | None:
    low, high = node.min_items, node.max_items
    each = _checker(node.items) if node.items is not None else None
    if low is None and high is None and each is None:
        return None
    sizes = _sizes(low, high, "must have at least {} items", "must have at most {} items")

    def array(value: Any, path: str) -> str | None:
        if isinstance(value, list):
            if (size := sizes(len(value))) is not None:
                return f"{_where(path)} {size}"
            if each is not None:
                for i, item in enumerate(value):
                    problem = each(item, f"{path}[{i}]")
                    if problem:
                        return problem
        return None

    return array


def _compile_object(node: _Node) -> Checker | None:
    fields = {name: _checker(sub) for name, sub in node.properties.items()}
    required = node.required
    others = _checker(node.extra) if isinstance(node.extra, _Node) else None
    closed = node.extra is False
    if not (fields or required or closed or others):
        return None  # any object will do
    allowed = ", ".join(f"`{p}`" for p in node.properties) or "none"

    def of_object(value: Any, path: str) -> str | None:
        if not isinstance(value, dict):
            return None
        for name in required:
            if name not in value:
                return f"`{_join(path, name)}` is required"
        for name, item in value.items():
            sub = fields.get(name)
            if sub is None:
                if closed:
                    return f"`{_join(path, name)}` is not an accepted argument (accepted: {allowed})"
                if others is None:
                    continue
                sub = others
            problem = sub(item, _join(path, name))
            if problem:
                return problem
        return None

    return of_object


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def with_defaults(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `arguments` with absent top-level properties' defaults."""
    filled = dict(arguments)
    for name, sub in schema.get("properties", {}).items():
        if name not in filled and isinstance(sub, dict) and "default" in sub:
            filled[name] = sub["default"]
    return filled


# ---- a verdict alone -------------------------------------------------------------------------


Verdict = Callable[[Any], bool]  # True exactly when the checker finds nothing


def compile_verdict(schema: dict[str, Any]) -> Verdict:
    """`check(value, schema) is None` as one generated function.

    Straight-line Python, with none of the checker's paths, sentences or calls per keyword; the
    checker runs only for a value this refuses, to word why.
    """
    known = _VERDICTS.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    source = _Source()
    function = source.function(_read(schema))
    namespace: dict[str, Any] = {"_same": _same, **source.constants}
    exec(compile("\n".join(source.lines), "<schema verdict>", "exec"), namespace)
    verdict: Verdict = namespace[function]
    _VERDICTS[id(schema)] = (schema, verdict)  # the schema kept, so its id is not reused
    return verdict


# Verdicts by schema (the tool table's are made once): each is Python compiled at run time.
_VERDICTS: dict[int, tuple[dict[str, Any], Verdict]] = {}


class _Source:
    """The lines of one verdict function per schema, and their constants."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {}
        self._names = 0

    def name(self, prefix: str) -> str:
        self._names += 1
        return f"{prefix}{self._names}"

    def constant(self, value: Any) -> str:
        name = self.name("k")
        self.constants[name] = value
        return name

    def function(self, node: _Node) -> str:
        name = self.name("verdict")
        body: list[str] = []
        self._checks(node, "v", body, 1)
        self.lines += [f"def {name}(v):", *body, "    return True", ""]
        return name

    def _checks(self, node: _Node, v: str, out: list[str], depth: int) -> None:
        """Lines that return False when `v` breaks the schema."""
        pad = "    " * depth
        known: str | None = None
        if node.types is not None:
            tests = [_TYPE_TESTS.get(n, "True").format(v=v) for n in node.types]
            out.append(f"{pad}if not ({' or '.join(f'({t})' for t in tests)}): return False")
            # Past a single type's line, `v` is of that type: each guard below that asks again is
            # written `True`, which compiles to nothing.
            if len(node.types) == 1 and node.types[0] in _TYPE_TESTS:
                known = node.types[0]
        self._values(node, v, out, pad, known)
        self._numbers(node, v, out, pad, known)
        self._text(node, v, out, pad, known)
        self._array(node, v, out, depth, known)
        self._object(node, v, out, depth, known == "object")
        if node.any_of:
            calls = " or ".join(f"{self.function(branch)}({v})" for branch in node.any_of)
            out.append(f"{pad}if not ({calls}): return False")

    def _values(self, node: _Node, v: str, out: list[str], pad: str, known: str | None) -> None:
        """Lines for enum and const."""
        if node.enum is not None:
            options = node.enum
            if all(isinstance(o, str) for o in options):
                has = f"{v} in {self.constant(frozenset(options))}"
                out.append(f"{pad}if not ({has if known == 'string' else f'isinstance({v}, str) and {has}'}):")
            else:
                out.append(f"{pad}if not any(_same({v}, o) for o in {self.constant(options)}):")
            out.append(f"{pad}    return False")
        if node.const is not _ABSENT:
            out.append(f"{pad}if not _same({v}, {self.constant(node.const)}): return False")

    def _numbers(self, node: _Node, v: str, out: list[str], pad: str, known: str | None) -> None:
        """Lines for the bounds of a number."""
        if node.bounds:
            number = "True" if known in ("integer", "number") else None
            out.append(f"{pad}if {number or f'isinstance({v}, (int, float)) and not isinstance({v}, bool)'}:")
            for limit, _, sign, _ in node.bounds:
                out.append(f"{pad}    if {v} {sign} {self.constant(limit)}: return False")

    def _text(self, node: _Node, v: str, out: list[str], pad: str, known: str | None) -> None:
        """Lines for a string's length and pattern."""
        if not node.text:
            return
        source = node.pattern
        out.append(f"{pad}if {'True' if known == 'string' else f'isinstance({v}, str)'}:")
        out += self._lengths(v, node.min_length, node.max_length, pad)
        if source is not None:
            out.append(f"{pad}    if not {self.constant(_pattern(source))}.search({v}): return False")

    def _lengths(self, v: str, low: int | None, high: int | None, pad: str) -> list[str]:
        """Lines for the bounds of a length."""
        bounds = (("<", low), (">", high))
        return [
            f"{pad}    if len({v}) {sign} {self.constant(limit)}: return False"
            for sign, limit in bounds
            if limit is not None
        ]

    def _array(self, node: _Node, v: str, out: list[str], depth: int, known: str | None) -> None:
        """Lines for an array's size and its items."""
        pad = "    " * depth
        items = node.items
        block = self._lengths(v, node.min_items, node.max_items, pad)
        if items is not None:
            item = self.name("x")
            inner: list[str] = []
            self._checks(items, item, inner, depth + 2)
            if inner:
                block += [f"{pad}    for {item} in {v}:", *inner]
        if block:
            out += [f"{pad}if {'True' if known == 'array' else f'isinstance({v}, list)'}:", *block]

    def _object(self, node: _Node, v: str, out: list[str], depth: int, is_object: bool) -> None:
        """Lines for an object's names and their values."""
        pad = "    " * depth
        extra = node.extra
        inner: list[str] = [f"{pad}    if {self.constant(name)} not in {v}: return False" for name in node.required]
        for name, sub in node.properties.items():
            item = self.name("x")
            checks: list[str] = []
            self._checks(sub, item, checks, depth + 2)
            if checks:
                key = self.constant(name)
                inner += [f"{pad}    if {key} in {v}:", f"{pad}        {item} = {v}[{key}]", *checks]
        if extra is not True:
            known, key, item = self.constant(frozenset(node.properties)), self.name("n"), self.name("x")
            checks = []
            if isinstance(extra, _Node):
                self._checks(extra, item, checks, depth + 3)
            body = [f"{pad}            return False"] if extra is False else checks or [f"{pad}            pass"]
            inner += [f"{pad}    for {key}, {item} in {v}.items():", f"{pad}        if {key} not in {known}:", *body]
        if inner:
            out += [f"{pad}if {'True' if is_object else f'isinstance({v}, dict)'}:", *inner]


# ---- many values at once ---------------------------------------------------------------------

Bulk = Callable[[list[Any]], bool]  # True: every value satisfies the schema; False: check them one by one
BulkStep = Callable[[list[Any], set[type]], bool]  # one keyword over the values, given their types

# What each type's test accepts, as exact types: parsed JSON holds no subclasses. An integral float
# is an integer to the checker; it is left to the checker here (the exact types would refuse it).
_EXACT: dict[str, frozenset[type]] = {
    "string": frozenset({str}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "boolean": frozenset({bool}),
    "object": frozenset({dict}),
    "array": frozenset({list}),
    "null": frozenset({type(None)}),
}
_NUMBERS = frozenset({int, float})
_MANY_NAMES: Final = 64  # other names (additionalProperties) checked a column each; more: one by one


def _exact_types(node: _Node) -> frozenset[type] | None:
    """The exact types a schema's `type` allows; None if absent or unknown."""
    if node.types is None or not all(isinstance(n, str) and n in _EXACT for n in node.types):
        return None
    return frozenset().union(*(_EXACT[n] for n in node.types))


def compile_bulk(schema: dict[str, Any]) -> Bulk:
    """A check of many values at once: True only if each would pass `check`.

    Each keyword is one pass over the list in C (`set(map(type, ...))`, `min`, `map(len, ...)`),
    so a thousand values cost no Python per value; a keyword for one type (a length, a pattern,
    items, properties) sees only the values of that type, so unions, additionalProperties (a
    column per name) and a nullable's anyOf settle as one type does. What it cannot settle (an
    integral float, an enum of objects) is False: the caller checks those values one by one.
    """
    return _bulk(_read(schema))


def _bulk(node: _Node) -> Bulk:
    values = _bulk_values(node)
    if values is None:
        return _never
    allowed = _exact_types(node)
    made = (_bulk_bounds(node), _bulk_text(node), _bulk_list(node), _bulk_object(node), _bulk_any_of(node))
    steps = values + [step for step in made if step is not None]

    def bulk(values: list[Any]) -> bool:
        types = set(map(type, values))
        if allowed is not None and not types <= allowed:
            return False
        return all(step(values, types) for step in steps)

    return bulk


def _bulk_values(node: _Node) -> list[BulkStep] | None:
    """The steps for enum and const; None when not strings (no bulk check)."""
    steps: list[BulkStep] = []
    if node.enum is not None:
        if not all(isinstance(o, str) for o in node.enum):
            return None
        texts = frozenset(node.enum)
        steps.append(lambda values, types: types <= {str} and set(values) <= texts)
    if node.const is not _ABSENT:
        constant = node.const
        if not isinstance(constant, str):
            return None
        steps.append(lambda values, types: types <= {str} and set(values) <= {constant})
    return steps


def _bulk_bounds(node: _Node) -> BulkStep | None:
    """The step for a number's bounds: the least and greatest against each."""
    bounds = [(limit, out) for limit, out, _, _ in node.bounds]
    if not bounds:
        return None

    def in_bounds(values: list[Any], types: set[type]) -> bool:
        if not types & _NUMBERS:
            return True  # bounds apply to numbers only (true is no number here)
        numbers = values if types <= _NUMBERS else list(compress(values, map(_NUMBERS.__contains__, map(type, values))))
        low, high = min(numbers), max(numbers)
        return not any(out(low, limit) or out(high, limit) for limit, out in bounds)

    return in_bounds


def _bulk_any_of(node: _Node) -> BulkStep | None:
    """The step for anyOf, settled a type's group at a time."""
    if not node.any_of:
        return None
    alternatives = [_bulk(branch) for branch in node.any_of]

    def any_of(values: list[Any], types: set[type]) -> bool:
        # Each value fitting some branch fits anyOf: the first branch for them all, else the
        # values of each type (a nullable's strings and its nulls) each by a branch of its own.
        if alternatives[0](values):
            return True
        groups = [values] if len(types) == 1 else [_of(values, kind) for kind in types]
        return all(any(alternative(group) for alternative in alternatives) for group in groups)

    return any_of


def _never(values: list[Any]) -> bool:
    return not values


def _of(values: list[Any], kind: type) -> list[Any]:
    """The values of exactly this type, in one pass in C."""
    return list(compress(values, map(operator.is_, map(type, values), repeat(kind))))


def _bulk_text(node: _Node) -> BulkStep | None:
    if not node.text:
        return None
    pattern = _pattern(node.pattern) if node.pattern is not None else None
    matches = None if pattern is None else lambda strings: all(map(pattern.search, strings))
    return _sized(str, node.min_length, node.max_length, matches)


def _sized(kind: type, low: int | None, high: int | None, rest: Callable[[list[Any]], bool] | None) -> BulkStep:
    """The step for one type's values: their lengths, then `rest`."""

    def step(values: list[Any], types: set[type]) -> bool:
        if kind not in types:
            return True
        group = values if len(types) == 1 else _of(values, kind)
        if low is not None or high is not None:
            sizes = list(map(len, group))
            if (low is not None and min(sizes) < low) or (high is not None and max(sizes) > high):
                return False
        return rest is None or rest(group)

    return step


def _column(values: list[dict[str, Any]], name: str, everywhere: bool) -> list[Any]:
    """The values `name` has in each object that has it (`everywhere`: all do)."""
    column = list(map(operator.methodcaller("get", name, _ABSENT), values))
    return column if everywhere else [v for v in column if v is not _ABSENT]


def _bulk_list(node: _Node) -> BulkStep | None:
    low, high = node.min_items, node.max_items
    each = _bulk(node.items) if node.items is not None and node.items.checked else None
    if low is None and high is None and each is None:
        return None
    items = None if each is None else lambda arrays: each(list(chain.from_iterable(arrays)))
    return _sized(list, low, high, items)


def _bulk_object(node: _Node) -> BulkStep | None:
    required, extra = node.required, node.extra
    fields = {name: sub for name, sub in node.properties.items() if sub.checked}
    closed = extra is False
    # Open but typed (additionalProperties a schema): the values of the other names, in bulk.
    others = _bulk(extra) if isinstance(extra, _Node) and extra.checked else None
    if not (fields or required or closed or others):
        return None
    known = frozenset(node.properties)
    # Properties whose schema is a type alone are settled together, from the types of every value
    # of every object (a wager's six strings: one pass), when those types fit them all.
    typed = {name: _exact_types(sub) if sub.checked == {"type"} else None for name, sub in fields.items()}
    plain = {name: allowed for name, allowed in typed.items() if allowed is not None}
    loose = {name: _bulk(sub) for name, sub in fields.items() if typed[name] is None}
    common = frozenset.intersection(*plain.values()) if plain else frozenset()

    fetch = operator.itemgetter(*required) if required else None
    wanted = frozenset(required)

    def objects(values: list[Any], types: set[type]) -> bool:
        if dict not in types:
            return True
        if len(types) > 1:
            values = _of(values, dict)
        names: set[str] | None = None
        if fetch is not None or closed or others is not None:
            sizes = set(map(len, values))
            names = set().union(*values)
            # Objects of one size n whose names number n together all have exactly those names
            # (the wagers of an answer mostly do): then one look at the names settles `required`.
            same = len(sizes) == 1 and len(names) == min(sizes)
            if fetch is not None and not (same and wanted <= names):
                try:
                    deque(map(fetch, values), maxlen=0)  # every required name, in every object
                except KeyError:
                    return False
        unknown = names - known if names is not None and (closed or others is not None) else set()
        if unknown:
            if closed or len(unknown) > _MANY_NAMES:
                return False  # a name outside properties where none may be: the checker's to word
            assert others is not None
            if not all(others(_column(values, name, False)) for name in unknown):
                return False
        settled = False
        if str in common:
            try:
                "".join(chain.from_iterable(map(dict.values, values)))  # every value a string
                settled = True
            except TypeError:
                pass
        elif common:
            settled = set(map(type, chain.from_iterable(map(dict.values, values)))) <= common
        for name, allowed in ({} if settled else plain).items():
            if not set(map(type, _column(values, name, name in required))) <= allowed:
                return False
        for name, each in loose.items():
            column = _column(values, name, name in required)
            if column and not each(column):
                return False
        return True

    return objects
