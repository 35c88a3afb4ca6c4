"""The outbox (upstream/sending.py): a turn's small writes go out together after its work; a failure is its sender's."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import threading
import time
import weakref

import pytest

from mcp_server.transports.http.flow import WRITE_HIGH
from mcp_server.transports.http.loop import Guard, new_loop
from mcp_server.upstream import sending
from tests.mcp_http import Raw
from tests.sandbox_gateway import SandboxGateway
from tests.seams import served
from tests.test_failure_owners import HEALTH, eventually


class Sender:
    """A connection's stand-in: what it holds goes to `sent` (or raises `fails`) when the outbox says."""

    def __init__(self, name: str, journal: list[str], outbox: sending.Outbox, fails: Exception | None = None) -> None:
        self.name, self.journal, self.outbox, self.fails = name, journal, outbox, fails
        self.held: list[bytes] = []
        self.aborted = False

    def write(self, data: bytes) -> None:
        first = not self.held
        self.held.append(data)
        if first:
            self.outbox.hold(self)

    def send_held(self) -> None:
        if self.fails is not None:
            raise self.fails
        self.journal.append(f"{self.name} sent {b''.join(self.held).decode()}")
        self.held.clear()

    def abort(self) -> None:
        self.aborted = True
        self.journal.append(f"{self.name} aborted")


@pytest.fixture
def loop() -> asyncio.AbstractEventLoop:
    made = new_loop()
    yield made
    made.close()


def one_turn(loop: asyncio.AbstractEventLoop) -> None:
    loop.call_soon(loop.stop)
    loop.run_forever()


def test_a_turns_writes_are_sent_after_its_work_in_the_order_first_held(loop: asyncio.AbstractEventLoop) -> None:
    journal: list[str] = []
    box = sending.outbox(loop)
    a, b = Sender("a", journal, box), Sender("b", journal, box)

    def work() -> None:
        a.write(b"1")
        b.write(b"x")
        a.write(b"2")  # a's second write joins its first: one send, in order
        journal.append("work done")

    loop.call_soon(work)
    loop.call_soon(lambda: journal.append("other work of the turn"))
    one_turn(loop)
    assert journal == ["work done", "other work of the turn"]  # nothing sent during the turn
    one_turn(loop)
    assert journal[2:] == ["a sent 12", "b sent x"]
    # The next turn's writes are held again, and sent after it.
    loop.call_soon(lambda: b.write(b"y"))
    one_turn(loop)
    one_turn(loop)
    assert journal[4:] == ["b sent y"]


def test_a_busy_turn_sends_in_batches_as_it_goes(loop: asyncio.AbstractEventLoop) -> None:
    """No answer waits behind more than HOLD_CONNECTIONS others: the last of a batch sends them all at once."""
    journal: list[str] = []
    box = sending.outbox(loop)
    count = sending.HOLD_CONNECTIONS + 1
    senders = [Sender(str(i), journal, box) for i in range(count)]

    def work() -> None:
        for sender in senders:
            sender.write(b".")
            journal.append(f"wrote {sender.name}")

    loop.call_soon(work)
    one_turn(loop)
    batch = sending.HOLD_CONNECTIONS
    # Each of the first batch was written, then all of them sent together, in order, then the rest.
    assert journal[:batch] == [f"wrote {i}" for i in range(batch - 1)] + [f"{0} sent ."]
    assert journal[batch : 2 * batch] == [f"{i} sent ." for i in range(1, batch)] + [f"wrote {batch - 1}"]
    assert journal[2 * batch :] == [f"wrote {batch}"]  # the one past the batch waits for the turn's end
    one_turn(loop)
    assert journal[2 * batch + 1 :] == [f"{batch} sent ."]


def test_held_bytes_go_before_what_the_next_turn_reads(loop: asyncio.AbstractEventLoop) -> None:
    """The outbox's callback runs first in the next turn: before the ready sockets it reads."""
    journal: list[str] = []
    box = sending.outbox(loop)
    a = Sender("a", journal, box)
    left, right = socket.socketpair()
    try:
        right.setblocking(False)
        loop.add_reader(right.fileno(), lambda: journal.append(f"read {right.recv(10).decode()}"))

        def work() -> None:
            a.write(b"answer")
            left.send(b"next")  # already waiting when the turn ends

        loop.call_soon(work)
        one_turn(loop)
        one_turn(loop)
        assert journal == ["a sent answer", "read next"]
    finally:
        loop.remove_reader(right.fileno())
        left.close()
        right.close()


def test_a_send_that_fails_costs_its_connection_and_every_other_is_sent(
    loop: asyncio.AbstractEventLoop, caplog: pytest.LogCaptureFixture
) -> None:
    guard = Guard(loop)
    journal: list[str] = []
    box = sending.outbox(loop)
    broken = Sender("broken", journal, box, fails=RuntimeError("Cannot call write() after write_eof()"))
    a, b = Sender("a", journal, box), Sender("b", journal, box)
    with caplog.at_level(logging.ERROR, logger="fairwins_mcp.http"):
        loop.call_soon(lambda: (a.write(b"1"), broken.write(b"2"), b.write(b"3")))
        one_turn(loop)
        one_turn(loop)
    assert journal == ["a sent 1", "broken aborted", "b sent 3"]
    assert broken.aborted and not a.aborted and not b.aborted
    gc.collect()  # nothing left to be reported when the collector frees it (issue 47's way of ending a process)
    one_turn(loop)
    assert guard.strays == 0 and guard.fatal is None  # owned by the outbox: nothing reached the loop's handler
    assert "write_eof" in caplog.text


def test_an_outbox_keeps_no_loop_alive() -> None:
    made = new_loop()
    assert sending.outbox(made) is sending.outbox(made)  # one a loop
    made.close()
    gone = weakref.ref(made)
    del made
    gc.collect()
    assert gone() is None  # its outbox, the dictionary's value, did not keep its key


# ---- on a real connection: what is held stays within the flow control's bounds ---------------------


def test_a_client_that_pipelines_and_reads_slowly_gets_no_more_queued_than_flow_control_allows() -> None:
    """Held answers go to the transport once a turn's worth passes HOLD_MAX, so its high mark stops the
    coroutine: requests piled up while it waited (up to READ_AHEAD) are not all answered at once when
    the client reads a little."""
    with SandboxGateway() as gateway, served(gateway.url, read_timeout=10.0, write_timeout=10.0) as (server, listener):
        client = Raw(int(server.server_address[1]), timeout=10.0)
        sender = None
        try:
            client.send(HEALTH)  # accepted and answered: its socket's sending buffer made small next
            assert client.response() is not None
            accepted = listener.last
            assert accepted is not None
            socket.socket.setsockopt(accepted, socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            conn = next(iter(server._connections))
            # About 530 KB of requests, 2.3 MB of answers; sent from a thread, as they block.
            sender = threading.Thread(target=client.sock.sendall, args=(HEALTH * 12000,), daemon=True)
            sender.start()
            eventually(lambda: conn._writing_paused, "the answers wait for the client")
            eventually(lambda: conn._reading_paused, "the requests behind them fill the read-ahead")
            most = 0

            def watch() -> None:
                nonlocal most
                end = time.monotonic() + 2.0
                while time.monotonic() < end:
                    most = max(most, conn.backlog())
                    time.sleep(0.0005)

            watcher = threading.Thread(target=watch)
            watcher.start()
            got = 0
            while got < 2_000_000:  # the client reads: the writing resumes, the piled-up requests run
                got += len(client.sock.recv(65536))
            watcher.join()
            assert most <= WRITE_HIGH + sending.HOLD_MAX + 65536, most
        finally:
            client.close()
            if sender is not None:
                sender.join(5)
