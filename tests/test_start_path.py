"""What the stdio start path loads (behaviour, never timing): no HTTP server code; TLS only at the first https call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from mcp_server.setup.config import argument_parser, parse_args
from tests.conftest import ROOT
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.tls_fixtures import CA_FILE, server_context

# Printed to stderr as the process exits (stdout is the wire): every module it loaded.
REPORT_MODULES = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
    "from mcp_server.setup.cli import main\n"
    "raise SystemExit(main([]))\n"
)
# Serving stdio needs none of these: the HTTP server, http.client and its email parser, the
# installer; nor hashlib, hmac and OpenSSL's libcrypto (_hashlib), which `secrets` loads (issue 31).
# stdio runs on the HTTP transport's event loop and driver (transports/http/loop.py, driver.py),
# so asyncio and the `ssl` module it imports are loaded; a TLS context (upstream/tls.py, the
# trust store read) still waits for the first https call.
NEVER_ON_STDIO = (
    "mcp_server.transports.http.server",
    "mcp_server.transports.http.gate",
    "mcp_server.transports.http.connection",
    "mcp_server.upstream.tls",
    "http.server",
    "socketserver",
    "http.client",
    "email",
    "urllib.request",
    "mcp_server.setup.install",
    "mcp_server.setup.client_configs",
    "secrets",
    "hashlib",
    "_hashlib",
    "hmac",
)


def stdio_modules(
    api_url: str, messages: list[dict[str, Any]], **extra_env: str
) -> tuple[list[dict[str, Any]], set[str]]:
    """Run the stdio server over `messages` then EOF: (its answers, the modules it had loaded at exit)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRWINS_") and "proxy" not in k.lower()}
    env.update(FAIRWINS_API_URL=api_url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A, **extra_env)
    done = subprocess.run(
        [sys.executable, "-c", REPORT_MODULES],
        input=b"".join(json.dumps(m).encode() + b"\n" for m in messages),
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    report = next(line for line in done.stderr.decode().splitlines() if line.startswith("MODULES "))
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    return answers, set(report.split()[1:])


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}}


def test_stdio_answers_a_tool_call_without_loading_http_server_or_tls_code(sandbox: SandboxGateway) -> None:
    answers, modules = stdio_modules(sandbox.url, [INITIALIZE, CALL])
    by_id = {a["id"]: a for a in answers}
    assert by_id[1]["result"]["serverInfo"]["name"] == "fairwins-mcp"
    assert by_id[2]["result"]["isError"] is False, by_id[2]
    assert "mcp_server.upstream.http1" in modules  # the gateway was really called
    # The gateway client's event loop (asyncio) imports ssl itself, at the first call; this
    # server's TLS code stays unloaded for an http:// gateway.
    loaded = {m for m in modules if m.split(".")[0] in NEVER_ON_STDIO or m in NEVER_ON_STDIO}
    assert loaded <= {"ssl", "_ssl"} and "mcp_server.upstream.tls" not in modules


def test_an_https_gateway_loads_tls_only_once_it_connects() -> None:
    answers, modules = stdio_modules("https://relay.fairwins.invalid", [INITIALIZE])
    assert answers[0]["result"]["protocolVersion"] == "2025-06-18"
    assert not {"mcp_server.upstream.tls", "http.client", "email", "urllib.request"} & modules


def test_over_stdio_an_https_gateway_trusted_through_ssl_cert_file_answers_and_tls_loads_at_the_first_call() -> None:
    # The whole member's path in a process of its own: SSL_CERT_FILE names a private CA, nothing else.
    with SandboxGateway(tls=server_context()) as gateway:
        started, at_start = stdio_modules(gateway.url, [INITIALIZE], SSL_CERT_FILE=str(CA_FILE))
        answers, after_call = stdio_modules(gateway.url, [INITIALIZE, CALL], SSL_CERT_FILE=str(CA_FILE))
        handshakes = gateway.handshakes
    assert started[0]["result"]["serverInfo"]["name"] == "fairwins-mcp"
    assert "mcp_server.upstream.tls" not in at_start  # a start never pays for a TLS context
    by_id = {a["id"]: a for a in answers}
    assert by_id[2]["result"]["isError"] is False, by_id[2]
    assert {"ssl", "mcp_server.upstream.tls"} <= after_call
    assert not {"http.client", "email", "mcp_server.streamable_http"} & after_call
    assert handshakes == 1


@pytest.mark.parametrize("argv", [[], ["serve"]])
def test_no_flags_parse_to_exactly_what_the_parser_would_give(argv: list[str]) -> None:
    # parse_args([]) skips building the parser (a few ms of every start): it must not skip a default.
    assert parse_args([]) == argument_parser().parse_args(argv)
