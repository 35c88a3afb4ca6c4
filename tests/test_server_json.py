"""server.json, the MCP Registry's description of this package: valid against the registry's schema, and true.

The schema is the registry's published 2025-12-11 `server.schema.json`, vendored under
tests/registry/ (SOURCE.md says where from). It is checked with scripts/registry.py's small
draft-07 validator (the one the release check uses), which refuses any keyword it does not know,
so a newer schema cannot pass by being half-read; its refusals are tested here on broken copies.
"""

from __future__ import annotations

import copy
import json
import pathlib
import re
import tomllib
from typing import Any, Final

import pytest

from mcp_server import __version__
from mcp_server.setup.config import LOG_LEVELS, Config
from mcp_server.setup.server import build_dispatcher
from scripts.registry import SCHEMA, UnsupportedSchema, door_problems, remote_problems, validate
from tests.mcp_http import serving
from tests.test_oauth_door import oauth_door

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
PUBLISHER_META: Final = "io.modelcontextprotocol.registry/publisher-provided"


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
    with pytest.raises(UnsupportedSchema, match="not supported"):
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


# --- the hosted server (issue 60) ----------------------------------------------------------------
#
# server.json names FairWins's hosted door. The official registry takes a remote only with the
# namespace's host written out (scripts/registry.remote_problems), and a remote can say nothing of
# OAuth: a client learns to sign in from a member call's 401 and the resource metadata. A release
# publishes the remote only once that door answers as this server (scripts.release remotes).

HOSTED: Final = {"type": "streamable-http", "url": "https://mcp.fairwins.app/mcp"}


def test_the_hosted_door_is_declared_and_is_one_the_official_registry_takes() -> None:
    data = server_json()
    assert data["remotes"] == [HOSTED]
    for remote in data["remotes"]:
        assert remote_problems(remote, data["name"]) == [], remote


def test_a_hosted_remote_is_valid_and_taken() -> None:
    data = {**server_json(), "remotes": [HOSTED]}
    assert validate(data, SCHEMA) == []
    assert remote_problems(HOSTED, data["name"]) == []


@pytest.mark.parametrize(
    ("remote", "why"),
    [
        ({**HOSTED, "url": "https://{host}/mcp", "variables": {"host": {"isRequired": True}}}, "is a template"),
        ({**HOSTED, "url": "https://mcp.example.com/mcp"}, "is not fairwins.app"),
        ({**HOSTED, "url": "https://evilfairwins.app/mcp"}, "is not fairwins.app"),
        ({**HOSTED, "url": "http://mcp.fairwins.app/mcp"}, "is https"),
        ({**HOSTED, "url": "https://mcp.fairwins.app/"}, "/mcp"),
        ({**HOSTED, "type": "sse"}, "Streamable HTTP only"),
        ({**HOSTED, "headers": [{"name": "Authorization", "isSecret": True}]}, "OAuth"),
    ],
)
def test_a_remote_the_registry_or_this_server_would_refuse_is_named(remote: dict[str, Any], why: str) -> None:
    # Each valid against the schema: the rules the schema cannot say are the ones held here.
    assert validate({**server_json(), "remotes": [remote]}, SCHEMA) == []
    assert any(why in problem for problem in remote_problems(remote, server_json()["name"])), why


def test_a_door_that_serves_as_this_server_may_be_published_and_any_other_is_named() -> None:
    with oauth_door() as door:
        assert door_problems(door.public) == []
        # The same door reached by another name publishes another resource: not this remote's door.
        other_name = door.public.replace("127.0.0.1", "localhost")
        assert any("names the resource" in p for p in door_problems(other_name))
        # No metadata at a path that is no door.
        assert any("did not answer" in p for p in door_problems(door.public.replace("/mcp", "/other/mcp")))
    # Nothing listening any more.
    assert any("did not answer" in p for p in door_problems(door.public, timeout=2.0))


def test_a_server_without_sign_in_is_no_door_a_remote_may_name() -> None:
    with serving(build_dispatcher(Config(api_url="http://127.0.0.1:9"))) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        assert any("did not answer" in p and "404" in p for p in door_problems(url))
