"""The MCP Inspector's web UI (pinned 2.12, its Apps tab) renders each view from the real server.

The Inspector speaks 2026-07-28 to the server's HTTP transport (`--protocol-era modern`), so the
UI extension it declares rides in every request's client capabilities: over stateless legacy
HTTP no server can remember an `initialize` (docs/apps.md). The browser is the test host's
(tests/apps_host.py); the Inspector is installed by `make test` (tests/tools/npm_tool.sh).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, Final, NamedTuple

import pytest

from mcp_server.fairwins import views
from tests import apps_host, catalog
from tests.conftest import BROWSER, NODE_TOOLS, ROOT
from tests.inspector import LAUNCHER, NODE, VERSION
from tests.samples import VALID_ARGUMENTS
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.test_inspector import WebInspector, free_port

pytestmark = [BROWSER, NODE_TOOLS]

SCRIPT: Final = ROOT / "tests/browser_host/inspector.mjs"
SCREENSHOTS: Final = os.environ.get("FAIRWINS_SCREENSHOTS")
# Every tool with a view (fairwins/views.py), by the title the Apps tab lists it under: the view it
# must draw, the arguments it is opened with, and its screenshot's name. A new tool with a view is
# here without an edit; SHOWS and ARGUMENTS only sharpen what a tool's view must show.
SHOWS: Final = {
    "get_wagers": "State: unreadable",
    "get_prediction_markets": "Will the Fed cut rates in December 2026?",
    "get_fees": "1.5% (150 bps)",
    "build_intent": "25 USDC (raw 25000000)",
}
# Opened as a person opens it: a tool that requires arguments gets its sample's (tests/samples.py).
ARGUMENTS: Final[dict[str, dict[str, Any]]] = {
    "build_intent": {"intent": "create_wager", "chainId": 137, "params": {"stake": "25000000"}}
}


class App(NamedTuple):
    tool: str
    view: str
    arguments: dict[str, Any] | None
    shot: str


APPS: Final = {
    catalog.TITLE[tool]: App(
        tool,
        view.name,
        ARGUMENTS.get(tool, VALID_ARGUMENTS.get(tool) if catalog.REQUIRED[tool] else None),
        f"inspector-{view.name}.png" if n == 0 else f"inspector-{view.name}-{tool}.png",
    )
    for view in views.VIEWS
    for n, tool in enumerate(view.tools)
}


@pytest.fixture
def server(sandbox: SandboxGateway, tmp_path: pathlib.Path) -> Iterator[str]:
    """The shipped server over HTTP on a free port, the member's token shared (the Inspector sends none)."""
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "FAIRWINS_API_URL": sandbox.url, "FAIRWINS_API_TOKEN": TOKEN_MEMBER_A}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_server", "--http", str(port), "--allow-shared-token"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "listening on" in line:
                break
        else:
            raise AssertionError("the server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(30)


def test_the_inspectors_apps_tab_renders_each_view_from_the_real_server_screenshots(
    server: str, tmp_path: pathlib.Path
) -> None:
    assert LAUNCHER.exists() and NODE.exists(), f"the MCP Inspector {VERSION} is not installed: run `make test`"
    chromium = apps_host.install()
    line = [
        str(NODE),
        str(LAUNCHER),
        "--web",
        "--transport",
        "http",
        "--server-url",
        server,
        "--protocol-era",
        "modern",
    ]
    # `make screenshots` keeps them (docs/images/inspector-*.png); otherwise a scratch folder.
    shots = ROOT / SCREENSHOTS if SCREENSHOTS else tmp_path
    web = WebInspector(line, tmp_path)
    try:
        web.wait_until_up()
        plan: dict[str, Any] = {
            "url": f"http://localhost:{web.port}/?MCP_INSPECTOR_API_TOKEN={web.TOKEN}",
            "modules": str(apps_host.MODULES),
            "chromium": chromium,
            "apps": [
                {"title": title, "screenshot": str(shots / app.shot), "arguments": app.arguments}
                for title, app in APPS.items()
            ],
        }
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(plan), encoding="utf-8")
        done = subprocess.run([str(NODE), str(SCRIPT), str(path)], capture_output=True, timeout=600, check=False)
    finally:
        web.stop()
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    reports = {r["title"]: r for r in map(json.loads, done.stdout.decode().splitlines())}
    assert len(APPS) == sum(len(v.tools) for v in views.VIEWS), "two tools with a view share a title"
    for title, app in APPS.items():
        report = reports[title]
        assert report["listed"] >= 1 and report["view"] is not None, (title, report)
        assert report["view"]["view"] == app.view, report
        text = report["view"]["text"]
        assert "could not answer" not in text and "unknown, not empty" not in text, report  # drawn, not a failure
        assert SHOWS.get(app.tool, "") in text, report
        assert TOKEN_MEMBER_A not in json.dumps(report)
        assert (shots / app.shot).read_bytes().startswith(b"\x89PNG")
