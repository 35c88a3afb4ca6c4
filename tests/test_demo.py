"""`make demo`: the scripted session (--once), the interactive mode's connect lines, and a clean Ctrl-C."""

from __future__ import annotations

import http.client
import io
import json
import queue
import re
import signal
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator

import pytest

from demo.demo import DemoError, Server, connect_lines, session
from mcp_server.setup.server import build_catalog
from mcp_server.upstream.gateway import Gateway
from tests.conftest import ROOT, SIGNAL_STOP, WAIT, server_env
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway


def demo_process(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "demo", *args],
        cwd=ROOT,
        env=server_env(FAIRWINS_API_TOKEN="fw1.must-not-reach-the-http-server-0000"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def served_tool_count() -> int:
    return len(build_catalog(Gateway(None)).tools)


def test_once_runs_the_whole_session_and_exits_0() -> None:
    proc = demo_process("--once")
    out, err = proc.communicate(timeout=WAIT * 6)
    assert proc.returncode == 0, out + err
    assert f"2. tools/list: {served_tool_count()} tools" in out
    # the member read: its chains, and the server's sentence naming each one it could not read
    assert "chain 137: read, 3 wagers" in out
    assert "chain 8453: unreadable (wager index did not answer within 5 s)" in out
    assert "chain 1: not-configured" in out
    assert "Chain 8453 could not be read" in out and "UNKNOWN" in out
    # the public read and the price
    assert "Will ETH close above $5,000 on 2026-12-31?  Yes 0.41 / No 0.59" in out
    assert "This public read needed no token." in out
    assert "the gateway priced it: “This is a price, not an outage: get_wagers costs 10000" in out
    assert out.rstrip().endswith("Stopped the server and the sandbox gateway.")
    # the session shows tokens redacted, and --once prints no connect lines
    assert "fw1.…7f3k" in out and TOKEN_MEMBER_A not in out and "Ctrl-C" not in out


def test_the_session_stops_with_the_step_that_did_not_show_what_it_should() -> None:
    with SandboxGateway() as gateway:
        gateway.fault("/v1/member/wagers", "status", status=503)
        server = Server.start(gateway.url, 0)
        out = io.StringIO()
        try:
            with pytest.raises(DemoError, match="get_wagers as member A failed: Could not read your wagers"):
                session(server.url, out)
        finally:
            assert server.stop() == 0
    assert "3. tools/call get_wagers as member A" in out.getvalue()


def _lines(stream: io.TextIOBase | None) -> queue.Queue[str | None]:
    found: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert stream is not None
        for text in stream:
            found.put(text)
        found.put(None)

    threading.Thread(target=read, daemon=True).start()
    return found


def _until(lines: queue.Queue[str | None], marker: str, seen: list[str]) -> None:
    while True:
        text = lines.get(timeout=WAIT * 3)
        assert text is not None, "the demo ended early:\n" + "".join(seen)
        seen.append(text)
        if marker in text:
            return


def _refused(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=WAIT)
    try:
        conn.request("GET", "/healthz")
        conn.getresponse().read()
    except ConnectionRefusedError:
        return True
    finally:
        conn.close()
    return False


@pytest.fixture
def interactive() -> Iterator[subprocess.Popen[str]]:
    proc = demo_process("--port", "0", "--gateway-port", "0")
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)


@SIGNAL_STOP
def test_interactive_mode_prints_the_connect_lines_keeps_serving_and_ctrl_c_stops_both(
    interactive: subprocess.Popen[str],
) -> None:
    lines = _lines(interactive.stdout)  # type: ignore[arg-type]
    seen: list[str] = []
    _until(lines, "Press Ctrl-C to stop both.", seen)
    text = "".join(seen)
    server_url = re.search(r"the MCP server on (http://127\.0\.0\.1:\d+/mcp)", text)
    gateway_url = re.search(r"the sandbox gateway on (http://127\.0\.0\.1:\d+)", text)
    assert server_url and gateway_url, text
    assert f"claude mcp add --transport http fairwins-sandbox {server_url[1]}" in text
    assert f"--server-url {server_url[1]}" in text and f"--cli {server_url[1]}" in text
    # still serving after the session: a real client can connect now
    assert not _refused(server_url[1].replace("/mcp", "")) and not _refused(gateway_url[1])
    interactive.send_signal(signal.SIGINT)
    assert interactive.wait(WAIT * 3) == 0
    rest = []
    while (more := lines.get(timeout=WAIT)) is not None:
        rest.append(more)
    assert "Stopped the server and the sandbox gateway." in "".join(rest)
    assert _refused(server_url[1].replace("/mcp", "")) and _refused(gateway_url[1])


def test_the_claude_desktop_config_it_prints_launches_a_real_command() -> None:
    printed = connect_lines("http://127.0.0.1:8790/mcp", "http://127.0.0.1:8787")
    start = printed.index("{")
    end = printed.rindex("}") + 1
    config = json.loads(printed[start:end])
    entry = config["mcpServers"]["fairwins-sandbox"]
    assert entry["env"] == {
        **entry["env"],
        "FAIRWINS_API_URL": "http://127.0.0.1:8787",
        "FAIRWINS_API_TOKEN": TOKEN_MEMBER_A,
    }
    done = subprocess.run(
        [entry["command"], *entry["args"], "--help"],
        env={**server_env(), **entry["env"]},
        capture_output=True,
        text=True,
        timeout=WAIT * 3,
    )
    assert done.returncode == 0 and "fairwins-mcp" in done.stdout
