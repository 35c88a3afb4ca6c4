"""The real server under a standard library shaped like CPython's (3.11 to 3.13) on macOS and on Windows.

tests/platforms/shape.py takes away what typeshed says each platform lacks, sets sys.platform,
and on Windows makes select() refuse pipes and socketpair() the loopback fallback. Through each
shape: a stdio session to end of input, an HTTP session, `install claude-desktop`, and the MCP
Bundle's launcher. And the guard itself: the Linux-only call that crashed macOS at start, put back,
fails both `make lint`'s platform check and this tier. docs/platforms.md says what it cannot see.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import venv
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest

from tests import bundles
from tests.conftest import ROOT, WAIT, StdioProcess, server_env
from tests.inspector import LAUNCHER, NODE
from tests.mcp_http import LegacyClient, Raw
from tests.platforms import typeshed_shapes
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.test_inspector import run_cli
from tests.test_install import claude, claude_on_path, connected
from tests.test_sdk_client import MEMBER_CALLS, sdk

# On macOS and Windows the portable tier runs the real standard library instead of a shape of it.
pytestmark = pytest.mark.linux_tier(
    "shapes Linux's standard library into macOS's and Windows' (tests/platforms/) and drives Node CLIs"
)

SHAPE: Final = ROOT / "tests" / "platforms" / "shape.py"
PLATFORMS: Final = ("darwin", "win32")
VERSIONS: Final = ("3.11", "3.12", "3.13")  # shapes.json has each; the machine's pyenv has each interpreter


def interpreter(version: str) -> tuple[str, dict[str, str]]:
    """CPython `version` and what its environment needs to import this checkout (no venv of its own)."""
    if version == f"{sys.version_info[0]}.{sys.version_info[1]}":
        return sys.executable, {}
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True, timeout=WAIT).stdout.strip()
    found = sorted(pathlib.Path(root, "versions").glob(f"{version}.*/bin/python{version}"))
    assert found, f"no CPython {version} under {root}/versions: this machine's image ships 3.11 to 3.13 there"
    return str(found[-1]), {"PYTHONPATH": str(ROOT)}


LISTENING: Final = re.compile(r"listening on (http://127\.0\.0\.1:\d+/mcp)")


def shaped(platform: str, *argv: str, python: str = sys.executable) -> list[str]:
    return [python, str(SHAPE), platform, *argv]


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("FAIRWINS_", "PYTHON")) and "proxy" not in k.lower()
    }
    env.update(extra)
    return env


def no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr


def session(process: StdioProcess) -> None:
    """initialize, tools/list and a member's tools/call, each answered as the platform's client reads it."""
    process.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    assert process.response_to(1)["result"]["serverInfo"]["name"] == "fairwins-mcp"
    process.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    process.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    names = {tool["name"] for tool in process.response_to(2)["result"]["tools"]}
    assert {"get_profile", "build_intent"} <= names
    process.send(
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_profile", "arguments": {}}}
    )
    profile = process.response_to(3)["result"]
    assert profile["isError"] is False and profile["structuredContent"], profile


def serves_to_end_of_input(process: StdioProcess) -> None:
    """A session, then end of input (how Desktop leaves on every platform): exit 0, no traceback."""
    session(process)
    process.close_stdin()
    assert process.wait() == 0
    no_traceback(process.stderr)


@pytest.fixture
def processes() -> Iterator[list[StdioProcess]]:
    started: list[StdioProcess] = []
    yield started
    for process in started:
        process.kill()


def start(started: list[StdioProcess], argv: list[str], env: dict[str, str], cwd: pathlib.Path = ROOT) -> StdioProcess:
    process = StdioProcess(argv, env, cwd=cwd)
    started.append(process)
    return process


# ---- the shapes themselves ---------------------------------------------------------------------


def test_the_shapes_are_what_typeshed_says_for_each_python() -> None:
    assert typeshed_shapes.main(["--check"]) == 0


PROBE: Final = """
import json, os, select, signal, socket, sys
found = {"platform": sys.platform, "fork": hasattr(os, "fork"), "set_blocking": hasattr(os, "set_blocking"),
         "epoll": hasattr(select, "epoll"), "poll": hasattr(select, "poll"), "SIGKILL": hasattr(signal, "SIGKILL")}
try:
    import fcntl
    found["fcntl"] = hasattr(fcntl, "F_SETPIPE_SZ") and "F_SETPIPE_SZ" or "no F_SETPIPE_SZ"
except ImportError:
    found["fcntl"] = None
a, b = socket.socketpair()
found["socketpair"] = a.family.name
r, w = os.pipe()
try:
    select.select([r], [], [], 0)
    found["select_pipe"] = "ok"
except OSError as exc:
    found["select_pipe"] = exc.errno
print(json.dumps(found))
"""


@pytest.mark.parametrize(
    ("platform", "expected"),
    [
        (
            "darwin",
            {"fork": True, "set_blocking": True, "epoll": False, "poll": True, "SIGKILL": True}
            | {"fcntl": "no F_SETPIPE_SZ", "socketpair": "AF_UNIX", "select_pipe": "ok"},
        ),
        (
            "win32",
            {"fork": False, "set_blocking": False, "epoll": False, "poll": False, "SIGKILL": False}
            | {"fcntl": None, "socketpair": "AF_INET", "select_pipe": 10038},
        ),
    ],
)
def test_each_shape_takes_away_what_its_platform_lacks(
    platform: str, expected: dict[str, Any], tmp_path: pathlib.Path
) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    done = subprocess.run(shaped(platform, str(probe)), capture_output=True, text=True, timeout=WAIT, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"platform": platform, **expected}


# ---- stdio --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_stdio_session_serves_then_ends_cleanly_at_end_of_input(
    platform: str, version: str, sandbox: SandboxGateway, processes: list[StdioProcess]
) -> None:
    python, extra = interpreter(version)
    env = clean_env(FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A, **extra)
    process = start(processes, shaped(platform, "-m", "mcp_server", python=python), env)
    session(process)
    # Then end of input with lines still unread: how a Windows client (which sends no signal) leaves.
    for n in range(10, 30):
        process.send({"jsonrpc": "2.0", "id": n, "method": "ping"})
    process.close_stdin()
    answered = {message.get("id") for message in process.rest()}
    assert answered >= set(range(10, 30))
    assert process.wait() == 0
    no_traceback(process.stderr)
    assert all(line.endswith(b"}\n") and not line.endswith(b"\r\n") for line in process.lines)


# ---- HTTP ---------------------------------------------------------------------------------------


def wait_for(process: StdioProcess, done: Callable[[], bool]) -> None:
    """Until `done()`, bounded (WAIT): a server process that exits first fails the test with its stderr."""
    for _ in range(int(WAIT / 0.05)):
        if done():
            return
        try:  # a bounded wait that also notices the server exiting
            process.proc.wait(0.05)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError(f"the server exited: {process.stderr}")
    raise AssertionError(f"not within {WAIT} s; stderr:\n{process.stderr}")


def listening(process: StdioProcess) -> str:
    """The MCP URL the server logged it listens on."""
    wait_for(process, lambda: LISTENING.search(process.stderr) is not None)
    found = LISTENING.search(process.stderr)
    assert found is not None
    return found.group(1)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("platform", PLATFORMS)
def test_an_http_session_serves(
    platform: str, version: str, sandbox: SandboxGateway, processes: list[StdioProcess]
) -> None:
    python, extra = interpreter(version)
    env = clean_env(FAIRWINS_API_URL=sandbox.url, FAIRWINS_LOG_LEVEL="info", **extra)
    process = start(processes, shaped(platform, "-m", "mcp_server", "--http", "0", python=python), env)
    url = listening(process)
    client = LegacyClient(url, bearer=TOKEN_MEMBER_A)
    assert client.initialize().result["serverInfo"]["name"] == "fairwins-mcp"
    assert "get_profile" in {tool["name"] for tool in client.request("tools/list").result["tools"]}
    profile = client.request("tools/call", {"name": "get_profile", "arguments": {}}).result
    assert profile["isError"] is False and profile["structuredContent"], profile
    no_traceback(process.stderr)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_client_leaving_mid_call_over_http_cancels_it(platform: str, processes: list[StdioProcess]) -> None:
    """A client's leaving as each platform's event loop reports it (the loop's selector: poll here for
    macOS, select() for Windows): the call is cancelled, not left waiting for the gateway, and the server serves on."""
    with SandboxGateway(delay=60) as slow:
        env = clean_env(FAIRWINS_API_URL=slow.url, FAIRWINS_LOG_LEVEL="info")
        process = start(processes, shaped(platform, "-m", "mcp_server", "--http", "0"), env)
        url = listening(process)
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        call = json.dumps(
            {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "get_profile", "arguments": {}}}
        ).encode()
        leaving = Raw(port)
        leaving.send(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n"
            b"Authorization: Bearer " + TOKEN_MEMBER_A.encode() + b"\r\n"
            b"Content-Length: " + str(len(call)).encode() + b"\r\n\r\n" + call
        )
        wait_for(process, lambda: bool(slow.seen))  # the call is at the gateway, waiting
        leaving.close()
        wait_for(process, lambda: "outcome=cancelled" in process.stderr)
        assert LegacyClient(url).initialize().result["serverInfo"]["name"] == "fairwins-mcp"
        no_traceback(process.stderr)


ACCEPT_FAULTS_SCRIPT: Final = """
import errno, socket, sys, threading
from mcp_server.core.catalog import Catalog
from mcp_server.core.protocol import Dispatcher
from mcp_server.ops import listener as listening
from mcp_server.transports.http import gate
from mcp_server.transports.http.server import McpHTTPServer
from tests.accept_faults import FaultyListener

listener = FaultyListener(listening.listen("127.0.0.1", 0))
server = McpHTTPServer(("127.0.0.1", 0), Dispatcher(Catalog()), gate.Policy(loopback_bind=True), listener=listener)
threading.Thread(target=server.serve_forever, daemon=True).start()
port = server.server_address[1]

def health():
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(b"GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n")
        answer = b""
        while chunk := client.recv(4096):
            answer += chunk
        return answer.split(b" ", 2)[1].decode()

for kind, value in (("fault", "nodelay"), ("fault", "setblocking"), ("fault", "getpeername"),
                    ("accept", errno.ENOBUFS), ("accept", errno.ECONNABORTED)):
    if kind == "fault":
        listener.fault = value
    else:
        listener.accept_error = value
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as struck:
            struck.sendall(b"GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n")
            struck.recv(4096)
    except OSError:
        pass
    print(value, health(), flush=True)
print(sys.platform, "fatal" if server.fatal else "serving", flush=True)
"""


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_fault_accepting_one_connection_costs_that_connection_only_on_each_shape(
    platform: str, tmp_path: pathlib.Path
) -> None:
    """Issue 34: EINVAL from TCP_NODELAY on a reset socket (as macOS raises it), OSError from setblocking and
    getpeername, ENOBUFS and ECONNABORTED from accept: each costs its connection, and /healthz is answered after."""
    script = tmp_path / "accept_faults.py"
    script.write_text(ACCEPT_FAULTS_SCRIPT, encoding="utf-8")
    done = subprocess.run(
        shaped(platform, str(script)),
        capture_output=True,
        text=True,
        timeout=WAIT * 3,
        check=False,
        cwd=ROOT,
        env=clean_env(PYTHONPATH=str(ROOT)),
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == f"{platform} serving", done.stdout + done.stderr
    assert [line.split()[1] for line in lines[:-1]] == ["200"] * 5, done.stdout
    no_traceback(done.stderr)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_workers_are_refused_with_one_sentence(platform: str) -> None:
    done = subprocess.run(
        shaped(platform, "-m", "mcp_server", "--http", "0", "--workers", "2"),
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=clean_env(),
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--workers" in done.stderr and "without --workers" in done.stderr
    no_traceback(done.stderr)


# ---- real clients --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["handshake-2025-11-25", "discover-2026-07-28"])
@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_official_sdk_client_reads_a_member_session_from_the_shaped_server(platform: str, mode: str) -> None:
    """The official MCP Python SDK client starts the shaped server, lists, calls, and accepts every answer."""
    with SandboxGateway() as gateway:
        stdin = "".join(json.dumps([name, arguments]) + "\n" for name, arguments in MEMBER_CALLS[:10])
        env = server_env(
            FAIRWINS_API_URL=gateway.url,
            FAIRWINS_API_TOKEN=TOKEN_MEMBER_A,
            SDK_SERVER_ARGS=json.dumps([str(SHAPE), platform, "-m", "mcp_server"]),
        )
        report = sdk("calls", mode, sys.executable, stdin=stdin, env=env)
    calls = report["calls"]
    assert [c["name"] for c in calls] == [name for name, _ in MEMBER_CALLS[:10]]
    assert [c for c in calls if "raised" in c or c["isError"] or c["jsonschema"]] == []


@pytest.mark.parametrize("platform", PLATFORMS)
def test_claude_code_connects_to_the_shaped_server_over_stdio_and_http(
    platform: str,
    tmp_path: pathlib.Path,
    sandbox: SandboxGateway,
    processes: list[StdioProcess],
) -> None:
    """Claude Code itself (`claude mcp list` starts a stdio server and checks an HTTP one) sees both connected."""
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir(parents=True)
    home.mkdir()
    path = claude_on_path(tmp_path)
    http = start(
        processes, shaped(platform, "-m", "mcp_server", "--http", "0"), clean_env(FAIRWINS_API_URL=sandbox.url)
    )
    url = listening(http)
    stdio_command = shaped(platform, "-m", "mcp_server")
    added = claude(
        home, project, path, "mcp", "add", "fairwins", "-e", f"FAIRWINS_API_URL={sandbox.url}", "--", *stdio_command
    )
    assert added.returncode == 0, added.stderr
    added = claude(home, project, path, "mcp", "add", "--transport", "http", "fairwins-http", url)
    assert added.returncode == 0, added.stderr
    listing = claude(home, project, path, "mcp", "list")
    assert connected(listing.stdout) and connected(listing.stdout, "fairwins-http"), listing.stdout + listing.stderr
    no_traceback(http.stderr)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_inspector_cli_calls_a_tool_on_the_shaped_server_over_stdio_and_http(
    platform: str, tmp_path: pathlib.Path, sandbox: SandboxGateway, processes: list[StdioProcess]
) -> None:
    """The MCP Inspector's CLI (Node 22) starts the shaped server over stdio, and reaches a shaped HTTP one."""
    inspector = [str(NODE), str(LAUNCHER), "--cli"]
    call = ["--method", "tools/call", "--tool-name", "get_gateway_status"]
    over_stdio = run_cli(
        [*inspector, "-e", f"FAIRWINS_API_URL={sandbox.url}", *shaped(platform, "-m", "mcp_server"), *call], tmp_path
    )
    http = start(
        processes, shaped(platform, "-m", "mcp_server", "--http", "0"), clean_env(FAIRWINS_API_URL=sandbox.url)
    )
    over_http = run_cli([*inspector, listening(http), "--transport", "http", *call], tmp_path)
    for done in (over_stdio, over_http):
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["isError"] is False and result["structuredContent"], result
    no_traceback(http.stderr)


# ---- install claude-desktop -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def spaced_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An interpreter at a path with spaces and parentheses, as C:\\Program Files (x86)\\… would be."""
    where = tmp_path_factory.mktemp("apps") / "Program Files (x86)" / "Python 3.11"
    venv.create(where, with_pip=False, symlinks=True)
    purelib = subprocess.run(
        [str(where / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=WAIT,
    ).stdout.strip()
    (pathlib.Path(purelib) / "fairwins.pth").write_text(f"{ROOT}\n")
    return str(where / "bin" / "python")


def test_install_on_windows_names_appdata_with_its_spaces_and_backslashes(
    spaced_python: str, tmp_path: pathlib.Path
) -> None:
    appdata = r"C:\Users\Jane Doe\AppData\Roaming"
    env = clean_env(HOME=str(tmp_path), APPDATA=appdata, LOCALAPPDATA=str(tmp_path / "no such dir"))
    command = shaped(
        "win32",
        "-m",
        "mcp_server",
        "install",
        "claude-desktop",
        "--print",
        "--url",
        "https://api.fairwins.example",
        python=spaced_python,
    )
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=WAIT, check=False)
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)["mcpServers"]["fairwins"]
    assert entry["command"] == spaced_python and " " in entry["command"]
    assert appdata + r"\Claude\claude_desktop_config.json" in done.stderr
    no_traceback(done.stderr)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_install_writes_a_config_claude_desktop_reads_at_the_platforms_path(
    platform: str, spaced_python: str, tmp_path: pathlib.Path, processes: list[StdioProcess], sandbox: SandboxGateway
) -> None:
    home = tmp_path / "Jane Doe"
    home.mkdir()
    env = clean_env(HOME=str(home))
    if platform == "win32":  # Desktop from the Microsoft Store: its config lives inside its MSIX package
        local = home / "AppData" / "Local"
        (local / "Packages" / "Claude_pzs8sxrjxfjjc").mkdir(parents=True)
        env.update(LOCALAPPDATA=str(local), APPDATA=r"C:\not used")
        config = local / "Packages" / "Claude_pzs8sxrjxfjjc" / "LocalCache" / "Roaming" / "Claude"
    else:
        config = home / "Library" / "Application Support" / "Claude"
    done = subprocess.run(
        shaped(
            platform,
            "-m",
            "mcp_server",
            "install",
            "claude-desktop",
            "--url",
            sandbox.url,
            "--token-stdin",
            python=spaced_python,
        ),
        input=TOKEN_MEMBER_A + "\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=WAIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    written = json.loads((config / "claude_desktop_config.json").read_text(encoding="utf-8"))
    entry = written["mcpServers"]["fairwins"]
    assert entry["command"] == spaced_python
    # The entry starts, as Desktop would start it, and serves.
    process = start(processes, [entry["command"], *entry["args"]], clean_env(**entry["env"]), cwd=tmp_path)
    serves_to_end_of_input(process)


# ---- the bundle's launcher -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bundles.Built]:
    return bundles.build(tmp_path_factory.mktemp("dist"))


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_uv_bundles_entry_point_starts_and_serves(
    platform: str,
    built: dict[str, bundles.Built],
    tmp_path: pathlib.Path,
    sandbox: SandboxGateway,
    processes: list[StdioProcess],
) -> None:
    """The process uv starts for the host (the environment uv made, running the entry point), shaped."""
    unpacked = bundles.unpack(built["uv"].path, tmp_path / "Claude Extensions" / "fairwins")
    launch = bundles.entry_point_launch(unpacked, {"gateway_url": sandbox.url, "member_token": TOKEN_MEMBER_A})
    python, *rest = launch.argv
    process = start(processes, [python, str(SHAPE), platform, *rest], launch.env, cwd=launch.cwd)
    serves_to_end_of_input(process)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_python_bundles_launcher_starts_and_serves(
    platform: str,
    built: dict[str, bundles.Built],
    tmp_path: pathlib.Path,
    sandbox: SandboxGateway,
    processes: list[StdioProcess],
) -> None:
    """`python3 -I <bundle>/server/main.py` (`python` on Windows), as Desktop runs the python bundle, shaped."""
    unpacked = bundles.unpack(built["python"].path, tmp_path / "Claude Extensions" / "fairwins")
    entry_point = unpacked / bundles.manifest_of(built["python"].path)["server"]["entry_point"]
    env = clean_env(FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    process = start(processes, [sys.executable, "-I", str(SHAPE), platform, str(entry_point)], env, cwd=tmp_path)
    serves_to_end_of_input(process)


# ---- the guard -----------------------------------------------------------------------------------

# The line that crashed every macOS member's server at start (issue 29), put back unguarded.
CRASH: Final = (
    "    fd = os.dup(1)\n",
    "    fd = os.dup(1)\n    import fcntl\n\n    fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)\n",
)


@pytest.fixture(scope="module")
def regressed(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A copy of the package with the unguarded Linux-only call back in transports/stdio.py."""
    where = tmp_path_factory.mktemp("regressed")
    shutil.copytree(ROOT / "mcp_server", where / "mcp_server", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "toolDefs.snapshot.json", where / "toolDefs.snapshot.json")
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")
    stdio = where / "mcp_server" / "transports" / "stdio.py"
    text = stdio.read_text(encoding="utf-8")
    assert text.count(CRASH[0]) == 1
    stdio.write_text(text.replace(*CRASH), encoding="utf-8")
    return where


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_the_unguarded_call_put_back_fails_the_platform_type_check(regressed: pathlib.Path, platform: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--platform",
            platform,
            "--cache-dir",
            str(regressed / ".mypy_cache"),
            "mcp_server",
        ],
        cwd=regressed,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout
    assert "stdio.py" in done.stdout and ("F_SETPIPE_SZ" in done.stdout or "fcntl" in done.stdout), done.stdout


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_unguarded_call_put_back_fails_the_shaped_start(
    regressed: pathlib.Path, platform: str, sandbox: SandboxGateway
) -> None:
    env = clean_env(FAIRWINS_API_URL=sandbox.url, PYTHONPATH=str(regressed))
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    done = subprocess.run(
        shaped(platform, "-m", "mcp_server"),
        input=json.dumps(init) + "\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=regressed,
        timeout=WAIT,
        check=False,
    )
    assert done.returncode != 0 and done.stdout == "", done.stdout
    assert "Traceback" in done.stderr and ("F_SETPIPE_SZ" in done.stderr or "fcntl" in done.stderr), done.stderr


# ---- the rule, read off the source ----------------------------------------------------------------

RUNS_ON_MEMBERS_MACHINES: Final = (ROOT / "mcp_server", ROOT / "mcpb")
PROBED: Final = {"os", "signal", "select", "socket", "fcntl", "sys", "time", "msvcrt", "resource", "termios"}


def _sources() -> list[pathlib.Path]:
    return sorted(p for where in RUNS_ON_MEMBERS_MACHINES for p in where.rglob("*.py"))


def unguarded_imports(path: pathlib.Path) -> list[str]:
    """Module-level imports of a module some platform lacks (an import in a function or an `if` runs only there)."""
    table = json.loads((ROOT / "tests" / "platforms" / "shapes.json").read_text(encoding="utf-8"))
    absent = {m for version in VERSIONS for platform in PLATFORMS for m in table[version][platform]["absent_modules"]}
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        found += [f"{path.name}:{node.lineno} {name}" for name in names if name in absent]
    return found


def probes(path: pathlib.Path) -> list[str]:
    """hasattr / getattr asked of a platform module: a platform check mypy cannot narrow."""
    return [
        f"{path.name}:{node.lineno} {ast.unparse(node)}"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("hasattr", "getattr")
        and node.args
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id in PROBED
    ]


def test_no_module_a_platform_lacks_is_imported_outside_a_platform_check() -> None:
    """A top-level `import fcntl` is what kept the Windows server from importing at all."""
    assert [found for path in _sources() for found in unguarded_imports(path)] == []


def test_no_platform_module_is_probed_with_hasattr() -> None:
    """A platform difference is a sys.platform check, which mypy narrows and a reader sees; never hasattr."""
    assert [found for path in _sources() for found in probes(path)] == []


def test_the_source_rules_catch_what_they_name(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import fcntl\nimport os\n\nif hasattr(os, 'fork'):\n    pass\n")
    assert unguarded_imports(bad) == ["bad.py:1 fcntl"]
    assert probes(bad) == ["bad.py:4 hasattr(os, 'fork')"]
    guarded = tmp_path / "guarded.py"
    guarded.write_text("import sys\n\nif sys.platform != 'win32':\n    import fcntl\n")
    assert unguarded_imports(guarded) == [] and probes(guarded) == []
