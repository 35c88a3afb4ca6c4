"""schema: the JSON Schema subset of the tool table, with messages that name the field."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_server.core import schema
from mcp_server.fairwins.snapshot import load
from mcp_server.fairwins.tools import BUILD_INTENT
from tests.outputs import keywords

# What schema.check enforces, and what it may ignore because it only annotates.
ENFORCED = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "items", "minItems", "maxItems",
    "anyOf",
}  # fmt: skip
ANNOTATIONS = {"title", "description", "default", "$schema", "examples"}


@pytest.mark.parametrize("tool", [*load().tools, BUILD_INTENT], ids=lambda t: t["name"])
def test_every_served_input_schema_uses_only_keywords_the_checker_enforces(tool: dict[str, Any]) -> None:
    # A keyword the checker silently ignored would let arguments through that the schema forbids.
    unknown = keywords(tool["inputSchema"]) - ENFORCED - ANNOTATIONS
    assert not unknown, f"{tool['name']} uses {sorted(unknown)}, which schema.check does not enforce"


@pytest.mark.parametrize("target", sorted(load().output_schemas))
def test_every_output_schema_uses_only_keywords_the_checker_enforces(target: str) -> None:
    # The server holds each gateway answer to its tool's outputSchema before passing it on.
    unknown = keywords(load().output_schemas[target]) - ENFORCED - ANNOTATIONS
    assert not unknown, f"{target} uses {sorted(unknown)}, which schema.check does not enforce"


ANY = {
    "type": "object",
    "anyOf": [{"required": ["chains"]}, {"required": ["accepts"]}],
    "properties": {"n": {"type": "integer"}},
}


def test_any_of_passes_a_value_one_branch_fits_and_names_the_first_branchs_complaint_otherwise() -> None:
    assert schema.check({"accepts": []}, ANY) is None and schema.check({"chains": []}, ANY) is None
    assert schema.check({}, ANY) == "`chains` is required"
    assert schema.check({"n": "x", "chains": []}, ANY) == "`n` must be an integer", "the schema's own keywords first"


OBJECT = {
    "type": "object",
    "properties": {
        "chainId": {"type": "integer", "minimum": 1, "maximum": 9007199254740991},
        "slug": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z-]+$"},
        "params": {
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}},
        },
    },
    "required": ["chainId"],
    "additionalProperties": False,
}


def test_a_valid_value_passes() -> None:
    assert schema.check({"chainId": 137, "slug": "usd", "params": {"tags": ["a"]}}, OBJECT) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({}, "`chainId` is required"),
        ({"chainId": "137"}, "`chainId` must be an integer"),
        ({"chainId": True}, "`chainId` must be an integer"),
        ({"chainId": 1.5}, "`chainId` must be an integer"),
        ({"chainId": 0}, "`chainId` must be at least 1"),
        ({"chainId": 2**60}, "`chainId` must be at most 9007199254740991"),
        ({"chainId": 1, "slug": ""}, "`slug` must be at least 1 characters long"),
        ({"chainId": 1, "slug": "abcdef"}, "`slug` must be at most 5 characters long"),
        ({"chainId": 1, "slug": "a/b"}, "`slug` must match the pattern"),
        ({"chainId": 1, "extra": 1}, "`extra` is not an accepted argument (accepted: `chainId`, `slug`, `params`)"),
        ({"chainId": 1, "params": []}, "`params` must be an object"),
        ({"chainId": 1, "params": {"tags": []}}, "`params.tags` must have at least 1 items"),
        ({"chainId": 1, "params": {"tags": ["a", "b", "c"]}}, "`params.tags` must have at most 2 items"),
        ({"chainId": 1, "params": {"tags": ["a", 5]}}, "`params.tags[1]` must be a string"),
        ([], "the arguments must be an object"),
    ],
)
def test_a_failure_is_one_sentence_naming_the_field(value: Any, expected: str) -> None:
    problem = schema.check(value, OBJECT)
    assert problem is not None and expected in problem


def test_an_integral_float_is_an_integer_as_in_json() -> None:
    assert schema.check({"chainId": 137.0}, OBJECT) is None


@pytest.mark.parametrize("value", ["usd\n", "usd\r\n"])
def test_a_pattern_anchored_with_dollar_does_not_accept_a_trailing_newline(value: str) -> None:
    # ECMA-262 (JSON Schema's regex dialect): `$` without the m flag matches only at the end of
    # the input. Python's `$` also matches before a final newline.
    assert schema.check(value, {"type": "string", "pattern": "^[a-z]+$"}) is not None


def test_a_dollar_inside_a_class_or_escaped_stays_a_literal_dollar() -> None:
    assert schema.check("a$", {"pattern": "^a[$]$"}) is None
    assert schema.check("a$", {"pattern": "^a\\$$"}) is None
    assert schema.check("a$\n", {"pattern": "^a\\$$"}) is not None


def test_a_pattern_is_unanchored_unless_it_says_so() -> None:
    assert schema.check("xx-abc-yy", {"pattern": "abc"}) is None


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        (True, {"enum": [1, 2]}),
        (1, {"enum": [True]}),
        (0, {"const": False}),
        (False, {"const": 0}),
        ([True], {"enum": [[1]]}),
        ({"a": 1}, {"const": {"a": True}}),
    ],
)
def test_enum_and_const_do_not_confuse_booleans_with_numbers(value: Any, rule: dict[str, Any]) -> None:
    assert schema.check(value, rule) is not None


@pytest.mark.parametrize(
    ("value", "rule"), [(1.0, {"enum": [1]}), ("a", {"enum": ["a", "b"]}), (None, {"const": None})]
)
def test_enum_and_const_accept_equal_json_values(value: Any, rule: dict[str, Any]) -> None:
    assert schema.check(value, rule) is None


def test_enum_failure_lists_the_choices() -> None:
    problem = schema.check({"intent": "steal"}, BUILD_INTENT["inputSchema"] | {"required": []})
    assert problem is not None and "`intent` must be one of 'create_wager'" in problem


def test_exclusive_bounds() -> None:
    rule = {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}
    assert schema.check(0.5, rule) is None
    assert "greater than 0" in (schema.check(0, rule) or "")
    assert "less than 1" in (schema.check(1, rule) or "")


def test_a_type_list_accepts_any_of_its_types() -> None:
    assert schema.check(None, {"type": ["string", "null"]}) is None
    assert "must be a string or null" in (schema.check(5, {"type": ["string", "null"]}) or "")


def test_a_union_of_types_names_them_all_or_the_complaint_of_the_branch_whose_type_fits() -> None:
    union = {
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}, {"type": "null"}],
    }
    assert schema.check(["Yes", "No"], union) is None and schema.check('["Yes"]', union) is None
    assert schema.check(5, union, "outcomes") == "`outcomes` must be a string, an array or null"
    assert schema.check(["Yes", 2], union, "outcomes") == "`outcomes[1]` must be a string"
    # Branches that do not all name a type keep the first branch's complaint.
    mixed = {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    assert schema.check({}, mixed) == "`a` is required"


def test_additional_properties_given_as_a_schema_checks_the_extra_fields() -> None:
    rule = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert schema.check({"a": 1}, rule) is None
    assert "`b` must be an integer" in (schema.check({"b": "x"}, rule) or "")


def test_with_defaults_fills_absent_top_level_defaults_and_leaves_given_values() -> None:
    rule = {"properties": {"chainId": {"type": "integer", "default": 137}, "q": {"type": "string"}}}
    assert schema.with_defaults({}, rule) == {"chainId": 137}
    assert schema.with_defaults({"chainId": 1}, rule) == {"chainId": 1}
    given: dict[str, Any] = {}
    schema.with_defaults(given, rule)
    assert given == {}, "the caller's arguments are not modified"
