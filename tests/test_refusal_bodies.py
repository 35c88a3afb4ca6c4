"""What a member's client shows when the HTTP door refuses a request (issue 34, point 6).

Every refusal's body is a JSON-RPC error response (docs/security.md, "What it refuses"): the
sentence in `error.message`, the refusal's code in `error.data.error`, the request's id when its
body was read. Before, the body was `{"error", "message"}`, which neither official SDK client
reads: the Python SDK showed "Server returned an error response". Here both official clients,
as a member runs them (the Python SDK in .venv-sdk; the TypeScript SDK's Client, the package the
MCP Inspector runs on, under Node 22), are refused three ways over a real socket: a bearer holding
an escape (400 escaped_bearer), an origin not allowed (403), an X-PAYMENT over 16 KiB (400 payment_too_large).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from collections.abc import Iterator
from typing import Any, Final

import pytest

from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http.response import REFUSAL_CODES
from mcp_server.transports.http.server import McpHTTPServer
from mcp_server.wire.jsonrpc import INVALID_REQUEST
from tests.conftest import NODE_TOOLS, ROOT
from tests.hosts import node, tool
from tests.inspector import LAUNCHER
from tests.mcp_http import REFUSAL_RPC_CODES, post, refusal, serving
from tests.sandbox_gateway import SandboxGateway
from tests.test_inspector import inspector_env
from tests.test_shared_token import SDK_PYTHON

PY_REFUSALS: Final = ROOT / "tests" / "sdk" / "http_refusals.py"
TS_REFUSALS: Final = ROOT / "tests" / "sdk" / "ts_refusals.mjs"
TS_CLIENT: Final = ROOT / ".tools/inspector/node_modules/@modelcontextprotocol/client/dist/index.mjs"
PAYMENT: Final = "A" * 20_000
# (headers sent on every request, HTTP status, JSON-RPC code, refusal code, words of the sentence)
REFUSED: Final = [
    ({"Authorization": "Bearer fw1.Zq8%2FKt3R%2BmXp7LwYd"}, 400, -32010, "escaped_bearer", "holds an escape (%2F)"),
    ({"Origin": "https://evil.example"}, 403, -32011, "origin_not_allowed", "This origin is not allowed"),
    ({"X-PAYMENT": PAYMENT}, 400, -32600, "payment_too_large", "The X-PAYMENT header is 20,000 bytes"),
]


@pytest.fixture(scope="module")
def server() -> Iterator[McpHTTPServer]:
    with SandboxGateway() as gateway, serving(build_dispatcher(Config(api_url=gateway.url, timeout=5.0))) as started:
        yield started


def url(server: McpHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/mcp"


def test_each_refusal_is_a_json_rpc_error_with_its_code_and_sentence_over_the_wire(server: McpHTTPServer) -> None:
    call = {"jsonrpc": "2.0", "id": "call-1", "method": "tools/call", "params": {"name": "get_gateway_status"}}
    for headers, status, rpc_code, code, words in REFUSED:
        answer = post(url(server), call, headers)
        request_id = None if status == 403 else "call-1"  # refused at the gate, before the body was read
        assert answer.status == status and refusal(answer.body, request_id) == (
            code,
            answer.response["error"]["message"],
        )
        assert answer.response["error"]["code"] == rpc_code and words in answer.response["error"]["message"]
    # Refused before anything was read of the request, and on another path: the same shape, id null.
    head_only = post(url(server), b"{}", {"Content-Type": "text/plain"})
    assert head_only.status == 415 and refusal(head_only.body)[0] == "unsupported_media_type"
    elsewhere = post(url(server).replace("/mcp", "/nowhere"), b"{}", {})
    assert elsewhere.status == 404 and refusal(elsewhere.body)[0] == "not_found"


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["handshake-2025-11-25", "discover-2026-07-28"])
def test_the_python_sdk_client_shows_the_member_the_refusals_sentence(server: McpHTTPServer, mode: str) -> None:
    assert SDK_PYTHON.exists(), f"the MCP Python SDK is not installed in {SDK_PYTHON.parent.parent}: run `make test`"
    done = subprocess.run(
        [str(SDK_PYTHON), str(PY_REFUSALS), url(server)],
        cwd=ROOT,
        env=dict(os.environ),
        input="".join(json.dumps([mode, "get_gateway_status", headers]) + "\n" for headers, *_ in REFUSED),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"the SDK session failed:\n{done.stdout}\n{done.stderr}"
    shown: list[dict[str, Any]] = json.loads(done.stdout)
    for (_, _, rpc_code, code, words), seen in zip(REFUSED, shown, strict=True):
        assert seen.get("code") == rpc_code and words in seen.get("message", ""), seen
        assert seen["data"] == {"error": code}, seen
        assert "Server returned an error response" not in seen["message"]


@NODE_TOOLS
def test_the_typescript_sdk_client_shows_the_member_the_refusals_sentence(server: McpHTTPServer) -> None:
    tool("inspector")  # installs the pinned Inspector, whose Client is the TypeScript SDK's
    assert TS_CLIENT.exists(), f"the TypeScript SDK client is not at {TS_CLIENT}"
    done = subprocess.run(
        [node(), str(TS_REFUSALS), TS_CLIENT.as_uri(), url(server)],
        cwd=ROOT,
        input="".join(json.dumps(["get_gateway_status", headers]) + "\n" for headers, *_ in REFUSED),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"the TypeScript client failed:\n{done.stdout}\n{done.stderr}"
    shown: list[dict[str, Any]] = json.loads(done.stdout)
    for (_, status, rpc_code, code, words), seen in zip(REFUSED, shown, strict=True):
        assert "thrown" in seen and words in seen["message"], seen  # the sentence, in what the client throws
        # It quotes the body it was given: the JSON-RPC error, whole.
        body = json.loads(seen["data"]["text"])
        assert seen["data"]["status"] == status and body["error"]["code"] == rpc_code, seen
        assert body["error"]["data"] == {"error": code} and words in body["error"]["message"]


def test_the_code_table_is_the_one_the_docs_and_the_test_client_know() -> None:
    codes = {INVALID_REQUEST, *REFUSAL_CODES.values()}
    assert codes == REFUSAL_RPC_CODES
    assert all(-32099 <= code <= -32000 for code in codes - {INVALID_REQUEST})  # JSON-RPC's server range
    security = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    assert all(f"`{code}`" in security for code in codes)
    http = ROOT / "mcp_server" / "transports" / "http"
    written = "".join(p.read_text(encoding="utf-8") for p in http.glob("*.py") if p.name != "response.py")
    assert all(f'"{name}"' in written for name in REFUSAL_CODES), (
        "each refusal the table names is one the server writes"
    )


@NODE_TOOLS
@pytest.mark.parametrize(("headers", "status", "rpc_code", "code", "words"), REFUSED, ids=[r[3] for r in REFUSED])
def test_the_inspector_cli_shows_the_member_the_refusals_sentence(
    server: McpHTTPServer,
    tmp_path: pathlib.Path,
    headers: dict[str, str],
    status: int,
    rpc_code: int,
    code: str,
    words: str,
) -> None:
    # The Inspector answers any 401 with its OAuth flow ("auth_required"), whatever the body says:
    # this is why a bearer the server will not send is a 400, not a 401 (docs/security.md).
    tool("inspector")
    (name, value), *_ = headers.items()
    argv = [node(), str(LAUNCHER), "--cli", url(server), "--transport", "http", "--header", f"{name}: {value}"]
    done = subprocess.run(
        [*argv, "--method", "tools/list"],
        cwd=tmp_path,
        env=inspector_env(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    shown = done.stdout + done.stderr
    assert done.returncode != 0 and words in shown and f'\\"error\\":\\"{code}\\"' in shown, shown[:600]
