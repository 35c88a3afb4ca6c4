"""The socket server: one listening socket, one accept thread, one thread per connection, and the drain.

Thin on purpose: what a request is, is the reader's business (reader.py); who may connect, the
admission's (admission.py); what a request gets, the routes' (routes.py); how long each step of a
stop may take, the drain's (drain.py). Here: accept, count what is in flight, and stop so that a
load balancer loses nothing: no new handshakes, every queued connection taken in, every request
on an open connection answered (with `Connection: close`), idle connections closed last.

The metrics listener (`--metrics`) is this same server with a gate that admits GET /metrics
alone (`metrics_server`): no second, weaker HTTP parser exists for it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import os
import selectors
import signal
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Final

from mcp_server import __version__
from mcp_server.core.protocol import Dispatcher
from mcp_server.ops import listener as listening
from mcp_server.ops import logs, signals
from mcp_server.ops.metrics import ServerMetrics
from mcp_server.transports.http import gate, routes
from mcp_server.transports.http.admission import HEALTH_RESERVE, Admission, Limits, Slot, Turned
from mcp_server.transports.http.connection import Connection
from mcp_server.transports.http.disconnects import DisconnectWatcher
from mcp_server.transports.http.drain import SETTLE_LIMIT, Timings
from mcp_server.transports.http.head import Head
from mcp_server.transports.http.response import error_body, head

if TYPE_CHECKING:
    from mcp_server.ops.workers import Lifeline

log = logging.getLogger("fairwins_mcp.http")

# Requests in flight at once (docs/hosting.md, "Admission"): a request waiting on the gateway costs a
# thread and about 45 KiB, not a core (bench/waiting.py), so the bound is sized for waiting.
DEFAULT_MAX_CONCURRENCY: Final = 1024
# A thread that waits on a socket touches a few KiB of its stack: 1 MiB instead of the platform's
# 8 MiB cuts the address space of a thousand waiting requests from 8 GiB to 1 GiB, and still
# leaves four times what the deepest JSON the parser accepts needs (256 KiB, measured).
THREAD_STACK: Final = 1024 * 1024
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


def connection_bound(max_concurrency: int) -> int:
    """Open connections allowed, all peers together: room for idle keep-alive clients around the requests in flight."""
    return max_concurrency * 4 + 16


class McpHTTPServer:
    def __init__(
        self,
        address: tuple[str, int],
        dispatcher: Dispatcher,
        policy: gate.Policy,
        *,
        env_bearer: str | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        read_timeout: float = 30.0,
        idle_timeout: float | None = None,
        max_peer_connections: int | None = None,
        max_peer_heads: int = 8,
        metrics: ServerMetrics | None = None,
        listener: socket.socket | None = None,
        timings: Timings | None = None,
        exports: ServerMetrics | None = None,
        max_connections: int | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.metrics = metrics  # what this server counts into
        self.exports = exports if exports is not None else metrics  # what its GET /metrics answers with
        self.policy = policy
        self.env_bearer = env_bearer
        self.read_timeout = read_timeout
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
        self.slots = threading.BoundedSemaphore(max_concurrency)
        self.stopping = False  # draining: every answer closes its connection
        self.unready = False  # pre-stop: /healthz answers 503, everything else as usual
        self._cond = threading.Condition()
        self._inflight = 0
        self.inflight_at_stop = 0
        if metrics is not None:
            metrics.in_flight.set_function(lambda: self._inflight)
        self.socket = listener if listener is not None else listening.listen(address[0], address[1])
        self.socket.setblocking(False)
        self.server_address: tuple[Any, ...] = self.socket.getsockname()
        self.watcher = DisconnectWatcher()  # after the bind: a port in use leaves no thread behind
        self._wake_r, self._wake_w = socket.socketpair()
        # Readable once the drain begins (and from then on): idle connections wait on it beside
        # their own socket, so each one's idle limit shortens to the grace at once.
        self.draining_r, self._draining_w = socket.socketpair()
        self._serving = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._shutdown = False

    @property
    def idle_timeout(self) -> float:
        return self.timings.idle_timeout

    @property
    def url(self) -> str:
        return http_url(self.server_address, "/metrics" if self.policy.metrics_only else "/mcp")

    # ---- accepting ----------------------------------------------------------------------------

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Accept until shutdown(): each connection is admitted (or answered at once) and served on its own thread."""
        self._stopped.clear()
        self._serving.set()
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            try:
                while not self._shutdown:
                    for key, _ in selector.select(poll_interval):
                        if key.fileobj is self._wake_r:
                            self._wake_r.recv(64)
                            continue
                        self._accept()
            finally:
                self._stopped.set()

    def _accept(self) -> None:
        try:
            sock, address = self.socket.accept()
        except (BlockingIOError, InterruptedError):
            return  # another worker sharing the socket took it
        except OSError as exc:
            # Out of descriptors, or the socket closed under us: accepting resumes on the next event.
            log.warning("accept failed: %s", exc)
            time.sleep(0.05)
            return
        self.admit(sock, address)

    def admit(self, sock: socket.socket, address: Any) -> None:
        """An accepted connection: served on its own thread, or answered at once and closed."""
        sock.setblocking(True)
        # Small answers must not wait out a delayed ACK on keep-alive connections.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = str(address[0])
        slot = self.admission.connect(peer)
        if isinstance(slot, Turned):
            self._turn_away(sock, slot)
            self._count_refusal(slot)
            return
        connection = Connection(self, sock, peer, slot)
        thread = threading.Thread(target=connection.run, name="fairwins-mcp-connection", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread can be had: the connection is refused like any other
            self.admission.disconnect(peer, slot)
            turned = Turned(503, "busy", "Too many connections; retry shortly")
            self._turn_away(sock, turned)
            self._count_refusal(turned)

    def _count_refusal(self, turned: Turned) -> None:
        # Turned away before any request was read: no record is logged (a flood would be all the log
        # said), but the metrics count it.
        if self.metrics is not None:
            from mcp_server.ops.metrics import refusal_reason

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

    def shutdown(self) -> None:
        """Stop accepting; returns once the accept loop has ended (or was never started)."""
        self._shutdown = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._serving.is_set():
            self._stopped.wait(10)

    def server_close(self) -> None:
        self.shutdown()
        self.socket.close()
        for end in (self._wake_r, self._wake_w, self.draining_r, self._draining_w):
            end.close()
        self.watcher.close()

    # ---- connections and requests in flight ---------------------------------------------------

    def connection_closed(self, peer: str, slot: Slot) -> None:
        self.admission.disconnect(peer, slot)
        with self._cond:
            self._cond.notify_all()

    @property
    def connection_count(self) -> int:
        return self.admission.connections

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no connection is open and no request in flight; False if `timeout` passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: self.admission.connections == 0 and self._inflight == 0, timeout)

    def route(self, conn: Connection, request: Head, decision: gate.Admit | gate.Refuse) -> None:
        if isinstance(decision, gate.Refuse):
            routes.refuse(conn, request, decision)
        else:
            routes.ROUTES[decision.route](conn, request, decision)

    def begin(self) -> None:
        """A request head was read: count it in flight. Never refused, draining or not: it came on a
        connection the client already had, and a balancer cannot retry a POST it has sent."""
        with self._cond:
            self._inflight += 1

    def end(self) -> None:
        with self._cond:
            self._inflight -= 1
            self._cond.notify_all()

    def drain(self, grace: float | None = None, *, last: bool = True) -> bool:
        """Stop accepting, answer what comes on open connections, close idle ones after the grace.

        `last`: this process is the last holder of the listening socket (alone, or every worker of
        the instance is stopping), so nothing may be left in its queue when it closes: new
        handshakes stop first, and what was queued is accepted and served. Otherwise (one worker
        leaving while the others go on) the queue is theirs: this copy of the socket just closes.
        True when every connection closed within the limit (`grace`, default the timings').
        """
        timings = self.timings
        limit = timings.limit if grace is None else grace
        self.shutdown()  # the accept loop is over: from here on, this thread accepts
        with self._cond:
            self.stopping = True
            self.inflight_at_stop = self._inflight
        try:
            self._draining_w.send(b"x")
        except OSError:
            pass
        if last:
            filtered = listening.refuse_new(self.socket)
            queued = listening.accept_queued(
                self.socket, self.admit, settle=timings.settle if filtered else 0.0, limit=SETTLE_LIMIT
            )
            if queued:
                log.info("took in %d connections that were queued when the drain began", queued)
        self.socket.close()
        deadline = time.monotonic() + limit
        try:
            with self._cond:
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
                    self._cond.wait(min(left, 1.0))
            return True
        finally:
            self.watcher.close()


def http_url(address: tuple[Any, ...], path: str) -> str:
    host, port = str(address[0]), address[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def metrics_server(
    dispatcher: Dispatcher,
    exports: ServerMetrics,
    *,
    listener: socket.socket | None = None,
    address: tuple[str, int] = ("127.0.0.1", 0),
    timings: Timings | None = None,
    read_timeout: float = 30.0,
) -> McpHTTPServer:
    """The metrics listener (--metrics): GET and HEAD /metrics, nothing else, through the same reader,
    admission and gate as the MCP door (the Host rule too, when bound to loopback), under a bound of
    its own. Nothing sent to it is counted: a scrape is not MCP traffic."""
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
    """Log where the metrics are served, with a warning wherever they can be read from beyond this machine."""
    each = " (every worker's, summed)" if summed else ""
    if listener is not None:
        address = listener.getsockname()
        log.info("metrics: %s%s", http_url(address, "/metrics"), each)
        if not is_loopback(str(address[0])):
            log.warning(
                "metrics: %s is not a loopback address: whoever can reach it reads the server's version and "
                "its tool call, payment, error and gateway counts (docs/hosting.md, Metrics)",
                address[0],
            )
    if on_mcp_port:
        log.info("metrics: %s%s (--metrics-on-mcp-port)", http_url(mcp, "/metrics"), each)
        if not is_loopback(str(mcp[0])):
            log.warning(
                "--metrics-on-mcp-port: every client that reaches the MCP port reads the server's version and "
                "its tool call, payment, error and gateway counts (docs/hosting.md, Metrics)"
            )


def raise_descriptor_limit(wanted: int) -> None:
    """Lift the soft limit on open descriptors towards `wanted` (each request in flight holds two: its
    client's and its gateway connection), as far as the hard limit allows; say so when it falls short."""
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
) -> int:
    """Run until told to stop, then drain; 0 when every request in flight was answered.

    Alone, SIGTERM or SIGINT stops it. As one of several workers (`lifeline` given), the
    supervisor stopping is the instance stopping; SIGTERM to this worker alone means it leaves
    while the others go on.

    Metrics are counted when they are served: on a listener of their own (`metrics_listener`,
    bound by the caller; every worker accepts on it, as on the MCP socket) and/or at GET /metrics
    on the MCP port (`metrics_on_mcp_port`). The metrics listener answers until the MCP drain is
    over, so a scrape sees the drain, and then closes by the same steps.
    """
    threading.stack_size(THREAD_STACK)
    signals.block()  # every thread started from here inherits it: a stop signal reaches this one (ops/signals.py)
    timings = dataclasses.replace(timings or Timings(), requests=grace)
    origins = frozenset(o for o in (gate.normalise_origin(x) for x in allowed_origins) if o)
    loopback = host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")
    policy = gate.Policy(
        loopback_bind=loopback, allowed_origins=origins, max_body=max_body, metrics=metrics_on_mcp_port
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
    )
    scrapes = None
    if registry is not None and metrics_listener is not None:
        scrapes = metrics_server(
            dispatcher, registry, listener=metrics_listener, timings=server.timings, read_timeout=server.read_timeout
        )
    raise_descriptor_limit(2 * server.max_connections + (scrapes.max_connections if scrapes else 0) + 64)
    stop = threading.Event()
    alone: list[bool] = []

    def stopping(instance: bool) -> None:
        alone.append(not instance)
        stop.set()

    signal.signal(signal.SIGTERM, lambda *_: stopping(lifeline is None))
    if lifeline is None:
        signal.signal(signal.SIGINT, lambda *_: stopping(True))
    else:
        lifeline.watch(lambda: stopping(True))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="fairwins-mcp-accept")
    thread.start()
    scraping = None
    if scrapes is not None:
        scraping = threading.Thread(
            target=scrapes.serve_forever, kwargs={"poll_interval": 0.2}, name="fairwins-mcp-metrics-accept"
        )
        scraping.start()
    if lifeline is None:
        log.info("fairwins-mcp listening on %s (health: %s)", server.url, server.url.replace("/mcp", "/healthz"))
        announce_metrics(server.server_address, metrics_listener, metrics_on_mcp_port, summed=False)
    else:
        log.info("worker %d serving", os.getpid())
    signals.unblock()  # the handlers are set: one sent meanwhile is taken now
    while not stop.wait(3600):
        pass
    last = not alone[0]
    if timings.prestop > 0 and last:
        server.unready = True
        log.info(
            "stopping: /healthz answers 503 for %.0f s while requests are still served",
            timings.prestop,
            extra=logs.AHEAD,
        )
        time.sleep(timings.prestop)
    log.info(
        "stopping: %s; every request on an open connection is answered; idle connections close after %.0f s",
        "no new connections" if last else "this worker leaves, the others go on accepting",
        timings.idle_limit(True),
        extra=logs.AHEAD,
    )
    drained = server.drain(last=last)
    thread.join(timeout=5)
    if scrapes is not None and scraping is not None:
        scrapes.drain(last=last)  # a scrape that outlives its limit loses nothing: the next one is taken elsewhere
        scraping.join(timeout=5)
    if registry is not None:
        registry.publish()  # a worker's last figures stay in the sum after it has gone
    if not drained:
        return 1
    log.info("stopped: all %d requests in flight at the signal were answered", server.inflight_at_stop)
    return 0
