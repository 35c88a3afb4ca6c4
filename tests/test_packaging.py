"""The built wheel: the snapshot and the guide inside, nothing else of the repository, and a working install.

One slow test (a wheel build and a fresh virtual environment, both offline, ~5–15 s) and the
checks that read the wheel it built. The build runs on a copy of the checkout, so nothing is
written into the repository (no build/ or *.egg-info left behind).
"""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_server import __version__
from tests.conftest import ROOT, SIGNAL_STOP, WAIT, venv_python, venv_script
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway

BUILD_TIMEOUT = 180.0
IGNORED = shutil.ignore_patterns(
    ".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".tools", ".benchmarks", "results"
)
NOT_SHIPPED = ("assistant_contract/", "tests/", "demo/", "scripts/", "bench/")


def clean_env(**extra: str) -> dict[str, str]:
    """Our environment without anything that would let the checkout stand in for the installed package."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRWINS_", *drop))}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", **extra)
    return env


def run(argv: list[str], cwd: pathlib.Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=kwargs.pop("env", clean_env()),
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        **kwargs,
    )
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def wheel_and_venv(project: pathlib.Path, tmp: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """Build `project`'s wheel from a copy of it and install it in a fresh venv: no network, nothing left in it."""
    source = tmp / "src"
    shutil.copytree(project, source, ignore=IGNORED)
    dist = tmp / "dist"
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist), "."],
        source,
    )
    (wheel,) = dist.glob("*.whl")
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp)
    # The running pip installs into the new environment (--python), so no pip is bootstrapped there.
    python = str(venv_python(venv))
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--no-deps", str(wheel)], tmp)
    return wheel, venv


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[pathlib.Path, pathlib.Path]]:
    """(the wheel, the fresh venv it is installed in), built and installed once, with no network."""
    yield wheel_and_venv(ROOT, tmp_path_factory.mktemp("packaging"))


def test_the_wheel_carries_the_snapshot_byte_for_byte_and_the_guide(built: tuple[pathlib.Path, pathlib.Path]) -> None:
    wheel, _ = built
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert archive.read("mcp_server/toolDefs.snapshot.json") == (ROOT / "toolDefs.snapshot.json").read_bytes()
        assert (
            archive.read("mcp_server/fairwins/guide.md") == (ROOT / "mcp_server" / "fairwins" / "guide.md").read_bytes()
        )
        for name in ("ui/app.html", "ui/icon-64.png"):  # the MCP Apps page and the icon
            assert archive.read(f"mcp_server/fairwins/{name}") == (ROOT / "mcp_server" / "fairwins" / name).read_bytes()
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "fairwins-mcp = mcp_server.setup.cli:main" in entry_points
    assert wheel.name == f"fairwins_mcp-{__version__}-py3-none-any.whl"


def test_the_wheel_holds_the_server_and_nothing_else_of_the_repository(
    built: tuple[pathlib.Path, pathlib.Path],
) -> None:
    wheel, _ = built
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert not [n for n in names if n.startswith(NOT_SHIPPED)]
    assert {n.split("/")[0] for n in names} == {"mcp_server", f"fairwins_mcp-{__version__}.dist-info"}
    shipped = {n.removeprefix("mcp_server/") for n in names if n.startswith("mcp_server/") and n.endswith(".py")}
    modules = {p.relative_to(ROOT / "mcp_server").as_posix() for p in (ROOT / "mcp_server").rglob("*.py")}
    assert shipped == {m for m in modules if "__pycache__" not in m}
    assert "transports/http/server.py" in shipped  # subpackages too, to the deepest


def test_the_installed_package_is_the_one_imported_not_the_checkout(built: tuple[pathlib.Path, pathlib.Path]) -> None:
    _, venv = built
    probe = (
        "import mcp_server, mcp_server.fairwins.snapshot as s; print(mcp_server.__file__); print(len(s.load().tools))"
    )
    done = run([str(venv_python(venv)), "-I", "-c", probe], venv)
    where, count = done.stdout.split()
    assert pathlib.Path(where).is_relative_to(venv) and int(count) > 0


def test_a_stdio_session_against_the_installed_command(built: tuple[pathlib.Path, pathlib.Path]) -> None:
    _, venv = built
    messages: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "fairwins://guide"}},
    ]
    stdin = "".join(json.dumps(m) + "\n" for m in messages)
    with SandboxGateway() as gateway:
        done = subprocess.run(
            [str(venv_script(venv, "fairwins-mcp"))],
            cwd=venv,  # far from the checkout: only the installed package can serve
            env=clean_env(FAIRWINS_API_URL=gateway.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=WAIT * 3,
        )
    assert done.returncode == 0, done.stderr
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
    assert answers[1]["result"]["serverInfo"]["version"] == __version__
    names = {t["name"] for t in answers[2]["result"]["tools"]}
    assert {"get_wagers", "get_gateway_status", "build_intent"} <= names
    wagers = answers[3]["result"]
    assert wagers["isError"] is False and wagers["structuredContent"]["chains"][0]["state"] == "read"
    assert "Chain 8453 could not be read" in wagers["content"][-1]["text"]
    guide = answers[4]["result"]["contents"][0]["text"]
    assert guide == (ROOT / "mcp_server" / "fairwins" / "guide.md").read_text(encoding="utf-8")
    assert TOKEN_MEMBER_A not in done.stderr


def test_the_installed_command_runs_the_check(built: tuple[pathlib.Path, pathlib.Path]) -> None:
    _, venv = built
    with SandboxGateway() as gateway:
        done = run(
            [str(venv_script(venv, "fairwins-mcp")), "check"],
            venv,
            env=clean_env(FAIRWINS_API_URL=gateway.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A),
        )
    assert done.stdout.endswith("Everything a member needs works.\n")


@SIGNAL_STOP
def test_the_installed_command_serves_http(built: tuple[pathlib.Path, pathlib.Path]) -> None:
    _, venv = built
    argv = [str(venv_script(venv, "fairwins-mcp")), "--http", "0"]
    with subprocess.Popen(
        argv, cwd=venv, env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    ) as proc:
        try:
            assert proc.stderr is not None
            line = b""
            while b"listening on " not in line:
                line = proc.stderr.readline()
                assert line, "the installed server exited before listening"
            port = int(line.split(b"listening on ", 1)[1].split(b"/mcp", 1)[0].rsplit(b":", 1)[1])
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
            conn.request("GET", "/healthz")
            health = json.loads(conn.getresponse().read())
            ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
            conn.request("POST", "/mcp", body=ping, headers={"Content-Type": "application/json"})
            answer = json.loads(conn.getresponse().read())
            conn.close()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(WAIT) == 0
        finally:
            if proc.poll() is None:
                proc.kill()  # leaving the block then waits for it
    assert health["version"] == __version__ and answer == {"jsonrpc": "2.0", "id": 1, "result": {}}
