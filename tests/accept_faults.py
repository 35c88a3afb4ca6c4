"""The seam for the accept-path faults (issue 34): a listening socket whose accepts fail as each platform's do.

Used by tests/test_http_loop.py, and run under the darwin and win32 shapes by tests/test_platforms.py
(so nothing here needs more than the standard library and the server).
"""

from __future__ import annotations

import errno
import os
import socket
from typing import Any


class FaultySocket(socket.socket):
    """An accepted socket that fails as a reset one does on macOS (or as a broken one anywhere)."""

    fault = ""

    def setsockopt(self, *args: Any) -> None:  # type: ignore[override]
        if self.fault == "nodelay" and args[:2] == (socket.IPPROTO_TCP, socket.TCP_NODELAY):
            raise OSError(errno.EINVAL, "Invalid argument")
        super().setsockopt(*args)

    def setblocking(self, flag: bool) -> None:
        if self.fault == "setblocking":
            raise OSError(errno.EBADF, "Bad file descriptor")
        super().setblocking(flag)

    def getpeername(self) -> Any:
        if self.fault == "getpeername":
            raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")
        return super().getpeername()


class FaultyListener:
    """A real listening socket; its next accept raises `errno`, or hands over a socket with `fault`."""

    def __init__(self, real: socket.socket) -> None:
        self.real = real
        self.accept_error: int | None = None
        self.fault = ""

    def accept(self) -> tuple[socket.socket, Any]:
        if self.accept_error is not None:
            code, self.accept_error = self.accept_error, None
            raise OSError(code, os.strerror(code))
        sock, address = self.real.accept()
        if self.fault:
            faulty = FaultySocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
            faulty.fault, self.fault = self.fault, ""
            return faulty, address
        return sock, address

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)
