"""The MCP Bundles: built by `make mcpb` (scripts/mcpb.py), checked by the official `mcpb` CLI, run as a host runs them.

`make mcpb` writes two bundles of the same server: server.type "uv" (the host provides Python;
run by uv in tests/test_mcpb_uv.py) and server.type "python" (the member's own python3, run here).
Both are built, checked for reproducible bytes and validated by the pinned CLI here.

A bundle is unpacked into an empty directory and its `mcp_config` resolved as a host does it,
then the resolved command is started with the environment a host gives it, against the sandbox
gateway. The tool and prompt lists in the manifest are compared with what that running server
serves. The unpacking and the resolving are tests/bundles.py's `extract` and `resolve`, in Python,
so they run on every platform; here they are held to the real `mcpb unpack` and the pinned
@anthropic-ai/mcpb package's own getMcpConfigForManifest (the code Claude for macOS and Windows
uses; tests/tools/mcpb_host.mjs), on Linux, where tests/tools/ installs the CLI.
"""

from __future__ import annotations

import json
import pathlib
import re
import struct
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from typing import Any, Final

import pytest

from mcp_server import __version__
from mcp_server.setup.config import from_env
from scripts import icon, mcpb
from tests.bundles import (
    CLI_TIMEOUT,
    Built,
    build,
    decoy,
    extract,
    host_config,
    host_environment,
    manifest_of,
    resolve,
    run_mcpb,
    unpack,
)
from tests.conftest import NODE_TOOLS, ROOT, StdioProcess
from tests.hosts import SESSION_WAIT, hold_session
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway

PLACEHOLDER: Final = re.compile(r"\$\{[^}]*\}")
KINDS: Final = ("uv", "python")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    return build(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def bundle(built: dict[str, Built]) -> pathlib.Path:
    """The python-type bundle, the one this module runs."""
    return built["python"].path


@pytest.fixture(scope="module")
def unpacked(bundle: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The python bundle as `mcpb unpack` lays it out in an empty directory (as a host installs it)."""
    return extract(bundle, tmp_path_factory.mktemp("installed") / "fairwins")


@pytest.fixture(scope="module")
def unpacked_each(built: dict[str, Built], tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    return {
        kind: extract(b.path, tmp_path_factory.mktemp(f"installed-{kind}") / "fairwins") for kind, b in built.items()
    }


# --- extract and resolve are what mcpb unpack and the mcpb package do ----------------------------


@NODE_TOOLS
@pytest.mark.parametrize("kind", KINDS)
def test_extract_lays_a_bundle_out_as_mcpb_unpack_does(
    built: dict[str, Built], tmp_path: pathlib.Path, kind: str
) -> None:
    ours = extract(built[kind].path, tmp_path / "ours")
    theirs = unpack(built[kind].path, tmp_path / "theirs")

    def tree(root: pathlib.Path) -> dict[str, tuple[bytes, int]]:
        return {
            p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in root.rglob("*")
            if p.is_file()
        }

    assert tree(ours) == tree(theirs) and len(tree(ours)) > 10


SETTINGS: Final = [
    {},
    {"gateway_url": "http://127.0.0.1:8787", "member_token": "fw1.sandbox-member-a-7f3k"},
    {"gateway_url": "https://relay.example", "member_token": ""},
    {"member_token": "fw1.with $ and ${HOME} and ${user_config.gateway_url} in it"},
]


@NODE_TOOLS
@pytest.mark.parametrize("platform", ["darwin", "win32", "linux"])
@pytest.mark.parametrize("kind", KINDS)
def test_resolve_gives_what_the_mcpb_package_gives_for_each_platform_and_setting(
    unpacked_each: dict[str, pathlib.Path], kind: str, platform: str
) -> None:
    for settings in SETTINGS:
        real = host_config(unpacked_each[kind], settings, platform)["config"]
        assert resolve(unpacked_each[kind], settings, platform)["config"] == real, settings


# --- the build ------------------------------------------------------------------------------------


def test_make_mcpb_builds_both_versioned_bundles_in_dist_and_reports_their_sizes(
    built: dict[str, Built], tmp_path: pathlib.Path
) -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^mcpb: \$\(VPY\)\n\t\$\(VPY\) -m scripts\.mcpb$", makefile, re.M)
    assert mcpb.bundle_name("uv") == f"fairwins-mcp-{__version__}.mcpb"
    assert mcpb.bundle_name("python") == f"fairwins-mcp-{__version__}-python.mcpb"
    assert list(built) == list(KINDS) == list(mcpb.KINDS)
    for kind, bundle in built.items():
        assert bundle.path.name == mcpb.bundle_name(kind)  # type: ignore[arg-type]
        assert bundle.size == bundle.path.stat().st_size > 0
        assert manifest_of(bundle.path)["server"]["type"] == kind


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_sources_give_the_same_bytes(built: dict[str, Built], tmp_path: pathlib.Path, kind: str) -> None:
    bundle = built[kind].path
    again = build(tmp_path)[kind].path
    assert again.name == bundle.name and again.read_bytes() == bundle.read_bytes()
    with zipfile.ZipFile(bundle) as archive:
        infos = archive.infolist()
    assert [i.filename for i in infos] == sorted(i.filename for i in infos)
    assert {i.date_time for i in infos} == {mcpb.FIXED_TIME}
    assert {(i.external_attr >> 16) & 0o777 for i in infos} == {0o644}
    assert not [i for i in infos if i.is_dir()], "mcpb unpack writes every entry as a file"


VIEW_FILES = tuple(f"server/mcp_server/fairwins/ui/{name}" for name in ("app.html", "icon-64.png"))


@pytest.mark.parametrize("kind", KINDS)
def test_the_bundle_holds_the_server_the_snapshot_the_launcher_and_the_icon_and_nothing_else(
    built: dict[str, Built], kind: str
) -> None:
    with zipfile.ZipFile(built[kind].path) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    modules = {
        f"server/{p.relative_to(ROOT).as_posix()}": p.read_bytes()
        for p in (ROOT / "mcp_server").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    expected = {
        "manifest.json",
        "icon.png",
        "server/main.py",
        "server/mcp_server/fairwins/guide.md",
        *VIEW_FILES,  # the MCP Apps page and the icons the server serves (fairwins/views.py)
        "server/mcp_server/toolDefs.snapshot.json",
        *modules,
        *(
            ["pyproject.toml"] if kind == "uv" else []
        ),  # the uv bundle's project: modelcontextprotocol/mcpb's MANIFEST.md requires it
    }
    assert set(files) == expected
    for name, data in modules.items():
        assert files[name] == data, name
    # The one snapshot at the root, copied in beside the package's modules, as the wheel carries it.
    assert files["server/mcp_server/toolDefs.snapshot.json"] == (ROOT / "toolDefs.snapshot.json").read_bytes()
    assert files["server/main.py"] == (ROOT / "mcpb" / "main.py").read_bytes()
    for name in VIEW_FILES:
        assert files[name] == (ROOT / name.removeprefix("server/")).read_bytes(), name
    assert files["icon.png"] == (ROOT / "mcpb" / "icon.png").read_bytes()
    assert not [n for n in files if "__pycache__" in n or n.endswith((".pyc", ".pyo")) or "tests/" in n]


def test_the_two_bundles_differ_only_in_how_the_host_gets_a_python(built: dict[str, Built]) -> None:
    uv, python = manifest_of(built["uv"].path), manifest_of(built["python"].path)
    differ = {key for key in uv.keys() | python.keys() if uv.get(key) != python.get(key)}
    assert differ == {"server", "long_description"}
    assert uv["server"]["mcp_config"]["env"] == python["server"]["mcp_config"]["env"]
    assert uv["user_config"]["member_token"]["sensitive"] is True
    assert "nothing needs installing" in uv["long_description"]
    assert "needs Python 3.11 or newer" in python["long_description"]
    with zipfile.ZipFile(built["uv"].path) as u, zipfile.ZipFile(built["python"].path) as p:
        assert {n: u.read(n) for n in u.namelist() if n.startswith("server/")} == {
            n: p.read(n) for n in p.namelist() if n.startswith("server/")
        }


def test_a_root_project_with_a_dependency_builds_no_bundle() -> None:
    # Nothing is vendored into either bundle: a dependency would be missing from both at run time.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["dependencies"] == []
    assert pyproject["project"]["requires-python"] == mcpb.PYTHON_REQUIRED
    assert tomllib.loads(mcpb.bundle_pyproject().decode())["project"]["requires-python"] == mcpb.PYTHON_REQUIRED


def test_the_icon_is_the_png_the_script_draws() -> None:
    committed = (ROOT / "mcpb" / "icon.png").read_bytes()
    assert icon.png() == committed, "mcpb/icon.png is stale: run make icon"
    assert committed[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", committed[16:24])
    assert (width, height) == (512, 512)  # the size Claude Desktop recommends (mcpb validate says so)


# --- the official CLI -----------------------------------------------------------------------------


@NODE_TOOLS
@pytest.mark.parametrize("kind", KINDS)
def test_mcpb_validate_passes_on_the_unpacked_bundle(unpacked_each: dict[str, pathlib.Path], kind: str) -> None:
    done = run_mcpb("validate", str(unpacked_each[kind]))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Manifest schema validation passes!" in done.stdout
    assert "ERROR" not in done.stdout + done.stderr


@NODE_TOOLS
@pytest.mark.parametrize("kind", KINDS)
def test_mcpb_info_reads_the_bundle(built: dict[str, Built], kind: str) -> None:
    bundle = built[kind].path
    done = run_mcpb("info", str(bundle))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"File: {bundle.name}" in done.stdout and "ERROR" not in done.stdout


@NODE_TOOLS
def test_mcpb_validate_refuses_a_broken_manifest(unpacked: pathlib.Path, tmp_path: pathlib.Path) -> None:
    # The check above can fail: the same CLI on the same manifest without its `server` says no.
    broken = json.loads((unpacked / "manifest.json").read_text(encoding="utf-8"))
    del broken["server"]
    (tmp_path / "manifest.json").write_text(json.dumps(broken), encoding="utf-8")
    done = run_mcpb("validate", str(tmp_path))
    assert done.returncode == 1 and "server" in done.stdout


@NODE_TOOLS
@pytest.mark.parametrize("kind", KINDS)
def test_the_manifest_is_in_the_newest_version_the_cli_validates(
    unpacked_each: dict[str, pathlib.Path], kind: str
) -> None:
    unpacked = unpacked_each[kind]
    latest = host_config(unpacked, {})["latest"]
    assert manifest_of_dir(unpacked)["manifest_version"] == latest == mcpb.MANIFEST_VERSION


def manifest_of_dir(directory: pathlib.Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    return value


def test_the_manifest_describes_a_python_server_its_settings_and_its_requirements(bundle: pathlib.Path) -> None:
    manifest = manifest_of(bundle)
    assert manifest["name"] == "fairwins-mcp" and manifest["version"] == __version__
    server = manifest["server"]
    assert server["type"] == "python" and server["entry_point"] == "server/main.py"
    assert server["mcp_config"]["args"] == ["-I", "${__dirname}/server/main.py"]
    assert manifest["compatibility"]["runtimes"] == {"python": ">=3.11"}
    assert manifest["icon"] == "icon.png"
    url, token = manifest["user_config"]["gateway_url"], manifest["user_config"]["member_token"]
    assert url["default"] == "https://relay.fairwins.app" and url["required"] is False
    assert token["sensitive"] is True and token["required"] is False and token["type"] == "string"


# --- run as a host runs it --------------------------------------------------------------------------


@pytest.fixture
def host_process(unpacked: pathlib.Path, tmp_path: pathlib.Path) -> Iterator[Any]:
    started: list[StdioProcess] = []

    def start(user_config: dict[str, Any]) -> tuple[StdioProcess, dict[str, Any]]:
        config = resolve(unpacked, user_config)["config"]
        launch = [config["command"], *config["args"]]
        assert not [part for part in [*launch, *config["env"].values()] if PLACEHOLDER.search(part)], config
        # The host's own environment (no FairWins settings of ours), plus the bundle's env. The
        # member's PYTHONPATH and the working directory hold a decoy package: -I keeps both out.
        env = host_environment()
        env["PYTHONPATH"] = str(decoy(tmp_path / "pythonpath"))
        env.update(config["env"])
        process = StdioProcess(launch, env, cwd=decoy(tmp_path / f"cwd{len(started)}"))
        started.append(process)
        return process, config

    yield start
    for process in started:
        process.kill()


def test_a_host_runs_the_unpacked_bundle_and_a_session_reads_public_and_member_data(
    host_process: Any, sandbox: SandboxGateway
) -> None:
    process, config = host_process({"gateway_url": sandbox.url, "member_token": TOKEN_MEMBER_A})
    assert config["command"] == "python3"
    assert config["env"] == {"FAIRWINS_API_URL": sandbox.url, "FAIRWINS_API_TOKEN": TOKEN_MEMBER_A}
    session = hold_session(process)
    assert session.initialize["serverInfo"]["name"] == "fairwins-mcp"
    assert session.initialize["serverInfo"]["version"] == __version__
    assert session.public["isError"] is False
    assert session.public["structuredContent"]["status"] == "ok"
    assert session.member["isError"] is False, session.member
    chains = {c["chainId"]: c["state"] for c in session.member["structuredContent"]["chains"]}
    assert chains[137] == "read"
    assert any(r.header("Authorization") == f"Bearer {TOKEN_MEMBER_A}" for r in sandbox.seen)
    process.close_stdin()
    assert process.wait(SESSION_WAIT) == 0


def test_the_manifest_lists_exactly_the_tools_and_prompts_the_bundled_server_serves(
    host_process: Any, sandbox: SandboxGateway, bundle: pathlib.Path
) -> None:
    process, _ = host_process({"gateway_url": sandbox.url})
    session = hold_session(process)
    manifest = manifest_of(bundle)
    assert manifest["tools"] == [{"name": t["name"], "description": t["description"]} for t in session.tools]
    served_prompts = [
        {
            "name": p["name"],
            "description": p["description"],
            **({"arguments": [a["name"] for a in p["arguments"]]} if p.get("arguments") else {}),
            "text": session.prompt_texts[p["name"]],
        }
        for p in session.prompts
    ]
    assert manifest["prompts"] == served_prompts
    assert manifest["tools_generated"] is False and manifest["prompts_generated"] is False


def test_with_no_token_given_the_public_tools_work_and_no_bearer_is_sent(
    host_process: Any, sandbox: SandboxGateway, unpacked: pathlib.Path
) -> None:
    defaults = resolve(unpacked, {})["config"]["env"]
    assert defaults == {"FAIRWINS_API_URL": "https://relay.fairwins.app", "FAIRWINS_API_TOKEN": ""}
    process, config = host_process({"gateway_url": sandbox.url})  # no token given
    assert config["env"]["FAIRWINS_API_TOKEN"] == ""
    session = hold_session(process)
    assert session.public["isError"] is False
    # No bearer went out, so the gateway priced the member read instead of serving it.
    assert session.member["isError"] is True
    assert "This is a price, not an outage" in " ".join(c.get("text", "") for c in session.member["content"])
    assert not [r for r in sandbox.seen if r.header("Authorization")]


@pytest.mark.parametrize(("platform", "command"), [("darwin", "python3"), ("linux", "python3"), ("win32", "python")])
def test_each_platform_starts_its_own_python(unpacked: pathlib.Path, platform: str, command: str) -> None:
    config = resolve(unpacked, {}, platform)["config"]
    assert config["command"] == command
    assert config["args"] == ["-I", f"{unpacked}/server/main.py"]


def test_a_template_the_host_left_unfilled_is_no_token() -> None:
    # A host that applies no default passes `${user_config.member_token}` itself (mcpb issue 251).
    config = from_env({"FAIRWINS_API_TOKEN": "${user_config.member_token}", "FAIRWINS_API_URL": "https://x.example"})
    assert config.api_token is None and config.api_url == "https://x.example"
    assert from_env({"FAIRWINS_API_URL": "${user_config.gateway_url}"}).api_url is None


def test_the_launcher_tells_an_old_python_what_it_needs_instead_of_a_traceback(unpacked: pathlib.Path) -> None:
    launcher = unpacked / "server" / "main.py"
    old = (
        "import sys\n"
        "sys.version_info = (3, 9, 6, 'final', 0)\n"
        f"path = {str(launcher)!r}\n"
        "exec(compile(open(path).read(), path, 'exec'), {'__name__': '__main__', '__file__': path})\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", old], capture_output=True, text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "needs Python 3.11 or newer" in done.stderr and "(Python 3.9.6)" in done.stderr
    assert "Traceback" not in done.stderr
