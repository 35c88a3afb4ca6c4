"""What the bundle and install tests drive: the pinned Node CLIs (installed on first use) and one stdio session.

`tool("mcpb")` / `tool("claude-code")` install the CLI into .tools/ when it is missing (the Makefile
does it before `make test`; a test run alone does it here) and fail loudly when they cannot.
`hold_session` speaks to a server started however a host starts it: initialize, tools/list,
prompts/list, a public call and a member call, every answer kept.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from typing import Any, Final

from tests.conftest import ROOT, StdioProcess

INSTALL_TIMEOUT: Final = 600.0
SESSION_WAIT: Final = 30.0  # a cold interpreter on a loaded machine; every wait has this bound


@functools.cache
def node() -> str:
    done = subprocess.run(
        ["bash", str(ROOT / "tests" / "tools" / "node22.sh")], capture_output=True, text=True, timeout=INSTALL_TIMEOUT
    )
    assert done.returncode == 0, f"Node 22 could not be installed:\n{done.stderr}"
    return done.stdout.strip()


@functools.cache
def tool(name: str) -> list[str]:
    """The argv prefix that runs the pinned CLI `name` (mcpb under Node 22; claude-code's own binary)."""
    done = subprocess.run(
        ["bash", str(ROOT / "tests" / "tools" / "npm_tool.sh"), name],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    assert done.returncode == 0, f"{name} could not be installed (tests/tools/npm_tool.sh {name}):\n{done.stderr}"
    path = done.stdout.strip()
    return [node(), path] if path.endswith(".js") else [path]


@dataclass(frozen=True)
class Session:
    initialize: dict[str, Any]
    tools: list[dict[str, Any]]
    prompts: list[dict[str, Any]]
    prompt_texts: dict[str, str]
    public: dict[str, Any]  # get_gateway_status
    member: dict[str, Any]  # get_wagers


def _result(process: StdioProcess, request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    process.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    answer = process.response_to(request_id, timeout=SESSION_WAIT)
    assert "result" in answer, f"{method} answered {answer}; stderr:\n{process.stderr}"
    result: dict[str, Any] = answer["result"]
    return result


def hold_session(process: StdioProcess) -> Session:
    initialize = _result(
        process,
        1,
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host-test", "version": "1"}},
    )
    process.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    tools = _result(process, 2, "tools/list", {})["tools"]
    prompts = _result(process, 3, "prompts/list", {})["prompts"]
    texts = {}
    for i, prompt in enumerate(prompts):
        messages = _result(process, 10 + i, "prompts/get", {"name": prompt["name"], "arguments": {}})["messages"]
        texts[prompt["name"]] = "\n\n".join(m["content"]["text"] for m in messages)
    public = _result(process, 4, "tools/call", {"name": "get_gateway_status", "arguments": {}})
    member = _result(process, 5, "tools/call", {"name": "get_wagers", "arguments": {}})
    return Session(initialize, tools, prompts, texts, public, member)
