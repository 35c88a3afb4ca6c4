"""A request's cancellation: by `notifications/cancelled`, or on leaving."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Cancellation:
    """A one-way switch, plus callbacks that stop blocking work when thrown.

    Made for every request, and held by every call a crowd has waiting: so it holds one lock and
    nothing else until it is used. The callbacks' table comes with the first callback, and the
    Event a blocking wait sleeps on with the first such wait (only work paced off the event loop,
    transports/http/driver.Pacer, sleeps on one; the loop's waits are callbacks).
    """

    __slots__ = ("_callbacks", "_cancelled", "_event", "_lock", "_next")

    def __init__(self) -> None:
        self._cancelled = False
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callable[[], None]] | None = None
        self._next = 0
        self._event: threading.Event | None = None

    @property
    def is_set(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            callbacks = list(self._callbacks.values()) if self._callbacks else []
            self._callbacks = None
            event = self._event
        if event is not None:
            event.set()
        for callback in callbacks:
            callback()

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds; True if cancelled meanwhile."""
        with self._lock:
            if self._cancelled:
                return True
            if self._event is None:
                # Made under the lock that cancel() takes: a cancel either comes first (and is
                # seen above) or finds this Event and sets it.
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` on cancel (at once if cancelled); returns its unregister."""
        with self._lock:
            if not self._cancelled:
                key = self._next
                self._next += 1
                if self._callbacks is None:
                    self._callbacks = {}
                self._callbacks[key] = callback
                return lambda: self._forget(key)
        callback()
        return lambda: None

    def _forget(self, key: int) -> None:
        with self._lock:
            if self._callbacks is not None:
                self._callbacks.pop(key, None)
