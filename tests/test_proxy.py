"""Proof through a real proxy (issue 12): nginx with pooled upstream keep-alive in front of the server.

nginx reuses one upstream connection for many clients and forwards a GET's body, so a request the
server answers without reading its declared body would shift the answer queue: the next member
would receive the previous caller's answer. Here an attacker with no token sends every desync
shape of the issue through nginx while two members ask for their own profile, again and again;
every answer must belong to the request it answers, and the attacker must never see a member.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

import pytest

from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http.server import McpHTTPServer
from tests.conftest import NGINX
from tests.mcp_http import serving
from tests.nginx import Nginx
from tests.sandbox_gateway import ACCOUNT_A, ACCOUNT_B, TOKEN_MEMBER_A, TOKEN_MEMBER_B, SandboxGateway

pytestmark = NGINX

TIMEOUT: Final = 10.0
ROUNDS: Final = 3  # every shape this many times, while the members keep asking
MEMBER_CALLS: Final = 2000  # at most: members keep asking until the attacker is done


def mcp_body(message_id: int, name: str = "get_profile") -> bytes:
    params = {"name": name, "arguments": {}}
    return json.dumps({"jsonrpc": "2.0", "id": message_id, "method": "tools/call", "params": params}).encode()


def smuggled(message_id: int) -> bytes:
    """A whole request hidden in a body: a slow call, so its answer arrives after the proxy reused the connection."""
    body = mcp_body(message_id, "get_gateway_status")
    return (
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def with_body(method: bytes, path: bytes, extra: bytes = b"") -> bytes:
    body = smuggled(666)
    return (
        method + b" " + path + b" HTTP/1.1\r\nHost: localhost\r\n" + extra + b"Content-Length: %d\r\n\r\n" % len(body)
    ) + body


def chunked(method: bytes, path: bytes) -> bytes:
    body = smuggled(667)
    return (
        method + b" " + path + b" HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    )


# Every desync shape from the issue, and their neighbours on other routes and framings.
SHAPES: Final = {
    "GET /healthz with a Content-Length body": with_body(b"GET", b"/healthz"),
    "HEAD /healthz with a Content-Length body": with_body(b"HEAD", b"/healthz"),
    "OPTIONS /mcp with a Content-Length body": with_body(b"OPTIONS", b"/mcp"),
    "GET /mcp (405) with a body": with_body(b"GET", b"/mcp"),
    "DELETE /mcp (405) with a body": with_body(b"DELETE", b"/mcp"),
    "POST /elsewhere (404) with a body": with_body(b"POST", b"/elsewhere"),
    "POST /mcp text/plain (415) with a body": with_body(b"POST", b"/mcp", b"Content-Type: text/plain\r\n"),
    "GET /healthz with Expect: 100-continue and a body": with_body(b"GET", b"/healthz", b"Expect: 100-continue\r\n"),
    "GET /healthz with a chunked body": chunked(b"GET", b"/healthz"),
    "OPTIONS /mcp with a chunked body": chunked(b"OPTIONS", b"/mcp"),
    "GET /healthz with Content-Length and Transfer-Encoding": with_body(
        b"GET", b"/healthz", b"Transfer-Encoding: chunked\r\n"
    ),
    "GET /healthz with a superscript-two Content-Length": b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n"
    b"Content-Length: \xc2\xb2\r\n\r\n" + smuggled(668),
}


@dataclass
class Seen:
    """What each caller sent and received: (id sent, id received, account in the answer)."""

    member: dict[str, list[tuple[int, object, object]]] = field(default_factory=dict)
    attacker: list[bytes] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def member(
    port: int, token: str, account: str, first_id: int, seen: Seen, go: threading.Event, done: threading.Event
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    results: list[tuple[int, object, object]] = []
    go.wait(TIMEOUT)
    try:
        for n in range(MEMBER_CALLS):
            if done.is_set():
                break
            message_id = first_id + n
            conn.request(
                "POST",
                "/mcp",
                body=mcp_body(message_id),
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json",
                    "Authorization": f"Bearer {token}",
                },
            )
            resp = conn.getresponse()
            raw = resp.read()
            try:
                answer = json.loads(raw)
                got_id = answer.get("id")
                got_account = (answer.get("result", {}).get("structuredContent") or {}).get("account")
            except (ValueError, AttributeError):
                got_id, got_account = f"HTTP {resp.status}: {raw[:120]!r}", None
            results.append((message_id, got_id, got_account))
            if got_id != message_id or got_account != account:
                with seen.lock:
                    seen.problems.append(f"{account[:6]} sent id {message_id}, got {got_id!r} for {got_account!r}")
    except (OSError, http.client.HTTPException) as exc:
        with seen.lock:
            seen.problems.append(f"{account[:6]}: {type(exc).__name__}: {exc}")
    finally:
        conn.close()
        with seen.lock:
            seen.member[account] = results


def attacker(port: int, seen: Seen, go: threading.Event, done: threading.Event) -> None:
    """Each shape on its own connection, read up to its first answer and left; then a plain request of its own.

    Leaving right after the first answer is what hands the upstream connection, with whatever the
    server still owes on it, to the next client the proxy serves: a member.
    """
    go.wait(TIMEOUT)
    plain = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    for _ in range(ROUNDS):
        for name, data in SHAPES.items():
            for request, whole in ((data, False), (plain, True)):
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
                        sock.sendall(request)
                        received = sock.recv(65536)
                        while whole and (chunk := sock.recv(65536)):
                            received += chunk
                except OSError as exc:
                    received = f"{name}: {type(exc).__name__}".encode()
                with seen.lock:
                    seen.attacker.append(received)
    done.set()


@pytest.fixture
def proxied(sandbox: SandboxGateway) -> Iterator[tuple[Nginx, McpHTTPServer]]:
    # A smuggled call is slow, so its answer would still be on its way when the proxy hands the
    # upstream connection to the next client.
    sandbox.fault("/status", "delay", seconds=0.15)
    with serving(build_dispatcher(Config(api_url=sandbox.url, timeout=5.0))) as server:
        with Nginx(server.server_address[1]) as nginx:
            yield nginx, server


def test_through_nginx_no_caller_ever_receives_an_answer_that_belongs_to_another_request(
    proxied: tuple[Nginx, McpHTTPServer],
) -> None:
    nginx, _ = proxied
    seen = Seen()
    go, done = threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=member, args=(nginx.port, TOKEN_MEMBER_A, ACCOUNT_A, 10_000, seen, go, done)),
        threading.Thread(target=member, args=(nginx.port, TOKEN_MEMBER_B, ACCOUNT_B, 20_000, seen, go, done)),
        threading.Thread(target=attacker, args=(nginx.port, seen, go, done)),
    ]
    for thread in threads:
        thread.start()
    go.set()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive(), "a caller is still waiting for an answer"
    assert not seen.problems, "\n".join(seen.problems[:20]) + f"\nnginx:\n{nginx.error_log()[-1500:]}"
    assert seen.member[ACCOUNT_A] and seen.member[ACCOUNT_B]
    received = b"".join(seen.attacker)
    assert ACCOUNT_A.encode() not in received and ACCOUNT_B.encode() not in received
    assert len(seen.attacker) == 2 * ROUNDS * len(SHAPES)


@pytest.mark.parametrize("name", list(SHAPES))
def test_each_desync_shape_through_nginx_leaves_the_next_member_their_own_answer(
    proxied: tuple[Nginx, McpHTTPServer], name: str
) -> None:
    # One shape, then a member on a fresh connection right behind it: nginx hands that member
    # the upstream connection the shape just used.
    nginx, _ = proxied
    with socket.create_connection(("127.0.0.1", nginx.port), timeout=TIMEOUT) as sock:
        sock.sendall(SHAPES[name])
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 "), first[:200]
    for n in range(3):
        conn = http.client.HTTPConnection("127.0.0.1", nginx.port, timeout=TIMEOUT)
        try:
            conn.request(
                "POST",
                "/mcp",
                body=mcp_body(500 + n),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN_MEMBER_A}"},
            )
            answer = json.loads(conn.getresponse().read())
        finally:
            conn.close()
        assert answer["id"] == 500 + n, answer
        assert answer["result"]["structuredContent"]["account"] == ACCOUNT_A
