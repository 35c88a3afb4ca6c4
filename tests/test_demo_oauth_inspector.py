"""`make demo`'s OAuth line for the MCP Inspector's command line, run as printed: it signs in and reads the wagers.

The demo runs as a member starts it (a subprocess, every port free); the printed line runs with the
pinned Inspector on Node 22. The Inspector signs in interactively only with a terminal, so its stdin
is a pseudo-terminal; the member's browser is `consent` (tests/sandbox_auth.py), which approves as
member A on the sandbox's page, and the redirect it answers with is delivered to the Inspector's
callback listener, as the browser would.
"""

from __future__ import annotations

import json
import os
import pathlib
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import urllib.request
from typing import Final

import pytest

from tests.conftest import NODE_TOOLS, SIGNAL_STOP, WAIT
from tests.inspector import LAUNCHER, NODE, NPX, VERSION
from tests.sandbox_auth import consent
from tests.test_demo import demo_process
from tests.test_inspector import free_port, inspector_env

pytestmark = [NODE_TOOLS, SIGNAL_STOP]

TIMEOUT: Final = 90.0
SIGN_IN: Final = re.compile(r"(http://127\.0\.0\.1:\d+/authorize\?[^\x07\x1b\s]+)")


def _lines(stream: object) -> queue.Queue[str | None]:
    found: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert stream is not None
        for text in stream:  # type: ignore[attr-defined]
            found.put(text)
        found.put(None)

    threading.Thread(target=read, daemon=True).start()
    return found


def _until(lines: queue.Queue[str | None], pattern: re.Pattern[str], seen: list[str]) -> re.Match[str]:
    while True:
        text = lines.get(timeout=TIMEOUT)
        assert text is not None, "ended early:\n" + "".join(seen)
        seen.append(text)
        found = pattern.search(text)
        if found:
            return found


def test_the_printed_inspector_command_line_signs_in_as_member_a_and_reads_the_wagers(tmp_path: pathlib.Path) -> None:
    if sys.platform == "win32":
        pytest.skip("a pseudo-terminal is POSIX's")
    assert LAUNCHER.exists() and NODE.exists(), f"the MCP Inspector {VERSION} is not installed: run `make test`"
    demo = demo_process("--port", "0", "--gateway-port", "0", "--auth-port", "0", "--oauth-port", "0")
    try:
        printed = _lines(demo.stdout)
        seen: list[str] = []
        _until(printed, re.compile("Press Ctrl-C to stop them all."), seen)
        text = "".join(seen)
        (line,) = [
            ln.strip() for ln in text.splitlines() if ln.strip().startswith(f"{NPX} --cli") and "Bearer" not in ln
        ]
        words = shlex.split(line)
        assert "--header" not in words  # no token handed over: the Inspector signs in
        env = inspector_env(tmp_path, MCP_OAUTH_CALLBACK_URL=f"http://127.0.0.1:{free_port()}/oauth/callback")
        terminal, its_side = os.openpty()
        result = tmp_path / "result.json"
        with result.open("w", encoding="utf-8") as its_stdout:
            inspector = subprocess.Popen(
                [str(NODE), str(LAUNCHER), *words[2:]],
                cwd=tmp_path,
                env=env,
                stdin=its_side,
                stdout=its_stdout,
                stderr=subprocess.PIPE,
                text=True,
            )
        os.close(its_side)
        try:
            said: list[str] = []
            address = _until(_lines(inspector.stderr), SIGN_IN, said)[1]
            back = consent(address, "A")  # the member's browser: the consent page, approved
            with urllib.request.urlopen(back, timeout=WAIT) as delivered:  # the redirect, to its listener
                assert delivered.status == 200
            inspector.wait(TIMEOUT)
        finally:
            if inspector.poll() is None:
                inspector.kill()
                inspector.wait(WAIT)
            os.close(terminal)
        out = result.read_text(encoding="utf-8")
        assert inspector.returncode == 0, out + "".join(said)
        answer = json.loads(out)
        assert answer["isError"] is False
        chains = {chain["chainId"]: chain for chain in answer["structuredContent"]["chains"]}
        assert chains[137]["state"] == "read" and len(chains[137]["wagers"]) == 3
        # The OAuth server logged the Inspector's call: refused once without a token, then answered.
        echoed: list[str] = []
        _until(printed, re.compile(r"oauth  \| .*tools/call tool=get_wagers outcome=result"), echoed)
        assert any("oauth  | " in ln and "401 refused=sign_in_required" in ln for ln in echoed), "".join(echoed)
        demo.send_signal(signal.SIGINT)
        assert demo.wait(TIMEOUT) == 0
        rest = []
        while (more := printed.get(timeout=WAIT)) is not None:
            rest.append(more)
        assert "Stopped the servers, the sandbox gateway and the sandbox authorization server." in "".join(rest)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(WAIT)
