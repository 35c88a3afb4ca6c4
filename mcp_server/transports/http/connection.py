"""One client connection on its own thread: each request read by the sans-I/O reader, routed, answered, in turn.

The socket work is here and only here: receiving within the idle and read deadlines, sending,
and closing in stages after a refusal. Which bytes are a request is the reader's decision, made
from the head before any route runs; a connection whose request body was not read to its end is
closed after the answer, so no byte of a body is ever read as the next request.
"""

from __future__ import annotations

import logging
import select
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import Final, Protocol

from mcp_server.core.protocol import Dispatcher
from mcp_server.ops.metrics import ServerMetrics
from mcp_server.transports.http import gate
from mcp_server.transports.http.admission import HEADS_FULL, Admission, Slot
from mcp_server.transports.http.disconnects import DisconnectWatcher
from mcp_server.transports.http.drain import Timings
from mcp_server.transports.http.head import Head, Refusal
from mcp_server.transports.http.reader import END, NEED_DATA, Data, RequestReader
from mcp_server.transports.http.record import Exchange
from mcp_server.transports.http.response import error_body, error_code, head
from mcp_server.wire.jsonrpc import Part, pieces

log = logging.getLogger("fairwins_mcp.http")

LINGER_SECONDS: Final = 2.0  # after a refusal that closes, how long the rest of the request is read and dropped
LINGER_BYTES: Final = 64 * 1024 * 1024
RESERVE_SECONDS: Final = 2.0  # a connection in the health reserve: time to send its one request
RECV: Final = 65536
TIMED_OUT: Final = Refusal(408, "request_timeout", "The request did not arrive in time")


class Gone(Exception):
    """The client closed or reset the connection: nothing more can be answered on it."""


class Host(Protocol):
    """What a connection, and the routes it runs, use of the server that accepted it (server.McpHTTPServer).

    A Protocol: the server imports this module and hands itself over; nothing here imports it back.
    """

    dispatcher: Dispatcher
    env_bearer: str | None
    metrics: ServerMetrics | None
    exports: ServerMetrics | None  # what its GET /metrics answers with
    policy: gate.Policy
    slots: threading.BoundedSemaphore
    stopping: bool
    unready: bool
    watcher: DisconnectWatcher
    admission: Admission
    read_timeout: float
    timings: Timings
    draining_r: socket.socket

    def begin(self) -> None: ...

    def end(self) -> None: ...

    def connection_closed(self, peer: str, slot: Slot) -> None: ...

    def route(self, conn: Connection, request: Head, decision: gate.Admit | gate.Refuse) -> None:
        """Answer one request the gate has judged (routes.py)."""
        ...


class Connection:
    def __init__(self, server: Host, sock: socket.socket, peer: str, slot: Slot) -> None:
        self.server = server
        self.sock = sock
        self.peer = peer
        self.slot = slot
        self.reader = RequestReader()
        self.closing = False  # the answer being written is the connection's last
        self.linger = False
        self.deadline = 0.0  # when the request being read must be whole
        self.record = Exchange(peer, time.monotonic())
        self.idle_since = time.monotonic()  # the end of the last answer (or the accept)
        self._timeout: float = server.read_timeout  # how long the next _recv may wait for bytes
        self._counted_head = False
        # Non-blocking, waited on here: a socket with a timeout polls before every recv and send,
        # and each of those system calls releases the GIL, a hand-off between threads under load.
        # Waiting only when a call would block leaves one poll per request, before its first bytes.
        sock.setblocking(False)

    # ---- the loop -----------------------------------------------------------------------------

    def run(self) -> None:
        watcher = self.server.watcher
        watcher.attach(self.sock)
        try:
            while not self.closing:
                event = self._read_head()
                if event is None:
                    break  # the client left, or stayed idle: closed quietly, as keep-alive clients expect
                self._serve(event)
                if self.reader.body_done:
                    self.reader.next_request()
                else:
                    self.closing = True  # the body was not read to its end: its bytes are no request
        except Gone:
            pass
        except OSError as exc:
            log.debug("connection from %s ended: %s", self.peer, type(exc).__name__)
        except Exception:
            log.error("unexpected failure serving a connection", exc_info=True)
        finally:
            self._uncount_head()
            watcher.detach(self.sock)
            if self.linger:
                self._linger_close()
            try:
                self.sock.close()
            finally:
                self.server.connection_closed(self.peer, self.slot)

    def _serve(self, event: Head | Refusal) -> None:
        record = self.record
        if isinstance(event, Refusal):
            # Unreadable as a request: answered, and the connection closed (RFC 9112 §9.6).
            self.respond(
                event.status, error_body(event.error, event.message), close=True, linger=event is not TIMED_OUT
            )
            return
        record.method, record.path = event.method, event.path
        record.protocol = f"HTTP/1.{event.minor}"
        record.user_agent = event.headers.get("user-agent")
        # W3C Trace Context; a repeated traceparent, joined with ", ", is no longer valid.
        record.record.inbound = (event.headers.get("traceparent"), event.headers.get("tracestate"))
        self.closing = not event.keep_alive or self.slot == "reserve"
        self.server.begin()
        try:
            policy = self.server.policy
            decision = gate.check(event.method, event.path, event.headers, policy, event.host)
            if self.slot == "reserve" and not (isinstance(decision, gate.Admit) and decision.route == "health"):
                # Every slot is taken: this connection was let in only to answer a health check.
                self.respond(503, error_body("busy", "Too many connections; retry shortly"), extra={"Retry-After": "1"})
                return
            self.server.route(self, event, decision)
        finally:
            self.server.end()

    # ---- reading ------------------------------------------------------------------------------

    def _recv(self) -> bytes:
        """The next bytes from the client, waiting at most the timeout set; TimeoutError, or Gone."""
        until = 0.0
        while True:
            try:
                data = self.sock.recv(RECV)
                break
            except BlockingIOError:
                now = time.monotonic()
                until = until or now + self._timeout
                if now >= until or not _ready([self.sock.fileno()], until - now):
                    raise TimeoutError from None
            except OSError as exc:
                raise Gone from exc
        if not data:
            raise Gone
        return data

    def _await_request(self, reserve: bool) -> bool:
        """Wait, idle, for the next request's first bytes: False when the connection should close instead.

        The idle limit counts from the end of the last answer and shortens to the drain's grace
        when a drain begins, even for a connection already waiting (the drain's socket wakes it).
        """
        server = self.server
        fd = self.sock.fileno()
        draining = server.draining_r.fileno()  # -1 once the server is closed
        watch = [fd] if server.stopping or draining < 0 else [fd, draining]
        while True:
            limit = RESERVE_SECONDS if reserve else server.timings.idle_limit(server.stopping)
            left = self.idle_since + limit - time.monotonic()
            if left <= 0:
                return False
            try:
                ready = _ready(watch, left)
            except (OSError, ValueError):
                return False  # a descriptor was closed under us: the server is closing
            if fd in ready:
                return True
            if len(watch) > 1 and ready:
                # The drain began (or the server closed that socket): it has said what it had to
                # say, and from now on only the client's bytes matter.
                watch = [fd]

    def _read_head(self) -> Head | Refusal | None:
        """The next request's head (or why it is refused); None when the connection ends between requests."""
        reader = self.reader
        reserve = self.slot == "reserve"
        whole = RESERVE_SECONDS if reserve else self.server.read_timeout
        self.deadline = 0.0
        while True:
            if not self.deadline and reader.started:
                # The whole request (line, headers, body) must arrive within read_timeout from its
                # first byte: a client trickling one byte a second cannot hold a thread.
                self.record = Exchange(self.peer, time.monotonic())
                self.deadline = self.record.started + whole
            event = reader.next_event()
            if event is not NEED_DATA:
                self._uncount_head()
                assert isinstance(event, (Head, Refusal))
                return event
            if reader.started:
                if reader.in_head and not self._counted_head:
                    if not self.server.admission.head_started(self.peer):
                        body = error_body(HEADS_FULL.error, HEADS_FULL.message)
                        self.respond(HEADS_FULL.status, body, close=True, linger=False)
                        return None
                    self._counted_head = True
                left = self.deadline - time.monotonic()
                if left <= 0:
                    self._uncount_head()
                    return TIMED_OUT
                self._timeout = left
            elif not self._await_request(reserve):
                return None  # idle past its limit: closed quietly, as keep-alive clients expect
            else:
                self._timeout = self.server.read_timeout
            try:
                data = self._recv()
            except TimeoutError:
                self._uncount_head()
                return TIMED_OUT if reader.started else None
            except Gone:
                return None  # a head cut short is not answered: its client has gone
            reader.feed(data)

    def _uncount_head(self) -> None:
        if self._counted_head:
            self._counted_head = False
            self.server.admission.head_done(self.peer)

    def read_body(self, limit: int, *, keep: bool = True) -> bytes | Refusal | None:
        """The request's body, up to `limit` bytes (dropped when not `keep`); a Refusal, or None if the client left."""
        reader = self.reader
        reader.body_limit = limit
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
            left = self.deadline - time.monotonic()
            if left <= 0:
                return TIMED_OUT
            self._timeout = left
            try:
                reader.feed(self._recv())
            except TimeoutError:
                return TIMED_OUT
            except Gone:
                return None

    def drop_body(self, request: Head) -> bool:
        """Read and drop a body no route wants; False when the request is over (answered or its client gone).

        Read within the limits of POST /mcp (its size and the read deadline). Not read, so the
        answer closes the connection: a body over that size, and the body of a client that waits
        for "100 Continue" before sending it (it is never promised one here).
        A body that is malformed or late is answered for what it is (400, 408) instead of the
        route's answer.
        """
        limit = self.server.policy.max_body
        if not request.has_body or request.expect_continue or request.length > limit:
            return True
        body = self.read_body(limit, keep=False)
        if body is None:
            self.closing = True
            return False
        if isinstance(body, Refusal) and body.status != 413:  # over the limit: not read, and closed after
            self.respond(body.status, error_body(body.error, body.message), close=True, linger=body is not TIMED_OUT)
            return False
        return True

    # ---- writing ------------------------------------------------------------------------------

    def write(self, data: bytes | memoryview) -> bool:
        """All of `data`, or False (and the connection closes) when the client is gone or stops reading.

        A client that reads nothing for `read_timeout` holds a thread no longer than one that
        sends nothing: the same limit bounds each write.
        """
        view = memoryview(data)
        until = 0.0
        try:
            while view:
                try:
                    view = view[self.sock.send(view) :]
                except BlockingIOError:
                    now = time.monotonic()
                    until = until or now + self.server.read_timeout
                    if now >= until or not _ready([self.sock.fileno()], until - now, writing=True):
                        raise TimeoutError from None
            return True
        except OSError:
            self.closing = True
            return False

    def respond(
        self,
        status: int,
        body: bytes | Sequence[Part],
        *,
        content_type: str = "application/json",
        extra: dict[str, str] | None = None,
        close: bool = False,
        linger: bool | None = None,
    ) -> None:
        """Status line, headers and body (in one write when small), and the access line.

        The connection closes after this answer when asked, when the request said so, while the
        server drains, or when the request's body was not read to its end: whatever is left of
        it must never be read as a request.
        """
        close = close or self.closing or self.server.stopping or not self.reader.body_done
        if close:
            self.closing = True
            # Refused, with part of the request possibly still on its way: close in stages.
            self.linger = self.linger or (status >= 400 if linger is None else linger)
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
        # A large answer is written piece by piece as jsonrpc.encode made it, never joined.
        sent = self.write(data)
        for piece in pieces(parts):
            sent = sent and self.write(piece)
        self.finish(status)

    def finish(self, status: int) -> None:
        self.record.status = status
        self.record.log(self.server.metrics)
        self.idle_since = time.monotonic()

    def _linger_close(self) -> None:
        """Close in stages after refusing a request whose body may still be arriving (RFC 9112 §9.6).

        Closing with unread bytes makes the kernel send a reset, which can destroy the refusal
        before the client reads it; so the sending half is closed first and the rest read and
        dropped until the client closes, for at most LINGER_SECONDS.
        """
        try:
            self.sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER_SECONDS
            dropped = 0
            while dropped < LINGER_BYTES:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.sock.settimeout(left)
                chunk = self.sock.recv(RECV)
                if not chunk:
                    return
                dropped += len(chunk)
        except OSError:
            return


def _ready(fds: list[int], timeout: float, *, writing: bool = False) -> list[int]:
    """Which of `fds` are readable (or writable) within `timeout` seconds; an error or hang-up counts.

    poll, where there is one: no limit on descriptor numbers.
    """
    if sys.platform != "win32":  # Windows has no poll(); its select() takes sockets, which these are
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLOUT if writing else select.POLLIN)
        try:
            return [fd for fd, _ in poller.poll(timeout * 1000)]
        except InterruptedError:
            return []
    readable, writable, failed = select.select([] if writing else fds, fds if writing else [], fds, timeout)
    return [*readable, *writable, *failed]
