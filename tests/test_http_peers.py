"""No single peer can starve the others (issue 12): per-peer caps, and /healthz answered when every slot is busy.

Peers are told apart by their address: the attacker connects from 127.0.0.2 (and 127.0.0.3, …),
everyone else from 127.0.0.1, all on this machine's loopback. The server's read and idle timeouts
are long here, so nothing the tests show is the timeouts doing the work.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest

from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.admission import SLOT_WAIT
from mcp_server.transports.http.server import McpHTTPServer
from tests.mcp_http import Raw, Response, refusal, serving
from tests.sandbox_gateway import SandboxGateway

PING = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}'


@contextmanager
def running(gateway_url: str | None = None, **options: Any) -> Iterator[McpHTTPServer]:
    policy = gate.Policy(loopback_bind=True, max_body=1024 * 1024)
    dispatcher = build_dispatcher(Config(api_url=gateway_url, timeout=5.0))
    with serving(dispatcher, policy, read_timeout=30.0, idle_timeout=30.0, **options) as server:
        yield server


def ping(message_id: int) -> bytes:
    body = PING % message_id
    return (
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


HEALTH = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"


def ask(server: McpHTTPServer, data: bytes, *, source: str | None = None) -> Response | None:
    client = Raw(server.server_address[1], source=source)
    try:
        client.send(data)
        return client.response()
    finally:
        client.close()


def served(server: McpHTTPServer, message_id: int = 1) -> None:
    """A member from 127.0.0.1 gets a health check and a call answered, on one keep-alive connection."""
    client = Raw(server.server_address[1])
    try:
        client.send(HEALTH)
        health = client.response()
        assert health is not None and health.status == 200, health
        client.send(ping(message_id))
        answer = client.response()
    finally:
        client.close()
    assert answer is not None and answer.status == 200, answer
    assert json.loads(answer.body) == {"jsonrpc": "2.0", "id": message_id, "result": {}}


def open_quietly(stack: ExitStack, server: McpHTTPServer, source: str, first: bytes) -> Raw | None:
    """A connection from `source` that sends `first` and then nothing more; None if it was refused at once."""
    try:
        client = Raw(server.server_address[1], source=source)
    except OSError:
        return None
    stack.callback(client.close)
    try:
        client.send(first)
    except OSError:
        return None
    return client


def test_never_finished_heads_from_one_peer_leave_the_others_served() -> None:
    # The attack: ~150 request heads that never end, topped up a byte at a time, held
    # every connection slot, and /healthz and every member got 503 until they let go.
    with running(max_concurrency=4) as server, ExitStack() as stack:
        attackers = [open_quietly(stack, server, "127.0.0.2", b"POST /mcp HTTP/1.1\r\nHost: loc") for _ in range(150)]
        for client in attackers:
            if client is not None:
                try:
                    client.send(b"a")  # topped up: still unfinished
                except OSError:
                    pass
        served(server)
        refused = [c for c in attackers if c is not None and _refused_early(c)]
        assert refused, "the peer over its cap was never told"


def _refused_early(client: Raw) -> bool:
    client.sock.settimeout(0.5)
    try:
        answer = client.response()
    except TimeoutError:
        return False
    return answer is None or answer.status in (429, 503)


def test_idle_connections_from_one_peer_leave_the_others_served() -> None:
    with running(max_concurrency=4) as server, ExitStack() as stack:
        for _ in range(150):
            open_quietly(stack, server, "127.0.0.2", b"")
        served(server)


def test_healthz_is_answered_when_every_connection_slot_is_busy() -> None:
    # Two peers, each within its own cap, hold every connection slot between them (kept-alive
    # connections that asked once and wait): the next member is told 503, but a health check
    # still learns the process is alive.
    with running(max_concurrency=1) as server, ExitStack() as stack:
        per_peer = server.max_connections // 2
        for peer in ("127.0.0.2", "127.0.0.3"):
            for _ in range(per_peer):
                client = open_quietly(stack, server, peer, HEALTH)
                assert client is not None
                answer = client.response()
                assert answer is not None and answer.status == 200, answer
        assert server.connection_count == server.max_connections
        health = ask(server, HEALTH)
        assert health is not None and health.status == 200, health
        busy = ask(server, ping(4))
        assert busy is not None and busy.status == 503 and busy.headers.get("retry-after") == "1", busy


def test_healthz_is_answered_while_every_request_slot_waits_on_the_gateway(sandbox: SandboxGateway) -> None:
    # Longer than a request over the bound waits for a slot (SLOT_WAIT), so the slots stay busy.
    sandbox.fault("/status", "delay", seconds=SLOT_WAIT + 3, times=2)
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_gateway_status","arguments":{}}}'
    data = (
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(call), call)
    )
    with running(sandbox.url, max_concurrency=2) as server, ExitStack() as stack:
        slow = [open_quietly(stack, server, "127.0.0.1", data) for _ in range(2)]
        sandbox.wait_for_requests(2, timeout=5)
        health = ask(server, HEALTH)
        assert health is not None and health.status == 200
        busy = ask(server, ping(2))
        assert busy is not None and busy.status == 503
        for client in slow:
            assert client is not None
            answer = client.response()
            assert answer is not None and answer.status == 200


@pytest.mark.parametrize("peer_connections", [1, 3])
def test_a_peer_over_its_connection_cap_is_told_429_and_others_are_not(peer_connections: int) -> None:
    with running(max_peer_connections=peer_connections) as server, ExitStack() as stack:
        held = [open_quietly(stack, server, "127.0.0.2", b"") for _ in range(peer_connections)]
        assert all(held)
        over = ask(server, HEALTH, source="127.0.0.2")
        assert over is not None and over.status == 429 and over.headers.get("connection") == "close", over
        assert refusal(over.body)[0] == "too_many_connections"
        served(server)
