"""The uv bundle (dist/fairwins-mcp-<version>.mcpb) run the way Claude Desktop runs a `server.type: "uv"` bundle.

MANIFEST.md (modelcontextprotocol/mcpb): a uv bundle carries a pyproject.toml and the host "manages
execution" with uv. Desktop puts its own uv in place of mcp_config's `uv` command and passes the
args as they are, so here the bundle is unpacked and its mcp_config resolved as a host does both
(the ${__dirname} and ${user_config.*} placeholders filled as a host fills them; tests/bundles.py's
`extract` and `resolve`, which tests/test_mcpb.py holds to `mcpb unpack` and the pinned mcpb
package's getMcpConfigForManifest), and started with the pinned uv from PyPI (.venv-uv). There is no
network here: uv runs offline (UV_OFFLINE), may not download a Python and is given this one
(UV_PYTHON), with its cache in a temporary directory (tests/bundles.py, bundle_launch). The
session then goes through uv, over stdio, to the sandbox gateway.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import tomllib
import zipfile
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest

from mcp_server import __version__
from tests.bundles import (
    Built,
    Launch,
    build,
    bundle_launch,
    decoy,
    entry_point_command,
    entry_point_launch,
    extract,
    host_config,
    manifest_of,
)
from tests.conftest import NODE_TOOLS, PROCFS, StdioProcess
from tests.hosts import SESSION_WAIT, hold_session
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway

PLACEHOLDER: Final = re.compile(r"\$\{[^}]*\}")
ARGS: Final = ["run", "--directory", "${__dirname}", "server/main.py"]

Start = Callable[[dict[str, Any]], tuple[StdioProcess, Launch]]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(tmp_path_factory.mktemp("dist"))["uv"]


@pytest.fixture(scope="module")
def unpacked(bundle: Built, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return extract(bundle.path, tmp_path_factory.mktemp("installed") / "fairwins")


def children(pid: int) -> list[tuple[list[str], str]]:
    """The processes `pid` started, each as its argv and working directory (Linux's /proc)."""
    found = []
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            argv = pathlib.Path(f"/proc/{child}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            found.append(([part.decode() for part in argv], os.readlink(f"/proc/{child}/cwd")))
    return found


# --- what the bundle says ---------------------------------------------------------------------------


def test_the_bundle_project_names_no_dependencies_and_nothing_to_build(bundle: Built) -> None:
    with zipfile.ZipFile(bundle.path) as archive:
        project = tomllib.loads(archive.read("pyproject.toml").decode("utf-8"))
    assert project["project"] == {
        "name": "fairwins-mcp",
        "version": __version__,
        "requires-python": ">=3.11",
        "dependencies": [],
    }
    # No build backend to fetch: uv installs nothing from the project, it only makes the environment.
    assert "build-system" not in project
    assert project["tool"] == {"uv": {"package": False}}


def test_the_manifest_has_the_host_run_the_entry_point_with_uv_from_the_bundle_directory(bundle: Built) -> None:
    manifest = manifest_of(bundle.path)
    assert manifest["server"] == {
        "type": "uv",
        "entry_point": "server/main.py",
        "mcp_config": {
            "command": "uv",
            "args": ARGS,
            "env": {
                "FAIRWINS_API_URL": "${user_config.gateway_url}",
                "FAIRWINS_API_TOKEN": "${user_config.member_token}",
            },
        },
    }
    assert manifest["compatibility"]["runtimes"] == {"python": ">=3.11"}
    token = manifest["user_config"]["member_token"]
    assert token["sensitive"] is True and token["required"] is False and token["default"] == ""


@NODE_TOOLS
@pytest.mark.parametrize("platform", ["darwin", "win32", "linux"])
def test_every_platform_runs_the_same_uv_command(unpacked: pathlib.Path, platform: str) -> None:
    config = host_config(unpacked, {}, platform)["config"]
    assert config["command"] == "uv"
    assert config["args"] == ["run", "--directory", str(unpacked), "server/main.py"]
    assert config["env"] == {"FAIRWINS_API_URL": "https://relay.fairwins.app", "FAIRWINS_API_TOKEN": ""}


# --- run as a host runs it --------------------------------------------------------------------------


@pytest.fixture
def started(unpacked: pathlib.Path, tmp_path: pathlib.Path) -> Iterator[Start]:
    processes: list[StdioProcess] = []

    def start(user_config: dict[str, Any]) -> tuple[StdioProcess, Launch]:
        launch = bundle_launch(unpacked, user_config)
        assert not [part for part in [*launch.argv, *launch.config["env"].values()] if PLACEHOLDER.search(part)]
        # The member's PYTHONPATH and the host's working directory hold a decoy package: the
        # bundled one is imported all the same.
        env = {**launch.env, "PYTHONPATH": str(decoy(tmp_path / f"pythonpath{len(processes)}"))}
        process = StdioProcess(launch.argv, env, cwd=decoy(tmp_path / f"cwd{len(processes)}"))
        processes.append(process)
        return process, launch

    yield start
    for process in processes:
        process.kill()


def ends_cleanly(process: StdioProcess) -> None:
    process.close_stdin()
    assert process.wait(SESSION_WAIT) == 0, process.stderr
    assert "Traceback" not in process.stderr, process.stderr
    for line in process.lines:  # stdout is the wire: nothing of uv's own is on it
        json.loads(line)


@PROCFS
def test_uv_runs_the_unpacked_bundle_offline_and_a_session_reads_public_and_member_data(
    started: Start, sandbox: SandboxGateway, unpacked: pathlib.Path, bundle: Built
) -> None:
    process, launch = started({"gateway_url": sandbox.url, "member_token": TOKEN_MEMBER_A})
    assert launch.argv[1:] == ["run", "--directory", str(unpacked), "server/main.py"]
    assert launch.config["env"] == {"FAIRWINS_API_URL": sandbox.url, "FAIRWINS_API_TOKEN": TOKEN_MEMBER_A}
    session = hold_session(process)
    assert session.initialize["serverInfo"]["name"] == "fairwins-mcp"
    assert session.initialize["serverInfo"]["version"] == __version__
    manifest = manifest_of(bundle.path)
    assert manifest["tools"] == [{"name": t["name"], "description": t["description"]} for t in session.tools]
    assert [p["name"] for p in manifest["prompts"]] == [p["name"] for p in session.prompts]
    assert session.public["isError"] is False
    assert session.public["structuredContent"]["status"] == "ok"
    assert session.member["isError"] is False, session.member
    chains = {c["chainId"]: c["state"] for c in session.member["structuredContent"]["chains"]}
    assert chains[137] == "read"
    assert any(r.header("Authorization") == f"Bearer {TOKEN_MEMBER_A}" for r in sandbox.seen)
    # What uv started: the bundle environment's Python on the entry point, in the bundle directory.
    assert children(process.proc.pid) == [(entry_point_command(unpacked), str(unpacked))]
    ends_cleanly(process)
    # uv made the environment and installed nothing into it: no project build, no dependency.
    site_packages = list((unpacked / ".venv" / "lib").glob("python3.*/site-packages"))
    assert len(site_packages) == 1 and not list(site_packages[0].glob("*.dist-info"))


def test_with_no_token_given_the_public_tools_work_and_no_bearer_is_sent(
    started: Start, sandbox: SandboxGateway
) -> None:
    process, launch = started({"gateway_url": sandbox.url})  # no token given: the default, empty
    assert launch.config["env"]["FAIRWINS_API_TOKEN"] == ""
    session = hold_session(process)
    assert session.public["isError"] is False
    assert session.member["isError"] is True
    assert "This is a price, not an outage" in " ".join(c.get("text", "") for c in session.member["content"])
    assert not [r for r in sandbox.seen if r.header("Authorization")]
    ends_cleanly(process)


def test_the_entry_point_uv_runs_serves_alone_in_the_environment_uv_made(
    unpacked: pathlib.Path, sandbox: SandboxGateway
) -> None:
    # The process a platform shape wraps: entry_point_launch's command, with no uv in front.
    launch = entry_point_launch(unpacked, {"gateway_url": sandbox.url, "member_token": TOKEN_MEMBER_A})
    assert launch.argv == entry_point_command(unpacked) and launch.cwd == unpacked
    assert launch.env["FAIRWINS_API_URL"] == sandbox.url
    process = StdioProcess(launch.argv, launch.env, cwd=unpacked)
    try:
        session = hold_session(process)
        assert session.public["isError"] is False and session.member["isError"] is False, session.member
        ends_cleanly(process)
    finally:
        process.kill()
