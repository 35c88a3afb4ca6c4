"""One timer thread for every deadline in the process.

No call needs a thread of its own.

Every batch's deadline (and the metrics' publishing) rests on this one thread: an action that
raises costs that timer only (it is logged with its traceback, and the others still fire), and if
the thread itself cannot go on, the process exits at once rather than live on with no deadline
holding: whatever supervises it (Desktop, the worker supervisor, Kubernetes) starts another.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Final

from mcp_server.ops import logs, signals

log = logging.getLogger("fairwins_mcp.watchdog")

COMPACT_AT = 1024  # heap entries before cancelled timers are swept out
EXIT_CODE: Final = 70  # EX_SOFTWARE: the process left because a thread it cannot live without failed


def _nothing() -> None:
    return None


class Timer:
    __slots__ = ("action", "cancelled")

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        # A cancelled timer may wait in the heap until its time; it must not keep what its action
        # refers to (a connection, a handler) alive until then.
        self.action = _nothing


class Watchdog:
    """Runs an action at a monotonic time unless the timer was cancelled first."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock  # the times given to schedule() are on this clock
        self._heap: list[tuple[float, int, Timer]] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._compact_at = COMPACT_AT

    def schedule(self, when: float, action: Callable[[], None]) -> Timer:
        timer = Timer(action)
        with self._cond:
            heap = self._heap
            if len(heap) >= self._compact_at:
                # Cancelled timers wait in the heap until their time: at hundreds of calls a
                # second, each held for its whole timeout, they would pile up by the thousand.
                heap[:] = [entry for entry in heap if not entry[2].cancelled]
                heapq.heapify(heap)
                self._compact_at = max(COMPACT_AT, 2 * len(heap))
            # The timer thread sleeps until the earliest time; only a new earliest one changes
            # when it must wake (waking it for every call costs a thread switch per call).
            earliest = not heap or when < heap[0][0]
            heapq.heappush(heap, (when, next(self._seq), timer))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fairwins-mcp-watchdog", daemon=True)
                signals.start(self._thread)
            elif earliest:
                self._cond.notify()
        return timer

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException:
            log.critical(
                "the watchdog's timer thread failed, and without it no batch deadline holds: "
                "the process exits (code %d) so that it is replaced",
                EXIT_CODE,
                exc_info=True,
            )
            logs.flush()
            os._exit(EXIT_CODE)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)  # cancelled timers are dropped without waiting for them
                if not self._heap:
                    self._cond.wait()
                    continue
                when, _, timer = self._heap[0]
                delay = when - self._clock()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                heapq.heappop(self._heap)
            if not timer.cancelled:
                try:
                    timer.action()
                except Exception:  # costs this timer only: the one timer thread serves every other deadline
                    log.exception("a deadline's action failed; the other deadlines still hold")


WATCHDOG = Watchdog()
