"""The MCP Bundles as the tests handle them: built by `make mcpb`'s command, unpacked, started as a host starts them.

`build` runs scripts.mcpb and returns every bundle it wrote; `unpack` lays one out as a host
installs it; `host_config` asks the pinned @anthropic-ai/mcpb package's own getMcpConfigForManifest
what a host makes of its mcp_config (tests/tools/mcpb_host.mjs). `extract` and `resolve` do the
same two things in Python, held to the real ones by tests/test_mcpb.py, so the bundles start on
every platform the portable tier runs on, with or without the Node CLI.

The uv bundle is started the way Claude Desktop starts a `server.type: "uv"` bundle: its own uv
(here the pinned one in .venv-uv, tests/uv/requirements.txt) in place of the manifest's `uv`, with
the manifest's args and env as the host resolves them. No network here, so uv runs offline, may
not download a Python, and is pointed at a local interpreter instead; its cache is in a temporary
directory. `bundle_launch` is that whole command. `entry_point_command` is what uv itself ends up running
(the bundle environment's Python on server/main.py, in the bundle directory; tests/test_mcpb_uv.py
holds uv to it), and `entry_point_launch` makes that environment with uv and returns that one
process's command, for a test that wraps it (the platform shapes).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from typing import Any, Final

from scripts import mcpb
from tests.conftest import ROOT, venv_python
from tests.hosts import INSTALL_TIMEOUT, node, tool
from tests.secret_canaries import record_output

CLI_TIMEOUT: Final = 120.0
UV_VENV: Final = ROOT / ".venv-uv"
UV: Final = venv_python(UV_VENV).with_name("uv.exe" if sys.platform == "win32" else "uv")
UV_READY: Final = UV_VENV / ".installed"
# What a host's environment must not carry into the server: our own settings (the bundle's env
# gives them), the interpreter's and uv's (this machine's, not a member's), and the test venv.
NOT_FROM_THE_HOST: Final = ("FAIRWINS_", "PYTHON", "UV_", "VIRTUAL_ENV")


def run_mcpb(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*tool("mcpb"), *args], capture_output=True, text=True, timeout=CLI_TIMEOUT)
    record_output(f"mcpb {args[0]}", done.stdout + done.stderr)
    return done


@dataclass(frozen=True)
class Built:
    path: pathlib.Path
    size: int  # as `make mcpb` reported it
    kind: str  # the server.type it reported


def build(out: pathlib.Path) -> dict[str, Built]:
    """`make mcpb`'s command, into `out`: server.type → the bundle it wrote, as it reported it."""
    done = subprocess.run(
        [sys.executable, "-m", "scripts.mcpb", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    built = {}
    for line in done.stdout.splitlines():
        path, size, kind = line.split("\t")
        assert size.endswith(" bytes") and kind.startswith("server.type "), line
        entry = Built(pathlib.Path(path), int(size.removesuffix(" bytes")), kind.removeprefix("server.type "))
        built[entry.kind] = entry
    return built


def unpack(bundle: pathlib.Path, target: pathlib.Path) -> pathlib.Path:
    """The bundle as `mcpb unpack` lays it out in an empty directory (as a host installs it)."""
    done = run_mcpb("unpack", str(bundle), str(target))
    assert done.returncode == 0, done.stdout + done.stderr
    return target


def manifest_of(bundle: pathlib.Path) -> dict[str, Any]:
    with zipfile.ZipFile(bundle) as archive:
        value: dict[str, Any] = json.loads(archive.read("manifest.json"))
    return value


def host_config(bundle_dir: pathlib.Path, user_config: dict[str, Any], platform: str | None = None) -> dict[str, Any]:
    """What the mcpb package's getMcpConfigForManifest resolves the manifest's mcp_config to."""
    home = bundle_dir.parent / "home"
    host = {
        "userConfig": user_config,
        "systemDirs": {
            "HOME": str(home),
            "DESKTOP": str(home / "Desktop"),
            "DOCUMENTS": str(home / "Documents"),
            "DOWNLOADS": str(home / "Downloads"),
        },
        "platform": platform,
    }
    package = pathlib.Path(tool("mcpb")[-1]).parents[2]
    done = subprocess.run(
        [node(), str(ROOT / "tests" / "tools" / "mcpb_host.mjs"), str(package), str(bundle_dir), json.dumps(host)],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    resolved: dict[str, Any] = json.loads(done.stdout)
    assert resolved["warnings"] == [], resolved["warnings"]
    return resolved


# --- the same, in Python: for the platforms the Node CLI is not installed on ----------------------


def extract(bundle: pathlib.Path, target: pathlib.Path) -> pathlib.Path:
    """The bundle laid out as `unpack` (the real `mcpb unpack`) lays it out: every entry a file, its mode kept.

    test_mcpb.py holds the two to the same files, bytes and modes, so the launch tests can run
    where the mcpb CLI is not installed (tests/tools/ installs Node for linux-x64 only).
    """
    with zipfile.ZipFile(bundle) as archive:
        for info in archive.infolist():
            path = target.joinpath(*info.filename.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(archive.read(info))
            mode = (info.external_attr >> 16) & 0o777
            if mode and sys.platform != "win32":  # Windows keeps no POSIX modes
                path.chmod(mode)
    return target


def _substitute(value: Any, variables: dict[str, str]) -> Any:
    if isinstance(value, str):
        for name, replacement in variables.items():
            value = value.replace(f"${{{name}}}", replacement)
        return value
    if isinstance(value, list):
        # An argument that is exactly one user_config placeholder stays as written when the setting
        # is empty (getMcpConfigForManifest's rule for arguments; a string elsewhere loses it).
        exact = [item[2:-1] if isinstance(item, str) and re.fullmatch(r"\$\{user_config\.[^}]+\}", item) else None
                 for item in value]  # fmt: skip
        return [
            item if name is not None and not variables.get(name) else _substitute(item, variables)
            for item, name in zip(value, exact, strict=True)
        ]
    if isinstance(value, dict):
        return {key: _substitute(item, variables) for key, item in value.items()}
    return value


def resolve(bundle_dir: pathlib.Path, user_config: dict[str, Any], platform: str | None = None) -> dict[str, Any]:
    """What `host_config` returns, worked out in Python from the rules for mcp_config in MANIFEST.md
    (modelcontextprotocol/mcpb).

    The platform's override replaces command, args or env; user_config takes each setting's
    default, then what the member gave (booleans as "true"/"false"); every `${…}` the spec names
    is replaced. test_mcpb.py holds it to the mcpb package's own getMcpConfigForManifest.
    """
    manifest = json.loads((bundle_dir / "manifest.json").read_text(encoding="utf-8"))
    base = manifest["server"]["mcp_config"]
    config = dict(base)
    override = base.get("platform_overrides", {}).get(platform or sys.platform)
    if override:
        for key in ("command", "args", "env"):
            config[key] = override.get(key) or config.get(key)
    home = bundle_dir.parent / "home"
    variables = {
        "__dirname": str(bundle_dir),
        "pathSeparator": os.sep,
        "/": os.sep,
        "HOME": str(home),
        "DESKTOP": str(home / "Desktop"),
        "DOCUMENTS": str(home / "Documents"),
        "DOWNLOADS": str(home / "Downloads"),
    }
    settings = {k: o["default"] for k, o in manifest.get("user_config", {}).items() if "default" in o}
    settings.update(user_config)
    for key, value in settings.items():
        variables[f"user_config.{key}"] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return {"config": _substitute(config, variables)}


def decoy(directory: pathlib.Path) -> pathlib.Path:
    """A directory whose `mcp_server` would break the server if it were imported instead of the bundled one."""
    package = directory / "mcp_server"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the decoy mcp_server was imported')\n")
    return directory


def host_environment() -> dict[str, str]:
    """The environment a host starts a server with, before the bundle's own env is added."""
    return {k: v for k, v in os.environ.items() if not k.startswith(NOT_FROM_THE_HOST)}


# --- the uv bundle ----------------------------------------------------------------------------------


def uv() -> pathlib.Path:
    """The pinned uv (tests/uv/requirements.txt), installed into .venv-uv by the Makefile rule when missing."""
    if not UV_READY.exists():
        done = subprocess.run(
            ["make", "-C", str(ROOT), ".venv-uv/.installed"], capture_output=True, text=True, timeout=INSTALL_TIMEOUT
        )
        assert done.returncode == 0, f"uv could not be installed (make .venv-uv/.installed):\n{done.stderr}"
    assert UV.exists(), f"{UV} is missing after make .venv-uv/.installed"
    return UV


def uv_environment(unpacked: pathlib.Path, python: str) -> dict[str, str]:
    """uv, offline, on the local interpreter `python`: what this machine needs in place of the host's downloads."""
    return {
        "UV_OFFLINE": "1",  # no index is reachable here; the bundle needs none
        "UV_PYTHON": python,  # a host's uv picks or downloads one meeting requires-python; here it is given one
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_CACHE_DIR": str(unpacked.parent / "uv-cache"),
        "UV_NO_CONFIG": "1",  # this machine's uv.toml files are no member's
    }


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    config: dict[str, Any]  # the mcp_config the host resolved
    cwd: pathlib.Path | None = None  # None: wherever the host happens to be


def bundle_launch(
    unpacked: pathlib.Path,
    user_config: dict[str, Any] | None = None,
    *,
    python: str = sys.executable,
    platform: str | None = None,
) -> Launch:
    """The command and environment a host starts the unpacked uv bundle with (its uv for the manifest's `uv`)."""
    config = resolve(unpacked, user_config or {}, platform)["config"]
    assert config["command"] == "uv", config
    env = host_environment()
    env.update(config["env"])
    env.update(uv_environment(unpacked, python))
    return Launch([str(uv()), *config["args"]], env, config)


def entry_point_command(unpacked: pathlib.Path) -> list[str]:
    """What uv runs once the bundle's environment exists: its Python on the entry point, in the bundle directory."""
    return [str(venv_python(unpacked / ".venv")), mcpb.ENTRY_POINT]


def entry_point_launch(
    unpacked: pathlib.Path, user_config: dict[str, Any] | None = None, *, python: str = sys.executable
) -> Launch:
    """The one process uv starts for the host, without uv in front: the environment made first (`uv sync`, offline).

    Its env is the host's plus the bundle's settings, as uv passes them on (uv also adds
    VIRTUAL_ENV and puts the environment's bin/ first on PATH; the server reads neither).
    """
    config = resolve(unpacked, user_config or {})["config"]
    env = host_environment()
    env.update(config["env"])
    done = subprocess.run(
        [str(uv()), "sync", "--directory", str(unpacked)],
        env={**env, **uv_environment(unpacked, python)},
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return Launch(entry_point_command(unpacked), env, config, cwd=unpacked)
