"""The listening socket: bound once, shared, closed without resetting.

When a listening socket closes, the kernel resets every connection it had completed but nobody
had accepted yet, and a client (a load balancer above all) may already have sent a request on
it. So a drain first stops new handshakes (a socket filter that drops bare SYNs: a client then
retries its SYN, meets the closed port and gets "connection refused", which every balancer
retries elsewhere), then accepts and serves whatever was queued, and closes only once nothing
more has arrived for a moment.
"""

from __future__ import annotations

import ctypes
import logging
import selectors
import socket
import sys
import time
from collections.abc import Callable
from typing import Final

log = logging.getLogger("fairwins_mcp.http")

BACKLOG: Final = 1024  # the kernel caps it at net.core.somaxconn; a crowd arriving at once must not overflow it
SO_ATTACH_FILTER: Final = 26  # <asm-generic/socket.h>; Python's socket module does not name it

# Classic BPF, run on each segment addressed to the listener (skb data starts at the TCP header):
# keep every segment except a bare SYN (SYN set, ACK clear), so handshakes already under way
# (their final ACK) and every accepted connection's traffic pass, and no new handshake starts.
_LD_B_ABS, _ALU_AND_K, _JMP_JEQ_K, _RET_K = 0x30, 0x54, 0x15, 0x06
TCP_FLAGS_OFFSET: Final = 13
SYN, ACK = 0x02, 0x10
DROP_BARE_SYN: Final = (
    (_LD_B_ABS, 0, 0, TCP_FLAGS_OFFSET),
    (_ALU_AND_K, 0, 0, SYN | ACK),
    (_JMP_JEQ_K, 0, 1, SYN),
    (_RET_K, 0, 0, 0),  # drop
    (_RET_K, 0, 0, 0xFFFFFFFF),  # keep the whole segment
)


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Instruction))]


def listen(host: str, port: int, backlog: int = BACKLOG) -> socket.socket:
    """A listening TCP socket on host:port (0: any), non-blocking, for workers."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if sys.platform != "win32":
            # A restarted server binds again at once, while connections of the previous one sit in
            # TIME_WAIT. (On Windows SO_REUSEADDR means another process may bind the same port and
            # take its connections; TIME_WAIT does not hold a port there, so nothing is set.)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if host == "::" and socket.has_dualstack_ipv6():
            # "::" serves IPv4 clients too where the system can (as the kernel's default would).
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((host, port))
        sock.listen(backlog)
        # Shared by workers that race for each connection: the losers must see EAGAIN, not block.
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def refuse_new(sock: socket.socket) -> bool:
    """Stop new handshakes on `sock`; False where there are no socket filters."""
    if sys.platform != "linux":
        return False
    program = (_Instruction * len(DROP_BARE_SYN))(*(_Instruction(*op) for op in DROP_BARE_SYN))
    fprog = _Program(len(DROP_BARE_SYN), ctypes.cast(program, ctypes.POINTER(_Instruction)))
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, bytes(fprog))
    except OSError as exc:
        log.debug("no socket filter on the listener (%s): closing it may reset a connection arriving meanwhile", exc)
        return False
    return True


def accept_queued(
    sock: socket.socket, handle: Callable[[socket.socket, object], None], *, settle: float, limit: float
) -> int:
    """Accept and hand over queued connections until none came for `settle` s.

    At most `limit` s; returns the count. After `refuse_new`, only handshakes already under way can
    still complete: `settle` covers their last round trip. Other processes sharing the socket may
    win some connections: fine.
    """
    accepted = 0
    end = time.monotonic() + limit
    quiet_until = time.monotonic() + settle
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(sock, selectors.EVENT_READ)
        except (OSError, ValueError):
            return 0  # the socket is closed already
        while True:
            now = time.monotonic()
            # One look at the queue even when there is no time to wait: what is queued is taken in.
            if accepted and (now >= quiet_until or now >= end):
                return accepted
            selector.select(max(0.0, min(quiet_until, end) - now))
            taken = _accept_all(sock, handle, end)
            accepted += taken
            if taken:
                quiet_until = time.monotonic() + settle
            elif time.monotonic() >= min(quiet_until, end):
                return accepted


def _accept_all(sock: socket.socket, handle: Callable[[socket.socket, object], None], end: float) -> int:
    """Accept until the queue is empty (or `end`), handing each to `handle`."""
    accepted = 0
    while time.monotonic() < end:
        try:
            conn, address = sock.accept()
        except OSError:
            break  # the queue is empty (EAGAIN), or the socket failed
        accepted += 1
        handle(conn, address)
    return accepted
