"""Real OAuth clients sign in to the hosted server and read a member's wagers (issue 60).

The official Python SDK client (its `OAuthClientProvider`, tests/sdk/oauth_python.py, in
.venv-sdk) and the TypeScript SDK client (an `OAuthClientProvider` given to its
`StreamableHTTPClientTransport`, tests/sdk/oauth_ts.mjs, the Inspector's package on Node 22)
against the real server process in OAuth mode, with the sandbox authorization server
(tests/sandbox_auth.py) and with node-oidc-provider (tests/oidc/), each trusted by the sandbox
gateway. Each client starts with nothing: the member call's 401 is where it learns where to sign
in; it discovers, registers, sends the user agent to the authorization URL and, once back,
exchanges the code and retries. The user agent is this test: the client prints the URL it would
open, the test submits the consent headlessly (`consent()` of the sandbox, `approve()` of the
harness) and hands the redirect back. The Python client runs in its default `auto` mode (the
2026-07-28 server/discover), the TypeScript client with the 2025-11-25 initialize handshake.

What must hold: the call is answered with member A's wagers, one consent was asked, the gateway
saw exactly one token, the one the client got from the authorization server (for the sandbox, the
one access token it issued), and no token is in the server's log.
"""

from __future__ import annotations

import base64
import hashlib
import json
import queue
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import IO, Any, Final

import pytest

from assistant_contract import ALL_SCOPES
from mcp_server.ops import listener as listening
from tests.conftest import NODE_TOOLS, ROOT, venv_python
from tests.hosts import node, tool
from tests.oidc import harness as oidc
from tests.sandbox_auth import SandboxAuthServer, consent
from tests.sandbox_gateway import ACCOUNT_A, TOKEN_MEMBER_A, SandboxGateway, SeenRequest
from tests.secret_canaries import record_output
from tests.test_http import run_cli, wait_for_url

SDK_PYTHON: Final = venv_python(ROOT / ".venv-sdk")
PY_CLIENT: Final = ROOT / "tests" / "sdk" / "oauth_python.py"
TS_CLIENT: Final = ROOT / "tests" / "sdk" / "oauth_ts.mjs"
TS_DIST: Final = ROOT / ".tools/inspector/node_modules/@modelcontextprotocol/client/dist/"
REDIRECT_URI: Final = oidc.REDIRECT_URI  # never fetched: the consent's redirect is read, not followed
CLIENT_WAIT: Final = 60.0  # seconds for a whole client run: start, sign-in, the call
WAIT: Final = 10.0
WAGERS_PATH: Final = "/v1/member/wagers"


@dataclass
class Setup:
    """The server in OAuth mode, its authorization server and the gateway that trusts that server's tokens."""

    public: str
    issuer: str
    gateway: SandboxGateway
    auth: SandboxAuthServer | None  # the sandbox's, which records what it issued; None for node-oidc-provider
    submit: Callable[[str], str]  # the user agent's part: an authorization URL in, the redirect back out
    log: list[str]  # the server's stderr, line by line

    @property
    def metadata_url(self) -> str:
        parts = urllib.parse.urlsplit(self.public)
        return f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"


def _free_port() -> int:
    sock = listening.listen("127.0.0.1", 0)
    try:
        return int(sock.getsockname()[1])
    finally:
        sock.close()


def _pump(stream: IO[str], put: Callable[[str | None], None]) -> None:
    """Each line of `stream` to `put`, then None at its end."""
    for line in stream:
        put(line)
    put(None)


def _collect(stream: IO[str], into: list[str]) -> None:
    into.extend(line for line in stream)


@contextmanager
def oauth_server(authorization_server: str, label: str = "test_sdk_oauth") -> Iterator[Setup]:
    """The server in OAuth mode as a process, its authorization server, and the gateway that trusts it."""
    port = _free_port()
    public = f"http://127.0.0.1:{port}/mcp"
    with ExitStack() as stack:
        auth: SandboxAuthServer | None = None
        if authorization_server == "sandbox":
            auth = stack.enter_context(SandboxAuthServer(resources=[public]))
            issuer = auth.issuer
            submit: Callable[[str], str] = lambda url: consent(url, "A")  # noqa: E731
        else:
            issuer = stack.enter_context(oidc.running([public], ALL_SCOPES))
            submit = lambda url: oidc.approve(url, REDIRECT_URI)  # noqa: E731
        gateway = stack.enter_context(SandboxGateway())
        gateway.trust_issuer(issuer, audiences=[public])
        argv = ["--http", str(port), "--public-url", public, "--authorization-server", issuer]
        proc = run_cli(argv, {"FAIRWINS_API_URL": gateway.url})
        log: list[str] = []
        drain: threading.Thread | None = None
        try:
            assert wait_for_url(proc, log) == public, "".join(log)
            assert proc.stderr is not None
            drain = threading.Thread(target=_collect, args=(proc.stderr, log), daemon=True)
            drain.start()
            yield Setup(public, issuer, gateway, auth, submit, log)
        finally:
            proc.terminate()
            try:
                proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(WAIT)
            if drain is not None:
                drain.join(WAIT)
            out = proc.stdout.read() if proc.stdout is not None else ""
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            record_output(f"{label}: the OAuth-mode server's stdout and stderr", out + "".join(log))


def run_client(argv: list[str], submit: Callable[[str], str]) -> tuple[dict[str, Any], list[str]]:
    """Run a client script, be its user agent for every authorization URL it prints; its report and those URLs."""
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()
    errors: list[str] = []
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, lines.put), daemon=True),
        threading.Thread(target=_collect, args=(proc.stderr, errors), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    deadline = time.monotonic() + CLIENT_WAIT
    report: dict[str, Any] | None = None
    asked: list[str] = []
    problem: str | None = None
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                problem = f"no answer within {CLIENT_WAIT} s"
                break
            if line is None:
                break
            said = json.loads(line)
            if "authorize" in said:
                asked.append(said["authorize"])
                try:
                    redirect = submit(said["authorize"])
                except Exception as exc:  # the consent refused: the client's stderr says what it sent
                    problem = f"the consent failed: {type(exc).__name__}: {exc}"
                    break
                proc.stdin.write(redirect + "\n")
                proc.stdin.flush()
            else:
                report = said
    finally:
        if problem is not None:
            proc.kill()
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(WAIT)
        for pump in pumps:
            pump.join(WAIT)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    stderr = "".join(errors)
    assert problem is None and proc.returncode == 0 and report is not None, (
        f"the client failed ({problem or f'exit {proc.returncode}'}):\nreport: {report}\nstderr:\n{stderr}"
    )
    return report, asked


def python_client(setup: Setup) -> tuple[dict[str, Any], list[str]]:
    assert SDK_PYTHON.exists(), f"the MCP Python SDK is not installed in {SDK_PYTHON.parent.parent}: run `make test`"
    return run_client([str(SDK_PYTHON), str(PY_CLIENT), setup.public, REDIRECT_URI, "auto"], setup.submit)


def typescript_client(setup: Setup) -> tuple[dict[str, Any], list[str]]:
    tool("inspector")  # installs the pinned Inspector, whose Client is the TypeScript SDK's
    assert TS_DIST.exists(), f"the TypeScript SDK client is not at {TS_DIST}"
    return run_client([node(), str(TS_CLIENT), TS_DIST.as_uri() + "/", setup.public, REDIRECT_URI], setup.submit)


CLIENTS: Final = {"python-sdk": python_client, "typescript-sdk": typescript_client}


def member_wagers(gateway: SandboxGateway) -> list[str]:
    """The ids of member A's wagers on chain 137, read straight from the gateway with A's own token."""
    request = urllib.request.Request(
        f"{gateway.url}{WAGERS_PATH}?chainId=137", headers={"Authorization": f"Bearer {TOKEN_MEMBER_A}"}
    )
    with urllib.request.urlopen(request, timeout=WAIT) as answer:
        body = json.load(answer)
    gateway.seen.clear()
    return [wager["id"] for chain in body["chains"] for wager in chain.get("wagers", [])]


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return decoded


COMBINATIONS: Final = [
    pytest.param("sandbox", "python-sdk", id="sandbox-python-sdk"),
    pytest.param("sandbox", "typescript-sdk", id="sandbox-typescript-sdk", marks=NODE_TOOLS),
    pytest.param("node-oidc-provider", "python-sdk", id="node-oidc-provider-python-sdk", marks=NODE_TOOLS),
    pytest.param("node-oidc-provider", "typescript-sdk", id="node-oidc-provider-typescript-sdk", marks=NODE_TOOLS),
]


@pytest.mark.parametrize(("authorization_server", "client"), COMBINATIONS)
def test_an_sdk_client_signs_in_from_the_401_and_the_gateway_sees_exactly_the_token_issued(
    authorization_server: str, client: str
) -> None:
    with oauth_server(authorization_server) as setup:
        expected = member_wagers(setup.gateway)
        report, asked = CLIENTS[client](setup)
        seen = list(setup.gateway.seen)
        issued = setup.auth.access_tokens() if setup.auth is not None else None
        registered = list(setup.auth.clients) if setup.auth is not None else None
    assert report["listed"] and not report["tokenBeforeCall"], report  # tools/list needs no sign-in
    assert report["isError"] is False, report
    assert expected and report["wagers"] == expected, report  # member A's wagers, as the gateway has them
    # One consent, asked from the 401: for the member scope the challenge named, for this resource.
    assert len(asked) == 1 and report["authorizations"] == 1, asked
    if client == "typescript-sdk":  # its transport ends the first call for the redirect, as the SDK documents
        assert report["firstCall"].startswith("UnauthorizedError"), report
    assert report["clientId"] and report["resource"] == setup.public, report
    if registered is not None:
        assert registered == [report["clientId"]]  # registered once, dynamically, from the 401's discovery
    assert report["scope"] is not None and "read:wagers" in report["scope"].split(), report
    gateway_saw_exactly_the_token_issued(setup, seen, report, issued)


def gateway_saw_exactly_the_token_issued(
    setup: Setup, seen: list[SeenRequest], report: dict[str, Any], issued: list[str] | None
) -> str:
    """The gateway saw one token, on the one member read, the one the client was issued; it, checked."""
    carried = [(s.path, value) for s in seen for value in s.header_values("Authorization")]
    assert [path for path, _ in carried] == [WAGERS_PATH], carried
    scheme, _, token = carried[0][1].partition(" ")
    assert scheme == "Bearer" and hashlib.sha256(token.encode()).hexdigest() == report["tokenSha256"]
    if issued is not None:
        assert issued == [token]  # the sandbox issued exactly one access token: this one
    said = claims(token)
    assert (said["iss"], said["aud"], said["sub"]) == (setup.issuer, setup.public, ACCOUNT_A), said
    assert said["client_id"] == report["clientId"] and "read:wagers" in said["scope"].split(), said
    assert token not in "".join(setup.log), "the server logged the access token"
    return token
