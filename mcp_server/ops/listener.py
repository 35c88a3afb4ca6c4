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
import socket
import sys
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
