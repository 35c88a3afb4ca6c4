"""The socket server: accept on one loop, a protocol per connection, drain.

Thin on purpose: what a request is, is the reader's business (reader.py); who may connect, the
admission's (admission.py); what a request gets, the routes' (routes.py); how long each step of a
stop may take, the drain's (drain.py). Here: accept, count what is in flight, and drain.

Every wait is on the loop (loop.py): a connection costs a protocol object and a coroutine, never a
thread. The accept is ours (the loop only says the socket is readable), so whatever accepting one
connection raises costs that connection, and the loop goes on.

The metrics listener (`--metrics`) is this same server with a gate that admits GET /metrics
alone (`metrics_server`), on the same loop: no second, weaker HTTP parser exists for it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import functools
import logging
import os
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from mcp_server import __version__
from mcp_server.core.protocol import Dispatcher
from mcp_server.ops import listener as listening
from mcp_server.ops import logs
from mcp_server.ops.metrics import ServerMetrics, refusal_reason
from mcp_server.transports.http import gate, routes
from mcp_server.transports.http import loop as loops
from mcp_server.transports.http.admission import HEALTH_RESERVE, Admission, Limits, Turned
from mcp_server.transports.http.connection import Connection
from mcp_server.transports.http.drain import SETTLE_LIMIT, Timings
from mcp_server.transports.http.driver import Pacing
from mcp_server.transports.http.head import Head
from mcp_server.transports.http.response import error_body, head
from mcp_server.upstream.exchange import is_loopback_host

if TYPE_CHECKING:
    from mcp_server.ops.workers import Lifeline
    from mcp_server.transports.http.door import Door

log = logging.getLogger("fairwins_mcp.http")

# Requests in flight at once (docs/hosting.md, "Admission"): a request waiting on the gateway costs a
# coroutine and its buffers, not a core, so the bound is sized for waiting.
DEFAULT_MAX_CONCURRENCY: Final = 1024
# The metrics listener's connection bound: scrapers are few, and Prometheus keeps one connection per target.
METRICS_CONNECTIONS: Final = 16
# Its drain: a scrape in progress is answered; an idle scraper's connection closes after this long
# (a scrape missed at the very end is taken again next interval, from wherever the target went).
METRICS_IDLE_GRACE: Final = 1.0
METRICS_REQUEST_LIMIT: Final = 5.0
# A scraper sends no body: one this small is read and dropped (the connection stays framed), a
# larger one is not read and its connection closes after the answer.
METRICS_MAX_BODY: Final = 64 * 1024
METRICS_DRAIN_LIMIT: Final = SETTLE_LIMIT + METRICS_IDLE_GRACE + METRICS_REQUEST_LIMIT  # after the MCP drain
# What metrics served where others can reach them give away.
_EXPOSED: Final = (
    "reads the server's version and its tool call, payment, error and gateway counts (docs/hosting.md, Metrics)"
)
# Connections accepted per readiness event: enough to empty a burst, few enough that the
# connections already open are served in between.
ACCEPT_BURST: Final = 64
# accept() out of descriptors or buffers: accepting pauses this long (the queue waits in the
# kernel), instead of spinning on a socket that stays readable.
ACCEPT_PAUSE: Final = 0.1
_PAUSE_ERRNOS: Final = frozenset(
    e for e in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, getattr(errno, "WSAEMFILE", None)) if e
)
# The connection was gone before it was taken off the queue: nothing of it is left to serve.
_GONE_ERRNOS: Final = frozenset(
    e for e in (errno.ECONNABORTED, errno.ECONNRESET, errno.EPROTO, errno.EPERM, errno.ETIMEDOUT) if e
)
# The listening socket itself is unusable: no later accept can succeed.
_DEAD_ERRNOS: Final = frozenset({errno.EBADF, errno.ENOTSOCK, errno.EINVAL})
FATAL_EXIT: Final = 70  # EX_SOFTWARE: the loop could not go on


def connection_bound(max_concurrency: int) -> int:
    """Open connections allowed, all peers: room for idle keep-alive clients."""
    return max_concurrency * 4 + 16


class McpHTTPServer:
    """One listening socket served on a loop: its connections, requests, drain."""

    def __init__(
        self,
        address: tuple[str, int],
        dispatcher: Dispatcher,
        policy: gate.Policy,
        *,
        env_bearer: str | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        read_timeout: float = 30.0,
        write_timeout: float | None = None,
        idle_timeout: float | None = None,
        max_peer_connections: int | None = None,
        max_peer_heads: int = 8,
        metrics: ServerMetrics | None = None,
        listener: socket.socket | None = None,
        timings: Timings | None = None,
        exports: ServerMetrics | None = None,
        max_connections: int | None = None,
        door: Door | None = None,
        pacing: Pacing | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.door = door  # OAuth mode (door.py): policy.resource_metadata names its metadata's paths
        self.metrics = metrics  # what this server counts into
        self.exports = exports if exports is not None else metrics  # what its GET /metrics answers with
        self.policy = policy
        # How its large answers share the core with its small calls (driver.py): this server's own.
        self.pacing = Pacing() if pacing is None else pacing
        self.env_bearer = env_bearer
        self.read_timeout = read_timeout
        # One deadline for a whole answer: a client that reads just fast enough cannot hold a slot longer.
        self.write_timeout = read_timeout if write_timeout is None else write_timeout
        self.timings = timings or Timings()
        if idle_timeout is not None:
            grace = min(idle_timeout, self.timings.idle_grace)
            self.timings = dataclasses.replace(self.timings, idle_timeout=idle_timeout, idle_grace=grace)
        self.max_concurrency = max_concurrency
        self.max_connections = connection_bound(max_concurrency) if max_connections is None else max_connections
        if max_peer_connections is None:
            max_peer_connections = max(1, self.max_connections // 2)
        # The reserve answers health checks only: a door without /healthz keeps none.
        reserve = 0 if policy.metrics_only else HEALTH_RESERVE
        self.admission = Admission(Limits(self.max_connections, max_peer_connections, max_peer_heads, reserve))
        self.stopping = False  # draining: every answer closes its connection
        self.unready = False  # pre-stop: /healthz answers 503, everything else as usual
        self._cond = threading.Condition()  # for wait_idle, asked from other threads
        self._inflight = 0
        self.inflight_at_stop = 0
        if metrics is not None:
            metrics.in_flight.set_function(lambda: self._inflight)
        self.socket = listener if listener is not None else listening.listen(address[0], address[1])
        self.socket.setblocking(False)
        self.server_address: tuple[Any, ...] = self.socket.getsockname()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self.guard: loops.Guard | None = None
        self.fatal: BaseException | None = None  # why the loop could not go on
        self._connections: set[Connection] = set()
        self._slots: asyncio.Semaphore | None = None
        self._changed: asyncio.Event | None = None
        self._accepting = False
        self._resume: asyncio.TimerHandle | None = None
        self._done: asyncio.Future[None] | None = None
        self._stopped = threading.Event()
        self._stopped.set()

    @property
    def url(self) -> str:
        return http_url(self.server_address, "/metrics" if self.policy.metrics_only else "/mcp")

    # ---- the loop -----------------------------------------------------------------------------

    def attach(self, loop: asyncio.AbstractEventLoop, guard: loops.Guard) -> None:
        """Serve on `loop`, running in this thread; accepting starts next turn."""
        self.loop = loop
        self._loop_thread = threading.get_ident()
        self.guard = guard
        self._slots = asyncio.Semaphore(self.max_concurrency)
        self._changed = asyncio.Event()
        self._start_accepting()

    def serve_forever(self, poll_interval: float = 0.5, *, selector: selectors.BaseSelector | None = None) -> None:
        """Run a loop of its own in this thread, until shutdown().

        `poll_interval` is socketserver's, unused. `selector`: a test's seam; one that raises ends
        the loop, and `fatal` says why.
        """
        loop = loops.new_loop(selector)
        guard = loops.Guard(loop)
        self._stopped.clear()
        try:
            self.attach(loop, guard)
            self._done = loop.create_future()
            try:
                loop.run_until_complete(guard.until(self._done))
            except BaseException as exc:  # the selector raised: nothing on this loop can go on
                log.critical("the event loop failed: %s", exc, exc_info=True)
                self.fatal = exc
            self.fatal = self.fatal or guard.fatal
            self._stop_accepting()
            loops.close(loop, self._connections)
        finally:
            self.loop = None
            self._stopped.set()

    def _call(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the loop's thread, from any thread, if a loop serves."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(fn)
        except RuntimeError:
            pass  # closed meanwhile

    def shutdown(self) -> None:
        """End serve_forever from another thread; return once its loop stopped."""

        def finish() -> None:
            self._stop_accepting()
            if self._done is not None and not self._done.done():
                self._done.set_result(None)

        self._call(finish)
        self._stopped.wait(10)

    def server_close(self) -> None:
        self.shutdown()
        self.socket.close()
        self.pacing.close()

    # ---- accepting ----------------------------------------------------------------------------

    def _start_accepting(self) -> None:
        if self.loop is None or self._accepting or self.socket.fileno() < 0:
            return
        self.loop.add_reader(self.socket.fileno(), self._accept)
        self._accepting = True

    def _stop_accepting(self) -> None:
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        if self._accepting and self.loop is not None:
            self._accepting = False
            try:
                self.loop.remove_reader(self.socket.fileno())
            except (ValueError, OSError):
                pass  # the socket was closed already

    def _pause_accepting(self) -> None:
        """Out of descriptors or buffers: stop accepting for ACCEPT_PAUSE."""
        self._stop_accepting()
        if self.loop is not None and not self.stopping:
            self._resume = self.loop.call_later(ACCEPT_PAUSE, self._resumed)

    def _resumed(self) -> None:
        self._resume = None
        if not self.stopping:
            self._start_accepting()

    def _accept(self) -> None:
        """The listening socket is readable: accept a burst.

        Vital: a failure here that no connection owns (admit() owns each connection's) is a bug in
        accepting itself, and a process that cannot be trusted to accept must be replaced.
        """
        try:
            self._accept_burst()
        except Exception as exc:
            self._fail(exc, "accepting connections failed")

    def _accept_burst(self) -> int:
        taken = 0
        while taken < ACCEPT_BURST:
            try:
                sock, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return taken  # the queue is empty, or another worker sharing the socket took it
            except OSError as exc:
                if exc.errno in _GONE_ERRNOS:
                    log.debug("a connection was gone before it was accepted: %s", exc)
                    continue
                if exc.errno in _PAUSE_ERRNOS:
                    log.warning("accept failed (%s): accepting again in %.1f s", exc, ACCEPT_PAUSE)
                    self._pause_accepting()
                    return taken
                if exc.errno in _DEAD_ERRNOS or self.socket.fileno() < 0:
                    if self.stopping:
                        return taken  # closed by the drain: nothing more to accept
                    self._fail(exc, "the listening socket can no longer accept")
                    return taken
                log.error("accept failed: %s; accepting again in %.1f s", exc, ACCEPT_PAUSE, exc_info=True)
                self._pause_accepting()
                return taken
            taken += 1
            self.admit(sock, address)
        return taken

    def _fail(self, exc: BaseException, why: str) -> None:
        self.fatal = exc
        if self.guard is not None:
            self.guard.fail(exc, why)  # which logs it, once
        else:
            log.critical("%s: %s", why, exc, exc_info=exc)

    def admit(self, sock: socket.socket, address: Any) -> None:
        """An accepted connection: served by a protocol, or answered and closed.

        Whatever this raises (a socket reset before it could be set up, an address that cannot be
        read) costs this connection only.
        """
        try:
            peer = str(address[0]) if isinstance(address, tuple) else str(address)
            slot = self.admission.connect(peer)
        except Exception:
            log.error("a connection could not be admitted", exc_info=True)
            sock.close()
            return
        if isinstance(slot, Turned):
            self._turn_away(sock, slot)
            self._count_refusal(slot)
            return
        assert self.loop is not None
        conn = Connection(self, peer, slot, self.loop)
        self._connections.add(conn)
        try:
            conn.task = self.loop.create_task(conn.run(sock))
        except Exception:
            log.error("a connection could not be served", exc_info=True)
            sock.close()
            self.connection_closed(conn)
            return
        conn.task.add_done_callback(functools.partial(self._ended, conn))

    def _ended(self, conn: Connection, task: asyncio.Task[None]) -> None:
        """A connection's coroutine ended: retrieve its outcome, free its slot.

        run() catches what serving raises, so this finds nothing; it is the owner that makes sure:
        an exception that got out anyway (a bug) is logged and costs this connection alone, never an
        "exception was never retrieved" when the task is collected.
        """
        conn.task = None  # the task holds its outcome; the connection need not hold the task
        if not task.cancelled():
            exc = task.exception()
            if exc is not None:
                log.error("a bug ended a connection from %s (it alone was closed): %r", conn.peer, exc, exc_info=exc)
                if conn.transport is not None:
                    conn.transport.abort()
        self.connection_closed(conn)

    def _count_refusal(self, turned: Turned) -> None:
        # Turned away before any request was read: no record is logged (a flood would be all the log
        # said), but the metrics count it.
        if self.metrics is not None:
            reason = refusal_reason(turned.status, turned.error)
            if reason is not None:
                self.metrics.refusals.inc(reason)

    @staticmethod
    def _turn_away(sock: socket.socket, turned: Turned) -> None:
        body = error_body(turned.error, turned.message)
        try:
            sock.setblocking(False)  # a few hundred bytes into an empty buffer: never a wait
            sock.send(head(turned.status, len(body), extra={"Retry-After": "1"}, close=True) + body)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        sock.close()

    # ---- connections and requests in flight ---------------------------------------------------

    def connection_closed(self, conn: Connection) -> None:
        if conn in self._connections:
            self._connections.discard(conn)
            self.admission.disconnect(conn.peer, conn.slot)
        self._notify()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
        with self._cond:
            self._cond.notify_all()

    @property
    def connection_count(self) -> int:
        return self.admission.connections

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no connection is open and none in flight; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self.admission.connections == 0 and self._inflight == 0, timeout)

    async def route(self, conn: Connection, request: Head, decision: gate.Admit | gate.Refuse) -> None:
        if isinstance(decision, gate.Refuse):
            await routes.refuse(conn, request, decision)
        else:
            await routes.ROUTES[decision.route](conn, request, decision)

    def begin(self) -> None:
        """A request head was read: count it in flight.

        Never refused, draining or not: it came on a connection the client already had, and a
        balancer cannot retry a POST it has sent.
        """
        self._inflight += 1

    def end(self) -> None:
        self._inflight -= 1
        self._notify()

    async def acquire_slot(self, wait: float) -> bool:
        slots = self._slots
        assert slots is not None
        if not slots.locked():
            await slots.acquire()  # free: taken at once
            return True
        try:
            await asyncio.wait_for(slots.acquire(), wait)
        except TimeoutError:
            return False
        return True

    def release_slot(self) -> None:
        assert self._slots is not None
        self._slots.release()

    # ---- the drain ----------------------------------------------------------------------------

    def drain(self, grace: float | None = None, *, last: bool = True) -> bool:
        """Stop accepting, answer open connections' requests, close idle ones.

        Runs on the serving loop (from any thread: this one waits for it), or on a loop of its own
        when nothing serves yet. See `drained` for the steps.
        """
        loop = self.loop
        if loop is not None and loop.is_running():
            if threading.get_ident() == self._loop_thread:
                raise RuntimeError("drain() from the loop's own thread: await drained() instead")
            future = asyncio.run_coroutine_threadsafe(self.drained(grace, last=last), loop)
            try:
                return future.result()
            finally:
                # As with socketserver's servers, a drain is the serving's end: serve_forever returns
                # (a thread left serving would keep its process alive after main() has returned).
                self.shutdown()
        own = loops.new_loop(None)
        try:
            self.attach(own, loops.Guard(own))
            return own.run_until_complete(self.drained(grace, last=last))
        finally:
            loops.close(own, self._connections)
            self.loop = None

    async def drained(self, grace: float | None = None, *, last: bool = True) -> bool:
        """The drain, on the loop.

        `last`: this process is the last holder of the listening socket (alone, or every worker of
        the instance is stopping), so nothing may be left in its queue when it closes: new
        handshakes stop first, and what was queued is accepted and served. Otherwise (one worker
        leaving while the others go on) the queue is theirs: this copy of the socket just closes.
        True when every connection closed within the limit (`grace`, default the timings').
        """
        timings = self.timings
        limit = timings.limit if grace is None else grace
        self._stop_accepting()
        self.stopping = True
        self.inflight_at_stop = self._inflight
        for conn in list(self._connections):
            conn.wake()  # an idle connection's limit shortens to the grace at once
        if last:
            filtered = listening.refuse_new(self.socket)
            queued = await self._accept_queued(timings.settle if filtered else 0.0, SETTLE_LIMIT)
            if queued:
                log.info("took in %d connections that were queued when the drain began", queued)
        self.socket.close()
        assert self._changed is not None
        deadline = time.monotonic() + limit
        while self.admission.connections or self._inflight:
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning(
                    "drain limit (%.0f s) reached: %d connections still open, %d requests in flight",
                    limit,
                    self.admission.connections,
                    self._inflight,
                )
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(left, 1.0))
            except TimeoutError:
                pass
        return True

    async def _accept_queued(self, settle: float, limit: float) -> int:
        """Accept queued connections until none came for `settle` s; the count.

        At most `limit` s. After `refuse_new`, only handshakes already under way can still complete:
        `settle` covers their last round trip. Other processes sharing the socket may win some: fine.
        """
        accepted = 0
        end = time.monotonic() + limit
        quiet_until = time.monotonic() + settle
        while True:
            taken = self._accept_burst()
            accepted += taken
            now = time.monotonic()
            if taken:
                quiet_until = now + settle
            elif now >= min(quiet_until, end):
                return accepted
            await asyncio.sleep(0.01 if not taken else 0)


def http_url(address: tuple[Any, ...], path: str) -> str:
    host, port = str(address[0]), address[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"


def is_loopback(host: str) -> bool:
    # A name under 127. (127.0.0.1.nip.io) counts: loopback's Host rule is the safe side.
    return host.startswith("127.") or is_loopback_host(host)


def metrics_server(
    dispatcher: Dispatcher,
    exports: ServerMetrics,
    *,
    listener: socket.socket | None = None,
    address: tuple[str, int] = ("127.0.0.1", 0),
    timings: Timings | None = None,
    read_timeout: float = 30.0,
) -> McpHTTPServer:
    """The metrics listener (--metrics): GET and HEAD /metrics alone.

    The MCP door's reader, admission and gate (its Host rule too, when bound to loopback), under a
    bound of its own. Nothing sent to it is counted: a scrape is not MCP traffic.
    """
    host = str(listener.getsockname()[0]) if listener is not None else address[0]
    policy = gate.Policy(loopback_bind=is_loopback(host), max_body=METRICS_MAX_BODY, metrics=True, metrics_only=True)
    timings = timings or Timings()
    timings = dataclasses.replace(
        timings,
        idle_grace=min(METRICS_IDLE_GRACE, timings.idle_timeout),
        requests=METRICS_REQUEST_LIMIT,
        prestop=0.0,
    )
    return McpHTTPServer(
        address,
        dispatcher,
        policy,
        read_timeout=read_timeout,
        listener=listener,
        timings=timings,
        exports=exports,
        max_connections=METRICS_CONNECTIONS,
    )


def announce_metrics(mcp: tuple[Any, ...], listener: socket.socket | None, on_mcp_port: bool, *, summed: bool) -> None:
    """Log where the metrics are served, warning where others can read them."""
    each = " (every worker's, summed)" if summed else ""
    if listener is not None:
        address = listener.getsockname()
        log.info("metrics: %s%s", http_url(address, "/metrics"), each)
        if not is_loopback(str(address[0])):
            log.warning("metrics: %s is not a loopback address: whoever can reach it %s", address[0], _EXPOSED)
    if on_mcp_port:
        log.info("metrics: %s%s (--metrics-on-mcp-port)", http_url(mcp, "/metrics"), each)
        if not is_loopback(str(mcp[0])):
            log.warning("--metrics-on-mcp-port: every client that reaches the MCP port %s", _EXPOSED)


def raise_descriptor_limit(wanted: int) -> None:
    """Lift the soft limit on open descriptors towards `wanted`.

    Each request in flight holds two: its client's and its gateway connection. As far as the hard
    limit allows; say so when it falls short.
    """
    if sys.platform == "win32":
        return  # no such limit to lift: Windows sockets are handles, not numbered descriptors
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft < wanted:
        log.warning("only %d file descriptors may be open (ulimit -n); the bounds may need %d", soft, wanted)


def serve(
    dispatcher: Dispatcher,
    *,
    host: str,
    port: int,
    allowed_origins: tuple[str, ...],
    env_bearer: str | None,
    max_concurrency: int,
    max_body: int,
    grace: float,
    max_peer_connections: int | None = None,
    max_peer_heads: int = 8,
    metrics_on_mcp_port: bool = False,
    metrics_listener: socket.socket | None = None,
    metrics_dir: str | None = None,
    listener: socket.socket | None = None,
    lifeline: Lifeline | None = None,
    timings: Timings | None = None,
    selector: selectors.BaseSelector | None = None,
    door: Door | None = None,
) -> int:
    """Run until told to stop, then drain; 0 if every request was answered.

    Alone, SIGTERM or SIGINT stops it. As one of several workers (`lifeline` given), the
    supervisor stopping is the instance stopping; SIGTERM to this worker alone means it leaves
    while the others go on.

    Metrics are counted when they are served: on a listener of their own (`metrics_listener`,
    bound by the caller; every worker accepts on it, as on the MCP socket) and/or at GET /metrics
    on the MCP port (`metrics_on_mcp_port`). The metrics listener answers until the MCP drain is
    over, so a scrape sees the drain, and then closes by the same steps.
    """
    timings = dataclasses.replace(timings or Timings(), requests=grace)
    origins = frozenset(o for o in (gate.normalise_origin(x) for x in allowed_origins) if o)
    policy = gate.Policy(
        loopback_bind=is_loopback(host),
        allowed_origins=origins,
        max_body=max_body,
        metrics=metrics_on_mcp_port,
        resource_metadata=frozenset() if door is None else door.metadata_paths,
    )
    counted = metrics_on_mcp_port or metrics_listener is not None
    registry = ServerMetrics((t.name for t in dispatcher.catalog.tools), __version__) if counted else None
    if registry is not None and metrics_dir is not None:
        registry.share(metrics_dir)  # one of several workers: each scrape answers for all of them
    server = McpHTTPServer(
        (host, port),
        dispatcher,
        policy,
        env_bearer=env_bearer,
        max_concurrency=max_concurrency,
        max_peer_connections=max_peer_connections,
        max_peer_heads=max_peer_heads,
        metrics=registry,
        listener=listener,
        timings=timings,
        door=door,
    )
    scrapes = None
    if registry is not None and metrics_listener is not None:
        scrapes = metrics_server(
            dispatcher, registry, listener=metrics_listener, timings=server.timings, read_timeout=server.read_timeout
        )
    raise_descriptor_limit(2 * server.max_connections + (scrapes.max_connections if scrapes else 0) + 64)
    loop = loops.new_loop(selector)
    guard = loops.Guard(loop)
    try:
        code = loop.run_until_complete(guard.until(_run(loop, guard, server, scrapes, lifeline, metrics_listener)))
    except BaseException as exc:  # the selector raised: nothing on this loop can go on
        guard.fail(exc)
        code = 1
    if guard.fatal is not None:
        # At once: a supervisor replaces this process; calls waiting on it are lost either way.
        log.critical("fairwins-mcp stops: its event loop cannot go on")
        logging.shutdown()
        os._exit(FATAL_EXIT)
    loops.close(loop, [*server._connections, *(scrapes._connections if scrapes else ())])
    server.pacing.close()
    if registry is not None:
        registry.publish()  # a worker's last figures stay in the sum after it has gone
    return code if isinstance(code, int) else 1


async def _run(
    loop: asyncio.AbstractEventLoop,
    guard: loops.Guard,
    server: McpHTTPServer,
    scrapes: McpHTTPServer | None,
    lifeline: Lifeline | None,
    metrics_listener: socket.socket | None,
) -> int:
    """Serve on the loop until told to stop, then drain; the exit code."""
    stop = loop.create_future()

    def stopping(instance: bool) -> None:
        if not stop.done():
            stop.set_result(instance)

    def on_signal(signum: int) -> None:
        stopping(lifeline is None or signum != signal.SIGTERM)

    # A worker hears SIGINT (a terminal's ^C reaches every worker) through its supervisor, which
    # closes the lifeline.
    quiet = loops.on_stop_signals(loop, on_signal, loops.STOP_SIGNALS if lifeline is None else (signal.SIGTERM,))
    # A worker's figures, published for the others' scrapes (none unless it is one of several).
    unpublish = server.metrics.publish_on(loop) if server.metrics is not None else None
    try:
        if lifeline is not None:

            def instance_stops() -> None:  # on the lifeline's thread
                loop.call_soon_threadsafe(stopping, True)

            lifeline.watch(instance_stops)
        server.attach(loop, guard)
        if scrapes is not None:
            scrapes.attach(loop, guard)
        if lifeline is None:
            log.info("fairwins-mcp listening on %s (health: %s)", server.url, server.url.replace("/mcp", "/healthz"))
            announce_metrics(server.server_address, metrics_listener, server.policy.metrics, summed=False)
        else:
            log.info("worker %d serving", os.getpid())
        last = bool(await stop)
        if server.timings.prestop > 0 and last:
            server.unready = True
            log.info(
                "stopping: /healthz answers 503 for %.0f s while requests are still served",
                server.timings.prestop,
                extra=logs.AHEAD,  # written at once, ahead of the access lines queued before it (ops/logs.py)
            )
            await asyncio.sleep(server.timings.prestop)
        log.info(
            "stopping: %s; every request on an open connection is answered; idle connections close after %.0f s",
            "no new connections" if last else "this worker leaves, the others go on accepting",
            server.timings.idle_limit(True),
            extra=logs.AHEAD,
        )
        drained = await server.drained(last=last)
        if scrapes is not None:
            # A scrape that outlives its limit loses nothing: the next one is taken elsewhere.
            await scrapes.drained(last=last)
        if not drained:
            return 1
        log.info("stopped: all %d requests in flight at the signal were answered", server.inflight_at_stop)
        return 0
    finally:
        if unpublish is not None:
            unpublish()
        quiet()  # the signals' handlers and wakeup descriptor as they were
