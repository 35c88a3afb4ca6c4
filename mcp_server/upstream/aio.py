"""The gateway client: HTTP/1.1 on an event loop, over pooled connections.

The one client of the outbound seam. Bytes arrive through a protocol object, a deadline is a
timer of the loop, and a cancel aborts the connection from whichever thread throws it. What is
sent, which connection may carry it and what each failure is called are upstream/exchange.py's
rules; the answer is read by http1.Parser; TLS is verified by the one context of upstream/tls.py
(driven through memory). GatewayCall.arun drives the retry policy over it; a caller that blocks
(`fairwins-mcp check`, core.steps.run in the unit tests) runs that on its thread's own loop
(`wait`).

Pool: one per event loop, keyed by exchange.pool_key (the gateway and the call's credential); what
a connection may carry next is http1.quiet's rule.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
import weakref
from collections.abc import Awaitable, Coroutine
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final, TypeVar

from mcp_server.upstream import http1, sending
from mcp_server.upstream.exchange import (
    MAX_HEADER_BYTES,
    Exchange,
    GatewayRequest,
    GatewayResponse,
    PoolKey,
    Send,
    Target,
    https_proxy,
    tunnel_request,
)
from mcp_server.upstream.receiving import receive_buffer
from mcp_server.wire.cancellation import Cancellation

if TYPE_CHECKING:
    import asyncio.trsock
    import ssl

T = TypeVar("T")
RECV: Final = 64 * 1024


class Aborted(Exception):
    """A connect cut short by the call's deadline or a cancel."""


class _Wire(asyncio.BufferedProtocol):
    """The bytes of one gateway connection as they arrive, and its end."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self._sock: asyncio.trsock.TransportSocket | None = None
        self._chunks: list[bytes] = []
        self.ended = False
        self._waiter: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._paused = False
        # A request is held to the end of the loop's turn, and sent with the others (sending.py).
        self._outbox = sending.outbox(loop)
        self._held: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._sock = transport.get_extra_info("socket")

    def get_buffer(self, sizehint: int) -> memoryview:
        return receive_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._chunks.append(bytes(receive_buffer()[:nbytes]))
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self._wake()
        self.resume_writing()  # a send waiting for room sees the end

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    @property
    def held(self) -> bool:
        """Whether the loop has delivered bytes not read yet, or the end."""
        return bool(self._chunks) or self.ended

    def fileno(self) -> int:
        """The socket's descriptor; -1 once it is closed."""
        return -1 if self._sock is None else self._sock.fileno()

    async def recv(self) -> bytes:
        """Bytes that came since the last call (waiting for some); b"" at the end."""
        while not self._chunks:
            if self.ended:
                return b""
            self._waiter = self.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        data = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        return data

    async def send(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the connection closed")
        if len(data) <= sending.HOLD_MAX:
            first = not self._held
            self._held.append(data)
            if first:
                self._outbox.hold(self)  # last: the outbox may send what is held at once
        else:
            self.send_held()  # what came before it goes before it
            self.transport.write(data)
        if self._paused:
            self._writable = self.loop.create_future()
            try:
                await self._writable
            finally:
                self._writable = None
        if self.ended and self.transport.is_closing():
            raise BrokenPipeError("the connection closed while the request was written")

    def send_held(self) -> None:
        """Hand the transport what is held (the outbox's call, at the turn's end)."""
        if not self._held:
            return
        data = sending.taken(self._held)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def abort(self) -> None:
        self._held.clear()
        if self.transport is not None:
            self.transport.abort()


class _Tls:
    """TLS over a _Wire, through memory buffers.

    OpenSSL reads from memory, never from the socket itself, so the server's first bytes are seen
    before OpenSSL is given them: a plain HTTP answer is named as such (tls.look_at_first), where
    OpenSSL alone would only say "wrong version number".
    """

    def __init__(self, wire: _Wire, host: str, ctx: ssl.SSLContext) -> None:
        import ssl

        self.wire = wire
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._tls = ctx.wrap_bio(self._in, self._out, server_hostname=host)

    async def handshake(self, host: str) -> None:
        import ssl

        from mcp_server.upstream import tls

        first = True
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                data = await self.wire.recv()
                if first:
                    tls.look_at_first(data)
                    first = False
                self._feed(data)
            except tls.HandshakeError:
                raise
            except ssl.SSLError as exc:
                with suppress(OSError):
                    await self._flush()  # the alert that tells the server why
                raise tls.HandshakeError(tls.describe_handshake(exc, host)) from None
        await self._flush()  # the client's Finished

    async def _flush(self) -> None:
        if self._out.pending:
            await self.wire.send(self._out.read())

    def _feed(self, data: bytes) -> None:
        if data:
            self._in.write(data)
        else:
            self._in.write_eof()

    async def recv(self) -> bytes:
        import ssl

        while True:
            try:
                return self._tls.read(RECV)
            except ssl.SSLWantReadError:
                await self._flush()  # e.g. a TLS 1.3 key update the server asked for
                self._feed(await self.wire.recv())
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                # The end, with or without close_notify: HTTP framing says whether the answer was whole.
                return b""

    async def send(self, data: bytes) -> None:
        self._tls.write(data)
        await self._flush()

    @property
    def held(self) -> bool:
        """Whether records came that are not read yet, decrypted or not."""
        return bool(self._tls.pending() or self._in.pending) or self.wire.held

    def fileno(self) -> int:
        return self.wire.fileno()

    def abort(self) -> None:
        self.wire.abort()


class _Connection:
    """One gateway connection on the loop: its wire (plain or TLS) and parser."""

    __slots__ = ("parser", "reused", "stream")

    def __init__(self, stream: _Wire | _Tls) -> None:
        self.stream = stream
        self.parser = http1.Parser()
        self.reused = False

    def quiet(self) -> bool:
        """Whether nothing has arrived since the last answer (http1.quiet)."""
        return http1.quiet(self.parser.buffered, self.stream.held, self.stream.fileno())

    async def exchange(self, data: bytes, max_body: int) -> http1.Response:
        """Send one request (already encoded) and read its final answer."""
        await self.stream.send(data)
        return await self.read(max_body)

    async def read(self, max_body: int, max_head: int = MAX_HEADER_BYTES) -> http1.Response:
        """The next final answer; kept alive only if nothing came past it."""
        resp = await _read(self.stream, self.parser.response(max_head, max_body))
        if not self.quiet():
            resp.keep_alive = False  # bytes (or an end) past the answer: out of step, never reused
        return resp

    def close(self) -> None:
        self.stream.abort()


async def _read(stream: _Wire | _Tls, reading: http1.Reading[T]) -> T:
    """Drive `reading`, each need for bytes met by what the loop delivers next."""
    try:
        next(reading)
        while True:
            reading.send(await stream.recv())
    except StopIteration as done:
        result: T = done.value
        return result


# Idle connections (all calls and credentials together) kept per gateway and loop at most: every
# call waiting at once may leave one behind, and the next burst finds them.
MAX_IDLE: Final = 1024


class Pool(dict[PoolKey, list[_Connection]]):
    """One loop's idle connections to a gateway, by exchange.pool_key.

    Each partition's list is oldest first, and the partitions are in the order a connection was
    last left in them. A partition goes with its last idle connection, so the pool does not grow
    with every member it has served. It keeps no more idle connections than the most calls it
    has seen in flight at once (`peak`), as an unpartitioned pool never would: members calling
    one at a time leave one connection, not one each, and the descriptors a server budgets for
    its calls (transports/http/server.raise_descriptor_limit) hold.
    """

    __slots__ = ("calls", "idle", "peak")

    def __init__(self) -> None:
        super().__init__()
        self.idle = 0  # all partitions together
        self.calls = 0  # in flight, each of which may leave a connection here
        self.peak = 0

    def begin(self) -> None:
        """A call that may leave its connection here has begun."""
        self.calls += 1
        self.peak = max(self.peak, self.calls)

    def end(self) -> None:
        """A call that began here has ended (its connection left here or closed)."""
        self.calls -= 1

    def take(self, key: PoolKey, newest: bool = True) -> _Connection | None:
        """A connection of `key`'s partition: the one left in last, or the first.

        The newest is the least likely to have been closed meanwhile.
        """
        held = self.get(key)
        if not held:
            return None
        conn = held.pop() if newest else held.pop(0)
        self.idle -= 1
        if not held:
            del self[key]
        return conn

    def leave(self, key: PoolKey, conn: _Connection) -> None:
        """Keep `conn` for `key`'s next call, within `peak` (MAX_IDLE at most).

        Past it, the one left in longest ago, of the partition left in longest ago, is closed.
        """
        held = self.pop(key, None) or []
        held.append(conn)
        self[key] = held  # last in the order
        self.idle += 1
        if self.idle > min(self.peak, MAX_IDLE):
            oldest = self.take(next(iter(self)), newest=False)
            assert oldest is not None
            oldest.close()

    def drain(self) -> list[_Connection]:
        """Every idle connection, the pool left empty."""
        held = [conn for idle in self.values() for conn in idle]
        self.clear()
        self.idle = 0
        return held


class HttpTransport:
    """The gateway client: exchange.Transport on the running event loop."""

    def __init__(self, max_body: int) -> None:
        self.max_body = max_body
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pool]
        self._pools = weakref.WeakKeyDictionary()
        # A transport collected (its gateway gone) closes what its pools held, each on its own loop.
        weakref.finalize(self, _drop, self._pools)
        _TRANSPORTS.add(self)
        self._ssl: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    def _pool(self, loop: asyncio.AbstractEventLoop) -> Pool:
        pool = self._pools.get(loop)
        if pool is None:
            pool = self._pools[loop] = Pool()
        return pool

    def _tls_context(self) -> ssl.SSLContext:
        with self._lock:
            if self._ssl is None:
                from mcp_server.upstream import tls

                self._ssl = tls.context()
            return self._ssl

    async def _connect(self, target: Target, loop: asyncio.AbstractEventLoop) -> _Connection:
        proxy = None if target.scheme == "http" or target.is_loopback else https_proxy(target.host)
        host, port = proxy or (target.host, target.port)
        # A transport registers its reader in the context it is made in, for its whole life: made
        # in a call's, a pooled connection would keep that call's request (the member's bearer, the
        # client's connection) for as long as it is pooled. So it is made in an empty context.
        made = loop.create_connection(lambda: _Wire(loop), host, port)
        _, wire = await loop.create_task(made, context=contextvars.Context())
        try:
            if target.scheme == "http":
                return _Connection(wire)
            if proxy is not None:
                # A CONNECT tunnel: the proxy carries TLS bytes and never sees the token.
                await wire.send(tunnel_request(target))
                parser = http1.Parser()
                status, _, _ = await _read(wire, parser.head(MAX_HEADER_BYTES))
                if not 200 <= status < 300:
                    raise http1.TunnelRefused(status)
                # The gateway says nothing before the client's first TLS record: what came is the proxy's.
                if not http1.quiet(parser.buffered, wire.held, wire.fileno()):
                    raise http1.ProtocolError("the proxy sent bytes before the tunnel was used")
            tls = _Tls(wire, target.host, self._tls_context())
            await tls.handshake(target.host)
            return _Connection(tls)
        except BaseException:
            wire.abort()
            raise

    async def send(
        self, target: Target, request: GatewayRequest, attempt: Send, cancellation: Cancellation
    ) -> GatewayResponse:
        deadline = attempt.deadline
        exchange = Exchange(target, request, deadline, attempt.fresh, attempt.trace, self.max_body)
        key = exchange.key
        loop = asyncio.get_running_loop()
        pool = self._pool(loop)
        conn = None
        while key is not None and (conn := pool.take(key)) is not None and not conn.quiet():
            # Whatever came while it sat in the pool would be read as this request's answer: dropped
            # before anything is written on it, so nothing was sent, and another connection goes instead.
            conn.close()
        stop: asyncio.Future[None] = loop.create_future()
        live: list[_Connection] = []

        def abort(reason: str) -> None:  # on the loop
            exchange.abort(reason)
            if not stop.done():
                stop.set_result(None)
            for current in live:
                current.close()  # the read waiting on it ends at once

        def cancelled() -> None:  # from whichever thread throws the cancellation
            with suppress(RuntimeError):  # the loop has closed: nothing is waiting any more
                loop.call_soon_threadsafe(abort, "cancelled")

        timer = loop.call_later(max(deadline - time.monotonic(), 0.0), abort, "timeout")
        unregister = cancellation.on_cancel(cancelled)
        keep = False
        if key is not None:
            pool.begin()
        try:
            while True:
                exchange.go_on()
                if conn is None:
                    conn = await _unless(self._connect(target, loop), stop)
                live[:] = [conn]
                try:
                    answer, keep = exchange.answered(await conn.exchange(exchange.writing(), self.max_body))
                    return answer
                except (ConnectionResetError, BrokenPipeError) as exc:
                    if not exchange.again(exc, conn.reused):
                        raise
                conn.close()
                conn = None
        except Exception as exc:  # Aborted included: a connect cut short by the deadline or a cancel
            raise exchange.failed(exc) from None
        finally:
            timer.cancel()
            unregister()
            if conn is not None:
                if keep and key is not None:
                    conn.reused = True
                    pool.leave(key, conn)
                else:
                    conn.close()
            if key is not None:
                pool.end()


_TRANSPORTS: weakref.WeakSet[HttpTransport] = weakref.WeakSet()


def close_pools(loop: asyncio.AbstractEventLoop) -> None:
    """Close every gateway connection pooled for `loop`, as it ends.

    Run on the loop's thread: no connection outlives its loop.
    """
    for transport in list(_TRANSPORTS):
        pool = transport._pools.pop(loop, None)
        if pool:
            _close_all(pool.drain())


def _drop(pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pool]) -> None:
    for loop, pool in list(pools.items()):
        held = pool.drain()
        if held and loop is _THREAD.loop and not loop.is_running() and asyncio._get_running_loop() is None:
            # This thread's own loop, idle between calls: closed now, not at the thread's next call.
            # Not while another loop runs here (a finalizer may run inside one): that one could not
            # run it, and the stop left queued would end the thread's next call at once.
            _close_all(held)
            loop.call_soon(loop.stop)
            loop.run_forever()
        elif held and not loop.is_closed():
            with suppress(RuntimeError):  # closed meanwhile: its sockets went with it
                loop.call_soon_threadsafe(_close_all, held)


def _close_all(held: list[_Connection]) -> None:
    for conn in held:
        conn.close()


async def _unless(work: Awaitable[T], stop: asyncio.Future[None]) -> T:
    """`work`'s result, or Aborted (a connect cut short) once `stop` is done."""
    task: asyncio.Future[T] = asyncio.ensure_future(work)
    both: list[asyncio.Future[Any]] = [task, stop]
    try:
        await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    if task.done():
        return task.result()
    task.cancel()
    raise Aborted


async def pause(seconds: float, cancellation: Cancellation) -> bool:
    """Wait `seconds` on the loop; True if cancelled meanwhile."""
    if cancellation.is_set:
        return True
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    def cancelled() -> None:  # from whichever thread throws it
        loop.call_soon_threadsafe(wake)

    unregister = cancellation.on_cancel(cancelled)
    timer = loop.call_later(seconds, wake)
    try:
        await woken
    finally:
        timer.cancel()
        unregister()
    return cancellation.is_set


class _ThreadLoop(threading.local):
    """A blocking thread's event loop for its gateway calls, made at its first."""

    loop: asyncio.AbstractEventLoop | None = None


_THREAD: Final = _ThreadLoop()


def wait(work: Coroutine[Any, Any, T]) -> T:
    """`work` (a blocking caller's gateway call) run on this thread's own loop.

    The loop is kept from call to call, and with it its pool, so a thread's calls reuse their
    connections. What the call leaves behind (a connect cut short, a socket to close) is finished
    before this returns, not when the thread next calls.
    """
    loop = _THREAD.loop
    if loop is None:
        loop = _THREAD.loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(work)
    finally:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.call_soon(loop.stop)
        loop.run_forever()  # one more turn: the callbacks that close what was aborted
