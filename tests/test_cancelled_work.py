"""Work for a cancelled call stops at its next slice (issue 59): clients that leave cost the next member little.

Reading, checking and scrubbing a large answer (a `Compute` step) is work for one call. Once that
call is cancelled (its client left, or sent `notifications/cancelled`), the work does not start,
waits no longer for the large answers' share, and stops at its next pause if it runs: what it
would make, nobody reads. Before, 40 clients that asked for a 3.85 MB answer and left put
seconds of that work between the next member and an answer that takes a fraction of one alone.
Timings here are ratios to the same server alone, with a wide margin.
"""

from __future__ import annotations

import json
import socket
import statistics
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any, Final

import pytest

from mcp_server.core import steps
from mcp_server.core.steps import Compute
from mcp_server.wire import pause
from mcp_server.wire.cancellation import Cancellation
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.seams import served
from tests.test_pacing import MARKETS, WAGERS, many_markets, many_wagers

WAIT: Final = 30.0
LEGACY: Final = "2025-11-25"
LEAVING: Final = 40  # the crowd of clients that ask and leave
# How many times its time alone the member's call may take behind them: "a few" (before: 45-60×,
# and about 1-2× after, on a machine busy with other tests).
AT_MOST: Final = 5.0


# ---- the pure parts: a pause stops cancelled work, and the step gives its stand-in ------------------


def test_a_pause_raises_abandoned_once_the_call_is_cancelled_around_the_threads_pacer() -> None:
    cancellation = Cancellation()
    paced: list[str] = []

    def pacer() -> None:
        paced.append("paced")
        if len(paced) == 2:
            cancellation.cancel()  # thrown while the pacer slept

    with pause.paced(pacer), pause.stops_with(cancellation):
        pause.pause()
        assert paced == ["paced"]
        with pytest.raises(pause.Abandoned):
            pause.pause()  # cancelled during the pacer's sleep: stopped on its way out
        with pytest.raises(pause.Abandoned):
            pause.pause()  # and at every pause after, before the pacer
        assert paced == ["paced", "paced"]
    pause.pause()  # outside the block: nothing is stopped
    assert not issubclass(pause.Abandoned, Exception)  # no `except Exception` around the work takes it


def test_a_compute_gives_its_stand_in_once_its_call_is_cancelled_before_or_during_the_work() -> None:
    slices: list[int] = []

    def work(cancellation: Cancellation) -> str:
        for i in range(10):
            slices.append(i)
            if i == 3:
                cancellation.cancel()
            pause.pause()
        return "answer"

    during = Cancellation()
    assert Compute(lambda: work(during), during, "stand-in").run() == "stand-in"
    assert slices == [0, 1, 2, 3]  # stopped at the pause after the cancel

    before = Cancellation()
    before.cancel()
    slices.clear()
    assert Compute(lambda: work(before), before, "stand-in").run() == "stand-in"
    assert slices == []  # never started

    kept = Cancellation()
    assert Compute(lambda: "answer", kept, "stand-in").run() == "answer"


def test_a_cancelled_compute_ends_a_handlers_steps_with_its_stand_in_on_the_callers_thread() -> None:
    # stdio and `Dispatcher.handle` drive steps on the caller's thread (steps.run): the same rule.
    cancellation = Cancellation()

    def handler() -> steps.Steps[str]:
        cancellation.cancel()  # notifications/cancelled, as stdio throws it
        rendered: str = yield Compute(lambda: "answer", cancellation, "stand-in")
        return f"handled {rendered}"

    assert steps.run(handler()) == "handled stand-in"


# ---- a real server: clients that ask for a large answer and leave -----------------------------------


def _request(body: dict[str, Any], *, bearer: str | None = None, stream: bool = False) -> bytes:
    data = json.dumps(body).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Accept: application/json{', text/event-stream' if stream else ''}\r\n"
        f"MCP-Protocol-Version: {LEGACY}\r\n"
        + (f"Authorization: Bearer {bearer}\r\n" if bearer else "")
        + f"Content-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


def tool_call(name: str, arguments: dict[str, Any], *, bearer: str | None = None, progress: bool = False) -> bytes:
    """A tools/call over HTTP, as a 2025-11-25 client sends it (`progress`: it asks for progress, as a stream)."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if progress:
        params["_meta"] = {"progressToken": "p"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return _request(body, bearer=bearer, stream=progress)


def answer(sock: socket.socket) -> tuple[bytes, bytes]:
    """One whole response with a Content-Length on `sock`: its head and its body."""
    received = bytearray()
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed before its answer's head: {bytes(received[:200])!r}"
        received += chunk
    end = received.index(b"\r\n\r\n") + 4
    head = bytes(received[:end])
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(received) < end + length:
        chunk = sock.recv(1 << 20)
        assert chunk, "the server closed before its answer ended"
        received += chunk
    return head, bytes(received[end : end + length])


def timed(port: int, request: bytes) -> float:
    """Seconds from sending `request` on a new connection to the last byte of a successful answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        start = time.perf_counter()
        sock.sendall(request)
        head, body = answer(sock)
        took = time.perf_counter() - start
    assert head.startswith(b"HTTP/1.1 200") and b'"isError":false' in body, (head, body[:300])
    return took


def ask_and_leave(port: int, request: bytes) -> None:
    """Ask, then leave (a reset) once the progress says the gateway has answered: its answer is being read."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    try:
        received = bytearray()
        sock.sendall(request)
        while received.count(b"notifications/progress") < 2:  # "0 of 1", then "the gateway answered"
            chunk = sock.recv(65536)
            assert chunk, f"the server closed first: {bytes(received[:300])!r}"
            received += chunk
    finally:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


@pytest.fixture
def large_answers() -> Iterator[tuple[int, SandboxGateway]]:
    """A real server before a gateway whose markets answer is 3.85 MB and a member's wagers 3.2 MB."""
    with SandboxGateway() as gateway, served(gateway.url) as (server, _):
        gateway.fault(MARKETS, "status", status=200, body=many_markets(15_000))
        gateway.fault(WAGERS, "status", status=200, body=many_wagers(20_000))
        yield int(server.server_address[1]), gateway


def test_clients_that_leave_before_their_large_answers_are_read_cost_the_next_member_a_few_times_alone(
    large_answers: tuple[int, SandboxGateway],
) -> None:
    port, _ = large_answers
    member = tool_call("get_wagers", {}, bearer=TOKEN_MEMBER_A)
    timed(port, member)  # warm: the gateway connection, the first large answer's one-off costs
    alone = statistics.median(timed(port, member) for _ in range(3))

    leaving = tool_call("get_prediction_markets", {"chainId": 137}, progress=True)
    clients = [threading.Thread(target=ask_and_leave, args=(port, leaving)) for _ in range(LEAVING)]
    for client in clients:
        client.start()
    for client in clients:
        client.join(WAIT)
        assert not client.is_alive()
    beside = timed(port, member)  # the next member, once they have all gone

    assert beside <= AT_MOST * alone, f"{beside:.2f} s behind {LEAVING} departed clients, {alone:.2f} s alone"
