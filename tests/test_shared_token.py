"""A caller's own token wins over a shared FAIRWINS_API_TOKEN: the official SDK client against a real process.

`--allow-shared-token` lets the environment's token serve HTTP callers that send none; a caller
that sends its own `Authorization: Bearer` is served as itself, in either era, and the token it
sent is the one the gateway sees. The process names the shared token in its log only redacted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any, Final

from mcp_server.ops.logs import redact
from tests.balancer import Process
from tests.conftest import ROOT, SIGNAL_STOP, server_env, venv_python
from tests.sandbox_gateway import ACCOUNT_A, ACCOUNT_B, TOKEN_MEMBER_A, TOKEN_MEMBER_B, SandboxGateway

SDK_PYTHON: Final = venv_python(ROOT / ".venv-sdk")
CALLS: Final = ROOT / "tests" / "sdk" / "http_calls.py"


def sdk_calls(url: str, wanted: list[tuple[str, str, str | None]]) -> list[dict[str, Any]]:
    assert SDK_PYTHON.exists(), f"the MCP Python SDK is not installed in {SDK_PYTHON.parent.parent}: run `make test`"
    done = subprocess.run(
        [str(SDK_PYTHON), str(CALLS), url],
        cwd=ROOT,
        env=dict(os.environ),
        input="".join(json.dumps(list(call)) + "\n" for call in wanted),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"the SDK session failed:\n{done.stdout}\n{done.stderr}"
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


@SIGNAL_STOP
def test_a_real_client_sending_its_own_token_is_served_as_itself_despite_a_shared_token(
    sandbox: SandboxGateway,
) -> None:
    argv = [sys.executable, "-m", "mcp_server", "--http", "0", "--allow-shared-token"]
    server = Process(
        "shared-token server", argv, server_env(FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_B)
    )
    try:
        url = server.wait_output(r"listening on (http://127\.0\.0\.1:\d+/mcp)").group(1)
        own_legacy, own_modern, shared = sdk_calls(
            url,
            [
                ("legacy", "get_profile", TOKEN_MEMBER_A),
                ("auto", "get_profile", TOKEN_MEMBER_A),
                ("legacy", "get_profile", None),
            ],
        )
        server.signal(signal.SIGTERM)
        assert server.wait() == 0
    finally:
        server.kill()
    for own in (own_legacy, own_modern):
        assert own["isError"] is False and own["structuredContent"]["account"] == ACCOUNT_A, own
    assert shared["isError"] is False and shared["structuredContent"]["account"] == ACCOUNT_B, shared
    sent = [r.header("Authorization") for r in sandbox.seen if r.path == "/v1/member/me"]
    assert sent == [f"Bearer {TOKEN_MEMBER_A}", f"Bearer {TOKEN_MEMBER_A}", f"Bearer {TOKEN_MEMBER_B}"]
    # The log: the shared token is named at start, redacted; neither member's token is written.
    assert f"token {redact(TOKEN_MEMBER_B)}" in server.output
    assert TOKEN_MEMBER_A not in server.output and TOKEN_MEMBER_B not in server.output
