"""One thread that notices when a client with a call in flight goes away, and cancels that call."""

from __future__ import annotations

import selectors
import socket
import threading
from collections.abc import Callable
from typing import Final

# epoll_wait sees a socket registered while it waits (epoll(7)), so the watcher need not be woken
# for each call; select() and poll() do not.
_LIVE_REGISTRATION: Final = selectors.DefaultSelector is getattr(selectors, "EpollSelector", None)


class DisconnectWatcher:
    """One thread watching every socket with a call in flight; a closed socket cancels its call."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="fairwins-mcp-disconnects", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread and release its sockets (a server that is closed watches nothing)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.join(5)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def watch(self, sock: socket.socket, on_close: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            try:
                self._selector.register(sock, selectors.EVENT_READ, on_close)
            except (KeyError, ValueError, OSError):
                return lambda: None
        if not _LIVE_REGISTRATION:
            try:
                self._wake_w.send(b"x")  # select() and poll() see a new socket only on their next call
            except OSError:
                pass  # closed meanwhile: the server is stopping, and nothing is watched any more

        def unwatch() -> None:
            with self._lock:
                try:
                    self._selector.unregister(sock)
                except (KeyError, ValueError, OSError):
                    pass

        return unwatch

    def _run(self) -> None:
        while not self._closed:
            for key, _ in self._selector.select():
                if key.data is None:
                    try:
                        self._wake_r.recv(4096)
                    except BlockingIOError:
                        pass
                    continue
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    peek = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                except OSError:
                    peek = b""
                with self._lock:
                    try:
                        self._selector.unregister(sock)
                    except (KeyError, ValueError, OSError):
                        pass
                if not peek:  # EOF: "the client closing the SSE response stream" is cancellation
                    key.data()
                # else: the client pipelined its next request; it is read after this answer
