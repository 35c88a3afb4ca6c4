"""Every MCP Inspector line of the README (and of `make demo`), run with the pinned Inspector on Node 22.

The command-line forms run as written and must print the tools (or the call's result). The
browser forms are started with MCP_AUTO_OPEN_ENABLED=false (no browser) on free ports; the UI
must be served, hold exactly the server the line names, and, through the Inspector's own backend
(`/api/mcp/connect`, `/api/mcp/send`, `/api/mcp/events`), list this server's tools. `make test`
installs the Inspector (tests/tools/npm_tool.sh inspector); without it these tests fail, naming the command.
"""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import queue
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, Final

import pytest

from demo.demo import connect_lines
from mcp_server.core.protocol import Dispatcher
from mcp_server.setup.server import build_catalog
from mcp_server.upstream.gateway import Gateway
from tests import catalog
from tests.conftest import NODE_TOOLS
from tests.inspector import LAUNCHER, NODE, NPX, VERSION
from tests.mcp_http import serving
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.test_readme import TEXT, commands_starting

pytestmark = NODE_TOOLS

TIMEOUT: Final = 90.0  # one Inspector run on a loaded machine: Node start, server start, a round trip
TOOLS: Final = len(catalog.SERVED)
BINDIR: Final = pathlib.Path(sys.executable).parent  # this checkout's environment, as `make` builds it
SERVER_URL: Final = "http://127.0.0.1:8790/mcp"
README_LINES: Final = commands_starting(NPX, TEXT)
DEMO_LINES: Final = commands_starting(NPX, connect_lines(SERVER_URL, "http://127.0.0.1:8787"))


def inspector_env(home: pathlib.Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRWINS_", "MCP_", "CLIENT_PORT"))}
    env.update(
        HOME=str(home),  # the Inspector keeps its catalog and storage under ~/.mcp-inspector
        PATH=f"{NODE.parent}{os.pathsep}{env.get('PATH', '')}",
        MCP_INSPECTOR_SECRET_STORE="memory",  # no keychain here, and nothing written to disk
        MCP_AUTO_OPEN_ENABLED="false",  # the browser form opens no browser
        **extra,
    )
    return env


@pytest.fixture(scope="module")
def targets() -> Iterator[tuple[SandboxGateway, str]]:
    """The sandbox gateway, and a real HTTP server of the shipped catalog over it: (gateway, its /mcp URL)."""
    assert LAUNCHER.exists() and NODE.exists(), f"the MCP Inspector {VERSION} is not installed: run `make test`"
    with SandboxGateway() as gateway:
        dispatcher = Dispatcher(build_catalog(Gateway(gateway.url)))
        with serving(dispatcher) as server:
            yield gateway, f"http://127.0.0.1:{server.server_address[1]}/mcp"


def runnable(words: list[str], gateway: SandboxGateway, url: str) -> list[str]:
    """A README line as it runs here: the pinned Inspector on Node 22, this checkout, the sandbox."""
    assert words[:2] == shlex.split(NPX), words
    line = [str(NODE), str(LAUNCHER), *words[2:]]
    swaps = {
        "/path/to/fairwins-mcp/.venv/bin/": f"{BINDIR}/",
        "https://relay.fairwins.app": gateway.url,
        SERVER_URL: url,
        "fw1.your-own-token": TOKEN_MEMBER_A,
        "fw1.sandbox-member-a-7f3k": TOKEN_MEMBER_A,
    }
    for old, new in swaps.items():
        line = [word.replace(old, new) for word in line]
    return line


def test_the_readme_gives_every_form_with_the_installed_command_and_the_module() -> None:
    lines = [shlex.join(words) for words in README_LINES]
    cli = [line for line in lines if " --cli " in line]
    web = [line for line in lines if " --cli " not in line]
    for forms in (cli, web):
        assert any(".venv/bin/fairwins-mcp" in line for line in forms)
        assert any(".venv/bin/python -m mcp_server" in line for line in forms)
        assert any("--transport http" in line for line in forms)
    assert all(words[1] == f"@modelcontextprotocol/inspector@{VERSION}" for words in README_LINES)
    assert DEMO_LINES and all(words[1].endswith(f"@{VERSION}") for words in DEMO_LINES)


# ---- the command line ------------------------------------------------------------------------------


def run_cli(line: list[str], home: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        line,
        cwd=home,
        env=inspector_env(home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


CLI_LINES: Final = [w for w in README_LINES + DEMO_LINES if "--cli" in w]


@pytest.mark.parametrize("words", CLI_LINES, ids=[f"cli{i}" for i in range(len(CLI_LINES))])
def test_every_command_line_form_answers(
    words: list[str], targets: tuple[SandboxGateway, str], tmp_path: pathlib.Path
) -> None:
    gateway, url = targets
    done = run_cli(runnable(words, gateway, url), tmp_path)
    assert done.returncode == 0, f"{shlex.join(words)}\n{done.stdout}\n{done.stderr}"
    answer = json.loads(done.stdout)
    if "tools/list" in words:
        assert len(answer["tools"]) == TOOLS and all("outputSchema" in t for t in answer["tools"])
    else:
        assert answer["isError"] is False and answer["structuredContent"]["status"] == "ok"


# ---- the Inspector's schema warnings ----------------------------------------------------------------
# On tools/list the Inspector lints every tool's inputSchema and outputSchema (a field with no
# validation keyword "accepts any value", a `type` list is "less portable", ...). Without --strict
# it prints one "Schema portability: …" line to stderr; with --strict and --format json the
# findings come back in the answer's `schemaFindings`. A member sees either as a warning.

# A stdio MCP server of one tool whose output field says nothing: what the lint must catch.
_UNTYPED_SERVER: Final = """
import json, sys
TOOL = {"name": "loose", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"anything": {"description": "no type"}}}}
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message["method"] == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "loose", "version": "1"}}
    else:
        result = {"tools": [TOOL]} if message["method"] == "tools/list" else {}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


def schema_findings(server: list[str], home: pathlib.Path) -> tuple[list[dict[str, Any]], str]:
    """What the Inspector's lint finds in `server`'s tools, strictly (its findings) and plainly (its stderr)."""
    assert LAUNCHER.exists() and NODE.exists(), f"the MCP Inspector {VERSION} is not installed: run `make test`"
    base = [str(NODE), str(LAUNCHER), "--cli", *server, "--method", "tools/list"]
    strict = run_cli([*base, "--strict", "--format", "json"], home)
    assert strict.returncode == 0, f"{strict.stdout}\n{strict.stderr}"
    plain = run_cli(base, home)
    assert plain.returncode == 0, f"{plain.stdout}\n{plain.stderr}"
    findings: list[dict[str, Any]] = json.loads(strict.stdout).get("schemaFindings", [])
    return findings, plain.stderr


def test_the_inspector_shows_no_schema_warning_for_any_tool(
    targets: tuple[SandboxGateway, str], tmp_path: pathlib.Path
) -> None:
    gateway, url = targets
    stdio = [f"{BINDIR}/python", "-m", "mcp_server", "--", "-e", f"FAIRWINS_API_URL={gateway.url}"]
    http = [url, "--transport", "http"]
    for server in (stdio, http):
        findings, stderr = schema_findings(server, tmp_path)
        assert findings == [], json.dumps(findings, indent=1)
        assert "Schema portability" not in stderr, stderr


def test_the_inspector_lint_does_report_a_field_that_accepts_any_value(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "loose_server.py"
    script.write_text(_UNTYPED_SERVER, encoding="utf-8")
    findings, stderr = schema_findings([sys.executable, str(script)], tmp_path)
    assert [(f["toolName"], [(g["rule"], g["schema"], g["path"]) for g in f["findings"]]) for f in findings] == [
        ("loose", [("untyped-schema", "outputSchema", "properties.anything")])
    ]
    assert "Schema portability: 0 errors, 1 warning across 1 tool" in stderr, stderr


def test_options_before_the_command_and_dash_dash_after_it_fail_as_the_readme_says(
    targets: tuple[SandboxGateway, str], tmp_path: pathlib.Path
) -> None:
    gateway, _ = targets
    words = [str(NODE), str(LAUNCHER), "--cli", "-e", f"FAIRWINS_API_URL={gateway.url}"]
    done = run_cli([*words, f"{BINDIR}/python", "-m", "mcp_server", "--", "--method", "tools/list"], tmp_path)
    assert done.returncode != 0 and "Method is required" in done.stderr, done.stderr


# ---- the browser UI ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class WebInspector:
    """The Inspector's web UI, started by this test (its pid is the only one stopped), on free ports."""

    TOKEN = "inspector-test-session-token"

    def __init__(self, line: list[str], home: pathlib.Path) -> None:
        self.port = free_port()
        env = inspector_env(
            home,
            CLIENT_PORT=str(self.port),
            MCP_SANDBOX_PORT=str(free_port()),
            MCP_INSPECTOR_API_TOKEN=self.TOKEN,
        )
        self.proc = subprocess.Popen(
            line,
            cwd=home,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.output: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.put(line)
        self.output.put(None)

    def wait_until_up(self) -> None:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                line = self.output.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
            if "is up and running" in line:
                return
        raise AssertionError("the Inspector's web UI did not come up:\n" + "".join(self.seen))

    def request(self, method: str, path: str, body: object = None) -> tuple[int, str, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
        try:
            headers = {"x-mcp-remote-auth": f"Bearer {self.TOKEN}", "Content-Type": "application/json"}
            conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.getheader("Content-Type") or "", resp.read().decode("utf-8")
        finally:
            conn.close()

    def api(self, method: str, path: str, body: object = None) -> Any:
        status, _, text = self.request(method, path, body)
        assert status == 200, f"{method} {path}: {status} {text}"
        return json.loads(text)

    def events(self, session: str, into: queue.Queue[dict[str, Any]]) -> None:
        """Every JSON event of the session's stream, as the UI would read them."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
        conn.request(
            "GET", f"/api/mcp/events?sessionId={session}", headers={"x-mcp-remote-auth": f"Bearer {self.TOKEN}"}
        )
        resp = conn.getresponse()
        try:
            for raw in resp:
                line = raw.decode("utf-8").strip()
                if line.startswith("data:"):
                    into.put(json.loads(line[5:]))
        except (OSError, ValueError):
            pass
        finally:
            conn.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(TIMEOUT)


def tools_through(web: WebInspector, config: dict[str, Any]) -> list[dict[str, Any]]:
    """initialize and tools/list, sent the way the browser UI sends them, through the Inspector's backend."""
    session = web.api("POST", "/api/mcp/connect", {"config": config})["sessionId"]
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    threading.Thread(target=web.events, args=(session, events), daemon=True).start()
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "readme", "version": "1"}}
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ):
        assert web.api("POST", "/api/mcp/send", {"sessionId": session, "message": message}) == {"ok": True}
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        event = events.get(timeout=max(0.1, deadline - time.monotonic()))
        found = _response(event, 2)
        if found is not None:
            web.api("POST", "/api/mcp/disconnect", {"sessionId": session})
            tools: list[dict[str, Any]] = found["result"]["tools"]
            return tools
    raise AssertionError("no tools/list answer came through the Inspector's backend")


def _response(node: object, request_id: int) -> dict[str, Any] | None:
    """The JSON-RPC response to `request_id` anywhere inside an event."""
    if isinstance(node, dict):
        if node.get("id") == request_id and "result" in node:
            return node
        for value in node.values():
            found = _response(value, request_id)
            if found is not None:
                return found
    return None


WEB_LINES: Final = [w for w in README_LINES + DEMO_LINES if "--cli" not in w]


@pytest.mark.parametrize("words", WEB_LINES, ids=[f"web{i}" for i in range(len(WEB_LINES))])
def test_every_browser_form_serves_the_ui_and_reaches_this_server(
    words: list[str], targets: tuple[SandboxGateway, str], tmp_path: pathlib.Path
) -> None:
    gateway, url = targets
    web = WebInspector(runnable(words, gateway, url), tmp_path)
    try:
        web.wait_until_up()
        status, kind, page = web.request("GET", "/")
        assert status == 200 and kind.startswith("text/html") and "<html" in page.lower()
        (config,) = web.api("GET", "/api/servers")["mcpServers"].values()
        if "--server-url" in words:
            assert config["url"] == url and config["headers"] == {"Authorization": f"Bearer {TOKEN_MEMBER_A}"}
        else:
            args = config.get("args", [])
            assert [config["command"], *args] == runnable(words, gateway, url)[-len(args) - 1 :]
            assert config["env"] == {"FAIRWINS_API_URL": gateway.url}
        tools = tools_through(web, config)
        assert len(tools) == TOOLS and {t["name"] for t in tools} >= {"get_gateway_status", "build_intent"}
    finally:
        web.stop()
