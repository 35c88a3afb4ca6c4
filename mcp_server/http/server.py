"""The socket server: one listening socket, one accept thread, one thread per connection, and the drain.

Thin on purpose: what a request is, is the reader's business (reader.py); who may connect, the
admission's (admission.py); what a request gets, the routes' (routes.py). Here: accept, count
what is in flight, and stop (SIGTERM: no new connections, requests in flight finish).
"""

from __future__ import annotations

import logging
import selectors
import signal
import socket
import threading
import time
from typing import Any

from ..protocol import Dispatcher
from . import gate
from .admission import Admission, Limits, Slot, Turned
from .connection import Connection
from .disconnects import DisconnectWatcher
from .response import error_body, head

log = logging.getLogger("fairwins_mcp.http")

BACKLOG = 128


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
        max_concurrency: int = 32,
        read_timeout: float = 30.0,
        idle_timeout: float = 30.0,
        max_peer_connections: int | None = None,
        max_peer_heads: int = 8,
    ) -> None:
        self.dispatcher = dispatcher
        self.policy = policy
        self.env_bearer = env_bearer
        self.read_timeout = read_timeout
        self.idle_timeout = idle_timeout
        self.max_concurrency = max_concurrency
        self.max_connections = connection_bound(max_concurrency)
        if max_peer_connections is None:
            max_peer_connections = max(1, self.max_connections // 2)
        self.admission = Admission(Limits(self.max_connections, max_peer_connections, max_peer_heads))
        self.slots = threading.BoundedSemaphore(max_concurrency)
        self.stopping = False
        self.watcher = DisconnectWatcher()
        self._cond = threading.Condition()
        self._inflight = 0
        self.inflight_at_stop = 0
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        # "::" serves IPv4 clients too where the system can (as the kernel's default would).
        dual = address[0] == "::" and socket.has_dualstack_ipv6()
        self.socket = socket.create_server(address, family=family, backlog=BACKLOG, dualstack_ipv6=dual)
        self.socket.setblocking(False)
        self.server_address: tuple[Any, ...] = self.socket.getsockname()
        self._wake_r, self._wake_w = socket.socketpair()
        self._serving = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._shutdown = False

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), self.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/mcp"

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
            return
        except OSError as exc:
            # Out of descriptors, or the socket closed under us: accepting resumes on the next event.
            log.warning("accept failed: %s", exc)
            time.sleep(0.05)
            return
        # Small answers must not wait out a delayed ACK on keep-alive connections.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = str(address[0])
        slot = self.admission.connect(peer)
        if isinstance(slot, Turned):
            self._turn_away(sock, slot)
            return
        connection = Connection(self, sock, peer, slot)
        thread = threading.Thread(target=connection.run, name="fairwins-mcp-connection", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread can be had: the connection is refused like any other
            self.admission.disconnect(peer, slot)
            self._turn_away(sock, Turned(503, "busy", "Too many connections; retry shortly"))

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
        self._wake_r.close()
        self._wake_w.close()
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

    def begin(self) -> bool:
        """A request head was read: count it in flight (False once draining: answer 503 and close)."""
        with self._cond:
            if self.stopping:
                return False
            self._inflight += 1
            return True

    def end(self) -> None:
        with self._cond:
            self._inflight -= 1
            self._cond.notify_all()

    def drain(self, grace: float) -> bool:
        """Stop accepting, let requests in flight finish within `grace` seconds; True if all did."""
        with self._cond:
            self.stopping = True
            self.inflight_at_stop = self._inflight
        self.shutdown()
        self.socket.close()  # the listening socket only: calls in flight still watch theirs
        deadline = time.monotonic() + grace
        try:
            with self._cond:
                while self._inflight:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(left)
            return True
        finally:
            self.watcher.close()


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
) -> int:
    """Run until SIGTERM or SIGINT, then drain requests in flight and return 0."""
    origins = frozenset(o for o in (gate.normalise_origin(x) for x in allowed_origins) if o)
    loopback = host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")
    policy = gate.Policy(loopback_bind=loopback, allowed_origins=origins, max_body=max_body)
    server = McpHTTPServer(
        (host, port),
        dispatcher,
        policy,
        env_bearer=env_bearer,
        max_concurrency=max_concurrency,
        max_peer_connections=max_peer_connections,
        max_peer_heads=max_peer_heads,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="fairwins-mcp-accept")
    thread.start()
    log.info("fairwins-mcp listening on %s (health: %s)", server.url, server.url.replace("/mcp", "/healthz"))
    while not stop.wait(3600):
        pass
    log.info("stopping: no new connections; letting requests in flight finish (up to %.0f s)", grace)
    drained = server.drain(grace)
    thread.join(timeout=5)
    if not drained:
        log.warning("some requests were still in flight after %.0f s", grace)
    else:
        log.info("stopped: all %d requests in flight at the signal were answered", server.inflight_at_stop)
    return 0
