"""The JSON Schema subset the tool table uses, checked with messages that name the field.

Supported: type, properties, required, additionalProperties, enum, const, minimum, maximum,
exclusiveMinimum, exclusiveMaximum, minLength, maxLength, pattern, items, minItems, maxItems,
anyOf (the output schemas: when no branch fits, the first branch's complaint is the one given).
Annotation keywords (title, description, default, $schema…) are ignored by the check;
`with_defaults` applies `default` for absent top-level properties.
"""

from __future__ import annotations

import functools
import re
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


@functools.lru_cache(maxsize=64)
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(_end_anchors(source))


def _end_anchors(source: str) -> str:
    """`$` outside a character class becomes `\\Z`.

    JSON Schema patterns are ECMA-262, where `$` (no m flag) matches only at the end of the input;
    Python's `$` also matches before a final newline, which let "usd-coin\\n" pass `^[a-z-]+$`.
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
    """JSON equality for enum and const: true is not 1 and false is not 0 (Python says they are)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    return bool(a == b)


def _is_type(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False  # JSON's true is not 1
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, (object,)))


def _where(path: str) -> str:
    return f"`{path}`" if path else "the arguments"


def check(value: Any, schema: dict[str, Any], path: str = "") -> str | None:
    """None when `value` satisfies `schema`; otherwise one sentence naming the first bad field."""
    problem = _check_own(value, schema, path)
    branches = schema.get("anyOf")
    if problem is None and isinstance(branches, list) and branches:
        problems = [check(value, branch, path) for branch in branches]
        if all(problems):
            return problems[0]
    return problem


def _check_own(value: Any, schema: dict[str, Any], path: str) -> str | None:
    where = _where(path)
    wanted = schema.get("type")
    if wanted is not None:
        names = wanted if isinstance(wanted, list) else [wanted]
        if not any(_is_type(value, n) for n in names):
            return f"{where} must be {' or '.join(('an ' if n[0] in 'aeiou' else 'a ') + n for n in names)}"
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        return f"{where} must be one of {', '.join(repr(v) for v in schema['enum'])}"
    if "const" in schema and not _same(value, schema["const"]):
        return f"{where} must be {schema['const']!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where} must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where} must be at most {schema['maximum']}"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return f"{where} must be greater than {schema['exclusiveMinimum']}"
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            return f"{where} must be less than {schema['exclusiveMaximum']}"
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            return f"{where} must be at least {schema['minLength']} characters long"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where} must be at most {schema['maxLength']} characters long"
        if "pattern" in schema and not _pattern(schema["pattern"]).search(value):
            return f"{where} must match the pattern {schema['pattern']}"
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            return f"{where} must have at least {schema['minItems']} items"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{where} must have at most {schema['maxItems']} items"
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                problem = check(item, items, f"{path}[{i}]")
                if problem:
                    return problem
    if isinstance(value, dict):
        return _check_object(value, schema, path)
    return None


def _check_object(value: dict[str, Any], schema: dict[str, Any], path: str) -> str | None:
    properties: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in value:
            return f"`{_join(path, name)}` is required"
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        sub = properties.get(name)
        if sub is None:
            if extra is False:
                allowed = ", ".join(f"`{p}`" for p in properties) or "none"
                return f"`{_join(path, name)}` is not an accepted argument (accepted: {allowed})"
            if isinstance(extra, dict):
                sub = extra
            else:
                continue
        problem = check(item, sub, _join(path, name))
        if problem:
            return problem
    return None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def with_defaults(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `arguments` with each absent top-level property's `default` filled in."""
    filled = dict(arguments)
    for name, sub in schema.get("properties", {}).items():
        if name not in filled and isinstance(sub, dict) and "default" in sub:
            filled[name] = sub["default"]
    return filled
