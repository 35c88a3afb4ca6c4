"""server.json, the MCP Registry's description of this package: valid against the registry's schema, and true.

The schema is the registry's published 2025-12-11 `server.schema.json`, vendored under
tests/registry/ (SOURCE.md says where from). It is checked with a small draft-07 validator
written for the keywords that schema uses; the validator refuses any keyword it does not know,
so a newer schema cannot pass by being half-read, and its refusals are tested on broken copies.
"""

from __future__ import annotations

import copy
import json
import pathlib
import re
import tomllib
import urllib.parse
from typing import Any, Final

import pytest

from mcp_server import __version__
from mcp_server.setup.config import LOG_LEVELS, Config

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
SCHEMA_FILE: Final = ROOT / "tests" / "registry" / "server.schema.2025-12-11.json"
SCHEMA: Final[dict[str, Any]] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
PUBLISHER_META: Final = "io.modelcontextprotocol.registry/publisher-provided"

ANNOTATIONS: Final = frozenset(
    {"$comment", "$id", "$schema", "title", "description", "default", "example", "examples", "definitions"}
)
TYPES: Final = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def validate(value: Any, schema: dict[str, Any] | bool, root: dict[str, Any] = SCHEMA, at: str = "$") -> list[str]:
    """Every way `value` breaks `schema` (draft-07, the subset the registry's schema uses), as 'path: why'."""
    if schema is True:
        return []
    if schema is False:
        return [f"{at}: no value is allowed here"]
    errors: list[str] = []
    for key, rule in schema.items():
        if key in ANNOTATIONS:
            continue
        if key == "$ref":
            if not rule.startswith("#/"):
                raise AssertionError(f"only local $ref is supported, not {rule}")
            target: Any = root
            for part in rule[2:].split("/"):
                target = target[part]
            errors += validate(value, target, root, at)
        elif key == "allOf":
            for sub in rule:
                errors += validate(value, sub, root, at)
        elif key == "anyOf":
            if all(validate(value, sub, root, at) for sub in rule):
                errors.append(f"{at}: matches none of the {len(rule)} allowed shapes")
        elif key == "oneOf":
            if sum(not validate(value, sub, root, at) for sub in rule) != 1:
                errors.append(f"{at}: must match exactly one of {len(rule)} shapes")
        elif key == "not":
            if not validate(value, rule, root, at):
                errors.append(f"{at}: matches a shape that is forbidden here")
        elif key == "const":
            if value != rule:
                errors.append(f"{at}: must be {rule!r}")
        elif key == "enum":
            if value not in rule:
                errors.append(f"{at}: {value!r} is not one of {rule}")
        elif key == "type":
            names = rule if isinstance(rule, list) else [rule]
            if not any(_is_type(value, n) for n in names):
                errors.append(f"{at}: must be of type {rule}")
        elif key == "required":
            if isinstance(value, dict):
                errors += [f"{at}: {name!r} is required" for name in rule if name not in value]
        elif key == "properties":
            if isinstance(value, dict):
                for name, sub in rule.items():
                    if name in value:
                        errors += validate(value[name], sub, root, f"{at}.{name}")
        elif key == "additionalProperties":
            if isinstance(value, dict):
                known = set(schema.get("properties", {}))
                for name in value:
                    if name not in known:
                        errors += validate(value[name], rule, root, f"{at}.{name}")
        elif key == "items":
            if isinstance(value, list):
                for i, item in enumerate(value):
                    errors += validate(item, rule, root, f"{at}[{i}]")
        elif key == "pattern":
            if isinstance(value, str) and not re.search(rule, value):
                errors.append(f"{at}: {value!r} does not match {rule}")
        elif key == "minLength":
            if isinstance(value, str) and len(value) < rule:
                errors.append(f"{at}: shorter than {rule} characters")
        elif key == "maxLength":
            if isinstance(value, str) and len(value) > rule:
                errors.append(f"{at}: longer than {rule} characters ({len(value)})")
        elif key == "format":
            if rule == "uri" and isinstance(value, str):
                parts = urllib.parse.urlsplit(value)
                if not parts.scheme or not (parts.netloc or parts.path):
                    errors.append(f"{at}: {value!r} is not a URI")
            elif rule != "uri":
                raise AssertionError(f"format {rule!r} is not supported by this validator")
        else:
            raise AssertionError(f"schema keyword {key!r} is not supported by this validator: teach it first")
    return errors


def server_json() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
    return data


def pypi_package(data: dict[str, Any]) -> dict[str, Any]:
    found: list[dict[str, Any]] = [p for p in data.get("packages", []) if p.get("registryType") == "pypi"]
    assert len(found) == 1, "server.json describes exactly one PyPI package"
    return found[0]


# --- valid against the registry's schema --------------------------------------------------------


def test_server_json_is_valid_against_the_registrys_published_schema() -> None:
    assert validate(server_json(), SCHEMA) == []


def test_server_json_names_the_schema_it_is_checked_against() -> None:
    assert server_json()["$schema"] == SCHEMA["$id"]


def _break(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(server_json())
    *parents, last = path.split(".")
    target: Any = data
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    if value is KeyError:
        del target[int(last) if last.isdigit() else last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "why"),
    [
        ("name", KeyError, "'name' is required"),
        ("description", KeyError, "'description' is required"),
        ("version", KeyError, "'version' is required"),
        ("name", "fairwins-mcp", "does not match"),
        ("description", "x" * 101, "longer than 100"),
        ("packages.0.version", "latest", "forbidden"),
        ("packages.0.transport", {"type": "carrier-pigeon"}, "none of the"),
        ("packages.0.transport", KeyError, "'transport' is required"),
        ("packages.0.environmentVariables.0.name", KeyError, "'name' is required"),
        ("packages.0.environmentVariables.0.isSecret", "yes", "type boolean"),
        ("packages.0.environmentVariables.0.format", "secret", "is not one of"),
    ],
)
def test_the_validator_refuses_a_broken_copy(path: str, value: Any, why: str) -> None:
    errors = validate(_break(path, value), SCHEMA)
    assert any(why in e for e in errors), errors


def test_the_validator_refuses_a_schema_keyword_it_does_not_know() -> None:
    with pytest.raises(AssertionError, match="not supported"):
        validate([], {"minItems": 1})


# --- the official registry's own rules ----------------------------------------------------------


def test_the_pypi_package_names_the_only_registry_the_official_registry_accepts() -> None:
    assert pypi_package(server_json()).get("registryBaseUrl", "https://pypi.org") == "https://pypi.org"


def test_only_publisher_provided_meta_is_used() -> None:
    assert set(server_json().get("_meta", {})) <= {PUBLISHER_META}


def test_the_readme_carries_the_mcp_name_that_proves_ownership_of_the_pypi_package() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"mcp-name: {server_json()['name']}" in readme


# --- and true of this project -------------------------------------------------------------------


def test_every_version_is_the_servers_version() -> None:
    data = server_json()
    assert data["version"] == pypi_package(data)["version"] == __version__


def test_the_package_is_this_projects_distribution_and_its_command() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    package = pypi_package(server_json())
    assert package["identifier"] == project["name"]
    # `uvx fairwins-mcp` runs the console script named like the package, which serves stdio.
    assert package["runtimeHint"] == "uvx" and project["name"] in project["scripts"]
    assert package["transport"] == {"type": "stdio"}
    assert "packageArguments" not in package  # stdio is what the command does with no arguments


def test_environment_variables_are_the_ones_the_server_reads_with_its_defaults() -> None:
    read = set(
        re.findall(r'"(FAIRWINS_[A-Z_]+)"', (ROOT / "mcp_server" / "setup" / "config.py").read_text(encoding="utf-8"))
    )
    described = {v["name"]: v for v in pypi_package(server_json())["environmentVariables"]}
    assert set(described) <= read, set(described) - read
    assert {"FAIRWINS_API_URL", "FAIRWINS_API_TOKEN"} <= set(described)
    assert described["FAIRWINS_API_TOKEN"]["isSecret"] is True
    assert not any(v.get("isSecret") for name, v in described.items() if name != "FAIRWINS_API_TOKEN")
    defaults = Config()
    assert float(described["FAIRWINS_MCP_TIMEOUT"]["default"]) == defaults.timeout
    assert int(described["FAIRWINS_MCP_MAX_RESPONSE_BYTES"]["default"]) == defaults.max_response_bytes
    assert described["FAIRWINS_MCP_LOG_LEVEL"]["default"] == defaults.log_level
    assert tuple(described["FAIRWINS_MCP_LOG_LEVEL"]["choices"]) == LOG_LEVELS
