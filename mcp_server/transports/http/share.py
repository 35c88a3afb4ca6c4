"""The core's share for large answers: while small calls are being answered, large ones take at most SHARE of it.

One process answers on one core at a time. Reading, checking and encoding a 4 MB answer takes
some 50 ms of CPU in the executor (driver.off_loop); two clients asking for such answers one after
another would take most of the core, and the small calls beside them would get what is left
(bench.fairness: a third of their throughput alone, their p99 6× as long). So the CPU the
executor spends is counted against a budget that grows at SHARE of the wall clock (up to BURST
saved), and while small calls have been answered within the last RECENT seconds, a large answer
waits for the budget before its work starts, and its thread sleeps between two slices of the work
while the budget is spent (driver.Pacer: once started, a thread holding the interpreter lock would
take half the core). With no small call about, nothing waits: a large answer alone has the
core. A large answer waiting to start holds its gateway answer (bounded by the connections) and
nothing else; that wait is the loop's timer, cancelled with its call.

Pure accounting: the caller passes the clock and the CPU spent, so it is tested without waiting.
"""

from __future__ import annotations

import threading
from typing import Final

SHARE: Final = 0.1  # of the wall clock, the CPU large answers may take while small calls are served
# Seconds of CPU a large answer may take at once, saved while the share was unused: a few of the
# pacer's slices (0.1 s let a whole 4 MB answer run unpaced after a quiet moment).
BURST: Final = 0.005
RECENT: Final = 0.25  # seconds since a small call was answered, within which the share applies


class Share:
    """The executor's CPU budget: `wait(now)` before a large answer's work, `spent(cpu, now)` after it."""

    def __init__(self, share: float = SHARE, burst: float = BURST, recent: float = RECENT) -> None:
        self.share, self.burst, self.recent = share, burst, recent
        self.budget = burst  # seconds of CPU that may be spent now
        self.updated = 0.0
        self.last_small = -recent - 1.0  # when a small call was last answered
        self._lock = threading.Lock()  # the loop and the paced threads (driver.Pacer) both count

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.budget = min(self.burst, self.budget + (now - self.updated) * self.share)
            self.updated = now

    def small_answered(self, now: float) -> None:
        self.last_small = now

    def wait(self, now: float) -> float:
        """Seconds a large answer's work waits before it starts, or goes on (0: at once)."""
        with self._lock:
            self._refill(now)
            if self.budget >= 0 or now - self.last_small > self.recent:
                return 0.0
            return -self.budget / self.share

    def spent(self, cpu: float, now: float) -> None:
        """`cpu` seconds spent on a large answer. While no small call is about, the debt is at most
        this answer's: what large answers took of an idle core is owed to no one."""
        with self._lock:
            self._refill(now)
            self.budget -= cpu
            if now - self.last_small > self.recent:
                self.budget = max(self.budget, -cpu)
