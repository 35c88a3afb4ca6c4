"""A drain a load balancer survives, and admission sized for waiting: one real server on 127.0.0.1, in-process.

What a balancer with pooled connections needs from a server that stops: every request that
arrives on a connection it already had is answered (with `Connection: close`), never refused;
a connection the kernel had queued is accepted and served, never reset; an idle connection is
closed only after the grace, and closed cleanly (end of stream, not a reset).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest

from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.admission import SLOT_WAIT
from mcp_server.transports.http.drain import Timings
from mcp_server.transports.http.server import McpHTTPServer
from tests.mcp_http import Raw, refusal, serving
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway

WAIT = 10.0


@pytest.fixture
def sandbox() -> Iterator[SandboxGateway]:
    with SandboxGateway() as gateway:
        yield gateway


@contextmanager
def running(gateway_url: str | None = None, **options: Any) -> Iterator[McpHTTPServer]:
    policy = gate.Policy(loopback_bind=True, max_body=1024 * 1024)
    dispatcher = build_dispatcher(Config(api_url=gateway_url, timeout=8.0))
    with serving(dispatcher, policy, **options) as server:
        yield server


def post(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return (
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        b"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s" % (TOKEN_MEMBER_A.encode(), len(body), body)
    )


def ping(message_id: int = 1) -> bytes:
    return post({"jsonrpc": "2.0", "id": message_id, "method": "ping"})


def call(name: str, message_id: int = 1, **extra: Any) -> bytes:
    params: dict[str, Any] = {"name": name, "arguments": {}, **extra}
    return post({"jsonrpc": "2.0", "id": message_id, "method": "tools/call", "params": params})


HEALTH = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"


@contextmanager
def connected(server: McpHTTPServer) -> Iterator[Raw]:
    client = Raw(server.server_address[1])
    try:
        yield client
    finally:
        client.close()


def start_drain(server: McpHTTPServer, **kwargs: Any) -> tuple[threading.Thread, list[bool]]:
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(server.drain(**kwargs)), daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT
    while not server.stopping:
        assert time.monotonic() < deadline, "the drain did not begin"
        time.sleep(0.01)
    return thread, result


def ends_cleanly(client: Raw) -> bool:
    """True when the server closed with an end of stream (FIN), False on a reset."""
    try:
        return client.sock.recv(1) == b""
    except ConnectionResetError:
        return False


def test_a_request_on_an_open_connection_during_the_drain_is_answered_with_connection_close(
    sandbox: SandboxGateway,
) -> None:
    with running(sandbox.url) as server:
        with connected(server) as client:
            client.send(ping(1))
            first = client.response()
            assert first is not None and first.status == 200 and "connection" not in first.headers
            drainer, result = start_drain(server)
            client.send(call("get_gateway_status", 2))  # the balancer reuses its pooled connection
            answer = client.response()
            assert answer is not None and answer.status == 200, answer  # never 503 shutting_down
            assert json.loads(answer.body)["result"]["isError"] is False
            assert answer.headers["connection"] == "close"
            assert ends_cleanly(client)
        drainer.join(WAIT)
        assert result == [True]


def test_a_call_in_flight_at_the_signal_is_answered_and_its_connection_closed(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "delay", seconds=1.0, times=1)
    with running(sandbox.url) as server:
        with connected(server) as client:
            client.send(call("get_gateway_status"))
            sandbox.wait_for_requests(1, timeout=WAIT)
            drainer, result = start_drain(server)
            answer = client.response()
            assert answer is not None and answer.status == 200 and answer.headers["connection"] == "close"
            assert ends_cleanly(client)
        drainer.join(WAIT)
        assert result == [True] and server.inflight_at_stop == 1


def test_an_idle_connection_is_closed_only_after_the_grace_and_with_an_end_of_stream(sandbox: SandboxGateway) -> None:
    grace = 1.0
    with running(sandbox.url, timings=Timings(idle_grace=grace)) as server:
        with connected(server) as client:
            client.send(ping())
            assert client.response() is not None
            answered = time.monotonic()
            drainer, result = start_drain(server)
            assert ends_cleanly(client)
            # Not before the grace: a balancer whose own keep-alive is shorter always closes first.
            assert time.monotonic() - answered >= grace * 0.95
        drainer.join(WAIT)
        assert result == [True]


def test_connections_queued_in_the_kernel_when_the_drain_begins_are_accepted_and_served(
    sandbox: SandboxGateway,
) -> None:
    policy = gate.Policy(loopback_bind=True, max_body=1024 * 1024)
    dispatcher = build_dispatcher(Config(api_url=sandbox.url, timeout=8.0))
    server = McpHTTPServer(("127.0.0.1", 0), dispatcher, policy)  # nothing accepts: the kernel queues them
    try:
        with ExitStack() as stack:
            clients = [Raw(server.server_address[1]) for _ in range(5)]
            for client in clients:
                stack.callback(client.close)
                client.send(ping(7))  # a balancer sends as soon as the handshake completes
            drained = server.drain()
            for client in clients:
                answer = client.response()
                assert answer is not None and answer.status == 200, answer  # not a reset
                assert answer.headers["connection"] == "close"
            assert drained
        # Closed now: a new connection is refused outright, which a balancer retries elsewhere.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(server.server_address[:2], timeout=WAIT).close()
    finally:
        server.server_close()


def test_healthz_answers_503_while_stopping_and_requests_are_still_served(sandbox: SandboxGateway) -> None:
    with running(sandbox.url) as server:
        with connected(server) as client:
            server.unready = True  # the pre-stop delay
            client.send(HEALTH)
            health = client.response()
            assert health is not None and health.status == 503
            assert json.loads(health.body)["status"] == "stopping"
            client.send(ping(3))
            answer = client.response()
            assert answer is not None and answer.status == 200 and "connection" not in answer.headers


def test_a_stream_that_starts_during_the_drain_says_connection_close(sandbox: SandboxGateway) -> None:
    with running(sandbox.url) as server:
        with connected(server) as client:
            client.send(ping())
            assert client.response() is not None
            drainer, _ = start_drain(server)
            client.send(call("get_wagers", 4, _meta={"progressToken": "p"}))
            answer = client.response()
            assert answer is not None and answer.status == 200
            assert answer.headers.get("content-type") == "text/event-stream"
            assert answer.headers["connection"] == "close"
        drainer.join(WAIT)


def test_a_burst_over_the_bound_waits_for_a_slot(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "delay", seconds=SLOT_WAIT / 4, times=1)
    with running(sandbox.url, max_concurrency=1) as server, ThreadPoolExecutor(2) as pool:

        def one(message: bytes) -> int:
            with connected(server) as client:
                client.send(message)
                answer = client.response()
                return answer.status if answer else 0

        slow = pool.submit(one, call("get_gateway_status"))
        sandbox.wait_for_requests(1, timeout=WAIT)
        waiting = pool.submit(one, call("get_perps_pairs", 2))
        assert slow.result(WAIT) == 200
        assert waiting.result(WAIT) == 200  # it waited for the slot instead of a 503


def test_beyond_the_wait_a_burst_is_refused_with_503_and_retry_after(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "delay", seconds=SLOT_WAIT + 3, times=1)
    with running(sandbox.url, max_concurrency=1) as server:
        first = Raw(server.server_address[1])
        second = Raw(server.server_address[1])
        try:
            first.send(call("get_gateway_status"))
            sandbox.wait_for_requests(1, timeout=WAIT)
            started = time.monotonic()
            second.send(call("get_perps_pairs", 2))
            refused = second.response()
            assert refused is not None and refused.status == 503 and refused.headers["retry-after"] == "1"
            assert refusal(refused.body, 2)[0] == "busy"  # its body was read: the refusal answers its id
            assert time.monotonic() - started >= SLOT_WAIT * 0.95  # it waited its stated maximum first
            answer = first.response()
            assert answer is not None and answer.status == 200
        finally:
            first.close()
            second.close()


def test_idle_keep_alive_connections_do_not_count_against_requests_in_flight(sandbox: SandboxGateway) -> None:
    with running(sandbox.url, max_concurrency=1) as server, ExitStack() as stack:
        for i in range(8):  # eight members connected, each between calls
            idle = Raw(server.server_address[1])
            stack.callback(idle.close)
            idle.send(ping(i))
            assert idle.response() is not None
        client = Raw(server.server_address[1])
        stack.callback(client.close)
        client.send(call("get_gateway_status", 9))
        answer = client.response()
        assert answer is not None and answer.status == 200


def test_drain_timings() -> None:
    timings = Timings(idle_timeout=30, idle_grace=10, prestop=5, requests=17)
    assert timings.idle_limit(False) == 30
    assert timings.idle_limit(True) == 10
    assert timings.limit == 27  # a request may arrive just before the grace ends, then take its time
    assert timings.total > timings.prestop + timings.limit
    assert Timings(idle_timeout=4, idle_grace=10).idle_limit(True) == 4  # never longer than the idle timeout


def test_a_connection_open_when_its_server_closes_is_cut_off_and_logs_no_error(
    sandbox: SandboxGateway, caplog: pytest.LogCaptureFixture
) -> None:
    # What a test's teardown does: the server is closed while a keep-alive connection waits idle.
    # Its loop ends with it, so the connection is cut off (an end, nothing logged as an error).
    with caplog.at_level(logging.DEBUG, logger="fairwins_mcp"):
        with running(sandbox.url) as server:
            client = Raw(server.server_address[1])
            client.send(ping(1))
            assert client.response() is not None
        try:
            assert client.response() is None
        finally:
            client.close()
        assert server.wait_idle(WAIT)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
