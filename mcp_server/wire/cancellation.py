"""A request's cancellation: thrown by `notifications/cancelled` or a client leaving, heard down to the socket."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Cancellation:
    """A one-way switch, plus callbacks that stop blocking work (e.g. close a socket) when thrown."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0

    @property
    def is_set(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        for callback in callbacks:
            callback()

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds; True if cancelled meanwhile."""
        return self._event.wait(timeout)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` on cancel (at once if already cancelled); returns the unregister function."""
        with self._lock:
            if not self._event.is_set():
                key = self._next
                self._next += 1
                self._callbacks[key] = callback

                def unregister() -> None:
                    with self._lock:
                        self._callbacks.pop(key, None)

                return unregister
        callback()
        return lambda: None
