"""Scripted client sessions, both eras, against the shipped server as a subprocess over the sandbox gateway.

One stdio process serves a 2026-07-28 session (server/discover, tools/list, tools/call, no
handshake) and then a handshake session (initialize, tools/list, tools/call): `initialize` pins
a stdio process to the legacy era, so the modern session goes first. One HTTP server serves both,
in either order, since every POST stands alone.
"""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcp_server.wire.versions import META_SERVER_INFO, SUPPORTED_VERSIONS
from tests.conftest import ROOT, SIGNAL_STOP, WAIT, StdioProcess, server_env
from tests.mcp_http import LEGACY, LegacyClient, ModernClient, modern_meta
from tests.sandbox_gateway import ACCOUNT_A, TOKEN_MEMBER_A, SandboxGateway

CLIENT_INFO = {"name": "fairwins-session-test", "version": "1.0.0"}


def _message(request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}


def _assert_profile(result: dict[str, Any]) -> None:
    assert result["isError"] is False, result
    assert result["structuredContent"]["account"] == ACCOUNT_A


# ---- stdio ----------------------------------------------------------------------------------------


@SIGNAL_STOP
def test_one_stdio_process_serves_a_modern_then_a_legacy_session(
    sandbox: SandboxGateway, stdio_process: Callable[..., StdioProcess]
) -> None:
    proc = stdio_process(FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)

    # 2026-07-28: no handshake; every request carries _meta.
    proc.send(_message(1, "server/discover", {"_meta": modern_meta()}))
    discover = proc.response_to(1)["result"]
    assert discover["supportedVersions"] == list(SUPPORTED_VERSIONS)
    assert discover["capabilities"]["tools"] is not None and discover["instructions"]
    assert discover["_meta"][META_SERVER_INFO]["name"] == "fairwins-mcp"

    proc.send(_message(2, "tools/list", {"_meta": modern_meta()}))
    modern_tools = proc.response_to(2)["result"]
    assert modern_tools["resultType"] == "complete" and modern_tools["ttlMs"] >= 0
    assert "get_profile" in [t["name"] for t in modern_tools["tools"]]

    params = {"name": "get_profile", "arguments": {}, "_meta": modern_meta(progressToken="p-1")}
    proc.send(_message(3, "tools/call", params))
    called = proc.response_to(3)["result"]
    assert called["resultType"] == "complete"
    _assert_profile(called)
    progress = [m for m in proc.skipped if m.get("method") == "notifications/progress"]
    assert progress and all(m["params"]["progressToken"] == "p-1" for m in progress)

    # The handshake era, same process.
    init_params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO}
    proc.send(_message(4, "initialize", init_params))
    init = proc.response_to(4)["result"]
    assert init["protocolVersion"] == LEGACY and init["serverInfo"]["name"] == "fairwins-mcp"
    proc.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    proc.send(_message(5, "tools/list"))
    legacy_tools = proc.response_to(5)["result"]
    assert "resultType" not in legacy_tools
    assert legacy_tools["tools"] == modern_tools["tools"]

    proc.send(_message(6, "tools/call", {"name": "get_profile", "arguments": {}}))
    legacy_call = proc.response_to(6)["result"]
    assert "resultType" not in legacy_call
    _assert_profile(legacy_call)
    assert legacy_call["structuredContent"] == called["structuredContent"]

    proc.close_stdin()
    assert proc.wait() == 0


# ---- HTTP -----------------------------------------------------------------------------------------


class HttpProcess:
    """`python -m mcp_server --http 0` as a subprocess; its URL is read from its log line on stderr."""

    def __init__(self, gateway_url: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_server", "--http", "0"],
            cwd=ROOT,
            env=server_env(FAIRWINS_API_URL=gateway_url),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.stderr: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.url = self._wait_for_url()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace")
            self.stderr.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def _wait_for_url(self) -> str:
        while True:
            try:
                line = self._lines.get(timeout=WAIT)
            except queue.Empty:
                raise AssertionError(f"no 'listening on' line within {WAIT} s:\n{''.join(self.stderr)}") from None
            assert line is not None, f"the server exited before listening:\n{''.join(self.stderr)}"
            match = re.search(r"listening on (http://127\.0\.0\.1:\d+/mcp)", line)
            if match:
                return match.group(1)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(WAIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(WAIT)
            if self.proc.stderr is not None:
                self.proc.stderr.close()


@pytest.fixture
def http_server(sandbox: SandboxGateway) -> Iterator[HttpProcess]:
    server = HttpProcess(sandbox.url)
    try:
        yield server
    finally:
        server.stop()


@SIGNAL_STOP
def test_one_http_server_serves_legacy_and_modern_sessions(http_server: HttpProcess) -> None:
    legacy = LegacyClient(http_server.url, bearer=TOKEN_MEMBER_A)
    init = legacy.initialize()
    assert init.result["protocolVersion"] == LEGACY
    assert "mcp-session-id" not in init.headers

    modern = ModernClient(http_server.url, bearer=TOKEN_MEMBER_A)
    discover = modern.request("server/discover")
    assert discover.status == 200
    assert discover.result["supportedVersions"] == list(SUPPORTED_VERSIONS)

    modern_tools = modern.request("tools/list").result
    legacy_tools = legacy.request("tools/list").result
    assert modern_tools["resultType"] == "complete" and "resultType" not in legacy_tools
    assert modern_tools["tools"] == legacy_tools["tools"]

    meta = modern_meta(progressToken="p-2")
    modern_call = modern.request("tools/call", {"name": "get_profile", "arguments": {}}, meta=meta)
    assert modern_call.status == 200 and modern_call.content_type == "text/event-stream"
    assert [n["method"] for n in modern_call.notifications] and all(
        n["params"]["progressToken"] == "p-2" for n in modern_call.notifications
    )
    _assert_profile(modern_call.result)

    legacy_call = legacy.request("tools/call", {"name": "get_profile", "arguments": {}})
    assert legacy_call.status == 200 and legacy_call.content_type == "application/json"
    _assert_profile(legacy_call.result)
    assert legacy_call.result["structuredContent"] == modern_call.result["structuredContent"]

    # The legacy session goes on after the modern one: nothing was pinned over HTTP.
    assert legacy.request("ping").result == {}
    assert http_server.stop() == 0
