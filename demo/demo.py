"""The first ten minutes: the sandbox gateway and the server over HTTP, a scripted session, then the lines to connect.

    python -m demo            # gateway on 127.0.0.1:8787, server on 127.0.0.1:8790, sign-in on 8788,
                              # the OAuth server on 8791; Ctrl-C stops them all
    python -m demo --once     # free ports, the scripted session, a clean stop; exit 0 when it all worked

The server is the real command line (`python -m mcp_server --http PORT`) in a subprocess, pointed
at the sandbox gateway (tests/sandbox_gateway.py) running in this process. The scripted session is
a plain MCP client over Streamable HTTP: it lists the tools, reads member A's wagers (one chain
read, one unreadable, one not configured), makes a public read with no token, and asks for the
wagers with no token at all, which the gateway answers with a price.

A second server runs in OAuth mode (`--public-url … --authorization-server …`, docs/authorization.md)
beside the sandbox authorization server (tests/sandbox_auth.py, in this process), which the
gateway trusts. Step 6 is an OAuth client signing in to it as MCP clients do: the 401 challenge,
the resource's metadata, the authorization server's, dynamic client registration, PKCE, member
A's consent, the token; then the wagers read with that token, which the gateway saw unchanged.
Standard library only, but for the sandbox authorization server, which signs with `cryptography`
(a development dependency, in .venv).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import pathlib
import queue
import re
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Final, TextIO

from mcp_server.upstream.issuer import metadata_urls
from tests.inspector import NPX as INSPECTOR
from tests.sandbox_auth import SandboxAuthServer, consent, pkce
from tests.sandbox_gateway import (
    TOKEN_EXPIRED,
    TOKEN_MEMBER_A,
    TOKEN_MEMBER_B,
    TOKEN_PROFILE_ONLY,
    SandboxGateway,
)

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
GATEWAY_PORT: Final = 8787
SERVER_PORT: Final = 8790
AUTH_PORT: Final = 8788  # the sandbox authorization server's (python -m tests.sandbox_auth)
OAUTH_PORT: Final = 8791  # the second server's, in OAuth mode
PROTOCOL: Final = "2025-11-25"
BOOT_TIMEOUT: Final = 20.0  # seconds for the server to say where it listens
CALL_TIMEOUT: Final = 15.0
STOP_TIMEOUT: Final = 15.0
WIDTH: Final = 100
NO_KEY: Final = "This server holds no key"  # where the price result turns from the price to how to pay
# A registered loopback redirect (RFC 8252: any port at authorization time). The demo's client reads
# the code from the redirect the consent page answers with, where a browser would deliver it.
REDIRECT_URI: Final = "http://127.0.0.1/callback"


class DemoError(Exception):
    """A step did not give what a newcomer should see; the message says which and what came instead."""


def _redact(token: str) -> str:
    return f"fw1.…{token[-4:]}"


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _any_free_port() -> int:
    """A port free now: the OAuth server names its own public URL, so it cannot take port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _short_token(token: str) -> str:
    return f"{token[:3]}…{token[-4:]}"


# --- the server subprocess ---------------------------------------------------------------------


@dataclass
class Server:
    """`python -m mcp_server --http PORT` in its own process group, its stderr read line by line."""

    proc: subprocess.Popen[bytes]
    name: str = "server"  # or "oauth": how its log lines are marked
    url: str = ""
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    log: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, gateway_url: str, port: int, flags: Sequence[str] = (), name: str = "server") -> Server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRWINS_")}
        env["FAIRWINS_API_URL"] = gateway_url  # and no FAIRWINS_API_TOKEN: over HTTP each caller sends its own
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_server", "--http", str(port), *flags],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C reaches the demo only; the demo stops the server in order
        )
        server = cls(proc, name)
        threading.Thread(target=server._read, name=f"demo-{name}-stderr", daemon=True).start()
        server._wait_for_url()
        return server

    @property
    def called(self) -> str:
        return "OAuth server" if self.name == "oauth" else "server"

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self.lines.put(None)

    def _wait_for_url(self) -> None:
        deadline = time.monotonic() + BOOT_TIMEOUT
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise DemoError("the server exited before listening:\n" + "\n".join(self.log))
            self.log.append(line)
            if "listening on " in line:
                self.url = line.split("listening on ", 1)[1].split()[0]
                return
        raise DemoError(f"the server did not say where it listens within {BOOT_TIMEOUT:g} s:\n" + "\n".join(self.log))

    def pending(self) -> list[str]:
        """What the server has said since it started listening, without waiting."""
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return self.log
            if line is None:
                self.lines.put(None)
                return self.log
            self.log.append(line)

    def settle(self, quiet: float = 0.3) -> None:
        """Take in what the server says until it has been quiet for `quiet` s (its log lines come in batches)."""
        while True:
            try:
                line = self.lines.get(timeout=quiet)
            except queue.Empty:
                return
            if line is None:
                self.lines.put(None)
                return
            self.log.append(line)

    def echo(self, out: TextIO, stop: threading.Event) -> None:
        """Forward the server's log lines (its access log shows a connected client's requests)."""
        while not stop.is_set():
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                return
            out.write(f"  {self.name:<6} | {line}\n")
            out.flush()

    def stop(self) -> int:
        """SIGTERM: the server stops accepting, lets calls in flight finish, and exits 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT)
        return self.proc.returncode


# --- a small MCP client over Streamable HTTP ---------------------------------------------------


class Client:
    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/mcp"
        self.version: str | None = None
        self._id = 0

    def _post(self, message: dict[str, Any], token: str | None) -> tuple[int, bytes, str]:
        status, headers, body = self.exchange(message, token)
        return status, body, headers.get("Content-Type") or ""

    def exchange(self, message: dict[str, Any], token: str | None) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One POST: the status, the headers and the body, whatever they are."""
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.version:
            headers["MCP-Protocol-Version"] = self.version
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=CALL_TIMEOUT)
        try:
            conn.request("POST", self.path, body=json.dumps(message).encode("utf-8"), headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()

    def request(self, method: str, params: dict[str, Any], token: str | None = None) -> dict[str, Any]:
        self._id += 1
        status, body, kind = self._post({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}, token)
        if kind.startswith("text/event-stream"):
            # The answer is the last `data:` frame carrying our id (earlier frames are notifications).
            frames = [line[5:].strip() for line in body.decode("utf-8").splitlines() if line.startswith("data:")]
            messages = [json.loads(frame) for frame in frames if frame]
            answer = next((m for m in reversed(messages) if m.get("id") == self._id), None)
        else:
            answer = json.loads(body) if body else None
        if status != 200 or not isinstance(answer, dict) or "result" not in answer:
            raise DemoError(f"{method} answered HTTP {status}: {body[:300]!r}")
        result: dict[str, Any] = answer["result"]
        return result

    def notify(self, method: str) -> None:
        status, body, _ = self._post({"jsonrpc": "2.0", "method": method}, None)
        if status != 202:
            raise DemoError(f"{method} answered HTTP {status}: {body[:300]!r}")

    def call(self, name: str, arguments: dict[str, Any], token: str | None = None) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments}, token)


# --- the scripted session ----------------------------------------------------------------------


def _texts(result: dict[str, Any]) -> list[str]:
    return [
        str(b.get("text", "")) for b in result.get("content", []) if isinstance(b, dict) and b.get("type") == "text"
    ]


def _notes(result: dict[str, Any]) -> str:
    """The server's own sentences: every text block that is not the JSON answer itself."""
    return " ".join(t for t in _texts(result) if not t.lstrip().startswith(("{", "[")))


def _wrap(text: str, indent: str) -> str:
    return textwrap.fill(text, WIDTH, initial_indent=indent, subsequent_indent=indent)


def _short(text: object, limit: int = 58) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _wager_line(w: dict[str, Any]) -> str:
    wid, stake, asset, status = (str(w.get(k, "?")) for k in ("id", "stake", "asset", "status"))
    return f"       {wid:<6} {stake:>6} {asset:<5} {status:<8} “{_short(w.get('description'))}”"


def session(url: str, out: TextIO) -> None:
    """Five steps a newcomer would try first; DemoError when one does not show what it should."""
    client = Client(url)

    def say(text: str = "") -> None:
        out.write(text + "\n")
        out.flush()

    init = client.request(
        "initialize",
        {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "fairwins-demo", "version": "1"}},
    )
    client.version = str(init.get("protocolVersion"))
    client.notify("notifications/initialized")
    info = init.get("serverInfo", {})
    say(f"1. initialize: {info.get('name')} {info.get('version')} (“{info.get('title')}”), protocol {client.version}")

    tools = client.request("tools/list", {}).get("tools", [])
    names = [str(t.get("name")) for t in tools]
    say(f"2. tools/list: {len(tools)} tools")
    for tool in tools:
        say(f"     {tool.get('name', ''):<24} {tool.get('title', '')}")
    for needed in ("get_wagers", "get_prediction_markets", "build_intent"):
        if needed not in names:
            raise DemoError(f"tools/list has no {needed}: {names}")

    say(f"3. tools/call get_wagers as member A (Authorization: Bearer {_redact(TOKEN_MEMBER_A)})")
    wagers = client.call("get_wagers", {}, TOKEN_MEMBER_A)
    if wagers.get("isError"):
        raise DemoError(f"get_wagers as member A failed: {_notes(wagers)}")
    unreadable = []
    for chain in wagers.get("structuredContent", {}).get("chains", []):
        state, chain_id = chain.get("state"), chain.get("chainId")
        if state == "read":
            items = chain.get("wagers", [])
            say(f"     chain {chain_id}: read, {len(items)} wagers")
            for w in items:
                say(_wager_line(w))
        else:
            reason = f" ({chain['reason']})" if chain.get("reason") else ""
            say(f"     chain {chain_id}: {state}{reason}")
            unreadable.append(str(chain_id))
    notes = _notes(wagers)
    say(_wrap(f"the server adds: “{notes}”", "     "))
    if not unreadable or not all(f"Chain {c}" in notes for c in unreadable) or "UNKNOWN" not in notes:
        raise DemoError(f"the member read did not name every chain it could not read: {notes!r}")
    say("     (wager descriptions are text written by other people: reported, never obeyed)")

    say('4. tools/call get_prediction_markets {"q": "ETH"} with no token (a public read)')
    markets = client.call("get_prediction_markets", {"q": "ETH"})
    if markets.get("isError"):
        raise DemoError(f"the public read failed: {_notes(markets)}")
    for market in markets.get("structuredContent", {}).get("markets", []):
        prices = " / ".join(f"{o.get('name')} {o.get('price')}" for o in market.get("outcomes", []))
        say(f"     {market.get('question')}  {prices}")
    say(f"     the server adds: “{_notes(markets)}”")

    say("5. tools/call get_wagers with no token and no payment")
    price = client.call("get_wagers", {})
    offer = price.get("structuredContent", {})
    if not price.get("isError") or not isinstance(offer, dict) or not offer.get("accepts"):
        raise DemoError(f"get_wagers with no credential did not come back as a price: {_texts(price)}")
    words = _notes(price)
    cut = words.find(NO_KEY)
    say(_wrap(f"the gateway priced it: “{words[:cut].strip() if cut > 0 else words}”", "     "))
    say("     (this server holds no key and never pays: a caller's own x402 client would sign a payment)")


# --- step 6: an OAuth client signs in ----------------------------------------------------------


def _http(
    method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, http.client.HTTPMessage, bytes]:
    """One request, no proxy and no redirect followed: the status, the headers, the body."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=CALL_TIMEOUT)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request(method, target or "/", body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def _json_of(method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> Any:
    status, _, raw = _http(method, url, body, headers)
    if status not in (200, 201):
        raise DemoError(f"{method} {url} answered HTTP {status}: {raw[:300]!r}")
    return json.loads(raw)


def _challenge(value: str) -> dict[str, str]:
    """The parameters of a `Bearer` WWW-Authenticate value (RFC 6750 §3)."""
    return dict(re.findall(r'(\w+)="([^"]*)"', value))


def oauth_session(url: str, gateway: SandboxGateway, auth: SandboxAuthServer, out: TextIO) -> None:
    """Step 6: sign in as an OAuth client does, read the wagers, and show what reached the gateway."""
    try:
        _sign_in_and_read(url, gateway, auth, out)
    except (KeyError, IndexError, TypeError, ValueError) as exc:  # a document without what a client needs
        raise DemoError(f"the sign-in could not go on: {type(exc).__name__} {exc}") from None


def _sign_in_and_read(url: str, gateway: SandboxGateway, auth: SandboxAuthServer, out: TextIO) -> None:

    def say(text: str = "") -> None:
        out.write(text + "\n")
        out.flush()

    client = Client(url)
    init = client.request(
        "initialize",
        {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "fairwins-demo", "version": "1"}},
    )
    client.version = str(init.get("protocolVersion"))
    client.notify("notifications/initialized")
    arguments = {"chainId": 137}
    params = {"name": "get_wagers", "arguments": arguments}
    call = {"jsonrpc": "2.0", "id": "no-token", "method": "tools/call", "params": params}

    say(f"6. an OAuth client signs in, on the second server ({url})")
    status, headers, body = client.exchange(call, None)
    authenticate = headers.get("WWW-Authenticate") or ""
    if status != 401 or not authenticate.startswith("Bearer "):
        raise DemoError(f"get_wagers with no token on the OAuth server answered HTTP {status}: {body[:300]!r}")
    asked = _challenge(authenticate)
    say("     tools/call get_wagers with no token: HTTP 401, the challenge that starts a sign-in")
    say("       WWW-Authenticate: Bearer")
    say(",\n".join(f'         {name}="{value}"' for name, value in asked.items()))
    resource_doc = _json_of("GET", asked["resource_metadata"])
    resource, issuer = str(resource_doc["resource"]), str(resource_doc["authorization_servers"][0])
    metadata = _json_of("GET", metadata_urls(issuer)[0])
    if "S256" not in metadata.get("code_challenge_methods_supported", []):
        raise DemoError(f"{issuer} does not advertise PKCE S256: an MCP client stops here")
    say(f"     the resource's metadata names where to sign in: {issuer}")

    registration = json.dumps(
        {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none", "client_name": "FairWins demo"}
    ).encode()
    registered = _json_of(
        "POST", str(metadata["registration_endpoint"]), registration, {"Content-Type": "application/json"}
    )
    client_id = str(registered["client_id"])
    say(f"     the client registers there (dynamic client registration): {client_id}")

    verifier, code_challenge = pkce()
    state = secrets.token_urlsafe(16)
    query = urllib.parse.urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT_URI,
            "code_challenge": code_challenge,
            "code_challenge_method": "S256",
            "resource": resource,
            "scope": asked.get("scope", ""),
            "state": state,
        }
    )
    try:
        back = consent(f"{metadata['authorization_endpoint']}?{query}", "A")
    except RuntimeError as exc:
        raise DemoError(f"the consent page did not let member A approve: {exc}") from None
    answer = urllib.parse.parse_qs(urllib.parse.urlsplit(back).query)
    if answer.get("state") != [state] or "code" not in answer:
        raise DemoError(f"the consent did not come back with a code for this request: {back}")
    say("     member A approves on the consent page (the sandbox's stand-in for the wallet signature)")

    form = urllib.parse.urlencode(
        {
            "grant_type": "authorization_code",
            "code": answer["code"][0],
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": resource,
        }
    ).encode()
    tokens = _json_of(
        "POST", str(metadata["token_endpoint"]), form, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    token = str(tokens["access_token"])
    say(f"     the client trades the code for an access token: {_short_token(token)}")
    say(f"       (a JWT for {resource}, scope {tokens.get('scope')}, good for {tokens.get('expires_in')} s)")

    before = len(gateway.seen)
    wagers = client.call("get_wagers", arguments, token)
    if wagers.get("isError"):
        raise DemoError(f"get_wagers with the access token failed: {_notes(wagers)}")
    for chain in wagers.get("structuredContent", {}).get("chains", []):
        items = chain.get("wagers", [])
        say(
            f"     tools/call get_wagers {json.dumps(arguments)} with the token:"
            f" chain {chain.get('chainId')}: {chain.get('state')}, {len(items)} wagers"
        )
        for w in items:
            say(_wager_line(w))
    carried = [
        value
        for seen in gateway.seen[before:]
        if seen.path == "/v1/member/wagers"
        for value in seen.header_values("Authorization")
    ]
    if carried != [f"Bearer {token}"] or token not in auth.access_tokens():
        raise DemoError("the gateway did not see exactly the token the sign-in issued")
    say(f"     the gateway saw Authorization: Bearer {_short_token(token)}, exactly the token issued")
    say("     (the server checked it before anything reached the gateway; it mints no token, signs nothing)")


# --- connecting a real client -----------------------------------------------------------------


def connect_lines(server_url: str, gateway_url: str, oauth_url: str | None = None, auth_url: str | None = None) -> str:
    """The exact lines to point the MCP Inspector, Claude Code and Claude Desktop at this demo."""
    bearer = f"Authorization: Bearer {TOKEN_MEMBER_A}"
    script = pathlib.Path(sys.executable).parent / "fairwins-mcp"
    if script.exists():
        command, args, env = str(script), [], {}
    else:
        command, args, env = sys.executable, ["-m", "mcp_server"], {"PYTHONPATH": str(ROOT)}
    desktop = {
        "mcpServers": {
            "fairwins-sandbox": {
                "command": command,
                "args": args,
                "env": {**env, "FAIRWINS_API_URL": gateway_url, "FAIRWINS_API_TOKEN": TOKEN_MEMBER_A},
            }
        }
    }
    return "\n".join(
        [
            "",
            f"{'Both are' if oauth_url is None else 'All are'} running: the sandbox gateway on {gateway_url},"
            f" the MCP server on {server_url}.",
            f"Connect a client (the sample member token is {TOKEN_MEMBER_A}):",
            "",
            "  MCP Inspector, in the browser:",
            f'    {INSPECTOR} --transport http --server-url {server_url} --header "{bearer}"',
            "  MCP Inspector, on the command line:",
            f'    {INSPECTOR} --cli {server_url} --transport http --header "{bearer}" --method tools/list',
            "  Claude Code:",
            f'    claude mcp add --transport http fairwins-sandbox {server_url} --header "{bearer}"',
            "  Claude Desktop, in claude_desktop_config.json"
            " (Desktop starts its own server over stdio, on this gateway):",
            textwrap.indent(json.dumps(desktop, indent=2), "    "),
            "",
            f"Other sample tokens: member B {TOKEN_MEMBER_B}, profile-only {TOKEN_PROFILE_ONLY},"
            f" expired {TOKEN_EXPIRED}.",
            *_oauth_connect_lines(oauth_url, auth_url),
            "Requests to the servers are logged below. Press Ctrl-C to stop them all.",
            "",
        ]
    )


def _oauth_connect_lines(oauth_url: str | None, auth_url: str | None) -> list[str]:
    if oauth_url is None or auth_url is None:
        return []
    return [
        "",
        f"The OAuth server, {oauth_url}, takes no fw1. token: a client signs in at {auth_url}",
        "and member A or B approves on its page (the sandbox's stand-in for the wallet signature).",
        "  MCP Inspector, in the browser (it offers the sign-in when a tool needs it):",
        f"    {INSPECTOR} --transport http --server-url {oauth_url}",
        "  MCP Inspector, on the command line (it prints the sign-in page's address and waits for the approval):",
        f"    {INSPECTOR} --cli {oauth_url} --transport http --method tools/call --tool-name get_wagers",
        "",
    ]


# --- main --------------------------------------------------------------------------------------


def _start_gateway(port: int, out: TextIO) -> SandboxGateway:
    try:
        return SandboxGateway("127.0.0.1", port).start()
    except OSError:
        if port == 0:
            raise
        out.write(f"(port {port} is in use; the sandbox gateway takes a free one)\n")
        return SandboxGateway("127.0.0.1", 0).start()


def _start_auth(port: int, resource: str, out: TextIO) -> SandboxAuthServer:
    try:
        return SandboxAuthServer("127.0.0.1", port, resources=[resource]).start()
    except OSError:
        if port == 0:
            raise
        out.write(f"(port {port} is in use; the sandbox authorization server takes a free one)\n")
        return SandboxAuthServer("127.0.0.1", 0, resources=[resource]).start()


def _port(given: int | None, once: bool, default: int, what: str, out: TextIO) -> int:
    """The port asked for; else any with --once; else the default, or any when it is taken."""
    if given is not None:
        return given
    if once:
        return 0
    if not _free(default):
        out.write(f"(port {default} is in use; {what} takes a free one)\n")
        return 0
    return default


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--once", action="store_true", help="run the scripted session, stop them all, exit (0: it worked)"
    )
    parser.add_argument(
        "--port", type=int, help=f"the server's port (default {SERVER_PORT}; with --once, any free one)"
    )
    parser.add_argument(
        "--gateway-port", type=int, help=f"the sandbox gateway's port (default {GATEWAY_PORT}; --once: any)"
    )
    parser.add_argument(
        "--auth-port", type=int, help=f"the sandbox authorization server's port (default {AUTH_PORT}; --once: any)"
    )
    parser.add_argument(
        "--oauth-port", type=int, help=f"the OAuth-mode server's port (default {OAUTH_PORT}; --once: any)"
    )
    args = parser.parse_args(argv)
    out = out or sys.stdout
    gateway_port = args.gateway_port if args.gateway_port is not None else 0 if args.once else GATEWAY_PORT
    auth_port = args.auth_port if args.auth_port is not None else 0 if args.once else AUTH_PORT
    server_port = _port(args.port, args.once, SERVER_PORT, "the server", out)
    oauth_port = _port(args.oauth_port, args.once, OAUTH_PORT, "the OAuth server", out) or _any_free_port()

    interrupted = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        interrupted.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    gateway = _start_gateway(gateway_port, out)
    auth: SandboxAuthServer | None = None
    servers: list[Server] = []
    stop_echo = threading.Event()
    code = 0
    try:
        public = f"http://127.0.0.1:{oauth_port}/mcp"  # the OAuth server's URL as clients reach it
        auth = _start_auth(auth_port, public, out)
        gateway.trust_issuer(auth.issuer, audiences=[public])  # its tokens for this server are a member's
        server = Server.start(gateway.url, server_port)
        servers.append(server)
        oauth_flags = ["--public-url", public, "--authorization-server", auth.issuer]
        oauth = Server.start(gateway.url, oauth_port, oauth_flags, name="oauth")
        servers.append(oauth)
        port = urllib.parse.urlsplit(server.url).port
        out.write(
            f"FairWins MCP demo\n  sandbox gateway   {gateway.url}   (fixed sample data)\n"
            f"  MCP server        {server.url}   (python -m mcp_server --http {port})\n"
            f"  sandbox sign-in   {auth.url}   (stands in for FairWins's sign-in)\n"
            f"  OAuth MCP server  {oauth.url}   (python -m mcp_server --http {oauth_port}\n"
            f"                    {' '.join(oauth_flags)})\n\n"
        )
        session(server.url, out)
        oauth_session(oauth.url, gateway, auth, out)
        if not args.once:
            for running in servers:
                running.settle()  # the session's own requests are not news; a client's from here on are
            out.write(connect_lines(server.url, gateway.url, oauth.url, auth.url) + "\n")
            out.flush()
            for running in servers:
                threading.Thread(
                    target=running.echo, args=(out, stop_echo), name=f"demo-echo-{running.name}", daemon=True
                ).start()
            while not interrupted.wait(3600):
                pass
            out.write("\nStopping…\n")
    except DemoError as exc:
        out.write(f"\nThe demo stopped: {exc}\n")
        for running in servers:
            if running.pending():
                said = "\n".join(f"  {line}" for line in running.log)
                out.write(f"The {running.called} said:\n{said}\n")
        code = 1
    finally:
        stop_echo.set()
        exits = [(running, running.stop()) for running in servers]
        if auth is not None:
            auth.stop()
        gateway.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for running, status in exits:
        if status != 0:
            out.write(f"The {running.called} exited with status {status}.\n")
            code = code or 1
    out.write("Stopped the servers, the sandbox gateway and the sandbox authorization server.\n" if code == 0 else "")
    out.flush()
    return code
