"""`make demo`: the scripted session (--once) and its OAuth sign-in, the connect lines, and a clean Ctrl-C."""

from __future__ import annotations

import http.client
import io
import json
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator

import pytest

from demo.demo import DemoError, Server, connect_lines, oauth_session, session
from mcp_server.setup.server import build_catalog
from mcp_server.upstream.gateway import Gateway
from tests.conftest import ROOT, SIGNAL_STOP, WAIT, server_env
from tests.inspector import NPX
from tests.sandbox_auth import SandboxAuthServer
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway

WHOLE_JWT = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+")
ALL_STOPPED = "Stopped the servers, the sandbox gateway and the sandbox authorization server."


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
    assert "the gateway priced it: “This is a price, not an outage: get_wagers costs 0.01 USDC (10000" in out
    # step 6: an OAuth client signs in to the second server and reads the wagers with its token
    oauth = re.search(
        r"^6\. an OAuth client signs in, on the second server \((http://127\.0\.0\.1:\d+)/mcp\)$", out, re.M
    )
    assert oauth, out
    step = out[oauth.start() :]
    assert "tools/call get_wagers with no token: HTTP 401, the challenge that starts a sign-in" in step
    assert f'resource_metadata="{oauth[1]}/.well-known/oauth-protected-resource/mcp",' in step
    assert 'scope="read:wagers"' in step
    assert "the client registers there (dynamic client registration): sandbox-client-" in step
    assert "member A approves on the consent page (the sandbox's stand-in for the wallet signature)" in step
    assert re.search(r"the client trades the code for an access token: eyJ…[\w-]{4}\n", step)
    assert f"(a JWT for {oauth[1]}/mcp, scope read:wagers, good for 300 s)" in step
    assert 'tools/call get_wagers {"chainId": 137} with the token: chain 137: read, 3 wagers' in step
    assert step.count("w-a-") == 3
    assert re.search(r"the gateway saw Authorization: Bearer eyJ…[\w-]{4}, exactly the token issued", step)
    assert out.rstrip().endswith(ALL_STOPPED)
    # the session shows tokens redacted, and --once prints no connect lines
    assert "fw1.…7f3k" in out and TOKEN_MEMBER_A not in out and "Ctrl-C" not in out
    assert not WHOLE_JWT.search(out)


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


def _oauth_server(gateway: SandboxGateway, auth: SandboxAuthServer, port: int) -> Server:
    public = f"http://127.0.0.1:{port}/mcp"
    return Server.start(gateway.url, port, ["--public-url", public, "--authorization-server", auth.issuer], "oauth")


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_step_6_stops_when_the_gateway_does_not_take_the_sign_ins_token() -> None:
    port = _port()
    with SandboxGateway() as gateway, SandboxAuthServer(resources=[f"http://127.0.0.1:{port}/mcp"]) as auth:
        server = _oauth_server(gateway, auth, port)  # and no gateway.trust_issuer: its tokens are no member's
        out = io.StringIO()
        try:
            with pytest.raises(DemoError, match="get_wagers with the access token failed"):
                oauth_session(server.url, gateway, auth, out)
        finally:
            assert server.stop() == 0
    assert "the client trades the code for an access token: eyJ…" in out.getvalue()
    assert not WHOLE_JWT.search(out.getvalue())


def test_step_6_stops_when_a_member_call_without_a_token_is_not_challenged() -> None:
    with SandboxGateway() as gateway, SandboxAuthServer() as auth:
        server = Server.start(gateway.url, 0)  # not in OAuth mode: the gateway prices the call instead
        try:
            with pytest.raises(DemoError, match="get_wagers with no token on the OAuth server answered HTTP 200"):
                oauth_session(server.url, gateway, auth, io.StringIO())
        finally:
            assert server.stop() == 0


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
    proc = demo_process("--port", "0", "--gateway-port", "0", "--auth-port", "0", "--oauth-port", "0")
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
    _until(lines, "Press Ctrl-C to stop them all.", seen)
    text = "".join(seen)
    server_url = re.search(r"the MCP server on (http://127\.0\.0\.1:\d+/mcp)", text)
    gateway_url = re.search(r"the sandbox gateway on (http://127\.0\.0\.1:\d+)", text)
    oauth = re.search(
        r"The OAuth server, (http://127\.0\.0\.1:\d+/mcp), takes no fw1\. token: a client signs in at (\S+)", text
    )
    assert server_url and gateway_url and oauth, text
    assert f"claude mcp add --transport http fairwins-sandbox {server_url[1]}" in text
    assert f"--server-url {server_url[1]}" in text and f"--cli {server_url[1]}" in text
    # the OAuth server's Inspector lines carry no token: the Inspector signs in
    assert f"    {NPX} --transport http --server-url {oauth[1]}\n" in text
    assert f"    {NPX} --cli {oauth[1]} --transport http --method tools/call --tool-name get_wagers\n" in text
    # still serving after the session: a real client can connect now
    running = [server_url[1].replace("/mcp", ""), gateway_url[1], oauth[1].replace("/mcp", ""), oauth[2]]
    assert not any(_refused(url) for url in running)
    interactive.send_signal(signal.SIGINT)
    assert interactive.wait(WAIT * 3) == 0
    rest = []
    while (more := lines.get(timeout=WAIT)) is not None:
        rest.append(more)
    assert ALL_STOPPED in "".join(rest)
    assert all(_refused(url) for url in running)


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
    # The OAuth server's lines, when given, leave the JSON the only braces in the text.
    with_oauth = connect_lines("http://127.0.0.1:8790/mcp", "http://127.0.0.1:8787", "http://127.0.0.1:8791/mcp", "x")
    assert json.loads(with_oauth[with_oauth.index("{") : with_oauth.rindex("}") + 1]) == config
    done = subprocess.run(
        [entry["command"], *entry["args"], "--help"],
        env={**server_env(), **entry["env"]},
        capture_output=True,
        text=True,
        timeout=WAIT * 3,
    )
    assert done.returncode == 0 and "fairwins-mcp" in done.stdout
