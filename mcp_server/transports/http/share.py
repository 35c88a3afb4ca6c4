"""Large answers' share of the core (SHARE) while small calls are answered.

One process answers on one core at a time. Reading, checking and encoding a 4 MB answer takes some
50 ms of CPU in the executor (driver.off_loop); two clients asking for such answers one after
another would take most of the core, and the small calls beside them would get what is left. So
the CPU the executor spends is counted against a budget that grows at SHARE of the wall clock (up
to BURST saved), and while small calls contend for the core, a large answer waits for the budget
before its work starts, and its thread sleeps between two slices of the work while the budget is
spent (driver.Pacer: once started, a thread holding the interpreter lock would take half the core).

The share is a ceiling under contention, never a cap on an idle core. Small calls contend for
RECENT after one was answered, and while the loop is behind: while large answers are worked on,
the loop says it ran every few milliseconds (driver.Beat), and a loop that has not said so for
LATE waits for the interpreter lock or for the CPU (the process descheduled, a container
throttled), and so may its small calls. A mark the loop set when it had work would reach a thread
holding the lock only once the loop had the lock back; the age of its last beat reaches the thread
at once. A large answer waiting to start holds its gateway answer (bounded by the connections) and
nothing else.

Pure accounting: the caller passes the clock and the CPU spent, so it is tested without waiting.
"""

from __future__ import annotations

import threading
from typing import Final

SHARE: Final = 0.1  # of the wall clock, the CPU large answers may take while small calls are served
# Seconds of CPU a large answer may take at once, saved while the share was unused: a few of the
# pacer's slices (0.1 s would let a whole 4 MB answer run unpaced after a quiet moment).
BURST: Final = 0.005
# Seconds after a small call was answered during which small calls contend: long enough to span
# the moments between two calls of a steady load, even where the gateway or this process waits a
# few milliseconds for a core; short enough that a trickle of them (a ping every 0.2 s) holds large
# answers back a tenth of the time at most.
RECENT: Final = 0.02
# Seconds since the loop last said it ran after which it is behind: beyond its beat (driver.BEAT)
# and a busy turn's length, so a loop that is merely busy is not taken for one that is stopped.
LATE: Final = 0.006
AGAIN: Final = 0.001  # seconds a wait lasts while the loop is behind: it may catch up at any moment
ROUNDING: Final = 1e-9  # seconds of CPU: a debt this small is the clocks' arithmetic, not work owed


class Share:
    """The executor's CPU budget: `wait(now)` before large work, `spent` after."""

    def __init__(self, share: float = SHARE, burst: float = BURST, recent: float = RECENT, late: float = LATE) -> None:
        self.share, self.burst, self.recent, self.late = share, burst, recent, late
        self.budget = burst  # seconds of CPU that may be spent now
        self.updated = 0.0
        self.last_small = -recent - 1.0  # when a small call was last answered
        self.loop_ran_at: float | None = None  # when the loop last said it ran (None: it never has)
        self._lock = threading.Lock()  # the loop and the paced threads (driver.Pacer) both count

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.budget = min(self.burst, self.budget + (now - self.updated) * self.share)
            self.updated = now

    def _contention(self, now: float) -> float:
        """Seconds from `now` small calls may still contend for the core (0: none)."""
        window = self.last_small + self.recent - now
        if window > 0:
            return window
        if self.loop_ran_at is not None and now - self.loop_ran_at > self.late:
            return AGAIN
        return 0.0

    def small_answered(self, now: float) -> None:
        self.last_small = now

    def loop_ran(self, now: float) -> None:
        """The loop ran at `now` (its beat, while large answers are worked on)."""
        self.loop_ran_at = now

    def wait(self, now: float) -> float:
        """Seconds a large answer's work waits before asking again (0: go on now).

        Only while small calls contend and the budget is spent; and no longer than until they may
        have stopped, so a large answer alone never waits out a debt no small call is there to
        claim.
        """
        with self._lock:
            self._refill(now)
            if self.budget > -ROUNDING:
                return 0.0
            contention = self._contention(now)
            return min(-self.budget / self.share, contention) if contention else 0.0

    def spent(self, cpu: float, now: float) -> None:
        """Count `cpu` seconds spent on a large answer.

        While no small call contends, the debt is at most this answer's: what large answers took of
        an idle core is owed to no one.
        """
        with self._lock:
            self._refill(now)
            self.budget -= cpu
            if not self._contention(now):
                self.budget = max(self.budget, -cpu)
