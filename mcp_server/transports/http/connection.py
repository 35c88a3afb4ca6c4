"""One client connection on the event loop, its requests answered in turn.

The socket work is here and only here: the protocol object the loop calls with bytes, an end or
a loss, and the connection's one coroutine that feeds them to the sans-I/O reader within the idle
and read deadlines, writes answers under one deadline for the whole answer, and closes in stages
after a refusal. Which bytes are a request is the reader's decision, made from the head before
any route runs; a connection whose request body was not read to its end is closed after the
answer, so no byte of a body is ever read as the next request.

What each event means (an end, a reset, bytes during a call, a deadline passed) is the
lifecycle table's to say (lifecycle.py). Whatever serving one connection raises, its coroutine
catches, logs and ends that connection with (docs/architecture.md, "Who owns a failure").
"""

from __future__ import annotations

import asyncio
import logging
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Final, Protocol

from mcp_server.core.protocol import Dispatcher
from mcp_server.ops.metrics import ServerMetrics
from mcp_server.transports.http import gate
from mcp_server.transports.http.admission import HEADS_FULL, Admission, Slot
from mcp_server.transports.http.drain import Timings
from mcp_server.transports.http.flow import WRITE_HIGH, WRITE_LOW, WRITE_SLICE
from mcp_server.transports.http.head import Head, Refusal
from mcp_server.transports.http.lifecycle import CANCEL, Deadline, Lifecycle, Phase
from mcp_server.transports.http.reader import END, NEED_DATA, Data, RequestReader
from mcp_server.transports.http.record import CLIENT_LEFT, Exchange
from mcp_server.transports.http.response import error_body, error_code, head
from mcp_server.upstream import sending
from mcp_server.upstream.receiving import receive_buffer
from mcp_server.wire.jsonrpc import Part, pieces

if TYPE_CHECKING:
    from mcp_server.transports.http.door import Door
    from mcp_server.transports.http.driver import Pacing

log = logging.getLogger("fairwins_mcp.http")

LINGER_SECONDS: Final = 2.0  # after a refusal that closes, how long the rest of the request is read and dropped
RESERVE_SECONDS: Final = 2.0  # a connection in the health reserve: time to send its one request
# Bytes read ahead of the request being served (a pipelined request, a body still arriving): past
# this the loop stops reading the socket until the reader has taken them, so a client cannot fill memory.
READ_AHEAD: Final = 256 * 1024
TIMED_OUT: Final = Refusal(408, "request_timeout", "The request did not arrive in time")


class Gone(Exception):
    """The client closed or reset the connection: nothing more can be answered."""


class Host(Protocol):
    """What a connection and its routes use of server.McpHTTPServer.

    A Protocol: the server imports this module and hands itself over; nothing here imports it back.
    """

    dispatcher: Dispatcher
    env_bearer: str | None
    metrics: ServerMetrics | None
    exports: ServerMetrics | None  # what its GET /metrics answers with
    policy: gate.Policy
    stopping: bool
    unready: bool
    admission: Admission
    read_timeout: float
    write_timeout: float
    timings: Timings
    door: Door | None  # OAuth mode: the access tokens judged and the sign-in asked for (door.py)
    pacing: Pacing  # how its large answers share the core with its small calls (driver.py)

    def begin(self) -> None: ...

    async def acquire_slot(self, wait: float) -> bool:
        """Take an in-flight slot within `wait` seconds; False if none came."""
        ...

    def release_slot(self) -> None: ...

    def end(self) -> None: ...

    def connection_closed(self, conn: Connection) -> None: ...

    async def route(self, conn: Connection, request: Head, decision: gate.Admit | gate.Refuse) -> None:
        """Answer one request the gate has judged (routes.py)."""
        ...


class Connection(asyncio.BufferedProtocol):
    """The loop's protocol object for one accepted socket, and its coroutine."""

    # Slots: an idle keep-alive connection is this object, its transport and its waiting coroutine,
    # and thousands of them may be open at once.
    __slots__ = (
        "_answer_until",
        "_buf",
        "_counted_head",
        "_held",
        "_held_size",
        "_on_gone",
        "_outbox",
        "_poller",
        "_queued",
        "_reading_paused",
        "_sock",
        "_timer",
        "_timer_at",
        "_until",
        "_waiter",
        "_writing_paused",
        "deadline",
        "idle_since",
        "life",
        "loop",
        "peer",
        "reader",
        "record",
        "server",
        "slot",
        "task",
        "thread",
        "transport",
    )

    def __init__(self, server: Host, peer: str, slot: Slot, loop: asyncio.AbstractEventLoop) -> None:
        self.server = server
        self.peer = peer
        self.slot = slot
        self.loop = loop
        self.thread = threading.get_ident()  # the loop's: writes from elsewhere are handed to it
        self.reader = RequestReader()
        self.life = Lifecycle()  # what each event means: the I/O here asks it what to do
        self.deadline = 0.0  # when the request being read must be whole
        self.record = Exchange(peer, time.monotonic())
        self.idle_since = time.monotonic()  # the end of the last answer (or the accept)
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None
        self._buf = bytearray()
        # Small writes held to the end of the loop's turn, sent with the others' (upstream/sending.py).
        self._outbox = sending.outbox(loop)
        self._held: list[bytes] = []
        self._held_size = 0
        self._reading_paused = False
        self._writing_paused = False
        self._waiter: asyncio.Future[bool] | None = None
        self._until = 0.0  # when the wait under way ends (time.monotonic())
        # One timer at a time, not one a wait: it is left set when a wait ends early, and the next
        # wait keeps it if it ends no later (the next request's limit counts from later on), so a
        # kept-alive connection sets about one timer an idle limit, not one a request.
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._answer_until = 0.0  # the answer being written must be out by then (loop time)
        self._on_gone: Callable[[], None] | None = None  # the watched call's cancellation
        self._queued: asyncio.Task[None] | None = None  # this connection's task, waiting for a call slot
        self._counted_head = False
        self._sock: socket.socket | None = None  # the accepted socket, for the peek at its end
        # Its poll(0): whether anything waits on the socket (not on Windows, which has no poll()).
        self._poller: Callable[[float], list[tuple[int, int]]] | None = None

    @property
    def linger(self) -> bool:
        """Whether the connection closes in stages (`_linger_close`) at its end."""
        return self.life.linger

    @property
    def idle(self) -> bool:
        """Waiting for a request: a drain wakes it to shorten its limit."""
        return self.life.phase is Phase.IDLE

    # ---- what the loop calls --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(WRITE_HIGH, WRITE_LOW)

    def get_buffer(self, sizehint: int) -> memoryview:
        return receive_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if not self.life.received():
            return  # lingering, or cut off: dropped
        self._buf += receive_buffer()[:nbytes]
        if len(self._buf) > READ_AHEAD and not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        if self.life.end(self._unread()) is CANCEL:
            self._gone()  # a request waiting, nothing more of the client's: it left
        self._wake()
        return True  # half-closed: the requests it sent before its end are still answered

    def _unread(self) -> bool:
        """Bytes of the client's not yet served, here or in the reader (pipelined)."""
        return bool(self._buf) or self.reader.pending > 0

    def connection_lost(self, exc: Exception | None) -> None:
        if self.life.reset() is CANCEL:
            self._gone()
        self._wake()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake()

    # ---- waiting ----------------------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    async def _wait(self, until: float) -> bool:
        """Wait for bytes, an end, room to write or a drain; False at `until`."""
        left = until - time.monotonic()
        if left <= 0:
            return False
        waiter = self.loop.create_future()
        self._waiter = waiter
        self._until = until
        timer = self._timer
        if timer is None or self._timer_at > until:
            if timer is not None:
                timer.cancel()
            self._timer_at = until
            self._timer = self.loop.call_later(left, self._alarm)
        try:
            woken: bool = await waiter
            return woken
        finally:
            self._waiter = None

    def _alarm(self) -> None:
        """The timer: the wait under way ends now, unless it now ends later."""
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # no wait under way: the next one sets a timer of its own
        left = self._until - time.monotonic()
        if left > 0:
            self._timer_at = self._until
            self._timer = self.loop.call_later(left, self._alarm)
            return
        waiter.set_result(False)

    def wake(self) -> None:
        """A drain begins: a connection waiting idle looks at its limit again."""
        if self.life.drain_begins():
            self._wake()

    def watch(self, on_gone: Callable[[], None]) -> Callable[[], None]:
        """Call `on_gone` if the client leaves before the returned unwatch.

        Called when a request is whole, before it waits for a call slot. A connection already gone
        calls `on_gone` at once; whether an end came with the request is `Lifecycle.call_begins`'.
        """
        if not self.life.call_begins(self._unread(), self._ended_in_kernel):
            on_gone()  # it left before its request was whole
            return unwatched
        self._on_gone = on_gone

        def unwatch() -> None:
            self._on_gone = None
            self.life.call_ends()

        return unwatch

    def _ended_in_kernel(self) -> bool:
        """Whether the client's end is the next thing on the socket (a peek)."""
        sock = self._sock
        if sock is None or self._buf:
            return False
        if sys.platform != "win32":
            # Nothing waiting, the usual case, is told by a poll: a peek that finds nothing raises.
            poll = self._poller
            if poll is None:
                poller = select.poll()
                poller.register(sock.fileno(), select.POLLIN)
                poll = self._poller = poller.poll
            if not poll(0):
                return False
        try:
            return sock.recv(1, socket.MSG_PEEK) == b""
        except (BlockingIOError, InterruptedError):
            return False  # nothing arrived: no end yet
        except OSError:
            return False  # a reset: the transport reads it and says so (connection_lost)

    async def wait_for_slot(self, wait: float) -> bool | None:
        """A call slot for the request just read; None if its client left first.

        Waits at most `wait` seconds (Host.acquire_slot): False when no slot came in time. No slot
        is held after False or None. The client of a watched request (`watch`) leaving ends the
        wait at once: `_gone` cancels this connection's task where it waits, as asyncio.timeout
        does, and the slot goes to the next request in the queue.
        """
        task = asyncio.current_task()
        assert task is not None
        self._queued = task
        try:
            taken = await self.server.acquire_slot(wait)
        except asyncio.CancelledError:
            if self._queued is not None or task.uncancel():
                raise  # not (only) its client's leaving: the server's own cancellation goes on
            return None
        finally:
            left = self._queued is None  # `_gone` took it
            self._queued = None
        if left:
            # The slot came as the client left (asyncio.wait_for returns a result that was ready
            # when it was cancelled, and the cancellation ends there): it goes to the next request.
            task.uncancel()
            if taken:
                self.server.release_slot()
            return None
        return taken

    def _gone(self) -> None:
        """The watched request's client left: its slot wait ends, `on_gone` runs."""
        on_gone, self._on_gone = self._on_gone, None
        if on_gone is None:
            return  # no request watched
        queued, self._queued = self._queued, None
        if queued is not None:
            queued.cancel()  # its wait for a slot ends now
        try:
            on_gone()
        except Exception:
            # A cancel callback that failed: this call's cancellation is what it cost.
            log.error("cancelling the call of a client from %s that left failed", self.peer, exc_info=True)

    # ---- the connection's coroutine ---------------------------------------------------------

    async def run(self, sock: socket.socket) -> None:
        try:
            try:
                await self.loop.connect_accepted_socket(lambda: self, sock)
            except Exception:
                sock.close()
                raise
            self._sock = sock
            while not self.life.closing:
                event = await self._read_head()
                if event is None:
                    break  # the client left, or stayed idle: closed quietly, as keep-alive clients expect
                await self._serve(event)
                if self.reader.body_done:
                    self.reader.next_request()
                else:
                    self.life.closing = True  # the body was not read to its end: its bytes are no request
        except Gone:
            pass
        except OSError as exc:
            # A reset socket (EINVAL from TCP_NODELAY on macOS), a failed getpeername or setblocking:
            # this connection ends, every other goes on.
            # The text, not the exception: a record kept for a while (queued, or captured) would
            # keep its traceback, and with it this connection.
            log.debug("connection from %s ended: %s", self.peer, str(exc))
        except Exception:
            log.error("unexpected failure serving a connection from %s", self.peer, exc_info=True)
        finally:
            self._uncount_head()
            try:
                if self.life.linger and not self.life.lost:
                    await self._linger_close()
            finally:
                self._sock = None
                if self._timer is not None:
                    self._timer.cancel()  # it holds this connection until it fires
                    self._timer = None
                self._close()
                self.life.closed()
                self.server.connection_closed(self)

    def _close(self) -> None:
        transport = self.transport
        if transport is None or self.life.lost:
            return
        self.send_held()  # the last answer, before the end
        if transport.get_write_buffer_size():
            # What is still queued goes out, within the answer's deadline; a client that does not
            # read it is cut off then.
            left = max(self._answer_until - self.loop.time(), 0.0)
            self.loop.call_later(left, transport.abort)
        transport.close()

    async def _serve(self, event: Head | Refusal) -> None:
        record = self.record
        if isinstance(event, Refusal):
            await self._refuse(event)
            return
        record.method, record.path = event.method, event.path
        record.protocol = f"HTTP/1.{event.minor}"
        record.user_agent = event.headers.get("user-agent")
        # W3C Trace Context; a repeated traceparent, joined with ", ", is no longer valid.
        record.record.inbound = (event.headers.get("traceparent"), event.headers.get("tracestate"))
        self.life.closing = not event.keep_alive or self.slot == "reserve"
        self.server.begin()
        try:
            policy = self.server.policy
            decision = gate.check(event.method, event.path, event.headers, policy, event.host)
            if self.slot == "reserve" and not (isinstance(decision, gate.Admit) and decision.route == "health"):
                # Every slot is taken: this connection was let in only to answer a health check.
                busy = error_body("busy", "Too many connections; retry shortly")
                await self.respond(503, busy, extra={"Retry-After": "1"})
                return
            await self.server.route(self, event, decision)
        finally:
            self.server.end()

    async def _refuse(self, refusal: Refusal) -> None:
        """Answer a request refused for what it is, then close (RFC 9112 §9.6)."""
        body = error_body(refusal.error, refusal.message)
        await self.respond(refusal.status, body, close=True, linger=refusal is not TIMED_OUT)

    # ---- reading ------------------------------------------------------------------------------

    async def _recv(self, until: float) -> bytes:
        """The bytes read so far (at least one); TimeoutError at `until`, or Gone.

        TimeoutError once `until` has passed, even with bytes here: a client that trickles its
        request in, a byte at a time, is held to the deadline all the same.
        """
        if until <= time.monotonic():
            raise TimeoutError
        while not self._buf:
            if self.life.ended:
                raise Gone
            if not await self._wait(until):
                raise TimeoutError
        data = bytes(self._buf)
        self._buf.clear()
        if self._reading_paused and self.transport is not None and not self.life.lost:
            self._reading_paused = False
            self.transport.resume_reading()
        return data

    async def _await_request(self) -> bool:
        """Wait, idle, for the next request's first bytes; False to close instead.

        The idle limit counts from the end of the last answer and shortens to the drain's grace
        when a drain begins, even for a connection already waiting (the drain wakes it).
        """
        server = self.server
        reserve = self.slot == "reserve"
        while not self._buf and not self.life.ended:
            limit = RESERVE_SECONDS if reserve else server.timings.idle_limit(server.stopping)
            until = self.idle_since + limit
            if until <= time.monotonic():
                return False
            await self._wait(until)
        return bool(self._buf)

    async def _read_head(self) -> Head | Refusal | None:
        """The next request's head, or why it is refused; None if the client ends."""
        reader = self.reader
        self.deadline = 0.0
        while True:
            if not self.deadline and reader.started:
                self._request_begins()
            event = reader.next_event()
            if event is not NEED_DATA:
                self._uncount_head()
                assert isinstance(event, (Head, Refusal))
                return event
            if reader.started:
                if not await self._count_head():
                    return None
                until = self.deadline
            elif await self._await_request():
                until = time.monotonic() + self.server.read_timeout
            else:
                return None  # idle past its limit, or gone: closed quietly, as keep-alive clients expect
            try:
                reader.feed(await self._recv(until))
            except TimeoutError:
                self._uncount_head()
                return TIMED_OUT if self.life.deadline() is Deadline.REFUSE else None
            except Gone:
                return None  # a head cut short is not answered: its client has gone

    def _request_begins(self) -> None:
        """A request's first byte: all of it must arrive within read_timeout."""
        whole = RESERVE_SECONDS if self.slot == "reserve" else self.server.read_timeout
        self.record = Exchange(self.peer, time.monotonic())
        self.deadline = self.record.started + whole
        self.life.reading()

    async def _count_head(self) -> bool:
        """Count a head under way against its peer's; False if refused (closed)."""
        if self._counted_head or not self.reader.in_head:
            return True
        if self.server.admission.head_started(self.peer):
            self._counted_head = True
            return True
        body = error_body(HEADS_FULL.error, HEADS_FULL.message)
        await self.respond(HEADS_FULL.status, body, close=True, linger=False)
        return False

    def _uncount_head(self) -> None:
        if self._counted_head:
            self._counted_head = False
            self.server.admission.head_done(self.peer)

    async def read_body(self, limit: int, *, keep: bool = True) -> bytes | Refusal | None:
        """The body up to `limit` bytes (dropped unless `keep`), Refusal or None."""
        reader = self.reader
        reader.body_limit = limit
        self.life.reading()  # again, after an interim answer ("100 Continue")
        parts: list[bytes] = []
        while True:
            event = reader.next_event()
            if event is END:
                return b"".join(parts)
            if isinstance(event, Data):
                if keep:
                    parts.append(event.data)
                continue
            if isinstance(event, Refusal):
                return event
            try:
                reader.feed(await self._recv(self.deadline))
            except TimeoutError:
                return TIMED_OUT
            except Gone:
                return None

    async def drop_body(self, request: Head) -> bool:
        """Read and drop a body no route wants; False if answered or client gone.

        Read within POST /mcp's size and read deadline. Over that size, or awaiting "100 Continue"
        (never promised here), it is not read and the answer closes the connection. A malformed or
        late body is answered for what it is (400, 408) instead of the route's answer.
        """
        limit = self.server.policy.max_body
        if not request.has_body or request.expect_continue or request.length > limit:
            return True
        body = await self.read_body(limit, keep=False)
        if body is None:
            self.life.closing = True
            return False
        if isinstance(body, Refusal) and body.status != 413:  # over the limit: not read, and closed after
            await self._refuse(body)
            return False
        return True

    # ---- writing ------------------------------------------------------------------------------

    def start_answer(self) -> None:
        """An answer begins: out, whole, within write_timeout (not one per slice)."""
        self._answer_until = self.loop.time() + self.server.write_timeout
        self.life.answer_begins()

    def write(self, data: bytes | memoryview) -> bool:
        """Queue `data` for the client; False (and the connection closes) if gone.

        A small write is held to the end of the loop's turn (upstream/sending.py); a large one is
        sent at once, after what is held. Safe from any thread: bytes written from elsewhere are
        handed to the loop's thread.
        """
        if self.life.lost or self.transport is None or self.transport.is_closing():
            self.life.closing = True
            return False
        if threading.get_ident() != self.thread:
            self.loop.call_soon_threadsafe(self._write_now, bytes(data))
            return True
        self._put(data)
        return True

    def _write_now(self, data: bytes) -> None:
        if not self.life.lost and self.transport is not None and not self.transport.is_closing():
            self._put(data)

    def _put(self, data: bytes | memoryview) -> None:
        size = self._held_size + len(data)
        if size <= sending.HOLD_MAX:
            first = not self._held
            self._held.append(data if isinstance(data, bytes) else bytes(data))
            self._held_size = size
            if first:
                self._outbox.hold(self)  # last: the outbox may send what is held at once
        else:
            # Past what a turn may hold (a large answer, or many small ones to a client that
            # pipelines and does not read): to the transport now, after what came before it, so
            # that its flow control sees them and the answers wait for the client (flush).
            self.send_held()
            assert self.transport is not None
            self.transport.write(data)

    def send_held(self) -> None:
        """Hand the transport what is held (the outbox calls it at the turn's end)."""
        if not self._held:
            return
        data = sending.taken(self._held)
        self._held_size = 0
        transport = self.transport
        if transport is not None and not self.life.lost and not transport.is_closing():
            transport.write(data)

    def backlog(self) -> int:
        """Bytes queued and not yet taken by the client (held ones included)."""
        if self.transport is None or self.life.lost:
            return 0
        return self.transport.get_write_buffer_size() + self._held_size

    async def flush(self) -> bool:
        """Wait until the client has taken enough to queue more; False if cut off.

        Cut off when it has not read its answer within the answer's deadline, or is gone.
        """
        while self._writing_paused and not self.life.lost:
            left = self._answer_until - self.loop.time()
            if left <= 0 or not await self._wait(time.monotonic() + left):
                if self._writing_paused and not self.life.lost:
                    log.info(
                        "a client from %s did not read its answer within %g s", self.peer, self.server.write_timeout
                    )
                    self.abort()
                    return False
        if self.life.lost:
            self.life.closing = True
            return False
        return True

    def abort(self) -> None:
        """Cut off now with a reset: a close would send what the kernel holds."""
        self.life.aborted()
        self._held.clear()  # dropped, with what the kernel holds
        self._held_size = 0
        if self.transport is None:
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass  # already reset: aborting is all that is left
        self.transport.abort()

    async def respond(
        self,
        status: int,
        body: bytes | Sequence[Part],
        *,
        content_type: str = "application/json",
        extra: dict[str, str] | None = None,
        close: bool = False,
        linger: bool | None = None,
    ) -> None:
        """Status line, headers and body (one write when small), and access line.

        The connection closes after this answer when asked, when the request said so, while the
        server drains, or when the request's body was not read to its end: whatever is left of
        it must never be read as a request.
        """
        close = close or self.life.closing or self.server.stopping or not self.reader.body_done
        if close:
            # Refused, with part of the request possibly still on its way: close in stages.
            self.life.last_answer(status >= 400 if linger is None else linger)
        parts: Sequence[Part] = [body] if isinstance(body, bytes) else body
        size = sum(len(part) for part in parts)  # a str part is ASCII: one byte a character
        self.record.response_size = size
        if status >= 400 and not self.record.record.outcome:
            self.record.error = error_code(b"".join(pieces(parts)))  # a refusal: counted under its reason
        data = head(status, size, content_type=content_type, extra=extra, close=close)
        if self.record.method == "HEAD" or not size:
            parts = []
        elif size < 65536:
            data = b"".join([data, *pieces(parts)])  # one write: a small answer is one packet
            parts = []
        self.start_answer()
        delivered = await self.send_answer([data, *parts])
        self.finish(status, delivered=delivered)

    async def send_answer(self, parts: Sequence[Part]) -> bool:
        """An answer's bytes, within its deadline; False if not all went.

        Every last write of an answer goes this way (a JSON answer, an event stream's), under the
        one deadline `start_answer` set. Pieces are never joined, and go WRITE_SLICE at a time with
        the loop's other work between slices, as fast as the client takes them: a multi-megabyte
        piece handed to the transport whole is one send() copying megabytes on loopback while
        every other connection waits.
        """
        for at, chunk in _slices(parts):
            if at:
                await asyncio.sleep(0)  # one turn of the loop for the others
            if not (self.write(chunk) and await self.flush()):
                return False
        return True

    def finish(self, status: int, *, delivered: bool = True) -> None:
        """Log the request's one record; the connection is idle from now.

        An MCP answer not delivered whole is logged CLIENT_LEFT; a refusal keeps its status.
        """
        record = self.record
        record.status = status if delivered or not record.record.outcome else CLIENT_LEFT
        record.log(self.server.metrics)
        self.idle_since = time.monotonic()
        self.life.answer_ends()

    async def _linger_close(self) -> None:
        """Close in stages after refusing a request whose body may still arrive.

        RFC 9112 §9.6: closing with unread bytes makes the kernel send a reset, which can destroy the refusal
        before the client reads it; so the sending half is closed first (once the refusal is out)
        and the rest read and dropped until the client closes, for at most LINGER_SECONDS.
        """
        transport = self.transport
        if transport is None:
            return
        self._buf.clear()
        self.life.lingers()
        if self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
        self.send_held()  # the refusal, before the end of our sending half
        if transport.can_write_eof():
            try:
                transport.write_eof()
            except OSError as exc:
                # The client is gone already (ENOTCONN: a port probe's newline, then its reset): there is
                # nothing to linger for, and raised here it would leave run()'s finally unretrieved.
                log.debug("a client from %s left before its refusal's end was sent: %s", self.peer, str(exc))
                return
        until = time.monotonic() + LINGER_SECONDS
        while not self.life.ended and await self._wait(until):
            pass


def _slices(parts: Sequence[Part]) -> Iterator[tuple[int, bytes | memoryview]]:
    """Each piece of `parts` in WRITE_SLICE slices: (offset in piece, slice)."""
    for piece in pieces(parts):
        if len(piece) <= WRITE_SLICE:
            yield 0, piece  # whole: a held write keeps it as it is, not copied out of a view
            continue
        view = memoryview(piece)
        for at in range(0, len(view), WRITE_SLICE):
            yield at, view[at : at + WRITE_SLICE]


def unwatched() -> None:
    """The unwatch of a call that was never watched: nothing to undo."""
