"""A hostile gateway, through the sandbox: every fault ends as an honest tool error within the call's deadline.

Each test calls a real tool through the real dispatcher and gateway seam against the sandbox
gateway with a fault set, and checks three things: the result is `isError: true` and names what
went wrong, the call returned within its deadline (plus scheduling slack), and it never turned
into a success or an empty answer. The last test counts threads, file descriptors and the
connections this process holds to the gateway before and after every fault.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_server.upstream import aio
from mcp_server.upstream.gateway import Gateway, GatewayRequest
from tests.conftest import PROCFS, McpClient, client_for
from tests.outputs import failure_facts
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway

DEADLINE = 1.0  # the gateway call's deadline (FAIRWINS_MCP_TIMEOUT), short so the slow faults stay quick
SLACK = 1.0  # scheduling slack on a loaded machine
WEEK = 7 * 24 * 3600
UNKNOWN = "This is an UNKNOWN, not an empty result"


def call(
    client: McpClient, tool: str = "get_wagers", arguments: dict[str, Any] | None = None
) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    result = client.call_tool(tool, arguments or {}, bearer=TOKEN_MEMBER_A)
    return result, time.monotonic() - started


def honest_error(result: dict[str, Any], *phrases: str) -> str:
    """The failure sentence; each phrase must appear (`a|b`: either may)."""
    assert result["isError"] is True, result
    failure_facts(result)  # the failure as data, and no data that could be read as an answer
    text = " ".join(block["text"] for block in result["content"])
    assert UNKNOWN in text, text
    for phrase in phrases:
        assert any(alternative in text for alternative in phrase.split("|")), f"{phrase!r} not in {text!r}"
    return text


@pytest.fixture
def client(sandbox: SandboxGateway) -> McpClient:
    return client_for(sandbox.url, timeout=DEADLINE)


WAGERS = "/v1/member/wagers"


@pytest.mark.parametrize(
    ("kind", "params", "phrases"),
    [
        # The sandbox ends the body with a TCP reset; whether the reset or the short read is seen
        # first is the kernel's choice, and both sentences are true.
        ("reset_mid_body", {}, ["closed in the middle of the answer|the connection was reset"]),
        ("reset_before", {}, ["reset"]),
        ("trickle", {"interval": 0.05}, [f"did not answer within {int(DEADLINE)} s"]),
        ("delay", {"seconds": DEADLINE * 3}, [f"did not answer within {int(DEADLINE)} s"]),
        ("invalid_utf8", {}, ["not valid UTF-8"]),
        ("deep_json", {"depth": 100_000}, ["nested too deeply"]),
        ("large", {"size": 100_000_000}, ["over the 4 MiB limit"]),
        ("html", {}, ["not JSON", "text/html"]),
        ("empty", {}, ["it was empty"]),
        ("not_json", {}, ["not JSON"]),
        ("status", {"status": 502}, ["failed (HTTP 502, bad_gateway)"]),
        ("status", {"status": 503}, ["a service behind it is down"]),
        ("invalid_utf8", {"status": 500}, ["failed (HTTP 500)"]),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_gateway_fault_is_an_honest_error_within_the_deadline(
    sandbox: SandboxGateway, client: McpClient, kind: str, params: dict[str, Any], phrases: list[str]
) -> None:
    sandbox.fault(WAGERS, kind, **params)
    result, took = call(client)
    honest_error(result, "Could not read your wagers", *phrases)
    assert took < DEADLINE + SLACK
    # A GET may be retried, but only within the one deadline, and never more than three times.
    assert 1 <= len([r for r in sandbox.seen if r.path == WAGERS]) <= 3


def test_a_retry_after_of_a_week_is_reported_at_once_not_waited_for(sandbox: SandboxGateway, client: McpClient) -> None:
    sandbox.fault(WAGERS, "retry_after", seconds=WEEK)
    result, took = call(client)
    honest_error(result, "rate-limiting", "retry after 168 h")
    assert took < SLACK
    assert len(sandbox.seen) == 1  # a wait that does not fit the deadline is not a reason to ask again


@pytest.mark.parametrize(
    "retry_after", ["Fri, 31 Dec 2999 23:59:59 GMT", "99999999999999999999999", "-5", "soon", "1e9", ""]
)
def test_any_retry_after_ends_within_the_deadline(sandbox: SandboxGateway, client: McpClient, retry_after: str) -> None:
    sandbox.fault(WAGERS, "status", status=429, headers={"Retry-After": retry_after})
    result, took = call(client)
    honest_error(result, "rate-limiting")
    assert took < DEADLINE + SLACK
    assert 1 <= len(sandbox.seen) <= 3


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_host_is_reported_and_never_followed(sandbox: SandboxGateway, status: int) -> None:
    with SandboxGateway() as elsewhere:
        sandbox.fault(WAGERS, "redirect", status=status, location=f"http://localhost:{elsewhere.port}/steal")
        result, took = call(client_for(sandbox.url, timeout=DEADLINE))
        honest_error(result, f"redirect (HTTP {status}), which is not followed")
        assert took < DEADLINE + SLACK
        assert elsewhere.seen == []  # nothing, and so no token, went to the other host
    assert len(sandbox.seen) == 1


def test_a_post_that_fails_mid_answer_is_sent_exactly_once(sandbox: SandboxGateway, client: McpClient) -> None:
    sandbox.fault("/v1/member/intents/build", "reset_mid_body")
    arguments = {"intent": "create_wager", "chainId": 137, "params": {"stake": "1"}}
    result, took = call(client, "build_intent", arguments)
    honest_error(result, "closed in the middle of the answer|the connection was reset")
    assert took < DEADLINE + SLACK
    assert len(sandbox.seen) == 1  # a POST may have acted: it is never repeated


class EndlessGateway:
    """A gateway that answers 200 and then a body with no length that never ends (no Content-Length to refuse)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[")
                chunk = b'"' + b"a" * 65536 + b'",'
                while not self.stop.is_set():
                    conn.sendall(chunk)
            except OSError:
                pass  # the client hung up, as it should

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.listener.close()


def test_an_endless_body_without_a_length_is_cut_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    endless = EndlessGateway()
    try:
        client = client_for(f"http://127.0.0.1:{endless.port}", timeout=5.0, max_body=1024 * 1024)
        result, took = call(client)
    finally:
        endless.close()
    honest_error(result, "over the 1 MiB limit")
    assert took < 5.0 + SLACK


# ---- nothing leaked -------------------------------------------------------------------------------


def open_fds() -> set[tuple[str, str]]:
    """Every open descriptor with what it points at (so a reused number is not mistaken for the same file)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add((fd, os.readlink(f"/proc/self/fd/{fd}")))
        except OSError:
            pass  # the listing's own descriptor, closed by now
    return found


def connections_to(port: int) -> int:
    """Sockets this process holds whose far end is `port` on 127.0.0.1: our side of gateway connections."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    with open("/proc/net/tcp") as table:
        next(table)
        for row in table:
            fields = row.split()
            remote_port = int(fields[2].split(":")[1], 16)
            if remote_port == port and fields[9] in inodes:
                count += 1
    return count


LEAK_FAULTS: list[tuple[str, str, dict[str, Any]]] = [
    ("get_wagers", "reset_mid_body", {}),
    ("get_wagers", "reset_before", {}),
    ("get_wagers", "trickle", {"interval": 0.05}),
    ("get_wagers", "delay", {"seconds": 2.0}),
    ("get_wagers", "invalid_utf8", {}),
    ("get_wagers", "deep_json", {}),
    ("get_wagers", "large", {}),
    ("get_wagers", "retry_after", {"seconds": WEEK}),
    ("get_wagers", "redirect", {"location": "http://localhost:9/steal"}),
    ("get_wagers", "html", {}),
    ("build_intent", "reset_mid_body", {}),
    ("build_intent", "delay", {"seconds": 2.0}),
]
ROUTE = {"get_wagers": WAGERS, "build_intent": "/v1/member/intents/build"}
ARGS: dict[str, dict[str, Any]] = {
    "get_wagers": {},
    "build_intent": {"intent": "create_wager", "chainId": 137, "params": {}},
}


@PROCFS
def test_no_thread_socket_or_gateway_connection_outlives_the_faults() -> None:
    # This thread's event loop (its calls' own) is made once, on first use: made before counting.
    aio.wait(asyncio.sleep(0))
    gc.collect()
    threads_before, fds_before = set(threading.enumerate()), open_fds()

    deadline = 0.5
    with SandboxGateway() as sandbox:
        client = client_for(sandbox.url, timeout=deadline)
        result, _ = call(client, "get_wagers")  # healthy first: the connection is pooled for reuse
        assert result["isError"] is False
        for tool, kind, params in LEAK_FAULTS:
            sandbox.fault(ROUTE[tool], kind, **params)
            result, took = call(client, tool, ARGS[tool])
            sandbox.clear_faults()
            assert result["isError"] is True and took < deadline + SLACK, (kind, result)
            # At most the one keep-alive connection the calling thread pools for reuse; a fault
            # always costs its connection, never leaves it half-read in the pool.
            assert connections_to(sandbox.port) <= 1, kind
            healthy, _ = call(client, "get_wagers")
            assert healthy["isError"] is False, (kind, healthy)  # the pool holds no broken connection
            assert connections_to(sandbox.port) <= 1, kind
        del client, result, healthy
        # The pool belongs to the gateway object: dropping it closes its connection at once, on
        # the thread's loop idle between calls.
        gc.collect()
        assert connections_to(sandbox.port) == 0

    # Exactly back where we started: the sandbox joined every handler thread when it stopped,
    # and every socket of ours is closed. No tolerance is needed, so none is given (threads and
    # descriptors left by earlier tests may finish meanwhile; only new ones are counted).
    gc.collect()
    new_threads = [t.name for t in set(threading.enumerate()) - threads_before]
    assert not new_threads
    assert threading.active_count() <= len(threads_before)
    assert open_fds() - fds_before == set()


@PROCFS
def test_consecutive_calls_reuse_one_connection_and_all_succeed(sandbox: SandboxGateway) -> None:
    gateway = Gateway(sandbox.url, timeout=DEADLINE)
    outcomes = [gateway.call(GatewayRequest("GET", "/status")) for _ in range(5)]
    assert [getattr(o, "status", o) for o in outcomes] == [200] * 5
    assert connections_to(sandbox.port) == 1


@pytest.fixture
def sandbox() -> Iterator[SandboxGateway]:
    with SandboxGateway() as gateway:
        yield gateway
