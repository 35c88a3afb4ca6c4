"""A string a client chose reaches a log line cut to `records.CLIENT_TEXT` characters, visibly, in both formats.

A real server process is fed 60,000-character values wherever a client chooses one (HTTP method,
path and User-Agent; JSON-RPC method and id; clientInfo name and version), over a real HTTP socket
and over stdio, and its real stderr is read back line by line, as text and as `--log-format json`.
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Any, Final

import pytest

from mcp_server.ops.records import CLIENT_TEXT, clip
from tests.conftest import StdioProcess, server_env
from tests.sandbox_gateway import SandboxGateway
from tests.secret_canaries import record_output
from tests.test_http import run_cli, wait_for_url
from tests.test_readme import TEXT

WAIT: Final = 30.0
LONG: Final = 60_000


def long(start: str) -> str:
    return start + "x" * (LONG - len(start))


def cut(value: str) -> str:
    """What a log line shows of a printable `value` longer than the bound: its start, and how much is left out."""
    return f"{value[:CLIENT_TEXT]}…(+{len(value) - CLIENT_TEXT})"


HTTP_METHOD: Final = long("LONGMETHOD")
PATH: Final = "/" + long("longpath-")
AGENT: Final = long("agent/1.0 ")
NAME: Final = long("client name ")
VERSION: Final = long("1.0.0-")
STRING_ID: Final = long("id-")
RPC_METHOD: Final = long("rpc/method-")
INT_ID: Final = int("7" * 4_000)  # json.loads reads up to 4,300 digits
# A terminal escape, then characters JSON writes as 12 bytes each (a surrogate pair, escaped).
WIDE: Final = "\x1b[2J" + "\U0001d518" * LONG
# Every line, whatever was sent: a JSON line repeats the text form in `message`, and carries at most
# nine client strings of CLIENT_TEXT characters (12 bytes each for WIDE's): under 16 KiB. The 60,000
# characters sent would need 60 KB to 1.4 MB.
LINE_BOUND: Final = 16 * 1024


def messages() -> list[dict[str, Any]]:
    """The JSON-RPC messages that carry long client strings (sent alike over HTTP and stdio)."""

    def initialize(rid: str, name: str, version: str) -> dict[str, Any]:
        info = {"name": name, "version": version}
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info}
        return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params}

    return [
        initialize(STRING_ID, NAME, VERSION),
        {"jsonrpc": "2.0", "id": INT_ID, "method": RPC_METHOD, "params": {}},
        initialize(WIDE, WIDE, WIDE),
    ]


def exchange(port: int, data: bytes) -> bytes:
    """One request on a connection of its own (`Connection: close`); the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def post(port: int, message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False).encode()  # WIDE, escaped, is over the 1 MiB body limit
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nUser-Agent: {AGENT}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return exchange(port, head.encode() + body)


def http_stderr(sandbox: SandboxGateway, fmt: str) -> str:
    proc = run_cli(["--http", "0", "--log-format", fmt], {"FAIRWINS_API_URL": sandbox.url})
    lines: list[str] = []
    try:
        port = int(wait_for_url(proc, lines).rsplit(":", 1)[1].split("/")[0])
        refused = exchange(
            port, f"{HTTP_METHOD} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        assert refused.startswith(b"HTTP/1.1 405 "), refused[:100]
        missing = exchange(port, f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        assert missing.startswith(b"HTTP/1.1 404 "), missing[:100]
        for message in messages():
            answer = post(port, message)
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:100]
        proc.terminate()
        _, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=WAIT)
    assert proc.returncode == 0, err
    return "".join(lines) + err


def stdio_stderr(sandbox: SandboxGateway, fmt: str) -> str:
    argv = [sys.executable, "-m", "mcp_server", "--log-format", fmt]
    process = StdioProcess(argv, server_env(FAIRWINS_API_URL=sandbox.url))
    try:
        for message in messages():
            process.send(message)
            assert process.response_to(message["id"])
        process.close_stdin()
        assert process.wait(WAIT) == 0, process.stderr
        return process.stderr
    finally:
        process.kill()


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_every_client_string_in_a_log_line_is_cut_visibly_and_every_line_is_bounded(
    sandbox: SandboxGateway, transport: str, fmt: str
) -> None:
    stderr = (http_stderr if transport == "http" else stdio_stderr)(sandbox, fmt)
    record_output(f"{transport} {fmt} stderr with long client strings", stderr)
    lines = stderr.splitlines()
    assert lines and all(len(line.encode()) < LINE_BOUND for line in lines), max(len(x.encode()) for x in lines)
    shown = [cut(NAME), cut(VERSION), cut(STRING_ID), cut(RPC_METHOD), cut(str(INT_ID))]
    if transport == "http":
        shown += [cut(HTTP_METHOD), cut(PATH)]
    if fmt == "text":
        for value in shown:
            assert any(value in line for line in lines), value[:40]
        assert "\x1b" not in stderr and "?[2J\U0001d518" in stderr  # the escape made harmless, the rest kept
        return
    records = [json.loads(line) for line in lines]
    by_id = {r["rpcId"]: r for r in records if "rpcId" in r}
    init, unknown = by_id[cut(STRING_ID)], by_id[cut(str(INT_ID))]  # the huge integer id is written as cut text
    assert init["client"] == {"name": cut(NAME), "version": cut(VERSION)}
    assert unknown["method"] == cut(RPC_METHOD) and unknown["errorCode"] == -32601
    (wide,) = [r for r in records if r.get("rpcId", "").startswith("?[2J\U0001d518")]
    assert wide["client"]["name"] == wide["rpcId"] == clip(WIDE)
    assert wide["rpcId"].endswith(f"…(+{len(WIDE) - CLIENT_TEXT})") and len(wide["rpcId"]) < 2 * CLIENT_TEXT
    if transport == "http":
        (refused,) = [r for r in records if r.get("httpRequest", {}).get("status") == 405]
        assert refused["httpRequest"]["requestMethod"] == cut(HTTP_METHOD)
        assert refused["message"].startswith(cut(HTTP_METHOD) + " /mcp 405 ")
        (missing,) = [r for r in records if r.get("httpRequest", {}).get("status") == 404]
        assert missing["httpRequest"]["requestUrl"] == cut(PATH)
        assert init["httpRequest"]["userAgent"] == cut(AGENT)


def test_clip_keeps_a_short_printable_string_and_marks_what_it_cuts() -> None:
    assert clip("claude-code/2.1.332") == "claude-code/2.1.332"
    assert clip("x" * CLIENT_TEXT) == "x" * CLIENT_TEXT
    assert clip("x" * (CLIENT_TEXT + 1)) == "x" * CLIENT_TEXT + "…(+1)"
    assert clip("a\nb\x00c\u2028") == "a?b?c?"  # one line, whatever it held
    assert clip("") == ""


def test_the_readme_states_the_bound_the_code_keeps() -> None:
    readme = TEXT  # README.md and docs/*.md: the bound is stated where records and limits are
    assert f"(method, path, `User-Agent`, id, `clientInfo`) | {CLIENT_TEXT} characters | fixed |" in readme
    assert f"cut to {CLIENT_TEXT} characters" in readme
