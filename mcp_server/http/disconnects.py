"""One thread that notices when a client with a call in flight goes away, and cancels that call."""

from __future__ import annotations

import select
import selectors
import socket
import threading
from collections.abc import Callable
from typing import Final

_EPOLL: Final = hasattr(select, "epoll")
# epoll's registrations are thread-safe and seen by an epoll_wait already waiting (epoll(7)): a
# connection thread registers its socket with one system call, no lock and no wake-up. One-shot:
# a socket reports once (its client left, or sent its next request early), so a pipelined request
# cannot keep the watcher spinning while the call is in flight. Elsewhere a selector (select or
# poll) sees a new socket only on its next call, so it is woken for each, under a lock.
_ONE_SHOT: Final = (select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLONESHOT) if _EPOLL else 0


def _nothing() -> None:
    return None


class DisconnectWatcher:
    """One thread watching every socket with a call in flight; a closed socket cancels its call."""

    def __init__(self) -> None:
        self._watched: dict[int, tuple[socket.socket, Callable[[], None]]] = {}
        self._epoll = select.epoll() if _EPOLL else None
        self._selector = None if _EPOLL else selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        if self._epoll is not None:
            self._epoll.register(self._wake_r.fileno(), select.EPOLLIN)
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

    def watch(self, sock: socket.socket, on_close: Callable[[], None]) -> Callable[[], None]:
        """Call `on_close` if `sock`'s peer closes it before the returned function is called."""
        fd = sock.fileno()
        if fd < 0 or self._closed:
            return _nothing
        self._watched[fd] = (sock, on_close)
        try:
            if self._epoll is not None:
                self._epoll.register(fd, _ONE_SHOT)
            else:
                assert self._selector is not None
                with self._lock:
                    self._selector.register(fd, selectors.EVENT_READ)
                self._wake()
        except (KeyError, ValueError, OSError):
            self._watched.pop(fd, None)
            return _nothing

        def unwatch() -> None:
            # Only the connection thread unwatches, before it closes the socket: the descriptor
            # cannot have been reused yet, so this entry and this registration are its own.
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
                entry = self._watched.get(fd)
                if entry is None:
                    continue  # unwatched meanwhile
                sock, on_close = entry
                try:
                    peek = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                except BlockingIOError:
                    if self._epoll is not None and self._watched.get(fd) is entry:
                        try:
                            self._epoll.modify(fd, _ONE_SHOT)  # nothing to report after all: armed again
                        except OSError:
                            pass
                    continue
                except OSError:
                    peek = b""
                if self._selector is not None:
                    self._unregister(fd)  # level-triggered: a socket with data would report again at once
                if not peek:  # EOF: "the client closing the SSE response stream" is cancellation
                    on_close()
                # else: the client pipelined its next request; it is read after this answer
