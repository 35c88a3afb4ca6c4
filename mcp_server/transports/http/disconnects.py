"""One thread that notices when a client with a call in flight goes away, and cancels that call."""

from __future__ import annotations

import logging
import select
import selectors
import socket
import sys
import threading
from collections.abc import Callable
from typing import Final, Protocol

log = logging.getLogger("fairwins_mcp.http")

# epoll's registrations are thread-safe and seen by an epoll_wait already waiting (epoll(7)): a
# connection thread registers its socket with one system call, no lock and no wake-up. It does so
# once, when the connection opens, for its peer's end only (RDHUP; HUP and ERR are always
# reported), edge-triggered: its requests arriving never wake the watcher, and a call costs no
# system call at all. Every system call releases the GIL, and under load each release is a
# hand-off between threads: two per call were a tenth of the server's CPU at 8 clients.
# Elsewhere a selector (select or poll) sees a new socket only on its next call, so it is woken
# for each call's socket, under a lock, and the socket reports once (level-triggered, it would
# report again at once while a pipelined request waits).


class _Epoll(Protocol):
    """What the watcher uses of select.epoll (Linux only)."""

    def register(self, fd: int, eventmask: int = ..., /) -> None: ...
    def unregister(self, fd: int, /) -> None: ...
    def poll(self, timeout: float | None = None, maxevents: int = -1) -> list[tuple[int, int]]: ...
    def close(self) -> None: ...


if sys.platform == "linux":
    _PEER_END: Final = select.EPOLLRDHUP | select.EPOLLET
    _READABLE: Final = select.EPOLLIN

    def _open_epoll() -> _Epoll | None:
        return select.epoll()

else:
    _PEER_END: Final = 0
    _READABLE: Final = 0

    def _open_epoll() -> _Epoll | None:
        # macOS (kqueue) and Windows (select, sockets only) take the selector path.
        log.debug("no epoll on %s: disconnects are watched by a %s", sys.platform, selectors.DefaultSelector.__name__)
        return None


def _nothing() -> None:
    return None


class DisconnectWatcher:
    """One thread watching every socket with a call in flight; a closed socket cancels its call."""

    def __init__(self) -> None:
        self._watched: dict[int, tuple[socket.socket, Callable[[], None]]] = {}
        self._attached: set[int] = set()
        self._ended: set[int] = set()  # attached sockets whose peer has closed its end (or reset)
        self._epoll = _open_epoll()
        self._selector = None if self._epoll is not None else selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        if self._epoll is not None:
            self._epoll.register(self._wake_r.fileno(), _READABLE)
        else:
            assert self._selector is not None
            self._selector.register(self._wake_r.fileno(), selectors.EVENT_READ)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="fairwins-mcp-disconnects", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread and release its sockets (a server that is closed watches nothing)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._wake()
        self._thread.join(5)
        if self._epoll is not None:
            self._epoll.close()
        if self._selector is not None:
            self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass  # closed meanwhile: the server is stopping, and nothing is watched any more

    def attach(self, sock: socket.socket) -> None:
        """Watch a connection's peer for as long as it is open: its calls are then watched for free.

        The connection's own thread attaches it, and detaches it before closing the socket.
        A socket that was not attached is attached by `watch` for the one call (epoll only).
        """
        fd = sock.fileno()
        if self._epoll is None or fd < 0 or self._closed:
            return
        try:
            # Registered after its peer has closed, a socket is reported at once: never missed.
            self._epoll.register(fd, _PEER_END)
        except (ValueError, OSError):
            return
        self._attached.add(fd)

    def detach(self, sock: socket.socket) -> None:
        fd = sock.fileno()
        if fd in self._attached:
            self._attached.discard(fd)
            self._ended.discard(fd)
            self._unregister(fd)

    def watch(self, sock: socket.socket, on_close: Callable[[], None]) -> Callable[[], None]:
        """Call `on_close` if `sock`'s peer closes it before the returned function is called."""
        fd = sock.fileno()
        if fd < 0 or self._closed:
            return _nothing
        self._watched[fd] = (sock, on_close)
        if self._epoll is not None:
            for_this_call = fd not in self._attached
            if for_this_call:
                self.attach(sock)
            # The peer may have closed its end before this call began (the edge is reported once):
            # checked after the entry is in place, so either this or the watcher thread sees it.
            elif fd in self._ended and _peer_gone(sock):
                on_close()

            def unwatch_attached() -> None:
                # Only the connection thread unwatches, before it closes the socket: the descriptor
                # cannot have been reused yet, so this entry and this registration are its own.
                self._watched.pop(fd, None)
                if for_this_call:
                    self.detach(sock)

            return unwatch_attached
        assert self._selector is not None
        try:
            with self._lock:
                self._selector.register(fd, selectors.EVENT_READ)
            self._wake()
        except (KeyError, ValueError, OSError):
            self._watched.pop(fd, None)
            return _nothing

        def unwatch() -> None:
            self._watched.pop(fd, None)
            self._unregister(fd)

        return unwatch

    def _unregister(self, fd: int) -> None:
        try:
            if self._epoll is not None:
                self._epoll.unregister(fd)
            else:
                assert self._selector is not None
                with self._lock:
                    self._selector.unregister(fd)
        except (KeyError, ValueError, OSError):
            pass  # unregistered already

    def _poll(self) -> list[int]:
        try:
            if self._epoll is not None:
                return [fd for fd, _ in self._epoll.poll()]
            assert self._selector is not None
            return [key.fd for key, _ in self._selector.select()]
        except (OSError, ValueError):
            return []  # closed under us: the loop sees _closed

    def _run(self) -> None:
        wake = self._wake_r.fileno()
        while not self._closed:
            for fd in self._poll():
                if fd == wake:
                    try:
                        self._wake_r.recv(4096)
                    except OSError:
                        pass
                    continue
                if self._epoll is not None:
                    self._ended.add(fd)  # before the entry is read: see watch()
                else:
                    self._unregister(fd)  # level-triggered: a socket with data would report again at once
                entry = self._watched.get(fd)
                if entry is not None and _peer_gone(entry[0]):
                    entry[1]()  # EOF: "the client closing the SSE response stream" is cancellation
                # else: unwatched meanwhile, or the client pipelined its next request (read after this answer)


def _peer_gone(sock: socket.socket) -> bool:
    """True when nothing more can come from the peer: it closed with no request pending, or reset.

    A client that sent its next request and then closed its sending end is still waiting for the
    answers: its bytes are read after this answer.
    """
    try:
        return not sock.recv(1, socket.MSG_PEEK | _DONTWAIT) if _peek_returns_at_once(sock) else False
    except BlockingIOError:
        return False
    except OSError:
        return True


def _peek_after_select(sock: socket.socket) -> bool:
    """Whether a peek returns at once (bytes, an end or an error), asked of a zero-timeout select().

    Where there is no MSG_DONTWAIT (Windows), a peek is made only then. The connection's thread
    reads this socket too and could take those bytes in between; the peek then waits at most the
    socket's own timeout, and a pipelined request is not a departure.
    """
    readable, _, failed = select.select([sock], [], [sock], 0)
    return bool(readable or failed)


def _peek_never_waits(sock: socket.socket) -> bool:
    return True  # MSG_DONTWAIT: the peek itself never waits


if sys.platform == "win32":
    _DONTWAIT: Final = 0
    _peek_returns_at_once = _peek_after_select
else:
    _DONTWAIT: Final = socket.MSG_DONTWAIT
    _peek_returns_at_once = _peek_never_waits
