"""A large answer's work lets the rest of the process run (issue 50): paused, paced, written a slice at a time.

Beside the event loop, a thread working on a large answer holds the interpreter lock and takes
about half the core for as long as it runs. So its passes pause between slices
(`wire.pause.pause()`), the HTTP transport's pacer (`driver.Pacer`) counts each slice against the
large answers' share and sleeps while small calls are being answered, and the answer goes to the
socket a slice at a time. What the small calls gain from it is measured in `bench/fairness.py`,
never asserted here as a time: these tests hold the mechanism.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any, Final

import pytest

from mcp_server.core.answers import CHUNK
from mcp_server.core.steps import Steps
from mcp_server.transports.http.driver import PACE_SLICE, Pacer, Pacing, off_loop
from mcp_server.transports.http.flow import WRITE_HIGH, WRITE_SLICE
from mcp_server.transports.http.server import McpHTTPServer
from mcp_server.transports.http.share import Share
from mcp_server.wire import pause
from tests.conftest import McpClient
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.seams import Listener, served

WAGERS: Final = "/v1/member/wagers"
MARKETS: Final = "/v1/polymarket/137/markets"
WAIT: Final = 20.0


def many_wagers(count: int) -> bytes:
    one = {"stake": "1.00", "asset": "USDC", "deadline": "2026-12-01T00:00:00Z", "status": "open"}
    wagers = [{"id": f"w-{i}", **one, "description": f"wager {i} — ünïcode"} for i in range(count)]
    envelope = {"asOf": "2026-11-29T20:00:00Z", "chains": [{"chainId": 137, "state": "read", "wagers": wagers}]}
    return json.dumps(envelope).encode()


# ---- pause() and paced() ----------------------------------------------------------------------


def test_pause_calls_this_threads_pacer_only_inside_paced_and_the_outer_one_after() -> None:
    calls: list[str] = []
    pause.pause()  # no pacer: nothing happens
    with pause.paced(lambda: calls.append("outer")):
        pause.pause()
        with pause.paced(lambda: calls.append("inner")):
            pause.pause()
        pause.pause()
        elsewhere = threading.Thread(target=pause.pause)  # another thread has no pacer of this one's
        elsewhere.start()
        elsewhere.join()
    pause.pause()
    assert calls == ["outer", "inner", "outer"]


# ---- the pacer ---------------------------------------------------------------------------------


class Clocks:
    """The pacer's thread CPU clock, the loop's clock and its sleeps, moved by the test."""

    def __init__(self) -> None:
        self.cpu_now = 0.0
        self.now = 100.0
        self.slept: list[float] = []

    def cpu(self) -> float:
        return self.cpu_now

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_pacer_counts_each_slice_and_sleeps_only_while_small_calls_are_answered() -> None:
    clocks = Clocks()
    share = Share(share=0.25, burst=0.0, recent=1.0)
    pacer = Pacer(share, clocks.clock, cpu=clocks.cpu, sleep=clocks.sleep)

    clocks.cpu_now += PACE_SLICE / 2
    pacer()  # less than a slice: not even counted
    assert pacer.counted == 0.0 and share.budget == 0.0

    clocks.cpu_now += PACE_SLICE / 2
    pacer()  # a slice, and no small call about: counted, never slept on
    assert pacer.counted == pytest.approx(PACE_SLICE)
    assert clocks.slept == []

    share.small_answered(clocks.now)
    clocks.cpu_now += PACE_SLICE
    pacer()  # a slice while small calls are answered: the thread sleeps off its debt at 25 %
    assert pacer.counted == pytest.approx(2 * PACE_SLICE)
    assert clocks.slept == [pytest.approx(2 * PACE_SLICE / 0.25)]  # both slices owed, at a quarter of the clock

    # A long stretch of CPU between two pauses (one slow slice): the thread sleeps until the small
    # calls may have gone, asks again, and goes on once none was answered meanwhile.
    share.small_answered(clocks.now)
    clocks.cpu_now += 1.0
    pacer()
    assert clocks.slept[1:] == [pytest.approx(share.recent)]  # not the 4 s its debt would take


def test_the_pacer_sleeps_off_the_debt_while_small_calls_go_on_being_answered() -> None:
    clocks = Clocks()
    share = Share(share=0.1, burst=0.0, recent=0.005)
    pacer = Pacer(share, clocks.clock, cpu=clocks.cpu, sleep=clocks.sleep)

    def sleep_among_small_calls(seconds: float) -> None:
        clocks.sleep(seconds)
        share.small_answered(clocks.now)  # one answered as each wait ends: they are still about

    pacer.sleep = sleep_among_small_calls
    share.small_answered(clocks.now)
    clocks.cpu_now += 0.002
    pacer()
    # 2 ms of CPU at 10 %: 20 ms of sleep, in waits no longer than RECENT, each asked again.
    assert sum(clocks.slept) == pytest.approx(0.02)
    assert max(clocks.slept) <= share.recent + 1e-12


def test_a_sleep_that_ends_early_ends_the_pacers_wait() -> None:
    clocks = Clocks()
    share = Share(share=0.1, burst=0.0, recent=10.0)
    woken: list[float] = []

    def cancelled(seconds: float) -> bool:
        woken.append(seconds)
        return True  # as Cancellation.wait says once its call is cancelled

    pacer = Pacer(share, clocks.clock, cpu=clocks.cpu, sleep=cancelled)
    share.small_answered(clocks.now)
    clocks.cpu_now += 1.0
    pacer()
    assert woken == [pytest.approx(10.0)]  # one wait, cut short: the work is about to stop


def test_off_loop_runs_the_work_paced_and_counts_its_cpu_once() -> None:
    import asyncio

    seen: list[object] = []

    def work() -> int:
        seen.append(getattr(pause._local, "pacer", None))
        total = 0
        for i in range(300_000):  # a few milliseconds of CPU, paused as the passes pause
            total += i
            if not i % 10_000:
                pause.pause()
        return total

    pacing = Pacing()
    try:
        assert asyncio.run(off_loop(work, pacing)) == sum(range(300_000))
    finally:
        pacing.close()
    (pacer,) = seen
    assert isinstance(pacer, Pacer) and pacer.share is pacing.share
    assert pacer.counted >= PACE_SLICE  # its slices were counted as it went
    assert getattr(pause._local, "pacer", None) is None  # this thread was never paced


# ---- a server's own pacing -----------------------------------------------------------------------


def _small_steps() -> Steps[str]:
    """A small call's steps: nothing to wait for, an answer at once."""
    return "answered"
    yield  # a generator, as the dispatcher's steps are


def _heavy(pacing: Pacing) -> float:
    """The process's switch interval as a large answer's work on `pacing` saw it."""
    import asyncio
    import sys

    return asyncio.run(off_loop(sys.getswitchinterval, pacing))


def test_each_server_paces_with_its_own_share_and_executor() -> None:
    import asyncio

    from mcp_server.transports.http.driver import drive

    ours, theirs = Pacing(), Pacing()
    try:
        before = theirs.share.last_small
        assert asyncio.run(drive(_small_steps(), ours)) == "answered"
        assert ours.share.last_small > before, "a small call answered is counted in its server's share"
        assert theirs.share.last_small == before, "and in no other server's"
        assert ours.executor() is not theirs.executor()
        assert ours.executor() is ours.executor(), "made once, on first use"
    finally:
        ours.close()
        theirs.close()


def test_a_pacing_that_did_not_ask_leaves_the_switch_interval_as_it_was() -> None:
    import sys

    default = sys.getswitchinterval()
    asked, unasked = Pacing(switch=default / 10), Pacing(switch=None)
    try:
        assert _heavy(unasked) == default
        assert _heavy(asked) == default / 10, "shortened while its large answer is at work"
        assert sys.getswitchinterval() == default, "and put back once it is done"
    finally:
        asked.close()
        unasked.close()


def test_a_closed_pacing_lets_its_threads_go() -> None:
    others = set(threading.enumerate())
    pacing = Pacing()
    _heavy(pacing)
    threads = [t for t in threading.enumerate() if t not in others]
    pacing.close()
    for thread in threads:
        thread.join(WAIT)
    assert threads and not any(t.is_alive() for t in threads)


# ---- the passes pause as they go -----------------------------------------------------------------


def many_markets(count: int) -> bytes:
    """Markets as the gateway relays them: each holds an array of objects (its outcomes), so a
    "}, {" comes inside every market as well as between two."""
    rows = [
        {
            "id": f"0x{i:064x}",
            "question": f"Will it rain in Lisbon on day {i}? {{not a brace that counts}}",
            "outcomes": [{"name": "Yes", "price": "0.41"}, {"name": "No", "price": "0.59"}],
            "volume": f"{i * 7919 % 1000000}.00",
        }
        for i in range(count)
    ]
    return json.dumps({"chainId": 137, "q": None, "markets": rows}).encode()


SHAPES: Final = {
    # shape: (the gateway's route, the tool, its arguments, the bearer, the answer of `count` items, its list)
    "wagers": (WAGERS, "get_wagers", {}, TOKEN_MEMBER_A, many_wagers, ("chains", 0, "wagers")),
    "markets": (MARKETS, "get_prediction_markets", {"chainId": 137}, None, many_markets, ("markets",)),
}


@pytest.mark.parametrize(("shape", "count"), [("wagers", 4_000), ("wagers", 20_000), ("markets", 12_000)])
def test_reading_and_writing_a_large_answer_pauses_all_along_and_answers_the_same(
    mcp: McpClient, sandbox: SandboxGateway, shape: str, count: int
) -> None:
    route, tool, arguments, bearer, make, where = SHAPES[shape]
    data = make(count)
    sandbox.fault(route, "status", status=200, body=data)
    unpaced = mcp.call_tool(tool, arguments, bearer=bearer)
    pauses = [0]

    def count_pause() -> None:
        pauses[0] += 1

    with pause.paced(count_pause):
        paced = mcp.call_tool(tool, arguments, bearer=bearer)
    assert paced == unpaced and paced["isError"] is False
    items: Any = paced["structuredContent"]
    for key in where:
        items = items[key]
    assert len(items) == count
    # The reader pauses after each chunk it decodes (about one per CHUNK characters), and the
    # depth check and the text block's escape after each of their slices besides (how markets
    # are cut into chunks: test_answers.py).
    assert pauses[0] >= len(data) // CHUNK


# ---- the socket is handed a slice at a time -------------------------------------------------------


@pytest.fixture
def door() -> Iterator[tuple[McpHTTPServer, Listener, SandboxGateway]]:
    with SandboxGateway() as gateway, served(gateway.url) as (server, listener):
        yield server, listener, gateway


def test_a_large_answer_is_handed_to_the_socket_a_slice_at_a_time(
    door: tuple[McpHTTPServer, Listener, SandboxGateway],
) -> None:
    server, listener, gateway = door
    data = many_wagers(20_000)
    gateway.fault(WAGERS, "status", status=200, body=data)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers"}}).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        f"Authorization: Bearer {TOKEN_MEMBER_A}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", int(server.server_address[1])), timeout=WAIT) as client:
        client.sendall(head + body)
        received = bytearray()
        while b"\r\n\r\n" not in received:
            received += client.recv(65536)
        end = received.index(b"\r\n\r\n") + 4
        length = int(received[:end].lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(received) < end + length:
            chunk = client.recv(1 << 20)
            assert chunk, "the server closed before its answer ended"
            received += chunk
    answer: dict[str, Any] = json.loads(received[end:])
    assert len(answer["result"]["structuredContent"]["chains"][0]["wagers"]) == 20_000
    assert length > 4 * WRITE_SLICE  # an answer of many slices
    sock = listener.last
    assert sock is not None
    # Each send() is handed at most a slice beyond what the transport may hold before it pauses
    # the writer: never the whole answer (before: one send of all of it).
    assert max(sock.offered) <= WRITE_HIGH + WRITE_SLICE, sorted(sock.offered)[-5:]
    assert sum(1 for n in sock.offered if n > 0) >= length // (WRITE_HIGH + WRITE_SLICE)
