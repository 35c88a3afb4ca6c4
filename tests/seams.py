"""Faults at every seam of the HTTP core (issue 47): an OSError from each socket call the loop makes.

A `FaultySocket` is a real socket whose next call of a named method raises the errno armed for
it, once. The server's side of a client connection gets one from `Listener` (every accepted
socket is one, and the last is kept so a test can arm it once the connection is in the state it
wants); the gateway's side gets one from `GatewayDialer`, which stands in for the serving loop's
`create_connection` and arms each new gateway connection with what the test asked for. Nothing
here replaces the loop, the transports or the server: the asyncio transports call these methods
exactly as they call a plain socket's.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

from mcp_server.ops import listener as listening
from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.server import McpHTTPServer
from tests.mcp_http import running

# The socket calls a connection's transport makes, by the method asyncio calls: the accept-time
# ones (setsockopt: TCP_NODELAY; getpeername: the transport's peername) and the running ones
# (recv_into: a read, send: a write, shutdown: write_eof, close: the end).
CLIENT_SEAMS: Final = ("setsockopt", "getpeername", "recv_into", "send", "shutdown", "close")
# The gateway connection's: connect, send (the request), recv_into (the answer).
GATEWAY_SEAMS: Final = ("connect", "send", "recv_into")


class FaultySocket(socket.socket):
    """A real socket; each method named in `faults` raises OSError(errno) the next time it is called."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.faults: dict[str, int] = {}
        self.struck: list[str] = []
        self.offered: list[int] = []  # the bytes each send() was handed

    def _strike(self, name: str) -> None:
        code = self.faults.pop(name, None)
        if code is not None:
            self.struck.append(name)
            raise OSError(code, os.strerror(code))

    def setsockopt(self, *args: Any) -> None:
        self._strike("setsockopt")
        super().setsockopt(*args)

    def getpeername(self) -> Any:
        self._strike("getpeername")
        return super().getpeername()

    def recv_into(self, *args: Any) -> int:
        self._strike("recv_into")
        return super().recv_into(*args)

    def send(self, *args: Any) -> int:
        self._strike("send")
        self.offered.append(memoryview(args[0]).nbytes)
        return super().send(*args)

    def shutdown(self, how: int) -> None:
        self._strike("shutdown")
        super().shutdown(how)

    def connect(self, address: Any) -> None:
        self._strike("connect")
        super().connect(address)

    def close(self) -> None:
        # As POSIX close(): the descriptor is released even when an error is reported.
        code = self.faults.pop("close", None)
        super().close()
        if code is not None:
            self.struck.append("close")
            raise OSError(code, os.strerror(code))


class Listener:
    """A real listening socket whose accepted sockets are FaultySockets: `arm_next` before an accept, `last` after."""

    def __init__(self, real: socket.socket) -> None:
        self.real = real
        self.last: FaultySocket | None = None
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()
        self.accepted = threading.Condition(self._lock)

    def arm_next(self, **faults: int) -> None:
        with self._lock:
            self._next = dict(faults)

    def accept(self) -> tuple[socket.socket, Any]:
        sock, address = self.real.accept()
        faulty = FaultySocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
        with self._lock:
            faulty.faults, self._next = self._next, {}
            self.last = faulty
            self.accepted.notify_all()
        return faulty, address

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@contextmanager
def served(gateway_url: str, **options: Any) -> Iterator[tuple[McpHTTPServer, Listener]]:
    """An HTTP server on its loop, on loopback, in front of `gateway_url`, accepting through a `Listener`.

    `options`: McpHTTPServer's own (read_timeout, write_timeout). Bodies up to 2 MiB.
    """
    listener = Listener(listening.listen("127.0.0.1", 0))
    server = McpHTTPServer(
        ("127.0.0.1", 0),
        build_dispatcher(Config(api_url=gateway_url)),
        gate.Policy(loopback_bind=True, max_body=2 * 1024 * 1024),
        listener=listener,  # type: ignore[arg-type]
        **options,
    )
    with running(server):
        yield server, listener


class GatewayDialer:
    """The serving loop's create_connection, dialing each gateway connection on a FaultySocket armed with `next`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.original: Callable[..., Any] = loop.create_connection
        self.next: dict[str, int] = {}
        self.dialed: list[FaultySocket] = []

    async def create_connection(self, factory: Callable[[], Any], host: str, port: int, **kwargs: Any) -> Any:
        sock = FaultySocket(socket.AF_INET, socket.SOCK_STREAM)
        sock.faults, self.next = self.next, {}
        self.dialed.append(sock)
        try:
            sock.setblocking(False)
            await self.loop.sock_connect(sock, (host, port))
        except BaseException:
            sock.close()
            raise
        return await self.original(factory, sock=sock, **kwargs)

    def install(self) -> None:
        self.loop.create_connection = self.create_connection  # type: ignore[method-assign,assignment]

    def remove(self) -> None:
        self.loop.create_connection = self.original  # type: ignore[method-assign]


ERRNOS: Final = (errno.ECONNRESET, errno.EIO, errno.ENOTCONN)
